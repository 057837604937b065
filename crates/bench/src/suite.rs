//! The suite: open the target (or create and fill a temporary file in the working directory), measure
//! the device quickly ([`crate::calibrate`]: the cost model and latency targets IOCost needs, and the
//! maximum IOPS the verdicts refer to), then run each scenario asked for ([`crate::scenarios`]) and
//! hand each report to a [`SuiteWatcher`] as it finishes. Kernel peers ([`crate::kernel`]) are set up
//! once for all scenarios. Everything the suite created is removed before [`run_suite`] returns.
//!
//! Never destroys data: writing scenarios (and the calibration's write runs) write only to the
//! temporary file the suite created, or to a target given with `--destructive` (a block device
//! then opened with O_EXCL, refused while mounted). A target given without it is opened read-only;
//! the writing scenarios are skipped with a note, and if nothing else was asked for the suite
//! refuses with one line before any IO.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_core::{Nanos, NSEC_PER_MSEC, NSEC_PER_SEC};
use ioshare_engine::target::{Target, TargetKind, TempTarget};
use serde::Serialize;

use crate::calibrate::{self, Calibration};
use crate::error::Result;
use crate::fidelity::{self, FidelityRow};
use crate::kernel;
use crate::observe::Observations;
use crate::options::{BenchOptions, MAX_IODEPTH, MIN_TARGET_SIZE, TEMP_TARGET_SIZE};
use crate::report::ScenarioReport;
use crate::scenario::{Case, Context};
use crate::scenarios;

/// The target a suite ran on.
#[derive(Clone, Debug, Serialize)]
pub struct TargetInfo {
    /// Path.
    pub path: PathBuf,
    /// Size, bytes.
    pub size: u64,
    /// Whether it was a temporary file made (and removed) by the suite.
    pub temporary: bool,
    /// `file` or `block device`.
    pub kind: &'static str,
}

/// Everything a suite measured.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// The target.
    pub target: TargetInfo,
    /// The device measurement the controllers were configured from.
    pub calibration: Calibration,
    /// The scenarios that ran (all of them, or those finished before an interrupt).
    pub scenarios: Vec<ScenarioReport>,
    /// True when interrupted: the scenarios listed are those finished before.
    pub interrupted: bool,
    /// Remarks about the whole suite (kernel peers skipped, and why).
    pub notes: Vec<String>,
    /// ioshare's IOCost vs the kernel's, per case, when `fidelity` was asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fidelity: Vec<FidelityRow>,
}

/// Receives progress while the suite runs.
pub trait SuiteWatcher {
    /// A transient status line (what runs now, time elapsed and expected).
    fn progress(&mut self, line: &str);
    /// The target is ready and measured (before the first scenario).
    fn calibrated(&mut self, target: &TargetInfo, calibration: &Calibration);
    /// A scenario finished (print it now, so an interrupt keeps what was done).
    fn scenario_done(&mut self, report: &ScenarioReport);
}

/// Checks the options before anything is created.
pub fn validate(opts: &BenchOptions) -> std::result::Result<(), String> {
    for name in &opts.scenarios {
        if scenarios::by_name(name).is_none() && name != fidelity::NAME {
            return Err(format!(
                "unknown scenario '{name}': choose one of {}, {}",
                scenarios::names().join(", "),
                fidelity::NAME
            ));
        }
    }
    let (a, b) = opts.weights;
    for w in [a, b] {
        if !(1..=10_000).contains(&w) {
            return Err(format!("weight {w} is out of range: weights must be between 1 and 10000"));
        }
    }
    if !(1..=MAX_IODEPTH).contains(&opts.iodepth) {
        return Err(format!("iodepth {} is out of range: give 1 to {MAX_IODEPTH}", opts.iodepth));
    }
    if opts.duration < NSEC_PER_SEC / 2 || opts.duration > 3600 * NSEC_PER_SEC {
        return Err("duration must be between 0.5 and 3600 seconds".into());
    }
    if let Some(every) = opts.sample_every.filter(|&e| !(10 * NSEC_PER_MSEC..=opts.duration).contains(&e)) {
        return Err(format!(
            "--sample-ms {}: give 10 ms up to the run's duration ({} ms)",
            every / NSEC_PER_MSEC,
            opts.duration / NSEC_PER_MSEC
        ));
    }
    if opts.observe {
        ioshare_observe::can_trace().map_err(|e| format!("--observe: {e}"))?;
    }
    Ok(())
}

/// Runs the suite. Returns the report (partial, with `interrupted` set, when `stop` was raised);
/// every temporary file, loop device and cgroup is removed before it returns, on every path.
pub fn run_suite(opts: &BenchOptions, stop: &AtomicBool, watcher: &mut dyn SuiteWatcher) -> Result<SuiteReport> {
    let mut cases = cases_to_run(opts);
    let mut skipped = Vec::new();
    if let (Some(path), false) = (&opts.target, opts.destructive) {
        skipped = cases.iter().filter(|c| c.scenario.writes()).map(|c| c.name).collect();
        cases.retain(|c| !c.scenario.writes());
        if cases.is_empty() {
            return Err(ioshare_engine::Error::WouldOverwrite {
                path: path.clone(),
                reason: format!(
                    "{} writes, and bench did not create this target: pass --destructive to let bench overwrite it, \
                     or omit --target to use a temporary file",
                    skipped.join(", ")
                ),
            }
            .into());
        }
    }
    let leftovers = remove_leftovers(opts);
    let temp;
    let (path, temporary) = match &opts.target {
        Some(p) => (p.clone(), false),
        None => {
            let gib = TEMP_TARGET_SIZE as f64 / (1u64 << 30) as f64;
            temp = TempTarget::create(&opts.temp_dir, TEMP_TARGET_SIZE, stop, |done, total| {
                if done % (64 << 20) == 0 {
                    watcher.progress(&format!(
                        "writing the temporary target ({gib:.0} GiB): {:3.0}%",
                        done as f64 * 100.0 / total as f64
                    ));
                }
            })?;
            (temp.path().to_path_buf(), true)
        }
    };
    let target = if temporary || opts.destructive {
        Target::open(&path, MIN_TARGET_SIZE)?
    } else {
        Target::open_read_only(&path, MIN_TARGET_SIZE)?
    };
    let info = TargetInfo {
        path: path.clone(),
        size: target.size(),
        temporary,
        kind: match target.kind() {
            TargetKind::File => "file",
            TargetKind::BlockDevice => "block device",
        },
    };
    let observations = opts.observe.then(|| Observations::new(&path));
    watcher.progress("measuring the device (cost model and latency targets for IOCost)");
    let measured = calibrate::measure(&target, stop)?;
    let (calibration, given) = measured.with_given(opts.model, opts.qos);
    watcher.calibrated(&info, &calibration);
    let mut suite = SuiteReport {
        target: info,
        calibration,
        scenarios: Vec::new(),
        interrupted: false,
        notes: Vec::new(),
        fidelity: Vec::new(),
    };
    if !skipped.is_empty() {
        suite.notes.push(format!(
            "skipped {} (it writes, and bench did not create '{}'): pass --destructive to let bench overwrite it",
            skipped.join(", "),
            path.display()
        ));
    }
    suite.notes.extend(given);
    if !suite.calibration.writes_measured {
        suite.notes.push(format!(
            "the target was only read: the model's write coefficients are the measured reads × the write:read \
             ratios of {}",
            ioshare_engine::profile::measure::WRITE_RATIOS_FROM
        ));
    }
    let mut peers = if opts.kernel_peers { kernel::Peers::prepare(&path, &opts.worker) } else { Ok(None) };
    match &peers {
        Err(note) => suite.notes.push(note.clone()),
        Ok(Some(p)) => suite.notes.push(p.describe()),
        Ok(None) => {}
    }
    if !leftovers.is_empty() {
        let list: Vec<String> = leftovers.iter().map(|p| p.display().to_string()).collect();
        suite.notes.push(format!("removed what an earlier, killed run left behind: {}", list.join(", ")));
    }
    let planned = |c: &Case| {
        let peers = peers.as_ref().ok().and_then(|p| p.as_ref());
        c.scenario.planned_runs(&case_options(opts, c), &suite.calibration, peers, opts.observe)
    };
    let mut clock = Progress::new(cases.iter().map(planned).sum());
    for case in &cases {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let case_opts = case_options(opts, case);
        let ctx = Context {
            target: &target,
            opts: &case_opts,
            calibration: &suite.calibration,
            observe: observations.as_ref(),
        };
        let peers = peers.as_mut().ok().and_then(|p| p.as_mut());
        let mut report = case
            .scenario
            .run(&ctx, peers, stop, &mut |what: &str| watcher.progress(&clock.line(case.name, what, opts.duration)))?;
        report.name = case.name.into();
        watcher.scenario_done(&report);
        suite.scenarios.push(report);
    }
    if opts.scenarios.iter().any(|n| n == fidelity::NAME) {
        suite.fidelity = fidelity::rows(&suite.scenarios);
    }
    suite.interrupted = stop.load(Ordering::Relaxed);
    Ok(suite)
}

/// The scenarios to run, each once in the order first named (all of them the default suite runs when
/// none is named); `fidelity` stands for its cases, each under its own name and weights.
fn cases_to_run(opts: &BenchOptions) -> Vec<Case> {
    if opts.scenarios.is_empty() {
        return scenarios::ALL.iter().filter(|sc| sc.in_default_suite(opts)).map(|&sc| Case::plain(sc)).collect();
    }
    let mut cases: Vec<Case> = Vec::new();
    for name in &opts.scenarios {
        let named: Vec<Case> = match scenarios::by_name(name) {
            Some(sc) => vec![Case::plain(sc)],
            None => fidelity::cases().collect(),
        };
        for case in named {
            if !cases.iter().any(|c| c.name == case.name) {
                cases.push(case);
            }
        }
    }
    cases
}

/// The suite's options with the case's weights.
fn case_options(opts: &BenchOptions, case: &Case) -> BenchOptions {
    BenchOptions { weights: case.weights.unwrap_or(opts.weights), ..opts.clone() }
}

/// Counts runs for the progress line.
struct Progress {
    total: usize,
    done: usize,
    started: std::time::Instant,
}

impl Progress {
    fn new(total: usize) -> Self {
        Progress { total, done: 0, started: std::time::Instant::now() }
    }

    fn line(&mut self, scenario: &str, what: &str, duration: Nanos) -> String {
        self.done += 1;
        let left = (self.total.saturating_sub(self.done) + 1) as u64 * duration / NSEC_PER_SEC;
        format!(
            "[run {}/{} · {:.0}s elapsed · ~{}s left] {scenario}: {what}",
            self.done.min(self.total),
            self.total,
            self.started.elapsed().as_secs_f64(),
            left
        )
    }
}

/// Temporary targets and blkio cgroups of earlier runs that were killed (SIGKILL runs no destructor;
/// loop devices clear themselves): removed before this run creates its own.
fn remove_leftovers(opts: &BenchOptions) -> Vec<std::path::PathBuf> {
    let mut removed = if opts.target.is_none() { TempTarget::remove_stale(&opts.temp_dir) } else { Vec::new() };
    if opts.kernel_peers && ioshare_host::is_root() {
        removed.extend(ioshare_host::remove_stale_cgroups("ioshare-bench-").unwrap_or_default());
    }
    removed
}
