//! Kubernetes label selectors in their text form (as `kubectl -l` takes them), and the `*`/`?` name
//! globs of the agent config's policies.
//!
//! `a=b`, `a==b`, `a!=b`, `a` (exists), `!a` (does not exist), `a in (x,y)`, `a notin (x,y)`, joined
//! by commas; every requirement must hold. An empty selector matches everything.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// One requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    /// The label has one of these values.
    In(String, Vec<String>),
    /// The label is missing or has none of these values.
    NotIn(String, Vec<String>),
    /// The label exists.
    Exists(String),
    /// The label does not exist.
    Missing(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Missing(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    text: String,
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A label key or value: letters, digits, `-`, `_`, `.`, and `/` in keys.
fn check_token<'a>(what: &str, s: &'a str, key: bool) -> Result<&'a str, String> {
    let s = s.trim();
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') || (key && b == b'/');
    if (key && s.is_empty()) || !s.bytes().all(ok) {
        return Err(format!("'{s}' is not a label {what}"));
    }
    Ok(s)
}

/// Splits at commas outside parentheses.
fn split_requirements(s: &str) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    let part = part.trim();
    if part.is_empty() {
        return Err("an empty requirement (two commas in a row?)".into());
    }
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::Missing(check_token("key", key, true)?.to_string()));
    }
    for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, v) = (check_token("key", k, true)?.to_string(), check_token("value", v, false)?.to_string());
            return Ok(if negated { Requirement::NotIn(k, vec![v]) } else { Requirement::In(k, vec![v]) });
        }
    }
    if let Some(open) = part.find('(') {
        let head = part[..open].trim();
        let list = part[open + 1..].strip_suffix(')').ok_or_else(|| format!("'{part}': expected ')' at the end"))?;
        let values =
            list.split(',').map(|v| check_token("value", v, false).map(str::to_string)).collect::<Result<_, _>>()?;
        let (key, op) =
            head.rsplit_once(char::is_whitespace).ok_or_else(|| format!("'{part}': expected KEY in (..)"))?;
        let key = check_token("key", key, true)?.to_string();
        return match op {
            "in" => Ok(Requirement::In(key, values)),
            "notin" => Ok(Requirement::NotIn(key, values)),
            _ => Err(format!("'{part}': unknown operator '{op}' (in, notin)")),
        };
    }
    Ok(Requirement::Exists(check_token("key", part, true)?.to_string()))
}

impl FromStr for Selector {
    type Err = String;

    /// Parses the text form; the error names the selector and what is wrong, in one line.
    fn from_str(s: &str) -> Result<Selector, String> {
        let wrap = |e: String| format!("invalid label selector '{s}': {e}");
        let requirements = if s.trim().is_empty() {
            Vec::new()
        } else {
            split_requirements(s)
                .map_err(wrap)?
                .into_iter()
                .map(parse_requirement)
                .collect::<Result<_, _>>()
                .map_err(wrap)?
        };
        Ok(Selector { text: s.trim().to_string(), requirements })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn each_operator_matches_as_kubectl_does() {
        let l = labels(&[("tier", "batch"), ("team", "a"), ("example.com/zone", "x")]);
        let cases = [
            ("", true),
            ("tier=batch", true),
            ("tier==batch", true),
            ("tier=web", false),
            ("tier!=web", true),
            ("tier!=batch", false),
            ("missing!=x", true),
            ("tier", true),
            ("missing", false),
            ("!missing", true),
            ("!tier", false),
            ("tier in (web, batch)", true),
            ("tier in (web)", false),
            ("missing in (x)", false),
            ("tier notin (web,db)", true),
            ("tier notin (batch)", false),
            ("missing notin (x)", true),
            ("tier=batch,team=a", true),
            ("tier=batch, team=b", false),
            ("example.com/zone=x,tier in (batch,web),!gpu", true),
            ("team=", false),
        ];
        for (text, expect) in cases {
            let s: Selector = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.matches(&l), expect, "{text}");
        }
        let empty: Selector = "tier=".parse().unwrap();
        assert!(empty.matches(&labels(&[("tier", "")])));
    }

    #[test]
    fn malformed_selectors_are_refused_in_one_line() {
        for (text, expect) in [
            ("tier=batch,,team=a", "an empty requirement"),
            ("tier in (a,b", "unbalanced parentheses"),
            ("tier in a,b)", "unbalanced parentheses"),
            ("tier in ((a))", "unbalanced parentheses"),
            ("tier within (a)", "unknown operator 'within'"),
            ("(a)", "expected KEY in"),
            ("tier in (a) x", "expected ')'"),
            ("=batch", "'' is not a label key"),
            ("tier=a b", "'a b' is not a label value"),
            ("ti er", "'ti er' is not a label key"),
            ("!", "'' is not a label key"),
        ] {
            let e = text.parse::<Selector>().unwrap_err();
            assert!(e.starts_with(&format!("invalid label selector '{text}': ")), "{e}");
            assert!(e.contains(expect) && !e.contains('\n'), "{text}: expected '{expect}' in '{e}'");
        }
    }

    #[test]
    fn globs_match_whole_names() {
        for (p, n, expect) in [
            ("team-*", "team-a", true),
            ("team-*", "team-", true),
            ("team-*", "teams", false),
            ("*", "", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*-prod", "shop-prod", true),
            ("*-prod", "shop-prod-2", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("kube-system", "kube-system", true),
            ("kube-system", "kube-system2", false),
        ] {
            assert_eq!(ioshare_host::glob_matches(p, n), expect, "{p} vs {n}");
        }
    }
}
