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

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

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

/// What the active children of one parent add up to.
#[derive(Debug, Default)]
pub struct ActiveChildren {
    /// Their weights, summed.
    pub weight: u64,
    /// How many there are.
    pub count: usize,
    /// Those that are neither managed nor above a managed cgroup (their IO is no rule's).
    pub unmanaged: Vec<String>,
}

/// A tree with each parent's active children summed once: a report asks about the same parents for
/// every cgroup below them (a thousand tenants under one parent are summed once, not a thousand times).
pub struct Levels<'a> {
    tree: &'a mut dyn TreeView,
    managed: &'a BTreeMap<String, u32>,
    parents: HashMap<String, Rc<ActiveChildren>>,
}

impl<'a> Levels<'a> {
    /// `tree`, whose cgroups `managed` are the agent's.
    pub fn new(tree: &'a mut dyn TreeView, managed: &'a BTreeMap<String, u32>) -> Self {
        Levels { tree, managed, parents: HashMap::new() }
    }

    /// The tree.
    pub fn tree(&mut self) -> &mut dyn TreeView {
        &mut *self.tree
    }

    /// The active children of `parent`.
    pub fn active_children(&mut self, parent: &str) -> Rc<ActiveChildren> {
        if let Some(c) = self.parents.get(parent) {
            return Rc::clone(c);
        }
        let mut sum = ActiveChildren::default();
        for child in self.tree.children(parent) {
            if self.tree.active(&child) {
                sum.weight += u64::from(self.tree.weight(&child));
                sum.count += 1;
                if !managed_or_above(self.managed, &child) {
                    sum.unmanaged.push(child);
                }
            }
        }
        let sum = Rc::new(sum);
        self.parents.insert(parent.to_string(), Rc::clone(&sum));
        sum
    }

    /// The share of cgroup `rel`.
    pub fn path_share(&mut self, rel: &str) -> PathShare {
        let mut levels = Vec::new();
        let mut parent = String::new();
        let mut controller_off = None;
        for part in rel.split('/') {
            if !self.tree.controller_on(&parent) {
                controller_off = Some(parent);
                break;
            }
            let node = if parent.is_empty() { part.to_string() } else { format!("{parent}/{part}") };
            let weight = self.tree.weight(&node);
            let children = self.active_children(&parent);
            // The cgroup counts as active whether or not it is: take it out of the sum, put it back in.
            let (own_weight, own_count) = if self.tree.active(&node) { (u64::from(weight), 1) } else { (0, 0) };
            let active_weight = children.weight - own_weight + u64::from(weight);
            levels.push(Level {
                cgroup: node.clone(),
                weight,
                active_weight,
                active_siblings: children.count - own_count,
            });
            parent = node;
        }
        PathShare { share: levels.iter().map(Level::fraction).product(), levels, controller_off }
    }
}

/// Whether a rule manages `rel` or a cgroup below it (its IO is then under the agent's control).
fn managed_or_above(managed: &BTreeMap<String, u32>, rel: &str) -> bool {
    let prefix = format!("{rel}/");
    managed.contains_key(rel) || managed.range(prefix.clone()..).next().is_some_and(|(k, _)| k.starts_with(&prefix))
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

    fn path_share(tree: &mut MemoryTree, rel: &str) -> PathShare {
        let managed = BTreeMap::new();
        Levels::new(tree, &managed).path_share(rel)
    }

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
