//! What the IOCost programs kept, in an operator's units: percentages, milliseconds, weights as the
//! cgroup files write them (`io.weight`'s 1..10000), plus the raw cumulative µs counters of `io.stat`.

use serde::{Deserialize, Serialize};

/// The kernel's vtime per microsecond at 100% vrate (`VTIME_PER_USEC` = 2^37 / 10^6, rounded down).
pub(crate) const VTIME_PER_USEC: u64 = (1u64 << 37) / 1_000_000;
/// The kernel's fixed-point 1.0 for weights and hweights (`WEIGHT_ONE`).
pub(crate) const WEIGHT_ONE: f64 = 65536.0;

/// One device's IOCost controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IocDevice {
    /// `MAJ:MIN`.
    pub device: String,
    /// Its kernel name (`nvme0n1`), or `MAJ:MIN`.
    pub device_name: String,
    /// Seconds since the last kernel event that touched it.
    pub age_s: f64,
    /// The base vrate, % (io.stat's `cost.vrate`, which rounds it to 0.01).
    pub vrate_pct: f64,
    /// The busy level: above 0 the device misses its QoS targets (vrate goes down), below 0 cgroups are
    /// short of budget while targets are met (vrate goes up).
    pub busy_level: i32,
    /// The period, ms.
    pub period_ms: f64,
    /// The period counter.
    pub period: u64,
    /// Reads and writes that missed their latency target in the last reported period, ppm.
    pub missed_ppm: [u32; 2],
    /// Time requests waited for a driver tag in that period, %.
    pub rq_wait_pct: u32,
    /// Cgroups with IOs in flight longer than a period.
    pub lagging: i32,
    /// Cgroups short of budget.
    pub shortages: i32,
    /// Active cgroups donating part of their share (inuse below active).
    pub surpluses: u32,
    /// Active cgroups.
    pub active: u32,
    /// vrate events seen (`iocost_ioc_vrate_adj`): 0 means the per-period figures were never reported.
    pub vrate_events: u64,
}

/// How often each cgroup event fired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IocEvents {
    /// Became active (`iocost_iocg_activate`).
    pub activated: u64,
    /// Went idle (`iocost_iocg_idle`).
    pub idled: u64,
    /// Donation undone at a period's end (`iocost_inuse_shortage`).
    pub shortage: u64,
    /// Donated (`iocost_inuse_transfer`).
    pub transfer: u64,
    /// Inuse raised within a period (`iocost_inuse_adjust`).
    pub adjust: u64,
    /// Debt and delay forgiven (`iocost_iocg_forgive_debt`).
    pub forgiven: u64,
}

/// One cgroup's state on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IocGroup {
    /// `MAJ:MIN`.
    pub device: String,
    /// Its kernel name.
    pub device_name: String,
    /// Kernel id of the cgroup (the inode number of its directory).
    pub cgroup_id: u64,
    /// Its path in the v2 hierarchy.
    pub cgroup: String,
    /// Depth in the hierarchy (the root is 0).
    pub level: u32,
    /// Seconds since the last kernel event that touched it.
    pub age_s: f64,
    /// Whether it is active (issued IO recently): `weight_active` > 0.
    pub is_active: bool,
    /// Its weight (`io.weight`, 1..10000).
    pub weight: f64,
    /// Its active weight (0 while idle).
    pub weight_active: f64,
    /// Its inuse weight (below active while donating).
    pub weight_inuse: f64,
    /// Its share of the device by active weights through the hierarchy, %.
    pub hweight_active_pct: f64,
    /// Its share by inuse weights (what it is charged by), %.
    pub hweight_inuse_pct: f64,
    /// Its usage in the last period it was flushed in, % of the period.
    pub usage_pct: f64,
    /// Its debt, ms of device time at the current vrate's base.
    pub debt_ms: f64,
    /// The delay in force on its issuers, ms.
    pub delay_ms: f64,
    /// io.stat's `cost.usage`: device time used, µs, with descendants.
    pub usage_us: u64,
    /// io.stat's `cost.wait` (shown there only with `blkcg_debug_stats`): µs waited for budget.
    pub wait_us: u64,
    /// io.stat's `cost.indebt`: µs in debt.
    pub indebt_us: u64,
    /// io.stat's `cost.indelay`: µs under delay.
    pub indelay_us: u64,
    /// Its events.
    pub events: IocEvents,
}

/// One reading of the IOCost programs' maps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IocostSnapshot {
    /// Devices with IOCost events, by name.
    pub devices: Vec<IocDevice>,
    /// (device, cgroup) pairs, by device then cgroup path.
    pub groups: Vec<IocGroup>,
    /// Events whose state could not be kept (a full map).
    pub dropped: u64,
    /// One line each: what could not be read or shown (removed cgroups, devices without IOCost, …).
    pub notes: Vec<String>,
}

impl IocostSnapshot {
    /// The state of cgroup `path` (as in the v2 hierarchy, `/a/b`) on device `device` (`MAJ:MIN` or
    /// its name), if the kernel reported it: what an agent shows beside its own view of a group.
    pub fn group(&self, device: &str, path: &str) -> Option<&IocGroup> {
        self.groups.iter().find(|g| (g.device == device || g.device_name == device) && g.cgroup == path)
    }

    /// Only `device` (a name or `MAJ:MIN`, `None`: all) and cgroups whose path contains `pattern`.
    pub fn filtered(&self, device: Option<&str>, pattern: Option<&str>) -> IocostSnapshot {
        let on = |dev: &str, name: &str| device.is_none_or(|d| d == dev || d == name);
        IocostSnapshot {
            devices: self.devices.iter().filter(|d| on(&d.device, &d.device_name)).cloned().collect(),
            groups: self
                .groups
                .iter()
                .filter(|g| on(&g.device, &g.device_name) && pattern.is_none_or(|p| g.cgroup.contains(p)))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }
}

/// vtime per µs as a percentage of 100% vrate.
pub(crate) fn vrate_pct(vtime_base_rate: u64) -> f64 {
    vtime_base_rate as f64 * 100.0 / VTIME_PER_USEC as f64
}

/// A weight or hweight in `WEIGHT_ONE` units as `io.weight` numbers (or, for hweights, scaled to %).
pub(crate) fn weight(raw: u32, scale: f64) -> f64 {
    f64::from(raw) / WEIGHT_ONE * scale
}

/// A debt in absolute vtime as ms of device time at 100% vrate (as `iocost_monitor.py` shows it).
pub(crate) fn debt_ms(abs_vdebt: u64) -> f64 {
    abs_vdebt as f64 / VTIME_PER_USEC as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_units_convert_as_the_kernel_prints_them() {
        // io.stat prints cost.vrate from vtime_base_rate * 10000 / VTIME_PER_USEC, rounded: 100.00 at the
        // initial rate; 1.5x the rate is 150.00.
        assert_eq!(vrate_pct(VTIME_PER_USEC), 100.0);
        assert!((vrate_pct(VTIME_PER_USEC * 3 / 2) - 150.0).abs() < 0.001);
        // io.weight's default 100 is 100 * WEIGHT_ONE in the kernel; a hweight of WEIGHT_ONE / 4 is 25%.
        assert_eq!(weight(100 << 16, 1.0), 100.0);
        assert_eq!(weight(1 << 14, 100.0), 25.0);
        // 2 ms of debt at 100% vrate.
        assert!((debt_ms(2000 * VTIME_PER_USEC) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn filters_by_device_and_cgroup() {
        let group = |dev: &str, cg: &str| IocGroup {
            device: dev.into(),
            device_name: "nvme0n1".into(),
            cgroup_id: 1,
            cgroup: cg.into(),
            level: 1,
            age_s: 0.0,
            is_active: true,
            weight: 100.0,
            weight_active: 100.0,
            weight_inuse: 100.0,
            hweight_active_pct: 50.0,
            hweight_inuse_pct: 50.0,
            usage_pct: 0.0,
            debt_ms: 0.0,
            delay_ms: 0.0,
            usage_us: 0,
            wait_us: 0,
            indebt_us: 0,
            indelay_us: 0,
            events: IocEvents::default(),
        };
        let snap = IocostSnapshot {
            groups: vec![group("259:0", "/a"), group("259:0", "/tenant-b"), group("8:0", "/tenant-c")],
            ..IocostSnapshot::default()
        };
        assert_eq!(snap.filtered(Some("259:0"), Some("tenant")).groups.len(), 1);
        assert_eq!(snap.filtered(Some("nvme0n1"), None).groups.len(), 3);
        assert_eq!(snap.filtered(None, None).groups.len(), 3);
        assert_eq!(snap.group("8:0", "/tenant-c").map(|g| g.device.as_str()), Some("8:0"));
        assert!(snap.group("8:0", "/a").is_none());
    }
}
