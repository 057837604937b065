//! Axes: what a chart's axis shows (name, unit, linear or log scale, fixed range or ticks) and how
//! it is fitted to the data — round ticks (1, 2 or 5 times a power of ten; whole decades on a log
//! scale) that cover the data, and short tick labels (`0.25`, `40k`, `1.5M`).

/// How values map to distance along an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Equal differences take equal distances.
    Linear,
    /// Equal ratios take equal distances (base 10); values of zero or less are not drawn.
    Log,
}

/// One axis of a chart, as the caller describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// What the axis measures: `time`, `p99 latency`.
    pub name: String,
    /// Its unit (`s`, `µs`), shown after the name in parentheses; empty for none.
    pub unit: String,
    /// Linear or log.
    pub scale: Scale,
    /// The range shown; `None` (or a range that cannot be drawn) fits it to the data. Values outside
    /// are drawn at its edge.
    pub range: Option<(f64, f64)>,
    /// Ticks at these values with these labels instead of round numbers (those outside the range
    /// shown are left out).
    pub ticks: Option<Vec<(f64, String)>>,
    /// A linear axis fitted to the data also reaches zero (a quantity's scale starts at nothing).
    pub from_zero: bool,
    /// An axis fitted to the data ends at the data's extremes, with round ticks inside, instead of
    /// at the round ticks (or whole decades) just beyond: for time, where empty margins mislead.
    pub tight: bool,
}

impl Axis {
    /// A linear axis called `name`, fitted to the data with round ends.
    pub fn linear(name: &str) -> Axis {
        Axis {
            name: name.to_string(),
            unit: String::new(),
            scale: Scale::Linear,
            range: None,
            ticks: None,
            from_zero: false,
            tight: false,
        }
    }

    /// A log axis called `name`, fitted to whole decades around the data.
    pub fn log(name: &str) -> Axis {
        Axis { scale: Scale::Log, ..Axis::linear(name) }
    }

    /// The same in unit `unit`.
    pub fn unit(self, unit: &str) -> Axis {
        Axis { unit: unit.to_string(), ..self }
    }

    /// The same, reaching zero.
    pub fn from_zero(self) -> Axis {
        Axis { from_zero: true, ..self }
    }

    /// The same, ending at the data's extremes.
    pub fn tight(self) -> Axis {
        Axis { tight: true, ..self }
    }

    /// The same, showing `lo` to `hi` whatever the data.
    pub fn range(self, lo: f64, hi: f64) -> Axis {
        Axis { range: Some((lo, hi)), ..self }
    }

    /// The same, with ticks at the given values and labels.
    pub fn ticks<L: Into<String>>(self, ticks: impl IntoIterator<Item = (f64, L)>) -> Axis {
        Axis { ticks: Some(ticks.into_iter().map(|(v, l)| (v, l.into())).collect()), ..self }
    }

    /// The axis title: `name (unit)`, or the name alone.
    pub fn title(&self) -> String {
        if self.unit.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.unit)
        }
    }

    /// The axis fitted to `values` (those that cannot be drawn are ignored).
    pub(crate) fn fit(&self, values: impl Iterator<Item = f64>) -> Fitted {
        let log = self.scale == Scale::Log;
        let drawable = |v: &f64| v.is_finite() && (!log || *v > 0.0);
        let range = self.range.filter(|(lo, hi)| drawable(lo) && drawable(hi) && lo < hi);
        let (lo, hi) = match range {
            Some(range) => range,
            None => {
                let (lo, hi) = values
                    .filter(drawable)
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
                match (lo <= hi, log) {
                    (false, false) => (0.0, 1.0),
                    (false, true) => (1.0, 10.0),
                    (true, false) if self.from_zero => (lo.min(0.0), hi.max(0.0)),
                    (true, _) => (lo, hi),
                }
            }
        };
        let fixed = range.is_some();
        let (lo, hi, ticks) = match self.scale {
            Scale::Linear => {
                let (lo, hi) = widen(lo, hi);
                let values = round_ticks(lo, hi, 5);
                let (lo, hi) = match (fixed || self.tight, values.first(), values.last()) {
                    (false, Some(&first), Some(&last)) => (first.min(lo), last.max(hi)),
                    _ => (lo, hi),
                };
                let labels = tick_labels(&values);
                (lo, hi, values.into_iter().zip(labels).collect::<Vec<_>>())
            }
            Scale::Log => {
                let (lo, hi) = match (fixed, self.tight) {
                    (false, false) => decades(lo, hi),
                    _ if hi > lo => (lo.log10(), hi.log10()),
                    _ => (lo.log10() - 0.5, hi.log10() + 0.5),
                };
                (lo, hi, log_ticks(lo, hi).into_iter().map(|v| (v, number(v))).collect())
            }
        };
        let span = Span { lo, hi, log };
        let inside = |v: f64| span.fraction(v).is_some_and(|f| (-1e-9..=1.0 + 1e-9).contains(&f));
        let ticks = self.ticks.clone().unwrap_or(ticks).into_iter().filter(|(v, _)| inside(*v)).collect();
        Fitted { span, ticks }
    }
}

/// The range an axis shows (log10 of it on a log scale).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Span {
    lo: f64,
    hi: f64,
    log: bool,
}

/// An axis fitted to its data: its range and its ticks, ready to draw.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fitted {
    /// The range and scale.
    pub(crate) span: Span,
    /// Tick values and labels, inside the range.
    pub(crate) ticks: Vec<(f64, String)>,
}

impl Span {
    /// Where `v` lies from the start (0) to the end (1) of the range, unclamped; `None` if it cannot
    /// be drawn (not finite, or not positive on a log scale).
    pub(crate) fn fraction(&self, v: f64) -> Option<f64> {
        let t = if self.log {
            if v <= 0.0 {
                return None;
            }
            v.log10()
        } else {
            v
        };
        let f = (t - self.lo) / (self.hi - self.lo);
        f.is_finite().then_some(f)
    }
}

impl Fitted {
    /// Where `v` lies in the range, clamped to it (0 to 1); `None` if it cannot be drawn.
    pub(crate) fn at(&self, v: f64) -> Option<f64> {
        self.span.fraction(v).map(|f| f.clamp(0.0, 1.0))
    }
}

/// `lo`..`hi` made a range of some width: a single value gets room around it.
fn widen(lo: f64, hi: f64) -> (f64, f64) {
    if hi - lo > hi.abs().max(lo.abs()) * 1e-9 {
        return (lo, hi);
    }
    let room = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
    (lo - room, hi + room)
}

/// The whole decades (as exponents) around `lo`..`hi`, at least one.
fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let (a, b) = (lo.log10().floor().max(-300.0), hi.log10().ceil().min(300.0));
    (a, if b > a { b } else { a + 1.0 })
}

/// The step between round ticks for a range of `width` split into about `target` parts: 1, 2 or 5
/// times a power of ten, whichever gives the number of parts nearest `target`.
fn round_step(width: f64, target: usize) -> f64 {
    let target = target.max(1) as f64;
    let p = 10f64.powf((width / target).log10().floor());
    let parts = |step: f64| (width / step - target).abs();
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).fold(p, |best, s| if parts(s) < parts(best) { s } else { best })
}

/// Round tick values (multiples of a step of 1, 2 or 5 times a power of ten, about `target` of them)
/// from the last at or below `lo` to the first at or above `hi`. Empty for a range that is not finite
/// or not wider than zero.
pub fn round_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        return Vec::new();
    }
    let step = round_step(hi - lo, target);
    let (first, last) = ((lo / step).floor(), (hi / step).ceil());
    if !(step.is_finite() && step > 0.0 && last - first <= 100.0) {
        return Vec::new();
    }
    // Each tick from its own index (no sum of steps), so 0.1 + 0.2 does not print as 0.30000000000000004.
    (0..=(last - first) as i64)
        .map(|i| {
            let v = (first + i as f64) * step;
            if v.abs() < step * 1e-9 {
                0.0
            } else {
                v
            }
        })
        .collect()
}

/// Ticks of a log axis spanning decades `lo`..`hi` (exponents): 1, 2, 5 per decade over two decades
/// or fewer, every decade up to seven, every few decades beyond.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        return Vec::new();
    }
    let (first, last) = (lo.floor() as i32, hi.ceil() as i32);
    let spread = last - first;
    let every = (spread / 7 + 1).max(1);
    let steps: &[f64] = if spread <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    (first..=last)
        .filter(|d| (d - first) % every == 0)
        .flat_map(|d| steps.iter().map(move |m| m * 10f64.powi(d)))
        .filter(|v| (lo - 1e-9..=hi + 1e-9).contains(&v.log10()))
        .collect()
}

/// Large numbers' suffixes: from which value, divided by what, which letter.
const SUFFIXES: [(f64, f64, &str); 3] = [(1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")];

/// Labels of evenly spaced `ticks`: one suffix for all (`k` from 10 000, `M` from a million, `G`
/// from a billion) and as many decimals as the step needs: `0.25 0.5 0.75`, `0 20k 40k`.
pub fn tick_labels(ticks: &[f64]) -> Vec<String> {
    let top = ticks.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let (div, suffix) = SUFFIXES.into_iter().find(|(from, _, _)| top >= *from).map_or((1.0, ""), |(_, d, s)| (d, s));
    let step = ticks.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
    let decimals = if step.is_finite() && step > 0.0 {
        ((-(step / div).log10()).ceil() + 1.0).clamp(0.0, 12.0) as usize
    } else {
        2
    };
    let label = |v: f64| match trim_zeros(format!("{:.*}", decimals, v / div)) {
        zero if zero == "0" => zero,
        short => format!("{short}{suffix}"),
    };
    ticks.iter().map(|v| label(*v)).collect()
}

/// A short label of one number: at most three significant digits below 10 000 (`0.001`, `2.5`,
/// `512`, `9285`), `k`, `M` or `G` above (`12.3k`, `1.5M`).
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let (div, suffix) =
        SUFFIXES.into_iter().find(|(from, _, _)| v.abs() >= *from).map_or((1.0, ""), |(_, d, s)| (d, s));
    let v = v / div;
    let decimals = if v == 0.0 { 0 } else { (2.0 - v.abs().log10().floor()).clamp(0.0, 12.0) as usize };
    format!("{}{suffix}", trim_zeros(format!("{v:.decimals$}")))
}

/// `text` (a formatted number) without trailing zeros after its decimal point, nor a bare point.
fn trim_zeros(text: String) -> String {
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    if text == "-0" {
        "0".to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(t: &Fitted) -> Vec<&str> {
        t.ticks.iter().map(|(_, l)| l.as_str()).collect()
    }

    #[test]
    fn ticks_are_round_and_cover_the_data() {
        assert_eq!(round_ticks(0.0, 5536.0, 5), [0.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0]);
        assert_eq!(round_ticks(0.13, 0.92, 5), [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(round_ticks(-7.0, 3.0, 5), [-8.0, -6.0, -4.0, -2.0, 0.0, 2.0, 4.0]);
        for (lo, hi) in [(0.0, 1.0), (3.7, 1234.5), (-1e-6, 2e-6), (1e15, 1e15 + 1e3), (-5e300, 5e300)] {
            let t = round_ticks(lo, hi, 5);
            assert!(t.len() >= 2 && t.len() <= 12, "{lo}..{hi}: {t:?}");
            assert!(t[0] <= lo && *t.last().unwrap() >= hi, "{lo}..{hi}: {t:?}");
            let step = t[1] - t[0];
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!([1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6), "{step}");
        }
        assert!(round_ticks(1.0, 1.0, 5).is_empty() && round_ticks(f64::NAN, 1.0, 5).is_empty());
    }

    #[test]
    fn a_fitted_axis_ends_on_round_ticks_unless_tight_or_fixed() {
        let iops = Axis::linear("IOPS").from_zero().fit([5536.0, 2400.0].into_iter());
        assert_eq!(labels(&iops), ["0", "1000", "2000", "3000", "4000", "5000", "6000"]);
        assert_eq!(iops.at(6000.0), Some(1.0));
        let time = Axis::linear("time").tight().fit([4.0, 19.5].into_iter());
        assert_eq!(labels(&time), ["5", "10", "15"]);
        assert_eq!((time.at(4.0), time.at(19.5)), (Some(0.0), Some(1.0)));
        let fixed = Axis::linear("leftover").range(0.0, 110.0).fit([500.0].into_iter());
        assert_eq!(labels(&fixed), ["0", "20", "40", "60", "80", "100"]);
        assert_eq!(fixed.at(500.0), Some(1.0), "clamped to the edge");
        let big = Axis::linear("IOPS").from_zero().fit([45_000.0].into_iter());
        assert_eq!(labels(&big), ["0", "10k", "20k", "30k", "40k", "50k"]);
    }

    #[test]
    fn log_axes_span_decades() {
        let lat = Axis::log("latency").fit([8000.0, 13_000.0, 0.0].into_iter());
        assert_eq!(labels(&lat), ["1000", "2000", "5000", "10k", "20k", "50k", "100k"]);
        assert_eq!((lat.at(1000.0), lat.at(1e5), lat.at(0.0)), (Some(0.0), Some(1.0), None));
        let wide = Axis::log("x").fit([0.001, 5e6].into_iter());
        assert_eq!(labels(&wide), ["0.001", "0.1", "10", "1000", "100k", "10M"], "every other decade");
        let tight = Axis::log("ratio").tight().fit([1.0, 17.0].into_iter());
        assert_eq!(labels(&tight), ["1", "2", "5", "10"]);
        assert_eq!((tight.at(1.0), tight.at(17.0)), (Some(0.0), Some(1.0)));
        let custom = Axis::log("ratio").range(1.0, 100.0).ticks([(1.0, "1×"), (10.0, "10×"), (1000.0, "off")]);
        assert_eq!(labels(&custom.fit(std::iter::empty())), ["1×", "10×"]);
    }

    #[test]
    fn degenerate_data_still_gives_an_axis() {
        for data in [vec![], vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY], vec![5.0, 5.0], vec![0.0], vec![-3.0]] {
            for axis in [Axis::linear("a"), Axis::linear("a").tight(), Axis::log("a"), Axis::linear("a").from_zero()] {
                let t = axis.fit(data.iter().copied());
                assert!(t.span.lo < t.span.hi && t.span.lo.is_finite() && t.span.hi.is_finite(), "{data:?} {t:?}");
                assert!(!t.ticks.is_empty(), "{data:?} {axis:?}");
            }
        }
        let bad_range = Axis::linear("a").range(f64::NAN, 1.0).fit([2.0].into_iter());
        assert!(bad_range.span.lo < 2.0 && bad_range.span.hi > 2.0, "a bad range is ignored: {bad_range:?}");
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(tick_labels(&[0.0, 0.25, 0.5]), ["0", "0.25", "0.5"]);
        assert_eq!(tick_labels(&[0.0, 5e6, 1e7, 1.5e7]), ["0", "5M", "10M", "15M"]);
        assert_eq!(tick_labels(&[-2.0, 0.0, 2.0]), ["-2", "0", "2"]);
        assert_eq!(number(0.001), "0.001");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(9285.0), "9285");
        assert_eq!(number(12_345.0), "12.3k");
        assert_eq!(number(1.5e6), "1.5M");
        assert_eq!(number(-0.0), "0");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(Axis::log("p99 latency").unit("µs").title(), "p99 latency (µs)");
    }
}
