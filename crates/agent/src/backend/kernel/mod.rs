//! The kernel backend: cgroup v2 with iocost. The kernel's own IOCost does the sharing; the agent
//! writes what it needs and then only watches that it stays written:
//! - per device, the root's `io.cost.model` and `io.cost.qos` (a device without a QoS line gets
//!   `enable=1 ctrl=auto`: the kernel's own defaults for its class);
//! - per cgroup, as discovery finds it, `io.weight` (the weight of its rule or pod) and `io.max`
//!   (its fixed caps, turned into blk-throttle limits at the device's model: the kernel's
//!   blk-throttle holds them before iocost sees the IO);
//! - values someone else overwrote are written back when [`crate::cgroups::reapply`] says.
//!
//! It plans nothing: vrate, hweights, debt and delay are the kernel's. Its status lines carry the
//! weights and caps written and, read once a period from the kernel's own IOCost tracepoints
//! ([`figures`]), the kernel's figures — vrate, busy level, missed ppm and request wait per device,
//! hweights, usage, debt, delay and wait per cgroup, with flags — or, where they cannot be read, why.

mod figures;

use std::collections::BTreeMap;
use std::time::Duration;

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::iocost::qos::QosConfig;
use ioshare_core::{Limits, LinearModel, ModelConfig, Nanos};
use ioshare_host::Written;

use crate::backend::throttle::throttle_for;
use crate::backend::{device_changes, Backend, BackendKind, HostFiles, Synced};
use crate::cgroups::hierarchy::Throttle;
use crate::desired::config::DeviceConfig;
use crate::desired::targets::CgroupSettings;
use crate::error::Result;
use crate::report::share::watch::PlannerActivity;
use crate::report::status::kernel::{device_line, group_line};
use crate::report::status::{DeviceLine, GroupLine};
use crate::report::trace::PeriodRecord;
use figures::KernelFigures;

/// The kernel's iocost, configured by the agent.
#[derive(Debug, Default)]
pub struct KernelIocost {
    devices: Vec<DeviceConfig>,
    period: Duration,
    /// Cgroups applied, with what was applied.
    applied: BTreeMap<String, CgroupSettings>,
    /// The kernel's own IOCost figures.
    figures: KernelFigures,
}

impl KernelIocost {
    /// The root's iocost lines of device `d`.
    fn apply_device(host: &mut HostFiles<'_>, d: &DeviceConfig) -> Result<()> {
        let dev = d.device.dev;
        let model = ModelConfig { device: Some(dev), ctrl: Ctrl::User, params: d.model };
        let qos = match d.qos {
            Some(params) => QosConfig { device: Some(dev), ctrl: Ctrl::User, params }.to_string(),
            None => format!("{dev} enable=1 ctrl=auto"),
        };
        for (file, line) in [("io.cost.model", model.to_string()), ("io.cost.qos", qos)] {
            let written = host.hierarchy.set_root_line(host.recorder, file, dev, &line)?;
            if host.overwrites.saw(&host.hierarchy.root.join(file), written) == Written::Changed {
                tracing::info!(file, line = %line, "iocost set");
            }
        }
        Ok(())
    }

    /// Writes target `t`'s weight and fixed caps to cgroup `rel` on every device (only what differs
    /// from what the files hold).
    fn write_cgroup(&self, host: &mut HostFiles<'_>, rel: &str, t: &CgroupSettings) -> Result<()> {
        for d in &self.devices {
            let dev = d.device.dev;
            let caps = fixed_caps(d, &t.limits, self.period);
            let dir = host.hierarchy.dir(rel);
            let written = host.hierarchy.set_weight(host.recorder, rel, dev, t.weight)?;
            if host.overwrites.saw(&dir.join("io.weight"), written) == Written::Changed {
                tracing::info!(cgroup = %rel, dev = %dev, weight = t.weight, "weight set");
            }
            let written = host.hierarchy.set_throttle(host.recorder, rel, dev, &caps)?;
            if host.overwrites.saw(&dir.join("io.max"), written) == Written::Changed {
                tracing::info!(cgroup = %rel, dev = %dev, caps = %caps, "caps set");
            }
        }
        Ok(())
    }
}

impl Backend for KernelIocost {
    fn kind(&self) -> BackendKind {
        BackendKind::Kernel
    }

    fn set_devices(&mut self, host: &mut HostFiles<'_>, devices: &[DeviceConfig], period: Duration) -> Result<usize> {
        let (fresh, changed) = device_changes(&self.devices, devices);
        self.devices = devices.to_vec();
        self.figures.start_once(&devices.iter().map(|d| d.device.dev).collect::<Vec<_>>());
        self.period = period;
        for d in &fresh {
            Self::apply_device(host, d)?;
        }
        // Every cgroup is looked at again at the next sync (only what differs is written).
        self.applied.clear();
        Ok(changed)
    }

    fn sync(
        &mut self,
        host: &mut HostFiles<'_>,
        _now: Nanos,
        found: &BTreeMap<String, CgroupSettings>,
        _fresh: bool,
    ) -> Result<Synced> {
        let before = self.applied.len();
        self.applied.retain(|rel, _| found.contains_key(rel));
        let gone = before - self.applied.len();
        for (rel, t) in found {
            if self.applied.get(rel) != Some(t) {
                self.write_cgroup(host, rel, t)?;
                self.applied.insert(rel.clone(), t.clone());
            }
        }
        Ok(Synced { leaves: Vec::new(), gone })
    }

    fn forget_absent(&mut self) {}

    /// Reads the kernel's figures; "had IO" when the kernel reported something new (so the status
    /// and metrics follow it period by period while the device is busy).
    fn period(&mut self, _host: &mut HostFiles<'_>, _now: Nanos) -> Result<bool> {
        Ok(self.figures.refresh())
    }

    fn reassert(&mut self, host: &mut HostFiles<'_>) -> Result<()> {
        for d in &self.devices {
            Self::apply_device(host, d)?;
        }
        for (rel, t) in &self.applied {
            self.write_cgroup(host, rel, t)?;
        }
        Ok(())
    }

    fn status(&self, _now: Nanos) -> Vec<DeviceLine> {
        self.devices
            .iter()
            .map(|d| {
                let dev = d.device.dev;
                let line = DeviceLine {
                    device: d.device.name.clone(),
                    dev: dev.to_string(),
                    vrate_pct: 0.0,
                    busy_level: 0,
                    lat_us: [0.0; 2],
                    target_us: d.qos.map_or([0, 0], |q| [q.rlat_us, q.wlat_us]),
                    missed_ppm: [0, 0],
                    model: Some(d.model),
                    groups: self
                        .applied
                        .iter()
                        .map(|(rel, t)| {
                            let line = GroupLine {
                                cgroup: rel.clone(),
                                weight: t.weight,
                                hweight_active: 0.0,
                                hweight_inuse: 0.0,
                                usage_share: 0.0,
                                limits: fixed_caps(d, &t.limits, self.period).as_array(),
                                state: String::new(),
                                debt_us: 0,
                                note: String::new(),
                                iocost: None,
                            };
                            group_line(line, self.figures.group(dev, rel))
                        })
                        .collect(),
                    iocost: None,
                    note: String::new(),
                };
                device_line(line, self.figures.device(dev), self.figures.note(dev))
            })
            .collect()
    }

    fn activity(&self, _now: Nanos) -> Option<PlannerActivity> {
        None
    }

    fn has_figures(&self) -> bool {
        false
    }

    fn set_tracing(&mut self) {}

    fn take_records(&mut self) -> Vec<PeriodRecord> {
        Vec::new()
    }
}

/// The blk-throttle caps of fixed `limits` on device `d` (the kernel's iocost does the sharing).
fn fixed_caps(d: &DeviceConfig, limits: &Limits, period: Duration) -> Throttle {
    throttle_for(None, &Default::default(), &LinearModel::new(d.model), period, limits)
}
