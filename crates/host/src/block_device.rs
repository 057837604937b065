//! A whole-disk block device: its device number, and its IO scheduler switched for a run and restored
//! on drop. Used where the kernel peers run on the device itself, like the lab guest's NVMe data disk,
//! and as what a [`crate::LoopDevice`] is while attached; the caller is responsible for the device being one
//! the user named (`--target`), never the machine's own disk by default.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use ioshare_core::iocost::line::DevNum;

use crate::error::{Error, Result};
use crate::scheduler::SchedulerSwitch;
use crate::sysfs;

/// A whole-disk block device; its scheduler is restored on drop if [`BlockDevice::set_scheduler`]
/// changed it.
#[derive(Debug)]
pub struct BlockDevice {
    /// The device node.
    path: PathBuf,
    /// Its device number.
    dev: DevNum,
    /// Its scheduler.
    scheduler: SchedulerSwitch,
}

impl BlockDevice {
    /// The block device at `path`, which must be a whole disk (partitions have no scheduler of their
    /// own).
    pub fn open(path: &Path) -> Result<Self> {
        let bad = |reason: &str| Error::BackingFile { path: path.to_path_buf(), reason: reason.to_string() };
        let meta = std::fs::metadata(path).map_err(|e| sysfs::file_error("stat".to_string(), path, e))?;
        if !meta.file_type().is_block_device() {
            return Err(bad("it is not a block device"));
        }
        let rdev = meta.rdev();
        let dev = DevNum { major: libc::major(rdev), minor: libc::minor(rdev) };
        let sys_dir = PathBuf::from(format!("/sys/dev/block/{dev}"));
        if !sys_dir.join("queue/scheduler").exists() {
            return Err(bad("it is a partition or has no IO scheduler; name the whole disk"));
        }
        Ok(BlockDevice { path: path.to_path_buf(), dev, scheduler: SchedulerSwitch::new(&sys_dir, path) })
    }

    /// The device node.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The device number, as cgroup files name devices.
    pub fn dev(&self) -> DevNum {
        self.dev
    }

    /// The device's current IO scheduler.
    pub fn scheduler(&self) -> Result<String> {
        self.scheduler.current()
    }

    /// Switches the device's IO scheduler to `name`; the original is restored on drop.
    pub fn set_scheduler(&self, name: &str) -> Result<()> {
        self.scheduler.set(name)
    }
}

impl Drop for BlockDevice {
    fn drop(&mut self) {
        self.scheduler.restore();
    }
}
