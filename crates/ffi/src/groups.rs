//! The controller's groups as the ABI sees them: id ↔ path, for `ioshare_group_find`,
//! `ioshare_group_path`, `ioshare_configure_child`, `ioshare_remove` and the group check on the
//! issue path.
//!
//! Core hands out ids in creation order, may create a path's missing ancestors along with it
//! (IOCost does; the buckets do not), and gives a removed group's id to the next new group. So
//! after a configure that created groups the table is read again from the controller's statistics
//! (indexed by id; a free id has an empty path), off the issue path.

use std::collections::HashMap;

use ioshare_core::{Controller, GroupId, Nanos};

/// Paths of the groups, indexed by id (empty for a free id), and the reverse map.
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
    /// Whether `id` names a live group: the check every IO passes.
    #[inline]
    pub fn is_live(&self, id: u32) -> bool {
        self.paths.get(id as usize).is_some_and(|p| !p.is_empty())
    }

    /// The id of `path`, if the controller has it.
    pub fn find(&self, path: &str) -> Option<u32> {
        self.ids.get(normal(path)).copied()
    }

    /// The path of group `id`, if it exists.
    pub fn path(&self, id: u32) -> Option<&str> {
        self.paths.get(id as usize).map(String::as_str).filter(|p| !p.is_empty())
    }

    /// Records the groups a configure of `path` that returned `id` may have created.
    pub fn learn(&mut self, ctl: &dyn Controller, now: Nanos, path: &str, id: GroupId) {
        if self.path(id.0) == Some(normal(path)) {
            return;
        }
        self.paths = ctl.stats(now).groups.into_iter().map(|g| g.path).collect();
        self.ids =
            self.paths.iter().enumerate().filter(|(_, p)| !p.is_empty()).map(|(i, p)| (p.clone(), i as u32)).collect();
    }

    /// Forgets group `id` (removed from the controller): its id is free.
    pub fn forget(&mut self, id: u32) {
        if let Some(path) = self.paths.get_mut(id as usize) {
            self.ids.remove(path.as_str());
            path.clear();
        }
    }
}
