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

/// Whether every path `narrow` matches, `wide` matches too (both patterns, same number of
/// components). Sound, not complete: `true` only when that is certain — a `*` of `narrow` is covered
/// only by a `*` of `wide`, a `?` by a `?` or a `*` — so rare equal pairs such as `*?` and `?*` read
/// as not covered.
pub fn pattern_covers(wide: &str, narrow: &str) -> bool {
    let (w, n): (Vec<&str>, Vec<&str>) = (wide.split('/').collect(), narrow.split('/').collect());
    w.len() == n.len() && w.iter().zip(&n).all(|(w, n)| glob_covers(w, n))
}

/// [`pattern_covers`] for one component.
fn glob_covers(wide: &str, narrow: &str) -> bool {
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

/// Whether `name` matches the one-component glob `pattern`.
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
        ] {
            assert!(!pattern_covers(wide, narrow), "{wide} does not cover {narrow}");
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
