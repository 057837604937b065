//! `scripts/ceph`, for real (root, Debian's Ceph 16.2; skipped with the script's one-line reason
//! where it cannot run): a one-node cluster starts, librbd writes and verifies an image through fio's
//! rbd engine and holds a 1000 IOPS QoS limit, and nothing is left afterwards — no daemon, no
//! directory, no loop device — also when the script is killed with SIGKILL (its daemons die with it;
//! the next start, here `--clean`, removes its directory). Each test gives the script its own TMPDIR,
//! so what it leaves is told apart from anything else on the machine.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ceph")
}

/// `None` when the cluster can run here, else why not (printed by the skipping test).
fn unavailable() -> Option<String> {
    let out = Command::new(script()).arg("--check").output().expect("scripts/ceph runs");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).trim().to_string())
}

macro_rules! require_ceph {
    () => {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// The daemons' PIDs of a state file (its first line is the script's own).
fn daemon_pids(pids_file: &str) -> Vec<u32> {
    pids_file.lines().skip(1).filter_map(|l| l.trim().parse().ok()).collect()
}

/// Nothing of the script's is left under `tmp`: no cluster directory, and no loop device over a file
/// there.
fn assert_nothing_left(tmp: &Path) {
    let left: Vec<_> = fs::read_dir(tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left in {}: {left:?}", tmp.display());
    for dev in fs::read_dir("/sys/block").unwrap() {
        let backing = dev.unwrap().path().join("loop/backing_file");
        let file = fs::read_to_string(&backing).unwrap_or_default();
        assert!(!file.starts_with(tmp.to_str().unwrap()), "{} is a loop device over {file}", backing.display());
    }
}

/// Waits up to `limit` for `done`.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

#[test]
fn librbd_holds_a_qos_limit_on_the_cluster_and_teardown_leaves_nothing() {
    require_ceph!();
    let tmp = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = out.path().display();
    let rbd = "--ioengine=rbd --clientname=admin --pool=rbd --rbdname=img";
    // Written and verified at full speed, then read at QD32 under a 1000 IOPS limit for 5 s.
    let cmd = format!(
        "set -e; cp \"$IOSHARE_CEPH_DIR/pids\" {o}/pids; \
         fio --name=w {rbd} --rw=write --bs=1M --iodepth=8 --size=64M --verify=crc32c --verify_state_save=0 --output={o}/write.txt; \
         rbd config image set rbd/img rbd_qos_iops_limit 1000; \
         fio --name=r {rbd} --rw=randread --bs=4k --iodepth=32 --size=64M --ramp_time=1 --runtime=5 --time_based \
           --output-format=json --output={o}/read.json"
    );
    let run = Command::new(script())
        .env("TMPDIR", tmp.path())
        .args(["--image-size", "128M", "--", "sh", "-c", &cmd])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "scripts/ceph failed: {stderr}");
    assert!(stderr.contains("image rbd/img (128M) ready in"), "{stderr}");

    let write = fs::read_to_string(out.path().join("write.txt")).unwrap();
    assert!(write.contains("err= 0") && !write.contains("verify:"), "{write}");
    let read: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.path().join("read.json")).unwrap()).unwrap();
    let iops = read["jobs"][0]["read"]["iops"].as_f64().unwrap();
    // librbd's bucket refills every 50 ms and starts full: after a 1 s ramp (the full bucket's
    // transient), 5 s hold the limit within a few ticks' worth: ±10%.
    assert!((iops / 1000.0 - 1.0).abs() <= 0.10, "{iops} IOPS under a 1000 IOPS limit");

    let pids = daemon_pids(&fs::read_to_string(out.path().join("pids")).unwrap());
    assert_eq!(pids.len(), 3, "monitor, manager, OSD: {pids:?}");
    assert!(pids.iter().all(|p| !alive(*p)), "a daemon outlived the script: {pids:?}");
    assert_nothing_left(tmp.path());
}

#[test]
fn a_script_killed_with_sigkill_takes_its_daemons_and_the_next_start_removes_its_directory() {
    require_ceph!();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(script())
        .env("TMPDIR", tmp.path())
        .args(["--no-mgr", "--image-size", "64M", "--", "sleep", "600"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = lines.by_ref().map_while(|l| l.ok()).any(|l| l.contains("ready in"));
    assert!(ready, "the cluster never became ready");
    let dir = fs::read_dir(tmp.path()).unwrap().next().unwrap().unwrap().path();
    let pids = daemon_pids(&fs::read_to_string(dir.join("pids")).unwrap());
    assert_eq!(pids.len(), 2, "monitor and OSD: {pids:?}");
    // The command: the script's child running `sleep 600` (it starts just after the ready line).
    let script_pid = child.id().to_string();
    let find_sleep = || {
        fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).find(|p| {
            fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| s.split(' ').nth(3) == Some(&script_pid))
                && fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\x00600"))
        })
    };
    let mut sleep = None;
    assert!(
        wait_for(Duration::from_secs(10), || {
            sleep = find_sleep();
            sleep.is_some()
        }),
        "the command never ran"
    );

    child.kill().unwrap(); // SIGKILL: no trap runs
    child.wait().unwrap();
    assert!(wait_for(Duration::from_secs(10), || pids.iter().all(|p| !alive(*p))), "daemons outlived the script");
    let sleep = sleep.unwrap();
    assert!(wait_for(Duration::from_secs(5), || !alive(sleep)), "the command outlived the script: {sleep}");
    assert!(dir.exists(), "nothing could remove the directory of a killed script");

    let clean = Command::new(script()).env("TMPDIR", tmp.path()).arg("--clean").output().unwrap();
    assert!(clean.status.success(), "{}", String::from_utf8_lossy(&clean.stderr));
    assert!(String::from_utf8_lossy(&clean.stderr).contains("removed the leftovers of an earlier run"));
    assert_nothing_left(tmp.path());
}
