//! The frame line and dot charts share: the title on top, the x and y axes fitted to the data with
//! their grid, ticks and titles, a legend on the right, and the mapping from data to pixels.

use crate::axis::{Axis, Fitted};
use crate::canvas::{Anchor, Canvas, Rect, TextStyle};

/// Room above the plot for the title.
const TOP: f64 = 40.0;
/// Room below for the x tick labels and the axis title.
const BOTTOM: f64 = 50.0;
/// Room on the left for the y tick labels and the axis title.
const LEFT: f64 = 70.0;
/// Room on the right without a legend.
const RIGHT: f64 = 20.0;
/// Average width of a character of 12-pixel text, to make room for a legend.
const CHAR_W: f64 = 6.5;

/// A legend entry: name and colour.
pub(crate) type Entry<'a> = (&'a str, &'static str);

/// A laid-out plot: where the data goes and how its axes are fitted.
pub(crate) struct Plot {
    area: Rect,
    inner: Rect,
    x: Fitted,
    y: Fitted,
}

impl Plot {
    /// The plot inside `area`, its axes fitted to `points`, with room for `legend` on the right.
    pub(crate) fn new(area: Rect, x: &Axis, y: &Axis, points: &[(f64, f64)], legend: &[Entry]) -> Plot {
        let widest = legend.iter().map(|(name, _)| name.chars().count()).max();
        // The legend starts 10 px right of the plot: a 18 px line, a 6 px gap, the name, a margin.
        let right = widest.map_or(RIGHT, |n| (44.0 + CHAR_W * n as f64).max(80.0).min(area.w * 0.4));
        let inner = area.inset(LEFT, TOP, right, BOTTOM);
        Plot { area, inner, x: x.fit(points.iter().map(|p| p.0)), y: y.fit(points.iter().map(|p| p.1)) }
    }

    /// Where data point `p` goes in pixels, kept inside the plot; `None` if it cannot be drawn.
    pub(crate) fn at(&self, p: (f64, f64)) -> Option<(f64, f64)> {
        let (fx, fy) = (self.x.at(p.0)?, self.y.at(p.1)?);
        Some((self.inner.x + fx * self.inner.w, self.inner.bottom() - fy * self.inner.h))
    }

    /// The plot's right edge in pixels.
    pub(crate) fn right(&self) -> f64 {
        self.inner.right()
    }

    /// Draws the title, the grid and ticks of both axes, their titles and the frame.
    pub(crate) fn draw_frame(&self, canvas: &mut Canvas, title: &str, x: &Axis, y: &Axis) {
        let (a, p) = (self.area, self.inner);
        canvas.text(a.x + a.w / 2.0, a.y + 22.0, title, TextStyle::new(15.0).anchor(Anchor::Middle));
        for (v, label) in &self.x.ticks {
            let Some(f) = self.x.at(*v) else { continue };
            let gx = p.x + f * p.w;
            canvas.line((gx, p.y), (gx, p.bottom()), "#ddd", 1.0);
            canvas.text(gx, p.bottom() + 16.0, label, TextStyle::new(12.0).anchor(Anchor::Middle));
        }
        for (v, label) in &self.y.ticks {
            let Some(f) = self.y.at(*v) else { continue };
            let gy = p.bottom() - f * p.h;
            canvas.line((p.x, gy), (p.right(), gy), "#ddd", 1.0);
            canvas.text(p.x - 6.0, gy + 4.0, label, TextStyle::new(12.0).anchor(Anchor::End));
        }
        canvas.rect(p, "none", Some("#333"));
        canvas.text(p.x + p.w / 2.0, a.bottom() - 12.0, &x.title(), TextStyle::new(12.0).anchor(Anchor::Middle));
        let style = TextStyle::new(12.0).anchor(Anchor::Middle).vertical();
        canvas.text(a.x + 16.0, p.y + p.h / 2.0, &y.title(), style);
    }

    /// Draws `entries` as a legend right of the plot: a short line of each colour and its name.
    pub(crate) fn draw_legend(&self, canvas: &mut Canvas, entries: &[Entry]) {
        let lx = self.inner.right() + 10.0;
        for (i, (name, colour)) in entries.iter().enumerate() {
            let ly = self.inner.y + 8.0 + 16.0 * i as f64;
            canvas.line((lx, ly), (lx + 18.0, ly), colour, 3.0);
            canvas.text(lx + 24.0, ly + 4.0, name, TextStyle::new(12.0));
        }
    }

    /// Says "no data" in the middle of the plot.
    pub(crate) fn draw_no_data(&self, canvas: &mut Canvas) {
        let p = self.inner;
        canvas.text(
            p.x + p.w / 2.0,
            p.y + p.h / 2.0,
            "no data",
            TextStyle::new(12.0).anchor(Anchor::Middle).fill("#777"),
        );
    }
}
