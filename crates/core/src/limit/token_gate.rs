//! A group's token buckets, one per set knob, applied as librbd's `QosImageDispatch` applies its six
//! `TokenBucketThrottle`s.
//!
//! librbd asks every throttle that applies to a request for its tokens independently; each throttle
//! grants what it has and queues the request, with the rest of its need, behind the requests it
//! already holds (strict FIFO per throttle); the request is dispatched when every throttle has
//! granted it in full. Each throttle serves its queue from the head at each of its own ticks.
//!
//! Here the waiting requests live once, in the group's [`Lanes`], and each bucket keeps a *frontier*:
//! the first waiting IO it has not yet granted in full, and how much of that one it granted already.
//! Because a bucket serves in arrival order, the IOs before its frontier are exactly those it has
//! granted, so one position per lane (two for `total` buckets, which serve both lanes merged by
//! arrival) and one partial count describe the whole queue of that throttle. A lane's front leaves
//! when it is behind the frontier of every bucket that applies to it. Refills, and the serving that
//! librbd's timer does at each of them, are replayed lazily in order whenever the gate is used.
//!
//! A new IO passes at once when no applicable bucket holds a queue and each has its tokens: the fast
//! path. Tokens are whole: with `iops_size`, an IO counts `⌈len / iops_size⌉` operations.

use crate::io::{Io, Nanos, Op};
use crate::limit::gate::{ActiveKnobs, Gate, Next};
use crate::limit::knobs::{whole_units, Algorithm, Knob, Limits, Unit};
use crate::limit::lanes::Lanes;
use crate::limit::token::TokenBucket;

/// Where a bucket's queue starts: per lane, the index of the first IO not yet granted in full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Frontier {
    pos: [usize; 2],
    /// Tokens already granted to the IO at the frontier.
    got: u64,
}

/// The directions whose lanes a knob's bucket serves.
fn lanes_of(knob: Knob) -> &'static [Op] {
    match (knob.applies_to(Op::Read), knob.applies_to(Op::Write)) {
        (true, true) => &[Op::Read, Op::Write],
        (true, false) => &[Op::Read],
        _ => &[Op::Write],
    }
}

impl Frontier {
    /// Whether the bucket of `knob` holds waiting IO.
    fn blocks(&self, knob: Knob, lanes: &Lanes) -> bool {
        lanes_of(knob).iter().any(|&op| self.pos[op.index()] < lanes.len(op))
    }

    /// The IO at the frontier (the earlier arrival of the lanes served).
    fn next_io(&self, knob: Knob, lanes: &Lanes) -> Option<Io> {
        lanes_of(knob).iter().filter_map(|&op| lanes.get(op, self.pos[op.index()])).min_by_key(|w| w.seq).map(|w| w.io)
    }
}

/// A group's librbd token buckets.
#[derive(Clone, Debug)]
pub struct TokenGate {
    buckets: [Option<TokenBucket>; 6],
    frontiers: [Frontier; 6],
    active: ActiveKnobs,
    iops_size: u64,
    /// The earliest refill due among the buckets.
    next_refill: Nanos,
}

impl TokenGate {
    /// Tokens `io` needs from `knob`'s bucket.
    fn need(&self, knob: Knob, io: &Io) -> u64 {
        match knob.unit() {
            Unit::Iops => whole_units(io.len, self.iops_size),
            Unit::Bps => u64::from(io.len),
        }
    }

    /// The bucket state of `knob` (None when the knob is not set).
    pub fn bucket(&self, knob: Knob) -> Option<&TokenBucket> {
        self.buckets[knob.index()].as_ref()
    }

    /// Serves `knob`'s queue from its frontier with the tokens available now.
    fn serve(&mut self, knob: Knob, lanes: &Lanes) {
        let k = knob.index();
        while let Some(io) = self.frontiers[k].next_io(knob, lanes) {
            let want = self.need(knob, &io) - self.frontiers[k].got;
            let Some(bucket) = self.buckets[k].as_mut() else { return };
            let got = bucket.take(want);
            let front = &mut self.frontiers[k];
            if got < want {
                front.got += got;
                return;
            }
            front.pos[io.op.index()] += 1;
            front.got = 0;
        }
    }

    /// Replays, in order, every refill of every bucket due by `now`, serving queues at each.
    fn catch_up(&mut self, now: Nanos, lanes: &Lanes) {
        if now < self.next_refill && lanes.is_empty() {
            return;
        }
        for knob in Knob::ALL {
            let k = knob.index();
            if self.buckets[k].is_none() {
                continue;
            }
            loop {
                let blocked = self.frontiers[k].blocks(knob, lanes);
                if blocked {
                    self.serve(knob, lanes);
                }
                let Some(bucket) = self.buckets[k].as_mut() else { break };
                if bucket.next_refill() > now {
                    break;
                }
                if !self.frontiers[k].blocks(knob, lanes) {
                    bucket.refill_until(now);
                    break;
                }
                bucket.refill();
            }
        }
        self.next_refill = self.earliest_refill();
    }

    /// The earliest refill due among the buckets (`Nanos::MAX` without buckets).
    fn earliest_refill(&self) -> Nanos {
        self.buckets.iter().flatten().map(TokenBucket::next_refill).min().unwrap_or(Nanos::MAX)
    }

    /// Whether the front of `op`'s lane has been granted by every bucket.
    fn ready(&self, op: Op, lanes: &Lanes) -> bool {
        lanes.front(op).is_some()
            && self.active.for_op(op).iter().all(|k| self.frontiers[k.index()].pos[op.index()] > 0)
    }
}

impl Gate for TokenGate {
    const NAME: &'static str = "token-bucket";
    const ALGORITHM: Algorithm = Algorithm::TokenBucket;

    fn new(now: Nanos, limits: &Limits) -> Self {
        let tick_min = limits.tick_min();
        let mut gate = TokenGate {
            buckets: Knob::ALL.map(|k| {
                let limit = limits.knob(k);
                limit.is_set().then(|| TokenBucket::new(now, limit, tick_min))
            }),
            frontiers: [Frontier::default(); 6],
            active: ActiveKnobs::of(limits),
            iops_size: limits.iops_size,
            next_refill: 0,
        };
        gate.next_refill = gate.earliest_refill();
        gate
    }

    fn offer(&mut self, now: Nanos, lanes: &Lanes, io: &Io) -> bool {
        self.catch_up(now, lanes);
        let active = self.active;
        let knobs = active.for_op(io.op);
        // The fast path: with nothing waiting in the group no bucket holds a queue.
        let nobody_waits = lanes.is_empty();
        let free = |gate: &Self, knob: Knob| nobody_waits || !gate.frontiers[knob.index()].blocks(knob, lanes);
        // An IO of a direction whose lane holds IO, even IO already granted but not yet dispatched,
        // queues behind it.
        let passes = lanes.len(io.op) == 0
            && knobs.iter().all(|&knob| {
                free(self, knob) && self.bucket(knob).is_some_and(|b| b.available() >= self.need(knob, io))
            });
        for &knob in knobs {
            if !passes && !free(self, knob) {
                continue;
            }
            let want = self.need(knob, io);
            let Some(bucket) = self.buckets[knob.index()].as_mut() else { continue };
            let got = bucket.take(want);
            if !passes {
                // The IO will be appended to its lane, at index `len`: this bucket's frontier.
                let front = &mut self.frontiers[knob.index()];
                if got == want {
                    front.pos[io.op.index()] += 1;
                } else {
                    front.got = got;
                }
            }
        }
        passes
    }

    fn next(&mut self, now: Nanos, lanes: &Lanes) -> Next {
        self.catch_up(now, lanes);
        let read = self.ready(Op::Read, lanes);
        let write = self.ready(Op::Write, lanes);
        let op = match (read, write) {
            (true, true) => lanes.first_of([Op::Read, Op::Write]),
            (true, false) => Some(Op::Read),
            (false, true) => Some(Op::Write),
            (false, false) => None,
        };
        if let Some(op) = op {
            return Next::Release(op);
        }
        if lanes.is_empty() {
            return Next::Empty;
        }
        // Some bucket holds the fronts back; its next refill is the next chance. (Every bucket's next
        // refill is later than `now` after catching up.)
        let blocked = Knob::ALL.into_iter().filter(|k| self.frontiers[k.index()].blocks(*k, lanes));
        let at = blocked.filter_map(|k| self.bucket(k).map(TokenBucket::next_refill)).min();
        let any = Knob::ALL.into_iter().filter_map(|k| self.bucket(k).map(TokenBucket::next_refill)).min();
        Next::At(at.or(any).unwrap_or(now + 1))
    }

    fn popped(&mut self, op: Op) {
        for knob in self.active.for_op(op) {
            let pos = &mut self.frontiers[knob.index()].pos[op.index()];
            *pos = pos.saturating_sub(1);
        }
    }

    fn force(&mut self, now: Nanos, lanes: &Lanes, io: &Io) {
        // Waiting IO has emptied `available` of every bucket that holds a queue, so this takes only
        // from buckets nobody waits on.
        self.catch_up(now, lanes);
        for &knob in self.active.for_op(io.op) {
            let want = self.need(knob, io);
            if let Some(bucket) = self.buckets[knob.index()].as_mut() {
                bucket.take(want);
            }
        }
    }
}
