//! `overhead`: one saturating reader (QD32) with each controller against no control, in
//! [`OVERHEAD_ROUNDS`] interleaved rounds; a controller keeps at least [`OVERHEAD_MIN`] of the
//! uncontrolled IOPS (median over the rounds of its IOPS over no control's in the same round). The
//! same job runs under fio each round, as a reference engine (information only). With `--observe`,
//! no control runs once more per round with the eBPF observer attached and detached in turns
//! ([`OBSERVED_NONE`], see [`crate::observe`]): that row is judged against [`OBSERVE_OVERHEAD_MIN`].

use ioshare_engine::job::TenantSpec;
use ioshare_engine::report::RunReport;

use crate::calibrate::Calibration;
use crate::controllers::ControllerKind;
use crate::kernel::KernelSetup;
use crate::observe::{OBSERVED_NONE, OBSERVE_OVERHEAD_MIN};
use crate::options::BenchOptions;
use crate::plan::{iops_limit, reader, Plan, Planned, References};
use crate::scenario::Described;
use crate::verdict::Verdict;

/// A controller keeps at least this share of the uncontrolled IOPS (issue acceptance; goal 98%).
pub const OVERHEAD_MIN: f64 = 0.95;
/// The runs are split into this many interleaved rounds; each run is judged by the median over the
/// rounds of its IOPS over no control's in the same round, so neither a burst of neighbour activity
/// on a shared machine nor drift between rounds decides the comparison. Seven short rounds rather
/// than three long ones in the same time: the controllers' ratios spread 91.6-111.2% over three
/// default runs with three rounds, 94.1-103.8% with seven (this machine's disk moves by several %
/// from one second to the next, so more pairs judge better than longer ones).
pub const OVERHEAD_ROUNDS: usize = 7;

/// The scenario.
pub struct Overhead;

impl Described for Overhead {
    fn name(&self) -> &'static str {
        "overhead"
    }

    fn description(&self) -> &'static str {
        "one saturating reader (QD32): maximum IOPS with each controller vs no control"
    }
}

impl Planned for Overhead {
    fn plan(&self, _: &BenchOptions, cal: &Calibration) -> Plan {
        // Limits far above the device, so that the limiters only add their bookkeeping.
        let tenants = vec![reader("reader", 100, 32).limited(iops_limit((cal.max_iops * 100.0) as u64))];
        Plan {
            kernel: vec![KernelSetup::Plain, KernelSetup::Bfq],
            rounds: OVERHEAD_ROUNDS,
            fio_reference: true,
            observer_overhead: true,
            ..Plan::new(
                tenants,
                vec![
                    ControllerKind::None,
                    ControllerKind::IoCost,
                    ControllerKind::IoCostQd,
                    ControllerKind::TokenBucket,
                    ControllerKind::LeakyBucket,
                ],
                vec![
                    ControllerKind::IoCost,
                    ControllerKind::IoCostQd,
                    ControllerKind::TokenBucket,
                    ControllerKind::LeakyBucket,
                ],
            )
        }
    }

    fn judge(&self, _: &BenchOptions, _: &Calibration, _: &[TenantSpec], r: &RunReport, refs: &References) -> Verdict {
        if r.controller == OBSERVED_NONE {
            let rel = refs.paired.unwrap_or(f64::NAN);
            return Verdict {
                pass: rel >= OBSERVE_OVERHEAD_MIN,
                value: rel,
                summary: format!(
                    "IOPS while the observer is attached = {:.1}% of while detached (geometric mean over \
                     alternating windows; observe overhead >= {:.0}%)",
                    rel * 100.0,
                    OBSERVE_OVERHEAD_MIN * 100.0
                ),
            };
        }
        let (rel, how) = match refs.paired {
            Some(p) => (p, "median round ratio; "),
            None => (refs.baseline.map_or(f64::NAN, |b| r.device.iops / b.max(1e-9)), ""),
        };
        Verdict {
            pass: rel >= OVERHEAD_MIN,
            value: rel,
            summary: format!(
                "{:.0} IOPS = {:.1}% of no control ({how}controller overhead >= {:.0}%), {:.0} ns CPU per IO",
                r.device.iops,
                rel * 100.0,
                OVERHEAD_MIN * 100.0,
                r.cpu.ns_per_io
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Comparison;
    use crate::plan::fixtures::{cal, judge, report, tenant, NO_REFS};
    use crate::plan::{judge_all, paired_figures, per_round_ratios};
    use crate::stats::median;
    use crate::verdict::{RunEntry, Side};
    use ioshare_engine::fio;

    #[test]
    fn controllers_are_judged_against_no_control() {
        let refs = References { baseline: Some(10_000.0), ..NO_REFS };
        assert!(judge(&Overhead, &report(vec![tenant("r", 9600.0, 1.0)]), &refs).pass);
        let v = judge(&Overhead, &report(vec![tenant("r", 9400.0, 1.0)]), &refs);
        assert!(!v.pass && v.summary.contains("94.0%") && v.summary.contains("(controller overhead >= 95%)"), "{v:?}");
    }

    #[test]
    fn the_observer_row_is_judged_by_the_observe_overhead_criterion_on_its_windows() {
        // The observed run's figure is its windows' estimate, whatever its IOPS against the baseline.
        let mut observed = report(vec![tenant("r", 980.0, 1.0)]);
        observed.controller = OBSERVED_NONE.into();
        let refs = References { baseline: Some(1250.0), paired: Some(0.98), ..NO_REFS };
        let v = judge(&Overhead, &observed, &refs);
        assert!(v.pass && (v.value - 0.98).abs() < 1e-12, "{v:?}");
        assert!(v.summary.contains("attached = 98.0% of while detached") && v.summary.contains(">= 97%"), "{v:?}");
        // 96% passes a controller's 95% but not the observer's 97%; no windows, no pass.
        let refs = References { paired: Some(0.96), ..NO_REFS };
        assert!(!judge(&Overhead, &observed, &refs).pass);
        assert!(judge(&Overhead, &report(vec![tenant("r", 980.0, 1.0)]), &refs).pass);
        assert!(!judge(&Overhead, &observed, &NO_REFS).pass);
    }

    #[test]
    fn paired_figures_take_controllers_by_their_round_median_and_the_observer_by_its_windows() {
        let runs =
            |iops: &[f64]| -> Vec<RunReport> { iops.iter().map(|&v| report(vec![tenant("r", v, 1.0)])).collect() };
        // Rounds of no control against a controller: 98%, 90%, 99% of the same round; median 98%.
        let ratios = per_round_ratios(&runs(&[1000.0, 2000.0, 1000.0]), &runs(&[980.0, 1800.0, 990.0]));
        assert_eq!(median(&ratios), Some(0.98));
        // Windows 90%, 100%, 100%: the median (100%) would pass 97%, the geometric mean (96.5%) does not;
        // a controller's rounds 90%, 100%, 100% are still judged by their median.
        let rounds = vec![runs(&[1000.0; 3]), runs(&[1.0; 3]), runs(&[900.0, 1000.0, 1000.0])];
        let windows: Vec<Comparison> =
            [0.9, 1.0, 1.0].iter().map(|&iops_ratio| Comparison { iops_ratio, extra_cpu_ns_per_io: None }).collect();
        let names = [ControllerKind::None.name(), OBSERVED_NONE, ControllerKind::TokenBucket.name()];
        let paired = paired_figures(names.into_iter(), &rounds, Some(0), &windows);
        assert_eq!(paired.len(), 3);
        assert!((paired[1].1 - 0.9f64.powf(1.0 / 3.0)).abs() < 1e-12, "{paired:?}");
        assert_eq!(paired[2], (ControllerKind::TokenBucket.name(), 1.0));
        assert!(paired_figures(names.into_iter(), &rounds, None, &windows).is_empty(), "no no-control row");

        let named = |name: &str| {
            let mut r = report(vec![tenant("r", 1000.0, 1.0)]);
            r.controller = name.into();
            RunEntry { side: Side::Ioshare, report: r, verdict: None }
        };
        let mut entries =
            vec![named(ControllerKind::None.name()), named(OBSERVED_NONE), named(ControllerKind::TokenBucket.name())];
        let tenants = [reader("r", 100, 1)];
        judge_all(&Overhead, &BenchOptions::default(), &cal(), &tenants, &paired, &mut entries);
        let observed = entries[1].verdict.clone().unwrap();
        assert!(!observed.pass && (observed.value - 0.9f64.powf(1.0 / 3.0)).abs() < 1e-12, "{observed:?}");
        let token = entries[2].verdict.clone().unwrap();
        assert!(token.pass && token.value == 1.0, "{token:?}");
    }

    #[test]
    fn it_runs_five_controllers_per_round_with_fio_and_the_observer_beside() {
        let plan = Overhead.plan(&BenchOptions::default(), &cal());
        let fio = OVERHEAD_ROUNDS * usize::from(fio::available());
        assert_eq!(plan.runs(None, false), 5 * OVERHEAD_ROUNDS + fio);
        assert_eq!(plan.runs(None, true), plan.runs(None, false) + OVERHEAD_ROUNDS);
    }
}
