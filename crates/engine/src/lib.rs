//! ioshare-engine: the controllers of `ioshare-core` on real IO.
//!
//! Tenants run fio-like jobs ([`job`]) against an O_DIRECT file or block device ([`target`]) through
//! one io_uring ([`ring`]); the controller is applied inline by the event loop ([`run`](mod@run)): an IO
//! enters the ring only when the controller releases it, completions feed it back, the planner ticks
//! when it asks. [`metrics`] records per-tenant latency histograms and time series; [`report`] holds
//! the results as plain data; [`profile`] measures a device's cost model and latency targets
//! (`ioshare profile`, and the calibration of `ioshare bench`, which lives in `ioshare-bench`).

pub mod buffer;
pub mod error;
pub mod fio;
pub mod interrupt;
pub mod job;
pub mod metrics;
pub mod profile;
pub mod report;
pub mod ring;
pub mod run;
pub mod target;

pub use error::{Error, Result};
pub use job::{IoGen, JobSpec, Pattern, TenantSpec};
pub use report::{LatencyUs, RunReport, TenantReport};
pub use run::{run, RunOptions};
pub use target::{Target, TargetKind, TempTarget};
