//! ioshare-sim: a deterministic discrete-event simulator for ioshare's IO controllers.
//!
//! A [`Simulation`] puts groups of jobs ([`Job`]) in front of a simulated device ([`DeviceSpec`])
//! through a controller ([`ControllerSpec`]: none, IOCost, or any `Box<dyn Controller>`), runs it
//! in virtual time and returns a [`Report`]: per group IOPS, bandwidth, share of device cost and
//! latency percentiles, device utilisation and vrate, time series. The same simulation and seed give
//! the same report (bar its wall-clock fields), so properties can be asserted exactly.
//!
//! ```
//! use ioshare_core::{ModelParams, QosParams};
//! use ioshare_sim::{DeviceSpec, Job, Rw, Simulation};
//!
//! // A device that truly follows ssd_dfl (8 servers); IOCost given the right model.
//! let report = Simulation::new("two-to-one", DeviceSpec::linear(ModelParams::SSD_DFL, 8))
//!     .iocost(ModelParams::SSD_DFL, QosParams::default())
//!     .group("a", 200, [Job::closed(Rw::RandRead, 4096, 32)])
//!     .group("b", 100, [Job::closed(Rw::RandRead, 4096, 32)])
//!     .seconds(3.0)
//!     .warmup(1.0)
//!     .seed(7)
//!     .run()
//!     .unwrap();
//! let ratio = report.group("a").cost_share / report.group("b").cost_share;
//! assert!((ratio - 2.0).abs() < 0.05, "{ratio}");
//! println!("{}", report.to_table());
//! ```
//!
//! Modules: `queue` (event queue), [`device`] (linear, SSD, HDD, remote), [`workload`]
//! (closed, open, latency-seeking, leak), [`memory`] (pressure and swap charging), [`simulation`]
//! (what a run is), [`scenario_file`] (a simulation from TOML), the engine (the controller protocol), [`report`], [`svg`], and
//! [`scenarios`] (the built-in scenarios and reproductions, by name).

pub mod device;
mod engine;
pub mod error;
pub mod memory;
mod queue;
pub mod report;
pub mod scenario_file;
pub mod scenarios;
pub mod simulation;
pub mod spec;
pub mod svg;
pub mod workload;

pub use device::DeviceSpec;
pub use error::SimError;
pub use memory::{Memory, SwapCharge};
pub use report::{Comparison, GroupReport, Latency, Report};
pub use simulation::{Change, ChangeKind, ControllerSpec, Group, Simulation};
pub use workload::{Job, Load, Rw};
