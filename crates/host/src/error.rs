//! Typed errors of the host crate: every message is one line naming what is wrong and how to fix it.

use std::io;
use std::path::PathBuf;

use ioshare_core::error::printable;
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
    /// The cgroup v1 memory hierarchy is not mounted.
    #[error("cgroup v1 memory hierarchy not mounted: this host offers no memory.* v1 cgroup files (mount -t cgroup -o memory none /sys/fs/cgroup/memory)")]
    MemoryNotMounted,
    /// The cgroup v2 (unified) hierarchy is not mounted.
    #[error(
        "cgroup v2 hierarchy not mounted: this host offers no io.* cgroup files (mount -t cgroup2 none /sys/fs/cgroup)"
    )]
    CgroupV2NotMounted,
    /// A v2 controller that the parent cgroup cannot enable for its children.
    #[error("cannot enable the cgroup v2 '{controller}' controller below {}: the kernel does not offer it there (see cgroup.controllers; it may be bound to cgroup v1)", cgroup.display())]
    ControllerUnavailable {
        /// The controller, e.g. `io`.
        controller: String,
        /// The parent cgroup.
        cgroup: PathBuf,
    },
    /// A v2 parent with processes of its own cannot hand controllers to children.
    #[error("cannot enable controllers below {}: it has processes of its own (cgroup v2's no-internal-processes rule); run from the root cgroup or from an empty delegated one", cgroup.display())]
    InternalProcesses {
        /// The parent cgroup.
        cgroup: PathBuf,
    },
    /// A cgroup interface file that does not exist.
    #[error("{} not found: its controller is not enabled for this cgroup or not loaded (io.bfq.weight needs the bfq scheduler; io.cost.* need the kernel's iocost)", path.display())]
    CgroupFileMissing {
        /// The file.
        path: PathBuf,
    },
    /// A cgroup name that cannot be used.
    #[error("invalid cgroup name '{}': {reason}", printable(.name))]
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
    /// A directory that is not a cgroup v1 memory cgroup.
    #[error("{} is not a cgroup v1 memory cgroup (no memory.usage_in_bytes): give a directory under the memory hierarchy", .0.display())]
    NotAMemcgV1(PathBuf),
    /// A directory that is not a cgroup v2 cgroup with the memory controller.
    #[error("{} is not a cgroup v2 cgroup with the memory controller (no memory.current): give a cgroup whose parent enables +memory", .0.display())]
    NotAMemcgV2(PathBuf),
    /// A memory limit below what the group uses and the kernel could not reclaim.
    #[error("cannot set the memory limit of {} to {bytes} bytes: the group uses more and the kernel could not reclaim enough (EBUSY)", cgroup.display())]
    LimitBelowUsage {
        /// The cgroup directory.
        cgroup: PathBuf,
        /// The limit asked for.
        bytes: u64,
    },
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
    /// A malformed line of a cgroup text format (`io.max`, `io.weight`, `blkio.throttle.io_serviced`);
    /// the input is quoted [`printable`].
    #[error("invalid {format} '{}': {}", printable(.input), printable(.reason))]
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
    /// The state file cannot be read.
    #[error("cannot read state file {}: {} (inspect it, then remove it to start afresh)", path.display(), printable(.reason))]
    StateFile {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The state directory cannot be written: the recorder makes no setting it cannot record first.
    #[error(
        "cannot write {}: {source} (the agent records every setting in its state directory before making it, \
         and makes none it cannot record: give --state-dir a writable directory with free space)",
        path.display()
    )]
    StateFileWrite {
        /// The file.
        path: PathBuf,
        /// The OS's answer.
        source: io::Error,
    },
    /// A write outside the discovered cgroup roots was refused.
    #[error("refusing to write {}: it is outside the cgroup hierarchies this host mounts", path.display())]
    OutsideCgroupRoots {
        /// The refused path.
        path: PathBuf,
    },
    /// Another live process switched a kernel attribute and has not put it back yet.
    #[error("{} was switched by another ioshare process (pid {pid}), which puts it back when it ends: wait for it or stop it", file.display())]
    AttributeBusy {
        /// The attribute file.
        file: PathBuf,
        /// The other process.
        pid: u32,
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
