//! The agent's memory rules for real (root only), on this host's cgroup v1 memory hierarchy and, in
//! the lab guest, on cgroup v2: the matched cgroups get their limit and the agent's OOM handling
//! (v1: `oom_kill_disable`; v2: `memory.high` below the limit, PSI trigger), a cgroup created later
//! under the same glob is picked up at the next discovery, the status lists them, every memory file
//! the guard writes is journaled in the agent's state file — so `ioshare agent revert` restores it
//! after a `kill -9` of the agent — and stopping restores everything (checked on its own, before the
//! revert case). A configuration of memory rules alone runs the agent with the guard only.

use std::path::Path;
use std::time::Duration;

use ioshare_agent::desired::config::{Config, GroupConfig};
use ioshare_agent::memory::MemoryGuard;
use ioshare_agent::{Agent, BackendChoice};
use ioshare_core::Limits;
use ioshare_host::memcg::AnyMemCgroup;
use ioshare_host::{revert_state_dir, Capabilities, Recorder};
use ioshare_memory::MemorySettings;
use ioshare_testkit::{in_lab, run_tests_in_lab, skip_unless_root};

const LIMIT: u64 = 64 << 20;

/// The first line of each file the guard changes on a group: v1 limit and `oom_control`, v2
/// `memory.max` and `memory.high`.
fn guarded(cg: &AnyMemCgroup) -> Vec<String> {
    let files: &[&str] = match cg {
        AnyMemCgroup::V1(_) => &["memory.limit_in_bytes", "memory.oom_control"],
        AnyMemCgroup::V2(_) => &["memory.max", "memory.high"],
    };
    let first = |f: &&str| std::fs::read_to_string(cg.path().join(f)).unwrap().lines().next().unwrap().to_string();
    files.iter().map(first).collect()
}

/// What [`guarded`] reads on a group the guard holds at [`LIMIT`]: v1, the limit, and the kernel's
/// killer paused; v2, the limit, and memory.high 5% below it (page-aligned).
fn guarding(v2: bool) -> Vec<String> {
    if v2 {
        vec![LIMIT.to_string(), ((LIMIT - LIMIT * 50 / 1000) / 4096 * 4096).to_string()]
    } else {
        vec![LIMIT.to_string(), "oom_kill_disable 1".to_string()]
    }
}

fn memory_rules(test: &str) {
    if skip_unless_root(test) {
        return;
    }
    let Some((root, v2)) = MemoryGuard::hierarchy() else {
        eprintln!("skipping {test}: no memory controller on this host");
        return;
    };
    let top = format!("ioshare-agent-test-{}", std::process::id());
    let first = AnyMemCgroup::create(v2, &format!("{top}/tenant-a")).unwrap();
    let rel = first.path().strip_prefix(&root).unwrap();
    let pattern = format!("{}/*", rel.parent().unwrap_or(Path::new("")).display());
    let settings = MemorySettings { priority: 4, wmark_ratio: 80, limit: Some(LIMIT), ..MemorySettings::default() };
    let config = Config {
        period: Duration::from_millis(100),
        devices: vec![],
        groups: vec![GroupConfig { cgroup: pattern, weight: 100, limits: Limits::default(), memory: Some(settings) }],
        memory_dry_run: false,
        metrics: None,
        kubernetes: None,
    };
    let state = tempfile::tempdir().unwrap();
    let roots = vec![root.clone()];
    let (mut recorder, _) = Recorder::open(state.path(), roots.clone()).unwrap();
    let before = guarded(&first);
    let want = guarding(v2);

    let mut guard = MemoryGuard::start(&config, &[], &mut recorder).unwrap().expect("a rule with memory settings");
    assert_eq!(guarded(&first), want);
    let second = AnyMemCgroup::create(v2, &format!("{top}/tenant-b")).unwrap();
    assert_eq!(guarded(&second), before, "not matched before the next discovery");
    guard.discover(&config, &[], &mut recorder).unwrap();
    assert_eq!(guarded(&second), want, "picked up at the next discovery");
    guard.poll(Duration::from_millis(10)).unwrap();
    guard.refresh();
    let lines = guard.lines();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.priority == 4 && l.limit == Some(LIMIT) && l.watermarks.is_some()));
    assert!(lines.iter().all(|l| l.pressure.is_some() == v2), "PSI shown where the hierarchy has it (v2)");

    assert_eq!(recorder.changes().len(), 4, "both files of both groups journaled: {:?}", recorder.changes());
    guard.stop().unwrap();
    for cg in [&first, &second] {
        assert_eq!(guarded(cg), before, "{} restored on stop", cg.path().display());
    }
    drop(recorder);

    // Again, and this time the agent dies: its state file (the recorder forgotten, as SIGKILL would
    // leave it) is reverted by `ioshare agent revert`.
    let killed = tempfile::tempdir().unwrap();
    let (mut recorder, _) = Recorder::open(killed.path(), roots.clone()).unwrap();
    let guard = MemoryGuard::start(&config, &[], &mut recorder).unwrap().expect("a rule with memory settings");
    for cg in [&first, &second] {
        assert_eq!(guarded(cg), want, "{} guarded again", cg.path().display());
    }
    std::mem::forget(recorder);
    let reverted = revert_state_dir(killed.path(), &roots).unwrap().expect("a state file");
    assert_eq!(reverted.restored, 4);
    for cg in [&first, &second] {
        assert_eq!(guarded(cg), before, "{} reverted", cg.path().display());
    }
    // Only now the guard (its watchdog and notifications) goes; it writes the same values back.
    drop(guard);
}

#[test]
fn memory_rules_guard_matching_cgroups_and_restore_on_stop() {
    memory_rules("memory_rules_guard_matching_cgroups_and_restore_on_stop");
}

/// On a host whose memory controller is v1: the same test in the lab guest, on cgroup v2.
#[test]
fn memory_rules_pass_on_cgroup_v2_in_the_lab_guest() {
    if in_lab() || Capabilities::probe().memory_v2() {
        return; // the guest copy, or a v2 host: the test above ran on v2 already
    }
    let Some(run) = run_tests_in_lab("memory_rules_pass_on_cgroup_v2_in_the_lab_guest", "memory_rules_", &[]) else {
        return;
    };
    assert!(run.success, "the agent's memory test failed on cgroup v2 in the lab guest");
    assert!(run.stdout.contains("test result: ok. 2 passed"), "it ran there");
    assert!(!run.stdout.contains("skipping"), "nothing skipped in the guest");
}

/// A configuration of memory rules alone (no `[[devices]]`): the agent starts with the memory guard
/// only — no device planned, backend `none` in its status — guards the matched cgroup, and its stop
/// restores every file it wrote and removes its state.
#[test]
fn a_memory_only_configuration_runs_the_guard_alone() {
    let test = "a_memory_only_configuration_runs_the_guard_alone";
    if skip_unless_root(test) {
        return;
    }
    let Some((root, v2)) = MemoryGuard::hierarchy() else {
        eprintln!("skipping {test}: no memory controller on this host");
        return;
    };
    let cg = AnyMemCgroup::create(v2, &format!("ioshare-agent-test-{}-memonly/tenant", std::process::id())).unwrap();
    let parent = cg.path().parent().unwrap().strip_prefix(&root).unwrap().display().to_string();
    let before = guarded(&cg);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.toml");
    let text = format!("[[groups]]\ncgroup = \"{parent}/*\"\nmemory = {{ priority = 4, limit = \"{LIMIT}\" }}\n");
    std::fs::write(&file, text).unwrap();
    let config = Config::load(&file).unwrap();
    let state = tempfile::tempdir().unwrap();

    let (mut agent, recovered) = Agent::start(config, BackendChoice::Auto, state.path()).unwrap();
    assert!(recovered.is_none());
    assert_eq!(guarded(&cg), guarding(v2), "guarded from the start");
    agent.discover().unwrap();
    agent.period().unwrap();
    let status = agent.status();
    assert_eq!((status.backend.as_str(), status.devices.len()), ("none", 0), "no IO control: {status}");
    assert_eq!(status.memory.len(), 1, "{status}");
    assert!(state.path().join("status.json").exists());

    let reverted = agent.stop().unwrap();
    assert_eq!(reverted.restored, 2, "both memory files: {reverted:?}");
    assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
    assert_eq!(guarded(&cg), before, "restored on stop");
    assert!(!state.path().join(ioshare_host::STATE_FILE).exists() && !state.path().join("status.json").exists());
}
