//! Step 4, budget: after the planner's period ([`ioshare_core::IoCost::end_period`]: hweights,
//! donation, vrate), what each group may use over the next period.
//!
//! A group alone on the device (or the sole uncapped one beside capped groups, [`super::classify`]) gets no budget and
//! so no limit. Any other gets the planner's budget, at least [`MIN_BUDGET_SHARE`] of what its in-use
//! share earns in a period — a group that overran (the device did more than vrate promised, or it
//! was found mid-burst) pays back over several periods instead of being stopped for one — and a
//! donor at least [`DONOR_HEADROOM`] times the most it did in a period in the last second: in the kernel a donor is not
//! capped (its next IO past its budget makes it short), so its limit must leave room for its bursts.
//! A group the device gave more than its weights' part of the work gives its carried share correction
//! of its budget to the groups it squeezed ([`super::classify`]), before the floor.

use ioshare_core::iocost::model::VTIME_PER_NSEC;
use ioshare_core::{GroupStats, IoCost, Nanos, Stats};

use super::device::Tracked;
use super::donor::donating;

/// A group's budget for a period is at least this share of what its in-use share earns in one.
pub(crate) const MIN_BUDGET_SHARE: f64 = 0.5;

/// A donor's budget for a period is at least this many times the most it did in a period in the
/// last second.
pub(crate) const DONOR_HEADROOM: f64 = 1.5;

/// Group `t`'s budget for the next `horizon` (absolute cost), or `None` when it gets no limit from
/// one; `g` is its stats and `stats` the planner's after the period.
pub(super) fn budget(
    ctl: &mut IoCost,
    now: Nanos,
    horizon: Nanos,
    t: &Tracked,
    g: &GroupStats,
    stats: &Stats,
) -> Option<u64> {
    if t.gets_no_limit(g) {
        return None;
    }
    let horizon_vtime = horizon as f64 * VTIME_PER_NSEC as f64;
    let mut floor = (MIN_BUDGET_SHARE * g.hweight_inuse * stats.device.vrate_pct / 100.0 * horizon_vtime) as u64;
    if donating(g) {
        floor = floor.max((DONOR_HEADROOM * t.recent.iter().copied().fold(0.0, f64::max)) as u64);
    }
    // The correction is per planning period, which is the horizon the agent plans for.
    ctl.budget(now, t.id, horizon).map(|b| ((b as f64 - t.share_correction).max(0.0) as u64).max(floor))
}
