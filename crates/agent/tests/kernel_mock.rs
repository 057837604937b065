//! The kernel backend against a directory tree with cgroup v2's file layout. A MOCK: this host has
//! no cgroup v2 `io` controller, so the files are plain files (a write replaces the whole file, where
//! the kernel would merge one device's line). It checks what the agent writes where, discovery of a
//! cgroup created later, and revert; the lab's cgroup-v2 guest (scripts/lab) is where it will run
//! for real.

use std::path::Path;

use ioshare_agent::{Agent, Backend, Config, Flavor, Hierarchy};

/// A whole block device of this host (configuration validation resolves devices for real).
fn some_device() -> String {
    let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
    std::fs::read_to_string(entry.path().join("dev")).unwrap().trim().to_string()
}

/// A v2 cgroup directory with the `io` files a fresh cgroup has.
fn cgroup(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("io.weight"), "default 100\n").unwrap();
    std::fs::write(dir.join("io.max"), "").unwrap();
    std::fs::write(dir.join("io.stat"), "").unwrap();
}

#[test]
fn kernel_backend_writes_model_qos_weights_and_caps_then_reverts() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("io.cost.model"), "").unwrap();
    std::fs::write(root.path().join("io.cost.qos"), "").unwrap();
    cgroup(&root.path().join("tenants/web"));
    let dev = some_device();
    let text = format!(
        "[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\nqos = \"rpct=95 rlat=5000 wpct=95 wlat=5000 min=50 max=150\"\n\
         [[groups]]\ncgroup = \"tenants/*\"\nweight = 300\nlimits = \"iops-write=2000\"\n"
    );
    let config = Config::parse(&text, Path::new("agent.toml")).unwrap();
    let hierarchy = Hierarchy { flavor: Flavor::V2, root: root.path().to_path_buf() };
    let (mut agent, recovered) =
        Agent::start_in(config, Backend::Kernel, hierarchy, state.path(), Path::new("/sys/block")).unwrap();
    assert!(recovered.is_none());
    let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
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
    cgroup(&root.path().join("tenants/db"));
    agent.discover().unwrap();
    assert_eq!(read("tenants/db/io.weight"), format!("{dev} 300"));
    assert_eq!(agent.status().devices[0].groups.len(), 2);
    // The status carries each cgroup's share (from the first period on): db has done IO, so web gets
    // 300 / (300 + 300) under the iocost the agent switched on, and its write cap of 2000 IOPS is below
    // half of ssd_dfl's 28755.
    std::fs::write(root.path().join("tenants/db/io.stat"), format!("{dev} rbytes=4096 wbytes=0 rios=1 wios=0\n"))
        .unwrap();
    agent.period().unwrap();
    let shares = agent.status().shares.expect("shares after a period");
    assert_eq!(shares.devices[0].weigher, ioshare_agent::share::Weigher::Iocost);
    let web = shares.devices[0].groups.iter().find(|g| g.cgroup == "tenants/web").unwrap();
    assert!((web.share - 0.5).abs() < 1e-9, "{web:?}");
    let kinds: Vec<_> = web.flags.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [ioshare_agent::share::flags::FlagKind::LimitBelowShare], "{web:?}");
    // One vanishes: not an error.
    std::fs::remove_dir_all(root.path().join("tenants/db")).unwrap();
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
    assert!(!state.path().join(ioshare_host::STATE_FILE).exists());
}

#[test]
fn a_failed_apply_leaves_nothing_applied() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("io.cost.model"), "").unwrap();
    // io.cost.qos is a directory: writing it fails after io.cost.model was written.
    std::fs::create_dir(root.path().join("io.cost.qos")).unwrap();
    let text = format!("[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"x\"\n", some_device());
    let config = Config::parse(&text, Path::new("agent.toml")).unwrap();
    let hierarchy = Hierarchy { flavor: Flavor::V2, root: root.path().to_path_buf() };
    let err = Agent::start_in(config, Backend::Kernel, hierarchy, state.path(), Path::new("/sys/block")).unwrap_err();
    eprintln!("{err}");
    let model = std::fs::read_to_string(root.path().join("io.cost.model")).unwrap();
    assert!(model.ends_with("ctrl=auto"), "io.cost.model was restored: {model:?}");
    assert!(!state.path().join(ioshare_host::STATE_FILE).exists());
}

/// The userspace backend over cgroup v2 files (io.stat in, io.max out), same mock caveat: counters
/// are written by the test, limits land in plain files.
#[test]
fn userspace_backend_over_v2_files_splits_by_weight() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let dev = some_device();
    for g in ["a", "b"] {
        cgroup(&root.path().join(g));
    }
    let text = format!(
        "[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\n[[groups]]\ncgroup = \"a\"\nweight = 200\n[[groups]]\ncgroup = \"b\"\n"
    );
    let config = Config::parse(&text, Path::new("agent.toml")).unwrap();
    let hierarchy = Hierarchy { flavor: Flavor::V2, root: root.path().to_path_buf() };
    let (mut agent, _) =
        Agent::start_in(config, Backend::Userspace, hierarchy, state.path(), Path::new("/sys/block")).unwrap();
    let stat = |g: &str, rios: u64| {
        let line = format!("{dev} rbytes={} wbytes=0 rios={rios} wios=0 dbytes=0 dios=0\n", rios * 4096);
        std::fs::write(root.path().join(g).join("io.stat"), line).unwrap();
    };
    stat("a", 100);
    stat("b", 100);
    agent.period().unwrap(); // first look: counters so far are history, not charged
    let riops = |g: &str| -> u64 {
        let text = std::fs::read_to_string(root.path().join(g).join("io.max")).unwrap();
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
