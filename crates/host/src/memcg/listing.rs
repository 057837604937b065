//! What both hierarchies' memory cgroup views list alike: a cgroup's own processes and the
//! directories of its child cgroups.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::sysfs;

/// The processes in the cgroup at `dir` itself (not its descendants), from `cgroup.procs`.
pub(super) fn procs(dir: &Path) -> Result<Vec<u32>> {
    Ok(sysfs::read(&dir.join("cgroup.procs"))?.split_whitespace().filter_map(|p| p.parse().ok()).collect())
}

/// The directories of the child cgroups of the cgroup at `dir`.
pub(super) fn child_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| sysfs::file_error("list".to_string(), dir, e))?;
    Ok(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect())
}
