//! `ioshare bench`: scenarios that show, on real IO, whether a controller shares a device the way it
//! promises — proportional split, work conservation, fairness in device cost, limits, overhead — with
//! ioshare's controllers and (as root) the kernel's own BFQ and blk-throttle side by side.
//!
//! Never destroys data: writing scenarios (and the calibration's write runs) write only to the
//! temporary file the suite created, or to a target given with `--destructive` (a block device
//! then opened with O_EXCL, refused while mounted). A target given without it is opened read-only;
//! the writing scenarios are skipped with a note, and if nothing else was asked for the suite
//! refuses with one line before any IO.
//!
//! The suite: open the target (or create and fill a temporary file in the working directory), measure
//! the device quickly ([`calibrate`]: the cost model and latency targets IOCost needs, and the maximum
//! IOPS the verdicts refer to), then run each scenario ([`scenario`]) once per controller and judge
//! each run by the scenario's criterion. Kernel peers ([`kernel`]) run every tenant in its own process
//! and blkio cgroup on a loop device over the target. Results come back as plain data
//! ([`SuiteReport`]) for the table ([`table`]), JSON and SVG ([`svg`]) renderers.

pub mod agent;
pub mod calibrate;
pub mod controllers;
pub mod fidelity;
pub mod frontier;
pub mod kernel;
pub mod observe;
pub mod scenario;
pub mod svg;
pub mod table;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_core::{Nanos, NSEC_PER_SEC};
use serde::Serialize;

use calibrate::Calibration;
use ioshare_engine::error::{Error, Result};
use ioshare_engine::report::RunReport;
use ioshare_engine::target::{Target, TargetKind, TempTarget};
use scenario::Scenario;

/// Size of the temporary target: every byte is written first, so reads reach the device; large
/// enough that random 4 KiB reads do not stay in a device-side cache of a few hundred MiB.
pub const TEMP_TARGET_SIZE: u64 = 2 << 30;
/// Deepest saturating reader `--iodepth` accepts (each IO holds a buffer of its block size).
pub const MAX_IODEPTH: u32 = 1024;
/// Smallest target the suite accepts (sequential jobs must not wrap every few milliseconds).
pub const MIN_TARGET_SIZE: u64 = 256 << 20;

/// What the suite runs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Scenarios to run, by name; empty = all.
    pub scenarios: Vec<String>,
    /// Weights of the two main tenants (high, low).
    pub weights: (u32, u32),
    /// Queue depth of each saturating reader of the proportional and donation scenarios.
    pub iodepth: u32,
    /// Length of each run, ns.
    pub duration: Nanos,
    /// The device or file to run on; `None` = a temporary file in `temp_dir`.
    pub target: Option<PathBuf>,
    /// Whether writing scenarios may overwrite `target` (without it, a given target is only read:
    /// writing scenarios are skipped, and refused when they are all that was asked for).
    pub destructive: bool,
    /// Where the temporary target is created.
    pub temp_dir: PathBuf,
    /// Whether to run the kernel's controllers as peers (needs root; skipped with a note otherwise).
    pub kernel_peers: bool,
    /// How to start a kernel-peer worker: program and arguments (the CLI passes itself with its hidden
    /// worker flag); the worker calls [`kernel::worker_main`].
    pub worker: Vec<String>,
    /// Watch each run with the eBPF observer ([`observe`]; needs root and BTF).
    pub observe: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            scenarios: Vec::new(),
            weights: (200, 100),
            iodepth: 64,
            duration: 5 * NSEC_PER_SEC,
            target: None,
            destructive: false,
            temp_dir: PathBuf::from("."),
            kernel_peers: true,
            worker: Vec::new(),
            observe: false,
        }
    }
}

/// Whether a run passed its scenario's criterion, and the number behind it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Verdict {
    /// Pass or fail.
    pub pass: bool,
    /// The measured figure the criterion judges.
    pub value: f64,
    /// One line: the figure, the target, and what it means.
    pub summary: String,
}

impl Verdict {
    /// The verdict of a scenario interrupted before the controllers it judges had run.
    pub fn not_judged() -> Verdict {
        Verdict { pass: false, value: f64::NAN, summary: NOT_JUDGED.into() }
    }

    /// A scenario's verdict from its subjects' runs: passes when every judged subject passes; the value
    /// is the first subject's; the summary names each subject with its own. `None` when no subject
    /// was judged.
    pub fn of_subjects(subjects: &[&RunEntry]) -> Option<Verdict> {
        let judged: Vec<(&str, &Verdict)> =
            subjects.iter().filter_map(|r| Some((r.report.controller.as_str(), r.verdict.as_ref()?))).collect();
        let (_, first) = judged.first()?;
        Some(Verdict {
            pass: judged.iter().all(|(_, v)| v.pass),
            value: first.value,
            summary: judged.iter().map(|(name, v)| format!("{name}: {}", v.summary)).collect::<Vec<_>>().join("; "),
        })
    }

    /// `PASS`, `FAIL`, or `INTERRUPTED` for a scenario that was never judged.
    pub fn label(&self) -> &'static str {
        match (self.pass, self.summary == NOT_JUDGED) {
            (true, _) => "PASS",
            (false, true) => "INTERRUPTED",
            (false, false) => "FAIL",
        }
    }
}

const NOT_JUDGED: &str = "not judged: interrupted before its controllers ran";

/// Who controlled the IO of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// One of ioshare's controllers, inline in the engine.
    Ioshare,
    /// The kernel (cgroup settings on a loop device); each tenant in its own process.
    Kernel,
    /// A reference run the others are judged against (solo tenant, baseline).
    Reference,
}

/// One run of a scenario.
#[derive(Clone, Debug, Serialize)]
pub struct RunEntry {
    /// Who controlled the IO.
    pub side: Side,
    /// What was measured (controller name, tenants, device, series).
    #[serde(flatten)]
    pub report: RunReport,
    /// The scenario's criterion applied to this run (`None` for reference runs).
    pub verdict: Option<Verdict>,
}

/// One scenario's runs and verdict.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The runs, in the order they ran.
    pub runs: Vec<RunEntry>,
    /// The scenario's verdict: every ioshare controller it judges passed.
    pub verdict: Verdict,
    /// Remarks (a peer that could not run, a controller not yet available).
    pub notes: Vec<String>,
    /// What the eBPF observer saw per run (with `--observe`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<observe::RunObserved>,
}

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
    pub fidelity: Vec<fidelity::FidelityRow>,
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
        if Scenario::by_name(name).is_none() && name != fidelity::NAME {
            return Err(format!(
                "unknown scenario '{name}': choose one of {}, {}",
                Scenario::names().join(", "),
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
            return Err(Error::WouldOverwrite {
                path: path.clone(),
                reason: format!(
                    "{} writes, and bench did not create this target: pass --destructive to let bench overwrite it, \
                     or omit --target to use a temporary file",
                    skipped.join(", ")
                ),
            });
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
    let observations = opts.observe.then(|| observe::Observations::new(&path));
    watcher.progress("measuring the device (cost model and latency targets for IOCost)");
    let calibration = calibrate::measure(&target, stop)?;
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
    let mut clock = Progress::new(
        cases.iter().map(|c| c.scenario.planned_runs(peers.as_ref().ok().and_then(|p| p.as_ref()), opts.observe)).sum(),
    );
    for case in &cases {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let case_opts = BenchOptions { weights: case.weights.unwrap_or(opts.weights), ..opts.clone() };
        let ctx = scenario::Context {
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

/// The scenarios to run, each once in the order first named (all of them when none is named); `fidelity`
/// stands for its cases, each under its own name and weights.
fn cases_to_run(opts: &BenchOptions) -> Vec<fidelity::Case> {
    let plain = |sc: Scenario| fidelity::Case { name: sc.name(), scenario: sc, weights: None };
    if opts.scenarios.is_empty() {
        let here = |sc: &Scenario| *sc != Scenario::Agent || agent::in_default_suite(opts);
        return Scenario::all().into_iter().filter(here).map(plain).collect();
    }
    let mut cases: Vec<fidelity::Case> = Vec::new();
    for name in &opts.scenarios {
        let named: Vec<fidelity::Case> = match Scenario::by_name(name) {
            Some(sc) => vec![plain(sc)],
            None => fidelity::cases().to_vec(),
        };
        for case in named {
            if !cases.iter().any(|c| c.name == case.name) {
                cases.push(case);
            }
        }
    }
    cases
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
