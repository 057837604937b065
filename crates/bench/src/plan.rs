//! The shared runner of the plan-and-judge scenarios: a scenario that implements [`Planned`] says
//! what to run ([`Plan`]) and how one run is judged; [`run_plan`] does the rest, the same way for
//! all of them, and so every [`Planned`] is a [`Scenario`].
//!
//! The runs, in order: [`Plan::rounds`] interleaved rounds, each of the reference runs (no control:
//! the latency-sensitive tenant alone, a saturating tenant's capacity, a frontier sweep) then the
//! ioshare controllers (with the plan's [`Plan::fio_reference`] the same job under fio, with
//! [`Plan::observer_overhead`] and `--observe` no control once more with the eBPF observer
//! toggled); each run's rounds reduce to one report of medians; then the kernel peers this host
//! supports. Rounds put every run near the ones it is judged against: on a disk shared with other
//! machines the speed moves between seconds, and a yardstick measured a minute before its subject
//! judges the disk's drift. Every run but the references
//! is judged against [`References`] taken from the others; the scenario's verdict is that of its
//! subjects (the ioshare controllers it is about) — the other runs carry the same criterion for
//! comparison (`none` shows what happens without control, the kernel's controllers what the kernel
//! achieves).

use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_core::limit::{Knob, KnobLimit, Scope, Unit};
use ioshare_core::{Controller, Limits, Nanos, QosParams, NSEC_PER_MSEC, NSEC_PER_SEC};
use ioshare_engine::fio;
use ioshare_engine::job::{JobSpec, Pattern, TenantSpec};
use ioshare_engine::report::{LatencyUs, RunReport};
use ioshare_engine::run::{run, RunOptions};

use crate::alternating::Alternating;
use crate::alternating::{ALTERNATE_SAMPLE, ALTERNATE_WINDOW};
use crate::calibrate::Calibration;
use crate::controllers::ControllerKind;
use crate::error::Result;
use crate::frontier::Yardsticks;
use crate::kernel::{KernelSetup, Peers};
use crate::observe::{overhead_note, OBSERVED_NONE};
use crate::options::BenchOptions;
use crate::report::ScenarioReport;
use crate::scenario::{Context, Described, Scenario};
use crate::stats::median;
use crate::verdict::{RunEntry, Side, Verdict};
use crate::windows::{
    compare_windows, iops_ratios, median_estimate, median_text, overhead_estimate, Comparison, TOGGLE_SAMPLE,
};

/// A scenario that is a plan and a criterion; [`run_plan`] runs and judges it.
pub trait Planned: Described {
    /// What to run, for these options and this device.
    fn plan(&self, opts: &BenchOptions, cal: &Calibration) -> Plan;

    /// One run's verdict: `r` ran `tenants`, judged against `refs`.
    fn judge(
        &self,
        opts: &BenchOptions,
        cal: &Calibration,
        tenants: &[TenantSpec],
        r: &RunReport,
        refs: &References,
    ) -> Verdict;

    /// After every run is judged: verdicts that depend on the other runs, and notes (none by default).
    fn review(&self, _runs: &mut [RunEntry], _notes: &mut Vec<String>) {}
}

impl<T: Planned> Scenario for T {
    fn planned_runs(&self, opts: &BenchOptions, cal: &Calibration, peers: Option<&Peers>, observed: bool) -> usize {
        self.plan(opts, cal).runs(peers, observed)
    }

    fn run(
        &self,
        ctx: &Context,
        peers: Option<&mut Peers>,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&str),
    ) -> Result<ScenarioReport> {
        run_plan(self, ctx, peers, stop, progress)
    }
}

/// What a scenario runs.
pub struct Plan {
    /// The tenants of every controlled run.
    pub tenants: Vec<TenantSpec>,
    /// Reference runs (name, tenants), with no control, before the others.
    pub reference: Vec<(String, Vec<TenantSpec>)>,
    /// ioshare's controllers, in run order.
    pub ioshare: Vec<ControllerKind>,
    /// Those of them the scenario's verdict is about.
    pub subjects: Vec<ControllerKind>,
    /// The kernel's controllers (each run where the host supports it).
    pub kernel: Vec<KernelSetup>,
    /// Interleaved rounds of the reference and ioshare runs, each run `duration / rounds` long.
    pub rounds: usize,
    /// The single job of the plan also runs under fio every round, as a reference engine.
    pub fio_reference: bool,
    /// With `--observe`: no control runs once more per round with the observer attached and detached
    /// in turns (its cost on the IO path); the other ioshare runs go unobserved.
    pub observer_overhead: bool,
    /// The subjects run switched on and off in turns ([`Alternating`]), and are judged by their on
    /// windows against their off ones ([`References::paired`]): their cost on the IO path.
    pub alternating: bool,
}

impl Plan {
    /// A plan of one round, without fio or the observer's overhead.
    pub fn new(tenants: Vec<TenantSpec>, ioshare: Vec<ControllerKind>, subjects: Vec<ControllerKind>) -> Plan {
        Plan {
            tenants,
            reference: Vec::new(),
            ioshare,
            subjects,
            kernel: Vec::new(),
            rounds: 1,
            fio_reference: false,
            observer_overhead: false,
            alternating: false,
        }
    }

    /// Runs it makes with these kernel peers, `observed` or not.
    pub fn runs(&self, peers: Option<&Peers>, observed: bool) -> usize {
        let kernel = peers.map_or(0, |p| self.kernel.iter().filter(|s| p.supports(s)).count());
        let fio = if self.fio_reference && fio::available() { self.rounds } else { 0 };
        let toggled = if self.observer_overhead && observed { self.rounds } else { 0 };
        (self.ioshare.len() + self.reference.len()) * self.rounds + kernel + fio + toggled
    }
}

/// What a run is judged against: the reference runs and the no-control baseline of its side.
pub struct References {
    /// Latency of the latency-sensitive tenant alone.
    pub solo: Option<LatencyUs>,
    /// IOPS of the saturating tenant alone.
    pub capacity: Option<f64>,
    /// Mean IOs on the device while the saturating tenant ran alone.
    pub capacity_inflight: Option<f64>,
    /// IOPS with no control (ioshare's `none`, or the kernel's plain loop device).
    pub baseline: Option<f64>,
    /// Interleaved rounds: this run's figure against no control of the same rounds
    /// (`paired_figures`); judged instead of the medians' ratio where present.
    pub paired: Option<f64>,
    /// The work-conserving frontier (QD1 p99 ÷ solo, leftover used), empty elsewhere.
    pub frontier: Vec<(f64, f64)>,
}

/// A saturating 4 KiB random reader at `iodepth`.
pub fn reader(name: &str, weight: u32, iodepth: u32) -> TenantSpec {
    TenantSpec::new(name, weight, JobSpec::new(Pattern::RandRead, 4096, iodepth))
}

/// A total IOPS limit.
pub fn iops_limit(iops: u64) -> Limits {
    Limits::none().with(Knob::new(Unit::Iops, Scope::Total), KnobLimit::avg(iops))
}

/// Runs every run of `sc`'s plan and judges them. On interrupt, returns the runs finished.
pub fn run_plan(
    sc: &dyn Planned,
    ctx: &Context,
    peers: Option<&mut Peers>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<ScenarioReport> {
    let plan = sc.plan(ctx.opts, ctx.calibration);
    let sampled = |o: RunOptions| RunOptions { sample_every: ctx.opts.sample_every.unwrap_or(o.sample_every), ..o };
    let opts = sampled(RunOptions { device_depth: ctx.calibration.device_depth, ..RunOptions::new(ctx.opts.duration) });
    let mut runs: Vec<RunEntry> = Vec::new();
    let stopped = || stop.load(Ordering::Relaxed);
    // Interleaved rounds, each opening with the reference runs; each run's rounds reduce to one
    // report ([`median_report`]).
    let round_opts = sampled(RunOptions {
        device_depth: ctx.calibration.device_depth,
        ..RunOptions::new(ctx.opts.duration / plan.rounds as Nanos)
    });
    let o = if plan.rounds > 1 { &round_opts } else { &opts };
    // With an observer and `observer_overhead`, no control runs once more per round right after the
    // unobserved one, with the observer attached and detached in turns (the last slot of `rounds`;
    // `toggled` per round, see [`crate::observe::Observations::toggled`]); the other runs go unobserved.
    let toggling = ctx.observe.filter(|_| plan.observer_overhead);
    let mut rounds: Vec<Vec<RunReport>> = vec![Vec::new(); plan.ioshare.len() + usize::from(toggling.is_some())];
    // The observer's windows per round; each row's windows over all rounds (the alternating subjects',
    // and the observer's in its own row).
    let mut toggled: Vec<Vec<Comparison>> = Vec::new();
    let mut windows: Vec<Option<Vec<Comparison>>> = plan
        .ioshare
        .iter()
        .map(|c| (plan.alternating && plan.subjects.contains(c)).then(Vec::new))
        .chain(toggling.map(|_| Some(Vec::new())))
        .collect();
    let mut fio_rounds: Vec<RunReport> = Vec::new();
    let mut notes = Vec::new();
    let fio_job = plan.fio_reference.then(|| &plan.tenants[0].jobs[0]).filter(|_| fio::available());
    if plan.fio_reference && fio_job.is_none() {
        notes.push("fio is not installed: no reference run (./scripts/setup.sh installs it)".into());
    }
    let mut reference_rounds: Vec<Vec<RunReport>> = vec![Vec::new(); plan.reference.len()];
    'rounds: for round in 0..plan.rounds {
        for ((name, tenants), rs) in plan.reference.iter().zip(&mut reference_rounds) {
            if stopped() {
                break 'rounds;
            }
            progress(&format!("reference: {name}"));
            let mut report = run(ctx.target, tenants, &mut *ControllerKind::None.build(ctx.calibration), o, stop)?;
            report.controller = name.clone();
            rs.push(report);
        }
        let solo = plan.reference.iter().position(|(name, _)| name == "solo").and_then(|i| reference_rounds[i].last());
        // Each round starts one controller later: no controller always runs first after the
        // references or fio (in three default runs with a fixed order the second of five read
        // 91-99% of no control, the last 102-104%).
        for i in (0..plan.ioshare.len()).map(|k| (k + round) % plan.ioshare.len()) {
            let ctl = &plan.ioshare[i];
            if stopped() {
                break 'rounds;
            }
            progress(ctl.name());
            let cal = calibration_for(*ctl, ctx.calibration, solo);
            // A row with windows is run switched on and off in turns (see `windows` above).
            let mut report = if let Some(kept) = &mut windows[i] {
                let (report, compared) = run_alternating(ctx, &plan.tenants, ctl.build(&cal), o, stop)?;
                kept.extend(compared);
                report
            } else {
                let go = || run(ctx.target, &plan.tenants, &mut *ctl.build(&cal), o, stop);
                if toggling.is_some() {
                    go()?
                } else {
                    ctx.observed(Side::Ioshare, ctl.name(), None, go)?
                }
            };
            // Variants of one controller (IOCost with a p99 target) are told apart by the bench's name.
            report.controller = ctl.name().into();
            rounds[i].push(report);
            if let Some(obs) = toggling.filter(|_| *ctl == ControllerKind::None && !stopped()) {
                progress(OBSERVED_NONE);
                let sampled = RunOptions { sample_every: TOGGLE_SAMPLE, ..*o };
                let go = |epoch| {
                    let opts = RunOptions { epoch: Some(epoch), ..sampled };
                    run(ctx.target, &plan.tenants, &mut *ControllerKind::None.build(ctx.calibration), &opts, stop)
                };
                let (mut report, compared) = obs.toggled(sampled.warmup as f64 / NSEC_PER_SEC as f64, go)?;
                report.controller = OBSERVED_NONE.into();
                rounds[plan.ioshare.len()].push(report);
                windows[plan.ioshare.len()].get_or_insert_with(Vec::new).extend_from_slice(&compared);
                toggled.push(compared);
            }
        }
        if let Some(job) = fio_job.filter(|_| !stopped()) {
            progress("fio (reference engine, same job)");
            match fio::run(ctx.target.path(), job, o.duration - o.warmup, o.warmup) {
                Ok(r) => fio_rounds.push(r),
                Err(e) => notes.push(format!("fio reference run failed: {e}")),
            }
        }
    }
    // Before the rounds are reduced to their medians.
    let names = plan.ioshare.iter().map(|c| c.name()).chain(toggling.is_some().then_some(OBSERVED_NONE));
    let none = plan.ioshare.iter().position(|c| *c == ControllerKind::None);
    let paired = paired_figures(names.clone(), &rounds, none, &windows);
    notes.extend(overhead_note(&toggled));
    notes.extend(alternating_note(names, &windows));
    let reduced = reference_rounds
        .into_iter()
        .map(|r| (Side::Reference, r))
        .chain(rounds.into_iter().map(|r| (Side::Ioshare, r)))
        .chain([(Side::Reference, fio_rounds)]);
    for (side, rs) in reduced {
        if let Some(report) = median_report(rs) {
            runs.push(RunEntry { side, report, verdict: None });
        }
    }
    notes.extend(engine_vs_fio(&runs));
    if let Some(peers) = peers {
        for setup in &plan.kernel {
            if stopped() {
                break;
            }
            if !peers.supports(setup) {
                continue;
            }
            progress(&format!("{} (kernel, one process per tenant)", setup.name()));
            let device = peers.device().to_path_buf();
            let go = || peers.run(setup, Some(ctx.calibration), &plan.tenants, &opts);
            let report = ctx.observed(Side::Kernel, setup.name(), Some(&device), go)?;
            runs.push(RunEntry { side: Side::Kernel, report, verdict: None });
            notes.extend(peers.take_decisions());
        }
    }
    judge_all(sc, ctx.opts, ctx.calibration, &plan.tenants, &paired, &mut runs);
    sc.review(&mut runs, &mut notes);
    let subjects: Vec<&RunEntry> = runs
        .iter()
        .filter(|r| r.side == Side::Ioshare && plan.subjects.iter().any(|c| c.name() == r.report.controller))
        .collect();
    let verdict = match Verdict::of_subjects(&subjects) {
        Some(v) if subjects.len() == plan.subjects.len() => v,
        _ => {
            notes.push("interrupted before the controllers this scenario judges had run".into());
            Verdict::not_judged()
        }
    };
    let (observed, observe_notes) = ctx.take_observed();
    notes.extend(observe_notes);
    Ok(ScenarioReport {
        name: sc.name().into(),
        description: sc.description().into(),
        runs,
        verdict,
        notes,
        observed,
        curves: Vec::new(),
    })
}

/// Judges every run but the references; `paired` holds each ioshare row's figure against no
/// control ([`paired_figures`], [`References::paired`]).
pub(crate) fn judge_all(
    sc: &dyn Planned,
    opts: &BenchOptions,
    cal: &Calibration,
    tenants: &[TenantSpec],
    paired: &[(&str, f64)],
    runs: &mut [RunEntry],
) {
    let reference = |name: &str| runs.iter().find(|r| r.side == Side::Reference && r.report.controller == name);
    let solo = reference("solo").map(|r| r.report.tenants[0].lat_us.clone());
    let capacity_run = reference("capacity").map(|r| &r.report.device);
    let (capacity, capacity_inflight) = (capacity_run.map(|d| d.iops), capacity_run.map(|d| d.avg_inflight));
    let baseline = |side: Side, runs: &[RunEntry]| {
        let name = if side == Side::Kernel { KernelSetup::Plain.name() } else { ControllerKind::None.name() };
        runs.iter().find(|r| r.side == side && r.report.controller == name).map(|r| r.report.device.iops)
    };
    let baselines = (baseline(Side::Ioshare, runs), baseline(Side::Kernel, runs));
    let frontier = Yardsticks::from_runs(runs).map(|y| y.frontier).unwrap_or_default();
    for entry in runs.iter_mut().filter(|r| r.side != Side::Reference) {
        let base = if entry.side == Side::Kernel { baselines.1 } else { baselines.0 };
        let paired = paired
            .iter()
            .find(|(name, _)| entry.side == Side::Ioshare && *name == entry.report.controller)
            .map(|(_, figure)| *figure);
        let refs = References {
            solo: solo.clone(),
            capacity,
            capacity_inflight,
            baseline: base,
            paired,
            frontier: frontier.clone(),
        };
        entry.verdict = Some(sc.judge(opts, cal, tenants, &entry.report, &refs));
    }
}

/// Each ioshare row's figure against no control, by the rows' `names` in `rounds` order: a row run
/// on and off in turns (its `windows` are `Some`) the estimate from its on windows against their off
/// neighbours — the alternating subjects' median ([`median_estimate`]), the observer's
/// ([`OBSERVED_NONE`]) geometric mean ([`overhead_estimate`]); none without windows; any other row its median over the rounds of its
/// IOPS over no control's (`rounds[none]`) in the same round (adjacent runs: drift in a neighbour's
/// load cancels). Empty without a no-control row; rows without a figure are left out.
pub(crate) fn paired_figures<'a>(
    names: impl Iterator<Item = &'a str>,
    rounds: &[Vec<RunReport>],
    none: Option<usize>,
    windows: &[Option<Vec<Comparison>>],
) -> Vec<(&'a str, f64)> {
    let Some(none) = none else { return Vec::new() };
    names
        .zip(rounds.iter().zip(windows))
        .filter_map(|(name, (rs, ws))| {
            let figure = match ws {
                Some(ws) if name == OBSERVED_NONE => overhead_estimate(&iops_ratios(ws)).map(|(ratio, _)| ratio),
                Some(ws) => median_estimate(&iops_ratios(ws)).map(|(ratio, _, _)| ratio),
                None => median(&per_round_ratios(&rounds[none], rs)),
            };
            figure.map(|f| (name, f))
        })
        .collect()
}

/// Runs `tenants` under `ctl` switched on and off in turns ([`Alternating`]), sampled every
/// [`ALTERNATE_SAMPLE`]: the run, and each on window after the warm-up against its off neighbours.
fn run_alternating(
    ctx: &Context,
    tenants: &[TenantSpec],
    ctl: Box<dyn Controller>,
    o: &RunOptions,
    stop: &AtomicBool,
) -> Result<(RunReport, Vec<Comparison>)> {
    let opts = RunOptions { sample_every: ALTERNATE_SAMPLE, ..*o };
    let mut alternating = Alternating::new(ctl, ALTERNATE_WINDOW);
    let report = run(ctx.target, tenants, &mut alternating, &opts, stop)?;
    let compared = compare_windows(&report, &alternating.windows(), opts.warmup as f64 / NSEC_PER_SEC as f64);
    Ok((report, compared))
}

/// The note on the alternating rows: each one's estimate over all its rounds' windows.
fn alternating_note<'a>(names: impl Iterator<Item = &'a str>, windows: &[Option<Vec<Comparison>>]) -> Option<String> {
    let rows: Vec<String> = names
        .zip(windows)
        .filter(|(name, _)| *name != OBSERVED_NONE)
        .filter_map(|(name, ws)| Some(format!("{name} {}", median_text(ws.as_ref()?)?)))
        .collect();
    (!rows.is_empty()).then(|| {
        format!(
            "controller overhead: IOPS while each controller decides / while it is bypassed, in turns of {} ms \
             within each run, median of the windows and its ~95% interval (judges its row): {}",
            ALTERNATE_WINDOW / NSEC_PER_MSEC,
            rows.join("; ")
        )
    })
}

/// One run's rounds as one report: the round of median device IOPS, with the device's bandwidth
/// and each tenant's IOPS, bandwidth and latency percentiles the median over the rounds (each figure
/// its own median: one round slowed by outside IO on a shared disk moves none of them). `None`
/// without a round.
fn median_report(mut rounds: Vec<RunReport>) -> Option<RunReport> {
    rounds.sort_by(|x, y| x.device.iops.total_cmp(&y.device.iops));
    let mut report = rounds.get(rounds.len() / 2)?.clone();
    let of = |f: &dyn Fn(&RunReport) -> f64| median(&rounds.iter().map(f).collect::<Vec<f64>>()).unwrap_or(f64::NAN);
    report.device.bw_bytes = of(&|r| r.device.bw_bytes);
    for (t, tenant) in report.tenants.iter_mut().enumerate() {
        let lat = |f: fn(&LatencyUs) -> f64| of(&|r| f(&r.tenants[t].lat_us));
        tenant.iops = of(&|r| r.tenants[t].iops);
        tenant.bw_bytes = of(&|r| r.tenants[t].bw_bytes);
        tenant.lat_us = LatencyUs {
            p50: lat(|l| l.p50),
            p90: lat(|l| l.p90),
            p95: lat(|l| l.p95),
            p99: lat(|l| l.p99),
            p999: lat(|l| l.p999),
            max: lat(|l| l.max),
            mean: lat(|l| l.mean),
        };
    }
    Some(report)
}

/// Per round, IOPS of `on` over IOPS of `off` (the runs of the same round), in round order.
pub(crate) fn per_round_ratios(off: &[RunReport], on: &[RunReport]) -> Vec<f64> {
    off.iter().zip(on).map(|(a, b)| b.device.iops / a.device.iops.max(1e-9)).collect()
}

/// The engine with no control against fio on the same job (medians of the interleaved rounds):
/// IOPS ratio and CPU per IO of each. Information, never a verdict: being faster than fio is fine.
fn engine_vs_fio(runs: &[RunEntry]) -> Option<String> {
    let find = |side: Side, name: &str| runs.iter().find(|r| r.side == side && r.report.controller == name);
    let (engine, fio) =
        (&find(Side::Ioshare, ControllerKind::None.name())?.report, &find(Side::Reference, "fio")?.report);
    Some(format!(
        "engine vs fio, same job: {:.0} vs {:.0} IOPS (ratio {:.2}); CPU per IO {:.0} ns (engine thread) vs {:.0} ns (fio)",
        engine.device.iops,
        fio.device.iops,
        engine.device.iops / fio.device.iops.max(1e-9),
        engine.cpu.ns_per_io,
        fio.cpu.ns_per_io
    ))
}

/// The calibration a controller runs with: for [`ControllerKind::IoCostP99`] and
/// [`ControllerKind::IoCostP99Qd`], QoS says 99% of reads within that many times the QD1 reader's
/// solo p99 (from `solo`, the round's reference run).
fn calibration_for(ctl: ControllerKind, cal: &Calibration, solo: Option<&RunReport>) -> Calibration {
    match (ctl.p99_factor(), solo) {
        (Some(factor), Some(solo)) => {
            let rlat_us = (solo.tenants[0].lat_us.p99 * f64::from(factor)).ceil().max(1.0) as u64;
            Calibration { qos: QosParams { rppm: 990_000, rlat_us, ..cal.qos }, ..cal.clone() }
        }
        _ => cal.clone(),
    }
}

/// What the scenarios' unit tests judge with: a calibrated 10 000 IOPS device, tenants and runs.
#[cfg(test)]
pub(crate) mod fixtures {
    use ioshare_core::iocost::qos::QosParams;
    use ioshare_core::ModelParams;
    use ioshare_engine::report::{LatencyUs, RunReport, TenantReport};

    use super::{reader, Planned, References};
    use crate::calibrate::Calibration;
    use crate::options::BenchOptions;
    use crate::verdict::Verdict;

    /// A device of 10 000 IOPS at depth 32.
    pub fn cal() -> Calibration {
        Calibration {
            max_iops: 10_000.0,
            device_depth: 32,
            model: ModelParams::SSD_DFL,
            model_line: String::new(),
            writes_measured: true,
            qos: QosParams::default(),
            burst: None,
            round_s: 0.3,
            took_s: 0.0,
        }
    }

    /// A tenant that did `iops` (all reads) at p99 `p99` µs.
    pub fn tenant(name: &str, iops: f64, p99: f64) -> TenantReport {
        TenantReport {
            name: name.into(),
            iops,
            reads: iops as u64,
            lat_us: LatencyUs { p99, ..LatencyUs::default() },
            ..TenantReport::default()
        }
    }

    /// A run of these tenants; the device did their sum.
    pub fn report(tenants: Vec<TenantReport>) -> RunReport {
        let mut r = RunReport { tenants, ..RunReport::default() };
        r.device.iops = r.tenants.iter().map(|t| t.iops).sum();
        r
    }

    /// `s`'s verdict on `r` with the default options, each tenant a QD1 reader.
    pub fn judge(s: &dyn Planned, r: &RunReport, refs: &References) -> Verdict {
        let tenants: Vec<_> = r.tenants.iter().map(|t| reader(&t.name, 100, 1)).collect();
        s.judge(&BenchOptions::default(), &cal(), &tenants, r, refs)
    }

    /// No references.
    pub const NO_REFS: References = References {
        solo: None,
        capacity: None,
        capacity_inflight: None,
        baseline: None,
        paired: None,
        frontier: Vec::new(),
    };
}

#[cfg(test)]
mod tests {
    use super::fixtures::{report, tenant};
    use super::*;

    #[test]
    fn rounds_reduce_to_each_figures_median_with_the_median_rounds_series() {
        let round = |iops: [f64; 2], p99: [f64; 2], t_s: f64| {
            let mut r = report(vec![tenant("qd1", iops[0], p99[0]), tenant("sat", iops[1], p99[1])]);
            r.tenants[0].series = vec![ioshare_engine::report::TenantSample { t_s, ..Default::default() }];
            r
        };
        // The second round's device was slowed by outside IO: no figure takes it.
        let rounds = vec![
            round([5000.0, 60000.0], [300.0, 900.0], 1.0),
            round([2000.0, 30000.0], [3000.0, 5000.0], 2.0),
            round([4800.0, 62000.0], [350.0, 800.0], 3.0),
        ];
        let r = median_report(rounds).expect("three rounds");
        assert_eq!((r.tenants[0].iops, r.tenants[1].iops), (4800.0, 60000.0));
        assert_eq!((r.tenants[0].lat_us.p99, r.tenants[1].lat_us.p99), (350.0, 900.0));
        assert_eq!(r.device.iops, 65000.0, "the median of the rounds' totals, not the sum of medians");
        assert_eq!(r.tenants[0].series[0].t_s, 1.0, "the series of the round of median total (65 000)");
        assert_eq!(r.tenants[0].name, "qd1");
        assert!(median_report(Vec::new()).is_none());
    }
}
