//! SVG charts of a scenario, written by hand (no plotting dependency): one row per run, with each
//! tenant's IOPS over time on the left and its p99 latency over time on the right; for the
//! work-conserving scenario first the frontier with every controller as a dot.

use std::fmt::Write;

use ioshare_engine::report::TenantSample;

use crate::frontier::{self, Yardsticks};
use crate::report::ScenarioReport;
use crate::verdict::Side;

/// Line and dot colours, in tenant (or controller) order.
const COLORS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
const WIDTH: f64 = 1010.0;
const ROW: f64 = 190.0;
const TOP: f64 = 40.0;
const PANEL_W: f64 = 400.0;
const PANEL_H: f64 = 130.0;
const LEFT: [f64; 2] = [70.0, 590.0];

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten, at least `v`.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|m| *m >= v).unwrap_or(10.0 * p)
}

/// One panel: axes, labels, one polyline per tenant.
fn panel(out: &mut String, x0: f64, y0: f64, title: &str, series: &[(&str, Vec<(f64, f64)>)]) {
    let t_max = series.iter().flat_map(|(_, s)| s.iter().map(|p| p.0)).fold(0.0, f64::max).max(1e-9);
    let v_max = nice_max(series.iter().flat_map(|(_, s)| s.iter().map(|p| p.1)).fold(0.0, f64::max));
    let _ = writeln!(out, r##"<text x="{x0}" y="{}" font-size="12">{}</text>"##, y0 - 6.0, esc(title));
    let _ =
        writeln!(out, r##"<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#999"/>"##);
    for i in 0..=4 {
        let y = y0 + PANEL_H * (1.0 - i as f64 / 4.0);
        let v = v_max * i as f64 / 4.0;
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            x0 + PANEL_W,
            x0 - 4.0,
            y + 3.0,
            if v_max >= 10.0 { format!("{v:.0}") } else { format!("{v:.2}") }
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{x0}" y="{:.1}" font-size="10">0 s</text><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{t_max:.0} s</text>"##,
        y0 + PANEL_H + 12.0,
        x0 + PANEL_W,
        y0 + PANEL_H + 12.0
    );
    for (i, (_, pts)) in series.iter().enumerate() {
        let pts: Vec<String> = pts
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x0 + PANEL_W * t / t_max, y0 + PANEL_H * (1.0 - v / v_max)))
            .collect();
        let _ = writeln!(
            out,
            r##"<polyline fill="none" stroke="{}" stroke-width="1.6" points="{}"/>"##,
            COLORS[i % COLORS.len()],
            pts.join(" ")
        );
    }
}

fn points(s: &[TenantSample], f: impl Fn(&TenantSample) -> f64) -> Vec<(f64, f64)> {
    s.iter().map(|x| (x.t_s, f(x))).collect()
}

/// Height of the frontier chart's row.
const FRONTIER_ROW: f64 = 260.0;

/// The chart of one scenario.
pub fn scenario(report: &ScenarioReport) -> String {
    let yard = Yardsticks::from_runs(&report.runs).filter(|y| !y.sweep.is_empty());
    let top = TOP + if yard.is_some() { FRONTIER_ROW } else { 0.0 };
    let height = top + ROW * report.runs.len() as f64 + 10.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif">"##
    );
    let _ = writeln!(out, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        out,
        r##"<text x="10" y="22" font-size="15" font-weight="bold">{} — per-tenant IOPS and p99 latency over time</text>"##,
        esc(&report.name)
    );
    if let Some(yard) = &yard {
        let dots: Vec<frontier::Point> = report
            .runs
            .iter()
            .filter(|r| r.side != Side::Reference)
            .map(|r| frontier::Point {
                label: format!("{} ({:?})", r.report.controller, r.side).to_lowercase(),
                ..yard.point(r)
            })
            .collect();
        frontier_chart(
            &mut out,
            LEFT[0],
            TOP + 30.0,
            WIDTH - LEFT[0] - 180.0,
            FRONTIER_ROW - 70.0,
            &yard.frontier,
            &dots,
        );
    }
    for (row, run) in report.runs.iter().enumerate() {
        let y0 = top + ROW * row as f64 + 30.0;
        let tenants = &run.report.tenants;
        let iops: Vec<_> = tenants.iter().map(|t| (t.name.as_str(), points(&t.series, |s| s.iops))).collect();
        let lat: Vec<_> = tenants.iter().map(|t| (t.name.as_str(), points(&t.series, |s| s.p99_us))).collect();
        let who = format!("{} ({:?})", run.report.controller, run.side).to_lowercase();
        panel(&mut out, LEFT[0], y0, &format!("{who}: IOPS"), &iops);
        panel(&mut out, LEFT[1], y0, &format!("{who}: p99 latency, µs"), &lat);
        for (i, t) in tenants.iter().enumerate() {
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="{}">{}</text>"##,
                LEFT[0] + PANEL_W + 8.0,
                y0 + 10.0 + 14.0 * i as f64,
                COLORS[i % COLORS.len()],
                esc(&t.name)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The frontier as a line and the controllers as labelled dots, in an SVG fragment of `w`×`h` at
/// (`x0`, `y0`): leftover used (0-110%) up, QD1 p99 ÷ solo (log scale) to the right.
fn frontier_chart(
    out: &mut String,
    x0: f64,
    y0: f64,
    w: f64,
    h: f64,
    frontier: &[(f64, f64)],
    dots: &[frontier::Point],
) {
    let x_max =
        frontier.iter().map(|p| p.0).chain(dots.iter().map(|d| d.p99x)).filter(|v| v.is_finite()).fold(2.0, f64::max);
    let log_max = x_max.log10().max(0.1);
    let sx = |x: f64| x0 + w * (x.max(1.0).log10() / log_max);
    let sy = |y: f64| y0 + h * (1.0 - (y / 1.1).clamp(0.0, 1.0));
    let _ = writeln!(
        out,
        r##"<text x="{x0}" y="{}" font-size="12">frontier (uncontrolled neighbour at QD 1..32, line) and controllers (dots): leftover used vs QD1 p99 ÷ solo</text>"##,
        y0 - 6.0
    );
    let _ = writeln!(out, r##"<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>"##);
    for pct in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let y = sy(pct);
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{:.0}%</text>"##,
            x0 + w,
            x0 - 4.0,
            y + 3.0,
            pct * 100.0
        );
    }
    let mut tick = 1.0;
    while tick <= x_max * 1.0001 {
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{tick}×</text>"##,
            sx(tick),
            y0 + h + 12.0
        );
        tick *= 2.0;
    }
    let line: Vec<String> = frontier.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
    let _ = writeln!(out, r##"<polyline fill="none" stroke="#555" stroke-width="2" points="{}"/>"##, line.join(" "));
    for (i, d) in dots.iter().filter(|d| d.p99x.is_finite() && d.leftover.is_finite()).enumerate() {
        let color = COLORS[i % COLORS.len()];
        let (x, y) = (sx(d.p99x), sy(d.leftover));
        let _ = writeln!(
            out,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="10" fill="{color}">{}</text>"##,
            x + 6.0,
            y - 4.0,
            esc(&d.label)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_round_numbers() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(120.0), 200.0);
        assert_eq!(nice_max(4100.0), 5000.0);
        assert_eq!(esc("a<b&c"), "a&lt;b&amp;c");
    }
}
