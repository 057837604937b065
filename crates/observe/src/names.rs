//! Names for what the kernel keys by number: cgroup ids to cgroup paths, device numbers to names.
//!
//! The BPF side records `bio->bi_blkg->blkcg->css.cgroup->kn->id`: the id of the kernfs node of the
//! cgroup the IO is charged to, in the hierarchy that carries the block controller (v1 `blkio`, or v2
//! when `io` is enabled there). A kernfs node id is also the inode number of the cgroup's directory in
//! that hierarchy's mount (on 64-bit kernels; it is what `name_to_handle_at` and
//! `bpf_get_current_cgroup_id` use too), so walking the mount and matching `st_ino` names every id.
//! Ids are unique only within one hierarchy, which is why the walk covers exactly the one that carries
//! the block controller. A cgroup removed since is shown as `#<id>`.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ioshare_host::Capabilities;

/// Cgroup id → path in the hierarchy that carries the block controller, refreshed on demand.
#[derive(Debug, Default)]
pub struct CgroupNames {
    /// The hierarchy's mount point; `None` when no block controller hierarchy is mounted.
    root: Option<PathBuf>,
    /// Known ids.
    paths: HashMap<u64, String>,
    /// Ids not found by a rescan (removed cgroups): not looked for again, so a removed cgroup's
    /// leftover counts do not cost a walk of the hierarchy at every reading.
    gone: HashSet<u64>,
    /// Whether the hierarchy was walked in this reading already: where cgroups come and go by the
    /// thousand, one reading meets many new ids, and one walk names them all.
    rescanned: bool,
}

impl CgroupNames {
    /// Finds the hierarchy that carries the block controller: v1 `blkio` if mounted, else v2.
    pub fn discover() -> Self {
        let caps = Capabilities::probe();
        let root = caps.blkio_v1.or(caps.cgroup_v2);
        let mut names = CgroupNames { root, ..CgroupNames::default() };
        names.rescan();
        names
    }

    /// Starts a new reading: the first new id of it rescans the hierarchy.
    pub fn next_reading(&mut self) {
        self.rescanned = false;
    }

    /// The path of cgroup `id`, rescanning the hierarchy if the id is new (once per reading).
    pub fn name(&mut self, id: u64) -> String {
        if id == 0 {
            return "-".to_string();
        }
        if !self.paths.contains_key(&id) && !self.gone.contains(&id) {
            if !self.rescanned {
                self.rescan();
                self.rescanned = true;
            }
            if !self.paths.contains_key(&id) {
                self.gone.insert(id);
            }
        }
        self.paths.get(&id).cloned().unwrap_or_else(|| format!("#{id}"))
    }

    fn rescan(&mut self) {
        self.paths.clear();
        if let Some(root) = self.root.clone() {
            walk(&root, &root, &mut self.paths);
        }
    }
}

fn walk(root: &Path, dir: &Path, paths: &mut HashMap<u64, String>) {
    let Ok(meta) = std::fs::metadata(dir) else { return };
    let relative = dir.strip_prefix(root).map(|p| p.display().to_string()).unwrap_or_default();
    paths.insert(meta.ino(), format!("/{relative}"));
    let Ok(children) = std::fs::read_dir(dir) else { return };
    for child in children.flatten() {
        if child.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &child.path(), paths);
        }
    }
}

/// The kernel name of block device `major:minor` (`loop0`), from `/sys/dev/block`.
pub fn device_name(major: u32, minor: u32) -> Option<String> {
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// Resolves what the user gave for `--device`: `MAJ:MIN`, a device path (`/dev/loop0`) or a kernel
/// name (`loop0`); `None` when it names no block device. A partition resolves to its whole disk,
/// which is what the block layer's requests (and so the observer's counts) are keyed by.
pub fn resolve_device(spec: &str) -> Option<(u32, u32)> {
    let (major, minor) = if let Some((major, minor)) = spec.split_once(':') {
        (major.parse().ok()?, minor.parse().ok()?)
    } else {
        let path = if spec.contains('/') { PathBuf::from(spec) } else { Path::new("/dev").join(spec) };
        let meta = std::fs::metadata(path).ok()?;
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_block_device() {
            return None;
        }
        (libc::major(meta.rdev()), libc::minor(meta.rdev()))
    };
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return None;
    }
    if !sys.join("partition").exists() {
        return Some((major, minor));
    }
    let disk = std::fs::read_to_string(sys.join("../dev")).ok()?;
    let (major, minor) = disk.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The whole disk that holds `path`: the device itself for a block device, else the disk of the
/// filesystem the file is on; `None` when that is no block device (tmpfs, overlay without one).
pub fn disk_of(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path).ok()?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    resolve_device(&format!("{}:{}", libc::major(dev), libc::minor(dev)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_cgroup_is_named_slash() {
        let mut names = CgroupNames::discover();
        let Some(root) = names.root.clone() else {
            eprintln!("skipping root_cgroup_is_named_slash: no cgroup hierarchy mounted");
            return;
        };
        let ino = std::fs::metadata(&root).unwrap().ino();
        assert_eq!(names.name(ino), "/");
        assert_eq!(names.name(0), "-");
    }

    #[test]
    fn non_devices_are_refused() {
        assert_eq!(resolve_device("/etc/passwd"), None);
        assert_eq!(resolve_device("no-such-device-xyz"), None);
        assert_eq!(resolve_device("1:2:3"), None);
    }
}
