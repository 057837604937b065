//! Helpers shared by the root-only integration tests of loop devices and blkio: backing files.

use std::path::Path;

use tempfile::NamedTempFile;

/// A sparse backing file of `mib` MiB in cargo's per-target temp directory (on the build disk, so it
/// supports O_DIRECT, unlike a tmpfs `/tmp`), removed when dropped.
pub fn backing_file(mib: u64) -> NamedTempFile {
    let file = tempfile::Builder::new()
        .prefix("ioshare-host-test-")
        .tempfile_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create a backing file in CARGO_TARGET_TMPDIR");
    file.as_file().set_len(mib << 20).expect("size the backing file");
    file
}

/// The file loop device `path` (`/dev/loopN`) is attached to right now, if any.
#[allow(dead_code)] // each test binary compiles this module; only loop_device.rs calls this
pub fn backing_of(path: &Path) -> Option<std::path::PathBuf> {
    let name = path.file_name()?.to_str()?;
    let text = std::fs::read_to_string(Path::new("/sys/block").join(name).join("loop/backing_file")).ok()?;
    Some(text.trim_end().into())
}
