//! [`DeviceSpec`]: which device model, with its parameters, in code or TOML; the shipped presets.

use super::common::Device;
use super::param::{positive, KeyError};
use super::{hdd, linear, remote, ssd};
use crate::error::SimError;

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
    pub fn build(&self, seed: u64) -> Result<Device, SimError> {
        self.validate().map_err(|e| SimError::Invalid(format!("device {e}")))?;
        Ok(match self {
            DeviceSpec::Linear(s) => Device::new(linear::Linear::new(s)),
            DeviceSpec::Ssd(s) => Device::new(ssd::Ssd::new(s)),
            DeviceSpec::Hdd(s) => Device::new(hdd::Hdd::new(s, seed)),
            DeviceSpec::Remote(s) => Device::new(remote::Remote::new(s)),
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
