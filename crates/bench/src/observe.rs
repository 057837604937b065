//! `ioshare bench --observe`: the eBPF observer (`ioshare-observe`) watches each controller's run, so a
//! run shows how the block layer and its scheduler handled the IO the controller let through — the
//! seek distances at I (inserted into the scheduler) and D (issued to the driver), the share of
//! sequential IO at each, and the latencies Q→C, I→D, D→C — beside the bench's own figures.
//!
//! The observer is attached for one run at a time ([`Observations::observed`]) and filtered to the run's
//! disk (the target's disk for ioshare's runs, the peers' loop device for the kernel's), so runs without
//! it pay nothing. Rounds of one controller add up into one [`RunObserved`].
//!
//! The overhead scenario measures the observer's own cost on the IO path ([`Observations::toggled`]): the
//! uncontrolled reader runs once more per round ([`OBSERVED_NONE`]) while the observer is attached and
//! detached in turns of [`TOGGLE_WINDOW`], and each attached window's IOPS is compared with the
//! detached windows on either side of it. Separate runs a few seconds apart cannot judge a 3% cost on
//! this kind of shared virtual disk: two identical back-to-back runs differ by up to ±8%, and a run
//! with nothing attached read 95% of the run before it. One window's ratio scatters as much (5-8%),
//! but the windows are many, paired with their own neighbours, and average out: over a 30 s run the
//! estimate's standard error is ~0.7%.

use std::cell::RefCell;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ioshare_core::{Nanos, NSEC_PER_MSEC};

use ioshare_observe::{Histogram, Kind, Latency, Observer, Snapshot, Stage, Stages};
use serde::Serialize;

use crate::stats::median;
use crate::verdict::Side;
use ioshare_engine::report::RunReport;

/// Why a run on a file of no block device (tmpfs, overlay) goes unobserved.
const NO_DISK: &str = "its target is on no block device";
/// Name of the overhead scenario's extra run: no control, observer attached.
pub const OBSERVED_NONE: &str = "none+observe";
/// The observer's overhead target: IOPS with it attached at least this share of IOPS without.
pub const OBSERVE_OVERHEAD_MIN: f64 = 0.97;
/// How long the observer stays attached, then detached, in the [`OBSERVED_NONE`] run. Shorter windows
/// pair closer neighbours: on this machine's disk the attached-to-detached ratio of one window (no
/// programs' cost: an observer whose programs return at once) scattered by 7.5% at 100 ms windows,
/// 5.6% at 250 ms and 4.5% at 500 ms, so that per second of run 100 ms windows judge most precisely.
pub const TOGGLE_WINDOW: Duration = Duration::from_millis(100);
/// The engine's sample interval in that run: several samples per window, so that the one a toggle
/// touches can be left out.
pub const TOGGLE_SAMPLE: Nanos = 25 * NSEC_PER_MSEC;

/// One window of a toggled run: seconds since the toggler started, and whether the programs were
/// attached throughout (the toggles themselves lie between windows).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Start, s.
    pub from: f64,
    /// End, s.
    pub to: f64,
    /// Programs attached.
    pub attached: bool,
    /// CPU time the run's IO thread spent in the window, ns (`None`: not readable).
    pub cpu_ns: Option<u64>,
}

/// An attached window against the detached windows on either side of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Its IOPS over theirs (geometric mean).
    pub iops_ratio: f64,
    /// The IO thread's CPU per IO in it minus theirs (mean), ns: where the observer's time goes.
    pub extra_cpu_ns_per_io: Option<f64>,
}

/// What the observer saw during one controller's runs (all rounds added up).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunObserved {
    /// Who controlled the IO.
    pub side: Side,
    /// The controller (the run's name in the table).
    pub controller: String,
    /// The disk watched (`vda`, `loop3`).
    pub device: String,
    /// IOs completed on it (stage C).
    pub ios: u64,
    /// Seek distance histogram (sectors) at I, all cgroups and operations added up.
    pub seek_inserted: Histogram,
    /// The same at D: differs from I when the scheduler reordered.
    pub seek_issued: Histogram,
    /// Latency histograms (ns sums) Q→C, I→D, D→C.
    pub latency: Vec<Histogram>,
    /// The observer's own CPU time per IO completed, ns (kernel BPF run-time statistics; not taken in
    /// the overhead scenario's [`OBSERVED_NONE`] run, whose IOPS are the measure there: see
    /// [`Observations::toggled`]).
    pub cost_ns_per_io: Option<f64>,
}

impl RunObserved {
    fn from_delta(side: Side, controller: &str, device: String, d: &Snapshot) -> RunObserved {
        let ios = d.entries.iter().map(|e| e.stage(Stage::C).ios).sum();
        RunObserved {
            side,
            controller: controller.into(),
            device,
            ios,
            seek_inserted: d.merged_seek(Stage::I),
            seek_issued: d.merged_seek(Stage::D),
            latency: Latency::ALL.iter().map(|&l| d.merged_latency(l)).collect(),
            cost_ns_per_io: d.cost.and_then(|c| c.ns_per_io(ios)),
        }
    }

    /// Adds another round of the same controller.
    fn add(&mut self, other: &RunObserved) {
        let total = (self.ios + other.ios).max(1) as f64;
        self.cost_ns_per_io = match (self.cost_ns_per_io, other.cost_ns_per_io) {
            (Some(a), Some(b)) => Some((a * self.ios as f64 + b * other.ios as f64) / total),
            (a, b) => a.or(b),
        };
        self.ios += other.ios;
        self.seek_inserted.add(&other.seek_inserted);
        self.seek_issued.add(&other.seek_issued);
        for (mine, theirs) in self.latency.iter_mut().zip(&other.latency) {
            mine.add(theirs);
        }
    }
}

/// Attaches the observer around runs and keeps what it saw, for one scenario at a time.
#[derive(Debug)]
pub struct Observations {
    /// The disk of the target (ioshare's runs).
    target_disk: Option<(u32, u32)>,
    runs: RefCell<Vec<RunObserved>>,
    notes: RefCell<Vec<String>>,
}

impl Observations {
    /// Observations of runs on `target` (a file: its filesystem's disk; a block device: its disk).
    pub fn new(target: &Path) -> Observations {
        Observations {
            target_disk: ioshare_observe::disk_of(target),
            runs: RefCell::default(),
            notes: RefCell::default(),
        }
    }

    /// Runs `run` with the observer attached to `device` (`None`: the target's disk) and records what
    /// it saw under (`side`, `controller`). An observer that cannot start is noted; the run goes on.
    pub fn observed<E>(
        &self,
        side: Side,
        controller: &str,
        device: Option<&Path>,
        run: impl FnOnce() -> Result<RunReport, E>,
    ) -> Result<RunReport, E> {
        let disk = match device {
            Some(path) => ioshare_observe::disk_of(path),
            None => self.target_disk,
        };
        let Some(disk) = disk else {
            self.unobserved(controller, NO_DISK);
            return run();
        };
        let started =
            Observer::start_with(Some(disk), None, Stages::All).and_then(|mut o| o.measure_cost().map(|()| o));
        let mut observer = match started {
            Ok(o) => o,
            Err(e) => {
                self.unobserved(controller, e);
                return run();
            }
        };
        let before = observer.snapshot();
        let report = run()?;
        match (before, observer.snapshot()) {
            (Ok(before), Ok(after)) => self.keep(side, controller, disk, &after.since(&before)),
            (Err(e), _) | (_, Err(e)) => self.note(format!("observe: {controller}: {e}")),
        }
        Ok(report)
    }

    /// Runs `run` (no control, sampled every [`TOGGLE_SAMPLE`], its clock starting at the instant it
    /// is given) while a thread attaches and detaches the observer on the target's disk every
    /// [`TOGGLE_WINDOW`], detached first, on the same clock; returns the run and, per attached window
    /// after the warm-up (`warmup_s`), its comparison with its detached neighbours
    /// ([`compare_windows`]; the run must issue its IO from the calling thread). An observer that
    /// cannot start is noted and the run goes on unobserved (no comparisons).
    pub fn toggled<E>(
        &self,
        warmup_s: f64,
        run: impl FnOnce(Instant) -> Result<RunReport, E>,
    ) -> Result<(RunReport, Vec<Comparison>), E> {
        let Some(disk) = self.target_disk else {
            self.unobserved(OBSERVED_NONE, NO_DISK);
            return Ok((run(Instant::now())?, Vec::new()));
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let io_thread = ThreadCpuClock::of_this_thread();
        std::thread::scope(|scope| {
            // The observer lives on the toggler's thread (its skeleton stays where it was made).
            let toggler = scope.spawn(move || toggle(disk, io_thread, &ready_tx, &stop_rx));
            let joined = |t: std::thread::ScopedJoinHandle<'_, _>| {
                t.join().unwrap_or_else(|_| Err("the toggler panicked".into()))
            };
            // No time zero: the observer did not start, and the toggler says why.
            let Ok(t0) = ready_rx.recv() else {
                self.unobserved(OBSERVED_NONE, joined(toggler).err().unwrap_or_default());
                return Ok((run(Instant::now())?, Vec::new()));
            };
            let report = run(t0);
            drop(stop_tx);
            let toggled = joined(toggler);
            let report = report?;
            match toggled {
                Ok((windows, seen)) => {
                    self.keep(Side::Ioshare, OBSERVED_NONE, disk, &seen);
                    let compared = compare_windows(&report, &windows, warmup_s);
                    Ok((report, compared))
                }
                Err(why) => {
                    self.note(format!("observe: {OBSERVED_NONE}: {why}"));
                    Ok((report, Vec::new()))
                }
            }
        })
    }

    /// The observations and notes so far (it starts empty again).
    pub fn take(&self) -> (Vec<RunObserved>, Vec<String>) {
        (self.runs.take(), self.notes.take())
    }

    /// Keeps what the observer counted on `disk` during a run of (`side`, `controller`).
    fn keep(&self, side: Side, controller: &str, disk: (u32, u32), counted: &Snapshot) {
        let device = ioshare_observe::device_name(disk.0, disk.1).unwrap_or(format!("{}:{}", disk.0, disk.1));
        self.add(RunObserved::from_delta(side, controller, device, counted));
    }

    /// Adds `seen` to what was kept of the same (side, controller), or keeps it.
    fn add(&self, seen: RunObserved) {
        let mut runs = self.runs.borrow_mut();
        match runs.iter_mut().find(|r| r.side == seen.side && r.controller == seen.controller) {
            Some(r) => r.add(&seen),
            None => runs.push(seen),
        }
    }

    /// Notes that `controller`'s run went unobserved, and why.
    fn unobserved(&self, controller: &str, why: impl std::fmt::Display) {
        self.note(format!("observe: {controller} not observed: {why}"));
    }

    fn note(&self, note: String) {
        let mut notes = self.notes.borrow_mut();
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
}

/// The toggler's thread: starts the observer on `disk` (detached), sends the windows' time zero on
/// `ready`, then flips it every [`TOGGLE_WINDOW`] until `stop` is dropped, reading the CPU time of the
/// IO thread at each window's ends. Returns the windows and what the observer counted; an observer
/// that cannot start returns why without sending anything.
fn toggle(
    disk: (u32, u32),
    io_thread: Option<ThreadCpuClock>,
    ready: &mpsc::Sender<Instant>,
    stop: &mpsc::Receiver<()>,
) -> Result<(Vec<Window>, Snapshot), String> {
    let mut observer = Observer::start(Some(disk)).map_err(|e| e.to_string())?;
    let before = observer.snapshot().map_err(|e| e.to_string())?;
    observer.pause();
    let t0 = Instant::now();
    let _ = ready.send(t0);
    let cpu = || io_thread.and_then(|c| c.now_ns());
    let (mut windows, mut attached, mut from, mut cpu_from) = (Vec::new(), false, 0.0, cpu());
    for k in 1u32.. {
        let wait = (t0 + TOGGLE_WINDOW * k).saturating_duration_since(Instant::now());
        if stop.recv_timeout(wait) != Err(mpsc::RecvTimeoutError::Timeout) {
            break;
        }
        let cpu_ns = cpu().zip(cpu_from).map(|(to, from)| to.saturating_sub(from));
        windows.push(Window { from, to: t0.elapsed().as_secs_f64(), attached, cpu_ns });
        if attached {
            observer.pause();
        } else {
            observer.resume().map_err(|e| e.to_string())?;
        }
        attached = !attached;
        from = t0.elapsed().as_secs_f64();
        cpu_from = cpu();
    }
    let after = observer.snapshot().map_err(|e| e.to_string())?;
    Ok((windows, after.since(&before)))
}

/// The CPU-time clock of a thread of this process, readable from any of its threads (exact: the
/// kernel adds the running slice when it is read).
#[derive(Clone, Copy, Debug)]
struct ThreadCpuClock(libc::clockid_t);

impl ThreadCpuClock {
    /// The calling thread's clock (`None` if the kernel gives none).
    fn of_this_thread() -> Option<ThreadCpuClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self() is the calling thread; `id` is a valid place for the clock id.
        let ret = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (ret == 0).then_some(ThreadCpuClock(id))
    }

    /// CPU time so far, ns.
    fn now_ns(self) -> Option<u64> {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec for the kernel to fill in.
        let ret = unsafe { libc::clock_gettime(self.0, &mut ts) };
        (ret == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// Per attached window that ends after `warmup_s`, against the detached windows just before and after
/// it (either one at the run's ends): its IOPS (all tenants, over the samples wholly inside it, so
/// none a toggle touched) over their geometric mean (an arithmetic mean would tilt the geometric mean
/// of the ratios towards the detached side by about a quarter of their variance), and its IO thread's
/// CPU per IO (the window's CPU time over its IOPS × length) minus their mean. Windows that hold no
/// whole sample, or in which no IO completed (a stall of the disk), are left out.
pub fn compare_windows(report: &RunReport, windows: &[Window], warmup_s: f64) -> Vec<Comparison> {
    let iops = |w: &Window| -> Option<f64> {
        let from = w.from.max(warmup_s);
        let v: f64 = report.tenants.iter().map(|t| t.window_iops(from, w.to)).sum();
        (v.is_finite() && v > 0.0).then_some(v)
    };
    let rates: Vec<Option<f64>> = windows.iter().map(iops).collect();
    let cpu_per_io = |i: usize| {
        Some(windows[i].cpu_ns? as f64 / (rates[i]? * (windows[i].to - windows[i].from))).filter(|c| c.is_finite())
    };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut compared = Vec::new();
    for (i, _) in windows.iter().enumerate().filter(|(_, w)| w.attached) {
        let neighbours: Vec<usize> =
            [i.checked_sub(1), Some(i + 1)].into_iter().flatten().filter(|&j| j < windows.len()).collect();
        let off: Vec<f64> = neighbours.iter().filter_map(|&j| rates[j].map(f64::ln)).collect();
        let (Some(on), Some(off)) = (rates[i], mean(&off).map(f64::exp)) else { continue };
        let off_cpu: Vec<f64> = neighbours.iter().filter_map(|&j| cpu_per_io(j)).collect();
        compared.push(Comparison {
            iops_ratio: on / off,
            extra_cpu_ns_per_io: cpu_per_io(i).zip(mean(&off_cpu)).map(|(on, off)| on - off),
        });
    }
    compared
}

/// The estimate of the observer's cost from the windows' ratios, in run order: their geometric mean (a
/// window's ratio is as likely x as 1/x when nothing differs) and its standard error, as factors
/// (0.98, 0.01). Consecutive ratios share a detached window, so the error is widened by their lag-1
/// correlation (variance of the mean × (1 + 2ρ), ρ ≥ 0). `None` without windows.
pub fn overhead_estimate(ratios: &[f64]) -> Option<(f64, f64)> {
    if ratios.is_empty() {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let dev: Vec<f64> = logs.iter().map(|l| l - mean).collect();
    let ss: f64 = dev.iter().map(|d| d * d).sum();
    let var = ss / (n - 1.0).max(1.0);
    let rho = if ss > 0.0 { dev.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / ss } else { 0.0 };
    Some((mean.exp(), mean.exp() * (var / n * (1.0 + 2.0 * rho.max(0.0))).sqrt()))
}

/// The IOPS ratios of `compared` windows.
pub fn iops_ratios(compared: &[Comparison]) -> Vec<f64> {
    compared.iter().map(|c| c.iops_ratio).collect()
}

/// The overhead scenario's note on the observer's cost: per round and over all rounds, the geometric
/// mean of the attached windows' IOPS over their detached neighbours' ([`overhead_estimate`]; the one
/// over all rounds judges the [`OBSERVED_NONE`] row against [`OBSERVE_OVERHEAD_MIN`]), with its
/// standard error; and the IO thread's extra CPU per IO while attached (median over the windows).
/// `None` without windows.
pub fn overhead_note(rounds: &[Vec<Comparison>]) -> Option<String> {
    let all: Vec<Comparison> = rounds.concat();
    let (ratio, se) = overhead_estimate(&iops_ratios(&all))?;
    let per_round: Vec<String> = rounds
        .iter()
        .filter_map(|r| overhead_estimate(&iops_ratios(r)).map(|(m, _)| format!("{:.1}%", m * 100.0)))
        .collect();
    let extra: Vec<f64> = all.iter().filter_map(|c| c.extra_cpu_ns_per_io).collect();
    let cpu = median(&extra).map_or(String::new(), |m| {
        format!("; the IO thread's CPU per IO while attached {m:+.0} ns (median of windows)")
    });
    Some(format!(
        "observe overhead: IOPS while the eBPF observer is attached / detached, in turns of {} ms within one run per \
         round: per round {}; all {} windows {:.1}% ± {:.1}% (geometric mean ± standard error; judges the \
         {OBSERVED_NONE} row; a longer --duration narrows it){cpu}",
        TOGGLE_WINDOW.as_millis(),
        per_round.join(", "),
        all.len(),
        ratio * 100.0,
        se * 100.0
    ))
}

/// The table of a scenario's observations: per run, the seek distance at I and D (median and mean,
/// sequential share), the latencies, and the observer's cost.
pub fn table(observed: &[RunObserved]) -> String {
    use std::fmt::Write;
    if observed.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "observed (eBPF, per run): seek distance in sectors at I (into the scheduler) / D (to the driver)\n\
         {:<13} {:<9} {:<7} {:>9} {:>15} {:>19} {:>11} {:>13} {:>9} {:>13} {:>8}\n",
        "controller",
        "side",
        "device",
        "IOs",
        "seek p50 I/D",
        "seek mean I/D",
        "seq% I/D",
        "Q2C p50/p99",
        "I2D p99",
        "D2C p50/p99",
        "ns/IO"
    );
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    for r in observed {
        let seek = |h: &Histogram| opt(h.quantile(Kind::Seek, 0.5), &|v| format!("{v:.0}"));
        let mean =
            |h: &Histogram| opt((h.count() > 0).then(|| h.sum as f64 / h.count() as f64), &|v| format!("{v:.0}"));
        let seq = |h: &Histogram| {
            opt((h.count() > 0).then(|| h.buckets[0] as f64 / h.count() as f64), &|v| format!("{:.0}", v * 100.0))
        };
        let us =
            |l: Latency, q: f64| opt(r.latency[l as usize].quantile(Kind::Latency, q), &|v| format!("{:.0}", v * 1e6));
        let _ = writeln!(
            s,
            "{:<13} {:<9} {:<7} {:>9} {:>15} {:>19} {:>11} {:>13} {:>9} {:>13} {:>8}",
            r.controller,
            r.side.name(),
            r.device,
            r.ios,
            format!("{}/{}", seek(&r.seek_inserted), seek(&r.seek_issued)),
            format!("{}/{}", mean(&r.seek_inserted), mean(&r.seek_issued)),
            format!("{}/{}", seq(&r.seek_inserted), seq(&r.seek_issued)),
            format!("{}/{} us", us(Latency::QC, 0.5), us(Latency::QC, 0.99)),
            format!("{} us", us(Latency::ID, 0.99)),
            format!("{}/{} us", us(Latency::DC, 0.5), us(Latency::DC, 0.99)),
            opt(r.cost_ns_per_io, &|v| format!("{v:.0}"))
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(ios: u64, cost: f64, seek_bucket: usize) -> RunObserved {
        let mut seek = Histogram { buckets: vec![0; 8], sum: 0 };
        seek.buckets[seek_bucket] = ios;
        RunObserved {
            side: Side::Ioshare,
            controller: "none".into(),
            device: "vda".into(),
            ios,
            seek_inserted: seek.clone(),
            seek_issued: seek,
            latency: vec![Histogram { buckets: vec![0, ios], sum: ios * 1500 }; 3],
            cost_ns_per_io: Some(cost),
        }
    }

    #[test]
    fn rounds_of_one_controller_add_up() {
        let obs = Observations::new(Path::new("/nonexistent"));
        obs.add(seen(100, 300.0, 0));
        obs.add(seen(300, 500.0, 5));
        let (runs, notes) = obs.take();
        assert!(notes.is_empty());
        assert_eq!(runs.len(), 1);
        let r = &runs[0];
        assert_eq!(r.ios, 400);
        assert_eq!((r.seek_issued.buckets[0], r.seek_issued.buckets[5]), (100, 300));
        // Cost per IO is weighted by IOs: (100 × 300 + 300 × 500) / 400.
        assert_eq!(r.cost_ns_per_io, Some(450.0));
        assert_eq!(r.latency[0].count(), 400);
        let t = table(&runs);
        // 25% of the seeks are 0 (sequential); the median seek is in bucket 5 (8..16 sectors).
        assert!(t.contains("25/25"), "{t}");
        assert!(obs.take().0.is_empty(), "take empties the observations");
    }

    /// A run sampled every 25 ms at `iops(t)` for the sample ending at t (ms).
    fn sampled(until_ms: u32, iops: impl Fn(u32) -> f64) -> RunReport {
        let mut r = RunReport::default();
        let series = (1..=until_ms / 25)
            .map(|k| ioshare_engine::report::TenantSample {
                t_s: f64::from(k * 25) / 1000.0,
                iops: iops(k * 25),
                ..Default::default()
            })
            .collect();
        r.tenants.push(ioshare_engine::report::TenantReport { series, ..Default::default() });
        r
    }

    /// Windows of 100 ms in turns, detached first, each toggle taking 1 ms; the IO thread spends
    /// `cpu_ns` in each.
    fn windows(n: u32, cpu_ns: impl Fn(bool) -> u64) -> Vec<Window> {
        (0..n)
            .map(|k| Window {
                from: f64::from(k) * 0.1 + 0.001,
                to: f64::from(k + 1) * 0.1,
                attached: k % 2 == 1,
                cpu_ns: Some(cpu_ns(k % 2 == 1)),
            })
            .collect()
    }

    #[test]
    fn attached_windows_are_compared_with_their_detached_neighbours() {
        // 1000 IOPS while detached, 960 while attached; the samples a toggle touches (the first of each
        // window, which starts 1 ms before the window does) read 0 and must be left out.
        let attached = |t: u32| (t - 1) / 100 % 2 == 1;
        let run = sampled(600, |t| match (t % 100 == 25, attached(t)) {
            (true, _) => 0.0,
            (false, true) => 960.0,
            (false, false) => 1000.0,
        });
        // The IO thread: 0.099 s × 1000 IOPS × 4000 ns detached, 0.099 × 960 × 4500 attached.
        let cpu = |on: bool| if on { 99 * 960 * 4500 / 1000 } else { 99 * 1000 * 4000 / 1000 };
        let compared = compare_windows(&run, &windows(6, cpu), 0.0);
        assert_eq!(compared.len(), 3, "{compared:?}");
        for c in &compared {
            assert!((c.iops_ratio - 0.96).abs() < 1e-12, "{c:?}");
            assert!((c.extra_cpu_ns_per_io.unwrap() - 500.0).abs() < 1e-6, "{c:?}");
        }
        // A slow drift cancels: each attached window is held against both neighbours (their geometric
        // mean lies within 0.4% of their midpoint here, 1075 and 1275 around 1175).
        let drifting = sampled(600, |t| if attached(t) { 0.96 } else { 1.0 } * (1000.0 + f64::from(t)));
        let ratios = iops_ratios(&compare_windows(&drifting, &windows(6, cpu), 0.0));
        assert!(ratios.iter().take(2).all(|r| (r - 0.96).abs() < 0.004), "{ratios:?}");
        // A window in which nothing completed (a stalled disk) is left out instead of reading 0.
        let stalled = sampled(600, |t| if (t - 1) / 100 == 3 { 0.0 } else { 1000.0 });
        assert_eq!(compare_windows(&stalled, &windows(6, cpu), 0.0).len(), 2);
        // Windows before the warm-up's end are not judged.
        assert_eq!(compare_windows(&run, &windows(6, cpu), 0.4).len(), 1);
    }

    #[test]
    fn the_estimate_is_the_geometric_mean_with_its_standard_error() {
        // Ratios x and 1/x (noise only) average to exactly 1.
        let (m, se) = overhead_estimate(&[1.1, 1.0 / 1.1, 1.05, 1.0 / 1.05]).unwrap();
        assert!((m - 1.0).abs() < 1e-12 && se > 0.0, "{m} {se}");
        let (m, se) = overhead_estimate(&[0.97; 5]).unwrap();
        assert!((m - 0.97).abs() < 1e-12 && se.abs() < 1e-12);
        // Runs of similar ratios (neighbours sharing a window) widen the error: the same values in an
        // order where each follows a like one give a larger error than alternating.
        let alternating = overhead_estimate(&[0.9, 1.1, 0.9, 1.1, 0.9, 1.1]).unwrap().1;
        let runs = overhead_estimate(&[0.9, 0.9, 0.9, 1.1, 1.1, 1.1]).unwrap().1;
        assert!(runs > alternating * 1.2, "{runs} vs {alternating}");
        assert_eq!(overhead_estimate(&[]), None);
        let c = |iops_ratio: f64, extra: f64| Comparison { iops_ratio, extra_cpu_ns_per_io: Some(extra) };
        let note = overhead_note(&[vec![c(0.97, 300.0), c(0.99, 500.0)], vec![c(0.98, 400.0)]]).unwrap();
        assert!(note.contains("per round 98.0%, 98.0%; all 3 windows 98.0% ±"), "{note}");
        assert!(note.contains("CPU per IO while attached +400 ns (median of windows)"), "{note}");
        assert_eq!(overhead_note(&[vec![], vec![]]), None);
    }

    #[test]
    fn a_run_on_no_block_device_is_noted_and_still_runs() {
        let obs = Observations::new(Path::new("/nonexistent"));
        let report = obs.observed(Side::Ioshare, "none", None, || Ok::<_, String>(RunReport::default())).unwrap();
        assert_eq!(report, RunReport::default());
        let (runs, notes) = obs.take();
        assert!(runs.is_empty());
        assert_eq!(notes, ["observe: none not observed: its target is on no block device"]);
    }
}
