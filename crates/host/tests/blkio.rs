//! cgroup v1 blkio for real (root only): lifecycle, moving processes, BFQ weights, and blk-throttle
//! holding a direct-IO reader on a loop device to its limit.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{backing_file, KillOnDrop};
use ioshare_host::{remove_stale_cgroups, skip_unless_root, BlkioCgroup, Error, LoopDevice, ThrottleKnob};

/// A cgroup name unique to this test process and `test`.
fn cgroup_name(test: &str) -> String {
    format!("ioshare-host-test-{}-{test}", std::process::id())
}

/// The blkio line of `/proc/<pid>/cgroup` (`self` for this process).
fn blkio_line(pid: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines().find(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|c| c == "blkio"))).unwrap().to_string()
}

/// The pids listed in a cgroup's `cgroup.procs`.
fn procs(cgroup: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
    text.split_whitespace().map(|p| p.parse().unwrap()).collect()
}

/// `sleep 30`, a process to move around.
fn sleeper() -> Command {
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    cmd
}

#[test]
fn nested_cgroups_share_a_parent_that_the_last_one_removes() {
    if skip_unless_root("nested_cgroups_share_a_parent_that_the_last_one_removes") {
        return;
    }
    let parent = cgroup_name("nested");
    let a = BlkioCgroup::create(&format!("{parent}/a")).unwrap();
    let b = BlkioCgroup::create(&format!("{parent}/b")).unwrap();
    assert!(a.path().join("cgroup.procs").exists() && b.path().join("cgroup.procs").exists());
    let err = BlkioCgroup::create(&format!("{parent}/a")).unwrap_err();
    assert!(matches!(err, Error::CgroupExists { .. }), "{err}");
    assert!(a.path().is_dir(), "a refused create leaves the existing cgroup alone");

    let parent_dir = a.path().parent().unwrap().to_path_buf();
    drop(a);
    assert!(parent_dir.is_dir(), "b still lives in the parent");
    b.remove().unwrap();
    assert!(!parent_dir.exists(), "the last child removed the parent its name created");
}

#[test]
fn stale_cgroups_of_dead_processes_are_removed_live_ones_kept() {
    if skip_unless_root("stale_cgroups_of_dead_processes_are_removed_live_ones_kept") {
        return;
    }
    let prefix = "ioshare-host-test-stale-";
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap(); // reaped: its pid names no process now, like a SIGKILLed bench
    let dead = BlkioCgroup::create(&format!("{prefix}{}/tenant", gone.id())).unwrap();
    let task = KillOnDrop(dead.spawn(sleeper()).unwrap());
    let dead_top = dead.path().parent().unwrap().to_path_buf();
    std::mem::forget(dead); // what a killed process does: no destructor runs
    let live = BlkioCgroup::create(&format!("{prefix}{}", std::process::id())).unwrap();

    let removed = remove_stale_cgroups(prefix).unwrap();
    assert_eq!(removed, std::slice::from_ref(&dead_top));
    assert!(!dead_top.exists(), "the stale cgroup and its child are gone");
    assert!(live.path().is_dir(), "the cgroup of a running process is kept");
    assert_eq!(blkio_line(&task.0.id().to_string()), blkio_line("self"), "its task was moved out first");
    assert!(remove_stale_cgroups("a/b").is_err(), "a prefix is one name component");
}

#[test]
fn spawned_child_starts_inside_and_is_moved_back_on_drop() {
    if skip_unless_root("spawned_child_starts_inside_and_is_moved_back_on_drop") {
        return;
    }
    let cgroup = BlkioCgroup::create(&cgroup_name("spawn")).unwrap();
    let child = KillOnDrop(cgroup.spawn(sleeper()).unwrap());
    let pid = child.0.id();
    assert_eq!(procs(cgroup.path()), [pid]);

    let path = cgroup.path().to_path_buf();
    drop(cgroup);
    assert!(!path.exists(), "cgroup removed although a task was inside");
    assert_eq!(blkio_line(&pid.to_string()), blkio_line("self"), "the task went back to our own cgroup");
}

#[test]
fn add_pid_moves_a_running_process_and_refuses_a_gone_one() {
    if skip_unless_root("add_pid_moves_a_running_process_and_refuses_a_gone_one") {
        return;
    }
    let cgroup = BlkioCgroup::create(&cgroup_name("add-pid")).unwrap();
    let child = KillOnDrop(sleeper().spawn().unwrap());
    cgroup.add_pid(child.0.id()).unwrap();
    assert_eq!(procs(cgroup.path()), [child.0.id()]);

    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap(); // reaped: its pid names no process now
    let err = cgroup.add_pid(gone.id()).unwrap_err();
    assert!(matches!(err, Error::NoSuchProcess { .. }), "{err}");
}

#[test]
fn bad_limits_and_devices_are_refused() {
    if skip_unless_root("bad_limits_and_devices_are_refused") {
        return;
    }
    let cgroup = BlkioCgroup::create(&cgroup_name("bad-limits")).unwrap();
    let file = backing_file(4);
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    let err = cgroup.set_throttle(dev.dev(), ThrottleKnob::ReadIops, 1 << 32).unwrap_err();
    assert!(matches!(err, Error::InvalidLimit { .. }), "{err}");
    // Major 4095 is not a block driver on any machine we know of.
    let nowhere = ioshare_host::DevNum { major: 4095, minor: 0 };
    let err = cgroup.set_throttle(nowhere, ThrottleKnob::ReadBps, 1 << 20).unwrap_err();
    assert!(matches!(err, Error::NoSuchDevice(d) if d == nowhere), "{err}");
    for weight in [0, 1001] {
        let err = cgroup.set_bfq_weight(weight).unwrap_err();
        assert!(matches!(err, Error::InvalidBfqWeight(w) if w == weight), "{err}");
    }
}

#[test]
fn bfq_weights_split_a_contended_loop_device() {
    if skip_unless_root("bfq_weights_split_a_contended_loop_device") {
        return;
    }
    const HEAVY: u32 = 300;
    const LIGHT: u32 = 100;
    const HALF_BLOCKS: u64 = 1 << 17; // 512 MiB of 4 KiB blocks: more than either reader gets through
    let file = backing_file(1024);
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    dev.set_scheduler("bfq").unwrap();
    let heavy = BlkioCgroup::create(&cgroup_name("bfq-heavy")).unwrap();
    let light = BlkioCgroup::create(&cgroup_name("bfq-light")).unwrap();
    heavy.set_bfq_weight(HEAVY).unwrap();
    light.set_bfq_weight(LIGHT).unwrap();
    let text = std::fs::read_to_string(heavy.path().join("blkio.bfq.weight")).unwrap();
    assert_eq!(text.split_whitespace().last(), Some(HEAVY.to_string().as_str()), "{text}");

    // Two saturating direct readers on separate halves of the device, stopped together after 1.5 s.
    let readers = [
        KillOnDrop(heavy.spawn(dd_direct_reads(dev.path(), 0, HALF_BLOCKS)).unwrap()),
        KillOnDrop(light.spawn(dd_direct_reads(dev.path(), HALF_BLOCKS, HALF_BLOCKS)).unwrap()),
    ];
    std::thread::sleep(Duration::from_millis(1500));
    drop(readers);

    let bytes = |cgroup: &BlkioCgroup| cgroup.bfq_stats().unwrap().device(dev.dev()).map_or(0, |d| d.bytes.read) as f64;
    let (heavy_bytes, light_bytes) = (bytes(&heavy), bytes(&light));
    let ratio = heavy_bytes / light_bytes;
    eprintln!(
        "BFQ weights {HEAVY}:{LIGHT}: read {:.1} MiB vs {:.1} MiB in 1.5 s, ratio {ratio:.2}",
        heavy_bytes / f64::from(1 << 20),
        light_bytes / f64::from(1 << 20)
    );
    // Weights 3:1 should give a 3:1 split; measured here: 3.06-3.50. BFQ only approximates the split
    // over a short run (service is granted in budgets, each sync queue is idled on for a few ms) and the
    // two readers compete for this 2-core machine's CPUs with the other tests, so the bound is 2/3 of
    // the ideal: ≥ 2.0, which ignored weights (ratio ~1) cannot reach.
    assert!(light_bytes > 0.0, "the lighter reader did no IO at all");
    assert!(ratio >= 2.0, "weights {HEAVY}:{LIGHT} gave a read ratio of only {ratio:.2}");
}

/// dd reading `count` 4 KiB blocks of `dev` with direct IO, from block `skip` on.
fn dd_direct_reads(dev: &Path, skip: u64, count: u64) -> Command {
    let mut cmd = Command::new("dd");
    cmd.arg(format!("if={}", dev.display()))
        .args(["of=/dev/null", "bs=4096", "iflag=direct", "status=none"])
        .args([format!("skip={skip}"), format!("count={count}")])
        .stdout(Stdio::null());
    cmd
}

/// Runs `cmd` in `cgroup` to completion; returns the elapsed seconds.
fn timed_run(cgroup: &BlkioCgroup, cmd: Command) -> f64 {
    let start = Instant::now();
    let mut child = KillOnDrop(cgroup.spawn(cmd).unwrap());
    assert!(child.0.wait().unwrap().success(), "dd failed");
    start.elapsed().as_secs_f64()
}

#[test]
fn read_iops_limit_holds_a_direct_reader_to_the_limit() {
    if skip_unless_root("read_iops_limit_holds_a_direct_reader_to_the_limit") {
        return;
    }
    const LIMIT: u64 = 200;
    const IOS: u64 = 400; // 2 s at the limit
    let file = backing_file(16);
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    let limited = BlkioCgroup::create(&cgroup_name("iops-limited")).unwrap();
    let free = BlkioCgroup::create(&cgroup_name("iops-free")).unwrap();
    limited.set_throttle(dev.dev(), ThrottleKnob::ReadIops, LIMIT).unwrap();

    let free_secs = timed_run(&free, dd_direct_reads(dev.path(), 0, IOS));
    let limited_secs = timed_run(&limited, dd_direct_reads(dev.path(), 0, IOS));
    let free_rate = IOS as f64 / free_secs;
    let limited_rate = IOS as f64 / limited_secs;
    eprintln!("read IOPS limit {LIMIT}: measured {limited_rate:.1} IOPS ({IOS} IOs in {limited_secs:.3} s); unlimited: {free_rate:.0} IOPS");

    // The limit, not the device, sets the pace: the same reads run far faster outside the cgroup.
    assert!(free_rate > 5.0 * LIMIT as f64, "the device itself is too slow to show the limit: {free_rate:.0} IOPS");
    // Tolerance ±10%. blk-throttle budgets IOs per time slice and rounds the elapsed time up to whole
    // slices (100 ms on a loop device, which is flagged rotational), so a group can run up to one slice
    // ahead of its rate: 20 IOs at 200 IOPS, 5% of 400. Here that shows as 212-214 IOPS (400 IOs in
    // ~1.88 s). Below the limit, only process start-up (a few ms of the ~2 s) slows the reader.
    let ratio = limited_rate / LIMIT as f64;
    assert!((0.9..=1.1).contains(&ratio), "measured {limited_rate:.1} IOPS under a {LIMIT} IOPS limit");

    // Every read was counted against the limited cgroup on this device, as one 4 KiB IO each.
    let stats = limited.stats().unwrap();
    let on_dev = stats.device(dev.dev()).expect("the cgroup has statistics for the loop device");
    assert_eq!((on_dev.ios.read, on_dev.bytes.read), (IOS, IOS * 4096));
    assert_eq!((on_dev.ios.write, on_dev.bytes.write), (0, 0));
}
