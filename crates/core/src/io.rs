//! The unit every controller handles: one IO request, and the time base.

use serde::Serialize;

/// Time in nanoseconds on the driver's clock (virtual in the simulator, monotonic in the engine).
///
/// The core never reads a clock: every time-dependent call takes `now` as an argument.
pub type Nanos = u64;

/// Nanoseconds per microsecond.
pub const NSEC_PER_USEC: u64 = 1_000;
/// Nanoseconds per millisecond.
pub const NSEC_PER_MSEC: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NSEC_PER_SEC: u64 = 1_000_000_000;

/// Direction of an IO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Data flows from the device.
    Read,
    /// Data flows to the device.
    Write,
}

impl Op {
    /// 0 for reads, 1 for writes: the index of per-direction arrays.
    pub fn index(self) -> usize {
        match self {
            Op::Read => 0,
            Op::Write => 1,
        }
    }
}

/// Handle of a group inside one controller, returned by [`crate::Controller::configure`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub u32);

impl GroupId {
    /// The group's index in the controller's dense tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Per-IO flags that change how a controller treats the IO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoFlags {
    /// The IO must not wait (swap, filesystem metadata, a dying task): issue it at once and charge it
    /// as debt to be repaid from the group's future budget.
    pub must_issue: bool,
    /// The IO was merged into an already-issued request: it pays only the size part of its cost.
    pub merged: bool,
}

/// One IO request as a controller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Io {
    /// Caller's identifier, returned untouched.
    pub id: u64,
    /// Group that issued the IO.
    pub group: GroupId,
    /// Read or write.
    pub op: Op,
    /// Byte offset on the device.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
    /// Flags.
    pub flags: IoFlags,
    /// Controller-private charge recorded when the IO is released; the caller hands the IO back
    /// unchanged to [`crate::Controller::complete`]. Zero when created.
    pub charge: u64,
}

impl Io {
    /// A new IO with no flags.
    pub fn new(id: u64, group: GroupId, op: Op, offset: u64, len: u32) -> Self {
        Io { id, group, op, offset, len, flags: IoFlags::default(), charge: 0 }
    }

    /// The same IO marked `must_issue`.
    pub fn must_issue(mut self) -> Self {
        self.flags.must_issue = true;
        self
    }
}
