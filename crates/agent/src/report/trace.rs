//! The userspace backend's period trace (`ioshare agent run --trace FILE`) and its summary
//! (`ioshare agent trace FILE`).
//!
//! Why the shares on a real device are what they are is a question about every period: what each
//! cgroup did (its counters), what the planner made of it (hweights, whether it counted as short of
//! budget or as donating, its debt, its budget, vrate and the device's busy level), which limits
//! that gave and whether they were written or kept (the 4% rule), and — since a tenant below its
//! share may be held by the CPU rather than by a limit — how busy its threads were ([`crate::report::cpu`]).
//! With `--trace` the agent appends one JSON line ([`PeriodRecord`]) per device per period; without
//! it nothing of this is built. Cost when on: one line of about 400 bytes per cgroup per period
//! through a buffered writer flushed once per period, plus reading each cgroup's thread list and
//! its threads' `/proc/TID/schedstat`.
//!
//! [`Summary::read`] folds a trace into, per device and cgroup, its achieved share of the work done
//! against its target (the planner's active share) over the periods it competed with another cgroup,
//! how many periods it was held by its limit, counted short of budget, donating or CPU-bound, and how
//! often its limits were written or kept; and a timeline of the same per second.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::report::cpu::CpuUse;

/// What happened to a group's limits at the end of a period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitAction {
    /// New limits were written.
    Written,
    /// The planned limits were within 4% of those in force: those were kept.
    Kept,
    /// The planned limits were those in force.
    Same,
}

/// One cgroup in one period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// Cgroup path relative to the root.
    pub cgroup: String,
    /// Weight.
    pub weight: u32,
    /// IOs completed in the period, [read, write].
    pub ios: [u64; 2],
    /// Bytes, [read, write].
    pub bytes: [u64; 2],
    /// Absolute cost charged (vtime units).
    pub cost: u64,
    /// Its share by weight among the active groups when it was charged (its target).
    pub target: f64,
    /// Hierarchical shares after planning, by weight and in use (after donation).
    pub hweight_active: f64,
    /// See `hweight_active`.
    pub hweight_inuse: f64,
    /// It reached the share of its limit that counts as held back by it.
    pub held: bool,
    /// The device was busy and it got about its fair part: competing at the device.
    pub competing: bool,
    /// Charged as short of budget (held or competing): it cannot be a donor this period.
    pub short: bool,
    /// The planner has it donating part of its share.
    pub donating: bool,
    /// Debt still to pay, µs.
    pub debt_us: u64,
    /// Its budget for the next period, vtime units (`None`: alone or inactive, no limit).
    pub budget: Option<u64>,
    /// Limits the budget gives: riops, wiops, rbps, wbps (0 = none).
    pub planned: [u64; 4],
    /// Limits in force for the next period.
    pub limits: [u64; 4],
    /// Whether they were written, kept, or the same.
    pub action: LimitAction,
    /// Its threads over the period (`None` at the first period or without schedstat).
    pub cpu: Option<CpuUse>,
}

/// One device in one period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeriodRecord {
    /// Seconds since the agent started.
    pub t_s: f64,
    /// Device name.
    pub device: String,
    /// How long the period really was, s.
    pub elapsed_s: f64,
    /// Share of the period the device had IO in flight.
    pub util: f64,
    /// Mean IOs in flight at the device.
    pub inflight: f64,
    /// Whether the device counts as busy (busy time or IOs in flight).
    pub busy: bool,
    /// Mean latency net of size, µs, [read, write].
    pub lat_us: [f64; 2],
    /// Whether a device-slot wait was reported (a competing group held by the device).
    pub rq_wait: bool,
    /// What the tracked cgroups' IO cost, percent of the model's capacity over the period.
    pub delivered_pct: f64,
    /// vrate after planning, percent.
    pub vrate_pct: f64,
    /// Busy level after planning.
    pub busy_level: i32,
    /// Its cgroups.
    pub groups: Vec<GroupRecord>,
}

/// Appends [`PeriodRecord`]s to a file, one JSON line each.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl TraceWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> Result<TraceWriter> {
        let file = File::create(path).map_err(|e| trace_error(path, "cannot create", e))?;
        Ok(TraceWriter { path: path.to_path_buf(), out: BufWriter::new(file) })
    }

    /// Appends `records` and flushes.
    pub fn write(&mut self, records: &[PeriodRecord]) -> Result<()> {
        for r in records {
            serde_json::to_writer(&mut self.out, r).expect("a record serialises");
            self.out.write_all(b"\n").map_err(|e| trace_error(&self.path, "cannot write", e))?;
        }
        self.out.flush().map_err(|e| trace_error(&self.path, "cannot write", e))
    }
}

fn trace_error(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Trace { path: path.to_path_buf(), reason: format!("{what} it: {e}") }
}

/// One cgroup over a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroupSummary {
    /// Cgroup.
    pub cgroup: String,
    /// Weight.
    pub weight: u32,
    /// Periods it did IO in while another cgroup did too.
    pub competed: u64,
    /// Its part of the work (cost) done by the cgroups in those periods.
    pub achieved: f64,
    /// Its mean target share in those periods.
    pub target: f64,
    /// Its IOPS over those periods.
    pub iops: f64,
    /// Periods held by its limit / counted short / donating / CPU-bound.
    pub held: u64,
    /// See `held`.
    pub short: u64,
    /// See `held`.
    pub donating: u64,
    /// See `held`.
    pub cpu_bound: u64,
    /// Mean runnable share of its busiest thread over the periods measured.
    pub cpu_busiest: f64,
    /// Periods whose limits were written / kept within 4%.
    pub written: u64,
    /// See `written`.
    pub kept: u64,
}

/// One second of a device's trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Second {
    /// Start, s since the agent started.
    pub t_s: u64,
    /// Mean vrate, %.
    pub vrate_pct: f64,
    /// Mean work done by the cgroups, % of the model's capacity.
    pub delivered_pct: f64,
    /// Per cgroup (in the order of [`DeviceSummary::groups`]): achieved share, target share, IOPS,
    /// read-IOPS limit at the end of the second, and the periods it was held / donating / CPU-bound.
    pub groups: Vec<(f64, f64, f64, u64, u32, u32, u32)>,
}

/// One device over a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceSummary {
    /// Device.
    pub device: String,
    /// Periods.
    pub periods: u64,
    /// vrate range, %.
    pub vrate_pct: (f64, f64),
    /// Per cgroup.
    pub groups: Vec<GroupSummary>,
    /// Per second.
    pub seconds: Vec<Second>,
}

/// A trace folded ([`Summary::read`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Per device.
    pub devices: Vec<DeviceSummary>,
}

/// Running sums of one cgroup (over the trace or one second).
#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    competed: u64,
    cost: f64,
    all_cost: f64,
    target: f64,
    ios: u64,
    secs: f64,
    held: u32,
    short: u32,
    donating: u32,
    cpu_bound: u32,
    cpu_n: u32,
    cpu_busiest: f64,
    written: u32,
    kept: u32,
    riops: u64,
}

impl Acc {
    fn add(&mut self, g: &GroupRecord, all_cost: u64, secs: f64, competing: bool) {
        if competing {
            self.competed += 1;
            self.cost += g.cost as f64;
            self.all_cost += all_cost as f64;
            self.target += g.target;
            self.ios += g.ios[0] + g.ios[1];
            self.secs += secs;
        }
        self.held += u32::from(g.held);
        self.short += u32::from(g.short);
        self.donating += u32::from(g.donating);
        if let Some(c) = g.cpu {
            self.cpu_n += 1;
            self.cpu_busiest += c.busiest;
            self.cpu_bound += u32::from(c.cpu_bound());
        }
        self.written += u32::from(g.action == LimitAction::Written);
        self.kept += u32::from(g.action == LimitAction::Kept);
        self.riops = g.limits[0];
    }

    fn achieved(&self) -> f64 {
        if self.all_cost > 0.0 {
            self.cost / self.all_cost
        } else {
            f64::NAN
        }
    }

    fn target(&self) -> f64 {
        self.target / self.competed.max(1) as f64
    }

    fn iops(&self) -> f64 {
        if self.secs > 0.0 {
            self.ios as f64 / self.secs
        } else {
            0.0
        }
    }
}

impl Summary {
    /// Folds the trace at `path`.
    pub fn read(path: &Path) -> Result<Summary> {
        let file = File::open(path).map_err(|e| trace_error(path, "cannot open", e))?;
        let mut records = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| trace_error(path, "cannot read", e))?;
            if line.trim().is_empty() {
                continue;
            }
            let r: PeriodRecord = serde_json::from_str(&line).map_err(|e| Error::Trace {
                path: path.to_path_buf(),
                reason: format!("line {}: not a trace record ({e}): write it with `ioshare agent run --trace`", i + 1),
            })?;
            records.push(r);
        }
        Ok(Summary::of(&records))
    }

    /// Folds `records`.
    pub fn of(records: &[PeriodRecord]) -> Summary {
        let mut by_dev: BTreeMap<&str, Vec<&PeriodRecord>> = BTreeMap::new();
        for r in records {
            by_dev.entry(&r.device).or_default().push(r);
        }
        let devices = by_dev.into_iter().map(|(device, recs)| fold_device(device, &recs)).collect();
        Summary { devices }
    }
}

fn fold_device(device: &str, recs: &[&PeriodRecord]) -> DeviceSummary {
    let mut names: Vec<(String, u32)> = Vec::new();
    for r in recs {
        for g in &r.groups {
            if !names.iter().any(|(n, _)| *n == g.cgroup) {
                names.push((g.cgroup.clone(), g.weight));
            }
        }
    }
    names.sort();
    let index = |c: &str| names.iter().position(|(n, _)| n == c).expect("named");
    let mut total = vec![Acc::default(); names.len()];
    let mut seconds: Vec<(u64, f64, f64, u32, Vec<Acc>)> = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for r in recs {
        lo = lo.min(r.vrate_pct);
        hi = hi.max(r.vrate_pct);
        let sec = r.t_s.max(0.0) as u64;
        if seconds.last().is_none_or(|s| s.0 != sec) {
            seconds.push((sec, 0.0, 0.0, 0, vec![Acc::default(); names.len()]));
        }
        let s = seconds.last_mut().expect("pushed");
        s.1 += r.vrate_pct;
        s.2 += r.delivered_pct;
        s.3 += 1;
        let all: u64 = r.groups.iter().map(|g| g.cost).sum();
        let doing = r.groups.iter().filter(|g| g.cost > 0).count();
        for g in &r.groups {
            let competing = g.cost > 0 && doing >= 2;
            let i = index(&g.cgroup);
            total[i].add(g, all, r.elapsed_s, competing);
            s.4[i].add(g, all, r.elapsed_s, competing);
        }
    }
    let groups = names
        .iter()
        .zip(&total)
        .map(|((cgroup, weight), a)| GroupSummary {
            cgroup: cgroup.clone(),
            weight: *weight,
            competed: a.competed,
            achieved: a.achieved(),
            target: a.target(),
            iops: a.iops(),
            held: a.held.into(),
            short: a.short.into(),
            donating: a.donating.into(),
            cpu_bound: a.cpu_bound.into(),
            cpu_busiest: if a.cpu_n > 0 { a.cpu_busiest / f64::from(a.cpu_n) } else { f64::NAN },
            written: a.written.into(),
            kept: a.kept.into(),
        })
        .collect();
    let seconds = seconds
        .into_iter()
        .map(|(t_s, vrate, delivered, n, accs)| Second {
            t_s,
            vrate_pct: vrate / f64::from(n.max(1)),
            delivered_pct: delivered / f64::from(n.max(1)),
            groups: accs
                .iter()
                .map(|a| (a.achieved(), a.target(), a.iops(), a.riops, a.held, a.donating, a.cpu_bound))
                .collect(),
        })
        .collect();
    DeviceSummary {
        device: device.to_string(),
        periods: recs.len() as u64,
        vrate_pct: if recs.is_empty() { (f64::NAN, f64::NAN) } else { (lo, hi) },
        groups,
        seconds,
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |v: f64| if v.is_nan() { "-".to_string() } else { format!("{:.1}%", v * 100.0) };
        for d in &self.devices {
            writeln!(
                f,
                "{}: {} periods, vrate {:.0}–{:.0}%\n  (achieved and target: over the periods the cgroup did IO \
                 beside another; held: at its limit; short: charged as short of budget; cpu: its busiest thread \
                 on or waiting for a CPU)",
                d.device, d.periods, d.vrate_pct.0, d.vrate_pct.1
            )?;
            writeln!(
                f,
                "  {:<28} {:>6} {:>8} {:>8} {:>8} {:>9} {:>6} {:>6} {:>6} {:>9} {:>6} {:>8} {:>6}",
                "cgroup",
                "weight",
                "periods",
                "achieved",
                "target",
                "IOPS",
                "held",
                "short",
                "donat.",
                "cpu-bound",
                "cpu",
                "written",
                "kept"
            )?;
            for g in &d.groups {
                writeln!(
                    f,
                    "  {:<28} {:>6} {:>8} {:>8} {:>8} {:>9.0} {:>6} {:>6} {:>6} {:>9} {:>6} {:>8} {:>6}",
                    g.cgroup,
                    g.weight,
                    g.competed,
                    pct(g.achieved),
                    pct(g.target),
                    g.iops,
                    g.held,
                    g.short,
                    g.donating,
                    g.cpu_bound,
                    pct(g.cpu_busiest),
                    g.written,
                    g.kept
                )?;
            }
            writeln!(
                f,
                "  per second: vrate, work done (% of the model); per cgroup achieved/target share, IOPS, \
                 read-IOPS limit, periods held/donating/cpu-bound"
            )?;
            for s in &d.seconds {
                write!(f, "  {:>4} s  vrate {:>5.1}% did {:>5.1}%", s.t_s, s.vrate_pct, s.delivered_pct)?;
                for (i, (a, t, iops, lim, held, don, cpu)) in s.groups.iter().enumerate() {
                    let lim = if *lim == 0 { "-".to_string() } else { lim.to_string() };
                    write!(
                        f,
                        " | {} {}/{} {:.0} lim {} {}/{}/{}",
                        d.groups[i].cgroup.rsplit('/').next().unwrap_or_default(),
                        pct(*a),
                        pct(*t),
                        iops,
                        lim,
                        held,
                        don,
                        cpu
                    )?;
                }
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cgroup: &str, cost: u64, target: f64, held: bool, action: LimitAction) -> GroupRecord {
        GroupRecord {
            cgroup: cgroup.into(),
            weight: 100,
            ios: [cost, 0],
            bytes: [cost * 4096, 0],
            cost,
            target,
            hweight_active: target,
            hweight_inuse: target,
            held,
            competing: false,
            short: held,
            donating: false,
            debt_us: 0,
            budget: Some(1),
            planned: [10, 10, 10, 10],
            limits: [10, 10, 10, 10],
            action,
            cpu: Some(CpuUse { cores: 0.5, busiest: if held { 0.3 } else { 0.95 } }),
        }
    }

    fn period(t_s: f64, groups: Vec<GroupRecord>) -> PeriodRecord {
        PeriodRecord {
            t_s,
            device: "loop9".into(),
            elapsed_s: 0.1,
            util: 1.0,
            inflight: 8.0,
            busy: true,
            lat_us: [100.0, 0.0],
            rq_wait: false,
            delivered_pct: 50.0,
            vrate_pct: 100.0,
            busy_level: 0,
            groups,
        }
    }

    /// A trace written and read back folds into each group's share of the work while both did IO.
    #[test]
    fn a_trace_round_trips_and_folds_into_shares() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut w = TraceWriter::create(&path).unwrap();
        // Second 0: a alone (not counted as competing). Second 1: a 600 vs b 400 twice, then 800 vs 200.
        let mut recs = vec![period(0.5, vec![group("a", 500, 1.0, false, LimitAction::Same)])];
        for (t, a, b) in [(1.0, 600, 400), (1.1, 600, 400), (1.2, 800, 200)] {
            recs.push(period(
                t,
                vec![group("a", a, 0.75, true, LimitAction::Written), group("b", b, 0.25, false, LimitAction::Kept)],
            ));
        }
        w.write(&recs).unwrap();
        drop(w);
        let s = Summary::read(&path).unwrap();
        let d = &s.devices[0];
        assert_eq!(d.periods, 4);
        let (a, b) = (&d.groups[0], &d.groups[1]);
        assert_eq!((a.cgroup.as_str(), a.competed, b.competed), ("a", 3, 3));
        assert!((a.achieved - 2000.0 / 3000.0).abs() < 1e-9, "{a:?}");
        assert!((a.target - 0.75).abs() < 1e-9 && (b.target - 0.25).abs() < 1e-9);
        assert!((a.iops - 2000.0 / 0.3).abs() < 1e-6, "{}", a.iops);
        assert_eq!((a.held, a.written, b.kept, b.cpu_bound, a.cpu_bound), (3, 3, 3, 3, 1));
        assert_eq!(d.seconds.len(), 2);
        assert!(d.seconds[0].groups[0].0.is_nan(), "a alone: no share judged");
        assert!(s.to_string().contains("66.7%"), "{s}");
    }

    #[test]
    fn a_line_that_is_not_a_record_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, "{}\n").unwrap();
        let e = Summary::read(&path).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("--trace"), "{e}");
    }
}
