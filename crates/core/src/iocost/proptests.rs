//! Property tests of IOCost on random workloads with random weight changes.
//!
//! 1. Conservation: every submitted IO is released exactly once, also with the device-depth option.
//! 2. Budget: in every planning period, the absolute cost a group issues (debt-charged IO aside) is at
//!    most its highest hweight_inuse in the period (sampled, and as charged) times (the global vtime advance + half a period of
//!    budget carried in or granted per activation), plus one IO, plus what a waiting group banked: up
//!    to its head IO's *relative* cost at the smallest share it has had, which, as in the kernel, it
//!    spends at its current share once its weight rises (bounded by one largest IO × highest / lowest
//!    share). Summed over groups: vrate × period plus those margins.

use std::collections::HashMap;

use proptest::prelude::*;

use super::depth::DepthLimit;
use super::model::{CostModel, LinearModel, ModelParams};
use super::qos::QosConfig;
use super::tree::WEIGHT_ONE;
use super::IoCost;
use crate::controller::{Completion, Controller, Dispatch, Event, Submit};
use crate::group::GroupSettings;
use crate::io::{GroupId, Io, Nanos, Op};

const LEAVES: [&str; 5] = ["a", "b", "c/x", "c/y", "d/e/f"];

#[derive(Clone, Debug)]
enum Step {
    Submit {
        leaf: usize,
        write: bool,
        pages: u32,
        must_issue: bool,
    },
    Complete {
        pick: usize,
    },
    Advance {
        us: u64,
    },
    Weight {
        leaf: usize,
        weight: u32,
    },
    /// Removes the leaf (refused while it has IO queued or in flight) and configures it again.
    Rejoin {
        leaf: usize,
        weight: u32,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..LEAVES.len(), any::<bool>(), 1u32..32, prop::bool::weighted(0.1))
            .prop_map(|(leaf, write, pages, must_issue)| Step::Submit { leaf, write, pages, must_issue }),
        4 => any::<usize>().prop_map(|pick| Step::Complete { pick }),
        3 => (0u64..4_000).prop_map(|us| Step::Advance { us }),
        1 => (0..LEAVES.len(), 1u32..=10_000).prop_map(|(leaf, weight)| Step::Weight { leaf, weight }),
        1 => (0..LEAVES.len(), 1u32..=10_000).prop_map(|(leaf, weight)| Step::Rejoin { leaf, weight }),
    ]
}

/// Per-group accounting of the current planning period.
#[derive(Clone, Copy, Default)]
struct Window {
    issued_abs: u64,
    max_hwi: u64,
    /// Smallest hweight_inuse the group has had since the test began (not reset per period).
    min_hwi_ever: u64,
    activations: u64,
}

struct Driver {
    c: IoCost,
    model: LinearModel,
    ids: Vec<GroupId>,
    now: Nanos,
    wake: Option<Nanos>,
    next_id: u64,
    released: HashMap<u64, u32>,
    inflight: Vec<(Io, Nanos)>,
    window: Vec<Window>,
    window_vstart: u64,
    max_abs_cost: u64,
}

impl Driver {
    /// A driver of IOCost, with the device-depth option when `depth` is given.
    fn new(weights: &[u32], depth: Option<u32>) -> Self {
        let qos = "rpct=90 rlat=5000 wpct=90 wlat=10000".parse::<QosConfig>().unwrap().params;
        let model = LinearModel::new(ModelParams::SSD_DFL);
        let mut c = IoCost::new(model, qos);
        if let Some(max) = depth {
            c = c.with_depth_limit(DepthLimit { max });
        }
        let ids =
            LEAVES.iter().zip(weights).map(|(p, w)| c.configure(0, p, &GroupSettings::weight(*w)).unwrap()).collect();
        let max_abs_cost =
            model.cost(Op::Write, 32 * 4096, true, false).max(model.cost(Op::Read, 32 * 4096, true, false));
        Driver {
            c,
            model,
            ids,
            now: 0,
            wake: None,
            next_id: 0,
            released: HashMap::new(),
            inflight: Vec::new(),
            window: vec![Window::default(); LEAVES.len()],
            window_vstart: 0,
            max_abs_cost,
        }
    }

    fn release(&mut self, io: Io) {
        *self.released.entry(io.id).or_default() += 1;
        let g = self.ids.iter().position(|&id| id == io.group).expect("only leaves issue");
        // Debt-charged IO (charge 0) is outside the bound. Offsets are 1 GiB apart: every IO but a
        // group's first is random, and random costs bound both.
        let abs = self.model.cost(io.op, io.len, true, false);
        if let Some(charged_hwi) = (abs * WEIGHT_ONE).checked_div(io.charge) {
            let w = &mut self.window[g];
            w.issued_abs += abs;
            // The share the IO was charged at (charge = ⌈abs / hwi⌉), which samples between calls
            // can miss: a planner tick may raise a share, release waiters, and lower it again.
            w.max_hwi = w.max_hwi.max(charged_hwi);
        }
        self.inflight.push((io, self.now));
    }

    /// Dispatches what is due, runs a due tick, and samples hweights and activations.
    fn settle(&mut self) -> Result<(), TestCaseError> {
        loop {
            match self.c.dispatch(self.now) {
                Dispatch::Io(io) => self.release(io),
                Dispatch::At(t) => {
                    self.wake = Some(t);
                    break;
                }
                Dispatch::Idle => {
                    self.wake = None;
                    break;
                }
            }
        }
        for e in self.c.take_events() {
            if let Event::Activate { group, .. } = e {
                let leaf = LEAVES.iter().position(|p| *p == group).expect("only leaves issue");
                self.window[leaf].activations += 1;
            }
        }
        for (k, &g) in self.ids.iter().enumerate() {
            let node = self.c.node_of[g.index()];
            if self.c.tree.nodes[node as usize].active != 0 {
                let hwi = self.c.tree.compute_hweights(node).1;
                let w = &mut self.window[k];
                w.max_hwi = w.max_hwi.max(hwi);
                w.min_hwi_ever = if w.min_hwi_ever == 0 { hwi } else { w.min_hwi_ever.min(hwi) };
            }
        }
        if self.c.next_tick().is_some_and(|t| t <= self.now) {
            // With the device-depth option an IO charged in one period may wait for a slot into
            // the next, so the per-period bound on releases holds only without it.
            if self.c.slots.is_none() {
                self.check_window()?;
            }
            self.c.tick(self.now);
            return self.settle();
        }
        Ok(())
    }

    /// Checks the budget bound for the period ending now and opens the next one.
    fn check_window(&mut self) -> Result<(), TestCaseError> {
        let vnow = self.c.vnow(self.now);
        let dv = vnow.wrapping_sub(self.window_vstart) as u128;
        let target = self.c.margins.target as u128;
        let max_io = self.max_abs_cost as u128;
        let (mut total, mut total_allowed) = (0u128, dv);
        for (k, w) in self.window.iter().enumerate() {
            let budget = dv + target * (1 + w.activations as u128);
            let banked = max_io * w.max_hwi as u128 / w.min_hwi_ever.max(1) as u128;
            let allowed = w.max_hwi as u128 * budget / WEIGHT_ONE as u128 + max_io + banked;
            prop_assert!(
                w.issued_abs as u128 <= allowed,
                "group {} issued {} > allowed {} (dv {}, hwi {})",
                LEAVES[k],
                w.issued_abs,
                allowed,
                dv,
                w.max_hwi
            );
            total += w.issued_abs as u128;
            if w.max_hwi > 0 {
                total_allowed += target * (1 + w.activations as u128) + max_io + banked;
            }
        }
        prop_assert!(total <= total_allowed, "device got {} > {} (dv {})", total, total_allowed, dv);
        self.window_vstart = vnow;
        for w in &mut self.window {
            *w = Window { min_hwi_ever: w.min_hwi_ever, ..Window::default() };
        }
        Ok(())
    }

    /// Moves time forward to `until`, stopping at every wake-up and tick on the way.
    fn advance(&mut self, until: Nanos) -> Result<(), TestCaseError> {
        loop {
            let next = [self.wake, self.c.next_tick()].into_iter().flatten().filter(|&t| t <= until).min();
            let Some(t) = next else { break };
            self.now = t.max(self.now);
            self.settle()?;
            if self.wake == Some(t)
                && self.c.next_tick() != Some(t)
                && matches!(self.c.dispatch(self.now), Dispatch::At(x) if x == t)
            {
                // Guard against a timer that does not move: it must release or re-arm later.
                prop_assert!(false, "timer at {t} fired without progress");
            }
        }
        self.now = until.max(self.now);
        self.settle()
    }

    fn complete(&mut self, pick: usize) {
        if self.inflight.is_empty() {
            return;
        }
        let (io, released) = self.inflight.swap_remove(pick % self.inflight.len());
        self.c.complete(self.now, &io, Completion { released, started: released });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn iocost_conserves_ios_and_keeps_groups_within_budget(
        weights in prop::collection::vec(1u32..=10_000, LEAVES.len()),
        steps in prop::collection::vec(step(), 1..300),
        depth in prop::option::of(1u32..8),
    ) {
        let mut d = Driver::new(&weights, depth);
        for s in steps {
            match s {
                Step::Submit { leaf, write, pages, must_issue } => {
                    d.next_id += 1;
                    let op = if write { Op::Write } else { Op::Read };
                    let mut io = Io::new(d.next_id, d.ids[leaf], op, d.next_id << 30, pages * 4096);
                    io.flags.must_issue = must_issue;
                    if let Submit::Issue { io, .. } = d.c.submit(d.now, io) {
                        d.release(io);
                    }
                }
                Step::Complete { pick } => d.complete(pick),
                Step::Advance { us } => d.advance(d.now + us * 1_000)?,
                Step::Weight { leaf, weight } => {
                    d.c.configure(d.now, LEAVES[leaf], &GroupSettings::weight(weight)).unwrap();
                }
                Step::Rejoin { leaf, weight } => {
                    let busy = d.inflight.iter().any(|(io, _)| io.group == d.ids[leaf])
                        || d.c.stats(d.now).groups[d.ids[leaf].index()].queued != 0;
                    match d.c.remove(d.now, LEAVES[leaf]) {
                        Ok(_) => {
                            prop_assert!(!busy, "{} removed with IO queued or in flight", LEAVES[leaf]);
                            d.ids[leaf] = d.c.configure(d.now, LEAVES[leaf], &GroupSettings::weight(weight)).unwrap();
                            d.window[leaf] = Window::default();
                        }
                        Err(e) => prop_assert!(busy, "{} refused while idle: {}", LEAVES[leaf], e),
                    }
                }
            }
            d.settle()?;
        }
        // Drain: complete everything and let time pass until every queued IO is out.
        for _ in 0..100_000 {
            while !d.inflight.is_empty() {
                d.complete(0);
            }
            if d.c.stats(d.now).groups.iter().all(|g| g.queued == 0) {
                break;
            }
            let next = [d.wake, d.c.next_tick()].into_iter().flatten().min().expect("queued IO needs a wake-up");
            d.advance(next)?;
        }
        prop_assert_eq!(d.released.len() as u64, d.next_id, "every submitted IO released");
        prop_assert!(d.released.values().all(|&n| n == 1), "no IO released twice");
    }
}
