//! `ioshare agent check|run|status|revert`: parses, calls ioshare-agent, prints.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use ioshare_agent::{Agent, BackendChoice, Check, Config, ShareCheck, Status};

/// The agent's subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// What this host offers (cgroup layout, iocost, blk-throttle, BFQ), the backend the agent would
    /// use and why, and whether buffered writes can be controlled; with --config, the share each
    /// matched cgroup gets on each device and what may keep its weight or limits from acting.
    Check {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// A configuration to diagnose on this host (shares and flags per cgroup and device).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The backend to diagnose the configuration under.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// Where models measured for `model = "profile"` are cached (check only reads the cache).
        #[arg(long, default_value = ioshare_agent::profile::DEFAULT_CACHE_DIR)]
        cache_dir: PathBuf,
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
    /// shares, usage, limits in force, and whether it is donating or limited.
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

impl From<BackendArg> for BackendChoice {
    fn from(arg: BackendArg) -> Self {
        match arg {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Kernel => BackendChoice::Kernel,
            BackendArg::Userspace => BackendChoice::Userspace,
        }
    }
}

/// Runs an agent subcommand.
pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Check { json, config: None, .. } => {
            let check = Check::probe();
            if json {
                println!("{}", serde_json::to_string_pretty(&check)?);
            } else {
                println!("{check}");
            }
        }
        Command::Check { json, config: Some(file), backend, cache_dir } => {
            let config = Config::load_cached(&file, &cache_dir)?;
            let report = ShareCheck::probe(Check::probe(), &config, backend.into())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{report}");
            }
        }
        Command::Run { config, backend, state_dir, cache_dir, dry_run } => {
            let tty = std::io::stderr().is_terminal();
            // model = "profile": the measurement's progress on one line on a terminal, else line by line.
            let progress = |l: &str| crate::status_line(tty, &format!("ioshare agent: {l}"));
            let loaded = Config::load_profiling(&config, &cache_dir, ioshare_engine::interrupt::stop_flag(), &progress);
            crate::clear_status(tty);
            let config = Config { memory_dry_run: dry_run, ..loaded? };
            let stop = ioshare_agent::stop_on_signals();
            let (agent, recovered) = Agent::start(config, backend.into(), &state_dir)?;
            if let Some(r) = recovered {
                eprintln!("ioshare agent: restored {} setting(s) a previous agent left", r.restored);
                for line in r.unreadable {
                    eprintln!("ioshare agent: could not read the previous agent's state file at {line}");
                }
            }
            eprintln!(
                "ioshare agent: {} backend in {}; state in {} (Ctrl-C or SIGTERM reverts)",
                agent.backend().name(),
                agent.hierarchy().root.display(),
                state_dir.display()
            );
            if let Some(addr) = agent.metrics_addr() {
                eprintln!("ioshare agent: serving Prometheus metrics at http://{addr}/metrics");
            }
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
            let status = Status::read(&state_dir)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{status}");
            }
        }
        Command::Revert { state_dir } => match ioshare_agent::revert(&state_dir)? {
            None => println!("nothing to revert in {}", state_dir.display()),
            Some(r) => {
                println!("restored {} setting(s); {} in cgroups that no longer exist", r.restored, r.vanished);
                for (c, now) in r.changed_by_others {
                    println!("left {} ({}) alone: changed by someone else to '{now}'", c.path.display(), c.key);
                }
                for line in &r.unreadable {
                    println!("could not read the state file at {line}");
                }
                if !r.unreadable.is_empty() {
                    println!("a setting recorded only on a damaged line is not restored: check its file by hand");
                }
            }
        },
    }
    Ok(())
}
