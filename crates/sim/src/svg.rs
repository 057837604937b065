//! Hand-written SVG charts of a report: per-group IOPS and p99 latency over time, vrate and
//! utilisation over time, and latency distributions (latency against percentile).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::report::Report;

const W: f64 = 720.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// One line of a chart: a name and its points.
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

/// X-axis ticks at given positions with given labels (instead of six evenly spaced numbers).
pub type Ticks<'a> = &'a [(f64, &'a str)];

/// A line chart with axes, ticks and a legend. `log_y` plots y on a log10 scale; `x_ticks` replaces
/// the evenly spaced x ticks.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_y: bool,
    x_ticks: Option<Ticks>,
) -> String {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    let ty = |y: f64| if log_y { y.max(1e-3).log10() } else { y };
    let (y0, y1) = if log_y { (ty(y0.max(1e-3)).floor(), ty(y1).ceil().max(ty(y0) + 1.0)) } else { (0.0, y1 * 1.1) };
    let (x1, y1) = (if x1 > x0 { x1 } else { x0 + 1.0 }, if y1 > y0 { y1 } else { y0 + 1.0 });
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let py = |y: f64| TOP + ph - (ty(y) - y0) / (y1 - y0) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#, W / 2.0, esc(title));
    let _ = writeln!(s, r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##);
    let even: Vec<(f64, String)> = (0..=5).map(|i| x0 + (x1 - x0) * i as f64 / 5.0).map(|x| (x, num(x))).collect();
    let xt: Vec<(f64, String)> = match x_ticks {
        Some(t) => t.iter().map(|(x, l)| (*x, l.to_string())).collect(),
        None => even,
    };
    for (fx, label) in xt {
        let gx = px(fx);
        let _ = writeln!(s, r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{:.1}" stroke="#ddd"/>"##, TOP + ph);
        let _ =
            writeln!(s, r#"<text x="{gx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, TOP + ph + 16.0, esc(&label));
    }
    for i in 0..=5 {
        let fy = y0 + (y1 - y0) * i as f64 / 5.0;
        let gy = TOP + ph - ph * i as f64 / 5.0;
        let label = if log_y { num(10f64.powf(fy)) } else { num(fy) };
        let _ = writeln!(s, r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{:.1}" y2="{gy:.1}" stroke="#ddd"/>"##, LEFT + pw);
        let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#, LEFT - 6.0, gy + 4.0);
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 12.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        esc(y_label)
    );
    for (i, line) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = line.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        let _ = writeln!(s, r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#, pts.join(" "));
        let ly = TOP + 16.0 * i as f64 + 8.0;
        let lx = LEFT + pw + 10.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/>"#,
            lx + 18.0
        );
        let _ = writeln!(s, r#"<text x="{}" y="{}">{}</text>"#, lx + 24.0, ly + 4.0, esc(&line.name));
    }
    s.push_str("</svg>\n");
    s
}

fn num(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.abs() >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Writes the charts of `report` into `dir` as `<prefix>-{iops,latency,vrate,latency-dist}.svg`;
/// returns the files written.
pub fn write_charts(report: &Report, dir: &Path, prefix: &str) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let per_group = |f: &dyn Fn(&crate::report::GroupPoint) -> f64| -> Vec<Series> {
        report
            .groups
            .iter()
            .map(|g| Series { name: g.path.clone(), points: g.series.iter().map(|p| (p.t_s, f(p))).collect() })
            .collect()
    };
    let title = |what: &str| format!("{} ({}): {what}", report.scenario, report.controller);
    // Percentiles on a tail axis: x = −log10(1 − q), so p90, p99, p99.9 are evenly spaced.
    let tail = |q: f64| -(1.0 - q).max(1e-5).log10();
    let dist: Vec<Series> = report
        .groups
        .iter()
        .map(|g| Series {
            name: g.path.clone(),
            points: g.lat_dist.iter().filter(|[q, _]| *q >= 0.5).map(|[q, us]| (tail(*q), *us)).collect(),
        })
        .collect();
    let dist_ticks = [(tail(0.5), "p50"), (1.0, "p90"), (2.0, "p99"), (3.0, "p99.9"), (4.0, "p99.99"), (5.0, "max")];
    let device = vec![
        Series { name: "vrate %".into(), points: report.device.series.iter().map(|p| (p.t_s, p.vrate_pct)).collect() },
        Series {
            name: "utilisation %".into(),
            points: report.device.series.iter().map(|p| (p.t_s, p.utilization * 100.0)).collect(),
        },
    ];
    let charts = [
        ("iops", line_chart(&title("IOPS"), "time (s)", "IOPS", &per_group(&|p| p.iops), false, None)),
        (
            "latency",
            line_chart(
                &title("p99 latency"),
                "time (s)",
                "p99 latency (µs)",
                &per_group(&|p| p.lat_p99_us),
                true,
                None,
            ),
        ),
        ("vrate", line_chart(&title("vrate and utilisation"), "time (s)", "percent", &device, false, None)),
        (
            "latency-dist",
            line_chart(&title("latency distribution"), "percentile", "latency (µs)", &dist, true, Some(&dist_ticks)),
        ),
    ];
    let mut written = Vec::new();
    for (name, svg) in charts {
        let path = dir.join(format!("{prefix}-{name}.svg"));
        std::fs::write(&path, svg)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_has_a_line_per_series_and_escapes_text() {
        let s = [
            Series { name: "a<b".into(), points: vec![(0.0, 1.0), (1.0, 10.0)] },
            Series { name: "c".into(), points: vec![(0.0, 100.0), (1.0, 1000.0)] },
        ];
        let svg = line_chart("t & t", "x", "y", &s, true, Some(&[(0.5, "half")]));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a&lt;b") && svg.contains("t &amp; t") && svg.ends_with("</svg>\n"));
        // Empty series still make a valid document.
        assert!(svg.contains(">half</text>"));
        assert!(line_chart("e", "x", "y", &[], false, None).contains("</svg>"));
    }
}
