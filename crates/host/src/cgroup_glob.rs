//! Finding cgroups by pattern: `tenants/web`, `tenants/*`, `system.slice/docker-*.scope`, relative
//! to a hierarchy's root directory. `*` matches any run of characters and `?` one character, within
//! one path component; a pattern never reaches above the root.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Checks a pattern: relative, `/`-separated, no empty, `.` or `..` components.
pub fn check_pattern(pattern: &str) -> Result<()> {
    let bad = |reason| Error::InvalidCgroupName { name: pattern.to_string(), reason };
    if pattern.is_empty() || pattern.starts_with('/') {
        return Err(bad("give a path relative to the cgroup root, like 'tenants/web' or 'tenants/*'"));
    }
    if pattern.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
        return Err(bad("empty, '.' and '..' components are not allowed"));
    }
    Ok(())
}

/// The cgroups below `root` that `pattern` matches, as paths relative to `root`, sorted.
pub fn find_cgroups(root: &Path, pattern: &str) -> Vec<String> {
    let mut found = vec![(PathBuf::new(), String::new())];
    for part in pattern.split('/') {
        let mut next = Vec::new();
        for (dir, rel) in found {
            let join = |name: &str| if rel.is_empty() { name.to_string() } else { format!("{rel}/{name}") };
            if !part.contains(['*', '?']) {
                if root.join(&dir).join(part).is_dir() {
                    next.push((dir.join(part), join(part)));
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(root.join(&dir)) else { continue };
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                if e.file_type().is_ok_and(|t| t.is_dir()) && matches(part, name) {
                    next.push((dir.join(name), join(name)));
                }
            }
        }
        found = next;
    }
    let mut out: Vec<String> = found.into_iter().map(|(_, rel)| rel).collect();
    out.sort();
    out
}

/// Whether the cgroup path `rel` (relative to the root) matches `pattern`, component by component.
pub fn pattern_matches(pattern: &str, rel: &str) -> bool {
    let (p, r): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), rel.split('/').collect());
    p.len() == r.len() && p.iter().zip(&r).all(|(p, r)| matches(p, r))
}

/// Whether every path `narrow` matches, `wide` matches too (both patterns). Exact: the same number
/// of components, and for each, every name `narrow`'s glob matches is matched by `wide`'s — decided
/// on the patterns' automata ([`glob_covers`]; `*?` and `?*` cover each other). Only for a pair
/// whose automaton is too large to explore (more than [`EXPLORE_BUDGET`] states: a glob like
/// `*a??????????????`) the answer is the sound approximation [`glob_covers_approx`] — `true` only
/// when certain.
pub fn pattern_covers(wide: &str, narrow: &str) -> bool {
    let (w, n): (Vec<&str>, Vec<&str>) = (wide.split('/').collect(), narrow.split('/').collect());
    w.len() == n.len() && w.iter().zip(&n).all(|(w, n)| glob_covers(w, n))
}

/// A path both patterns match, if there is one (then the patterns overlap): the same number of
/// components, and for each a name both globs match ([`glob_common`]). Exact.
pub fn patterns_overlap(a: &str, b: &str) -> Option<String> {
    let (pa, pb): (Vec<&str>, Vec<&str>) = (a.split('/').collect(), b.split('/').collect());
    if pa.len() != pb.len() {
        return None;
    }
    let names: Option<Vec<String>> = pa.iter().zip(&pb).map(|(a, b)| glob_common(a, b)).collect();
    names.map(|n| n.join("/"))
}

/// Most states [`glob_covers`] explores before it falls back to [`glob_covers_approx`].
pub const EXPLORE_BUDGET: usize = 20_000;

/// One glob as an automaton over its positions: `*` loops, `?` and a literal step.
struct Glob(Vec<char>);

impl Glob {
    /// `set` with every position reachable through `*` (a `*` may match nothing).
    fn close(&self, mut set: Vec<bool>) -> Vec<bool> {
        for i in 0..self.0.len() {
            if set[i] && self.0[i] == '*' {
                set[i + 1] = true;
            }
        }
        set
    }

    fn start(&self) -> Vec<bool> {
        let mut set = vec![false; self.0.len() + 1];
        set[0] = true;
        self.close(set)
    }

    /// The positions after reading `c` from `set`.
    fn step(&self, set: &[bool], c: char) -> Vec<bool> {
        let mut next = vec![false; self.0.len() + 1];
        for (i, &p) in self.0.iter().enumerate().filter(|&(i, _)| set[i]) {
            match p {
                '*' => next[i] = true,
                '?' => next[i + 1] = true,
                l if l == c => next[i + 1] = true,
                _ => {}
            }
        }
        self.close(next)
    }

    fn accepts(&self, set: &[bool]) -> bool {
        set[self.0.len()]
    }
}

/// The characters that tell names apart for globs `a` and `b`: their literals and one character
/// neither names (standing for all the others).
fn alphabet(a: &str, b: &str) -> Vec<char> {
    let mut chars: Vec<char> = a.chars().chain(b.chars()).filter(|c| !matches!(c, '*' | '?')).collect();
    chars.sort_unstable();
    chars.dedup();
    let other = ('a'..='z').chain('0'..='9').chain('\u{100}'..).find(|c| !chars.contains(c)).expect("a free char");
    chars.push(other);
    chars
}

/// Whether every name `narrow` matches, `wide` matches too: breadth-first over the pairs of position
/// sets both globs reach on the same non-empty name, looking for one where `narrow` accepts and
/// `wide` does not (a pair where `wide` has no position left and `narrow` has is one already: any
/// position of a glob reaches its end on some name). `None` past `budget` pairs.
fn covers_exactly(wide: &str, narrow: &str, budget: usize) -> Option<bool> {
    let (gw, gn) = (Glob(wide.chars().collect()), Glob(narrow.chars().collect()));
    let sigma = alphabet(wide, narrow);
    let mut seen = std::collections::HashSet::new();
    let mut queue = std::collections::VecDeque::from([(gw.start(), gn.start())]);
    while let Some((sw, sn)) = queue.pop_front() {
        for &c in &sigma {
            let (nw, nn) = (gw.step(&sw, c), gn.step(&sn, c));
            if !nn.contains(&true) {
                continue; // `narrow` matches no name going on this way
            }
            if (gn.accepts(&nn) && !gw.accepts(&nw)) || !nw.contains(&true) {
                return Some(false);
            }
            if seen.insert((nw.clone(), nn.clone())) {
                if seen.len() > budget {
                    return None;
                }
                queue.push_back((nw, nn));
            }
        }
    }
    Some(true)
}

/// Whether every name glob `narrow` matches, glob `wide` matches too ([`covers_exactly`], else
/// [`glob_covers_approx`]).
fn glob_covers(wide: &str, narrow: &str) -> bool {
    covers_exactly(wide, narrow, EXPLORE_BUDGET).unwrap_or_else(|| glob_covers_approx(wide, narrow))
}

/// A shortest name both globs match, if any: breadth-first over pairs of positions (one of each
/// glob; at most `len(a) × len(b)` of them), a `*` skipped at no cost.
fn glob_common(a: &str, b: &str) -> Option<String> {
    let (ga, gb): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let sigma = alphabet(a, b);
    // The position a glob goes to from `i` on `c`.
    let step = |g: &[char], i: usize, c: char| match g.get(i) {
        Some('*') => Some(i),
        Some('?') => Some(i + 1),
        Some(&l) if l == c => Some(i + 1),
        _ => None,
    };
    let mut seen = std::collections::HashSet::new();
    let mut queue = std::collections::VecDeque::from([(0, 0, String::new())]);
    while let Some((i, j, name)) = queue.pop_front() {
        if !seen.insert((i, j, name.is_empty())) {
            continue;
        }
        if i == ga.len() && j == gb.len() && !name.is_empty() {
            return Some(name);
        }
        // Skipping a star costs no character: to the front, so names come out shortest first.
        if ga.get(i) == Some(&'*') {
            queue.push_front((i + 1, j, name.clone()));
        }
        if gb.get(j) == Some(&'*') {
            queue.push_front((i, j + 1, name.clone()));
        }
        for &c in &sigma {
            if let (Some(ni), Some(nj)) = (step(&ga, i, c), step(&gb, j, c)) {
                queue.push_back((ni, nj, format!("{name}{c}")));
            }
        }
    }
    None
}

/// [`glob_covers`], sound and not complete, for pairs too large to explore: `true` only when
/// certain — a `*` of `narrow` is covered only by a `*` of `wide`, a `?` by a `?` or a `*`.
fn glob_covers_approx(wide: &str, narrow: &str) -> bool {
    let (w, n): (Vec<char>, Vec<char>) = (wide.chars().collect(), narrow.chars().collect());
    // covered[i][j]: w[i..] covers n[j..]; filled from the ends.
    let mut covered = vec![vec![false; n.len() + 1]; w.len() + 1];
    covered[w.len()][n.len()] = true;
    for i in (0..w.len()).rev() {
        for j in (0..=n.len()).rev() {
            covered[i][j] = match w[i] {
                '*' => covered[i + 1][j] || (j < n.len() && covered[i][j + 1]),
                _ if j == n.len() => false,
                '?' => n[j] != '*' && covered[i + 1][j + 1],
                c => n[j] == c && covered[i + 1][j + 1],
            };
        }
    }
    covered[0][0]
}

/// Whether `name` matches the one-component glob `pattern` (`*` any run of characters, `?` any one):
/// the one glob matcher of the project (cgroup patterns here, namespace patterns in the pod source).
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic wildcard matching with backtracking to the last star.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        // A star first: it is a wildcard even where the name holds a '*' itself.
        if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_a_component() {
        assert!(matches("*", "web"));
        assert!(matches("docker-*.scope", "docker-abc.scope"));
        assert!(!matches("docker-*.scope", "docker-abc.service"));
        assert!(matches("w?b", "web") && !matches("w?b", "weeb"));
        assert!(matches("a*b*c", "aXbYc") && !matches("a*b*c", "aXbY"));
    }

    #[test]
    fn paths_match_and_patterns_cover_component_by_component() {
        assert!(pattern_matches("tenants/*", "tenants/web") && !pattern_matches("tenants/*", "tenants/web/x"));
        assert!(!pattern_matches("tenants/*", "tenants"));
        for (wide, narrow) in [
            ("tenants/*", "tenants/web"),
            ("tenants/*", "tenants/w?b"),
            ("tenants/*", "tenants/w*"),
            ("*/*", "a/b*c"),
            ("t/w?b", "t/web"),
            ("t/w?b", "t/w?b"),
            ("t/docker-*", "t/docker-a*.scope"),
            ("t/*.scope", "t/docker-*.scope"),
        ] {
            assert!(pattern_covers(wide, narrow), "{wide} covers {narrow}");
        }
        for (wide, narrow) in [
            ("tenants/web", "tenants/*"),
            ("tenants/web", "tenants/w?b"),
            ("t/w?b", "t/w*b"),
            ("t/?", "t/*"),
            ("*", "a/b"),
            ("t/docker-*", "t/*-docker"),
            ("t/a*", "t/?"),
            ("t/*a", "t/*a*"),
        ] {
            assert!(!pattern_covers(wide, narrow), "{wide} does not cover {narrow}");
        }
    }

    /// Covering is exact: pairs the old component-by-component reading missed are found both ways.
    #[test]
    fn covering_is_decided_on_the_globs_automata() {
        for (wide, narrow) in [
            ("*?", "?*"),
            ("?*", "*?"),
            ("*a*", "a*b"),
            ("*a*", "?*a"),
            ("**", "*"),
            ("t/**", "t/*"),
            ("*", "**"),
            ("a*b*c", "a*bc*c"),
            ("*", "?"),
            ("*x*", "*x"),
        ] {
            assert!(pattern_covers(wide, narrow), "{wide} covers {narrow}");
        }
        assert!(!pattern_covers("a*b*c", "a*c"), "ac is matched by a*c, not a*b*c");
        assert!(pattern_covers("*?", "*"), "names are never empty: both match every name");
        assert!(!glob_covers_approx("*?", "?*"), "what the sound reading alone missed");
        // Past the budget, the sound reading answers: identical patterns still cover each other.
        let hard = "*a????????????????????";
        assert_eq!(covers_exactly(hard, &hard.replace('*', "*b*"), 1000), None, "too many states");
        assert!(pattern_covers(hard, hard));
    }

    /// Two patterns overlap when some path matches both: a shortest such path is returned.
    #[test]
    fn overlapping_patterns_give_a_path_both_match() {
        for (a, b, both) in [
            ("t/a*", "t/*b", "t/ab"),
            ("t/*", "t/web", "t/web"),
            ("t/w?b", "t/*e*", "t/web"),
            ("*/x", "t/*", "t/x"),
            ("t/**", "t/?", "t/a"),
        ] {
            let found = patterns_overlap(a, b).unwrap_or_else(|| panic!("{a} and {b} overlap"));
            assert_eq!(found, both, "{a} and {b}");
            assert!(pattern_matches(a, &found) && pattern_matches(b, &found), "{found}");
        }
        for (a, b) in [("t/a*", "t/b*"), ("t/*", "t/*/x"), ("t/?", "t/ab"), ("t/*x", "t/*y"), ("a/*", "b/*")] {
            assert_eq!(patterns_overlap(a, b), None, "{a} and {b}");
        }
    }

    #[test]
    fn finds_directories_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        for d in ["tenants/web", "tenants/db", "tenants/db/inner", "system"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        std::fs::write(root.path().join("tenants/file"), "").unwrap();
        assert_eq!(find_cgroups(root.path(), "tenants/*"), ["tenants/db", "tenants/web"]);
        assert_eq!(find_cgroups(root.path(), "tenants/web"), ["tenants/web"]);
        assert_eq!(find_cgroups(root.path(), "*/inner"), Vec::<String>::new());
        assert_eq!(find_cgroups(root.path(), "*/*/inner"), ["tenants/db/inner"]);
        assert!(find_cgroups(root.path(), "nope/*").is_empty());
        for bad in ["", "/abs", "a//b", "../x", "a/./b"] {
            assert!(check_pattern(bad).is_err(), "{bad}");
        }
    }
}
