//! cgroup v1 memory for real (root only): the mechanisms userspace memory isolation is built on —
//! an OOM that pauses instead of kills and says so through an eventfd, a usage-threshold eventfd, and
//! reclaim by lowering the limit — each checked on this host's kernel, cleaned up on failure too.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioshare_host::memcg::v1::MemCgroup;
use ioshare_host::Error;
use ioshare_testkit::{skip_unless_root, KillOnDrop};

const MIB: u64 = 1 << 20;
/// How long a notification may take: the kernel signals at once; this only bounds a broken test.
const EVENT_WAIT: Duration = Duration::from_secs(20);

fn cgroup_name(test: &str) -> String {
    format!("ioshare-host-test-{}-{test}", std::process::id())
}

/// A process that fills `mib` MiB of anonymous memory from user space, then holds it for a minute
/// (perl is essential on Debian). The pages are touched by user-mode writes, the path on which a
/// memcg OOM with `oom_kill_disable` pauses the task and notifies; a kernel-mode fill (dd from
/// /dev/zero) can stall in reclaim without a notification.
fn allocator(mib: u64) -> Command {
    // The size comes in as an argument: a constant expression would be folded and then copied,
    // holding twice the memory.
    let mut cmd = Command::new("perl");
    cmd.args(["-e", "my $x = 'a' x ($ARGV[0] << 20); sleep 60", &mib.to_string()]);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    cmd
}

#[test]
fn an_oom_with_kill_disabled_pauses_the_task_and_signals_the_eventfd() {
    if skip_unless_root("an_oom_with_kill_disabled_pauses_the_task_and_signals_the_eventfd") {
        return;
    }
    let cg = MemCgroup::create(&cgroup_name("oom")).unwrap();
    let m = cg.memcg();
    m.set_limit(32 * MIB).unwrap();
    m.set_oom_kill_disable(true).unwrap();
    let oom = m.oom_event().unwrap();
    let mut hog = KillOnDrop(cg.spawn(allocator(64)).unwrap());

    assert!(oom.wait(EVENT_WAIT).unwrap() >= 1, "no OOM notification within {EVENT_WAIT:?}");
    let state = m.oom_control().unwrap();
    assert!(state.oom_kill_disable && state.under_oom, "{state:?}");
    assert_eq!(state.oom_kill, 0, "the kernel must not kill while oom_kill_disable is set");
    assert!(hog.0.try_wait().unwrap().is_none(), "the task waits under OOM instead of dying");
    assert!(m.procs().unwrap().contains(&hog.0.id()));

    // What a userspace killer does: kill the task, which frees its memory and ends the OOM.
    hog.0.kill().unwrap();
    hog.0.wait().unwrap();
    m.set_oom_kill_disable(false).unwrap();
    let state = m.oom_control().unwrap();
    assert!(!state.oom_kill_disable && !state.under_oom, "{state:?}");
}

#[test]
fn a_usage_threshold_eventfd_fires_when_usage_crosses_it() {
    if skip_unless_root("a_usage_threshold_eventfd_fires_when_usage_crosses_it") {
        return;
    }
    let cg = MemCgroup::create(&cgroup_name("threshold")).unwrap();
    let m = cg.memcg();
    let crossed = m.usage_event(16 * MIB).unwrap();
    assert_eq!(crossed.take().unwrap(), 0, "nothing charged yet");
    let _task = KillOnDrop(cg.spawn(allocator(48)).unwrap());
    assert!(crossed.wait(EVENT_WAIT).unwrap() >= 1, "usage never crossed 16 MiB by the kernel's account");
}

#[test]
fn lowering_the_limit_reclaims_page_cache_and_refuses_what_cannot_be_reclaimed() {
    if skip_unless_root("lowering_the_limit_reclaims_page_cache_and_refuses_what_cannot_be_reclaimed") {
        return;
    }
    let cg = MemCgroup::create(&cgroup_name("reclaim")).unwrap();
    let m = cg.memcg();
    let unlimited = m.limit().unwrap();
    // 48 MiB written through the page cache by a task in the group: the cache is charged here.
    let file = tempfile::NamedTempFile::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut writer = Command::new("dd");
    writer.args(["if=/dev/zero", "bs=1M", "count=48", "status=none"]).arg(format!("of={}", file.path().display()));
    assert!(KillOnDrop(cg.spawn(writer).unwrap()).0.wait().unwrap().success());
    let before = m.usage().unwrap();
    let cache = m.stat("total_cache").unwrap().unwrap();
    assert!(cache >= 40 * MIB, "the written file's pages are charged as cache: {cache}");

    let started = Instant::now();
    m.set_limit(16 * MIB).unwrap();
    let after = m.usage().unwrap();
    m.set_limit(unlimited).unwrap();
    eprintln!("reclaim by limit: {} -> {} MiB in {:?}", before / MIB, after / MIB, started.elapsed());
    assert!(after <= 16 * MIB, "usage {after} after lowering the limit to 16 MiB");
    assert_eq!(m.limit().unwrap(), unlimited, "the limit is restored");

    // Anonymous memory without swap cannot be reclaimed: the kernel refuses a limit below it (EBUSY),
    // which the error names.
    if std::fs::read_to_string("/proc/swaps").unwrap().lines().count() > 1 {
        eprintln!("skipping the refusal half: this host has swap, so anonymous memory can be reclaimed");
        return;
    }
    let _holder = KillOnDrop(cg.spawn(allocator(20)).unwrap());
    let deadline = Instant::now() + EVENT_WAIT;
    // Waited for by its anonymous pages, not by usage: usage still holds the page cache left from
    // above (15 MiB), and read 20 MiB while the allocator had a few — a 4 MiB limit then fit.
    let anon = || m.stat("total_rss").unwrap().unwrap_or(0);
    while anon() < 20 * MIB && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = m.set_limit(4 * MIB).unwrap_err();
    assert!(matches!(err, Error::LimitBelowUsage { .. }), "{err}");
    assert!(err.to_string().contains("could not reclaim"), "{err}");
    assert_eq!(m.limit().unwrap(), unlimited, "a refused limit changes nothing");
}
