//! Values someone else wrote over the agent's, for real (root only): the running agent writes them
//! back within about a second ([`RECHECK_WITHIN`]), counts them in its status, and on exit restores
//! the value from before it started — not the intruder's. The userspace backend on this host's
//! cgroup v1 blkio (a loop device); the memory guard on this host's memory hierarchy (v1 here, v2 in
//! the lab guest); the kernel backend's `io.weight` and `io.max` on cgroup v2 with iocost, which
//! only the lab guest has (its NVMe disk). The `guest_` tests run here and there: one boot of the
//! guest (`scripts/lab`) runs them all.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{run_agent_during, wait_for, Rig};
use ioshare_agent::cgroups::reapply::RECHECK_WITHIN;
use ioshare_agent::memory::MemoryGuard;
use ioshare_agent::{Agent, BackendChoice, Config, Status};
use ioshare_host::memcg::AnyMemCgroup;
use ioshare_host::{Capabilities, Cgroup2, ThrottleKnob};
use ioshare_testkit::{in_lab, run_tests_in_lab, skip_unless_root};

/// How late past [`RECHECK_WITHIN`] a write-back may come: the agent's thread on a machine with a
/// load of 10-30 on 2 cores can wait that long to be scheduled (measured: under 0.2 s at load 11).
const SCHEDULING_SLACK: Duration = Duration::from_secs(1);

/// Time allowed for the agent's start to have written its values (one discovery and a period; a
/// loaded machine may take seconds to schedule the thread).
const STARTED_WITHIN: Duration = Duration::from_secs(10);

/// Overwrites `file` with `intruder` once the agent has written `ours` to it, then waits for `ours`
/// to be back; asserts it came back within the bound and that the status counted it.
fn overwrite_and_wait(file: &Path, ours: &str, intruder: &str, state: &Path) {
    let read = || std::fs::read_to_string(file).unwrap();
    let has = |text: &str, value: &str| text.lines().any(|l| l.trim() == value);
    assert!(wait_for(STARTED_WITHIN, || has(&read(), ours)).is_some(), "the agent never wrote {ours}: {}", read());
    std::fs::write(file, intruder).unwrap();
    let overwritten = Instant::now();
    let back = wait_for(RECHECK_WITHIN + SCHEDULING_SLACK + Duration::from_secs(5), || has(&read(), ours));
    let took = back.map(|_| overwritten.elapsed());
    eprintln!("{}: {intruder} written over {ours}; written back after {took:?}", file.display());
    let took = took.unwrap_or_else(|| panic!("never written back: {}", read()));
    assert!(took <= RECHECK_WITHIN + SCHEDULING_SLACK, "written back after {took:?}");
    // The status is written each period: it counts the write-back at the latest one period later.
    let counted = wait_for(STARTED_WITHIN, || Status::read(state).is_ok_and(|s| s.overwritten >= 1));
    assert!(counted.is_some(), "the status does not count it: {:?}", Status::read(state).map(|s| s.overwritten));
}

/// The userspace backend, cgroup v1 blkio: a fixed read cap of 500 IOPS lifted by someone else
/// is written back; stopping restores the throttle files as they were before the agent.
#[test]
fn the_userspace_backend_writes_back_an_overwritten_limit() {
    if skip_unless_root("the_userspace_backend_writes_back_an_overwritten_limit") {
        return;
    }
    let rig = Rig::new("reapply", &["a"]);
    let state = tempfile::tempdir().unwrap();
    let path = rig.config(state.path(), "ssd_dfl", None, &[100], 100);
    let text = std::fs::read_to_string(&path).unwrap() + "limits = \"iops-read=500\"\n";
    std::fs::write(&path, text).unwrap();
    let before = rig.snapshot();
    let (agent, _) = Agent::start(Config::load(&path).unwrap(), BackendChoice::Userspace, state.path()).unwrap();
    let file = rig.cgroups[0].path().join(ThrottleKnob::ReadIops.file_name());
    let dev = rig.devnum();
    run_agent_during(agent, || overwrite_and_wait(&file, &format!("{dev} 500"), &format!("{dev} 0"), state.path()));
    assert_eq!(rig.snapshot(), before, "stopping restored the files as before the agent, not the intruder's");
}

/// The memory guard: a limit raised by someone else is written back; stopping restores the limit
/// from before the agent.
#[test]
fn guest_memory_limit_is_written_back() {
    let test = "guest_memory_limit_is_written_back";
    if skip_unless_root(test) {
        return;
    }
    let Some((root, v2)) = MemoryGuard::hierarchy() else {
        eprintln!("skipping {test}: no memory controller on this host");
        return;
    };
    const LIMIT: u64 = 64 << 20;
    let cg = AnyMemCgroup::create(v2, &format!("ioshare-agent-test-{}-reapply/tenant", std::process::id())).unwrap();
    let parent = cg.path().parent().unwrap().strip_prefix(&root).unwrap().display().to_string();
    let file = cg.path().join(if v2 { "memory.max" } else { "memory.limit_in_bytes" });
    let before = std::fs::read_to_string(&file).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    let text = format!("[[groups]]\ncgroup = \"{parent}/*\"\nmemory = {{ priority = 4, limit = \"{LIMIT}\" }}\n");
    std::fs::write(&path, text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let (agent, _) = Agent::start(Config::load(&path).unwrap(), BackendChoice::Auto, state.path()).unwrap();
    run_agent_during(agent, || overwrite_and_wait(&file, &LIMIT.to_string(), &(2 * LIMIT).to_string(), state.path()));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before, "the limit from before the agent");
}

/// The kernel backend on cgroup v2 with iocost (the lab guest's disk): a weight and a write cap
/// someone else changed are written back; stopping leaves both files as before the agent.
#[test]
fn guest_kernel_backend_writes_back_io_weight_and_io_max() {
    let test = "guest_kernel_backend_writes_back_io_weight_and_io_max";
    if skip_unless_root(test) {
        return;
    }
    let caps = Capabilities::probe();
    let (Some(root), Ok(disk)) =
        (caps.cgroup_v2.clone().filter(|_| caps.io_v2() && caps.io_cost), std::env::var("LAB_DISK"))
    else {
        eprintln!("skipping {test}: needs cgroup v2 with io and iocost, and the lab's data disk ($LAB_DISK)");
        return;
    };
    let web = Cgroup2::create(&format!("ioshare-agent-test-{}-reapply/web", std::process::id()), &["io"]).unwrap();
    let rel = web.path().strip_prefix(&root).unwrap().display().to_string();
    let dev = ioshare_host::BlockDevice::open(Path::new(&disk)).unwrap().dev();
    let read = |f: &str| std::fs::read_to_string(web.path().join(f)).unwrap();
    let before = (read("io.weight"), read("io.max"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    let text = format!(
        "[[devices]]\npath = \"{disk}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"{rel}\"\nweight = 300\nlimits = \"iops-write=2000\"\n"
    );
    std::fs::write(&path, text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let (agent, _) = Agent::start(Config::load(&path).unwrap(), BackendChoice::Kernel, state.path()).unwrap();
    run_agent_during(agent, || {
        overwrite_and_wait(&web.path().join("io.weight"), &format!("{dev} 300"), &format!("{dev} 100"), state.path());
        let capped = format!("{dev} rbps=max wbps=max riops=max wiops=2000");
        overwrite_and_wait(&web.path().join("io.max"), &capped, &format!("{dev} wiops=max"), state.path());
    });
    assert_eq!((read("io.weight"), read("io.max")), before, "both as before the agent");
}

/// On a host without cgroup v2 io (or v2 memory): boots the lab guest once and runs the `guest_`
/// tests there, on cgroup v2.
#[test]
fn guest_cases_pass_in_the_lab_guest() {
    let caps = Capabilities::probe();
    if in_lab() || (caps.io_v2() && caps.io_cost && caps.memory_v2()) {
        return; // the guest copy, or a v2 host: the tests ran here already
    }
    let Some(run) = run_tests_in_lab("guest_cases_pass_in_the_lab_guest", "guest_", &[]) else { return };
    assert!(run.success, "the write-back tests failed on cgroup v2 in the lab guest: {}", run.stdout);
    assert!(run.stdout.contains("test result: ok. 3 passed"), "they ran there: {}", run.stdout);
    assert!(!run.stdout.contains("skipping"), "nothing skipped in the guest: {}", run.stdout);
}
