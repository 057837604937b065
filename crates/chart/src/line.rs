//! Line charts: several series of (x, y) points over shared axes, each a line in its own colour
//! named in the legend.

use crate::axis::Axis;
use crate::canvas::{Canvas, Chart, Rect};
use crate::colour;
use crate::plot::Plot;

/// One line: a name for the legend and its points in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// (x, y) points, joined in this order; a point that cannot be drawn (not finite, or not
    /// positive on a log axis) leaves a gap.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// The series `name` through `points`.
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.to_string(), points }
    }
}

/// A line chart: a title, two axes, and the series drawn over them in palette order.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// Title above the chart.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
}

impl Chart for LineChart {
    fn draw(&self, canvas: &mut Canvas, area: Rect) {
        let legend: Vec<_> = self.series.iter().enumerate().map(|(i, s)| (s.name.as_str(), colour::nth(i))).collect();
        let all: Vec<(f64, f64)> = self.series.iter().flat_map(|s| s.points.iter().copied()).collect();
        let plot = Plot::new(area, &self.x, &self.y, &all, &legend);
        plot.draw_frame(canvas, &self.title, &self.x, &self.y);
        let mut drawn = false;
        for (s, (_, colour)) in self.series.iter().zip(&legend) {
            // Runs of drawable points; a lone point gets a dot, as a line through it would not show.
            let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for p in &s.points {
                match plot.at(*p) {
                    Some(px) => runs.last_mut().expect("runs starts with one").push(px),
                    None if runs.last().is_some_and(|r| !r.is_empty()) => runs.push(Vec::new()),
                    None => {}
                }
            }
            runs.retain(|r| !r.is_empty());
            drawn |= !runs.is_empty();
            canvas.path(&runs, colour, 2.0);
            for lone in runs.iter().filter(|r| r.len() == 1) {
                canvas.circle(lone[0], 2.5, colour);
            }
        }
        if !drawn {
            plot.draw_no_data(canvas);
        }
        plot.draw_legend(canvas, &legend);
    }
}
