//! Limiters: librbd's token bucket and QEMU's leaky bucket over six knobs per group (SPEC §4).
//!
//! A group may cap IOPS and bytes per second for all IO, reads or writes ([`Limits`]); an IO passes
//! every bucket that applies to its direction and waits in arrival order behind the group's earlier
//! held-back IO of that direction. Two algorithms apply the same knobs, each as its source does:
//! - [`TokenGate`] — librbd's `TokenBucketThrottle`: a bucket refilled every tick
//!   (`max(1000/avg, tick_min)` ms), `remain` capped at `burst × burst_seconds`, `available` growing at
//!   the burst rate; an IO takes its tokens or waits FIFO, partially granted, for later ticks.
//! - [`LeakyGate`] — QEMU's `throttle.c`: a level that leaks at `avg`, computed at each request;
//!   a request passes while the level is under `max × max_length` (`avg/10` without a burst), with a
//!   burst bucket of `max/10` leaking at `max`; it is charged after passing and otherwise waits
//!   `excess / rate`.
//!
//! [`Limited`] runs either in front of any [`crate::Controller`]: limits first, then the inner
//! controller's policy ([`crate::IoCost`] weights, or [`crate::NoControl`]). Time is a parameter; the
//! fast path (nobody waiting, tokens or room available) allocates nothing.
//!
//! Modules, one job each: [`knobs`] (the knobs and their validation), [`parse`] (text forms and
//! aliases), [`token`] and [`leaky`] (one bucket of each kind), [`lanes`] (a group's waiting IO),
//! [`gate`] (the algorithm interface), [`token_gate`] and [`leaky_gate`] (a group's buckets per
//! algorithm), [`stage`] (all groups and their wake-up times), [`limited`] (the controller).

pub mod gate;
pub mod knobs;
pub mod lanes;
pub mod leaky;
pub mod leaky_gate;
pub mod limited;
pub mod parse;
pub mod stage;
pub mod token;
pub mod token_gate;

#[cfg(test)]
mod tests;

pub use gate::{Gate, Next};
pub use knobs::{Algorithm, Knob, KnobLimit, LimitError, Limits, Scope, Unit};
pub use leaky::LeakyBucket;
pub use leaky_gate::LeakyGate;
pub use limited::{LeakyBucketLimiter, Limited, TokenBucketLimiter};
pub use token::TokenBucket;
pub use token_gate::TokenGate;
