//! The SVG document: the one place that writes markup. Charts draw onto a [`Canvas`] through a few
//! shape and text calls; every piece of text goes through [`escape`] here, and a shape with a
//! coordinate that is not a finite number is left out rather than written as `NaN`.

use std::fmt::Write as _;

/// `text` with XML's special characters escaped, fit for element content and quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A rectangle in pixels: top-left corner, width and height.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

impl Rect {
    /// The rectangle at (`x`, `y`) of `w` × `h`.
    pub fn new(x: f64, y: f64, w: f64, h: f64) -> Rect {
        Rect { x, y, w, h }
    }

    /// Its right edge.
    pub fn right(&self) -> f64 {
        self.x + self.w
    }

    /// Its bottom edge.
    pub fn bottom(&self) -> f64 {
        self.y + self.h
    }

    /// The rectangle inside margins of `left`, `top`, `right` and `bottom` pixels (never negative in
    /// size).
    pub fn inset(&self, left: f64, top: f64, right: f64, bottom: f64) -> Rect {
        Rect::new(self.x + left, self.y + top, (self.w - left - right).max(1.0), (self.h - top - bottom).max(1.0))
    }
}

/// Where a text's anchor point lies along it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// The text starts at the point.
    Start,
    /// The text is centred on the point.
    Middle,
    /// The text ends at the point.
    End,
}

/// How a text looks: font size, anchor, colour, and whether it reads bottom to top.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TextStyle {
    /// Font size in pixels.
    pub size: f64,
    /// Where the anchor point lies along the text.
    pub anchor: Anchor,
    /// Text colour (CSS); `None` for black.
    pub fill: Option<&'static str>,
    /// Turned a quarter counter-clockwise (an y axis title).
    pub vertical: bool,
}

impl TextStyle {
    /// Black text of `size` pixels starting at its point.
    pub fn new(size: f64) -> TextStyle {
        TextStyle { size, anchor: Anchor::Start, fill: None, vertical: false }
    }

    /// The same with anchor `anchor`.
    pub fn anchor(self, anchor: Anchor) -> TextStyle {
        TextStyle { anchor, ..self }
    }

    /// The same in colour `fill`.
    pub fn fill(self, fill: &'static str) -> TextStyle {
        TextStyle { fill: Some(fill), ..self }
    }

    /// The same turned to read bottom to top.
    pub fn vertical(self) -> TextStyle {
        TextStyle { vertical: true, ..self }
    }
}

/// Whether every coordinate can be written.
fn finite(values: &[f64]) -> bool {
    values.iter().all(|v| v.is_finite())
}

/// An SVG document being written: white background, sans-serif text.
#[derive(Clone, Debug)]
pub struct Canvas {
    out: String,
}

impl Canvas {
    /// A blank white document of `width` × `height` pixels (a size that is not a finite positive
    /// number is taken as 0).
    pub fn new(width: f64, height: f64) -> Canvas {
        let size = |v: f64| if v.is_finite() { v.max(0.0) } else { 0.0 };
        let (width, height) = (size(width), size(height));
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(out, r#"<rect width="{width}" height="{height}" fill="white"/>"#);
        Canvas { out }
    }

    /// `content` at (`x`, `y`) (the text's baseline) in `style`.
    pub fn text(&mut self, x: f64, y: f64, content: &str, style: TextStyle) {
        if !finite(&[x, y, style.size]) {
            return;
        }
        let anchor = match style.anchor {
            Anchor::Start => "",
            Anchor::Middle => r#" text-anchor="middle""#,
            Anchor::End => r#" text-anchor="end""#,
        };
        let fill = style.fill.map(|f| format!(r#" fill="{}""#, escape(f))).unwrap_or_default();
        let size = if style.size == 12.0 { String::new() } else { format!(r#" font-size="{}""#, style.size) };
        let (position, turn) = if style.vertical {
            (String::new(), format!(r#" transform="translate({x:.1} {y:.1}) rotate(-90)""#))
        } else {
            (format!(r#" x="{x:.1}" y="{y:.1}""#), String::new())
        };
        let _ = writeln!(self.out, "<text{position}{turn}{anchor}{size}{fill}>{}</text>", escape(content));
    }

    /// A straight line from `from` to `to`.
    pub fn line(&mut self, from: (f64, f64), to: (f64, f64), stroke: &str, width: f64) {
        if !finite(&[from.0, from.1, to.0, to.1, width]) {
            return;
        }
        let _ = writeln!(
            self.out,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="{width}"/>"#,
            from.0,
            from.1,
            to.0,
            to.1,
            escape(stroke)
        );
    }

    /// A rectangle filled with `fill` (`"none"` for none), outlined with `stroke` if given.
    pub fn rect(&mut self, r: Rect, fill: &str, stroke: Option<&str>) {
        if !finite(&[r.x, r.y, r.w, r.h]) {
            return;
        }
        let stroke = stroke.map(|s| format!(r#" stroke="{}""#, escape(s))).unwrap_or_default();
        let _ = writeln!(
            self.out,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"{stroke}/>"#,
            r.x,
            r.y,
            r.w.max(0.0),
            r.h.max(0.0),
            escape(fill)
        );
    }

    /// A filled cell of a grid, edges kept crisp so neighbours meet without seams, with `tooltip`
    /// shown on hover.
    pub fn cell(&mut self, r: Rect, fill: &str, tooltip: &str) {
        if !finite(&[r.x, r.y, r.w, r.h]) {
            return;
        }
        let _ = writeln!(
            self.out,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" shape-rendering="crispEdges"><title>{}</title></rect>"#,
            r.x,
            r.y,
            r.w.max(0.0),
            r.h.max(0.0),
            escape(fill),
            escape(tooltip)
        );
    }

    /// A line through each of `runs` (a run of points each; a gap between runs), in `stroke`.
    pub fn path(&mut self, runs: &[Vec<(f64, f64)>], stroke: &str, width: f64) {
        let mut d = String::new();
        for run in runs {
            for (i, &(x, y)) in run.iter().filter(|(x, y)| finite(&[*x, *y])).enumerate() {
                let _ = write!(d, "{}{x:.1} {y:.1} ", if i == 0 { 'M' } else { 'L' });
            }
        }
        if d.is_empty() {
            return;
        }
        let _ = writeln!(
            self.out,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="{width}" stroke-linejoin="round"/>"#,
            d.trim_end(),
            escape(stroke)
        );
    }

    /// A dot of radius `r` at `centre`, filled with `fill`.
    pub fn circle(&mut self, centre: (f64, f64), r: f64, fill: &str) {
        if !finite(&[centre.0, centre.1, r]) {
            return;
        }
        let _ = writeln!(
            self.out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="{r}" fill="{}"/>"#,
            centre.0,
            centre.1,
            escape(fill)
        );
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// Something that draws itself into a rectangle of a canvas: a chart. Several charts share one
/// canvas by drawing into different rectangles; [`Chart::to_svg`] gives one chart a document of its
/// own.
pub trait Chart {
    /// Draws the chart (title, axes, legend included) inside `area` of `canvas`.
    fn draw(&self, canvas: &mut Canvas, area: Rect);

    /// The chart alone in a document of `width` × `height` pixels.
    fn to_svg(&self, width: f64, height: f64) -> String {
        let mut canvas = Canvas::new(width, height);
        self.draw(&mut canvas, Rect::new(0.0, 0.0, width, height));
        canvas.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_non_finite_shapes_are_left_out() {
        assert_eq!(escape(r#"a<b & "c" 'd'>"#), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
        let mut c = Canvas::new(100.0, 50.0);
        c.text(1.0, 2.0, "x<y", TextStyle::new(12.0).anchor(Anchor::End).fill("red"));
        c.line((0.0, f64::NAN), (1.0, 1.0), "black", 1.0);
        c.circle((f64::INFINITY, 0.0), 3.0, "red");
        c.path(&[vec![(0.0, 0.0), (f64::NAN, 1.0), (2.0, 2.0)], vec![(5.0, 5.0)]], "blue", 2.0);
        let svg = c.finish();
        assert!(svg.contains(r#"<text x="1.0" y="2.0" text-anchor="end" fill="red">x&lt;y</text>"#), "{svg}");
        assert!(!svg.contains("<line") && !svg.contains("<circle") && !svg.contains("NaN"), "{svg}");
        assert!(svg.contains(r#"d="M0.0 0.0 L2.0 2.0 M5.0 5.0""#), "{svg}");
    }
}
