//! One SVG per series: the measured points as dots labelled with their vrate, the fit as a line,
//! and each solution marked on the fit with its name.

use ioshare_chart::{Axis, Chart, Dot, DotChart, Series};

use crate::solve::{SeriesFit, Solution};

/// Samples drawn along a fit.
const FIT_SAMPLES: usize = 200;

/// The chart of `series` with the solutions' vrates marked; `None` without points.
pub fn chart(series: &SeriesFit, solutions: &[Solution]) -> Option<String> {
    if series.points.is_empty() {
        return None;
    }
    let mut dots: Vec<Dot> = series.points.iter().map(|&(x, y)| Dot { label: format!("{x:.0}%"), x, y }).collect();
    let frontier = series.fit.map(|f| {
        let pts = (0..=FIT_SAMPLES).map(|i| f.lo + (f.hi - f.lo) * i as f64 / FIT_SAMPLES as f64).map(|x| (x, f.at(x)));
        Series::new("fit", pts.collect())
    });
    if let Some(f) = series.fit {
        dots.extend(solutions.iter().map(|s| Dot { label: s.name.clone(), x: s.vrate_pct, y: f.at(s.vrate_pct) }));
    }
    let chart = DotChart {
        title: format!("{} against vrate", series.label),
        x: Axis::linear("vrate").unit("%"),
        y: Axis::linear(series.label).from_zero(),
        frontier,
        dots,
    };
    Some(chart.to_svg(900.0, 480.0))
}
