//! The controller interface: one pull-based queue, driven alike by the simulator and the engine.
//!
//! A driver calls [`Controller::submit`] for every IO its workloads produce. The controller either
//! releases the IO at once (the fast path) or keeps it queued; queued IOs come back from
//! [`Controller::dispatch`], which otherwise says when to ask again. Every completion goes back through
//! [`Controller::complete`] (latency feedback), and the planner runs in [`Controller::tick`] at the time
//! [`Controller::next_tick`] names. Time is always a parameter; a controller never reads a clock.
//!
//! Every controller keeps one invariant, property-tested: each submitted IO is released exactly once.

use serde::Serialize;

use crate::error::Result;
use crate::group::GroupSettings;
use crate::io::{GroupId, Io, Nanos};

/// Outcome of [`Controller::submit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Submit {
    /// Issue this IO to the device now. `delay` > 0 asks the caller to hold back the group's producer
    /// for that long before it submits more (IOCost's debt delay; the kernel sleeps the task).
    Issue {
        /// The IO, to be issued.
        io: Io,
        /// How long the group's producer should pause, in ns (0 = no pause).
        delay: Nanos,
    },
    /// The controller holds the IO; it comes back from [`Controller::dispatch`].
    Queued,
}

/// Outcome of [`Controller::dispatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Dispatch {
    /// Issue this previously queued IO now.
    Io(Io),
    /// Nothing can be released before this time (ask again then, or earlier after other calls).
    At(Nanos),
    /// Nothing is queued.
    Idle,
}

/// Timing of a completed IO, as the driver observed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// When the controller released the IO (from `submit` or `dispatch`).
    pub released: Nanos,
    /// When the device started serving it (≥ `released`; later when the device queue was full).
    pub started: Nanos,
}

/// Per-device state of a controller, readable at any time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceStats {
    /// Virtual-time rate in percent of the cost model (100 for controllers without one).
    pub vrate_pct: f64,
    /// IOCost busy level (negative: spare capacity, positive: saturated).
    pub busy_level: i32,
    /// Planning period in µs (0 when the controller has no planner).
    pub period_us: u64,
    /// Missed latency targets in the last period, parts per million, [read, write].
    pub missed_ppm: [u32; 2],
    /// Share of the last period IOs spent waiting for a device slot, percent.
    pub rq_wait_pct: u32,
    /// Number of active groups.
    pub nr_active: u32,
    /// IOCost's device-depth limit (its option beyond the kernel), 0 when not in use.
    pub depth_limit: u32,
}

/// Per-group state of a controller, readable at any time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroupStats {
    /// Group path.
    pub path: String,
    /// Configured weight.
    pub weight: u32,
    /// Whether the group counts in the weight tree now.
    pub active: bool,
    /// Hierarchical share by active weights, 0..1.
    pub hweight_active: f64,
    /// Hierarchical share by in-use weights (after donation), 0..1.
    pub hweight_inuse: f64,
    /// IOs released to the device.
    pub issued: u64,
    /// IOs waiting in the controller now (for budget, or with IOCost's device-depth option for a
    /// device slot).
    pub queued: u64,
    /// Device time used (debt included), µs at the vrate in force when it was used (kernel `cost.usage`).
    pub usage_us: u64,
    /// Time spent with IO waiting, µs.
    pub wait_us: u64,
    /// Outstanding debt, µs of device time.
    pub debt_us: u64,
    /// Current producer delay, µs.
    pub delay_us: u64,
    /// Budget: vnow − the group's vtime, µs of device time at vrate 100% (IOCost only): an IO
    /// goes when its cost fits in it; negative while the group's vtime is ahead of vnow.
    pub vbudget_us: i64,
}

/// Snapshot of a controller.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Device-wide state.
    pub device: DeviceStats,
    /// One entry per group id (index = [`GroupId`]); the slot of a removed group's free id has an
    /// empty path and zeros.
    pub groups: Vec<GroupStats>,
}

/// Something notable a controller did, for the event log.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A group started counting in the weight tree.
    Activate {
        /// When.
        at: Nanos,
        /// Group path.
        group: String,
    },
    /// A group stopped counting (idle for a period).
    Deactivate {
        /// When.
        at: Nanos,
        /// Group path.
        group: String,
    },
    /// A group's in-use hweight changed by donation or snapback.
    Inuse {
        /// When.
        at: Nanos,
        /// Group path.
        group: String,
        /// Why: `transfer` (donation), `adjust` (in-period snapback), `shortage` (period-edge reset).
        reason: &'static str,
        /// Old hweight_inuse, 0..1.
        from: f64,
        /// New hweight_inuse, 0..1.
        to: f64,
    },
    /// The planner changed vrate.
    Vrate {
        /// When.
        at: Nanos,
        /// Old vrate, percent.
        from_pct: f64,
        /// New vrate, percent.
        to_pct: f64,
        /// Busy level that caused it.
        busy_level: i32,
    },
    /// Debt was forgiven because the device was mostly idle.
    Forgive {
        /// When.
        at: Nanos,
        /// Group path.
        group: String,
        /// Debt before, µs.
        debt_from_us: u64,
        /// Debt after, µs.
        debt_to_us: u64,
    },
}

impl Event {
    /// The event's kind, as serialised in `kind`: `activate`, `deactivate`, `inuse`, `vrate`, `forgive`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Activate { .. } => "activate",
            Event::Deactivate { .. } => "deactivate",
            Event::Inuse { .. } => "inuse",
            Event::Vrate { .. } => "vrate",
            Event::Forgive { .. } => "forgive",
        }
    }
}

/// An IO controller. See the module documentation for the calling protocol.
pub trait Controller {
    /// Short name (`iocost`, `none`, `token-bucket`, ...).
    fn name(&self) -> &'static str;

    /// Creates the group at `path` (ancestors too, with default settings) or updates its settings.
    /// Nothing changes when the settings are invalid.
    fn configure(&mut self, now: Nanos, path: &str, settings: &GroupSettings) -> Result<GroupId>;

    /// The id of the existing group at `path`, or [`crate::Error::UnknownGroup`].
    fn group(&self, path: &str) -> Result<GroupId>;

    /// Removes the group at `path`, which must have no child groups and no IO queued or in flight
    /// ([`crate::Error::GroupBusy`] otherwise; nothing changes). Its id is free: a group configured
    /// later may get it, and until then its slot in [`Stats::groups`] has an empty path.
    fn remove(&mut self, now: Nanos, path: &str) -> Result<GroupId>;

    /// Offers an IO. The fast path: no allocation, no tree walk.
    fn submit(&mut self, now: Nanos, io: Io) -> Submit;

    /// Releases the next queued IO that may go now, or says when one may.
    fn dispatch(&mut self, now: Nanos) -> Dispatch;

    /// Reports a completed IO (the same value that was released).
    fn complete(&mut self, now: Nanos, io: &Io, timing: Completion);

    /// When the planner wants to run next (`None`: no planner, or nothing to plan).
    fn next_tick(&self) -> Option<Nanos>;

    /// Runs the planner.
    fn tick(&mut self, now: Nanos);

    /// Current statistics.
    fn stats(&self, now: Nanos) -> Stats;

    /// Takes the events logged since the last call.
    fn take_events(&mut self) -> Vec<Event>;
}

/// The smallest of two optional deadlines.
pub fn earliest(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}
