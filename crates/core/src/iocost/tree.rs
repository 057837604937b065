//! The weight tree: active and in-use weights, their sums per parent, and cached hweights.
//!
//! Each group has a configured `weight`; while it (or a descendant) is active its `active` weight
//! equals it, and its `inuse` weight is what it currently claims — lower than `active` when it donates
//! budget it does not use. A parent's inuse keeps the ratio of its children's inuse and active sums,
//! so donation deep in the tree shows at every level (kernel `__propagate_weights`).
//!
//! The hierarchical weight (hweight) of a group is the product, over its path, of its weight divided
//! by the sum of its active siblings' weights — once with active weights (its fair share of the
//! device) and once with inuse weights (what it is charged against). Walking the path costs O(depth),
//! so the result is cached per group and revalidated only when the tree's generation number changed:
//! the issue path reads two cached numbers. Weights are fixed point: 1.0 = [`WEIGHT_ONE`].

use std::collections::VecDeque;

use crate::io::{Io, Nanos};

/// Fixed-point one for weights and hweights (kernel `WEIGHT_ONE`).
pub const WEIGHT_ONE: u64 = 1 << 16;

/// Wrap-safe `a > b` on vtime (kernel `time_after64`).
#[inline]
pub(crate) fn after(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) > 0
}

/// Wrap-safe `a < b` on vtime (kernel `time_before64`).
#[inline]
pub(crate) fn before(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) < 0
}

/// `ceil(a * b / c)`, exact in 128 bits when `a * b` overflows, saturating at `u64::MAX` (the kernel
/// wraps past 2^48 vtime units of debt, ~2048 s of device time; saturating keeps such debt huge).
#[inline]
fn mul_div_ceil(a: u64, b: u64, c: u64) -> u64 {
    match a.checked_mul(b) {
        Some(p) => p.div_ceil(c),
        None => u64::try_from((a as u128 * b as u128).div_ceil(c as u128)).unwrap_or(u64::MAX),
    }
}

/// Relative cost of an absolute cost for a group with hweight_inuse `hw` (rounds up).
#[inline]
pub(crate) fn abs_cost_to_cost(abs_cost: u64, hw: u64) -> u64 {
    mul_div_ceil(abs_cost, WEIGHT_ONE, hw)
}

/// Absolute cost of a relative cost at hweight `hw` (rounds up).
#[inline]
pub(crate) fn cost_to_abs_cost(cost: u64, hw: u64) -> u64 {
    mul_div_ceil(cost, hw, WEIGHT_ONE)
}

/// One group of the tree (kernel `ioc_gq`). Index 0 is the root.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// Depth: 0 for the root.
    pub level: u32,
    /// Indices of the path from the root: `ancestors[level]` is the node itself.
    pub ancestors: Box<[u32]>,
    /// Configured weight × WEIGHT_ONE.
    pub weight: u64,
    /// Weight while active (0 when inactive).
    pub active: u64,
    /// Weight in use after donation (1..=active for active leaves).
    pub inuse: u64,
    /// Inuse before the last change; restored on reactivation and after debt.
    pub last_inuse: u64,
    /// Sum of the active children's `active`.
    pub child_active_sum: u64,
    /// Sum of the active children's `inuse`.
    pub child_inuse_sum: u64,
    /// Whether this node is an activated leaf (on the kernel's active list).
    pub on_list: bool,
    /// Tree generation of the cached hweights.
    pub hweight_gen: u64,
    /// Cached hweight by active weights.
    pub hweight_active: u64,
    /// Cached hweight by inuse weights.
    pub hweight_inuse: u64,
    /// Period in which the group last issued.
    pub active_period: u64,
    /// When the group was last activated.
    pub activated_at: Nanos,
    /// Local vtime: budget used so far (the group may issue while `vtime + cost <= vnow`).
    pub vtime: u64,
    /// Local vtime of completed IOs; `vtime - done_vtime` is in flight.
    pub done_vtime: u64,
    /// Budget margin when inuse was last changed, for in-period snapback.
    pub saved_margin: i64,
    /// Byte offset where the group's last IO ended (sequential/random detection).
    pub cursor: u64,
    /// IOs waiting for budget, FIFO. A waiting IO's `charge` holds its absolute cost.
    pub waitq: VecDeque<Io>,
    /// Debt in absolute vtime, from `must_issue` IO issued over budget.
    pub abs_vdebt: u64,
    /// Producer delay, µs (decays by half every second since `delay_at`).
    pub delay_us: u64,
    /// When `delay_us` was set.
    pub delay_at: Nanos,
    /// Whether a delay is in effect (kernel blkg `use_delay`).
    pub use_delay: bool,
    /// Since when the group has had waiters / debt / delay (for the time totals).
    pub wait_since: Option<Nanos>,
    /// See `wait_since`.
    pub indebt_since: Option<Nanos>,
    /// See `wait_since`.
    pub indelay_since: Option<Nanos>,
    /// Total absolute cost charged, debt included.
    pub abs_vusage: u64,
    /// `abs_vusage` at the last planner flush.
    pub last_abs_vusage: u64,
    /// Usage in the last period, µs at the base vrate.
    pub usage_delta_us: u64,
    /// Usage flushed so far, µs at the base vrate of each period (kernel `cost.usage`).
    pub usage_us: u64,
    /// Total ns with waiters.
    pub wait_ns: u64,
    /// Total ns in debt.
    pub indebt_ns: u64,
    /// Total ns with a delay in effect.
    pub indelay_ns: u64,
    /// IOs released to the device.
    pub issued: u64,
    /// IOs completed (`issued - completed` are in flight).
    pub completed: u64,
    /// Armed wake-up time of the waitq timer.
    pub timer: Option<Nanos>,
    /// Donation scratch: hweight_active of a donor, or the sum of donors' below an inner node (`t`).
    pub hweight_donating: u64,
    /// Donation scratch: target hweight_inuse after donation (`t'`).
    pub hweight_after_donation: u64,
    /// Donation scratch: adjusted sum of the children's weights (`s'`).
    pub child_adjusted_sum: u64,
    /// Donation scratch for inner nodes: budget `b` and post-donation budget `b'`.
    pub walk_hwa: u64,
    /// See `walk_hwa`.
    pub walk_hwi: u64,
    /// Donation scratch: whether the node is in the inner walk list.
    pub in_walk: bool,
}

impl Node {
    /// Charges a released IO: `cost` of local vtime (recorded in the IO for its completion) and
    /// `abs_cost` of usage (kernel `iocg_commit_bio`).
    #[inline]
    pub fn commit(&mut self, io: &mut Io, abs_cost: u64, cost: u64) {
        io.charge = cost;
        self.vtime = self.vtime.wrapping_add(cost);
        self.abs_vusage += abs_cost;
        self.issued += 1;
    }
}

/// The tree of one device: nodes plus the generation number that invalidates cached hweights.
#[derive(Debug)]
pub(crate) struct Tree {
    /// All nodes; 0 is the root.
    pub nodes: Vec<Node>,
    /// Bumped whenever weights changed (kernel `hweight_gen`).
    pub gen: u64,
    /// Set by `propagate`, cleared by `commit`.
    pub weights_updated: bool,
}

impl Tree {
    /// A tree holding only the root.
    pub fn new() -> Self {
        let root = Node {
            ancestors: vec![0].into_boxed_slice(),
            weight: 100 * WEIGHT_ONE,
            hweight_active: WEIGHT_ONE,
            hweight_inuse: WEIGHT_ONE,
            ..Node::default()
        };
        Tree { nodes: vec![root], gen: 1, weights_updated: false }
    }

    /// Adds a child of `parent` with `weight` (× WEIGHT_ONE); returns its index.
    pub fn add(&mut self, parent: u32, weight: u64) -> u32 {
        let idx = self.nodes.len() as u32;
        let node = self.fresh(idx, parent, weight);
        self.nodes.push(node);
        idx
    }

    /// Makes the inactive node `idx` a new child of `parent` with `weight`, as `add` would.
    pub fn reuse(&mut self, idx: u32, parent: u32, weight: u64) {
        self.nodes[idx as usize] = self.fresh(idx, parent, weight);
    }

    /// A node of index `idx` under `parent`, never active.
    fn fresh(&self, idx: u32, parent: u32, weight: u64) -> Node {
        let p = &self.nodes[parent as usize];
        let mut ancestors = p.ancestors.to_vec();
        ancestors.push(idx);
        Node {
            level: p.level + 1,
            ancestors: ancestors.into_boxed_slice(),
            weight,
            hweight_gen: self.gen.wrapping_sub(1),
            ..Node::default()
        }
    }

    /// Sets `active`/`inuse` of node `i` and updates the sums up the path (kernel
    /// `__propagate_weights`). With `saved_margin`, records the node's current margin.
    pub fn propagate(&mut self, i: u32, mut active: u64, mut inuse: u64, saved_margin: Option<i64>) {
        let n = &mut self.nodes[i as usize];
        inuse = if !n.on_list && n.child_active_sum != 0 {
            (active * n.child_inuse_sum).div_ceil(n.child_active_sum)
        } else {
            // Deactivation (active 0) gives inuse 0, as the kernel's clamp did; newer kernels leave 1,
            // a phantom 1/65536 of a weight unit in the parent's inuse sum. We keep the sums exact.
            inuse.max(1).min(active)
        };
        n.last_inuse = n.inuse;
        if let Some(m) = saved_margin {
            n.saved_margin = m;
        }
        if active == n.active && inuse == n.inuse {
            return;
        }
        let level = n.level as usize;
        for lvl in (0..level).rev() {
            let (p_idx, c_idx) = {
                let a = &self.nodes[i as usize].ancestors;
                (a[lvl] as usize, a[lvl + 1] as usize)
            };
            let (c_active, c_inuse) = (self.nodes[c_idx].active, self.nodes[c_idx].inuse);
            let c = &mut self.nodes[c_idx];
            c.active = active;
            c.inuse = inuse;
            let p = &mut self.nodes[p_idx];
            p.child_active_sum = p.child_active_sum + active - c_active;
            p.child_inuse_sum = p.child_inuse_sum + inuse - c_inuse;
            let (p_active, p_inuse) = if p.child_active_sum != 0 {
                (p.weight, (p.weight * p.child_inuse_sum).div_ceil(p.child_active_sum))
            } else {
                (0, 0)
            };
            if p_active == p.active && p_inuse == p.inuse {
                break;
            }
            active = p_active;
            inuse = p_inuse;
        }
        self.weights_updated = true;
    }

    /// Publishes weight changes: cached hweights become stale (kernel `commit_weights`).
    pub fn commit(&mut self) {
        if self.weights_updated {
            self.gen = self.gen.wrapping_add(1);
            self.weights_updated = false;
        }
    }

    /// `(hweight_active, hweight_inuse)` of node `i`, from the cache when the generation matches.
    #[inline]
    pub fn hweights(&mut self, i: u32) -> (u64, u64) {
        let gen = self.gen;
        let n = &self.nodes[i as usize];
        if n.hweight_gen == gen {
            return (n.hweight_active, n.hweight_inuse);
        }
        let (hwa, hwi) = self.compute_hweights(i);
        let n = &mut self.nodes[i as usize];
        n.hweight_active = hwa;
        n.hweight_inuse = hwi;
        n.hweight_gen = gen;
        (hwa, hwi)
    }

    /// Walks the path to compute `(hweight_active, hweight_inuse)` without touching the cache.
    pub fn compute_hweights(&self, i: u32) -> (u64, u64) {
        let n = &self.nodes[i as usize];
        let (mut hwa, mut hwi) = (WEIGHT_ONE, WEIGHT_ONE);
        for lvl in 0..n.level as usize {
            let p = &self.nodes[n.ancestors[lvl] as usize];
            let c = &self.nodes[n.ancestors[lvl + 1] as usize];
            if p.child_active_sum == 0 || p.child_inuse_sum == 0 {
                continue;
            }
            hwa = hwa * c.active / c.active.max(p.child_active_sum);
            hwi = hwi * c.inuse / c.inuse.max(p.child_inuse_sum);
        }
        (hwa.max(1), hwi.max(1))
    }

    /// The hweight_inuse node `i` would have with inuse raised to active, others unchanged
    /// (kernel `current_hweight_max`).
    pub fn hweight_max(&self, i: u32) -> u64 {
        let n = &self.nodes[i as usize];
        let mut hwm = WEIGHT_ONE;
        let mut inuse = n.active;
        for lvl in (0..n.level as usize).rev() {
            let p = &self.nodes[n.ancestors[lvl] as usize];
            let c = &self.nodes[n.ancestors[lvl + 1] as usize];
            let child_inuse_sum = p.child_inuse_sum + inuse - c.inuse;
            hwm = hwm * inuse / child_inuse_sum;
            inuse = (p.active * child_inuse_sum).div_ceil(p.child_active_sum);
        }
        hwm.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activate(t: &mut Tree, i: u32) {
        t.nodes[i as usize].on_list = true;
        let w = t.nodes[i as usize].weight;
        t.propagate(i, w, w, None);
        t.commit();
    }

    #[test]
    fn kernel_header_example_hweights() {
        // A(100){A0(100), A1(100)}, B(300) → A0 = A1 = 12.5%, B = 75% (blk-iocost.c's opening comment).
        let mut t = Tree::new();
        let a = t.add(0, 100 * WEIGHT_ONE);
        let a0 = t.add(a, 100 * WEIGHT_ONE);
        let a1 = t.add(a, 100 * WEIGHT_ONE);
        let b = t.add(0, 300 * WEIGHT_ONE);
        for i in [a0, a1, b] {
            activate(&mut t, i);
        }
        assert_eq!(t.hweights(a0), (WEIGHT_ONE / 8, WEIGHT_ONE / 8));
        assert_eq!(t.hweights(a1), (WEIGHT_ONE / 8, WEIGHT_ONE / 8));
        assert_eq!(t.hweights(b), (WEIGHT_ONE * 3 / 4, WEIGHT_ONE * 3 / 4));
        // Only active groups count: with A1 idle, A0 has all of A's share.
        t.propagate(a1, 0, 0, None);
        t.commit();
        assert_eq!(t.hweights(a0).0, WEIGHT_ONE / 4);
    }

    #[test]
    fn cache_is_revalidated_by_generation_only() {
        let mut t = Tree::new();
        let a = t.add(0, 100 * WEIGHT_ONE);
        let b = t.add(0, 100 * WEIGHT_ONE);
        activate(&mut t, a);
        assert_eq!(t.hweights(a).0, WEIGHT_ONE);
        activate(&mut t, b);
        assert_eq!(t.hweights(a).0, WEIGHT_ONE / 2);
        // A lowered inuse shows in hweight_inuse, and hweight_max undoes it.
        t.propagate(a, 100 * WEIGHT_ONE, 25 * WEIGHT_ONE, None);
        t.commit();
        assert_eq!(t.hweights(a), (WEIGHT_ONE / 2, WEIGHT_ONE / 5));
        assert_eq!(t.hweight_max(a), WEIGHT_ONE / 2);
    }

    #[test]
    fn inner_inuse_keeps_children_ratio() {
        let mut t = Tree::new();
        let a = t.add(0, 200 * WEIGHT_ONE);
        let a0 = t.add(a, 100 * WEIGHT_ONE);
        let b = t.add(0, 200 * WEIGHT_ONE);
        activate(&mut t, a0);
        activate(&mut t, b);
        t.propagate(a0, 100 * WEIGHT_ONE, 50 * WEIGHT_ONE, None);
        t.commit();
        assert_eq!(t.nodes[a as usize].inuse, 100 * WEIGHT_ONE);
        // a0's hweight_inuse: 100/(100+200) = 1/3.
        assert_eq!(t.hweights(a0).1, WEIGHT_ONE / 3);
    }
}
