//! Typed errors of the host crate: every message is one line naming what is wrong and how to fix it.

use std::io;
use std::path::PathBuf;

use ioshare_core::iocost::line::DevNum;

/// An error from attaching a loop device, managing a cgroup, or parsing a cgroup file format.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The loop driver is not available.
    #[error("cannot attach loop device: /dev/loop-control not found (load the loop module: modprobe loop)")]
    NoLoopControl,
    /// An operation that needs root was attempted without it.
    #[error("cannot {action}: permission denied (run as root)")]
    PermissionDenied {
        /// What was attempted, e.g. "attach a loop device".
        action: String,
    },
    /// The file to put behind a loop device cannot be used.
    #[error("cannot attach loop device over {}: {reason}", path.display())]
    BackingFile {
        /// The backing file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The kernel refused to attach the loop device.
    #[error("cannot attach loop device over {}: {source}", path.display())]
    LoopAttach {
        /// The backing file.
        path: PathBuf,
        /// The kernel's answer.
        source: io::Error,
    },
    /// Direct IO was requested but the loop driver fell back to buffered IO.
    #[error(
        "cannot attach {} with direct IO: its filesystem does not support O_DIRECT at the device's block size \
         (put the file on ext4 or xfs, or attach without direct IO)",
        path.display()
    )]
    DirectIoUnsupported {
        /// The backing file.
        path: PathBuf,
    },
    /// The IO scheduler asked for is not offered by the device.
    #[error("scheduler '{name}' is not available for {} (available: {available}; load it with modprobe {name})", device.display())]
    SchedulerUnavailable {
        /// The loop device.
        device: PathBuf,
        /// The scheduler asked for.
        name: String,
        /// The schedulers the device offers.
        available: String,
    },
    /// The cgroup v1 blkio hierarchy is not mounted.
    #[error("cgroup v1 blkio hierarchy not mounted: this host offers no blk-throttle/BFQ cgroup files (mount -t cgroup -o blkio none /sys/fs/cgroup/blkio)")]
    BlkioNotMounted,
    /// A cgroup name that cannot be used.
    #[error("invalid cgroup name '{name}': {reason}")]
    InvalidCgroupName {
        /// The name given.
        name: String,
        /// What is wrong and how to fix it.
        reason: &'static str,
    },
    /// The cgroup to create already exists (it is not ours to take over or remove).
    #[error("cgroup {} already exists: pick another name, or remove it (rmdir) if it is left over", path.display())]
    CgroupExists {
        /// The existing cgroup directory.
        path: PathBuf,
    },
    /// BFQ's weight file is missing in a cgroup.
    #[error(
        "blkio.bfq.weight not found in {}: the BFQ scheduler is not loaded \
         (set a device's scheduler to bfq first, or modprobe bfq)",
        cgroup.display()
    )]
    BfqWeightMissing {
        /// The cgroup directory.
        cgroup: PathBuf,
    },
    /// A BFQ weight outside 1..=1000.
    #[error("invalid BFQ weight {0}: blkio.bfq.weight must be between 1 and 1000")]
    InvalidBfqWeight(u32),
    /// A throttle limit the kernel cannot take.
    #[error("invalid {knob} limit {value}: {reason}")]
    InvalidLimit {
        /// The throttle file, e.g. `blkio.throttle.read_iops_device`.
        knob: &'static str,
        /// The value given.
        value: u64,
        /// What is wrong and how to fix it.
        reason: &'static str,
    },
    /// A device number that names no block device.
    #[error("no block device {0}: check MAJ:MIN with lsblk or /sys/block/*/dev")]
    NoSuchDevice(DevNum),
    /// A pid that names no process.
    #[error("cannot move pid {pid} into {}: no such process", cgroup.display())]
    NoSuchProcess {
        /// The pid given.
        pid: u32,
        /// The cgroup directory.
        cgroup: PathBuf,
    },
    /// Reading or writing a kernel file failed for another reason.
    #[error("{action} {}: {source}", path.display())]
    KernelFile {
        /// What was attempted, e.g. "cannot write '7:0 100' to".
        action: String,
        /// The file.
        path: PathBuf,
        /// The kernel's answer.
        source: io::Error,
    },
    /// A malformed line of a cgroup text format (`io.max`, `io.weight`, `blkio.throttle.io_serviced`).
    #[error("invalid {format} '{input}': {reason}")]
    Parse {
        /// Which format.
        format: &'static str,
        /// The offending token or line.
        input: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// Another agent holds the state directory.
    #[error("another ioshare agent (pid {pid}) is running with state file {}: stop it first (or use another --state-dir)", state.display())]
    AgentRunning {
        /// Its pid.
        pid: u32,
        /// The state file.
        state: PathBuf,
    },
    /// The state file cannot be understood.
    #[error("state file {} is damaged: {reason} (inspect it, then remove it to start afresh)", path.display())]
    StateFile {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A write outside the discovered cgroup roots was refused.
    #[error("refusing to write {}: it is outside the cgroup hierarchies this host mounts", path.display())]
    OutsideCgroupRoots {
        /// The refused path.
        path: PathBuf,
    },
    /// A block device named by path or number that cannot be used.
    #[error("block device {name}: {reason}")]
    BlockDevice {
        /// What was given.
        name: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
}

/// Result with the host crate's error.
pub type Result<T> = std::result::Result<T, Error>;

/// A parse error for `format` about `input`.
pub(crate) fn parse_error(format: &'static str, input: &str, reason: impl Into<String>) -> Error {
    Error::Parse { format, input: input.to_string(), reason: reason.into() }
}
