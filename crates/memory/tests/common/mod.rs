//! What the memory root tests share: a test cgroup on either hierarchy (v1 `memory` here, v2 in the
//! lab guest), a memory holder process (this test binary run again, so the guest needs nothing but
//! the binary), and a page-cache writer (fio). Each test binary uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ioshare_host::memcg::AnyMemCgroup;
use ioshare_testkit::KillOnDrop;

pub const MIB: u64 = 1 << 20;
/// Bounds every wait of the tests; the kernel acts in milliseconds.
pub const WAIT: Duration = Duration::from_secs(30);
/// Set for the child that runs `hold_memory_child`: MiB to hold.
const HOLD_ENV: &str = "IOSHARE_MEMORY_TEST_HOLD_MIB";
/// Set for the child that runs `allocate_child`: seconds to run.
const ALLOC_ENV: &str = "IOSHARE_MEMORY_TEST_ALLOCATE_SECS";
/// What the latency-sensitive allocator allocates at a time.
pub const ALLOC_CHUNK: usize = 1 << 20;

/// Set with `HOLD_ENV` for a leaking holder: MiB per second.
const LEAK_RATE_ENV: &str = "IOSHARE_MEMORY_TEST_LEAK_MIB_PER_S";

/// Not a test by itself: the memory holder. Writes `HOLD_ENV` MiB of anonymous memory page by page
/// from user space — at once, or leaking `LEAK_RATE_ENV` MiB per second — and sleeps until killed.
#[test]
#[ignore = "helper: run in a child process by the memory tests"]
fn hold_memory_child() {
    let Some(mib) = std::env::var(HOLD_ENV).ok().and_then(|m| m.parse::<usize>().ok()) else { return };
    let rate = std::env::var(LEAK_RATE_ENV).ok().and_then(|r| r.parse::<u64>().ok());
    let start = Instant::now();
    let mut held: Vec<Vec<u8>> = Vec::new();
    for i in 0..mib {
        let mut block = vec![0u8; 1 << 20];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        held.push(block);
        if let Some(rate) = rate {
            let due = start + Duration::from_millis((i as u64 + 1) * 1000 / rate.max(1));
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
    }
    std::hint::black_box(&held);
    std::thread::sleep(Duration::from_secs(300));
}

/// Nanoseconds this thread has waited on a run queue so far (`/proc/thread-self/schedstat`, field 2).
fn runqueue_wait_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    text.split_whitespace().nth(1).and_then(|w| w.parse().ok()).unwrap_or(0)
}

/// How often the latency-sensitive allocator allocates: a fixed schedule, with room for the
/// ~0.5 ms an allocation takes here and for CPU waits on a busy machine.
const ALLOC_PERIOD: Duration = Duration::from_millis(3);

/// Not a test by itself: the latency-sensitive allocator. Every [`ALLOC_PERIOD`] (a fixed schedule,
/// as a process serving requests at a steady rate) it allocates [`ALLOC_CHUNK`], writes every page
/// (each page fault charges its memory cgroup: at the limit, the fault reclaims first) and frees it.
/// Prints `wall:own:due` triples in microseconds at the end: the allocation's own duration; that
/// without the time the thread waited for a CPU (on a shared machine, other processes' doing, not
/// memory's); and the time from when it was due to its end, which also counts the wait for the
/// allocations before it (a stall delays every allocation due during it, where `wall` would count
/// one: the coordinated-omission correction).
#[test]
#[ignore = "helper: run in a child process by the allocation-latency experiment"]
fn allocate_child() {
    let Some(secs) = std::env::var(ALLOC_ENV).ok().and_then(|m| m.parse::<u64>().ok()) else { return };
    let first = Instant::now();
    let end = first + Duration::from_secs(secs);
    let mut times = Vec::new();
    for k in 0.. {
        let due = first + ALLOC_PERIOD * k;
        if due >= end {
            break;
        }
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let start = Instant::now();
        let waited = runqueue_wait_ns();
        // Fresh pages from the kernel each time (mmap/munmap, not the allocator's reused heap), so
        // every page is a fault that charges the group.
        // SAFETY: an anonymous private mapping of ALLOC_CHUNK bytes, written within its bounds and
        // unmapped once; nothing else refers to it.
        unsafe {
            let prot = libc::PROT_READ | libc::PROT_WRITE;
            let p = libc::mmap(std::ptr::null_mut(), ALLOC_CHUNK, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
            assert_ne!(p, libc::MAP_FAILED, "mmap failed");
            for off in (0..ALLOC_CHUNK).step_by(4096) {
                p.cast::<u8>().add(off).write_volatile(1);
            }
            libc::munmap(p, ALLOC_CHUNK);
        }
        let wall = start.elapsed().as_micros() as u64;
        let queued = (runqueue_wait_ns() - waited) / 1000;
        times.push((wall, wall.saturating_sub(queued), due.elapsed().as_micros() as u64));
    }
    let text: Vec<String> = times.iter().map(|(wall, own, due)| format!("{wall}:{own}:{due}")).collect();
    println!("ALLOC {}", text.join(" "));
}

/// Runs the allocator in `g` for `secs` seconds; read its times with [`allocation_times`].
pub fn allocator(g: &Group, secs: u64) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "common::allocate_child", "--nocapture", "--test-threads=1"]);
    cmd.env(ALLOC_ENV, secs.to_string()).stdout(Stdio::piped()).stderr(Stdio::null());
    g.spawn(cmd)
}

/// The times of an [`allocator`]'s allocations, microseconds, each sorted.
pub struct AllocationTimes {
    /// Each allocation's duration.
    pub wall: Vec<u64>,
    /// The same without the time the allocator waited for a CPU.
    pub own: Vec<u64>,
    /// From when each allocation was due to its end.
    pub due: Vec<u64>,
}

/// The allocation times an [`allocator`] printed.
pub fn allocation_times(child: Child) -> AllocationTimes {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The harness prints the test's name before the line on the same line.
    let line = text.lines().find_map(|l| Some(&l[l.find("ALLOC ")? + 6..])).unwrap_or("");
    let mut times = AllocationTimes { wall: Vec::new(), own: Vec::new(), due: Vec::new() };
    for t in line.split_whitespace() {
        let v: Vec<u64> = t.split(':').filter_map(|x| x.parse().ok()).collect();
        if let [wall, own, due] = v[..] {
            times.wall.push(wall);
            times.own.push(own);
            times.due.push(due);
        }
    }
    for v in [&mut times.wall, &mut times.own, &mut times.due] {
        v.sort_unstable();
    }
    times
}

/// A test cgroup on the v1 memory hierarchy or on cgroup v2, removed on drop.
pub struct Group(pub AnyMemCgroup);

impl Group {
    /// Creates `name` below this process's cgroup; `v2` picks the hierarchy.
    pub fn create(v2: bool, name: &str) -> Group {
        Group(AnyMemCgroup::create(v2, name).unwrap())
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn usage(&self) -> u64 {
        self.0.usage().unwrap()
    }

    pub fn set_limit(&self, bytes: u64) {
        self.0.set_limit(bytes).unwrap()
    }

    pub fn spawn(&self, cmd: Command) -> Child {
        self.0.spawn(cmd).unwrap()
    }
}

/// Usage of the cgroup at `dir`, either hierarchy.
pub fn usage_of(dir: &Path) -> u64 {
    let file = if dir.join("memory.current").exists() { "memory.current" } else { "memory.usage_in_bytes" };
    std::fs::read_to_string(dir.join(file)).unwrap().trim().parse().unwrap()
}

/// A process in `g` holding `mib` MiB of anonymous memory.
pub fn holder(g: &Group, mib: u64) -> KillOnDrop {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "common::hold_memory_child", "--test-threads=1"]);
    cmd.env(HOLD_ENV, mib.to_string()).stdout(Stdio::null()).stderr(Stdio::null());
    KillOnDrop(g.spawn(cmd))
}

/// A process in `g` holding `mib` MiB that ignores SIGTERM (`SIG_IGN` survives `exec`).
pub fn holder_ignoring_sigterm(g: &Group, mib: u64) -> KillOnDrop {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "common::hold_memory_child", "--test-threads=1"]);
    cmd.env(HOLD_ENV, mib.to_string()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: signal(2) is async-signal-safe; the hook runs in the forked child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
            Ok(())
        });
    }
    KillOnDrop(g.spawn(cmd))
}

/// A process in `g` leaking `mib_per_s` MiB per second up to `mib` MiB.
pub fn leaker(g: &Group, mib: u64, mib_per_s: u64) -> KillOnDrop {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "common::hold_memory_child", "--test-threads=1"]);
    cmd.env(HOLD_ENV, mib.to_string()).env(LEAK_RATE_ENV, mib_per_s.to_string());
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    KillOnDrop(g.spawn(cmd))
}

/// Waits until `g` is charged at least `bytes`.
pub fn wait_usage(g: &Group, bytes: u64) {
    let deadline = Instant::now() + WAIT;
    while g.usage() < bytes {
        assert!(Instant::now() < deadline, "{} never reached {bytes} bytes", g.path().display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A steady writer in `g`: fio writing `mib` MiB through the page cache at `rate_mib` MiB/s, to a
/// block device the lab guest offers (`$LAB_DISK`, a disk of its own) or else to a temporary file
/// here (setup.sh installs fio). The temporary file lives as long as the returned guard.
pub fn page_cache_writer(g: &Group, mib: u64, rate_mib: u64) -> (KillOnDrop, Option<tempfile::NamedTempFile>) {
    let (target, file) = match std::env::var("LAB_DISK") {
        Ok(disk) => (disk.into(), None),
        Err(_) => {
            let f = tempfile::NamedTempFile::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            (f.path().to_path_buf(), Some(f))
        }
    };
    (page_cache_writer_to(g, &target, mib, rate_mib), file)
}

/// A steady writer in `g`: fio writing `mib` MiB to `target` through the page cache at `rate_mib`
/// MiB/s (a file it creates, or a block device). No preallocation: where the file system has no
/// `fallocate` (ext2), glibc would emulate it by writing the whole file at once, unthrottled. One
/// process (`--thread`): fio otherwise runs the job in a child process, which outlives a SIGKILL
/// of the returned one and goes on writing.
pub fn page_cache_writer_to(g: &Group, target: &Path, mib: u64, rate_mib: u64) -> KillOnDrop {
    let mut cmd = Command::new("fio");
    cmd.args(["--name=steady", "--rw=write", "--bs=1M", "--ioengine=psync", "--direct=0", "--fallocate=none"])
        .args(["--thread", "--output=/dev/null"])
        .arg(format!("--size={mib}M"))
        .arg(format!("--rate={rate_mib}m"))
        .arg(format!("--filename={}", target.display()));
    cmd.stdout(Stdio::null());
    KillOnDrop(g.spawn(cmd))
}
