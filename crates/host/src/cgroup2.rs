//! Cgroups in the unified (v2) hierarchy, for the kernel peers of `ioshare bench` and for the agent:
//! create with controllers enabled, write and read any interface file (`io.weight`, `io.bfq.weight`,
//! `io.max`, `memory.high`, ...), spawn a process inside, read `io.stat`, remove on drop. And
//! [`KernelIoCost`]: the kernel's IOCost switched on for one device (root `io.cost.model`/`io.cost.qos`)
//! and back to how it was on drop.
//!
//! Design: the cgroup's life is [`crate::cgroup_dir`]'s, shared with v1 `blkio`. In v2 a controller's
//! files exist in a cgroup only if its parent lists the controller in `cgroup.subtree_control`, so
//! [`Cgroup2::create`] enables the controllers asked for on the way down from this process's own cgroup.
//! The kernel refuses that in a non-root cgroup that still has processes of its own (the "no internal
//! processes" rule): then the error says to run from the root or from a delegated, empty parent. Enabled
//! controllers stay enabled in the parents after removal (other cgroups may rely on them by then).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use ioshare_core::iocost::line::DevNum;

use crate::blkio_stats::BlkioStats;
use crate::cgroup_dir::{self, CgroupDir};
use crate::cgroup_mounts::{mount_point, MountedHierarchy};
use crate::error::{Error, Result};
use crate::io_stat::parse_io_stat;
use crate::sysfs;

/// A cgroup in the v2 hierarchy, created by [`Cgroup2::create`] and removed on drop.
#[derive(Debug)]
pub struct Cgroup2 {
    /// The directory and its life.
    dir: CgroupDir,
}

impl Cgroup2 {
    /// Creates the cgroup `name` (e.g. `ioshare-bench-<pid>/tenant-a`) below this process's v2 cgroup,
    /// with `controllers` (e.g. `["io"]`) enabled in every parent from there down so that their files
    /// exist in it. Fails if it exists already, or if a controller is not available.
    pub fn create(name: &str, controllers: &[&str]) -> Result<Self> {
        let enable = |parent: &Path| -> Result<()> {
            let file = parent.join("cgroup.subtree_control");
            let enabled = sysfs::read(&file)?;
            for c in controllers.iter().filter(|c| !enabled.split_whitespace().any(|e| e == **c)) {
                sysfs::write_raw(&file, &format!("+{c}")).map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOENT) | Some(libc::EINVAL) => {
                        Error::ControllerUnavailable { controller: c.to_string(), cgroup: parent.to_path_buf() }
                    }
                    Some(libc::EBUSY) => Error::InternalProcesses { cgroup: parent.to_path_buf() },
                    _ => sysfs::file_error(format!("write '+{c}' to"), &file, e),
                })?;
            }
            Ok(())
        };
        let dir = CgroupDir::create(MountedHierarchy::V2, Error::CgroupV2NotMounted, name, &enable)?;
        Ok(Cgroup2 { dir })
    }

    /// The cgroup's directory, e.g. `/sys/fs/cgroup/ioshare-bench-42/tenant-a`.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `value` to the cgroup's interface file `file` (e.g. `io.weight`, `"default 200"`).
    /// A file that does not exist means its controller is not enabled or not loaded (BFQ's
    /// `io.bfq.weight` appears once the bfq scheduler is loaded).
    pub fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.path().join(file);
        sysfs::write_raw(&path, value).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => Error::CgroupFileMissing { path: path.clone() },
            Some(libc::ENODEV) => match value.split_whitespace().next().and_then(|d| d.parse().ok()) {
                Some(dev) => Error::NoSuchDevice(dev),
                None => sysfs::file_error(format!("write '{value}' to"), &path, e),
            },
            _ => sysfs::file_error(format!("write '{value}' to"), &path, e),
        })
    }

    /// Reads the cgroup's interface file `file`.
    pub fn read(&self, file: &str) -> Result<String> {
        sysfs::read(&self.path().join(file))
    }

    /// Moves process `pid` (all its threads) into this cgroup.
    pub fn add_pid(&self, pid: u32) -> Result<()> {
        self.dir.add_pid(pid)
    }

    /// Spawns `cmd` inside this cgroup: the child joins it between fork and exec, so even its first IO
    /// is accounted and controlled here.
    pub fn spawn(&self, cmd: Command) -> Result<Child> {
        self.dir.spawn(cmd)
    }

    /// The cgroup's IO statistics per device (`io.stat`: bytes and IOs read, written, discarded).
    pub fn io_stats(&self) -> Result<BlkioStats> {
        parse_io_stat(&self.read("io.stat")?)
    }

    /// Removes the cgroup now, reporting failure (drop does the same but can only print).
    pub fn remove(mut self) -> Result<()> {
        self.dir.remove()
    }
}

/// Removes the v2 cgroups named `<prefix><pid>` (below this process's v2 cgroup) whose process is
/// gone: what a SIGKILLed run left behind. Returns the directories removed.
pub fn remove_stale_cgroups2(prefix: &str) -> Result<Vec<PathBuf>> {
    cgroup_dir::remove_stale(MountedHierarchy::V2, Error::CgroupV2NotMounted, prefix)
}

/// The kernel's IOCost switched on for one device with a given cost model and QoS; on drop the
/// device's previous `io.cost.model` and `io.cost.qos` lines are written back (or iocost disabled
/// there if it was off), so the device is left as found.
#[derive(Debug)]
pub struct KernelIoCost {
    /// The v2 root (where `io.cost.*` live).
    root: PathBuf,
    /// The device.
    dev: DevNum,
    /// Lines to write back on drop: (file, line).
    restore: Vec<(&'static str, String)>,
}

impl KernelIoCost {
    /// Writes `model` to `io.cost.model` and `qos` to `io.cost.qos` for `dev` (lines in the kernel's
    /// format without the device, e.g. `ctrl=user model=linear rbps=...` and `enable=1 ctrl=user rpct=50
    /// rlat=...`). The kernel's iocost must exist ([`crate::Capabilities::io_cost`]).
    pub fn enable(dev: DevNum, model: &str, qos: &str) -> Result<Self> {
        let root = mount_point(MountedHierarchy::V2).ok_or(Error::CgroupV2NotMounted)?;
        let mut cfg = KernelIoCost { root, dev, restore: Vec::new() };
        for (file, line) in [("io.cost.model", model), ("io.cost.qos", qos)] {
            let path = cfg.root.join(file);
            if !path.exists() {
                return Err(Error::CgroupFileMissing { path });
            }
            let before = sysfs::read(&path)?;
            let old = before.lines().find(|l| l.split_whitespace().next() == Some(&dev.to_string()));
            let undo = match (file, old) {
                (_, Some(old)) => old.to_string(),
                ("io.cost.qos", None) => format!("{dev} enable=0"),
                // A model line for a device iocost never ran on: the kernel's own choice again.
                (_, None) => format!("{dev} ctrl=auto"),
            };
            // Restore in reverse order of writing: QoS (which switches iocost) first.
            cfg.restore.insert(0, (file, undo));
            let value = format!("{dev} {line}");
            sysfs::write_raw(&path, &value).map_err(|e| match e.raw_os_error() {
                Some(libc::ENODEV) => Error::NoSuchDevice(dev),
                Some(libc::EINVAL) => {
                    Error::Parse { format: file, input: value.clone(), reason: "the kernel refused it (EINVAL)".into() }
                }
                _ => sysfs::file_error(format!("write '{value}' to"), &path, e),
            })?;
        }
        Ok(cfg)
    }

    /// The device.
    pub fn dev(&self) -> DevNum {
        self.dev
    }
}

impl Drop for KernelIoCost {
    fn drop(&mut self) {
        for (file, line) in &self.restore {
            if let Err(e) = sysfs::write(&self.root.join(file), line) {
                eprintln!("ioshare-host: cannot restore {file} of {}: {e}", self.dev);
            }
        }
    }
}
