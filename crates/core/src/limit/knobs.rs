//! The six limit knobs of a group and their validation.
//!
//! A group may cap IOPS and bytes per second, each for all IO (`total`), reads or writes: six knobs.
//! Every knob has the same three numbers in both algorithms, only named differently by their sources:
//!
//! | here              | QEMU                     | librbd                           |
//! |-------------------|--------------------------|----------------------------------|
//! | `avg`             | `iops-total`             | `rbd_qos_iops_limit`             |
//! | `max`             | `iops-total-max`         | `rbd_qos_iops_burst`             |
//! | `max_length`      | `iops-total-max-length`  | `rbd_qos_iops_burst_seconds`     |
//!
//! `avg` is the sustained rate (units per second), `max` the rate allowed during a burst, `max_length`
//! how many seconds of `max` the burst holds. Zero means "not set" for `avg` and `max`, as in both
//! sources. `iops_size` makes a large IO count as several operations (QEMU `iops-size`), and
//! `tick_min_ms` is librbd's `rbd_qos_schedule_tick_min`.
//!
//! Validation comes in two layers. [`Limits::validate`] holds the rules both sources share (QEMU's
//! `throttle_is_valid` and librbd's `set_limit`): bounds, a burst rate needs an average and may not be
//! below it, a burst length needs a burst rate and is at least one second, `iops_size` needs an iops
//! knob. [`Limits::validate_for`] adds what only one algorithm forbids: QEMU refuses a `total` knob
//! together with a `read`/`write` knob of the same unit; librbd combines them freely.

use std::fmt;

use crate::error::Error;
use crate::io::Op;

/// Largest value a rate may take (QEMU `THROTTLE_VALUE_MAX`).
pub const VALUE_MAX: u64 = 1_000_000_000_000_000;
/// Longest burst, seconds (QEMU rejects burst lengths above `UINT_MAX`).
pub const MAX_LENGTH_MAX: u64 = u32::MAX as u64;
/// librbd's default shortest refill period, ms (`rbd_qos_schedule_tick_min`).
pub const TICK_MIN_DEFAULT_MS: u64 = 50;
/// Longest refill period accepted, ms: librbd refills `1000 / tick` times a second, so a tick above
/// one second would never refill.
pub const TICK_MIN_MAX_MS: u64 = 1_000;

/// What a knob counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Operations (one per IO, or `len / iops_size` for large IOs).
    Iops,
    /// Bytes.
    Bps,
}

/// Which IOs a knob applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Reads and writes.
    Total,
    /// Reads only.
    Read,
    /// Writes only.
    Write,
}

/// One of the six knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Knob {
    /// Operations per second, reads and writes.
    IopsTotal,
    /// Read operations per second.
    IopsRead,
    /// Write operations per second.
    IopsWrite,
    /// Bytes per second, reads and writes.
    BpsTotal,
    /// Bytes read per second.
    BpsRead,
    /// Bytes written per second.
    BpsWrite,
}

impl Knob {
    /// The six knobs in index order.
    pub const ALL: [Knob; 6] =
        [Knob::IopsTotal, Knob::IopsRead, Knob::IopsWrite, Knob::BpsTotal, Knob::BpsRead, Knob::BpsWrite];

    /// The knob counting `unit` over `scope`.
    pub fn new(unit: Unit, scope: Scope) -> Knob {
        let base = match unit {
            Unit::Iops => 0,
            Unit::Bps => 3,
        };
        let offset = match scope {
            Scope::Total => 0,
            Scope::Read => 1,
            Scope::Write => 2,
        };
        Knob::ALL[base + offset]
    }

    /// Position in [`Knob::ALL`] and in [`Limits::knobs`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// What the knob counts.
    pub fn unit(self) -> Unit {
        if self.index() < 3 {
            Unit::Iops
        } else {
            Unit::Bps
        }
    }

    /// Which IOs the knob applies to.
    pub fn scope(self) -> Scope {
        match self.index() % 3 {
            0 => Scope::Total,
            1 => Scope::Read,
            _ => Scope::Write,
        }
    }

    /// Whether an IO of direction `op` passes this knob's bucket (a read never touches write knobs).
    pub fn applies_to(self, op: Op) -> bool {
        match self.scope() {
            Scope::Total => true,
            Scope::Read => op == Op::Read,
            Scope::Write => op == Op::Write,
        }
    }

    /// Canonical name, as QEMU spells it: `iops-total`, `bps-read`, ...
    pub fn name(self) -> &'static str {
        ["iops-total", "iops-read", "iops-write", "bps-total", "bps-read", "bps-write"][self.index()]
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The three numbers of one knob. The default is "no limit".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KnobLimit {
    /// Sustained rate, units per second; 0 = no limit.
    pub avg: u64,
    /// Burst rate, units per second; 0 = no burst (QEMU then allows `avg / 10` units of slack,
    /// librbd a bucket of `avg`).
    pub max: u64,
    /// Burst length in seconds (`None` = 1).
    pub max_length: Option<u64>,
}

impl KnobLimit {
    /// A sustained rate with no burst.
    pub fn avg(avg: u64) -> Self {
        KnobLimit { avg, ..KnobLimit::default() }
    }

    /// A sustained rate with a burst of `max` per second lasting `max_length` seconds.
    pub fn burst(avg: u64, max: u64, max_length: u64) -> Self {
        KnobLimit { avg, max, max_length: Some(max_length) }
    }

    /// Whether the knob limits anything.
    pub fn is_set(&self) -> bool {
        self.avg > 0
    }

    /// Burst length in seconds, 1 when not given.
    pub fn length(&self) -> u64 {
        self.max_length.unwrap_or(1)
    }
}

/// The limiting algorithm a controller applies to [`Limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// librbd's `TokenBucketThrottle`.
    TokenBucket,
    /// QEMU's `util/throttle.c`.
    LeakyBucket,
}

/// The limits of one group: six optional knobs, `iops_size` and the token bucket's shortest tick.
/// The default limits nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// One entry per knob, indexed by [`Knob::index`].
    pub knobs: [KnobLimit; 6],
    /// IOs larger than this many bytes count as `len / iops_size` operations; 0 = off.
    pub iops_size: u64,
    /// Shortest token-bucket refill period in ms (`None` = [`TICK_MIN_DEFAULT_MS`]).
    pub tick_min_ms: Option<u64>,
}

/// A rule a [`Limits`] value breaks; the message names the knob and says how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// A rate above [`VALUE_MAX`].
    #[error("{knob} = {value} is out of range: rates must be within [0, {VALUE_MAX}]")]
    OutOfRange {
        /// Knob name, with its `-max` suffix when the burst rate is wrong.
        knob: String,
        /// Offending value.
        value: u64,
    },
    /// A burst rate without a sustained rate.
    #[error("{knob}-max requires {knob}: set the sustained rate too, or drop the burst")]
    MaxWithoutAvg {
        /// The knob.
        knob: Knob,
    },
    /// A burst rate below the sustained rate.
    #[error("{knob}-max ({max}) cannot be lower than {knob} ({avg}): raise the burst or drop it")]
    MaxBelowAvg {
        /// The knob.
        knob: Knob,
        /// Its burst rate.
        max: u64,
        /// Its sustained rate.
        avg: u64,
    },
    /// A burst length outside 1..=[`MAX_LENGTH_MAX`] seconds.
    #[error("{knob}-max-length = {value} is out of range: a burst lasts 1 to {MAX_LENGTH_MAX} seconds")]
    LengthOutOfRange {
        /// The knob.
        knob: Knob,
        /// Offending length.
        value: u64,
    },
    /// A burst length without a burst rate.
    #[error("{knob}-max-length requires {knob}-max: a burst length without a burst rate has no effect")]
    LengthWithoutMax {
        /// The knob.
        knob: Knob,
    },
    /// `iops_size` with no iops knob.
    #[error("iops-size requires an iops limit: set iops-total, iops-read or iops-write")]
    IopsSizeWithoutIops,
    /// A token-bucket tick outside 1..=[`TICK_MIN_MAX_MS`].
    #[error("tick-min-ms = {0} is out of range: the shortest refill period is 1 to {TICK_MIN_MAX_MS} ms")]
    TickMin(u64),
    /// A total knob together with a read or write knob of the same unit (leaky bucket only).
    #[error(
        "{total} cannot be combined with {read} or {write} in the leaky bucket (QEMU rule): limit the \
         total or the directions, not both"
    )]
    TotalWithDirection {
        /// The total knob.
        total: Knob,
        /// The read knob of the same unit.
        read: Knob,
        /// The write knob of the same unit.
        write: Knob,
    },
}

impl LimitError {
    /// The core error for this rule broken by group `path`.
    pub fn for_group(self, path: &str) -> Error {
        Error::Invalid(format!("group '{path}': {self}"))
    }
}

impl Limits {
    /// Limits with nothing set.
    pub fn none() -> Self {
        Limits::default()
    }

    /// These limits with `knob` set to `limit`.
    pub fn with(mut self, knob: Knob, limit: KnobLimit) -> Self {
        self.knobs[knob.index()] = limit;
        self
    }

    /// The limit of `knob`.
    pub fn knob(&self, knob: Knob) -> &KnobLimit {
        &self.knobs[knob.index()]
    }

    /// Whether any knob limits anything.
    pub fn is_limited(&self) -> bool {
        self.knobs.iter().any(KnobLimit::is_set)
    }

    /// The token bucket's shortest tick in ms.
    pub fn tick_min(&self) -> u64 {
        self.tick_min_ms.unwrap_or(TICK_MIN_DEFAULT_MS)
    }

    /// Checks the rules both algorithms share.
    pub fn validate(&self) -> Result<(), LimitError> {
        for knob in Knob::ALL {
            let k = self.knob(knob);
            if k.avg > VALUE_MAX {
                return Err(LimitError::OutOfRange { knob: knob.name().to_string(), value: k.avg });
            }
            if k.max > VALUE_MAX {
                return Err(LimitError::OutOfRange { knob: format!("{knob}-max"), value: k.max });
            }
            if k.max > 0 && k.avg == 0 {
                return Err(LimitError::MaxWithoutAvg { knob });
            }
            if k.max > 0 && k.max < k.avg {
                return Err(LimitError::MaxBelowAvg { knob, max: k.max, avg: k.avg });
            }
            if let Some(len) = k.max_length {
                if !(1..=MAX_LENGTH_MAX).contains(&len) {
                    return Err(LimitError::LengthOutOfRange { knob, value: len });
                }
                if len > 1 && k.max == 0 {
                    return Err(LimitError::LengthWithoutMax { knob });
                }
            }
        }
        let any_iops = [Knob::IopsTotal, Knob::IopsRead, Knob::IopsWrite].iter().any(|&k| self.knob(k).is_set());
        if self.iops_size > 0 && !any_iops {
            return Err(LimitError::IopsSizeWithoutIops);
        }
        if let Some(tick) = self.tick_min_ms {
            if !(1..=TICK_MIN_MAX_MS).contains(&tick) {
                return Err(LimitError::TickMin(tick));
            }
        }
        Ok(())
    }

    /// Checks the shared rules and those of `algorithm`.
    pub fn validate_for(&self, algorithm: Algorithm) -> Result<(), LimitError> {
        self.validate()?;
        if algorithm == Algorithm::LeakyBucket {
            for unit in [Unit::Iops, Unit::Bps] {
                let [total, read, write] = [Scope::Total, Scope::Read, Scope::Write].map(|s| Knob::new(unit, s));
                // QEMU also forbids total and direction burst rates together; a burst rate needs its
                // average (checked above), so that case is this one.
                if self.knob(total).is_set() && (self.knob(read).is_set() || self.knob(write).is_set()) {
                    return Err(LimitError::TotalWithDirection { total, read, write });
                }
            }
        }
        Ok(())
    }
}

/// How many operations an IO of `len` bytes counts as under `iops_size` (0 = off): 1 unless the IO is
/// larger than `iops_size`, then `len / iops_size` (QEMU `throttle_account`, fractional).
pub fn units(len: u32, iops_size: u64) -> f64 {
    if iops_size > 0 && u64::from(len) > iops_size {
        f64::from(len) / iops_size as f64
    } else {
        1.0
    }
}

/// [`units`] in whole tokens, rounded up, for the token bucket (a 6 KiB IO at `iops_size` 4 KiB takes
/// 2 tokens: a limit must not be escaped by going one byte over).
pub fn whole_units(len: u32, iops_size: u64) -> u64 {
    if iops_size > 0 && u64::from(len) > iops_size {
        u64::from(len).div_ceil(iops_size)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(limits: &Limits) -> String {
        limits.validate_for(Algorithm::LeakyBucket).unwrap_err().to_string()
    }

    #[test]
    fn knobs_know_their_unit_scope_and_direction() {
        for knob in Knob::ALL {
            assert_eq!(Knob::new(knob.unit(), knob.scope()), knob);
        }
        assert!(Knob::IopsTotal.applies_to(Op::Read) && Knob::BpsTotal.applies_to(Op::Write));
        assert!(Knob::IopsRead.applies_to(Op::Read) && !Knob::IopsRead.applies_to(Op::Write));
        assert!(Knob::BpsWrite.applies_to(Op::Write) && !Knob::BpsWrite.applies_to(Op::Read));
    }

    #[test]
    fn iops_size_counts_large_ios_as_several_operations() {
        assert_eq!(units(65_536, 4096), 16.0);
        assert_eq!(whole_units(65_536, 4096), 16);
        assert_eq!(units(4096, 4096), 1.0);
        assert_eq!(units(512, 4096), 1.0);
        assert_eq!(units(6144, 4096), 1.5);
        assert_eq!(whole_units(6144, 4096), 2);
        assert_eq!(units(65_536, 0), 1.0);
        assert_eq!(whole_units(65_536, 0), 1);
    }

    #[test]
    fn valid_limits_pass_both_algorithms() {
        let limits = Limits::none()
            .with(Knob::IopsTotal, KnobLimit::burst(100, 2000, 60))
            .with(Knob::BpsRead, KnobLimit::avg(1 << 20))
            .with(Knob::BpsWrite, KnobLimit { avg: 1 << 20, max: 4 << 20, max_length: Some(1) });
        assert_eq!(limits.validate_for(Algorithm::LeakyBucket), Ok(()));
        assert_eq!(limits.validate_for(Algorithm::TokenBucket), Ok(()));
        assert_eq!(Limits::none().validate(), Ok(()));
    }

    /// Every invalid combination of research §3.3 (QEMU `throttle_is_valid`) and §4 (librbd
    /// `set_limit`), each rejected with a message naming the knob.
    #[test]
    fn every_invalid_combination_is_rejected_naming_the_knob() {
        let cases: Vec<(Limits, &str)> = vec![
            (Limits::none().with(Knob::IopsRead, KnobLimit::avg(VALUE_MAX + 1)), "iops-read = 1000000000000001"),
            (
                Limits::none().with(Knob::BpsTotal, KnobLimit { avg: 1, max: VALUE_MAX + 1, max_length: None }),
                "bps-total-max = 1000000000000001 is out of range",
            ),
            (
                Limits::none().with(Knob::IopsWrite, KnobLimit { max: 10, ..KnobLimit::default() }),
                "iops-write-max requires iops-write",
            ),
            (
                Limits::none().with(Knob::IopsTotal, KnobLimit { avg: 1000, max: 500, max_length: None }),
                "iops-total-max (500) cannot be lower than iops-total (1000)",
            ),
            (
                Limits::none().with(Knob::BpsRead, KnobLimit::burst(10, 20, 0)),
                "bps-read-max-length = 0 is out of range",
            ),
            (
                Limits::none().with(Knob::BpsRead, KnobLimit::burst(10, 20, MAX_LENGTH_MAX + 1)),
                "bps-read-max-length = 4294967296 is out of range",
            ),
            (
                Limits::none().with(Knob::IopsTotal, KnobLimit { avg: 10, max: 0, max_length: Some(60) }),
                "iops-total-max-length requires iops-total-max",
            ),
            (
                Limits { iops_size: 4096, ..Limits::none().with(Knob::BpsTotal, KnobLimit::avg(1)) },
                "iops-size requires an iops limit",
            ),
            (Limits { tick_min_ms: Some(0), ..Limits::none() }, "tick-min-ms = 0 is out of range"),
            (Limits { tick_min_ms: Some(1001), ..Limits::none() }, "tick-min-ms = 1001 is out of range"),
            (
                Limits::none().with(Knob::IopsTotal, KnobLimit::avg(10)).with(Knob::IopsRead, KnobLimit::avg(5)),
                "iops-total cannot be combined with iops-read or iops-write",
            ),
            (
                Limits::none().with(Knob::BpsTotal, KnobLimit::avg(10)).with(Knob::BpsWrite, KnobLimit::avg(5)),
                "bps-total cannot be combined with bps-read or bps-write",
            ),
        ];
        for (limits, expected) in cases {
            let msg = err(&limits);
            assert!(msg.contains(expected), "expected '{expected}' in '{msg}'");
        }
    }

    #[test]
    fn librbd_combines_total_and_direction_knobs() {
        let limits = Limits::none().with(Knob::IopsTotal, KnobLimit::avg(100)).with(Knob::IopsRead, KnobLimit::avg(30));
        assert_eq!(limits.validate_for(Algorithm::TokenBucket), Ok(()));
        assert!(limits.validate_for(Algorithm::LeakyBucket).is_err());
    }
}
