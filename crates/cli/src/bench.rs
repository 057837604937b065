//! `ioshare bench`: parses the options, runs ioshare-bench's scenario suite, prints tables (or JSON) and
//! writes SVG charts.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};

use crate::Found;
use ioshare_bench::calibrate::Calibration;
use ioshare_bench::{self as bench, kernel, svg, table, BenchOptions, ScenarioReport, SuiteWatcher, TargetInfo};
use ioshare_core::{ModelConfig, QosConfig};
use ioshare_engine::interrupt;

/// Arguments of `ioshare bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Run only this scenario (repeatable): proportional, work-conserving, mixed-cost, limits, overhead,
    /// donation, agent (the host agent on separate processes, root; in the default suite when root);
    /// fidelity (ioshare IOCost vs the kernel's, where cgroup v2 has io: see scripts/lab); qos-peers
    /// (the token and leaky buckets beside librbd's QoS and QEMU's throttle, root: see scripts/ceph); or
    /// nbd (libioshare inside nbdkit, NBD clients by weight beside nbdkit's rate filter, root).
    #[arg(long, value_name = "NAME")]
    scenario: Vec<String>,
    /// Weights of the two main tenants, high,low (proportional and work-conserving).
    #[arg(long, value_name = "A,B", default_value = "200,100", value_parser = parse_weights)]
    weights: (u32, u32),
    /// Queue depth of each saturating reader in the proportional and donation scenarios.
    #[arg(long, value_name = "N", default_value_t = 64)]
    iodepth: u32,
    /// Length of each run in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    duration: f64,
    /// Sample the controllers' state (vrate, busy level, per group shares, budget, queued IOs) and
    /// the tenants' rates every N ms, in the JSON's series [default: every second; a fifth of runs
    /// under 5 s]. Runs judged on windows of their own keep theirs: the overhead scenario's, the
    /// agent and qos-peers scenarios, and the observer's toggled runs.
    #[arg(long, value_name = "N")]
    sample_ms: Option<u64>,
    /// File or block device to run on. It is only read unless --destructive is given: writing
    /// scenarios (mixed-cost) are then skipped, or refused when nothing else was asked for.
    /// Default: a temporary 2 GiB file in the current directory, written freely and removed afterwards.
    #[arg(long, value_name = "PATH|/dev/X")]
    target: Option<PathBuf>,
    /// Let writing scenarios overwrite the data of --target (a block device must not be mounted:
    /// it is opened exclusively, which the kernel refuses while it is mounted).
    #[arg(long, requires = "target")]
    destructive: bool,
    /// Give IOCost this cost model (an `io.cost.model` line, as `ioshare profile` or `ioshare tune`
    /// print it; a leading MAJ:MIN is ignored) instead of the one the calibration measures. The
    /// calibration still measures the device's IOPS, which the verdicts refer to.
    #[arg(long, value_name = "LINE", value_parser = parse_model)]
    model: Option<ModelConfig>,
    /// Give IOCost this QoS (an `io.cost.qos` line, such as a solution of `ioshare tune`) instead of the
    /// calibration's p50 line. The work-conserving scenario's p99 rows keep their own targets.
    #[arg(long, value_name = "LINE", value_parser = parse_qos)]
    qos: Option<QosConfig>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write per-tenant IOPS and latency charts (one SVG per scenario; fidelity.svg with both IOCosts' ratio per
    /// second) into this directory.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
    /// Do not run the kernel's controllers (BFQ, blk-throttle) and the ioshare agent as peers even as root.
    #[arg(long)]
    no_kernel: bool,
    /// Watch every run with the eBPF observer (root and BTF): per run, the seek distances where IO
    /// enters the scheduler and where it reaches the driver, and latencies per stage; in the overhead
    /// scenario, the uncontrolled run once more with the observer, to measure its cost.
    #[arg(long)]
    observe: bool,
    /// Internal: run one kernel-peer tenant as told on stdin.
    #[arg(long, hide = true)]
    worker: bool,
}

fn parse_model(s: &str) -> Result<ModelConfig, String> {
    s.parse()
        .map_err(|e: ioshare_core::Error| format!("{e}; give a line like 'ctrl=user model=linear rbps=… rrandiops=…'"))
}

fn parse_qos(s: &str) -> Result<QosConfig, String> {
    s.parse().map_err(|e: ioshare_core::Error| format!("{e}; give a line like 'enable=1 ctrl=user rpct=95 rlat=5000'"))
}

fn parse_weights(s: &str) -> Result<(u32, u32), String> {
    let parse = |p: &str| p.trim().parse::<u32>().map_err(|_| format!("'{s}': weights are two integers like 200,100"));
    match s.split_once(',') {
        Some((a, b)) => Ok((parse(a)?, parse(b)?)),
        None => Err(format!("'{s}': give two weights separated by a comma, like 200,100")),
    }
}

/// Prints progress on stderr (one rewritten line on a terminal) and each scenario as it finishes.
struct Printer {
    json: bool,
    tty: bool,
}

impl Printer {
    fn clear(&self) {
        crate::clear_status(self.tty);
    }
}

impl SuiteWatcher for Printer {
    fn progress(&mut self, line: &str) {
        crate::status_line(self.tty, line);
    }

    fn calibrated(&mut self, target: &TargetInfo, cal: &Calibration) {
        if !self.json {
            self.clear();
            print!("{}", table::header(target, cal));
        }
    }

    fn scenario_done(&mut self, report: &ScenarioReport) {
        if !self.json {
            self.clear();
            print!("{}", table::scenario(report));
            let _ = std::io::stdout().flush();
        }
    }
}

/// The command that starts one kernel-peer worker (this binary's hidden `bench --worker`).
pub fn worker_command() -> anyhow::Result<Vec<String>> {
    let exe = std::env::current_exe().context("cannot find the ioshare executable to start kernel-peer workers")?;
    Ok(vec![exe.display().to_string(), "bench".into(), "--worker".into()])
}

/// Runs `ioshare bench`.
pub fn run(args: Args) -> anyhow::Result<Found> {
    if args.worker {
        kernel::worker_main()?;
        return Ok(Found::AsExpected);
    }
    let opts = BenchOptions {
        scenarios: args.scenario,
        weights: args.weights,
        iodepth: args.iodepth,
        duration: (args.duration.max(0.0) * 1e9) as u64,
        target: args.target,
        destructive: args.destructive,
        temp_dir: PathBuf::from("."),
        kernel_peers: !args.no_kernel,
        worker: worker_command()?,
        observe: args.observe,
        model: args.model.map(|m| m.params),
        qos: args.qos.map(|q| q.params),
        sample_every: args.sample_ms.map(|m| m.saturating_mul(1_000_000)),
    };
    if let Err(msg) = bench::validate(&opts) {
        bail!(msg);
    }
    if let Some(dir) = &args.svg {
        crate::chart_dir(dir)?;
    }
    let stop = interrupt::stop_flag();
    let mut printer = Printer { json: args.json, tty: std::io::stderr().is_terminal() };
    let suite = bench::run_suite(&opts, stop, &mut printer)?;
    printer.clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&suite)?);
    } else {
        print!("{}", table::summary(&suite));
    }
    if let Some(dir) = &args.svg {
        let pages = suite.scenarios.iter().map(|sc| (sc.name.clone(), svg::scenario(sc)));
        for (name, page) in pages.chain(svg::fidelity(&suite.fidelity).map(|p| ("fidelity".to_string(), p))) {
            let path = dir.join(format!("{name}.svg"));
            std::fs::write(&path, page).with_context(|| format!("cannot write '{}'", path.display()))?;
            if !args.json {
                println!("chart: {}", path.display());
            }
        }
    }
    if suite.interrupted {
        // Everything was cleaned up when the suite returned; 130 is the shell's code for Ctrl-C.
        std::process::exit(130);
    }
    Ok(if suite.scenarios.iter().all(|sc| sc.verdict.pass) { Found::AsExpected } else { Found::VerdictFailed })
}
