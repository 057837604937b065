//! Whether a cgroup's threads were held back by the CPU rather than by their IO.
//!
//! A tenant below its share of a device is, to the planner, a tenant that does not want more: it
//! donates the rest (IOCost is work-conserving). Often that is true — it has no more IO to do — but
//! on a busy machine it may be a tenant that cannot issue IO fast enough: its submitting thread is
//! always on a CPU or waiting for one (fio at QD32 spends 5–15 µs of CPU per IO, a core per 70–200k
//! IOPS, and shares two cores with everything else here). No IO controller can give that tenant its
//! share, and the user should hear so rather than suspect the weights.
//!
//! The kernel's scheduler statistics say which: `/proc/TID/schedstat` gives each thread's time on a
//! CPU and its time runnable but waiting for one (nanoseconds, cumulative). A thread that is blocked
//! on IO is neither. So over an interval, a thread's *runnable share* `(Δrun + Δwait) / Δwall` is
//! near 1 for a thread held by the CPU and low for one waiting for its IO; a cgroup is
//! [CPU-bound](CpuUse::cpu_bound) when its busiest thread's share reaches [`CPU_BOUND_AT`]. The
//! threads are those the cgroup lists (v1 `tasks`, v2 `cgroup.threads`); a thread seen for the first
//! time counts from its next sample.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Runnable share of its busiest thread from which a cgroup counts as held back by the CPU. An
/// IO-bound reader at QD32 shows 20–60% here (its CPU per IO); one whose CPU time plus run-queue
/// wait fills 90% of the interval has no room left to issue more.
pub const CPU_BOUND_AT: f64 = 0.9;

/// What a cgroup's threads did over an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    /// CPU time of all its threads per second of the interval (cores).
    pub cores: f64,
    /// The largest runnable share (on a CPU or waiting for one) of any of its threads, 0..1.
    pub busiest: f64,
}

impl CpuUse {
    /// Whether its busiest thread was held by the CPU ([`CPU_BOUND_AT`]).
    pub fn cpu_bound(&self) -> bool {
        self.busiest >= CPU_BOUND_AT
    }
}

/// A thread's cumulative (run, wait) ns, or `None` when it is gone or the kernel lacks schedstat.
fn thread_times(tid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
    parse_schedstat(&text)
}

/// `run_ns wait_ns timeslices` → (run, wait).
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace().map(str::parse::<u64>);
    Some((it.next()?.ok()?, it.next()?.ok()?))
}

/// The threads a cgroup directory lists.
fn threads(dir: &Path) -> Vec<u32> {
    ["tasks", "cgroup.threads"]
        .iter()
        .find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The last sample of one cgroup.
#[derive(Debug, Default)]
struct Sample {
    at_ns: u64,
    times: HashMap<u32, (u64, u64)>,
}

/// Per-cgroup samples of thread times; each [`sample`](CpuWatch::sample) returns the use since the
/// cgroup's previous one.
#[derive(Debug, Default)]
pub struct CpuWatch {
    last: HashMap<String, Sample>,
}

impl CpuWatch {
    /// Samples cgroup `rel` (directory `dir`) at `now_ns`: its use since the previous sample, `None`
    /// at the first one (or with no time passed).
    pub fn sample(&mut self, rel: &str, dir: &Path, now_ns: u64) -> Option<CpuUse> {
        let times: HashMap<u32, (u64, u64)> =
            threads(dir).into_iter().filter_map(|tid| thread_times(tid).map(|t| (tid, t))).collect();
        let prev = self.last.insert(rel.to_string(), Sample { at_ns: now_ns, times });
        let (prev, cur) = (prev?, &self.last[rel]);
        let wall = now_ns.checked_sub(prev.at_ns).filter(|&w| w > 0)? as f64;
        let mut out = CpuUse::default();
        for (tid, (run, wait)) in &cur.times {
            let Some((run0, wait0)) = prev.times.get(tid) else { continue };
            let (drun, dwait) = (run.saturating_sub(*run0) as f64, wait.saturating_sub(*wait0) as f64);
            out.cores += drun / wall;
            out.busiest = out.busiest.max(((drun + dwait) / wall).min(1.0));
        }
        Some(out)
    }

    /// Forgets the cgroups for which `keep` is false.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.last.retain(|rel, _| keep(rel));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_parse() {
        assert_eq!(parse_schedstat("1000455071 1687462 21\n"), Some((1_000_455_071, 1_687_462)));
        assert_eq!(parse_schedstat("x"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    /// This test's own thread, spinning for 200 ms, is busy; sleeping for 200 ms, it is not.
    #[test]
    fn a_spinning_thread_is_cpu_bound_and_a_sleeping_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let tid = unsafe { libc::gettid() } as u32;
        std::fs::write(dir.path().join("tasks"), format!("{tid}\n")).unwrap();
        if thread_times(tid).is_none() {
            eprintln!("no /proc/TID/schedstat on this kernel: skipped");
            return;
        }
        let clock = std::time::Instant::now();
        let now = || clock.elapsed().as_nanos() as u64;
        let mut w = CpuWatch::default();
        assert_eq!(w.sample("g", dir.path(), now()), None, "first sample");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let slept = w.sample("g", dir.path(), now()).unwrap();
        assert!(!slept.cpu_bound() && slept.cores < 0.2, "{slept:?}");
        let until = clock.elapsed() + std::time::Duration::from_millis(200);
        let mut x = 0u64;
        while clock.elapsed() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spun = w.sample("g", dir.path(), now()).unwrap();
        // Spinning, the thread is on a CPU or waiting for one all the time, however loaded the host.
        assert!(spun.cpu_bound(), "{spun:?}");
    }
}
