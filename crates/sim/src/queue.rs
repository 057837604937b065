//! The event queue: a min-heap of events ordered by (virtual time, sequence number).
//!
//! The sequence number is assigned at push time, so events due at the same nanosecond fire in the
//! order they were scheduled. That tie-break is what makes a run deterministic: nothing depends on
//! heap internals or on hashing.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use ioshare_core::Nanos;

/// Something the engine must do at a given virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// A producer slot of a job may submit its next IO.
    Arrive { job: u32, slot: u32 },
    /// The device finished the in-flight IO `token` on server `slot`.
    Done { token: u32, slot: u32 },
    /// The controller said an IO may be released now (`Dispatch::At`).
    Wake,
    /// The controller's planner is due (`next_tick`).
    Tick,
    /// A job's own control timer (latency-seeking clients adjust their concurrency).
    JobTimer { job: u32 },
    /// A scheduled change of the scenario (index into its change list).
    Change { index: u32 },
    /// Record the per-interval time series.
    Sample,
}

#[derive(Debug, PartialEq, Eq)]
struct Entry {
    at: Nanos,
    seq: u64,
    ev: Ev,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest (time, seq) first.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Deterministic priority queue of events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    /// Schedules `ev` at `at`.
    pub fn push(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, ev });
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, Ev)> {
        self.heap.pop().map(|e| (e.at, e.ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_fifo_among_equal_times() {
        let mut q = EventQueue::default();
        q.push(5, Ev::Wake);
        q.push(3, Ev::Tick);
        q.push(5, Ev::Sample);
        q.push(3, Ev::Change { index: 1 });
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(3, Ev::Tick), (3, Ev::Change { index: 1 }), (5, Ev::Wake), (5, Ev::Sample)]);
    }
}
