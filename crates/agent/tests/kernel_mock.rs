//! The kernel backend against a directory tree with cgroup v2's file layout. A MOCK: this host has
//! no cgroup v2 `io` controller, so the files are plain files (a write replaces the whole file, where
//! the kernel would merge one device's line). It checks what the agent writes where, discovery of a
//! cgroup created later, and revert; the lab's cgroup-v2 guest (scripts/lab) is where it will run
//! for real.

mod common;

use common::v2_mock::V2Tree;
use ioshare_agent::BackendKind;

/// A v2 mock with empty `io.cost.model`/`io.cost.qos` files and one cgroup, `tenants/web`.
fn tree_with_web() -> V2Tree {
    let tree = V2Tree::new();
    std::fs::write(tree.path("io.cost.model"), "").unwrap();
    std::fs::write(tree.path("io.cost.qos"), "").unwrap();
    tree.cgroup("tenants/web");
    tree
}

#[test]
fn kernel_backend_writes_model_qos_weights_and_caps_then_reverts() {
    let tree = tree_with_web();
    let dev = &tree.dev;
    let text = format!(
        "[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\nqos = \"rpct=95 rlat=5000 wpct=95 wlat=5000 min=50 max=150\"\n\
         [[groups]]\ncgroup = \"tenants/*\"\nweight = 300\nlimits = \"iops-write=2000\"\n"
    );
    let (mut agent, recovered) = tree.start(&text, BackendKind::Kernel).unwrap();
    assert!(recovered.is_none());
    let read = |p: &str| tree.read(p);
    assert_eq!(
        read("io.cost.model"),
        format!("{dev} ctrl=user model=linear rbps=488636629 rseqiops=8932 rrandiops=8518 wbps=427891549 wseqiops=28755 wrandiops=21940")
    );
    assert_eq!(
        read("io.cost.qos"),
        format!("{dev} enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00")
    );
    assert_eq!(read("tenants/web/io.weight"), format!("{dev} 300"));
    assert_eq!(read("tenants/web/io.max"), format!("{dev} rbps=max wbps=max riops=max wiops=2000"));

    // A container starts: the next discovery applies the rule to it.
    tree.cgroup("tenants/db");
    agent.discover().unwrap();
    assert_eq!(read("tenants/db/io.weight"), format!("{dev} 300"));
    assert_eq!(agent.status().devices[0].groups.len(), 2);
    // The status carries each cgroup's share (from the first period on): db has done IO, so web gets
    // 300 / (300 + 300) under the iocost the agent switched on, and its write cap of 2000 IOPS is below
    // half of ssd_dfl's 28755.
    tree.reads("tenants/db", 1);
    agent.period().unwrap();
    let shares = agent.status().shares.expect("shares after a period");
    assert_eq!(shares.devices[0].weigher, ioshare_agent::report::share::Weigher::Iocost);
    let web = shares.devices[0].groups.iter().find(|g| g.cgroup == "tenants/web").unwrap();
    assert!((web.share - 0.5).abs() < 1e-9, "{web:?}");
    let kinds: Vec<_> = web.flags.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [ioshare_agent::report::share::flags::FlagKind::LimitBelowShare], "{web:?}");
    // One vanishes: not an error.
    std::fs::remove_dir_all(tree.path("tenants/db")).unwrap();
    agent.discover().unwrap();
    assert_eq!(agent.status().devices[0].groups.len(), 1);

    // Stop: every entry gets the line that restores what it held (the kernel's syntax for "as
    // before": per-device weight override removed, no io.max limit, iocost parameters back to auto).
    let reverted = agent.stop().unwrap();
    assert_eq!(reverted.vanished, 0, "the removed cgroup's two entries were forgotten when it went");
    assert_eq!(reverted.restored, 4, "io.cost.model, io.cost.qos, web's io.weight and io.max");
    assert_eq!(read("tenants/web/io.weight"), format!("{dev} default"));
    assert_eq!(read("tenants/web/io.max"), format!("{dev} rbps=max wbps=max riops=max wiops=max"));
    assert_eq!(read("io.cost.model"), format!("{dev} ctrl=auto"));
    assert!(!tree.state.path().join(ioshare_host::STATE_FILE).exists());
}

#[test]
fn a_failed_apply_leaves_nothing_applied() {
    let tree = V2Tree::new();
    std::fs::write(tree.path("io.cost.model"), "").unwrap();
    // io.cost.qos is a directory: writing it fails after io.cost.model was written.
    std::fs::create_dir(tree.path("io.cost.qos")).unwrap();
    let text = format!("[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"x\"\n", tree.dev);
    let err = tree.start(&text, BackendKind::Kernel).unwrap_err();
    eprintln!("{err}");
    let model = tree.read("io.cost.model");
    assert!(model.ends_with("ctrl=auto"), "io.cost.model was restored: {model:?}");
    assert!(!tree.state.path().join(ioshare_host::STATE_FILE).exists());
}

/// The userspace backend over cgroup v2 files (io.stat in, io.max out), same mock caveat: counters
/// are written by the test, limits land in plain files.
#[test]
fn userspace_backend_over_v2_files_splits_by_weight() {
    let tree = V2Tree::new();
    for g in ["a", "b"] {
        tree.cgroup(g);
    }
    let text = format!(
        "[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"a\"\nweight = 200\n[[groups]]\ncgroup = \"b\"\n",
        tree.dev
    );
    let (mut agent, _) = tree.start(&text, BackendKind::Userspace).unwrap();
    let stat = |g: &str, rios: u64| tree.reads(g, rios);
    stat("a", 100);
    stat("b", 100);
    agent.period().unwrap(); // first look: counters so far are history, not charged
    let riops = |g: &str| -> u64 {
        let text = tree.read(&format!("{g}/io.max"));
        text.parse::<ioshare_host::IoMax>().map_or(0, |m| m.riops.unwrap_or(0))
    };
    assert_eq!((riops("a"), riops("b")), (0, 0), "nothing charged yet: no limits");
    // A period later each used about its share of ssd_dfl's 8518 random reads per second.
    std::thread::sleep(std::time::Duration::from_millis(100));
    stat("a", 100 + 400);
    stat("b", 100 + 200);
    agent.period().unwrap();
    let (a, b) = (riops("a"), riops("b"));
    assert!(a > 0 && b > 0, "both active, both limited: {a} {b}");
    let ratio = a as f64 / b as f64;
    assert!((ratio - 2.0).abs() < 0.1, "limits follow the weights 2:1: {a} vs {b}");
    let reverted = agent.stop().unwrap();
    assert_eq!(reverted.restored, 2);
    assert_eq!(riops("a"), 0, "io.max lifted again");
}

/// A value someone else wrote over the agent's (a `daemon-reload` rewriting `io.weight`, a runtime
/// lifting `io.max`) is written back at the next look (every second: 10 periods of the default
/// 100 ms here, driven by hand), counted in the status, and the value restored at exit is still the
/// one from before the agent. Same MOCK caveat: the files are plain files; the lab's v2 guest
/// (`scripts/lab`) is where the kernel's files are.
#[test]
fn kernel_backend_writes_back_what_someone_else_overwrote() {
    let tree = tree_with_web();
    let dev = &tree.dev;
    let text = format!(
        "[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"tenants/*\"\nweight = 300\nlimits = \"iops-write=2000\"\n"
    );
    let (mut agent, _) = tree.start(&text, BackendKind::Kernel).unwrap();
    let (weight, max) = (format!("{dev} 300"), format!("{dev} rbps=max wbps=max riops=max wiops=2000"));
    assert_eq!((tree.read("tenants/web/io.weight"), tree.read("tenants/web/io.max")), (weight.clone(), max.clone()));
    std::fs::write(tree.path("tenants/web/io.weight"), format!("default 100\n{dev} 100")).unwrap();
    std::fs::write(tree.path("tenants/web/io.max"), format!("{dev} rbps=max wbps=max riops=max wiops=max")).unwrap();
    let every = ioshare_agent::cgroups::reapply::RECHECK_WITHIN.as_millis() / 100;
    let mut periods = 0;
    while tree.read("tenants/web/io.weight") != weight {
        assert!(periods < every, "not written back within {every} periods of 100 ms");
        agent.period().unwrap();
        periods += 1;
    }
    assert_eq!(tree.read("tenants/web/io.max"), max, "both files at the same look");
    assert_eq!(agent.status().overwritten, 2);
    for _ in 0..every {
        agent.period().unwrap();
    }
    assert_eq!(agent.status().overwritten, 2, "a value left alone is not counted again");
    let reverted = agent.stop().unwrap();
    assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
    assert_eq!(tree.read("tenants/web/io.weight"), format!("{dev} default"), "the value from before the agent");
    assert_eq!(tree.read("tenants/web/io.max"), format!("{dev} rbps=max wbps=max riops=max wiops=max"));
}
