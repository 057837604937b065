//! Heatmaps over time of a log2 histogram (one column per interval, one row per bucket, colour = IOs),
//! as SVG files — the Grafana heatmap panels of the sources, drawn without a server — and as text
//! for the live terminal view.

use std::fmt::Write as _;

use crate::histogram::{Histogram, Kind};

/// One interval: when it ended (seconds since start) and what its histogram counted.
pub type Column = (f64, Histogram);

const W: f64 = 820.0;
const H: f64 = 440.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 110.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

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

/// `text` with XML's special characters escaped (labels start with `<`).
fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
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

/// Colour of a cell holding `n` of at most `max` IOs (log scale, pale yellow to dark red).
fn colour(n: u64, max: u64) -> String {
    if n == 0 {
        return "#f4f4f4".to_string();
    }
    let t = ((n as f64).ln_1p() / (max as f64).ln_1p()).clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", lerp(255.0, 128.0), lerp(237.0, 0.0), lerp(160.0, 38.0))
}

/// An SVG heatmap: x = time (s), y = the histogram's buckets, colour = IOs per interval.
pub fn svg(title: &str, y_label: &str, kind: Kind, columns: &[Column]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#, W / 2.0, xml(title));
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let Some((lo, hi)) = rows(columns) else {
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">no IO</text></svg>"#, W / 2.0, H / 2.0);
        return s;
    };
    let nrows = hi - lo + 1;
    let max = columns.iter().flat_map(|(_, h)| h.buckets.iter().copied()).max().unwrap_or(1).max(1);
    let (t0, t1) = (0.0, columns.last().map_or(1.0, |c| c.0).max(1e-9));
    let px = |t: f64| LEFT + (t - t0) / (t1 - t0) * pw;
    let cell_h = ph / nrows as f64;
    let mut start = t0;
    for (end, h) in columns {
        let (x0, x1) = (px(start), px(*end));
        for k in lo..=hi {
            let n = h.buckets.get(k).copied().unwrap_or(0);
            let y = TOP + ph - (k - lo + 1) as f64 * cell_h;
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{cell_h:.1}" fill="{}"><title>{:.1}-{:.1} s, {}: {n} IOs</title></rect>"#,
                (x1 - x0).max(0.5),
                colour(n, max),
                start,
                end,
                xml(&bucket_label(kind, k))
            );
        }
        start = *end;
    }
    // Axes, y labels at every bucket (every other when crowded), x ticks at six times.
    let _ = writeln!(s, r##"<path d="M{LEFT} {TOP} V{} H{}" fill="none" stroke="#333"/>"##, TOP + ph, LEFT + pw);
    let step = if nrows > 24 { 2 } else { 1 };
    for k in (lo..=hi).step_by(step) {
        let y = TOP + ph - (k - lo) as f64 * cell_h - cell_h / 2.0 + 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{y:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            xml(&bucket_label(kind, k))
        );
    }
    for i in 0..=5 {
        let t = t0 + (t1 - t0) * i as f64 / 5.0;
        let _ =
            writeln!(s, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, px(t), TOP + ph + 18.0, trim(t));
    }
    let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">time (s)</text>"#, LEFT + pw / 2.0, H - 10.0);
    let _ = writeln!(
        s,
        r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + ph / 2.0,
        xml(y_label)
    );
    // Colour legend.
    let lx = LEFT + pw + 30.0;
    for i in 0..10 {
        let n = ((max as f64).ln_1p() * (9 - i) as f64 / 9.0).exp_m1().round() as u64;
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="18" height="{:.1}" fill="{}"/>"#,
            TOP + i as f64 * ph / 10.0,
            ph / 10.0,
            colour(n.max(1), max)
        );
    }
    let _ = writeln!(s, r#"<text x="{}" y="{}">{max}</text>"#, lx + 22.0, TOP + 10.0);
    let _ = writeln!(s, r#"<text x="{}" y="{}">1</text>"#, lx + 22.0, TOP + ph);
    let _ = writeln!(s, r#"<text x="{}" y="{}">IOs</text>"#, lx, TOP - 6.0);
    s.push_str("</svg>\n");
    s
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
        let text = text(Kind::Size, &columns);
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().next().unwrap().ends_with("▒█"), "{text}");
    }
}
