//! Safety of the agent on real cgroups (root only): a `kill -9` leaves its limits in place and
//! `revert` (what `ioshare agent revert` calls) restores every throttle file; SIGTERM restores them
//! on the way out. The agent runs as a child process: this test binary re-executed with
//! `child_agent` as the only test and the configuration in the environment.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{wait_for, Rig};
use ioshare_agent::{Agent, BackendChoice, Config, Status};
use ioshare_testkit::skip_unless_root;
use ioshare_testkit::KillOnDrop;

const CONFIG_ENV: &str = "IOSHARE_AGENT_TEST_CONFIG";
const STATE_ENV: &str = "IOSHARE_AGENT_TEST_STATE";

/// The agent, when this binary is started by [`spawn_agent`]; does nothing in a normal test run.
#[test]
fn child_agent() {
    let (Ok(config), Ok(state)) = (std::env::var(CONFIG_ENV), std::env::var(STATE_ENV)) else { return };
    let stop = ioshare_agent::stop_on_signals();
    let config = Config::load(config.as_ref()).unwrap();
    let (agent, _) = Agent::start(config, BackendChoice::Userspace, state.as_ref()).unwrap();
    agent.run(stop).unwrap();
}

/// This test binary running only `child_agent`, as the agent on `config` with state in `state`.
fn spawn_agent(config: &std::path::Path, state: &std::path::Path) -> KillOnDrop {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_agent", "--nocapture", "--test-threads=1"])
        .env(CONFIG_ENV, config)
        .env(STATE_ENV, state);
    KillOnDrop(cmd.spawn().unwrap())
}

/// A rig with two saturating readers and an agent over them; returns once the agent wrote limits.
fn limited_rig(
    test: &str,
    state: &std::path::Path,
) -> (Rig, Vec<KillOnDrop>, KillOnDrop, std::collections::BTreeMap<std::path::PathBuf, String>) {
    let rig = Rig::new(test, &["a", "b"]);
    let before = rig.snapshot();
    let readers = vec![rig.fio(0, 16, &[]), rig.fio(1, 16, &[])];
    let config = rig.config(state, "ssd_dfl rrandiops=20000 rseqiops=20000", None, &[200, 100], 100);
    let agent = spawn_agent(&config, state);
    let changed = wait_for(Duration::from_secs(10), || rig.snapshot() != before);
    assert!(changed.is_some(), "the agent never wrote a limit");
    (rig, readers, agent, before)
}

#[test]
fn kill_9_then_revert_restores_every_throttle_file() {
    if skip_unless_root("kill_9_then_revert_restores_every_throttle_file") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let (rig, readers, mut agent, before) = limited_rig("kill9", state.path());
    agent.0.kill().unwrap(); // SIGKILL: no destructor, no revert
    agent.0.wait().unwrap();
    drop(readers);
    let left = rig.snapshot();
    assert_ne!(left, before, "a killed agent leaves its limits behind");
    let reverted = ioshare_agent::revert(state.path()).unwrap().expect("the state file names the changes");
    assert!(reverted.restored > 0 && reverted.changed_by_others.is_empty(), "{reverted:?}");
    assert_eq!(rig.snapshot(), before, "every throttle file is back to its previous value");
    assert!(Status::read(state.path()).is_err(), "no status left");
    assert!(ioshare_agent::revert(state.path()).unwrap().is_none(), "a second revert finds nothing");
}

#[test]
fn sigterm_restores_every_throttle_file() {
    if skip_unless_root("sigterm_restores_every_throttle_file") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let (rig, readers, mut agent, before) = limited_rig("sigterm", state.path());
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(agent.0.id() as i32, libc::SIGTERM) };
    let status = agent.0.wait().unwrap();
    drop(readers);
    assert!(status.success(), "the agent exits cleanly on SIGTERM: {status}");
    assert_eq!(rig.snapshot(), before, "every throttle file is back to its previous value");
    assert!(ioshare_agent::revert(state.path()).unwrap().is_none(), "nothing left to revert");
}
