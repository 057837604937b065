//! One device under the userspace backend: its controller (ioshare-core's [`IoCost`]), the cgroups
//! it tracks, and the period that runs the steps in order — [`super::read`], [`super::classify`],
//! [`super::follow`], the planner's own period, [`super::budget`] and [`super::write`].
//!
//! Cgroups come and go (containers); the agent leaves a gone cgroup's group in the controller, so
//! once the groups of cgroups that are gone outnumber [`RENEW_AT`] and four times the live ones, the device's
//! controller is renewed: a fresh one over the live groups, at the vrate the old one had (limits in
//! force are kept; donation and debt start afresh, as for a group found at start). What the agent
//! holds per device stays proportional to the cgroups alive.
//!
//! The device must stay the one configured: each period first compares its identity (the kernel's
//! `diskseq`, new for each disk and each loop attachment) with the one at the first period. A device
//! detached, removed, or replaced by another at its number ends the control of it for good: what
//! was written for it is restored where it can be (a loop device keeps its queue, and the rules on
//! it, for the next file attached), it is said once on stderr and in the status (state `device
//! gone`), and nothing more is written for that number, whatever takes it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::time::Duration;

use ioshare_core::iocost::model::VTIME_PER_NSEC;
use ioshare_core::{Controller, GroupId, GroupSettings, GroupStats, IoCost, Limits, LinearModel, Nanos, QosParams};
use ioshare_host::{DevNum, DiskStats, Recorder, Written};

use super::counters::{Counters, DeviceQuiet};
use super::donor::donating;
use super::io_max::{climb_per_write, periods_per_write, IoMaxWrites};
use super::io_mix::IoMix;
use super::latency::Verdicts;
use super::throttle_writes::ThrottleWrites;
use super::window::{remember, FOLLOW_WINDOW};
use crate::backend::throttle::DirUsage;
use crate::cgroups::hierarchy::{Hierarchy, Throttle};
use crate::cgroups::reapply::Overwrites;
use crate::desired::config::DeviceConfig;
use crate::error::Result;
use crate::report::cpu::{CpuUse, CpuWatch};
use crate::report::status::{DeviceLine, GroupLine};
use crate::report::trace::PeriodRecord;

/// QoS used when the configuration gives none: no latency targets; vrate between 10% and 500% of
/// the model (see the module comment).
pub const NO_QOS: QosParams = QosParams {
    enable: true,
    rppm: 0,
    rlat_us: 25_000,
    wppm: 0,
    wlat_us: 25_000,
    min_ppm: 100_000,
    max_ppm: 5_000_000,
};

/// Groups of vanished cgroups the controller may hold (beyond four per live one) before it is
/// renewed.
pub const RENEW_AT: usize = 1024;

/// A cgroup this device's controller tracks.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) id: GroupId,
    pub(super) weight: u32,
    pub(super) caps: Limits,
    /// Its IO counters as last read.
    pub(super) counters: Counters,
    pub(super) usage: [DirUsage; 2],
    pub(super) throttle: Throttle,
    pub(super) present: bool,
    /// Last period: active beside others, below its share of the work done, not held by its limit.
    pub(super) unused_share: bool,
    /// Its threads' CPU at the last sample ([`crate::report::cpu`]).
    pub(super) cpu: Option<CpuUse>,
    /// It competed at the busy device last period ([`super::follow::device_slowed`]).
    pub(super) competed: bool,
    /// Its IO in flight in the period it last got its fair part of a busy device's work (absolute
    /// cost per planning period × the device's mean latency in ms), while it keeps competing: it
    /// keeps competing while it keeps [`super::classify::KEEPS_DEPTH`] of it.
    pub(super) depth: Option<f64>,
    /// What it did in each of the last [`super::window::FOLLOW_WINDOW`] periods (absolute cost per
    /// planning period): a donor's limit leaves room for the most of them
    /// ([`super::budget::DONOR_HEADROOM`]), so a paced tenant catching up after a stall of the device
    /// does not reach it.
    pub(super) recent: VecDeque<f64>,
    /// cgroup v2: its recent planned limits and writes ([`super::io_max`]).
    pub(super) io_max: IoMaxWrites,
    /// Last period: the only group doing IO that no fixed cap of its own held ([`super::classify`]).
    pub(super) sole_uncapped: bool,
    /// Periods since it was last held at its limit, up to [`super::classify::WAITING_PERIODS`]; `None` after that,
    /// or once it has no limit.
    pub(super) since_held: Option<u32>,
    /// Periods since a fixed cap of its own last held it, up to [`super::classify::WAITING_PERIODS`];
    /// `None` after that.
    pub(super) since_capped: Option<u32>,
    /// The budget its limits for this period came from (`None`: not limited by a budget).
    pub(super) allowed: Option<u64>,
    /// What its budget gives to the groups sharing the device with it (negative: takes from them),
    /// carried from period to period: [`super::classify`]'s share errors, paid back by half each
    /// period (absolute cost per planning period).
    pub(super) share_correction: f64,
}

impl Tracked {
    /// Whether it gets no limit from its budget: the only active group on the device, or the only
    /// one doing IO beside groups held by fixed caps of their own ([`Tracked::sole_uncapped`]).
    pub(super) fn gets_no_limit(&self, g: &GroupStats) -> bool {
        g.hweight_active >= 0.999 || self.sole_uncapped
    }
}

/// What the status says of a group below its share that no limit held back, with what its threads'
/// CPU says of why (empty for any other group).
fn unused_share_note(t: &Tracked) -> String {
    if !t.unused_share {
        return String::new();
    }
    let why = match t.cpu {
        Some(c) if c.cpu_bound() => {
            format!("; CPU-bound: its busiest thread was on or waiting for a CPU {:.0}% of the time", c.busiest * 100.0)
        }
        Some(c) => format!(
            "; its threads were not CPU-bound ({:.0}%): it issues no more (no more to do, or its queue depth at the \
             device's latency)",
            c.busiest * 100.0
        ),
        None => String::new(),
    };
    format!("not using its share: not limited by ioshare{why}")
}

/// A disk's identity in `sys_block`: its `diskseq` (Linux 5.15+: the kernel numbers each disk it
/// creates and each file attached to a loop device), or empty where the kernel has none; `None` when
/// the disk is gone.
fn disk_identity(sys_block: &Path, name: &str) -> Option<String> {
    let dir = sys_block.join(name);
    match std::fs::read_to_string(dir.join("diskseq")) {
        Ok(seq) => Some(seq.trim().to_string()),
        Err(_) => dir.join("dev").exists().then(String::new),
    }
}

/// A controller for `cfg`'s device with `qos`, planning every `period`.
fn controller(cfg: &DeviceConfig, qos: QosParams, period: Duration) -> IoCost {
    let mut ctl = IoCost::new(LinearModel::new(cfg.model), qos);
    ctl.set_period_us(period.as_micros() as u64);
    ctl
}

/// Creates (or updates) cgroup `rel`'s group in `ctl` with `weight`.
fn configure(ctl: &mut IoCost, now: Nanos, rel: &str, weight: u32) -> Result<GroupId> {
    let settings = GroupSettings { weight, limits: Limits::default() };
    Ok(ctl.configure(now, rel, &settings).map_err(|e| ioshare_host::Error::InvalidCgroupName {
        name: format!("{rel} ({e})"),
        reason: "not usable as a controller group path",
    })?)
}

/// The controller of one device.
#[derive(Debug)]
pub struct DevicePlanner {
    pub(super) cfg: DeviceConfig,
    pub(super) qos: QosParams,
    pub(super) ctl: IoCost,
    pub(super) period: Duration,
    pub(super) last_disk: Option<DiskStats>,
    /// When the last period was planned, and how long that period really was (s).
    pub(super) last_plan: Option<Nanos>,
    pub(super) last_elapsed_s: f64,
    pub(super) verdicts: Verdicts,
    pub(super) groups: HashMap<String, Tracked>,
    /// Groups the controller holds for cgroups no longer tracked.
    pub(super) retired: usize,
    /// Weights of tree nodes that are not tracked (their IO is their tracked children's): the
    /// Kubernetes QoS class cgroups ([`crate::desired::targets`]).
    pub(super) inner: BTreeMap<String, u32>,
    /// Periods planned.
    pub(super) plans: u64,
    pub(super) mix: IoMix,
    /// The device's identity at the first period ([`disk_identity`]).
    pub(super) identity: Option<String>,
    /// The device went away: nothing more is planned or written for it.
    pub(super) gone: bool,
    /// Whether each period builds a [`PeriodRecord`] (`--trace`).
    pub(super) tracing: bool,
    /// The last period's record, until taken.
    pub(super) record: Option<PeriodRecord>,
    /// The tracked cgroups' threads.
    pub(super) cpu: CpuWatch,
    /// What the device did in the last [`FOLLOW_WINDOW`] periods, % of the model, and whether it
    /// held a competing group back in each.
    pub(super) delivered: VecDeque<(f64, bool)>,
    /// The device's mean latency in the last [`FOLLOW_WINDOW`] periods with IO, ms ([`super::follow::device_slowed`]).
    pub(super) latencies: VecDeque<f64>,
    /// The last period had no IO on the device ([`crate::backend::userspace::counters`]).
    pub(super) quiet: DeviceQuiet,
    /// Which cgroups' limit files were written ([`crate::backend::userspace::throttle_writes`]).
    pub(super) throttle_writes: ThrottleWrites,
    /// The last period planned left no group active ([`DevicePlanner::idle_period`]).
    pub(super) idle: bool,
}

impl DevicePlanner {
    /// A controller for `cfg`'s device planning every `period`.
    pub fn new(cfg: DeviceConfig, period: Duration) -> Self {
        let qos = cfg.qos.unwrap_or(NO_QOS);
        let ctl = controller(&cfg, qos, period);
        let mix = IoMix::start(cfg.device.dev);
        DevicePlanner {
            mix,
            cfg,
            qos,
            ctl,
            retired: 0,
            inner: BTreeMap::new(),
            plans: 0,
            period,
            last_disk: None,
            last_plan: None,
            last_elapsed_s: period.as_secs_f64(),
            verdicts: Verdicts::default(),
            groups: HashMap::new(),
            identity: None,
            gone: false,
            tracing: false,
            record: None,
            cpu: CpuWatch::default(),
            delivered: VecDeque::with_capacity(FOLLOW_WINDOW),
            latencies: VecDeque::with_capacity(FOLLOW_WINDOW),
            quiet: DeviceQuiet(false),
            throttle_writes: ThrottleWrites::default(),
            idle: false,
        }
    }

    /// Starts tracking cgroup `rel` (or updates its weight and caps); marks it present. A `fresh`
    /// cgroup (created since the agent started) is charged for all its IO, one found at start only
    /// for IO from now on.
    pub fn track(&mut self, now: Nanos, rel: &str, weight: u32, caps: &Limits, fresh: bool) -> Result<()> {
        let id = configure(&mut self.ctl, now, rel, weight)?;
        let dev = self.cfg.device.dev;
        match self.groups.get(rel) {
            None => tracing::info!(cgroup = %rel, dev = %dev, weight, caps = %caps, "cgroup under control"),
            Some(t) if t.weight != weight || t.caps != *caps => {
                tracing::info!(cgroup = %rel, dev = %dev, weight, caps = %caps, "weight and caps changed")
            }
            Some(_) => {}
        }
        // A new or changed cgroup's limits are planned at the next period, idle or not.
        self.idle &= self.groups.get(rel).is_some_and(|t| t.weight == weight && t.caps == *caps);
        let t = self.groups.entry(rel.to_string()).or_insert_with(|| Tracked {
            id,
            weight,
            caps: caps.clone(),
            counters: Counters::new(fresh),
            usage: Default::default(),
            throttle: Throttle::default(),
            present: true,
            unused_share: false,
            cpu: None,
            competed: false,
            depth: None,
            recent: VecDeque::new(),
            io_max: IoMaxWrites::default(),
            sole_uncapped: false,
            since_held: None,
            since_capped: None,
            allowed: None,
            share_correction: 0.0,
        });
        t.weight = weight;
        t.caps = caps.clone();
        t.present = true;
        Ok(())
    }

    /// Gives the untracked tree nodes `weights` (a node no longer named goes back to the default
    /// weight): they weigh their tracked descendants against their siblings, uncharged.
    pub fn set_inner_weights(&mut self, now: Nanos, weights: &BTreeMap<String, u32>) -> Result<()> {
        if *weights == self.inner {
            return Ok(());
        }
        for rel in self.inner.keys().filter(|rel| !weights.contains_key(*rel)) {
            configure(&mut self.ctl, now, rel, ioshare_core::WEIGHT_DEFAULT)?;
        }
        for (rel, &weight) in weights {
            configure(&mut self.ctl, now, rel, weight)?;
        }
        self.inner.clone_from(weights);
        self.idle = false;
        Ok(())
    }

    /// Builds a [`PeriodRecord`] every period from now on ([`take_record`](DevicePlanner::take_record)).
    pub fn set_tracing(&mut self, on: bool) {
        self.tracing = on;
    }

    /// The last period's record (tracing on), once.
    pub fn take_record(&mut self) -> Option<PeriodRecord> {
        self.record.take()
    }

    /// The device and settings this controller runs with.
    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    /// Plans every `period` from now on (a reload changed it).
    pub fn set_period(&mut self, period: Duration) {
        self.period = period;
        self.ctl.set_period_us(period.as_micros() as u64);
    }

    /// Stops tracking the cgroups the last discovery did not find (a reload dropped their rule):
    /// their limits are no longer planned, and the next match starts them afresh.
    pub fn forget_absent(&mut self) {
        self.groups.retain(|rel, t| {
            if !t.present {
                tracing::info!(cgroup = %rel, dev = %self.cfg.device.dev, "cgroup no longer controlled");
            }
            t.present
        });
        self.cpu.retain(|rel| self.groups.contains_key(rel));
    }

    /// Marks every cgroup absent (discovery then marks the ones it finds).
    pub fn mark_all_absent(&mut self) {
        for t in self.groups.values_mut() {
            t.present = false;
        }
    }

    /// Stops tracking the cgroups still marked absent (gone since the last discovery), renewing the
    /// controller when it holds too many such groups (see the module comment); how many were dropped.
    pub fn drop_absent(&mut self, now: Nanos) -> Result<usize> {
        let before = self.groups.len();
        self.groups.retain(|_, t| t.present);
        let dropped = before - self.groups.len();
        self.cpu.retain(|rel| self.groups.contains_key(rel));
        self.retired += dropped;
        if self.retired > RENEW_AT.max(4 * self.groups.len()) {
            self.renew(now)?;
        }
        Ok(dropped)
    }

    /// Replaces the controller by a fresh one holding only the live groups, at the same vrate.
    fn renew(&mut self, now: Nanos) -> Result<()> {
        let mut ctl = controller(&self.cfg, self.qos, self.period);
        ctl.set_vrate_pct(self.ctl.vrate_pct());
        for (rel, &weight) in &self.inner {
            configure(&mut ctl, now, rel, weight)?;
        }
        for (rel, t) in &mut self.groups {
            t.id = configure(&mut ctl, now, rel, t.weight)?;
        }
        self.ctl = ctl;
        self.retired = 0;
        Ok(())
    }

    /// One planning period at `now` (see the module comment). `sys_block` is `/sys/block`; limits
    /// someone else overwrote and that are written back are counted in `overwrites`.
    pub fn plan(
        &mut self,
        now: Nanos,
        h: &Hierarchy,
        rec: &mut Recorder,
        sys_block: &Path,
        overwrites: &mut Overwrites,
    ) -> Result<()> {
        if self.gone {
            return Ok(());
        }
        if !self.same_device(sys_block) {
            return self.lose_device(rec);
        }
        let mut period = self.read_device(now, sys_block);
        if period.quiet.0 && self.idle && !self.tracing {
            return self.idle_period(h, rec, overwrites);
        }
        let before = self.ctl.stats(now);
        self.mix.refresh();
        let mut paths: Vec<String> = self.groups.keys().cloned().collect();
        paths.sort();
        let delivered = self.read_groups(h, &paths, period.quiet);
        self.judge_latency(&mut period);
        let per_write = periods_per_write(h.flavor, self.period);
        let classified = self.classify(&paths, &period, &before, delivered, per_write);
        self.ctl.charge_period(now, &classified.charges);
        let vrate_before = self.ctl.vrate_pct();
        let (delivered_pct, rq_wait) = self.follow(&period, &classified, delivered);
        self.ctl.end_period(now);
        let vrate = climb_per_write(vrate_before, self.ctl.vrate_pct(), per_write);
        if vrate != self.ctl.vrate_pct() {
            self.ctl.set_vrate_pct(vrate);
        }
        let stats = self.ctl.stats(now);
        self.idle = stats.device.nr_active == 0;
        let (written, records) =
            self.write_limits(now, (h, rec, overwrites), &paths, &classified, &before, &stats, delivered)?;
        if self.tracing {
            let elapsed_s = period.elapsed_s;
            self.record = Some(PeriodRecord {
                t_s: now as f64 / 1e9,
                device: self.cfg.device.name.clone(),
                elapsed_s,
                util: period.delta.map_or(0.0, |d| d.io_ticks_ms as f64 / (elapsed_s * 1000.0)),
                busy: period.busy,
                inflight: period.inflight,
                lat_us: self.verdicts.mean_us,
                rq_wait,
                delivered_pct,
                vrate_pct: stats.device.vrate_pct,
                busy_level: stats.device.busy_level,
                groups: records,
            });
        }
        tracing::debug!(
            device = %self.cfg.device.name,
            vrate_pct = stats.device.vrate_pct,
            busy_level = stats.device.busy_level,
            read_lat_us = self.verdicts.mean_us[0],
            write_lat_us = self.verdicts.mean_us[1],
            groups = paths.len(),
            limits_written = written,
            "period"
        );
        Ok(())
    }

    /// Whether the device is still the one of the first period ([`disk_identity`]).
    fn same_device(&mut self, sys_block: &Path) -> bool {
        match (disk_identity(sys_block, &self.cfg.device.name), &self.identity) {
            (None, _) => false,
            (Some(now), Some(first)) => now == *first,
            (Some(now), None) => {
                self.identity = Some(now);
                true
            }
        }
    }

    /// Whether the last period had no IO on the device (nothing it shows moved).
    pub fn quiet(&self) -> bool {
        self.quiet.0
    }

    /// A period without IO on the device after one that left no group active: the planner has
    /// nothing to do (its period timer is stopped, as the kernel's is; nothing to charge, no
    /// completion to judge, the limits it would plan are those in force), so it is not run and no
    /// cgroup's counters are read ([`crate::backend::userspace::counters`]); only limits someone else overwrote are
    /// set back, and the device's window of what it did records the period as 0%.
    fn idle_period(&mut self, h: &Hierarchy, rec: &mut Recorder, overwrites: &mut Overwrites) -> Result<()> {
        remember(&mut self.delivered, (0.0, false));
        self.plans += 1;
        tracing::debug!(device = %self.cfg.device.name, groups = self.groups.len(), idle = true, "period");
        let recheck = crate::cgroups::reapply::due(self.plans, self.period);
        self.throttle_writes.sync(&h.root, self.groups.keys());
        let dev = self.cfg.device.dev;
        for (rel, t) in self.groups.iter_mut().filter(|(rel, t)| t.present && self.throttle_writes.due(rel, recheck)) {
            if overwrites.saw(&h.dir(rel), h.set_throttle(rec, rel, dev, &t.throttle)?) == Written::Vanished {
                t.present = false;
            }
        }
        Ok(())
    }

    /// Its device.
    pub fn dev(&self) -> DevNum {
        self.cfg.device.dev
    }

    /// Whether the planner counts each present cgroup as active now.
    pub fn activity(&self, now: Nanos) -> Vec<(String, bool)> {
        let stats = self.ctl.stats(now);
        self.groups
            .iter()
            .filter(|(_, t)| t.present)
            .map(|(rel, t)| (rel.clone(), stats.groups[t.id.index()].active))
            .collect()
    }

    /// Ends the control of a device that went away: restores what was written for it where it can,
    /// and says so once.
    fn lose_device(&mut self, rec: &mut Recorder) -> Result<()> {
        self.gone = true;
        let dev = self.cfg.device.dev;
        let key = dev.to_string();
        let r = rec.revert_where(|c| c.key == key)?;
        for t in self.groups.values_mut() {
            t.throttle = Throttle::default();
        }
        tracing::warn!(
            "device {} ({dev}) is gone (detached, removed, or another device at its number): \
             nothing more is written for it; {} setting(s) restored, {} gone with it, {} changed by others \
             left alone; restart the agent to control it again",
            self.cfg.device.name,
            r.restored,
            r.vanished,
            r.changed_by_others.len()
        );
        Ok(())
    }

    /// The device's state now.
    pub fn status(&self, now: Nanos) -> DeviceLine {
        let stats = self.ctl.stats(now);
        let period_vtime = self.last_elapsed_s * 1e9 * VTIME_PER_NSEC as f64;
        let mut groups: Vec<GroupLine> = self
            .groups
            .iter()
            .filter(|(_, t)| t.present)
            .map(|(rel, t)| {
                let g = &stats.groups[t.id.index()];
                let usage_share = (t.usage[0].cost + t.usage[1].cost) as f64 / period_vtime;
                let state = if self.gone {
                    "device gone"
                } else if !g.active {
                    "idle"
                } else if t.gets_no_limit(g) {
                    "alone"
                } else if donating(g) {
                    "donating"
                } else if t.throttle.is_limited()
                    && usage_share >= 0.9 * g.hweight_inuse * stats.device.vrate_pct / 100.0
                {
                    "limited"
                } else {
                    "running"
                };
                GroupLine {
                    cgroup: rel.clone(),
                    weight: t.weight,
                    hweight_active: g.hweight_active,
                    hweight_inuse: g.hweight_inuse,
                    usage_share,
                    limits: t.throttle.as_array(),
                    state: state.into(),
                    debt_us: g.debt_us,
                    note: if g.active && !self.gone { unused_share_note(t) } else { String::new() },
                    iocost: None,
                }
            })
            .collect();
        groups.sort_by(|a, b| a.cgroup.cmp(&b.cgroup));
        DeviceLine {
            device: self.cfg.device.name.clone(),
            dev: self.cfg.device.dev.to_string(),
            vrate_pct: stats.device.vrate_pct,
            busy_level: stats.device.busy_level,
            lat_us: self.verdicts.mean_us,
            target_us: if self.qos.rppm == 0 && self.qos.wppm == 0 {
                [0, 0]
            } else {
                [self.qos.rlat_us, self.qos.wlat_us]
            },
            missed_ppm: stats.device.missed_ppm,
            model: Some(self.cfg.model),
            groups,
            iocost: None,
            note: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::ModelParams;
    use ioshare_host::{DevNum, DiskId};

    /// 5 000 cgroups come and go, 10 alive at a time: the controller holds the live groups and at
    /// most `RENEW_AT` others, each live cgroup's id names its group, and the vrate survives.
    #[test]
    fn the_controller_is_renewed_over_the_live_groups() {
        let device = DiskId { dev: DevNum { major: 7, minor: 250 }, name: "loop250".into() };
        let qos = QosParams { min_ppm: 10_000, max_ppm: 10_000_000, ..NO_QOS };
        let cfg = DeviceConfig { device, model: ModelParams::SSD_DFL, qos: Some(qos), tuned: None };
        let mut d = DevicePlanner::new(cfg, Duration::from_millis(100));
        d.ctl.set_vrate_pct(60.0);
        let (mut most, mut renewed) = (0, 0);
        for i in 0..5000u32 {
            d.mark_all_absent();
            for k in i.saturating_sub(9)..=i {
                d.track(0, &format!("t/c{k}"), 100 + k % 7, &Limits::default(), true).unwrap();
            }
            let held = d.ctl.stats(0).groups.len();
            d.drop_absent(0).unwrap();
            renewed += usize::from(d.ctl.stats(0).groups.len() < held);
            most = most.max(held);
            assert_eq!(d.groups.len(), (i + 1).min(10) as usize);
        }
        // The live 10, their parent `t`, and up to RENEW_AT + 1 of vanished cgroups.
        assert!(most <= 10 + 1 + RENEW_AT + 1, "the controller held {most} groups");
        assert!(renewed >= 4, "renewed {renewed} times");
        let stats = d.ctl.stats(0);
        for (rel, t) in &d.groups {
            assert_eq!(stats.groups[t.id.index()].path, *rel);
            assert_eq!(stats.groups[t.id.index()].weight, t.weight);
        }
        assert!((d.ctl.vrate_pct() - 60.0).abs() < 0.01, "vrate carried over: {}", d.ctl.vrate_pct());
    }
}
