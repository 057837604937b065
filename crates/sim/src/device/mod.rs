//! Simulated block devices.
//!
//! A device accepts up to [`Device::queue_depth`] IOs at once (its tags, like NCQ or an NVMe queue);
//! the engine holds further released IOs in front of it, and an IO that waited there completes with
//! `started > released` in the [`ioshare_core::Completion`] the controller sees — the queue-depth
//! signal IOCost uses to notice saturation. Inside, the device serves IOs with its parallel units
//! ("servers": SSD channels, one HDD actuator): [`Device::arrive`] starts an IO if a server is free
//! (or at a known later time) and otherwise queues it; when a server finishes ([`Device::finish`])
//! it may start a queued IO.
//!
//! Each device reports, per started IO, the server time it occupies (`busy`): the sum over a run
//! divided by `servers × duration` is the device utilisation, and a group's share of the sum is its
//! share of the device.
//!
//! Design: one [`Device`] (`common`) does the serving, queueing and speed changes for every model;
//! a model implements [`DeviceModel`] — its service time, and for a disk the order it takes queued
//! IOs in. Models: [`linear::Linear`] (service time from its own linear cost model, the reference
//! for exact virtual-time properties), [`ssd::Ssd`], [`hdd::Hdd`], [`remote::Remote`].
//! [`DeviceSpec`] (`spec`) describes any of them (in code or in TOML) and builds its [`Device`];
//! presets resembling real devices are in `presets/`. The arrows go one way: `spec` → models →
//! `common`, `param`; this module only declares and re-exports.

mod common;
pub mod hdd;
pub mod linear;
mod param;
pub mod remote;
mod spec;
pub mod ssd;

pub use common::{Device, DeviceModel, Queued, Request, Service, Started, NO_SLOT};
pub use param::KeyError;
pub use spec::{preset_table, DeviceSpec, PRESETS};
