//! `ioshare bench`: scenarios that show, on real IO, whether a controller shares a device the way it
//! promises — proportional split, work conservation, fairness in device cost, limits, overhead,
//! donation, the host agent — with ioshare's controllers and (as root) the kernel's own BFQ,
//! blk-throttle and IOCost side by side.
//!
//! # Layout
//! - [`suite`]: [`run_suite`] opens (or creates) the target, measures the device ([`calibrate`]),
//!   runs each scenario and hands its report to a [`SuiteWatcher`]; [`options`] says what to run.
//! - [`scenario`]: what a scenario is — the [`Described`] and [`Scenario`] traits — and the
//!   [`Context`] it runs in; [`scenarios`] holds one module per scenario and the one list
//!   ([`scenarios::ALL`]) the suite knows them by.
//! - [`plan`]: the shared runner of the plan-and-judge scenarios ([`Planned`]): reference runs,
//!   interleaved rounds of ioshare's controllers ([`controllers`]), kernel peers ([`kernel`]: each
//!   tenant in its own process and cgroup), verdicts.
//! - Results as plain data ([`verdict`], [`report`], [`SuiteReport`]) for the renderers: [`table`],
//!   JSON (serde), [`svg`]; the work-conserving yardstick ([`frontier`]), the comparison with the
//!   kernel's IOCost ([`fidelity`]), what the eBPF observer saw ([`observe`], `--observe`).
//! - Small costs measured by turns within one run ([`windows`]): the observer attached and detached,
//!   a controller on and off ([`alternating`], the overhead scenario).
//! - [`tune_kernel`]: the kernel peers as the runner of `ioshare tune --kernel`'s points.
//!
//! # Adding a scenario
//! Most scenarios are a plan and a criterion: write a module in `scenarios/` with a unit struct that
//! implements [`Described`] (name, one-line description, whether it writes) and [`Planned`] — `plan`
//! returns the tenants, the ioshare controllers (and which of them the verdict is about), the kernel
//! setups and reference runs; `judge` gives one run's [`Verdict`] against its [`plan::References`]
//! (the no-control baseline, the reference runs); `review` may revise verdicts that depend on each
//! other — and add it to [`scenarios::ALL`]. That is all: the runner, the progress line, the
//! tables, JSON and charts follow. A scenario that cannot be a plan (the agent scenario configures its
//! controllers from its own first run) implements [`Scenario`] itself.

pub mod alternating;
pub mod calibrate;
pub mod controllers;
pub mod decisions;
pub mod error;
pub mod fidelity;
pub mod frontier;
pub mod kernel;
pub mod observe;
pub mod options;
pub mod plan;
pub mod report;
pub mod scenario;
pub mod scenarios;
pub mod stats;
pub mod suite;
pub mod svg;
pub mod table;
pub mod tune_kernel;
pub mod verdict;
pub mod windows;

pub use error::{Error, Result};
pub use options::BenchOptions;
pub use plan::Planned;
pub use report::ScenarioReport;
pub use scenario::{Context, Described, Scenario};
pub use suite::{run_suite, validate, SuiteReport, SuiteWatcher, TargetInfo};
pub use verdict::{RunEntry, Side, Verdict};
