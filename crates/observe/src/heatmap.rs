//! Heatmaps over time of a log2 histogram (one column per interval, one row per bucket, colour = IOs),
//! as SVG files — the Grafana heatmap panels of the sources, drawn without a server by
//! `ioshare-chart` — and as text for the live terminal view. This module turns intervals' histograms
//! into the chart's rows and cells; the drawing is the chart's.

use std::fmt::Write as _;

use ioshare_chart::{Axis, Chart, Heatmap};

use crate::histogram::{Histogram, Kind};

/// One interval: when it ended (seconds since start) and what its histogram counted.
pub type Column = (f64, Histogram);

/// Size of an SVG heatmap, pixels.
const SIZE: (f64, f64) = (820.0, 440.0);

/// A readable label for the upper bound of bucket `k`: `≤4 KiB`, `≤1 ms`, `0` (sequential).
pub fn bucket_label(kind: Kind, k: usize) -> String {
    let ub = kind.upper_bound(k);
    match kind {
        Kind::Latency => {
            let (value, unit) = if ub < 1e-3 {
                (ub * 1e6, "µs")
            } else if ub < 1.0 {
                (ub * 1e3, "ms")
            } else {
                (ub, "s")
            };
            format!("<{} {unit}", trim(value))
        }
        Kind::Seek if k == 0 => "0 (seq)".to_string(),
        Kind::Seek => format!("≤{}", bytes(ub * 512.0)),
        Kind::Size => format!("≤{}", bytes(ub)),
    }
}

/// Three significant digits at most, without trailing zeros: `1.02`, `16.4`, `524`, `4`.
fn trim(v: f64) -> String {
    let text = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

fn bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{} {}", trim(v), UNITS[u])
}

/// The rows worth drawing: from the lowest to the highest bucket any column uses.
fn rows(columns: &[Column]) -> Option<(usize, usize)> {
    let used = |pick: fn(&mut dyn Iterator<Item = usize>) -> Option<usize>| {
        columns
            .iter()
            .filter_map(|(_, h)| {
                let mut it = h.buckets.iter().enumerate().filter(|(_, &n)| n > 0).map(|(k, _)| k);
                pick(&mut it)
            })
            .collect::<Vec<_>>()
    };
    let lows = used(|it| it.next());
    let highs = used(|it| it.last());
    Some((*lows.iter().min()?, *highs.iter().max()?))
}

/// An SVG heatmap: x = time (s), y = the histogram's buckets, colour = IOs per interval.
pub fn svg(title: &str, y_label: &str, kind: Kind, columns: &[Column]) -> String {
    let buckets: Vec<usize> = rows(columns).map_or(Vec::new(), |(lo, hi)| (lo..=hi).collect());
    let mut start = 0.0;
    let columns = columns
        .iter()
        .map(|(end, h)| {
            let cells = buckets.iter().map(|&k| h.buckets.get(k).copied().unwrap_or(0) as f64).collect();
            let column = ioshare_chart::Column { start, end: *end, cells };
            start = *end;
            column
        })
        .collect();
    Heatmap {
        title: title.to_string(),
        x: Axis::linear("time").unit("s").tight(),
        y_name: y_label.to_string(),
        rows: buckets.iter().map(|&k| bucket_label(kind, k)).collect(),
        columns,
        unit: "IOs".to_string(),
    }
    .to_svg(SIZE.0, SIZE.1)
}

/// A text heatmap for a terminal: one line per bucket (highest first), one character per column,
/// shade by IOs on a log scale.
pub fn text(kind: Kind, columns: &[Column]) -> String {
    const SHADES: [char; 5] = [' ', '░', '▒', '▓', '█'];
    let Some((lo, hi)) = rows(columns) else { return "  (no IO yet)\n".to_string() };
    let max = columns.iter().flat_map(|(_, h)| h.buckets.iter().copied()).max().unwrap_or(1).max(1);
    let mut out = String::new();
    for k in (lo..=hi).rev() {
        let _ = write!(out, "{:>12} │", bucket_label(kind, k));
        for (_, h) in columns {
            let n = h.buckets.get(k).copied().unwrap_or(0);
            let level = if n == 0 { 0 } else { 1 + ((n as f64).ln_1p() / (max as f64).ln_1p() * 3.0).round() as usize };
            out.push(SHADES[level.min(4)]);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_readable() {
        assert_eq!(bucket_label(Kind::Latency, 0), "<1 µs");
        assert_eq!(bucket_label(Kind::Latency, 10), "<1.02 ms");
        assert_eq!(bucket_label(Kind::Latency, 7), "<128 µs");
        assert_eq!(bucket_label(Kind::Seek, 0), "0 (seq)");
        assert_eq!(bucket_label(Kind::Seek, 4), "≤4 KiB");
        assert_eq!(bucket_label(Kind::Size, 12), "≤4 KiB");
    }

    #[test]
    fn heatmap_draws_only_used_rows() {
        let columns = vec![
            (1.0, Histogram { buckets: vec![0, 0, 5, 1], sum: 0 }),
            (2.0, Histogram { buckets: vec![0, 0, 0, 9], sum: 0 }),
        ];
        let svg = svg("t", "y", Kind::Size, &columns);
        assert_eq!(svg.matches("<title>").count(), 4, "2 columns x buckets 2..=3");
        assert!(svg.contains("≤8 B") && !svg.contains("≤2 B"));
        let latency = self::svg("t", "y", Kind::Latency, &columns);
        assert!(latency.contains("&lt;4 µs") && !latency.contains("><4"), "labels are escaped");
        assert!(svg.contains("<title>1.0–2.0 s, ≤8 B: 9 IOs</title>"), "{svg}");
        assert!(self::svg("t", "y", Kind::Size, &[]).contains(">no data</text>"));
        let text = text(Kind::Size, &columns);
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().next().unwrap().ends_with("▒█"), "{text}");
    }
}
