//! The agent under cgroup churn (root only): cgroups created and removed continuously below one
//! parent, each with a reader process, while the agent (userspace backend, a loop device over a
//! temporary file, one glob rule matching the churned cgroups) runs as a child process.
//!
//! Measured, and printed as a table and as JSON:
//! - time to control: from a cgroup's `mkdir` to the agent's first limit in its
//!   `blkio.throttle.read_iops_device` (every read of the cgroup's own file, every 5 ms);
//! - the agent's RSS and open descriptors (`/proc/PID/status`, `/proc/PID/fd`), once a second:
//!   at the start of the steady state (the target number of cgroups alive), at its end, and the max;
//! - its CPU time per planning period (`/proc/PID/stat` over the periods the status counts);
//! - the entries of its state file, and those whose file vanished with its cgroup;
//! - the observer (the sequential/random mix): its table restarts, from the agent's log.
//!
//! `churn_short` runs in the test suite (600 cgroups over 40 s, 40 alive); `churn_ten_minutes` is
//! the benchmark (`#[ignore]`d: 10 000 cgroups over 10 minutes, 200 alive), run as
//! `cargo test --release -p ioshare-agent --test churn -- --ignored --nocapture churn_ten_minutes`
//! (`IOSHARE_CHURN_TOTAL`, `_SECS`, `_ALIVE` change its size; `IOSHARE_CHURN_JSON=FILE` also writes the
//! JSON there).

mod common;

use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Rig;
use ioshare_agent::{Agent, BackendChoice, Config, Status};
use ioshare_host::{BlkioCgroup, ThrottleKnob, STATE_FILE};
use ioshare_testkit::{skip_unless_root, KillOnDrop};

const CONFIG_ENV: &str = "IOSHARE_CHURN_AGENT_CONFIG";
const STATE_ENV: &str = "IOSHARE_CHURN_AGENT_STATE";
/// Set for the reader child: `DEVICE IOPS WRITE_EVERY`.
const READER_ENV: &str = "IOSHARE_CHURN_READER";

/// The agent, when this binary is started by [`spawn_agent`]; does nothing in a normal test run.
#[test]
fn churn_agent_child() {
    let (Ok(config), Ok(state)) = (std::env::var(CONFIG_ENV), std::env::var(STATE_ENV)) else { return };
    // The agent logs through `tracing`; its observer renewals (info) are what the test reads.
    ioshare_agent::report::logging::init(Some("info"), ioshare_agent::report::logging::LogFormat::Text).unwrap();
    let stop = ioshare_agent::stop_on_signals();
    let config = Config::load(config.as_ref()).unwrap();
    let (agent, _) = Agent::start(config, BackendChoice::Userspace, state.as_ref()).unwrap();
    let reverted = agent.run(stop).unwrap();
    eprintln!("churn agent: reverted {reverted:?}");
}

/// A churned cgroup's reader, when this binary is started by [`spawn_reader`]: 4 KiB direct reads at
/// random offsets of the device, paced to a rate, and one write of the block it just read every
/// `WRITE_EVERY` IOs (so each cgroup has a read and a write series in the observer), until killed.
#[test]
fn churn_reader_child() {
    let Ok(spec) = std::env::var(READER_ENV) else { return };
    let words: Vec<&str> = spec.split_whitespace().collect();
    let (device, iops, write_every): (&str, u64, u64) =
        (words[0], words[1].parse().unwrap(), words[2].parse().unwrap());
    let file = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(device).unwrap();
    let blocks = file.metadata().map(|m| m.len()).unwrap_or(0).max(1 << 20) / 4096;
    let mut buf = AlignedBlock::new();
    let mut seed = u64::from(std::process::id()) | 1;
    let start = Instant::now();
    for n in 1u64.. {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let offset = (seed % blocks) * 4096;
        if file.read_exact_at(buf.bytes(), offset).is_ok() && n % write_every == 0 {
            let _ = file.write_all_at(buf.bytes(), offset);
        }
        std::thread::sleep((start + Duration::from_secs(n) / iops as u32).saturating_duration_since(Instant::now()));
    }
}

/// One 4 KiB page-aligned buffer (direct IO needs aligned memory).
struct AlignedBlock(*mut u8);

impl AlignedBlock {
    const LAYOUT: std::alloc::Layout = match std::alloc::Layout::from_size_align(4096, 4096) {
        Ok(l) => l,
        Err(_) => panic!("4 KiB aligned layout"),
    };

    fn new() -> AlignedBlock {
        // SAFETY: a non-zero-sized layout; the pointer is freed once, in drop.
        AlignedBlock(unsafe { std::alloc::alloc_zeroed(Self::LAYOUT) })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is 4096 bytes, owned by self, and borrowed mutably once at a time.
        unsafe { std::slice::from_raw_parts_mut(self.0, 4096) }
    }
}

impl Drop for AlignedBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { std::alloc::dealloc(self.0, Self::LAYOUT) }
    }
}

/// Has the kernel kill the child when this test process dies (the child of a test that was killed
/// must not go on), in a `pre_exec` hook.
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; the hook runs in the forked child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// This test binary running only [`churn_agent_child`] on `config`, its stderr to `log`.
fn spawn_agent(config: &Path, state: &Path, log: &Path) -> KillOnDrop {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "churn_agent_child", "--nocapture", "--test-threads=1"])
        .env(CONFIG_ENV, config)
        .env(STATE_ENV, state)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    die_with_parent(&mut cmd);
    KillOnDrop(cmd.spawn().unwrap())
}

/// A reader (this test binary running only [`churn_reader_child`]) in cgroup `cg`, niced: on this
/// shared two-core machine the agent, not the load it controls, should get the CPU first.
fn spawn_reader(cg: &BlkioCgroup, device: &Path, plan: &Plan) -> KillOnDrop {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "churn_reader_child", "--test-threads=1"])
        .env(READER_ENV, format!("{} {} {}", device.display(), plan.reader_iops, plan.write_every))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    die_with_parent(&mut cmd);
    // SAFETY: setpriority is async-signal-safe; the hook runs in the forked child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpriority(libc::PRIO_PROCESS, 0, 10);
            Ok(())
        });
    }
    KillOnDrop(cg.spawn(cmd).expect("start a reader in a churned cgroup"))
}

/// Reverts what the agent recorded in `state` when dropped (after a failure killed it with SIGKILL).
struct RevertOnDrop(PathBuf);

impl Drop for RevertOnDrop {
    fn drop(&mut self) {
        if let Err(e) = ioshare_agent::revert(&self.0) {
            eprintln!("cannot revert the churn agent's state in {}: {e}", self.0.display());
        }
    }
}

/// The size of a churn run.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Plan {
    /// Cgroups created (and removed) in all.
    total: usize,
    /// Over this time.
    secs: f64,
    /// Alive at a time, in the steady state.
    alive: usize,
    /// Each reader's IOPS.
    reader_iops: u64,
    /// A reader writes once every this many IOs.
    write_every: u64,
    /// The model's random-read IOPS (what the agent shares out).
    model_iops: u64,
}

impl Plan {
    /// How long each cgroup lives.
    fn lifetime(&self) -> Duration {
        Duration::from_secs_f64(self.secs * self.alive as f64 / self.total as f64)
    }

    /// When cgroup `i` is created, from the start.
    fn created_at(&self, i: usize) -> Duration {
        Duration::from_secs_f64(self.secs * i as f64 / self.total as f64)
    }
}

/// One sample of the agent process.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct Sample {
    /// Seconds since the churn started.
    t: f64,
    /// Cgroups alive then.
    alive: usize,
    rss_kib: u64,
    fds: usize,
    /// CPU time so far (user + system), ms.
    cpu_ms: u64,
    /// Periods planned so far.
    periods: u64,
    /// Entries in the state file, and those of them whose file is gone.
    state_entries: usize,
    state_vanished: usize,
}

/// The agent process's RSS (KiB), open descriptors and CPU time (ms).
fn proc_figures(pid: u32) -> (u64, usize, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.split_whitespace().next()?.parse().ok()).unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after.split_whitespace().map(|w| w.parse().unwrap_or(0)).collect();
    // SAFETY: sysconf has no preconditions.
    let tick_ms = 1000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let cpu = (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) * tick_ms;
    (rss, fds, cpu)
}

/// The entries (file, key) the state file records, and those whose file no longer exists.
fn state_entries(state: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(state.join(STATE_FILE)).unwrap_or_default();
    let entries: BTreeSet<(String, String)> = text
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| Some((v.get("path")?.as_str()?.to_string(), v.get("key")?.as_str()?.to_string())))
        .collect();
    let vanished = entries.iter().filter(|(p, _)| !Path::new(p).exists()).count();
    (entries.len(), vanished)
}

/// What a churn run measured.
#[derive(Debug, serde::Serialize)]
struct Report {
    plan: Plan,
    /// Cgroups created.
    created: usize,
    /// Time to control of each cgroup that got a limit, ms (sorted).
    #[serde(skip)]
    control_ms: Vec<f64>,
    /// Cgroups stopped before the agent limited them.
    never_controlled: usize,
    control_p50_ms: f64,
    control_p99_ms: f64,
    control_max_ms: f64,
    samples: Vec<Sample>,
    /// Index of the first and last sample of the steady state.
    steady: (usize, usize),
    /// State file after every churned cgroup was removed: entries, and those of vanished cgroups.
    state_end: (usize, usize),
    /// Observer restarts the agent logged (its table full of removed cgroups).
    observer_restarts: usize,
    /// The agent's log lines about its observer.
    observer_log: Vec<String>,
    /// `ioshare observe` (all stages) on the device under the same churn, in this process.
    observe: ObserveFigures,
}

/// What an observer of the churned device saw, read once a second.
#[derive(Debug, Default, serde::Serialize)]
struct ObserveFigures {
    /// Whether it ran (root with BTF).
    ran: bool,
    snapshots: usize,
    /// Snapshots that failed.
    errors: usize,
    /// Most series in one snapshot.
    max_series: usize,
    /// IOs not counted for want of room, at the end.
    dropped: u64,
    /// The last interval table, when it reported drops.
    dropped_line: Option<String>,
}

/// Series the observer's table holds (`OBS_MAX_SLOTS` in `observe.h`).
const OBSERVER_SLOTS: usize = 1024;

impl Report {
    fn quantile(&self, q: f64) -> f64 {
        let v = &self.control_ms;
        v.get(((v.len() as f64 * q).ceil() as usize).saturating_sub(1).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    }

    /// (start, end, max) of a figure over the steady state (max: over the whole run).
    fn figure(&self, f: impl Fn(&Sample) -> f64) -> (f64, f64, f64) {
        let (a, b) = self.steady;
        let max = self.samples.iter().map(&f).fold(0.0, f64::max);
        (f(&self.samples[a]), f(&self.samples[b]), max)
    }

    /// How much a figure grew over the steady state, smoothing what swings within it: the mean of
    /// its last quarter less the mean of its second quarter (half the steady state apart).
    fn growth(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        let (a, b) = self.steady;
        let q = ((b - a + 1) / 4).max(1);
        let mean = |from: usize| self.samples[from..(from + q).min(b + 1)].iter().map(&f).sum::<f64>() / q as f64;
        mean((b + 1).saturating_sub(q).max(a)) - mean(a + q)
    }

    /// CPU per period (ms) between two samples.
    fn cpu_per_period(&self, a: usize, b: usize) -> f64 {
        let (x, y) = (&self.samples[a], &self.samples[b]);
        (y.cpu_ms - x.cpu_ms) as f64 / (y.periods - x.periods).max(1) as f64
    }

    /// CPU per period in the first and last tenth of the steady state and over all of it.
    fn cpu_figures(&self) -> (f64, f64, f64) {
        let (a, b) = self.steady;
        let tenth = ((b - a) / 10).max(1);
        (
            self.cpu_per_period(a, (a + tenth).min(b)),
            self.cpu_per_period(b.saturating_sub(tenth).max(a), b),
            self.cpu_per_period(a, b),
        )
    }

    fn print(&self) {
        let rss = self.figure(|s| s.rss_kib as f64 / 1024.0);
        let fds = self.figure(|s| s.fds as f64);
        let stale = self.figure(|s| s.state_vanished as f64);
        let entries = self.figure(|s| s.state_entries as f64);
        let (cpu_first, cpu_last, cpu_all) = self.cpu_figures();
        let (a, b) = self.steady;
        let periods = self.samples[b].periods - self.samples[a].periods;
        let secs = self.samples[b].t - self.samples[a].t;
        println!(
            "churn: {} cgroups over {:.0} s, {} alive at a time ({:.1} s each), readers at {} IOPS, model {} IOPS",
            self.created,
            self.plan.secs,
            self.plan.alive,
            self.plan.lifetime().as_secs_f64(),
            self.plan.reader_iops,
            self.plan.model_iops
        );
        println!("{:<36} {:>10} {:>10} {:>10}", "", "start", "end", "max");
        let rss_growth = self.growth(|s| s.rss_kib as f64 / 1024.0);
        let fd_growth = self.growth(|s| s.fds as f64);
        println!("{:<36} {:>10.1} {:>10.1} {:>10.1}  (growth {rss_growth:+.2})", "agent RSS, MiB", rss.0, rss.1, rss.2);
        println!("{:<36} {:>10.0} {:>10.0} {:>10.0}  (growth {fd_growth:+.2})", "agent open fds", fds.0, fds.1, fds.2);
        println!("{:<36} {:>10.0} {:>10.0} {:>10.0}", "state file entries", entries.0, entries.1, entries.2);
        println!("{:<36} {:>10.0} {:>10.0} {:>10.0}", "  of them of vanished cgroups", stale.0, stale.1, stale.2);
        println!(
            "{:<36} {:>10.2} {:>10.2} {:>10.2}  (first/last tenth, all: {periods} periods in {secs:.0} s)",
            "agent CPU per period, ms", cpu_first, cpu_last, cpu_all
        );
        println!(
            "time to control: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms over {} cgroups; {} stopped before control",
            self.control_p50_ms,
            self.control_p99_ms,
            self.control_max_ms,
            self.control_ms.len(),
            self.never_controlled
        );
        println!(
            "after the churn: {} state entries, {} of vanished cgroups; observer restarts {}",
            self.state_end.0, self.state_end.1, self.observer_restarts
        );
        for l in &self.observer_log {
            println!("  agent: {l}");
        }
        let o = &self.observe;
        println!(
            "observe under the churn: {} snapshots, {} failed, at most {} series (table of {OBSERVER_SLOTS}), {} IOs dropped{}",
            o.snapshots,
            o.errors,
            o.max_series,
            o.dropped,
            o.dropped_line.as_ref().map_or(String::new(), |l| format!(", reported as \"{l}\""))
        );
        let json = serde_json::json!({
            "plan": self.plan,
            "created": self.created,
            "control_ms": {"p50": self.control_p50_ms, "p99": self.control_p99_ms, "max": self.control_max_ms,
                           "never": self.never_controlled},
            "rss_mib": {"start": rss.0, "end": rss.1, "max": rss.2, "growth": rss_growth},
            "fds": {"start": fds.0, "end": fds.1, "max": fds.2, "growth": fd_growth},
            "cpu_ms_per_period": {"first_tenth": cpu_first, "last_tenth": cpu_last, "steady": cpu_all},
            "state_entries": {"start": entries.0, "end": entries.1, "max": entries.2,
                              "vanished_max": stale.2, "after_churn": self.state_end.0,
                              "vanished_after_churn": self.state_end.1},
            "observer_restarts": self.observer_restarts,
            "observe": self.observe,
            "samples": self.samples,
        });
        let text = serde_json::to_string(&json).unwrap();
        println!("JSON {text}");
        if let Ok(path) = std::env::var("IOSHARE_CHURN_JSON") {
            std::fs::write(path, &text).unwrap();
        }
    }
}

/// The limit cgroup `dir` has on `dev` in `file`, 0 when none (or gone).
fn limit_in(file: &Path, prefix: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(prefix)?.trim().parse().ok()).unwrap_or(0)
}

/// A churned cgroup while it lives. Field order is drop order: the reader, then the cgroup.
struct Churned {
    reader: KillOnDrop,
    cgroup: BlkioCgroup,
    name: String,
    created: Instant,
    /// Its read IOPS limit file, while the agent has not limited it yet.
    pending: Option<PathBuf>,
}

/// Runs `plan` against an agent; the measurements.
fn churn(test: &str, plan: Plan) -> Report {
    let rig = Rig::new(test, &["anchor"]);
    let before = rig.snapshot();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("agent.log");
    let model = format!("ssd_dfl rrandiops={0} rseqiops={0} wrandiops={0} wseqiops={0}", plan.model_iops);
    let text = format!(
        "period_ms = 100\n[[devices]]\npath = \"{}\"\nmodel = \"{model}\"\n[[groups]]\ncgroup = \"{}/c-*\"\nweight = 100\n",
        rig.dev.path().display(),
        rig.parent()
    );
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, text).unwrap();
    let _revert = RevertOnDrop(state.clone());
    let mut agent = spawn_agent(&config, &state, &log);
    let pid = agent.0.id();
    let up = common::wait_for(Duration::from_secs(30), || Status::read(&state).is_ok());
    assert!(up.is_some(), "the agent never wrote its status: {}", std::fs::read_to_string(&log).unwrap_or_default());

    let prefix = format!("{} ", rig.devnum());
    let dev = rig.devnum();
    let mut observer = ioshare_observe::Observer::start(Some((dev.major, dev.minor))).ok();
    let mut observe = ObserveFigures { ran: observer.is_some(), ..Default::default() };
    let mut last_snapshot: Option<ioshare_observe::Snapshot> = None;
    let mut alive: VecDeque<Churned> = VecDeque::new();
    // Stopped, waiting for their reader to exit before the cgroup goes: a reader killed in the
    // middle of a throttled IO exits once it completes (up to a second at a low limit), and the
    // driver must not wait for it.
    let mut dying: Vec<Churned> = Vec::new();
    let mut control_ms: Vec<f64> = Vec::new();
    let mut never = 0;
    let mut samples: Vec<Sample> = Vec::new();
    let mut steady: (Option<usize>, usize) = (None, 0);
    let start = Instant::now();
    let mut next_sample = start;
    let mut created = 0;
    let lifetime = plan.lifetime();
    while created < plan.total || !alive.is_empty() || !dying.is_empty() {
        let now = Instant::now();
        // Stop the cgroups whose time is up (a container stopping): the reader is killed, and once
        // it exited, the cgroup removed.
        while alive.front().is_some_and(|c| now >= c.created + lifetime) {
            let mut c = alive.pop_front().unwrap();
            if c.pending.is_some() {
                never += 1;
                eprintln!("{}: stopped before the agent limited it", c.name);
            }
            let _ = c.reader.0.kill();
            dying.push(c);
        }
        let mut i = 0;
        while i < dying.len() {
            if dying[i].reader.0.try_wait().unwrap().is_some() {
                let c = dying.swap_remove(i);
                c.cgroup.remove().unwrap();
            } else {
                i += 1;
            }
        }
        // Create the ones due (a container starting).
        while created < plan.total && now >= start + plan.created_at(created) {
            let name = format!("{}/c-{created:05}", rig.parent());
            let cgroup = BlkioCgroup::create(&name).unwrap();
            let created_at = Instant::now();
            let reader = spawn_reader(&cgroup, rig.dev.path(), &plan);
            let pending = Some(cgroup.path().join(ThrottleKnob::ReadIops.file_name()));
            alive.push_back(Churned { reader, cgroup, name, created: created_at, pending });
            created += 1;
        }
        // Under control: the agent wrote a limit to the cgroup's own file.
        for c in alive.iter_mut() {
            if let Some(file) = &c.pending {
                if limit_in(file, &prefix) > 0 {
                    control_ms.push(c.created.elapsed().as_secs_f64() * 1e3);
                    c.pending = None;
                }
            }
        }
        if now >= next_sample {
            next_sample += Duration::from_secs(1);
            let (rss_kib, fds, cpu_ms) = proc_figures(pid);
            let periods = Status::read(&state).map_or(0, |s| s.periods);
            let (state_entries, state_vanished) = state_entries(&state);
            let s = Sample {
                t: start.elapsed().as_secs_f64(),
                alive: alive.len(),
                rss_kib,
                fds,
                cpu_ms,
                periods,
                state_entries,
                state_vanished,
            };
            // The steady state: from when the target number is first alive until creation ends.
            if alive.len() >= plan.alive * 95 / 100 && created < plan.total {
                steady.0.get_or_insert(samples.len());
                steady.1 = samples.len();
            }
            samples.push(s);
            assert!(agent.alive(), "the agent exited: {}", std::fs::read_to_string(&log).unwrap_or_default());
            if let Some(o) = observer.as_mut() {
                observe.snapshots += 1;
                match o.snapshot() {
                    Ok(snap) => {
                        observe.max_series = observe.max_series.max(snap.entries.len());
                        observe.dropped = snap.counters.dropped_stats_full;
                        if let Some(last) = &last_snapshot {
                            let delta = snap.since(last);
                            if delta.counters.dropped_stats_full > 0 {
                                let table = ioshare_observe::table::render(&delta, 1.0);
                                observe.dropped_line =
                                    table.lines().find(|l| l.starts_with("dropped")).map(String::from);
                            }
                        }
                        last_snapshot = Some(snap);
                    }
                    Err(e) => {
                        observe.errors += 1;
                        eprintln!("observer snapshot failed: {e}");
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Every churned cgroup is gone: the agent lets go of them all at its next discovery (every
    // 200 ms). Waited for, not slept on: up to 10 s, as the agent's process may wait that long for
    // a core on a machine loaded 10-30 deep; a state file still holding them then fails `check`.
    drop(dying);
    let _ = common::wait_for(Duration::from_secs(10), || state_entries(&state).1 == 0);
    let state_end = state_entries(&state);
    let (rss_kib, fds, cpu_ms) = proc_figures(pid);
    let periods = Status::read(&state).map_or(0, |s| s.periods);
    let (entries, vanished) = state_end;
    samples.push(Sample {
        t: start.elapsed().as_secs_f64(),
        alive: 0,
        rss_kib,
        fds,
        cpu_ms,
        periods,
        state_entries: entries,
        state_vanished: vanished,
    });
    assert!(agent.alive(), "the agent exited: {}", std::fs::read_to_string(&log).unwrap_or_default());
    agent.terminate();
    let stopped = common::wait_for(Duration::from_secs(20), || !agent.alive());
    assert!(stopped.is_some(), "the agent did not stop on SIGTERM");
    assert!(agent.0.wait().unwrap().success(), "the agent failed: {}", std::fs::read_to_string(&log).unwrap());
    assert_eq!(rig.snapshot(), before, "stopping the agent restored every throttle file");
    let observer_log: Vec<String> = std::io::BufReader::new(std::fs::File::open(&log).unwrap())
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("observer") || l.contains("as random"))
        .collect();
    control_ms.sort_by(f64::total_cmp);
    let steady_range = match steady.0 {
        Some(a) => (a, steady.1.max(a)),
        None => (0, samples.len() - 1),
    };
    let mut report = Report {
        plan,
        created,
        control_ms,
        never_controlled: never,
        control_p50_ms: 0.0,
        control_p99_ms: 0.0,
        control_max_ms: 0.0,
        samples,
        steady: steady_range,
        state_end,
        observer_restarts: observer_log.iter().filter(|l| l.contains("afresh")).count(),
        observer_log,
        observe,
    };
    report.control_p50_ms = report.quantile(0.5);
    report.control_p99_ms = report.quantile(0.99);
    report.control_max_ms = report.quantile(1.0);
    let _ = std::io::stdout().flush();
    report
}

/// What every churn run must show; `rss_slack_mib` is the RSS growth allowed over the steady state.
fn check(report: &Report, rss_slack_mib: f64) {
    // Acceptance: a new cgroup is under control within 1 s (p99). The agent discovers every 200 ms
    // and plans every 100 ms, so 300 ms is the design's worst case; the rest is for a loaded machine.
    assert_eq!(report.never_controlled, 0, "cgroups stopped before the agent limited them");
    assert_eq!(report.control_ms.len(), report.created, "every churned cgroup got a limit");
    assert!(report.control_p99_ms < 1000.0, "p99 time to control {:.0} ms", report.control_p99_ms);
    // Nothing of a vanished cgroup stays in the state file once the agent saw it go (two discoveries).
    assert_eq!(report.state_end.1, 0, "state entries of vanished cgroups after the churn: {:?}", report.state_end);
    // Nor does it pile up during the churn: at most the cgroups removed since the last discovery
    // (200 ms of removals, 4 files each) are stale at a sampling moment; 4 × alive is a loose bound.
    let stale_max = report.samples.iter().map(|s| s.state_vanished).max().unwrap_or(0);
    assert!(stale_max <= 4 * report.plan.alive, "up to {stale_max} stale state entries during the churn");
    // Descriptors: the agent holds a fixed set (state file, observer maps and programs); each
    // cgroup's files are opened and closed within a period. A few may be open at the sampling
    // moment (a file being read, an observer being replaced): 8 of slack; a leak of one per cgroup
    // would show hundreds.
    let (first, last) = (report.samples[report.steady.0].fds, report.samples[report.steady.1].fds);
    let end = report.samples.last().unwrap().fds;
    assert!(
        last <= first + 8 && end <= first + 8,
        "fds grew: {first} at the steady state's start, {last} at its end, {end} after"
    );
    // RSS: the steady state keeps the same number of cgroups alive, so what the agent holds should
    // not grow with the cgroups churned. It swings, though: the observer's table fills with the
    // series of removed cgroups until the agent renews it, and each reading allocates ~3.5 KB per
    // series, which the allocator may keep. So the growth is judged on quarter means, half the
    // steady state apart ([`Report::growth`]), against `rss_slack_mib`.
    let grow = report.growth(|s| s.rss_kib as f64 / 1024.0);
    assert!(grow <= rss_slack_mib, "RSS grew {grow:.2} MiB over the steady state (allowed {rss_slack_mib})");
    // The observer: bounded, what does not fit counted and reported, never a failure. Each cgroup
    // reads and writes: two series each, so a run of more than 512 cgroups overflows the table.
    let o = &report.observe;
    if o.ran {
        assert_eq!(o.errors, 0, "observer snapshots failed");
        assert!(o.max_series <= OBSERVER_SLOTS, "{} series in a table of {OBSERVER_SLOTS}", o.max_series);
        if report.created * 2 > OBSERVER_SLOTS + OBSERVER_SLOTS / 8 {
            assert!(o.dropped > 0 && o.dropped_line.is_some(), "the overflow was not counted and reported: {o:?}");
            // The agent's own observer overflowed as well, and started afresh (the table was
            // mostly removed cgroups by then).
            assert!(report.observer_restarts > 0, "the agent never renewed its observer: {:?}", report.observer_log);
        }
    }
}

#[test]
fn churn_short() {
    if skip_unless_root("churn_short") {
        return;
    }
    // 600 cgroups over 40 s, 40 alive (4 s each), readers at 50 IOPS writing every 10th IO: 1 200
    // (cgroup, direction) series, more than the observer's table of 1 024 holds.
    let plan = Plan { total: 600, secs: 40.0, alive: 40, reader_iops: 50, write_every: 10, model_iops: 2000 };
    let report = churn("churn-short", plan);
    report.print();
    // 2 MiB: the quarters' centres are ~18 s apart, ~270 cgroups churned, so a leak of ~8 KiB per
    // churned cgroup would show (the ten-minute run shows the slope of anything smaller).
    check(&report, 2.0);
}

#[test]
#[ignore = "benchmark: ten minutes of churn; run by hand (docs/agent.md)"]
fn churn_ten_minutes() {
    if skip_unless_root("churn_ten_minutes") {
        return;
    }
    let env = |name: &str, default: f64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let plan = Plan {
        total: env("IOSHARE_CHURN_TOTAL", 10_000.0) as usize,
        secs: env("IOSHARE_CHURN_SECS", 600.0),
        alive: env("IOSHARE_CHURN_ALIVE", 200.0) as usize,
        reader_iops: 20,
        write_every: 10,
        model_iops: 4000,
    };
    let report = churn("churn-long", plan);
    report.print();
    // 2 MiB over the ~5 000 cgroups churned between the quarters' centres: ~400 bytes per cgroup.
    check(&report, 2.0);
}
