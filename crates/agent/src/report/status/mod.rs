//! The status file: the running agent rewrites it every period (write to a temporary name, then
//! rename, so a reader never sees half a file); `ioshare agent status` reads it. No network listener.
//!
//! A status outlives its agent when the agent is killed (`kill -9`) or stops working (SIGSTOP, a
//! hang), so a reader checks it ([`Status::observe`]): the writer's pid must still be a live process
//! that started when the status says (a pid reused by another process is not the agent), and the
//! status must be younger than [`Status::stale_after`] — [`STALE_PERIODS`] periods, at least
//! [`STALE_MIN`]. [`Liveness`] says which of running, exited and stale holds.

pub mod drift;
#[cfg(any(test, feature = "fixture"))]
pub mod fixture;
pub mod kernel;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use ioshare_host::ProcessStat;
use ioshare_observe::iocost::{IocDevice, IocGroup};
use serde::{Deserialize, Serialize};

use crate::cgroups::check::BackendKind;
use crate::error::{Error, Result};

/// Name of the status file in the state directory.
pub const STATUS_FILE: &str = "status.json";
/// A status not rewritten for this many periods is stale: its agent is stopped or stuck.
pub const STALE_PERIODS: u32 = 5;
/// ... and at least this long (short periods, a loaded host).
pub const STALE_MIN: Duration = Duration::from_secs(3);

/// One cgroup on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupLine {
    /// Cgroup path relative to the root.
    pub cgroup: String,
    /// Weight.
    pub weight: u32,
    /// Share by weight among active groups: the planner's, or the kernel's (kernel backend; 0 until
    /// the kernel reported the cgroup).
    pub hweight_active: f64,
    /// Share after donation.
    pub hweight_inuse: f64,
    /// Device time used last period, share of the period.
    pub usage_share: f64,
    /// Limits in force: riops, wiops, rbps, wbps (0 = none).
    pub limits: [u64; 4],
    /// idle, alone, donating, limited, running (userspace backend); the kernel's flags —
    /// `idle`/`active`, `donating`, `in-debt`, `delayed` — or `not reported` (kernel backend).
    pub state: String,
    /// Device time used beyond its budget still to pay back, µs (the planner's, or the kernel's).
    #[serde(default)]
    pub debt_us: u64,
    /// Why an active group is below its share when no limit of the agent holds it (userspace
    /// backend): `not using its share: not limited by ioshare`, and whether its threads were
    /// CPU-bound; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The kernel's IOCost state of the cgroup on the device (kernel backend, once the kernel
    /// reported it): what `ioshare observe --iocost` shows of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iocost: Option<IocGroup>,
}

/// One device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceLine {
    /// Name (`loop3`).
    pub device: String,
    /// `MAJ:MIN`.
    pub dev: String,
    /// vrate, percent.
    pub vrate_pct: f64,
    /// Busy level.
    pub busy_level: i32,
    /// Mean latency last period net of size, µs, [read, write].
    pub lat_us: [f64; 2],
    /// Targets, µs (0 = none).
    pub target_us: [u64; 2],
    /// Completions later than the target last period, parts per million, [read, write].
    #[serde(default)]
    pub missed_ppm: [u32; 2],
    /// The cost model in force.
    #[serde(default)]
    pub model: Option<ioshare_core::ModelParams>,
    /// Its cgroups.
    pub groups: Vec<GroupLine>,
    /// The kernel's IOCost controller of the device (kernel backend, once the kernel reported it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iocost: Option<IocDevice>,
    /// Why the kernel's figures are missing (kernel backend); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The whole status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Agent pid.
    pub pid: u32,
    /// When the agent's process started, clock ticks since boot (`/proc/PID/stat`): tells it from a
    /// later process given the same pid. `None` in the files of older agents.
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    /// The planning period, ms: how often the agent rewrites this file (0 in older agents' files).
    #[serde(default)]
    pub period_ms: u64,
    /// BackendKind name.
    pub backend: String,
    /// Hierarchy root.
    pub root: PathBuf,
    /// Planning periods run.
    pub periods: u64,
    /// Unix time of this status, seconds.
    pub updated_unix: f64,
    /// Devices.
    pub devices: Vec<DeviceLine>,
    /// Memory-guarded cgroups.
    #[serde(default)]
    pub memory: Vec<crate::memory::MemoryLine>,
    /// Each managed cgroup's share per device, and its flags (refreshed every second).
    #[serde(default)]
    pub shares: Option<crate::report::share::Shares>,
    /// The pod source, with a `[kubernetes]` section: each cgroup's pod, and the pods' findings.
    #[serde(default)]
    pub kubernetes: Option<crate::desired::pods::KubeStatus>,
    /// Values someone else overwrote that the agent wrote back so far ([`crate::cgroups::reapply`]).
    #[serde(default)]
    pub overwritten: u64,
    /// Devices whose lines came from a tune result, watched for drift from its curve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<drift::DriftLine>,
}

impl Status {
    /// Writes the status into `dir` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(STATUS_FILE);
        let text = serde_json::to_string(self).expect("status serialises");
        ioshare_host::replace_file(&path, text.as_bytes())
            .map_err(|source| Error::Host(ioshare_host::Error::StateFileWrite { path, source }))
    }

    /// Reads the status from `dir`.
    pub fn read(dir: &Path) -> Result<Status> {
        let path = dir.join(STATUS_FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| Error::Status { path: path.clone(), reason: e.to_string() })?;
        serde_json::from_str(&text).map_err(|e| Error::Status { path, reason: e.to_string() })
    }

    /// Removes the status file from `dir` (the agent stopped).
    pub fn remove(dir: &Path) {
        let _ = std::fs::remove_file(dir.join(STATUS_FILE));
    }

    /// How old the status may grow before it is stale: [`STALE_PERIODS`] periods, at least
    /// [`STALE_MIN`].
    pub fn stale_after(&self) -> Duration {
        Duration::from_millis(self.period_ms).saturating_mul(STALE_PERIODS).max(STALE_MIN)
    }

    /// What the status says of its agent now, on this host (its process as `/proc` shows it).
    pub fn observe(self) -> Observed {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let process = ProcessStat::read(self.pid);
        self.observe_at(process, now)
    }

    /// What the status says of its agent when its process is `process` (`None`: no such process)
    /// at Unix time `now_unix`, seconds.
    pub fn observe_at(self, process: Option<ProcessStat>, now_unix: f64) -> Observed {
        let age_s = (now_unix - self.updated_unix).max(0.0);
        let reused = matches!((process, self.pid_start_ticks), (Some(p), Some(t)) if p.start_ticks != t);
        let (liveness, process_note) = match process {
            None => (Liveness::Exited, ""),
            Some(p) if p.exited() => (Liveness::Exited, ""),
            Some(_) if reused => (Liveness::Exited, " (the pid is another process's now)"),
            Some(p) if age_s > self.stale_after().as_secs_f64() => {
                (Liveness::Stale, if p.stopped() { "is stopped" } else { "is alive" })
            }
            Some(_) => (Liveness::Running, ""),
        };
        Observed { status: self, liveness, age_s, process_note }
    }
}

/// This process's start time (`/proc/self/stat`), read once: what the agent writes in its status.
pub fn own_start_ticks() -> Option<u64> {
    static START: OnceLock<Option<u64>> = OnceLock::new();
    *START.get_or_init(ProcessStat::own_start_ticks)
}

/// Whether the agent that wrote a status is at work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Liveness {
    /// Its process runs and rewrote the status within [`Status::stale_after`].
    Running,
    /// Its process is gone (killed, crashed), or its pid belongs to another process now.
    Exited,
    /// Its process is there but has not rewritten the status within [`Status::stale_after`]:
    /// stopped (SIGSTOP) or stuck.
    Stale,
}

/// A status as `ioshare agent status` shows it: with whether its agent is at work, and its age.
/// Printed, a line saying what is wrong (if anything) comes before the status.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Observed {
    /// The status as the agent wrote it.
    #[serde(flatten)]
    pub status: Status,
    /// Whether the agent is at work.
    pub liveness: Liveness,
    /// Seconds since the agent wrote the status.
    pub age_s: f64,
    /// What the process is (stale) or became (exited), for [`Observed::problem`].
    #[serde(skip)]
    process_note: &'static str,
}

impl Observed {
    /// One line saying that the agent is not at work, and since when; `None` while it runs.
    pub fn problem(&self) -> Option<String> {
        let (pid, age) = (self.status.pid, fmt_age(self.age_s));
        match self.liveness {
            Liveness::Running => None,
            Liveness::Exited => {
                Some(format!("not running: pid {pid} exited{}; status last written {age} ago", self.process_note))
            }
            Liveness::Stale => Some(format!(
                "stale: pid {pid} {}; status last written {age} ago, over {} ({STALE_PERIODS} periods of {} ms, \
                 at least {} s): the agent is stopped or stuck",
                self.process_note,
                fmt_age(self.status.stale_after().as_secs_f64()),
                self.status.period_ms,
                STALE_MIN.as_secs()
            )),
        }
    }
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(problem) = self.problem() {
            writeln!(f, "{problem}; the figures below are the last it wrote\n")?;
        }
        write!(f, "{}", self.status)
    }
}

/// `secs` for people: `4.2 s`, `12 min 5 s`, `3 h 20 min`.
fn fmt_age(secs: f64) -> String {
    let whole = secs as u64;
    match whole {
        0..60 => format!("{secs:.1} s"),
        60..3600 => format!("{} min {} s", whole / 60, whole % 60),
        _ => format!("{} h {} min", whole / 3600, whole % 3600 / 60),
    }
}

impl Status {
    /// One device's lines of the table.
    fn fmt_device(&self, f: &mut fmt::Formatter<'_>, d: &DeviceLine) -> fmt::Result {
        if self.backend == BackendKind::Kernel.name() {
            return kernel::fmt_device(f, d, &|cgroup| self.pod_of(cgroup));
        }
        let target = |t: u64| if t == 0 { "-".to_string() } else { t.to_string() };
        writeln!(
            f,
            "\n{} ({}): vrate {:.1}%  busy {}  read lat {:.0} µs (target {})  write lat {:.0} µs (target {})",
            d.device,
            d.dev,
            d.vrate_pct,
            d.busy_level,
            d.lat_us[0],
            target(d.target_us[0]),
            d.lat_us[1],
            target(d.target_us[1])
        )?;
        write_group_header(f)?;
        writeln!(f, "  state")?;
        for g in &d.groups {
            write_group_columns(f, g)?;
            writeln!(f, "  {}{}", g.state, self.pod_of(&g.cgroup))?;
            if !g.note.is_empty() {
                writeln!(f, "  {:<32} {}", "", g.note)?;
            }
        }
        Ok(())
    }

    /// The memory guard's lines of the table.
    fn fmt_memory(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "memory")?;
        writeln!(
            f,
            "  {:<32} {:>4} {:>10} {:>10} {:>10} {:>10} {:>16} {:>9} {:>12} {:>13}",
            "cgroup",
            "prio",
            "usage MiB",
            "limit MiB",
            "wmark-hi",
            "wmark-lo",
            "last reclaim",
            "OOM kills",
            "kernel kills",
            "PSI some/full"
        )?;
        let mib = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{:.1}", v as f64 / 1048576.0));
        for m in &self.memory {
            let pod = self.pod_of(&m.cgroup);
            let reclaim = m.last_reclaim.map_or("-".to_string(), |(b, ms)| format!("{} MiB {ms:.1} ms", b >> 20));
            let psi = m.pressure.map_or("-".to_string(), |(some, full)| format!("{some:.1}/{full:.1}%"));
            writeln!(
                f,
                "  {:<32} {:>4} {:>10} {:>10} {:>10} {:>10} {:>16} {:>9} {:>12} {:>13}{}",
                m.cgroup,
                m.priority,
                mib(Some(m.usage)),
                mib(m.limit),
                mib(m.watermarks.map(|w| w.0)),
                mib(m.watermarks.map(|w| w.1)),
                reclaim,
                m.oom_kills,
                m.kernel_kills,
                psi,
                pod
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "agent pid {} ({} backend, {}), {} periods",
            self.pid,
            self.backend,
            self.root.display(),
            self.periods
        )?;
        if self.overwritten > 0 {
            writeln!(f, "values someone else overwrote, written back: {}", self.overwritten)?;
        }
        for d in &self.devices {
            self.fmt_device(f, d)?;
        }
        for d in &self.drift {
            writeln!(f, "\ntuned: {d}")?;
        }
        if !self.memory.is_empty() {
            self.fmt_memory(f)?;
        }
        if let Some(shares) = &self.shares {
            write!(f, "\n{shares}")?;
        }
        if let Some(k) = &self.kubernetes {
            writeln!(f, "\nkubernetes: node {}, API server {}, {} pod(s)", k.node, k.api_server, k.pods.len())?;
            if !k.pods.is_empty() {
                writeln!(f, "  {:<40} {:<10} {:>6} {:<24} {:>4}  cgroup", "pod", "qos", "weight", "limits", "prio")?;
            }
            for p in &k.pods {
                writeln!(
                    f,
                    "  {:<40} {:<10} {:>6} {:<24} {:>4}  {}",
                    p.pod,
                    p.qos,
                    p.weight,
                    p.limits,
                    p.memory_priority.map_or("-".to_string(), |v| v.to_string()),
                    match (&p.cgroup, p.controlled) {
                        (Some(c), true) => c.clone(),
                        (Some(c), false) => format!("{c} (not made yet)"),
                        (None, _) => "- (not controlled)".to_string(),
                    }
                )?;
            }
            for finding in &k.findings {
                writeln!(f, "  {}: {}: {}", finding.pod, finding.reason, finding.message)?;
            }
        }
        Ok(())
    }
}

impl Status {
    /// `  (namespace/pod[/container])` for a cgroup a pod owns, else nothing: printed after its row.
    fn pod_of(&self, cgroup: &str) -> String {
        let pod = self.kubernetes.as_ref().and_then(|k| k.cgroups.get(cgroup));
        pod.map_or(String::new(), |p| format!("  ({p})"))
    }
}

/// The columns every backend's group lines start with: their header, without a line end.
fn write_group_header(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "  {:<32} {:>6} {:>7} {:>7} {:>7} {:>9} {:>9} {:>11} {:>11}",
        "cgroup", "weight", "hw", "hw-use", "usage", "riops", "wiops", "rbps", "wbps"
    )
}

/// Group `g`'s values in the columns of [`write_group_header`], without a line end.
fn write_group_columns(f: &mut fmt::Formatter<'_>, g: &GroupLine) -> fmt::Result {
    let lim = |v: u64| if v == 0 { "-".to_string() } else { v.to_string() };
    write!(
        f,
        "  {:<32} {:>6} {:>6.1}% {:>6.1}% {:>6.1}% {:>9} {:>9} {:>11} {:>11}",
        g.cgroup,
        g.weight,
        g.hweight_active * 100.0,
        g.hweight_inuse * 100.0,
        g.usage_share * 100.0,
        lim(g.limits[0]),
        lim(g.limits[1]),
        lim(g.limits[2]),
        lim(g.limits[3])
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::status::fixture;

    #[test]
    fn round_trips_through_the_file_and_prints_a_table() {
        let dir = tempfile::tempdir().unwrap();
        let web = GroupLine {
            hweight_active: 0.667,
            hweight_inuse: 0.667,
            usage_share: 0.6,
            ..fixture::group("tenants/web", "limited", [30000, 100, 122880000, 409600])
        };
        let loop3 = DeviceLine { vrate_pct: 100.0, ..fixture::device(vec![web]) };
        let s = Status {
            pid: 42,
            pid_start_ticks: Some(1000),
            updated_unix: 1.5,
            ..fixture::status(vec![loop3], vec![fixture::memory("tenants/batch")])
        };
        s.write(dir.path()).unwrap();
        assert_eq!(Status::read(dir.path()).unwrap(), s);
        let text = s.to_string();
        assert!(text.contains("tenants/web") && text.contains("limited") && text.contains("vrate 100.0%"), "{text}");
        assert!(text.contains("tenants/batch") && text.contains("400.0") && text.contains("12 MiB 3.5 ms"), "{text}");
        assert!(text.contains("2.5/0.8%"), "PSI some/full shown: {text}");
        let with_shares = Status { shares: Some(crate::report::share::Shares { devices: vec![], rules: vec![] }), ..s };
        with_shares.write(dir.path()).unwrap();
        assert_eq!(Status::read(dir.path()).unwrap(), with_shares);
        assert!(with_shares.to_string().contains("\nshares: each cgroup's part of the device"));
        let e = Status::read(Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(e.contains("ioshare agent run"), "{e}");
    }

    fn written_at(updated_unix: f64, period_ms: u64) -> Status {
        Status {
            pid: 42,
            pid_start_ticks: Some(1000),
            period_ms,
            periods: 190,
            updated_unix,
            ..fixture::status(Vec::new(), Vec::new())
        }
    }

    fn process(state: char, start_ticks: u64) -> Option<ProcessStat> {
        Some(ProcessStat { state, start_ticks, user_ticks: 0, system_ticks: 0 })
    }

    #[test]
    fn a_fresh_status_of_a_live_agent_is_running() {
        let seen = written_at(100.0, 100).observe_at(process('S', 1000), 100.5);
        assert_eq!((seen.liveness, seen.age_s, seen.problem()), (Liveness::Running, 0.5, None));
        assert!(seen.to_string().starts_with("agent pid 42 (userspace backend"), "{seen}");
        // Four seconds at a 1 s period is under five periods: still running.
        assert_eq!(written_at(100.0, 1000).observe_at(process('R', 1000), 104.0).liveness, Liveness::Running);
        // A clock set back: the age is 0, not negative.
        assert_eq!(written_at(100.0, 100).observe_at(process('S', 1000), 90.0).age_s, 0.0);
    }

    #[test]
    fn a_gone_or_replaced_process_has_exited() {
        for (proc_, note) in
            [(None, ""), (process('Z', 1000), ""), (process('S', 2000), " (the pid is another process's now)")]
        {
            let seen = written_at(100.0, 100).observe_at(proc_, 112.0);
            assert_eq!(seen.liveness, Liveness::Exited);
            let line = format!("not running: pid 42 exited{note}; status last written 12.0 s ago");
            assert_eq!(seen.problem().as_deref(), Some(line.as_str()));
            assert!(seen.to_string().starts_with(&line), "{seen}");
        }
        // An older agent's status has no start time: the pid alone tells.
        let old = Status { pid_start_ticks: None, ..written_at(100.0, 100) };
        assert_eq!(old.observe_at(process('S', 5), 100.1).liveness, Liveness::Running);
    }

    #[test]
    fn a_status_older_than_five_periods_and_3_s_is_stale() {
        let seen = written_at(100.0, 100).observe_at(process('T', 1000), 103.5);
        assert_eq!(seen.liveness, Liveness::Stale);
        let problem = seen.problem().unwrap();
        assert!(
            problem.starts_with("stale: pid 42 is stopped; status last written 3.5 s ago, over 3.0 s"),
            "{problem}"
        );
        assert!(problem.contains("stopped or stuck"), "{problem}");
        let slow = written_at(0.0, 2000).observe_at(process('S', 1000), 725.0);
        assert_eq!(slow.liveness, Liveness::Stale, "over 5 periods of 2 s");
        assert!(slow.problem().unwrap().contains("pid 42 is alive; status last written 12 min 5 s ago, over 10.0 s"));
        assert_eq!(fmt_age(12_000.0), "3 h 20 min");
    }

    #[test]
    fn json_adds_liveness_and_age_and_older_files_still_read() {
        let seen = written_at(100.0, 100).observe_at(None, 101.0);
        let v = serde_json::to_value(&seen).unwrap();
        assert_eq!(
            (v["liveness"].as_str(), v["age_s"].as_f64(), v["pid"].as_u64()),
            (Some("exited"), Some(1.0), Some(42))
        );
        let older = r#"{"pid":7,"backend":"kernel","root":"/r","periods":1,"updated_unix":5.0,"devices":[]}"#;
        let status: Status = serde_json::from_str(older).unwrap();
        assert_eq!((status.pid_start_ticks, status.period_ms, status.stale_after()), (None, 0, STALE_MIN));
    }
}
