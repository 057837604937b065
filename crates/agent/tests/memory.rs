//! The agent's memory rules on this host's cgroup v1 memory hierarchy (root only): the matched
//! cgroups get their limit and the agent's OOM handling, a cgroup created later under the same glob
//! is picked up at the next discovery, the status lists them, and stopping restores everything.
//! Every memory file the guard writes is journaled in the agent's state file, so `ioshare agent
//! revert` restores it after a `kill -9` of the agent.

use std::path::Path;
use std::time::Duration;

use ioshare_agent::config::{Config, GroupConfig};
use ioshare_agent::memory::MemoryGuard;
use ioshare_core::Limits;
use ioshare_host::{revert_state_dir, skip_unless_root, Capabilities, MemCgroup, Recorder};
use ioshare_memory::MemorySettings;

#[test]
fn memory_rules_guard_matching_cgroups_and_restore_on_stop() {
    if skip_unless_root("memory_rules_guard_matching_cgroups_and_restore_on_stop") {
        return;
    }
    let caps = Capabilities::probe();
    let root = caps.v1_mounts.iter().find(|(c, _)| c == "memory").expect("a v1 memory hierarchy").1.clone();
    let top = format!("ioshare-agent-test-{}", std::process::id());
    let first = MemCgroup::create(&format!("{top}/tenant-a")).unwrap();
    let rel = |cg: &MemCgroup| cg.memcg().path().strip_prefix(&root).unwrap().to_string_lossy().into_owned();
    let pattern = format!("{}/*", Path::new(&rel(&first)).parent().unwrap().display());
    const LIMIT: u64 = 64 << 20;
    let settings = MemorySettings { priority: 4, wmark_ratio: 80, limit: Some(LIMIT), ..MemorySettings::default() };
    let config = Config {
        period: Duration::from_millis(100),
        devices: vec![],
        groups: vec![GroupConfig { cgroup: pattern, weight: 100, limits: Limits::default(), memory: Some(settings) }],
        memory_dry_run: false,
    };
    let state = tempfile::tempdir().unwrap();
    let roots = vec![root.clone()];
    let (mut recorder, _) = Recorder::open(state.path(), roots.clone()).unwrap();
    let before = first.memcg().limit().unwrap();

    let mut guard = MemoryGuard::start(&config, &mut recorder).unwrap().expect("a rule with memory settings");
    let guarded = |cg: &MemCgroup| {
        let m = cg.memcg();
        (m.limit().unwrap(), m.oom_control().unwrap().oom_kill_disable)
    };
    assert_eq!(guarded(&first), (LIMIT, true));
    let second = MemCgroup::create(&format!("{top}/tenant-b")).unwrap();
    assert_eq!(guarded(&second).0, before, "not matched before the next discovery");
    guard.discover(&config, &mut recorder).unwrap();
    assert_eq!(guarded(&second), (LIMIT, true), "picked up at the next discovery");
    guard.poll(Duration::from_millis(10)).unwrap();
    guard.refresh();
    let lines = guard.lines();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.priority == 4 && l.limit == Some(LIMIT) && l.watermarks.is_some()));

    // Limit and oom_kill_disable of both groups are in the journal; a killed agent's state file
    // (the recorder forgotten, as SIGKILL would) is reverted by `ioshare agent revert`.
    assert_eq!(recorder.changes().len(), 4, "{:?}", recorder.changes());
    std::mem::forget(recorder);
    let reverted = revert_state_dir(state.path(), &roots).unwrap().expect("a state file");
    assert_eq!(reverted.restored, 4);
    for cg in [&first, &second] {
        assert_eq!(guarded(cg), (before, false), "{} reverted", cg.memcg().path().display());
    }
    guard.stop().unwrap();
    for cg in [&first, &second] {
        assert_eq!(guarded(cg), (before, false), "{} restored", cg.memcg().path().display());
    }
}
