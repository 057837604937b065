//! Scenario files: a [`Simulation`] read from TOML, errors naming the file, line and key.
//!
//! Design: serde reads the text into private mirrors of the file's tables (`ScenarioFile`,
//! `GroupFile`, ...) that keep their spans; they are then resolved — device presets, the controller's
//! defaults — into a [`Simulation`], so every error can name its line and key, and the description
//! itself knows nothing of TOML. This module implements [`Simulation::load`] and
//! [`Simulation::from_toml`]; nothing imports it back.
//!
//! File format (see `scenarios/*.toml` in the repository for complete examples):
//! ```toml
//! name = "proportional"
//! seed = 1
//! seconds = 10.0
//! warmup_seconds = 1.0          # optional: metrics ignore the first second
//! [device]                      # a preset with overrides, or kind = linear|ssd|hdd|remote + parameters
//! preset = "nvme-ssd"
//! [controller]                  # kind = "none" (default), "iocost", "token-bucket", "leaky-bucket"
//! kind = "iocost"
//! model = "ssd_dfl"             # io.cost.model line; defaults to a linear device's own model
//! model_scale = 2.0             # optional: a model 2x too optimistic
//! qos = "rpct=90 rlat=5000"     # io.cost.qos line
//! depth_limit = 32              # optional, beyond the kernel: at most 32 IOs in the device
//! [[groups]]
//! path = "workload/a"
//! weight = 200
//! limits = { iops-read = 5000 } # optional: enforced by token-bucket / leaky-bucket
//! [[groups.jobs]]
//! rw = "randread"
//! iodepth = 32
//! [[changes]]                   # optional: at 5 s the device becomes twice as slow
//! at = 5.0
//! device_speed = 0.5
//! ```

use std::path::Path;

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{Limits, QosParams};
use serde::Deserialize;
use toml::Spanned;

use crate::device::{preset_table, DeviceSpec};
use crate::error::SimError;
use crate::memory::Memory;
use crate::simulation::{secs_to_ns, Change, ChangeKind, ControllerSpec, Group, Simulation};
use crate::spec::{ModelLine, QosLine, Weight};
use crate::workload::Job;

impl Simulation {
    /// Reads a scenario file.
    pub fn load(path: &Path) -> Result<Simulation, SimError> {
        let text =
            std::fs::read_to_string(path).map_err(|reason| SimError::Read { file: path.to_path_buf(), reason })?;
        Simulation::from_toml(&text, path)
    }

    /// Parses a scenario file's text; `file` names it in errors, which give the line and key.
    pub fn from_toml(text: &str, file: &Path) -> Result<Simulation, SimError> {
        let at =
            |offset: usize, msg: String| SimError::File { file: file.to_path_buf(), line: line_of(text, offset), msg };
        let f: ScenarioFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            let line_text = text[..].lines().nth(line_of(text, offset) - 1).unwrap_or("").trim();
            let msg = e.message().trim().replace('\n', "; ");
            at(offset, format!("{msg} (at `{line_text}`)"))
        })?;
        let device_span = f.device.span().start;
        let device = resolve_device(f.device.into_inner()).map_err(|(key, m)| {
            at(key.map_or(device_span, |k| key_offset(text, device_span, &k)), format!("[device]: {m}"))
        })?;
        let controller = match f.controller {
            None => ControllerSpec::None,
            Some(c) => {
                let span = c.span().start;
                c.into_inner().resolve(&device).map_err(|m| at(span, format!("[controller]: {m}")))?
            }
        };
        let mut sc = Simulation::new(f.name.as_deref().unwrap_or("scenario"), device).controller(controller);
        if let Some(seed) = f.seed {
            sc.seed = seed;
        }
        sc.duration = secs_to_ns(f.seconds);
        sc.warmup = secs_to_ns(f.warmup_seconds.unwrap_or(0.0));
        if let Some(ms) = f.sample_ms {
            sc.sample_interval = ms * ioshare_core::NSEC_PER_MSEC;
        }
        sc.memory = f.memory;
        for g in f.groups {
            let span = g.span().start;
            let g = g.into_inner();
            ioshare_core::group::path_components(&g.path)
                .map_err(|e| at(key_offset(text, span, "path"), format!("path: {e}")))?;
            let weight = g.weight.map_or(100, |w| w.0);
            let limits = g.limits.unwrap_or_default();
            let group = Group { path: g.path, weight, limits, jobs: g.jobs };
            group.settings().validate(&group.path).map_err(|e| at(key_offset(text, span, "limits"), e.to_string()))?;
            sc.groups.push(group);
        }
        for c in f.changes {
            let span = c.span().start;
            let c = c.into_inner();
            let kind = match (c.device_speed, c.group, c.weight) {
                (Some(s), None, None) => ChangeKind::DeviceSpeed(s),
                (None, Some(group), Some(w)) => ChangeKind::Weight { group, weight: w.0 },
                _ => return Err(at(span, "[[changes]]: give either device_speed, or group and weight".into())),
            };
            sc.changes.push(Change { at: secs_to_ns(c.at), kind });
        }
        sc.validate().map_err(|e| at(0, e.to_string()))?;
        Ok(sc)
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Offset of the line that sets `key` in the table starting at `table_start`, or the table's.
fn key_offset(text: &str, table_start: usize, key: &str) -> usize {
    let mut offset = table_start;
    for line in text[table_start..].split_inclusive('\n').skip(1) {
        let t = line.trim_start();
        if t.starts_with('[') {
            break;
        }
        if t.split('=').next().is_some_and(|k| k.trim() == key) {
            return offset + text[offset..].find(line).unwrap_or(0);
        }
        offset += line.len();
    }
    table_start
}

/// The device of a `[device]` table, presets resolved; errors name the key when there is one.
fn resolve_device(mut table: toml::Table) -> Result<DeviceSpec, (Option<String>, String)> {
    let plain = |m: String| (None, m);
    if let Some(preset) = table.remove("preset") {
        let name = preset.as_str().ok_or_else(|| (Some("preset".into()), "preset must be a string".into()))?;
        let mut base = preset_table(name).map_err(|e| (Some("preset".into()), e.to_string()))?;
        if table.contains_key("kind") {
            return Err(plain("give either preset (with overrides) or kind, not both".into()));
        }
        base.extend(table);
        table = base;
    }
    let spec = DeviceSpec::from_table(&table).map_err(|e| {
        let key = (e.key != ".").then(|| e.key.clone());
        (key, e.to_string())
    })?;
    spec.validate().map_err(|e| (Some(e.key.clone()), e.to_string()))?;
    Ok(spec)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: Option<String>,
    seed: Option<u64>,
    seconds: f64,
    warmup_seconds: Option<f64>,
    sample_ms: Option<u64>,
    device: Spanned<toml::Table>,
    controller: Option<Spanned<ControllerFile>>,
    groups: Vec<Spanned<GroupFile>>,
    memory: Option<Memory>,
    #[serde(default)]
    changes: Vec<Spanned<ChangeFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    path: String,
    weight: Option<Weight>,
    limits: Option<Limits>,
    #[serde(default)]
    jobs: Vec<Job>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeFile {
    at: f64,
    device_speed: Option<f64>,
    group: Option<String>,
    weight: Option<Weight>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ControllerKind {
    None,
    #[serde(rename = "iocost")]
    IoCost,
    TokenBucket,
    LeakyBucket,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerFile {
    kind: ControllerKind,
    model: Option<ModelLine>,
    model_scale: Option<f64>,
    qos: Option<QosLine>,
    depth_limit: Option<u32>,
}

impl ControllerFile {
    fn resolve(self, device: &DeviceSpec) -> Result<ControllerSpec, String> {
        match self.kind {
            ControllerKind::None | ControllerKind::TokenBucket | ControllerKind::LeakyBucket => {
                if self.model.is_some()
                    || self.qos.is_some()
                    || self.model_scale.is_some()
                    || self.depth_limit.is_some()
                {
                    return Err("model, model_scale, qos and depth_limit apply only to kind = \"iocost\"".into());
                }
                Ok(match self.kind {
                    ControllerKind::TokenBucket => ControllerSpec::TokenBucket,
                    ControllerKind::LeakyBucket => ControllerSpec::LeakyBucket,
                    _ => ControllerSpec::None,
                })
            }
            ControllerKind::IoCost => {
                let model = match (self.model, device) {
                    (Some(m), _) => m.0,
                    (None, DeviceSpec::Linear(l)) => l.model.0,
                    (None, _) => {
                        return Err("model is required unless the device is linear (e.g. model = \"ssd_dfl\")".into())
                    }
                };
                let scale = self.model_scale.unwrap_or(1.0);
                if !(scale > 0.0 && scale.is_finite()) {
                    return Err(format!("model_scale must be positive, got {scale}"));
                }
                let qos = self.qos.map_or_else(QosParams::default, |q| q.0);
                if self.depth_limit == Some(0) {
                    return Err("depth_limit must be at least 1 (or left out for the kernel's behaviour)".into());
                }
                let depth = self.depth_limit.map(|max| DepthLimit { max });
                Ok(ControllerSpec::IoCost { model: model.scaled(scale), qos, depth })
            }
        }
    }
}
