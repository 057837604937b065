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
//! Models: [`linear::LinearDevice`] (service time from its own linear cost model, the reference for
//! exact virtual-time properties), [`ssd::Ssd`], [`hdd::Hdd`], [`remote::Remote`]. [`DeviceSpec`]
//! describes any of them (in code or in TOML); presets resembling real devices are in `presets/`.

mod common;
pub mod hdd;
pub mod linear;
mod param;
pub mod remote;
mod spec;
pub mod ssd;

pub use common::{Device, Request, Started, NO_SLOT};
pub use param::KeyError;
pub use spec::{preset_table, DeviceSpec, PRESETS};
