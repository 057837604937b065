//! The scenarios: who the tenants are, which controllers run them, and how a run is judged.
//!
//! Each scenario is a [`Plan`] — tenants, ioshare controllers, kernel peers, an optional reference run
//! (the latency-sensitive tenant alone), rounds — and a criterion applied to every run. The scenario's
//! verdict is that of its subjects (the ioshare controllers it is about); the other runs carry the
//! same criterion for comparison (`none` shows what happens without control, the kernel's controllers
//! what the kernel achieves).

use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_core::limit::{Knob, KnobLimit, Scope, Unit};
use ioshare_core::{CostModel, Limits, LinearModel, Nanos, Op, NSEC_PER_USEC};

use super::calibrate::Calibration;
use super::controllers::Ctl;
use super::kernel::{KernelSetup, Peers};
use super::{BenchOptions, RunEntry, ScenarioReport, Side, Verdict};
use crate::error::Result;
use crate::job::{JobSpec, Pattern, TenantSpec};
use crate::report::RunReport;
use crate::run::{run, RunOptions};
use crate::target::Target;

/// What every scenario needs.
pub struct Context<'a> {
    /// The target.
    pub target: &'a Target,
    /// Suite options (weights, duration).
    pub opts: &'a BenchOptions,
    /// The device measurement.
    pub calibration: &'a Calibration,
}

/// A scenario of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Two saturating 4 KiB random readers with weights A:B: IOPS ratio A/B.
    Proportional,
    /// A QD1 reader with think time (high weight) beside a saturating reader (low weight).
    WorkConserving,
    /// Random and sequential readers and writers of equal weight: equal device cost.
    MixedCost,
    /// Token bucket vs leaky bucket under the same IOPS limit.
    Limits,
    /// Maximum IOPS with no control vs each controller.
    Overhead,
}

const ALL: [Scenario; 5] =
    [Scenario::Proportional, Scenario::WorkConserving, Scenario::MixedCost, Scenario::Limits, Scenario::Overhead];

/// Proportional split tolerance: ±5% of the weight ratio (issue acceptance).
const RATIO_TOLERANCE: f64 = 0.05;
/// Work conservation: the saturating tenant takes at least this share of the capacity left over.
const LEFTOVER_MIN: f64 = 0.90;
/// Work conservation: the QD1 tenant's p99 stays within this factor of its solo p99.
const P99_FACTOR_MAX: f64 = 1.3;
/// Mixed cost: every tenant's share of device cost within ±20% of the fair share (cost is judged by
/// the quickly measured model, which is itself good to roughly this much).
const COST_TOLERANCE: f64 = 0.20;
/// Limits: achieved IOPS within ±5% of the limit.
const LIMIT_TOLERANCE: f64 = 0.05;
/// Overhead: at least this share of the uncontrolled IOPS (issue acceptance; goal 98%).
const OVERHEAD_MIN: f64 = 0.95;
/// Overhead runs are split into this many interleaved rounds; the median round counts, so a burst
/// of neighbour activity on a shared machine does not decide the comparison.
const OVERHEAD_ROUNDS: usize = 3;

/// What a scenario runs.
struct Plan {
    tenants: Vec<TenantSpec>,
    /// Reference runs (name, tenants), with no control, before the others.
    reference: Vec<(&'static str, Vec<TenantSpec>)>,
    ioshare: Vec<Ctl>,
    subjects: Vec<Ctl>,
    kernel: Vec<KernelSetup>,
    rounds: usize,
    notes: Vec<String>,
}

fn reader(name: &str, weight: u32, iodepth: u32) -> TenantSpec {
    TenantSpec::new(name, weight, JobSpec::new(Pattern::RandRead, 4096, iodepth))
}

fn latency_sensitive(weight: u32) -> TenantSpec {
    TenantSpec::new("qd1", weight, JobSpec::new(Pattern::RandRead, 4096, 1).think(100 * NSEC_PER_USEC))
}

impl Scenario {
    /// Every scenario, in suite order.
    pub fn all() -> Vec<Scenario> {
        ALL.to_vec()
    }

    /// Names of every scenario.
    pub fn names() -> Vec<&'static str> {
        ALL.iter().map(|s| s.name()).collect()
    }

    /// The scenario called `name`.
    pub fn by_name(name: &str) -> Option<Scenario> {
        ALL.into_iter().find(|s| s.name() == name)
    }

    /// Name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Proportional => "proportional",
            Scenario::WorkConserving => "work-conserving",
            Scenario::MixedCost => "mixed-cost",
            Scenario::Limits => "limits",
            Scenario::Overhead => "overhead",
        }
    }

    /// Whether its tenants write (it then needs a target bench may overwrite: its own temporary
    /// file, or one given with `--destructive`).
    pub fn writes(self) -> bool {
        matches!(self, Scenario::MixedCost)
    }

    /// What it shows.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::Proportional => "two saturating 4 KiB random readers (QD64 each), weights A:B -> IOPS ratio A/B",
            Scenario::WorkConserving => {
                "high-weight QD1 reader with 100 us think time vs saturating low-weight reader -> the low-weight \
                 reader takes the leftover, the QD1 reader keeps its solo latency"
            }
            Scenario::MixedCost => {
                "random 4 KiB and sequential 64 KiB readers and writers, equal weights -> equal shares of device \
                 cost (by the measured model)"
            }
            Scenario::Limits => {
                "token bucket vs leaky bucket under the same IOPS limit, QD128 -> limit held, latency shapes"
            }
            Scenario::Overhead => "one saturating reader (QD32): maximum IOPS with each controller vs no control",
        }
    }

    /// Runs the scenario will make (for the progress line).
    pub fn planned_runs(self, peers: bool) -> usize {
        let p = self.plan_shape();
        p.0 * p.1 + p.2 + if peers { p.3 } else { 0 }
    }

    /// (ioshare controllers, rounds, reference runs, kernel runs).
    fn plan_shape(self) -> (usize, usize, usize, usize) {
        match self {
            Scenario::Proportional => (2, 1, 0, 2),
            Scenario::WorkConserving => (2, 1, 2, 2),
            Scenario::MixedCost => (2, 1, 0, 1),
            Scenario::Limits => (2, 1, 0, 1),
            Scenario::Overhead => (4, OVERHEAD_ROUNDS, 0, 2),
        }
    }

    fn plan(self, ctx: &Context) -> Plan {
        let (a, b) = ctx.opts.weights;
        let max = ctx.calibration.max_iops;
        let share = |w: u32| ((max * w as f64 / (a + b) as f64) as u64).max(1);
        let notes = Vec::new();
        let both = vec![Ctl::None, Ctl::IoCost];
        match self {
            Scenario::Proportional => Plan {
                // QD64 each: the device saturates near QD32, and a tenant entitled to 2/3 of it
                // needs outstanding IOs to spare when the other's IO lengthens the device queue
                // (at QD32 the high tenant ran out of IOs, not budget: 1.87:1).
                tenants: vec![reader("high", a, 64), reader("low", b, 64)],
                reference: vec![],
                ioshare: both,
                subjects: vec![Ctl::IoCost],
                kernel: vec![KernelSetup::Bfq, KernelSetup::ReadIopsLimits(vec![share(a), share(b)])],
                rounds: 1,
                notes,
            },
            Scenario::WorkConserving => Plan {
                tenants: vec![latency_sensitive(a), reader("saturating", b, 32)],
                reference: vec![("solo", vec![latency_sensitive(a)]), ("capacity", vec![reader("saturating", b, 32)])],
                ioshare: both,
                subjects: vec![Ctl::IoCost],
                kernel: vec![KernelSetup::Bfq, KernelSetup::ReadIopsLimits(vec![share(a), share(b)])],
                rounds: 1,
                notes,
            },
            Scenario::MixedCost => {
                let t = |name: &str, pattern, bs| TenantSpec::new(name, 100, JobSpec::new(pattern, bs, 16));
                Plan {
                    tenants: vec![
                        t("rand-read", Pattern::RandRead, 4096),
                        t("seq-read", Pattern::Read, 65536),
                        t("rand-write", Pattern::RandWrite, 4096),
                        t("seq-write", Pattern::Write, 65536),
                    ],
                    reference: vec![],
                    ioshare: both,
                    subjects: vec![Ctl::IoCost],
                    kernel: vec![KernelSetup::Bfq],
                    rounds: 1,
                    notes,
                }
            }
            Scenario::Limits => {
                // SPEC §9: QD128 under 5000 IOPS. The token bucket keeps librbd's default tick (50 ms
                // here): with a 1 s tick a few-second window would hold a handful of refills and the
                // average would depend on where the window cuts them (the 1 s case is reproduced in
                // virtual time by the core's tests).
                let limit = limit_iops(max);
                let limits = iops_limit(limit);
                Plan {
                    tenants: vec![reader("limited", 100, 128).limited(limits)],
                    reference: vec![],
                    ioshare: vec![Ctl::TokenBucket, Ctl::LeakyBucket],
                    subjects: vec![Ctl::TokenBucket, Ctl::LeakyBucket],
                    kernel: vec![KernelSetup::ReadIopsLimits(vec![limit])],
                    rounds: 1,
                    notes,
                }
            }
            Scenario::Overhead => Plan {
                // Limits far above the device, so that the limiters only add their bookkeeping.
                tenants: vec![reader("reader", 100, 32).limited(iops_limit((max * 100.0) as u64))],
                reference: vec![],
                ioshare: vec![Ctl::None, Ctl::IoCost, Ctl::TokenBucket, Ctl::LeakyBucket],
                subjects: vec![Ctl::IoCost, Ctl::TokenBucket, Ctl::LeakyBucket],
                kernel: vec![KernelSetup::Plain, KernelSetup::Bfq],
                rounds: OVERHEAD_ROUNDS,
                notes,
            },
        }
    }

    /// Runs every run of the scenario and judges them. On interrupt, returns the runs finished.
    pub fn run(
        self,
        ctx: &Context,
        peers: Option<&mut Peers>,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&str),
    ) -> Result<ScenarioReport> {
        let plan = self.plan(ctx);
        let opts = RunOptions { device_depth: ctx.calibration.device_depth, ..RunOptions::new(ctx.opts.duration) };
        let mut runs: Vec<RunEntry> = Vec::new();
        let stopped = || stop.load(Ordering::Relaxed);
        for (name, tenants) in &plan.reference {
            if stopped() {
                break;
            }
            progress(&format!("reference: {name}"));
            let mut report = run(ctx.target, tenants, &mut *Ctl::None.build(ctx.calibration), &opts, stop)?;
            report.controller = (*name).into();
            runs.push(RunEntry { side: Side::Reference, report, verdict: None });
        }
        // Interleaved rounds; the median round of each controller is kept.
        let round_opts = RunOptions {
            device_depth: ctx.calibration.device_depth,
            ..RunOptions::new(ctx.opts.duration / plan.rounds as Nanos)
        };
        let mut rounds: Vec<Vec<RunReport>> = vec![Vec::new(); plan.ioshare.len()];
        'rounds: for _ in 0..plan.rounds {
            for (i, ctl) in plan.ioshare.iter().enumerate() {
                if stopped() {
                    break 'rounds;
                }
                progress(ctl.name());
                let o = if plan.rounds > 1 { &round_opts } else { &opts };
                rounds[i].push(run(ctx.target, &plan.tenants, &mut *ctl.build(ctx.calibration), o, stop)?);
            }
        }
        for rs in rounds.iter_mut().filter(|r| !r.is_empty()) {
            rs.sort_by(|x, y| x.device.iops.total_cmp(&y.device.iops));
            runs.push(RunEntry { side: Side::Ioshare, report: rs.swap_remove(rs.len() / 2), verdict: None });
        }
        if let Some(peers) = peers {
            for setup in &plan.kernel {
                if stopped() {
                    break;
                }
                progress(&format!("{} (kernel, one process per tenant)", setup.name()));
                let report = peers.run(setup, &plan.tenants, &opts)?;
                runs.push(RunEntry { side: Side::Kernel, report, verdict: None });
            }
        }
        self.judge_all(ctx.opts, ctx.calibration, &plan.tenants, &mut runs);
        let mut notes = plan.notes;
        let subjects: Vec<&RunEntry> = runs
            .iter()
            .filter(|r| r.side == Side::Ioshare && plan.subjects.iter().any(|c| c.name() == r.report.controller))
            .collect();
        let verdict = if subjects.is_empty() || subjects.len() < plan.subjects.len() {
            notes.push("interrupted before the controllers this scenario judges had run".into());
            Verdict::not_judged()
        } else {
            let vs: Vec<&Verdict> = subjects.iter().filter_map(|r| r.verdict.as_ref()).collect();
            Verdict {
                pass: vs.iter().all(|v| v.pass),
                value: vs[0].value,
                summary: subjects
                    .iter()
                    .zip(&vs)
                    .map(|(r, v)| format!("{}: {}", r.report.controller, v.summary))
                    .collect::<Vec<_>>()
                    .join("; "),
            }
        };
        Ok(ScenarioReport { name: self.name().into(), description: self.description().into(), runs, verdict, notes })
    }

    fn judge_all(self, opts: &BenchOptions, cal: &Calibration, tenants: &[TenantSpec], runs: &mut [RunEntry]) {
        let reference = |name: &str| runs.iter().find(|r| r.side == Side::Reference && r.report.controller == name);
        let solo = reference("solo").map(|r| r.report.tenants[0].lat_us.clone());
        let capacity = reference("capacity").map(|r| r.report.device.iops);
        let baseline = |side: Side, runs: &[RunEntry]| {
            let name = if side == Side::Kernel { KernelSetup::Plain.name() } else { Ctl::None.name() };
            runs.iter().find(|r| r.side == side && r.report.controller == name).map(|r| r.report.device.iops)
        };
        let baselines = (baseline(Side::Ioshare, runs), baseline(Side::Kernel, runs));
        for entry in runs.iter_mut().filter(|r| r.side != Side::Reference) {
            let base = if entry.side == Side::Kernel { baselines.1 } else { baselines.0 };
            let refs = References { solo: solo.clone(), capacity, baseline: base };
            entry.verdict = Some(self.judge(opts, cal, tenants, &entry.report, &refs));
        }
    }

    fn judge(
        self,
        opts: &BenchOptions,
        cal: &Calibration,
        tenants: &[TenantSpec],
        r: &RunReport,
        refs: &References,
    ) -> Verdict {
        let (a, b) = opts.weights;
        match self {
            Scenario::Proportional => {
                let target = a as f64 / b as f64;
                let ratio = r.tenants[0].iops / r.tenants[1].iops.max(1e-9);
                let dev = ratio / target - 1.0;
                Verdict {
                    pass: dev.abs() <= RATIO_TOLERANCE,
                    value: ratio,
                    summary: format!("IOPS ratio {ratio:.2} (target {target:.2} ±{:.0}%)", RATIO_TOLERANCE * 100.0),
                }
            }
            Scenario::WorkConserving => {
                let (qd1, sat) = (&r.tenants[0], &r.tenants[1]);
                let leftover = (refs.capacity.unwrap_or(cal.max_iops) - qd1.iops).max(1.0);
                let taken = sat.iops / leftover;
                let solo = |f: fn(&crate::report::LatencyUs) -> f64| {
                    refs.solo.as_ref().map_or(f64::NAN, |s| f(&qd1.lat_us) / f(s).max(1e-9))
                };
                let (p99x, p50x) = (solo(|l| l.p99), solo(|l| l.p50));
                Verdict {
                    pass: taken >= LEFTOVER_MIN && p99x <= P99_FACTOR_MAX,
                    value: taken,
                    summary: format!(
                        "saturating tenant took {:.0}% of the leftover (>= {:.0}%), QD1 p99 {:.2}x solo (<= {P99_FACTOR_MAX}), p50 {:.2}x",
                        taken * 100.0,
                        LEFTOVER_MIN * 100.0,
                        p99x,
                        p50x
                    ),
                }
            }
            Scenario::MixedCost => {
                let shares = cost_shares(cal, tenants, r);
                let fair = 1.0 / shares.len() as f64;
                let worst = shares.iter().map(|s| (s / fair - 1.0).abs()).fold(0.0, f64::max);
                let list = shares.iter().map(|s| format!("{:.0}%", s * 100.0)).collect::<Vec<_>>().join("/");
                Verdict {
                    pass: worst <= COST_TOLERANCE,
                    value: worst,
                    summary: format!(
                        "device-cost shares {list}, worst {:.0}% off the fair {:.0}% (<= {:.0}%)",
                        worst * 100.0,
                        fair * 100.0,
                        COST_TOLERANCE * 100.0
                    ),
                }
            }
            Scenario::Limits => {
                let limit = limit_iops(cal.max_iops) as f64;
                let t = &r.tenants[0];
                let dev = t.iops / limit - 1.0;
                Verdict {
                    pass: dev.abs() <= LIMIT_TOLERANCE,
                    value: t.iops,
                    summary: format!(
                        "{:.0} IOPS under a {limit:.0} IOPS limit ({:+.1}%, within ±{:.0}%), p50 {:.1} ms, p99 {:.1} ms",
                        t.iops,
                        dev * 100.0,
                        LIMIT_TOLERANCE * 100.0,
                        t.lat_us.p50 / 1000.0,
                        t.lat_us.p99 / 1000.0
                    ),
                }
            }
            Scenario::Overhead => {
                let rel = refs.baseline.map_or(f64::NAN, |b| r.device.iops / b.max(1e-9));
                Verdict {
                    pass: rel >= OVERHEAD_MIN,
                    value: rel,
                    summary: format!(
                        "{:.0} IOPS = {:.1}% of no control (>= {:.0}%), {:.0} ns CPU per IO",
                        r.device.iops,
                        rel * 100.0,
                        OVERHEAD_MIN * 100.0,
                        r.cpu.ns_per_io
                    ),
                }
            }
        }
    }
}

/// What a run is judged against: the reference runs and the no-control baseline of its side.
struct References {
    /// Latency of the latency-sensitive tenant alone.
    solo: Option<crate::report::LatencyUs>,
    /// IOPS of the saturating tenant alone.
    capacity: Option<f64>,
    /// IOPS with no control (ioshare's `none`, or the kernel's plain loop device).
    baseline: Option<f64>,
}

/// A total IOPS limit.
fn iops_limit(iops: u64) -> Limits {
    Limits::none().with(Knob::new(Unit::Iops, Scope::Total), KnobLimit::avg(iops))
}

/// The limit of the limits scenario: SPEC §9's 5000 IOPS, or a quarter of the device if it is slower.
fn limit_iops(max_iops: f64) -> u64 {
    5000.min((max_iops / 4.0) as u64).max(1)
}

/// Each tenant's share of the device cost of the IOs it completed, by the measured linear model.
/// Tenants are those of the run, each with one job that is random or sequential throughout.
pub fn cost_shares(cal: &Calibration, tenants: &[TenantSpec], r: &RunReport) -> Vec<f64> {
    let model = LinearModel::new(cal.model);
    let costs: Vec<f64> = tenants
        .iter()
        .zip(&r.tenants)
        .map(|(spec, t)| {
            let job = &spec.jobs[0];
            let random = job.pattern.is_random();
            t.reads as f64 * model.cost(Op::Read, job.block_size, random, false) as f64
                + t.writes as f64 * model.cost(Op::Write, job.block_size, random, false) as f64
        })
        .collect();
    let total: f64 = costs.iter().sum::<f64>().max(1e-9);
    costs.iter().map(|c| c / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{LatencyUs, TenantReport};
    use ioshare_core::iocost::qos::QosParams;
    use ioshare_core::ModelParams;

    fn cal() -> Calibration {
        Calibration {
            max_iops: 10_000.0,
            device_depth: 32,
            model: ModelParams::SSD_DFL,
            model_line: String::new(),
            writes_measured: true,
            qos: QosParams::default(),
        }
    }

    fn tenant(name: &str, iops: f64, p99: f64) -> TenantReport {
        TenantReport {
            name: name.into(),
            iops,
            reads: iops as u64,
            lat_us: LatencyUs { p99, ..LatencyUs::default() },
            ..TenantReport::default()
        }
    }

    fn report(tenants: Vec<TenantReport>) -> RunReport {
        let mut r = RunReport { tenants, ..RunReport::default() };
        r.device.iops = r.tenants.iter().map(|t| t.iops).sum();
        r
    }

    fn judge(s: Scenario, r: &RunReport, refs: &References) -> Verdict {
        let opts = BenchOptions::default();
        let ctx_tenants: Vec<TenantSpec> = r.tenants.iter().map(|t| reader(&t.name, 100, 1)).collect();
        s.judge(&opts, &cal(), &ctx_tenants, r, refs)
    }

    const NO_REFS: References = References { solo: None, capacity: None, baseline: None };

    #[test]
    fn proportional_passes_within_five_percent_of_the_weight_ratio() {
        let v =
            judge(Scenario::Proportional, &report(vec![tenant("a", 6000.0, 1.0), tenant("b", 3100.0, 1.0)]), &NO_REFS);
        assert!(v.pass && (v.value - 1.935).abs() < 0.001, "{v:?}");
        let v =
            judge(Scenario::Proportional, &report(vec![tenant("a", 6000.0, 1.0), tenant("b", 3200.0, 1.0)]), &NO_REFS);
        assert!(!v.pass && v.summary.contains("1.88") && v.summary.contains("target 2.00"), "{v:?}");
    }

    #[test]
    fn work_conservation_needs_the_leftover_and_the_solo_latency() {
        let solo = LatencyUs { p50: 50.0, p99: 100.0, ..LatencyUs::default() };
        let refs = References { solo: Some(solo), capacity: Some(10_000.0), baseline: None };
        let ok = report(vec![tenant("qd1", 1000.0, 120.0), tenant("sat", 8200.0, 900.0)]);
        let v = judge(Scenario::WorkConserving, &ok, &refs);
        assert!(v.pass && (v.value - 8200.0 / 9000.0).abs() < 1e-9, "{v:?}");
        let slow = report(vec![tenant("qd1", 1000.0, 140.0), tenant("sat", 8200.0, 900.0)]);
        assert!(!judge(Scenario::WorkConserving, &slow, &refs).pass, "p99 1.4x solo fails");
        let starved = report(vec![tenant("qd1", 1000.0, 120.0), tenant("sat", 7000.0, 900.0)]);
        assert!(!judge(Scenario::WorkConserving, &starved, &refs).pass, "78% of the leftover fails");
    }

    #[test]
    fn cost_shares_weigh_ios_by_the_model() {
        let specs = [
            TenantSpec::new("rand", 100, JobSpec::new(Pattern::RandRead, 4096, 1)),
            TenantSpec::new("seq", 100, JobSpec::new(Pattern::Read, 65536, 1)),
        ];
        let model = LinearModel::new(ModelParams::SSD_DFL);
        let (c4, c64) = (model.cost(Op::Read, 4096, true, false), model.cost(Op::Read, 65536, false, false));
        // Equal device cost: the sequential tenant completes fewer, costlier IOs.
        let n64 = 1_000_000u64;
        let n4 = n64 * c64 / c4;
        let r = report(vec![tenant("rand", n4 as f64, 1.0), tenant("seq", n64 as f64, 1.0)]);
        let shares = cost_shares(&cal(), &specs, &r);
        assert!((shares[0] - 0.5).abs() < 1e-3 && (shares[1] - 0.5).abs() < 1e-3, "{shares:?}");
    }

    #[test]
    fn limits_and_overhead_are_judged_against_their_yardsticks() {
        // Calibrated 10k IOPS: the limit is a quarter of it, 2500.
        let v = judge(Scenario::Limits, &report(vec![tenant("l", 2550.0, 1.0)]), &NO_REFS);
        assert!(v.pass && v.summary.contains("2500 IOPS limit"), "{v:?}");
        assert!(!judge(Scenario::Limits, &report(vec![tenant("l", 2700.0, 1.0)]), &NO_REFS).pass);
        let refs = References { baseline: Some(10_000.0), ..NO_REFS };
        assert!(judge(Scenario::Overhead, &report(vec![tenant("r", 9600.0, 1.0)]), &refs).pass);
        let v = judge(Scenario::Overhead, &report(vec![tenant("r", 9400.0, 1.0)]), &refs);
        assert!(!v.pass && v.summary.contains("94.0%"), "{v:?}");
    }

    #[test]
    fn scenarios_are_found_by_name() {
        assert_eq!(Scenario::names().len(), 5);
        for n in Scenario::names() {
            assert_eq!(Scenario::by_name(n).unwrap().name(), n);
        }
        assert!(Scenario::by_name("nope").is_none());
        assert_eq!(Scenario::WorkConserving.planned_runs(true), 6);
        assert_eq!(Scenario::Overhead.planned_runs(false), 12);
    }
}
