//! The kernel's log2 histograms as user space sees them: bucket bounds per kind, cumulative `le`
//! bounds for Prometheus, differences between two snapshots, and quantiles by the same linear
//! interpolation Prometheus's `histogram_quantile` uses (so both answer the same).
//!
//! Bucket rules (mirrored from `bpf/observe.bpf.c`, where the values are bucketed):
//! - size (bytes): bucket k holds (2^(k-1), 2^k], bucket 0 holds 0 and 1 — 4 KiB lands in k = 12;
//! - seek distance (512-byte sectors): bucket 0 holds 0 (sequential), bucket 1 holds 1, bucket k >= 2
//!   holds (2^(k-2), 2^(k-1)];
//! - latency (microseconds, truncated): bucket k holds latencies below 2^k µs (and at least 2^(k-1)).

use serde::Serialize;

/// What a histogram measures; decides its bucket bounds and unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// IO size in bytes.
    Size,
    /// Seek distance in 512-byte sectors.
    Seek,
    /// Latency, bucketed in microseconds, exposed in seconds.
    Latency,
}

impl Kind {
    /// The inclusive upper bound of bucket `k` in the histogram's exposed unit (bytes, sectors, seconds).
    pub fn upper_bound(self, k: usize) -> f64 {
        match self {
            Kind::Size => (k as f64).exp2(),
            Kind::Seek if k == 0 => 0.0,
            Kind::Seek => ((k - 1) as f64).exp2(),
            Kind::Latency => (k as f64).exp2() / 1e6,
        }
    }

    /// The bucket a value falls in (same rule as the BPF side; used by tests to predict histograms).
    pub fn bucket(self, value: u64) -> usize {
        let ceil_log2 = |v: u64| if v <= 1 { 0 } else { 64 - (v - 1).leading_zeros() as usize };
        match self {
            Kind::Size => ceil_log2(value),
            Kind::Seek if value == 0 => 0,
            Kind::Seek => ceil_log2(value) + 1,
            Kind::Latency => {
                let us = value / 1000;
                if us == 0 {
                    0
                } else {
                    64 - us.leading_zeros() as usize
                }
            }
        }
    }
}

/// One log2 histogram: bucket counts (index = bucket) and the sum of the values (bytes, sectors or
/// nanoseconds).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Histogram {
    /// Counts per bucket.
    pub buckets: Vec<u64>,
    /// Sum of the values counted.
    pub sum: u64,
}

impl Histogram {
    /// Number of values counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// `self - earlier`, bucket by bucket (counters only grow, so this is what happened in between).
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let buckets = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &n)| n.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0)))
            .collect();
        Histogram { buckets, sum: self.sum.saturating_sub(earlier.sum) }
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Histogram) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }

    /// The `q`-quantile (0..=1) in the exposed unit, interpolated linearly inside its bucket exactly as
    /// Prometheus's `histogram_quantile` does over the cumulative `le` buckets; `None` when empty.
    pub fn quantile(&self, kind: Kind, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut below = 0u64;
        for (k, &n) in self.buckets.iter().enumerate() {
            if n > 0 && (below + n) as f64 >= rank {
                let upper = kind.upper_bound(k);
                let lower = if k == 0 { 0.0f64.min(upper) } else { kind.upper_bound(k - 1) };
                return Some(lower + (upper - lower) * (rank - below as f64) / n as f64);
            }
            below += n;
        }
        self.buckets.iter().rposition(|&n| n > 0).map(|k| kind.upper_bound(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_upper_bounds() {
        for kind in [Kind::Size, Kind::Seek] {
            for k in 1..40 {
                let ub = kind.upper_bound(k) as u64;
                assert_eq!(kind.bucket(ub), k, "{kind:?} upper bound of {k}");
                assert_eq!(kind.bucket(ub + 1), k + 1, "{kind:?} just above bucket {k}");
            }
        }
        assert_eq!(Kind::Size.bucket(4096), 12);
        assert_eq!(Kind::Size.bucket(65536), 16);
        assert_eq!(Kind::Seek.bucket(0), 0);
        assert_eq!(Kind::Seek.bucket(8), 4);
        // Latency: 999 ns is below 1 µs (bucket 0, le 1e-6); 1500 ns truncates to 1 µs: below 2 µs.
        assert_eq!(Kind::Latency.bucket(999), 0);
        assert_eq!(Kind::Latency.bucket(1500), 1);
        assert_eq!(Kind::Latency.bucket(1_048_576_000), 21);
        assert!(Kind::Latency.upper_bound(21) > 1.048576 - 1e-12);
    }

    #[test]
    fn quantile_interpolates_like_prometheus() {
        // 10 values in bucket 3 (le 8) and 10 in bucket 4 (le 16): the median is the top of bucket 3,
        // the 75th percentile halfway through bucket 4.
        let h = Histogram { buckets: vec![0, 0, 0, 10, 10], sum: 0 };
        assert_eq!(h.quantile(Kind::Size, 0.5), Some(8.0));
        assert_eq!(h.quantile(Kind::Size, 0.75), Some(12.0));
        assert_eq!(Histogram::default().quantile(Kind::Size, 0.5), None);
    }

    #[test]
    fn since_and_add_are_inverse() {
        let a = Histogram { buckets: vec![1, 2, 3], sum: 10 };
        let mut b = Histogram { buckets: vec![2, 2, 5], sum: 17 };
        let d = b.since(&a);
        assert_eq!(d, Histogram { buckets: vec![1, 0, 2], sum: 7 });
        b = a.clone();
        b.add(&d);
        assert_eq!(b, Histogram { buckets: vec![2, 2, 5], sum: 17 });
    }
}
