//! The share each cgroup really gets: for every cgroup a rule or a pod manages, on every configured device, its
//! hierarchical share of the device when it does IO ([`tree`]: weight ÷ the weights of it and its
//! active siblings, multiplied along the path from the root, counting the cgroups no rule manages at
//! the weight the host gives them), with flags saying where a weight or a limit cannot do what the
//! configuration says ([`flags`]). `ioshare agent check --config` computes it from one look at the
//! host ([`ShareCheck`]; with a `[kubernetes]` section, after one list of the node's pods), the
//! running agent from its own per-period activity ([`watch`]) into its status. The cgroups are the
//! agent's own targets ([`crate::desired::targets`]): the rules' matches and the pods' cgroups (a pod's
//! weight from its annotations held to the policy; QoS class cgroups weigh their subtrees).

pub mod flags;
pub mod host_view;
pub mod tree;
pub mod watch;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use ioshare_host::BlockQueue;
use serde::{Deserialize, Serialize};

use self::flags::{diagnose, Case, Flag, FlagKind};
use self::host_view::{weight_file, Activity, HostView, PresentNow};
use self::tree::{Level, Levels};
use crate::cgroups::check::{BackendChoice, BackendKind, Check};
use crate::cgroups::hierarchy::{Flavor, Hierarchy};
use crate::desired::config::Config;
use crate::desired::pods::Pods;
use crate::desired::rules::overlaps;
use crate::desired::targets::{targets, CgroupSettings, Owner};
use crate::desired::tuned::Tuned;
use crate::error::Result;

/// What divides a device between cgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weigher {
    /// The agent's planner, through blk-throttle limits (userspace backend).
    Planner,
    /// Kernel iocost (kernel backend, iocost on for the device).
    Iocost,
    /// Nothing the agent's weights reach (kernel backend, iocost off).
    None,
}

impl Weigher {
    fn of(backend: BackendKind, queue: &BlockQueue) -> Weigher {
        match (backend, queue.iocost) {
            (BackendKind::Userspace, _) => Weigher::Planner,
            (BackendKind::Kernel, true) => Weigher::Iocost,
            (BackendKind::Kernel, false) => Weigher::None,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Weigher::Planner => "weighed by the agent's planner",
            Weigher::Iocost => "weighed by kernel iocost",
            Weigher::None => "weighed by nothing the agent writes",
        }
    }
}

/// One managed cgroup on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupShare {
    /// The cgroup, relative to the root.
    pub cgroup: String,
    /// The rule that manages it, counted from 1 as in the file; 0 for a pod's cgroup.
    pub rule: usize,
    /// The pod (`namespace/name[/container]`) whose cgroup it is, if a pod's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Its weight.
    pub weight: u32,
    /// Whether it does IO now.
    pub active: bool,
    /// Its share of the device when it does IO, 0..=1.
    pub share: f64,
    /// How the share comes about, from the top.
    pub levels: Vec<Level>,
    /// What may keep its weight or limits from acting.
    pub flags: Vec<Flag>,
}

/// The managed cgroups of one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceShares {
    /// Name (`loop3`).
    pub device: String,
    /// `MAJ:MIN`.
    pub dev: String,
    /// What divides it between cgroups.
    pub weigher: Weigher,
    /// Its IO scheduler.
    pub scheduler: Option<String>,
    /// Its managed cgroups.
    pub groups: Vec<GroupShare>,
}

/// A rule that loses some or all of its cgroups to another rule (see [`crate::desired::rules`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleNote {
    /// The rule, counted from 1.
    pub rule: usize,
    /// Its pattern.
    pub cgroup: String,
    /// Why.
    pub flags: Vec<Flag>,
}

/// Every managed cgroup's share on every device, and the rules that lose cgroups to others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shares {
    /// Per configured device.
    pub devices: Vec<DeviceShares>,
    /// Rules that can lose cgroups to others, whatever cgroups exist: never applying, or partly.
    pub rules: Vec<RuleNote>,
}

impl Shares {
    /// The shares on this host now, for `config` and the `pods`' targets under `backend` in
    /// `hierarchy` (activity: one look, [`PresentNow`]); `sys_block` is `/sys/block`.
    pub fn check(
        config: &Config,
        pods: &[(String, CgroupSettings)],
        backend: BackendKind,
        hierarchy: &Hierarchy,
        sys_block: &Path,
    ) -> Shares {
        Shares::build(config, pods, backend, hierarchy, sys_block, &mut PresentNow)
    }

    /// The shares with activity judged by `activity`.
    pub fn build(
        config: &Config,
        pods: &[(String, CgroupSettings)],
        backend: BackendKind,
        hierarchy: &Hierarchy,
        sys_block: &Path,
        activity: &mut dyn Activity,
    ) -> Shares {
        let all = targets(&hierarchy.root, &config.groups, pods);
        // Inner targets (QoS class cgroups) weigh their subtrees; the leaves are listed.
        let managed: BTreeMap<String, u32> = all.iter().map(|(rel, t)| (rel.clone(), t.weight)).collect();
        let found: Vec<(&String, &CgroupSettings)> = all.iter().filter(|(_, t)| !t.inner).collect();
        let v2_root = (hierarchy.flavor == Flavor::V2).then_some(hierarchy.root.as_path());
        let devices = config
            .devices
            .iter()
            .map(|device| {
                let id = &device.device;
                let queue = BlockQueue::read(sys_block, &id.name, id.dev, v2_root);
                let weights = weight_file(hierarchy.flavor, &queue);
                let mut view = HostView::new(hierarchy, id.dev, &managed, weights, &mut *activity);
                let mut levels = Levels::new(&mut view, &managed);
                let groups = found
                    .iter()
                    .map(|&(rel, target)| {
                        let path = levels.path_share(rel);
                        let case = Case {
                            rel,
                            target,
                            groups: &config.groups,
                            path: &path,
                            device,
                            queue: &queue,
                            backend,
                            hierarchy,
                        };
                        let flags = diagnose(&case, &mut levels);
                        GroupShare {
                            cgroup: rel.clone(),
                            rule: match target.owner {
                                Owner::Rule(i) => i + 1,
                                _ => 0,
                            },
                            pod: target.pod().map(ToString::to_string),
                            weight: target.weight,
                            active: levels.tree().active(rel),
                            share: path.share,
                            levels: path.levels,
                            flags,
                        }
                    })
                    .collect();
                DeviceShares {
                    device: id.name.clone(),
                    dev: id.dev.to_string(),
                    weigher: Weigher::of(backend, &queue),
                    scheduler: queue.scheduler.clone(),
                    groups,
                }
            })
            .collect();
        let mut rules: Vec<RuleNote> = Vec::new();
        for o in overlaps(&config.groups, !config.devices.is_empty()) {
            let flag = Flag { kind: FlagKind::ShadowedRule, message: o.describe(&config.groups) };
            match rules.last_mut().filter(|n| n.rule == o.rule + 1) {
                Some(note) => note.flags.push(flag),
                None => rules.push(RuleNote {
                    rule: o.rule + 1,
                    cgroup: config.groups[o.rule].cgroup.clone(),
                    flags: vec![flag],
                }),
            }
        }
        Shares { devices, rules }
    }
}

impl fmt::Display for Shares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "shares: each cgroup's part of the device when it does IO (weight / active siblings' weights, level by level)")?;
        for d in &self.devices {
            writeln!(
                f,
                "{} ({}), {}, scheduler {}",
                d.device,
                d.dev,
                d.weigher.describe(),
                d.scheduler.as_deref().unwrap_or("-")
            )?;
            writeln!(
                f,
                "  {:<32} {:>4} {:>6} {:>7} {:>6}  path (weight/active total)",
                "cgroup", "rule", "weight", "share", "active"
            )?;
            for g in &d.groups {
                let path: Vec<String> = g
                    .levels
                    .iter()
                    .map(|l| format!("{} {}/{}", l.cgroup.rsplit('/').next().unwrap_or(""), l.weight, l.active_weight))
                    .collect();
                let by = match &g.pod {
                    Some(pod) => format!("pod {pod}"),
                    None => g.rule.to_string(),
                };
                writeln!(
                    f,
                    "  {:<32} {:>4} {:>6} {:>6.1}% {:>6}  {}",
                    g.cgroup,
                    by,
                    g.weight,
                    g.share * 100.0,
                    if g.active { "yes" } else { "no" },
                    path.join(" · ")
                )?;
                for flag in &g.flags {
                    writeln!(f, "    ! {}: {}", kind_name(flag.kind), flag.message)?;
                }
            }
        }
        for r in &self.rules {
            for flag in &r.flags {
                writeln!(f, "rule {} (`{}`) ! {}: {}", r.rule, r.cgroup, kind_name(flag.kind), flag.message)?;
            }
        }
        Ok(())
    }
}

/// A flag kind as JSON spells it.
fn kind_name(kind: FlagKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// `ioshare agent check --config`: the host's capabilities and the shares a configuration gets here.
#[derive(Clone, Debug, Serialize)]
pub struct ShareCheck {
    /// What the host offers and the backend `auto` picks.
    #[serde(flatten)]
    pub check: Check,
    /// The backend diagnosed (`choice` resolved).
    pub diagnosed_backend: BackendKind,
    /// The shares under it.
    pub shares: Shares,
    /// The devices whose model and QoS a tune result gave.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tuned: Vec<TunedDevice>,
}

/// A device whose lines came from a tune result: which solution, from which file, measured when.
#[derive(Clone, Debug, Serialize)]
pub struct TunedDevice {
    /// The device's name.
    pub device: String,
    /// Where its lines came from.
    #[serde(flatten)]
    pub source: Tuned,
}

impl fmt::Display for TunedDevice {
    /// `loop3: solution isolated-bandwidth of FILE, measured 2 h ago`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let age = now.saturating_sub(self.source.measured_at);
        let ago = match age {
            a if a < 3600 => format!("{} min ago", a / 60),
            a if a < 2 * 86_400 => format!("{} h ago", a / 3600),
            a => format!("{} days ago", a / 86_400),
        };
        write!(
            f,
            "{}: solution {} of {}, measured {ago}",
            self.device,
            self.source.solution,
            self.source.file.display()
        )
    }
}

impl ShareCheck {
    /// The shares `config` gets on this host under `choice` (`Err` if that backend cannot run here).
    pub fn probe(check: Check, config: &Config, choice: BackendChoice) -> Result<ShareCheck> {
        let (backend, hierarchy) = check.select(choice)?;
        // The node's pods: one list through the API server (the running agent's start, without
        // writing anything); a source that cannot work is the check's error, in its one line.
        let pods = config.kubernetes.as_ref().map(|k| Pods::start(k, &hierarchy.root)).transpose()?;
        let pods = pods.as_ref().map_or(&[][..], Pods::targets);
        let shares = Shares::check(config, pods, backend, &hierarchy, Path::new("/sys/block"));
        let tuned = (config.devices.iter())
            .filter_map(|d| d.tuned.clone().map(|source| TunedDevice { device: d.device.name.clone(), source }))
            .collect();
        Ok(ShareCheck { check, diagnosed_backend: backend, shares, tuned })
    }
}

impl fmt::Display for ShareCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}\n", self.check)?;
        writeln!(f, "diagnosed backend:    {}", self.diagnosed_backend.name())?;
        for t in &self.tuned {
            writeln!(f, "tuned:                {t}")?;
        }
        write!(f, "{}", self.shares)
    }
}

/// On a directory tree laid out as cgroup v2 and /sys/block would be: this host has no cgroup v2 `io`
/// (the lab guest runs the same cases for real: `tests/share.rs`).
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ioshare_core::iocost::line::DevNum;
    use ioshare_core::{Limits, ModelParams};
    use ioshare_host::DiskId;

    use super::*;
    use crate::desired::config::{DeviceConfig, GroupConfig};

    const DEV: DevNum = DevNum { major: 259, minor: 0 };

    /// A v2 cgroup: `subtree` in cgroup.subtree_control, `weight` in io.weight (if any), populated or not.
    fn cgroup(dir: &Path, subtree: &str, weight: Option<u32>, populated: bool) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("cgroup.subtree_control"), subtree).unwrap();
        std::fs::write(dir.join("cgroup.events"), format!("populated {}\nfrozen 0\n", u8::from(populated))).unwrap();
        if let Some(w) = weight {
            std::fs::write(dir.join("io.weight"), format!("default {w}\n")).unwrap();
        }
    }

    fn config(rules: &[(&str, u32)]) -> Config {
        Config {
            period: Duration::from_millis(100),
            devices: vec![DeviceConfig {
                device: DiskId { dev: DEV, name: "nvme0n1".into() },
                model: ModelParams::SSD_DFL,
                qos: None,
                tuned: None,
            }],
            groups: rules
                .iter()
                .map(|&(p, w)| GroupConfig { cgroup: p.into(), weight: w, limits: Limits::default(), memory: None })
                .collect(),
            memory_dry_run: false,
            metrics: None,
            kubernetes: None,
        }
    }

    fn kinds(g: &GroupShare) -> Vec<FlagKind> {
        g.flags.iter().map(|f| f.kind).collect()
    }

    #[test]
    fn a_v2_tree_with_and_without_iocost_and_the_io_controller() {
        let (root, sys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let r = root.path();
        cgroup(r, "io memory", None, true);
        cgroup(&r.join("u"), "io", Some(100), true);
        cgroup(&r.join("u/a"), "", Some(100), true); // rule 1, weight 200
        cgroup(&r.join("u/b"), "", Some(400), true); // nobody's, io.weight 400
        cgroup(&r.join("u/c"), "", Some(900), false); // nobody's, idle
        cgroup(&r.join("t"), "memory", Some(300), true); // no io for its children
        cgroup(&r.join("t/x"), "", None, true); // rule 2
        std::fs::create_dir_all(sys.path().join("nvme0n1/queue")).unwrap();
        std::fs::create_dir_all(sys.path().join("nvme0n1/mq")).unwrap();
        std::fs::write(sys.path().join("nvme0n1/queue/scheduler"), "[none] mq-deadline\n").unwrap();
        std::fs::write(r.join("io.cost.qos"), "259:0 enable=1 ctrl=user\n").unwrap();
        let h = Hierarchy { flavor: Flavor::V2, root: r.to_path_buf() };
        let config = config(&[("u/a", 200), ("t/x", 500)]);

        let s = Shares::check(&config, &[], BackendKind::Kernel, &h, sys.path());
        let d = &s.devices[0];
        assert_eq!((d.weigher, d.scheduler.as_deref()), (Weigher::Iocost, Some("none")));
        let (x, a) = (&d.groups[0], &d.groups[1]);
        assert_eq!((a.cgroup.as_str(), a.rule, x.cgroup.as_str(), x.rule), ("u/a", 1, "t/x", 2));
        // u: 100 of t 300 + u 100; a: 200 of a 200 + b 400 (c idle): 1/4 × 1/3.
        assert!((a.share - 1.0 / 12.0).abs() < 1e-9, "{a:?}");
        assert!(a.flags.is_empty(), "{a:?}");
        // t/x: t does not give its children io, so t/x gets t's share, 300/400.
        assert!((x.share - 0.75).abs() < 1e-9, "{x:?}");
        assert_eq!(kinds(x), [FlagKind::ControllerOff]);
        let expect = format!("echo +io > {}", r.join("t/cgroup.subtree_control").display());
        assert!(x.flags[0].message.ends_with(&expect), "{x:?}");

        // iocost off: nothing weighs the agent's io.weight; b's io.weight no longer counts either.
        std::fs::write(r.join("io.cost.qos"), "259:0 enable=0 ctrl=auto\n").unwrap();
        let s = Shares::check(&config, &[], BackendKind::Kernel, &h, sys.path());
        let a = &s.devices[0].groups[1];
        assert_eq!(s.devices[0].weigher, Weigher::None);
        assert_eq!(kinds(a), [FlagKind::NoWeightControl]);
        assert!((a.share - 0.5 * 200.0 / 300.0).abs() < 1e-9, "b at the default 100: {a:?}");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["devices"][0]["groups"][1]["flags"][0]["kind"], "no_weight_control");
        assert!(json["devices"][0]["groups"][1]["share"].as_f64().is_some());
        assert!(s.to_string().contains("! no_weight_control: iocost is off on nvme0n1"), "{s}");
    }

    #[test]
    fn rules_that_lose_cgroups_are_listed_with_their_line() {
        let root = tempfile::tempdir().unwrap();
        let h = Hierarchy { flavor: Flavor::V1, root: root.path().to_path_buf() };
        let s = Shares::check(
            &config(&[("t/*", 100), ("t/web", 300), ("t/*/x", 100), ("u/a*", 100), ("u/*b", 100)]),
            &[],
            BackendKind::Userspace,
            &h,
            root.path(),
        );
        let notes: Vec<(usize, &str)> = s.rules.iter().map(|n| (n.rule, n.flags[0].message.as_str())).collect();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(notes[0].0, 2);
        assert!(notes[0].1.starts_with("never applies: rule 1 (`t/*`) comes first"), "{notes:?}");
        assert_eq!(notes[1].0, 3);
        assert!(notes[1].1.contains("lies below one rule 1 (`t/*`) matches"), "{notes:?}");
        assert_eq!(notes[2].0, 5);
        assert!(notes[2].1.starts_with("loses the cgroups rule 4 (`u/a*`) also matches, like `u/ab`"), "{notes:?}");
        assert!(s.to_string().contains("rule 2 (`t/web`) ! shadowed_rule: never applies"), "{s}");
    }

    /// The pods' cgroups join the rules' in the view: a pod at its (annotated) weight, named by its
    /// pod, and a QoS class cgroup's weight counted on the path though it is not listed.
    #[test]
    fn pods_cgroups_are_in_the_view_with_their_weights() {
        use crate::desired::targets::PodRef;
        let (root, sys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let r = root.path();
        cgroup(r, "io memory", None, true);
        cgroup(&r.join("t"), "io", Some(100), true);
        cgroup(&r.join("t/x"), "", Some(100), true); // rule 1
        cgroup(&r.join("kubepods"), "io", Some(100), true);
        cgroup(&r.join("kubepods/podg"), "", Some(100), true); // a Guaranteed pod nobody weighs
        cgroup(&r.join("kubepods/besteffort"), "io", Some(100), true); // class weight 50 (inner)
        cgroup(&r.join("kubepods/besteffort/poda"), "", Some(100), true); // pod a, weight 300
        cgroup(&r.join("kubepods/besteffort/podb"), "", Some(100), true); // nobody's
        std::fs::create_dir_all(sys.path().join("nvme0n1/queue")).unwrap();
        std::fs::write(r.join("io.cost.qos"), "259:0 enable=1 ctrl=user\n").unwrap();
        let h = Hierarchy { flavor: Flavor::V2, root: r.to_path_buf() };
        let target =
            |weight, inner, owner| CgroupSettings { weight, limits: Limits::default(), memory: None, inner, owner };
        let pod = Owner::Pod(PodRef { namespace: "ns".into(), pod: "a".into(), container: None });
        let pods = vec![
            ("kubepods/besteffort".to_string(), target(50, true, Owner::Class(ioshare_kube::QosClass::BestEffort))),
            ("kubepods/besteffort/poda".to_string(), target(300, false, pod)),
        ];
        let s = Shares::check(&config(&[("t/x", 100)]), &pods, BackendKind::Kernel, &h, sys.path());
        let listed: Vec<(&str, usize, Option<&str>, u32)> =
            s.devices[0].groups.iter().map(|g| (g.cgroup.as_str(), g.rule, g.pod.as_deref(), g.weight)).collect();
        assert_eq!(listed, [("kubepods/besteffort/poda", 0, Some("ns/a"), 300), ("t/x", 1, None, 100)]);
        // kubepods 100 of 200 at the top; besteffort 50 of 150 beside podg; poda 300 of 400.
        let a = &s.devices[0].groups[0];
        assert!((a.share - 0.5 * (50.0 / 150.0) * 0.75).abs() < 1e-9, "{a:?}");
        assert!(s.to_string().contains("pod ns/a"), "{s}");
    }
}
