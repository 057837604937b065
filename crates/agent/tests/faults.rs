//! The agent under faults (root only): a loop device over a temp file, blkio cgroups with fio
//! readers, and the agent as a child process (this test binary re-executed with `child_agent` as the
//! only test). Each test takes a snapshot of every throttle file the agent may write before the agent
//! starts, provokes one fault, and compares the host with the snapshot afterwards:
//! - the device detached under the agent, then another device at its number and the same file at
//!   another number;
//! - cgroups removed while the agent plans them, one at a time and a thousand at once;
//! - a state directory that cannot be written (read-only bind mount, full tmpfs) at start and
//!   filling up while the agent runs;
//! - a state file damaged by a crash or the disk: revert restores what it can read and names the rest;
//! - a second agent on the same cgroups with another state directory;
//! - the agent stopped (SIGSTOP) for 10 s, then continued;
//! - `kill -9` at random moments of the apply phase, then `revert`, many times
//!   ([`KILL_ITERATIONS`] here; `kill_9_at_random_moments_100_times` runs 100:
//!   `cargo test -p ioshare-agent --test faults -- --ignored --nocapture`).
//!
//! Mounts, cgroups, loop devices, processes and state directories are owned by guards that undo
//! them on drop, so a failing test leaves the host as it found it.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fio_in, snapshot_at, wait_for, Rig};
use ioshare_agent::{Agent, BackendChoice, Config, Status};
use ioshare_host::{BlkioCgroup, DevNum, LoopDevice, ThrottleKnob};
use ioshare_testkit::{skip_unless_root, KillOnDrop};

const CONFIG_ENV: &str = "IOSHARE_FAULTS_CONFIG";
const STATE_ENV: &str = "IOSHARE_FAULTS_STATE";
/// Iterations of the `kill -9` test in the normal run.
const KILL_ITERATIONS: usize = 20;
/// The cost model the tests configure: the loop device over the host's disk does more than this,
/// so two saturating readers always compete and get limits.
const MODEL: &str = "ssd_dfl rrandiops=20000 rseqiops=20000";

/// The agent, when this binary is started by [`spawn_agent`]; does nothing in a normal test run.
/// Prints what `ioshare agent run` prints on stderr: an error is one line and exit status 1; the
/// agent's log at `warn` (its warnings and errors, as `ioshare agent run` logs them).
#[test]
fn child_agent() {
    let (Ok(config), Ok(state)) = (std::env::var(CONFIG_ENV), std::env::var(STATE_ENV)) else { return };
    ioshare_agent::report::logging::init(Some("warn"), ioshare_agent::report::logging::LogFormat::Text).unwrap();
    let stop = ioshare_agent::stop_on_signals();
    let run = || -> ioshare_agent::Result<ioshare_host::Reverted> {
        let config = Config::load(config.as_ref())?;
        let (agent, _) = Agent::start(config, BackendChoice::Userspace, state.as_ref())?;
        eprintln!("ioshare agent: started");
        agent.run(stop)
    };
    match run() {
        Ok(r) => eprintln!(
            "ioshare agent: stopped; restored {} setting(s), {} changed by others",
            r.restored,
            r.changed_by_others.len()
        ),
        Err(e) => {
            eprintln!("ioshare agent: {e}");
            std::process::exit(1);
        }
    }
}

/// A running agent: the child process and the file its stderr goes to.
struct Spawned {
    child: KillOnDrop,
    log: PathBuf,
}

impl Spawned {
    /// What it printed on stderr so far, without the test harness's lines: the child's own lines
    /// (`ioshare agent: …`) and the log's (`TIME LEVEL message`).
    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let logged = |l: &str| l.split_whitespace().nth(1).is_some_and(|level| matches!(level, "WARN" | "ERROR"));
        text.lines().filter(|l| l.starts_with("ioshare") || logged(l)).map(|l| format!("{l}\n")).collect()
    }

    /// What it printed besides its start, its stop and the observer's notice that it charges all IO
    /// as random (where eBPF cannot run): errors and warnings.
    fn complaints(&self) -> Vec<String> {
        let normal = |l: &str| {
            l.ends_with("started") || l.starts_with("ioshare agent: stopped") || l.contains("charging all IO")
        };
        self.log().lines().filter(|l| !normal(l)).map(str::to_string).collect()
    }

    /// Sends `sig`.
    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on the pid of our own child, not yet reaped (KillOnDrop reaps it).
        unsafe { libc::kill(self.child.0.id() as libc::pid_t, sig) };
    }

    /// Waits up to `limit` for it to exit; its exit status, or `None` if it is still running.
    fn wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.0.try_wait().unwrap() {
                return Some(status);
            }
            if start.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM, then its exit status (it must exit within 10 s).
    fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait(Duration::from_secs(10)).expect("the agent exits on SIGTERM")
    }
}

/// This test binary running only `child_agent`, as the agent on `config` with state in `state`; its
/// stderr goes to `log`.
fn spawn_agent(config: &Path, state: &Path, log: &Path) -> Spawned {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_agent", "--nocapture", "--test-threads=1"])
        .env(CONFIG_ENV, config)
        .env(STATE_ENV, state)
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap());
    Spawned { child: KillOnDrop(cmd.spawn().unwrap()), log: log.to_path_buf() }
}

/// The tests here run fio on the same host disk and some take its loop devices: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A directory of the test with a configuration for `rig` (cgroups `weights.len()` first ones),
/// planning every `period_ms`; returns the directory guard and the file.
fn config_for(rig: &Rig, weights: &[u32], period_ms: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = rig.config(dir.path(), MODEL, None, weights, period_ms);
    (dir, file)
}

/// What every test here starts from: the host's disk to itself (one test at a time), a rig with
/// cgroups `a` and `b`, the snapshot of its throttle files before anything, and a directory of the
/// test with a configuration for the rig. Field order is drop order: the lock goes last.
struct Scene {
    dir: tempfile::TempDir,
    config: PathBuf,
    before: BTreeMap<PathBuf, String>,
    rig: Rig,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Scene {
    /// The scene of test `test` (`name`: its cgroups' parent), the configuration giving the first
    /// `weights.len()` cgroups those weights, planning every `period_ms`; `None` (skipped) without root.
    fn new(test: &str, name: &str, weights: &[u32], period_ms: u64) -> Option<Scene> {
        if skip_unless_root(test) {
            return None;
        }
        let _serial = one_at_a_time();
        let rig = Rig::new(name, &["a", "b"]);
        let before = rig.snapshot();
        let (dir, config) = config_for(&rig, weights, period_ms);
        Some(Scene { dir, config, before, rig, _serial })
    }

    /// `n` more cgroups (`x0000`, ...) beside `a` and `b`, the snapshot taken again with them.
    fn extra_cgroups(&mut self, n: usize) -> Vec<BlkioCgroup> {
        let parent = self.rig.parent();
        let extra = (0..n).map(|i| BlkioCgroup::create(&format!("{parent}/x{i:04}")).unwrap()).collect();
        self.before = self.rig.snapshot();
        extra
    }

    /// A saturating reader in each of `a` and `b` (4 KiB random reads at QD16).
    fn readers(&self) -> [KillOnDrop; 2] {
        [self.rig.fio(0, 16, &[]), self.rig.fio(1, 16, &[])]
    }

    /// The agent on the scene's configuration with state in `state`, its stderr in file `log` of
    /// the scene's directory.
    fn spawn(&self, state: &Path, log: &str) -> Spawned {
        spawn_agent(&self.config, state, &self.dir.path().join(log))
    }
}

/// What differs between two snapshots (for assertion messages).
fn diff(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> String {
    let mut out = String::new();
    for (path, text) in after {
        match before.get(path) {
            Some(b) if b == text => {}
            Some(b) => out += &format!("{}: {b:?} -> {text:?}\n", path.display()),
            None => out += &format!("{}: new, {text:?}\n", path.display()),
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        out += &format!("{}: gone\n", path.display());
    }
    out
}

/// A small deterministic generator for random delays (xorshift64*), seeded from the clock or from
/// `IOSHARE_FAULTS_SEED` to replay a failure; the seed is printed.
struct Rng(u64);

impl Rng {
    fn new(test: &str) -> Rng {
        let seed = std::env::var("IOSHARE_FAULTS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        }) | 1;
        eprintln!("{test}: IOSHARE_FAULTS_SEED={seed}");
        Rng(seed)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// A rig with two saturating readers; returns once the agent wrote limits.
fn wait_for_limits(rig: &Rig, before: &BTreeMap<PathBuf, String>) {
    let changed = wait_for(Duration::from_secs(15), || rig.snapshot() != *before);
    assert!(changed.is_some(), "the agent never wrote a limit");
}

// ---- kill -9 at random moments ----

/// `iterations` times: an agent starts on two saturating readers, is killed with SIGKILL after a
/// random delay (from before its first write to some periods into planning), and `revert` runs;
/// the snapshot must equal the one taken before the first start, every time.
fn kill_9_at_random_moments(test: &str, iterations: usize) {
    // A 20 ms period: the planner rewrites limits often, so kills land between records and writes.
    let Some(scene) = Scene::new(test, "kill9", &[200, 100], 20) else { return };
    let Scene { rig, before, .. } = &scene;
    let mut rng = Rng::new(test);
    let _readers = scene.readers();
    // How long an agent takes from exec to its start and to its first write here.
    let (started, first_write) = {
        let state = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let mut agent = scene.spawn(state.path(), "first.log");
        let started = wait_for(Duration::from_secs(15), || agent.log().contains("started")).expect("started");
        wait_for_limits(rig, before);
        let first_write = start.elapsed();
        assert!(agent.terminate().success(), "{}", agent.log());
        (started, first_write)
    };
    assert_eq!(rig.snapshot(), *before, "SIGTERM restored everything");
    // From before the recorder opens to some periods after the first limits.
    let (from, to) = (started.as_millis() as u64 * 3 / 4, first_write.as_millis() as u64 + 500);
    eprintln!(
        "{test}: started after {started:?}, first write after {first_write:?}: killing {from}..{to} ms after exec"
    );
    let began = Instant::now();
    let mut left_changes = 0;
    for i in 0..iterations {
        let state = tempfile::tempdir().unwrap();
        let mut agent = scene.spawn(state.path(), "agent.log");
        let delay = Duration::from_millis(from + rng.below(to - from));
        std::thread::sleep(delay);
        agent.signal(libc::SIGKILL);
        agent.wait(Duration::from_secs(5)).expect("killed");
        let left = rig.snapshot();
        left_changes += usize::from(left != *before);
        let reverted = ioshare_agent::revert(state.path())
            .unwrap_or_else(|e| panic!("iteration {i} (killed after {delay:?}): revert failed: {e}"));
        let after = rig.snapshot();
        assert!(
            after == *before,
            "iteration {i} (killed after {delay:?}): revert left\n{}reverted {reverted:?}\nagent: {}",
            diff(before, &after),
            agent.log()
        );
        if let Some(r) = reverted {
            assert!(r.changed_by_others.is_empty(), "iteration {i}: {r:?}");
        }
    }
    eprintln!(
        "{test}: {iterations} kills in {:.1} s, {left_changes} of them with limits in force: every revert restored the snapshot",
        began.elapsed().as_secs_f64()
    );
    // The kills landed in the apply phase, not all before the first write.
    assert!(left_changes * 4 >= iterations, "only {left_changes} of {iterations} kills left limits to revert");
}

#[test]
fn kill_9_at_random_moments_then_revert_restores_the_snapshot() {
    kill_9_at_random_moments("kill_9_at_random_moments_then_revert_restores_the_snapshot", KILL_ITERATIONS);
}

/// The acceptance run: 100 kills (about a minute and a half; run with `--ignored`).
#[test]
#[ignore]
fn kill_9_at_random_moments_100_times() {
    kill_9_at_random_moments("kill_9_at_random_moments_100_times", 100);
}

// ---- the state directory cannot be written ----

/// A file system mounted by a test on a directory it created; unmounted on drop.
struct Mounted(PathBuf);

impl Mounted {
    /// `mount ARGS... DIR`, `DIR` a directory the test owns.
    fn new(dir: &Path, args: &[&str]) -> Mounted {
        let ok = Command::new("mount").args(args).arg(dir).status().unwrap().success();
        assert!(ok, "mount {args:?} {}", dir.display());
        Mounted(dir.to_path_buf())
    }

    /// A tmpfs of `size` (e.g. `64k`) on `dir`.
    fn tmpfs(dir: &Path, size: &str) -> Mounted {
        Mounted::new(dir, &["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"])
    }

    /// `dir` bind-mounted read-only on itself.
    fn read_only(dir: &Path) -> Mounted {
        let m = Mounted::new(dir, &["--bind", &dir.display().to_string()]);
        let ok = Command::new("mount").args(["-o", "remount,bind,ro"]).arg(dir).status().unwrap().success();
        assert!(ok, "remount {} read-only", dir.display());
        m
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

/// Fills the file system of `dir` until a write fails (ENOSPC); the filler is a file in `dir`.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = File::create(dir.join("filler")).unwrap();
    let chunk = [0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    // A last byte at a time, to the very end of the last block.
    while f.write_all(&chunk[..1]).is_ok() {}
}

/// A read-only state directory, and a full one: the agent refuses to start, with one line saying
/// why, and writes nothing.
#[test]
fn a_state_directory_that_cannot_be_written_is_refused_at_start() {
    let test = "a_state_directory_that_cannot_be_written_is_refused_at_start";
    let Some(scene) = Scene::new(test, "rostate", &[200, 100], 100) else { return };
    let Scene { rig, before, dir, .. } = &scene;
    let _readers = scene.readers();
    let (ro, full) = (dir.path().join("ro"), dir.path().join("full"));
    std::fs::create_dir(&ro).unwrap();
    std::fs::create_dir(&full).unwrap();
    let _ro = Mounted::read_only(&ro);
    let _full = Mounted::tmpfs(&full, "64k");
    fill(&full);
    for (state, why) in [(&ro, "Read-only file system"), (&full, "No space left on device")] {
        let mut agent = scene.spawn(state, "agent.log");
        let status = agent.wait(Duration::from_secs(30)).expect("the agent refuses to start");
        let log = agent.log();
        eprintln!("{}: {log}", state.display());
        assert!(!status.success(), "{log}");
        assert_eq!(log.lines().count(), 1, "one line: {log}");
        assert!(log.contains(why) && log.contains("makes none it cannot record"), "{log}");
        assert_eq!(rig.snapshot(), *before, "nothing written");
        assert!(!state.join(ioshare_host::STATE_FILE).exists());
    }
}

/// The state directory fills up while the agent runs: it stops with one line saying why, and
/// restores everything it wrote: none of its writes went unrecorded.
#[test]
fn a_state_directory_filling_up_stops_the_agent_with_everything_restored() {
    let test = "a_state_directory_filling_up_stops_the_agent_with_everything_restored";
    let Some(scene) = Scene::new(test, "fullstate", &[200, 100], 50) else { return };
    let Scene { rig, before, dir, .. } = &scene;
    let _readers = scene.readers();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let _tmpfs = Mounted::tmpfs(&state, "1m");
    let mut agent = scene.spawn(&state, "agent.log");
    wait_for_limits(rig, before);
    std::thread::sleep(Duration::from_millis(300));
    fill(&state);
    let status = agent.wait(Duration::from_secs(20)).expect("the agent stops when it cannot record");
    let log = agent.log();
    eprintln!("{log}");
    assert!(!status.success(), "{log}");
    let errors = agent.complaints();
    assert_eq!(errors.len(), 1, "one line: {log}");
    assert!(errors[0].contains("cannot write") && errors[0].contains("No space left on device"), "{log}");
    assert!(errors[0].contains("makes none it cannot record"), "{log}");
    assert_eq!(rig.snapshot(), *before, "everything it wrote restored:\n{}", diff(before, &rig.snapshot()));
    assert!(!state.join(ioshare_host::STATE_FILE).exists(), "and its state file removed");
}

// ---- a damaged state file ----

/// The state file of a killed agent, damaged: one record's bytes changed (the disk), and a record
/// cut short at the end (a crash while appending it). `revert` restores every entry it can read and
/// names the lines it cannot; the entry whose only record was damaged is the one left in place.
#[test]
fn a_damaged_state_file_is_reverted_where_it_can_be_read() {
    let test = "a_damaged_state_file_is_reverted_where_it_can_be_read";
    let Some(scene) = Scene::new(test, "damaged", &[200, 100], 100) else { return };
    let Scene { rig, before, .. } = &scene;
    let readers = scene.readers();
    let state = tempfile::tempdir().unwrap();
    let mut agent = scene.spawn(state.path(), "agent.log");
    wait_for_limits(rig, before);
    std::thread::sleep(Duration::from_millis(500));
    agent.signal(libc::SIGKILL);
    agent.wait(Duration::from_secs(5)).expect("killed");
    drop(readers);

    let path = state.path().join(ioshare_host::STATE_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let entry = |line: &str| {
        let v: serde_json::Value = serde_json::from_str(line.split_once(' ').unwrap().1).unwrap();
        (v["path"].as_str().unwrap().to_string(), v["key"].as_str().unwrap().to_string(), v["new"].clone())
    };
    // Damage every record of one entry: that entry cannot be restored.
    let records: Vec<(String, String, serde_json::Value)> = lines[1..].iter().map(|l| entry(l)).collect();
    let (lost_path, lost_key, _) = records[0].clone();
    let lost: Vec<usize> =
        (0..records.len()).filter(|&i| (&records[i].0, &records[i].1) == (&lost_path, &lost_key)).collect();
    let lost_new = records[*lost.last().unwrap()].2.clone();
    let mut damaged: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    for &i in &lost {
        damaged[i + 1] = damaged[i + 1].replacen("\"new\":\"", "\"new\":\"9", 1);
    }
    // A crash while appending: the start of a record for another entry, never finished.
    let torn = &lines[lines.len() - 1][..lines[lines.len() - 1].len() / 2];
    std::fs::write(&path, format!("{}\n{torn}", damaged.join("\n"))).unwrap();

    let reverted = ioshare_agent::revert(state.path()).unwrap().expect("a state file");
    eprintln!("{reverted:?}");
    assert_eq!(reverted.unreadable.len(), lost.len() + 1, "{reverted:?}");
    for (named, &i) in reverted.unreadable.iter().zip(&lost) {
        assert!(named.starts_with(&format!("line {} (record): checksum mismatch", i + 2)), "{named}");
        assert!(named.contains(&lost_path), "the damaged line is quoted: {named}");
    }
    let torn_line = lines.len() + 1;
    assert!(reverted.unreadable[lost.len()].starts_with(&format!("line {torn_line} (record): cut short")));
    assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
    let after = rig.snapshot();
    for (file, text) in &after {
        if *file == Path::new(&lost_path) {
            assert!(text.contains(lost_new.as_str().unwrap()), "the lost entry stays: {text:?}");
        } else {
            assert_eq!(Some(text), before.get(file), "{} restored", file.display());
        }
    }
    assert!(!path.exists(), "the state file removed");
}

// ---- two agents ----

/// Rewrites the configuration `file` so that its one rule is `pattern` (weight 100).
fn config_with_pattern(rig: &Rig, file: &Path, pattern: &str) {
    let text = format!(
        "period_ms = 100\n[[devices]]\npath = \"{}\"\nmodel = \"{MODEL}\"\n[[groups]]\ncgroup = \"{pattern}\"\nweight = 100\n",
        rig.dev.path().display()
    );
    std::fs::write(file, text).unwrap();
}

/// A second agent on the same cgroups is refused, naming the first, whether its state directory is
/// another one or the same, and so is one on other cgroups with the same state directory; the first
/// keeps running and restores everything when stopped.
#[test]
fn a_second_agent_on_the_same_cgroups_is_refused_naming_the_first() {
    let test = "a_second_agent_on_the_same_cgroups_is_refused_naming_the_first";
    let Some(scene) = Scene::new(test, "twoagents", &[200, 100], 100) else { return };
    let Scene { rig, before, dir, config, .. } = &scene;
    let _readers = scene.readers();
    let glob = dir.path().join("glob.toml");
    config_with_pattern(rig, &glob, &format!("{}/*", rig.parent()));
    let elsewhere = dir.path().join("elsewhere.toml");
    config_with_pattern(rig, &elsewhere, &format!("{}/none", rig.parent()));
    let first_state = tempfile::tempdir().unwrap();
    let mut first = scene.spawn(first_state.path(), "first.log");
    wait_for_limits(rig, before);
    let other_state = tempfile::tempdir().unwrap();
    for (config, state, what) in [
        (config, other_state.path(), "the same rules, another state directory"),
        (&glob, other_state.path(), "a glob matching the same cgroups"),
        (config, first_state.path(), "the same state directory"),
        (&elsewhere, first_state.path(), "the same state directory, other cgroups"),
    ] {
        let mut second = spawn_agent(config, state, &dir.path().join("second.log"));
        let status = second.wait(Duration::from_secs(30)).unwrap_or_else(|| panic!("{what}: not refused"));
        let log = second.log();
        eprintln!("{what}: {log}");
        assert!(!status.success(), "{what}: {log}");
        assert_eq!(log.lines().count(), 1, "{what}: one line: {log}");
        assert!(log.contains(&format!("pid {}", first.child.0.id())), "{what}: names the first: {log}");
    }
    assert!(!other_state.path().join(ioshare_host::STATE_FILE).exists(), "the refused agent recorded nothing");
    assert!(first.wait(Duration::ZERO).is_none(), "the first runs on: {}", first.log());
    assert!(first.terminate().success(), "{}", first.log());
    assert!(first.log().contains(", 0 changed by others"), "nobody else wrote: {}", first.log());
    assert_eq!(rig.snapshot(), *before);
}

// ---- SIGSTOP ----

/// `dev`'s value in the throttle file `knob` of cgroup directory `dir` (0: no rule).
fn limit_of(dir: &Path, knob: ThrottleKnob, dev: DevNum) -> u64 {
    let text = std::fs::read_to_string(dir.join(knob.file_name())).unwrap_or_default();
    let prefix = format!("{dev} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok())).unwrap_or(0)
}

/// The low-rate tenant's IOPS in the stop test.
const SLOW_RATE: u64 = 300;

/// The agent stopped for 10 s, then continued, with one tenant saturating and one at a low rate:
/// each limit it writes when it resumes is within twice the one before it (no budget built up over
/// the gap), its status goes on, and SIGTERM restores everything.
#[test]
fn stopped_for_10_s_then_continued_writes_no_burst_of_stale_limits() {
    let test = "stopped_for_10_s_then_continued_writes_no_burst_of_stale_limits";
    let Some(scene) = Scene::new(test, "sigstop", &[100, 100], 100) else { return };
    let Scene { rig, before, .. } = &scene;
    let _readers = [rig.fio(0, 16, &[]), rig.fio(1, 4, &[&format!("--rate_iops={SLOW_RATE}")])];
    let state = tempfile::tempdir().unwrap();
    let mut agent = scene.spawn(state.path(), "agent.log");
    wait_for_limits(rig, before);
    let dirs = [rig.cgroups[0].path().to_path_buf(), rig.cgroups[1].path().to_path_buf()];
    // No limit (0) counts as the largest.
    let limits = || dirs.clone().map(|d| Some(limit_of(&d, ThrottleKnob::ReadIops, rig.devnum())).filter(|&v| v != 0));
    let bound = |v: Option<u64>| v.unwrap_or(u64::MAX);
    std::thread::sleep(Duration::from_secs(2));
    let periods = Status::read(state.path()).unwrap().periods;
    agent.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(10));
    let stopped = limits();
    agent.signal(libc::SIGCONT);
    let resumed = Instant::now();
    let mut written = vec![Vec::new(), Vec::new()];
    while resumed.elapsed() < Duration::from_secs(1) {
        let now = limits();
        for i in 0..2 {
            if written[i].last().copied().unwrap_or(stopped[i]) != now[i] {
                written[i].push(now[i]);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("read IOPS limits: in force while stopped {stopped:?}; written in the second after it {written:?}");
    // A burst of stale limits would be the gap's budget: 10 s of a share of the device, a jump of
    // tens of times the limit before — tens of thousands of IOPS for the 300-IOPS donor. Each limit
    // written is bounded at twice the one before it (the first: the one in force while stopped), or
    // for the donor five times its rate. What may grow is vrate, still climbing here while the
    // saturating tenant is held by its limit and the device keeps up: at most 16% a period (the
    // kernel's largest step), 8% a period measured (37400 to 75200 in the second after the stop,
    // which a bound on the largest limit before the stop failed in CI). The donor's limit before is
    // a steady 1.5 × what it does (its headroom, 453 here), and the first period after the stop is
    // planned from the gap's mean: 897–915 measured.
    let floor = [0, 5 * SLOW_RATE];
    for i in 0..2 {
        let mut previous = bound(stopped[i]);
        for &limit in &written[i] {
            assert!(
                bound(limit) <= previous.saturating_mul(2).max(floor[i]),
                "cgroup {i}: {:?} after the stop, {:?} while stopped",
                written[i],
                stopped[i]
            );
            previous = bound(limit);
        }
    }
    let status = Status::read(state.path()).unwrap();
    assert!(status.periods > periods && status.periods < periods + 20, "{} then {}", periods, status.periods);
    assert!(agent.wait(Duration::ZERO).is_none(), "runs on: {}", agent.log());
    assert!(agent.terminate().success(), "{}", agent.log());
    assert!(agent.log().contains(", 0 changed by others"), "{}", agent.log());
    assert_eq!(rig.snapshot(), *before);
}

// ---- the device goes away ----

/// The device detached while the agent controls it; the kernel gives its number to another device
/// (when it can) and the same file comes back at another number. The agent runs on, says once that
/// the device is gone, restores what it wrote for it, and writes nothing more for either number.
#[test]
fn the_device_detached_and_back_at_another_number() {
    let test = "the_device_detached_and_back_at_another_number";
    let Some(scene) = Scene::new(test, "detach", &[200, 100], 100) else { return };
    // The rig's device goes: the scene taken apart, its parts dropped in the order they were made.
    let Scene { _serial, rig, before, dir, config } = scene;
    let readers = [rig.fio(0, 16, &[]), rig.fio(1, 16, &[])];
    let state = tempfile::tempdir().unwrap();
    let mut agent = spawn_agent(&config, state.path(), &dir.path().join("agent.log"));
    wait_for_limits(&rig, &before);
    let (root, parent, old) = (rig.root.clone(), rig.parent(), rig.devnum());
    let Rig { cgroups, dev, file, .. } = rig;
    drop(readers); // they hold the device open: it is detached when the last opener closes it
    drop(dev);
    // Another device at the old number, if the kernel gives it out again now.
    let other = tempfile::NamedTempFile::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    other.as_file().set_len(64 << 20).unwrap();
    let mut taken = Vec::new();
    while taken.len() < 4 && !taken.iter().any(|d: &LoopDevice| d.dev() == old) {
        taken.push(LoopDevice::attach(other.path(), false).unwrap());
    }
    taken.retain(|d| d.dev() == old);
    // The same file back, at another number.
    let again = LoopDevice::attach(file.path(), true).unwrap();
    eprintln!(
        "{old} detached; now {}; the file back at {}",
        if taken.is_empty() { "unused".to_string() } else { "another device".to_string() },
        again.dev()
    );
    let gone = wait_for(Duration::from_secs(5), || agent.log().contains("gone"));
    let log = agent.log();
    eprintln!("{log}");
    assert!(gone.is_some(), "the agent says the device is gone: {log}");
    assert_eq!(log.lines().filter(|l| l.contains("gone")).count(), 1, "once: {log}");
    assert_eq!(snapshot_at(&root, &parent), before, "what it wrote for {old} restored");
    // Readers on both devices now: the agent writes nothing for either.
    let mut readers: Vec<KillOnDrop> = cgroups.iter().map(|cg| fio_in(cg, again.path(), 16, &[])).collect();
    if let Some(d) = taken.first() {
        readers.extend(cgroups.iter().map(|cg| fio_in(cg, d.path(), 16, &[])));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(snapshot_at(&root, &parent), before, "no limit for {old} or {}", again.dev());
    assert!(agent.wait(Duration::ZERO).is_none(), "the agent runs on: {}", agent.log());
    let status = Status::read(state.path()).unwrap();
    assert!(status.devices[0].groups.iter().all(|g| g.state == "device gone"), "{status}");
    drop(readers);
    assert!(agent.terminate().success(), "{}", agent.log());
    assert_eq!(snapshot_at(&root, &parent), before);
}

// ---- cgroups removed ----

/// The snapshot of `rig` restricted to files that still exist (cgroups the test removed are gone).
fn surviving(before: &BTreeMap<PathBuf, String>) -> BTreeMap<PathBuf, String> {
    before.iter().filter(|(p, _)| p.exists()).map(|(p, t)| (p.clone(), t.clone())).collect()
}

/// Cgroups removed one by one at random moments while the agent plans every 20 ms, some of them
/// with IO: a removal lands between reading a cgroup's counters and writing its limits. The agent
/// runs on without an error, forgets them, and restores the others when stopped.
#[test]
fn cgroups_removed_while_the_agent_plans_them() {
    let test = "cgroups_removed_while_the_agent_plans_them";
    let Some(mut scene) = Scene::new(test, "removed", &[], 20) else { return };
    let extra = scene.extra_cgroups(100);
    let Scene { rig, before, config, .. } = &scene;
    let mut rng = Rng::new(test);
    let _readers = scene.readers();
    let mut extra: Vec<(BlkioCgroup, Option<KillOnDrop>)> = extra
        .into_iter()
        .enumerate()
        .map(|(i, cg)| {
            let reader = (i % 5 == 0).then(|| fio_in(&cg, rig.dev.path(), 1, &["--rate_iops=100"]));
            (cg, reader)
        })
        .collect();
    let text = format!(
        "period_ms = 20\n[[devices]]\npath = \"{}\"\nmodel = \"{MODEL}\"\n[[groups]]\ncgroup = \"{}/*\"\n",
        rig.dev.path().display(),
        rig.parent()
    );
    std::fs::write(config, text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut agent = scene.spawn(state.path(), "agent.log");
    let groups = || Status::read(state.path()).map_or(0, |s| s.devices[0].groups.len());
    assert!(wait_for(Duration::from_secs(15), || groups() == 102).is_some(), "tracked: {}", groups());
    wait_for_limits(rig, before);
    while !extra.is_empty() {
        let (cg, reader) = extra.swap_remove(rng.below(extra.len() as u64) as usize);
        drop(reader);
        cg.remove().unwrap();
        std::thread::sleep(Duration::from_micros(rng.below(40_000)));
    }
    assert!(wait_for(Duration::from_secs(5), || groups() == 2).is_some(), "forgotten: {} left", groups());
    assert!(agent.wait(Duration::ZERO).is_none(), "the agent runs on: {}", agent.log());
    assert!(agent.terminate().success(), "{}", agent.log());
    let log = agent.log();
    assert!(log.contains(", 0 changed by others"), "{log}");
    assert!(agent.complaints().is_empty(), "no error: {log}");
    assert_eq!(rig.snapshot(), surviving(before));
}

/// A thousand cgroups the agent tracks removed at once: it runs on, forgets them within a few
/// periods (status and state file), and restores the others when stopped.
#[test]
fn a_thousand_cgroups_removed_at_once() {
    let test = "a_thousand_cgroups_removed_at_once";
    let Some(mut scene) = Scene::new(test, "thousand", &[], 100) else { return };
    let extra = scene.extra_cgroups(1000);
    let Scene { rig, before, config, .. } = &scene;
    let _readers = scene.readers();
    config_with_pattern(rig, config, &format!("{}/*", rig.parent()));
    let state = tempfile::tempdir().unwrap();
    let mut agent = scene.spawn(state.path(), "agent.log");
    let groups = || Status::read(state.path()).map_or(0, |s| s.devices[0].groups.len());
    assert!(wait_for(Duration::from_secs(30), || groups() == 1002).is_some(), "tracked: {}", groups());
    wait_for_limits(rig, before);
    let start = Instant::now();
    std::thread::scope(|s| {
        let mut extra = extra;
        let quarter = extra.len() / 4;
        for _ in 0..4 {
            let part: Vec<BlkioCgroup> = extra.drain(..quarter.min(extra.len())).collect();
            s.spawn(move || part.into_iter().for_each(|cg| cg.remove().unwrap()));
        }
    });
    eprintln!("1000 cgroups removed in {:?}", start.elapsed());
    let forgotten = wait_for(Duration::from_secs(10), || groups() == 2);
    eprintln!("the agent's status lists the 2 left {forgotten:?} after");
    assert!(forgotten.is_some(), "{} left", groups());
    assert!(agent.wait(Duration::ZERO).is_none(), "the agent runs on: {}", agent.log());
    assert!(agent.terminate().success(), "{}", agent.log());
    let log = agent.log();
    assert!(log.contains(", 0 changed by others"), "{log}");
    assert!(agent.complaints().is_empty(), "no error: {log}");
    assert_eq!(rig.snapshot(), surviving(before));
}
