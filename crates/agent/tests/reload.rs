//! Reload without restart on real cgroups (root only): an agent (userspace backend, this test
//! binary re-executed as `child_agent`) controls three blkio cgroups on a loop device, one of them
//! also under a memory rule; it is reloaded — through SIGHUP and the answer `ioshare agent reload`
//! waits for — with (a) a changed weight and cap, (b) a rule removed, (c) a broken file, (d) the
//! first file again. After each, every file the agent may write (the blk-throttle files of the rig
//! and the root, the memory files of the guarded cgroup) is compared with what it should hold,
//! written out from the values of the configuration and the snapshot taken before the agent.
//! No IO runs, so an idle group's limits are its caps alone: every expected value is known.
//!
//! The kernel backend's reload, and a reload that fails halfway, run against a directory tree with
//! cgroup v2's file layout (a MOCK, as in `kernel_mock.rs`: plain files, where a write replaces the
//! whole file).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{wait_for, Rig};
use ioshare_agent::daemon::reload::{request, Outcome, ANSWER_WITHIN};
use ioshare_agent::memory::MemoryGuard;
use ioshare_agent::report::logging::LogFormat;
use ioshare_agent::{Agent, BackendChoice, BackendKind, Config, Error, Flavor, Hierarchy, Status};
use ioshare_host::ThrottleKnob;
use ioshare_testkit::{skip_unless_root, KillOnDrop};

const CONFIG_ENV: &str = "IOSHARE_AGENT_TEST_CONFIG";
const STATE_ENV: &str = "IOSHARE_AGENT_TEST_STATE";
/// The child's log filter: every change at info, every limit the planner writes at trace.
const LOG_FILTER: &str = "info,ioshare_agent::backend::userspace=trace";

/// The agent, when this binary is started by [`Running::start`]; does nothing in a normal run.
#[test]
fn child_agent() {
    let (Ok(config), Ok(state)) = (std::env::var(CONFIG_ENV), std::env::var(STATE_ENV)) else { return };
    ioshare_agent::report::logging::init(Some(LOG_FILTER), LogFormat::Text).unwrap();
    let stop = ioshare_agent::stop_on_signals();
    let reload = ioshare_agent::reload_on_sighup();
    let file = PathBuf::from(config);
    let (agent, _) = Agent::start(Config::load(&file).unwrap(), BackendChoice::Userspace, state.as_ref()).unwrap();
    agent.run_reloading(stop, reload, &|| Config::load(&file)).unwrap();
}

/// The child agent, stopped with SIGTERM (so that it reverts) when dropped, killed if it hangs.
struct Running(KillOnDrop);

impl Running {
    fn start(config: &Path, state: &Path, log: &Path) -> Running {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_agent", "--nocapture", "--test-threads=1"])
            .env(CONFIG_ENV, config)
            .env(STATE_ENV, state)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap());
        Running(KillOnDrop(cmd.spawn().unwrap()))
    }

    /// SIGTERM, and whether it then exited cleanly within 10 s.
    fn stop(&mut self) -> bool {
        self.0.terminate();
        wait_for(Duration::from_secs(10), || !self.0.alive()).is_some() && self.0 .0.wait().is_ok_and(|s| s.success())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.alive() {
            self.stop();
        }
    }
}

/// Memory cgroups at the rig's cgroups' own paths in the v1 memory hierarchy (a container has the
/// same path in every hierarchy), removed on drop.
struct MemoryDirs(Vec<PathBuf>);

impl MemoryDirs {
    fn create(root: &Path, rels: &[String]) -> MemoryDirs {
        let dirs: Vec<PathBuf> = rels.iter().map(|r| root.join(r)).collect();
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        MemoryDirs(dirs)
    }
}

impl Drop for MemoryDirs {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir(d);
            if let Some(parent) = d.parent() {
                let _ = std::fs::remove_dir(parent); // the test's parent, once empty
            }
        }
    }
}

/// The memory files the guard writes on v1, with their first line.
fn memory_snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    ["memory.limit_in_bytes", "memory.oom_control"]
        .iter()
        .map(|f| {
            let path = dir.join(f);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            (path, text.lines().next().unwrap_or("").to_string())
        })
        .collect()
}

/// Limit of the memory rule of cgroup `c`.
const MEMORY_LIMIT: u64 = 256 << 20;

/// The configuration: cgroups a, b, c at `weights`, a capped at 700 write IOPS, b at `b_wbps` write
/// bytes/s, c at 500 write IOPS and — when `c` is there — under a memory rule.
fn config_text(rig: &Rig, weights: [u32; 2], b_wbps: u64, c: bool) -> String {
    let mut text = format!(
        "period_ms = 100\n[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl rrandiops=20000 rseqiops=20000\"\n",
        rig.dev.path().display()
    );
    text += &format!("[[groups]]\ncgroup = \"{}\"\nweight = {}\nlimits = \"iops-write=700\"\n", rig.rel(0), weights[0]);
    text +=
        &format!("[[groups]]\ncgroup = \"{}\"\nweight = {}\nlimits = \"bps-write={b_wbps}\"\n", rig.rel(1), weights[1]);
    if c {
        text += &format!(
            "[[groups]]\ncgroup = \"{}\"\nlimits = \"iops-write=500\"\nmemory = {{ priority = 5, limit = \"{}M\" }}\n",
            rig.rel(2),
            MEMORY_LIMIT >> 20
        );
    }
    text
}

/// The log written since `from` bytes.
fn log_since(log: &Path, from: usize) -> String {
    std::fs::read_to_string(log).unwrap()[from..].to_string()
}

fn log_len(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap().len()
}

#[test]
fn reload_applies_the_difference_restores_what_is_no_longer_wanted_and_survives_a_broken_file() {
    if skip_unless_root("reload_applies_the_difference_restores_what_is_no_longer_wanted_and_survives_a_broken_file") {
        return;
    }
    let rig = Rig::new("reload", &["a", "b", "c"]);
    let memory_root = match MemoryGuard::hierarchy() {
        Some((root, false)) => root,
        _ => panic!("this test needs the cgroup v1 memory hierarchy next to blkio"),
    };
    let _memory_dirs = MemoryDirs::create(&memory_root, &[rig.rel(2)]);
    let c_memory = memory_root.join(rig.rel(2));
    let snapshot = || {
        let mut s = rig.snapshot();
        s.extend(memory_snapshot(&c_memory));
        s
    };
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let (state, config, log) = (dir.path().join("state"), dir.path().join("agent.toml"), dir.path().join("agent.log"));
    let dev = rig.devnum();
    let throttle = |i: usize, knob: ThrottleKnob| rig.root.join(rig.rel(i)).join(knob.file_name());
    // What a file of `before` holds once the agent set `value` in it.
    let with = |mut s: BTreeMap<PathBuf, String>, sets: &[(PathBuf, String)]| {
        for (path, value) in sets {
            assert!(s.contains_key(path), "{} is in the snapshot", path.display());
            s.insert(path.clone(), value.clone());
        }
        s
    };
    let c_settings = [
        (throttle(2, ThrottleKnob::WriteIops), format!("{dev} 500\n")),
        (c_memory.join("memory.limit_in_bytes"), MEMORY_LIMIT.to_string()),
        (c_memory.join("memory.oom_control"), "oom_kill_disable 1".to_string()),
    ];
    let a_and_b = |b_wbps: u64| {
        vec![
            (throttle(0, ThrottleKnob::WriteIops), format!("{dev} 700\n")),
            (throttle(1, ThrottleKnob::WriteBps), format!("{dev} {b_wbps}\n")),
        ]
    };
    let started = with(with(before.clone(), &a_and_b(1_000_000)), &c_settings);
    let changed = with(started.clone(), &a_and_b(2_000_000));
    let removed = with(before.clone(), &a_and_b(2_000_000));
    // The snapshot once it settled on `want` (limits are written at the next period); then one more
    // period, so that the log has the lines of every write made.
    let settles_on = |want: &BTreeMap<PathBuf, String>, what: &str| {
        wait_for(Duration::from_secs(3), || snapshot() == *want);
        assert_eq!(snapshot(), *want, "{what}");
        let from = log_len(&log);
        assert!(wait_for(Duration::from_secs(3), || log_since(&log, from).contains("DEBUG period")).is_some());
    };
    let reload = |text: &str| {
        std::fs::write(&config, text).unwrap();
        request(&state, ANSWER_WITHIN).unwrap()
    };
    let weight_of = |i: usize| {
        let st = Status::read(&state).unwrap();
        st.devices[0].groups.iter().find(|g| g.cgroup == rig.rel(i)).map(|g| g.weight)
    };

    std::fs::write(&config, config_text(&rig, [100, 100], 1_000_000, true)).unwrap();
    let mut agent = Running::start(&config, &state, &log);
    assert!(wait_for(Duration::from_secs(10), || Status::read(&state).is_ok()).is_some(), "the agent started");
    settles_on(&started, "the first configuration applied");

    // (a) a's weight and b's cap changed: b's write-bps file rewritten, nothing else touched.
    let from = log_len(&log);
    let a = reload(&config_text(&rig, [300, 100], 2_000_000, true));
    assert!(a.applied && a.message.contains("0 rule(s) added, 2 changed, 0 removed"), "{a:?}");
    settles_on(&changed, "(a) b's cap changed, every other file as it was");
    assert_eq!(weight_of(0), Some(300), "a's new weight is planned with");
    let written = log_since(&log, from);
    let writes = |i: usize| {
        written
            .lines()
            .filter(|l| l.contains("limits written") && l.contains(&format!("cgroup={} ", rig.rel(i))))
            .count()
    };
    assert_eq!((writes(0), writes(1), writes(2)), (0, 1, 0), "only b's limits were written:\n{written}");

    // (b) c's rule removed: its throttle and memory files back to what they held before the agent.
    let from = log_len(&log);
    let b = reload(&config_text(&rig, [300, 100], 2_000_000, false));
    assert!(b.applied && b.message.contains("1 removed") && b.message.contains("3 setting(s) restored"), "{b:?}");
    settles_on(&removed, "(b) c restored, a and b kept");
    assert_eq!(weight_of(2), None, "c is no longer controlled");
    let released = log_since(&log, from);
    let restoring = written_lines(&released, "restoring what the agent found");
    for (path, _) in &c_settings {
        let name = format!("file={} ", path.display());
        assert!(restoring.iter().any(|l| l.contains(&name)), "{} restored: {restoring:#?}", path.display());
    }
    assert_eq!(restoring.len(), 3, "{restoring:#?}");

    // (c) a broken file: refused with its file and line, nothing changes, the agent runs on.
    let from = log_len(&log);
    let broken = config_text(&rig, [300, 100], 2_000_000, false).replace("weight = 300", "weight = 0");
    let line = broken.lines().position(|l| l == "weight = 0").unwrap() + 1;
    let c = reload(&broken);
    let want = format!("{}:{line}: weight: 0 is out of range", config.display());
    assert!(!c.applied && c.message.starts_with(&want), "{c:?}");
    let refused = log_since(&log, from);
    assert_eq!(written_lines(&refused, &want).len(), 1, "one log line names the file and line:\n{refused}");
    assert!(written_lines(&refused, "WARN").len() == 1, "{refused}");
    let periods = Status::read(&state).unwrap().periods;
    assert!(wait_for(Duration::from_secs(3), || Status::read(&state).unwrap().periods > periods + 2).is_some());
    assert!(agent.0.alive(), "the agent stays up");
    assert_eq!(snapshot(), removed, "(c) nothing changed");
    assert_eq!(weight_of(0), Some(300), "the running configuration is kept");

    // (d) the first file again: c is controlled again, b's cap back.
    let d = reload(&config_text(&rig, [100, 100], 1_000_000, true));
    assert!(d.applied && d.message.contains("1 rule(s) added"), "{d:?}");
    settles_on(&started, "(d) as at the first start");
    assert_eq!(Outcome::read(&state).unwrap().reloads, 4, "each reload answered once");

    assert!(agent.stop(), "SIGTERM stops the agent cleanly:\n{}", std::fs::read_to_string(&log).unwrap());
    assert_eq!(snapshot(), before, "stopping restored every file");
    assert!(Outcome::read(&state).is_none(), "no answer left behind");
}

/// The lines of `log` containing `what`.
fn written_lines<'a>(log: &'a str, what: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(what)).collect()
}

/// A v2 cgroup directory with the `io` files a fresh cgroup has.
fn v2_cgroup(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("io.weight"), "default 100\n").unwrap();
    std::fs::write(dir.join("io.max"), "").unwrap();
    std::fs::write(dir.join("io.stat"), "").unwrap();
}

#[test]
fn kernel_backend_reload_writes_changes_restores_the_rest_and_rolls_back_a_failed_one() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("io.cost.model"), "").unwrap();
    std::fs::write(root.path().join("io.cost.qos"), "").unwrap();
    for g in ["tenants/web", "tenants/db"] {
        v2_cgroup(&root.path().join(g));
    }
    // A cgroup whose io.weight cannot be written (a directory): a rule that matches it fails.
    std::fs::create_dir_all(root.path().join("broken/x/io.weight")).unwrap();
    let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
    let dev = std::fs::read_to_string(entry.path().join("dev")).unwrap().trim().to_string();
    let device = format!("[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\nqos = \"rpct=95 rlat=5000\"\n");
    let rule = |pattern: &str, weight: u32, limits: &str| {
        format!("[[groups]]\ncgroup = \"{pattern}\"\nweight = {weight}\nlimits = \"{limits}\"\n")
    };
    let parse = |text: String| Config::parse(&text, Path::new("agent.toml")).unwrap();
    let first = parse(device.clone() + &rule("tenants/*", 300, "iops-write=2000"));
    let hierarchy = Hierarchy { flavor: Flavor::V2, root: root.path().to_path_buf() };
    let (mut agent, _) =
        Agent::start_in(first, BackendKind::Kernel, hierarchy, state.path(), Path::new("/sys/block")).unwrap();
    let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
    let files = [
        "io.cost.model",
        "io.cost.qos",
        "tenants/web/io.weight",
        "tenants/web/io.max",
        "tenants/db/io.weight",
        "tenants/db/io.max",
    ];
    let snapshot = || files.iter().map(|f| (f.to_string(), read(f))).collect::<BTreeMap<String, String>>();
    let started = snapshot();
    assert_eq!(read("tenants/db/io.weight"), format!("{dev} 300"));

    // web alone, at another weight, same cap; a stricter latency target.
    let second = parse(device.replace("rlat=5000", "rlat=2000") + &rule("tenants/web", 500, "iops-write=2000"));
    let done = agent.reload(second).unwrap();
    assert_eq!((done.rules_added, done.rules_removed, done.devices_changed), (1, 1, 1), "{done}");
    assert_eq!(done.restored.restored, 2, "db's weight and cap: {done}");
    let mut want = started.clone();
    want.insert("tenants/web/io.weight".into(), format!("{dev} 500"));
    want.insert("tenants/db/io.weight".into(), format!("{dev} default"));
    want.insert("tenants/db/io.max".into(), format!("{dev} rbps=max wbps=max riops=max wiops=max"));
    want.insert("io.cost.qos".into(), started["io.cost.qos"].replace("rlat=5000", "rlat=2000"));
    assert_eq!(snapshot(), want, "changed values written, db restored, web's cap as it was");

    // A rule whose cgroup cannot be written: refused, and the previous configuration back.
    let third = parse(device.clone() + &rule("broken/*", 100, "iops-write=1") + &rule("tenants/web", 200, ""));
    let err = agent.reload(third).unwrap_err();
    assert!(matches!(err, Error::Reload { recovered: true, .. }), "{err}");
    assert_eq!(snapshot(), want, "the second configuration in force again");
    assert_eq!(agent.status().devices[0].groups.iter().map(|g| g.weight).collect::<Vec<_>>(), [500]);

    let reverted = agent.stop().unwrap();
    assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
    assert_eq!(read("tenants/web/io.weight"), format!("{dev} default"), "stop restores what reload kept");
    assert!(read("io.cost.qos").ends_with("ctrl=auto"), "{}", read("io.cost.qos"));
}
