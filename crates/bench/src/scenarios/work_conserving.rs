//! `work-conserving`: a high-weight QD1 reader with think time beside a saturating low-weight
//! reader. Each controller's point (QD1 p99 ÷ solo, share of the leftover capacity used) must lie
//! on the device's own frontier ([`crate::frontier`]: the uncontrolled neighbour swept over queue
//! depths 1..32) within [`frontier::ON_FRONTIER`], and no kernel peer may dominate it. The subjects
//! are IOCost with p99 targets of 2× and 4× solo and the device-depth option; the kernel-faithful
//! rows cannot hold the device's queue short enough to reach the frontier and are shown.
//! A subject that misses its p99 target fails, unless the sweep shows the device cannot meet it
//! ([`frontier::check_target`]); then its verdict says why.

use ioshare_core::NSEC_PER_USEC;
use ioshare_engine::job::{JobSpec, Pattern, TenantSpec};
use ioshare_engine::report::RunReport;

use crate::calibrate::Calibration;
use crate::controllers::ControllerKind;
use crate::frontier::{self, TargetCheck, Yardsticks};
use crate::kernel::KernelSetup;
use crate::options::BenchOptions;
use crate::plan::{reader, Plan, Planned, References};
use crate::scenario::Described;
use crate::verdict::{RunEntry, Side, Verdict};

/// The scenario.
pub struct WorkConserving;

/// The references, the sweep and the controllers run in this many interleaved rounds, each point
/// the medians over its rounds. A sweep measured a minute before its subjects judged the disk's
/// drift: in five quiet runs on this machine with one round, the sweep's p99 at one depth moved
/// 2–3× from one second to the next and six of ten subject rows fell 15–45% below a frontier drawn
/// in quieter seconds.
const WORK_CONSERVING_ROUNDS: usize = 3;

/// The subjects: IOCost with a p99 target and the device-depth option.
const SUBJECTS: [ControllerKind; 2] = [ControllerKind::IoCostP99Qd(2), ControllerKind::IoCostP99Qd(4)];

/// The latency-sensitive tenant: QD1 random 4 KiB reads with 100 µs of think time.
fn latency_sensitive(weight: u32) -> TenantSpec {
    TenantSpec::new("qd1", weight, JobSpec::new(Pattern::RandRead, 4096, 1).think(100 * NSEC_PER_USEC))
}

impl Described for WorkConserving {
    fn name(&self) -> &'static str {
        "work-conserving"
    }

    fn description(&self) -> &'static str {
        "high-weight QD1 reader with 100 us think time vs saturating low-weight reader -> each controller's \
         (QD1 p99 / solo, leftover used) lies on the device's frontier (the uncontrolled neighbour at QD \
         1..32) and no kernel peer dominates; IOCost with p99 targets of 2x and 4x solo, kernel-faithful \
         and with the device-depth option (+qd, the subjects)"
    }
}

impl Planned for WorkConserving {
    fn plan(&self, opts: &BenchOptions, cal: &Calibration) -> Plan {
        let (a, b) = opts.weights;
        let share = |w: u32| ((cal.max_iops * w as f64 / (a + b) as f64) as u64).max(1);
        let reference = [
            ("solo".to_string(), vec![latency_sensitive(a)]),
            ("capacity".to_string(), vec![reader("saturating", b, 32)]),
        ]
        .into_iter()
        .chain(
            frontier::DEPTHS
                .iter()
                .map(|&d| (frontier::sweep_name(d), vec![latency_sensitive(a), reader("saturating", b, d)])),
        )
        .collect();
        Plan {
            reference,
            rounds: WORK_CONSERVING_ROUNDS,
            kernel: vec![KernelSetup::Bfq, KernelSetup::ReadIopsLimits(vec![share(a), share(b)]), KernelSetup::IoCost],
            ..Plan::new(
                vec![latency_sensitive(a), reader("saturating", b, 32)],
                vec![
                    ControllerKind::None,
                    ControllerKind::IoCost,
                    ControllerKind::IoCostP99(2),
                    ControllerKind::IoCostP99(4),
                    ControllerKind::IoCostP99Qd(2),
                    ControllerKind::IoCostP99Qd(4),
                ],
                SUBJECTS.to_vec(),
            )
        }
    }

    fn judge(
        &self,
        _: &BenchOptions,
        cal: &Calibration,
        _: &[TenantSpec],
        r: &RunReport,
        refs: &References,
    ) -> Verdict {
        let solo_p99 = refs.solo.as_ref().map_or(f64::NAN, |s| s.p99);
        let p = frontier::point(&r.controller, r, solo_p99, refs.capacity.unwrap_or(cal.max_iops));
        frontier::verdict(&p, &refs.frontier)
    }

    /// Fails every ioshare run whose point a kernel peer dominates, and every subject that missed its
    /// p99 target the device could meet (saying why where it could not), and describes the sweep.
    fn review(&self, runs: &mut [RunEntry], notes: &mut Vec<String>) {
        let Some(yard) = Yardsticks::from_runs(runs) else { return };
        let kernel: Vec<frontier::Point> =
            runs.iter().filter(|r| r.side == Side::Kernel).map(|r| yard.point(r)).collect();
        for entry in runs.iter_mut().filter(|r| r.side == Side::Ioshare) {
            let p = yard.point(entry);
            let subject = SUBJECTS.iter().find(|k| k.name() == entry.report.controller);
            if let (Some(v), Some(factor)) = (entry.verdict.as_mut(), subject.and_then(|k| k.p99_factor())) {
                target_verdict(v, &yard, factor, p.p99x);
            }
            if let (Some(v), Some(k)) = (entry.verdict.as_mut(), kernel.iter().find(|k| frontier::dominates(k, &p))) {
                v.pass = false;
                v.summary.push_str(&format!(
                    "; dominated by {} ({:.0}% at {:.2}x)",
                    k.label,
                    k.leftover * 100.0,
                    k.p99x
                ));
            }
        }
        if !yard.sweep.is_empty() {
            notes.push(yard.describe());
        }
    }
}

/// Adds to subject verdict `v` (at QD1 p99 `p99x` × solo) how it fared against its target of
/// `factor` × solo: failed when the sweep shows the device could have held it, else why it could not.
fn target_verdict(v: &mut Verdict, yard: &Yardsticks, factor: u32, p99x: f64) {
    let at = |p: &frontier::Point| {
        format!("{} {:.0}% at {:.2}x", p.label.trim_start_matches("neighbour-"), p.leftover * 100.0, p.p99x)
    };
    let spread = format!(
        "solo p99 {:.2} ms is {:.0}x its p50 {:.2} ms",
        yard.solo_p99 / 1000.0,
        yard.solo_p99 / yard.solo_p50.max(1e-9),
        yard.solo_p50 / 1000.0
    );
    let Some(check) = frontier::check_target(&yard.sweep, f64::from(factor), p99x) else { return };
    let why = match check {
        TargetCheck::Held => return,
        TargetCheck::Unreachable(first) => format!(
            "; its {factor}x p99 target is beyond this device: no neighbour depth kept the QD1 reader within it \
             (shallowest: {}; {spread})",
            at(&first)
        ),
        TargetCheck::Unsteady(a, b) => format!(
            "; its {factor}x p99 target has no stable point on this device: the QD1 reader's p99 does not grow \
             with the neighbour's depth ({} then {}; {spread})",
            at(&a),
            at(&b)
        ),
        TargetCheck::Missed(met) => {
            v.pass = false;
            format!("; missed its {factor}x p99 target, which the uncontrolled neighbour at {} held", at(&met))
        }
    };
    v.summary.push_str(&why);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::{judge, report, tenant, NO_REFS};
    use ioshare_engine::report::LatencyUs;

    #[test]
    fn work_conservation_is_judged_against_the_frontier_at_its_latency() {
        let solo = LatencyUs { p50: 50.0, p99: 100.0, ..LatencyUs::default() };
        let frontier = vec![(1.0, 0.0), (2.0, 0.6), (4.0, 0.9)];
        let refs = References { solo: Some(solo), capacity: Some(10_000.0), frontier, ..NO_REFS };
        // QD1 p99 300 us = 3x solo, where the frontier has 75% of the 9000 IOPS left.
        let on = report(vec![tenant("qd1", 1000.0, 300.0), tenant("sat", 6300.0, 900.0)]);
        let v = judge(&WorkConserving, &on, &refs);
        assert!(v.pass && (v.value - 0.7).abs() < 1e-9, "70% is within 10% of 75%: {v:?}");
        let below = report(vec![tenant("qd1", 1000.0, 300.0), tenant("sat", 5800.0, 900.0)]);
        assert!(!judge(&WorkConserving, &below, &refs).pass, "64% is 14% below the frontier");
        let fast = report(vec![tenant("qd1", 1000.0, 110.0), tenant("sat", 600.0, 900.0)]);
        assert!(judge(&WorkConserving, &fast, &refs).pass, "at 1.1x the frontier has only 6%");
    }

    #[test]
    fn a_subject_missing_its_target_fails_unless_the_sweep_says_the_device_cannot() {
        let point = |label: &str, p99x: f64| frontier::Point { label: sweep_name_of(label), p99x, leftover: 1.0 };
        let yard = |sweep: Vec<frontier::Point>| Yardsticks {
            solo_p99: 7600.0,
            solo_p50: 100.0,
            capacity: 3000.0,
            frontier: frontier::envelope(&sweep),
            sweep,
        };
        let verdict = || Verdict { pass: true, value: 1.0, summary: "leftover used 100%".into() };
        let mut held = verdict();
        target_verdict(&mut held, &yard(vec![point("qd1", 1.5)]), 2, 2.0);
        assert_eq!(held, verdict(), "held: nothing to add");
        let mut beyond = verdict();
        target_verdict(&mut beyond, &yard(vec![point("qd1", 2.9), point("qd2", 4.0)]), 2, 5.45);
        assert!(beyond.pass, "the device cannot: judged on the frontier alone");
        assert_eq!(
            beyond.summary,
            "leftover used 100%; its 2x p99 target is beyond this device: no neighbour depth kept the QD1 reader \
             within it (shallowest: qd1 100% at 2.90x; solo p99 7.60 ms is 76x its p50 0.10 ms)"
        );
        let mut unsteady = verdict();
        target_verdict(&mut unsteady, &yard(vec![point("qd1", 2.9), point("qd2", 1.0), point("qd8", 13.7)]), 2, 6.64);
        assert!(unsteady.pass && unsteady.summary.contains("no stable point on this device"), "{unsteady:?}");
        assert!(unsteady.summary.contains("(qd1 100% at 2.90x then qd2 100% at 1.00x;"), "{unsteady:?}");
        let mut missed = verdict();
        target_verdict(&mut missed, &yard(vec![point("qd1", 1.5), point("qd2", 2.5)]), 2, 3.0);
        assert!(!missed.pass, "the device could");
        assert!(missed.summary.ends_with("which the uncontrolled neighbour at qd1 100% at 1.50x held"), "{missed:?}");
    }

    fn sweep_name_of(label: &str) -> String {
        frontier::sweep_name(label.trim_start_matches("qd").parse().unwrap())
    }

    #[test]
    fn it_plans_six_controllers_two_references_and_the_sweep_in_every_round() {
        let plan = WorkConserving.plan(&BenchOptions::default(), &crate::plan::fixtures::cal());
        assert_eq!(plan.runs(None, false), (6 + 2 + frontier::DEPTHS.len()) * WORK_CONSERVING_ROUNDS);
    }
}
