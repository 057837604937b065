//! `ioshare agent check|run|status|revert`: parses, calls ioshare-agent, prints.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use ioshare_agent::report::logging::LogFormat;
use ioshare_agent::report::status::Liveness;
use ioshare_agent::{Agent, BackendChoice, Check, Config, ShareCheck, Status};

/// The agent's subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// What this host offers (cgroup layout, iocost, blk-throttle, BFQ), the backend the agent would
    /// use and why, and whether buffered writes can be controlled; with --config, the share each
    /// matched cgroup gets on each device and what may keep its weight or limits from acting.
    ///
    /// Rules: the first rule whose pattern matches a cgroup wins, and for IO a match nested below
    /// another match is skipped (its IO counts in the ancestor's). With --config, every rule that
    /// can lose cgroups this way is listed (flag `shadowed_rule`; `--json`: `shares.rules`), whatever
    /// cgroups exist now: all of them when an earlier pattern matches every path its pattern can
    /// (`tenants/*` then `tenants/b`: the second never applies), some when a path matches both
    /// (`t/a*` then `t/*b`: `t/ab` goes to the first). `*` and `?` match within one path component;
    /// `**` is the same as `*`. The exit status stays 0.
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
        #[arg(long, default_value = ioshare_agent::desired::profile::DEFAULT_CACHE_DIR)]
        cache_dir: PathBuf,
    },
    /// Apply a configuration and keep it applied (foreground; SIGTERM/SIGINT revert every change;
    /// SIGHUP, or `ioshare agent reload`, reads the configuration again and applies the difference).
    ///
    /// Rules: the first rule whose pattern matches a cgroup wins, and for IO a match nested below
    /// another match is skipped (its IO counts in the ancestor's). A rule that can lose cgroups this
    /// way — all of them (`tenants/*` then `tenants/b`) or some (`t/a*` then `t/*b`) — is named in one
    /// warning line each at start and on reload, and listed by `ioshare agent check --config`.
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
        #[arg(long, default_value = ioshare_agent::desired::profile::DEFAULT_CACHE_DIR)]
        cache_dir: PathBuf,
        /// Memory guard: log which process priority OOM would kill, kill and reclaim nothing (the
        /// kernel's OOM killer stays in charge).
        #[arg(long)]
        dry_run: bool,
        /// Log filter: error, warn, info (each change applied to the host), debug (each planning
        /// period), trace (each limit written), or module=level pairs; default: $RUST_LOG, else info.
        #[arg(long, value_name = "FILTER")]
        log_level: Option<String>,
        /// text: one line per event; json: one JSON object per line (for log collectors).
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormatArg,
        /// Userspace backend: append one JSON line per device per period to FILE — each cgroup's
        /// counters, the planner's decisions, the limits written or kept, its threads' CPU (read it
        /// with `ioshare agent trace FILE`).
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
    },
    /// Summarise a trace written by `agent run --trace`: per cgroup its achieved share of the work
    /// against its target, periods held by its limit, short, donating, CPU-bound, limits written or
    /// kept; and the same per second.
    Trace {
        /// The trace file.
        file: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
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
    /// Make the running agent read its configuration again (SIGHUP) and print what it did: a bad file
    /// changes nothing (its error, FILE:LINE, is printed, exit 1); a good one is applied as a
    /// difference — settings no longer wanted are restored to what they were before the agent.
    Reload {
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

/// `--log-format`.
#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormatArg {
    /// One line per event: time, level, message, key=value fields.
    Text,
    /// One JSON object per line.
    Json,
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
        Command::Trace { file, json } => {
            let summary = ioshare_agent::report::trace::Summary::read(&file)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                print!("{summary}");
            }
        }
        Command::Run { config, backend, state_dir, cache_dir, dry_run, log_level, log_format, trace } => {
            let format = match log_format {
                LogFormatArg::Text => LogFormat::Text,
                LogFormatArg::Json => LogFormat::Json,
            };
            ioshare_agent::report::logging::init(log_level.as_deref(), format)?;
            // SIGHUP from here on asks for a reload (its default would end the process while it
            // measures a device or starts).
            let reload = ioshare_agent::reload_on_sighup();
            // model = "profile": the measurement's progress, a log line per run.
            let progress = |l: &str| tracing::info!("{l}");
            let config_file = config;
            let loaded =
                Config::load_profiling(&config_file, &cache_dir, ioshare_engine::interrupt::stop_flag(), &progress);
            let config = Config { memory_dry_run: dry_run, ..loaded? };
            let stop = ioshare_agent::stop_on_signals();
            // The trace file first: one that cannot be created stops the start before anything is written.
            let trace =
                trace.map(|f| ioshare_agent::report::trace::TraceWriter::create(&f).map(|w| (f, w))).transpose()?;
            let (mut agent, recovered) = Agent::start(config, backend.into(), &state_dir)?;
            if let Some((file, writer)) = trace {
                agent.trace_to(writer);
                tracing::info!(file = %file.display(), "writing a trace of every period");
            }
            if let Some(r) = recovered {
                tracing::info!(restored = r.restored, "restored the settings a previous agent left");
                for line in r.unreadable {
                    tracing::warn!("could not read the previous agent's state file at {line}");
                }
            }
            tracing::info!(
                backend = agent.backend_name(),
                root = %agent.hierarchy().root.display(),
                state_dir = %state_dir.display(),
                "started (Ctrl-C or SIGTERM reverts)"
            );
            if let Some(addr) = agent.metrics_addr() {
                tracing::info!(address = %addr, "serving Prometheus metrics at http://{addr}/metrics");
            }
            let load = || Ok(Config { memory_dry_run: dry_run, ..Config::load_cached(&config_file, &cache_dir)? });
            let reverted = agent.run_reloading(stop, reload, &load).context("agent stopped")?;
            tracing::info!(restored = reverted.restored, "stopped");
            for (c, now) in reverted.changed_by_others {
                tracing::warn!(
                    file = %c.path.display(),
                    key = %c.key,
                    now = %now,
                    "left alone: changed by someone else since the agent wrote it"
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
        Command::Reload { state_dir } => {
            let outcome =
                ioshare_agent::daemon::reload::request(&state_dir, ioshare_agent::daemon::reload::ANSWER_WITHIN)?;
            if !outcome.applied {
                anyhow::bail!("reload refused, the running configuration is kept: {}", outcome.message);
            }
            println!("agent pid {} reloaded: {}", outcome.pid, outcome.message);
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
