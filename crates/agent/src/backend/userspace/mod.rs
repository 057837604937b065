//! The userspace backend: ioshare-core's IOCost planner over real cgroups, one controller per device.
//!
//! This is the third driver of the controller (after the simulator and the engine). Its "device" is
//! a kernel block device, its "completions" are per-period counters, its "dispatch" is a limit
//! written to a cgroup file. One [`DevicePlanner`] per device runs each period, in this order:
//! 1. [`read`]: the device's counters and each tracked cgroup's since the last period, priced at the
//!    cost model with each cgroup's sequential share from the eBPF observer ([`io_mix`]);
//! 2. [`classify`]: each group held by its limit, by a cap of its own, competing at the busy device,
//!    or waiting — a [`classify::GroupState`] — and its charge to the planner
//!    ([`IoCost::charge_period`](ioshare_core::IoCost::charge_period));
//! 3. [`follow`]: latency verdicts and device waits (rq-wait) reported to the planner; without a
//!    latency target, vrate brought down to what the device did;
//! 4. the planner's own period ([`IoCost::end_period`](ioshare_core::IoCost::end_period): hweights,
//!    donation, vrate), then [`budget`]: what each group may use over the next period;
//! 5. [`write`]: each budget turned into blk-throttle limits ([`crate::backend::throttle`]), written
//!    where they changed (on cgroup v2 shaped for Linux 6.1's blk-throttle first, [`io_max`]).
//!
//! With `--trace` each period also leaves a [`PeriodRecord`] of all this, and the status notes a
//! group below its share that no limit held back, with its threads' CPU ([`cpu`]). How each
//! threshold of these steps was found is told in `docs/agent.md` ("How the thresholds were found").
//!
//! Without a QoS line vrate ranges over [`NO_QOS`]'s 10–500% of the model: groups held by their
//! limits while no group is held by the device raise it (the planner's shortages), a group held by
//! the device brings it down to what the device did. So a model below the device (a profile of one
//! process at QD32 gets half of what two get from a loop device here) does not cap the total, and
//! one above it does not leave the limits loose.

mod budget;
mod classify;
mod counters;
mod device;
pub mod donor;
mod follow;
pub mod io_max;
pub mod io_mix;
mod latency;
mod read;
mod throttle_writes;
mod window;
mod write;

use std::collections::BTreeMap;
use std::time::Duration;

use ioshare_core::Nanos;

use crate::backend::{device_changes, Backend, BackendKind, HostFiles, Synced};
use crate::desired::config::DeviceConfig;
use crate::desired::targets::{userspace_plan, CgroupSettings};
use crate::error::Result;
use crate::report::share::watch::PlannerActivity;
use crate::report::status::DeviceLine;
use crate::report::trace::PeriodRecord;

pub use device::{DevicePlanner, NO_QOS, RENEW_AT};

/// The userspace backend: one [`DevicePlanner`] per configured device.
#[derive(Debug, Default)]
pub struct UserspacePlanner {
    devices: Vec<DevicePlanner>,
}

impl Backend for UserspacePlanner {
    fn kind(&self) -> BackendKind {
        BackendKind::Userspace
    }

    fn set_devices(&mut self, host: &mut HostFiles<'_>, devices: &[DeviceConfig], period: Duration) -> Result<usize> {
        let old: Vec<DeviceConfig> = self.devices.iter().map(|d| d.config().clone()).collect();
        let (_, changed) = device_changes(&old, devices);
        // A controller whose settings are unchanged is kept (with the new period); the others go
        // before their replacements start (one observer per device at a time).
        let (mut kept, _gone): (Vec<DevicePlanner>, Vec<DevicePlanner>) =
            std::mem::take(&mut self.devices).into_iter().partition(|l| devices.contains(l.config()));
        drop(_gone);
        for d in devices {
            match kept.iter().position(|l| l.config() == d) {
                Some(i) => {
                    let mut l = kept.swap_remove(i);
                    l.set_period(period);
                    self.devices.push(l);
                }
                None => {
                    self.devices.push(DevicePlanner::new(d.clone(), period));
                    host.hierarchy.activate_accounting(host.recorder, d.device.dev)?;
                }
            }
        }
        Ok(changed)
    }

    fn sync(
        &mut self,
        host: &mut HostFiles<'_>,
        now: Nanos,
        found: &BTreeMap<String, CgroupSettings>,
        fresh: bool,
    ) -> Result<Synced> {
        for d in &mut self.devices {
            d.mark_all_absent();
        }
        let (leaves, inner) = userspace_plan(&host.hierarchy.root, found);
        for l in &leaves {
            for d in &mut self.devices {
                d.track(now, &l.rel, l.weight, l.limits, fresh)?;
            }
        }
        for d in &mut self.devices {
            d.set_inner_weights(now, &inner)?;
        }
        let mut gone = 0;
        for d in &mut self.devices {
            gone += d.drop_absent(now)?;
        }
        let leaves = leaves.into_iter().map(|l| (l.rel.clone(), l.pod.cloned())).collect();
        Ok(Synced { leaves, gone })
    }

    fn forget_absent(&mut self) {
        for d in &mut self.devices {
            d.forget_absent();
        }
    }

    fn period(&mut self, host: &mut HostFiles<'_>, now: Nanos) -> Result<bool> {
        for d in &mut self.devices {
            d.plan(now, host.hierarchy, host.recorder, host.sys_block, host.overwrites)?;
        }
        Ok(self.devices.iter().any(|d| !d.quiet()))
    }

    fn reassert(&mut self, _host: &mut HostFiles<'_>) -> Result<()> {
        Ok(()) // the planner looks at its limits itself (crate::backend::userspace::throttle_writes)
    }

    fn status(&self, now: Nanos) -> Vec<DeviceLine> {
        self.devices.iter().map(|d| d.status(now)).collect()
    }

    fn activity(&self, now: Nanos) -> Option<PlannerActivity> {
        let mut active = PlannerActivity::new();
        for d in &self.devices {
            active.extend(d.activity(now).into_iter().map(|(rel, a)| ((d.dev(), rel), a)));
        }
        Some(active)
    }

    fn has_figures(&self) -> bool {
        true
    }

    fn set_tracing(&mut self) {
        for d in &mut self.devices {
            d.set_tracing(true);
        }
    }

    fn take_records(&mut self) -> Vec<PeriodRecord> {
        self.devices.iter_mut().filter_map(DevicePlanner::take_record).collect()
    }
}
