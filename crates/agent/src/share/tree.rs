//! The arithmetic of a hierarchical share: what part of a device a cgroup gets when it does IO.
//!
//! A proportional controller (kernel iocost, BFQ, the agent's planner) divides a device level by level:
//! at each level of the path from the root, the cgroup on the path gets its weight ÷ the sum of the
//! weights of itself and its *active* siblings (the other children of the same parent doing IO);
//! inactive siblings take nothing. The share is the product over the levels — iocost's hweight. The
//! cgroup itself is counted as active at every level (the figure is what it gets when it does IO).
//!
//! On cgroup v2 a level whose parent does not enable `io` in `cgroup.subtree_control` has no weights of
//! its own: its IO is its parent's, so the product stops at the last level that has the controller.

use serde::{Deserialize, Serialize};

/// A cgroup tree as seen for one device.
pub trait TreeView {
    /// The child cgroups of `parent` (`""` is the root), as paths relative to the root.
    fn children(&mut self, parent: &str) -> Vec<String>;
    /// The weight `rel` has on the device.
    fn weight(&mut self, rel: &str) -> u32;
    /// Whether `rel` does IO on the device.
    fn active(&mut self, rel: &str) -> bool;
    /// Whether the children of `parent` have the `io` controller (always on cgroup v1).
    fn controller_on(&mut self, parent: &str) -> bool;
}

/// One level of a cgroup's path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// The cgroup on the path at this level.
    pub cgroup: String,
    /// Its weight.
    pub weight: u32,
    /// Its weight plus its active siblings' weights.
    pub active_weight: u64,
    /// How many of its siblings are active.
    pub active_siblings: usize,
}

impl Level {
    /// Its part of its parent's share.
    pub fn fraction(&self) -> f64 {
        f64::from(self.weight) / self.active_weight as f64
    }
}

/// A cgroup's share and how it comes about.
#[derive(Clone, Debug, PartialEq)]
pub struct PathShare {
    /// The product of the levels' fractions.
    pub share: f64,
    /// The levels from the top, down to the cgroup or to the last one with the `io` controller.
    pub levels: Vec<Level>,
    /// The parent whose `cgroup.subtree_control` lacks `io`, where the path stopped.
    pub controller_off: Option<String>,
}

/// The share of cgroup `rel` in `tree`.
pub fn path_share(tree: &mut dyn TreeView, rel: &str) -> PathShare {
    let mut levels = Vec::new();
    let mut parent = String::new();
    let mut controller_off = None;
    for part in rel.split('/') {
        if !tree.controller_on(&parent) {
            controller_off = Some(parent);
            break;
        }
        let node = if parent.is_empty() { part.to_string() } else { format!("{parent}/{part}") };
        let weight = tree.weight(&node);
        let siblings: Vec<String> = tree.children(&parent).into_iter().filter(|c| *c != node).collect();
        let active: Vec<String> = siblings.into_iter().filter(|s| tree.active(s)).collect();
        let active_weight = u64::from(weight) + active.iter().map(|s| u64::from(tree.weight(s))).sum::<u64>();
        levels.push(Level { cgroup: node.clone(), weight, active_weight, active_siblings: active.len() });
        parent = node;
    }
    PathShare { share: levels.iter().map(Level::fraction).product(), levels, controller_off }
}

/// A tree held in memory, for tests of the arithmetic and of the diagnosis.
#[cfg(test)]
pub(crate) mod memory {
    use std::collections::{BTreeMap, BTreeSet};

    use super::TreeView;

    /// Cgroups by path: (weight, active); parents whose children lack the controller.
    #[derive(Default)]
    pub(crate) struct MemoryTree {
        pub(crate) nodes: BTreeMap<String, (u32, bool)>,
        pub(crate) controller_off: BTreeSet<String>,
    }

    impl MemoryTree {
        /// A tree of `(path, weight, active)`; parents must be listed too.
        pub(crate) fn new(nodes: &[(&str, u32, bool)]) -> Self {
            let nodes = nodes.iter().map(|&(p, w, a)| (p.to_string(), (w, a))).collect();
            MemoryTree { nodes, controller_off: BTreeSet::new() }
        }
    }

    impl TreeView for MemoryTree {
        fn children(&mut self, parent: &str) -> Vec<String> {
            let depth = if parent.is_empty() { 1 } else { parent.split('/').count() + 1 };
            let prefix = if parent.is_empty() { String::new() } else { format!("{parent}/") };
            self.nodes.keys().filter(|k| k.starts_with(&prefix) && k.split('/').count() == depth).cloned().collect()
        }
        fn weight(&mut self, rel: &str) -> u32 {
            self.nodes[rel].0
        }
        fn active(&mut self, rel: &str) -> bool {
            self.nodes[rel].1
        }
        fn controller_on(&mut self, parent: &str) -> bool {
            !self.controller_off.contains(parent)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::memory::MemoryTree;
    use super::*;

    fn near(got: f64, want: f64) {
        assert!((got / want - 1.0).abs() < 0.01, "{got} vs {want} (1%)");
    }

    #[test]
    fn siblings_split_by_weight() {
        let mut t = MemoryTree::new(&[("a", 300, true), ("b", 100, true)]);
        near(path_share(&mut t, "a").share, 0.75);
        near(path_share(&mut t, "b").share, 0.25);
        let p = path_share(&mut t, "a");
        assert_eq!(p.levels, [Level { cgroup: "a".into(), weight: 300, active_weight: 400, active_siblings: 1 }]);
    }

    #[test]
    fn nested_levels_multiply() {
        // root: t (200) beside sys (100) and idle (700, inactive); t: web (300) beside db (100);
        // web: its only child app.
        let mut t = MemoryTree::new(&[
            ("t", 200, true),
            ("sys", 100, true),
            ("idle", 700, false),
            ("t/web", 300, true),
            ("t/db", 100, true),
            ("t/web/app", 50, true),
        ]);
        near(path_share(&mut t, "t/web").share, 200.0 / 300.0 * 300.0 / 400.0); // 0.5
        near(path_share(&mut t, "t/db").share, 200.0 / 300.0 * 100.0 / 400.0); // 0.1667
        near(path_share(&mut t, "t/web/app").share, 0.5); // alone under web: web's share
        assert_eq!(path_share(&mut t, "t/web/app").levels.len(), 3);
    }

    #[test]
    fn inactive_siblings_take_nothing_and_the_cgroup_counts_as_active() {
        let mut t = MemoryTree::new(&[("a", 100, false), ("b", 100, false), ("c", 200, true)]);
        near(path_share(&mut t, "a").share, 100.0 / 300.0); // a itself counts, b does not
        near(path_share(&mut t, "c").share, 1.0); // nobody else active
        assert_eq!(path_share(&mut t, "c").levels[0].active_siblings, 0);
    }

    #[test]
    fn unmanaged_siblings_count_with_their_own_weights() {
        // `sys` and `user` are no rule's: their weights are what the host gives them (500 and 100).
        let mut t = MemoryTree::new(&[("sys", 500, true), ("user", 100, true), ("t", 100, true), ("t/a", 300, true)]);
        near(path_share(&mut t, "t/a").share, 100.0 / 700.0); // 0.1429
    }

    #[test]
    fn a_level_without_the_io_controller_shares_its_parents_part() {
        let mut t = MemoryTree::new(&[("t", 100, true), ("u", 300, true), ("t/a", 900, true), ("t/b", 100, true)]);
        t.controller_off.insert("t".into());
        let p = path_share(&mut t, "t/a");
        near(p.share, 0.25); // t's share: a's weight does not exist
        assert_eq!(p.controller_off.as_deref(), Some("t"));
        assert_eq!(p.levels.len(), 1);
    }
}
