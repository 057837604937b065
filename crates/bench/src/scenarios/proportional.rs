//! `proportional`: two saturating 4 KiB random readers with weights A:B; judged by their IOPS ratio
//! against A/B (±[`RATIO_TOLERANCE`]). The subject is IOCost with its device-depth option; the
//! kernel-faithful IOCost still splits part of the device by queue depth and is shown
//! beside it.

use ioshare_engine::job::TenantSpec;
use ioshare_engine::report::RunReport;

use crate::calibrate::Calibration;
use crate::controllers::ControllerKind;
use crate::kernel::KernelSetup;
use crate::options::BenchOptions;
use crate::plan::{reader, Plan, Planned, References};
use crate::scenario::Described;
use crate::verdict::Verdict;

/// Proportional split tolerance: ±5% of the weight ratio (issue acceptance).
pub const RATIO_TOLERANCE: f64 = 0.05;

/// The scenario.
pub struct Proportional;

impl Described for Proportional {
    fn name(&self) -> &'static str {
        "proportional"
    }

    fn description(&self) -> &'static str {
        "two saturating 4 KiB random readers (QD64 each, --iodepth), weights A:B -> IOPS ratio A/B; IOCost \
         kernel-faithful and with the device-depth option (iocost+qd, the subject)"
    }
}

impl Planned for Proportional {
    fn plan(&self, opts: &BenchOptions, cal: &Calibration) -> Plan {
        let (a, b) = opts.weights;
        let share = |w: u32| ((cal.max_iops * w as f64 / (a + b) as f64) as u64).max(1);
        // QD64 each by default: the device saturates near QD32, and a tenant entitled to 2/3 of it
        // needs outstanding IOs to spare when the other's IO lengthens the device queue (at QD32 the
        // high tenant ran out of IOs, not budget: 1.87:1).
        let tenants = vec![reader("high", a, opts.iodepth), reader("low", b, opts.iodepth)];
        Plan {
            kernel: vec![
                KernelSetup::Bfq,
                KernelSetup::ReadIopsLimits(vec![share(a), share(b)]),
                KernelSetup::IoCost,
                KernelSetup::Agent { model: cal.model, qos: cal.qos },
            ],
            ..Plan::new(
                tenants,
                vec![ControllerKind::None, ControllerKind::IoCost, ControllerKind::IoCostQd],
                vec![ControllerKind::IoCostQd],
            )
        }
    }

    fn judge(
        &self,
        opts: &BenchOptions,
        _: &Calibration,
        _: &[TenantSpec],
        r: &RunReport,
        refs: &References,
    ) -> Verdict {
        let (a, b) = opts.weights;
        let target = a as f64 / b as f64;
        let ratio = r.tenants[0].iops / r.tenants[1].iops.max(1e-9);
        let dev = ratio / target - 1.0;
        // Beside the verdict, how full the run kept the device: its total and mean IOs in flight
        // against no control's (the total moves with other users' IO on a shared disk; the IOs in
        // flight say whether the controller left the device idle).
        let total = refs
            .baseline
            .map_or(String::new(), |b| format!(", total {:.0}% of no control", r.device.iops * 100.0 / b.max(1e-9)));
        Verdict {
            pass: dev.abs() <= RATIO_TOLERANCE,
            value: ratio,
            summary: format!(
                "IOPS ratio {ratio:.2} (target {target:.2} ±{:.0}%){total}, {:.1} IOs in flight",
                RATIO_TOLERANCE * 100.0,
                r.device.avg_inflight
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::{judge, report, tenant, NO_REFS};

    #[test]
    fn proportional_passes_within_five_percent_of_the_weight_ratio() {
        let v = judge(&Proportional, &report(vec![tenant("a", 6000.0, 1.0), tenant("b", 3100.0, 1.0)]), &NO_REFS);
        assert!(v.pass && (v.value - 1.935).abs() < 0.001, "{v:?}");
        let v = judge(&Proportional, &report(vec![tenant("a", 6000.0, 1.0), tenant("b", 3200.0, 1.0)]), &NO_REFS);
        assert!(!v.pass && v.summary.contains("1.88") && v.summary.contains("target 2.00"), "{v:?}");
        // With a baseline, the total against it is shown (not judged).
        let refs = References { baseline: Some(10_000.0), ..NO_REFS };
        let mut r = report(vec![tenant("a", 6000.0, 1.0), tenant("b", 3000.0, 1.0)]);
        r.device.iops = 9000.0;
        let v = judge(&Proportional, &r, &refs);
        assert!(v.pass && v.summary.contains("total 90% of no control"), "{v:?}");
    }

    #[test]
    fn it_plans_three_controllers_and_four_kernel_setups() {
        let plan = Proportional.plan(&BenchOptions::default(), &crate::plan::fixtures::cal());
        assert_eq!(plan.runs(None, false), 3);
        assert_eq!(plan.kernel.len(), 4);
    }
}
