//! IOCost: proportional IO control by device occupancy (Linux `blk-iocost`, restated for userspace).
//!
//! # The model
//! Counting IOs or bytes does not say how much of a device an IO occupies: a 4 KiB random read can
//! take as long as a megabyte read sequentially. IOCost charges every IO its expected *device time*,
//! from a per-device [cost model](model) (absolute cost, in virtual-time units where one second is
//! 2^37), and shares device time by weight.
//!
//! # Hierarchical weights
//! Groups form a [tree](tree) addressed by paths. A group's share (hweight) is the product, along its
//! path, of its weight over the sum of its *active* siblings' weights; only groups that issued IO
//! recently are active. hweights are cached per group and revalidated by a generation number, so the
//! issue path never walks the tree.
//!
//! # Virtual time
//! The device has a global clock, vtime, that advances at `vrate` × wall time (vrate 100% = the model
//! is exact). Each group has a local vtime; an IO of absolute cost `c` costs the group `c / hweight`
//! of local vtime. It may issue when `local + cost <= global`: the gap is the group's budget. A group
//! that cannot issue queues its IO FIFO and a timer wakes it when the budget will exist. A newly
//! active group starts with half a period of budget, and budget above that is never accumulated.
//!
//! # Planning
//! Every period (a multiple of the latency target, 1 ms..1 s) the [planner](planner) reads the
//! latencies of completed IOs (net of their size cost) and the time IOs waited for a device slot,
//! derives a busy level, and moves vrate up while groups are throttled with spare capacity, or down
//! when latency targets are missed. It deactivates idle groups, and has groups that do not use their
//! share [donate](donation) it: their in-use weight drops so that their budget would end the next
//! period at 50% of a period, and everyone else's share grows by one global factor (the kernel's
//! "Andy's method"). A donor takes weight back on its own issue path, 25% at a time, the moment it
//! needs it.
//!
//! # Debt
//! IO that must not wait (swap, metadata; in userspace: IO marked `must_issue`) is issued at once and
//! its cost recorded as debt in absolute units, repaid from later budget at the group's full share.
//! While in debt a group donates everything and its other IO waits. Debt beyond five periods turns
//! into a delay (250 µs..250 ms, halving each second) the caller must impose on the group's
//! producer. Debt is forgiven (halved every 100 ms) while the device is mostly idle.
//!
//! # Beyond the kernel: the device-depth option
//! The kernel judges saturation from completion latency against the QoS targets and from IOs waiting
//! for a device tag (`rq_wait`). On a device that accepts far more IOs than it serves in parallel
//! (virtual and network disks, NVMe with deep queues) neither signal fires until the queue is very
//! deep: IOs never wait for a tag, and without a latency target nothing else says the device is
//! full. Then vrate over-commits the device (it rises whenever a group is throttled), a group that
//! runs out of IOs rather than budget donates, and the device's FIFO splits what is over-committed
//! by queue depth — two saturating readers at 2:1 end near 1:1, weight 1 beside 10 000 takes its
//! queue share, a group back from idle floods the device with the budget vrate over-commits.
//! The kernel behaves the same (measured in `ioshare-sim`'s `qdepth` tests), so the kernel-faithful
//! controller remains the default.
//!
//! With [`IoCost::with_depth_limit`] ioshare owns the device's slots instead ([`depth`]): at most
//! a limit of IOs in the device, the rest waiting in a slot queue served by the groups' vtime
//! (start-time fair queueing over IOCost's own virtual clocks) — except that a group below its
//! share of the limit never waits (a light latency-sensitive reader) — the limit sized by the
//! latency target like blk-iolatency's queue depth or Seastar's io_queue; a missed target shrinks
//! the limit, never vrate. Slot waits are not counted as the kernel's tag waits (`rq_wait`: the
//! slot queue is served by weight already); groups short of slots (waiting for them most of a
//! period, or holding their share of full slots) do not donate; vrate does not rise while the
//! slots are full. Over-commit is then shared by weight, and vrate stays at what the device serves.
//!
//! # Userspace adaptation
//! Time is a parameter in ns (the kernel uses µs); wait queues hold IOs instead of sleeping tasks;
//! per-group hrtimers are entries of one timer heap served by [`Controller::dispatch`]; the delay is
//! returned from `submit` instead of sleeping the task. The built-in parameter sets are not switched
//! automatically (the kernel's "autop"): the caller gives the model and QoS.

pub mod aggregate;
pub mod depth;
pub mod donation;
pub mod issue;
pub mod line;
pub mod model;
pub mod planner;
pub mod qos;
pub mod replay;
pub mod tree;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::controller::{Completion, Controller, DeviceStats, Dispatch, Event, GroupStats, Stats, Submit};
use crate::error::{Error, Result};
use crate::group::{path_components, GroupNames, GroupSettings};
use crate::io::{GroupId, Io, Nanos, NSEC_PER_USEC};
use depth::{DepthLimit, Slots};
use model::{CostModel, LinearModel, VTIME_PER_USEC};
use qos::QosParams;
use tree::{Tree, WEIGHT_ONE};

/// Budget margins in % of a period: below MIN no donation, below LOW snapback, TARGET = start budget.
const MARGIN_MIN_PCT: u64 = 10;
const MARGIN_LOW_PCT: u64 = 20;
const MARGIN_TARGET_PCT: u64 = 50;
/// Most events kept between two `take_events` calls; later ones are dropped.
const MAX_EVENTS: usize = 100_000;

/// Budget margins in vtime units, derived from the period and the base vrate.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Margins {
    min: u64,
    low: u64,
    target: u64,
}

/// Counters of a subtree, summed for the statistics of inner groups.
#[derive(Clone, Copy, Debug, Default)]
struct SubtreeTotals {
    usage_us: u64,
    wait_ns: u64,
    issued: u64,
    queued: u64,
    debt: u64,
}

/// Latency and device-slot statistics of the current period.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LatStat {
    nr_met: [u64; 2],
    nr_missed: [u64; 2],
    rq_wait_ns: u64,
}

/// The IOCost controller of one device.
#[derive(Debug)]
pub struct IoCost<M: CostModel = LinearModel> {
    model: M,
    qos: QosParams,
    names: GroupNames,
    /// Tree index of each group id.
    node_of: Vec<u32>,
    /// Group id of each tree node (root and free nodes: none).
    id_of: Vec<Option<GroupId>>,
    /// Nodes of removed groups, for the next new group.
    free_nodes: Vec<u32>,
    tree: Tree,
    /// Activated leaves (kernel `active_iocgs`).
    active_list: Vec<u32>,
    running: bool,
    period_us: u64,
    timer_slack_ns: u64,
    margins: Margins,
    vrate_min: u64,
    vrate_max: u64,
    /// Controlled vrate, vtime units per µs (VTIME_PER_USEC = 100%).
    vtime_base_rate: u64,
    /// `vtime_base_rate` plus vtime-loss compensation; advances vnow.
    vtime_rate: u64,
    /// Budget thrown away this period (negative), compensated by `vtime_rate`.
    vtime_err: i64,
    period_at: Nanos,
    period_at_vtime: u64,
    cur_period: u64,
    busy_level: i32,
    lat: LatStat,
    nr_done: u64,
    last_missed_ppm: [u32; 2],
    last_rq_wait_pct: u32,
    dfgv_period_at: Nanos,
    dfgv_period_rem: u64,
    dfgv_usage_us_sum: u64,
    /// IOs released by wait-queue kicks, not yet handed out by `dispatch`.
    ready: VecDeque<Io>,
    /// Wake-up times of groups' wait queues (stale entries skipped).
    timers: BinaryHeap<Reverse<(Nanos, u32)>>,
    events: Vec<Event>,
    /// Whether events are logged (see [`IoCost::without_events`]).
    logging: bool,
    /// IOs each queue is reserved for when made (see [`IoCost::reserving`]).
    queue_reserve: usize,
    /// Planner scratch: donors of the period, and the inner nodes above them (pre-order).
    donors: Vec<u32>,
    walk: Vec<u32>,
    /// The device-depth option: slot accounting and queue (`None`: kernel-faithful).
    slots: Option<Slots>,
}

impl<M: CostModel> IoCost<M> {
    /// A controller for a device described by `model`, with latency QoS `qos`.
    pub fn new(model: M, qos: QosParams) -> Self {
        let mut c = IoCost {
            model,
            qos,
            names: GroupNames::default(),
            node_of: Vec::new(),
            id_of: vec![None],
            free_nodes: Vec::new(),
            tree: Tree::new(),
            active_list: Vec::new(),
            running: false,
            period_us: 0,
            timer_slack_ns: 0,
            margins: Margins::default(),
            vrate_min: 0,
            vrate_max: 0,
            vtime_base_rate: VTIME_PER_USEC,
            vtime_rate: VTIME_PER_USEC,
            vtime_err: 0,
            period_at: 0,
            period_at_vtime: 0,
            cur_period: 0,
            busy_level: 0,
            lat: LatStat::default(),
            nr_done: 0,
            last_missed_ppm: [0; 2],
            last_rq_wait_pct: 0,
            dfgv_period_at: 0,
            dfgv_period_rem: 0,
            dfgv_usage_us_sum: 0,
            ready: VecDeque::new(),
            timers: BinaryHeap::new(),
            events: Vec::new(),
            logging: true,
            queue_reserve: 0,
            donors: Vec::new(),
            walk: Vec::new(),
            slots: None,
        };
        c.refresh_params();
        c
    }

    /// The same controller with the [device-depth option](depth): at most `limit.max` IOs in the
    /// device, handed out in vtime order and sized by the latency target.
    pub fn with_depth_limit(mut self, limit: DepthLimit) -> Self {
        let mut slots = Slots::new(limit);
        slots.reserve = self.queue_reserve;
        slots.judging = self.qos.rppm != 0 || self.qos.wppm != 0;
        self.slots = Some(slots);
        self
    }

    /// The current device-depth limit, if the option is on.
    pub fn depth_limit(&self) -> Option<u32> {
        self.slots.as_ref().map(|s| s.limit)
    }

    /// The cost model in use.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// Current base vrate in percent.
    pub fn vrate_pct(&self) -> f64 {
        self.vtime_base_rate as f64 * 100.0 / VTIME_PER_USEC as f64
    }

    /// Period length, vrate bounds and margins from the QoS parameters (kernel `ioc_refresh_params`).
    fn refresh_params(&mut self) {
        self.period_us = self.qos.period_us();
        self.timer_slack_ns = self.period_us * NSEC_PER_USEC / 100;
        self.vrate_min = (self.qos.min_ppm as u64 * VTIME_PER_USEC).div_ceil(1_000_000);
        self.vrate_max = (self.qos.max_ppm as u64 * VTIME_PER_USEC).div_ceil(1_000_000);
        self.refresh_margins();
    }

    pub(crate) fn refresh_margins(&mut self) {
        let m = |pct: u64| (self.period_us * pct / 100) * self.vtime_base_rate;
        self.margins = Margins { min: m(MARGIN_MIN_PCT), low: m(MARGIN_LOW_PCT), target: m(MARGIN_TARGET_PCT) };
    }

    /// Global vtime at `now` (kernel `ioc_now`), wrapping like the kernel's.
    #[inline]
    fn vnow(&self, now: Nanos) -> u64 {
        let elapsed = now.saturating_sub(self.period_at);
        let (us, rem_ns) = (elapsed / NSEC_PER_USEC, elapsed % NSEC_PER_USEC);
        let delta = us.wrapping_mul(self.vtime_rate).wrapping_add(rem_ns * self.vtime_rate / NSEC_PER_USEC);
        self.period_at_vtime.wrapping_add(delta)
    }

    fn period_ns(&self) -> Nanos {
        self.period_us * NSEC_PER_USEC
    }

    /// Logs the event `make` builds, unless the log is off or full (then nothing is built: paths
    /// are strings, and the issue path logs activations).
    fn log(&mut self, make: impl FnOnce(&Self) -> Event) {
        if self.logging && self.events.len() < MAX_EVENTS {
            let event = make(self);
            self.events.push(event);
        }
    }

    /// The same controller with every queue reserved for `ios` IOs when it is made (each group's
    /// wait queue, the released-IO queue, the timer heap, the device-depth option's slot queues), so
    /// that the issue path allocates nothing until a queue holds more (then it doubles, once per new
    /// high-water mark). Off by default: a planner-only driver (the agent) queues nothing.
    pub fn reserving(mut self, ios: usize) -> Self {
        self.queue_reserve = ios;
        self.ready.reserve(ios);
        self.timers.reserve(ios);
        if let Some(slots) = &mut self.slots {
            slots.reserve = ios;
        }
        self
    }

    /// The same controller without an event log: [`Controller::take_events`] stays empty, and the
    /// issue path never allocates for one (a driver that does not read the events wants this).
    pub fn without_events(mut self) -> Self {
        self.logging = false;
        self.events = Vec::new();
        self
    }

    fn path_of(&self, node: u32) -> String {
        self.id_of[node as usize].map(|id| self.names.path(id).to_string()).unwrap_or_default()
    }

    /// Creates the node for `path` and its missing ancestors.
    fn ensure_node(&mut self, path: &str, weight: u32) -> Result<GroupId> {
        let parts = path_components(path)?;
        let mut parent = 0u32;
        let mut id = None;
        for depth in 1..=parts.len() {
            let prefix = parts[..depth].join("/");
            let w = if depth == parts.len() { weight } else { crate::group::WEIGHT_DEFAULT };
            let (gid, new) = self.names.insert(&prefix)?;
            if new {
                let node = self.new_node(parent, w as u64 * WEIGHT_ONE);
                self.id_of[node as usize] = Some(gid);
                match self.node_of.get_mut(gid.index()) {
                    Some(slot) => *slot = node,
                    None => self.node_of.push(node),
                }
            }
            parent = self.node_of[gid.index()];
            id = Some(gid);
        }
        Ok(id.expect("a path has at least one component"))
    }

    /// A node under `parent`: a removed group's if one is free, else a new one.
    fn new_node(&mut self, parent: u32, weight: u64) -> u32 {
        let node = match self.free_nodes.pop() {
            Some(node) => {
                self.tree.reuse(node, parent, weight);
                node
            }
            None => {
                self.id_of.push(None);
                self.tree.add(parent, weight)
            }
        };
        self.tree.nodes[node as usize].waitq.reserve(self.queue_reserve);
        // Every node may be active at once: activation never grows the list on the issue path.
        self.active_list.reserve(self.tree.nodes.len().saturating_sub(self.active_list.len()));
        if let Some(slots) = &mut self.slots {
            slots.prepare(node);
        }
        node
    }

    /// Takes a removed group's node out of the tree: inactive, weightless, its id forgotten.
    fn free_node(&mut self, now: Nanos, node: u32) {
        if self.tree.nodes[node as usize].on_list {
            self.tree.propagate(node, 0, 0, None);
            self.tree.commit();
            self.tree.nodes[node as usize].on_list = false;
            self.active_list.retain(|&i| i != node);
            self.log(|c| Event::Deactivate { at: now, group: c.path_of(node) });
        }
        self.tree.nodes[node as usize].timer = None;
        self.id_of[node as usize] = None;
        self.free_nodes.push(node);
    }

    /// Changes a group's weight, keeping its inuse (kernel `weight_updated`).
    fn set_weight(&mut self, now: Nanos, node: u32, weight: u32) {
        let new = weight as u64 * WEIGHT_ONE;
        let n = &self.tree.nodes[node as usize];
        let old = n.weight;
        if new == old {
            return;
        }
        if n.active != 0 {
            // The kernel keeps inuse (clamped to the new weight); donation and snapback adjust it.
            let inuse = n.inuse;
            let margin = self.margin_of(now, node);
            self.tree.nodes[node as usize].weight = new;
            self.tree.propagate(node, new, inuse, Some(margin));
            self.tree.commit();
        } else {
            self.tree.nodes[node as usize].weight = new;
        }
    }

    /// `vnow - vtime` of a node: its budget, negative when over.
    pub(crate) fn margin_of(&self, now: Nanos, node: u32) -> i64 {
        self.vnow(now).wrapping_sub(self.tree.nodes[node as usize].vtime) as i64
    }

    /// Per-node totals of each subtree (a node and its descendants): each live node's own counters
    /// added to itself and every ancestor. Free nodes count nowhere.
    fn subtree_totals(&self, now: Nanos) -> Vec<SubtreeTotals> {
        let since = |s: Option<Nanos>| s.map_or(0, |t| now.saturating_sub(t));
        let mut totals = vec![SubtreeTotals::default(); self.tree.nodes.len()];
        for (i, m) in self.tree.nodes.iter().enumerate().filter(|(i, _)| *i == 0 || self.id_of[*i].is_some()) {
            let own = SubtreeTotals {
                usage_us: m.usage_us + (m.abs_vusage - m.last_abs_vusage) / self.vtime_base_rate,
                wait_ns: m.wait_ns + since(m.wait_since),
                issued: m.issued,
                queued: (m.waitq.len() + self.slots.as_ref().map_or(0, |s| s.queued(i as u32))) as u64,
                debt: m.abs_vdebt,
            };
            for &a in m.ancestors.iter() {
                let t = &mut totals[a as usize];
                t.usage_us += own.usage_us;
                t.wait_ns += own.wait_ns;
                t.issued += own.issued;
                t.queued += own.queued;
                t.debt += own.debt;
            }
        }
        totals
    }

    fn group_stats(&self, now: Nanos, id: GroupId, t: &SubtreeTotals) -> GroupStats {
        let node = self.node_of[id.index()];
        let n = &self.tree.nodes[node as usize];
        let (hwa, hwi) = if n.active != 0 { self.tree.compute_hweights(node) } else { (0, 0) };
        let delay_us = if n.use_delay { self.current_delay_us(now, node) } else { 0 };
        GroupStats {
            path: self.names.path(id).to_string(),
            weight: (n.weight / WEIGHT_ONE) as u32,
            active: n.active != 0,
            hweight_active: hwa as f64 / WEIGHT_ONE as f64,
            hweight_inuse: hwi as f64 / WEIGHT_ONE as f64,
            issued: t.issued,
            queued: t.queued,
            usage_us: t.usage_us,
            wait_us: t.wait_ns / NSEC_PER_USEC,
            debt_us: t.debt / VTIME_PER_USEC,
            delay_us,
            vbudget_us: self.vnow(now).wrapping_sub(n.vtime) as i64 / VTIME_PER_USEC as i64,
        }
    }
}

impl<M: CostModel> Controller for IoCost<M> {
    fn name(&self) -> &'static str {
        "iocost"
    }

    fn configure(&mut self, now: Nanos, path: &str, settings: &GroupSettings) -> Result<GroupId> {
        settings.validate(path)?;
        let existed = self.names.get(path);
        let id = self.ensure_node(path, settings.weight)?;
        if existed.is_some() {
            self.set_weight(now, self.node_of[id.index()], settings.weight);
        }
        Ok(id)
    }

    #[inline]
    fn submit(&mut self, now: Nanos, io: Io) -> Submit {
        self.submit_io(now, io)
    }

    fn group(&self, path: &str) -> Result<GroupId> {
        self.names.require(path)
    }

    fn remove(&mut self, now: Nanos, path: &str) -> Result<GroupId> {
        let (node_of, tree, slots) = (&self.node_of, &self.tree, &self.slots);
        let id = self.names.remove(path, |id, path| {
            let node = node_of[id.index()];
            let n = &tree.nodes[node as usize];
            let queued = (n.waitq.len() + slots.as_ref().map_or(0, |s| s.queued(node))) as u64;
            let in_flight = n.issued - n.completed;
            match queued + in_flight {
                0 => Ok(()),
                _ => Err(Error::GroupBusy {
                    path: path.to_string(),
                    reason: format!("{queued} IOs queued and {in_flight} in flight: dispatch and complete them first"),
                }),
            }
        })?;
        self.free_node(now, self.node_of[id.index()]);
        Ok(id)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.dispatch_io(now)
    }

    #[inline]
    fn complete(&mut self, now: Nanos, io: &Io, timing: Completion) {
        self.complete_io(now, io, timing)
    }

    fn next_tick(&self) -> Option<Nanos> {
        self.running.then(|| self.period_at + self.period_ns())
    }

    fn tick(&mut self, now: Nanos) {
        self.run_planner(now)
    }

    fn stats(&self, now: Nanos) -> Stats {
        Stats {
            device: DeviceStats {
                vrate_pct: self.vrate_pct(),
                busy_level: self.busy_level,
                period_us: self.period_us,
                missed_ppm: self.last_missed_ppm,
                rq_wait_pct: self.last_rq_wait_pct,
                nr_active: self.active_list.len() as u32,
                depth_limit: self.depth_limit().unwrap_or(0),
            },
            groups: {
                let totals = self.subtree_totals(now);
                (0..self.names.len())
                    .map(|i| {
                        let id = GroupId(i as u32);
                        match self.names.is_live(id) {
                            true => self.group_stats(now, id, &totals[self.node_of[i] as usize]),
                            false => GroupStats::default(),
                        }
                    })
                    .collect()
            },
        }
    }

    fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}
