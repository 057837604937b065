//! Step 2, classify: what each group's period says of it, in the terms of the kernel's iocost — is it
//! short of budget (IO waiting somewhere), a donor, or held by a fixed cap of its own — and its
//! charge to the planner.
//!
//! The kernel sees each IO wait; the agent sees counters against the limits it wrote, so a group is:
//! - **capped** when a fixed cap of its own (its rule's or its pod's) held it ([`AT_LIMIT`] of the cap),
//!   or held it in the last [`WAITING_PERIODS`] and it still does IO: blk-throttle holds such IO before
//!   iocost would see it, so it is not short of budget and the weights split the rest among the others;
//! - **held** when the limit from its budget held it ([`AT_LIMIT`]; a donor only once it fills its
//!   limit, [`FILLS_LIMIT`]) — and **waiting** for [`WAITING_PERIODS`] after, as its IO may sit queued in
//!   blk-throttle where userspace cannot see it;
//! - **competing** when the device was busy and it got about its fair part of what the device did
//!   ([`COMPETES_AT_FAIR_SHARE`]), or it competed last period and kept competing: the device slowed,
//!   or the group still kept most of the IO in flight it had when it last got its fair part
//!   ([`KEEPS_DEPTH`]). Its IO waits at the device instead of at a limit. Its IO in flight is its
//!   rate times the device's mean latency (Little's law; every group's IO waits the same at a device
//!   that serves in order), so a saturating group keeps its depth whatever the device does: when the
//!   device dips to half its speed for a second, serving the groups by their depths (about 1:1 at
//!   equal depths), a group's rate and part of the work fall but its depth does not, where a donor's
//!   depth falls with its demand. When the groups' limits add up to more than the device does, a
//!   group held at its limit takes its limit's worth and the device squeezes the others below their
//!   fair part: those keep their depth and are still competing; a paced tenant never had the depth
//!   of a competing one.
//!
//! When the device, not the limits, split a period's work between the groups sharing it (competing or
//! held), each one's **share error** is what it did beyond its weights' part of what they did together;
//! each group carries a **share correction** ([`Tracked::share_correction`](super::device::Tracked)),
//! which [`super::budget`] moves from its next budget to the others'. Limits are rates, and a dip of
//! the host's disk does not fall on them evenly: a group held at its limit keeps its limit's worth
//! while the device squeezes the others, so a dip to a third of the device split two QD64 readers 1:1
//! (11.3k and 11.8k IOPS) with the high-weight one's limit at twice the other's. The correction adds
//! [`PAYBACK_GAIN`] of each period's error to what it carried ([`corrections`]): the group that got
//! too much gets less, the squeezed one the same more, the sum of the limits unchanged (so is the
//! total while the device is busy). Why half the error, carried, and not the whole of the last one:
//! where one group sits at its limit and the other takes what the device leaves, each unit moved
//! comes back one for one in the next error, so paying the whole last error made the split swing
//! every period — in the bench's agent run the low-weight group's limit went 17.6k, 37.1k, 21.8k,
//! 29.9k IOPS period after period, the two together at 89% of what limits at 2:1 get there. Carried,
//! half the error a write of the limits converges on the weights' split, halving what is left of it
//! each write. Half *per write*, not per period: on cgroup v2 a group's `io.max` is rewritten at most
//! once a second ([`super::io_max`]), and a correction that kept adding half of each period's error
//! while the limit in force stayed as written grew to the whole of a group's part before the first
//! write showed its effect — in the lab guest the two readers' limits went from 2:1 to 7:1 and then
//! 1:2, the split over the run 1.6. So each period adds [`PAYBACK_GAIN`] divided by the periods
//! between two writes ([`super::io_max::periods_per_write`]).
//! A period the limits split (not the device) halves the correction; a group no longer sharing drops it.
//!
//! A group held, competing or waiting is charged as short of budget. One group doing IO beside groups
//! held by caps of their own is the *sole uncapped* one: nothing is left for the weights to split, so it gets no limit
//! (as a group alone) and is short only when held. The device counts as holding groups back
//! (*device-bound*, the input of [`super::follow`]) when a competing group fell short of its limit.

use std::collections::HashMap;

use ioshare_core::iocost::aggregate::Charge;
use ioshare_core::Stats;

use super::device::DevicePlanner;
use super::donor::donating;
use super::read::DevicePeriod;
use super::window::remember;
use crate::backend::throttle::{throttle_for, DirUsage};
use crate::cgroups::hierarchy::Throttle;

/// Share of a limit a group must use in a period to count as held by it: blk-throttle enforces in
/// slices and lets a group at its limit through at 80–97% of it in a 100 ms period.
pub(crate) const AT_LIMIT: f64 = 0.8;

/// Share of its limit a group must use to count as filling it: a donor is held only then, and a
/// competing group below it was held back by the device too.
pub(crate) const FILLS_LIMIT: f64 = 0.97;

/// Share of a fixed cap of its own from which a group is not among those the weights split the
/// device among.
pub(crate) const NEAR_OWN_CAP: f64 = 0.5;

/// Share of its fair part of a busy device's work a group must get to count as competing for it.
pub(crate) const COMPETES_AT_FAIR_SHARE: f64 = 0.9;

/// Share of the IO it had in flight when it last got its fair part of a busy device's work that a
/// group which competed last period must still have to keep competing. Two QD64 readers of a loop
/// device here, weights 2:1: a dip to 40% of the device's work cut the high-weight one's rate to a
/// third (the device split them 1:1) while its depth stayed at 42–56 IOs, as before the dip (38–63);
/// a donor whose demand drops to a tenth loses 90% of its depth at once.
pub(crate) const KEEPS_DEPTH: f64 = 0.5;

/// Periods a group held at its limit may then stay below it and still count as waiting there.
pub(crate) const WAITING_PERIODS: u32 = 3;

/// Share of the share error added to a group's carried correction per write of its limits (see the
/// module comment).
pub(crate) const PAYBACK_GAIN: f64 = 0.5;

/// How far over its budget a group held at its limit is charged at most: blk-throttle pays its own
/// bursts back in the periods after, so more would be charged twice.
pub(crate) const HELD_OVERSHOOT_CHARGED: f64 = 0.1;

/// What a group's period says of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct GroupState {
    /// Its IO waited at the busy device (it got its fair part of the work).
    pub competing: bool,
    /// The limit from its budget held it.
    pub held: bool,
    /// A fixed cap of its own held it.
    pub capped: bool,
    /// It was held lately and may have IO queued at its limit.
    pub waiting: bool,
}

impl GroupState {
    /// Whether the planner is told it is short of budget.
    pub fn short(&self) -> bool {
        self.competing || self.held || self.waiting
    }
}

/// The classification of one period.
#[derive(Debug, Default)]
pub(super) struct Classified {
    /// Each present group's state.
    pub states: HashMap<String, GroupState>,
    /// The charges to the planner, one per present group.
    pub charges: Vec<Charge>,
    /// The only group doing IO that no fixed cap of its own held, if it is the only one.
    pub sole_uncapped: Option<String>,
    /// A competing group fell short of its limit: the device, not a limit, held it back.
    pub device_bound: bool,
    /// A competing group got less than [`AT_LIMIT`] of its limit.
    pub well_short_of_limit: bool,
    /// Groups competing or held at their limits: more than one, and how the device serves them
    /// decides their split.
    pub nr_sharing: usize,
}

/// Whether usage over `secs` reached `share` of any limit in force.
pub(crate) fn held_back(t: &Throttle, usage: &[DirUsage; 2], secs: f64, share: f64) -> bool {
    let at = |used: u64, limit: u64| limit != 0 && used as f64 >= share * limit as f64 * secs;
    at(usage[0].ios, t.riops) || at(usage[1].ios, t.wiops) || at(usage[0].bytes, t.rbps) || at(usage[1].bytes, t.wbps)
}

impl DevicePlanner {
    /// Classifies each present group of `paths` over `period`, given the planner's state `before`
    /// the period, what the groups did together (`delivered`), and how many periods apart a group's
    /// limits are written at most often (`periods_per_write`).
    pub(super) fn classify(
        &mut self,
        paths: &[String],
        period: &DevicePeriod,
        before: &Stats,
        delivered: u64,
        periods_per_write: u32,
    ) -> Classified {
        let model = *self.ctl.model();
        let elapsed_s = period.elapsed_s;
        let period_s = self.period.as_secs_f64();
        let (mut short_of_limit, mut well_short_of_limit, mut nr_weighed) = (false, false, 0);
        let (mut nr_uncapped, mut uncapped) = (0, None);
        let mut out = Classified::default();
        // The groups sharing the device: their paths, (cost per planning period, weights' share), and
        // the share corrections they carry into this period.
        let (mut sharing_paths, mut sharing, mut carried) = (Vec::new(), Vec::new(), Vec::new());
        for rel in paths {
            let t = self.groups.get_mut(rel).expect("tracked");
            if !t.present {
                continue;
            }
            let cost = t.usage[0].cost + t.usage[1].cost;
            // Per period, over at least one: a plan right after another (a timer catching up) must
            // not scale a few IOs into a burst.
            let per_period = cost as f64 * period_s / elapsed_s.max(period_s);
            remember(&mut t.recent, per_period);
            let g = before.groups.get(t.id.index());
            let fair = g.map_or(0.0, |g| g.hweight_active);
            let caps = throttle_for(None, &t.usage, &model, self.period, &t.caps);
            // Held at its cap lately and doing IO since: still held there (blk-throttle paying back a
            // burst it let through), as a group held at its budget's limit is still waiting.
            let at_cap = held_back(&caps, &t.usage, elapsed_s, AT_LIMIT);
            t.since_capped = match t.since_capped {
                _ if at_cap => Some(0),
                Some(n) if n < WAITING_PERIODS && cost > 0 => Some(n + 1),
                _ => None,
            };
            let capped = at_cap || t.since_capped.is_some_and(|_| cost > 0);
            let contending = !capped && period.busy && cost > 0;
            let at_fair_share = contending && cost as f64 >= COMPETES_AT_FAIR_SHARE * fair * delivered as f64;
            // Its IO in flight at the device, in cost-weighted IOs × ms per period (Little's law).
            let depth = per_period * period.lat_ms;
            let kept_depth = t.depth.is_some_and(|d| depth >= KEEPS_DEPTH * d);
            let competing = at_fair_share || (contending && t.competed && (period.slowed || kept_depth));
            t.depth = match competing {
                // A group just active has no fair part yet: its depth then is none to keep.
                true if at_fair_share && fair > 0.0 => Some(depth),
                true => t.depth,
                false => None,
            };
            t.competed = competing;
            let fills = held_back(&t.throttle, &t.usage, elapsed_s, FILLS_LIMIT);
            let at_limit = held_back(&t.throttle, &t.usage, elapsed_s, AT_LIMIT);
            let held = !capped && if g.is_some_and(donating) { fills } else { at_limit };
            t.since_held = match t.since_held {
                _ if held => Some(0),
                Some(n) if n < WAITING_PERIODS && t.throttle.is_limited() => Some(n + 1),
                _ => None,
            };
            let waiting = !held && !capped && t.since_held.is_some();
            let has_io = cost > 0 || waiting;
            if competing && t.throttle.is_limited() {
                short_of_limit |= !fills;
                well_short_of_limit |= !at_limit;
            }
            nr_weighed += usize::from(has_io && !held_back(&caps, &t.usage, elapsed_s, NEAR_OWN_CAP));
            if has_io && !capped {
                nr_uncapped += 1;
                uncapped = Some((rel.clone(), out.charges.len(), held));
            }
            let state = GroupState { competing, held, capped, waiting };
            out.nr_sharing += usize::from(competing || held);
            if competing || held {
                sharing_paths.push(rel);
                sharing.push((per_period, fair));
                carried.push(t.share_correction);
            } else {
                t.share_correction = 0.0;
            }
            out.states.insert(rel.clone(), state);
            let charged = match t.allowed {
                Some(allowed) if held => {
                    let most = allowed as f64 * elapsed_s / period_s * (1.0 + HELD_OVERSHOOT_CHARGED);
                    cost.min(most as u64)
                }
                _ => cost,
            };
            out.charges.push(Charge { group: t.id, abs_cost: charged, limited: state.short() });
        }
        out.sole_uncapped = uncapped.filter(|_| nr_uncapped == 1).map(|(rel, i, held)| {
            out.charges[i].limited = held;
            rel
        });
        out.device_bound =
            out.sole_uncapped.is_none() && if nr_weighed >= 2 { short_of_limit } else { well_short_of_limit };
        out.well_short_of_limit = well_short_of_limit;
        let gain = PAYBACK_GAIN / f64::from(periods_per_write.max(1));
        for (rel, correction) in sharing_paths.into_iter().zip(corrections(&sharing, &carried, out.device_bound, gain))
        {
            self.groups.get_mut(rel).expect("tracked").share_correction = correction;
        }
        out
    }
}

/// Each of the `sharing` groups' (cost per period, weights' share) error, in order: what it did beyond
/// its weights' part of what they did together, when the device split their work (`device_bound`)
/// among two or more; none otherwise (see the module comment). The errors add up to zero.
pub(super) fn share_errors(sharing: &[(f64, f64)], device_bound: bool) -> Vec<f64> {
    let total: f64 = sharing.iter().map(|(cost, _)| cost).sum();
    let weights: f64 = sharing.iter().map(|(_, share)| share).sum();
    if !device_bound || sharing.len() < 2 || weights <= 0.0 {
        return Vec::new();
    }
    sharing.iter().map(|(cost, share)| cost - share / weights * total).collect()
}

/// The `sharing` groups' share corrections after a period, from those they `carried` into it: each
/// adds `gain` times its [`share_errors`] where the device split the work, bounded by the group's
/// weights' part of it (a budget cannot give more); where the limits split it, each halves.
pub(super) fn corrections(sharing: &[(f64, f64)], carried: &[f64], device_bound: bool, gain: f64) -> Vec<f64> {
    let errors = share_errors(sharing, device_bound);
    if errors.is_empty() {
        return carried.iter().map(|c| c / 2.0).collect();
    }
    // A group's part of the work is what it did less its error.
    (sharing.iter().zip(carried).zip(errors))
        .map(|(((cost, _), c), e)| {
            let part = cost - e;
            (c + gain * e).clamp(-part, part)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ioshare_core::{Controller, Limits, ModelParams};
    use ioshare_host::{DevNum, DiskId};

    use super::super::counters::DeviceQuiet;
    use super::super::device::NO_QOS;
    use super::*;
    use crate::backend::throttle::DirUsage;
    use crate::desired::config::DeviceConfig;

    /// Weights 2:1 on a loop device; returns the planner and the groups' paths.
    fn two_groups() -> (DevicePlanner, Vec<String>) {
        let device = DiskId { dev: DevNum { major: 7, minor: 250 }, name: "loop250".into() };
        let cfg = DeviceConfig { device, model: ModelParams::SSD_DFL, qos: Some(NO_QOS), tuned: None };
        let mut d = DevicePlanner::new(cfg, Duration::from_millis(100));
        let paths = vec!["hi".to_string(), "lo".to_string()];
        d.track(0, "hi", 200, &Limits::default(), true).unwrap();
        d.track(0, "lo", 100, &Limits::default(), true).unwrap();
        (d, paths)
    }

    /// One busy 100 ms period in which `hi` and `lo` did `costs` at a mean device latency of
    /// `lat_ms`, both active at their 2/3 and 1/3: whether each was counted short of budget.
    fn period(d: &mut DevicePlanner, paths: &[String], costs: [u64; 2], lat_ms: f64) -> [bool; 2] {
        let mut before = d.ctl.stats(0);
        for (rel, (cost, share)) in paths.iter().zip(costs.iter().zip([2.0 / 3.0, 1.0 / 3.0])) {
            let t = d.groups.get_mut(rel).unwrap();
            t.usage = [DirUsage { ios: cost / 1000, bytes: *cost, cost: *cost }, DirUsage::default()];
            let g = &mut before.groups[t.id.index()];
            (g.hweight_active, g.hweight_inuse) = (share, share);
        }
        let p = DevicePeriod {
            elapsed_s: 0.1,
            delta: None,
            quiet: DeviceQuiet(false),
            inflight: 64.0,
            lat_ms,
            busy: true,
            slowed: false,
        };
        let c = d.classify(paths, &p, &before, costs[0] + costs[1], 1);
        [0, 1].map(|i| c.states[&paths[i]].short())
    }

    /// A dip splits two groups of weights 2:1 evenly (the bench's agent run: 11.8k and 11.3k IOPS, the
    /// low one at its limit): the low one owes what it got beyond a third, the high one is owed as
    /// much; nothing where limits, not the device, split the work, or a group had the device alone.
    #[test]
    fn a_device_split_against_the_weights_leaves_share_errors_that_add_up_to_zero() {
        let sharing = [(11_800.0, 2.0 / 3.0), (11_300.0, 1.0 / 3.0)];
        let errors = share_errors(&sharing, true);
        let third = (11_800.0 + 11_300.0) / 3.0;
        assert!((errors[1] - (11_300.0 - third)).abs() < 1e-6, "{errors:?}");
        assert!((errors[0] + errors[1]).abs() < 1e-6, "{errors:?}");
        // Shares among the sharing groups only: a donor's weight is not theirs to split.
        let halves = [(100.0, 0.4), (100.0, 0.2)];
        assert!((share_errors(&halves, true)[1] - (100.0 - 200.0 / 3.0)).abs() < 1e-6);
        assert!(share_errors(&sharing, false).is_empty());
        assert!(share_errors(&sharing[..1], true).is_empty());
    }

    /// One group held at its limit, the other taking what the device leaves one for one (the bench's
    /// agent run), the low-weight one's budget half the device where its weights' part is a third: the
    /// carried correction settles its rate on the third, where paying each whole last error swung it
    /// between the half and the third. Where the limits split the work the correction halves; a
    /// budget never gives more than the group's part.
    #[test]
    fn the_share_correction_settles_the_split_where_paying_each_whole_error_swung_it() {
        let (device, budget) = (9.0, 4.5);
        let mut carried = vec![0.0, 0.0];
        let mut low = Vec::new();
        for _ in 0..12 {
            let l = budget - carried[1];
            low.push(l);
            carried = corrections(&[(device - l, 2.0 / 3.0), (l, 1.0 / 3.0)], &carried, true, PAYBACK_GAIN);
            assert!((carried[0] + carried[1]).abs() < 1e-9, "what one gives the other takes");
        }
        // What is left of the 1.5 between the half and the third halves each period: 1.5 / 2^11 ≈
        // 0.0007 after twelve, within the 0.01 asked; paying whole errors it stays 1.5 apart.
        assert!((low[11] - 3.0).abs() < 0.01 && (low[11] - low[10]).abs() < 0.01, "{low:?}");
        assert_eq!(corrections(&[(6.0, 0.5), (3.0, 0.5)], &[1.0, -1.0], false, PAYBACK_GAIN), [0.5, -0.5]);
        let bounded = corrections(&[(1.0, 0.5), (9.0, 0.5)], &[0.0, 4.9], true, PAYBACK_GAIN);
        assert_eq!(bounded[1], 5.0, "a correction is bounded by the group's part of the work");
    }

    /// The same two groups where the limit in force is rewritten only every tenth period (cgroup v2's
    /// `io.max`, [`super::super::io_max`]): the low-weight one does what the limit written last allowed.
    /// Adding half of each period's error winds the correction up to the whole of the group's part
    /// before a write shows its effect, and the split swings to the other side; half per write
    /// settles it as on v1.
    #[test]
    fn the_share_correction_waits_for_the_limits_where_they_are_written_once_a_second() {
        let (device, budget, every) = (9.0, 4.5, 10);
        let run = |gain: f64| {
            let (mut carried, mut in_force, mut low) = (vec![0.0, 0.0], budget, Vec::new());
            for period in 0..200 {
                if period % every == 0 {
                    in_force = budget - carried[1];
                }
                low.push(in_force);
                carried = corrections(&[(device - in_force, 2.0 / 3.0), (in_force, 1.0 / 3.0)], &carried, true, gain);
            }
            low
        };
        let per_period = run(PAYBACK_GAIN);
        assert!(per_period[100..].iter().any(|&l| (l - 3.0).abs() > 1.0), "wound up: {per_period:?}");
        let per_write = run(PAYBACK_GAIN / f64::from(every));
        assert!(per_write[100..].iter().all(|&l| (l - 3.0).abs() < 0.01), "settled: {per_write:?}");
    }

    /// Two saturating groups split 2:1; the host's disk then dips to 40% and serves them 1:1 at 2.5
    /// times the latency: the high-weight group's rate falls to 30% but its IO in flight to 75%, so
    /// it keeps competing (judged by its rate, it would donate). When its demand drops to a tenth,
    /// its IO in flight falls with it and it is no longer short.
    #[test]
    fn a_group_squeezed_by_a_dipping_device_keeps_competing_and_a_donor_does_not() {
        let (mut d, paths) = two_groups();
        assert_eq!(period(&mut d, &paths, [2_000_000, 1_000_000], 1.0), [true, true], "2:1 at fair shares");
        assert_eq!(period(&mut d, &paths, [600_000, 600_000], 2.5), [true, true], "the dip: both still short");
        assert!(!period(&mut d, &paths, [200_000, 1_800_000], 0.9)[0], "a tenth: no longer short");
    }
}
