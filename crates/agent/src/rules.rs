//! Which rule applies to which cgroup: the first rule whose pattern matches it wins, and a match nested
//! below another match is skipped (its IO is already counted in its ancestor's recursive counters).
//!
//! So a rule can lose a cgroup to another rule ([`losing`]: a later rule that matches a cgroup an
//! earlier one took), or never apply at all ([`never_applying`]: an earlier rule covers its pattern, or
//! another rule matches an ancestor of everything it matches). Covering is decided on the patterns
//! ([`pattern_covers`]: sound, so a rule is never reported that could apply).

use std::collections::BTreeMap;
use std::path::Path;

use ioshare_host::{find_cgroups, pattern_covers, pattern_matches};

use crate::config::GroupConfig;

/// Every cgroup below `root` the rules `groups` match now, with the index of the first rule matching
/// it; nested matches dropped.
pub fn matched(root: &Path, groups: &[GroupConfig]) -> BTreeMap<String, usize> {
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        for rel in find_cgroups(root, &g.cgroup) {
            found.entry(rel).or_insert(i);
        }
    }
    let nested: Vec<String> = found
        .keys()
        .filter(|rel| {
            let p = Path::new(rel.as_str());
            p.ancestors().skip(1).any(|a| found.contains_key(a.to_string_lossy().as_ref()))
        })
        .cloned()
        .collect();
    for rel in nested {
        found.remove(&rel);
    }
    found
}

/// A rule that can never apply to any cgroup, and the rule that takes its cgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shadowed {
    /// The rule (index in the configuration).
    pub rule: usize,
    /// The rule that takes its cgroups.
    pub by: usize,
    /// `false`: `by` comes first and matches all it matches; `true`: `by` matches an ancestor of
    /// every cgroup it matches.
    pub nested: bool,
}

/// The rules of `groups` that can never apply, whatever cgroups exist.
pub fn never_applying(groups: &[GroupConfig]) -> Vec<Shadowed> {
    let mut out = Vec::new();
    for (rule, g) in groups.iter().enumerate() {
        let parts: Vec<&str> = g.cgroup.split('/').collect();
        let earlier = (0..rule).find(|&by| pattern_covers(&groups[by].cgroup, &g.cgroup));
        let above = |by: usize| {
            let depth = groups[by].cgroup.split('/').count();
            by != rule && depth < parts.len() && pattern_covers(&groups[by].cgroup, &parts[..depth].join("/"))
        };
        match earlier {
            Some(by) => out.push(Shadowed { rule, by, nested: false }),
            None => out.extend((0..groups.len()).find(|&by| above(by)).map(|by| Shadowed { rule, by, nested: true })),
        }
    }
    out
}

/// The rules after `rule` that also match cgroup `rel`, which `rule` took (the first match wins).
pub fn losing(groups: &[GroupConfig], rel: &str, rule: usize) -> Vec<usize> {
    (rule + 1..groups.len()).filter(|&i| pattern_matches(&groups[i].cgroup, rel)).collect()
}

#[cfg(test)]
mod tests {
    use ioshare_core::Limits;

    use super::*;

    fn rules(patterns: &[&str]) -> Vec<GroupConfig> {
        patterns
            .iter()
            .map(|p| GroupConfig { cgroup: p.to_string(), weight: 100, limits: Limits::default(), memory: None })
            .collect()
    }

    #[test]
    fn first_match_wins_and_nested_matches_are_skipped() {
        let root = tempfile::tempdir().unwrap();
        for d in ["t/web", "t/db/inner", "t/batch", "u"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        let found = matched(root.path(), &rules(&["t/web", "t/*", "t/db/*", "u"]));
        let want: BTreeMap<String, usize> =
            [("t/batch", 1), ("t/db", 1), ("t/web", 0), ("u", 3)].map(|(r, i)| (r.to_string(), i)).into();
        assert_eq!(found, want, "t/db/inner is below t/db's match");
    }

    #[test]
    fn rules_that_never_apply_are_found_on_the_patterns() {
        let g = rules(&["t/*", "t/web", "u/w?b", "u/web", "t/*/inner", "v/*/x", "v/a", "w/a*"]);
        assert_eq!(
            never_applying(&g),
            [
                Shadowed { rule: 1, by: 0, nested: false },
                Shadowed { rule: 3, by: 2, nested: false },
                Shadowed { rule: 4, by: 0, nested: true },
            ],
            "v/*/x can still apply below v/b; v/a covers nothing of it; w/a* is alone"
        );
        // A more specific rule first is what makes it apply; the general one still takes the rest.
        assert!(never_applying(&rules(&["t/web", "t/*"])).is_empty());
        // Nesting does not depend on the order.
        assert_eq!(never_applying(&rules(&["t/*/inner", "t/*"])), [Shadowed { rule: 0, by: 1, nested: true }]);
    }

    #[test]
    fn later_rules_that_also_match_a_cgroup_lose_it() {
        let g = rules(&["t/*", "t/web", "t/w?b", "t/db"]);
        assert_eq!(losing(&g, "t/web", 0), [1, 2]);
        assert_eq!(losing(&g, "t/web", 1), [2]);
        assert!(losing(&g, "t/batch", 0).is_empty());
    }
}
