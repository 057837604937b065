//! Helpers shared by the CLI tests.

use std::path::Path;

/// Whether a blkio cgroup named `name` exists anywhere in the first levels of the hierarchy.
pub fn cgroup_exists(name: &str) -> bool {
    fn walk(dir: &Path, name: &str, depth: u32) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else { return false };
        entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .any(|e| e.file_name().to_string_lossy() == name || (depth > 0 && walk(&e.path(), name, depth - 1)))
    }
    walk(Path::new("/sys/fs/cgroup/blkio"), name, 3)
}
