//! One leaky bucket, exactly as QEMU's `LeakyBucket` (`util/throttle.c`).
//!
//! The bucket is a meter, not a queue: `level` counts units admitted and not yet leaked. It leaks
//! `avg` units a second, computed lazily from the time since the last leak whenever a request is
//! checked. A request may go when the level is not above the bucket size; it is charged *after*
//! admission, so one large request always passes and its overshoot delays the next ones.
//! - Without a burst rate QEMU sets `max = avg / 10` (`throttle_fix_bucket`: 100 ms of slack to
//!   smooth a guest's alternating read and write batches) and the bucket size is `max × 1` = `avg/10`.
//! - With a burst rate the size is `max × max_length`. When `max_length > 1` a second, small bucket
//!   `burst_level` of size `max / 10` leaks at `max`: it keeps the rate during the burst at `max`
//!   (with 100 ms of smoothing). A burst at rate `max` fills the big bucket while it leaks at `avg`,
//!   so it lasts `max × max_length / (max − avg)` seconds (avg 100, max 2000, 60 s ⇒ 63.2 s).
//! - The wait of a request is `excess / rate`: `(level − size) / avg` when the bucket is over full,
//!   else `(burst_level − max/10) / max`, else none; a request waits for the longest of its buckets.
//!
//! Levels are `f64` and waits are truncated to whole ns, as in QEMU.

use crate::io::{Nanos, NSEC_PER_SEC};
use crate::limit::knobs::KnobLimit;

/// One QEMU leaky bucket.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeakyBucket {
    avg: f64,
    max: f64,
    max_length: f64,
    level: f64,
    burst_level: f64,
}

impl LeakyBucket {
    /// An empty bucket for `limit`; `avg == 0` gives a bucket that never makes anyone wait.
    pub fn new(limit: &KnobLimit) -> Self {
        let avg = limit.avg as f64;
        let max = if limit.max == 0 { avg / 10.0 } else { limit.max as f64 };
        LeakyBucket { avg, max, max_length: limit.length() as f64, level: 0.0, burst_level: 0.0 }
    }

    /// Whether the bucket limits anything.
    pub fn is_set(&self) -> bool {
        self.avg > 0.0
    }

    /// Units admitted and not yet leaked.
    pub fn level(&self) -> f64 {
        self.level
    }

    /// Level of the burst bucket (0 unless `max_length > 1`).
    pub fn burst_level(&self) -> f64 {
        self.burst_level
    }

    /// Largest level at which requests still pass: `max × max_length`.
    pub fn size(&self) -> f64 {
        self.max * self.max_length
    }

    /// Leaks what `delta_ns` of time drains (QEMU `throttle_leak_bucket`).
    pub fn leak(&mut self, delta_ns: Nanos) {
        let seconds = delta_ns as f64 / NSEC_PER_SEC as f64;
        self.level = (self.level - self.avg * seconds).max(0.0);
        if self.max_length > 1.0 {
            self.burst_level = (self.burst_level - self.max * seconds).max(0.0);
        }
    }

    /// How long a request must wait before it may pass, ns (QEMU `throttle_compute_wait`).
    pub fn wait(&self) -> Nanos {
        if !self.is_set() {
            return 0;
        }
        let extra = self.level - self.size();
        if extra > 0.0 {
            return (extra * NSEC_PER_SEC as f64 / self.avg) as Nanos;
        }
        if self.max_length > 1.0 {
            let extra = self.burst_level - self.max / 10.0;
            if extra > 0.0 {
                return (extra * NSEC_PER_SEC as f64 / self.max) as Nanos;
            }
        }
        0
    }

    /// Charges an admitted request of `units` (QEMU `throttle_account`).
    pub fn account(&mut self, units: f64) {
        self.level += units;
        if self.max_length > 1.0 {
            self.burst_level += units;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::NSEC_PER_MSEC;

    #[test]
    fn without_burst_the_bucket_holds_a_tenth_of_avg() {
        let mut b = LeakyBucket::new(&KnobLimit::avg(100));
        assert_eq!(b.size(), 10.0);
        for _ in 0..10 {
            b.account(1.0);
            assert_eq!(b.wait(), 0);
        }
        b.account(1.0);
        // 1 unit over at 100/s: 10 ms.
        assert_eq!(b.wait(), 10 * NSEC_PER_MSEC);
        b.leak(10 * NSEC_PER_MSEC);
        assert_eq!(b.wait(), 0);
        assert_eq!(b.burst_level(), 0.0);
    }

    #[test]
    fn level_leaks_at_avg_and_never_below_zero() {
        let mut b = LeakyBucket::new(&KnobLimit::avg(1000));
        b.account(50.0);
        b.leak(20 * NSEC_PER_MSEC);
        assert!((b.level() - 30.0).abs() < 1e-9);
        b.leak(NSEC_PER_SEC);
        assert_eq!(b.level(), 0.0);
    }

    #[test]
    fn burst_bucket_caps_the_rate_at_max() {
        let mut b = LeakyBucket::new(&KnobLimit::burst(100, 2000, 60));
        assert_eq!(b.size(), 120_000.0);
        // 200 units (max/10) pass back to back; the next waits for the burst bucket at 2000/s.
        b.account(201.0);
        assert_eq!(b.wait(), NSEC_PER_SEC / 2000);
        b.leak(NSEC_PER_SEC / 2000);
        assert_eq!(b.wait(), 0);
        assert!((b.level() - (201.0 - 0.05)).abs() < 1e-9);
    }

    #[test]
    fn full_bucket_waits_for_the_excess_at_avg() {
        let mut b = LeakyBucket::new(&KnobLimit::burst(100, 2000, 60));
        b.account(120_000.0);
        assert!(b.wait() > 0, "the burst bucket holds back a back-to-back burst");
        b.account(105.0);
        // 120 105 − 120 000 = 105 units over at 100/s; the big bucket is checked first.
        assert_eq!(b.wait(), 1_050 * NSEC_PER_MSEC);
    }

    #[test]
    fn unset_bucket_never_waits() {
        let mut b = LeakyBucket::new(&KnobLimit::default());
        b.account(1e9);
        assert_eq!(b.wait(), 0);
    }
}
