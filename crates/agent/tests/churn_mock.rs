//! The agent's bookkeeping under cgroup churn, on a directory tree with cgroup v2's file layout (a
//! MOCK, as in `kernel_mock.rs`: plain files, counters written by the test; no root needed). 3 000
//! cgroups come and go, 40 alive at a time, each doing IO every period: the agent tracks the live
//! ones only, its state file never keeps an entry of a vanished one, and a period costs no more CPU
//! at the end than at the start.
//! The real thing, with fio-like readers on a loop device and the agent in its own process, is
//! `churn.rs`.

mod common;

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::time::Duration;

use common::v2_mock::V2Tree;
use ioshare_agent::BackendKind;
use ioshare_host::STATE_FILE;

/// The files the state file has entries for.
fn state_files(state: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(state.join(STATE_FILE)).unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| Some(v.get("path")?.as_str()?.to_string()))
        .collect()
}

/// CPU time this thread has used so far.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[test]
fn churned_cgroups_leave_nothing_behind_and_periods_stay_short() {
    const STEPS: usize = 300;
    const PER_STEP: usize = 10;
    const ALIVE: usize = 40;
    let tree = V2Tree::new();
    tree.cgroup("tenants/keep");
    let text =
        format!("[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"tenants/*\"\n", tree.dev);
    let (mut agent, _) = tree.start(&text, BackendKind::Userspace).unwrap();
    let mut alive: VecDeque<(String, u64)> = VecDeque::from([("keep".to_string(), 0)]);
    let mut took: Vec<Duration> = Vec::new();
    let mut created = 0;
    for _ in 0..STEPS {
        for _ in 0..PER_STEP {
            created += 1;
            let name = format!("c{created:05}");
            tree.cgroup(&format!("tenants/{name}"));
            alive.push_back((name, 0));
        }
        while alive.len() > ALIVE {
            let (name, _) = alive.remove(1).unwrap(); // the oldest but `keep`
            std::fs::remove_dir_all(tree.path(&format!("tenants/{name}"))).unwrap();
        }
        agent.discover().unwrap();
        // Nothing of a vanished cgroup in the state file once discovery saw it go.
        let files = state_files(tree.state.path());
        let stale: Vec<&String> = files.iter().filter(|f| !Path::new(f).exists()).collect();
        assert!(stale.is_empty(), "entries of vanished cgroups: {stale:?}");
        // Every live cgroup did 50 random reads since the last period.
        for (name, rios) in alive.iter_mut() {
            *rios += 50;
            tree.reads(&format!("tenants/{name}"), *rios);
        }
        let start = thread_cpu();
        agent.period().unwrap();
        took.push(thread_cpu() - start);
    }
    let status = agent.status();
    assert_eq!(status.devices[0].groups.len(), ALIVE, "the live cgroups, and only they, are tracked");
    assert!(status.devices[0].groups.iter().all(|g| g.limits[0] > 0), "every live cgroup is limited");
    // A period's work is proportional to the cgroups alive, not to all there ever were: the CPU time
    // of the cheapest of the last 30 periods (CPU time and the cheapest: neither the state file's
    // syncs nor a busy machine's preemptions count) is within twice that of 30 early ones (once 40
    // are alive), plus a millisecond. A loose bound, for what grows with every cgroup ever seen
    // (a debug build took 13 ms early and 130 ms late with a controller that kept every group;
    // the renewal itself is checked exactly by `userspace`'s unit test).
    let fastest = |r: std::ops::Range<usize>| took[r].iter().min().copied().unwrap();
    let (early, late) = (fastest(10..40), fastest(STEPS - 30..STEPS));
    eprintln!("{created} cgroups churned; CPU of the cheapest period early {early:?}, late {late:?}");
    assert!(late <= early * 2 + Duration::from_millis(1), "periods grew from {early:?} to {late:?}");
    let reverted = agent.stop().unwrap();
    assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
    assert_eq!(reverted.restored, ALIVE, "the io.max of each live cgroup, nothing else");
}
