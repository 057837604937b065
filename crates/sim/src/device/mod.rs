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

pub mod hdd;
pub mod linear;
pub mod remote;
pub mod ssd;

use crate::error::SimError;
use ioshare_core::{Nanos, Op};

/// An IO as the device sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The engine's handle of the IO, returned in [`Started`].
    pub token: u32,
    /// Index of the issuing group (devices that detect sequential streams per group use it).
    pub group: u32,
    /// Read or write.
    pub op: Op,
    /// Byte offset.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

/// An IO a device started serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    /// The engine's handle of the IO.
    pub token: u32,
    /// Server serving it, handed back to [`Device::finish`]; [`NO_SLOT`] for devices without servers.
    pub slot: u32,
    /// When service starts (≥ the time it arrived).
    pub start: Nanos,
    /// When it completes.
    pub done: Nanos,
    /// Server time it occupies, ns (its share of the device's capacity).
    pub busy: Nanos,
}

/// Slot of an IO on a device that has no servers to free ([`remote::Remote`]).
pub const NO_SLOT: u32 = u32::MAX;

/// A simulated device. Every method takes the current virtual time; none reads a clock.
pub trait Device {
    /// Short description for reports (`linear ×4`, `hdd 7200 rpm`, ...).
    fn describe(&self) -> String;
    /// Number of parallel servers (the denominator of utilisation).
    fn servers(&self) -> u32;
    /// IOs the device accepts at once; the engine queues the rest in front of it.
    fn queue_depth(&self) -> u32;
    /// An IO arrives; returns it if it starts at once (or at a known later time), `None` if queued.
    fn arrive(&mut self, now: Nanos, req: Request) -> Option<Started>;
    /// Server `slot` finished its IO at `now`; returns the queued IO it starts next, if any.
    fn finish(&mut self, now: Nanos, slot: u32) -> Option<Started>;
    /// Multiplies the device's speed by `factor` from now on (0.5 = twice as slow).
    fn set_speed(&mut self, factor: f64);
}

/// Description of a device: which model and its parameters. In TOML, `kind` names the variant
/// (`linear`, `ssd`, `hdd`, `remote`) and the other keys are its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceSpec {
    /// Parallel servers whose service time follows a linear cost model.
    Linear(linear::LinearSpec),
    /// Flash: channels, write buffer, garbage collection.
    Ssd(ssd::SsdSpec),
    /// Rotating disk: seek, rotation, cheap sequential IO, reordering.
    Hdd(hdd::HddSpec),
    /// Network block storage: provisioned caps plus network latency.
    Remote(remote::RemoteSpec),
}

/// A table that does not describe a device: which key, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {msg}")]
pub struct KeyError {
    /// The key (`.` when the problem is the table itself, e.g. a missing key).
    pub key: String,
    /// What is wrong.
    pub msg: String,
}

/// Presets shipped with ioshare, as TOML (`[device]` tables), by name.
pub const PRESETS: &[(&str, &str)] = &[
    ("sata-ssd", include_str!("../../presets/sata-ssd.toml")),
    ("nvme-ssd", include_str!("../../presets/nvme-ssd.toml")),
    ("hdd-7200", include_str!("../../presets/hdd-7200.toml")),
    ("gp3", include_str!("../../presets/gp3.toml")),
];

impl DeviceSpec {
    /// A linear device of `servers` parallel servers following `model` (see [`linear::LinearSpec`]).
    pub fn linear(model: ioshare_core::ModelParams, servers: u32) -> Self {
        DeviceSpec::Linear(linear::LinearSpec { model: model.into(), servers, queue_depth: None })
    }

    /// The same device accepting `depth` IOs at once.
    pub fn with_queue_depth(mut self, depth: u32) -> Self {
        let qd = match &mut self {
            DeviceSpec::Linear(s) => &mut s.queue_depth,
            DeviceSpec::Ssd(s) => &mut s.queue_depth,
            DeviceSpec::Hdd(s) => &mut s.queue_depth,
            DeviceSpec::Remote(s) => &mut s.queue_depth,
        };
        *qd = Some(depth);
        self
    }

    /// The preset called `name` (see [`PRESETS`]).
    pub fn preset(name: &str) -> Result<Self, SimError> {
        Self::from_table(&preset_table(name)?).map_err(|e| SimError::Invalid(format!("preset '{name}': {e}")))
    }

    /// Reads a device from a TOML table (the `[device]` table of a scenario, presets resolved). The
    /// error names the offending key.
    pub fn from_table(table: &toml::Table) -> Result<Self, KeyError> {
        fn params<T: serde::de::DeserializeOwned>(table: &toml::Table) -> Result<T, KeyError> {
            let mut rest = table.clone();
            rest.remove("kind");
            serde_path_to_error::deserialize(toml::Value::Table(rest))
                .map_err(|e| KeyError { key: e.path().to_string(), msg: e.inner().message().trim().to_string() })
        }
        let kind = |msg: &str| KeyError { key: "kind".into(), msg: msg.into() };
        match table.get("kind").map(|k| k.as_str()) {
            None => Err(kind("missing: give kind = linear, ssd, hdd or remote (or a preset)")),
            Some(Some("linear")) => params(table).map(DeviceSpec::Linear),
            Some(Some("ssd")) => params(table).map(DeviceSpec::Ssd),
            Some(Some("hdd")) => params(table).map(DeviceSpec::Hdd),
            Some(Some("remote")) => params(table).map(DeviceSpec::Remote),
            Some(_) => Err(kind("unknown device kind; expected linear, ssd, hdd or remote")),
        }
    }

    /// Builds the device; `seed` drives its randomness (HDD rotational position).
    pub fn build(&self, seed: u64) -> Result<Box<dyn Device>, SimError> {
        self.validate().map_err(|e| SimError::Invalid(format!("device {e}")))?;
        Ok(match self {
            DeviceSpec::Linear(s) => Box::new(linear::LinearDevice::new(s)),
            DeviceSpec::Ssd(s) => Box::new(ssd::Ssd::new(s)),
            DeviceSpec::Hdd(s) => Box::new(hdd::Hdd::new(s, seed)),
            DeviceSpec::Remote(s) => Box::new(remote::Remote::new(s)),
        })
    }

    /// Checks the parameters, naming the offending one.
    pub fn validate(&self) -> Result<(), KeyError> {
        let qd = match self {
            DeviceSpec::Linear(s) => s.queue_depth,
            DeviceSpec::Ssd(s) => s.queue_depth,
            DeviceSpec::Hdd(s) => s.queue_depth,
            DeviceSpec::Remote(s) => s.queue_depth,
        };
        if qd == Some(0) {
            return Err(KeyError { key: "queue_depth".into(), msg: "must be at least 1".into() });
        }
        match self {
            DeviceSpec::Linear(s) => positive("servers", s.servers as f64),
            DeviceSpec::Ssd(s) => s.validate(),
            DeviceSpec::Hdd(s) => s.validate(),
            DeviceSpec::Remote(s) => s.validate(),
        }
    }
}

/// The TOML table of preset `name`.
pub fn preset_table(name: &str) -> Result<toml::Table, SimError> {
    let (_, text) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
        let names: Vec<_> = PRESETS.iter().map(|(n, _)| *n).collect();
        SimError::Invalid(format!("unknown device preset '{name}'; presets: {}", names.join(", ")))
    })?;
    let doc: toml::Table = text.parse().expect("presets are valid TOML (tested)");
    Ok(doc["device"].as_table().expect("presets have a [device] table").clone())
}

/// Error unless `value` > 0.
pub(crate) fn positive(key: &str, value: f64) -> Result<(), KeyError> {
    if value > 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(KeyError { key: key.into(), msg: format!("must be a positive number, got {value}") })
    }
}

/// Nanoseconds to transfer `len` bytes at `bytes_per_sec`.
pub(crate) fn transfer_ns(len: u32, bytes_per_sec: f64) -> f64 {
    len as f64 * 1e9 / bytes_per_sec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_builds() {
        for (name, _) in PRESETS {
            let spec = DeviceSpec::preset(name).unwrap();
            spec.build(1).unwrap();
        }
        assert!(DeviceSpec::preset("floppy").unwrap_err().to_string().contains("nvme-ssd"));
    }
}

/// Identical servers with one FIFO in front: an arriving IO takes a free server or queues; a server
/// that finishes takes the next queued IO or becomes free. The devices whose servers are
/// interchangeable (linear, SSD channels) share it.
#[derive(Debug)]
pub(crate) struct ServerPool {
    free: Vec<u32>,
    queue: std::collections::VecDeque<Request>,
}

impl ServerPool {
    /// `servers` free servers and an empty queue.
    pub(crate) fn new(servers: u32) -> Self {
        ServerPool { free: (0..servers).rev().collect(), queue: std::collections::VecDeque::new() }
    }

    /// The server `req` starts on now, or `None` when it queues.
    pub(crate) fn arrive(&mut self, req: Request) -> Option<(u32, Request)> {
        match self.free.pop() {
            Some(slot) => Some((slot, req)),
            None => {
                self.queue.push_back(req);
                None
            }
        }
    }

    /// The next queued IO server `slot` starts now, or `None` when the server goes idle.
    pub(crate) fn finish(&mut self, slot: u32) -> Option<(u32, Request)> {
        match self.queue.pop_front() {
            Some(req) => Some((slot, req)),
            None => {
                self.free.push(slot);
                None
            }
        }
    }
}
