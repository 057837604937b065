//! Loop devices over a file: attached with the loop driver's ioctls, detached on drop.
//!
//! Design: ioctls (see [`crate::loop_sys`]) rather than running `losetup --find --show`, because
//! - `LOOP_CONFIGURE` sets the backing file, direct IO and `LO_FLAGS_AUTOCLEAR` in one call, and
//! - a [`LoopDevice`] keeps the device open for its whole life; with autoclear the kernel detaches the
//!   device when the last opener closes it, so even a process killed by SIGKILL or an unhandled Ctrl-C
//!   leaves no loop device behind. `losetup` attaches and exits: nothing would clean up after a kill.
//!
//! The `loopdev` crates generate their bindings with bindgen, which needs clang at build time (not
//! installed here); the ABI needed is four ioctls and one struct, so it is written out by hand.
//!
//! Races with other processes attaching at the same moment are handled as `losetup` does: a device
//! that turns out to be taken (`EBUSY`) is skipped and another free one requested.
//!
//! The IO scheduler of a loop device outlives the attachment (loop devices persist), so
//! [`BlockDevice::set_scheduler`] on it remembers the original and restores it on drop, before the
//! device is detached.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Deref;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::block_device::BlockDevice;
use crate::error::{Error, Result};
use crate::loop_sys::{self, LoopConfig, LO_FLAGS_AUTOCLEAR, LO_FLAGS_DIRECT_IO};
use crate::sysfs;

/// How many times a free device is requested before giving up (each miss means another process took
/// the device between `LOOP_CTL_GET_FREE` and `LOOP_CONFIGURE`).
const ATTACH_ATTEMPTS: usize = 32;

/// A loop device attached to a file; detached on drop (also when unwinding from a panic, and by the
/// kernel itself if the process dies, see the module comment). It is a [`BlockDevice`] (node, number,
/// scheduler switch) for as long as it is attached: [`LoopDevice`] dereferences to it.
#[derive(Debug)]
pub struct LoopDevice {
    /// `/dev/loopN` as a block device; declared first so that its scheduler is restored (on drop)
    /// before the attachment below is released.
    block: BlockDevice,
    /// The attachment, released after `block` on drop.
    attachment: Attachment,
}

/// What makes the device ours: the open descriptor (with autoclear, closing the last one detaches
/// the device) and whether we created the device node.
#[derive(Debug)]
struct Attachment {
    /// N in `/dev/loopN`.
    index: u32,
    /// The device, held open; `None` only while being dropped.
    device: Option<File>,
    /// Whether `LOOP_CTL_GET_FREE` created the device for us (then it is removed again on drop).
    created: bool,
}

impl LoopDevice {
    /// Attaches a free loop device to `file`, like `losetup --find --show [--direct-io=on] FILE`.
    ///
    /// With `direct_io` the loop driver reads and writes the file with O_DIRECT, so the page cache is
    /// not in the measured path; if the kernel falls back to buffered IO (a filesystem without O_DIRECT
    /// at the device's block size), this fails with [`Error::DirectIoUnsupported`] and nothing stays
    /// attached. Note that tmpfs accepts O_DIRECT since Linux 6.6 (it does on this host's 6.18).
    pub fn attach(file: &Path, direct_io: bool) -> Result<Self> {
        let backing = open_backing(file)?;
        let control =
            OpenOptions::new().read(true).write(true).open("/dev/loop-control").map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Error::NoLoopControl,
                _ => sysfs::file_error("open".to_string(), Path::new("/dev/loop-control"), e),
            })?;
        let attach_error = |source| Error::LoopAttach { path: file.to_path_buf(), source };
        let existing = loop_indices();
        let flags = LO_FLAGS_AUTOCLEAR | if direct_io { LO_FLAGS_DIRECT_IO } else { 0 };
        let config = LoopConfig::new(backing.as_fd(), flags, file.as_os_str().as_bytes());

        for _ in 0..ATTACH_ATTEMPTS {
            let index = loop_sys::get_free(control.as_fd()).map_err(attach_error)?;
            let path = PathBuf::from(format!("/dev/loop{index}"));
            let device = OpenOptions::new().read(true).write(true).open(&path).map_err(attach_error)?;
            match loop_sys::configure(device.as_fd(), &config) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => continue,
                Err(e) => return Err(attach_error(e)),
            }
            // From here on the device is ours: dropping `attachment` detaches it if anything below fails.
            let attachment = Attachment { index, device: Some(device), created: !existing.contains(&index) };
            let attached = LoopDevice { block: BlockDevice::open(&path)?, attachment };
            if direct_io && sysfs::read(&attached.sys_dir().join("loop/dio"))?.trim() != "1" {
                return Err(Error::DirectIoUnsupported { path: file.to_path_buf() });
            }
            return Ok(attached);
        }
        Err(attach_error(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!("every free loop device was taken by another process ({ATTACH_ATTEMPTS} attempts); retry"),
        )))
    }

    /// `/sys/block/loopN`.
    fn sys_dir(&self) -> PathBuf {
        PathBuf::from(format!("/sys/block/loop{}", self.attachment.index))
    }
}

impl Deref for LoopDevice {
    type Target = BlockDevice;

    /// The attached device: its node `/dev/loopN`, its number (`7:N` for the first 256), and its IO
    /// scheduler (switching it touches only this loop device, never the disk below; the original is
    /// restored on drop, because loop devices outlive their attachment).
    fn deref(&self) -> &BlockDevice {
        &self.block
    }
}

impl Drop for Attachment {
    /// Detaches, and removes a device node we created. Best effort: a failure is reported on stderr, as
    /// nothing can be returned from `drop`.
    fn drop(&mut self) {
        let Some(device) = self.device.take() else { return };
        // We are normally the only opener, so this detaches at once; if a child process still holds the
        // device open, the kernel detaches it when that process closes it (autoclear).
        if let Err(e) = loop_sys::clear(device.as_fd()) {
            eprintln!("ioshare-host: cannot detach /dev/loop{}: {e}", self.index);
        }
        // The device cannot be removed while open, so close it first.
        drop(device);
        if self.created {
            if let Ok(control) = OpenOptions::new().read(true).write(true).open("/dev/loop-control") {
                // EBUSY means another process uses the device by now: then it is theirs to keep.
                let _ = loop_sys::remove(control.as_fd(), self.index);
            }
        }
    }
}

/// Opens `file` read-write for a loop device, with an error that says what is wrong with it.
fn open_backing(file: &Path) -> Result<File> {
    let bad = |reason: &str| Error::BackingFile { path: file.to_path_buf(), reason: reason.to_string() };
    let backing = OpenOptions::new().read(true).write(true).open(file).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => bad("no such file (create it first)"),
        io::ErrorKind::IsADirectory => bad("it is a directory (give a regular file)"),
        io::ErrorKind::PermissionDenied => bad("permission denied (it must be readable and writable)"),
        _ => bad(&e.to_string()),
    })?;
    let meta = backing.metadata().map_err(|e| bad(&e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a regular file"));
    }
    if meta.len() == 0 {
        return Err(bad("the file is empty (give it a size first, e.g. truncate -s 1G FILE)"));
    }
    Ok(backing)
}

/// Indices of the loop devices that exist now (`/sys/block/loopN`).
fn loop_indices() -> BTreeSet<u32> {
    std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.strip_prefix("loop")?.parse().ok())
        .collect()
}
