//! One token bucket, exactly as librbd's `TokenBucketThrottle` (ceph `src/common/TokenBucketThrottle.cc`).
//!
//! The bucket has two counters. `remain` is how many tokens may still be spent; it is capped at the
//! capacity `max × burst_seconds`, where `max` is the burst rate if one is set and the average
//! otherwise, and it starts full. `available` is how many may be spent right now; it is capped at
//! `min(max, remain)` and starts empty. A timer refills both every tick:
//! - tick = `max(1000 / avg, tick_min)` ms in integer arithmetic, so `1000 / tick` ticks a second;
//! - the tokens of tick `k` (counted 1..=ticks_per_second, then again from 1) are
//!   `⌊k/tps·avg⌋ − ⌊(k−1)/tps·avg⌋`, so that a rate that does not divide evenly still adds exactly `avg`
//!   tokens a second (950/s at 20 ticks: 47, 48, 47, 48, ...); a tick that does not divide a second
//!   keeps librbd's arithmetic too (tick_min 300 ms: 3 ticks hand out a second's tokens in 900 ms);
//! - `remain` gains those tokens, `available` gains them times `max / avg` (the burst ratio), so that
//!   while `remain` lasts IO is admitted at the burst rate: a burst lasts `capacity / (max − avg)`
//!   seconds at rate `max` (avg 1000, burst 5000, 60 s ⇒ 300 000 / 4000 = 75 s).
//!
//! `take(c)` takes `c` tokens if `available` has them, and otherwise takes everything available (the
//! caller remembers the partial grant and asks for the rest at later ticks). Waiting IO is served from
//! the head at every tick; that queueing lives in the gate (`token_gate.rs`). The first refill happens
//! at creation, as librbd's `set_limit` fires its timer at once. Where librbd's timer runs late, ours
//! runs exactly every tick; because time is a parameter, refills are applied lazily when the bucket is
//! next looked at, and a full bucket skips the refills it would ignore in one step.

use crate::io::{Nanos, NSEC_PER_MSEC};
use crate::limit::knobs::{KnobLimit, TICK_MIN_MAX_MS};

/// One librbd token bucket with its refill schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    avg: u64,
    max: u64,
    capacity: u64,
    remain: u64,
    available: u64,
    /// `max / avg` when above 1, else 1.
    burst_ratio: f64,
    ticks_per_second: u64,
    /// Index of the last refill within the current second, 1..=ticks_per_second (0 before the first).
    current_tick: u64,
    tick_ns: Nanos,
    next_refill: Nanos,
}

impl TokenBucket {
    /// A bucket for `limit` created at `now`, refilled at most every `tick_min_ms` (clamped to
    /// 1..=[`TICK_MIN_MAX_MS`]). The first refill is applied at once.
    ///
    /// # Panics
    /// If `limit.avg` is 0: a knob without a rate has no bucket (see [`KnobLimit::is_set`]).
    pub fn new(now: Nanos, limit: &KnobLimit, tick_min_ms: u64) -> Self {
        let avg = limit.avg;
        assert!(avg > 0, "a token bucket needs a rate");
        let tick_ms = (1000 / avg).max(tick_min_ms.clamp(1, TICK_MIN_MAX_MS));
        let max = if limit.max == 0 { avg } else { limit.max };
        let capacity = max.saturating_mul(limit.length().max(1));
        let burst_ratio = if max > avg { max as f64 / avg as f64 } else { 1.0 };
        let mut bucket = TokenBucket {
            avg,
            max,
            capacity,
            remain: capacity,
            available: 0,
            burst_ratio,
            ticks_per_second: 1000 / tick_ms,
            current_tick: 0,
            tick_ns: tick_ms * NSEC_PER_MSEC,
            next_refill: now,
        };
        bucket.refill();
        bucket
    }

    /// Refill period, ns.
    pub fn tick_ns(&self) -> Nanos {
        self.tick_ns
    }

    /// When the next refill is due.
    pub fn next_refill(&self) -> Nanos {
        self.next_refill
    }

    /// Tokens that may be taken now.
    pub fn available(&self) -> u64 {
        self.available
    }

    /// Tokens left before the bucket is down to its average rate.
    pub fn remain(&self) -> u64 {
        self.remain
    }

    /// Largest `remain`: `max × burst_seconds`.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Takes `want` tokens, or all available ones if fewer; returns how many were taken.
    pub fn take(&mut self, want: u64) -> u64 {
        let got = want.min(self.available);
        self.available -= got;
        self.remain -= got;
        got
    }

    /// Applies the refill due at [`TokenBucket::next_refill`] and schedules the next one.
    pub fn refill(&mut self) {
        let tokens = self.tokens_next_tick();
        self.remain = self.remain.saturating_add(tokens).min(self.capacity);
        let inc = if self.burst_ratio > 1.0 { (tokens as f64 * self.burst_ratio) as u64 } else { tokens };
        self.available = self.available.saturating_add(inc).min(self.max.min(self.remain));
        self.next_refill += self.tick_ns;
    }

    /// Whether refills can no longer change the counters.
    pub fn is_full(&self) -> bool {
        self.remain == self.capacity && self.available == self.max.min(self.remain)
    }

    /// Applies every refill due by `now` to a bucket nobody waits on. A full bucket skips them in one
    /// step, keeping the refill schedule and the tick counter as if each had run.
    pub fn refill_until(&mut self, now: Nanos) {
        while self.next_refill <= now {
            if self.is_full() {
                let due = (now - self.next_refill) / self.tick_ns + 1;
                self.current_tick = (self.current_tick + due - 1) % self.ticks_per_second + 1;
                self.next_refill += due * self.tick_ns;
                return;
            }
            self.refill();
        }
    }

    /// Tokens of the next tick: the step of `⌊tick/tps·avg⌋` (librbd `tokens_this_tick`).
    fn tokens_next_tick(&mut self) -> u64 {
        if self.current_tick >= self.ticks_per_second {
            self.current_tick = 0;
        }
        self.current_tick += 1;
        let filled = |tick: u64| (tick as f64 / self.ticks_per_second as f64 * self.avg as f64) as u64;
        filled(self.current_tick) - filled(self.current_tick - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::NSEC_PER_SEC;

    fn bucket(avg: u64, max: u64, seconds: u64, tick_min: u64) -> TokenBucket {
        TokenBucket::new(0, &KnobLimit { avg, max, max_length: Some(seconds) }, tick_min)
    }

    #[test]
    fn tick_is_one_token_period_but_at_least_tick_min() {
        assert_eq!(bucket(10, 0, 1, 50).tick_ns(), 100 * NSEC_PER_MSEC);
        assert_eq!(bucket(1000, 0, 1, 50).tick_ns(), 50 * NSEC_PER_MSEC);
        assert_eq!(bucket(5000, 0, 1, 1000).tick_ns(), NSEC_PER_SEC);
        assert_eq!(bucket(3, 0, 1, 50).tick_ns(), 333 * NSEC_PER_MSEC);
    }

    #[test]
    fn uneven_rates_alternate_and_add_up_to_avg_each_second() {
        let mut b = bucket(950, 0, 1, 50);
        let mut per_tick = vec![b.available()];
        for _ in 0..39 {
            b.take(b.available());
            b.refill();
            per_tick.push(b.available());
        }
        assert_eq!(&per_tick[..4], &[47, 48, 47, 48]);
        assert_eq!(per_tick[..20].iter().sum::<u64>(), 950);
        assert_eq!(per_tick[20..].iter().sum::<u64>(), 950);
    }

    #[test]
    fn a_tick_that_does_not_divide_a_second_hands_out_avg_per_tps_ticks() {
        let mut b = bucket(100, 0, 1, 300);
        assert_eq!(b.tick_ns(), 300 * NSEC_PER_MSEC);
        let mut per_tick = vec![b.available()];
        for _ in 0..2 {
            b.take(b.available());
            b.refill();
            per_tick.push(b.available());
        }
        assert_eq!(per_tick, vec![33, 33, 34]);
    }

    #[test]
    fn capacity_is_burst_times_seconds_and_starts_full() {
        let b = bucket(1000, 5000, 60, 50);
        assert_eq!(b.capacity(), 300_000);
        assert_eq!(b.remain(), 300_000);
        // First refill at creation: 50 tokens at burst ratio 5.
        assert_eq!(b.available(), 250);
        let b = bucket(1000, 0, 1, 50);
        assert_eq!((b.capacity(), b.available()), (1000, 50));
    }

    #[test]
    fn available_grows_at_the_burst_rate_up_to_min_of_max_and_remain() {
        let mut b = bucket(1000, 2000, 1, 50);
        b.refill_until(5 * NSEC_PER_SEC);
        assert_eq!((b.available(), b.remain()), (2000, 2000));
        assert!(b.is_full());
        b.take(1900);
        assert_eq!((b.available(), b.remain()), (100, 100));
        b.refill();
        assert_eq!((b.available(), b.remain()), (150, 150));
    }

    #[test]
    fn take_grants_partially_when_short() {
        let mut b = bucket(1000, 0, 1, 50);
        assert_eq!(b.take(30), 30);
        assert_eq!(b.take(30), 20);
        assert_eq!(b.take(30), 0);
        assert_eq!(b.remain(), 950);
    }

    #[test]
    fn skipping_refills_of_a_full_bucket_matches_running_them() {
        let mut skipped = bucket(950, 0, 1, 50);
        let mut stepped = skipped.clone();
        skipped.refill_until(7 * NSEC_PER_SEC + 130 * NSEC_PER_MSEC);
        while stepped.next_refill() <= 7 * NSEC_PER_SEC + 130 * NSEC_PER_MSEC {
            stepped.refill();
        }
        assert_eq!(skipped, stepped);
        skipped.take(500);
        stepped.take(500);
        skipped.refill();
        stepped.refill();
        assert_eq!(skipped, stepped);
    }
}
