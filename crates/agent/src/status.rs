//! The status file: the running agent rewrites it every period (write to a temporary name, then
//! rename, so a reader never sees half a file); `ioshare agent status` reads it. No network listener.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Name of the status file in the state directory.
pub const STATUS_FILE: &str = "status.json";

/// One cgroup on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupLine {
    /// Cgroup path relative to the root.
    pub cgroup: String,
    /// Weight.
    pub weight: u32,
    /// Share by weight among active groups (userspace backend; 0 for kernel).
    pub hweight_active: f64,
    /// Share after donation.
    pub hweight_inuse: f64,
    /// Device time used last period, share of the period.
    pub usage_share: f64,
    /// Limits in force: riops, wiops, rbps, wbps (0 = none).
    pub limits: [u64; 4],
    /// idle, alone, donating, limited, running; `kernel` when the kernel decides.
    pub state: String,
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
    /// Its cgroups.
    pub groups: Vec<GroupLine>,
}

/// The whole status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Agent pid.
    pub pid: u32,
    /// Backend name.
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
    pub shares: Option<crate::share::Shares>,
}

impl Status {
    /// Writes the status into `dir` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join(format!("{STATUS_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).expect("status serialises");
        let io = |source| Error::Host(ioshare_host::Error::StateFileWrite { path: tmp.clone(), source });
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, dir.join(STATUS_FILE)).map_err(io)
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
        for d in &self.devices {
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
            writeln!(
                f,
                "  {:<32} {:>6} {:>7} {:>7} {:>7} {:>9} {:>9} {:>11} {:>11}  state",
                "cgroup", "weight", "hw", "hw-use", "usage", "riops", "wiops", "rbps", "wbps"
            )?;
            let lim = |v: u64| if v == 0 { "-".to_string() } else { v.to_string() };
            for g in &d.groups {
                writeln!(
                    f,
                    "  {:<32} {:>6} {:>6.1}% {:>6.1}% {:>6.1}% {:>9} {:>9} {:>11} {:>11}  {}",
                    g.cgroup,
                    g.weight,
                    g.hweight_active * 100.0,
                    g.hweight_inuse * 100.0,
                    g.usage_share * 100.0,
                    lim(g.limits[0]),
                    lim(g.limits[1]),
                    lim(g.limits[2]),
                    lim(g.limits[3]),
                    g.state
                )?;
            }
        }
        if !self.memory.is_empty() {
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
                let reclaim = m.last_reclaim.map_or("-".to_string(), |(b, ms)| format!("{} MiB {ms:.1} ms", b >> 20));
                let psi = m.pressure.map_or("-".to_string(), |(some, full)| format!("{some:.1}/{full:.1}%"));
                writeln!(
                    f,
                    "  {:<32} {:>4} {:>10} {:>10} {:>10} {:>10} {:>16} {:>9} {:>12} {:>13}",
                    m.cgroup,
                    m.priority,
                    mib(Some(m.usage)),
                    mib(m.limit),
                    mib(m.watermarks.map(|w| w.0)),
                    mib(m.watermarks.map(|w| w.1)),
                    reclaim,
                    m.oom_kills,
                    m.kernel_kills,
                    psi
                )?;
            }
        }
        if let Some(shares) = &self.shares {
            write!(f, "\n{shares}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_file_and_prints_a_table() {
        let dir = tempfile::tempdir().unwrap();
        let s = Status {
            pid: 42,
            backend: "userspace".into(),
            root: "/sys/fs/cgroup/blkio".into(),
            periods: 7,
            updated_unix: 1.5,
            devices: vec![DeviceLine {
                device: "loop3".into(),
                dev: "7:3".into(),
                vrate_pct: 100.0,
                busy_level: -2,
                lat_us: [350.0, 0.0],
                target_us: [1000, 0],
                groups: vec![GroupLine {
                    cgroup: "tenants/web".into(),
                    weight: 200,
                    hweight_active: 0.667,
                    hweight_inuse: 0.667,
                    usage_share: 0.6,
                    limits: [30000, 100, 122880000, 409600],
                    state: "limited".into(),
                }],
            }],
            memory: vec![crate::memory::MemoryLine {
                cgroup: "tenants/batch".into(),
                priority: 2,
                usage: 300 << 20,
                limit: Some(512 << 20),
                watermarks: Some((400 << 20, 397 << 20)),
                last_reclaim: Some((12 << 20, 3.5)),
                oom_kills: 1,
                kernel_kills: 0,
                pressure: Some((2.5, 0.75)),
            }],
            shares: None,
        };
        s.write(dir.path()).unwrap();
        assert_eq!(Status::read(dir.path()).unwrap(), s);
        let text = s.to_string();
        assert!(text.contains("tenants/web") && text.contains("limited") && text.contains("vrate 100.0%"), "{text}");
        assert!(text.contains("tenants/batch") && text.contains("400.0") && text.contains("12 MiB 3.5 ms"), "{text}");
        assert!(text.contains("2.5/0.8%"), "PSI some/full shown: {text}");
        let with_shares = Status { shares: Some(crate::share::Shares { devices: vec![], rules: vec![] }), ..s };
        with_shares.write(dir.path()).unwrap();
        assert_eq!(Status::read(dir.path()).unwrap(), with_shares);
        assert!(with_shares.to_string().contains("\nshares: each cgroup's part of the device"));
        let e = Status::read(Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(e.contains("ioshare agent run"), "{e}");
    }
}
