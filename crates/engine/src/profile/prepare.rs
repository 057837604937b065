//! Where profile's IO goes, and the rules that keep data safe: a directory gets a temporary file
//! (profile's own, written freely); an existing file or device is written only with
//! `--destructive` (a block device then opened with O_EXCL: never while mounted) and otherwise
//! refused before any IO, unless only reads are asked for (then opened read-only); `--loop` puts a
//! loop device with direct IO over the file (root).

use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_host::LoopDevice;

use super::disk::{self, Disk};
use super::{ProfileOptions, MIN_PROFILE_SIZE};
use crate::error::{Error, Result};
use crate::target::{Target, TargetKind, TempTarget};

/// An open target and what was made for it. Fields drop in order: the target closes before the
/// loop device detaches, and that before the temporary file is removed.
pub(super) struct Prepared {
    /// The opened target (read-only unless writes are allowed).
    pub dev: Target,
    /// The loop device, with `--loop`.
    _lo: Option<LoopDevice>,
    /// The temporary file, for a directory.
    _temp: Option<TempTarget>,
    /// What IO goes to.
    pub measured: PathBuf,
    /// Whether profile created the file.
    pub created: bool,
    /// `file`, `block device`, `loop device over a file`.
    pub kind: &'static str,
    /// The whole disk the lines are for.
    pub disk: Option<Disk>,
    /// Remarks for the report.
    pub notes: Vec<String>,
}

/// Checks the safety rules, then creates, attaches and opens what `target` needs.
pub(super) fn prepare(
    target: &Path,
    opts: &ProfileOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<Prepared> {
    let meta = fs::metadata(target).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::ProfileTargetMissing(target.to_path_buf()),
        io::ErrorKind::PermissionDenied => Error::PermissionDenied(target.to_path_buf()),
        _ => Error::os(format!("cannot inspect '{}'", target.display()), e),
    })?;
    if opts.loop_device && meta.file_type().is_block_device() {
        return Err(Error::InvalidOptions(format!(
            "--loop puts a loop device over a file, and '{}' is a block device: drop --loop",
            target.display()
        )));
    }
    if opts.loop_device && !ioshare_host::is_root() {
        return Err(Error::LoopNeedsRoot);
    }
    let created = meta.is_dir();
    if !created && !opts.read_only && !opts.destructive {
        return Err(Error::WouldOverwrite {
            path: target.to_path_buf(),
            reason: "profile writes, and it did not create this target: pass --destructive to let it overwrite the \
                     data, --read-only to measure reads only, or give a directory to profile a file created there"
                .into(),
        });
    }
    let mut notes = Vec::new();
    let temp = if created {
        let stale = TempTarget::remove_stale(target);
        if !stale.is_empty() {
            notes.push(format!(
                "removed {} temporary file(s) a killed run left in '{}'",
                stale.len(),
                target.display()
            ));
        }
        let mib = opts.temp_size >> 20;
        Some(
            TempTarget::create(target, opts.temp_size, stop, |done, total| {
                if done % (64 << 20) == 0 || done == total {
                    progress(&format!(
                        "writing the temporary file ({mib} MiB): {:3.0}%",
                        done as f64 * 100.0 / total as f64
                    ));
                }
            })
            .map_err(|e| if stop.load(Ordering::Relaxed) { Error::Interrupted } else { e })?,
        )
    } else {
        None
    };
    let file = temp.as_ref().map_or(target, |t| t.path());
    let lo = if opts.loop_device { Some(LoopDevice::attach(file, true).map_err(Error::Host)?) } else { None };
    let measured = lo.as_ref().map_or(file, |l| l.path()).to_path_buf();
    let dev = if opts.read_only {
        Target::open_read_only(&measured, MIN_PROFILE_SIZE)?
    } else {
        Target::open(&measured, MIN_PROFILE_SIZE)?
    };
    let kind = match (dev.kind(), lo.is_some()) {
        (_, true) => "loop device over a file",
        (TargetKind::BlockDevice, _) => "block device",
        (TargetKind::File, _) => "file",
    };
    let disk = disk::disk_of(&measured);
    match (&disk, dev.kind(), lo.is_some()) {
        (None, _, _) => notes.push(format!(
            "'{}' is on no block device this host can name: the lines have no MAJ:MIN; prefix the disk's",
            measured.display()
        )),
        (Some(d), TargetKind::File, false) => notes.push(format!(
            "measured through the filesystem; the lines are for the disk under it, {} ({})",
            d.name, d.dev
        )),
        _ => {}
    }
    Ok(Prepared { dev, _lo: lo, _temp: temp, measured, created, kind, disk, notes })
}
