//! Example status lines — what a userspace agent's status file holds — for the tests of the status
//! table, the `/metrics` endpoint and its cost benchmark: one builder, so that a field added to a
//! line is added once. Each builder fills every field with a fixed, distinct value; a test changes
//! what it cares about with struct update syntax (`GroupLine { weight: 300, ..group(..) }`).

use ioshare_core::ModelParams;
use ioshare_observe::iocost::{IocDevice, IocEvents, IocGroup};

use super::{DeviceLine, GroupLine, Status};
use crate::cgroups::check::BackendKind;
use crate::memory::MemoryLine;

/// Cgroup `cgroup` on a device, in `state` with `limits` (read/write IOPS, read/write bytes/s):
/// weight 200, hweights 0.5 active and 0.25 in use, 12.5% of the device used, 1.5 ms of debt.
pub fn group(cgroup: &str, state: &str, limits: [u64; 4]) -> GroupLine {
    GroupLine {
        cgroup: cgroup.into(),
        weight: 200,
        hweight_active: 0.5,
        hweight_inuse: 0.25,
        usage_share: 0.125,
        limits,
        state: state.into(),
        debt_us: 1500,
        note: String::new(),
        iocost: None,
    }
}

/// Memory-guarded cgroup `cgroup`: priority 2, 300 MiB used of a 512 MiB limit, watermarks 400 and
/// 397 MiB, the last reclaim 12 MiB in 3.5 ms, 3 reclaims in 0.5 s, an OOM kill by the agent and
/// two by the kernel, PSI some 2.5% and full 0.75%.
pub fn memory(cgroup: &str) -> MemoryLine {
    MemoryLine {
        cgroup: cgroup.into(),
        priority: 2,
        usage: 300 << 20,
        limit: Some(512 << 20),
        watermarks: Some((400 << 20, 397 << 20)),
        last_reclaim: Some((12 << 20, 3.5)),
        oom_kills: 1,
        kernel_kills: 2,
        pressure: Some((2.5, 0.75)),
        reclaims: 3,
        reclaim_seconds: 0.5,
    }
}

/// Device loop3 (7:3) with `groups`: vrate 87.5%, busy level -2, reads at 350 µs against a 1 ms
/// target with 1.25% of them late, no write target, model `ssd_dfl`.
pub fn device(groups: Vec<GroupLine>) -> DeviceLine {
    DeviceLine {
        device: "loop3".into(),
        dev: "7:3".into(),
        vrate_pct: 87.5,
        busy_level: -2,
        lat_us: [350.0, 0.0],
        target_us: [1000, 0],
        missed_ppm: [12_500, 0],
        model: Some(ModelParams::SSD_DFL),
        groups,
        iocost: None,
        note: String::new(),
    }
}

/// Device loop3 (7:3) as the kernel's IOCost reports it (kernel backend): vrate 87.5%, busy level
/// 3, 25% of reads late, 4% request wait, 2 cgroups active of which one short and one donating,
/// reported 0.1 s ago.
pub fn iocost_device() -> IocDevice {
    IocDevice {
        device: "7:3".into(),
        device_name: "loop3".into(),
        age_s: 0.1,
        vrate_pct: 87.5,
        busy_level: 3,
        period_ms: 40.0,
        period: 12,
        missed_ppm: [250_000, 0],
        rq_wait_pct: 4,
        lagging: 0,
        shortages: 1,
        surpluses: 1,
        active: 2,
        vrate_events: 9,
    }
}

/// Cgroup `path` (`/a/b`) on loop3 as the kernel's IOCost reports it: active, weight 200 donating
/// down to 150 in use, hweights 66.7% active and 50% in use, 61% of the last period used, 1.5 ms of
/// debt, no delay, 2.5 s used and 1 ms waited in all.
pub fn iocost_group(path: &str) -> IocGroup {
    IocGroup {
        device: "7:3".into(),
        device_name: "loop3".into(),
        cgroup_id: 42,
        cgroup: path.into(),
        level: 2,
        age_s: 0.1,
        is_active: true,
        weight: 200.0,
        weight_active: 200.0,
        weight_inuse: 150.0,
        hweight_active_pct: 66.7,
        hweight_inuse_pct: 50.0,
        usage_pct: 61.0,
        debt_ms: 1.5,
        delay_ms: 0.0,
        usage_us: 2_500_000,
        wait_us: 1000,
        indebt_us: 0,
        indelay_us: 0,
        events: IocEvents { activated: 1, transfer: 4, ..IocEvents::default() },
    }
}

/// A userspace agent's status with `devices` and `memory`: pid 1, 100 ms periods, 7 of them, in
/// the v1 blkio root, written at the epoch, no shares yet.
pub fn status(devices: Vec<DeviceLine>, memory: Vec<MemoryLine>) -> Status {
    Status {
        pid: 1,
        pid_start_ticks: None,
        period_ms: 100,
        backend: BackendKind::Userspace.name().into(),
        root: "/sys/fs/cgroup/blkio".into(),
        periods: 7,
        updated_unix: 0.0,
        devices,
        memory,
        shares: None,
        kubernetes: None,
        overwritten: 0,
        drift: Vec::new(),
    }
}
