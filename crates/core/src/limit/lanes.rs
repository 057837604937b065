//! The IO a group holds back: one FIFO lane per direction.
//!
//! A read never waits behind a write blocked on a write knob (nor the reverse), as in QEMU, which
//! queues each direction of a drive apart. Within a lane IO leaves in arrival order. Every IO gets a
//! sequence number so that knobs shared by both lanes (`total`) can serve the two lanes in arrival
//! order. The deques keep their capacity, so a steady state allocates nothing.

use std::collections::VecDeque;

use crate::io::{Io, Nanos, Op};

/// An IO waiting in a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The IO.
    pub io: Io,
    /// Arrival order within the group, across both lanes.
    pub seq: u64,
    /// When it was offered.
    pub since: Nanos,
}

/// The two lanes of one group.
#[derive(Clone, Debug, Default)]
pub struct Lanes {
    lanes: [VecDeque<Waiting>; 2],
    next_seq: u64,
}

impl Lanes {
    /// Makes room for `n` IOs in each lane, so that pushing that many allocates nothing.
    pub fn reserve(&mut self, n: usize) {
        self.lanes.iter_mut().for_each(|lane| lane.reserve(n.saturating_sub(lane.len())));
    }

    /// Number of IOs waiting in `op`'s lane.
    pub fn len(&self, op: Op) -> usize {
        self.lanes[op.index()].len()
    }

    /// Number of IOs waiting in both lanes.
    pub fn total(&self) -> usize {
        self.lanes[0].len() + self.lanes[1].len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The `i`-th IO of `op`'s lane, 0 being the front.
    pub fn get(&self, op: Op, i: usize) -> Option<&Waiting> {
        self.lanes[op.index()].get(i)
    }

    /// The front of `op`'s lane.
    pub fn front(&self, op: Op) -> Option<&Waiting> {
        self.get(op, 0)
    }

    /// Appends `io`, offered at `now`, to its lane.
    pub fn push(&mut self, now: Nanos, io: Io) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.lanes[io.op.index()].push_back(Waiting { io, seq, since: now });
    }

    /// Removes the front of `op`'s lane.
    pub fn pop(&mut self, op: Op) -> Option<Waiting> {
        self.lanes[op.index()].pop_front()
    }

    /// Of the fronts of the lanes in `ops`, the direction of the one that arrived first.
    pub fn first_of(&self, ops: impl IntoIterator<Item = Op>) -> Option<Op> {
        ops.into_iter()
            .filter_map(|op| self.front(op).map(|w| (w.seq, op)))
            .min_by_key(|(seq, _)| *seq)
            .map(|(_, op)| op)
    }
}
