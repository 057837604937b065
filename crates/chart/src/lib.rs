//! ioshare-chart: the SVG charts of ioshare's reports, written by hand with no dependency — line
//! charts of time series and distributions (the simulator), dot charts with a frontier (the
//! bench), heatmaps of histograms over time (the observer).
//!
//! # Design
//! Plain data in, SVG text out. A chart is a struct of plain data — [`LineChart`] of [`Series`],
//! [`DotChart`] of [`Dot`]s and a frontier, [`Heatmap`] of [`Column`]s — and implements [`Chart`]:
//! it draws itself into a rectangle of a [`Canvas`], so one chart makes a document of its own
//! ([`Chart::to_svg`]) and several share one (a canvas, charts drawn side by side, `finish`).
//! Callers only turn their own data into these structs; layout, ticks, colours and escaping live
//! here, once.
//!
//! Modules, each importing only those before it: `canvas` (the document: the one place markup is
//! written, [`escape`]d, and non-finite coordinates dropped), `axis` (an [`Axis`] fitted to the data:
//! round ticks covering it, short labels), `colour` (palette, heat scale), `plot` (the frame line
//! and dot charts share: title, axes, grid, legend), then `line`, `dot`, `heatmap`.
//!
//! ```
//! use ioshare_chart::{Axis, Chart, LineChart, Series};
//!
//! let chart = LineChart {
//!     title: "IOPS".into(),
//!     x: Axis::linear("time").unit("s").tight(),
//!     y: Axis::linear("IOPS").from_zero(),
//!     series: vec![Series::new("a", vec![(1.0, 5000.0), (2.0, 5200.0)])],
//! };
//! let svg = chart.to_svg(720.0, 400.0);
//! assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
//! ```

mod axis;
mod canvas;
mod colour;
mod dot;
mod heatmap;
mod line;
mod plot;

pub use axis::{Axis, Scale};
pub use canvas::{escape, Anchor, Canvas, Chart, Rect, TextStyle};
pub use dot::{Dot, DotChart};
pub use heatmap::{Column, Heatmap};
pub use line::{LineChart, Series};

#[cfg(test)]
mod tests;
