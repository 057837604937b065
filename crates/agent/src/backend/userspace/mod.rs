//! The userspace backend: ioshare-core's IOCost planner over real cgroups, one controller per device.
//!
//! This is the third driver of the controller (after the simulator and the engine). Its "device" is
//! a kernel block device, its "completions" are per-period counters, its "dispatch" is a limit
//! written to a cgroup file. Each period, per device:
//! 1. read each tracked cgroup's IO counters (v1 `blkio.throttle.io_serviced_recursive` and
//!    `io_service_bytes_recursive`, v2 `io.stat`) and take the delta since the last period — none
//!    in a period without IO on the device ([`crate::counters`]);
//! 2. charge it to the cgroup's group in [`IoCost`] ([`IoCost::charge_period`]) at the cost model's
//!    price — counters do not say which IOs were sequential, so the share of each cgroup's IOs that
//!    were comes from the eBPF observer ([`crate::io_mix`]); where it cannot run, every IO is charged
//!    as random (the conservative choice: a sequential stream is over-charged, never under-charged);
//! 3. judge the device's latency from `/sys/block/X/stat` ([`crate::latency`]) and record it, with an
//!    rq-wait stand-in when the device rather than its limit held a competing group back (it got
//!    less than [`FULLY_HELD`] of its limit on a busy device) in half of the last second's periods
//!    ([`bound_persistently`]); a group that competed keeps competing in a period the device
//!    slowed ([`device_slowed`]), and one held by its own fixed limit is not short of budget (it
//!    donates the rest, as blk-throttle's holding is invisible to the kernel's iocost);
//! 4. end the planner's period ([`IoCost::end_period`]): hweights, donation, vrate (brought down
//!    first to what the device did when it held a competing group back: [`follow_device`]);
//! 5. turn each group's budget for the next period (at least [`MIN_BUDGET_SHARE`] of its in-use
//!    share of a period: an overrun is paid back over periods; a donor's, [`DONOR_HEADROOM`] times
//!    the most it did lately) into blk-throttle limits ([`crate::limits`]),
//!    keeping those in force when they are within a few percent; the recorder writes only values
//!    that changed, and limits the same as last period's are looked at again (a file someone
//!    else changed set back, [`crate::reapply`]) in the period after a write to the cgroup's limit
//!    files ([`crate::limit_writes`]; where inotify cannot serve, when [`crate::reapply::due`]).
//!
//! With `--trace` each period also leaves a [`PeriodRecord`] of all this, and the status notes
//! a group below its share that no limit held back, with its threads' CPU ([`crate::cpu`]).
//!
//! Cgroups come and go (containers); the controller never forgets a group, so once the groups of
//! cgroups that are gone outnumber [`RENEW_AT`] and four times the live ones, the device's
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
//!
//! Without a latency target (no QoS line, or one without percentiles), vrate follows the device
//! where the counters can tell: a period in which a competing group was
//! held back by the busy device rather than by its own limit (the rq-wait stand-in of step 3) shows
//! that the limits promise more than the device does — the model is above what the device gives
//! this load (a profile taken on a quiet machine, a device shared with others, a loaded host). The
//! kernel would step vrate down 1–2% a period from there; the agent knows what the device delivered
//! (the cost of every tracked cgroup's IO at the model's prices) and brings vrate down to the median
//! of what it did in the last second ([`follow_device`]; by at most 15% a period, so a stall of the
//! device cannot collapse it) — when the device held a group back in at least half of the last
//! second's periods ([`FOLLOW_WHEN_BOUND`]: blk-throttle's slack makes a group held by its limit
//! look held by the device now and then, which alone would ratchet vrate down). Then the limits bind, the shares are the weights', and the planner raises vrate
//! again while groups are short of budget and the device keeps up. Without it, a model 30% above the
//! device left every limit loose, the device split its work by queue depth (1:1 for two QD32
//! readers), and the high-weight tenant, below its share and not at its limit, counted as a donor.
//!
//! Without a QoS line vrate ranges over [`NO_QOS`]'s 10–500% of the model: groups held by their
//! limits while no group is held by the device raise it (the planner's shortages), a group held by
//! the device brings it down to what the device did. So a model below the device (a profile of one
//! process at QD32 gets half of what two get from a loop device here) does not cap the total, and
//! one above it does not leave the limits loose.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::time::Duration;

use crate::status::{DeviceLine, GroupLine};
use ioshare_core::iocost::aggregate::Charge;
use ioshare_core::iocost::model::VTIME_PER_NSEC;
use ioshare_core::{Controller, GroupId, GroupSettings, GroupStats, IoCost, Limits, LinearModel, Nanos, Op, QosParams};
use ioshare_host::{DevNum, DiskStats, Recorder, Written};

use crate::config::DeviceConfig;
use crate::counters::{Counters, DeviceQuiet, Reading};
use crate::cpu::{CpuUse, CpuWatch};
use crate::error::Result;
use crate::hierarchy::{Hierarchy, Throttle};
use crate::io_mix::IoMix;
use crate::latency::{verdicts, Verdicts};
use crate::limit_writes::LimitWrites;
use crate::limits::{settle, throttle_for, DirUsage};
use crate::reapply::Overwrites;
use crate::trace::{GroupRecord, LimitAction, PeriodRecord};

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

/// The most [`follow_device`] lowers vrate in one period (a factor of it): from a model three times
/// the device to the device in 7 periods, while one period the machine stalled costs at most 15%.
pub const MOST_FALL_PER_PERIOD: f64 = 0.85;

/// A donor's budget for a period is at least this many times the most it did in a period lately
/// ([`PEAK_DECAY`]). A donor's limit is its donation target plus its budget left, about what it used
/// last period: a bursty donor (fio at a fixed rate issues in bursts: 4–12k IOPS per period around
/// 7k) reached it every third period, was counted as held back, took its whole share back for a
/// period — the other tenant's limit fell from 60k to 13k — and donated again the next (after the
/// high-weight tenant's drop, the low-weight one got 63–81% of its uncontrolled rate instead of
/// 85–99%). In the kernel a donor is not capped: its next IO past its budget makes it short.
pub const DONOR_HEADROOM: f64 = 1.5;

/// Per period, the most a group did in a period lately falls to this share of itself unless the
/// group does more: it forgets a burst in about a second.
pub const PEAK_DECAY: f64 = 0.8;

/// A group's budget for a period is at least this share of what its in-use share earns in one:
/// a group that overran (the device did more than vrate promised, or it was found mid-burst) pays
/// back over several periods instead of being stopped for one — a limit of a few IOs per second
/// for 100 ms idled the device and let the group burst after (seen in traces: both tenants at 10
/// IOPS for a period after a period at 146% of the model).
pub const MIN_BUDGET_SHARE: f64 = 0.5;

/// Periods over whose median of what the device did vrate follows down ([`follow_device`]): a
/// stall of the host disk (periods at 1% of the model seen in a trace, latencies of 100 ms) shorter
/// than half of them must not take vrate down with it — the kernel's step table then needs seconds
/// to climb back; and the median, not the most, so that the limits add up to what the device does
/// (following the most left the high-weight tenant at 60–65% of the work where 2/3 was its share).
pub const FOLLOW_WINDOW: usize = 10;

/// Periods of the last [`FOLLOW_WINDOW`] in which the device must have held a competing group back
/// for vrate to follow it down: half of them. blk-throttle lets a group held at its limit through at
/// 80–97% of it in a 100 ms period, so a tenant held by its limit also looks held by the device in
/// some periods; each such period took vrate down to what the limits had let the device do, a few
/// percent less each time, never back (the bench's agent scenario: vrate 100% → 62% in 4 s, the
/// high-weight tenant at its limit throughout, the total at 63% of no control). A model above the
/// device leaves every limit loose: then a competing group is held by the device in every period.
pub const FOLLOW_WHEN_BOUND: usize = FOLLOW_WINDOW / 2;

/// vrate after a device-bound period when the device did `delivered_pct` of the model over the last
/// [`FOLLOW_WINDOW`] periods (their median): at most that, and
/// at least [`MOST_FALL_PER_PERIOD`] of `vrate_pct` (never raised: raising is the planner's, when
/// groups are short of budget and none is held by the device).
pub fn follow_device(vrate_pct: f64, delivered_pct: f64) -> f64 {
    delivered_pct.max(vrate_pct * MOST_FALL_PER_PERIOD).min(vrate_pct)
}

/// What vrate follows down to after a device-bound period, given the last [`FOLLOW_WINDOW`] periods
/// (% of the model the device did, whether it held a competing group back): the median of what it
/// did, when it held a group back in at least [`FOLLOW_WHEN_BOUND`] of them; else nothing.
pub fn followed(window: &VecDeque<(f64, bool)>) -> Option<f64> {
    if !bound_persistently(window) {
        return None;
    }
    Some(median(window.iter().map(|d| d.0)))
}

/// Appends `value` to a window of the last [`FOLLOW_WINDOW`] periods, dropping the oldest.
fn remember<T>(window: &mut VecDeque<T>, value: T) {
    if window.len() == FOLLOW_WINDOW {
        window.pop_front();
    }
    window.push_back(value);
}

/// The median of `values` (the upper one of an even count; not empty).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = values.collect();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// Whether the device held a competing group back in at least [`FOLLOW_WHEN_BOUND`] of the last
/// [`FOLLOW_WINDOW`] periods — what it takes to follow it down, and to report rq-wait. A period now
/// and then in which blk-throttle's slack or a short stall of the host disk left a group below its
/// limit is noise: reported as rq-wait, each reset the planner's busy level, and vrate, held by
/// the kernel's step table to 0–1% a period for the first twenty periods of a climb, rose 1–2% a
/// second while both tenants sat at their limits with the device at 60% of what it did
/// uncontrolled.
pub fn bound_persistently(window: &VecDeque<(f64, bool)>) -> bool {
    window.iter().filter(|d| d.1).count() >= FOLLOW_WHEN_BOUND
}

/// A cgroup this device's controller tracks.
#[derive(Debug)]
struct Tracked {
    id: GroupId,
    weight: u32,
    caps: Limits,
    /// Its IO counters as last read.
    counters: Counters,
    usage: [DirUsage; 2],
    throttle: Throttle,
    present: bool,
    /// Last period: active beside others, below its share of the work done, not held by its limit.
    unused_share: bool,
    /// Its threads' CPU at the last sample ([`crate::cpu`]).
    cpu: Option<CpuUse>,
    /// It competed at the busy device last period ([`device_slowed`]).
    competed: bool,
    /// The most it did in a period lately (absolute cost per planning period, decaying by
    /// [`PEAK_DECAY`] a period): a donor's limit leaves room for it ([`DONOR_HEADROOM`]).
    peak: f64,
    /// Last period: the only group doing IO that no fixed cap of its own held ([`DeviceLoop::plan`]).
    lone: bool,
    /// Periods since it was last held at its limit, up to [`WAITING_PERIODS`]; `None` after that,
    /// or once it has no limit.
    since_held: Option<u32>,
    /// The budget its limits for this period came from (`None`: not limited by a budget).
    allowed: Option<u64>,
}

impl Tracked {
    /// Whether it gets no limit from its budget: the only active group on the device, or the only
    /// one doing IO beside groups held by fixed caps of their own (`lone`).
    fn alone(&self, g: &GroupStats) -> bool {
        g.hweight_active >= 0.999 || self.lone
    }
}

/// Periods a group held at its limit may then stay below it, even do no IO, and still count as
/// waiting at it (its IO queued in blk-throttle, which userspace cannot see) rather than as idle or
/// a donor. blk-throttle can let a group held at a low limit through in a burst and then hold it
/// for periods while it pays the burst back; counted idle, the group lost its share and the others
/// their limits, its queue went through at once, and the empty periods that followed repeated it
/// (measured in the lab guest: two fio jobs per tenant at 2:1 split 1:1, the low-weight tenant at
/// three times its limit). The kernel's iocost keeps a group with waiters active; 3 periods cover a
/// 10-IOPS limit's gap between IOs at the default period.
pub const WAITING_PERIODS: u32 = 3;

/// How far over its budget a group held at its limit is charged at most. blk-throttle lets a held
/// group through in bursts (a slice's allowance at once, more after a limit is rewritten) and pays
/// them back itself in the periods after; charged in full, a burst halved the group's next budget
/// and limit and the limit went back up a period later (the lab guest's traces: 1310 / 653 IOPS in
/// turn), and Linux 6.1's blk-throttle let a group whose limit swings like that over its mean limit
/// in 4 of 9 runs, up to 2.5 times (`scripts/blk-throttle-rewrite-check`, `swing`). Up to this much
/// over is still charged, so a steady overshoot is corrected by the budget.
pub const HELD_OVERSHOOT_CHARGED: f64 = 0.1;

/// Groups of vanished cgroups the controller may hold (beyond four per live one) before it is
/// renewed.
pub const RENEW_AT: usize = 1024;

/// Share of a period the device must have had IO in flight to count as busy.
pub const DEVICE_BUSY: f64 = 0.9;
/// Mean number of IOs in flight at the device over a period from which it counts as busy whatever
/// its busy time says: IOs are queued at the device, not at a limit. A loop device here reported
/// 30–80% busy time while two readers kept 64 IOs in flight at it (its `io_ticks` are sampled at
/// IO start and end), so busy time alone never saw it busy, no group counted as held by the
/// device, and vrate rose past what the device did until no limit bound.
pub const DEVICE_QUEUED: f64 = 4.0;
/// Share of its fair part of a busy device's work a group must get to count as competing for it.
pub const FAIR_SHARE_REACHED: f64 = 0.9;

/// How much the device's mean latency must exceed its median over the last [`FOLLOW_WINDOW`]
/// periods for the period to count as one in which the device slowed ([`device_slowed`]).
pub const SLOWED_LATENCY: f64 = 1.3;

/// Whether the device slowed this period: its mean latency (`lat_ms`) at least [`SLOWED_LATENCY`]
/// times the median of the last periods' (`recent`). Then a group that competed last period and
/// still does IO keeps competing, whatever its part of the work: the device held it back, its
/// demand did not fall. In periods the host disk under a loop device stalled (latency 1.5–2.5 × the
/// second before, the device at 45–70% of the work), the low-weight tenant, held at its limit, kept
/// its rate while the high-weight one's fell below its fair part of the work; counted as donating,
/// it gave the other up to two thirds of the device for a few periods. A group whose demand falls
/// lowers the device's latency, not raises it; and a rule on the group's own IOs in flight (kept
/// while its rate fell) kept a steady small reader from ever donating.
pub fn device_slowed(lat_ms: f64, recent: &VecDeque<f64>) -> bool {
    if recent.len() < FOLLOW_WINDOW / 2 {
        return false;
    }
    lat_ms >= SLOWED_LATENCY * median(recent.iter().copied())
}

/// rq-wait reported for a period in which the device, not a limit, held a competing group back: a
/// tenth of the period, above the planner's 5% threshold for "saturated".
pub const RQ_WAIT_SHARE: f64 = 0.1;

/// Share of a limit a group must reach in a period to count as held back by it. blk-throttle
/// enforces in slices and dispatches throttled IO in batches, so a group held at its limit shows
/// 80–95% of it in a 100 ms period here; a group that is not held back but happens to use 80% of its
/// limit merely stops donating the rest for that period.
pub const LIMITED_AT: f64 = 0.8;

/// Share of its limit a competing group must reach for the limit alone to explain its rate (below
/// it, the device held it back too: a limit it was given is more than the device delivers) — when
/// two or more groups not at fixed limits of their own do IO: vrate must then be near the device
/// for the limits to split it by weight (a group that the loose limits of a vrate above the device
/// leave below its share of the work counts as a donor). The only such group is held back by the
/// device only below [`LIMITED_AT`] of its limit: a limit a little above what the device gives it
/// splits nothing, and blk-throttle lets a group at its limit through at 85–95% of it, which read
/// as the device holding it back took vrate down period after period (pod b, beside pod a held by
/// its own fixed limit, got 72–79% of what it did beside the same static limit without the agent;
/// a group beside groups held by their caps is now not limited at all, `lone` in [`DeviceLoop::plan`],
/// and this covers one beside a group at half to 80% of its own cap).
pub const FULLY_HELD: f64 = 0.97;

/// Share of a fixed limit of its own (its rule's or its pod's) from which a group does not count
/// among those the weights split the device among ([`FULLY_HELD`]): blk-throttle lets a group at its
/// limit through at 80–97% of it, some periods less.
pub const NEAR_FIXED_LIMIT: f64 = 0.5;

/// How far a group's in-use share must fall below its active share for it to count as donating
/// (hweights are 16-bit fixed point: a smaller gap is rounding).
pub const DONATING_SLACK: f64 = 1e-3;

/// Whether the planner has the group donating part of its share this period.
pub fn donating(g: &GroupStats) -> bool {
    g.hweight_inuse + DONATING_SLACK < g.hweight_active
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

/// Whether usage over `secs` reached `share` of any limit in force.
fn held_back(t: &Throttle, usage: &[DirUsage; 2], secs: f64, share: f64) -> bool {
    let at = |used: u64, limit: u64| limit != 0 && used as f64 >= share * limit as f64 * secs;
    at(usage[0].ios, t.riops) || at(usage[1].ios, t.wiops) || at(usage[0].bytes, t.rbps) || at(usage[1].bytes, t.wbps)
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
pub struct DeviceLoop {
    cfg: DeviceConfig,
    qos: QosParams,
    ctl: IoCost,
    period: Duration,
    last_disk: Option<DiskStats>,
    /// When the last period was planned, and how long that period really was (s).
    last_plan: Option<Nanos>,
    last_elapsed_s: f64,
    verdicts: Verdicts,
    groups: HashMap<String, Tracked>,
    /// Groups the controller holds for cgroups no longer tracked.
    retired: usize,
    /// Weights of tree nodes that are not tracked (their IO is their tracked children's): the
    /// Kubernetes QoS class cgroups ([`crate::targets`]).
    inner: BTreeMap<String, u32>,
    /// Periods planned.
    plans: u64,
    mix: IoMix,
    /// The device's identity at the first period ([`disk_identity`]).
    identity: Option<String>,
    /// The device went away: nothing more is planned or written for it.
    gone: bool,
    /// Whether each period builds a [`PeriodRecord`] (`--trace`).
    tracing: bool,
    /// The last period's record, until taken.
    record: Option<PeriodRecord>,
    /// The tracked cgroups' threads.
    cpu: CpuWatch,
    /// What the device did in the last [`FOLLOW_WINDOW`] periods, % of the model, and whether it
    /// held a competing group back in each.
    delivered: VecDeque<(f64, bool)>,
    /// The device's mean latency in the last [`FOLLOW_WINDOW`] periods with IO, ms ([`device_slowed`]).
    latencies: VecDeque<f64>,
    /// The last period had no IO on the device ([`crate::counters`]).
    quiet: DeviceQuiet,
    /// Which cgroups' limit files were written ([`crate::limit_writes`]).
    limit_writes: LimitWrites,
    /// The last period planned left no group active ([`DeviceLoop::idle_period`]).
    idle: bool,
}

impl DeviceLoop {
    /// A controller for `cfg`'s device planning every `period`.
    pub fn new(cfg: DeviceConfig, period: Duration) -> Self {
        let qos = cfg.qos.unwrap_or(NO_QOS);
        let ctl = controller(&cfg, qos, period);
        let mix = IoMix::start(cfg.device.dev);
        DeviceLoop {
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
            limit_writes: LimitWrites::default(),
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
            peak: 0.0,
            lone: false,
            since_held: None,
            allowed: None,
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

    /// Builds a [`PeriodRecord`] every period from now on ([`take_record`](DeviceLoop::take_record)).
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
        let same_device = match (disk_identity(sys_block, &self.cfg.device.name), &self.identity) {
            (None, _) => false,
            (Some(now), Some(first)) => now == *first,
            (Some(now), None) => {
                self.identity = Some(now);
                true
            }
        };
        if !same_device {
            return self.lose_device(rec);
        }
        let dev = self.cfg.device.dev;
        let model = *self.ctl.model();
        let elapsed_s = self.last_plan.map_or(self.period.as_secs_f64(), |t| now.saturating_sub(t) as f64 / 1e9);
        self.last_plan = Some(now);
        self.last_elapsed_s = elapsed_s;
        // The device's counters first: whether it was busy decides who counts as held back.
        let disk = DiskStats::read(sys_block, &self.cfg.device.name).ok();
        let delta = match (disk, self.last_disk) {
            (Some(d), Some(last)) => Some(d.since(&last)),
            _ => None,
        };
        let quiet = DeviceQuiet::judge(self.last_disk.as_ref(), delta.as_ref());
        self.quiet = quiet;
        if disk.is_some() {
            self.last_disk = disk;
        }
        if quiet.0 && self.idle && !self.tracing {
            return self.idle_period(h, rec, overwrites);
        }
        // Mean IOs in flight over the period: the sum of the completed IOs' latencies over its length.
        let inflight = delta.map_or(0.0, |d| (d.ticks_ms[0] + d.ticks_ms[1]) as f64 / (elapsed_s * 1000.0));
        let busy = inflight >= DEVICE_QUEUED
            || delta.is_some_and(|d| d.io_ticks_ms as f64 >= DEVICE_BUSY * elapsed_s * 1000.0);
        let before = self.ctl.stats(now);
        self.mix.refresh();
        // 1–2: usage since the last period.
        let mut paths: Vec<&String> = self.groups.keys().collect();
        paths.sort();
        let paths: Vec<String> = paths.into_iter().cloned().collect();
        let mut delivered = 0;
        for rel in &paths {
            let t = self.groups.get_mut(rel).expect("tracked");
            t.usage = Default::default();
            if !t.present {
                continue;
            }
            match t.counters.read(h, rel, dev, quiet) {
                Reading::Gone => {
                    tracing::info!(cgroup = %rel, dev = %dev, "cgroup gone");
                    t.present = false; // vanished mid-period: not an error
                    continue;
                }
                Reading::Skipped | Reading::First => {}
                Reading::Since { ios, bytes } => {
                    for (op, i, b) in [(Op::Read, ios.read, bytes.read), (Op::Write, ios.write, bytes.write)] {
                        t.usage[op.index()] =
                            DirUsage { ios: i, bytes: b, cost: self.mix.charge(&model, rel, op, i, b) };
                    }
                }
            }
            delivered += t.usage[0].cost + t.usage[1].cost;
        }
        // Charged; a group counts as held back (in the kernel: it has IO waiting) when its limit held
        // it, or when the device was busy and it got about its fair share of what the device did — its
        // IO then waits at the device instead of at a limit, and it is a competitor, not a donor.
        // Competing groups below [`FULLY_HELD`] / [`LIMITED_AT`] of a limit in force; groups doing IO
        // not at a fixed limit of their own (those the weights split the device among).
        let (mut short_of_limit, mut well_short_of_limit, mut nr_weighed) = (false, false, 0);
        // Groups doing IO that no fixed cap of their own held, and the last one's charge.
        let (mut nr_uncapped, mut uncapped) = (0, None);
        let mut flags: HashMap<&str, (bool, bool, bool)> = HashMap::new();
        let mut charges: Vec<Charge> = Vec::new();
        let lat_ms =
            delta.map_or(0.0, |d| (d.ticks_ms[0] + d.ticks_ms[1]) as f64 / (d.ios[0] + d.ios[1]).max(1) as f64);
        let slowed = busy && device_slowed(lat_ms, &self.latencies);
        if lat_ms > 0.0 {
            remember(&mut self.latencies, lat_ms);
        }
        for rel in &paths {
            let t = self.groups.get_mut(rel).expect("tracked");
            if !t.present {
                continue;
            }
            let cost = t.usage[0].cost + t.usage[1].cost;
            // Per period, over at least one: a plan right after another (a timer catching up after
            // the agent was stopped) saw a few IOs in a millisecond, which scaled up made a donor's
            // limit twice what it was.
            let period_s = self.period.as_secs_f64();
            t.peak = (cost as f64 * period_s / elapsed_s.max(period_s)).max(t.peak * PEAK_DECAY);
            let g = before.groups.get(t.id.index());
            let fair = g.map_or(0.0, |g| g.hweight_active);
            // Held by a fixed limit of its own (its rule's or its pod's): the kernel's blk-throttle
            // holds such IO before iocost sees it, so iocost sees a group using less than its share
            // — a donor, whose leftover goes to the others. Counted as held (short of budget), it
            // kept its whole share and the others were held to theirs while the device idled.
            let caps = throttle_for(None, &t.usage, &model, self.period, &t.caps);
            let capped = held_back(&caps, &t.usage, elapsed_s, LIMITED_AT);
            let competing = !capped
                && busy
                && cost > 0
                && (cost as f64 >= FAIR_SHARE_REACHED * fair * delivered as f64 || (slowed && t.competed));
            t.competed = competing;
            // A donor's limit is its donation target plus its budget left (about 1.5 × what it
            // used): one that nears it is usually a noisy small user, not one held back — and one
            // really held back grows its target anyway (the donation math doubles a target whose
            // budget was spent). Only reaching its limit in full ends its donating.
            let fully_held = held_back(&t.throttle, &t.usage, elapsed_s, FULLY_HELD);
            let at_limit = held_back(&t.throttle, &t.usage, elapsed_s, LIMITED_AT);
            let held = !capped && if g.is_some_and(donating) { fully_held } else { at_limit };
            // Held at its limit lately and below it since: its IO is waiting there (blk-throttle
            // paying back a burst it let through).
            t.since_held = match t.since_held {
                _ if held => Some(0),
                Some(n) if n < WAITING_PERIODS && t.throttle.is_limited() => Some(n + 1),
                _ => None,
            };
            let waiting = !held && !capped && t.since_held.is_some();
            let has_io = cost > 0 || waiting;
            if competing && t.throttle.is_limited() {
                short_of_limit |= !fully_held;
                well_short_of_limit |= !at_limit;
            }
            nr_weighed += usize::from(has_io && !held_back(&caps, &t.usage, elapsed_s, NEAR_FIXED_LIMIT));
            if has_io && !capped {
                nr_uncapped += 1;
                uncapped = Some((rel.as_str(), charges.len(), held));
            }
            flags.insert(rel.as_str(), (competing, held, capped));
            // Held at its limit: a burst over its budget is blk-throttle's to pay back, not debt.
            let charged = match t.allowed {
                Some(allowed) if held => {
                    let most = allowed as f64 * elapsed_s / period_s * (1.0 + HELD_OVERSHOOT_CHARGED);
                    cost.min(most as u64)
                }
                _ => cost,
            };
            charges.push(Charge { group: t.id, abs_cost: charged, limited: competing || held || waiting });
        }
        // One group doing IO beside groups held by fixed caps of their own (a pod capped by its
        // annotation): nothing is left for the weights to split, and the kernel, where blk-throttle
        // holds the capped IO before iocost sees it, gives it all the device does — its budget
        // outruns the device, nothing waits, vrate stays. So it gets no limit, as a group alone, and
        // is short of budget only when held at a limit: counted short whenever it competed, it took
        // vrate up without end; limited by its budget, it got 66% of what it did beside the same
        // static cap without the agent, in a loaded CI run (its noise read as the device holding it
        // back, and vrate fell to 81%).
        let lone = uncapped.filter(|_| nr_uncapped == 1).map(|(rel, i, held)| {
            charges[i].limited = held;
            rel
        });
        self.ctl.charge_period(now, &charges);
        let device_bound = lone.is_none() && if nr_weighed >= 2 { short_of_limit } else { well_short_of_limit };
        // What the device did, in percent of the model's capacity over the period.
        let delivered_pct = delivered as f64 / (elapsed_s * 1e9 * VTIME_PER_NSEC as f64) * 100.0;
        remember(&mut self.delivered, (delivered_pct, device_bound));
        // 3: latency, and device-slot waits: a competing group that its own limit did not hold back
        // was held back by the device — the kernel sees that as IOs waiting for a device slot
        // (rq-wait), the signal that vrate promises more than the device does; when it held groups
        // back in half of the last second's periods ([`bound_persistently`]), or held one well below
        // its limit now (below [`LIMITED_AT`]: more than blk-throttle's slack — vrate climbing past
        // the device at 2% a period, the high-weight tenant got 78% of its limit two periods before
        // it counted as a donor and the split went 1:1 until the follow-down).
        let rq_wait_ns = if device_bound && (bound_persistently(&self.delivered) || well_short_of_limit) {
            (elapsed_s * 1e9 * RQ_WAIT_SHARE) as u64
        } else {
            0
        };
        if let Some(d) = delta {
            self.verdicts = verdicts(&d, &model, &self.qos);
            self.ctl.record_completions(self.verdicts.met, self.verdicts.missed, rq_wait_ns);
        }
        // With a latency target the device's latency says when vrate promises too much, as in the
        // kernel; following what the device did would mistake a device whose rate grows with the IOs
        // in flight (fewer once a tenant is held) for a full one, and take vrate down with each limit.
        let latency_target = self.qos.rppm != 0 || self.qos.wppm != 0;
        if let Some(did) = (device_bound && !latency_target).then(|| followed(&self.delivered)).flatten() {
            self.ctl.set_vrate_pct(follow_device(self.ctl.vrate_pct(), did));
        }
        // 4: plan.
        self.ctl.end_period(now);
        // 5: limits for the next period.
        let horizon = self.period.as_nanos() as Nanos;
        let stats = self.ctl.stats(now);
        self.idle = stats.device.nr_active == 0;
        let horizon_vtime = horizon as f64 * VTIME_PER_NSEC as f64;
        let mut written = 0;
        self.plans += 1;
        let recheck = crate::reapply::due(self.plans, self.period);
        self.limit_writes.sync(&h.root, self.groups.keys());
        // Threads' CPU: every period while tracing, else at each recheck for the active groups (the
        // status' note is only for those).
        let sample_cpu = self.tracing || recheck;
        let mut records = Vec::new();
        for rel in &paths {
            let t = self.groups.get_mut(rel).expect("tracked");
            if !t.present {
                continue;
            }
            let g = &stats.groups[t.id.index()];
            t.lone = lone == Some(rel.as_str());
            let alone = t.alone(g);
            let mut floor =
                (MIN_BUDGET_SHARE * g.hweight_inuse * stats.device.vrate_pct / 100.0 * horizon_vtime) as u64;
            if donating(g) {
                floor = floor.max((DONOR_HEADROOM * t.peak) as u64);
            }
            let budget = if alone { None } else { self.ctl.budget(now, t.id, horizon).map(|b| b.max(floor)) };
            t.allowed = budget;
            let planned = throttle_for(budget, &t.usage, &model, self.period, &t.caps);
            let throttle = settle(&t.throttle, planned);
            let (competing, held, capped) = flags.get(rel.as_str()).copied().unwrap_or_default();
            let cost = t.usage[0].cost + t.usage[1].cost;
            let target = before.groups.get(t.id.index()).map_or(0.0, |g| g.hweight_active);
            // Below its share of what the device did, and not because of a limit: the note.
            t.unused_share = g.active
                && !alone
                && !held
                && !capped
                && (cost as f64) < FAIR_SHARE_REACHED * target * delivered as f64;
            if sample_cpu && (self.tracing || g.active) {
                t.cpu = self.cpu.sample(rel, &h.dir(rel), now);
            }
            let action = if throttle != t.throttle {
                LimitAction::Written
            } else if planned != throttle {
                LimitAction::Kept
            } else {
                LimitAction::Same
            };
            if throttle != t.throttle || self.limit_writes.due(rel, recheck) {
                match overwrites.saw(&h.dir(rel), h.set_throttle(rec, rel, dev, &throttle)?) {
                    Written::Vanished => t.present = false,
                    Written::Changed | Written::Restored => {
                        tracing::trace!(cgroup = %rel, dev = %dev, limits = %throttle, "limits written");
                        written += 1;
                        t.throttle = throttle;
                    }
                    Written::Unchanged => t.throttle = throttle,
                }
            }
            if self.tracing {
                records.push(GroupRecord {
                    cgroup: rel.clone(),
                    weight: t.weight,
                    ios: [t.usage[0].ios, t.usage[1].ios],
                    bytes: [t.usage[0].bytes, t.usage[1].bytes],
                    cost,
                    target,
                    hweight_active: g.hweight_active,
                    hweight_inuse: g.hweight_inuse,
                    held,
                    competing,
                    short: held || competing,
                    donating: donating(g),
                    debt_us: g.debt_us,
                    budget,
                    planned: planned.as_array(),
                    limits: t.throttle.as_array(),
                    action,
                    cpu: t.cpu,
                });
            }
        }
        if self.tracing {
            self.record = Some(PeriodRecord {
                t_s: now as f64 / 1e9,
                device: self.cfg.device.name.clone(),
                elapsed_s,
                util: delta.map_or(0.0, |d| d.io_ticks_ms as f64 / (elapsed_s * 1000.0)),
                busy,
                inflight,
                lat_us: self.verdicts.mean_us,
                rq_wait: rq_wait_ns > 0,
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

    /// Whether the last period had no IO on the device (nothing it shows moved).
    pub fn quiet(&self) -> bool {
        self.quiet.0
    }

    /// A period without IO on the device after one that left no group active: the planner has
    /// nothing to do (its period timer is stopped, as the kernel's is; nothing to charge, no
    /// completion to judge, the limits it would plan are those in force), so it is not run and no
    /// cgroup's counters are read ([`crate::counters`]); only limits someone else overwrote are
    /// set back, and the device's window of what it did records the period as 0%.
    fn idle_period(&mut self, h: &Hierarchy, rec: &mut Recorder, overwrites: &mut Overwrites) -> Result<()> {
        remember(&mut self.delivered, (0.0, false));
        self.plans += 1;
        tracing::debug!(device = %self.cfg.device.name, groups = self.groups.len(), idle = true, "period");
        let recheck = crate::reapply::due(self.plans, self.period);
        self.limit_writes.sync(&h.root, self.groups.keys());
        let dev = self.cfg.device.dev;
        for (rel, t) in self.groups.iter_mut().filter(|(rel, t)| t.present && self.limit_writes.due(rel, recheck)) {
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
                } else if t.alone(g) {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::ModelParams;
    use ioshare_host::{DevNum, DiskId};

    /// A device-bound period brings vrate down to what the device did, by at most 15% a period, and
    /// never raises it.
    #[test]
    fn vrate_follows_a_device_bound_device_down() {
        assert_eq!(follow_device(100.0, 90.0), 90.0);
        assert_eq!(follow_device(100.0, 30.0), 85.0, "at most 15% a period");
        assert_eq!(follow_device(100.0, 120.0), 100.0, "never raised");
        // From a model three times the device: within 7 periods.
        let mut v = 300.0;
        for _ in 0..7 {
            v = follow_device(v, 100.0);
        }
        assert!((v - 100.0).abs() < 1e-9, "{v}");
    }

    /// A group held by its limit looks held by the device in a few periods (blk-throttle's slack):
    /// those alone do not take vrate down; a device that holds groups back in half the periods does,
    /// to the median of what it did.
    #[test]
    fn the_device_slowed_when_its_latency_rose_past_its_recent_median() {
        let recent: VecDeque<f64> = [1.0, 1.1, 0.9, 1.0, 5.0, 1.0].into_iter().collect();
        assert!(device_slowed(1.3, &recent), "1.3 × the median 1.0");
        assert!(!device_slowed(1.25, &recent), "within the noise");
        let few: VecDeque<f64> = [1.0, 1.0].into_iter().collect();
        assert!(!device_slowed(10.0, &few), "not judged on fewer than half a window");
    }

    #[test]
    fn vrate_follows_only_a_device_that_holds_groups_back_in_half_the_periods() {
        let window = |bound: usize| -> VecDeque<(f64, bool)> {
            (0..FOLLOW_WINDOW).map(|i| (60.0 + i as f64, i < bound)).collect()
        };
        assert_eq!(followed(&window(FOLLOW_WHEN_BOUND - 1)), None, "sporadic");
        assert_eq!(followed(&window(FOLLOW_WHEN_BOUND)), Some(60.0 + (FOLLOW_WINDOW / 2) as f64));
        assert_eq!(followed(&VecDeque::new()), None);
    }

    /// 5 000 cgroups come and go, 10 alive at a time: the controller holds the live groups and at
    /// most `RENEW_AT` others, each live cgroup's id names its group, and the vrate survives.
    #[test]
    fn the_controller_is_renewed_over_the_live_groups() {
        let device = DiskId { dev: DevNum { major: 7, minor: 250 }, name: "loop250".into() };
        let qos = QosParams { min_ppm: 10_000, max_ppm: 10_000_000, ..NO_QOS };
        let cfg = DeviceConfig { device, model: ModelParams::SSD_DFL, qos: Some(qos) };
        let mut d = DeviceLoop::new(cfg, Duration::from_millis(100));
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
