//! cgroup v2 on this host, for real (root only): the unified hierarchy is mounted but has no `io`
//! controller (blkio is bound to v1), so what can be checked here is the cgroup's life — create,
//! spawn into, read and write files, remove — and the one-line errors for what v2 lacks here. The
//! `io` files themselves and the kernel's IOCost are exercised in the lab guest
//! (`crates/cli/tests/lab.rs`).

use std::process::{Command, Stdio};

use ioshare_host::{Capabilities, Cgroup2, DevNum, Error, KernelIoCost};
use ioshare_testkit::{skip_unless_root, KillOnDrop};

/// Whether this host's v2 hierarchy lacks `io` (the situation these tests are about).
fn v2_without_io(test: &str) -> bool {
    let caps = Capabilities::probe();
    if caps.cgroup_v2.is_none() || caps.io_v2() {
        eprintln!("skipping {test}: needs a cgroup v2 hierarchy without the io controller (this host's setup)");
        return false;
    }
    true
}

#[test]
fn a_v2_cgroup_holds_a_process_and_is_removed_with_its_parent() {
    let test = "a_v2_cgroup_holds_a_process_and_is_removed_with_its_parent";
    if skip_unless_root(test) || !v2_without_io(test) {
        return;
    }
    let parent = format!("ioshare-host-test-{}", std::process::id());
    let cg = Cgroup2::create(&format!("{parent}/tenant"), &[]).unwrap();
    let mut sleep = Command::new("sleep");
    sleep.arg("30").stdout(Stdio::null());
    let child = KillOnDrop(cg.spawn(sleep).unwrap());
    let procs = cg.read("cgroup.procs").unwrap();
    assert_eq!(procs.trim(), child.0.id().to_string(), "the child joined before exec");
    let dir = cg.path().to_path_buf();
    let parent_dir = dir.parent().unwrap().to_path_buf();
    assert!(matches!(Cgroup2::create(&format!("{parent}/tenant"), &[]), Err(Error::CgroupExists { .. })));
    cg.remove().unwrap();
    assert!(!dir.exists() && !parent_dir.exists(), "cgroup and the parent its name created are gone");
    drop(child);
}

#[test]
fn what_v2_lacks_here_is_refused_in_one_line_and_nothing_is_left() {
    let test = "what_v2_lacks_here_is_refused_in_one_line_and_nothing_is_left";
    if skip_unless_root(test) || !v2_without_io(test) {
        return;
    }
    let name = format!("ioshare-host-test-{}-io/tenant", std::process::id());
    let err = Cgroup2::create(&name, &["io"]).unwrap_err();
    assert!(matches!(err, Error::ControllerUnavailable { ref controller, .. } if controller == "io"), "{err}");
    assert!(err.to_string().contains("cannot enable the cgroup v2 'io' controller"), "{err}");
    let root = Capabilities::probe().cgroup_v2.unwrap();
    assert!(!root.join(format!("ioshare-host-test-{}-io", std::process::id())).exists(), "nothing half-made");
    let err = KernelIoCost::enable(DevNum { major: 7, minor: 0 }, "ctrl=user", "enable=1").unwrap_err();
    assert!(matches!(err, Error::CgroupFileMissing { .. }), "{err}");
    assert!(err.to_string().contains("io.cost.model not found"), "{err}");
}
