//! Fitting a series against vrate, after resctl-bench's `iocost-tune`: each monotone side is a
//! flat–slope–flat line (two bends, found by exhaustive search on a grid of a hundredth of the
//! range, least squares for the two levels), a fit with fewer pieces winning unless each extra
//! piece cuts the error by more than 5%, and a shape the series must have (capacity does not fall
//! as vrate rises, and so on) enforced by rejecting bends that break it.
//!
//! Unlike the anchor, whose capacity and isolation series are monotone (its antagonist is a memory
//! hog), here both tenants do IO: too low a vrate starves the latency-sensitive tenant and too high
//! a vrate lets the antagonist flood the device, so isolation and protected capacity rise and then
//! fall, and latency falls and then rises. Such a series is fitted as a hump (or valley): a rising
//! and a falling flat–slope–flat side joined at a split chosen by the same search. Latency series
//! may drop outliers first (Chauvenet's criterion, once).

use serde::{Deserialize, Serialize};

/// Error discount per piece fewer (the anchor's 0.95): an extra piece must cut the error by 5%.
const PIECE_DISCOUNT: f64 = 0.95;
/// Bend positions tried per side: the range in this many steps.
const BEND_STEPS: usize = 100;

/// What a series is expected to do as vrate rises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// Never falls (capacity alone, work conserved).
    Rising,
    /// Rises, then falls (isolation, protected capacity).
    Hump,
    /// Falls, then rises (latency beside the antagonist).
    Valley,
}

/// Flat at `y1` up to `x1`, a straight line to `y2` at `x2`, flat after.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Piecewise {
    /// First bend.
    pub x1: f64,
    /// Second bend (≥ `x1`).
    pub x2: f64,
    /// Level before the first bend.
    pub y1: f64,
    /// Level after the second bend.
    pub y2: f64,
}

impl Piecewise {
    /// The line's value at `x`.
    pub fn at(&self, x: f64) -> f64 {
        if x <= self.x1 || self.x2 <= self.x1 {
            self.y1
        } else if x >= self.x2 {
            self.y2
        } else {
            self.y1 + (self.y2 - self.y1) * (x - self.x1) / (self.x2 - self.x1)
        }
    }

    /// Whether it is one level throughout.
    pub fn is_flat(&self) -> bool {
        (self.y2 - self.y1).abs() <= 1e-9 * self.y1.abs().max(self.y2.abs()).max(1e-12)
    }
}

/// A fitted series: a left side up to `split` and a right side after it (the same line for a
/// rising series), over the measured range `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The expected shape.
    pub shape: Shape,
    /// Lowest measured vrate.
    pub lo: f64,
    /// Highest measured vrate.
    pub hi: f64,
    /// Where the left side ends (the peak of a hump, the bottom of a valley; `hi` when rising).
    pub split: f64,
    /// The side up to `split`.
    pub left: Piecewise,
    /// The side after `split`.
    pub right: Piecewise,
    /// Root mean square of the residuals of the points kept.
    pub rms: f64,
    /// Points left out as outliers.
    pub outliers: usize,
}

impl Fit {
    /// The fitted value at `x`.
    pub fn at(&self, x: f64) -> f64 {
        if x <= self.split {
            self.left.at(x)
        } else {
            self.right.at(x)
        }
    }

    /// The lowest vrate where the left side reaches its far level (the top of a rising series or a
    /// hump, the bottom of a valley).
    pub fn reaches_level(&self) -> f64 {
        if self.left.is_flat() {
            self.lo
        } else {
            self.left.x2.clamp(self.lo, self.split)
        }
    }

    /// The highest vrate where the right side still holds its first level (before a hump's fall or
    /// a valley's rise; `hi` when it never leaves it in the range).
    pub fn leaves_level(&self) -> f64 {
        if self.shape == Shape::Rising || self.right.is_flat() {
            self.hi
        } else {
            self.right.x1.clamp(self.split, self.hi)
        }
    }

    /// The vrate a share `q` (0..=1) of the way along the right side's slope (a valley's rise).
    pub fn along_slope(&self, q: f64) -> f64 {
        if self.right.is_flat() {
            return self.hi;
        }
        let (a, b) = (self.right.x1.clamp(self.split, self.hi), self.right.x2.clamp(self.split, self.hi));
        a + (b - a) * q
    }

    /// The highest vrate in the range where the fit is at most `y` (a latency target), if any.
    pub fn highest_at_most(&self, y: f64) -> Option<f64> {
        let steps = BEND_STEPS * 10;
        (0..=steps).rev().map(|i| self.lo + (self.hi - self.lo) * i as f64 / steps as f64).find(|&x| self.at(x) <= y)
    }
}

/// Fits `points` (vrate, value) to `shape`; `reject_outliers` drops points Chauvenet's criterion
/// rejects and fits again. `None` without a finite point.
pub fn fit(points: &[(f64, f64)], shape: Shape, reject_outliers: bool) -> Option<Fit> {
    let mut pts: Vec<(f64, f64)> = points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = fit_shape(&pts, shape)?;
    if !reject_outliers || pts.len() < 4 {
        return Some(first);
    }
    let n = pts.len() as f64;
    let resid: Vec<f64> = pts.iter().map(|&(x, y)| y - first.at(x)).collect();
    let sigma = (resid.iter().map(|r| r * r).sum::<f64>() / n).sqrt();
    if sigma <= 0.0 {
        return Some(first);
    }
    let kept: Vec<(f64, f64)> = pts
        .iter()
        .zip(&resid)
        .filter(|(_, r)| n * erfc(r.abs() / (sigma * std::f64::consts::SQRT_2)) >= 0.5)
        .map(|(p, _)| *p)
        .collect();
    if kept.len() == pts.len() || kept.len() < 2 {
        return Some(first);
    }
    let mut refit = fit_shape(&kept, shape)?;
    refit.outliers = pts.len() - kept.len();
    Some(refit)
}

fn fit_shape(pts: &[(f64, f64)], shape: Shape) -> Option<Fit> {
    let (lo, hi) = (pts.first()?.0, pts.last()?.0);
    let best = match shape {
        Shape::Rising => {
            let (line, score) = side(pts, true)?;
            (hi, line, line, score)
        }
        Shape::Hump | Shape::Valley => {
            // The left side rises to a hump's peak (falls to a valley's bottom); try every point
            // as the split, each side fitted on the points up to and from it.
            let rising_first = shape == Shape::Hump;
            let mut best: Option<(f64, Piecewise, Piecewise, f64)> = None;
            for (k, &(split, _)) in pts.iter().enumerate() {
                let (Some((l, ls)), Some((r, rs))) = (side(&pts[..=k], rising_first), side(&pts[k..], !rising_first))
                else {
                    continue;
                };
                let score = ls + rs;
                if best.as_ref().is_none_or(|b| score < b.3 * (1.0 - 1e-9)) {
                    best = Some((split, l, r, score));
                }
            }
            best?
        }
    };
    let (split, left, right, _) = best;
    let mut fit = Fit { shape, lo, hi, split, left, right, rms: 0.0, outliers: 0 };
    fit.rms = (pts.iter().map(|&(x, y)| (y - fit.at(x)).powi(2)).sum::<f64>() / pts.len() as f64).sqrt();
    Some(fit)
}

/// The best flat–slope–flat line through `pts` (sorted) that rises (`rising`) or falls, with its
/// score: the squared error, divided by [`PIECE_DISCOUNT`] once per piece beyond the first (one
/// flat level).
fn side(pts: &[(f64, f64)], rising: bool) -> Option<(Piecewise, f64)> {
    let (lo, hi) = (pts.first()?.0, pts.last()?.0);
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let flat = Piecewise { x1: lo, x2: lo, y1: mean, y2: mean };
    let mut best = (flat, sse(pts, &flat));
    if hi <= lo {
        return Some(best);
    }
    // Bends on the grid and at the measured vrates themselves.
    let mut xs: Vec<f64> = (0..=BEND_STEPS).map(|i| lo + (hi - lo) * i as f64 / BEND_STEPS as f64).collect();
    xs.extend(pts.iter().map(|p| p.0));
    xs.sort_by(f64::total_cmp);
    xs.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    for (i, &x1) in xs.iter().enumerate() {
        for &x2 in &xs[i + 1..] {
            let Some((y1, y2)) = levels(pts, x1, x2) else { continue };
            if (rising && y2 < y1) || (!rising && y2 > y1) {
                continue;
            }
            let line = Piecewise { x1, x2, y1, y2 };
            // A slope is a piece more than the flat line, and so is each flat beside it.
            let pieces = 2 + (x1 > lo) as i32 + (x2 < hi) as i32;
            let score = sse(pts, &line) / PIECE_DISCOUNT.powi(pieces - 1);
            if score < best.1 * (1.0 - 1e-9) {
                best = (line, score);
            }
        }
    }
    Some(best)
}

/// Least-squares levels of the line with bends `x1 < x2`; `None` when the points do not tell both
/// levels apart (all on one side of the bends).
fn levels(pts: &[(f64, f64)], x1: f64, x2: f64) -> Option<(f64, f64)> {
    let (mut a, mut b, mut c, mut d1, mut d2) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in pts {
        let s = ((x - x1) / (x2 - x1)).clamp(0.0, 1.0);
        let t = 1.0 - s;
        a += t * t;
        b += t * s;
        c += s * s;
        d1 += t * y;
        d2 += s * y;
    }
    let det = a * c - b * b;
    if det.abs() <= 1e-12 * (a * c).max(1e-300) {
        return None;
    }
    Some(((d1 * c - d2 * b) / det, (a * d2 - b * d1) / det))
}

fn sse(pts: &[(f64, f64)], line: &Piecewise) -> f64 {
    pts.iter().map(|&(x, y)| (y - line.at(x)).powi(2)).sum()
}

/// The complementary error function (Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let r = poly * (-z * z).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        (1..=20).map(|i| i as f64 * 10.0).map(|x| (x, f(x))).collect()
    }

    #[test]
    fn a_rising_series_is_found_with_its_bends() {
        // Flat 1000 up to 40%, rising to 5000 at 120%, flat after: the bends lie on measured vrates,
        // which are candidates, so the fit finds them and the levels exactly.
        let truth = Piecewise { x1: 40.0, x2: 120.0, y1: 1000.0, y2: 5000.0 };
        let f = fit(&sample(|x| truth.at(x)), Shape::Rising, false).unwrap();
        assert!((f.left.x1 - 40.0).abs() <= 2.0 && (f.left.x2 - 120.0).abs() <= 2.0, "{f:?}");
        assert!((f.at(10.0) - 1000.0).abs() < 1.0 && (f.at(200.0) - 5000.0).abs() < 1.0, "{f:?}");
        assert!((f.reaches_level() - 120.0).abs() <= 2.0);
        assert_eq!(f.leaves_level(), 200.0);
    }

    #[test]
    fn shape_is_enforced_and_noise_does_not_buy_pieces() {
        // A falling series fitted as rising can only be flat, at its mean.
        let f = fit(&sample(|x| 300.0 - x), Shape::Rising, false).unwrap();
        assert!(f.left.is_flat() && (f.at(50.0) - 195.0).abs() < 1e-6, "{f:?}");
        // Alternating ±1% around a level: one piece (the discount outweighs what bends would win).
        let f = fit(&sample(|x| if (x as i64 / 10) % 2 == 0 { 101.0 } else { 99.0 }), Shape::Rising, false).unwrap();
        assert!(f.left.is_flat(), "{f:?}");
    }

    #[test]
    fn a_hump_is_split_at_its_peak_and_a_valley_at_its_bottom() {
        // Isolation: 0.5 at low vrate, 1.0 from 60% to 130%, down to 0.2 at 180% and after.
        let hump = |x: f64| {
            if x <= 100.0 {
                Piecewise { x1: 20.0, x2: 60.0, y1: 0.5, y2: 1.0 }.at(x)
            } else {
                Piecewise { x1: 130.0, x2: 180.0, y1: 1.0, y2: 0.2 }.at(x)
            }
        };
        let f = fit(&sample(hump), Shape::Hump, false).unwrap();
        assert!((f.reaches_level() - 60.0).abs() <= 2.0, "{f:?}");
        assert!((f.leaves_level() - 130.0).abs() <= 2.0, "{f:?}");
        // Latency: the same upside down; 25% along the rise is a quarter of the way from 130 to 180.
        let f = fit(&sample(|x| 2.0 - hump(x)), Shape::Valley, false).unwrap();
        assert!((f.along_slope(0.25) - 142.5).abs() <= 2.0, "{f:?}");
        let at_most = f.highest_at_most(1.4).unwrap();
        assert!((at_most - 155.0).abs() <= 2.0, "{at_most}");
    }

    #[test]
    fn an_outlier_is_left_out_of_a_latency_fit() {
        let mut pts = sample(|x| if x < 100.0 { 200.0 } else { 200.0 + 4.0 * (x - 100.0) });
        pts[3].1 = 5000.0;
        let f = fit(&pts, Shape::Valley, true).unwrap();
        assert_eq!(f.outliers, 1, "{f:?}");
        assert!((f.at(40.0) - 200.0).abs() < 1.0 && (f.at(200.0) - 600.0).abs() < 5.0, "{f:?}");
        assert!((erfc(0.0) - 1.0).abs() < 1e-7 && (erfc(1.0) - 0.157_299_2).abs() < 1e-6);
    }
}
