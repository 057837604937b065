//! `ioshare agent status` tells a working agent from one that is not (root: a real agent on a loop
//! device, limiting a blkio cgroup): a `kill -9`ed agent is "not running: pid N exited", exit 1, and
//! `revert` restores its files, also before its parent reaped it; a stopped one (SIGSTOP) is "stale" after 5 periods and 3 s, exit 1,
//! and running again once continued (SIGCONT); SIGTERM still restores every file. Whatever fails,
//! the agent is killed and reverted, the cgroup removed and the loop device detached.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ioshare_host::{BlkioCgroup, Capabilities, LoopDevice, ProcessStat};
use ioshare_testkit::{skip_unless_root, KillOnDrop};

fn ioshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioshare")).args(args).output().expect("the binary runs")
}

/// `ioshare agent status` on `state` (JSON with `json`): exit code, stdout, stderr.
fn status(state: &Path, json: bool) -> (Option<i32>, String, String) {
    let mut args = vec!["agent", "status", "--state-dir", state.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    let out = ioshare(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `liveness` that `status --json` reports.
fn liveness(state: &Path) -> String {
    let (_, stdout, stderr) = status(state, true);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    v["liveness"].as_str().unwrap().to_string()
}

/// Polls `done` every 50 ms until it holds or `timeout` passes; whether it held.
fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

fn signal(agent: &KillOnDrop, sig: i32) {
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    unsafe { libc::kill(agent.0.id() as libc::pid_t, sig) };
}

/// A loop device, a blkio cgroup with a fixed cap in the agent's configuration, a state directory.
/// Field order is drop order: the agent (killed, then reverted) before what it controls.
struct Rig {
    agent: Option<KillOnDrop>,
    cgroup: BlkioCgroup,
    _dev: LoopDevice,
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Rig {
    fn new(test: &str) -> Rig {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let backing = dir.path().join("backing");
        std::fs::File::create(&backing).unwrap().set_len(64 << 20).unwrap();
        let dev = LoopDevice::attach(&backing, true).unwrap();
        let cgroup = BlkioCgroup::create(&format!("ioshare-agent-status-{}-{test}/a", std::process::id())).unwrap();
        let root = Capabilities::probe().blkio_v1.expect("blkio mounted");
        let rel = cgroup.path().strip_prefix(&root).unwrap().to_string_lossy().into_owned();
        let config = dir.path().join("agent.toml");
        let text = format!(
            "period_ms = 100\n[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl\"\n\
             [[groups]]\ncgroup = \"{rel}\"\nlimits = \"iops-read=5000\"\n",
            dev.path().display()
        );
        std::fs::write(&config, text).unwrap();
        Rig { agent: None, cgroup, _dev: dev, dir, config }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Every blk-throttle limit file of the cgroup, with its contents.
    fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        std::fs::read_dir(self.cgroup.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("blkio.throttle.") && name.ends_with("_device")
            })
            .map(|e| (e.path(), std::fs::read_to_string(e.path()).unwrap_or_default()))
            .collect()
    }

    /// Starts the agent; returns once it wrote its status and its cap.
    fn start(&mut self, before: &BTreeMap<PathBuf, String>) {
        let log = std::fs::File::create(self.dir.path().join("agent.log")).unwrap();
        let state = self.state();
        let child = Command::new(env!("CARGO_BIN_EXE_ioshare"))
            .args(["agent", "run", "--backend", "userspace", "--config", self.config.to_str().unwrap()])
            .args(["--state-dir", state.to_str().unwrap()])
            .stderr(log)
            .spawn()
            .unwrap();
        self.agent = Some(KillOnDrop(child));
        let started =
            wait_until(Duration::from_secs(30), || state.join("status.json").exists() && self.snapshot() != *before);
        assert!(started, "no status and cap after 30 s: {}", self.log());
    }

    fn agent(&mut self) -> &mut KillOnDrop {
        self.agent.as_mut().expect("started")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            signal(&agent, libc::SIGCONT);
            let _ = agent.0.kill();
            let _ = agent.0.wait();
        }
        // Whatever a killed agent left behind (nothing after a clean stop).
        let _ = ioshare(&["agent", "revert", "--state-dir", self.state().to_str().unwrap()]);
    }
}

#[test]
fn kill_9_is_not_running_with_the_age_and_revert_restores() {
    if skip_unless_root("kill_9_is_not_running_with_the_age_and_revert_restores") {
        return;
    }
    let mut rig = Rig::new("kill9");
    let before = rig.snapshot();
    rig.start(&before);
    let state = rig.state();
    let (code, stdout, stderr) = status(&state, false);
    let pid = rig.agent().0.id();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("agent pid {pid} (userspace backend")), "{stdout}");

    // SIGKILL: no revert, the status file stays. Not reaped until the end: as a zombie the agent
    // already counts as exited, for `status` and for `revert` alike.
    rig.agent().0.kill().unwrap();
    let dead = wait_until(Duration::from_secs(10), || ProcessStat::read(pid).is_none_or(|p| p.exited()));
    assert!(dead, "the killed agent is still alive");
    let (code, stdout, stderr) = status(&state, false);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with(&format!("not running: pid {pid} exited; status last written ")), "{stdout}");
    assert!(first.contains(" s ago"), "{first}");
    assert!(stdout.contains(&format!("agent pid {pid}")), "the last figures follow: {stdout}");
    assert!(stderr.contains("not running"), "{stderr}");
    let (code, json, _) = status(&state, true);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((code, v["liveness"].as_str(), v["pid"].as_u64()), (Some(1), Some("exited"), Some(u64::from(pid))));
    assert!(v["age_s"].as_f64().is_some_and(|a| (0.0..60.0).contains(&a)), "{json}");

    assert_ne!(rig.snapshot(), before, "a killed agent leaves its cap");
    let out = ioshare(&["agent", "revert", "--state-dir", state.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(rig.snapshot(), before, "revert restored every throttle file");
    let (code, _, stderr) = status(&state, false);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no agent status"), "revert removed the status: {stderr}");
    rig.agent().0.wait().unwrap();
}

#[test]
fn sigstop_is_stale_until_sigcont_and_sigterm_still_restores() {
    if skip_unless_root("sigstop_is_stale_until_sigcont_and_sigterm_still_restores") {
        return;
    }
    let mut rig = Rig::new("sigstop");
    let before = rig.snapshot();
    rig.start(&before);
    let state = rig.state();
    assert_eq!(liveness(&state), "running");

    let stopped_at = Instant::now();
    signal(rig.agent(), libc::SIGSTOP);
    assert!(wait_until(Duration::from_secs(15), || liveness(&state) == "stale"), "never stale: {}", rig.log());
    assert!(stopped_at.elapsed() >= Duration::from_millis(2900), "stale only after 3 s (5 periods of 100 ms are less)");
    let (code, stdout, stderr) = status(&state, false);
    let pid = rig.agent().0.id();
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("stale: pid {pid} is stopped; status last written ")), "{stdout}");
    assert!(stderr.contains("stale"), "{stderr}");

    signal(rig.agent(), libc::SIGCONT);
    assert!(wait_until(Duration::from_secs(10), || liveness(&state) == "running"), "not running again: {}", rig.log());
    assert_eq!(status(&state, false).0, Some(0));

    signal(rig.agent(), libc::SIGTERM);
    let exit = rig.agent().0.wait().unwrap();
    assert!(exit.success(), "SIGTERM stops the agent cleanly: {exit}: {}", rig.log());
    assert_eq!(rig.snapshot(), before, "every throttle file restored");
    assert!(!state.join("status.json").exists() && !state.join("agent.state").exists(), "nothing left");
}
