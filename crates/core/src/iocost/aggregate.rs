//! Driving IOCost from per-period counters instead of individual IOs.
//!
//! The engine and the simulator hand every IO to [`IoCost`] before it is issued. A host agent cannot:
//! the kernel issues the IO, and what the agent sees once per period is counters — IOs and bytes per
//! cgroup and direction (cgroup v1 `blkio.throttle.io_serviced`, v2 `io.stat`) and the device's
//! summed latencies (`/sys/block/X/stat`). The planner is the same; only its inputs are aggregated:
//!
//! - [`IoCost::charge_period`]: IO that already happened and completed, one lump of absolute cost per
//!   group at the end of the period (activation, the in-period snapback of a donor, and the vtime
//!   charge are the issue path's; nothing waits, since the kernel already let the IO through). Every
//!   group of the batch is activated before any is charged, so that all pay at the shares they held
//!   together during the period, whatever their order. A group
//!   that used more than its budget ends with its local vtime ahead of the global one, which the next
//!   budget pays back: period-granular debt. A group the driver reports as `limited` (its rate limit
//!   held IO back) is a group with waiters in the kernel's terms: it has no budget left, so its local
//!   vtime is brought up to the global one — it counts as short of budget, never as a donor.
//! - [`IoCost::record_completions`]: the period's latency verdicts (met/missed per direction) and
//!   device-slot wait, as the completion path would have counted them.
//! - [`IoCost::budget`]: what a group may use over the next `horizon`: its remaining budget (global
//!   minus local vtime) plus what the global clock adds in that time, in absolute device time. The
//!   agent turns it into blk-throttle limits.
//! - [`IoCost::set_period_us`]: the agent plans at its own cadence (blk-throttle enforces in 100 ms
//!   slices), not at the period the latency targets would give.
//! - [`IoCost::end_period`]: and it ends each period itself, when its timer fires.
//! - [`IoCost::set_vrate_pct`]: a driver that renews its controller (the agent does, to let go of
//!   the groups of cgroups that are gone all at once) carries the vrate over.
//! - [`aggregate_cost`]: the absolute cost of `ios` IOs totalling `bytes`, each at the average size.

use super::model::{CostModel, VTIME_PER_USEC};
use super::tree::{before, cost_to_abs_cost};
use super::IoCost;
use crate::io::{GroupId, Nanos, Op, NSEC_PER_USEC};

/// Absolute cost (vtime units) of `ios` IOs of direction `op` totalling `bytes`, each charged as an IO
/// of the average size; `random` picks the random or sequential base cost for all of them.
pub fn aggregate_cost<M: CostModel>(model: &M, op: Op, ios: u64, bytes: u64, random: bool) -> u64 {
    if ios == 0 {
        return 0;
    }
    let avg_len = (bytes / ios).min(u64::from(u32::MAX)) as u32;
    model.cost(op, avg_len.max(1), random, false).saturating_mul(ios)
}

/// One group's usage of a period, for [`IoCost::charge_period`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charge {
    /// The group.
    pub group: GroupId,
    /// Absolute cost of its IO in the period (see [`aggregate_cost`]).
    pub abs_cost: u64,
    /// Whether IO of the group was held back (by a limit, or waiting at a busy device). With no
    /// cost: all its IO waited the whole period (at a limit that let none through) — it stays
    /// active, as a group with waiters does in the kernel, instead of going idle.
    pub limited: bool,
}

impl<M: CostModel> IoCost<M> {
    /// Sets the planning period (clamped to 1 ms..10 s) instead of the one the QoS targets imply.
    pub fn set_period_us(&mut self, period_us: u64) {
        self.period_us = period_us.clamp(1_000, 10_000_000);
        self.timer_slack_ns = self.period_us * NSEC_PER_USEC / 100;
        self.refresh_margins();
    }

    /// Ends the period at `now` and plans, once at least half a period has passed: a driver planning
    /// on its own timer decides when a period ends. [`crate::Controller::tick`] waits for a whole
    /// period, and the agent's timer wakes a few hundred µs early as often as late — the planner then
    /// ran in every other period only, and vrate climbed at half the kernel's pace. A call sooner
    /// (a driver planning again at once, a controller just renewed) leaves the period running: a
    /// period without time has nothing to plan on.
    pub fn end_period(&mut self, now: Nanos) {
        if now >= self.period_at + self.period_ns() / 2 {
            self.plan_period(now);
        }
    }

    /// Sets the base vrate to `pct` percent, within the QoS bounds (a renewed controller starts
    /// where the one it replaces was, not at 100%).
    pub fn set_vrate_pct(&mut self, pct: f64) {
        let lo = self.vrate_min.max(1);
        let rate = (pct.max(0.0) / 100.0 * VTIME_PER_USEC as f64).round() as u64;
        self.vtime_base_rate = rate.max(lo).min(self.vrate_max.max(lo));
        self.vtime_rate = self.vtime_base_rate;
        self.refresh_margins();
    }

    /// Charges a period's usage, one [`Charge`] per group that did IO (see the module comment). Zero
    /// costs are skipped; an inner group whose descendants are active is not charged.
    pub fn charge_period(&mut self, now: Nanos, charges: &[Charge]) {
        if !self.qos.enable {
            return;
        }
        // A group that did IO this period, or whose IO waited at a limit all period.
        let has_io = |c: &&Charge| c.abs_cost != 0 || c.limited;
        for c in charges.iter().filter(has_io) {
            let node = self.node_of[c.group.index()];
            let was_active = self.tree.nodes[node as usize].on_list;
            if self.activate(now, node) && !was_active {
                // Its IO came during the period, not at its end: usage is judged over the period
                // (activation at `now` would make any usage look like the whole period's).
                self.tree.nodes[node as usize].activated_at = self.period_at;
            }
        }
        for c in charges.iter().filter(has_io) {
            let node = self.node_of[c.group.index()];
            if !self.tree.nodes[node as usize].on_list {
                continue;
            }
            let vnow = self.vnow(now);
            if c.abs_cost != 0 {
                let vtime = self.tree.nodes[node as usize].vtime;
                let cost = self.adjust_inuse_and_calc_cost(now, vnow, node, vtime, c.abs_cost);
                let n = &mut self.tree.nodes[node as usize];
                n.vtime = n.vtime.wrapping_add(cost);
                n.done_vtime = n.done_vtime.wrapping_add(cost);
                n.abs_vusage += c.abs_cost;
            }
            let n = &mut self.tree.nodes[node as usize];
            if c.limited && before(n.vtime, vnow) {
                let gap = vnow.wrapping_sub(n.vtime);
                n.vtime = vnow;
                n.done_vtime = n.done_vtime.wrapping_add(gap);
            }
        }
    }

    /// Adds a period's latency verdicts, `[read, write]`, and the time IOs waited for a device slot.
    pub fn record_completions(&mut self, met: [u64; 2], missed: [u64; 2], rq_wait_ns: u64) {
        for rw in 0..2 {
            self.lat.nr_met[rw] += met[rw];
            self.lat.nr_missed[rw] += missed[rw];
            self.nr_done += met[rw] + missed[rw];
        }
        self.lat.rq_wait_ns += rq_wait_ns;
    }

    /// Absolute device time (vtime units) `group` may use from `now` to `now + horizon`: its budget
    /// left plus the global clock's advance at the base vrate, at its in-use share; 0 when over
    /// budget by more than that. `None` while the group is inactive (it has no budget to speak of).
    /// The base vrate, not the running one: the kernel runs the clock faster to re-spend budget it
    /// threw away, which for a rate limit would promise the device more than vrate says it has.
    pub fn budget(&mut self, now: Nanos, group: GroupId, horizon: Nanos) -> Option<u64> {
        let node = self.node_of[group.index()];
        if !self.tree.nodes[node as usize].on_list {
            return None;
        }
        let (_, hwi) = self.tree.hweights(node);
        let margin = self.margin_of(now, node);
        let (us, rem) = (horizon / NSEC_PER_USEC, horizon % NSEC_PER_USEC);
        let advance = us * self.vtime_base_rate + rem * self.vtime_base_rate / NSEC_PER_USEC;
        let relative = (advance as i64).saturating_add(margin).max(0) as u64;
        Some(cost_to_abs_cost(relative, hwi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iocost::model::{LinearModel, ModelParams, VTIME_PER_USEC};
    use crate::iocost::qos::QosParams;
    use crate::{Controller, GroupSettings, NSEC_PER_MSEC};

    const PERIOD: Nanos = 100 * NSEC_PER_MSEC;

    fn controller() -> (IoCost, GroupId, GroupId) {
        let mut c = IoCost::new(LinearModel::new(ModelParams::SSD_DFL), QosParams::default());
        c.set_period_us(PERIOD / NSEC_PER_USEC);
        let a = c.configure(0, "a", &GroupSettings::weight(200)).unwrap();
        let b = c.configure(0, "b", &GroupSettings::weight(100)).unwrap();
        (c, a, b)
    }

    /// [`controller`] with both groups active (each charged a token cost at 0).
    fn started() -> (IoCost, GroupId, GroupId) {
        let (mut c, a, b) = controller();
        for g in [a, b] {
            c.charge_period(0, &[Charge { group: g, abs_cost: 1, limited: false }]);
        }
        (c, a, b)
    }

    /// Device time of a period at 100% vrate, in vtime units.
    fn period_vtime() -> u64 {
        PERIOD / NSEC_PER_USEC * VTIME_PER_USEC
    }

    #[test]
    fn aggregate_cost_is_the_sum_of_average_ios() {
        let m = LinearModel::new(ModelParams::SSD_DFL);
        assert_eq!(aggregate_cost(&m, Op::Read, 10, 40_960, true), 10 * m.cost(Op::Read, 4096, true, false));
        assert_eq!(aggregate_cost(&m, Op::Write, 0, 0, true), 0);
        assert!(aggregate_cost(&m, Op::Read, 1, 1 << 20, false) > aggregate_cost(&m, Op::Read, 1, 4096, false));
    }

    /// Two groups that use everything they are given: budgets follow the weights 2:1, and each
    /// period's budget is what the clock adds (their margins are spent).
    #[test]
    fn saturating_groups_are_budgeted_by_weight() {
        let (mut c, a, b) = started();
        let mut now = 0;
        // Each period they use exactly their budget.
        for _ in 0..20 {
            let (ba, bb) = (c.budget(now, a, PERIOD).unwrap(), c.budget(now, b, PERIOD).unwrap());
            now += PERIOD;
            c.charge_period(now, &[Charge { group: a, abs_cost: ba, limited: false }]);
            c.charge_period(now, &[Charge { group: b, abs_cost: bb, limited: false }]);
            c.tick(now);
        }
        let (ba, bb) = (c.budget(now, a, PERIOD).unwrap(), c.budget(now, b, PERIOD).unwrap());
        let ratio = ba as f64 / bb as f64;
        assert!((ratio - 2.0).abs() < 0.05, "budgets {ba} vs {bb}: ratio {ratio}");
        // Without latency targets and with both throttled, vrate only rises: the sum is at least a period.
        assert!(ba + bb >= period_vtime(), "{} < {}", ba + bb, period_vtime());
    }

    /// A period in which a group's IO all waited at a limit (nothing done, `limited`) keeps it
    /// active at its share; the same period charged as nothing done deactivates it.
    #[test]
    fn a_group_whose_io_waited_all_period_stays_active() {
        for waited in [true, false] {
            let (mut c, a, b) = started();
            let mut now = 0;
            for _ in 0..5 {
                let ba = c.budget(now, a, PERIOD).unwrap();
                now += PERIOD;
                c.charge_period(now, &[Charge { group: a, abs_cost: ba, limited: true }]);
                c.charge_period(now, &[Charge { group: b, abs_cost: 0, limited: waited }]);
                c.end_period(now);
            }
            let s = c.stats(now);
            assert!(s.groups[a.index()].active);
            assert_eq!(s.groups[b.index()].active, waited, "waited all periods: {waited}");
            let share = s.groups[a.index()].hweight_active;
            assert!((share - if waited { 2.0 / 3.0 } else { 1.0 }).abs() < 1e-3, "a's share {share}");
        }
    }

    /// A driver's timer that wakes a little early: `tick` waits for a whole period and plans every
    /// other one; `end_period` plans each (the busy level steps once per call).
    #[test]
    fn end_period_plans_every_period_a_timer_ends() {
        let run = |end: fn(&mut IoCost, Nanos)| {
            let (mut c, a, b) = controller();
            let mut now = 0;
            for _ in 0..10 {
                let limited = [a, b].map(|g| Charge { group: g, abs_cost: period_vtime() / 2, limited: true });
                c.charge_period(now, &limited);
                now += PERIOD - PERIOD / 200; // 0.5 ms early
                end(&mut c, now);
            }
            c.stats(now).device.busy_level
        };
        assert_eq!(run(|c, now| c.end_period(now)), -10, "both short of budget in each of 10 periods");
        assert!(run(|c, now| c.tick(now)) > -10, "tick skips periods cut short");
        let (mut c, a, _) = controller();
        c.charge_period(0, &[Charge { group: a, abs_cost: period_vtime(), limited: true }]);
        c.end_period(PERIOD / 3);
        c.end_period(PERIOD / 3);
        assert_eq!(c.stats(PERIOD / 3).device.busy_level, 0, "a third of a period is not planned");
    }

    /// A group that uses a tenth of its share donates the rest: the other's budget grows past its 1/3.
    #[test]
    fn an_underusing_group_donates() {
        let (mut c, a, b) = started();
        let mut now = 0;
        for _ in 0..10 {
            let bb = c.budget(now, b, PERIOD).unwrap();
            now += PERIOD;
            c.charge_period(now, &[Charge { group: a, abs_cost: period_vtime() / 15, limited: false }]); // a tenth of its 2/3
            c.charge_period(now, &[Charge { group: b, abs_cost: bb, limited: false }]);
            c.tick(now);
        }
        let bb = c.budget(now, b, PERIOD).unwrap();
        assert!(bb as f64 > 0.8 * period_vtime() as f64, "b's budget {bb} of {}", period_vtime());
        let hwi_a = c.stats(now).groups[a.index()].hweight_inuse;
        assert!(hwi_a < 0.3, "a donates: hweight_inuse {hwi_a}");
    }

    /// The agent's steady state: b limited (it spends every budget), a at a tenth of the device with
    /// ±20% jitter per period; a keeps donating period after period.
    #[test]
    fn donation_holds_while_the_other_is_limited() {
        let (mut c, a, b) = controller();
        let mut now = 0;
        c.charge_period(
            now,
            &[Charge { group: a, abs_cost: 1, limited: false }, Charge { group: b, abs_cost: 1, limited: true }],
        );
        let mut donating = 0;
        for i in 0..40u64 {
            let bb = c.budget(now, b, PERIOD).unwrap();
            now += PERIOD;
            let a_use = period_vtime() / 10 * (8 + i % 5) / 10;
            c.charge_period(
                now,
                &[
                    Charge { group: a, abs_cost: a_use, limited: false },
                    Charge { group: b, abs_cost: bb, limited: true },
                ],
            );
            c.tick(now);
            let s = c.stats(now);
            if i >= 10 && s.groups[a.index()].hweight_inuse < 0.3 {
                donating += 1;
            }
        }
        assert_eq!(donating, 30, "a donated in every period after the first ten");
    }

    /// Overuse is paid back: a group charged twice its budget gets less next period.
    #[test]
    fn overuse_lowers_the_next_budget() {
        let (mut c, a, b) = controller();
        c.charge_period(0, &[Charge { group: a, abs_cost: 1, limited: false }]);
        c.charge_period(0, &[Charge { group: b, abs_cost: 1, limited: false }]);
        let before = c.budget(0, a, PERIOD).unwrap();
        c.charge_period(0, &[Charge { group: a, abs_cost: 2 * before, limited: false }]);
        assert_eq!(c.budget(0, a, PERIOD), Some(0));
        assert_eq!(c.budget(0, b, PERIOD).map(|x| x > 0), Some(true));
    }

    /// A limited group has spent its budget: the next budget is one period's, not more.
    #[test]
    fn a_limited_group_has_no_budget_left() {
        let (mut c, a, b) = controller();
        c.charge_period(0, &[Charge { group: b, abs_cost: 1, limited: false }]);
        c.charge_period(0, &[Charge { group: a, abs_cost: 1, limited: true }]);
        let (_, hwi) = c.tree.hweights(c.node_of[a.index()]);
        let one_period = cost_to_abs_cost(PERIOD / NSEC_PER_USEC * c.vtime_base_rate, hwi);
        assert_eq!(c.budget(0, a, PERIOD), Some(one_period));
        assert!(c.budget(0, b, PERIOD).unwrap() > one_period / 2);
    }

    #[test]
    fn inactive_groups_have_no_budget() {
        let (mut c, a, _) = controller();
        assert_eq!(c.budget(0, a, PERIOD), None);
        c.charge_period(0, &[Charge { group: a, abs_cost: 0, limited: false }]);
        assert_eq!(c.budget(0, a, PERIOD), None, "zero cost does not activate");
    }

    /// A renewed controller carries the vrate over: budgets shrink with it; the QoS bounds hold.
    #[test]
    fn a_carried_vrate_sets_the_budgets_within_the_bounds() {
        let (mut c, a, _) = controller();
        c.charge_period(0, &[Charge { group: a, abs_cost: 1, limited: false }]);
        let full = c.budget(0, a, PERIOD).unwrap();
        c.set_vrate_pct(60.0);
        assert!((c.vrate_pct() - 60.0).abs() < 0.01, "{}", c.vrate_pct());
        let slowed = c.budget(0, a, PERIOD).unwrap();
        // The budget is the margin left plus the clock's advance over the period: the advance is
        // 60% of a period's device time now.
        let less = (full - slowed) as f64 / period_vtime() as f64;
        assert!((less - 0.4).abs() < 1e-3, "budget {slowed} at 60%, {full} at 100%");
        c.set_vrate_pct(1e9);
        assert_eq!(c.vrate_pct(), 10_000.0, "clamped to the QoS maximum");
    }

    #[test]
    fn missed_latencies_slow_vrate() {
        let (mut c, a, b) = controller();
        let q = QosParams { rppm: 950_000, rlat_us: 1000, ..QosParams::default() };
        c.qos = q;
        let mut now = 0;
        c.charge_period(now, &[Charge { group: a, abs_cost: 1, limited: false }]);
        c.charge_period(now, &[Charge { group: b, abs_cost: 1, limited: false }]);
        for _ in 0..10 {
            let (ba, bb) = (c.budget(now, a, PERIOD).unwrap(), c.budget(now, b, PERIOD).unwrap());
            now += PERIOD;
            c.charge_period(now, &[Charge { group: a, abs_cost: ba, limited: false }]);
            c.charge_period(now, &[Charge { group: b, abs_cost: bb, limited: false }]);
            c.record_completions([100, 0], [100, 0], 0);
            c.tick(now);
        }
        assert!(c.vrate_pct() < 100.0, "vrate {}", c.vrate_pct());
    }
}
