//! From a group's budget to blk-throttle limits.
//!
//! The planner gives each group the absolute device time it may use over the next period
//! ([`ioshare_core::IoCost::budget`]). blk-throttle limits IOs and bytes per second per direction, so
//! the budget is split between reads and writes by the cost each direction used last period (an
//! unused direction keeps [`MIN_DIRECTION_SHARE`] so a change of mix shows up within a period), and
//! each part is divided by that direction's average cost per IO (a 4 KiB random IO if it did none):
//!
//! `iops = budget × share / cost_per_io / period`, `bps = iops × bytes_per_io`.
//!
//! Both bind at the same point for the mix just seen; if IOs grow, bps binds first, if they shrink,
//! iops does — in either case the next period re-measures. A group that is the only active one on the
//! device, or not active, gets no limit (a cgroup alone is not limited); fixed caps from the
//! configuration are applied on top (`*-total` caps bound each direction). Values are rounded to
//! three significant digits, and limits within [`KEEP_WITHIN`] of those in force are kept
//! ([`settle`]): blk-throttle starts a new slice whenever a limit is written, and a new slice lets
//! the group dispatch a whole slice's allowance at once — a burst above the limit, then queueing at
//! the device — so rewriting a limit every period for a few percent of budget jitter made the limit
//! looser and the latency worse than keeping it.

use std::time::Duration;

use ioshare_core::limit::{Knob, Scope, Unit};
use ioshare_core::{CostModel, Limits, Op};

use crate::cgroups::hierarchy::Throttle;

/// Share of a group's budget a direction it did not use last period may still take.
pub const MIN_DIRECTION_SHARE: f64 = 0.25;
/// Smallest IOPS limit written (a zero would mean "no limit" to the kernel).
pub const MIN_IOPS: u64 = 10;

/// Relative change below which the limits in force are kept rather than rewritten.
pub const KEEP_WITHIN: f64 = 0.04;

/// The limits to write when `current` are in force and `planned` are wanted: `current` if every
/// value of `planned` is within `keep` (a fraction, [`KEEP_WITHIN`] on cgroup v1) of it (a value
/// going to or from "no limit" is always a change, so an unlimited `current` is kept only for an
/// unlimited `planned`), else `planned`.
pub fn settle(current: &Throttle, planned: Throttle, keep: f64) -> Throttle {
    let near = |c: u64, p: u64| (c == 0) == (p == 0) && (c as f64 - p as f64).abs() <= keep * c as f64;
    let all = near(current.riops, planned.riops)
        && near(current.wiops, planned.wiops)
        && near(current.rbps, planned.rbps)
        && near(current.wbps, planned.wbps);
    if all {
        *current
    } else {
        planned
    }
}

/// What a group did in one direction last period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirUsage {
    /// IOs.
    pub ios: u64,
    /// Bytes.
    pub bytes: u64,
    /// Absolute cost charged, vtime units.
    pub cost: u64,
}

/// The limits for a group with `budget` (absolute vtime units over `period`; `None`: no limit),
/// given last period's `usage` per direction, the device `model` and the fixed `caps`.
pub fn throttle_for<M: CostModel>(
    budget: Option<u64>,
    usage: &[DirUsage; 2],
    model: &M,
    period: Duration,
    caps: &Limits,
) -> Throttle {
    let mut t = match budget {
        None => Throttle::default(),
        Some(budget) => {
            let total = (usage[0].cost + usage[1].cost) as f64;
            let per_dir = |op: Op| {
                let u = &usage[op.index()];
                let share = if total > 0.0 { u.cost as f64 / total } else { 0.5 }.max(MIN_DIRECTION_SHARE);
                let (cost_per_io, bytes_per_io) = if u.ios > 0 {
                    (u.cost as f64 / u.ios as f64, u.bytes as f64 / u.ios as f64)
                } else {
                    (model.cost(op, 4096, true, false) as f64, 4096.0)
                };
                let iops = (budget as f64 * share / cost_per_io.max(1.0) / period.as_secs_f64()).max(MIN_IOPS as f64);
                (round3(iops), round3(iops * bytes_per_io.max(512.0)))
            };
            let ((riops, rbps), (wiops, wbps)) = (per_dir(Op::Read), per_dir(Op::Write));
            Throttle { riops, wiops, rbps, wbps }
        }
    };
    let cap = |v: &mut u64, unit: Unit, op: Scope| {
        for scope in [op, Scope::Total] {
            let c = caps.knob(Knob::new(unit, scope)).avg;
            if c != 0 && (*v == 0 || *v > c) {
                *v = c;
            }
        }
    };
    cap(&mut t.riops, Unit::Iops, Scope::Read);
    cap(&mut t.wiops, Unit::Iops, Scope::Write);
    cap(&mut t.rbps, Unit::Bps, Scope::Read);
    cap(&mut t.wbps, Unit::Bps, Scope::Write);
    t.riops = t.riops.min(u64::from(u32::MAX));
    t.wiops = t.wiops.min(u64::from(u32::MAX));
    t
}

/// Rounds to three significant digits (at least 1).
fn round3(v: f64) -> u64 {
    if v < 1000.0 {
        return v.round().max(1.0) as u64;
    }
    let scale = 10f64.powi(v.log10().floor() as i32 - 2);
    ((v / scale).round() * scale) as u64
}

#[cfg(test)]
mod tests {
    use ioshare_core::iocost::aggregate::aggregate_cost;
    use ioshare_core::{LinearModel, ModelParams, NSEC_PER_SEC};

    use super::*;

    fn model() -> LinearModel {
        LinearModel::new(ModelParams::SSD_DFL)
    }

    fn reads(ios: u64) -> [DirUsage; 2] {
        let m = model();
        [
            DirUsage { ios, bytes: ios * 4096, cost: aggregate_cost(&m, Op::Read, ios, ios * 4096, true) },
            DirUsage::default(),
        ]
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_reader_gets_its_budget_in_iops_and_bytes() {
        // Budget: a third of a second of device time per second; a 4 KiB random read costs 1/8518 s.
        let vtime_sec = NSEC_PER_SEC as f64 * ioshare_core::iocost::model::VTIME_PER_NSEC as f64;
        let budget = (vtime_sec / 3.0) as u64;
        let t = throttle_for(Some(budget), &reads(1000), &model(), SECOND, &Limits::default());
        let expect = 8518.0 / 3.0;
        assert!((t.riops as f64 / expect - 1.0).abs() < 0.02, "{t:?} vs {expect}");
        assert_eq!(t.rbps, round3(t.riops as f64 * 4096.0));
        // Writes were not used: they keep a quarter of the budget at the write cost.
        assert!(t.wiops > 0 && t.wbps > 0);
    }

    #[test]
    fn no_budget_means_no_limit_but_caps_hold() {
        let caps: Limits = "iops-read=500,bps-total=1000000".parse().unwrap();
        assert_eq!(throttle_for(None, &reads(10), &model(), SECOND, &Limits::default()), Throttle::default());
        let t = throttle_for(None, &reads(10), &model(), SECOND, &caps);
        assert_eq!(t, Throttle { riops: 500, wiops: 0, rbps: 1_000_000, wbps: 1_000_000 });
        let t = throttle_for(Some(u64::MAX / 4), &reads(10), &model(), SECOND, &caps);
        assert_eq!((t.riops, t.rbps), (500, 1_000_000), "caps bind below a large budget");
    }

    #[test]
    fn an_empty_budget_still_writes_a_limit() {
        let t = throttle_for(Some(0), &reads(10), &model(), SECOND, &Limits::default());
        assert_eq!(t.riops, MIN_IOPS, "0 would lift the limit");
    }

    #[test]
    fn small_changes_keep_the_limits_in_force() {
        let current = Throttle { riops: 10_000, wiops: 2_000, rbps: 40_000_000, wbps: 8_000_000 };
        let close = Throttle { riops: 10_300, wiops: 1_950, ..current };
        assert_eq!(settle(&current, close, KEEP_WITHIN), current);
        let far = Throttle { riops: 10_500, ..current };
        assert_eq!(settle(&current, far, KEEP_WITHIN), far, "5% is a change");
        let lifted = Throttle { rbps: 0, ..current };
        assert_eq!(settle(&current, lifted, KEEP_WITHIN), lifted, "lifting a limit is a change");
        assert_eq!(settle(&Throttle::default(), current, KEEP_WITHIN), current, "no limit in force: write");
    }

    #[test]
    fn rounding_keeps_three_digits() {
        assert_eq!(round3(123_456.0), 123_000);
        assert_eq!(round3(999.4), 999);
        assert_eq!(round3(0.2), 1);
    }
}
