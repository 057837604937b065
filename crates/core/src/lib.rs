//! ioshare-core: IO controllers as pure logic. No IO, no threads, no clock: time is an argument.
//!
//! - [`Controller`]: the interface every controller implements and every driver calls.
//! - [`NoControl`]: pass-through baseline.
//! - [`iocost`]: Linux IOCost (cost model, weight tree, virtual time, planner, donation, debt).
//! - [`limit`]: librbd's token bucket and QEMU's leaky bucket over six knobs, composable with any controller.

pub mod controller;
pub mod error;
pub mod group;
pub mod io;
pub mod iocost;
pub mod limit;
pub mod none;

pub use controller::{earliest, Completion, Controller, DeviceStats, Dispatch, Event, GroupStats, Stats, Submit};
pub use error::{Error, Result};
pub use group::{GroupSettings, WEIGHT_DEFAULT, WEIGHT_MAX, WEIGHT_MIN};
pub use io::{GroupId, Io, IoFlags, Nanos, Op, NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC};
pub use iocost::model::{CostModel, LinearModel, ModelConfig, ModelParams};
pub use iocost::qos::{QosConfig, QosParams};
pub use iocost::IoCost;
pub use limit::{KnobLimit, LeakyBucketLimiter, LeakyGate, Limited, Limits, TokenBucketLimiter, TokenGate};
pub use none::NoControl;
