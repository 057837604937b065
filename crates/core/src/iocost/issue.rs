//! The issue path: activation, charging, the in-period snapback, wait queues, debt and delay.
//!
//! `submit` is the fast path every IO takes: find the cost (model + the group's cursor), make sure the
//! group is active, and issue at once if nobody of the group waits, it has no debt, and its budget
//! covers the relative cost. Otherwise a `must_issue` IO goes out as debt and everything else joins
//! the group's FIFO, released by a wait-queue kick when the budget exists — at a timer set for that
//! moment, at the next planner tick, or when a debt payment or weight change frees it.

use std::cmp::Reverse;

use super::model::{CostModel, RANDIO_PAGES, VTIME_PER_NSEC};
use super::tree::{abs_cost_to_cost, after, cost_to_abs_cost, WEIGHT_ONE};
use super::IoCost;
use crate::controller::{Completion, Dispatch, Event, Submit};
use crate::io::{Io, Nanos, NSEC_PER_USEC};

/// In-period inuse bump step, % of active (kernel `INUSE_ADJ_STEP_PCT`).
const INUSE_ADJ_STEP_PCT: u64 = 25;
/// Overage (in % of a period) at which delay starts, and at which it reaches the maximum.
const MIN_DELAY_THR_PCT: i64 = 500;
const MAX_DELAY_THR_PCT: i64 = 25_000;
/// Delay bounds, µs.
pub(crate) const MIN_DELAY_US: u64 = 250;
const MAX_DELAY_US: u64 = 250_000;
/// Bytes per 4 KiB page, as a shift.
const PAGE_SHIFT: u32 = 12;

impl<M: CostModel> IoCost<M> {
    /// Offers an IO (kernel `ioc_rqos_throttle`).
    #[inline]
    pub(crate) fn submit_io(&mut self, now: Nanos, mut io: Io) -> Submit {
        let node = self.node_of[io.group.index()];
        let n = &self.tree.nodes[node as usize];
        let random = n.cursor != 0 && n.cursor.abs_diff(io.offset) >> PAGE_SHIFT > RANDIO_PAGES;
        let abs_cost = self.model.cost(io.op, io.len, random, io.flags.merged);
        if self.qos.enable && abs_cost != 0 && io.flags.merged {
            return self.submit_merged(now, node, io, abs_cost);
        }
        if !self.qos.enable || abs_cost == 0 || !self.activate(now, node) {
            // Bypassed, free, or issued by an inner group whose children are active: uncharged.
            io.charge = 0;
            self.tree.nodes[node as usize].issued += 1;
            self.bypass_slots(now, node);
            return Submit::Issue { io, delay: 0 };
        }
        let vnow = self.vnow(now);
        let n = &mut self.tree.nodes[node as usize];
        n.cursor = io.offset + io.len as u64;
        let vtime = n.vtime;
        let cost = self.adjust_inuse_and_calc_cost(now, vnow, node, vtime, abs_cost);
        let n = &mut self.tree.nodes[node as usize];
        if n.waitq.is_empty() && n.abs_vdebt == 0 && !after(vtime.wrapping_add(cost), vnow) {
            n.commit(&mut io, abs_cost, cost);
            if let Some(slots) = &mut self.slots {
                let (hwa, _) = self.tree.hweights(node);
                let tag = slots.tag(node, self.margins.target, abs_cost, hwa);
                if !slots.admit_now(now, node, tag) {
                    slots.enqueue(now, node, tag, io);
                    return Submit::Queued;
                }
            }
            return Submit::Issue { io, delay: 0 };
        }
        self.submit_over_budget(now, node, io, abs_cost)
    }

    /// With the device-depth option, counts an IO that goes out whatever the slots.
    fn bypass_slots(&mut self, now: Nanos, node: u32) {
        if let Some(slots) = &mut self.slots {
            slots.bypass(now, node);
        }
    }

    /// An IO merged into an issued request (kernel `ioc_rqos_merge`): it pays its size only, does not
    /// activate the group, never waits — charged from budget if there is some, else as debt — and
    /// moves the cursor only when it extends the IO that ended there.
    fn submit_merged(&mut self, now: Nanos, node: u32, mut io: Io, abs_cost: u64) -> Submit {
        let vnow = self.vnow(now);
        let vtime = self.tree.nodes[node as usize].vtime;
        let cost = self.adjust_inuse_and_calc_cost(now, vnow, node, vtime, abs_cost);
        let n = &mut self.tree.nodes[node as usize];
        if n.cursor == io.offset {
            n.cursor = io.offset + io.len as u64;
        }
        if !after(vtime.wrapping_add(cost), vnow) || !n.on_list {
            n.commit(&mut io, abs_cost, cost);
            self.bypass_slots(now, node);
            return Submit::Issue { io, delay: 0 };
        }
        self.issue_as_debt(now, node, io, abs_cost)
    }

    /// Issues `io` at once, its cost charged as debt; the delay it causes goes back to the caller.
    fn issue_as_debt(&mut self, now: Nanos, node: u32, mut io: Io, abs_cost: u64) -> Submit {
        self.incur_debt(now, node, abs_cost);
        let delay = if self.kick_delay(now, node) { self.current_delay_us(now, node) * NSEC_PER_USEC } else { 0 };
        io.charge = 0;
        self.tree.nodes[node as usize].issued += 1;
        self.bypass_slots(now, node);
        Submit::Issue { io, delay }
    }

    /// The slow half of `submit_io`: debt for `must_issue` IO, the wait queue for the rest.
    fn submit_over_budget(&mut self, now: Nanos, node: u32, mut io: Io, abs_cost: u64) -> Submit {
        if io.flags.must_issue {
            return self.issue_as_debt(now, node, io, abs_cost);
        }
        // A group with waiters claims its full weight.
        let n = &self.tree.nodes[node as usize];
        if n.abs_vdebt == 0 && n.inuse != n.active {
            let (active, margin) = (n.active, self.margin_of(now, node));
            self.tree.propagate(node, active, active, Some(margin));
            self.tree.commit();
        }
        io.charge = abs_cost;
        self.tree.nodes[node as usize].waitq.push_back(io);
        let pay_debt = self.tree.nodes[node as usize].abs_vdebt != 0;
        self.kick_waitq(now, node, pay_debt);
        Submit::Queued
    }

    /// Marks the group active in this period, activating it if needed (kernel `iocg_activate`).
    /// False when the group may not be charged: an inner group whose descendants are active.
    #[inline]
    pub(crate) fn activate(&mut self, now: Nanos, node: u32) -> bool {
        let n = &mut self.tree.nodes[node as usize];
        if n.on_list {
            n.active_period = self.cur_period;
            return true;
        }
        if n.child_active_sum != 0 {
            return false;
        }
        self.activate_slow(now, node)
    }

    fn activate_slow(&mut self, now: Nanos, node: u32) -> bool {
        let vnow = self.vnow(now);
        let n = &self.tree.nodes[node as usize];
        let level = n.level as usize;
        if (1..level).any(|l| self.tree.nodes[n.ancestors[l] as usize].on_list) {
            return false;
        }
        // Always start with the target budget; anything above it was thrown away at deactivation.
        let vtarget = vnow.wrapping_sub(self.margins.target);
        let n = &mut self.tree.nodes[node as usize];
        n.active_period = self.cur_period;
        let delta = vtarget.wrapping_sub(n.vtime);
        n.vtime = vtarget;
        n.done_vtime = n.done_vtime.wrapping_add(delta);
        n.hweight_gen = self.tree.gen.wrapping_sub(1);
        n.on_list = true;
        n.activated_at = now;
        let (weight, inuse) = (n.weight, if n.last_inuse != 0 { n.last_inuse } else { n.weight });
        self.active_list.push(node);
        self.tree.propagate(node, weight, inuse, Some(self.margins.target as i64));
        self.tree.commit();
        self.log(|c| Event::Activate { at: now, group: c.path_of(node) });
        if !self.running {
            self.running = true;
            self.dfgv_period_at = now;
            self.dfgv_period_rem = 0;
            self.start_period(now);
        }
        true
    }

    /// Relative cost of `abs_cost`, first raising a donor's inuse in 25% steps if its budget has
    /// deteriorated below both the margin at its last adjustment and 20% of a period (kernel
    /// `adjust_inuse_and_calc_cost`).
    #[inline]
    pub(crate) fn adjust_inuse_and_calc_cost(
        &mut self,
        now: Nanos,
        vnow: u64,
        node: u32,
        vtime: u64,
        abs_cost: u64,
    ) -> u64 {
        let (_, hwi) = self.tree.hweights(node);
        let mut cost = abs_cost_to_cost(abs_cost, hwi);
        let n = &self.tree.nodes[node as usize];
        let margin = vnow.wrapping_sub(vtime).wrapping_sub(cost) as i64;
        if n.abs_vdebt != 0 || margin >= n.saved_margin || margin >= self.margins.low as i64 || n.inuse == n.active {
            return cost;
        }
        let (active, old_inuse, old_hwi) = (n.active, n.inuse, hwi);
        let step = (active * INUSE_ADJ_STEP_PCT).div_ceil(100);
        let mut new_inuse = old_inuse;
        let new_hwi = loop {
            new_inuse += step;
            self.tree.propagate(node, active, new_inuse, Some(vnow.wrapping_sub(vtime) as i64));
            self.tree.commit();
            let hwi = self.tree.hweights(node).1;
            cost = abs_cost_to_cost(abs_cost, hwi);
            if !after(vtime.wrapping_add(cost), vnow) || self.tree.nodes[node as usize].inuse == active {
                break hwi;
            }
        };
        self.log_inuse(now, node, "adjust", old_hwi, new_hwi);
        cost
    }

    pub(crate) fn log_inuse(&mut self, at: Nanos, node: u32, reason: &'static str, from: u64, to: u64) {
        self.log(|c| Event::Inuse {
            at,
            group: c.path_of(node),
            reason,
            from: from as f64 / WEIGHT_ONE as f64,
            to: to as f64 / WEIGHT_ONE as f64,
        });
    }

    /// Releases the waiters the budget now covers, paying debt first when `pay_debt`, and arms the
    /// group's timer for the next one (kernel `iocg_kick_waitq`).
    pub(crate) fn kick_waitq(&mut self, now: Nanos, node: u32, pay_debt: bool) {
        let vnow = self.vnow(now);
        let (hwa, _) = self.tree.hweights(node);
        let n = &self.tree.nodes[node as usize];
        let mut vbudget = vnow.wrapping_sub(n.vtime) as i64;
        if pay_debt && n.abs_vdebt != 0 && vbudget > 0 {
            let abs_vpay = cost_to_abs_cost(vbudget as u64, hwa).min(n.abs_vdebt);
            let vpay = abs_cost_to_cost(abs_vpay, hwa);
            let n = &mut self.tree.nodes[node as usize];
            n.vtime = n.vtime.wrapping_add(vpay);
            n.done_vtime = n.done_vtime.wrapping_add(vpay);
            self.pay_debt(now, node, abs_vpay);
            vbudget -= vpay as i64;
        }
        let n = &self.tree.nodes[node as usize];
        if n.abs_vdebt != 0 || n.delay_us != 0 {
            self.kick_delay(now, node);
        }
        let debt = self.tree.nodes[node as usize].abs_vdebt;
        if debt != 0 {
            vbudget = (vbudget - abs_cost_to_cost(debt, hwa) as i64).min(0);
        }
        // Paying debt restores inuse: read hweight_inuse after it.
        let (hwa, hwi) = self.tree.hweights(node);
        let margin = self.margins.target;
        let n = &mut self.tree.nodes[node as usize];
        while let Some(head) = n.waitq.front() {
            let cost = abs_cost_to_cost(head.charge, hwi);
            vbudget -= cost as i64;
            if vbudget < 0 {
                break;
            }
            let mut io = n.waitq.pop_front().expect("head exists");
            let abs_cost = io.charge;
            n.commit(&mut io, abs_cost, cost);
            match &mut self.slots {
                Some(slots) => {
                    let tag = slots.tag(node, margin, abs_cost, hwa);
                    slots.enqueue(now, node, tag, io)
                }
                None => self.ready.push_back(io),
            }
        }
        if n.waitq.is_empty() {
            if let Some(since) = n.wait_since.take() {
                n.wait_ns += now.saturating_sub(since);
            }
            return;
        }
        n.wait_since.get_or_insert(now);
        let shortage = (-vbudget) as u64;
        let expires = now + shortage.div_ceil(self.vtime_base_rate) * NSEC_PER_USEC + self.timer_slack_ns;
        if let Some(old) = n.timer {
            if old.abs_diff(expires) <= self.timer_slack_ns {
                return;
            }
        }
        n.timer = Some(expires);
        self.timers.push(Reverse((expires, node)));
    }

    /// Charges `abs_cost` as debt (kernel `iocg_incur_debt`); entering debt donates everything.
    fn incur_debt(&mut self, now: Nanos, node: u32, abs_cost: u64) {
        let n = &mut self.tree.nodes[node as usize];
        if n.abs_vdebt == 0 && abs_cost != 0 {
            n.indebt_since = Some(now);
            let active = n.active;
            self.tree.propagate(node, active, 0, None);
            self.tree.commit();
        }
        let n = &mut self.tree.nodes[node as usize];
        n.abs_vdebt += abs_cost;
        n.abs_vusage += abs_cost;
    }

    /// Repays `abs_vpay` of debt; when paid off, inuse returns (kernel `iocg_pay_debt`).
    fn pay_debt(&mut self, now: Nanos, node: u32, abs_vpay: u64) {
        let n = &mut self.tree.nodes[node as usize];
        n.abs_vdebt -= abs_vpay.min(n.abs_vdebt);
        if n.abs_vdebt == 0 {
            if let Some(since) = n.indebt_since.take() {
                n.indebt_ns += now.saturating_sub(since);
            }
            let (active, last_inuse) = (n.active, n.last_inuse);
            self.tree.propagate(node, active, last_inuse, None);
            self.tree.commit();
        }
    }

    /// The delay in effect now, µs: the last one set, halved for each whole second since.
    pub(crate) fn current_delay_us(&self, now: Nanos, node: u32) -> u64 {
        let n = &self.tree.nodes[node as usize];
        let shift = now.saturating_sub(n.delay_at) / 1_000_000_000;
        if n.delay_us == 0 || shift >= 64 {
            0
        } else {
            n.delay_us >> shift
        }
    }

    /// Recomputes the group's delay from its overage, debt included (kernel `iocg_kick_delay`).
    /// True when a delay is in effect.
    pub(crate) fn kick_delay(&mut self, now: Nanos, node: u32) -> bool {
        let mut delay = self.current_delay_us(now, node);
        let (hwa, _) = self.tree.hweights(node);
        let vnow = self.vnow(now);
        let n = &self.tree.nodes[node as usize];
        let vover = n.vtime.wrapping_add(abs_cost_to_cost(n.abs_vdebt, hwa)).wrapping_sub(vnow) as i64;
        let vover_pct = (100 * vover as i128 / (self.period_us * self.vtime_base_rate) as i128) as i64;
        let new_delay = if vover_pct <= MIN_DELAY_THR_PCT {
            0
        } else if vover_pct >= MAX_DELAY_THR_PCT {
            MAX_DELAY_US
        } else {
            MIN_DELAY_US
                + (MAX_DELAY_US - MIN_DELAY_US) * (vover_pct - MIN_DELAY_THR_PCT) as u64
                    / (MAX_DELAY_THR_PCT - MIN_DELAY_THR_PCT) as u64
        };
        let n = &mut self.tree.nodes[node as usize];
        if new_delay > delay {
            n.delay_us = new_delay;
            n.delay_at = now;
            delay = new_delay;
        }
        if delay >= MIN_DELAY_US {
            n.indelay_since.get_or_insert(now);
            n.use_delay = true;
            true
        } else {
            if let Some(since) = n.indelay_since.take() {
                n.indelay_ns += now.saturating_sub(since);
            }
            n.delay_us = 0;
            n.use_delay = false;
            false
        }
    }

    /// Hands out released IOs, firing due wait-queue timers first.
    pub(crate) fn dispatch_io(&mut self, now: Nanos) -> Dispatch {
        loop {
            if let Some(slots) = &mut self.slots {
                slots.pump(now, &mut self.ready);
            }
            if let Some(io) = self.ready.pop_front() {
                return Dispatch::Io(io);
            }
            let retry = self.slots.as_ref().and_then(|s| s.retry_at(now));
            let Some(&Reverse((at, node))) = self.timers.peek() else {
                return retry.map_or(Dispatch::Idle, Dispatch::At);
            };
            if self.tree.nodes[node as usize].timer != Some(at) {
                self.timers.pop(); // stale: re-armed or cleared since
                continue;
            }
            if at > now {
                return Dispatch::At(retry.map_or(at, |r| r.min(at)));
            }
            self.timers.pop();
            let n = &mut self.tree.nodes[node as usize];
            n.timer = None;
            let pay_debt = n.abs_vdebt != 0;
            self.kick_waitq(now, node, pay_debt);
        }
    }

    /// Records a completion: in-flight accounting and latency QoS (kernel `ioc_rqos_done[_bio]`).
    #[inline]
    pub(crate) fn complete_io(&mut self, now: Nanos, io: &Io, timing: Completion) {
        let node = self.node_of[io.group.index()];
        let n = &mut self.tree.nodes[node as usize];
        n.done_vtime = n.done_vtime.wrapping_add(io.charge);
        n.completed += 1;
        // With the device-depth option, only IOs of groups within their share of the slots count
        // for the latency target (depth.rs).
        let judged = self.slots.as_mut().is_none_or(|slots| {
            let judged = slots.judged(node);
            slots.complete(now, node);
            judged
        });
        if !self.qos.enable {
            return;
        }
        let rw = io.op.index();
        if judged {
            let on_q_ns = now.saturating_sub(timing.released);
            let size_ns = self.model.size_cost(io.op, io.len) / VTIME_PER_NSEC;
            let target_us = if rw == 0 { self.qos.rlat_us } else { self.qos.wlat_us };
            if on_q_ns <= size_ns || on_q_ns - size_ns <= target_us * NSEC_PER_USEC {
                self.lat.nr_met[rw] += 1;
            } else {
                self.lat.nr_missed[rw] += 1;
                if let Some(slots) = &mut self.slots {
                    slots.miss(timing.released);
                }
            }
        }
        self.lat.rq_wait_ns += timing.started.saturating_sub(timing.released);
        self.nr_done += 1;
    }

    /// Whether the group issued nothing this period and has nothing in flight.
    pub(crate) fn is_idle(&self, node: u32) -> bool {
        let n = &self.tree.nodes[node as usize];
        n.active_period != self.cur_period && n.done_vtime == n.vtime
    }
}
