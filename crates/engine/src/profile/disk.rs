//! Which disk an `io.cost.model` line is for: the whole block device behind a path.
//!
//! The kernel takes `io.cost.model` for whole disks only, so a partition (or a file on a
//! partition's filesystem) maps to its parent disk, as `iocost_coef_gen.py` does. The lookup goes
//! through `/sys/dev/block/MAJ:MIN`, a link to the device's sysfs directory; a partition's directory
//! holds a `partition` file and sits inside its disk's. A file on a filesystem without a block
//! device (overlay, NFS, tmpfs: device numbers with major 0) has no disk: `None`.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use ioshare_core::iocost::line::DevNum;
use serde::Serialize;

/// The whole disk behind a path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Disk {
    /// Its device number (the prefix of kernel lines).
    #[serde(serialize_with = "as_string")]
    pub dev: DevNum,
    /// Kernel name (`vda`, `loop3`, `nvme0n1`).
    pub name: String,
    /// The sysfs `queue/rotational` flag, if readable.
    pub rotational: Option<bool>,
}

fn as_string<S: serde::Serializer>(dev: &DevNum, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(dev)
}

/// The disk holding `path` (a block device: itself or its parent disk; a file: the disk of its
/// filesystem), or `None` when there is none to find.
pub fn disk_of(path: &Path) -> Option<Disk> {
    let meta = fs::metadata(path).ok()?;
    let raw = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let dev = DevNum { major: libc::major(raw), minor: libc::minor(raw) };
    if dev.major == 0 {
        return None;
    }
    let mut dir = fs::canonicalize(format!("/sys/dev/block/{dev}")).ok()?;
    if dir.join("partition").exists() {
        dir = dir.parent()?.to_path_buf();
    }
    disk_in(&dir)
}

fn disk_in(dir: &Path) -> Option<Disk> {
    let dev = fs::read_to_string(dir.join("dev")).ok()?.trim().parse().ok()?;
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let rotational = fs::read_to_string(dir.join("queue/rotational")).ok().map(|s| s.trim() == "1");
    Some(Disk { dev, name, rotational })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_file_maps_to_the_disk_of_its_filesystem_and_memory_has_none() {
        // This crate's directory is on a disk-backed filesystem; its disk has a sysfs entry whose
        // device number is that of a whole disk (no `partition` file).
        let here = std::env::current_dir().unwrap();
        let on_block_device = libc::major(fs::metadata(&here).unwrap().dev()) != 0;
        match disk_of(&here) {
            Some(disk) => {
                let sys = PathBuf::from(format!("/sys/dev/block/{}", disk.dev));
                assert!(sys.exists() && !sys.join("partition").exists(), "{disk:?}");
                assert!(!disk.name.is_empty());
            }
            None => assert!(!on_block_device, "a filesystem on a block device has a disk"),
        }
        // /proc is not on a block device.
        assert_eq!(disk_of(Path::new("/proc/self/status")), None);
    }
}
