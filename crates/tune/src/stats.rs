//! Small statistics over per-sample values: percentiles, mean and deviation, and the two tables a
//! point reports — the vrate distribution and, per latency percentile, the mean, deviation and
//! largest of its per-sample values (resctl-bench's latency tables).

use ioshare_engine::report::TenantSample;
use serde::{Deserialize, Serialize};

/// The `q` quantile (0..=1) of `values` by linear interpolation between neighbours; NaN when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Mean and (population) standard deviation; NaN for no values.
pub fn mean_stdev(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Mean, deviation and largest of a set of per-sample values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (zeros when empty).
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let (mean, stdev) = mean_stdev(values);
        Spread { mean, stdev, max: values.iter().copied().fold(f64::MIN, f64::max) }
    }
}

/// A tenant's latency over a run, µs: for each percentile, the spread of its per-sample values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatTable {
    /// Per-sample medians.
    pub p50: Spread,
    /// Per-sample 90th percentiles.
    pub p90: Spread,
    /// Per-sample 99th percentiles.
    pub p99: Spread,
    /// Per-sample largest latencies.
    pub max: Spread,
}

impl LatTable {
    /// The table over `samples` that saw IO (an empty sample has no latency).
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a TenantSample>) -> LatTable {
        let s: Vec<&TenantSample> = samples.into_iter().filter(|s| s.iops > 0.0).collect();
        let col = |f: fn(&TenantSample) -> f64| Spread::of(&s.iter().map(|x| f(x)).collect::<Vec<_>>());
        LatTable { p50: col(|x| x.p50_us), p90: col(|x| x.p90_us), p99: col(|x| x.p99_us), max: col(|x| x.max_us) }
    }
}

/// The distribution of vrate over a run's controller samples, percent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VrateDist {
    /// Lowest.
    pub p00: f64,
    /// 10th percentile.
    pub p10: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Highest.
    pub p100: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
}

impl VrateDist {
    /// The distribution of `values` (zeros when empty).
    pub fn of(values: &[f64]) -> VrateDist {
        if values.is_empty() {
            return VrateDist::default();
        }
        let (mean, stdev) = mean_stdev(values);
        let q = |x| quantile(values, x);
        VrateDist { p00: q(0.0), p10: q(0.1), p50: q(0.5), p90: q(0.9), p100: q(1.0), mean, stdev }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_and_spreads_summarise() {
        let v = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 0.05), 1.2);
        assert!(quantile(&[], 0.5).is_nan());
        let s = Spread::of(&v);
        assert_eq!((s.mean, s.max), (3.0, 5.0));
        assert!((s.stdev - 2f64.sqrt()).abs() < 1e-12);
        let samples: Vec<TenantSample> = [(100.0, 50.0), (0.0, 0.0), (100.0, 70.0)]
            .iter()
            .map(|&(iops, p)| TenantSample {
                iops,
                p50_us: p,
                p90_us: p,
                p99_us: 2.0 * p,
                max_us: 3.0 * p,
                ..Default::default()
            })
            .collect();
        let t = LatTable::of(&samples);
        assert_eq!((t.p50.mean, t.p99.max, t.max.max), (60.0, 140.0, 210.0), "the empty sample is left out");
    }
}
