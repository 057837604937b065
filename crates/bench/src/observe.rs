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
//! detached in turns ([`crate::windows`]).

use std::cell::RefCell;
use std::path::Path;
use std::sync::mpsc;
use std::time::Instant;

use ioshare_observe::{Histogram, Kind, Latency, Observer, Snapshot, Stage, Stages};
use serde::Serialize;

use crate::stats::median;
use crate::verdict::Side;
use crate::windows::{
    compare_windows, iops_ratios, overhead_estimate, Comparison, ThreadCpuClock, Window, TOGGLE_WINDOW,
};
use ioshare_engine::report::RunReport;

/// Why a run on a file of no block device (tmpfs, overlay) goes unobserved.
const NO_DISK: &str = "its target is on no block device";
/// Name of the overhead scenario's extra run: no control, observer attached.
pub const OBSERVED_NONE: &str = "none+observe";
/// The observer's overhead target: IOPS with it attached at least this share of IOPS without.
pub const OBSERVE_OVERHEAD_MIN: f64 = 0.97;
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

    /// Runs `run` (no control, sampled every [`crate::windows::TOGGLE_SAMPLE`], its clock starting at the instant it
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
        windows.push(Window { from, to: t0.elapsed().as_secs_f64(), on: attached, cpu_ns });
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

    #[test]
    fn the_note_gives_each_round_and_all_windows() {
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
