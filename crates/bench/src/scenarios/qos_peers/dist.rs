//! A latency distribution as weighted values ([`Dist`]): built from fio's `json+` histogram bins
//! ([`Dist::fio_bins`], also the nbd scenario's), the engine's recorded latencies or the simulator's
//! histogram, and read as the rows of the scenario's table (mean, quantiles, max, shares) and as the
//! chart's cumulative curve.

use ioshare_engine::report::LatencyUs;

/// Latencies, µs, each with a count, sorted by latency.
#[derive(Clone, Debug, Default)]
pub struct Dist {
    points: Vec<(f64, f64)>,
}

impl Dist {
    /// From `(latency µs, count)` pairs in any order; non-finite or non-positive counts are dropped.
    pub fn new(mut points: Vec<(f64, f64)>) -> Dist {
        points.retain(|&(us, n)| us.is_finite() && n.is_finite() && n > 0.0);
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        Dist { points }
    }

    /// The `(latency µs, count)` pairs of one of fio's `json+` latency objects (`clat_ns` of a
    /// direction: its `bins`, ns → count); none when it has no bins.
    pub fn fio_bins(lat_ns: &serde_json::Value) -> Vec<(f64, f64)> {
        let Some(bins) = lat_ns["bins"].as_object() else { return Vec::new() };
        bins.iter().filter_map(|(ns, n)| Some((ns.parse::<f64>().ok()? / 1e3, n.as_f64()?))).collect()
    }

    /// Number of IOs.
    pub fn total(&self) -> f64 {
        self.points.iter().map(|p| p.1).sum()
    }

    /// Whether it holds no IO.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Mean latency, µs.
    pub fn mean(&self) -> f64 {
        self.points.iter().map(|&(us, n)| us * n).sum::<f64>() / self.total()
    }

    /// Latency at quantile `q` (0..=1): the smallest value with at least `q` of the IOs at or below it.
    pub fn quantile(&self, q: f64) -> f64 {
        let want = q * self.total();
        let mut seen = 0.0;
        for &(us, n) in &self.points {
            seen += n;
            if seen >= want {
                return us;
            }
        }
        self.points.last().map_or(f64::NAN, |p| p.0)
    }

    /// Share of IOs (0..=1) whose latency satisfies `pred`.
    pub fn share(&self, pred: impl Fn(f64) -> bool) -> f64 {
        // A fold from +0.0: an empty float sum is -0.0, which would print as "-0.0%".
        self.points.iter().filter(|p| pred(p.0)).fold(0.0, |sum, p| sum + p.1) / self.total()
    }

    /// The summary the tables print.
    pub fn latency(&self) -> LatencyUs {
        LatencyUs {
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p95: self.quantile(0.95),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.points.last().map_or(f64::NAN, |p| p.0),
            mean: self.mean(),
        }
    }

    /// The cumulative distribution at `n` latencies spaced evenly on a log scale from the smallest to
    /// the largest: (latency ms, % of IOs at or below it). Sparse histograms (the simulator's) come out
    /// as steps, not as lines between their few values.
    pub fn cdf(&self, n: usize) -> Vec<(f64, f64)> {
        let (Some(&(lo, _)), Some(&(hi, _))) = (self.points.first(), self.points.last()) else { return Vec::new() };
        let lo = lo.max(1.0);
        let total = self.total();
        let mut out = Vec::with_capacity(n);
        let (mut i, mut seen) = (0, 0.0);
        for k in 0..n {
            let x = if n > 1 && hi > lo { lo * (hi / lo).powf(k as f64 / (n - 1) as f64) } else { hi };
            while i < self.points.len() && self.points[i].0 <= x * (1.0 + 1e-9) {
                seen += self.points[i].1;
                i += 1;
            }
            out.push((x / 1e3, 100.0 * seen / total));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_mean_and_shares_follow_the_counts() {
        // Half the IOs at 10 µs, the rest at 50 ms: the token bucket's two modes.
        let d = Dist::new(vec![(50_000.0, 50.0), (10.0, 50.0), (20.0, 0.0)]);
        assert_eq!(d.total(), 100.0);
        assert_eq!(d.quantile(0.5), 10.0);
        assert_eq!(d.quantile(0.51), 50_000.0);
        assert!((d.mean() - 25_005.0).abs() < 1e-9);
        assert_eq!(d.share(|us| us < 1_000.0), 0.5);
        assert_eq!(d.share(|us| us > 1e9), 0.0);
        let l = d.latency();
        assert_eq!((l.p90, l.max), (50_000.0, 50_000.0));
        // Three points a decade apart from 10 µs to 50 ms: flat at 50% until the last.
        let cdf = d.cdf(3);
        assert_eq!(cdf.len(), 3);
        assert_eq!((cdf[0], cdf[2]), ((0.01, 50.0), (50.0, 100.0)));
        assert_eq!(cdf[1].1, 50.0);
        assert!(Dist::new(vec![]).is_empty());
    }
}
