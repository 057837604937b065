//! The cgroup files the agent reads and writes, for the two hierarchies it can work in: cgroup v1
//! `blkio` (blk-throttle's four `blkio.throttle.*_device` files, `io_serviced[_bytes]_recursive`)
//! and cgroup v2 (`io.max`, `io.weight`, `io.stat`, and the root's `io.cost.model`/`io.cost.qos`).
//! Every write goes through the [`Recorder`]; a cgroup that vanished reads as `None` and writes as
//! [`Written::Vanished`], never as an error.

use std::path::PathBuf;

use ioshare_core::iocost::line::DevNum;
use ioshare_host::{parse_io_stat, read_throttle_stats, BlkioStats, Entry, IoMax, Recorder, ThrottleKnob, Written};
use serde::Serialize;

use crate::error::Result;

/// Which hierarchy's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// cgroup v1 `blkio`.
    V1,
    /// cgroup v2 with the `io` controller.
    V2,
}

/// blk-throttle limits of one cgroup on one device; 0 = no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Throttle {
    /// Read IOs per second.
    pub riops: u64,
    /// Write IOs per second.
    pub wiops: u64,
    /// Read bytes per second.
    pub rbps: u64,
    /// Write bytes per second.
    pub wbps: u64,
}

impl Throttle {
    /// The four limits as the status file lists them: riops, wiops, rbps, wbps.
    pub fn as_array(&self) -> [u64; 4] {
        [self.riops, self.wiops, self.rbps, self.wbps]
    }

    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        *self != Throttle::default()
    }
}

impl std::fmt::Display for Throttle {
    /// `riops=N wiops=N rbps=N wbps=N`, `max` for no limit (as `io.max` writes it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |v: u64| if v == 0 { "max".to_string() } else { v.to_string() };
        write!(f, "riops={} wiops={} rbps={} wbps={}", v(self.riops), v(self.wiops), v(self.rbps), v(self.wbps))
    }
}

/// A mounted hierarchy the agent controls cgroups in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hierarchy {
    /// v1 blkio or v2.
    pub flavor: Flavor,
    /// Its root directory (the mount point).
    pub root: PathBuf,
}

impl Hierarchy {
    /// The directory of cgroup `rel` (relative to the root).
    pub fn dir(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// What cgroup `rel` (with its descendants) did per device so far; `None` if it is gone.
    pub fn usage(&self, rel: &str) -> Option<BlkioStats> {
        let dir = self.dir(rel);
        match self.flavor {
            Flavor::V1 => read_throttle_stats(&dir, true).ok(),
            Flavor::V2 => std::fs::read_to_string(dir.join("io.stat")).ok().and_then(|t| parse_io_stat(&t).ok()),
        }
    }

    /// Sets the limits of cgroup `rel` on `dev` (only values that differ are written).
    pub fn set_throttle(&self, rec: &mut Recorder, rel: &str, dev: DevNum, t: &Throttle) -> Result<Written> {
        let dir = self.dir(rel);
        match self.flavor {
            Flavor::V1 => {
                let mut out = Written::Unchanged;
                for (knob, value) in [
                    (ThrottleKnob::ReadIops, t.riops),
                    (ThrottleKnob::WriteIops, t.wiops),
                    (ThrottleKnob::ReadBps, t.rbps),
                    (ThrottleKnob::WriteBps, t.wbps),
                ] {
                    match rec.set(&dir.join(knob.file_name()), Entry::Throttle(dev), &format!("{dev} {value}"))? {
                        Written::Vanished => return Ok(Written::Vanished),
                        // Someone else's write put back says more than a change of its own.
                        Written::Restored => out = Written::Restored,
                        Written::Changed if out != Written::Restored => out = Written::Changed,
                        Written::Changed | Written::Unchanged => {}
                    }
                }
                Ok(out)
            }
            Flavor::V2 => {
                let opt = |v: u64| (v != 0).then_some(v);
                let line =
                    IoMax { dev, rbps: opt(t.rbps), wbps: opt(t.wbps), riops: opt(t.riops), wiops: opt(t.wiops) };
                Ok(rec.set(&dir.join("io.max"), Entry::IoMax(dev), &line.to_string())?)
            }
        }
    }

    /// Sets cgroup `rel`'s weight on `dev` (v2 `io.weight`; v1 has no weight for blk-throttle).
    pub fn set_weight(&self, rec: &mut Recorder, rel: &str, dev: DevNum, weight: u32) -> Result<Written> {
        match self.flavor {
            Flavor::V1 => Ok(Written::Unchanged),
            Flavor::V2 => {
                Ok(rec.set(&self.dir(rel).join("io.weight"), Entry::IoWeightDevice(dev), &format!("{dev} {weight}"))?)
            }
        }
    }

    /// Writes a line of the root's `io.cost.model` or `io.cost.qos` (v2 with iocost).
    pub fn set_root_line(&self, rec: &mut Recorder, file: &str, dev: DevNum, line: &str) -> Result<Written> {
        Ok(rec.set(&self.root.join(file), Entry::IoCost(dev), line)?)
    }

    /// Rewrites the root's current blk-throttle rule for `dev` unchanged: the kernel counts a device's
    /// per-cgroup throttle statistics only once some limit was configured on it.
    pub fn activate_accounting(&self, rec: &mut Recorder, dev: DevNum) -> Result<()> {
        if self.flavor == Flavor::V1 {
            rec.touch(&self.root.join(ThrottleKnob::ReadIops.file_name()), Entry::Throttle(dev))?;
        }
        Ok(())
    }
}
