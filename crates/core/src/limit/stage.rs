//! The limit stage: every group's gate and lanes, and when to look at which group again.
//!
//! A group without limits has no gate and its IO passes untouched (one branch). A limited group's IO
//! is offered to its gate; what the gate refuses waits in the group's lanes. Groups with waiting IO
//! sit in a min-heap keyed by the time their gate named; [`LimitStage::dispatch`] asks the gates of
//! the groups that are due, releases one IO per call, and otherwise returns the earliest time. A
//! group is put in the heap when an IO becomes the front of an empty lane (an IO behind another one
//! cannot leave before it) and again after each answer of its gate; every push bumps the group's
//! generation so that superseded heap entries are recognised and dropped. Right after releasing an
//! IO the stage asks the gate about the next one, so a group is due exactly when it may go on; a
//! front the gate let go then is kept (`released`) and handed out at the next call.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::controller::Dispatch;
use crate::error::{Error, Result};
use crate::io::{GroupId, Io, Nanos, Op};
use crate::limit::gate::{Gate, Next};
use crate::limit::knobs::Limits;
use crate::limit::lanes::Lanes;

/// One group's limiter state.
#[derive(Clone, Debug)]
struct GroupLimit<G> {
    gate: Option<G>,
    lanes: Lanes,
    /// When the group is due in the heap, if it is there.
    scheduled: Option<Nanos>,
    /// A lane front the gate already let go (and charged), handed out at the next call.
    released: Option<Op>,
    generation: u64,
    /// Total time IOs waited here, ns.
    waited_ns: u64,
}

impl<G: Gate> GroupLimit<G> {
    /// The gate's answer at `now`; without a gate (limits removed while IO waited) IO leaves in
    /// arrival order.
    fn next(&mut self, now: Nanos) -> Next {
        match self.gate.as_mut() {
            Some(gate) => gate.next(now, &self.lanes),
            None => self.lanes.first_of([Op::Read, Op::Write]).map_or(Next::Empty, Next::Release),
        }
    }
}

impl<G> Default for GroupLimit<G> {
    fn default() -> Self {
        GroupLimit { gate: None, lanes: Lanes::default(), scheduled: None, released: None, generation: 0, waited_ns: 0 }
    }
}

/// The limiters of all groups of one controller.
#[derive(Clone, Debug)]
pub struct LimitStage<G> {
    groups: Vec<GroupLimit<G>>,
    due: BinaryHeap<Reverse<(Nanos, u32, u64)>>,
    /// IOs a limited group's lanes (and the due heap) are reserved for ([`crate::Limited::reserving`]).
    pub reserve: usize,
}

impl<G> Default for LimitStage<G> {
    fn default() -> Self {
        LimitStage { groups: Vec::new(), due: BinaryHeap::new(), reserve: 0 }
    }
}

impl<G: Gate> LimitStage<G> {
    /// Sets the limits of group `id` (validated by the caller). New buckets start as their source
    /// starts them; IO already waiting stays queued, in order, and is judged by the new buckets.
    pub fn configure(&mut self, now: Nanos, id: GroupId, limits: &Limits) {
        if self.groups.len() <= id.index() {
            self.groups.resize_with(id.index() + 1, GroupLimit::default);
        }
        let group = &mut self.groups[id.index()];
        group.gate = limits.is_limited().then(|| G::new(now, limits));
        if group.gate.is_some() {
            // Room for a queue's worth of IO in the group's lanes and of due times (superseded
            // ones included) in the heap: admitting and scheduling allocate nothing below it.
            group.lanes.reserve(self.reserve);
            self.due.reserve(self.reserve);
        }
        group.released = None;
        if !group.lanes.is_empty() {
            self.schedule(id.index(), now);
        }
    }

    /// Offers `io` at `now`: true if it passes now, false if it waits here (see [`LimitStage::dispatch`]).
    #[inline]
    pub fn admit(&mut self, now: Nanos, io: Io) -> bool {
        // Inlined into every controller's submit: a group without limits costs two loads here.
        match self.groups.get(io.group.index()) {
            Some(group) if group.gate.is_some() => self.admit_limited(now, io),
            _ => true,
        }
    }

    /// [`LimitStage::admit`] for a group that has a gate (out of line: the issue path of a group
    /// without limits stays two loads).
    fn admit_limited(&mut self, now: Nanos, io: Io) -> bool {
        let group = &mut self.groups[io.group.index()];
        let gate = group.gate.as_mut().expect("admit calls this only for a group with a gate");
        if io.flags.must_issue {
            gate.force(now, &group.lanes, &io);
            return true;
        }
        if gate.offer(now, &group.lanes, &io) {
            return true;
        }
        let front = group.lanes.len(io.op) == 0;
        group.lanes.push(now, io);
        if front {
            self.schedule(io.group.index(), now);
        }
        false
    }

    /// The next waiting IO that may leave at `now`, or when one may.
    pub fn dispatch(&mut self, now: Nanos) -> Dispatch {
        while let Some(&Reverse((at, g, generation))) = self.due.peek() {
            let group = &mut self.groups[g as usize];
            if group.generation != generation || group.scheduled != Some(at) {
                self.due.pop();
                continue;
            }
            if at > now {
                return Dispatch::At(at);
            }
            self.due.pop();
            group.scheduled = None;
            let next = match group.released.take() {
                Some(op) => Next::Release(op),
                None => group.next(now),
            };
            let Next::Release(op) = next else {
                self.follow(g as usize, now, next);
                continue;
            };
            let Some(waiting) = group.lanes.pop(op) else { continue };
            if let Some(gate) = group.gate.as_mut() {
                gate.popped(op);
            }
            group.waited_ns += now.saturating_sub(waiting.since);
            // Ask at once what comes next, so that the group is due exactly when it may go on.
            let next = group.next(now);
            self.follow(g as usize, now, next);
            return Dispatch::Io(waiting.io);
        }
        Dispatch::Idle
    }

    /// Schedules group `g` as its gate's answer at `now`, `next`, says.
    fn follow(&mut self, g: usize, now: Nanos, next: Next) {
        match next {
            Next::Release(op) => {
                self.groups[g].released = Some(op);
                self.schedule(g, now);
            }
            Next::At(at) => self.schedule(g, at),
            Next::Empty => {}
        }
    }

    /// [`Error::GroupBusy`] naming `path` while IO of group `id` waits here.
    pub fn check_empty(&self, id: GroupId, path: &str) -> Result<()> {
        match self.queued(id) {
            0 => Ok(()),
            n => Err(Error::GroupBusy {
                path: path.trim_matches('/').to_string(),
                reason: format!("{n} IOs wait at its limits: dispatch them first"),
            }),
        }
    }

    /// Forgets group `id`'s limits and totals (its group was removed; its id may come back).
    pub fn clear(&mut self, id: GroupId) {
        if let Some(group) = self.groups.get_mut(id.index()) {
            let generation = group.generation + 1;
            *group = GroupLimit { generation, ..GroupLimit::default() };
        }
    }

    /// IOs of group `id` waiting here.
    pub fn queued(&self, id: GroupId) -> u64 {
        self.groups.get(id.index()).map_or(0, |g| g.lanes.total() as u64)
    }

    /// Total time IOs of group `id` waited here, µs.
    pub fn waited_us(&self, id: GroupId) -> u64 {
        self.groups.get(id.index()).map_or(0, |g| g.waited_ns / 1_000)
    }

    /// The gate of group `id`, if it has limits.
    pub fn gate(&self, id: GroupId) -> Option<&G> {
        self.groups.get(id.index()).and_then(|g| g.gate.as_ref())
    }

    /// Puts group `g` in the heap at `at`, unless it is already due no later.
    fn schedule(&mut self, g: usize, at: Nanos) {
        let group = &mut self.groups[g];
        if group.scheduled.is_some_and(|s| s <= at) {
            return;
        }
        group.generation += 1;
        group.scheduled = Some(at);
        self.due.push(Reverse((at, g as u32, group.generation)));
    }
}
