//! The cgroup tree of a real hierarchy as the share arithmetic sees it on one device.
//!
//! - Weights: a cgroup a rule manages has the rule's weight (what the agent applies); any other the
//!   weight the host gives it on the device, from the file of whatever weighs cgroups there
//!   ([`weight_file`]: `io.weight` under iocost, BFQ's own files under BFQ), else the default 100.
//! - Activity: an [`Activity`] decides; `agent check` has one look at the host ([`PresentNow`]: the
//!   cgroup holds processes or its counters show IO on the device), the running agent its periods'
//!   (see [`super::watch`]).
//! - The `io` controller: cgroup v2's `cgroup.subtree_control` of the parent (always on in v1).
//!
//! Every answer is cached for the life of the view (one report).

use std::collections::{BTreeMap, HashMap};

use ioshare_core::iocost::line::DevNum;
use ioshare_host::{child_cgroups, populated, subtree_control, BlockQueue, WeightFile, IO_WEIGHT_DEFAULT};

use super::tree::TreeView;
use crate::cgroups::hierarchy::{Flavor, Hierarchy};

/// Decides whether a cgroup does IO on a device.
pub trait Activity {
    /// Whether cgroup `rel` of `hierarchy` is active on `dev`.
    fn active(&mut self, hierarchy: &Hierarchy, dev: DevNum, rel: &str) -> bool;
}

/// Active = processes live in it (or below it), or its counters show IO on the device: one look at
/// the host, for `agent check`. (v1 blk-throttle counts a device only once some limit was set on
/// it, so there processes decide.)
#[derive(Clone, Copy, Debug, Default)]
pub struct PresentNow;

impl Activity for PresentNow {
    fn active(&mut self, hierarchy: &Hierarchy, dev: DevNum, rel: &str) -> bool {
        populated(&hierarchy.dir(rel)) || io_count(hierarchy, dev, rel) > 0
    }
}

/// IOs (reads and writes) cgroup `rel` did on `dev` so far, per its recursive counters.
pub fn io_count(hierarchy: &Hierarchy, dev: DevNum, rel: &str) -> u64 {
    hierarchy.usage(rel).and_then(|s| s.device(dev).map(|d| d.ios.read + d.ios.write)).unwrap_or(0)
}

/// The file the weights of cgroups on a device with `queue` are read from in `flavor`: iocost's
/// `io.weight` where iocost is on, BFQ's where BFQ schedules it, none elsewhere.
pub fn weight_file(flavor: Flavor, queue: &BlockQueue) -> Option<WeightFile> {
    match (flavor, queue.iocost, queue.bfq()) {
        (Flavor::V2, true, _) => Some(WeightFile::IoCost),
        (Flavor::V2, false, true) => Some(WeightFile::BfqV2),
        (Flavor::V1, _, true) => Some(WeightFile::BfqV1),
        _ => None,
    }
}

/// A hierarchy on one device.
pub struct HostView<'a> {
    hierarchy: &'a Hierarchy,
    dev: DevNum,
    managed: &'a BTreeMap<String, u32>,
    weights: Option<WeightFile>,
    activity: &'a mut dyn Activity,
    children: HashMap<String, Vec<String>>,
    active: HashMap<String, bool>,
    host_weights: HashMap<String, u32>,
    controller: HashMap<String, bool>,
}

impl<'a> HostView<'a> {
    /// The view of `hierarchy` on `dev`; `managed` maps the cgroups the rules manage to their rule's
    /// weight; unmanaged weights come from `weights`.
    pub fn new(
        hierarchy: &'a Hierarchy,
        dev: DevNum,
        managed: &'a BTreeMap<String, u32>,
        weights: Option<WeightFile>,
        activity: &'a mut dyn Activity,
    ) -> Self {
        HostView {
            hierarchy,
            dev,
            managed,
            weights,
            activity,
            children: HashMap::new(),
            active: HashMap::new(),
            host_weights: HashMap::new(),
            controller: HashMap::new(),
        }
    }
}

impl TreeView for HostView<'_> {
    fn children(&mut self, parent: &str) -> Vec<String> {
        let dir = self.hierarchy.dir(parent);
        let join = |name: String| if parent.is_empty() { name } else { format!("{parent}/{name}") };
        self.children
            .entry(parent.to_string())
            .or_insert_with(|| child_cgroups(&dir).into_iter().map(join).collect())
            .clone()
    }

    fn weight(&mut self, rel: &str) -> u32 {
        if let Some(&w) = self.managed.get(rel) {
            return w;
        }
        let (dir, dev, file) = (self.hierarchy.dir(rel), self.dev, self.weights);
        *self
            .host_weights
            .entry(rel.to_string())
            .or_insert_with(|| file.and_then(|f| f.read(&dir, dev)).unwrap_or(IO_WEIGHT_DEFAULT))
    }

    fn active(&mut self, rel: &str) -> bool {
        if let Some(&a) = self.active.get(rel) {
            return a;
        }
        let a = self.activity.active(self.hierarchy, self.dev, rel);
        self.active.insert(rel.to_string(), a);
        a
    }

    fn controller_on(&mut self, parent: &str) -> bool {
        if self.hierarchy.flavor == Flavor::V1 {
            return true;
        }
        let dir = self.hierarchy.dir(parent);
        // Unreadable (a mock tree, a cgroup that just vanished): not reported as off.
        *self
            .controller
            .entry(parent.to_string())
            .or_insert_with(|| subtree_control(&dir).is_none_or(|c| c.iter().any(|c| c == "io")))
    }
}
