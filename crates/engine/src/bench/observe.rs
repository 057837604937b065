//! `ioshare bench --observe`: the eBPF observer (`ioshare-observe`) watches each controller's run, so a
//! run shows how the block layer and its scheduler handled the IO the controller let through — the
//! seek distances at I (inserted into the scheduler) and D (issued to the driver), the share of
//! sequential IO at each, and the latencies Q→C, I→D, D→C — beside the bench's own figures.
//!
//! The observer is attached for one run at a time ([`Recorder::observed`]) and filtered to the run's
//! disk (the target's disk for ioshare's runs, the peers' loop device for the kernel's), so runs without
//! it pay nothing: the overhead scenario uses that to measure the observer's own cost, running the
//! uncontrolled reader once more per round with the observer attached ([`OBSERVED_NONE`]).
//! Rounds of one controller add up into one [`RunObserved`].

use std::cell::RefCell;
use std::path::Path;

use ioshare_observe::{Histogram, Kind, Latency, Observer, Snapshot, Stage};
use serde::Serialize;

use super::Side;
use crate::error::Result;
use crate::report::RunReport;

/// Name of the overhead scenario's extra run: no control, observer attached.
pub const OBSERVED_NONE: &str = "none+observe";
/// The observer's overhead target: IOPS with it attached at least this share of IOPS without (issue 10).
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
    /// the overhead scenario's [`OBSERVED_NONE`] run, whose IOPS are the measure there).
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
pub struct Recorder {
    /// The disk of the target (ioshare's runs).
    target_disk: Option<(u32, u32)>,
    runs: RefCell<Vec<RunObserved>>,
    notes: RefCell<Vec<String>>,
}

impl Recorder {
    /// A recorder for runs on `target` (a file: its filesystem's disk; a block device: its disk).
    pub fn new(target: &Path) -> Recorder {
        Recorder { target_disk: ioshare_observe::disk_of(target), runs: RefCell::default(), notes: RefCell::default() }
    }

    /// Runs `run` with the observer attached to `device` (`None`: the target's disk) and records what
    /// it saw under (`side`, `controller`). An observer that cannot start is noted; the run goes on.
    pub fn observed(
        &self,
        side: Side,
        controller: &str,
        device: Option<&Path>,
        run: impl FnOnce() -> Result<RunReport>,
    ) -> Result<RunReport> {
        let disk = match device {
            Some(path) => ioshare_observe::disk_of(path),
            None => self.target_disk,
        };
        let Some(disk) = disk else {
            self.note(format!("observe: {controller} not observed: its target is on no block device"));
            return run();
        };
        // The overhead run measures what the observer costs the IO path: without the kernel's run-time
        // statistics, which add two clock reads per program run (to every BPF program of the host).
        let timed = controller != OBSERVED_NONE;
        let started = Observer::start(Some(disk)).and_then(|mut o| match timed {
            true => o.measure_cost().map(|()| o),
            false => Ok(o),
        });
        let mut observer = match started {
            Ok(o) => o,
            Err(e) => {
                self.note(format!("observe: {controller} not observed: {e}"));
                return run();
            }
        };
        let before = observer.snapshot();
        let report = run()?;
        match (before, observer.snapshot()) {
            (Ok(before), Ok(after)) => {
                let device = ioshare_observe::device_name(disk.0, disk.1).unwrap_or(format!("{}:{}", disk.0, disk.1));
                self.keep(RunObserved::from_delta(side, controller, device, &after.since(&before)));
            }
            (Err(e), _) | (_, Err(e)) => self.note(format!("observe: {controller}: {e}")),
        }
        Ok(report)
    }

    /// The observations and notes so far (the recorder starts empty again).
    pub fn take(&self) -> (Vec<RunObserved>, Vec<String>) {
        (self.runs.take(), self.notes.take())
    }

    fn keep(&self, seen: RunObserved) {
        let mut runs = self.runs.borrow_mut();
        match runs.iter_mut().find(|r| r.side == seen.side && r.controller == seen.controller) {
            Some(r) => r.add(&seen),
            None => runs.push(seen),
        }
    }

    fn note(&self, note: String) {
        let mut notes = self.notes.borrow_mut();
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
}

/// The overhead scenario's note on the uncontrolled reader's rounds without (`off`) and with (`on`) the
/// observer attached, run after each other (so that drift in a neighbour's load cancels): per round,
/// the IOPS ratio — their median is the [`OBSERVED_NONE`] row's verdict, judged against
/// [`OBSERVE_OVERHEAD_MIN`]; the note only shows the rounds — and where the time goes: the CPU the
/// engine's IO thread spent per IO more with the observer (the programs of Q, I and D run on the
/// submitting thread; C runs wherever the completion interrupt lands). `None` without rounds.
pub fn overhead_note(off: &[RunReport], on: &[RunReport]) -> Option<String> {
    let ratios = super::scenario::per_round_ratios(off, on);
    if ratios.is_empty() {
        return None;
    }
    let extra: Vec<f64> = off.iter().zip(on).map(|(a, b)| b.cpu.ns_per_io - a.cpu.ns_per_io).collect();
    let list = |v: &[f64], f: &dyn Fn(f64) -> String| v.iter().map(|&x| f(x)).collect::<Vec<_>>().join(", ");
    Some(format!(
        "observe overhead: IOPS with the eBPF observer attached / without, per round: {} (their median judges the \
         {OBSERVED_NONE} row); engine thread's CPU per IO with it: {} ns (median {:+.0} ns)",
        list(&ratios, &|r| format!("{:.1}%", r * 100.0)),
        list(&extra, &|d| format!("{d:+.0}")),
        super::scenario::median(&extra).unwrap_or(f64::NAN)
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
        let side = match r.side {
            Side::Ioshare => "ioshare",
            Side::Kernel => "kernel",
            Side::Reference => "reference",
        };
        let _ = writeln!(
            s,
            "{:<13} {:<9} {:<7} {:>9} {:>15} {:>19} {:>11} {:>13} {:>9} {:>13} {:>8}",
            r.controller,
            side,
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
        let rec = Recorder::new(Path::new("/nonexistent"));
        rec.keep(seen(100, 300.0, 0));
        rec.keep(seen(300, 500.0, 5));
        let (runs, notes) = rec.take();
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
        assert!(rec.take().0.is_empty(), "take empties the recorder");
    }

    #[test]
    fn the_overhead_note_lists_the_rounds_and_the_extra_cpu() {
        let runs = |rounds: &[(f64, f64)]| -> Vec<RunReport> {
            rounds
                .iter()
                .map(|&(iops, cpu)| {
                    let mut r = RunReport::default();
                    r.device.iops = iops;
                    r.cpu.ns_per_io = cpu;
                    r
                })
                .collect()
        };
        let off = runs(&[(1000.0, 4000.0), (2000.0, 4100.0), (1000.0, 3900.0)]);
        let on = runs(&[(980.0, 4500.0), (1800.0, 4900.0), (990.0, 4200.0)]);
        let note = overhead_note(&off, &on).unwrap();
        assert!(note.contains("per round: 98.0%, 90.0%, 99.0% (their median judges the none+observe row)"), "{note}");
        assert!(note.contains("CPU per IO with it: +500, +800, +300 ns (median +500 ns)"), "{note}");
        assert_eq!(overhead_note(&[], &[]), None);
    }

    #[test]
    fn a_run_on_no_block_device_is_noted_and_still_runs() {
        let rec = Recorder::new(Path::new("/nonexistent"));
        let report = rec.observed(Side::Ioshare, "none", None, || Ok(RunReport::default())).unwrap();
        assert_eq!(report, RunReport::default());
        let (runs, notes) = rec.take();
        assert!(runs.is_empty());
        assert_eq!(notes, ["observe: none not observed: its target is on no block device"]);
    }
}
