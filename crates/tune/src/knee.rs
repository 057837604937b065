//! The top of the protected capacity's rise: the vrate from which more vrate buys the tenant no
//! more protected capacity (aMOF) — where `isolated-bandwidth` puts its floor — and the refinement
//! of the grid around it.
//!
//! Below the top aMOF is the tenant's weight share of what vrate lets through, so it rises in
//! proportion to vrate, and the bisection measures that rise exactly (its steps are eighths of MOF,
//! and MOF grows with vrate): on this host's loop device two sweeps gave aMOF ÷ vrate of 465 and 434
//! IOPS per percent at every point of their rise. Above it the controller lets through more than the
//! device serves within the tenant's target, and whether a bisection step passes is a coin toss: the
//! same sweeps measured 7k–46k IOPS and 0–17k from one point to the next. A flat–slope–flat fit of
//! that hump put its top on the noise — on the mean of the noisy points in one sweep, on the peak in
//! another — and default sweeps of one disk chose 32%, 45%, 60% and 73%.
//!
//! So the top is found as a change point: the split of the points (by vrate) into a rise — aMOF at
//! least [`ON_RISE`] of the rise's slope times vrate, the slope the median of aMOF ÷ vrate over the
//! points up to the split — and the rest below it, chosen to agree with the most points (the highest
//! split among equals). One stray point on either side (a step that missed in the rise, a lucky one
//! above it) does not move it. The top is the highest point of the rise; between it and the next
//! point the grid cannot tell, so the sweep measures [`REFINE_POINTS`] more points there, halving the
//! bracket each time ([`refine_next`]).

/// Share of the rise's slope times vrate a point's aMOF must reach to be on the rise: a step of
/// the bisection is an eighth of MOF, so a point off the rise is at most 3/4 of it.
pub const ON_RISE: f64 = 0.9;

/// Points the sweep adds by default between the top of the rise and the next point: three halve a
/// 10% grid step to 1.25%.
pub const REFINE_POINTS: usize = 3;

/// A bracket narrower than this (vrate, percent) is not refined further.
pub const MIN_BRACKET_PCT: f64 = 1.0;

/// The top of the rise in (vrate %, aMOF) points sorted by vrate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Top {
    /// The highest vrate on the rise.
    pub vrate_pct: f64,
    /// The next measured vrate above it, if any (the bracket's upper end).
    pub next_pct: Option<f64>,
    /// aMOF per percent of vrate along the rise.
    pub slope: f64,
}

/// The top of the rise of `points` (vrate %, aMOF), or `None` when no point has aMOF above zero.
pub fn top(points: &[(f64, f64)]) -> Option<Top> {
    let mut pts: Vec<(f64, f64)> = points.iter().copied().filter(|&(v, a)| v > 0.0 && a.is_finite()).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best: Option<(usize, Top)> = None;
    for split in 0..pts.len() {
        let mut ratios: Vec<f64> = pts[..=split].iter().map(|&(v, a)| a / v).collect();
        ratios.sort_by(f64::total_cmp);
        let slope = ratios[ratios.len() / 2];
        if slope <= 0.0 {
            continue;
        }
        let on = |&(v, a): &(f64, f64)| a >= ON_RISE * slope * v;
        let agree = pts[..=split].iter().filter(|p| on(p)).count() + pts[split + 1..].iter().filter(|p| !on(p)).count();
        if best.as_ref().is_none_or(|(most, _)| agree >= *most) {
            let t = Top { vrate_pct: pts[split].0, next_pct: pts.get(split + 1).map(|p| p.0), slope };
            best = Some((agree, t));
        }
    }
    best.map(|(_, t)| t)
}

/// The vrate the sweep measures next to narrow the bracket above the top of `points`' rise, given
/// how many refinement points it already measured (`refined`) of the `most` it may: the bracket's
/// middle, or `None` when `most` were measured, the rise never ends in the range, or the bracket is
/// narrower than [`MIN_BRACKET_PCT`].
pub fn refine_next(points: &[(f64, f64)], refined: usize, most: usize) -> Option<f64> {
    if refined >= most {
        return None;
    }
    let t = top(points)?;
    let next = t.next_pct?;
    ((next - t.vrate_pct) >= MIN_BRACKET_PCT).then(|| (t.vrate_pct + next) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two sweeps of the module comment (aMOF per grid point, 10% to 200%): the rise's top at
    /// 70% and at 50%, the stray misses in the rise (t2's 20%) and lucky points above it (t1's 160%
    /// and 180%) outvoted.
    #[test]
    fn the_top_is_where_the_rise_ends_whatever_the_noise_above_it() {
        let grid = |a: &[f64]| a.iter().enumerate().map(|(i, &a)| (10.0 * (i + 1) as f64, a)).collect::<Vec<_>>();
        let t1 = grid(&[
            4649.0, 9297.0, 13946.0, 18594.0, 23243.0, 27394.0, 32589.0, 26072.0, 16295.0, 17381.0, 7061.0, 17925.0,
            17381.0, 21183.0, 8148.0, 32589.0, 22813.0, 45625.0, 19554.0, 21183.0,
        ]);
        let top1 = top(&t1).unwrap();
        assert_eq!((top1.vrate_pct, top1.next_pct), (70.0, Some(80.0)));
        assert!((top1.slope - 464.9).abs() < 1.0, "{top1:?}");
        let t2 = grid(&[
            4344.0, 6516.0, 13031.0, 17375.0, 21719.0, 21916.0, 17220.0, 5479.0, 12523.0, 11741.0, 6262.0, 0.0, 5871.0,
            5479.0, 0.0, 6262.0, 5479.0, 10175.0, 6262.0, 5479.0,
        ]);
        assert_eq!(top(&t2).map(|t| t.vrate_pct), Some(50.0));
        assert_eq!(refine_next(&t2, 0, REFINE_POINTS), Some(55.0));
        assert_eq!(top(&[(10.0, 0.0), (20.0, 0.0)]), None);
    }

    /// Refinement halves the bracket: a device whose rise ends at 57% (aMOF on the line up to it,
    /// half of it above) is bracketed 50–60, then 55–60, 55–57.5, 56.25–57.5 after three points, and
    /// a rise that never ends in the range is not refined.
    #[test]
    fn refinement_halves_the_bracket_around_the_top() {
        let amof = |v: f64| if v <= 57.0 { 100.0 * v } else { 50.0 * v };
        let mut points: Vec<(f64, f64)> = (1..=10).map(|i| f64::from(i) * 10.0).map(|v| (v, amof(v))).collect();
        let mut asked = Vec::new();
        while let Some(v) = refine_next(&points, asked.len(), REFINE_POINTS) {
            asked.push(v);
            points.push((v, amof(v)));
        }
        assert_eq!(asked, [55.0, 57.5, 56.25]);
        let t = top(&points).unwrap();
        assert_eq!((t.vrate_pct, t.next_pct), (56.25, Some(57.5)));
        let rising: Vec<(f64, f64)> = (1..=10).map(|i| (f64::from(i) * 10.0, f64::from(i))).collect();
        assert_eq!(refine_next(&rising, 0, REFINE_POINTS), None);
    }
}
