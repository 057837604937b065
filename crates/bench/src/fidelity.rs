//! `ioshare bench --scenario fidelity`: ioshare's IOCost beside the kernel's own, same device, same
//! cost model and QoS (both from the suite's calibration), on the cases where IOCost's behaviour is
//! defined — proportional at 2:1 and 1:3, work-conserving, and donation. Meant for a host (or the QEMU
//! lab guest, `scripts/lab --iops 3000 -- ioshare bench --target $LAB_DISK --scenario fidelity`) whose
//! cgroup v2 has `io`; elsewhere the kernel column stays empty.
//!
//! The cases are ordinary scenarios run with their own weights; this module names them and condenses
//! their `iocost` and `kernel-iocost` runs into one comparison ([`FidelityRow`], [`table`]): per
//! tenant IOPS, share of the total, p50 and p99, and the scenario's own figure (IOPS ratio, share of
//! the leftover taken) for each side, with the relative differences to the target and between sides.
//!
//! Drift: on a device whose saturation hides behind a burst allowance (QEMU's throttle)
//! both IOCosts swing between the weights' split and the device FIFO's over a period of seconds, so
//! a whole-run ratio depends on where in the swing the run fell. For the proportional cases each side
//! therefore also shows the ratio over the second half of the measured window, the ratio and vrate
//! per sample interval (1 s for runs of 5 s and more; the kernel's vrate read from the root's
//! `io.stat`), so that a run of `--duration 10` or more shows the swing on both sides.

use std::fmt::Write;

use serde::Serialize;

use crate::controllers::ControllerKind;
use crate::kernel::KernelSetup;
use crate::report::ScenarioReport;
use crate::scenario::Case;
use crate::scenarios::donation::Donation;
use crate::scenarios::proportional::Proportional;
use crate::scenarios::work_conserving::WorkConserving;
use crate::verdict::Side;
use ioshare_engine::report::RunReport;

/// The name that selects the comparison.
pub const NAME: &str = "fidelity";

/// What a case's figure is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Figure {
    /// The high tenant's IOPS over the low one's, against the weight ratio.
    WeightRatio,
    /// The share of the leftover capacity the other tenant took (no target: the scenario's own
    /// criterion judges it). In `donation` ioshare's row reads it from the device's queue in the same
    /// seconds and the kernel's from the reference run's IOPS (the engine cannot see the queue of
    /// IO the kernel holds; see the scenario): the kernel's figure carries the disk's drift.
    LeftoverTaken,
}

/// The cases, in order, with what each one's figure is.
const CASES: [(Case, Figure); 4] = [
    (Case { name: "proportional-2-1", scenario: &Proportional, weights: Some((200, 100)) }, Figure::WeightRatio),
    (Case { name: "proportional-1-3", scenario: &Proportional, weights: Some((100, 300)) }, Figure::WeightRatio),
    (Case { name: "work-conserving", scenario: &WorkConserving, weights: None }, Figure::LeftoverTaken),
    (Case { name: "donation", scenario: &Donation, weights: None }, Figure::LeftoverTaken),
];

/// The cases the comparison runs, in order: ordinary scenarios under their own names and weights.
pub fn cases() -> impl Iterator<Item = Case> {
    CASES.iter().map(|(case, _)| *case)
}

/// One tenant under one controller.
#[derive(Clone, Debug, Serialize)]
pub struct TenantFigures {
    /// Tenant name.
    pub name: String,
    /// IOPS over the measurement window.
    pub iops: f64,
    /// Share of the run's total IOPS.
    pub share: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
}

/// One controller's run of a case.
#[derive(Clone, Debug, Serialize)]
pub struct SideFigures {
    /// The scenario's figure (IOPS ratio, share of the leftover taken).
    pub value: f64,
    /// Per tenant.
    pub tenants: Vec<TenantFigures>,
    /// Total IOPS.
    pub total_iops: f64,
    /// The IOPS ratio over the second half of the measured window (proportional cases only).
    pub second_half: Option<f64>,
    /// Per sample interval, `[end s, high/low IOPS ratio]` (proportional cases only).
    pub ratio_series: Vec<[f64; 2]>,
    /// Per sample, `[s, vrate %]`, where the run recorded it.
    pub vrate_series: Vec<[f64; 2]>,
}

/// One case: ioshare's IOCost and the kernel's side by side.
#[derive(Clone, Debug, Serialize)]
pub struct FidelityRow {
    /// Case name.
    pub case: String,
    /// What the figure is.
    pub figure: &'static str,
    /// The figure's target, where it has one (the weight ratio).
    pub target: Option<f64>,
    /// ioshare's IOCost, if it ran.
    pub ioshare: Option<SideFigures>,
    /// The kernel's IOCost, if it ran.
    pub kernel: Option<SideFigures>,
}

/// The comparison rows of the case reports found in `scenarios`.
pub fn rows(scenarios: &[ScenarioReport]) -> Vec<FidelityRow> {
    CASES
        .iter()
        .filter_map(|(case, figure)| {
            let report = scenarios.iter().find(|s| s.name == case.name)?;
            let side = |side: Side, controller: &str| {
                let run = report.runs.iter().find(|r| r.side == side && r.report.controller == controller)?;
                let total: f64 = run.report.tenants.iter().map(|t| t.iops).sum();
                let ratios = (*figure == Figure::WeightRatio).then(|| Drift::of(&run.report)).flatten();
                Some(SideFigures {
                    value: run.verdict.as_ref().map_or(f64::NAN, |v| v.value),
                    total_iops: total,
                    second_half: ratios.as_ref().map(|d| d.second_half),
                    ratio_series: ratios.map_or_else(Vec::new, |d| d.series),
                    vrate_series: run.report.controller_series.iter().map(|c| [c.t_s, c.vrate_pct]).collect(),
                    tenants: run
                        .report
                        .tenants
                        .iter()
                        .map(|t| TenantFigures {
                            name: t.name.clone(),
                            iops: t.iops,
                            share: t.iops / total.max(1e-9),
                            p50_us: t.lat_us.p50,
                            p99_us: t.lat_us.p99,
                        })
                        .collect(),
                })
            };
            let (figure, target) = match figure {
                Figure::WeightRatio => ("IOPS ratio high/low", case.weights.map(|(a, b)| f64::from(a) / f64::from(b))),
                Figure::LeftoverTaken => ("share of the leftover taken", None),
            };
            Some(FidelityRow {
                case: case.name.into(),
                figure,
                target,
                ioshare: side(Side::Ioshare, ControllerKind::IoCost.name()),
                kernel: side(Side::Kernel, KernelSetup::IoCost.name()),
            })
        })
        .collect()
}

/// How a two-tenant run's IOPS ratio moved: over the second half of its window, and per sample.
struct Drift {
    second_half: f64,
    series: Vec<[f64; 2]>,
}

impl Drift {
    /// The first tenant's IOPS over the second's; `None` without two tenants or samples.
    fn of(r: &RunReport) -> Option<Drift> {
        let [high, low, ..] = r.tenants.as_slice() else { return None };
        let end = high.series.last()?.t_s;
        let half = end - r.window_s / 2.0;
        let second_half = high.window_iops(half, end) / low.window_iops(half, end).max(1e-9);
        let series = high.series.iter().zip(&low.series).map(|(h, l)| [h.t_s, h.iops / l.iops.max(1e-9)]).collect();
        Some(Drift { second_half, series })
    }
}

/// The comparison as a table.
pub fn table(rows: &[FidelityRow]) -> String {
    let mut s = String::from("\n== fidelity — ioshare IOCost vs the kernel's IOCost, same model and QoS\n");
    let _ = writeln!(
        s,
        "{:<17} {:<11} | {:>7} {:>6} {:>7} {:>7} | {:>7} {:>6} {:>7} {:>7}",
        "case", "tenant", "ioshare", "share", "p50 ms", "p99 ms", "kernel", "share", "p50 ms", "p99 ms"
    );
    let cell = |side: &Option<SideFigures>, i: usize| match side.as_ref().and_then(|f| f.tenants.get(i)) {
        Some(t) => {
            format!("{:>7.0} {:>5.0}% {:>7.1} {:>7.1}", t.iops, t.share * 100.0, t.p50_us / 1000.0, t.p99_us / 1000.0)
        }
        None => format!("{:>7} {:>6} {:>7} {:>7}", "-", "", "", ""),
    };
    let total = |side: &Option<SideFigures>| side.as_ref().map_or("-".into(), |f| format!("{:.0}", f.total_iops));
    for row in rows {
        let n = row.ioshare.iter().chain(&row.kernel).map(|f| f.tenants.len()).max().unwrap_or(0);
        for i in 0..n {
            let name = row.ioshare.iter().chain(&row.kernel).find_map(|f| f.tenants.get(i)).map_or("", |t| &t.name);
            let case = if i == 0 { row.case.as_str() } else { "" };
            let _ = writeln!(s, "{case:<17} {name:<11} | {} | {}", cell(&row.ioshare, i), cell(&row.kernel, i));
        }
        let _ = writeln!(
            s,
            "{:<17} {:<11} | {:>7} {:>22} | {:>7}",
            "",
            "total",
            total(&row.ioshare),
            "",
            total(&row.kernel)
        );
        let _ = writeln!(s, "{:<17} {}", "", figures_line(row));
        for line in drift_lines(row) {
            let _ = writeln!(s, "{:<17} {line}", "");
        }
    }
    s
}

/// For a proportional case: the second half's ratio and the per-second ratio and vrate of each side.
fn drift_lines(row: &FidelityRow) -> Vec<String> {
    let sides = [("ioshare", &row.ioshare), ("kernel", &row.kernel)];
    let halves: Vec<String> = sides
        .iter()
        .filter_map(|(name, f)| f.as_ref()?.second_half.filter(|v| v.is_finite()).map(|v| format!("{name} {v:.2}")))
        .collect();
    if halves.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!("second half: {}", halves.join(", "))];
    let seq =
        |v: &[[f64; 2]], digits: usize| v.iter().map(|p| format!("{:.*}", digits, p[1])).collect::<Vec<_>>().join(" ");
    for (name, f) in sides {
        let Some(f) = f else { continue };
        if !f.ratio_series.is_empty() {
            lines.push(format!("{name} ratio per sample: {}", seq(&f.ratio_series, 2)));
        }
        if !f.vrate_series.is_empty() {
            lines.push(format!("{name} vrate % per sample: {}", seq(&f.vrate_series, 0)));
        }
    }
    lines
}

/// `IOPS ratio high/low: ioshare 2.03, kernel 2.00, target 2.00; ioshare is +1.5% off the target,
/// +1.5% off the kernel`.
fn figures_line(row: &FidelityRow) -> String {
    let value = |f: &Option<SideFigures>| f.as_ref().map(|f| f.value).filter(|v| v.is_finite());
    let (io, k) = (value(&row.ioshare), value(&row.kernel));
    let num = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let mut line = format!("{}: ioshare {}, kernel {}", row.figure, num(io), num(k));
    if let Some(t) = row.target {
        let _ = write!(line, ", target {t:.2}");
    }
    let mut offs = Vec::new();
    if let (Some(io), Some(t)) = (io, row.target) {
        offs.push(format!("ioshare {:+.1}% off the target", (io / t - 1.0) * 100.0));
    }
    if let (Some(io), Some(k)) = (io, k) {
        offs.push(format!("{:+.1}% off the kernel", (io / k - 1.0) * 100.0));
    }
    if !offs.is_empty() {
        let _ = write!(line, "; {}", offs.join(", "));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{RunEntry, Verdict};
    use ioshare_engine::report::{LatencyUs, RunReport, TenantReport};

    fn run(side: Side, controller: &str, iops: [f64; 2], value: f64) -> RunEntry {
        let tenants = ["high", "low"]
            .iter()
            .zip(iops)
            .map(|(n, iops)| TenantReport {
                name: (*n).into(),
                iops,
                lat_us: LatencyUs { p50: 1000.0, p99: 4000.0, ..LatencyUs::default() },
                ..TenantReport::default()
            })
            .collect();
        RunEntry {
            side,
            report: RunReport { controller: controller.into(), tenants, ..RunReport::default() },
            verdict: Some(Verdict { pass: true, value, summary: String::new() }),
        }
    }

    #[test]
    fn rows_pair_ioshare_and_kernel_iocost_per_case() {
        let report = ScenarioReport {
            name: "proportional-1-3".into(),
            description: String::new(),
            runs: vec![
                run(Side::Ioshare, "none", [1500.0, 1500.0], 1.0),
                run(Side::Ioshare, "iocost", [750.0, 2250.0], 1.0 / 3.0),
                run(Side::Kernel, "kernel-iocost", [1000.0, 2000.0], 0.5),
            ],
            verdict: Verdict::default(),
            notes: vec![],
            observed: vec![],
            curves: vec![],
        };
        let rows = rows(&[report]);
        assert_eq!(rows.len(), 1, "only the cases present");
        let row = &rows[0];
        assert_eq!(row.target, Some(1.0 / 3.0));
        let io = row.ioshare.as_ref().unwrap();
        assert_eq!((io.total_iops, io.tenants[1].share), (3000.0, 0.75));
        assert_eq!(row.kernel.as_ref().unwrap().value, 0.5);
        let text = table(&rows);
        assert!(
            text.contains(
                "ioshare 0.33, kernel 0.50, target 0.33; ioshare +0.0% off the target, -33.3% off the kernel"
            ),
            "{text}"
        );
        assert!(
            text.contains("proportional-1-3  high        |     750    25%     1.0     4.0 |    1000    33%"),
            "{text}"
        );
    }
}
