//! Priority OOM: which group dies when an ancestor runs out of memory.
//!
//! The rule (SPEC §8, after Alibaba Cloud Linux's `memory.priority` + `use_priority_oom`): siblings
//! carry a priority 0..=12, higher is more important. On an OOM in ancestor `A`, walk down from `A`
//! choosing at each level the child with the lowest priority — ties broken by the larger memory
//! usage — until a group with no eligible child; that group's processes are killed (largest first)
//! until `A` is under its limit. A group with nothing left to kill is ineligible, so the next walk
//! picks the next candidate; groups outside `A`'s subtree are never considered, because their memory
//! does not relieve `A`.
//!
//! The walk is pure: it runs on a [`Node`] snapshot the caller takes from the cgroup files, so the
//! rule is tested exactly here and the kernel-facing code only reads, kills and re-reads.

use std::path::{Path, PathBuf};

/// The largest priority (`memory.priority` in Alibaba's kernels: 0..=12).
pub const PRIORITY_MAX: u8 = 12;

/// One cgroup of the subtree under OOM, as read just now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The cgroup directory.
    pub path: PathBuf,
    /// 0..=12, higher is more important (unconfigured groups: 0, the first to go).
    pub priority: u8,
    /// Memory charged to it and its descendants, bytes.
    pub usage: u64,
    /// Processes in this cgroup itself (not in its children).
    pub procs: usize,
    /// Its child cgroups.
    pub children: Vec<Node>,
}

impl Node {
    /// Whether anything in this subtree can still be killed.
    fn has_victims(&self, spared: &dyn Fn(&Path) -> bool) -> bool {
        !spared(&self.path) && (self.procs > 0 || self.children.iter().any(|c| c.has_victims(spared)))
    }
}

/// The group whose processes die next under the rule above, starting at `root` (the ancestor under
/// OOM); `spared` marks groups not to choose (e.g. those whose processes could not be killed). `None`
/// when nothing below `root` has a process left.
pub fn choose_victim<'a>(root: &'a Node, spared: &dyn Fn(&Path) -> bool) -> Option<&'a Node> {
    if !root.has_victims(spared) {
        return None;
    }
    let mut node = root;
    loop {
        let next = node
            .children
            .iter()
            .filter(|c| c.has_victims(spared))
            .min_by(|a, b| a.priority.cmp(&b.priority).then(b.usage.cmp(&a.usage)));
        match next {
            Some(child) => node = child,
            // No eligible child: the victim is this group itself (it has processes, or has_victims
            // would have been false for it).
            None => return Some(node),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(path: &str, priority: u8, usage: u64) -> Node {
        Node { path: path.into(), priority, usage, procs: 1, children: vec![] }
    }

    fn inner(path: &str, priority: u8, children: Vec<Node>) -> Node {
        let usage = children.iter().map(|c| c.usage).sum();
        Node { path: path.into(), priority, usage, procs: 0, children }
    }

    /// The source's tree: under the OOM ancestor, two branches; the low-priority branch is chosen
    /// even though the other is larger, then its lowest-priority leaf, ties by usage.
    fn tree() -> Node {
        inner(
            "A",
            0,
            vec![
                inner("A/online", 10, vec![leaf("A/online/web", 12, 900), leaf("A/online/cache", 8, 700)]),
                inner(
                    "A/offline",
                    2,
                    vec![leaf("A/offline/etl", 5, 100), leaf("A/offline/batch", 1, 50), leaf("A/offline/scan", 1, 80)],
                ),
            ],
        )
    }

    #[test]
    fn the_walk_takes_the_lowest_priority_at_each_level_ties_by_usage() {
        let t = tree();
        let none = |_: &Path| false;
        // offline (2) before online (10); then batch and scan tie at 1: scan uses more.
        assert_eq!(choose_victim(&t, &none).unwrap().path, Path::new("A/offline/scan"));
    }

    #[test]
    fn exhausted_groups_pass_the_choice_to_the_next_candidate() {
        let t = tree();
        let gone = |names: &'static [&'static str]| move |p: &Path| names.iter().any(|n| p == Path::new(n));
        let order: Vec<&str> = ["A/offline/batch", "A/offline/etl", "A/online/cache", "A/online/web"].to_vec();
        let mut spared: Vec<&'static str> = vec!["A/offline/scan"];
        for want in order {
            let s = spared.clone();
            let v = choose_victim(&t, &move |p: &Path| s.iter().any(|n| p == Path::new(n))).unwrap();
            assert_eq!(v.path, Path::new(want));
            spared.push(want);
        }
        let all = gone(&["A/offline", "A/online"]);
        assert!(choose_victim(&t, &all).is_none(), "nothing left to kill");
    }

    #[test]
    fn an_inner_group_with_its_own_processes_is_chosen_when_its_children_are_spent() {
        let mut t = inner("A", 0, vec![leaf("A/x", 3, 10)]);
        t.procs = 2;
        assert_eq!(choose_victim(&t, &|_| false).unwrap().path, Path::new("A/x"));
        assert_eq!(choose_victim(&t, &|p| p == Path::new("A/x")).unwrap().path, Path::new("A"));
    }

    #[test]
    fn only_the_subtree_under_oom_is_considered() {
        let t = tree();
        let online = &t.children[0];
        // An OOM in A/online never picks anything in A/offline, whatever its priority.
        let v = choose_victim(online, &|_| false).unwrap();
        assert!(v.path.starts_with("A/online"), "{:?}", v.path);
        assert_eq!(v.path, Path::new("A/online/cache"));
    }
}
