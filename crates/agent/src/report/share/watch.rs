//! The running agent's shares: refreshed every [`SHARES_EVERY`] from the agent's own activity — the
//! planner's per-period `active` for the cgroups it tracks (userspace backend), and for every other
//! cgroup on the paths whether its IO counters moved since the last refresh (at the first refresh,
//! which has nothing to compare with: [`PresentNow`]) — unless nothing they depend on moved: no IO
//! on the devices and no change in what is controlled ([`ShareWatch::invalidate`]). A refresh reads
//! every managed cgroup's weights and counters, with 1 000 pods 4% of a core when done every second
//! on an idle node.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ioshare_core::iocost::line::DevNum;

use super::host_view::{io_count, Activity, PresentNow};
use super::Shares;
use crate::cgroups::check::BackendKind;
use crate::cgroups::hierarchy::Hierarchy;
use crate::desired::config::Config;
use crate::desired::targets::CgroupSettings;

/// How often the running agent recomputes the shares.
pub const SHARES_EVERY: Duration = Duration::from_secs(1);

/// Where the shares are judged: the backend, its hierarchy, and `/sys/block`.
#[derive(Clone, Copy, Debug)]
pub struct Host<'a> {
    /// The backend.
    pub backend: BackendKind,
    /// Its hierarchy.
    pub hierarchy: &'a Hierarchy,
    /// Where device queues are read (`/sys/block`).
    pub sys_block: &'a Path,
}

/// What the planner says about the cgroups it tracks: active this period, per device.
pub type PlannerActivity = HashMap<(DevNum, String), bool>;

/// The shares of the running agent, and the counters they were last judged by.
#[derive(Debug, Default)]
pub struct ShareWatch {
    next: Option<Instant>,
    counts: HashMap<(DevNum, String), u64>,
    report: Option<Shares>,
    /// What is controlled changed since the last refresh.
    stale: bool,
}

impl ShareWatch {
    /// Marks the shares out of date: what is controlled changed.
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// Recomputes the shares of `config`'s rules and the `pods`' targets on `host` if
    /// [`SHARES_EVERY`] passed since the last time, `now`, and the devices had IO (`moved`) or
    /// what is controlled changed; `planner` is asked only then.
    pub fn refresh_if_due(
        &mut self,
        now: Instant,
        moved: bool,
        config: &Config,
        pods: &[(String, CgroupSettings)],
        host: Host,
        planner: &dyn Fn() -> PlannerActivity,
    ) {
        if self.next.is_some_and(|next| now < next) {
            return;
        }
        self.next = Some(now + SHARES_EVERY);
        let stale = std::mem::take(&mut self.stale);
        if self.report.is_some() && !moved && !stale {
            return;
        }
        let planner = planner();
        let mut activity = SinceLast { planner: &planner, last: &self.counts, counts: HashMap::new() };
        let report = Shares::build(config, pods, host.backend, host.hierarchy, host.sys_block, &mut activity);
        self.counts = activity.counts;
        self.report = Some(report);
    }

    /// The last shares computed.
    pub fn report(&self) -> Option<&Shares> {
        self.report.as_ref()
    }
}

/// Activity since the last refresh.
struct SinceLast<'a> {
    planner: &'a PlannerActivity,
    last: &'a HashMap<(DevNum, String), u64>,
    /// The counters read now (only the cgroups looked at: vanished ones are forgotten).
    counts: HashMap<(DevNum, String), u64>,
}

impl Activity for SinceLast<'_> {
    fn active(&mut self, hierarchy: &Hierarchy, dev: DevNum, rel: &str) -> bool {
        let key = (dev, rel.to_string());
        if let Some(&a) = self.planner.get(&key) {
            return a;
        }
        let now = io_count(hierarchy, dev, rel);
        let moved = match self.last.get(&key) {
            Some(&before) => now > before,
            None => PresentNow.active(hierarchy, dev, rel),
        };
        self.counts.insert(key, now);
        moved
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ioshare_core::iocost::line::DevNum;
    use ioshare_core::{Limits, ModelParams};
    use ioshare_host::DiskId;

    use super::*;
    use crate::cgroups::hierarchy::Flavor;
    use crate::desired::config::{DeviceConfig, GroupConfig};

    const DEV: DevNum = DevNum { major: 7, minor: 3 };

    /// A v1 cgroup with `procs` and blk-throttle counters of `ios` reads on DEV.
    fn cgroup(dir: &Path, procs: &str, ios: u64) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), procs).unwrap();
        std::fs::write(dir.join("blkio.throttle.io_serviced_recursive"), format!("7:3 Read {ios}\n7:3 Write 0\n"))
            .unwrap();
        std::fs::write(dir.join("blkio.throttle.io_service_bytes_recursive"), format!("7:3 Read {}\n", ios * 4096))
            .unwrap();
    }

    #[test]
    fn activity_is_io_since_the_last_refresh_or_the_planners_word() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        cgroup(r, "", 0);
        cgroup(&r.join("t"), "", 10);
        cgroup(&r.join("t/web"), "1\n", 10); // managed: the planner decides
        cgroup(&r.join("t/batch"), "2\n", 0); // unmanaged: processes, no IO yet
        let config = Config {
            period: Duration::from_millis(100),
            devices: vec![DeviceConfig {
                device: DiskId { dev: DEV, name: "loop3".into() },
                model: ModelParams::SSD_DFL,
                qos: None,
                tuned: None,
            }],
            groups: vec![GroupConfig { cgroup: "t/web".into(), weight: 300, limits: Limits::default(), memory: None }],
            memory_dry_run: false,
            metrics: None,
            kubernetes: None,
        };
        let h = Hierarchy { flavor: Flavor::V1, root: r.to_path_buf() };
        let host = Host { backend: BackendKind::Userspace, hierarchy: &h, sys_block: r };
        let mut planner = PlannerActivity::new();
        planner.insert((DEV, "t/web".into()), true);
        let mut watch = ShareWatch::default();
        let t0 = Instant::now();
        let share = |w: &ShareWatch| w.report().unwrap().devices[0].groups[0].share;
        // First refresh: nothing to compare with, so batch's processes make it active: 300/400.
        watch.refresh_if_due(t0, true, &config, &[], host, &|| planner.clone());
        assert!((share(&watch) - 0.75).abs() < 1e-9, "{:?}", watch.report());
        // Its counters did not move: idle, web alone under t.
        watch.refresh_if_due(t0 + SHARES_EVERY, true, &config, &[], host, &|| planner.clone());
        assert!((share(&watch) - 1.0).abs() < 1e-9, "{:?}", watch.report());
        // Not due yet: the report stays as it was even though batch now does IO.
        cgroup(&r.join("t/batch"), "2\n", 5);
        watch.refresh_if_due(t0 + SHARES_EVERY + Duration::from_millis(10), true, &config, &[], host, &|| {
            planner.clone()
        });
        assert!((share(&watch) - 1.0).abs() < 1e-9);
        watch.refresh_if_due(t0 + 2 * SHARES_EVERY, true, &config, &[], host, &|| planner.clone());
        assert!((share(&watch) - 0.75).abs() < 1e-9, "batch's IO counted: {:?}", watch.report());
        let web = &watch.report().unwrap().devices[0].groups[0];
        assert!(web.active, "the planner's word for web");
        planner.insert((DEV, "t/web".into()), false);
        watch.refresh_if_due(t0 + 3 * SHARES_EVERY, true, &config, &[], host, &|| planner.clone());
        assert!(!watch.report().unwrap().devices[0].groups[0].active, "the planner says idle");
        // No IO on the devices and nothing controlled changed: the report is kept as it is.
        planner.insert((DEV, "t/web".into()), true);
        watch.refresh_if_due(t0 + 4 * SHARES_EVERY, false, &config, &[], host, &|| planner.clone());
        assert!(!watch.report().unwrap().devices[0].groups[0].active, "kept: nothing moved");
        // What is controlled changed: recomputed even without IO.
        watch.invalidate();
        watch.refresh_if_due(t0 + 5 * SHARES_EVERY, false, &config, &[], host, &|| planner.clone());
        assert!(watch.report().unwrap().devices[0].groups[0].active, "recomputed after a change");
    }
}
