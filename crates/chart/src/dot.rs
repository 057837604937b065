//! Dot charts: labelled points over two axes, with an optional frontier line they are judged
//! against (the best trade-off reachable, drawn grey and named in the legend).

use crate::axis::Axis;
use crate::canvas::{Anchor, Canvas, Chart, Rect, TextStyle};
use crate::colour;
use crate::line::Series;
use crate::plot::Plot;

/// Colour of the frontier line.
const FRONTIER: &str = "#555";
/// Average width of a character of a dot's label (11-pixel text).
const LABEL_CHAR_W: f64 = 6.0;

/// One labelled point.
#[derive(Clone, Debug, PartialEq)]
pub struct Dot {
    /// Text beside the dot.
    pub label: String,
    /// Horizontal value.
    pub x: f64,
    /// Vertical value.
    pub y: f64,
}

/// A dot chart: a title, two axes, a frontier line if any, and the dots in palette order, each
/// with its label beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct DotChart {
    /// Title above the chart.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// The frontier, drawn as a grey line and named in the legend; `None` for none.
    pub frontier: Option<Series>,
    /// The dots; one that cannot be drawn (not finite, or not positive on a log axis) is left out.
    pub dots: Vec<Dot>,
}

impl Chart for DotChart {
    fn draw(&self, canvas: &mut Canvas, area: Rect) {
        let legend: Vec<_> = self.frontier.iter().map(|f| (f.name.as_str(), FRONTIER)).collect();
        let frontier = self.frontier.as_ref().map_or(&[][..], |f| &f.points[..]);
        let all: Vec<(f64, f64)> = frontier.iter().copied().chain(self.dots.iter().map(|d| (d.x, d.y))).collect();
        let plot = Plot::new(area, &self.x, &self.y, &all, &legend);
        plot.draw_frame(canvas, &self.title, &self.x, &self.y);
        let line: Vec<(f64, f64)> = frontier.iter().filter_map(|p| plot.at(*p)).collect();
        canvas.path(&[line], FRONTIER, 2.0);
        let mut drawn = false;
        for (i, d) in self.dots.iter().enumerate() {
            let Some((x, y)) = plot.at((d.x, d.y)) else { continue };
            canvas.circle((x, y), 4.0, colour::nth(i));
            // The label right of the dot, or left of it where it would run past the plot.
            let style = TextStyle::new(11.0).fill(colour::nth(i));
            if x + 6.0 + LABEL_CHAR_W * d.label.chars().count() as f64 > plot.right() {
                canvas.text(x - 6.0, y - 4.0, &d.label, style.anchor(Anchor::End));
            } else {
                canvas.text(x + 6.0, y - 4.0, &d.label, style);
            }
            drawn = true;
        }
        if !drawn && frontier.iter().all(|p| plot.at(*p).is_none()) {
            plot.draw_no_data(canvas);
        }
        plot.draw_legend(canvas, &legend);
    }
}
