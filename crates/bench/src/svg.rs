//! The chart of a scenario, drawn by `ioshare-chart`: for the work-conserving scenario first the
//! frontier with every controller as a dot, then one row per run with each tenant's IOPS over time
//! on the left and its p99 latency over time on the right. The fidelity comparison gets a page of
//! its own ([`fidelity`]): per proportional case the IOPS ratio per second of ioshare's IOCost and the
//! kernel's beside the target, and both sides' vrate. This module only turns a report into the
//! charts' series, dots and axes, and places them on one page.

use ioshare_chart::{Axis, Canvas, Chart, Dot, DotChart, LineChart, Rect, Series, TextStyle};
use ioshare_engine::report::{TenantReport, TenantSample};

use crate::fidelity::{FidelityRow, SideFigures};
use crate::frontier::{Yardsticks, DEPTHS};
use crate::report::ScenarioReport;
use crate::verdict::{RunEntry, Side};

/// Width of the page, pixels; each run's two charts share it.
const WIDTH: f64 = 1100.0;
/// Height of the page title's band.
const HEADER: f64 = 40.0;
/// Height of the frontier chart.
const FRONTIER_H: f64 = 320.0;
/// Height of a run's row of charts.
const ROW_H: f64 = 240.0;
/// The frontier's x axis reaches at least from 1× to this (a narrower span would have no tick).
const MIN_P99X_SPAN: (f64, f64) = (1.0, 2.0);

/// The chart of one scenario: an SVG page.
pub fn scenario(report: &ScenarioReport) -> String {
    if !report.curves.is_empty() {
        return distributions(report);
    }
    let frontier = frontier_chart(report);
    let top = HEADER + if frontier.is_some() { FRONTIER_H } else { 0.0 };
    let mut canvas = Canvas::new(WIDTH, top + ROW_H * report.runs.len() as f64 + 10.0);
    let title = format!("{} — per-tenant IOPS and p99 latency over time", report.name);
    canvas.text(10.0, 26.0, &title, TextStyle::new(18.0));
    if let Some(chart) = frontier {
        chart.draw(&mut canvas, Rect::new(0.0, HEADER, WIDTH, FRONTIER_H));
    }
    for (row, run) in report.runs.iter().enumerate() {
        let y = top + ROW_H * row as f64;
        let half = WIDTH / 2.0;
        run_chart(run, "IOPS", Axis::linear("IOPS"), |s| s.iops).draw(&mut canvas, Rect::new(0.0, y, half, ROW_H));
        run_chart(run, "p99 latency", Axis::linear("p99 latency").unit("µs"), |s| s.p99_us)
            .draw(&mut canvas, Rect::new(half, y, half, ROW_H));
    }
    canvas.finish()
}

/// A scenario's latency distributions ([`crate::report::Curve`]s), two panels a row, one panel per `panel` name:
/// the share of IOs at or below each latency (log scale, ms), every curve of a panel on its axes.
fn distributions(report: &ScenarioReport) -> String {
    let mut panels: Vec<&str> = Vec::new();
    for c in &report.curves {
        if !panels.contains(&c.panel.as_str()) {
            panels.push(&c.panel);
        }
    }
    let half = WIDTH / 2.0;
    let rows = panels.len().div_ceil(2);
    let mut canvas = Canvas::new(WIDTH, HEADER + ROW_H * 1.5 * rows as f64 + 10.0);
    let title = format!("{} — latency distributions (share of IOs at or below)", report.name);
    canvas.text(10.0, 26.0, &title, TextStyle::new(18.0));
    for (i, panel) in panels.iter().enumerate() {
        let curves = report.curves.iter().filter(|c| c.panel == *panel);
        let chart = LineChart {
            title: (*panel).to_string(),
            x: Axis::log("latency").unit("ms"),
            y: Axis::linear("IOs at or below").unit("%").range(0.0, 100.0),
            series: curves.map(|c| Series::new(&c.name, c.points.clone())).collect(),
        };
        let (col, row) = (i % 2, i / 2);
        chart.draw(&mut canvas, Rect::new(half * col as f64, HEADER + ROW_H * 1.5 * row as f64, half, ROW_H * 1.5));
    }
    canvas.finish()
}

/// The fidelity comparison's page: per case with a per-second ratio (the proportional ones) a row,
/// ioshare's and the kernel's ratio and the target on the left, their vrate on the right. `None`
/// when no case has a ratio series.
pub fn fidelity(rows: &[FidelityRow]) -> Option<String> {
    let rows: Vec<&FidelityRow> = rows.iter().filter(|r| sides(r).any(|(_, f)| !f.ratio_series.is_empty())).collect();
    if rows.is_empty() {
        return None;
    }
    let mut canvas = Canvas::new(WIDTH, HEADER + ROW_H * rows.len() as f64 + 10.0);
    canvas.text(10.0, 26.0, "fidelity — ioshare IOCost and the kernel's, per sample interval", TextStyle::new(18.0));
    for (i, row) in rows.iter().enumerate() {
        let y = HEADER + ROW_H * i as f64;
        let half = WIDTH / 2.0;
        let line = |name: &str, v: &[[f64; 2]]| Series::new(name, v.iter().map(|p| (p[0], p[1])).collect());
        let mut ratios: Vec<Series> = sides(row).map(|(who, f)| line(who, &f.ratio_series)).collect();
        let times = sides(row).flat_map(|(_, f)| f.ratio_series.iter().map(|p| p[0]));
        let (start, end) = times.fold((f64::INFINITY, 0.0_f64), |(lo, hi), t| (lo.min(t), hi.max(t)));
        if let Some(t) = row.target {
            ratios.push(Series::new("target", vec![(start, t), (end, t)]));
        }
        let chart = |what: &str, y: Axis, series| LineChart {
            title: format!("{}: {what}", row.case),
            x: Axis::linear("time").unit("s").tight(),
            y: y.from_zero(),
            series,
        };
        chart(row.figure, Axis::linear("ratio"), ratios).draw(&mut canvas, Rect::new(0.0, y, half, ROW_H));
        let vrates = sides(row).map(|(who, f)| line(who, &f.vrate_series)).collect();
        chart("vrate", Axis::linear("vrate").unit("%"), vrates).draw(&mut canvas, Rect::new(half, y, half, ROW_H));
    }
    Some(canvas.finish())
}

/// The sides of `row` that ran, named as the legends show them.
fn sides(row: &FidelityRow) -> impl Iterator<Item = (&'static str, &SideFigures)> {
    [("ioshare iocost", &row.ioshare), ("kernel iocost", &row.kernel)]
        .into_iter()
        .filter_map(|(n, f)| Some((n, f.as_ref()?)))
}

/// Who ran `run`, as titles and dots name it: `iocost (ioshare)`.
fn who(run: &RunEntry) -> String {
    format!("{} ({})", run.report.controller, run.side.name())
}

/// One panel of `run`: each tenant's `value` over time on axis `y` (from zero).
fn run_chart(run: &RunEntry, what: &str, y: Axis, value: fn(&TenantSample) -> f64) -> LineChart {
    let series = |t: &TenantReport| Series::new(&t.name, t.series.iter().map(|s| (s.t_s, value(s))).collect());
    LineChart {
        title: format!("{}: {what}", who(run)),
        x: Axis::linear("time").unit("s").tight(),
        y: y.from_zero(),
        series: run.report.tenants.iter().map(series).collect(),
    }
}

/// The frontier (the uncontrolled neighbour's depth sweep) as a line and every controlled run as a
/// dot: leftover used (%) up, the QD1 reader's p99 ÷ solo (log) to the right. `None` for a scenario
/// without a sweep.
fn frontier_chart(report: &ScenarioReport) -> Option<DotChart> {
    let yard = Yardsticks::from_runs(&report.runs).filter(|y| !y.sweep.is_empty())?;
    let dots: Vec<Dot> = report
        .runs
        .iter()
        .filter(|r| r.side != Side::Reference)
        .map(|r| {
            let p = yard.point(r);
            Dot { label: who(r), x: p.p99x, y: p.leftover * 100.0 }
        })
        .collect();
    let (lo, hi) = yard
        .frontier
        .iter()
        .map(|p| p.0)
        .chain(dots.iter().map(|d| d.x))
        .filter(|x| x.is_finite() && *x > 0.0)
        .fold(MIN_P99X_SPAN, |(lo, hi), x| (lo.min(x), hi.max(x)));
    let doublings = (-10..=20).map(|k| 2f64.powi(k)).map(|x| (x, format!("{x}×")));
    let depths = format!("QD {}..{}", DEPTHS[0], DEPTHS[DEPTHS.len() - 1]);
    Some(DotChart {
        title: format!("frontier (uncontrolled neighbour at {depths}, line) and controllers (dots)"),
        x: Axis::log("QD1 p99 ÷ solo").range(lo, hi).ticks(doublings),
        y: Axis::linear("leftover used").unit("%").range(0.0, 110.0),
        frontier: Some(Series::new("frontier", yard.frontier.iter().map(|&(x, y)| (x, y * 100.0)).collect())),
        dots,
    })
}

#[cfg(test)]
mod tests {
    use ioshare_engine::report::RunReport;

    use super::*;
    use crate::fidelity::{FidelityRow, SideFigures};
    use crate::frontier::sweep_name;
    use crate::plan::fixtures::{report, tenant};
    use crate::verdict::Verdict;

    /// A run by `controller` of tenants `qd1` and `saturating` (at these IOPS and p99s), sampled
    /// each second for three seconds.
    fn run(side: Side, controller: &str, qd1: (f64, f64), sat: (f64, f64)) -> RunEntry {
        let sampled = |name: &str, (iops, p99_us): (f64, f64)| {
            let series =
                (1..=3).map(|t| TenantSample { t_s: f64::from(t), iops, p99_us, ..TenantSample::default() }).collect();
            TenantReport { series, ..tenant(name, iops, p99_us) }
        };
        let report = RunReport {
            controller: controller.into(),
            ..report(vec![sampled("qd1", qd1), sampled("saturating", sat)])
        };
        RunEntry { side, report, verdict: None }
    }

    fn scenario_report(name: &str, runs: Vec<RunEntry>) -> ScenarioReport {
        ScenarioReport {
            name: name.into(),
            description: String::new(),
            runs,
            verdict: Verdict::default(),
            notes: Vec::new(),
            observed: Vec::new(),
            curves: Vec::new(),
        }
    }

    #[test]
    fn every_run_gets_its_iops_and_latency_panels_with_every_tenant() {
        let runs = vec![
            run(Side::Ioshare, "none", (1000.0, 900.0), (9000.0, 4000.0)),
            run(Side::Kernel, "bfq", (2000.0, 500.0), (6000.0, 3000.0)),
        ];
        let svg = scenario(&scenario_report("proportional", runs));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains(">proportional — per-tenant IOPS and p99 latency over time</text>"), "{svg}");
        for who in ["none (ioshare)", "bfq (kernel)"] {
            assert!(svg.contains(&format!(">{who}: IOPS</text>")), "{who}");
            assert!(svg.contains(&format!(">{who}: p99 latency</text>")), "{who}");
        }
        assert_eq!(svg.matches(">p99 latency (µs)</text>").count(), 2, "the latency axes say their unit");
        assert_eq!(svg.matches(">saturating</text>").count(), 4, "each panel's legend names each tenant");
        assert_eq!(svg.matches("<path").count(), 8, "a line per tenant per panel");
        assert!(!svg.contains("frontier") && !svg.contains("<circle"), "no sweep, no frontier chart");
    }

    #[test]
    fn curves_are_drawn_one_panel_per_pair_instead_of_the_time_series() {
        use crate::report::Curve;
        let curve = |panel: &str, name: &str| Curve {
            panel: panel.into(),
            name: name.into(),
            points: vec![(0.1, 50.0), (50.0, 100.0)],
        };
        let mut report =
            scenario_report("qos-peers", vec![run(Side::Reference, "librbd-qos", (5000.0, 1.0), (0.0, 0.0))]);
        report.curves = vec![
            curve("token — steady", "librbd-qos"),
            curve("token — steady", "token-bucket"),
            curve("leaky — steady", "qemu"),
        ];
        let svg = scenario(&report);
        assert!(svg.contains(">qos-peers — latency distributions (share of IOs at or below)</text>"), "{svg}");
        assert!(svg.contains(">token — steady</text>") && svg.contains(">leaky — steady</text>"));
        assert!(svg.contains(">latency (ms)</text>") && svg.contains(">token-bucket</text>"));
        assert_eq!(svg.matches("<path").count(), 3, "a line per curve");
        assert!(!svg.contains(": IOPS</text>"), "no time series");
    }

    #[test]
    fn the_work_conserving_chart_puts_each_controller_against_the_frontier() {
        // Solo p99 100 µs, capacity 10 000 IOPS; the neighbour at QD 1 and 2 uses 40% and 80% of the
        // leftover at 1.5× and 3× the solo p99.
        let mut capacity = run(Side::Reference, "capacity", (0.0, 0.0), (10_000.0, 500.0));
        capacity.report.device.iops = 10_000.0;
        let runs = vec![
            run(Side::Reference, "solo", (1000.0, 100.0), (0.0, 0.0)),
            capacity,
            run(Side::Reference, &sweep_name(1), (1000.0, 150.0), (3600.0, 900.0)),
            run(Side::Reference, &sweep_name(2), (1000.0, 300.0), (7200.0, 1200.0)),
            run(Side::Ioshare, "iocost", (1000.0, 200.0), (4500.0, 1000.0)),
            run(Side::Kernel, "bfq", (1000.0, 500.0), (8100.0, 2000.0)),
        ];
        let svg = scenario(&scenario_report("work-conserving", runs));
        assert!(svg.contains(">frontier (uncontrolled neighbour at QD 1..32, line) and controllers (dots)</text>"));
        assert!(svg.contains(">QD1 p99 ÷ solo</text>") && svg.contains(">leftover used (%)</text>"), "{svg}");
        assert!(svg.contains(">1×</text>") && svg.contains(">4×</text>") && !svg.contains(">8×</text>"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2, "a dot per controlled run, none for the references");
        assert!(svg.contains(">iocost (ioshare)</text>") && svg.contains(">bfq (kernel)</text>"));
        assert!(svg.contains(">neighbour-qd2 (reference): IOPS</text>"), "the sweep's runs have their panels");
        assert_eq!(svg.matches("<path").count(), 1 + 6 * 4, "the frontier, then a line per tenant per panel");
    }

    #[test]
    fn the_fidelity_page_draws_both_ratios_the_target_and_both_vrates_per_proportional_case() {
        let side = |ratios: [f64; 3], vrates: [f64; 3]| SideFigures {
            value: 2.0,
            tenants: Vec::new(),
            total_iops: 3000.0,
            second_half: Some(2.0),
            ratio_series: (1..=3).zip(ratios).map(|(t, r)| [f64::from(t), r]).collect(),
            vrate_series: (1..=3).zip(vrates).map(|(t, v)| [f64::from(t), v]).collect(),
        };
        let row = |case: &str, ratio: bool| {
            let mut ioshare = side([1.0, 2.0, 2.0], [100.0, 95.0, 90.0]);
            if !ratio {
                ioshare.ratio_series.clear();
            }
            FidelityRow {
                case: case.into(),
                figure: if ratio { "IOPS ratio high/low" } else { "share of the leftover taken" },
                target: ratio.then_some(2.0),
                ioshare: Some(ioshare),
                kernel: ratio.then(|| side([1.1, 1.9, 2.1], [98.0, 96.0, 91.0])),
            }
        };
        let svg = fidelity(&[row("proportional-2-1", true), row("work-conserving", false)]).expect("a page");
        assert!(svg.contains(">proportional-2-1: IOPS ratio high/low</text>"), "{svg}");
        assert!(svg.contains(">proportional-2-1: vrate</text>") && svg.contains(">vrate (%)</text>"), "{svg}");
        assert!(!svg.contains("work-conserving"), "no row for a case without a ratio");
        assert_eq!(svg.matches(">kernel iocost</text>").count(), 2, "both panels' legends name the kernel");
        assert_eq!(svg.matches(">target</text>").count(), 1, "the target only beside the ratios");
        assert_eq!(svg.matches("<path").count(), 3 + 2, "two ratios and the target, two vrates");
        assert!(fidelity(&[row("work-conserving", false)]).is_none(), "nothing to draw, no page");
    }
}
