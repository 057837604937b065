//! Colours: a palette for lines and dots, told apart by order, and a heat scale for cell values.

/// Line and dot colours in order (the first of matplotlib's `tab10`, which readers know).
const PALETTE: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// The colour of the `i`-th series or dot (the palette repeats after eight).
pub(crate) fn nth(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// The colour of an empty cell (no value, zero, or not a number).
pub(crate) const EMPTY: &str = "#f4f4f4";

/// The heat colour at `t` from 0 (pale yellow) to 1 (dark red); `t` outside is taken at the nearer
/// end, not a number at 0.
pub(crate) fn heat(t: f64) -> String {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", lerp(255.0, 128.0), lerp(237.0, 0.0), lerp(160.0, 38.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_runs_from_pale_to_dark_and_never_fails() {
        assert_eq!(heat(0.0), "#ffeda0");
        assert_eq!(heat(1.0), "#800026");
        assert_eq!(heat(f64::NAN), heat(0.0));
        assert_eq!(heat(f64::INFINITY), heat(1.0));
        assert_eq!(nth(8), nth(0));
    }
}
