//! The controller's groups as the ABI sees them: id ↔ path, for `ioshare_group_find`,
//! `ioshare_group_path`, `ioshare_configure_child` and the group check on the issue path.
//!
//! Core hands out ids in creation order and may create a path's missing ancestors along with it
//! (IOCost does; the buckets do not). After a configure that created groups, the new ids are
//! matched to the missing prefixes of the path when their number says so, and read from the
//! controller's statistics otherwise.

use std::collections::HashMap;

use ioshare_core::{Controller, GroupId, Nanos};

/// Paths of the groups, indexed by id, and the reverse map.
#[derive(Debug, Default)]
pub struct GroupTable {
    paths: Vec<String>,
    ids: HashMap<String, u32>,
}

/// A group path as core keys it: without leading or trailing '/'.
fn normal(path: &str) -> &str {
    path.trim_matches('/')
}

impl GroupTable {
    /// Number of groups (ids are `0..len`).
    #[inline]
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// True when the controller has no group.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The id of `path`, if the controller has it.
    pub fn find(&self, path: &str) -> Option<u32> {
        self.ids.get(normal(path)).copied()
    }

    /// The path of group `id`, if it exists.
    pub fn path(&self, id: u32) -> Option<&str> {
        self.paths.get(id as usize).map(String::as_str)
    }

    /// Records the groups a configure of `path` that returned `id` created.
    pub fn learn(&mut self, ctl: &dyn Controller, now: Nanos, path: &str, id: GroupId) {
        let created = (id.index() + 1).saturating_sub(self.paths.len());
        if created == 0 {
            return;
        }
        let path = normal(path);
        let prefixes: Vec<&str> = path
            .match_indices('/')
            .map(|(i, _)| &path[..i])
            .chain([path])
            .filter(|p| !self.ids.contains_key(*p))
            .collect();
        if created == 1 {
            self.add(path);
        } else if created == prefixes.len() {
            prefixes.into_iter().for_each(|p| self.add(p));
        } else {
            let stats = ctl.stats(now);
            stats.groups[self.paths.len()..].iter().for_each(|g| self.add(&g.path));
        }
    }

    fn add(&mut self, path: &str) {
        self.ids.insert(path.to_string(), self.paths.len() as u32);
        self.paths.push(path.to_string());
    }
}
