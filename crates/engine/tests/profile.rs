//! `profile` on real IO, short mode: a temporary file measured directly, a loop device over one
//! (root), and the refusals that keep data safe — an existing file without `destructive`, a mounted
//! device (root; only a read-only profile runs on it) — each checked with a checksum of the data
//! before and after.
//!
//! Files live in a scratch directory under this crate's directory (a disk-backed filesystem) and are
//! removed by guards, also when an assertion fails. Root tests skip with a printed reason otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use ioshare_core::{ModelConfig, QosConfig};
use ioshare_engine::profile::measure::with_preset_writes;
use ioshare_engine::profile::{profile, Profile, ProfileOptions};
use ioshare_engine::{Error, TempTarget};
use ioshare_host::LoopDevice;
use ioshare_testkit::skip_unless_root;
use tempfile::TempDir;

/// A scratch directory on the disk under test (not /tmp, which may be tmpfs), removed with what is in
/// it, also when an assertion fails.
fn scratch(tag: &str) -> TempDir {
    tempfile::Builder::new().prefix(&format!("{tag}-")).tempdir_in(std::env::current_dir().unwrap()).unwrap()
}

/// A mount point with a filesystem mounted on it; unmounted on drop.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().expect("sha256sum runs");
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

/// An existing file of 96 MiB with data (every page distinct), as a user's file would be.
fn data_file(dir: &Path) -> TempTarget {
    TempTarget::create(dir, 96 << 20, &AtomicBool::new(false), |_, _| {}).unwrap()
}

fn quiet(opts: &ProfileOptions, target: &Path) -> Result<Profile, Error> {
    profile(target, opts, &AtomicBool::new(false), &mut |_| {})
}

/// What holds for every profile, whatever the device's speed.
fn assert_consistent(p: &Profile) {
    let m = p.model;
    let six = [m.rbps, m.rseqiops, m.rrandiops, m.wbps, m.wseqiops, m.wrandiops];
    assert!(six.iter().all(|&v| v > 0), "{six:?}");
    // The kernel line carries exactly the model, and the QoS line exactly the suggestion.
    let line: ModelConfig = p.model_line.parse().unwrap();
    assert_eq!((line.params, line.device), (m, p.disk.as_ref().map(|d| d.dev)));
    let qos: QosConfig = p.qos_line.parse().unwrap();
    assert_eq!(qos.params, p.qos);
    // Large sequential IO moves at least half the bytes per second of 4 KiB sequential IO: large
    // IOs carry the same bytes in fewer requests. (Not "at least as many": on a short run of a
    // virtual disk the two are noisy, and a 4 KiB stream can briefly ride a host cache. A bandwidth
    // taken from the IO count instead of the bytes would fail this by a factor of ~1000.)
    assert!(m.rbps as f64 >= 0.5 * 4096.0 * m.rseqiops as f64, "{m:?}");
    assert!(!p.writes_measured || m.wbps as f64 >= 0.5 * 4096.0 * m.wseqiops as f64, "{m:?}");
    // The latency runs: capped at 90% of the measured random IOPS (the engine's rate cap may be
    // exceeded by its 1 ms catch-up slack only: 5% covers it), and the targets follow the rule.
    let names: Vec<&str> = p.runs.iter().map(|r| r.name).collect();
    let expected: &[&str] = if p.writes_measured {
        &["rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops", "rlat", "wlat"]
    } else {
        &["rbps", "rseqiops", "rrandiops", "rlat"]
    };
    assert_eq!(names, expected);
    assert!(p.runs.iter().all(|r| (0.0..=100.0).contains(&r.spread_pct)), "{:?}", p.runs);
    let pct95 = p.qos.rppm == 950_000;
    for (run, randiops, target) in [("rlat", m.rrandiops, p.qos.rlat_us), ("wlat", m.wrandiops, p.qos.wlat_us)] {
        let Some(r) = p.runs.iter().find(|r| r.name == run) else { continue };
        // resctl-bench's rule (README "Profile"), written out rather than taken from the crate's
        // constants so that a changed constant fails here: 90% load, target 1.5 x the percentile.
        assert!(r.iops <= randiops as f64 * 0.9 * 1.05, "{run}: {} IOPS over the cap", r.iops);
        let at = if pct95 { r.lat_us.p95 } else { r.lat_us.p50 };
        assert_eq!(target, (at * 1.5).ceil() as u64, "{run}");
    }
}

#[test]
fn a_temporary_file_gets_a_consistent_model_and_is_removed() {
    let scratch = scratch("profile-test-file");
    let p = quiet(&ProfileOptions::quick(), scratch.path()).unwrap();
    assert!(p.created && p.writes_measured && p.kind == "file", "{p:?}");
    assert_consistent(&p);
    assert!(p.disk.is_none() || p.model_line.starts_with(&format!("{} ", p.disk.as_ref().unwrap().dev)));
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0, "the temporary file is removed");
}

#[test]
fn an_existing_file_is_refused_without_destructive_and_only_read_with_read_only() {
    let scratch = scratch("profile-test-refuse");
    let file = data_file(scratch.path());
    let before = sha256(file.path());
    let err = quiet(&ProfileOptions::quick(), file.path()).unwrap_err();
    assert!(matches!(err, Error::WouldOverwrite { .. }), "{err}");
    assert!(err.to_string().contains("--destructive") && err.to_string().contains("--read-only"), "{err}");
    assert_eq!(sha256(file.path()), before, "refused before any write");

    let p = quiet(&ProfileOptions { read_only: true, ..ProfileOptions::quick() }, file.path()).unwrap();
    assert!(!p.created && !p.writes_measured, "{p:?}");
    assert_consistent(&p);
    assert_eq!(p.model, with_preset_writes(p.model), "write side derived from the reads");
    assert!(p.notes.iter().any(|n| n.contains("not measured")), "{:?}", p.notes);
    assert_eq!(sha256(file.path()), before, "a read-only profile changes nothing");
}

#[test]
fn a_loop_device_over_a_temporary_file_is_profiled_and_detached() {
    if skip_unless_root("a_loop_device_over_a_temporary_file_is_profiled_and_detached") {
        return;
    }
    let scratch = scratch("profile-test-loop");
    let p = quiet(&ProfileOptions { loop_device: true, ..ProfileOptions::quick() }, scratch.path()).unwrap();
    assert_eq!(p.kind, "loop device over a file");
    assert_consistent(&p);
    let disk = p.disk.clone().expect("a loop device is a disk");
    assert_eq!((disk.dev.major, Path::new("/dev").join(&disk.name)), (7, p.measured.clone()));
    assert!(p.model_line.starts_with(&format!("7:{} ctrl=user model=linear rbps=", disk.dev.minor)));
    // The loop device lets go of the file (autoclear; the kernel finishes it shortly after the
    // last close, so this waits up to 3 s) and the file is gone.
    let backing = PathBuf::from(format!("/sys/block/{}/loop/backing_file", disk.name));
    for _ in 0..30 {
        let still = std::fs::read_to_string(&backing).is_ok_and(|b| b.contains(&*scratch.path().to_string_lossy()));
        if !still {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(!std::fs::read_to_string(&backing).is_ok_and(|b| b.contains(&*scratch.path().to_string_lossy())));
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}

#[test]
fn a_mounted_device_is_never_written_even_with_destructive() {
    if skip_unless_root("a_mounted_device_is_never_written_even_with_destructive") {
        return;
    }
    let scratch = scratch("profile-test-mounted");
    let file = data_file(scratch.path());
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    // No lazy initialisation: the mounted filesystem must not write in the background, so that the
    // checksum compares what profile did and nothing else.
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
        .arg(dev.path())
        .status()
        .expect("mkfs.ext4 runs (scripts/setup.sh installs e2fsprogs)");
    assert!(mkfs.success());
    let mnt = scratch.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    assert!(Command::new("mount").arg(dev.path()).arg(&mnt).status().unwrap().success());
    let mounted = Mounted(mnt);
    // Mounting wrote the superblock into the page cache: flush it to the file first.
    assert!(Command::new("sync").status().unwrap().success());
    let before = sha256(file.path());
    let opts = ProfileOptions { destructive: true, ..ProfileOptions::quick() };
    let err = quiet(&opts, dev.path()).unwrap_err();
    assert!(matches!(err, Error::DeviceBusy(_)), "{err}");
    assert!(err.to_string().contains("in use (mounted"), "{err}");
    assert_eq!(sha256(file.path()), before, "the mounted device's data is intact");
    // Reading it is harmless, and allowed.
    let p = quiet(&ProfileOptions { read_only: true, ..ProfileOptions::quick() }, dev.path()).unwrap();
    assert!(p.kind == "block device" && !p.writes_measured, "{p:?}");
    assert_eq!(sha256(file.path()), before, "a read-only profile of a mounted device changes nothing");
    drop(mounted);
}
