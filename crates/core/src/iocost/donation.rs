//! Budget donation: groups that do not use their share lend it out by lowering their in-use weight.
//!
//! Two steps, once per period. First, each donor candidate gets a target hweight_inuse
//! ([`DonorInputs::target`], a pure function of the group's state that the decision replay shares): the share that, if it uses next period what it used in the
//! last, leaves its budget at exactly 50% of a period — `usage = (1 − 0.5 + delta) · new_hwi`, where
//! `delta` is its remaining budget as a fraction of the period.
//!
//! Second, the targets are turned into inuse weights ([`IoCost::transfer_surpluses`], the kernel's
//! "Andy's method"). Writing `b` for a node's absolute budget (hweight_active), `t` for the part of it
//! belonging to donors below it and `t'` for that part after donation, the non-donating rest of the
//! tree grows by one global factor `γ = (1 − t'_root) / (1 − t_root)`, so every inner node's new
//! budget is `b' = γ·(b − t) + t'`. Walking down from the root, each level's weights are rescaled so
//! the children's shares come out as those budgets: with `s` the sum of a node's children's active
//! weights split into donating and non-donating parts `s_t`, `s_f`, the adjusted sum is
//! `s' = s_f + s_t · w'_t / w_t` (root: `s' = s · (1 − t) / (1 − t')`), and a donating leaf's new inuse
//! is `w' = s'_parent · t' / b'_parent`. Proportions among non-donors hold, donors land on their
//! targets, and the leaves still sum to one — up to the 1/65536 round-ups, which the clamps absorb.

use serde::{Deserialize, Serialize};

use super::model::CostModel;
use super::tree::{cost_to_abs_cost, WEIGHT_ONE};
use super::IoCost;
use crate::io::Nanos;

/// Fixed-point share of a period a donor's budget should end at.
const TARGET_FRACTION: i64 = WEIGHT_ONE as i64 * super::MARGIN_TARGET_PCT as i64 / 100;

/// One group's state at a period's end, as the donation decision reads it (kernel `ioc_timer_fn`;
/// kernel units: vtime, µs, [`WEIGHT_ONE`] shares). The planner fills it from its tree, the decision
/// replay ([`super::replay`]) from the kernel's own events, and both decide with the same rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DonorInputs {
    /// Usage in the period, µs at the base vrate (kernel `usage_delta_us`).
    pub usage_us: u64,
    /// Cost charged and not yet completed, vtime (`vtime − done_vtime`).
    pub inflight_vtime: u64,
    /// µs the group was active in the period (since the later of the period's start and its activation).
    pub usage_dur_us: u64,
    /// Base vrate, vtime per µs.
    pub vtime_base_rate: u64,
    /// hweight_active, hweight_inuse, and hweight_max (its share with its inuse at full weight).
    pub hwa: u64,
    /// See `hwa`.
    pub hwi: u64,
    /// See `hwa`.
    pub hwm: u64,
    /// Budget left: the device's vtime less the group's (`vnow − vtime`).
    pub budget_vtime: i64,
    /// The period's length in vtime (`vnow − period_at_vtime`).
    pub period_vtime: u64,
    /// The budget margins, vtime: below `min` no donation, above `low` a full-weight group may donate,
    /// `target` the budget a donor is left with.
    pub margin_min: u64,
    /// See `margin_min`.
    pub margin_low: u64,
    /// See `margin_min`.
    pub margin_target: u64,
    /// IOs wait for budget.
    pub waiting: bool,
    /// The group is in debt (debt handling owns its inuse).
    pub in_debt: bool,
}

impl DonorInputs {
    /// Whether the group is weighed for donation at all: it already donates, or none of its IOs waits
    /// and it has more than the low margin of budget left.
    pub fn is_candidate(&self) -> bool {
        self.hwi < self.hwa || (!self.waiting && self.budget_vtime > self.margin_low as i64)
    }

    /// Its share of the device in the period ([`WEIGHT_ONE`] units): what it used, or what its IOs
    /// in flight cost if more, over the time it was active.
    pub fn usage(&self) -> u64 {
        let inflight_us = match self.inflight_vtime {
            0 => 0,
            v => cost_to_abs_cost(v, self.hwi).div_ceil(self.vtime_base_rate.max(1)),
        };
        (self.usage_us.max(inflight_us) * WEIGHT_ONE).div_ceil(self.usage_dur_us.max(1)).clamp(1, WEIGHT_ONE)
    }

    /// Whether its usage decides its target: not in debt, nothing waiting, at least the minimum
    /// margin of budget left.
    fn decides_by_usage(&self) -> bool {
        !self.in_debt && !self.waiting && self.budget_vtime >= self.margin_min as i64
    }

    /// The hweight_inuse it should keep (kernel `hweight_after_donation`): 1 in debt, `hwm` (no
    /// donation) while it waits or has less than the minimum margin, else the share that leaves its
    /// budget at the target margin after a period like the last, its budget above the target first
    /// thrown away ([`Self::excess`]). At least 1 (a recorded `hwm` of 0 reads as 1, as the
    /// kernel's never is less).
    pub fn target(&self) -> u64 {
        let hwm = self.hwm.max(1);
        if self.in_debt {
            return 1;
        }
        if !self.decides_by_usage() {
            return hwm;
        }
        let budget = self.budget_vtime.min(self.margin_target as i64);
        let delta = (WEIGHT_ONE as i128 * budget as i128 / self.period_vtime.max(1) as i128) as i64;
        let new_hwi = WEIGHT_ONE as i64 * self.usage() as i64 / (WEIGHT_ONE as i64 - TARGET_FRACTION + delta);
        new_hwi.clamp(1, hwm as i64) as u64
    }

    /// The budget above the target margin that [`Self::target`] throws away, vtime (0 when it keeps all).
    pub fn excess(&self) -> u64 {
        match self.decides_by_usage() {
            true => self.budget_vtime.saturating_sub(self.margin_target as i64).max(0) as u64,
            false => 0,
        }
    }

    /// The decision: `Some(target)` when it donates down to `target`, `None` when it keeps its full
    /// share (a target at `hwm`, or a share too small to split).
    pub fn donation(&self) -> Option<u64> {
        let target = self.target();
        (target < self.hwm && self.hwa >= 2).then_some(target)
    }
}

/// Donors' `(hweight_active, target)` pairs: when the targets sum to a whole device or more, those
/// targeting more than their own share are scaled down together until the sum is just below it
/// (kernel `transfer_surpluses`' first step; the others keep theirs).
pub fn scale_down_over_share(targets: &mut [(u64, u64)]) {
    let after_sum: u64 = targets.iter().map(|&(_, t)| t).sum();
    let over_sum: u64 = targets.iter().filter(|&&(hwa, t)| t > hwa).map(|&(_, t)| t).sum();
    let over_target = if after_sum >= WEIGHT_ONE { over_sum.saturating_sub(after_sum - (WEIGHT_ONE - 1)) } else { 0 };
    if over_target != 0 {
        for (hwa, t) in targets.iter_mut() {
            if *t > *hwa {
                *t = *t * over_target / over_sum;
            }
        }
    }
}

impl<M: CostModel> IoCost<M> {
    /// Throws away the budget of node `node` above the target margin, booking it as vtime lost
    /// (the side effect of the kernel's `hweight_after_donation`).
    pub(crate) fn throw_away_excess(&mut self, node: u32, inputs: &DonorInputs) {
        let excess = inputs.excess();
        if excess > 0 {
            let n = &mut self.tree.nodes[node as usize];
            n.vtime = n.vtime.wrapping_add(excess);
            n.done_vtime = n.done_vtime.wrapping_add(excess);
            self.vtime_err -= (excess * inputs.hwi / WEIGHT_ONE) as i64;
        }
    }

    /// Sets the donors' inuse weights so each lands on its `hweight_after_donation` while the rest of
    /// the tree keeps its proportions (kernel `transfer_surpluses`).
    pub(crate) fn transfer_surpluses(&mut self, now: Nanos, donors: &[u32], vnow: u64) {
        let w1 = WEIGHT_ONE;
        let mut targets: Vec<(u64, u64)> = donors
            .iter()
            .map(|&d| (self.tree.hweights(d).0, self.tree.nodes[d as usize].hweight_after_donation))
            .collect();
        scale_down_over_share(&mut targets);
        for (&d, &(_, t)) in donors.iter().zip(&targets) {
            self.tree.nodes[d as usize].hweight_after_donation = t;
        }

        // Pre-order list of the donors' inner ancestors, root first.
        let mut walk = std::mem::take(&mut self.walk);
        walk.clear();
        for &d in donors {
            let level = self.tree.nodes[d as usize].level as usize;
            let ancestor = |tree: &super::tree::Tree, l: usize| tree.nodes[d as usize].ancestors[l];
            let first_new = (0..level)
                .rev()
                .find(|&l| self.tree.nodes[ancestor(&self.tree, l) as usize].in_walk)
                .map_or(0, |l| l + 1);
            for l in first_new..level {
                let a = ancestor(&self.tree, l);
                self.tree.nodes[a as usize].in_walk = true;
                walk.push(a);
            }
        }
        for &i in &walk {
            let n = &mut self.tree.nodes[i as usize];
            n.child_adjusted_sum = 0;
            n.hweight_donating = 0;
            n.hweight_after_donation = 0;
        }

        // Sum t and t' up the tree.
        for &d in donors {
            let n = &self.tree.nodes[d as usize];
            let (p, t, t2) = (n.ancestors[n.level as usize - 1], n.hweight_donating, n.hweight_after_donation);
            let p = &mut self.tree.nodes[p as usize];
            p.hweight_donating += t;
            p.hweight_after_donation += t2;
        }
        for &i in walk.iter().rev() {
            let n = &self.tree.nodes[i as usize];
            if n.level > 0 {
                let (p, t, t2) = (n.ancestors[n.level as usize - 1], n.hweight_donating, n.hweight_after_donation);
                let p = &mut self.tree.nodes[p as usize];
                p.hweight_donating += t;
                p.hweight_after_donation += t2;
            }
        }

        // Inner budgets b, and t, t' clamped into range.
        for &i in &walk {
            let n = &self.tree.nodes[i as usize];
            let b = if n.level == 0 {
                w1
            } else {
                let p = &self.tree.nodes[n.ancestors[n.level as usize - 1] as usize];
                (p.walk_hwa * n.active).div_ceil(p.child_active_sum)
            };
            let n = &mut self.tree.nodes[i as usize];
            n.walk_hwa = b;
            n.hweight_donating = n.hweight_donating.min(b);
            n.hweight_after_donation = n.hweight_after_donation.min(n.hweight_donating.saturating_sub(1));
        }

        // γ = (1 − t'_r) / (1 − t_r).
        let root = &self.tree.nodes[walk[0] as usize];
        let gamma = ((w1 - root.hweight_after_donation) * w1).div_ceil(w1 - root.hweight_donating.min(w1 - 1));

        // Inner nodes, top down: b' and the adjusted child weight sum s'.
        for &i in &walk {
            let n = &self.tree.nodes[i as usize];
            if n.level == 0 {
                let s = (n.child_active_sum * (w1 - n.hweight_donating)).div_ceil(w1 - n.hweight_after_donation);
                let n = &mut self.tree.nodes[i as usize];
                n.child_adjusted_sum = s;
                n.walk_hwi = w1;
                continue;
            }
            let p = &self.tree.nodes[n.ancestors[n.level as usize - 1] as usize];
            let (p_adjusted, p_hwi) = (p.child_adjusted_sum, p.walk_hwi);
            let b_new = (gamma * (n.walk_hwa - n.hweight_donating)).div_ceil(w1) + n.hweight_after_donation;
            let inuse = (p_adjusted * b_new).div_ceil(p_hwi);
            let st = (n.child_active_sum * n.hweight_donating).div_ceil(n.walk_hwa);
            let sf = n.child_active_sum - st;
            let wpt = (n.active * n.hweight_donating).div_ceil(n.walk_hwa);
            let wptp = (inuse * n.hweight_after_donation).div_ceil(b_new);
            let n = &mut self.tree.nodes[i as usize];
            n.walk_hwi = b_new;
            n.child_adjusted_sum = sf + (st * wptp).div_ceil(wpt.max(1));
        }

        // Donating leaves: w' = s'_p · t' / b'_p. Debtors keep the minimum inuse debt gave them.
        for &d in donors {
            let n = &self.tree.nodes[d as usize];
            if n.abs_vdebt != 0 {
                continue;
            }
            let p = &self.tree.nodes[n.ancestors[n.level as usize - 1] as usize];
            let inuse = (p.child_adjusted_sum * n.hweight_after_donation).div_ceil(p.walk_hwi);
            let (active, old_hwi, target) = (n.active, n.hweight_inuse, n.hweight_after_donation);
            let margin = vnow.wrapping_sub(n.vtime) as i64;
            self.tree.propagate(d, active, inuse, Some(margin));
            self.log_inuse(now, d, "transfer", old_hwi, target);
        }
        for &i in &walk {
            self.tree.nodes[i as usize].in_walk = false;
        }
        self.walk = walk;
    }
}
