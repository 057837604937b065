//! The planner: once per period, judge the device and redistribute budget (kernel `ioc_timer_fn`).
//!
//! Order matters and follows the kernel: latency statistics of the period → kick groups with waiters
//! or debt and deactivate idle ones → usage per group → donation candidates and shortages → transfer
//! of surpluses → busy level → vrate step → debt forgiveness → next period → vtime-loss compensation.
//!
//! Busy level: positive while latency targets are missed (more than `100 − pct`% of IOs later than
//! the target, net of size cost) or IOs wait for device slots more than 5% of the period; negative
//! while groups are throttled and targets are met with a 25% margin; zero otherwise ("coast": without
//! throttled groups nobody knows how close the device is to saturation). vrate moves by a step that
//! grows with |busy level| (none up to 3, then 1%, 2%, 4%, 8%, 16% per period), within [min, max].
//! A period without completions but with IOs lagging from earlier periods leaves the busy level as
//! it was (the 2026 fix for saturated cloud disks). With the device-depth option ([`super::depth`])
//! a missed latency target shrinks the slot limit and vrate coasts (also at one slot), vrate does
//! not rise while the slots were full, and groups short of slots do not donate.

use super::donation::DonorInputs;
use super::model::CostModel;
use super::tree::{after, before, WEIGHT_ONE};
use super::{IoCost, LatStat};
use crate::controller::Event;
use crate::io::{Nanos, NSEC_PER_USEC};

/// vrate step in % per period, indexed by |busy level| (kernel `vrate_adj_pct`).
pub const VRATE_ADJ_PCT: [u64; 53] = [
    0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4,
    4, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 16,
];
/// rq-wait share of a period that means saturated, %.
const RQ_WAIT_BUSY_PCT: u64 = 5;
/// Hysteresis: "met" needs the signals below this % of their thresholds.
const UNBUSY_THR_PCT: u64 = 75;
/// Step when vrate is outside [min, max] after the bounds changed, %.
const VRATE_CLAMP_ADJ_PCT: u64 = 4;
/// In-flight IOs older than this many periods no longer count as lagging.
const MAX_LAGGING_PERIODS: u64 = 10;
/// Debt forgiveness: device usage below this % over a DFGV period halves debts.
const DFGV_USAGE_PCT: u64 = 50;
const DFGV_PERIOD_NS: Nanos = 100_000_000;
const MILLION: u64 = 1_000_000;

/// One vrate step (kernel `ioc_adjust_base_vrate` without the tracing): returns the new base vrate.
pub fn adjust_vrate(vrate: u64, busy_level: i32, vrate_min: u64, vrate_max: u64) -> u64 {
    if vrate < vrate_min {
        (vrate * (100 + VRATE_CLAMP_ADJ_PCT) / 100).min(vrate_min)
    } else if vrate > vrate_max {
        (vrate * (100 - VRATE_CLAMP_ADJ_PCT) / 100).max(vrate_max)
    } else {
        let adj = VRATE_ADJ_PCT[(busy_level.unsigned_abs() as usize).min(VRATE_ADJ_PCT.len() - 1)];
        let factor = if busy_level > 0 { 100 - adj } else { 100 + adj };
        (vrate * factor).div_ceil(100).clamp(vrate_min, vrate_max)
    }
}

/// What a period tells the busy level (kernel `ioc_timer_fn`'s inputs to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeriodSignals {
    /// Reads and writes that missed their latency target, ppm.
    pub missed_ppm: [u32; 2],
    /// Share of the period IOs waited for a device slot, %.
    pub rq_wait_pct: u32,
    /// Most reads / writes that may miss, ppm (one million less the QoS's `rpct` / `wpct` in ppm).
    pub ppm_rthr: u64,
    /// See `ppm_rthr`.
    pub ppm_wthr: u64,
    /// Groups short of budget.
    pub nr_shortages: u32,
    /// Groups with IOs in flight since before the period.
    pub nr_lagging: u32,
    /// IOs completed in the period.
    pub nr_done: u64,
}

/// The busy level after a period that showed `s`, from `prev` (kernel `ioc_timer_fn`): up while
/// targets are missed, down while groups are short of budget and targets met with margin, 0 in the
/// hysteresis band or when nobody is short; kept when no IO completed while IOs lag.
pub fn next_busy_level(prev: i32, s: &PeriodSignals) -> i32 {
    let (mr, mw, rq) = (s.missed_ppm[0] as u64, s.missed_ppm[1] as u64, s.rq_wait_pct as u64);
    let level = if s.nr_done == 0 && s.nr_lagging > 0 {
        // No completion to judge by while IOs lag: keep the level (kernel f91ffe89b201).
        prev
    } else if rq > RQ_WAIT_BUSY_PCT || mr > s.ppm_rthr || mw > s.ppm_wthr {
        prev.max(0) + 1
    } else if rq <= RQ_WAIT_BUSY_PCT * UNBUSY_THR_PCT / 100
        && mr <= s.ppm_rthr * UNBUSY_THR_PCT / 100
        && mw <= s.ppm_wthr * UNBUSY_THR_PCT / 100
    {
        match (s.nr_shortages > 0, s.nr_lagging == 0) {
            (true, true) => prev.min(0) - 1,
            (true, false) => prev.min(0),
            (false, _) => 0,
        }
    } else {
        0
    };
    level.clamp(-1000, 1000)
}

/// Whether the kernel moves vrate at `busy_level` (it does not at 0, nor below 0 while IOs lag).
pub fn adjusts_vrate(busy_level: i32, nr_lagging: u32) -> bool {
    busy_level != 0 && !(busy_level < 0 && nr_lagging > 0)
}

/// The fewest planning periods in which vrate can move from `from_pct` to within `tolerance` (0.2 =
/// 20%) of `to_pct` under the step table: the busy level moving one step per period the right way,
/// starting from 0, vrate unbounded. The floor for any controller that follows the kernel.
pub fn fastest_settle_periods(from_pct: f64, to_pct: f64, tolerance: f64) -> u32 {
    let unit = super::model::VTIME_PER_USEC as f64 / 100.0;
    let (mut vrate, step) = ((from_pct * unit) as u64, if to_pct > from_pct { -1 } else { 1 });
    let mut busy = 0;
    for periods in 0..10_000 {
        if (vrate as f64 / unit / to_pct - 1.0).abs() <= tolerance {
            return periods;
        }
        busy += step;
        vrate = adjust_vrate(vrate, busy, 1, u64::MAX / 200);
    }
    u32::MAX
}

impl<M: CostModel> IoCost<M> {
    /// Starts a period at `now`.
    pub(crate) fn start_period(&mut self, now: Nanos) {
        self.period_at_vtime = self.vnow(now);
        self.period_at = now;
    }

    /// Runs the planner if a period has ended; does nothing before [`crate::Controller::next_tick`].
    pub(crate) fn run_planner(&mut self, now: Nanos) {
        if now >= self.period_at + self.period_ns() {
            self.plan_period(now);
        }
    }

    /// Ends the running period at `now` and plans the next (nothing while no group is active).
    pub(crate) fn plan_period(&mut self, now: Nanos) {
        if !self.running {
            return;
        }
        let lat = std::mem::take(&mut self.lat);
        let nr_done = std::mem::take(&mut self.nr_done);
        let missed_ppm: [u32; 2] = std::array::from_fn(|rw| {
            let total = lat.nr_met[rw] + lat.nr_missed[rw];
            if total == 0 {
                0
            } else {
                (lat.nr_missed[rw] * MILLION).div_ceil(total) as u32
            }
        });
        let rq_wait_pct = (lat.rq_wait_ns * 100 / self.period_ns()) as u32;
        self.last_missed_ppm = missed_ppm;
        self.last_rq_wait_pct = rq_wait_pct;

        let period_ns = self.period_ns();
        if let Some(slots) = &mut self.slots {
            slots.close_period(now, period_ns);
        }
        let vnow = self.vnow(now);
        let period_vtime = vnow.wrapping_sub(self.period_at_vtime);
        let nr_debtors = self.check_groups(now, vnow);

        // Usage of the period, µs at the base vrate.
        for &i in &self.active_list {
            let n = &mut self.tree.nodes[i as usize];
            n.usage_delta_us = (n.abs_vusage - n.last_abs_vusage) / self.vtime_base_rate;
            n.usage_us += n.usage_delta_us;
            n.last_abs_vusage = n.abs_vusage;
        }

        let (ppm_rthr, ppm_wthr) = (MILLION - self.qos.rppm as u64, MILLION - self.qos.wppm as u64);
        let (mut nr_shortages, mut nr_lagging, mut usage_us_sum) = (0u32, 0u32, 0u64);
        let mut donors = std::mem::take(&mut self.donors);
        donors.clear();
        for idx in 0..self.active_list.len() {
            let i = self.active_list[idx];
            let (hwa, hwi) = self.tree.hweights(i);
            let n = &self.tree.nodes[i as usize];
            let (vdone, vtime) = (n.done_vtime, n.vtime);
            if (ppm_rthr != MILLION || ppm_wthr != MILLION)
                && !n.use_delay
                && after(vtime, vdone)
                && after(vtime, vnow.wrapping_sub(MAX_LAGGING_PERIODS * period_vtime))
                && before(vdone, vnow.wrapping_sub(period_vtime))
            {
                nr_lagging += 1;
            }
            usage_us_sum += n.usage_delta_us;
            // Activation and period start in whole µs, as the kernel keeps them.
            let since_us = n.activated_at.max(self.period_at) / NSEC_PER_USEC;
            let inputs = DonorInputs {
                usage_us: n.usage_delta_us,
                inflight_vtime: vtime.wrapping_sub(vdone),
                usage_dur_us: (now / NSEC_PER_USEC).saturating_sub(since_us),
                vtime_base_rate: self.vtime_base_rate,
                hwa,
                hwi,
                hwm: 0,
                budget_vtime: vnow.wrapping_sub(vtime) as i64,
                period_vtime,
                margin_min: self.margins.min,
                margin_low: self.margins.low,
                margin_target: self.margins.target,
                waiting: !n.waitq.is_empty(),
                in_debt: n.abs_vdebt != 0,
            };
            // With the depth option, a group short of slots is held back by the device: it keeps
            // its weight unless it already donates.
            let short_of_slots = self.slots.as_ref().is_some_and(|s| s.short_of_slots(i, hwa, WEIGHT_ONE));
            let candidate = if short_of_slots { hwi < hwa } else { inputs.is_candidate() };
            if !candidate {
                nr_shortages += 1;
                continue;
            }
            // The tree walk for hweight_max only for candidates, as the kernel does.
            let inputs = DonorInputs { hwm: self.tree.hweight_max(i), ..inputs };
            self.throw_away_excess(i, &inputs);
            if let Some(new_hwi) = inputs.donation() {
                let n = &mut self.tree.nodes[i as usize];
                n.hweight_donating = hwa;
                n.hweight_after_donation = new_hwi;
                donors.push(i);
            } else if !inputs.in_debt {
                // Debt owns a debtor's inuse: only others snap back to full weight here.
                let n = &self.tree.nodes[i as usize];
                let (active, margin) = (n.active, vnow.wrapping_sub(n.vtime) as i64);
                if n.inuse != active {
                    self.log_inuse(now, i, "shortage", hwi, inputs.hwm);
                }
                self.tree.propagate(i, active, active, Some(margin));
                nr_shortages += 1;
            }
        }
        if !donors.is_empty() && nr_shortages > 0 {
            self.transfer_surpluses(now, &donors, vnow);
        }
        self.donors = donors;
        self.tree.commit();

        let signals = PeriodSignals { missed_ppm, rq_wait_pct, ppm_rthr, ppm_wthr, nr_shortages, nr_lagging, nr_done };
        self.busy_level = next_busy_level(self.busy_level, &signals);
        self.plan_slots(&lat, missed_ppm, ppm_rthr, ppm_wthr);
        if adjusts_vrate(self.busy_level, nr_lagging) {
            let old = self.vtime_base_rate;
            self.vtime_base_rate = adjust_vrate(old, self.busy_level, self.vrate_min, self.vrate_max);
            self.refresh_margins();
            if self.vtime_base_rate != old {
                let pct = |v: u64| v as f64 * 100.0 / super::model::VTIME_PER_USEC as f64;
                let event = Event::Vrate {
                    at: now,
                    from_pct: pct(old),
                    to_pct: pct(self.vtime_base_rate),
                    busy_level: self.busy_level,
                };
                self.log(|_| event);
            }
        }

        self.forgive_debts(now, usage_us_sum, nr_debtors);

        self.cur_period += 1;
        if !self.active_list.is_empty() {
            self.start_period(now);
        } else {
            self.busy_level = 0;
            self.vtime_err = 0;
            self.running = false;
        }
        self.refresh_vrate(now);
    }

    /// Kicks groups with waiters, debt or delay (they may oversleep after vrate or weight changes) and
    /// deactivates idle ones (kernel `ioc_check_iocgs`). Returns the number of debtors.
    fn check_groups(&mut self, now: Nanos, vnow: u64) -> u32 {
        let mut nr_debtors = 0;
        let mut idx = 0;
        while idx < self.active_list.len() {
            let i = self.active_list[idx];
            let n = &self.tree.nodes[i as usize];
            if !n.waitq.is_empty() || n.abs_vdebt != 0 || n.delay_us != 0 {
                self.kick_waitq(now, i, true);
                let n = &self.tree.nodes[i as usize];
                if n.abs_vdebt != 0 || n.delay_us != 0 {
                    nr_debtors += 1;
                }
            } else if self.is_idle(i) {
                // Budget above the target is thrown away; reactivation starts at the target.
                let excess = vnow.wrapping_sub(n.vtime).wrapping_sub(self.margins.target) as i64;
                if excess > 0 {
                    let (_, hwi) = self.tree.hweights(i);
                    self.vtime_err -= (excess as u64 * hwi / WEIGHT_ONE) as i64;
                }
                self.tree.propagate(i, 0, 0, None);
                self.tree.nodes[i as usize].on_list = false;
                self.active_list.swap_remove(idx);
                self.log(|c| Event::Deactivate { at: now, group: c.path_of(i) });
                continue;
            }
            idx += 1;
        }
        self.tree.commit();
        nr_debtors
    }

    /// The device-depth option's part of the period (see [`super::depth`]). The slot limit answers
    /// the latency target: misses shrank it as they completed, and here it may grow with the miss
    /// budget the period's met IOs earned. A missed target never lowers vrate (vrate coasts), also
    /// at one slot, where a slower vrate could only idle the device. And vrate does not rise while
    /// every slot was busy for most of the period.
    fn plan_slots(&mut self, lat: &LatStat, missed_ppm: [u32; 2], ppm_rthr: u64, ppm_wthr: u64) {
        let Some(slots) = &mut self.slots else { return };
        let (mr, mw) = (missed_ppm[0] as u64, missed_ppm[1] as u64);
        slots.judging = ppm_rthr != MILLION || ppm_wthr != MILLION;
        // Misses already shrank the limit as they completed (Slots::miss); here the period's
        // misses, squeezed-out IOs included, keep vrate from moving for them.
        let missed = slots.judging && (mr > ppm_rthr || mw > ppm_wthr || slots.missed());
        if missed || (self.busy_level < 0 && slots.period_full) {
            self.busy_level = 0;
        }
        // The miss budget: a judged IO of an op with a target that met it earns the share of IOs
        // that target lets miss.
        let (mut judged, mut earned) = (0, 0);
        for (rw, thr) in [ppm_rthr, ppm_wthr].into_iter().enumerate() {
            judged += lat.nr_met[rw] + lat.nr_missed[rw];
            if thr != MILLION {
                earned += lat.nr_met[rw] * thr;
            }
        }
        slots.adapt(judged, earned);
    }

    /// Halves debts and delays every 100 ms while the device is less than half busy (kernel
    /// `ioc_forgive_debts`).
    fn forgive_debts(&mut self, now: Nanos, mut usage_us_sum: u64, nr_debtors: u32) {
        if nr_debtors == 0 {
            self.dfgv_period_at = now;
            self.dfgv_period_rem = 0;
            self.dfgv_usage_us_sum = 0;
            return;
        }
        if self.busy_level > 0 {
            usage_us_sum = usage_us_sum.max(self.period_us);
        }
        self.dfgv_usage_us_sum += usage_us_sum;
        if now < self.dfgv_period_at + DFGV_PERIOD_NS {
            return;
        }
        let dur_ns = now - self.dfgv_period_at;
        let usage_pct = 100 * self.dfgv_usage_us_sum * NSEC_PER_USEC / dur_ns;
        self.dfgv_period_at = now;
        self.dfgv_usage_us_sum = 0;
        if usage_pct > DFGV_USAGE_PCT {
            self.dfgv_period_rem = 0;
            return;
        }
        let total = dur_ns + self.dfgv_period_rem;
        let nr_cycles = (total / DFGV_PERIOD_NS) as u32;
        self.dfgv_period_rem = total % DFGV_PERIOD_NS;
        let halve = |v: u64| if v == 0 { 0 } else { v.checked_shr(nr_cycles).unwrap_or(0).max(1) };
        for idx in 0..self.active_list.len() {
            let i = self.active_list[idx];
            let n = &mut self.tree.nodes[i as usize];
            if n.abs_vdebt == 0 && n.delay_us == 0 {
                continue;
            }
            let old_debt = n.abs_vdebt;
            n.abs_vdebt = halve(n.abs_vdebt);
            n.delay_us = halve(n.delay_us);
            self.kick_waitq(now, i, true);
            let to_us = |v: u64| v / super::model::VTIME_PER_USEC;
            let (debt_from_us, debt_to_us) = (to_us(old_debt), to_us(self.tree.nodes[i as usize].abs_vdebt));
            self.log(|c| Event::Forgive { at: now, group: c.path_of(i), debt_from_us, debt_to_us });
        }
    }

    /// Offsets vtime thrown away this period by running the clock faster for the rest of it (kernel
    /// `ioc_refresh_vrate`).
    fn refresh_vrate(&mut self, now: Nanos) {
        let pleft = (self.period_at + self.period_ns()) as i64 - now as i64;
        let pleft_us = pleft / NSEC_PER_USEC as i64;
        let base = self.vtime_base_rate as i64;
        if pleft_us > 0 {
            let vcomp = (-(self.vtime_err / pleft_us)).clamp(-(base >> 1), base);
            self.vtime_err += vcomp * pleft_us;
            self.vtime_rate = (base + vcomp) as u64;
        }
        let vperiod = self.period_us as i64 * base;
        self.vtime_err = self.vtime_err.clamp(-vperiod, vperiod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iocost::model::VTIME_PER_USEC;

    #[test]
    fn vrate_step_table_matches_the_kernel() {
        // research §8.6: nothing up to |busy| 3, then 1% (4–19), 2% (20–35), 4% (36–43), 8% (44–51), 16%.
        let steps: Vec<(i32, u64)> = vec![
            (1, 0),
            (3, 0),
            (4, 1),
            (19, 1),
            (20, 2),
            (35, 2),
            (36, 4),
            (43, 4),
            (44, 8),
            (51, 8),
            (52, 16),
            (999, 16),
        ];
        let (lo, hi) = (1, u64::MAX / 200);
        let v = VTIME_PER_USEC * 100; // far from the bounds
        for (busy, pct) in steps {
            assert_eq!(adjust_vrate(v, busy, lo, hi), (v * (100 - pct)).div_ceil(100), "busy {busy}");
            assert_eq!(adjust_vrate(v, -busy, lo, hi), (v * (100 + pct)).div_ceil(100), "busy -{busy}");
        }
    }

    #[test]
    fn doubling_vrate_takes_at_least_35_periods() {
        // 3 periods without a step, 16 at 1%, then 2% steps: 100% → 160% needs 35 periods.
        assert_eq!(fastest_settle_periods(100.0, 200.0, 0.2), 35);
        assert_eq!(fastest_settle_periods(100.0, 110.0, 0.2), 0);
        assert!(fastest_settle_periods(200.0, 50.0, 0.2) > 40);
    }

    #[test]
    fn vrate_returns_to_its_bounds_by_four_percent_steps() {
        let (min, max) = (VTIME_PER_USEC / 2, VTIME_PER_USEC);
        assert_eq!(adjust_vrate(2 * VTIME_PER_USEC, 1, min, max), 2 * VTIME_PER_USEC * 96 / 100);
        assert_eq!(adjust_vrate(max + 10, -60, min, max), max);
        assert_eq!(adjust_vrate(min - 1000, 60, min, max), ((min - 1000) * 104 / 100).min(min));
        // Within bounds the result is clamped.
        assert_eq!(adjust_vrate(max, -60, min, max), max);
    }
}
