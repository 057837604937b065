//! Typed errors of the engine: each names what is wrong and how to fix it, on one line.

use std::io;
use std::path::PathBuf;

/// An error from opening a target, validating a job or running IO.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The target path does not exist.
    #[error(
        "target '{0}' does not exist: give an existing file or block device, or omit --target to use a temporary file"
    )]
    TargetMissing(PathBuf),
    /// The target is a directory.
    #[error("target '{0}' is a directory: give a file or a block device (the default target is a temporary file in the current directory)")]
    TargetIsDirectory(PathBuf),
    /// The target is neither a regular file nor a block device.
    #[error("target '{0}' is neither a regular file nor a block device")]
    TargetNotFileOrDevice(PathBuf),
    /// Opening the target for direct reading and writing was refused.
    #[error("no permission to open '{0}' for reading and writing: {hint}", hint = permission_hint())]
    PermissionDenied(PathBuf),
    /// The directory of the default temporary target is not writable.
    #[error("cannot create the temporary target in '{0}' (permission denied): run from a writable directory or give --target")]
    TempDirNotWritable(PathBuf),
    /// A block device that is mounted or held by another user (exclusive open refused).
    #[error("block device '{0}' is in use (mounted or held by another program): give an unused device, it will be overwritten")]
    DeviceBusy(PathBuf),
    /// The target is smaller than the run needs.
    #[error("target '{path}' holds {size} bytes but at least {min} are needed: give a bigger file or device")]
    TargetTooSmall {
        /// Target path.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The minimum.
        min: u64,
    },
    /// The target lives in memory or refuses O_DIRECT, so it would not measure a device.
    #[error("'{path}' is on {fs}, which has no direct IO to a device: put the target on a disk-backed filesystem or give a block device")]
    NoDirectIo {
        /// Target path.
        path: PathBuf,
        /// What the filesystem is (`tmpfs`, `a filesystem that refuses O_DIRECT`).
        fs: &'static str,
    },
    /// A job or tenant description that cannot run.
    #[error("invalid job for tenant '{tenant}': {reason}")]
    InvalidJob {
        /// Tenant name.
        tenant: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The controller refused a tenant's group settings.
    #[error("controller refused tenant '{tenant}': {source}")]
    Controller {
        /// Tenant name.
        tenant: String,
        /// The controller's reason.
        source: ioshare_core::Error,
    },
    /// An IO failed on the device.
    #[error("IO error on '{path}' at offset {offset}: {source}")]
    Device {
        /// Target path.
        path: PathBuf,
        /// Offset of the failed IO.
        offset: u64,
        /// The error the kernel returned.
        source: io::Error,
    },
    /// Writing was asked for on a target the program did not create, without `--destructive`.
    #[error("refusing to write to '{path}': {reason}")]
    WouldOverwrite {
        /// The target.
        path: PathBuf,
        /// Why, and the ways forward.
        reason: String,
    },
    /// The path given to profile does not exist.
    #[error(
        "'{0}' does not exist: give a directory (profile creates and removes a file there), a file or a block device"
    )]
    ProfileTargetMissing(PathBuf),
    /// A loop device was asked for without root.
    #[error("--loop needs root (loop devices): run as root or drop --loop to measure the file directly")]
    LoopNeedsRoot,
    /// Options that cannot work together or are out of range.
    #[error("{0}")]
    InvalidOptions(String),
    /// A loop device or other host plumbing failed.
    #[error(transparent)]
    Host(ioshare_host::Error),
    /// The work was interrupted (Ctrl-C) before it finished; what it created has been removed.
    #[error("interrupted before the measurement finished; the temporary file and loop device are removed")]
    Interrupted,
    /// The reference engine (fio) could not run or its report could not be read.
    #[error("reference run: {0}")]
    Reference(String),
    /// Any other system call failure, with what was being done.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

impl Error {
    /// Wraps an OS error with what was being done.
    pub fn os(what: impl Into<String>, source: io::Error) -> Self {
        Error::Os { what: what.into(), source }
    }
}

/// How to get past a refused open: root helps, unless we already are root.
fn permission_hint() -> &'static str {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        "this host refuses it even to root (device cgroup or security policy); choose another target"
    } else {
        "run as root or choose a file you own"
    }
}

/// Result with the engine's error.
pub type Result<T> = std::result::Result<T, Error>;
