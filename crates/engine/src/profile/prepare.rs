//! Where profile's IO goes, and the rules that keep data safe: a directory gets a temporary file
//! (profile's own, written freely); an existing file or device is written only with
//! `--destructive` (a block device then opened with O_EXCL: never while mounted) and otherwise
//! refused before any IO, unless only reads are asked for (then opened read-only); `--loop` puts a
//! loop device with direct IO over the file (root).
//!
//! Merges: on a whole disk the profile owns (a loop device it made, or a device given with
//! `--destructive`) and as root, the disk's `queue/nomerges` is set to 2 (no merging at all, not
//! even in a plug) for the measurement, recorded first in a state file and restored when
//! [`Prepared`] drops or, after a crash, by the next profile's [`repair`]. Elsewhere (a file on a
//! shared disk, a partition, a device only read) the disk's settings are not the profile's to
//! change: each IO is then submitted alone, which io_uring does without a plug.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_host::{AttrSwitch, BlockQueue, LoopDevice, Restored};

use super::disk::{self, Disk};
use super::{ProfileOptions, MIN_PROFILE_SIZE};
use crate::error::{Error, Result};
use crate::run::SUBMIT_BATCH;
use crate::target::{Target, TargetKind, TempTarget};

/// An open target and what was made for it. Fields drop in order: the target closes before the
/// disk's merge setting is restored, that before the loop device detaches, and that before the
/// temporary file is removed.
pub struct Prepared {
    /// The opened target (read-only unless writes are allowed).
    pub dev: Target,
    /// The disk's `queue/nomerges` switched to 2, when it could be.
    _nomerges: Option<AttrSwitch>,
    /// How merges are kept out, in words.
    pub merges: String,
    /// Whether merging is switched off.
    pub merges_off: bool,
    /// IOs per submission: 1 where merging could not be switched off.
    pub submit_batch: u32,
    /// The disk's counters file, `/sys/block/X/stat`.
    pub stat: Option<PathBuf>,
    /// The disk's IO scheduler.
    pub scheduler: Option<String>,
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

/// Checks the safety rules, then creates, attaches and opens what `target` needs (also for `ioshare
/// tune`, which sweeps the same target after profiling it).
pub fn prepare(
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
    let owned = lo.is_some() || (opts.destructive && dev.kind() == TargetKind::BlockDevice);
    let whole = dev.kind() == TargetKind::BlockDevice
        && disk
            .as_ref()
            .zip(fs::metadata(&measured).ok())
            .is_some_and(|(d, m)| (libc::major(m.rdev()), libc::minor(m.rdev())) == (d.dev.major, d.dev.minor));
    let sys = disk.as_ref().map(|d| Path::new("/sys/block").join(&d.name));
    let nomerges = match &sys {
        Some(sys) if owned && whole && ioshare_host::is_root() => {
            Some(AttrSwitch::set(&opts.state_dir, &sys.join("queue/nomerges"), "2").map_err(Error::Host)?)
        }
        _ => None,
    };
    let name = disk.as_ref().map_or("", |d| d.name.as_str());
    let merges = match &nomerges {
        Some(s) => format!("off: {name}'s queue/nomerges set to 2 for the runs (was {}, restored after)", s.previous()),
        None => {
            let why = if !owned {
                "the disk is not the profile's to change"
            } else if !whole {
                "a partition's disk is shared with its other partitions"
            } else {
                "setting queue/nomerges needs root"
            };
            format!("not switched off ({why}): each IO submitted alone, unplugged, so neighbours do not merge")
        }
    };
    let scheduler =
        disk.as_ref().and_then(|d| BlockQueue::read(Path::new("/sys/block"), &d.name, d.dev, None).scheduler);
    Ok(Prepared {
        dev,
        merges_off: nomerges.is_some(),
        submit_batch: if nomerges.is_some() { SUBMIT_BATCH } else { 1 },
        _nomerges: nomerges,
        merges,
        stat: sys.map(|s| s.join("stat")),
        scheduler,
        _lo: lo,
        _temp: temp,
        measured,
        created,
        kind,
        disk,
        notes,
    })
}

/// Restores what killed profiles left switched (see the module comment); one note per attribute.
pub fn repair(state_dir: &Path) -> Result<Vec<String>> {
    let repaired = ioshare_host::repair_attrs(state_dir).map_err(Error::Host)?;
    Ok(repaired
        .into_iter()
        .map(|r| match r.outcome {
            Restored::Done => {
                format!("restored {} to {}, as a profile that was killed had left it", r.file.display(), r.value)
            }
            Restored::Vanished => format!("{} is gone: nothing to restore for a killed profile", r.file.display()),
            Restored::ChangedByOthers(now) => format!(
                "left {} at {now}: a killed profile had changed it, and someone changed it again since",
                r.file.display()
            ),
        })
        .collect())
}
