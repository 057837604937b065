//! Drift from a tuned curve: a device whose lines came from a tune result (`model =
//! "tune:FILE#SOLUTION"`, [`crate::desired::tuned`]) is watched for an observed latency the result's
//! fit no longer predicts — a disk that aged, a firmware change — and `agent status` flags it with
//! the command that re-tunes it.
//!
//! The curve is the result's fitted latency against vrate ([`TuneResult::latency_curve`]: a sweep's
//! p99 beside the antagonist, or a trace's median per-period read latency), read once when the
//! configuration names the result. The solution in force scales the model by its vrate V, so a
//! period's vrate v (percent of that model) is V × v / 100 on the curve's axis. Each status the
//! agent writes after a new period is judged: a **busy** period (reads completed, and the groups
//! used at least [`BUSY_USAGE`] of the device's time) **exceeds** the curve when its mean read
//! latency is more than [`TOLERANCE`] above the fit's value there. The last [`WINDOW`] of periods
//! is kept in a ring of booleans allocated when the result is read (nothing is allocated per
//! period); the device is flagged `drift` when at least [`MIN_JUDGED`] busy periods are in the
//! window and more than half of them exceed the curve. Comparing a period's mean with a fit of
//! p99 (a sweep's) errs towards not flagging: only a clear rise is reported.
//!
//! The re-tune command: from the agent's own trace (`ioshare tune --from-trace`) when the QoS lets
//! vrate move (min < max; a trace of a pinned vrate has one vrate bin), else a new sweep.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::ModelConfig;
use ioshare_tune::fit::Fit;
use ioshare_tune::TuneResult;

use crate::desired::config::{Config, DeviceConfig};
use crate::desired::tuned::Tuned;
use crate::report::status::drift::DriftLine;
use crate::report::status::{DeviceLine, Status};

/// How much above the fit a period's latency must be to exceed it (0.5: 50% above).
pub const TOLERANCE: f64 = 0.5;
/// The sliding window of periods judged.
pub const WINDOW: Duration = Duration::from_secs(300);
/// Fewest busy periods in the window before a device can be flagged.
pub const MIN_JUDGED: u32 = 30;
/// Share of the period the groups must have used the device for it to count as busy.
pub const BUSY_USAGE: f64 = 0.5;

/// Whether a busy period's mean read latency `lat_us` at vrate `vrate_pct` (percent of the model in
/// force, the solution's at `solution_vrate_pct`) is more than [`TOLERANCE`] above `curve`.
pub fn exceeds(curve: &Fit, solution_vrate_pct: f64, vrate_pct: f64, lat_us: f64) -> bool {
    let x = (solution_vrate_pct * vrate_pct / 100.0).clamp(curve.lo, curve.hi);
    lat_us > curve.at(x) * (1.0 + TOLERANCE)
}

/// One watched device.
#[derive(Debug)]
struct Watched {
    device: String,
    source: Tuned,
    /// The fit and the solution's vrate; `Err`: why the result gives none.
    curve: Result<(Fit, f64), String>,
    retune: String,
    ring: Vec<bool>,
    next: usize,
    judged: u32,
    exceeded: u32,
}

impl Watched {
    fn new(d: &DeviceConfig, source: &Tuned, period: Duration) -> Watched {
        let loaded = TuneResult::load(&source.file).map_err(|e| e.to_string());
        let curve = loaded.as_ref().map_err(Clone::clone).and_then(|r| {
            r.latency_curve(&source.solution)
                .ok_or_else(|| format!("'{}' has no latency fit to compare with", source.file.display()))
        });
        let trace = loaded.ok().and_then(|r| r.from_trace).map(|t| t.trace);
        let size = (WINDOW.as_secs_f64() / period.as_secs_f64().max(1e-3)).ceil().max(1.0) as usize;
        Watched {
            device: d.device.name.clone(),
            source: source.clone(),
            curve,
            retune: retune(d, &source.file, trace.as_deref()),
            ring: vec![false; size],
            next: 0,
            judged: 0,
            exceeded: 0,
        }
    }

    /// Judges one period of the device (`line`); an idle one only ages the window.
    fn observe(&mut self, line: &DeviceLine) {
        let Ok((curve, v)) = &self.curve else { return };
        let usage: f64 = line.groups.iter().map(|g| g.usage_share).sum();
        let busy = line.lat_us[0] > 0.0 && usage >= BUSY_USAGE;
        if !busy {
            return;
        }
        let over = exceeds(curve, *v, line.vrate_pct, line.lat_us[0]);
        // The ring's first `judged` slots are filled; once all are, `next` is the oldest.
        if (self.judged as usize) < self.ring.len() {
            self.ring[self.judged as usize] = over;
            self.judged += 1;
        } else {
            let old = std::mem::replace(&mut self.ring[self.next], over);
            self.next = (self.next + 1) % self.ring.len();
            self.exceeded -= u32::from(old);
        }
        self.exceeded += u32::from(over);
    }

    fn line(&self) -> DriftLine {
        let drift = self.judged >= MIN_JUDGED && self.exceeded * 2 > self.judged;
        DriftLine {
            device: self.device.clone(),
            tuned: format!("{}#{}", self.source.file.display(), self.source.solution),
            judged: self.judged,
            exceeded: self.exceeded,
            drift,
            retune: match &self.curve {
                Ok(_) => self.retune.clone(),
                Err(why) => why.clone(),
            },
        }
    }
}

/// The command that re-tunes device `d` into a new file beside `file`.
fn retune(d: &DeviceConfig, file: &Path, trace: Option<&str>) -> String {
    let new = PathBuf::from(format!("{}.new", file.display()));
    let pinned = d.qos.is_none_or(|q| q.min_ppm == q.max_ppm);
    if pinned {
        return format!(
            "ioshare tune DIR --out {} (DIR: a directory on {}; a trace of its pinned vrate cannot be fitted)",
            new.display(),
            d.device.name
        );
    }
    let model = ModelConfig { device: None, ctrl: Ctrl::User, params: d.model };
    format!(
        "ioshare tune --from-trace {} --device {} --model '{model}' -o {}",
        trace.unwrap_or("TRACE (the agent's --trace file)"),
        d.device.name,
        new.display()
    )
}

/// The watched devices of the configuration in force.
#[derive(Debug, Default)]
pub struct DriftWatch {
    watched: Vec<Watched>,
    last_period: Option<u64>,
}

impl DriftWatch {
    /// Judges the periods `status` is of (once per period) and adds each watched device's line to it.
    pub fn observe(&mut self, config: &Config, status: &mut Status) {
        self.sync(config);
        if self.last_period != Some(status.periods) {
            self.last_period = Some(status.periods);
            for w in &mut self.watched {
                if let Some(line) = status.devices.iter().find(|l| l.device == w.device) {
                    w.observe(line);
                }
            }
        }
        status.drift = self.watched.iter().map(Watched::line).collect();
    }

    /// Watches the tuned devices of `config`: a result is read when first named (or named anew).
    fn sync(&mut self, config: &Config) {
        let tuned = || config.devices.iter().filter_map(|d| Some((d, d.tuned.as_ref()?)));
        let current = |w: &Watched| tuned().any(|(d, t)| d.device.name == w.device && *t == w.source);
        self.watched.retain(current);
        for (d, t) in tuned() {
            if !self.watched.iter().any(|w| w.device == d.device.name) {
                self.watched.push(Watched::new(d, t, config.period));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::status::fixture;
    use ioshare_tune::fit::{Piecewise, Shape};

    /// Flat 500 µs up to 80%, rising to 2500 µs at 120% (on the result's vrate axis).
    fn curve() -> Fit {
        let line = Piecewise { x1: 80.0, x2: 120.0, y1: 500.0, y2: 2500.0 };
        Fit { shape: Shape::Valley, lo: 50.0, hi: 150.0, split: 50.0, left: line, right: line, rms: 0.0, outliers: 0 }
    }

    fn watched(size: usize) -> Watched {
        Watched {
            device: "loop3".into(),
            source: Tuned { file: "t.json".into(), solution: "rlat-q1".into(), measured_at: 0 },
            curve: Ok((curve(), 100.0)),
            retune: "ioshare tune".into(),
            ring: vec![false; size],
            next: 0,
            judged: 0,
            exceeded: 0,
        }
    }

    fn period(vrate_pct: f64, lat_us: f64) -> DeviceLine {
        let g = crate::report::status::GroupLine { usage_share: 0.9, ..fixture::group("t/a", "running", [0; 4]) };
        DeviceLine { vrate_pct, lat_us: [lat_us, 0.0], ..fixture::device(vec![g]) }
    }

    #[test]
    fn latency_twice_the_fit_is_drift_and_matching_it_is_not() {
        // The solution's vrate is 100% of the result's axis: the model in force is scaled by 1, so a
        // period at vrate 90% sits at 90 on the curve (1000 µs there; exceeded above 1500 µs).
        assert!(exceeds(&curve(), 100.0, 90.0, 2000.0) && !exceeds(&curve(), 100.0, 90.0, 1400.0));
        // At 200% the model in force is scaled by 2: vrate 50% is 100 on the curve (1500 µs).
        assert!(!exceeds(&curve(), 200.0, 50.0, 1600.0) && exceeds(&curve(), 200.0, 50.0, 3000.0));
        let mut w = watched(100);
        for i in 0..60 {
            let v = 80.0 + f64::from(i % 5) * 10.0;
            w.observe(&period(v, 2.0 * curve().at(v)));
        }
        assert!(w.line().drift, "{:?}", w.line());
        let mut w = watched(100);
        for i in 0..60 {
            let v = 80.0 + f64::from(i % 5) * 10.0;
            w.observe(&period(v, curve().at(v) * 1.1));
        }
        let line = w.line();
        assert!(!line.drift && line.judged == 60 && line.exceeded == 0, "{line:?}");
    }

    #[test]
    fn the_window_forgets_old_periods_and_idle_ones_do_not_count() {
        let mut w = watched(40);
        for _ in 0..40 {
            w.observe(&period(100.0, 10_000.0));
        }
        assert!(w.line().drift);
        for _ in 0..40 {
            w.observe(&period(100.0, 1000.0));
            w.observe(&DeviceLine { lat_us: [0.0, 0.0], ..period(100.0, 0.0) });
        }
        let line = w.line();
        assert!(!line.drift && (line.judged, line.exceeded) == (40, 0), "{line:?}");
        // Too few busy periods: never flagged, whatever they show.
        let mut w = watched(100);
        for _ in 0..MIN_JUDGED - 1 {
            w.observe(&period(100.0, 10_000.0));
        }
        assert!(!w.line().drift);
    }
}
