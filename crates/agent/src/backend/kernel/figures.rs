//! The kernel's own IOCost figures, for the kernel backend's status and metrics: per device vrate,
//! busy level, missed-latency ppm, request-wait %, lagging/short/donating counts; per cgroup weights,
//! hweights, usage, wait, debt and delay. They are read by ioshare-observe's [`IocostObserver`] (BPF
//! programs on the kernel's `iocost_*` tracepoints, what `ioshare observe --iocost` shows), started
//! with the backend's first devices and read once a period.
//!
//! Where it cannot start (not root, no BTF, a kernel without the tracepoints, no cgroup v2 `io`) or a
//! reading fails, the reason is logged once as a warning and put in each device's status line; the
//! backend works on without those figures. A cgroup the kernel never reported (no IO yet), or one
//! removed since its last event (the observer leaves it out), simply has none; the rest are served.

use std::collections::HashMap;

use ioshare_core::iocost::line::DevNum;
use ioshare_observe::iocost::{iocost_enabled, IocDevice, IocGroup, IocostObserver, IocostSnapshot};

/// The observer and its last reading, indexed by device and cgroup.
#[derive(Debug, Default)]
pub(crate) struct KernelFigures {
    /// The running observer (`None`: not started yet, or it could not start).
    observer: Option<IocostObserver>,
    /// Whether a start was tried.
    tried: bool,
    /// Why there are no figures (the observer did not start, or its last reading failed).
    why_not: Option<String>,
    /// The last reading.
    snap: IocostSnapshot,
    /// `snap.groups` by (`MAJ:MIN`, path in the v2 hierarchy).
    index: HashMap<(String, String), usize>,
    /// The kernel's events counted in the last reading: a change means it reported something new.
    events: u64,
}

impl KernelFigures {
    /// Starts the observer once, for devices `devs` (nothing without devices): a failure is one
    /// warning line and no figures.
    pub(crate) fn start_once(&mut self, devs: &[DevNum]) {
        let Some(first) = devs.first().filter(|_| !self.tried) else { return };
        self.tried = true;
        let started = match iocost_enabled(first.major, first.minor) {
            None => Err("no cgroup v2 io controller here (/sys/fs/cgroup/io.cost.qos cannot be read)".to_string()),
            Some(_) => IocostObserver::start().map_err(|e| e.to_string()),
        };
        match started {
            Ok(observer) => self.observer = Some(observer),
            Err(e) => self.unavailable(format!("the kernel's IOCost figures are not shown: {e}")),
        }
    }

    /// Reads the observer again; returns whether the kernel reported anything since the last reading.
    pub(crate) fn refresh(&mut self) -> bool {
        let Some(observer) = self.observer.as_mut() else { return false };
        match observer.snapshot() {
            Ok(snap) => self.take(snap),
            Err(e) => {
                // Stale figures would read as current: none until a reading succeeds again.
                self.snap = IocostSnapshot::default();
                self.index.clear();
                if self.why_not.is_none() {
                    self.unavailable(format!("the kernel's IOCost figures could not be read: {e}"));
                }
                false
            }
        }
    }

    /// Makes `snap` the reading served; returns whether it counts events the last one did not.
    fn take(&mut self, snap: IocostSnapshot) -> bool {
        self.why_not = None;
        self.index = snap.groups.iter().enumerate().map(|(i, g)| ((g.device.clone(), g.cgroup.clone()), i)).collect();
        let events = event_count(&snap);
        self.snap = snap;
        std::mem::replace(&mut self.events, events) != events
    }

    /// Device `dev`'s controller, if the kernel reported it.
    pub(crate) fn device(&self, dev: DevNum) -> Option<&IocDevice> {
        let dev = dev.to_string();
        self.snap.devices.iter().find(|d| d.device == dev)
    }

    /// Cgroup `rel` (relative to the v2 root) on device `dev`, if the kernel reported it.
    pub(crate) fn group(&self, dev: DevNum, rel: &str) -> Option<&IocGroup> {
        let key = (dev.to_string(), format!("/{}", rel.trim_start_matches('/')));
        self.index.get(&key).map(|&i| &self.snap.groups[i])
    }

    /// What device `dev`'s status line says when it has no figures: why, or that the kernel has not
    /// reported the device yet.
    pub(crate) fn note(&self, dev: DevNum) -> String {
        match (&self.why_not, self.device(dev)) {
            (Some(why), _) => why.clone(),
            (None, None) if self.observer.is_some() => {
                "the kernel's IOCost has not reported this device yet (it does once the device has IO)".into()
            }
            _ => String::new(),
        }
    }

    fn unavailable(&mut self, why: String) {
        tracing::warn!("{why}");
        self.why_not = Some(why);
    }
}

/// Every event the reading counts: the devices' vrate events and the cgroups' own.
fn event_count(snap: &IocostSnapshot) -> u64 {
    let devices: u64 = snap.devices.iter().map(|d| d.vrate_events).sum();
    let groups: u64 = snap
        .groups
        .iter()
        .map(|g| {
            let e = g.events;
            e.activated + e.idled + e.shortage + e.transfer + e.adjust + e.forgiven
        })
        .sum();
    devices + groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::status::fixture::{iocost_device, iocost_group};

    const DEV: DevNum = DevNum { major: 7, minor: 3 };

    #[test]
    fn cgroups_are_found_by_device_and_path_and_new_events_count_as_activity() {
        let mut figures = KernelFigures::default();
        let snap = IocostSnapshot {
            devices: vec![iocost_device()],
            groups: vec![iocost_group("/tenants/a"), iocost_group("/tenants/b")],
            ..IocostSnapshot::default()
        };
        assert!(figures.take(snap.clone()), "the first reading is new");
        assert_eq!(figures.group(DEV, "tenants/a").map(|g| g.cgroup.as_str()), Some("/tenants/a"));
        assert!(figures.group(DevNum { major: 7, minor: 4 }, "tenants/a").is_none(), "another device");
        assert_eq!(figures.device(DEV).map(|d| d.vrate_pct), Some(87.5));
        assert!(!figures.take(snap.clone()), "nothing new: the same events");
        // b removed (the observer leaves it out): a is still served, b has no figures.
        let mut later = IocostSnapshot { groups: vec![iocost_group("/tenants/a")], ..snap };
        later.groups[0].events.adjust += 1;
        assert!(figures.take(later), "an event since");
        assert!(figures.group(DEV, "tenants/a").is_some() && figures.group(DEV, "tenants/b").is_none());
        // Without an observer: no figures and no note until a start was tried.
        assert_eq!(KernelFigures::default().note(DEV), "");
    }
}
