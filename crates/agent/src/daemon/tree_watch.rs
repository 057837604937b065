//! When the discovery must look at the tree again: told by the kernel (inotify) instead of by
//! looking.
//!
//! A discovery with 1 000 pods costs a `stat` per pod and a directory read per pod (the userspace
//! backend plans the cgroups in each pod), then the tracking of every cgroup found; polled every
//! [`crate::daemon::DISCOVERY_EVERY`] that was a third of the agent's CPU on a node where nothing
//! changed. So the agent runs a discovery only when one of its inputs changed ([`Discovery::due`],
//! checked at that same pace, so a cgroup is found as soon as before):
//!
//! - a directory event: each discovery watches ([`TreeWatch`]) every pod's cgroup that exists (a
//!   container's cgroup made or removed in it; its own removal) and, for one that does not, the
//!   nearest directory above it that does (its creation, or its QoS class's); a cgroup made before
//!   its watch was in place is not missed: a discovery that added a watch is followed by another;
//! - an update of the pods from the API server;
//! - the rules' matches: the configuration's glob rules are matched every time, as before (cheap
//!   for the few cgroups rules name), and a change in what they match is a change;
//! - always, when the agent isolates memory (the memory guard matches in its own hierarchy, not
//!   watched), when inotify cannot be used (no instance, the user's watch limit reached: logged
//!   once), or after an event queue overflow;
//! - and a full rescan every [`RESCAN_EVERY`] whatever happened: the safety net for an event missed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::desired::targets::CgroupSettings;
use crate::inotify::Inotify;

/// The longest time between two discoveries, whatever the events say.
pub const RESCAN_EVERY: Duration = Duration::from_secs(10);

/// The events that say a directory's set of subdirectories changed, or that it went.
const TREE_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

/// Directories watched for subdirectories made and removed.
#[derive(Debug)]
pub struct TreeWatch {
    inotify: Inotify,
    watches: HashMap<PathBuf, i32>,
}

impl TreeWatch {
    /// A new instance, or why there is none.
    pub fn new() -> std::io::Result<TreeWatch> {
        Ok(TreeWatch { inotify: Inotify::new(TREE_EVENTS)?, watches: HashMap::new() })
    }

    /// Watches exactly `dirs` from now on. True when a directory is newly watched (it may have
    /// changed before its watch was in place: the caller looks at the tree again) or could not be.
    pub fn watch(&mut self, dirs: &BTreeSet<PathBuf>) -> bool {
        let inotify = &mut self.inotify;
        self.watches.retain(|dir, wd| {
            let keep = dirs.contains(dir);
            if !keep {
                inotify.remove(*wd);
            }
            keep
        });
        let new: Vec<&PathBuf> = dirs.iter().filter(|d| !self.watches.contains_key(*d)).collect();
        for dir in &new {
            if let Some(wd) = self.inotify.add(dir) {
                self.watches.insert(dir.to_path_buf(), wd);
            }
        }
        !new.is_empty()
    }

    /// Whether the watch limit was reached (events do not cover everything).
    pub fn full(&self) -> bool {
        self.inotify.full()
    }

    /// Whether any event came since the last call (all waiting events are read); a watch removed
    /// (`IN_IGNORED`: by [`watch`](TreeWatch::watch), or after its directory's own removal event)
    /// is none.
    pub fn changed(&mut self) -> bool {
        let mut any = false;
        self.inotify.read(|_, mask, _| any |= mask & libc::IN_IGNORED == 0);
        any
    }
}

/// Whether a discovery is due (see the module comment), and the watches after each.
#[derive(Debug)]
pub struct Discovery {
    watch: Option<TreeWatch>,
    /// What the rules matched at the last look.
    rules: Option<BTreeMap<String, usize>>,
    /// The last discovery added a watch: look again.
    again: bool,
    last_full: Option<Instant>,
}

impl Default for Discovery {
    fn default() -> Discovery {
        let watch = TreeWatch::new()
            .map_err(|e| tracing::warn!("inotify unavailable ({e}): the tree is looked at every discovery"))
            .ok();
        Discovery { watch, rules: None, again: true, last_full: None }
    }
}

impl Discovery {
    /// Whether to run a discovery at `now`: `rules` are the rules' matches now, `pods_changed`
    /// whether the pods' updates changed their targets, `always` whether an input is not watched
    /// (memory isolation).
    pub fn due(&mut self, now: Instant, rules: BTreeMap<String, usize>, pods_changed: bool, always: bool) -> bool {
        let events = self.watch.as_mut().is_none_or(|w| w.changed() || w.full());
        let rules_changed = self.rules.as_ref() != Some(&rules);
        self.rules = Some(rules);
        let rescan = self.last_full.is_none_or(|t| now.duration_since(t) >= RESCAN_EVERY);
        events || rules_changed || pods_changed || always || rescan || std::mem::take(&mut self.again)
    }

    /// After a discovery at `now` under `root` with the pods' targets `pods`: watches each pod
    /// cgroup that exists, and the nearest existing directory above each that does not.
    pub fn discovered(&mut self, now: Instant, root: &Path, pods: &[(String, CgroupSettings)]) {
        self.last_full = Some(now);
        let Some(w) = self.watch.as_mut() else { return };
        let dirs: BTreeSet<PathBuf> = pods
            .iter()
            .filter_map(|(rel, _)| {
                root.join(rel)
                    .ancestors()
                    .take_while(|a| a.starts_with(root))
                    .find(|a| a.is_dir())
                    .map(Path::to_path_buf)
            })
            .collect();
        self.again |= w.watch(&dirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(rel: &str) -> (String, CgroupSettings) {
        let owner = crate::desired::targets::Owner::Rule(0);
        (rel.to_string(), CgroupSettings { weight: 100, limits: Default::default(), memory: None, inner: false, owner })
    }

    /// After a discovery nothing is due until a pod's cgroup (or its QoS class) is made or removed,
    /// a pod update comes, or the rules match otherwise; an event missed (read by someone else
    /// here) is caught by the rescan.
    #[test]
    fn a_discovery_is_due_on_events_and_at_the_rescan() {
        let root = tempfile::tempdir().unwrap();
        let pods = [pod("kubepods/besteffort/poda"), pod("kubepods/besteffort/podb")];
        std::fs::create_dir_all(root.path().join("kubepods")).unwrap();
        let (mut d, t0) = (Discovery::default(), Instant::now());
        let quiet = |d: &mut Discovery, at: Instant| d.due(at, BTreeMap::new(), false, false);
        assert!(quiet(&mut d, t0), "the first");
        d.discovered(t0, root.path(), &pods);
        assert!(quiet(&mut d, t0), "a new watch (kubepods): once more");
        d.discovered(t0, root.path(), &pods);
        assert!(!quiet(&mut d, t0), "nothing changed");
        // The QoS class, then a pod's cgroup in it, then a container's cgroup in the pod.
        for dir in ["kubepods/besteffort", "kubepods/besteffort/poda", "kubepods/besteffort/poda/c"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
            assert!(quiet(&mut d, t0), "{dir} made");
            d.discovered(t0, root.path(), &pods);
            let _ = quiet(&mut d, t0); // the look again after a new watch
            d.discovered(t0, root.path(), &pods);
            assert!(!quiet(&mut d, t0), "settled after {dir}");
        }
        std::fs::remove_dir(root.path().join("kubepods/besteffort/poda/c")).unwrap();
        assert!(quiet(&mut d, t0), "a container's cgroup removed");
        d.discovered(t0, root.path(), &pods);
        assert!(d.due(t0, BTreeMap::new(), true, false), "a pod update");
        assert!(d.due(t0, BTreeMap::from([("sys".to_string(), 0)]), false, false), "the rules match otherwise");
        assert!(d.due(t0, BTreeMap::from([("sys".to_string(), 0)]), false, true), "always (memory isolation)");
        // An event missed: podb made while its events are taken by another reader.
        std::fs::create_dir(root.path().join("kubepods/besteffort/podb")).unwrap();
        assert!(d.watch.as_mut().unwrap().changed(), "the event, taken away");
        let rules = || BTreeMap::from([("sys".to_string(), 0)]);
        assert!(!d.due(t0 + RESCAN_EVERY / 2, rules(), false, false), "missed until the rescan");
        assert!(d.due(t0 + RESCAN_EVERY, rules(), false, false), "the rescan");
    }

    /// A subdirectory made in a watched directory is an event; one made in an unwatched one is not;
    /// a removed watched directory is one.
    #[test]
    fn made_and_removed_directories_are_events() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let mut w = TreeWatch::new().unwrap();
        assert!(w.watch(&BTreeSet::from([a.clone()])), "a new watch");
        assert!(!w.watch(&BTreeSet::from([a.clone()])), "the same set: nothing new");
        assert!(!w.changed());
        std::fs::create_dir(b.join("x")).unwrap();
        assert!(!w.changed(), "b is not watched");
        std::fs::create_dir(a.join("x")).unwrap();
        assert!(w.changed());
        assert!(!w.changed(), "read once");
        std::fs::remove_dir(a.join("x")).unwrap();
        std::fs::remove_dir(&a).unwrap();
        assert!(w.changed());
        assert_eq!(w.watches.len(), 1);
    }
}
