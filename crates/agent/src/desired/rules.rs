//! Which rule applies to which cgroup: the first rule whose pattern matches it wins, and — for IO,
//! when devices are configured — a match nested below another match is skipped (its IO is already
//! counted in its ancestor's recursive counters). The memory guard takes the first match among the
//! rules with memory settings, nested matches included.
//!
//! So a rule can lose cgroups to another. Rule B loses a cgroup C it matches to rule A when
//! - A comes before B and matches C too (*first match*), or
//! - A matches an ancestor of C (*nested*, IO only, whatever the order).
//!
//! [`overlaps`] finds, on the patterns alone (whatever cgroups exist now), every rule that can lose
//! cgroups this way, so the agent can say so at load and `agent check` can list it: B loses *all* its
//! cgroups (never applies) when A's pattern matches every path B's can ([`pattern_covers`], exact on
//! the globs: `*` and `?` within one component, `**` is two `*`s, not a recursive match), *some*
//! when a path matches both ([`patterns_overlap`]; for nested, A against B's pattern cut to A's
//! depth). A rule that never applies is reported once, against the first rule that covers it;
//! otherwise each rule it partly loses to is reported, but for one that itself never applies (it
//! takes nothing). At run time [`losing`] names, for one cgroup,
//! the later rules that also match it.

use std::collections::BTreeMap;
use std::path::Path;

use ioshare_host::{find_cgroups, pattern_covers, pattern_matches, patterns_overlap};

use crate::desired::config::{Config, GroupConfig};

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

/// How a rule loses cgroups to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The other comes first and matches them too (the first match wins).
    First,
    /// The other matches an ancestor of theirs (IO: a match nested below another is skipped).
    Nested,
}

/// A rule that loses some or all of the cgroups it can match to another rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The rule (index in the configuration).
    pub rule: usize,
    /// The rule that takes them.
    pub by: usize,
    /// How.
    pub reach: Reach,
    /// It loses every cgroup it can match: it never applies.
    pub all: bool,
    /// A cgroup path it loses (an example: the shortest such path).
    pub example: String,
}

impl Overlap {
    /// One line saying what the rule loses and what to do, without naming the rule itself (see
    /// [`Overlap::line`]).
    pub fn describe(&self, groups: &[GroupConfig]) -> String {
        let (by, n) = (&groups[self.by].cgroup, self.by + 1);
        // The memory guard takes nested matches too, and the first match among rules with memory.
        let memory = match (groups[self.rule].memory, groups[self.by].memory, self.reach) {
            (Some(_), _, Reach::Nested) => {
                "; its memory settings still apply there (the memory guard takes nested cgroups too)".to_string()
            }
            (Some(_), None, Reach::First) => format!("; its memory settings still apply there (rule {n} has none)"),
            _ => String::new(),
        };
        match (self.reach, self.all) {
            (Reach::First, true) => format!(
                "never applies: rule {n} (`{by}`) comes first and matches every cgroup it matches (the first match \
                 wins); move it above rule {n} or drop it{memory}"
            ),
            (Reach::First, false) => format!(
                "loses the cgroups rule {n} (`{by}`) also matches, like `{}`: rule {n} comes first and wins; move it \
                 above rule {n} if they are meant for it{memory}",
                self.example
            ),
            (Reach::Nested, true) => format!(
                "never applies: every cgroup it matches lies below one rule {n} (`{by}`) matches, whose counters \
                 already include it (nested matches are skipped); drop it or narrow rule {n}{memory}"
            ),
            (Reach::Nested, false) => format!(
                "loses the cgroups below one rule {n} (`{by}`) matches, like `{}`: that match's counters already \
                 include them (nested matches are skipped){memory}",
                self.example
            ),
        }
    }

    /// [`Overlap::describe`] after the rule's number and pattern: the agent's warning at load.
    pub fn line(&self, groups: &[GroupConfig]) -> String {
        format!("rule {} (`{}`) {}", self.rule + 1, groups[self.rule].cgroup, self.describe(groups))
    }
}

/// Every rule of `groups` that can lose cgroups to another, whatever cgroups exist (see the module
/// comment); `io`: devices are configured, so nested matches are skipped (else only rules with memory
/// settings are matched, by the memory guard). By rule, then by the rule
/// it loses to; a rule that never applies takes nothing, so nothing is reported lost to it.
pub fn overlaps(groups: &[GroupConfig], io: bool) -> Vec<Overlap> {
    let all: Vec<Vec<Overlap>> = (0..groups.len()).map(|rule| losses(groups, rule, io)).collect();
    let never: Vec<bool> = all.iter().map(|found| found.iter().any(|o| o.all)).collect();
    let mut out = Vec::new();
    for found in all {
        // Never applies: the first rule covering it says all; else every partial loss.
        match found.iter().filter(|o| o.all).min_by_key(|o| (o.reach == Reach::Nested, o.by)) {
            Some(o) => out.push(o.clone()),
            None => out.extend(found.into_iter().filter(|o| !never[o.by])),
        }
    }
    out
}

/// What rule `rule` can lose to each other rule.
fn losses(groups: &[GroupConfig], rule: usize, io: bool) -> Vec<Overlap> {
    let pattern = &groups[rule].cgroup;
    let parts: Vec<&str> = pattern.split('/').collect();
    let mut found = Vec::new();
    for (by, other) in groups.iter().enumerate().filter(|&(by, _)| by != rule) {
        // Without devices only the memory guard matches, and only among rules with memory settings.
        if !io && (groups[rule].memory.is_none() || other.memory.is_none()) {
            continue;
        }
        let depth = other.cgroup.split('/').count();
        let (reach, lost) = if depth == parts.len() && by < rule {
            (Reach::First, pattern.clone())
        } else if io && depth < parts.len() {
            (Reach::Nested, parts[..depth].join("/"))
        } else {
            continue;
        };
        let Some(common) = patterns_overlap(&other.cgroup, &lost) else { continue };
        let example = match reach {
            Reach::First => common,
            // Below the ancestor both match: the rest of the rule's pattern, spelled out.
            Reach::Nested => {
                let rest = parts[depth..].join("/");
                format!("{common}/{}", patterns_overlap(&rest, &rest).unwrap_or(rest))
            }
        };
        found.push(Overlap { rule, by, reach, all: pattern_covers(&other.cgroup, &lost), example });
    }
    found
}

/// Logs the [`overlaps`] of `config`'s rules, one warning line each (the agent at start and on
/// reload).
pub fn warn_overlaps(config: &Config) {
    for o in overlaps(&config.groups, !config.devices.is_empty()) {
        tracing::warn!(rule = o.rule + 1, by = o.by + 1, "{}", o.line(&config.groups));
    }
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

    /// (rule, by, reach, all) of each overlap, counted from 1 as in the file.
    fn found(patterns: &[&str], io: bool) -> Vec<(usize, usize, Reach, bool)> {
        overlaps(&rules(patterns), io).iter().map(|o| (o.rule + 1, o.by + 1, o.reach, o.all)).collect()
    }

    #[test]
    fn a_later_rule_an_earlier_one_covers_never_applies() {
        use Reach::*;
        assert_eq!(found(&["tenants/*", "tenants/b"], true), [(2, 1, First, true)]);
        // A rule that never applies takes nothing: nothing is lost to it (rule 2 here).
        assert_eq!(
            found(&["t/w?b", "t/web", "t/w*b", "t/*"], true),
            [(2, 1, First, true), (3, 1, First, false), (4, 1, First, false), (4, 3, First, false)]
        );
        // Identical in what they match, though spelled differently (identical spellings are refused
        // at load as listed twice).
        assert_eq!(found(&["t/*?", "t/?*"], true), [(2, 1, First, true)]);
        // `**` is two stars within one component, not a recursive match.
        assert_eq!(found(&["t/**", "t/x"], true), [(2, 1, First, true)]);
        assert_eq!(found(&["t/**", "t/x/y"], false), [], "no overlap across depths without IO");
        // The more specific one first: both apply (the general one takes the rest).
        assert_eq!(found(&["t/web", "t/*"], true), [(2, 1, First, false)]);
        // Reported once, against the first that covers it.
        assert_eq!(found(&["t/*", "t/a*", "t/ab"], true), [(2, 1, First, true), (3, 1, First, true)]);
    }

    #[test]
    fn partial_overlaps_lose_the_cgroups_both_match() {
        use Reach::*;
        let g = rules(&["t/a*", "t/*b", "t/c*x", "u/*"]);
        let o = overlaps(&g, true);
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!((o[0].rule, o[0].by, o[0].reach, o[0].all, o[0].example.as_str()), (1, 0, First, false, "t/ab"));
        let line = o[0].line(&g);
        assert!(line.starts_with("rule 2 (`t/*b`) loses the cgroups rule 1 (`t/a*`) also matches, like `t/ab`"));
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn nested_matches_are_lost_for_io_in_any_order() {
        use Reach::*;
        assert_eq!(found(&["t/*/inner", "t/*"], true), [(1, 2, Nested, true)]);
        assert_eq!(found(&["t/*", "t/*/inner"], true), [(2, 1, Nested, true)]);
        // Only below t/a*: partly.
        let g = rules(&["t/*/x", "t/a*"]);
        let o = overlaps(&g, true);
        assert_eq!((o.len(), o[0].reach, o[0].all, o[0].example.as_str()), (1, Nested, false, "t/a/x"), "{o:?}");
        // A memory-only configuration guards nested cgroups too.
        assert_eq!(found(&["t/*/inner", "t/*"], false), []);
        let mut g = rules(&["t/*", "t/*/inner"]);
        g[1].memory = Some(ioshare_memory::MemorySettings::default());
        let line = overlaps(&g, true)[0].line(&g);
        assert!(line.contains("never applies") && line.contains("memory settings still apply"), "{line}");
        // First match: memory settings are lost only to a rule with memory settings.
        let mut g = rules(&["t/*", "t/b"]);
        g[1].memory = Some(ioshare_memory::MemorySettings::default());
        assert!(overlaps(&g, true)[0].line(&g).ends_with("its memory settings still apply there (rule 1 has none)"));
        assert_eq!(overlaps(&g, false), [], "the memory guard alone: rule 1 matches nothing");
        g[0].memory = g[1].memory;
        assert_eq!(overlaps(&g, false).len(), 1);
        assert!(!overlaps(&g, true)[0].line(&g).contains("memory"));
        // Disjoint: nothing.
        assert_eq!(found(&["v/*/x", "w/a", "w/b*", "t/web", "t/db"], true), []);
    }

    #[test]
    fn later_rules_that_also_match_a_cgroup_lose_it() {
        let g = rules(&["t/*", "t/web", "t/w?b", "t/db"]);
        assert_eq!(losing(&g, "t/web", 0), [1, 2]);
        assert_eq!(losing(&g, "t/web", 1), [2]);
        assert!(losing(&g, "t/batch", 0).is_empty());
    }
}
