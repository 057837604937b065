//! The life of one cgroup directory, the same in cgroup v1 and v2: create it below this process's own
//! cgroup, move processes in (a child before it execs), and remove it again on drop. [`crate::BlkioCgroup`]
//! (v1 `blkio`), [`crate::memcg::v1::MemCgroup`] (v1 `memory`) and [`crate::Cgroup2`] (the unified hierarchy) are this plus their controllers' files.
//!
//! Design:
//! - A cgroup is created below this process's own cgroup (the hierarchy root when running there), so
//!   the crate also works in a container with a delegated subtree. Names may be nested
//!   (`bench-<pid>/tenant-a`); a cgroup that already exists is refused, so drop never removes what it
//!   did not create.
//! - Drop moves every task left in the cgroup back to the cgroup it was created under, then removes the
//!   directory, then every intermediate directory of the name that is empty by now. Siblings can
//!   therefore share a parent (`bench-<pid>/a`, `bench-<pid>/b`): whichever is dropped last removes it.
//! - A process killed by SIGKILL runs no destructor, so its cgroups stay; [`remove_stale`] removes
//!   those named `<prefix><pid>` whose process is gone (call it when the bench starts).
//! - [`CgroupDir::spawn`] puts a child in the cgroup *before* it execs, so none of its IO escapes.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::cgroup_mounts::{own_cgroup_dir, MountedHierarchy};
use crate::error::{Error, Result};
use crate::sysfs;

/// How often removal is retried while the kernel still counts an exiting task in the cgroup.
const REMOVE_ATTEMPTS: u32 = 100;
/// Pause between removal attempts (100 × 10 ms: a second at most).
const REMOVE_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// A cgroup directory this process created; removed on drop.
#[derive(Debug)]
pub(crate) struct CgroupDir {
    /// The cgroup directory.
    path: PathBuf,
    /// The cgroup it was created under (where left-over tasks go back to).
    base: PathBuf,
    /// Number of path components of the name (how far up removal may go).
    depth: usize,
    /// Cleared once removed, so drop does nothing more.
    live: bool,
}

impl CgroupDir {
    /// Creates the cgroup `name` below this process's cgroup in `hierarchy` (`not_mounted` when that
    /// hierarchy is missing). Fails if it already exists; missing parents are created, and
    /// `prepare_parent` is called on each directory from the base down to the new cgroup's parent
    /// (cgroup v2 enables controllers there), the base included.
    pub(crate) fn create(
        hierarchy: MountedHierarchy<'_>,
        not_mounted: Error,
        name: &str,
        prepare_parent: &dyn Fn(&Path) -> Result<()>,
    ) -> Result<Self> {
        let depth = check_name(name)?;
        let base = own_cgroup_dir(hierarchy).ok_or(not_mounted)?;
        let path = base.join(name);
        let parent = path.parent().unwrap_or(&base).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| sysfs::file_error("create cgroup".to_string(), &parent, e))?;
        let parents: Vec<&Path> = path.ancestors().skip(1).take(depth).collect();
        let prepared = parents.into_iter().rev().try_for_each(prepare_parent);
        let created = prepared.and_then(|()| {
            std::fs::create_dir(&path).map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => Error::CgroupExists { path: path.clone() },
                _ => sysfs::file_error("create cgroup".to_string(), &path, e),
            })
        });
        if let Err(e) = created {
            remove_empty_parents(&path, depth);
            return Err(e);
        }
        Ok(CgroupDir { path, base, depth, live: true })
    }

    /// The cgroup's directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Moves process `pid` (all its threads) into this cgroup.
    pub(crate) fn add_pid(&self, pid: u32) -> Result<()> {
        let file = self.path.join("cgroup.procs");
        sysfs::write_raw(&file, &pid.to_string()).map_err(|e| match e.raw_os_error() {
            Some(libc::ESRCH) => Error::NoSuchProcess { pid, cgroup: self.path.clone() },
            _ => sysfs::file_error(format!("write '{pid}' to"), &file, e),
        })
    }

    /// Spawns `cmd` inside this cgroup: the child joins it between fork and exec, so even its first IO
    /// is accounted and limited here.
    pub(crate) fn spawn(&self, mut cmd: Command) -> Result<Child> {
        let file = self.path.join("cgroup.procs");
        let procs =
            OpenOptions::new().write(true).open(&file).map_err(|e| sysfs::file_error("open".to_string(), &file, e))?;
        let fd = procs.as_raw_fd();
        // SAFETY: the hook runs in the forked child before exec and only calls write(2), which is
        // async-signal-safe; `fd` stays open in the parent (hence in the child) until `spawn` returns.
        // Writing "0" to cgroup.procs moves the writing process.
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        cmd.spawn().map_err(|e| Error::KernelFile {
            action: format!("cannot start '{program}' in cgroup"),
            path: self.path.clone(),
            source: e,
        })
    }

    /// Moves tasks back to the base cgroup, removes the directory and the empty parents of its name.
    pub(crate) fn remove(&mut self) -> Result<()> {
        if !self.live {
            return Ok(());
        }
        empty_and_remove(&self.path, &self.base)?;
        self.live = false;
        remove_empty_parents(&self.path, self.depth);
        Ok(())
    }
}

impl Drop for CgroupDir {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("ioshare-host: cannot remove cgroup {}: {e}", self.path.display());
        }
    }
}

/// Removes the cgroups that processes killed before they could clean up left behind (SIGKILL runs no
/// destructor): every cgroup directly below this process's cgroup in `hierarchy` named `<prefix><pid>`
/// whose process no longer exists, with all its descendants. Tasks still inside are moved back first.
/// Returns the directories removed.
pub(crate) fn remove_stale(hierarchy: MountedHierarchy<'_>, not_mounted: Error, prefix: &str) -> Result<Vec<PathBuf>> {
    if prefix.is_empty() || prefix.contains('/') {
        return Err(Error::InvalidCgroupName {
            name: prefix.to_string(),
            reason: "a stale-cgroup prefix is one non-empty name component, like 'ioshare-bench-'",
        });
    }
    let base = own_cgroup_dir(hierarchy).ok_or(not_mounted)?;
    let entries = std::fs::read_dir(&base).map_err(|e| sysfs::file_error("list".to_string(), &base, e))?;
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() || !entry.path().is_dir() {
            continue;
        }
        remove_tree(&entry.path(), &base)?;
        removed.push(entry.path());
    }
    Ok(removed)
}

/// Removes cgroup `dir` and every cgroup below it, deepest first, moving their tasks to `base`.
fn remove_tree(dir: &Path, base: &Path) -> Result<()> {
    let children = std::fs::read_dir(dir).map_err(|e| sysfs::file_error("list".to_string(), dir, e))?;
    for child in children.flatten() {
        if child.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&child.path(), base)?;
        }
    }
    empty_and_remove(dir, base)
}

/// Moves every task of cgroup `dir` to cgroup `base`, then removes `dir` (which must have no child
/// cgroups), retrying while the kernel still counts a task that is exiting or was just forked inside.
fn empty_and_remove(dir: &Path, base: &Path) -> Result<()> {
    let base_procs = base.join("cgroup.procs");
    let mut attempt = 0;
    loop {
        for pid in sysfs::read(&dir.join("cgroup.procs"))?.split_whitespace() {
            match sysfs::write_raw(&base_procs, pid) {
                Err(e) if e.raw_os_error() != Some(libc::ESRCH) => {
                    return Err(sysfs::file_error(format!("write '{pid}' to"), &base_procs, e));
                }
                _ => {}
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && attempt < REMOVE_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(REMOVE_RETRY_PAUSE);
            }
            Err(e) => return Err(sysfs::file_error("remove cgroup".to_string(), dir, e)),
        }
    }
}

/// Removes the parents of cgroup `path` that its name of `depth` components created, deepest first,
/// stopping at the first that is not empty (EBUSY: a sibling cgroup still lives there).
fn remove_empty_parents(path: &Path, depth: usize) {
    for parent in path.ancestors().skip(1).take(depth - 1) {
        if std::fs::remove_dir(parent).is_err() {
            break;
        }
    }
}

/// Checks a cgroup name (relative, `/`-separated, no `.`/`..`/empty parts) and returns its depth.
fn check_name(name: &str) -> Result<usize> {
    let bad = |reason| Error::InvalidCgroupName { name: name.to_string(), reason };
    if name.is_empty() {
        return Err(bad("it is empty (use e.g. 'ioshare-bench-<pid>/tenant-a')"));
    }
    if name.starts_with('/') {
        return Err(bad("it must be relative to this process's cgroup (drop the leading '/')"));
    }
    if name.split('/').any(|part| part.is_empty()) {
        return Err(bad("it has an empty component (no '//' or trailing '/')"));
    }
    if name.split('/').any(|part| part == "." || part == "..") {
        return Err(bad("'.' and '..' are not allowed"));
    }
    if name.contains('\n') || name.contains('\0') {
        return Err(bad("it contains a newline or NUL"));
    }
    Ok(name.split('/').count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(check_name("a").unwrap(), 1);
        assert_eq!(check_name("ioshare-bench-42/tenant-a").unwrap(), 2);
        for bad in ["", "/abs", "a//b", "a/", "../up", "a/./b", "a\nb"] {
            let err = check_name(bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid cgroup name"), "{bad:?}: {err}");
        }
    }
}
