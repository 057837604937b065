//! Tuning in place (`ioshare tune --from-trace TRACE`): the series a sweep measures, as far as an
//! agent trace recorded under real load can give them, fitted with the sweep's own code
//! ([`crate::fit`]) and turned into solutions the sweep's way ([`crate::solve::pinned`]).
//!
//! The trace (`ioshare agent run --trace FILE`, userspace backend; the kernel backend writes none)
//! is one JSON line per device per period. It is read here with a small struct of the fields used
//! (time, device, busy, read latency, vrate, work done, each cgroup's IOs), not the agent's type:
//! the agent depends on this crate, not the other way round.
//!
//! Which periods count: those where the device was **busy** (busy time or IOs in flight, the
//! agent's own verdict) and **reads completed** (a read latency to read). An idle or lightly used
//! device's latency and work say what the tenants asked for, not what the vrate let through: only
//! when the device is busy does vrate bound the work and set the queueing latency. Those periods are
//! binned by vrate in [`BIN_PCT`] steps (the agent's vrate moves under load: the bins are the points
//! a sweep would pin); a bin with fewer than [`MIN_BIN_PERIODS`] is dropped. Fewer than
//! [`MIN_PERIODS`] informative periods or [`MIN_BINS`] bins is refused, saying how much more traced
//! load is needed.
//!
//! Per bin: the median and 99th percentile of the periods' mean read latency (net of size; the
//! trace has no per-IO latency), the cgroups' IOPS and the work done (percent of the model's
//! capacity). What a trace cannot give: MOF and aMOF (no paced tenant probes the most it can do
//! within a target), isolation (a cgroup's demand — what it asked for — is not recorded, only what
//! it got) and work conserved (no uncontrolled baseline). So the `isolation` and
//! `isolated-bandwidth` solutions are not offered; the ones the data supports are `bandwidth` (the
//! lowest vrate where the work done reaches its top), `latency-knee` (the highest vrate before the
//! median latency rises), `rlat-q1`…`rlat-q4` (along that rise) and, with a target, `target-p99`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::{ModelConfig, QosConfig, QosParams};
use serde::Deserialize;

use crate::data::{Baseline, ControlledBy, DeviceId, Settings, TraceBin, TraceSource, TuneResult, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::fit::Shape;
use crate::grid::Grid;
use crate::solve::{fit_series, pinned, Predicted, SeriesSpec, Solved, MIN_POINTS};

/// Width of a vrate bin, percent.
pub const BIN_PCT: f64 = 5.0;
/// Fewest informative periods a bin needs.
pub const MIN_BIN_PERIODS: usize = 5;
/// Fewest informative periods a trace needs.
pub const MIN_PERIODS: usize = 50;
/// Fewest vrate bins a trace needs (a fit needs [`MIN_POINTS`]).
pub const MIN_BINS: usize = MIN_POINTS;

/// The fields of the agent's period record read here.
#[derive(Deserialize)]
struct Period {
    t_s: f64,
    device: String,
    elapsed_s: f64,
    busy: bool,
    lat_us: [f64; 2],
    delivered_pct: f64,
    vrate_pct: f64,
    #[serde(default)]
    groups: Vec<GroupIos>,
}

#[derive(Deserialize)]
struct GroupIos {
    ios: [u64; 2],
}

/// What `--from-trace` is given besides the trace.
#[derive(Clone, Debug)]
pub struct TraceOptions {
    /// The device to read (needed when the trace has several).
    pub device: Option<String>,
    /// The cost model in force while the trace was recorded (`io.cost.model` line): the trace's
    /// vrate scales it, and the solutions scale it.
    pub model_line: String,
    /// The QoS in force (its latency targets set the planning period of the solutions).
    pub qos_line: Option<String>,
}

/// Reads the trace at `path` and builds a result from its informative periods; an error line
/// saying what is missing otherwise (another device, too little load).
pub fn read(path: &Path, opts: &TraceOptions) -> Result<TuneResult> {
    let bad = |reason: String| Error::BadResult { path: path.to_path_buf(), reason };
    let model = opts.model_line.parse::<ModelConfig>().map_err(|e| {
        Error::InvalidOptions(format!("--model '{}': {e}: give the io.cost.model line in force", opts.model_line))
    })?;
    let qos = match &opts.qos_line {
        Some(q) => q.parse::<QosConfig>().map_err(|e| Error::InvalidOptions(format!("--qos '{q}': {e}")))?,
        None => QosConfig { device: None, ctrl: Ctrl::User, params: QosParams::default() },
    };
    let periods = load(path)?;
    let device = pick_device(&periods, opts.device.as_deref()).map_err(bad)?;
    let mine: Vec<&Period> = periods.iter().filter(|p| p.device == device).collect();
    let informative: Vec<&Period> =
        mine.iter().copied().filter(|p| p.busy && p.lat_us[0] > 0.0 && p.elapsed_s > 0.0).collect();
    let bins = bin(&informative);
    if informative.len() < MIN_PERIODS || bins.len() < MIN_BINS {
        return Err(bad(too_little(&device, &mine, &informative, bins.len())));
    }
    let span_s = (mine.first().map_or(0.0, |p| p.t_s), mine.last().map_or(0.0, |p| p.t_s));
    let (lo, hi) = (bins[0].vrate_pct, bins[bins.len() - 1].vrate_pct);
    let measured_at = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let dev_path = Path::new("/dev").join(&device);
    let disk = ioshare_engine::profile::disk::disk_of(&dev_path);
    let size = std::fs::read_to_string(Path::new("/sys/class/block").join(&device).join("size"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(0, |sectors| sectors * 512);
    Ok(TuneResult {
        version: FORMAT_VERSION,
        measured_at,
        device: DeviceId {
            name: Some(device.clone()),
            dev: disk.map(|d| d.dev.to_string()),
            kind: "block device (agent trace)".into(),
            model: DeviceId::model_of(&dev_path),
            size,
        },
        settings: Settings {
            grid: Grid { min_pct: lo.max(1.0), max_pct: hi, step_pct: BIN_PCT, dither_pct: 0.0 },
            weights: (0, 0),
            lat_target_us: qos.params.rlat_us,
            quick: false,
            model_line: ModelConfig { device: None, ..model }.to_string(),
            qos_line: QosConfig { device: None, ..qos }.to_string(),
            // Only the userspace backend, ioshare's IOCost planner, writes a trace.
            controller: ControlledBy::Inline,
        },
        baseline: Baseline::default(),
        points: Vec::new(),
        notes: vec!["fitted from an agent trace: no MOF, aMOF, isolation or work conserved (the trace records \
                     what each cgroup got, not what it asked for, and has no uncontrolled baseline)"
            .into()],
        from_trace: Some(TraceSource {
            trace: path.display().to_string(),
            device,
            span_s,
            periods: mine.len(),
            informative: informative.len(),
            bins,
        }),
    })
}

fn load(path: &Path) -> Result<Vec<Period>> {
    let bad = |reason: String| Error::BadResult { path: path.to_path_buf(), reason };
    let file = File::open(path).map_err(|e| bad(format!("cannot open the trace: {e}")))?;
    let mut periods = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| bad(format!("cannot read the trace: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let p: Period = serde_json::from_str(&line).map_err(|e| {
            bad(format!("line {}: not an agent trace record ({e}): write one with `ioshare agent run --trace`", i + 1))
        })?;
        periods.push(p);
    }
    Ok(periods)
}

/// The device to read: `asked`, which the trace must have, or the trace's only one.
fn pick_device(periods: &[Period], asked: Option<&str>) -> std::result::Result<String, String> {
    let mut names: Vec<&str> = periods.iter().map(|p| p.device.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    match (asked, names.as_slice()) {
        (_, []) => Err("the trace has no periods: run the agent with --trace under load".into()),
        (Some(d), _) if names.contains(&d) => Ok(d.to_string()),
        (Some(d), _) => Err(format!(
            "the trace has no periods of device {d}: it is of {} (give --device with one of them)",
            names.join(", ")
        )),
        (None, [one]) => Ok(one.to_string()),
        (None, _) => Err(format!("the trace has several devices ({}): choose one with --device", names.join(", "))),
    }
}

/// The informative periods binned by vrate; bins with fewer than [`MIN_BIN_PERIODS`] dropped.
fn bin(periods: &[&Period]) -> Vec<TraceBin> {
    let mut by_bin: BTreeMap<i64, Vec<&Period>> = BTreeMap::new();
    for p in periods {
        by_bin.entry((p.vrate_pct / BIN_PCT).round() as i64).or_default().push(p);
    }
    by_bin
        .into_values()
        .filter(|ps| ps.len() >= MIN_BIN_PERIODS)
        .map(|ps| {
            let n = ps.len() as f64;
            let secs: f64 = ps.iter().map(|p| p.elapsed_s).sum();
            let ios: u64 = ps.iter().flat_map(|p| &p.groups).map(|g| g.ios[0] + g.ios[1]).sum();
            let mut lat: Vec<f64> = ps.iter().map(|p| p.lat_us[0]).collect();
            lat.sort_by(f64::total_cmp);
            TraceBin {
                vrate_pct: ps.iter().map(|p| p.vrate_pct).sum::<f64>() / n,
                periods: ps.len(),
                iops: ios as f64 / secs,
                delivered_pct: ps.iter().map(|p| p.delivered_pct).sum::<f64>() / n,
                lat_p50_us: quantile(&lat, 0.5),
                lat_p99_us: quantile(&lat, 0.99),
            }
        })
        .collect()
}

/// The `q` quantile of sorted `v` (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

/// The one line saying how much more traced load is needed.
fn too_little(device: &str, mine: &[&Period], informative: &[&Period], bins: usize) -> String {
    let period_s = mine.iter().map(|p| p.elapsed_s).sum::<f64>() / mine.len().max(1) as f64;
    let more = MIN_PERIODS.saturating_sub(informative.len());
    let time = if more > 0 && period_s > 0.0 {
        format!(" (about {:.0} s more of busy device at this period)", more as f64 * period_s)
    } else {
        String::new()
    };
    format!(
        "too little load on {device} to tune from: {} informative (busy, with reads) of {} periods in {bins} vrate \
         bin(s) of {BIN_PCT}% with {MIN_BIN_PERIODS}+ periods; need {MIN_PERIODS}+ periods over {MIN_BINS}+ bins: \
         trace longer under load{time}, with a vrate range in the QoS (min < max) so that vrate moves",
        informative.len(),
        mine.len()
    )
}

/// The series a trace gives: name, label, value of a bin, expected shape, outliers dropped.
const SERIES: [SeriesSpec<TraceBin>; 4] = [
    ("work", "work done, % of the model's capacity", |b| b.delivered_pct, Shape::Rising, false),
    ("iops", "IOPS of the cgroups", |b| b.iops, Shape::Rising, false),
    ("lat", "median of the periods' mean read latency, us", |b| b.lat_p50_us, Shape::Valley, true),
    ("lat-p99", "p99 of the periods' mean read latency, us", |b| b.lat_p99_us, Shape::Valley, true),
];

/// The fits and solutions of a result fitted from a trace (`source`: its bins).
pub fn solve(r: &TuneResult, source: &TraceSource, target_p99_us: Option<u64>) -> Solved {
    let series = fit_series(&SERIES, &source.bins, |b| b.vrate_pct);
    let get = |name: &str| series.iter().find(|s| s.name == name).and_then(|s| s.fit);
    let mut notes = Vec::new();
    let (Some(work), Some(iops), Some(lat), Some(p99)) = (get("work"), get("iops"), get("lat"), get("lat-p99")) else {
        notes.push(format!("{} vrate bin(s): solutions need at least {MIN_POINTS}", source.bins.len()));
        return Solved { series, solutions: Vec::new(), notes };
    };
    let predict = |v: f64| Predicted {
        mof_iops: iops.at(v),
        amof_iops: f64::NAN,
        isolation: f64::NAN,
        lat_p99_us: p99.at(v),
        work_conserved: f64::NAN,
    };
    if lat.right.is_flat() {
        notes.push(format!(
            "the median read latency does not rise within the traced vrates ({:.0}..{:.0}%): latency-knee and \
             rlat-q* are the top of that range, not a knee; trace under more load for one",
            lat.lo, lat.hi
        ));
    }
    let at = |name: &str, v: f64| pinned(r, name, v, predict(v));
    let mut solutions = vec![at("bandwidth", work.reaches_level()), at("latency-knee", lat.leaves_level())];
    for q in 1..=4 {
        solutions.push(at(&format!("rlat-q{q}"), lat.along_slope(q as f64 / 4.0)));
    }
    if let Some(t) = target_p99_us {
        match p99.highest_at_most(t as f64) {
            Some(v) => solutions.push(at("target-p99", v)),
            None => notes.push(format!(
                "no traced vrate keeps the p99 of the periods' read latency within {t} us (the lowest fitted is {:.0} \
                 us)",
                p99.at(p99.split)
            )),
        }
    }
    Solved { series, solutions, notes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const MODEL: &str = "ctrl=user model=linear rbps=1000000000 rseqiops=50000 rrandiops=40000 wbps=1000000000 \
                         wseqiops=50000 wrandiops=40000";

    /// A trace of `n` periods of 0.1 s on `device`, vrate sweeping 50–150% and back: read latency
    /// flat at 400 µs up to 100%, then 20 µs more per percent (±3% deterministic ripple); every
    /// seventh period idle with an absurd latency, which must not count.
    fn trace(path: &Path, device: &str, n: usize) {
        let mut f = File::create(path).unwrap();
        for i in 0..n {
            let phase = (i % 200) as f64 / 100.0;
            let v = 50.0 + 100.0 * if phase <= 1.0 { phase } else { 2.0 - phase };
            let ripple = 1.0 + 0.03 * ((i * 7919) % 13) as f64 / 6.0 - 0.03;
            let busy = i % 7 != 0;
            let lat = if busy { (400.0 + 20.0 * (v - 100.0).max(0.0)) * ripple } else { 50_000.0 };
            let rec = serde_json::json!({
                "t_s": i as f64 * 0.1, "device": device, "elapsed_s": 0.1, "util": 1.0, "inflight": 8.0,
                "busy": busy, "lat_us": [lat, 900.0], "rq_wait": false, "delivered_pct": v.min(90.0),
                "vrate_pct": v, "busy_level": 0, "groups": [{ "ios": [(v * 10.0) as u64, 5] }]
            });
            writeln!(f, "{rec}").unwrap();
        }
    }

    fn opts(device: Option<&str>) -> TraceOptions {
        TraceOptions { device: device.map(str::to_string), model_line: MODEL.into(), qos_line: None }
    }

    #[test]
    fn the_latency_knee_is_found_from_a_trace_and_solved_like_a_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        trace(&path, "loop9", 400);
        let r = read(&path, &opts(None)).unwrap();
        let src = r.from_trace.as_ref().unwrap();
        // 400 periods, one in seven idle: 342 informative, over the 21 bins of 50..150 by 5.
        assert_eq!((src.periods, src.informative, src.bins.len()), (400, 342, 21), "{src:?}");
        let solved = r.solutions(Some(1000));
        let sol = |name: &str| solved.solutions.iter().find(|s| s.name == name).unwrap().vrate_pct;
        // The knee is at 100%; the bins are 5% wide and their vrate is their periods' mean: within a bin.
        assert!((sol("latency-knee") - 100.0).abs() <= BIN_PCT, "{:?}", solved.solutions);
        // Work stops rising at 90%.
        assert!((sol("bandwidth") - 90.0).abs() <= BIN_PCT, "{:?}", solved.solutions);
        // 1000 µs is reached at 130% (400 + 20 × 30), the p99 with its ripple a little before.
        assert!((120.0..=131.0).contains(&sol("target-p99")), "{:?}", solved.solutions);
        assert!(sol("rlat-q1") < sol("rlat-q4"));
        // A solution pins the model scaled by its vrate, as a sweep's do; the file round-trips.
        let out = dir.path().join("tuned.json");
        r.save(&out).unwrap();
        let applied = TuneResult::load(&out).unwrap().solution(Some("latency-knee")).unwrap();
        assert!(applied.qos_line.contains("min=100.00 max=100.00"), "{}", applied.qos_line);
        let (curve, v) = TuneResult::load(&out).unwrap().latency_curve("latency-knee").unwrap();
        assert!((curve.at(140.0) - 1200.0).abs() < 100.0 && v == sol("latency-knee"), "{curve:?}");
    }

    #[test]
    fn too_little_load_and_another_device_are_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        trace(&path, "loop9", 40);
        let e = read(&path, &opts(None)).unwrap_err().to_string();
        assert!(e.contains("too little load on loop9") && e.contains("need 50+ periods"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        trace(&path, "loop9", 400);
        let e = read(&path, &opts(Some("nvme0n1"))).unwrap_err().to_string();
        assert!(e.contains("no periods of device nvme0n1: it is of loop9"), "{e}");
        let bad = TraceOptions { model_line: "rbps=x".into(), ..opts(None) };
        assert!(read(&path, &bad).unwrap_err().to_string().contains("--model 'rbps=x'"));
    }
}
