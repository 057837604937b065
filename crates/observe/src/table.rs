//! The interval table of the terminal view and of plain periodic output: one row per (device,
//! cgroup, operation) with rates at C, sequential shares, latency percentiles and median seeks.

use std::fmt::Write as _;

use crate::histogram::Kind;
use crate::snapshot::{Cost, Entry, Latency, Snapshot, Stage};

const HEADER: [&str; 13] = [
    "DEVICE",
    "CGROUP",
    "OP",
    "IOPS",
    "MiB/s",
    "SIZE",
    "SEQ%Q",
    "SEQ%D",
    "Q2C p50",
    "Q2C p99",
    "I2D p99",
    "D2C p99",
    "SEEK p50 I/D",
];

/// Renders an interval (`delta`, covering `seconds`) as an aligned table.
pub fn render(delta: &Snapshot, seconds: f64) -> String {
    let rows: Vec<Vec<String>> = delta.entries.iter().map(|e| row(e, seconds.max(1e-9))).collect();
    let mut widths: Vec<usize> = HEADER.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            let pad = w - cell.chars().count();
            // Names left-aligned, numbers right-aligned.
            if i < 3 {
                let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&mut out, &mut HEADER.iter().copied());
    for r in &rows {
        line(&mut out, &mut r.iter().map(String::as_str));
    }
    if rows.is_empty() {
        out.push_str("(no IO in this interval)\n");
    }
    if let Some(cost) = delta.cost {
        let _ = writeln!(out, "{}", cost_line(&cost, delta, seconds));
    }
    let c = &delta.counters;
    if c.dropped_stats_full > 0 {
        let _ =
            writeln!(out, "dropped {} IOs: more (device, cgroup, op) series than the map holds", c.dropped_stats_full);
    }
    out
}

/// `observer: 123 ns per IO (Q 30, I 25, D 28, C 40 ns per run), 0.012% of one CPU`.
pub fn cost_line(cost: &Cost, delta: &Snapshot, seconds: f64) -> String {
    let completions: u64 = delta.entries.iter().map(|e| e.stage(Stage::C).ios).sum();
    let per_io = cost.ns_per_io(completions).map_or("-".into(), |ns| format!("{ns:.0}"));
    let per_run: Vec<String> = Stage::ALL
        .iter()
        .map(|&s| format!("{} {}", s.label(), cost.program(s).ns_per_run().map_or("-".into(), |ns| format!("{ns:.0}"))))
        .collect();
    format!(
        "observer: {per_io} ns per IO completed ({} ns per run), {:.3}% of one CPU",
        per_run.join(", "),
        cost.total().run_time_ns as f64 / seconds.max(1e-9) / 1e7
    )
}

fn row(e: &Entry, seconds: f64) -> Vec<String> {
    let c = e.stage(Stage::C);
    let pct = |stage: Stage| e.stage(stage).sequential_share().map_or("-".into(), |s| format!("{:.0}", s * 100.0));
    let lat = |l: Latency, q: f64| e.latency(l).quantile(Kind::Latency, q).map_or("-".into(), duration);
    let seek = |stage: Stage| e.stage(stage).seek.quantile(Kind::Seek, 0.5).map_or("-".into(), sectors);
    vec![
        e.device_name.clone(),
        e.cgroup.clone(),
        e.op.label().to_string(),
        format!("{:.0}", c.ios as f64 / seconds),
        format!("{:.2}", c.bytes as f64 / seconds / 1048576.0),
        if c.ios > 0 { sectors(c.bytes as f64 / c.ios as f64 / 512.0) } else { "-".into() },
        pct(Stage::Q),
        pct(Stage::D),
        lat(Latency::QC, 0.5),
        lat(Latency::QC, 0.99),
        lat(Latency::ID, 0.99),
        lat(Latency::DC, 0.99),
        format!("{}/{}", seek(Stage::I), seek(Stage::D)),
    ]
}

/// `850µs`, `12.3ms`, `1.20s`.
pub fn duration(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.0}µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.1}ms", seconds * 1e3)
    } else {
        format!("{seconds:.2}s")
    }
}

/// A distance or size in sectors as bytes: `0`, `4K`, `1.5M`, `2.0G`.
fn sectors(s: f64) -> String {
    let b = s * 512.0;
    if b < 1.0 {
        "0".into()
    } else if b < 1024.0 * 1024.0 {
        format!("{:.0}K", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1}M", b / 1048576.0)
    } else {
        format!("{:.1}G", b / 1073741824.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram;
    use crate::snapshot::{Counters, Op, StageStats};

    #[test]
    fn a_row_per_entry_with_rates_and_percentiles() {
        let stage = StageStats {
            ios: 100,
            bytes: 409_600,
            size: Histogram::default(),
            seek: Histogram { buckets: vec![25, 0, 0, 0, 0, 75], sum: 0 },
        };
        let entry = Entry {
            device: "7:0".into(),
            device_name: "loop0".into(),
            cgroup_id: 9,
            cgroup: "/tenant-a".into(),
            op: Op::Read,
            stages: vec![stage; 4],
            latencies: vec![Histogram { buckets: vec![0, 0, 0, 0, 0, 0, 0, 100], sum: 0 }; 3],
        };
        let text =
            render(&Snapshot { elapsed_s: 2.0, entries: vec![entry], counters: Counters::default(), cost: None }, 2.0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        // 100 IOs in 2 s; 4 KiB each; 25% sequential; p50 of 100 IOs below 128 µs interpolated to 96 µs.
        assert_eq!(cells[..8], ["loop0", "/tenant-a", "read", "50", "0.20", "4K", "25", "25"]);
        assert_eq!(cells[8], "96µs");
    }
}
