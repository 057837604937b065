//! Whole charts: well-formed documents, escaped text, empty and non-finite data.

use crate::{Axis, Canvas, Chart, Column, Dot, DotChart, Heatmap, LineChart, Rect, Series};

/// Panics unless every tag of `svg` is closed in order, no text or attribute holds a raw `<` or a
/// bare `&`, and no number is written as `NaN` or `inf`.
fn assert_well_formed(svg: &str) {
    let mut open: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let text = &rest[..start];
        assert!(!text.contains('>'), "raw '>' in text {text:?}");
        assert_entities(text);
        let end = rest[start..].find('>').expect("tag ends") + start;
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "raw '<' in tag {tag:?}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes in {tag:?}");
        assert_entities(tag);
        let name = tag.trim_start_matches('/').split([' ', '/']).next().unwrap_or_default();
        if let Some(closing) = tag.strip_prefix('/') {
            assert_eq!(open.pop(), Some(closing), "closing {closing} out of order");
        } else if !tag.ends_with('/') {
            open.push(name);
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "unclosed {open:?}");
    assert_eq!(rest.trim(), "", "text after the last tag");
    assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
    for bad in ["NaN", "inf"] {
        assert!(!svg.contains(bad), "{bad} written:\n{svg}");
    }
}

fn assert_entities(text: &str) {
    for (i, _) in text.match_indices('&') {
        let entity = &text[i..];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].iter().any(|e| entity.starts_with(e)),
            "bare '&' in {text:?}"
        );
    }
}

fn line(series: Vec<Series>, y: Axis) -> LineChart {
    LineChart { title: "t & <t>".into(), x: Axis::linear("time").unit("s").tight(), y, series }
}

fn dots(dots: Vec<Dot>, frontier: Option<Series>) -> DotChart {
    DotChart {
        title: "frontier".into(),
        x: Axis::log("p99 ÷ solo").ticks([(1.0, "1×"), (2.0, "2×"), (4.0, "4×"), (8.0, "8×")]),
        y: Axis::linear("leftover used").unit("%").range(0.0, 110.0),
        frontier,
        dots,
    }
}

fn heatmap(rows: usize, columns: Vec<Column>) -> Heatmap {
    Heatmap {
        title: "latency".into(),
        x: Axis::linear("time").unit("s").tight(),
        y_name: "latency".into(),
        rows: (0..rows).map(|k| format!("<{} µs", 1 << k)).collect(),
        columns,
        unit: "IOs".into(),
    }
}

#[test]
fn a_line_chart_draws_each_series_with_escaped_names_and_round_ticks() {
    let chart = line(
        vec![
            Series::new("a<b", vec![(4.0, 5200.0), (5.0, 5536.0), (6.0, 5300.0)]),
            Series::new("c&d", vec![(4.0, 2400.0), (5.0, 2700.0), (6.0, 2600.0)]),
        ],
        Axis::linear("IOPS").from_zero(),
    );
    let svg = chart.to_svg(720.0, 400.0);
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<path").count(), 2, "{svg}");
    assert!(
        svg.contains(">a&lt;b</text>") && svg.contains(">c&amp;d</text>") && svg.contains(">t &amp; &lt;t&gt;</text>")
    );
    for tick in ["0", "1000", "3000", "6000"] {
        assert!(svg.contains(&format!(r#"text-anchor="end">{tick}</text>"#)), "y tick {tick}: {svg}");
    }
    assert!(svg.contains(">time (s)</text>") && svg.contains(">IOPS</text>"));
    assert!(!svg.contains("no data"));
}

#[test]
fn empty_charts_are_still_documents_that_say_so() {
    let empty = [
        line(vec![], Axis::linear("IOPS")).to_svg(720.0, 400.0),
        line(vec![Series::new("a", vec![])], Axis::log("latency")).to_svg(720.0, 400.0),
        dots(vec![], None).to_svg(700.0, 300.0),
        heatmap(0, vec![]).to_svg(820.0, 440.0),
        heatmap(3, vec![Column { start: 0.0, end: 1.0, cells: vec![0.0, 0.0] }]).to_svg(820.0, 440.0),
    ];
    for svg in &empty {
        assert_well_formed(svg);
        assert!(svg.contains(">no data</text>"), "{svg}");
    }
}

#[test]
fn non_finite_values_leave_gaps_and_never_reach_the_document() {
    let weird =
        vec![(0.0, 1.0), (1.0, f64::NAN), (2.0, 0.0), (3.0, -5.0), (f64::INFINITY, 3.0), (4.0, 10.0), (5.0, 100.0)];
    let svg = line(vec![Series::new("w", weird.clone())], Axis::log("latency")).to_svg(720.0, 400.0);
    assert_well_formed(&svg);
    // Log scale: 0 and -5 cannot be drawn, so the line is (0, 1), a gap, then (4, 10)-(5, 100).
    let path = svg.lines().find(|l| l.starts_with("<path")).expect("a line");
    assert_eq!(path.matches('M').count(), 2, "{path}");
    assert_eq!(svg.matches("<circle").count(), 1, "the lone first point gets a dot");
    let svg = line(vec![Series::new("w", weird)], Axis::linear("y").from_zero()).to_svg(720.0, 400.0);
    assert_well_formed(&svg);
    let svg = line(vec![Series::new("all bad", vec![(f64::NAN, f64::NAN), (f64::INFINITY, 1.0)])], Axis::linear("y"))
        .to_svg(720.0, 400.0);
    assert_well_formed(&svg);
    assert!(svg.contains("no data"));
    let bad_dots = vec![Dot { label: "nan".into(), x: f64::NAN, y: 0.5 }, Dot { label: "ok".into(), x: 2.0, y: 50.0 }];
    let svg = dots(bad_dots, Some(Series::new("frontier", vec![(1.0, 0.0), (f64::INFINITY, 1.0), (3.0, 90.0)])))
        .to_svg(700.0, 300.0);
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<circle").count(), 1);
    let cells = vec![f64::NAN, f64::INFINITY, -1.0, 5.0];
    let svg = heatmap(
        4,
        vec![Column { start: f64::NAN, end: 1.0, cells: cells.clone() }, Column { start: 1.0, end: 2.0, cells }],
    )
    .to_svg(820.0, 440.0);
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<title>").count(), 4, "the column starting at NaN is left out");
    assert_eq!(svg.matches(r##"fill="#f4f4f4""##).count(), 3, "NaN, inf and -1 are empty cells");
    for size in [(f64::NAN, 400.0), (0.0, 0.0), (10.0, 10.0)] {
        assert_well_formed(
            &line(vec![Series::new("a", vec![(0.0, 1.0), (1.0, 2.0)])], Axis::linear("y")).to_svg(size.0, size.1),
        );
    }
}

#[test]
fn a_dot_chart_labels_its_dots_and_names_its_frontier() {
    let frontier =
        Series::new("frontier (neighbour at QD 1..32)", vec![(1.0, 0.0), (1.4, 50.0), (3.0, 85.0), (8.0, 100.0)]);
    let d = vec![
        Dot { label: "iocost (ours)".into(), x: 2.0, y: 70.0 },
        Dot { label: "bfq <kernel>".into(), x: 1.8, y: 200.0 },
    ];
    let svg = dots(d, Some(frontier)).to_svg(800.0, 300.0);
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<circle").count(), 2);
    assert_eq!(svg.matches("<path").count(), 1);
    assert!(svg.contains("iocost (ours)</text>") && svg.contains("bfq &lt;kernel&gt;</text>"));
    assert!(svg.contains(">frontier (neighbour at QD 1..32)</text>") && svg.contains(">leftover used (%)</text>"));
    for tick in ["1×", "2×", "4×", "8×", "0", "20", "100"] {
        assert!(svg.contains(&format!(">{tick}</text>")), "tick {tick}");
    }
    assert!(!svg.contains(">120</text>"), "the fixed range ends at 110");
    assert!(svg.contains(r#"cy="40.0""#), "200% is drawn at the top edge (y = 40): {svg}");
}

#[test]
fn a_heatmap_colours_each_cell_and_shows_its_scale() {
    let columns = vec![
        Column { start: 0.0, end: 1.0, cells: vec![5.0, 1.0] },
        Column { start: 1.0, end: 2.0, cells: vec![0.0, 9000.0] },
    ];
    let svg = heatmap(2, columns).to_svg(820.0, 440.0);
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<title>").count(), 4);
    assert!(svg.contains("<title>1.0–2.0 s, &lt;2 µs: 9000 IOs</title>"), "{svg}");
    assert!(svg.contains(r##"fill="#800026""##), "the largest cell is darkest");
    assert!(svg.contains(">9000</text>") && svg.contains(">1</text>") && svg.contains(">IOs</text>"));
    assert!(svg.contains(">&lt;1 µs</text>") && svg.contains(">time (s)</text>"));
}

#[test]
fn charts_share_a_canvas() {
    let mut canvas = Canvas::new(1000.0, 400.0);
    let a = line(vec![Series::new("a", vec![(0.0, 1.0), (1.0, 2.0)])], Axis::linear("IOPS"));
    a.draw(&mut canvas, Rect::new(0.0, 0.0, 500.0, 400.0));
    dots(vec![Dot { label: "x".into(), x: 2.0, y: 50.0 }], None).draw(&mut canvas, Rect::new(500.0, 0.0, 500.0, 400.0));
    let svg = canvas.finish();
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<svg").count(), 1);
    assert!(svg.contains(">frontier</text>") && svg.contains(">t &amp; &lt;t&gt;</text>"));
}

#[test]
fn no_value_or_size_makes_a_chart_panic() {
    let odd =
        [0.0, -0.0, 1e-300, -1e300, 1e300, f64::MAX, f64::MIN_POSITIVE, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    let sizes = [(0.0, 0.0), (1.0, 1.0), (f64::NAN, f64::NAN), (-10.0, 50.0), (1e9, 1e9), (720.0, 400.0)];
    for &a in &odd {
        for &b in &odd {
            let points = vec![(a, b), (b, a), (1.0, 2.0)];
            for &(w, h) in &sizes {
                for y in [
                    Axis::linear("y"),
                    Axis::log("y").tight(),
                    Axis::linear("y").range(a, b),
                    Axis::log("y").range(a, b),
                ] {
                    let svg = line(vec![Series::new("s", points.clone())], y.clone()).to_svg(w, h);
                    assert_well_formed(&svg);
                    let d = vec![Dot { label: "d".into(), x: a, y: b }];
                    assert_well_formed(&dots(d, Some(Series::new("f", points.clone()))).to_svg(w, h));
                }
                let columns =
                    vec![Column { start: a, end: b, cells: vec![a, b] }, Column { start: b, end: 2.0, cells: vec![b] }];
                assert_well_formed(&heatmap(2, columns).to_svg(w, h));
            }
        }
    }
}
