//! Step 3, follow the device: the period's latency verdicts and device waits reported to the
//! planner, and vrate brought down to what the device did when the device holds groups back.
//!
//! A competing group that its own limit did not hold back was held back by the device: the kernel
//! sees that as IOs waiting for a device slot (rq-wait), the signal that vrate promises more than
//! the device does. The agent reports a stand-in ([`RQ_WAIT_SHARE`] of the period) when the device
//! held groups back in half of the last second's periods ([`bound_persistently`]) or held one well
//! below its limit now. Latency comes from `/sys/block/X/stat` ([`super::latency`]).
//!
//! The planner answers rq-wait and missed latency targets with the kernel's step table, one step a
//! period. The kernel's period is a few milliseconds at an SSD's latency targets; the agent's is
//! 100 ms, so the same table takes seconds to bring vrate down by a third — the seconds a model
//! above what the device gives this load (a profile from a quiet machine, a shared device, a loaded
//! host) lets the device split its work by queue depth, whatever the weights. So in a period the
//! device held a group back, vrate is brought down to the median of what the device did over the
//! last [`FOLLOW_WINDOW`] periods ([`followed`]), by at most [`MOST_FALL_PER_PERIOD`] a period
//! ([`follow_device`]), when the device held groups back in at least [`FOLLOW_WHEN_BOUND`] of them
//! (blk-throttle's slack makes a group held by its limit look held by the device now and then).
//! Then the limits bind, the shares are the weights', and the planner raises vrate again while
//! groups are short of budget and the device keeps up; a latency target can take it lower still.
//! With a latency target the device counts as holding groups back (rq-wait reported, vrate followed
//! down) only while groups share it (two or more competing or held): one group beside donors takes
//! what the device gives, and each step down would only cost it the climb back — in the bench's
//! drop, a reader left alone beside a donor lost a fifth of the device to a vrate that stepped from
//! 103% to 91% on rq-wait read from blk-throttle's slack. Such a group, held by its limit while
//! the device keeps up and meets the targets, has vrate climb by [`MOST_RISE_PER_PERIOD`] a period
//! instead of the step table's 1–2%: its limit is then all that stands between it and the device.
//! Groups sharing the device that are all held by their limits while it keeps up and meets the
//! targets have it climb by [`MOST_RISE_SHARED_PER_PERIOD`]: each stall of the host's disk steps
//! vrate down, and at the step table's 1% a period the limits stayed below what the device did
//! (vrate 86–92% with the device doing 86–90% and meeting the target, for a second, in the bench's
//! agent run); a climb past the device is followed down, and the split it leaves to the device is
//! paid back ([`super::classify`]'s share corrections).
//!
//! Every climb is a probe whose answer is read from the limits it produced, and on cgroup v2 a
//! group's limits are written once a second ([`super::io_max`]): a climb kept stepping every period
//! ran ten steps ahead of the limits in force. In the lab guest (two saturating tenants 2:1, no
//! latency target) vrate climbed from 100% to 140% between two writes, the next write put the limits
//! 35% above the device, and for the second until the next one the device split their work by queue
//! depth — the low-weight one at its limit, 539 IOPS for a part of 400 — and again every three
//! seconds: 1.78–1.93 over runs for 2. So a period's rise is taken as the `1 / periods_per_write`
//! root of its factor ([`super::io_max::climb_per_write`]): per write what a period climbs where
//! limits are written every period. Falls are taken whole.

use std::collections::VecDeque;

use ioshare_core::iocost::aggregate::Charge;
use ioshare_core::iocost::model::VTIME_PER_NSEC;

use super::classify::Classified;
use super::device::DevicePlanner;
use super::latency::verdicts;
use super::read::DevicePeriod;
use super::window::{median, remember, FOLLOW_WINDOW};

/// The most [`follow_device`] lowers vrate in one period (a factor of it): from a model three times
/// the device to the device in 7 periods, while one period the machine stalled costs at most 15%.
pub(crate) const MOST_FALL_PER_PERIOD: f64 = 0.85;

/// Periods of the last [`FOLLOW_WINDOW`] in which the device must have held a competing group back
/// for vrate to follow it down: half of them.
pub(crate) const FOLLOW_WHEN_BOUND: usize = FOLLOW_WINDOW / 2;

/// The factor by which vrate climbs in a period in which a group alone beside donors was held by
/// its limit while the device kept up and met the latency targets: from 90% of the model to 160%
/// in three periods. The step table climbs 1–2% a period, and a reader left alone by a tenant that
/// dropped to a tenth stayed held by a limit below the device for seconds (on this machine's loop
/// device, from 90% to 160% over 4 s: it took 76–82% of what was left); nobody's share is at stake
/// while it is alone, and a climb past the device is followed down as soon as a second group shares
/// the device.
pub(crate) const MOST_RISE_PER_PERIOD: f64 = 1.25;

/// The factor by which vrate climbs in a period in which two or more groups sharing the device were
/// all held by their limits while it kept up and met the latency targets: from 86% to 100% in
/// three periods, and a climb past the device at most 5% above it before the device holds a group
/// back.
pub(crate) const MOST_RISE_SHARED_PER_PERIOD: f64 = 1.05;

/// The most of a period's IO cost the donors may have done for the climb: a group is "alone" only
/// beside donors that do little. Two saturating pods on a FIFO device split it 1:1 whatever their
/// weights, so the high-weight one used less than its share and counted as a donor; the climb then
/// raised vrate a quarter a period (to 153%), no budget ever bound, and the donor stayed one — the
/// split stayed 1:1 for the whole run (a Kubernetes test, and the bench's agent scenario at ratio
/// 1.07 in three of eight runs). After a drop to a tenth the donor does ~6% of the cost.
pub(crate) const CLIMB_DONORS_MOST: f64 = 0.25;

/// Whether the groups other than the busiest did at most [`CLIMB_DONORS_MOST`] of the period's IO
/// cost (`charges`; none when nothing was charged).
fn others_did_little(charges: &[Charge]) -> bool {
    let total: u64 = charges.iter().map(|c| c.abs_cost).sum();
    let busiest = charges.iter().map(|c| c.abs_cost).max().unwrap_or(0);
    total > 0 && (total - busiest) as f64 <= CLIMB_DONORS_MOST * total as f64
}

/// rq-wait reported for a period in which the device, not a limit, held a competing group back: a
/// tenth of the period, above the planner's 5% threshold for "saturated".
pub(crate) const RQ_WAIT_SHARE: f64 = 0.1;

/// vrate after a device-bound period when the device did `delivered_pct` of the model over the last
/// [`FOLLOW_WINDOW`] periods (their median): at most that, at least [`MOST_FALL_PER_PERIOD`] of
/// `vrate_pct`, never raised (raising is the planner's).
pub(crate) fn follow_device(vrate_pct: f64, delivered_pct: f64) -> f64 {
    delivered_pct.max(vrate_pct * MOST_FALL_PER_PERIOD).min(vrate_pct)
}

/// What vrate follows down to, given the last periods (% of the model the device did, whether it
/// held a competing group back in each): their median, when it held a group back in at least
/// [`FOLLOW_WHEN_BOUND`] of them; else nothing.
pub(crate) fn followed(window: &VecDeque<(f64, bool)>) -> Option<f64> {
    bound_persistently(window).then(|| median(window.iter().map(|d| d.0)))
}

/// Whether the device held a competing group back in at least [`FOLLOW_WHEN_BOUND`] of the last
/// [`FOLLOW_WINDOW`] periods: what it takes to follow it down, and to report rq-wait.
pub(crate) fn bound_persistently(window: &VecDeque<(f64, bool)>) -> bool {
    window.iter().filter(|d| d.1).count() >= FOLLOW_WHEN_BOUND
}

impl DevicePlanner {
    /// Reports the period's completions and device waits to the planner and follows the device
    /// down; returns what the device did (% of the model) and whether
    /// rq-wait was reported.
    pub(super) fn follow(&mut self, period: &DevicePeriod, classified: &Classified, delivered: u64) -> (f64, bool) {
        let elapsed_s = period.elapsed_s;
        let delivered_pct = delivered as f64 / (elapsed_s * 1e9 * VTIME_PER_NSEC as f64) * 100.0;
        remember(&mut self.delivered, (delivered_pct, classified.device_bound));
        // With a latency target, only a split is worth the throughput: a group alone beside donors
        // takes what the device gives, and neither reporting rq-wait (the step table then lowers
        // vrate a step a period) nor following each stall of the device down would protect anyone;
        // both cost it the limit it then falls short of (blk-throttle lets a group at its limit
        // through at 80–97% of it, which reads as a device holding it back) and the climb back.
        let latency_target = self.qos.rppm != 0 || self.qos.wppm != 0;
        let sharing = !latency_target || classified.nr_sharing >= 2;
        let device_bound = sharing && classified.device_bound;
        let rq_wait_ns = if device_bound && (bound_persistently(&self.delivered) || classified.well_short_of_limit) {
            (elapsed_s * 1e9 * RQ_WAIT_SHARE) as u64
        } else {
            0
        };
        if let Some(d) = period.delta {
            self.verdicts = verdicts(&d, self.ctl.model(), &self.qos);
            self.ctl.record_completions(self.verdicts.met, self.verdicts.missed, rq_wait_ns);
        }
        if let Some(did) = device_bound.then(|| followed(&self.delivered)).flatten() {
            self.ctl.set_vrate_pct(follow_device(self.ctl.vrate_pct(), did));
        }
        let alone_held = classified.nr_sharing == 1
            && classified.states.values().any(|s| s.held)
            && others_did_little(&classified.charges);
        let nr_held = classified.states.values().filter(|s| s.held).count();
        let all_held = classified.nr_sharing >= 2 && nr_held == classified.nr_sharing;
        let rise = match (alone_held, all_held) {
            (true, _) => MOST_RISE_PER_PERIOD,
            (_, true) => MOST_RISE_SHARED_PER_PERIOD,
            _ => 1.0,
        };
        if latency_target && rise > 1.0 && !classified.device_bound && self.verdicts.met_targets(&self.qos) {
            self.ctl.set_vrate_pct(self.ctl.vrate_pct() * rise);
        }
        (delivered_pct, rq_wait_ns > 0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ioshare_core::{GroupId, ModelParams, QosParams};
    use ioshare_host::{DevNum, DiskId};

    use super::super::classify::GroupState;
    use super::super::counters::DeviceQuiet;
    use super::super::device::NO_QOS;
    use super::*;
    use crate::desired::config::DeviceConfig;

    /// A planner for a loop device under `qos` (the SSD default model, 100 ms periods).
    fn planner(qos: QosParams) -> DevicePlanner {
        let device = DiskId { dev: DevNum { major: 7, minor: 250 }, name: "loop250".into() };
        let cfg = DeviceConfig { device, model: ModelParams::SSD_DFL, qos: Some(qos), tuned: None };
        DevicePlanner::new(cfg, Duration::from_millis(100))
    }

    /// A busy 0.1 s period with `inflight` IOs in the device on average (no counters to judge).
    fn busy_period(inflight: f64) -> DevicePeriod {
        DevicePeriod {
            elapsed_s: 0.1,
            delta: None,
            quiet: DeviceQuiet(false),
            inflight,
            lat_ms: 1.0,
            busy: true,
            slowed: false,
        }
    }

    /// What the device did in 0.1 s: `share` of what the model promises.
    fn delivered(share: f64) -> u64 {
        (share * 0.1 * 1e9 * VTIME_PER_NSEC as f64) as u64
    }

    /// A device-bound period brings vrate down to what the device did, by at most 15% a period, and
    /// never raises it.
    #[test]
    fn vrate_follows_a_device_bound_device_down() {
        assert_eq!(follow_device(100.0, 90.0), 90.0);
        assert_eq!(follow_device(100.0, 30.0), 85.0, "at most 15% a period");
        assert_eq!(follow_device(100.0, 120.0), 100.0, "never raised");
        // From a model three times the device: within 7 periods.
        let mut v = 300.0;
        for _ in 0..7 {
            v = follow_device(v, 100.0);
        }
        assert!((v - 100.0).abs() < 1e-9, "{v}");
    }

    /// A group held by its limit looks held by the device in a few periods (blk-throttle's slack):
    /// those alone do not take vrate down; a device that holds groups back in half the periods does,
    /// to the median of what it did.
    #[test]
    fn vrate_follows_only_a_device_that_holds_groups_back_in_half_the_periods() {
        let window = |bound: usize| -> VecDeque<(f64, bool)> {
            (0..FOLLOW_WINDOW).map(|i| (60.0 + i as f64, i < bound)).collect()
        };
        assert_eq!(followed(&window(FOLLOW_WHEN_BOUND - 1)), None, "sporadic");
        assert_eq!(followed(&window(FOLLOW_WHEN_BOUND)), Some(60.0 + (FOLLOW_WINDOW / 2) as f64));
        assert_eq!(followed(&VecDeque::new()), None);
    }

    /// A device that holds a competing group back in every period, reading 40% of the model: with
    /// a latency target and one group sharing it (the other donating), neither rq-wait nor the
    /// follow-down; with two sharing, or without a latency target, both.
    #[test]
    fn with_a_latency_target_a_group_alone_beside_donors_is_not_followed_down() {
        let run = |rppm: u32, nr_sharing: usize| -> (bool, f64) {
            let mut d = planner(QosParams { rppm, rlat_us: 2_000, ..NO_QOS });
            let period = busy_period(32.0);
            let classified =
                Classified { device_bound: true, well_short_of_limit: true, nr_sharing, ..Classified::default() };
            let mut rq_wait = false;
            for _ in 0..FOLLOW_WINDOW {
                rq_wait |= d.follow(&period, &classified, delivered(0.4)).1;
            }
            (rq_wait, d.ctl.vrate_pct())
        };
        assert_eq!(run(950_000, 1), (false, 100.0), "alone beside donors, with a target: left alone");
        let (rq_wait, vrate) = run(950_000, 2);
        assert!(rq_wait && vrate < 100.0, "two sharing: rq-wait {rq_wait}, vrate {vrate}");
        let (rq_wait, vrate) = run(0, 1);
        assert!(rq_wait && vrate < 100.0, "no latency target: rq-wait {rq_wait}, vrate {vrate}");
    }

    /// A group alone beside donors, held by its limit while the device keeps up and meets the
    /// latency target, has vrate climb a quarter a period up to the QoS maximum; not when the
    /// device held it back, when two groups share the device, without a latency target, or when
    /// the donors did more than a quarter of the IO.
    #[test]
    fn a_group_alone_beside_donors_held_by_its_limit_has_vrate_climb() {
        let run_with = |rppm: u32, nr_sharing: usize, device_bound: bool, periods: usize, donor_cost: u64| -> f64 {
            let mut d = planner(QosParams { rppm, rlat_us: 2_000, max_ppm: 2_000_000, ..NO_QOS });
            d.ctl.set_vrate_pct(90.0);
            let period = busy_period(64.0);
            let held = GroupState { held: true, competing: true, ..GroupState::default() };
            let donor = GroupState::default();
            let charge = |g: u32, abs_cost: u64| Charge { group: GroupId(g), abs_cost, limited: false };
            let classified = Classified {
                states: [("low".to_string(), held), ("high".to_string(), donor)].into_iter().collect(),
                charges: vec![charge(0, 1000), charge(1, donor_cost)],
                device_bound,
                nr_sharing,
                ..Classified::default()
            };
            for _ in 0..periods {
                d.follow(&period, &classified, delivered(0.9));
            }
            d.ctl.vrate_pct()
        };
        // The donor at a tenth of the held group's cost (after a drop to a tenth).
        let run = |rppm, nr_sharing, device_bound, periods| run_with(rppm, nr_sharing, device_bound, periods, 100);
        assert!((run(950_000, 1, false, 1) - 112.5).abs() < 0.01, "a quarter in one period");
        assert!((run(950_000, 1, false, 3) - 90.0 * 1.25f64.powi(3)).abs() < 0.01, "90% to 176% in three");
        assert!((run(950_000, 1, false, 10) - 200.0).abs() < 0.01, "up to the QoS maximum");
        assert!(run(950_000, 1, true, 3) <= 90.0, "the device held it back");
        assert!(run(950_000, 2, false, 3) <= 90.0, "two sharing: the step table's");
        assert!(run(0, 1, false, 3) <= 90.0, "no latency target");
        // A "donor" as busy as the held group (two saturating pods split 1:1 by the device).
        assert!(run_with(950_000, 1, false, 3, 1000) <= 90.0, "the donor did half the IO");
        assert!(run_with(950_000, 1, false, 1, 333) > 112.0, "a quarter of the cost still climbs");
    }

    /// Two groups sharing the device, both held by their limits while it keeps up and meets the
    /// latency target: vrate climbs 5% a period; not when the device held one back, nor without a
    /// latency target.
    #[test]
    fn groups_sharing_the_device_all_held_by_their_limits_have_vrate_climb() {
        let run = |rppm: u32, device_bound: bool, periods: usize| -> f64 {
            let mut d = planner(QosParams { rppm, rlat_us: 2_000, max_ppm: 2_000_000, ..NO_QOS });
            d.ctl.set_vrate_pct(86.0);
            let held = GroupState { held: true, competing: true, ..GroupState::default() };
            let charge = |g: u32, abs_cost: u64| Charge { group: GroupId(g), abs_cost, limited: true };
            let classified = Classified {
                states: [("low".to_string(), held), ("high".to_string(), held)].into_iter().collect(),
                charges: vec![charge(0, 1000), charge(1, 2000)],
                device_bound,
                nr_sharing: 2,
                ..Classified::default()
            };
            for _ in 0..periods {
                d.follow(&busy_period(64.0), &classified, delivered(0.86));
            }
            d.ctl.vrate_pct()
        };
        // Within 0.01 points: the planner keeps vrate in whole vtime units per µs, so 86% reads
        // back rounded.
        assert!((run(950_000, false, 3) - 86.0 * 1.05f64.powi(3)).abs() < 0.01, "86% to 99.6% in three");
        assert!(run(950_000, true, 3) < 86.01, "the device held one back");
        assert!(run(0, false, 3) < 86.01, "no latency target");
    }
}
