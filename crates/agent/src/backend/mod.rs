//! How the wanted weights and caps reach the kernel ([`crate::cgroups`] says which backend the host
//! allows, and reads and writes the cgroup files). A [`Backend`] applies a device, takes the cgroups
//! discovery found, runs each period and reports what it holds:
//! - [`kernel`]: cgroup v2 with iocost — the kernel's own IOCost gets the model, QoS and weights;
//! - [`userspace`]: everywhere else — ioshare-core's IOCost planner runs here over per-period counters
//!   and turns each cgroup's budget into blk-throttle limits.

pub(crate) mod kernel;
pub mod throttle;
pub mod userspace;

use std::collections::BTreeMap;
use std::path::Path;

use ioshare_core::Nanos;
use ioshare_host::Recorder;

use crate::cgroups::hierarchy::Hierarchy;
use crate::cgroups::reapply::Overwrites;
use crate::desired::config::DeviceConfig;
use crate::desired::targets::{CgroupSettings, PodRef};
use crate::error::Result;
use crate::report::share::watch::PlannerActivity;
use crate::report::status::DeviceLine;
use crate::report::trace::PeriodRecord;

pub use crate::cgroups::check::BackendKind;

/// The host as a backend reads and writes it: the cgroup tree it controls, the one recording
/// writer every change goes through, the values someone else overwrote, and `/sys/block`.
#[derive(Debug)]
pub struct HostFiles<'a> {
    /// The cgroup tree.
    pub hierarchy: &'a Hierarchy,
    /// Every write goes through it (revert, crash recovery).
    pub recorder: &'a mut Recorder,
    /// Values someone else overwrote, written back.
    pub overwrites: &'a mut Overwrites,
    /// Where device counters are read.
    pub sys_block: &'a Path,
}

/// What a backend controls once discovery has run: the cgroups it writes beyond the targets (the
/// userspace backend's leaves below pods), with their pods, and how many of its cgroups went.
#[derive(Debug, Default)]
pub struct Synced {
    /// Cgroups written beside the targets themselves, with the pod (and container) that owns each.
    pub leaves: Vec<(String, Option<PodRef>)>,
    /// Cgroups dropped because they vanished or are no longer wanted.
    pub gone: usize,
}

/// One way of enforcing the wanted weights and caps on a host's devices. The daemon holds one and
/// calls it at start, at each discovery, each period, each reload and for the status.
pub trait Backend: std::fmt::Debug + Send {
    /// Which backend it is.
    fn kind(&self) -> BackendKind;

    /// Takes the configured devices (at start, and at a reload): a device whose settings are
    /// unchanged is kept as it is (with the new `period`), the others are applied afresh (their
    /// device-wide settings written); returns how many devices were added, removed or changed.
    fn set_devices(
        &mut self,
        host: &mut HostFiles<'_>,
        devices: &[DeviceConfig],
        period: std::time::Duration,
    ) -> Result<usize>;

    /// Takes what discovery found, cgroup by cgroup (`fresh`: cgroups found after the first
    /// discovery, created since the agent started).
    fn sync(
        &mut self,
        host: &mut HostFiles<'_>,
        now: Nanos,
        found: &BTreeMap<String, CgroupSettings>,
        fresh: bool,
    ) -> Result<Synced>;

    /// Forgets the cgroups the last sync did not find (after a reload).
    fn forget_absent(&mut self);

    /// One period: the userspace backend plans and writes limits; the kernel plans by itself (the
    /// kernel backend reads its figures). Returns whether any device had IO (the kernel backend:
    /// whether the kernel reported anything new).
    fn period(&mut self, host: &mut HostFiles<'_>, now: Nanos) -> Result<bool>;

    /// Writes back what someone else overwrote of what the backend holds in force by itself.
    fn reassert(&mut self, host: &mut HostFiles<'_>) -> Result<()>;

    /// Each device's status line.
    fn status(&self, now: Nanos) -> Vec<DeviceLine>;

    /// Whether the backend counts each controlled cgroup as active on each device (the shares'
    /// input), or `None` where the backend does not say (the kernel's).
    fn activity(&self, now: Nanos) -> Option<PlannerActivity>;

    /// Whether it has figures of its own each period (a planner): without, the shares are looked at
    /// again whenever due, not only after a period with IO.
    fn has_figures(&self) -> bool;

    /// Builds a [`PeriodRecord`] per device each period from now on (`--trace`).
    fn set_tracing(&mut self);

    /// The last period's records (tracing on).
    fn take_records(&mut self) -> Vec<PeriodRecord>;
}

/// The devices of `new` that differ from all of `old`, logged, and how many devices were added,
/// removed or changed between the two (a device whose settings changed counts once).
pub(crate) fn device_changes(old: &[DeviceConfig], new: &[DeviceConfig]) -> (Vec<DeviceConfig>, usize) {
    let mut changed = 0;
    for d in old.iter().filter(|d| !new.contains(d)) {
        let still = new.iter().any(|n| n.device.dev == d.device.dev);
        let what = if still { "device settings changed" } else { "device no longer controlled" };
        tracing::info!(device = %d.device.name, dev = %d.device.dev, "{what}");
        changed += usize::from(!still);
    }
    let fresh: Vec<DeviceConfig> = new.iter().filter(|d| !old.contains(d)).cloned().collect();
    for d in &fresh {
        tracing::info!(device = %d.device.name, dev = %d.device.dev, "device settings applied");
    }
    (fresh.clone(), changed + fresh.len())
}
