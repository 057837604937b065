//! Heatmaps: a grid of cells, one column per interval along the x axis and one row per named
//! category, each cell coloured by its value on a log scale, with the scale drawn on the right.

use crate::axis::Axis;
use crate::canvas::{Anchor, Canvas, Chart, Rect, TextStyle};
use crate::colour;

/// Room above the grid for the title.
const TOP: f64 = 40.0;
/// Room below for the x tick labels and the axis title.
const BOTTOM: f64 = 50.0;
/// Room on the right for the colour scale.
const RIGHT: f64 = 110.0;
/// Average width of a character of 12-pixel text, to make room for the row labels.
const CHAR_W: f64 = 7.0;
/// Steps of the colour scale drawn on the right.
const SWATCHES: usize = 10;

/// One column of cells: the interval it covers along the x axis and a value per row.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Where the interval starts.
    pub start: f64,
    /// Where it ends.
    pub end: f64,
    /// A value per row, bottom row first; missing values count as none.
    pub cells: Vec<f64>,
}

/// A heatmap: a title, the x axis of the columns, named rows, and a colour per cell from pale
/// (small) to dark (the largest value), on a log scale so that a few large cells do not wash out
/// the rest. Cells of zero, less, or not a number are drawn grey.
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    /// Title above the chart.
    pub title: String,
    /// The horizontal axis the columns' intervals lie on.
    pub x: Axis,
    /// Title of the vertical axis (what the rows are).
    pub y_name: String,
    /// Row labels, bottom row first.
    pub rows: Vec<String>,
    /// The columns.
    pub columns: Vec<Column>,
    /// What a value counts (`IOs`): heads the colour scale and ends each cell's tooltip.
    pub unit: String,
}

impl Heatmap {
    fn value(column: &Column, row: usize) -> Option<f64> {
        column.cells.get(row).copied().filter(|v| *v > 0.0 && v.is_finite())
    }
}

impl Chart for Heatmap {
    fn draw(&self, canvas: &mut Canvas, area: Rect) {
        let widest = self.rows.iter().map(|r| r.chars().count()).max().unwrap_or(0);
        let left = (36.0 + CHAR_W * widest as f64).max(60.0).min(area.w * 0.4);
        let p = area.inset(left, TOP, RIGHT, BOTTOM);
        canvas.text(area.x + area.w / 2.0, area.y + 24.0, &self.title, TextStyle::new(15.0).anchor(Anchor::Middle));
        let values = || self.columns.iter().flat_map(|c| (0..self.rows.len()).filter_map(|k| Heatmap::value(c, k)));
        let (Some(max), Some(min)) = (values().reduce(f64::max), values().reduce(f64::min)) else {
            let style = TextStyle::new(12.0).anchor(Anchor::Middle).fill("#777");
            canvas.text(area.x + area.w / 2.0, area.y + area.h / 2.0, "no data", style);
            return;
        };
        let shade = |v: f64| colour::heat(v.ln_1p() / max.ln_1p());
        let x = self.x.fit(self.columns.iter().flat_map(|c| [c.start, c.end]));
        let px = |v: f64| x.at(v).map(|f| p.x + f * p.w);
        let cell_h = p.h / self.rows.len() as f64;
        let x_unit = if self.x.unit.is_empty() { String::new() } else { format!(" {}", self.x.unit) };
        for c in &self.columns {
            let (Some(x0), Some(x1)) = (px(c.start), px(c.end)) else { continue };
            for (k, row) in self.rows.iter().enumerate() {
                let y = p.bottom() - (k + 1) as f64 * cell_h;
                let value = Heatmap::value(c, k);
                let fill = value.map_or(colour::EMPTY.to_string(), shade);
                let tip = format!("{:.1}–{:.1}{x_unit}, {row}: {} {}", c.start, c.end, value.unwrap_or(0.0), self.unit);
                canvas.cell(Rect::new(x0, y, (x1 - x0).max(0.5), cell_h), &fill, &tip);
            }
        }
        // Axes: row labels (every other when crowded), round time ticks, titles.
        canvas.line((p.x, p.y), (p.x, p.bottom()), "#333", 1.0);
        canvas.line((p.x, p.bottom()), (p.right(), p.bottom()), "#333", 1.0);
        let every = if self.rows.len() > 24 { 2 } else { 1 };
        for (k, row) in self.rows.iter().enumerate().step_by(every) {
            let y = p.bottom() - (k as f64 + 0.5) * cell_h + 4.0;
            canvas.text(p.x - 6.0, y, row, TextStyle::new(12.0).anchor(Anchor::End));
        }
        for (v, label) in &x.ticks {
            let Some(gx) = px(*v) else { continue };
            canvas.line((gx, p.bottom()), (gx, p.bottom() + 4.0), "#333", 1.0);
            canvas.text(gx, p.bottom() + 18.0, label, TextStyle::new(12.0).anchor(Anchor::Middle));
        }
        canvas.text(
            p.x + p.w / 2.0,
            area.bottom() - 10.0,
            &self.x.title(),
            TextStyle::new(12.0).anchor(Anchor::Middle),
        );
        let style = TextStyle::new(12.0).anchor(Anchor::Middle).vertical();
        canvas.text(area.x + 16.0, p.y + p.h / 2.0, &self.y_name, style);
        // The colour scale: the largest value on top, the smallest at the bottom, log steps between.
        let lx = p.right() + 30.0;
        let step = p.h / SWATCHES as f64;
        for i in 0..SWATCHES {
            let t = (SWATCHES - 1 - i) as f64 / (SWATCHES - 1) as f64;
            let v = (min.ln_1p() + (max.ln_1p() - min.ln_1p()) * t).exp_m1();
            canvas.rect(Rect::new(lx, p.y + i as f64 * step, 18.0, step), &shade(v), None);
        }
        canvas.text(lx + 22.0, p.y + 10.0, &max.to_string(), TextStyle::new(12.0));
        canvas.text(lx + 22.0, p.bottom(), &min.to_string(), TextStyle::new(12.0));
        canvas.text(lx, p.y - 6.0, &self.unit, TextStyle::new(12.0));
    }
}
