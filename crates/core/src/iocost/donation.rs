//! Budget donation: groups that do not use their share lend it out by lowering their in-use weight.
//!
//! Two steps, once per period. First, each donor candidate gets a target hweight_inuse
//! ([`IoCost::hweight_after_donation`]): the share that, if it uses next period what it used in the
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

use super::model::CostModel;
use super::tree::{after, WEIGHT_ONE};
use super::IoCost;
use crate::io::Nanos;

/// Fixed-point share of a period a donor's budget should end at.
const TARGET_FRACTION: i64 = WEIGHT_ONE as i64 * super::MARGIN_TARGET_PCT as i64 / 100;

impl<M: CostModel> IoCost<M> {
    /// The hweight_inuse node `node` should keep after donating; `hwm` means "no donation". Also
    /// throws away budget above the 50% target, booking it as vtime lost (kernel
    /// `hweight_after_donation`).
    pub(crate) fn hweight_after_donation(&mut self, node: u32, old_hwi: u64, hwm: u64, usage: u64, vnow: u64) -> u64 {
        let n = &mut self.tree.nodes[node as usize];
        if n.abs_vdebt != 0 {
            return 1;
        }
        if !n.waitq.is_empty() || after(n.vtime, vnow.wrapping_sub(self.margins.min)) {
            return hwm;
        }
        let excess = vnow.wrapping_sub(n.vtime).wrapping_sub(self.margins.target) as i64;
        if excess > 0 {
            n.vtime = n.vtime.wrapping_add(excess as u64);
            n.done_vtime = n.done_vtime.wrapping_add(excess as u64);
            self.vtime_err -= (excess as u64 * old_hwi / WEIGHT_ONE) as i64;
        }
        let period_vtime = vnow.wrapping_sub(self.period_at_vtime) as i64;
        let delta = (WEIGHT_ONE as i128 * vnow.wrapping_sub(n.vtime) as i64 as i128 / period_vtime as i128) as i64;
        let new_hwi = WEIGHT_ONE as i64 * usage as i64 / (WEIGHT_ONE as i64 - TARGET_FRACTION + delta);
        new_hwi.clamp(1, hwm as i64) as u64
    }

    /// Sets the donors' inuse weights so each lands on its `hweight_after_donation` while the rest of
    /// the tree keeps its proportions (kernel `transfer_surpluses`).
    pub(crate) fn transfer_surpluses(&mut self, now: Nanos, donors: &[u32], vnow: u64) {
        let w1 = WEIGHT_ONE;
        // Scale down donors targeting more than their full share if the targets sum past one.
        let (mut after_sum, mut over_sum) = (0u64, 0u64);
        for &d in donors {
            let (hwa, _) = self.tree.hweights(d);
            let t = self.tree.nodes[d as usize].hweight_after_donation;
            after_sum += t;
            if t > hwa {
                over_sum += t;
            }
        }
        let over_target = if after_sum >= w1 { over_sum.saturating_sub(after_sum - (w1 - 1)) } else { 0 };
        if over_target != 0 {
            for &d in donors {
                let (hwa, _) = self.tree.hweights(d);
                let n = &mut self.tree.nodes[d as usize];
                if n.hweight_after_donation > hwa {
                    n.hweight_after_donation = n.hweight_after_donation * over_target / over_sum;
                }
            }
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
