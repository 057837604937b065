//! The human-readable report: a header with the target and calibration, then per scenario a table
//! (one block of rows per run, one row per tenant) and the verdict line.

use std::fmt::Write;

use crate::calibrate::Calibration;
use crate::report::ScenarioReport;
use crate::suite::{SuiteReport, TargetInfo};
use crate::verdict::Side;
use crate::{fidelity, observe};

/// The header: target and calibration.
pub fn header(target: &TargetInfo, cal: &Calibration) -> String {
    let mut s = String::new();
    let size = target.size as f64 / (1u64 << 30) as f64;
    let tmp = if target.temporary { ", temporary" } else { "" };
    let _ = writeln!(s, "target: {} ({}, {size:.2} GiB{tmp})", target.path.display(), target.kind);
    let _ = writeln!(s, "device: {:.0} IOPS max (4 KiB random reads, QD32)", cal.max_iops);
    let derived = if cal.writes_measured { "" } else { " (write side derived: the target was only read)" };
    let _ = writeln!(s, "iocost model: {}{derived}", cal.model_line);
    let q = &cal.qos;
    let _ = writeln!(
        s,
        "iocost qos:   rpct={:.0} rlat={} wpct={:.0} wlat={} (1.5 x the p50 at QD32, measured)",
        q.rppm as f64 / 1e4,
        q.rlat_us,
        q.wppm as f64 / 1e4,
        q.wlat_us
    );
    let rounds = match cal.burst {
        Some(b) => format!(
            "{:.1} s rounds: a burst at the start ({:.0} IOPS, then {:.0}) drained before measuring",
            cal.round_s, b.early_iops, b.steady_iops
        ),
        None => format!("{:.1} s rounds, no burst at the start", cal.round_s),
    };
    let _ = writeln!(s, "calibration:  {:.1} s, {rounds}", cal.took_s);
    s
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// One scenario: its table and verdict line.
pub fn scenario(report: &ScenarioReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n== {} — {}", report.name, report.description);
    let _ = writeln!(
        s,
        "{:<17} {:<9} {:<11} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}  run",
        "controller", "side", "tenant", "weight", "IOPS", "MB/s", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us"
    );
    for run in &report.runs {
        let side = run.side.name();
        for (i, t) in run.report.tenants.iter().enumerate() {
            let (ctl, side, note) = if i == 0 {
                let mut note = format!("device {} IOPS", fmt_num(run.report.device.iops));
                if run.report.device.busy_pct.is_finite() {
                    let _ = write!(note, ", busy {:.0}%", run.report.device.busy_pct);
                }
                let iocost = run.side == Side::Ioshare && run.report.controller.starts_with("iocost");
                if let Some(last) = run.report.controller_series.last().filter(|_| iocost) {
                    let _ = write!(note, ", vrate {:.0}%", last.vrate_pct);
                    if last.depth_limit > 0 {
                        let _ = write!(note, ", {} device slots", last.depth_limit);
                    }
                }
                if let Some(v) = &run.verdict {
                    let _ = write!(note, " | {} {}", if v.pass { "pass" } else { "fail" }, v.summary);
                }
                if run.report.interrupted {
                    note.push_str(" | interrupted");
                }
                (run.report.controller.as_str(), side, note)
            } else {
                ("", "", String::new())
            };
            let l = &t.lat_us;
            let _ = writeln!(
                s,
                "{:<17} {:<9} {:<11} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}  {}",
                ctl,
                side,
                t.name,
                t.weight,
                fmt_num(t.iops),
                fmt_num(t.bw_bytes / 1e6),
                fmt_num(l.p50),
                fmt_num(l.p90),
                fmt_num(l.p99),
                fmt_num(l.p999),
                fmt_num(l.max),
                note
            );
        }
    }
    s.push_str(&observe::table(&report.observed));
    for n in &report.notes {
        let _ = writeln!(s, "note: {n}");
    }
    let v = &report.verdict;
    let _ = writeln!(s, "{} {}: {}", v.label(), report.name, v.summary);
    s
}

/// The closing summary: one verdict line per scenario, and suite notes.
pub fn summary(suite: &SuiteReport) -> String {
    let mut s = if suite.fidelity.is_empty() { String::new() } else { fidelity::table(&suite.fidelity) };
    s.push_str("\nsummary\n");
    for sc in &suite.scenarios {
        let _ = writeln!(s, "  {} {:<16} {}", sc.verdict.label(), sc.name, sc.verdict.summary);
    }
    for n in &suite.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if suite.interrupted {
        s.push_str("interrupted: the scenarios above are those that finished\n");
    }
    s
}
