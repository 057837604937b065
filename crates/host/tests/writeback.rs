//! The buffered-write caveat of cgroup v1, shown for real (root only): under a blkio write limit on a
//! loop device carrying an ext4 file system, a direct writer is held to the limit and charged for
//! its bytes, while a buffered writer finishes at page-cache speed and its data, written back later
//! by the kernel's flusher threads, is charged to no cgroup. A writer that calls fsync itself
//! submits the writeback in its own context, so v1 does charge (and throttle) that one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use common::backing_file;
use ioshare_host::{BlkioCgroup, DevNum, LoopDevice, ThrottleKnob};
use ioshare_testkit::{skip_unless_root, KillOnDrop};

/// The write limit: 4 MiB/s.
const LIMIT_BPS: u64 = 4 << 20;
/// Each writer writes 8 MiB: 2 s at the limit.
const BYTES: u64 = 8 << 20;

/// A file system mounted for the test, unmounted on drop (lazily if busy).
struct Mounted(PathBuf);

impl Mounted {
    fn new(device: &Path, dir: &Path) -> Mounted {
        let mkfs =
            Command::new("mkfs.ext4").args(["-q", "-F"]).arg(device).status().expect("run mkfs.ext4 (e2fsprogs)");
        assert!(mkfs.success(), "mkfs.ext4 {} failed", device.display());
        let mount = Command::new("mount").args(["-t", "ext4"]).arg(device).arg(dir).status().expect("run mount");
        assert!(mount.success(), "mount {} on {} failed", device.display(), dir.display());
        Mounted(dir.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Runs `dd` writing [`BYTES`] to `file` inside `cgroup` with extra `flags`; returns the seconds it
/// took and the bytes the cgroup was charged for on `dev`.
fn write_in(cgroup: &BlkioCgroup, dev: DevNum, file: &Path, flags: &[&str]) -> (f64, u64) {
    let mut cmd = Command::new("dd");
    cmd.args(["if=/dev/zero", "bs=64k", &format!("count={}", BYTES / 65536)])
        .arg(format!("of={}", file.display()))
        .args(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let start = Instant::now();
    let mut child = KillOnDrop(cgroup.spawn(cmd).unwrap());
    let status = child.0.wait().unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert!(status.success(), "dd {flags:?} failed");
    // Write back whatever is dirty from here, outside the cgroup: the flusher threads do the IO.
    let synced = Command::new("sync").status().unwrap();
    assert!(synced.success());
    let charged = cgroup.stats().unwrap().device(dev).map_or(0, |d| d.bytes.write);
    (secs, charged)
}

#[test]
fn v1_blkio_limits_direct_and_fsync_writes_but_not_background_writeback() {
    if skip_unless_root("v1_blkio_limits_direct_and_fsync_writes_but_not_background_writeback") {
        return;
    }
    if Command::new("mkfs.ext4").arg("-V").stderr(Stdio::null()).stdout(Stdio::null()).status().is_err() {
        panic!("mkfs.ext4 not found: install e2fsprogs (scripts/setup.sh does)");
    }
    let file = backing_file(128);
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mounted = Mounted::new(dev.path(), dir.path());
    let name = format!("ioshare-host-test-{}-writeback", std::process::id());
    let cgroups: Vec<BlkioCgroup> =
        ["direct", "buffered", "fsync"].iter().map(|w| BlkioCgroup::create(&format!("{name}/{w}")).unwrap()).collect();
    for cg in &cgroups {
        cg.set_throttle(dev.dev(), ThrottleKnob::WriteBps, LIMIT_BPS).unwrap();
    }
    let at_limit = BYTES as f64 / LIMIT_BPS as f64;

    let (direct_s, direct_charged) = write_in(&cgroups[0], dev.dev(), &mounted.0.join("direct"), &["oflag=direct"]);
    let (buffered_s, buffered_charged) = write_in(&cgroups[1], dev.dev(), &mounted.0.join("buffered"), &[]);
    let (fsync_s, fsync_charged) = write_in(&cgroups[2], dev.dev(), &mounted.0.join("fsync"), &["conv=fsync"]);
    eprintln!(
        "limit {LIMIT_BPS} B/s, {BYTES} B each ({at_limit:.1} s at the limit): direct {direct_s:.2} s charged {direct_charged} B; \
         buffered {buffered_s:.2} s charged {buffered_charged} B; buffered+fsync {fsync_s:.2} s charged {fsync_charged} B"
    );

    // blk-throttle lets the first slice's worth (~100 ms at the rate) through at once, and the rest
    // trickles at the limit: allow 25% below the ideal time for that and for timer granularity.
    assert!(direct_s >= 0.75 * at_limit, "direct writes were not held to the limit: {direct_s:.2} s");
    // The file system adds its own metadata writes to the data: at least the data is charged.
    assert!(direct_charged >= BYTES, "direct writes charged {direct_charged} B of {BYTES}");
    // Buffered: dd returns once the page cache holds the data (far below the limit's 2 s; a tenth of
    // it leaves room for a slow machine), and the flusher's writeback is charged to no cgroup: less
    // than a tenth of the data (allowing for metadata the writer's own syscalls journal).
    assert!(buffered_s < 0.5 * at_limit, "buffered writer was throttled: {buffered_s:.2} s");
    assert!(buffered_charged < BYTES / 10, "background writeback charged to the writer: {buffered_charged} B");
    // fsync from inside the cgroup: the writer submits its own writeback, so v1 charges it.
    assert!(fsync_charged >= BYTES, "fsync writeback charged {fsync_charged} B of {BYTES}");
    assert!(fsync_s >= 0.75 * at_limit, "fsync writer was not held to the limit: {fsync_s:.2} s");
}
