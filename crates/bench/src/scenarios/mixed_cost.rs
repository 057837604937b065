//! `mixed-cost`: random and sequential readers and writers of equal weight; each tenant's share of
//! the device cost of the IOs it completed (by the measured linear model) must lie within
//! ±[`COST_TOLERANCE`] of the fair share; the summary also gives the sequential and the random
//! tenants' shares together. The only scenario that writes.
//!
//! The shares are only as right as the model: the calibration measures seqiops with IOs the block
//! layer does not merge ([`ioshare_engine::profile::measure`]); a model whose seqiops counted merged
//! requests (twice the IOs on this host) charges sequential IO half its cost, and IOCost then lets
//! the sequential tenants take more than their share ([docs/profile.md](../../../../docs/profile.md)
//! has the figures of both).

use ioshare_core::{CostModel, LinearModel, Op};
use ioshare_engine::job::{JobSpec, Pattern, TenantSpec};
use ioshare_engine::report::RunReport;

use crate::calibrate::Calibration;
use crate::controllers::ControllerKind;
use crate::kernel::KernelSetup;
use crate::options::BenchOptions;
use crate::plan::{Plan, Planned, References};
use crate::scenario::Described;
use crate::verdict::Verdict;

/// Every tenant's share of device cost within ±20% of the fair share (cost is judged by the quickly
/// measured model, which is itself good to roughly this much).
pub const COST_TOLERANCE: f64 = 0.20;

/// The scenario.
pub struct MixedCost;

impl Described for MixedCost {
    fn name(&self) -> &'static str {
        "mixed-cost"
    }

    fn description(&self) -> &'static str {
        "random 4 KiB and sequential 64 KiB readers and writers, equal weights -> equal shares of device \
         cost (by the measured model)"
    }

    fn writes(&self) -> bool {
        true
    }
}

impl Planned for MixedCost {
    fn plan(&self, _: &BenchOptions, _: &Calibration) -> Plan {
        let t = |name: &str, pattern, bs| TenantSpec::new(name, 100, JobSpec::new(pattern, bs, 16));
        let tenants = vec![
            t("rand-read", Pattern::RandRead, 4096),
            t("seq-read", Pattern::Read, 65536),
            t("rand-write", Pattern::RandWrite, 4096),
            t("seq-write", Pattern::Write, 65536),
        ];
        Plan {
            kernel: vec![KernelSetup::Bfq, KernelSetup::IoCost],
            ..Plan::new(tenants, vec![ControllerKind::None, ControllerKind::IoCost], vec![ControllerKind::IoCost])
        }
    }

    fn judge(
        &self,
        _: &BenchOptions,
        cal: &Calibration,
        tenants: &[TenantSpec],
        r: &RunReport,
        _: &References,
    ) -> Verdict {
        let shares = cost_shares(cal, tenants, r);
        let fair = 1.0 / shares.len() as f64;
        let worst = shares.iter().map(|s| (s / fair - 1.0).abs()).fold(0.0, f64::max);
        let list = shares.iter().map(|s| format!("{:.0}%", s * 100.0)).collect::<Vec<_>>().join("/");
        let sequential: f64 =
            tenants.iter().zip(&shares).filter(|(t, _)| !t.jobs[0].pattern.is_random()).map(|(_, s)| s).sum();
        Verdict {
            pass: worst <= COST_TOLERANCE,
            value: worst,
            summary: format!(
                "device-cost shares {list}, worst {:.0}% off the fair {:.0}% (<= {:.0}%); sequential {:.1}% : \
                 random {:.1}%",
                worst * 100.0,
                fair * 100.0,
                COST_TOLERANCE * 100.0,
                sequential * 100.0,
                (1.0 - sequential) * 100.0
            ),
        }
    }
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
    use crate::plan::fixtures::{cal, report, tenant};
    use ioshare_core::ModelParams;

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
}
