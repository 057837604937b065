//! The values that cross the ABI: `repr(C)` structs and the integer constants that select kinds,
//! directions, flags and outcomes. Integers rather than C enums: a C caller may pass any value, and
//! an out-of-range one must become `IOSHARE_E_INVALID`, not undefined behaviour.

use std::ptr;

use ioshare_core::{DeviceStats, GroupId, GroupStats, Io, IoFlags, Op};

use crate::error::{Failure, IOSHARE_E_INVALID, IOSHARE_E_UNKNOWN_GROUP};
use crate::groups::GroupTable;

/// Kind: IOCost (weights, latency QoS), its groups' limits applied by librbd's token bucket.
pub const IOSHARE_KIND_IOCOST: u32 = 0;
/// Kind: IOCost, its groups' limits applied by QEMU's leaky bucket.
pub const IOSHARE_KIND_IOCOST_LEAKY: u32 = 1;
/// Kind: librbd's token bucket alone (limits only; weights are ignored).
pub const IOSHARE_KIND_TOKEN_BUCKET: u32 = 2;
/// Kind: QEMU's leaky bucket alone (limits only; weights are ignored).
pub const IOSHARE_KIND_LEAKY_BUCKET: u32 = 3;

/// Flag of `ioshare_new`: every call takes the controller's mutex, so threads may share it.
pub const IOSHARE_LOCKED: u32 = 1;

/// Direction: a read.
pub const IOSHARE_READ: u32 = 0;
/// Direction: a write.
pub const IOSHARE_WRITE: u32 = 1;

/// IO flag: the IO must not wait (metadata, swap, a dying client); it is issued at once and charged
/// to the group as debt, and `submit` may ask for a producer delay.
pub const IOSHARE_IO_MUST_ISSUE: u32 = 1;
/// IO flag: the IO was merged into one already issued; it pays only its size cost.
pub const IOSHARE_IO_MERGED: u32 = 2;

/// Outcome: issue the IO now (from `submit`, or the IO `dispatch` filled in).
pub const IOSHARE_ISSUE: i32 = 0;
/// Outcome of `submit`: the controller holds the IO; it comes back from `ioshare_dispatch`.
pub const IOSHARE_QUEUED: i32 = 1;
/// Outcome of `dispatch`: nothing may go before the time written to `at`; call again then (or
/// earlier, after another submit or complete).
pub const IOSHARE_WAIT: i32 = 2;
/// Outcome of `dispatch` and `next_tick`: nothing is queued / nothing to plan.
pub const IOSHARE_IDLE: i32 = 3;

/// One IO. The caller fills `id`, `group`, `op`, `offset`, `len` and `flags`, and sets `charge` to 0;
/// the controller records its charge in `charge` when it releases the IO, and the caller hands the
/// released value back unchanged to `ioshare_complete`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoshareIo {
    /// The caller's identifier, returned untouched (a pointer to the request works well).
    pub id: u64,
    /// Byte offset on the device (IOCost tells sequential from random IO by it).
    pub offset: u64,
    /// Controller-private; 0 when submitted.
    pub charge: u64,
    /// The group, as returned by `ioshare_configure`.
    pub group: u32,
    /// Length in bytes.
    pub len: u32,
    /// `IOSHARE_READ` or `IOSHARE_WRITE`.
    pub op: u32,
    /// `IOSHARE_IO_*` flags, or 0.
    pub flags: u32,
}

impl IoshareIo {
    /// The core IO, its group checked against the controller's `groups`.
    #[inline(always)]
    pub fn to_core(&self, groups: &GroupTable) -> Result<Io, Failure> {
        // One branch on the issue path; the cold function finds out which check failed.
        if self.unknown_op() || self.unknown_flags() || !groups.is_live(self.group) {
            return Err(self.why_invalid());
        }
        Ok(self.core_unchecked())
    }

    /// The core IO of an IO [`IoshareIo::to_core`] accepts.
    #[inline(always)]
    fn core_unchecked(&self) -> Io {
        // Field by field: the caller wrote them one at a time, and a load spanning two of its
        // stores (which the compiler would merge these into) waits for both to reach the cache.
        // SAFETY: `self` is a valid reference; volatile only keeps each load its own.
        let (offset, charge) = unsafe { (ptr::read_volatile(&self.offset), ptr::read_volatile(&self.charge)) };
        Io {
            id: self.id,
            group: GroupId(self.group),
            op: if self.op == IOSHARE_READ { Op::Read } else { Op::Write },
            offset,
            len: self.len,
            flags: IoFlags {
                must_issue: self.flags & IOSHARE_IO_MUST_ISSUE != 0,
                merged: self.flags & IOSHARE_IO_MERGED != 0,
            },
            charge,
        }
    }

    /// Whether `op` is neither `IOSHARE_READ` nor `IOSHARE_WRITE`.
    #[inline(always)]
    fn unknown_op(&self) -> bool {
        self.op > IOSHARE_WRITE
    }

    /// Whether `flags` has a bit other than `IOSHARE_IO_MUST_ISSUE` and `IOSHARE_IO_MERGED`.
    #[inline(always)]
    fn unknown_flags(&self) -> bool {
        self.flags & !(IOSHARE_IO_MUST_ISSUE | IOSHARE_IO_MERGED) != 0
    }

    /// Why [`IoshareIo::to_core`] refused this IO: its operation, its flags or its group.
    #[cold]
    #[inline(never)]
    fn why_invalid(&self) -> Failure {
        if self.unknown_op() {
            Failure::new(IOSHARE_E_INVALID, format!("io.op {} is unknown: use IOSHARE_READ or IOSHARE_WRITE", self.op))
        } else if self.unknown_flags() {
            Failure::new(
                IOSHARE_E_INVALID,
                format!(
                    "io.flags {:#x} has unknown bits: use IOSHARE_IO_MUST_ISSUE and IOSHARE_IO_MERGED only",
                    self.flags
                ),
            )
        } else {
            unknown_group(self.group)
        }
    }

    /// The C form of a core IO.
    #[inline]
    pub fn from_core(io: &Io) -> Self {
        IoshareIo {
            id: io.id,
            offset: io.offset,
            charge: io.charge,
            group: io.group.0,
            len: io.len,
            op: match io.op {
                Op::Read => IOSHARE_READ,
                Op::Write => IOSHARE_WRITE,
            },
            flags: if io.flags.must_issue { IOSHARE_IO_MUST_ISSUE } else { 0 }
                | if io.flags.merged { IOSHARE_IO_MERGED } else { 0 },
        }
    }
}

/// The failure for a group id the controller does not have.
pub fn unknown_group(group: u32) -> Failure {
    Failure::new(IOSHARE_E_UNKNOWN_GROUP, format!("group {group} is unknown: use an id ioshare_configure returned"))
}

/// Controller-wide statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IoshareCtlStats {
    /// Virtual-time rate in percent of the cost model (100 for the buckets).
    pub vrate_pct: f64,
    /// IOCost busy level (negative: spare capacity, positive: saturated).
    pub busy_level: i32,
    /// Missed read latency targets in the last period, parts per million.
    pub missed_read_ppm: u32,
    /// Missed write latency targets in the last period, parts per million.
    pub missed_write_ppm: u32,
    /// Share of the last period IOs waited for a device slot, percent.
    pub rq_wait_pct: u32,
    /// Groups counting in the weight tree now.
    pub nr_active: u32,
    /// The device-depth limit now (0 when the option is off).
    pub depth_limit: u32,
    /// Planning period, µs (0 without a planner).
    pub period_us: u64,
    /// Groups in the controller (ids are 0..nr_groups).
    pub nr_groups: u32,
}

impl IoshareCtlStats {
    /// The C form of core's device statistics, for a controller of `nr_groups` groups.
    pub fn from_core(d: &DeviceStats, nr_groups: usize) -> Self {
        IoshareCtlStats {
            vrate_pct: d.vrate_pct,
            busy_level: d.busy_level,
            missed_read_ppm: d.missed_ppm[0],
            missed_write_ppm: d.missed_ppm[1],
            rq_wait_pct: d.rq_wait_pct,
            nr_active: d.nr_active,
            depth_limit: d.depth_limit,
            period_us: d.period_us,
            nr_groups: nr_groups as u32,
        }
    }
}

/// One group's statistics (its path: `ioshare_group_path`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IoshareGroupStats {
    /// The group's id.
    pub group: u32,
    /// Configured weight.
    pub weight: u32,
    /// 1 when the group counts in the weight tree now, else 0.
    pub active: u32,
    /// Hierarchical share by active weights, 0..1.
    pub hweight_active: f64,
    /// Hierarchical share by in-use weights (after donation), 0..1.
    pub hweight_inuse: f64,
    /// IOs released to the device.
    pub issued: u64,
    /// IOs held in the controller now.
    pub queued: u64,
    /// Device time used, µs (kernel `cost.usage`).
    pub usage_us: u64,
    /// Time spent with IO waiting, µs.
    pub wait_us: u64,
    /// Outstanding debt, µs of device time.
    pub debt_us: u64,
    /// Current producer delay, µs.
    pub delay_us: u64,
}

impl IoshareGroupStats {
    /// The C form of core's statistics of group `group`.
    pub fn from_core(group: u32, g: &GroupStats) -> Self {
        IoshareGroupStats {
            group,
            weight: g.weight,
            active: g.active as u32,
            hweight_active: g.hweight_active,
            hweight_inuse: g.hweight_inuse,
            issued: g.issued,
            queued: g.queued,
            usage_us: g.usage_us,
            wait_us: g.wait_us,
            debt_us: g.debt_us,
            delay_us: g.delay_us,
        }
    }
}
