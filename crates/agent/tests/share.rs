//! The share each cgroup really gets, on real cgroup trees (root only): on this host's cgroup v1
//! `blkio` (userspace backend, a loop device scheduled by BFQ) and, in the lab guest, on cgroup v2
//! (kernel backend, the guest's NVMe disk with iocost off and on). Each tree holds every case the
//! diagnosis knows on that hierarchy; the shares are asserted against the arithmetic (within 1%), the
//! flags by kind. Everything lives below one test-named cgroup, removed on drop (processes killed
//! first), and the loop device's scheduler and the disk's iocost are restored on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use ioshare_agent::report::share::flags::FlagKind;
use ioshare_agent::report::share::{GroupShare, ShareCheck};
use ioshare_agent::{BackendChoice, Check, Config};
use ioshare_host::{BlkioCgroup, Capabilities, Cgroup2, KernelIoCost, LoopDevice};
use ioshare_testkit::{in_lab, run_tests_in_lab, skip_unless_root, KillOnDrop};

/// A process that only exists to make its cgroup active (`spawn` puts it there before it execs).
fn sleeper(spawn: impl FnOnce(Command) -> ioshare_host::Result<Child>) -> KillOnDrop {
    let mut cmd = Command::new("sleep");
    cmd.arg("600").stdout(Stdio::null());
    KillOnDrop(spawn(cmd).expect("a sleeper in its cgroup"))
}

/// The share of `cgroup` in `groups`.
fn group<'a>(groups: &'a [GroupShare], cgroup: &str) -> &'a GroupShare {
    groups.iter().find(|g| g.cgroup == cgroup).unwrap_or_else(|| panic!("no {cgroup} in {groups:#?}"))
}

fn kinds(g: &GroupShare) -> Vec<FlagKind> {
    g.flags.iter().map(|f| f.kind).collect()
}

/// `g`'s share is `top` (its first level, which depends on whatever else lives at the root) times
/// `below`, the product of its levels inside the test's cgroup, within 1%; and its levels below the
/// top are `fractions`.
fn assert_share(g: &GroupShare, below: f64, fractions: &[f64]) {
    let top = g.levels[0].fraction();
    let got: Vec<f64> = g.levels[1..].iter().map(|l| l.fraction()).collect();
    assert_eq!(got.len(), fractions.len(), "{g:#?}");
    for (got, want) in got.iter().zip(fractions) {
        assert!((got / want - 1.0).abs() < 0.01, "{}: level fraction {got} vs {want}", g.cgroup);
    }
    assert!((g.share / (top * below) - 1.0).abs() < 0.01, "{}: share {} vs {top} × {below}", g.cgroup, g.share);
}

fn write_config(dir: &Path, text: &str) -> Config {
    let file = dir.join("agent.toml");
    std::fs::write(&file, text).unwrap();
    Config::load(&file).unwrap()
}

/// The path of `p` relative to `root`, as a rule names it.
fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap().display().to_string()
}

#[test]
fn v1_tree_shares_and_flags() {
    if skip_unless_root("v1_tree_shares_and_flags") {
        return;
    }
    let caps = Capabilities::probe();
    let Some(root) = caps.blkio_v1.clone().filter(|_| caps.blk_throttle_v1 && caps.bfq) else {
        eprintln!("skipping v1_tree_shares_and_flags: needs cgroup v1 blkio with blk-throttle and BFQ");
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let backing = dir.path().join("backing");
    std::fs::write(&backing, vec![0u8; 1 << 20]).unwrap();
    let dev = LoopDevice::attach(&backing, false).unwrap();
    dev.set_scheduler("bfq").unwrap();
    let top = format!("ioshare-share-test-{}", std::process::id());
    let cg = |name: &str| BlkioCgroup::create(&format!("{top}/{name}")).unwrap();
    let (web, db, batch, _idle, only) = (cg("web"), cg("db"), cg("batch"), cg("idle"), cg("solo/only"));
    batch.set_bfq_weight(200).unwrap();
    let sleepers: Vec<KillOnDrop> = [&web, &db, &batch, &only].map(|g| sleeper(|c| g.spawn(c))).into();
    let t = rel(&root, web.path().parent().unwrap());
    // Rules: web's read cap is above what ssd_dfl reads (8932 IOPS at most), db's write cap below its
    // share of 28755 write IOPS, idle's weight beyond BFQ's 1000, only alone under solo; rule 5 also
    // matches web (and loses it: a partial overlap of the patterns, listed in the rules' notes too), 6
    // is covered by 4, 7 is nested below 2's match.
    let config = write_config(
        dir.path(),
        &format!(
            "[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\n\
             [[groups]]\ncgroup = \"{t}/web\"\nweight = 300\nlimits = \"iops-read=1000000\"\n\
             [[groups]]\ncgroup = \"{t}/db\"\nweight = 100\nlimits = \"iops-write=10\"\n\
             [[groups]]\ncgroup = \"{t}/i*\"\nweight = 5000\n\
             [[groups]]\ncgroup = \"{t}/solo/*\"\nweight = 100\n\
             [[groups]]\ncgroup = \"{t}/w?b\"\nweight = 700\n\
             [[groups]]\ncgroup = \"{t}/solo/o*\"\n\
             [[groups]]\ncgroup = \"{t}/db/*\"\n",
            dev = dev.path().display()
        ),
    );
    let report = ShareCheck::probe(Check::probe(), &config, BackendChoice::Userspace).unwrap();
    eprintln!("{report}");
    let d = &report.shares.devices[0];
    assert_eq!(d.scheduler.as_deref(), Some("bfq"));
    let groups = &d.groups;
    assert_eq!(groups.len(), 4, "web, db, idle, solo/only: {groups:#?}");
    // Inside the test's cgroup: web 300, db 100, batch 200 (its BFQ weight: no rule's), solo 100 (the
    // default) are active; idle is not, so it takes nothing from the others.
    let (web, db, idle, only) = (
        group(groups, &format!("{t}/web")),
        group(groups, &format!("{t}/db")),
        group(groups, &format!("{t}/idle")),
        group(groups, &format!("{t}/solo/only")),
    );
    assert_share(web, 300.0 / 700.0, &[300.0 / 700.0]);
    assert_share(db, 100.0 / 700.0, &[100.0 / 700.0]);
    assert_share(only, 100.0 / 700.0, &[100.0 / 700.0, 1.0]);
    assert_share(idle, 5000.0 / 5700.0, &[5000.0 / 5700.0]);
    assert!(web.active && db.active && only.active && !idle.active);
    use FlagKind::*;
    assert_eq!(kinds(web), [LimitNeverBinds, ShadowedRule, UnmanagedCompetitor], "{web:#?}");
    assert_eq!(kinds(db), [LimitBelowShare, UnmanagedCompetitor], "{db:#?}");
    assert_eq!(kinds(idle), [WeightClamped, UnmanagedCompetitor], "{idle:#?}");
    assert_eq!(kinds(only), [NoCompetition, ShadowedRule, UnmanagedCompetitor], "rule 6 also matches it: {only:#?}");
    assert!(web.flags[1].message.starts_with(&format!("rule 5 (`{t}/w?b`, weight 700) also matches it")));
    assert!(web.flags[2].message.contains(&format!("`{t}/batch`")), "{web:#?}");
    let notes: Vec<(usize, &str)> = report.shares.rules.iter().map(|n| (n.rule, n.flags[0].message.as_str())).collect();
    assert_eq!(notes.iter().map(|n| n.0).collect::<Vec<_>>(), [5, 6, 7], "{notes:?}");
    assert!(notes[0].1.starts_with(&format!("loses the cgroups rule 1 (`{t}/web`) also matches")), "{notes:?}");
    assert!(notes[1].1.contains("rule 4") && notes[2].1.contains("lies below one rule 2"), "{notes:?}");
    drop(sleepers);
}

/// cgroup v2 with the `io` controller and iocost: the lab guest (or a v2 host).
fn v2_ready(test: &str) -> Option<(PathBuf, String)> {
    if skip_unless_root(test) {
        return None;
    }
    let caps = Capabilities::probe();
    match (caps.cgroup_v2.clone().filter(|_| caps.io_v2() && caps.io_cost), std::env::var("LAB_DISK")) {
        (Some(root), Ok(disk)) => Some((root, disk)),
        _ => {
            eprintln!("skipping {test}: needs cgroup v2 with io and iocost, and the lab's data disk ($LAB_DISK)");
            None
        }
    }
}

#[test]
fn v2_tree_shares_and_flags_with_iocost_off_and_on() {
    let Some((root, disk)) = v2_ready("v2_tree_shares_and_flags_with_iocost_off_and_on") else { return };
    let dir = tempfile::tempdir().unwrap();
    let top = format!("ioshare-share-v2-{}", std::process::id());
    // on/ enables io for its children, off/ does not: x has no io.weight of its own.
    let a = Cgroup2::create(&format!("{top}/on/a"), &["io"]).unwrap();
    let b = Cgroup2::create(&format!("{top}/on/b"), &["io"]).unwrap();
    let x = Cgroup2::create(&format!("{top}/off/x"), &[]).unwrap();
    b.write("io.weight", "default 400").unwrap();
    assert!(!x.path().join("io.weight").exists(), "off/ does not give x the io controller");
    let sleepers: Vec<KillOnDrop> = [&a, &b, &x].map(|g| sleeper(|c| g.spawn(c))).into();
    let t = rel(&root, a.path().parent().unwrap().parent().unwrap());
    let config = write_config(
        dir.path(),
        &format!(
            "[[devices]]\npath = \"{disk}\"\nmodel = \"ssd_dfl\"\n\
             [[groups]]\ncgroup = \"{t}/on/a\"\nweight = 200\n[[groups]]\ncgroup = \"{t}/off/x\"\nweight = 500\n"
        ),
    );
    let check = || ShareCheck::probe(Check::probe(), &config, BackendChoice::Kernel).unwrap();
    let (on_a, off_x) = (format!("{t}/on/a"), format!("{t}/off/x"));
    use FlagKind::*;

    // iocost off (the guest's disk as booted): nothing weighs io.weight, so b's 400 is not a weight
    // either: a gets on's half (on and off at 100 each) × 200/(200 + 100).
    let off = check();
    eprintln!("{off}");
    let groups = &off.shares.devices[0].groups;
    let (ga, gx) = (group(groups, &on_a), group(groups, &off_x));
    assert_share(ga, 0.5 * 200.0 / 300.0, &[0.5, 200.0 / 300.0]);
    assert_eq!(kinds(ga), [NoWeightControl], "{ga:#?}");
    assert!(ga.flags[0].message.contains("iocost is off on"), "{ga:#?}");
    // x: off does not enable io for its children, so x's IO is off's: the path stops at off.
    assert_share(gx, 0.5, &[0.5]);
    assert_eq!(kinds(gx), [ControllerOff, NoWeightControl], "{gx:#?}");
    assert!(gx.flags[0].message.contains(&format!("{t}/off/cgroup.subtree_control")), "{gx:#?}");

    // iocost on: b's io.weight 400 counts: a gets 200/(200 + 400) of on's half.
    let dev = ioshare_host::BlockDevice::open(Path::new(&disk)).unwrap().dev();
    let model = "ctrl=user model=linear rbps=488636629 rseqiops=8932 rrandiops=8518 wbps=427891549 wseqiops=28755 wrandiops=21940";
    let iocost = KernelIoCost::enable(dev, model, "enable=1 ctrl=auto").unwrap();
    let on = check();
    eprintln!("{on}");
    let groups = &on.shares.devices[0].groups;
    let (ga, gx) = (group(groups, &on_a), group(groups, &off_x));
    assert_share(ga, 0.5 * 200.0 / 600.0, &[0.5, 200.0 / 600.0]);
    assert!(ga.flags.is_empty(), "{ga:#?}");
    assert_eq!(kinds(gx), [ControllerOff], "{gx:#?}");
    drop(iocost);
    drop(sleepers);
}

/// On a host without cgroup v2 io: boots the lab guest once and runs this binary's `v2_` tests there.
#[test]
fn v2_cases_pass_in_the_lab_guest() {
    let caps = Capabilities::probe();
    if in_lab() || (caps.io_v2() && caps.io_cost) {
        return; // the guest copy, or a v2 host: the v2 test runs directly
    }
    let Some(run) = run_tests_in_lab("v2_cases_pass_in_the_lab_guest", "v2_tree_", &[]) else { return };
    assert!(run.success, "the v2 share test failed in the lab guest");
    assert!(run.stdout.contains("test result: ok. 1 passed"), "it ran there");
    assert!(!run.stdout.contains("skipping"), "nothing skipped in the guest");
}
