//! A group's leaky buckets, one per set knob, applied as QEMU's throttle groups apply them
//! (`util/throttle.c`, `block/throttle-groups.c`).
//!
//! QEMU leaks every bucket of the group to `now`, then computes the wait of a request as the longest
//! wait of the buckets of its direction (`throttle_compute_wait_for`). A request goes at once only if
//! that wait is zero *and* no earlier request of its direction is queued; otherwise it queues, and a
//! timer at `now + wait` wakes the first queued request, which is then charged and goes, and the wait
//! of the next one is computed. Charging happens after admission (`throttle_account`): bytes to the
//! bps buckets, `units` (fractional with `iops_size`) to the iops buckets.
//!
//! Here the queue is the group's [`Lanes`] and the timer is [`Next::At`]; everything else is QEMU's.

use crate::io::{Io, Nanos, Op};
use crate::limit::gate::{ActiveKnobs, Gate, Next};
use crate::limit::knobs::{units, Algorithm, Knob, Limits, Unit};
use crate::limit::lanes::Lanes;
use crate::limit::leaky::LeakyBucket;

/// A group's QEMU leaky buckets.
#[derive(Clone, Debug)]
pub struct LeakyGate {
    buckets: [LeakyBucket; 6],
    active: ActiveKnobs,
    iops_size: u64,
    previous_leak: Nanos,
}

impl LeakyGate {
    /// The bucket of `knob` (one that never waits when the knob is not set).
    pub fn bucket(&self, knob: Knob) -> &LeakyBucket {
        &self.buckets[knob.index()]
    }

    /// Leaks every bucket for the time since the last leak (QEMU `throttle_do_leak`).
    fn leak(&mut self, now: Nanos) {
        if now > self.previous_leak {
            let delta = now - self.previous_leak;
            for bucket in self.buckets.iter_mut().filter(|b| b.is_set()) {
                bucket.leak(delta);
            }
            self.previous_leak = now;
        }
    }

    /// The longest wait of the buckets an IO of `op` passes.
    fn wait(&self, op: Op) -> Nanos {
        self.active.for_op(op).iter().map(|k| self.buckets[k.index()].wait()).max().unwrap_or(0)
    }

    /// Charges `io` to the buckets of its direction.
    fn account(&mut self, io: &Io) {
        let units = units(io.len, self.iops_size);
        for knob in self.active.for_op(io.op) {
            let amount = match knob.unit() {
                Unit::Iops => units,
                Unit::Bps => f64::from(io.len),
            };
            self.buckets[knob.index()].account(amount);
        }
    }
}

impl Gate for LeakyGate {
    const NAME: &'static str = "leaky-bucket";
    const ALGORITHM: Algorithm = Algorithm::LeakyBucket;

    fn new(now: Nanos, limits: &Limits) -> Self {
        LeakyGate {
            buckets: Knob::ALL.map(|k| LeakyBucket::new(limits.knob(k))),
            active: ActiveKnobs::of(limits),
            iops_size: limits.iops_size,
            previous_leak: now,
        }
    }

    fn offer(&mut self, now: Nanos, lanes: &Lanes, io: &Io) -> bool {
        if lanes.len(io.op) > 0 {
            return false;
        }
        self.leak(now);
        if self.wait(io.op) > 0 {
            return false;
        }
        self.account(io);
        true
    }

    fn next(&mut self, now: Nanos, lanes: &Lanes) -> Next {
        self.leak(now);
        // Fronts in arrival order, so that the earlier one goes first when both may.
        let Some(first) = lanes.first_of([Op::Read, Op::Write]) else { return Next::Empty };
        let second = if first == Op::Read { Op::Write } else { Op::Read };
        let mut soonest = Nanos::MAX;
        for op in [first, second] {
            let Some(front) = lanes.front(op) else { continue };
            let wait = self.wait(op);
            if wait == 0 {
                self.account(&front.io);
                return Next::Release(op);
            }
            soonest = soonest.min(wait);
        }
        Next::At(now + soonest)
    }

    fn popped(&mut self, _op: Op) {}

    fn force(&mut self, now: Nanos, _lanes: &Lanes, io: &Io) {
        self.leak(now);
        self.account(io);
    }
}
