//! ioshare-tune: find a device's IOCost QoS by sweeping pinned vrates on real IO and judging the
//! isolation each buys (`ioshare tune`), after resctl-bench's `iocost-qos` and `iocost-tune`.
//!
//! # Design
//! A sweep ([`sweep`]) opens the target as `ioshare profile` does and takes its cost model from the
//! profile (cached per device: [`profile_cache`]); then, with ioshare's IOCost inline, it measures
//! at each vrate of a [`grid`] a paced latency-sensitive tenant alone and beside a saturating antagonist ([`point`]), saving the
//! [`result`] after each point (the checkpoint `--resume` continues). The series are fitted against
//! vrate ([`fit`]) and the anchor's solutions read off the fits ([`solve`]) — but for where the
//! protected capacity stops rising, which [`knee`] finds from the points — each printed as kernel
//! lines, agent `[[devices]]` entries and a systemd hwdb fragment ([`export`]), and drawn ([`svg`]).
//! Statistics shared by the point and the tables live in [`stats`]. Tuning in place
//! ([`from_trace`]) builds the same result from an agent trace instead of a sweep. Which IOCost runs
//! the points is a [`runner::Runner`]'s business: ioshare's inline (here), or the kernel's
//! (`--kernel`, implemented by the bench crate's kernel peers through [`runner::Control`]).
//!
//! Modules, each importing only those before it: `error`, `grid`, `profile_cache`, `stats`, `fit`,
//! `data` (the result's plain types), `knee`, `runner`, `point`, `solve`, `from_trace`, `result`
//! (reading, writing and solving a result), `export`, `svg`, `sweep`.

pub mod data;
pub mod error;
pub mod export;
pub mod fit;
pub mod from_trace;
pub mod grid;
pub mod knee;
pub mod point;
pub mod profile_cache;
pub mod result;
pub mod runner;
pub mod solve;
pub mod stats;
pub mod svg;
pub mod sweep;

pub use data::{ControlledBy, DeviceId, TuneResult};
pub use error::{Error, Result};
pub use grid::Grid;
pub use result::{Applied, DEFAULT_SOLUTION};
pub use sweep::{tune, TuneOptions};
