//! From points to solutions: every series fitted against vrate ([`crate::fit`]), then the anchor's
//! solution kinds read off the fits, each a vrate V turned into the lines to apply — the cost model
//! scaled by V with vrate pinned at 100% (`min=100 max=100`; latency targets only set the planning
//! period, `rpct=0`), as resctl-bench's `iocost-tune` prints them — with what the fits predict there.
//! One kind differs from the anchor's: `isolated-bandwidth`, the default, keeps V as a floor instead
//! of a pin (below).
//!
//! - `bandwidth`: the lowest vrate where capacity alone (MOF) reaches its top.
//! - `isolation`: the highest vrate where isolation still holds its top, before the antagonist's
//!   over-commit erodes it.
//! - `isolated-bandwidth`: the lowest vrate where the protected capacity (aMOF) reaches its level —
//!   where its rise reaches the level of the noisy points above it ([`crate::knee`]), not the
//!   fit's top, which follows that noise — at most `bandwidth` and `isolation`, as the vrate floor,
//!   with vrate free above it up to the sweep's highest point while reads meet the sweep's latency
//!   target at p95 ([`floored`]; writes are not judged: the sweep judged none). A pin there gives
//!   the isolation the sweep measured but never more than V of the device, also while the tenant
//!   is idle or its target is met: on a loop device here, the bench's 2:1 on the pinned line (V
//!   60%) got 64–71% of no control's total, on the floored one 95–99% (three runs each). The floor
//!   keeps the measured point as the worst case: when the antagonist pushes latency over the
//!   target, vrate falls back to V. Never above `bandwidth`: aMOF rises as the tenant's share of
//!   MOF, and MOF stops rising there; a level above that share (the antagonist left the tenant
//!   more) is reached by no point of the rise, and the rise extended past MOF's top put the floor
//!   where the budget promises more than the device serves within the target alone — 97.5% where
//!   `bandwidth` was 78.4% in one sweep here, 60.8–97.5% over four.
//! - `naive`: the model as measured, vrate free in 75–100%, p99 targets read off the curves at 100%.
//! - `rlat-99-q1`…`q4`: a quarter, half, three quarters and all of the way up the rise of the
//!   tenant's p99 beside the antagonist.
//! - `target-p99` (with a target): the highest vrate whose fitted p99 beside the antagonist is
//!   within it.

use ioshare_core::iocost::line::{Ctrl, DevNum};
use ioshare_core::{ModelConfig, QosConfig, QosParams};
use serde::Serialize;

use crate::data::{Point, TuneResult};
use crate::fit::{fit, Fit, Shape};
use crate::knee;
use crate::runner::Pinned;

/// Fewest points a fit (and so a solution) needs.
pub const MIN_POINTS: usize = 3;

/// One series of the sweep and its fit.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesFit {
    /// Name (`mof`, `amof`, `isolation`, …).
    pub name: &'static str,
    /// What the values are, with their unit.
    pub label: &'static str,
    /// (vrate %, value) per point.
    pub points: Vec<(f64, f64)>,
    /// The fit, when there are enough points.
    pub fit: Option<Fit>,
}

/// What the fits predict at a vrate.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Predicted {
    /// Capacity alone, IOPS.
    pub mof_iops: f64,
    /// Protected capacity, IOPS.
    pub amof_iops: f64,
    /// Isolation (p05 of achieved ÷ asked).
    pub isolation: f64,
    /// The tenant's p99 beside the antagonist, µs.
    pub lat_p99_us: f64,
    /// The antagonist's share of its uncontrolled throughput.
    pub work_conserved: f64,
}

/// A solution: a vrate and the lines that apply it.
#[derive(Clone, Debug, Serialize)]
pub struct Solution {
    /// Name (`isolated-bandwidth`, …).
    pub name: String,
    /// The vrate chosen, percent.
    pub vrate_pct: f64,
    /// The `io.cost.model` line.
    pub model_line: String,
    /// The `io.cost.qos` line.
    pub qos_line: String,
    /// The fits' values at the vrate.
    pub predicted: Predicted,
}

/// All series with their fits, and the solutions.
#[derive(Clone, Debug, Serialize)]
pub struct Solved {
    /// Every series.
    pub series: Vec<SeriesFit>,
    /// The solutions (empty with fewer than [`MIN_POINTS`] points).
    pub solutions: Vec<Solution>,
    /// Why a solution is missing, if one is.
    pub notes: Vec<String>,
}

/// The series: name, label, value, expected shape, whether outliers are dropped (latencies).
const SERIES: [SeriesSpec<Point>; 7] = [
    ("mof", "capacity alone (MOF), IOPS", |p| p.mof_iops, Shape::Rising, false),
    ("amof", "protected capacity (aMOF), IOPS", |p| p.amof_iops, Shape::Hump, false),
    ("amof-delta", "MOF - aMOF, IOPS", |p| p.mof_iops - p.amof_iops, Shape::Valley, false),
    ("isolation", "isolation (p05 of achieved / asked)", |p| p.isolation, Shape::Hump, false),
    ("lat-impact", "latency impact ((p90 - alone) / alone)", |p| p.lat_impact.0, Shape::Valley, true),
    ("lat-p99", "p99 beside the antagonist, us", |p| p.lat_p99_us, Shape::Valley, true),
    ("work-conserved", "antagonist throughput / alone", |p| p.work_conserved, Shape::Rising, false),
];

/// One series to fit: name, label, its value of an item, its shape, whether outliers are dropped.
pub(crate) type SeriesSpec<T> = (&'static str, &'static str, fn(&T) -> f64, Shape, bool);

/// Fits each series of `table` over
/// `items` against their vrate; a series with fewer than [`MIN_POINTS`] points has no fit.
pub(crate) fn fit_series<T>(table: &[SeriesSpec<T>], items: &[T], vrate: impl Fn(&T) -> f64) -> Vec<SeriesFit> {
    table
        .iter()
        .map(|&(name, label, value, shape, outliers)| {
            let points: Vec<(f64, f64)> = items.iter().map(|i| (vrate(i), value(i))).collect();
            let fit = (points.len() >= MIN_POINTS).then(|| fit(&points, shape, outliers)).flatten();
            SeriesFit { name, label, points, fit }
        })
        .collect()
}

/// Fits every series of `r` and derives the solutions (`target_p99_us`: the extra latency-target one).
pub fn solve(r: &TuneResult, target_p99_us: Option<u64>) -> Solved {
    let series = fit_series(&SERIES, &r.points, |p| p.vrate_pct);
    let mut notes = Vec::new();
    let get = |name: &str| series.iter().find(|s| s.name == name).and_then(|s| s.fit);
    let (Some(mof), Some(amof), Some(iso), Some(lat), Some(work)) =
        (get("mof"), get("amof"), get("isolation"), get("lat-p99"), get("work-conserved"))
    else {
        notes.push(format!("{} point(s): solutions need at least {MIN_POINTS}", r.points.len()));
        return Solved { series, solutions: Vec::new(), notes };
    };
    let predict = |v: f64| Predicted {
        mof_iops: mof.at(v),
        amof_iops: amof.at(v),
        isolation: iso.at(v),
        lat_p99_us: lat.at(v),
        work_conserved: work.at(v),
    };
    let device = r.device.dev.as_deref().and_then(|d| d.parse::<DevNum>().ok());
    let base = r.settings.qos();
    let pinned = |name: &str, v: f64| pinned(r, name, v, predict(v));
    let isolation_v = iso.leaves_level();
    let amof_points: Vec<knee::Measured> = r
        .points
        .iter()
        .map(|p| knee::Measured { vrate_pct: p.vrate_pct, amof: p.amof_iops, trials: &p.amof_trials })
        .collect();
    let bandwidth_v = mof.reaches_level();
    let isolated_v =
        knee::rise(&amof_points).map_or(amof.reaches_level(), |r| r.reaches_level()).min(bandwidth_v).min(isolation_v);
    let mut solutions = vec![
        pinned("bandwidth", bandwidth_v),
        floored(r, "isolated-bandwidth", isolated_v, amof.hi, predict(isolated_v)),
        pinned("isolation", isolation_v),
    ];
    // naive: the model as measured, vrate 75-100%, p99 targets at 100% (clamped into the range).
    let at100 = 100f64.clamp(lat.lo, lat.hi);
    let nearest = r.points.iter().min_by(|a, b| (a.vrate_pct - at100).abs().total_cmp(&(b.vrate_pct - at100).abs()));
    let wlat = nearest.map_or(base.wlat_us, |p| p.antagonist_p99_us.ceil().max(1.0) as u64);
    let naive = QosParams {
        enable: true,
        rppm: 990_000,
        rlat_us: lat.at(at100).ceil().max(1.0) as u64,
        wppm: 990_000,
        wlat_us: wlat,
        min_ppm: 750_000,
        max_ppm: 1_000_000,
    };
    solutions.push(Solution {
        name: "naive".into(),
        vrate_pct: 100.0,
        model_line: ModelConfig { device, ctrl: Ctrl::User, params: r.settings.model() }.to_string(),
        qos_line: QosConfig { device, ctrl: Ctrl::User, params: naive }.to_string(),
        predicted: predict(at100),
    });
    for q in 1..=4 {
        solutions.push(pinned(&format!("rlat-99-q{q}"), lat.along_slope(q as f64 / 4.0)));
    }
    if let Some(t) = target_p99_us {
        match lat.highest_at_most(t as f64) {
            Some(v) => solutions.push(pinned("target-p99", v)),
            None => notes.push(format!(
                "no swept vrate keeps the p99 beside the antagonist within {t} us (the lowest fitted is {:.0} us)",
                lat.at(lat.split)
            )),
        }
    }
    Solved { series, solutions, notes }
}

/// Solution `name` at vrate `v` of result `r`: the model scaled by `v` with vrate pinned at 100%
/// (latency targets only set the planning period), with what the fits predict there.
pub fn pinned(r: &TuneResult, name: &str, v: f64, predicted: Predicted) -> Solution {
    at_vrate(r, name, v, predicted, |qos| qos)
}

/// The percentile a floored solution's read target is judged at: the sweep's (p95).
const FLOOR_FOLLOW_PPM: u32 = 950_000;

/// Solution `name` with vrate `v` as its floor: the model scaled by `v`, and vrate free from 100%
/// (that is, `v`) up to the sweep's highest vrate `top`, following the sweep's read latency target
/// at p95 (writes not judged, as in the sweep; a write target the profile suggested for another
/// read target would hold vrate at the floor); what the fits predict is at `v`, the worst case.
pub fn floored(r: &TuneResult, name: &str, v: f64, top: f64, predicted: Predicted) -> Solution {
    at_vrate(r, name, v, predicted, |pinned| QosParams {
        rppm: FLOOR_FOLLOW_PPM,
        rlat_us: r.settings.lat_target_us,
        max_ppm: ((top / v.max(1e-9)) * 1e6).round().max(1e6) as u32,
        ..pinned
    })
}

/// Solution `name` at vrate `v`: the model scaled by `v` and the QoS `qos` makes of the pinned one.
fn at_vrate(
    r: &TuneResult,
    name: &str,
    v: f64,
    predicted: Predicted,
    qos: impl FnOnce(QosParams) -> QosParams,
) -> Solution {
    let device = r.device.dev.as_deref().and_then(|d| d.parse::<DevNum>().ok());
    let lines = Pinned::at(&r.settings.model(), &r.settings.qos(), v);
    Solution {
        name: name.to_string(),
        vrate_pct: round2(v),
        model_line: ModelConfig { device, ctrl: Ctrl::User, params: lines.model }.to_string(),
        qos_line: QosConfig { device, ctrl: Ctrl::User, params: qos(lines.qos) }.to_string(),
        predicted,
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::ControlledBy;

    /// Fixture points from 50% to 150% (the solver's input, not a measurement): every series flat
    /// but the protected capacity, which falls from the first point on, so `isolated-bandwidth`
    /// sits at 50%.
    fn swept() -> TuneResult {
        let flat = Point {
            vrate_pct: 0.0,
            mof_iops: 1000.0,
            amof_iops: 0.0,
            isolation: 0.95,
            isolation_mean: 0.97,
            lat_p99_us: 1500.0,
            lat_impact: (0.2, 0.05),
            work_conserved: 0.8,
            antagonist_p99_us: 5000.0,
            vrate: Default::default(),
            lat: Default::default(),
            took_s: 10.0,
            amof_trials: Vec::new(),
        };
        let points = (0..=10)
            .map(|i| f64::from(i) * 10.0 + 50.0)
            .map(|v| Point { vrate_pct: v, amof_iops: 1200.0 - 6.0 * v, ..flat.clone() })
            .collect();
        TuneResult { points, ..crate::sweep::tests::result(ControlledBy::Inline) }
    }

    /// MOF rising to 60% and flat above; aMOF its half along the rise, and above it a level the
    /// antagonist's slack lifts to two thirds of MOF's top: the rise extended reaches that level at
    /// 80%, past MOF's top, so `isolated-bandwidth` stops at `bandwidth`'s 60%.
    #[test]
    fn isolated_bandwidth_is_never_above_bandwidth() {
        let mut r = swept();
        r.points = (1..=15)
            .map(|i| f64::from(i) * 10.0)
            .map(|v| {
                let mof = v.min(60.0) * 100.0;
                let amof = if v <= 60.0 { mof / 2.0 } else { 4000.0 };
                Point { vrate_pct: v, mof_iops: mof, amof_iops: amof, ..r.points[0].clone() }
            })
            .collect();
        let solved = solve(&r, None);
        let vrate = |name: &str| solved.solutions.iter().find(|s| s.name == name).unwrap().vrate_pct;
        // Within a point: the fit searches its bends on a 1% grid.
        assert!((vrate("bandwidth") - 60.0).abs() < 1.0, "{}", vrate("bandwidth"));
        assert_eq!(vrate("isolated-bandwidth"), vrate("bandwidth"));
    }

    #[test]
    fn isolated_bandwidth_floors_vrate_where_the_others_pin_it() {
        let solved = solve(&swept(), None);
        let lines = |name: &str| {
            let s = solved.solutions.iter().find(|s| s.name == name).unwrap();
            let model: ModelConfig = s.model_line.parse().unwrap();
            let qos: QosConfig = s.qos_line.parse().unwrap();
            (s.vrate_pct, model.params.rrandiops, qos.params)
        };
        let (v, rrandiops, qos) = lines("isolated-bandwidth");
        assert_eq!((v, rrandiops), (50.0, 1_500), "the model scaled by the floor's vrate");
        // Floor at 50% of the model, free up to the sweep's 150%, following the sweep's read target
        // at p95; writes not judged.
        assert_eq!((qos.min_ppm, qos.max_ppm), (1_000_000, 3_000_000));
        assert_eq!((qos.rppm, qos.rlat_us, qos.wppm), (950_000, 2000, 0));
        for name in ["bandwidth", "isolation", "rlat-99-q1"] {
            let (_, _, qos) = lines(name);
            assert_eq!(
                (qos.min_ppm, qos.max_ppm, qos.rppm, qos.wppm),
                (1_000_000, 1_000_000, 0, 0),
                "{name} is pinned"
            );
        }
    }
}
