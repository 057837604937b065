//! libioshare: ioshare's controllers behind a C ABI, for storage services written in C or C++.
//!
//! # Design
//! A C service gets an opaque controller ([`handle::IoshareCtl`]) built from the same strings the
//! kernel and `ioshare profile` use (`io.cost.model`, `io.cost.qos`, ioshare's limits syntax), and
//! drives it exactly as the Rust drivers drive [`ioshare_core::Controller`]: `submit` each IO, issue
//! what comes back, `dispatch` what was queued, `complete` what the device finished, `tick` the
//! planner. The library owns no thread and reads no clock: `now` is an argument, as in core.
//!
//! Every entry point returns an `int` — a non-negative outcome or a negative `IOSHARE_E_*` code —
//! and never unwinds into C: a panic inside is caught, reported as `IOSHARE_E_INTERNAL`, and the
//! controller refuses further calls. The message of a failure is kept per thread ([`error`]).
//!
//! The issue path (`submit`, `dispatch`, `complete`) allocates nothing and, on a controller made
//! without `IOSHARE_LOCKED`, takes no lock: such a controller belongs to one thread at a time. With
//! `IOSHARE_LOCKED` every call holds the controller's mutex, for callers that share one.
//!
//! Modules, one job each: [`error`] (codes, messages, the panic guard), [`text`] (C strings in),
//! [`types`] (the `repr(C)` values), [`groups`] (path ↔ id table), [`handle`] (the controller
//! object and its lock), [`lifecycle`], [`configure`], [`issue`] and [`stats`] (the entry points).

pub mod configure;
pub mod error;
pub mod groups;
pub mod handle;
pub mod issue;
pub mod lifecycle;
pub mod stats;
pub mod text;
pub mod types;
