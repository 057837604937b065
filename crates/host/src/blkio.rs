//! Cgroups in the cgroup v1 `blkio` hierarchy: create, set BFQ weights and blk-throttle limits, move
//! processes in, read statistics, and remove again on drop.
//!
//! Design: the cgroup's life (create below our own cgroup, spawn into, remove on drop, stale cgroups of
//! killed runs) is [`crate::cgroup_dir`]'s, shared with cgroup v2; this module adds blkio's files.
//! Kernel errnos become precise errors: ENODEV (no such device), EINVAL (bad limit), ESRCH (no such
//! process), EACCES/EPERM (not root).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use ioshare_core::iocost::line::DevNum;

use crate::blkio_stats::{BlkioStats, StatsSource};
use crate::cgroup_dir::{self, CgroupDir};
use crate::cgroup_mounts::MountedHierarchy;
use crate::error::{Error, Result};
use crate::sysfs;

/// BFQ's weight range (`blkio.bfq.weight`).
pub const BFQ_WEIGHT_MIN: u32 = 1;
/// BFQ's largest weight.
pub const BFQ_WEIGHT_MAX: u32 = 1000;

/// One of the four blk-throttle limits of a cgroup on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThrottleKnob {
    /// Read bytes per second (`blkio.throttle.read_bps_device`).
    ReadBps,
    /// Write bytes per second (`blkio.throttle.write_bps_device`).
    WriteBps,
    /// Read IOs per second (`blkio.throttle.read_iops_device`).
    ReadIops,
    /// Write IOs per second (`blkio.throttle.write_iops_device`).
    WriteIops,
}

impl ThrottleKnob {
    /// The cgroup file that holds this limit.
    pub fn file_name(self) -> &'static str {
        match self {
            ThrottleKnob::ReadBps => "blkio.throttle.read_bps_device",
            ThrottleKnob::WriteBps => "blkio.throttle.write_bps_device",
            ThrottleKnob::ReadIops => "blkio.throttle.read_iops_device",
            ThrottleKnob::WriteIops => "blkio.throttle.write_iops_device",
        }
    }

    /// The largest value the kernel stores (IOPS limits are 32-bit in the kernel).
    fn max_value(self) -> u64 {
        match self {
            ThrottleKnob::ReadBps | ThrottleKnob::WriteBps => u64::MAX,
            ThrottleKnob::ReadIops | ThrottleKnob::WriteIops => u64::from(u32::MAX),
        }
    }
}

/// A cgroup in the v1 `blkio` hierarchy, created by [`BlkioCgroup::create`] and removed on drop.
#[derive(Debug)]
pub struct BlkioCgroup {
    /// The directory and its life.
    dir: CgroupDir,
}

impl BlkioCgroup {
    /// Creates the cgroup `name` (e.g. `ioshare-bench-<pid>/tenant-a`) below this process's blkio
    /// cgroup. Fails if it already exists; missing parents are created.
    pub fn create(name: &str) -> Result<Self> {
        let dir = CgroupDir::create(MountedHierarchy::V1("blkio"), Error::BlkioNotMounted, name, &|_| Ok(()))?;
        Ok(BlkioCgroup { dir })
    }

    /// The cgroup's directory, e.g. `/sys/fs/cgroup/blkio/ioshare-bench-42/tenant-a`.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Sets the cgroup's BFQ weight (`blkio.bfq.weight`, 1..=1000, default 100). It applies on devices
    /// whose scheduler is `bfq` (see [`crate::LoopDevice::set_scheduler`]); elsewhere it is stored but
    /// has no effect. Without BFQ loaded the file does not exist: [`Error::BfqWeightMissing`].
    pub fn set_bfq_weight(&self, weight: u32) -> Result<()> {
        if !(BFQ_WEIGHT_MIN..=BFQ_WEIGHT_MAX).contains(&weight) {
            return Err(Error::InvalidBfqWeight(weight));
        }
        let file = self.path().join("blkio.bfq.weight");
        if !file.exists() {
            return Err(Error::BfqWeightMissing { cgroup: self.path().to_path_buf() });
        }
        sysfs::write(&file, &weight.to_string())
    }

    /// Sets a blk-throttle limit of this cgroup on device `dev`; `value` 0 removes the limit (kernel
    /// semantics). Limits act on bios as they enter the device's queue, whatever the scheduler.
    pub fn set_throttle(&self, dev: DevNum, knob: ThrottleKnob, value: u64) -> Result<()> {
        let name = knob.file_name();
        if value > knob.max_value() {
            return Err(Error::InvalidLimit { knob: name, value, reason: "IOPS limits must fit in 32 bits" });
        }
        let file = self.path().join(name);
        let line = format!("{dev} {value}");
        sysfs::write_raw(&file, &line).map_err(|e| match e.raw_os_error() {
            Some(libc::ENODEV) => Error::NoSuchDevice(dev),
            Some(libc::EINVAL) | Some(libc::ERANGE) => {
                Error::InvalidLimit { knob: name, value, reason: "the kernel refused it (EINVAL)" }
            }
            _ => sysfs::file_error(format!("write '{line}' to"), &file, e),
        })
    }

    /// Moves process `pid` (all its threads) into this cgroup.
    pub fn add_pid(&self, pid: u32) -> Result<()> {
        self.dir.add_pid(pid)
    }

    /// Spawns `cmd` inside this cgroup: the child joins it between fork and exec, so even its first IO
    /// is accounted and limited here (unlike spawning and then calling [`BlkioCgroup::add_pid`]).
    pub fn spawn(&self, cmd: Command) -> Result<Child> {
        self.dir.spawn(cmd)
    }

    /// The cgroup's blk-throttle statistics (`blkio.throttle.io_serviced`, `io_service_bytes`).
    ///
    /// The kernel counts them only on devices where blk-throttle is active, i.e. where some cgroup has
    /// had a throttle limit set since the device's queue was created (loop devices keep their queue
    /// across attachments); before that the file reads `Total 0` (checked on this host's 6.18 with a
    /// fresh loop device). For IO under BFQ use [`BlkioCgroup::bfq_stats`].
    pub fn stats(&self) -> Result<BlkioStats> {
        self.read_stats(StatsSource::Throttle)
    }

    /// The cgroup's BFQ statistics (`blkio.bfq.io_serviced`, `io_service_bytes`): the IO BFQ dispatched
    /// for it on devices whose scheduler is `bfq`.
    pub fn bfq_stats(&self) -> Result<BlkioStats> {
        self.read_stats(StatsSource::Bfq)
    }

    /// Reads and combines the statistics files of `source`.
    fn read_stats(&self, source: StatsSource) -> Result<BlkioStats> {
        let (ios_file, bytes_file) = source.files();
        let serviced = sysfs::read(&self.path().join(ios_file))?;
        let bytes = sysfs::read(&self.path().join(bytes_file))?;
        BlkioStats::from_files(source, &serviced, &bytes)
    }

    /// Removes the cgroup now, reporting failure (drop does the same but can only print).
    pub fn remove(mut self) -> Result<()> {
        self.dir.remove()
    }
}

/// Removes the blkio cgroups that processes killed before they could clean up left behind (SIGKILL
/// runs no destructor): every cgroup directly below this process's blkio cgroup named `<prefix><pid>`
/// (the convention `ioshare-bench-<pid>`) whose process no longer exists, with all its descendants.
/// Tasks still inside are moved back first. Returns the directories removed.
pub fn remove_stale_cgroups(prefix: &str) -> Result<Vec<PathBuf>> {
    cgroup_dir::remove_stale(MountedHierarchy::V1("blkio"), Error::BlkioNotMounted, prefix)
}
