//! Where the IO goes: a file or block device opened for O_DIRECT, checked so that a run measures a
//! device and not memory; and the temporary file the bench uses when no target is given.
//!
//! Checks, each with its own error: the path exists and is a regular file or block device; it opens
//! read-write with O_DIRECT (block devices also with O_EXCL, which the kernel refuses while a device
//! is mounted, so a mounted disk is never overwritten); a file is not on tmpfs/ramfs (which accept
//! O_DIRECT since Linux 6.6 but are memory); a first direct read succeeds; the size is large enough.
//!
//! Whether a caller may write at all is its decision (bench and profile write only to what they
//! created or what the user named with `--destructive`); a target opened with
//! [`Target::open_read_only`] has a read-only descriptor, so a write reaching it fails with EBADF
//! instead of changing data. Reading a mounted device is harmless, so read-only opens are not
//! exclusive.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::buffer::AlignedBuf;
use crate::error::{Error, Result};

const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// What kind of object a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A regular file on a filesystem.
    File,
    /// A block device.
    BlockDevice,
}

/// An open O_DIRECT target.
#[derive(Debug)]
pub struct Target {
    file: File,
    path: PathBuf,
    size: u64,
    kind: TargetKind,
    writable: bool,
}

/// How a target is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Read-write; block devices exclusively (refused while mounted or held).
    Exclusive,
    /// Read-write, shared with other processes of this program.
    Shared,
    /// Read-only.
    ReadOnly,
}

impl Target {
    /// Opens `path` for direct reads and writes; fails with a one-line reason when it cannot serve as
    /// a device under test or is smaller than `min_size` bytes.
    pub fn open(path: &Path, min_size: u64) -> Result<Target> {
        Self::open_with(path, min_size, Access::Exclusive)
    }

    /// Like [`Target::open`] but read-only: writes through it fail, and a block device may be in use.
    pub fn open_read_only(path: &Path, min_size: u64) -> Result<Target> {
        Self::open_with(path, min_size, Access::ReadOnly)
    }

    /// Like [`Target::open`] but without the exclusive open of block devices, for several processes
    /// sharing a device this program set up (the bench's kernel-peer workers on its loop device).
    pub fn open_shared(path: &Path, min_size: u64) -> Result<Target> {
        Self::open_with(path, min_size, Access::Shared)
    }

    fn open_with(path: &Path, min_size: u64, access: Access) -> Result<Target> {
        let meta = fs::metadata(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::TargetMissing(path.to_path_buf()),
            io::ErrorKind::PermissionDenied => Error::PermissionDenied(path.to_path_buf()),
            _ => Error::os(format!("cannot inspect '{}'", path.display()), e),
        })?;
        let kind = if meta.is_dir() {
            return Err(Error::TargetIsDirectory(path.to_path_buf()));
        } else if meta.file_type().is_block_device() {
            TargetKind::BlockDevice
        } else if meta.is_file() {
            TargetKind::File
        } else {
            return Err(Error::TargetNotFileOrDevice(path.to_path_buf()));
        };
        if kind == TargetKind::File {
            if let Some(fs) = memory_filesystem(path)? {
                return Err(Error::NoDirectIo { path: path.to_path_buf(), fs });
            }
        }
        let mut flags = libc::O_DIRECT;
        if kind == TargetKind::BlockDevice && access == Access::Exclusive {
            flags |= libc::O_EXCL;
        }
        let writable = access != Access::ReadOnly;
        let open = || OpenOptions::new().read(true).write(writable).custom_flags(flags).open(path);
        // A process that used the device through io_uring and just ended still holds its exclusive
        // claim until the kernel tears its ring down, in a worker after the exit: EBUSY for some
        // milliseconds (measured here: one profile right after another). A mounted device stays
        // busy and is refused after the wait.
        let deadline = std::time::Instant::now() + EXCL_RETRY;
        let mut file = loop {
            match open() {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.map_err(|e| open_error(path, kind, e))?,
            }
        };
        let size =
            file.seek(SeekFrom::End(0)).map_err(|e| Error::os(format!("cannot size '{}'", path.display()), e))?;
        if size < min_size {
            return Err(Error::TargetTooSmall { path: path.to_path_buf(), size, min: min_size });
        }
        let mut probe = AlignedBuf::random(4096, 0);
        file.read_at(probe.as_mut_slice(), 0).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => {
                Error::NoDirectIo { path: path.to_path_buf(), fs: "a filesystem that refuses O_DIRECT" }
            }
            _ => Error::os(format!("cannot read '{}'", path.display()), e),
        })?;
        Ok(Target { file, path: path.to_path_buf(), size, kind, writable })
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// File or block device.
    pub fn kind(&self) -> TargetKind {
        self.kind
    }

    /// Whether it was opened for writing.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The O_DIRECT file descriptor.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// How long an exclusive open of a busy block device is retried (see [`Target::open`]).
const EXCL_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

fn open_error(path: &Path, kind: TargetKind, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => Error::PermissionDenied(path.to_path_buf()),
        Some(libc::EBUSY) if kind == TargetKind::BlockDevice => Error::DeviceBusy(path.to_path_buf()),
        Some(libc::EINVAL) => Error::NoDirectIo { path: path.to_path_buf(), fs: "a filesystem that refuses O_DIRECT" },
        _ => Error::os(format!("cannot open '{}'", path.display()), e),
    }
}

/// `Some(name)` when `path` lives on a memory filesystem.
fn memory_filesystem(path: &Path) -> Result<Option<&'static str>> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::TargetNotFileOrDevice(path.to_path_buf()))?;
    // SAFETY: statfs writes into a zeroed struct of the right type; `c` is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::os(
            format!("cannot inspect the filesystem of '{}'", path.display()),
            io::Error::last_os_error(),
        ));
    }
    #[allow(clippy::unnecessary_cast)] // f_type's integer type differs between libcs
    Ok(match st.f_type as i64 {
        TMPFS_MAGIC => Some("tmpfs (memory)"),
        RAMFS_MAGIC => Some("ramfs (memory)"),
        _ => None,
    })
}

/// A temporary target file filled with incompressible data; removed when dropped (also on error and
/// interruption, since every exit path unwinds through the drop).
#[derive(Debug)]
pub struct TempTarget {
    path: PathBuf,
}

/// Size of the writes that fill a temporary target.
const FILL_CHUNK: usize = 1 << 20;

impl TempTarget {
    /// Removes `dir/.ioshare-bench-<pid>-<n>.dat` files whose process is gone (left by a run killed with
    /// SIGKILL, which runs no destructor); returns what it removed.
    pub fn remove_stale(dir: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let stale = |name: &str| {
            let pid = name.strip_prefix(".ioshare-bench-")?.strip_suffix(".dat")?.split('-').next()?;
            let pid: u32 = pid.parse().ok()?;
            (pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()).then_some(())
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name().to_str().and_then(stale).is_some() && std::fs::remove_file(&path).is_ok() {
                removed.push(path);
            }
        }
        removed
    }

    /// Creates `dir/.ioshare-bench-<pid>-<n>.dat` of `size` bytes (a multiple of 1 MiB), writing every byte
    /// with direct IO so that reads reach the device (sparse or fallocated files read as zeros without
    /// IO). `progress(done, total)` is called after each MiB; `stop` aborts (the file is removed).
    pub fn create(dir: &Path, size: u64, stop: &AtomicBool, mut progress: impl FnMut(u64, u64)) -> Result<TempTarget> {
        let size = size.next_multiple_of(FILL_CHUNK as u64);
        if let Some(fs) = memory_filesystem(dir)? {
            return Err(Error::NoDirectIo { path: dir.to_path_buf(), fs });
        }
        let free = free_space(dir)?;
        if free < size + size / 10 {
            return Err(Error::TargetTooSmall { path: dir.to_path_buf(), size: free, min: size + size / 10 });
        }
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".ioshare-bench-{}-{n}.dat", std::process::id()));
        let file =
            OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_DIRECT).open(&path).map_err(|e| {
                match e.kind() {
                    io::ErrorKind::PermissionDenied => Error::TempDirNotWritable(dir.to_path_buf()),
                    _ if e.raw_os_error() == Some(libc::EINVAL) => {
                        Error::NoDirectIo { path: dir.to_path_buf(), fs: "a filesystem that refuses O_DIRECT" }
                    }
                    _ => Error::os(format!("cannot create a temporary target in '{}'", dir.display()), e),
                }
            })?;
        let guard = TempTarget { path };
        let mut chunk = AlignedBuf::random(FILL_CHUNK, 0x105_4a2e);
        let mut done = 0u64;
        while done < size {
            if stop.load(Ordering::Relaxed) {
                return Err(Error::os("filling the temporary target", io::Error::from(io::ErrorKind::Interrupted)));
            }
            // Vary every page so that no two pages of the file are equal.
            for page in chunk.as_mut_slice().chunks_exact_mut(4096) {
                let stamp = u64::from_le_bytes(page[..8].try_into().expect("8 bytes")).wrapping_add(1);
                page[..8].copy_from_slice(&stamp.to_le_bytes());
            }
            file.write_all_at(chunk.as_slice(), done)
                .map_err(|e| Error::os(format!("cannot fill '{}'", guard.path.display()), e))?;
            done += FILL_CHUNK as u64;
            progress(done, size);
        }
        file.sync_all().map_err(|e| Error::os(format!("cannot sync '{}'", guard.path.display()), e))?;
        Ok(guard)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempTarget {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn free_space(dir: &Path) -> Result<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| Error::TargetNotFileOrDevice(dir.to_path_buf()))?;
    // SAFETY: statvfs writes into a zeroed struct of the right type; `c` is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::os(format!("cannot inspect '{}'", dir.display()), io::Error::last_os_error()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temporary_targets_of_dead_processes_are_removed() {
        let dir = std::env::temp_dir().join(format!("ioshare-stale-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A pid that is not running now (the first free one above ours), ours, and an unrelated file.
        let dead = (std::process::id() + 1..).find(|p| !Path::new(&format!("/proc/{p}")).exists()).unwrap();
        let names = [
            format!(".ioshare-bench-{dead}-0.dat"),
            format!(".ioshare-bench-{}-0.dat", std::process::id()),
            "keep.dat".into(),
        ];
        for n in &names {
            std::fs::write(dir.join(n), b"x").unwrap();
        }
        let removed = TempTarget::remove_stale(&dir);
        let left: Vec<bool> = names.iter().map(|n| dir.join(n).exists()).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(removed, vec![dir.join(&names[0])]);
        assert_eq!(left, vec![false, true, true]);
    }

    #[test]
    fn bad_targets_get_their_own_error() {
        let missing = Target::open(Path::new("/nonexistent/ioshare"), 0).unwrap_err();
        assert!(matches!(missing, Error::TargetMissing(_)), "{missing}");
        let dir = Target::open(Path::new("/"), 0).unwrap_err();
        assert!(matches!(dir, Error::TargetIsDirectory(_)), "{dir}");
        let chr = Target::open(Path::new("/dev/null"), 0).unwrap_err();
        assert!(matches!(chr, Error::TargetNotFileOrDevice(_)), "{chr}");
        // /dev/shm is tmpfs on Linux hosts; skip the check where it is not.
        let shm = Path::new("/dev/shm/ioshare-engine-test");
        if fs::write(shm, vec![0u8; 8192]).is_ok() {
            let err = Target::open(shm, 0).unwrap_err();
            let _ = fs::remove_file(shm);
            assert!(matches!(err, Error::NoDirectIo { .. }), "{err}");
            assert!(err.to_string().contains("tmpfs"), "{err}");
        }
    }

    #[test]
    fn temp_target_is_filled_checked_and_removed() {
        // On the disk under test (not /tmp, which may be tmpfs); removed also when an assertion fails.
        let scratch =
            tempfile::Builder::new().prefix("target-test-").tempdir_in(std::env::current_dir().unwrap()).unwrap();
        let dir = scratch.path();
        let stop = AtomicBool::new(false);
        let mut calls = 0;
        let tmp = TempTarget::create(dir, 3 << 20, &stop, |_, _| calls += 1).unwrap();
        let path = tmp.path().to_path_buf();
        assert_eq!(calls, 3);
        let t = Target::open(&path, 1 << 20).unwrap();
        assert_eq!((t.size(), t.kind()), (3 << 20, TargetKind::File));
        let small = Target::open(&path, 4 << 20).unwrap_err();
        assert!(matches!(small, Error::TargetTooSmall { size: 3145728, .. }), "{small}");
        drop(t);
        drop(tmp);
        assert!(!path.exists());
        stop.store(true, Ordering::Relaxed);
        assert!(TempTarget::create(dir, 1 << 20, &stop, |_, _| {}).is_err());
        assert_eq!(fs::read_dir(dir).unwrap().count(), 0, "an interrupted fill leaves no file");
    }
}
