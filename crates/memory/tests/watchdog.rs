//! A guard whose process is killed with SIGKILL (no destructor runs) must not leave the kernel's OOM
//! killer paused or its limit in place: its watchdog writes the previous values back (root only).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioshare_host::{skip_unless_root, MemCgroup, Memcg};
use ioshare_memory::{Guard, GuardedGroup, MemorySettings};

/// Set for the child that runs [`guard_holder_child`]: the memory cgroup to guard.
const HOLDER_ENV: &str = "IOSHARE_MEMORY_TEST_GUARD_HOLDER";
const LIMIT: u64 = 48 << 20;

/// Not a test by itself: the child of [`a_killed_guard_leaves_nothing_changed`]. It guards the cgroup
/// named in `HOLDER_ENV` (a limit, early reclaim, priority OOM), says so, and waits to be killed.
#[test]
#[ignore = "helper: run in a child process by a_killed_guard_leaves_nothing_changed"]
fn guard_holder_child() {
    let Ok(dir) = std::env::var(HOLDER_ENV) else { return };
    let settings = MemorySettings { wmark_ratio: 80, limit: Some(LIMIT), ..MemorySettings::default() };
    let _guard =
        Guard::start(vec![GuardedGroup { memcg: Memcg::at(Path::new(&dir)).unwrap(), settings }], false).unwrap();
    println!("guarding");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_killed_guard_leaves_nothing_changed() {
    if skip_unless_root("a_killed_guard_leaves_nothing_changed") {
        return;
    }
    let cg = MemCgroup::create(&format!("ioshare-memory-test-{}/killed", std::process::id())).unwrap();
    let m = cg.memcg();
    let before = (m.limit().unwrap(), m.oom_control().unwrap().oom_kill_disable);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "guard_holder_child", "--nocapture", "--test-threads=1"])
        .env(HOLDER_ENV, m.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let ready = out.lines().map_while(Result::ok).any(|l| l.contains("guarding"));
    let guarded = (m.limit().unwrap(), m.oom_control().unwrap().oom_kill_disable);
    child.kill().unwrap(); // SIGKILL: the guard's destructor never runs
    child.wait().unwrap();
    assert!(ready, "the child never started its guard");
    assert_eq!(guarded, (LIMIT, true), "the guard set its limit and paused the kernel's OOM killer");
    // The watchdog sees the pipe close at once; allow 5 s for it to be scheduled on a busy machine.
    let deadline = Instant::now() + Duration::from_secs(5);
    let now = || (m.limit().unwrap(), m.oom_control().unwrap().oom_kill_disable);
    while now() != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(now(), before, "limit and oom_kill_disable are back to what they were");
}
