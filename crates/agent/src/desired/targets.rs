//! What the agent applies, cgroup by cgroup, whoever asked for it.
//!
//! Two sources of desired groups meet here as one list: the configuration's `[[groups]]` rules,
//! matched against the tree ([`crate::desired::rules::matched`]: first match wins, nested matches dropped),
//! and the pods of this node ([`crate::desired::pods`]), whose cgroups are exact paths that kubelet makes and
//! removes. Everything after — the kernel backend's writes, the userspace planner's tracking, the
//! memory guard, the recorder that reverts it all, the status — works on the [`CgroupSettings`]s of
//! [`targets`] and does not care where one came from; the [`Owner`] only names it in the status,
//! the logs and the metrics.
//!
//! A pod's cgroup is taken over a rule matching the same path (the pod's annotations, held to the
//! admin's policy, are the more specific ask). Cgroups that do not exist (yet) are left out: a pod's
//! target appears the discovery after kubelet made its cgroup, whichever came first.
//!
//! Weights compete among siblings, so the tree has two kinds of targets. A *leaf* issues IO of its
//! own (its IO is what is charged and limited): a rule's cgroup, a pod's, a container's. An *inner*
//! target only weighs its subtree against its siblings (a QoS class cgroup, `kubepods/besteffort`,
//! against the burstable one and the Guaranteed pods): the kernel backend writes its `io.weight`
//! like any other; the userspace planner gives the node that weight in its tree
//! ([`crate::backend::userspace::DeviceLoop::set_inner_weights`]) without charging it, as its IO is its
//! children's. The planner charges each leaf's recursive counters, so it plans only the outermost
//! leaves ([`planned`]).
//!
//! On cgroup v1 blk-throttle is not hierarchical: a limit on a pod's cgroup does not hold the IO its
//! containers issue from the cgroups below it (measured here: a pod limited to 10 IOPS did 34 000).
//! So the userspace backend plans a pod as an inner node of its weight and each of the cgroups
//! kubelet made in it (the containers', the sandbox's) as a leaf below it ([`userspace_plan`]): a
//! container's own settings where it has them, else the default weight and the pod's fixed caps —
//! which on v1 then bind each container, not the pod as a whole. The kernel backend (v2) writes
//! the pod's cgroup itself, and its iocost and `io.max` are hierarchical.

use std::collections::BTreeMap;
use std::path::Path;

use ioshare_core::Limits;
use ioshare_memory::MemorySettings;
use serde::{Deserialize, Serialize};

use crate::desired::config::GroupConfig;

/// The pod (and container) a cgroup belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodRef {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container, for a container's own cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.pod)?;
        match &self.container {
            Some(c) => write!(f, "/{c}"),
            None => Ok(()),
        }
    }
}

/// Who asked for a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The configuration's rule of this index.
    Rule(usize),
    /// A pod, or one of its containers.
    Pod(PodRef),
    /// A Kubernetes QoS class's own cgroup (the agent config's `class_weight`).
    Class(ioshare_kube::QosClass),
}

/// What to apply to one cgroup.
#[derive(Clone, Debug, PartialEq)]
pub struct CgroupSettings {
    /// Weight among its siblings.
    pub weight: u32,
    /// Fixed caps.
    pub limits: Limits,
    /// Memory isolation, if asked for.
    pub memory: Option<MemorySettings>,
    /// Weight only: its IO is its children's (see the module comment).
    pub inner: bool,
    /// Who asked.
    pub owner: Owner,
}

impl CgroupSettings {
    /// The target of rule `index`.
    pub fn of_rule(index: usize, g: &GroupConfig) -> CgroupSettings {
        CgroupSettings {
            weight: g.weight,
            limits: g.limits.clone(),
            memory: g.memory,
            inner: false,
            owner: Owner::Rule(index),
        }
    }

    /// The pod it belongs to, if a pod asked for it.
    pub fn pod(&self) -> Option<&PodRef> {
        match &self.owner {
            Owner::Pod(p) => Some(p),
            _ => None,
        }
    }
}

/// Every target that exists below `root` now: the rules' matches, then `pods` (cgroup paths
/// relative to `root`) where their cgroup exists, taking a path over a rule.
pub fn targets(
    root: &Path,
    groups: &[GroupConfig],
    pods: &[(String, CgroupSettings)],
) -> BTreeMap<String, CgroupSettings> {
    let mut out: BTreeMap<String, CgroupSettings> = crate::desired::rules::matched(root, groups)
        .into_iter()
        .map(|(rel, i)| (rel, CgroupSettings::of_rule(i, &groups[i])))
        .collect();
    for (rel, t) in pods {
        if root.join(rel).is_dir() {
            out.insert(rel.clone(), t.clone());
        }
    }
    out
}

/// The leaves the userspace planner tracks: every leaf target not below another leaf target.
pub fn planned(targets: &BTreeMap<String, CgroupSettings>) -> impl Iterator<Item = (&String, &CgroupSettings)> {
    let leaf = |rel: &str| targets.get(rel).is_some_and(|t| !t.inner);
    targets.iter().filter(move |(rel, t)| {
        !t.inner && !Path::new(rel.as_str()).ancestors().skip(1).any(|a| leaf(a.to_string_lossy().as_ref()))
    })
}

/// A cgroup the userspace planner charges and limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf<'a> {
    /// Its path, relative to the hierarchy's root.
    pub rel: String,
    /// Its weight among its siblings.
    pub weight: u32,
    /// Its fixed caps.
    pub limits: &'a Limits,
    /// The pod it belongs to, if any.
    pub pod: Option<&'a PodRef>,
}

/// What the userspace backend plans (see the module comment): the leaves it charges, and the
/// weights of the inner nodes above them (QoS class cgroups, pods with cgroups in them).
pub fn userspace_plan<'a>(
    root: &Path,
    targets: &'a BTreeMap<String, CgroupSettings>,
) -> (Vec<Leaf<'a>>, BTreeMap<String, u32>) {
    let mut inner: BTreeMap<String, u32> =
        targets.iter().filter(|(_, t)| t.inner).map(|(rel, t)| (rel.clone(), t.weight)).collect();
    let mut leaves = Vec::new();
    for (rel, t) in planned(targets) {
        let children = match t.pod() {
            Some(p) if p.container.is_none() => ioshare_host::child_cgroups(&root.join(rel)),
            _ => Vec::new(),
        };
        if children.is_empty() {
            leaves.push(Leaf { rel: rel.clone(), weight: t.weight, limits: &t.limits, pod: t.pod() });
            continue;
        }
        inner.insert(rel.clone(), t.weight);
        for child in children {
            let rel = format!("{rel}/{child}");
            let own = targets.get(&rel);
            leaves.push(Leaf {
                weight: own.map_or(ioshare_core::WEIGHT_DEFAULT, |o| o.weight),
                limits: own.map_or(&t.limits, |o| &o.limits),
                pod: own.and_then(CgroupSettings::pod).or(t.pod()),
                rel,
            });
        }
    }
    (leaves, inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pattern: &str, weight: u32) -> GroupConfig {
        GroupConfig { cgroup: pattern.into(), weight, limits: Limits::default(), memory: None }
    }

    fn pod(name: &str, container: Option<&str>, weight: u32, inner: bool) -> CgroupSettings {
        let owner = match inner {
            true => Owner::Class(ioshare_kube::QosClass::BestEffort),
            false => {
                Owner::Pod(PodRef { namespace: "ns".into(), pod: name.into(), container: container.map(Into::into) })
            }
        };
        CgroupSettings { weight, limits: Limits::default(), memory: None, inner, owner }
    }

    #[test]
    fn pods_join_the_rules_where_their_cgroups_exist_and_win_their_paths() {
        let root = tempfile::tempdir().unwrap();
        for d in ["sys", "kubepods/besteffort/poda/c1", "kubepods/besteffort/podb"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        let pods = vec![
            ("kubepods/besteffort".to_string(), pod("", None, 50, true)),
            ("kubepods/besteffort/poda".to_string(), pod("a", None, 200, false)),
            ("kubepods/besteffort/poda/c1".to_string(), pod("a", Some("c1"), 300, false)),
            ("kubepods/besteffort/podb".to_string(), pod("b", None, 100, false)),
            ("kubepods/besteffort/podc".to_string(), pod("c", None, 100, false)),
        ];
        let t = targets(root.path(), &[rule("sys", 10), rule("kubepods/besteffort/podb", 7)], &pods);
        let weights: Vec<(&str, u32)> = t.iter().map(|(r, t)| (r.as_str(), t.weight)).collect();
        assert_eq!(
            weights,
            [
                ("kubepods/besteffort", 50),
                ("kubepods/besteffort/poda", 200),
                ("kubepods/besteffort/poda/c1", 300),
                ("kubepods/besteffort/podb", 100),
                ("sys", 10)
            ],
            "podc has no cgroup yet; podb's pod wins over the rule naming it"
        );
        assert_eq!(t["kubepods/besteffort/poda/c1"].pod().unwrap().to_string(), "ns/a/c1");
        let leaves: Vec<&str> = planned(&t).map(|(r, _)| r.as_str()).collect();
        assert_eq!(leaves, ["kubepods/besteffort/poda", "kubepods/besteffort/podb", "sys"], "c1 is planned in its pod");

        // The userspace backend: a pod with cgroups in it is an inner node, its cgroups the leaves.
        std::fs::create_dir(root.path().join("kubepods/besteffort/poda/pause")).unwrap();
        let (leaves, inner) = userspace_plan(root.path(), &t);
        let leaves: Vec<(&str, u32, String)> =
            leaves.iter().map(|l| (l.rel.as_str(), l.weight, l.pod.map_or(String::new(), |p| p.to_string()))).collect();
        assert_eq!(
            leaves,
            [
                ("kubepods/besteffort/poda/c1", 300, "ns/a/c1".to_string()),
                ("kubepods/besteffort/poda/pause", 100, "ns/a".to_string()),
                ("kubepods/besteffort/podb", 100, "ns/b".to_string()),
                ("sys", 10, String::new()),
            ]
        );
        let inner: Vec<(&str, u32)> = inner.iter().map(|(r, w)| (r.as_str(), *w)).collect();
        assert_eq!(inner, [("kubepods/besteffort", 50), ("kubepods/besteffort/poda", 200)]);
    }
}
