//! Which tracked cgroups' limit files were written since the last period, so that the userspace
//! backend looks at those (and sets back a value someone else changed) instead of reading every
//! cgroup's limit files on a schedule.
//!
//! The backend writes only the limits that changed; a value someone else wrote (a `daemon-reload`,
//! a runtime) is set back when the backend looks at the file again ([`crate::cgroups::reapply`]). Looking at
//! every cgroup's four v1 throttle files every second was, with 1 000 pods, 4 000 file reads a
//! second and half of the agent's CPU on an idle node. Instead each tracked cgroup's
//! directory is watched with inotify for `IN_MODIFY` (a write to a file in it, by any process: the
//! kernel reports every `write(2)` to a cgroup file) and a cgroup is looked at in the period after
//! one of its limit files was written (the agent's own writes included: one needless look per
//! change), and once when its watch is new (a write before the watch was in place). A value
//! overwritten is thus set back in the next period, where the schedule took up to a second.
//!
//! Without inotify, or once the user's watch limit is reached, every cgroup is looked at in each
//! period [`crate::cgroups::reapply::due`] names, as before.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::inotify::Inotify;

/// The names of the limit files the backend writes (v1 blk-throttle, v2 `io.max`).
fn is_limit_file(name: &[u8]) -> bool {
    name.starts_with(b"blkio.throttle.") || name == b"io.max"
}

/// The watch of the tracked cgroups' limit files.
#[derive(Debug)]
pub struct ThrottleWrites {
    inotify: Option<Inotify>,
    /// Watch of each cgroup (by path relative to the root), and the round it was last synced at.
    watches: HashMap<String, (i32, u64)>,
    by_wd: HashMap<i32, String>,
    /// Cgroups to look at this period.
    due: HashSet<String>,
    round: u64,
}

impl Default for ThrottleWrites {
    fn default() -> ThrottleWrites {
        let inotify = Inotify::new(libc::IN_MODIFY | libc::IN_ONLYDIR)
            .map_err(|e| tracing::warn!("inotify unavailable ({e}): limit files are looked at on a schedule"))
            .ok();
        ThrottleWrites { inotify, watches: HashMap::new(), by_wd: HashMap::new(), due: HashSet::new(), round: 0 }
    }
}

impl ThrottleWrites {
    /// Watches exactly the cgroups `rels` (below `root`) and takes the events since the last call:
    /// which cgroups are [`due`](ThrottleWrites::due) this period.
    pub fn sync<'a>(&mut self, root: &Path, rels: impl Iterator<Item = &'a String>) {
        self.due.clear();
        let Some(inotify) = self.inotify.as_mut() else { return };
        self.round += 1;
        for rel in rels {
            match self.watches.get_mut(rel) {
                Some((_, round)) => *round = self.round,
                None => {
                    // New: looked at once (a write before its watch), watched from now on.
                    self.due.insert(rel.clone());
                    if let Some(wd) = inotify.add(&root.join(rel)) {
                        self.watches.insert(rel.clone(), (wd, self.round));
                        self.by_wd.insert(wd, rel.clone());
                    }
                }
            }
        }
        let round = self.round;
        let by_wd = &mut self.by_wd;
        self.watches.retain(|_, (wd, seen)| {
            if *seen != round {
                inotify.remove(*wd);
                by_wd.remove(wd);
            }
            *seen == round
        });
        let (due, by_wd) = (&mut self.due, &self.by_wd);
        inotify.read(|wd, _, name| {
            if let Some(rel) = by_wd.get(&wd).filter(|_| is_limit_file(name)) {
                due.insert(rel.clone());
            }
        });
    }

    /// Whether cgroup `rel`'s limit files are to be looked at this period; `scheduled` says whether
    /// this is a period of the schedule used where the watch cannot serve.
    pub fn due(&self, rel: &str, scheduled: bool) -> bool {
        match &self.inotify {
            Some(i) if !i.full() => self.due.contains(rel),
            _ => scheduled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cgroup is due once when new, then only after a write to one of its limit files; other
    /// files and other cgroups do not count; a cgroup no longer tracked is no longer watched.
    #[test]
    fn a_write_to_a_limit_file_makes_its_cgroup_due() {
        let root = tempfile::tempdir().unwrap();
        let rels: Vec<String> = ["a", "b"].map(String::from).to_vec();
        for r in &rels {
            std::fs::create_dir(root.path().join(r)).unwrap();
        }
        let mut o = ThrottleWrites::default();
        o.sync(root.path(), rels.iter());
        assert!(o.due("a", false) && o.due("b", false), "new: looked at once");
        o.sync(root.path(), rels.iter());
        assert!(!o.due("a", false) && !o.due("b", false), "nothing written");
        std::fs::write(root.path().join("a/io.max"), "8:0 riops=10").unwrap();
        std::fs::write(root.path().join("b/io.stat"), "not a limit").unwrap();
        o.sync(root.path(), rels.iter());
        assert!(o.due("a", false), "its limit file written");
        assert!(!o.due("b", false), "not a limit file");
        o.sync(root.path(), rels[1..].iter());
        assert_eq!(o.watches.len(), 1, "a no longer watched");
        std::fs::write(root.path().join("a/io.max"), "8:0 riops=20").unwrap();
        o.sync(root.path(), rels[1..].iter());
        assert!(!o.due("a", false));
    }
}
