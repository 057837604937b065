//! Group settings and the path → id registry every controller shares.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::io::GroupId;
use crate::limit::Limits;

/// Smallest weight (kernel `CGROUP_WEIGHT_MIN`).
pub const WEIGHT_MIN: u32 = 1;
/// Default weight (kernel `CGROUP_WEIGHT_DFL`).
pub const WEIGHT_DEFAULT: u32 = 100;
/// Largest weight (kernel `CGROUP_WEIGHT_MAX`).
pub const WEIGHT_MAX: u32 = 10_000;

/// What a caller can set on a group. Controllers ignore the settings they do not implement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// Proportional weight, 1..=10000.
    pub weight: u32,
    /// Rate limits (token or leaky bucket, by controller); nothing limited by default.
    pub limits: Limits,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings { weight: WEIGHT_DEFAULT, limits: Limits::default() }
    }
}

impl GroupSettings {
    /// Settings with the given weight and defaults elsewhere.
    pub fn weight(weight: u32) -> Self {
        GroupSettings { weight, ..GroupSettings::default() }
    }

    /// Checks every field, naming the group in the error.
    pub fn validate(&self, path: &str) -> Result<()> {
        if !(WEIGHT_MIN..=WEIGHT_MAX).contains(&self.weight) {
            return Err(Error::InvalidWeight { path: path.to_string(), weight: self.weight });
        }
        self.limits.validate().map_err(|e| e.for_group(path))
    }
}

/// Splits a group path into its components, rejecting empty ones.
pub fn path_components(path: &str) -> Result<Vec<&str>> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    if path.trim_matches('/').is_empty() || parts.iter().any(|p| p.is_empty()) {
        return Err(Error::InvalidPath(path.to_string()));
    }
    Ok(parts)
}

/// Registry of group paths: ids are indices in creation order. A removed group's id is free (its
/// path empty) until a new group takes it, so ids stay small however many groups come and go.
#[derive(Clone, Debug, Default)]
pub struct GroupNames {
    paths: Vec<String>,
    ids: HashMap<String, GroupId>,
    free: Vec<GroupId>,
}

impl GroupNames {
    /// The id of `path`, if registered.
    pub fn get(&self, path: &str) -> Option<GroupId> {
        self.ids.get(path.trim_matches('/')).copied()
    }

    /// The id of `path`, registering it (not its ancestors) if new. The flag says whether it was new.
    pub fn insert(&mut self, path: &str) -> Result<(GroupId, bool)> {
        path_components(path)?;
        let path = path.trim_matches('/');
        if let Some(id) = self.ids.get(path) {
            return Ok((*id, false));
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.paths[id.index()] = path.to_string();
                id
            }
            None => {
                self.paths.push(path.to_string());
                GroupId(self.paths.len() as u32 - 1)
            }
        };
        self.ids.insert(path.to_string(), id);
        Ok((id, true))
    }

    /// Unregisters `path`, which must have no registered descendant and pass the controller's
    /// `check` (given its id and normal path); its id becomes free.
    pub fn remove(&mut self, path: &str, check: impl FnOnce(GroupId, &str) -> Result<()>) -> Result<GroupId> {
        let id = self.require(path)?;
        let path = self.paths[id.index()].clone();
        let prefix = format!("{path}/");
        if self.ids.keys().any(|p| p.starts_with(&prefix)) {
            return Err(Error::GroupBusy { path, reason: "it has child groups: remove them first".into() });
        }
        check(id, &path)?;
        self.ids.remove(&path);
        self.paths[id.index()].clear();
        self.free.push(id);
        Ok(id)
    }

    /// Whether `id` names a group now (not a removed one's free id).
    pub fn is_live(&self, id: GroupId) -> bool {
        self.paths.get(id.index()).is_some_and(|p| !p.is_empty())
    }

    /// The id of `path` or [`Error::UnknownGroup`].
    pub fn require(&self, path: &str) -> Result<GroupId> {
        self.get(path).ok_or_else(|| Error::UnknownGroup(path.to_string()))
    }

    /// The path of a registered group.
    pub fn path(&self, id: GroupId) -> &str {
        &self.paths[id.index()]
    }

    /// Number of ids handed out (free ones of removed groups included).
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// True when no group is registered.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_bounds_are_enforced() {
        assert!(GroupSettings::weight(0).validate("a").is_err());
        assert!(GroupSettings::weight(10_001).validate("a").is_err());
        assert!(GroupSettings::weight(1).validate("a").is_ok());
        assert!(GroupSettings::weight(10_000).validate("a").is_ok());
        let msg = GroupSettings::weight(0).validate("web").unwrap_err().to_string();
        assert!(msg.contains("web") && msg.contains("1 and 10000"), "{msg}");
    }

    #[test]
    fn limits_are_validated_naming_group_and_knob() {
        let limits = "iops-total=1000,iops-total-max=500".parse().unwrap();
        let msg = GroupSettings { limits, ..GroupSettings::default() }.validate("web").unwrap_err().to_string();
        assert!(msg.contains("group 'web'") && msg.contains("iops-total-max (500)"), "{msg}");
    }

    #[test]
    fn paths_are_normalised_and_checked() {
        let mut names = GroupNames::default();
        let (a, new) = names.insert("/workload/web/").unwrap();
        assert!(new);
        assert_eq!(names.insert("workload/web").unwrap(), (a, false));
        assert_eq!(names.path(a), "workload/web");
        assert!(names.insert("a//b").is_err());
        assert!(names.insert("").is_err());
        assert!(matches!(names.require("nope"), Err(Error::UnknownGroup(_))));
    }

    #[test]
    fn a_removed_groups_id_is_taken_by_the_next_new_group() {
        let mut names = GroupNames::default();
        let (a, _) = names.insert("a").unwrap();
        let (ab, _) = names.insert("a/b").unwrap();
        let ok = |_: GroupId, _: &str| Ok(());
        let msg = names.remove("a", ok).unwrap_err().to_string();
        assert!(msg.contains("'a'") && msg.contains("child groups"), "{msg}");
        let refused = names.remove("a/b", |_, p| Err(Error::GroupBusy { path: p.into(), reason: "busy".into() }));
        assert!(refused.is_err() && names.is_live(ab));
        assert_eq!(names.remove("/a/b/", ok).unwrap(), ab);
        assert!(!names.is_live(ab) && names.get("a/b").is_none() && names.is_live(a));
        assert!(matches!(names.remove("a/b", ok), Err(Error::UnknownGroup(_))));
        assert_eq!(names.insert("c").unwrap(), (ab, true));
        assert_eq!((names.path(ab), names.len()), ("c", 2));
    }
}
