//! `ioshare agent check|run|status|revert`: parses, calls ioshare-agent, prints.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use ioshare_agent::status::Liveness;
use ioshare_agent::{Agent, BackendChoice, Cached, Check, Config, Status};
use ioshare_engine::profile::agent::AgentProfiler;

/// The agent's subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// What this host offers (cgroup layout, iocost, blk-throttle, BFQ), the backend the agent would
    /// use and why, and whether buffered writes can be controlled.
    Check {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Apply a configuration and keep it applied (foreground; SIGTERM/SIGINT revert every change).
    Run {
        /// The TOML configuration (devices, groups); validated whole before anything is written.
        #[arg(long)]
        config: PathBuf,
        /// kernel = cgroup v2 iocost; userspace = ioshare's planner driving blk-throttle limits.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// Where the agent records what it changed (for revert) and its status.
        #[arg(long, default_value_os_t = ioshare_agent::default_state_dir())]
        state_dir: PathBuf,
        /// Where models measured for `model = "profile"` are kept (one file per device, reused while
        /// the device is the same one).
        #[arg(long, default_value = ioshare_agent::profile::DEFAULT_CACHE_DIR)]
        cache_dir: PathBuf,
        /// Memory guard: log which process priority OOM would kill, kill and reclaim nothing (the
        /// kernel's OOM killer stays in charge).
        #[arg(long)]
        dry_run: bool,
    },
    /// Show the running agent's state: per device vrate, busy level, latency; per cgroup weight,
    /// shares, usage, limits in force, and whether it is donating or limited. Exits 1, saying so
    /// first, when the agent is not running (its pid exited) or its status is stale (not rewritten
    /// for 5 periods and 3 s: stopped or stuck); `--json` adds `liveness` and `age_s`.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// The running agent's --state-dir.
        #[arg(long, default_value_os_t = ioshare_agent::default_state_dir())]
        state_dir: PathBuf,
    },
    /// Restore every value a killed agent changed (from its state file).
    Revert {
        /// The killed agent's --state-dir.
        #[arg(long, default_value_os_t = ioshare_agent::default_state_dir())]
        state_dir: PathBuf,
    },
}

/// `--backend`.
#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// Kernel iocost where present, else userspace.
    Auto,
    /// Kernel iocost (cgroup v2 io.cost.*).
    Kernel,
    /// ioshare's planner writing blk-throttle limits.
    Userspace,
}

/// Runs an agent subcommand.
pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Check { json } => {
            let check = Check::probe();
            if json {
                println!("{}", serde_json::to_string_pretty(&check)?);
            } else {
                println!("{check}");
            }
        }
        Command::Run { config, backend, state_dir, cache_dir, dry_run } => {
            let tty = std::io::stderr().is_terminal();
            // model = "profile": the measurement's progress on one line on a terminal, else line by line.
            let progress = |l: &str| crate::status_line(tty, &format!("ioshare agent: {l}"));
            let profiler = AgentProfiler::new(ioshare_engine::interrupt::stop_flag(), progress);
            let loaded = Config::load_with(&config, &Cached::new(&cache_dir, &profiler));
            crate::clear_status(tty);
            let config = Config { memory_dry_run: dry_run, ..loaded? };
            let choice = match backend {
                BackendArg::Auto => BackendChoice::Auto,
                BackendArg::Kernel => BackendChoice::Kernel,
                BackendArg::Userspace => BackendChoice::Userspace,
            };
            let stop = ioshare_agent::stop_on_signals();
            let (agent, recovered) = Agent::start(config, choice, &state_dir)?;
            if let Some(r) = recovered {
                eprintln!("ioshare agent: restored {} setting(s) a previous agent left", r.restored);
            }
            eprintln!(
                "ioshare agent: {} backend in {}; state in {} (Ctrl-C or SIGTERM reverts)",
                agent.backend().name(),
                agent.hierarchy().root.display(),
                state_dir.display()
            );
            let reverted = agent.run(stop).context("agent stopped")?;
            eprintln!("ioshare agent: stopped; restored {} setting(s)", reverted.restored);
            for (c, now) in reverted.changed_by_others {
                eprintln!(
                    "ioshare agent: left {} ({}) alone: changed by someone else to '{now}'",
                    c.path.display(),
                    c.key
                );
            }
        }
        Command::Status { json, state_dir } => {
            let seen = Status::read(&state_dir)?.observe();
            if json {
                println!("{}", serde_json::to_string_pretty(&seen)?);
            } else {
                print!("{seen}");
            }
            match seen.liveness {
                Liveness::Running => {}
                Liveness::Exited => anyhow::bail!("the agent is not running (pid {} exited)", seen.status.pid),
                Liveness::Stale => {
                    anyhow::bail!("the agent's status is stale (pid {} stopped or stuck)", seen.status.pid)
                }
            }
        }
        Command::Revert { state_dir } => match ioshare_agent::revert(&state_dir)? {
            None => println!("nothing to revert in {}", state_dir.display()),
            Some(r) => {
                println!("restored {} setting(s); {} in cgroups that no longer exist", r.restored, r.vanished);
                for (c, now) in r.changed_by_others {
                    println!("left {} ({}) alone: changed by someone else to '{now}'", c.path.display(), c.key);
                }
            }
        },
    }
    Ok(())
}
