//! The `ioshare` command: parses, calls the crates, prints. No logic lives here.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent;
mod bench;
mod model;
mod observe;
mod profile;
mod replay;
mod sim;
mod tune;

/// ioshare: IO isolation for containers and multi-tenant storage.
#[derive(Parser)]
#[command(name = "ioshare", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Put real cgroups under IOCost: check the host, run the agent, show its status, revert.
    #[command(subcommand)]
    Agent(agent::Command),
    /// Run the benchmark suite on real IO: ioshare's controllers and the kernel's side by side.
    Bench(bench::Args),
    /// Derive a cost model's coefficients from an io.cost.model line.
    Model(model::Args),
    /// Watch the block layer with eBPF: per-cgroup IO, seek and latency histograms per stage (root).
    Observe(observe::Args),
    /// Measure a device's cost model and suggest latency targets (io.cost.model / io.cost.qos lines).
    Profile(profile::Args),
    /// Run a scenario in virtual time (built-in by name, or a .toml file).
    Sim(sim::Args),
    /// Find a device's IOCost QoS: sweep pinned vrates, judge isolation, fit, print the solutions.
    Tune(tune::Args),
}

/// Exit code when everything ran but a scenario's verdict failed (bench FAIL, sim DIFFERS).
const VERDICT_FAILED: u8 = 3;

/// What a command found: everything as expected, or a verdict that failed.
pub enum Found {
    /// Every verdict passed (or there were none).
    AsExpected,
    /// At least one verdict failed.
    VerdictFailed,
}

/// Creates the directory charts go into (with its parents), refusing a path that is not a directory.
pub fn chart_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("--svg '{}' is not a directory: give a directory for the charts", dir.display());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create the chart directory '{}': {e}", dir.display()))
}

/// Shows a transient status line on stderr: rewritten in place on a terminal, one line each otherwise.
pub fn status_line(tty: bool, line: &str) {
    if tty {
        eprint!("\r\x1b[K{line}");
        let _ = std::io::Write::flush(&mut std::io::stderr());
    } else {
        eprintln!("{line}");
    }
}

/// Clears the status line on a terminal.
pub fn clear_status(tty: bool) {
    if tty {
        eprint!("\r\x1b[K");
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Agent(cmd) => agent::run(cmd).map(|()| Found::AsExpected),
        Command::Bench(args) => bench::run(args),
        Command::Model(args) => model::run(args).map(|()| Found::AsExpected),
        Command::Observe(args) => observe::run(args),
        Command::Profile(args) => profile::run(args).map(|()| Found::AsExpected),
        Command::Sim(args) => sim::run(args),
        Command::Tune(args) => tune::run(args).map(|()| Found::AsExpected),
    };
    match result {
        Ok(Found::AsExpected) => ExitCode::SUCCESS,
        Ok(Found::VerdictFailed) => ExitCode::from(VERDICT_FAILED),
        Err(err) => {
            eprintln!("ioshare: {err:#}");
            ExitCode::FAILURE
        }
    }
}
