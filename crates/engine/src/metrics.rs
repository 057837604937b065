//! Recording what each tenant got: HDR latency histograms (whole window and current interval),
//! counters, and the per-interval time series. Recording an IO allocates nothing.

use hdrhistogram::Histogram;
use ioshare_core::{Nanos, Op, NSEC_PER_SEC};

use crate::report::{LatencyUs, TenantReport, TenantSample};

/// Largest latency the histograms resolve (longer ones are clamped), ns.
const LAT_MAX_NS: u64 = 100 * NSEC_PER_SEC;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LAT_MAX_NS, 3).expect("valid histogram bounds")
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// A tenant's counters and histograms.
#[derive(Debug)]
pub struct TenantMetrics {
    window: Histogram<u64>,
    interval: Histogram<u64>,
    reads: u64,
    writes: u64,
    bytes: u64,
    interval_ios: u64,
    interval_bytes: u64,
    series: Vec<TenantSample>,
}

impl Default for TenantMetrics {
    fn default() -> Self {
        TenantMetrics {
            window: histogram(),
            interval: histogram(),
            reads: 0,
            writes: 0,
            bytes: 0,
            interval_ios: 0,
            interval_bytes: 0,
            series: Vec::with_capacity(64),
        }
    }
}

impl TenantMetrics {
    /// Records a completed IO; `in_window` says whether it counts in the window's totals (the
    /// interval series always counts it).
    #[inline]
    pub fn record(&mut self, op: Op, len: u32, latency: Nanos, in_window: bool) {
        self.interval.saturating_record(latency.max(1));
        self.interval_ios += 1;
        self.interval_bytes += len as u64;
        if in_window {
            self.window.saturating_record(latency.max(1));
            match op {
                Op::Read => self.reads += 1,
                Op::Write => self.writes += 1,
            }
            self.bytes += len as u64;
        }
    }

    /// Closes the interval that ends at `t` and lasted `len` ns, appending a sample.
    pub fn close_interval(&mut self, t: Nanos, len: Nanos) {
        let secs = len.max(1) as f64 / NSEC_PER_SEC as f64;
        let h = &self.interval;
        let [p50, p90, p99, max] = if h.is_empty() {
            [0.0; 4]
        } else {
            [h.value_at_quantile(0.5), h.value_at_quantile(0.9), h.value_at_quantile(0.99), h.max()].map(us)
        };
        self.series.push(TenantSample {
            t_s: t as f64 / NSEC_PER_SEC as f64,
            iops: self.interval_ios as f64 / secs,
            bw_bytes: self.interval_bytes as f64 / secs,
            p50_us: p50,
            p90_us: p90,
            p99_us: p99,
            max_us: max,
        });
        self.interval.reset();
        self.interval_ios = 0;
        self.interval_bytes = 0;
    }

    /// IOs counted in the window so far.
    pub fn ios(&self) -> u64 {
        self.reads + self.writes
    }

    /// Bytes counted in the window so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The tenant's report over a window of `window` ns.
    pub fn report(&self, name: &str, group: &str, weight: u32, window: Nanos) -> TenantReport {
        let secs = window.max(1) as f64 / NSEC_PER_SEC as f64;
        let h = &self.window;
        let lat_us = if h.is_empty() {
            LatencyUs::default()
        } else {
            LatencyUs {
                p50: us(h.value_at_quantile(0.5)),
                p90: us(h.value_at_quantile(0.9)),
                p95: us(h.value_at_quantile(0.95)),
                p99: us(h.value_at_quantile(0.99)),
                p999: us(h.value_at_quantile(0.999)),
                max: us(h.max()),
                mean: h.mean() / 1000.0,
            }
        };
        TenantReport {
            name: name.to_string(),
            group: group.to_string(),
            weight,
            ios: self.ios(),
            iops: self.ios() as f64 / secs,
            bw_bytes: self.bytes as f64 / secs,
            reads: self.reads,
            writes: self.writes,
            lat_us,
            series: self.series.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_and_interval_are_counted_apart() {
        let mut m = TenantMetrics::default();
        for i in 1..=100u64 {
            m.record(Op::Read, 4096, i * 1000, i > 50);
        }
        m.record(Op::Write, 8192, 5_000_000, true);
        m.close_interval(NSEC_PER_SEC, NSEC_PER_SEC / 2);
        let r = m.report("a", "g", 100, 2 * NSEC_PER_SEC);
        assert_eq!((r.ios, r.reads, r.writes), (51, 50, 1));
        assert_eq!(r.iops, 25.5);
        assert_eq!(r.bw_bytes, (50.0 * 4096.0 + 8192.0) / 2.0);
        // Window holds latencies 51..=100 µs and one 5 ms IO: p50 is 76 µs within 0.1%.
        assert!((r.lat_us.p50 - 76.0).abs() < 0.1, "{:?}", r.lat_us);
        assert!((r.lat_us.max - 5000.0).abs() < 5.0, "{:?}", r.lat_us);
        let s = &r.series[0];
        assert_eq!((s.t_s, s.iops), (1.0, 202.0));
        assert!((s.p50_us - 51.0).abs() < 0.1, "{s:?}");
        // The interval holds 1..=100 µs and the 5 ms IO: its p90 is the 91st of 101, its max the 5 ms.
        assert!((s.p90_us - 91.0).abs() < 0.1 && (s.max_us - 5000.0).abs() < 5.0, "{s:?}");
        m.close_interval(2 * NSEC_PER_SEC, NSEC_PER_SEC);
        assert_eq!(m.report("a", "g", 100, NSEC_PER_SEC).series[1].iops, 0.0);
    }
}
