//! A scenario: device, controller, groups with their jobs, optional memory pool and scheduled
//! changes, duration and seed — built in code or read from a TOML file — and how to run it.
//!
//! ```
//! use ioshare_core::{ModelParams, QosParams};
//! use ioshare_sim::{DeviceSpec, Job, Rw, Simulation};
//!
//! let report = Simulation::new("two-readers", DeviceSpec::linear(ModelParams::SSD_DFL, 4))
//!     .group("a", 200, [Job::closed(Rw::RandRead, 4096, 32)])
//!     .group("b", 100, [Job::closed(Rw::RandRead, 4096, 32)])
//!     .seconds(1.0)
//!     .run()
//!     .unwrap();
//! // No controller (the default): both saturate the device alike whatever their weights.
//! assert!((report.group("a").cost_share - 0.5).abs() < 0.05);
//! ```
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

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{
    Controller, GroupSettings, IoCost, LeakyBucketLimiter, Limits, LinearModel, ModelParams, Nanos, NoControl,
    QosParams, TokenBucketLimiter, NSEC_PER_SEC,
};
use serde::Deserialize;
use toml::Spanned;

use crate::device::{preset_table, DeviceSpec};
use crate::error::SimError;
use crate::memory::Memory;
use crate::report::Report;
use crate::spec::{ModelLine, QosLine, Weight};
use crate::workload::{Job, Load};

/// Which controller a scenario runs.
#[derive(Clone)]
pub enum ControllerSpec {
    /// No control: every IO goes to the device at once.
    None,
    /// librbd's token bucket enforcing each group's [`Group::limits`].
    TokenBucket,
    /// QEMU's leaky bucket enforcing each group's [`Group::limits`].
    LeakyBucket,
    /// IOCost with a linear cost model and latency QoS.
    IoCost {
        /// The controller's model (may differ from the device's truth).
        model: ModelParams,
        /// QoS targets and vrate bounds.
        qos: QosParams,
        /// The device-depth option beyond the kernel (`None`: kernel-faithful; see
        /// `ioshare_core::iocost::depth`).
        depth: Option<DepthLimit>,
    },
    /// Any other controller, built fresh for every run.
    Custom {
        /// Name shown in reports.
        name: String,
        /// Builds the controller.
        build: Arc<dyn Fn() -> Box<dyn Controller> + Send + Sync>,
    },
}

impl fmt::Debug for ControllerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControllerSpec::None => write!(f, "None"),
            ControllerSpec::TokenBucket => write!(f, "TokenBucket"),
            ControllerSpec::LeakyBucket => write!(f, "LeakyBucket"),
            ControllerSpec::IoCost { model, qos, depth } => {
                write!(f, "IoCost {{ model: {model:?}, qos: {qos:?}, depth: {depth:?} }}")
            }
            ControllerSpec::Custom { name, .. } => write!(f, "Custom({name})"),
        }
    }
}

impl ControllerSpec {
    /// A new controller as described.
    pub fn build(&self) -> Box<dyn Controller> {
        match self {
            ControllerSpec::None => Box::new(NoControl::new()),
            ControllerSpec::TokenBucket => Box::<TokenBucketLimiter>::default(),
            ControllerSpec::LeakyBucket => Box::<LeakyBucketLimiter>::default(),
            ControllerSpec::IoCost { model, qos, depth } => {
                let c = IoCost::new(LinearModel::new(*model), *qos);
                Box::new(match depth {
                    Some(d) => c.with_depth_limit(*d),
                    None => c,
                })
            }
            ControllerSpec::Custom { build, .. } => build(),
        }
    }
}

/// A group of the scenario: a path in the weight tree, its weight, its limits, and its jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Path (`workload/web`).
    pub path: String,
    /// Weight, 1..=10000.
    pub weight: u32,
    /// Rate limits, for the controllers that enforce them (token and leaky bucket); none by default.
    pub limits: Limits,
    /// Jobs issuing IO in this group.
    pub jobs: Vec<Job>,
}

/// Something that changes during a run.
#[derive(Clone, Debug, PartialEq)]
pub enum ChangeKind {
    /// The device's speed is multiplied by this factor (0.5: twice as slow).
    DeviceSpeed(f64),
    /// A group's weight changes.
    Weight {
        /// Group path.
        group: String,
        /// New weight.
        weight: u32,
    },
}

/// A scheduled change.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// When, virtual ns from the start.
    pub at: Nanos,
    /// What.
    pub kind: ChangeKind,
}

/// Everything a run needs. See the module documentation for an example.
#[derive(Clone, Debug)]
pub struct Simulation {
    /// Name shown in reports.
    pub name: String,
    /// Seed of every random draw (same seed, same run).
    pub seed: u64,
    /// Virtual duration, ns.
    pub duration: Nanos,
    /// Metrics ignore IO that starts or completes before this time, ns.
    pub warmup: Nanos,
    /// Interval of the time series, ns.
    pub sample_interval: Nanos,
    /// The device.
    pub device: DeviceSpec,
    /// The controller.
    pub controller: ControllerSpec,
    /// The groups, in report order.
    pub groups: Vec<Group>,
    /// Optional memory pool (needed by leak jobs and jobs with `mem_bytes`).
    pub memory: Option<Memory>,
    /// Scheduled changes.
    pub changes: Vec<Change>,
}

impl Simulation {
    /// A 10-second scenario with seed 1, no controller and no groups yet.
    pub fn new(name: &str, device: DeviceSpec) -> Simulation {
        Simulation {
            name: name.to_string(),
            seed: 1,
            duration: 10 * NSEC_PER_SEC,
            warmup: 0,
            sample_interval: NSEC_PER_SEC,
            device,
            controller: ControllerSpec::None,
            groups: Vec::new(),
            memory: None,
            changes: Vec::new(),
        }
    }

    /// Sets the controller.
    pub fn controller(mut self, controller: ControllerSpec) -> Simulation {
        self.controller = controller;
        self
    }

    /// Runs IOCost with cost model `model` and QoS `qos`.
    pub fn iocost(self, model: ModelParams, qos: QosParams) -> Simulation {
        self.controller(ControllerSpec::IoCost { model, qos, depth: None })
    }

    /// Adds a group.
    pub fn group(mut self, path: &str, weight: u32, jobs: impl IntoIterator<Item = Job>) -> Simulation {
        let jobs = jobs.into_iter().collect();
        self.groups.push(Group { path: path.to_string(), weight, limits: Limits::default(), jobs });
        self
    }

    /// Sets the limits of the group at `path` (added before). Panics if there is none: a caller's bug.
    pub fn limit(mut self, path: &str, limits: Limits) -> Simulation {
        let g = self.groups.iter_mut().find(|g| g.path == path).unwrap_or_else(|| panic!("no group '{path}'"));
        g.limits = limits;
        self
    }

    /// The controller's settings for group `g`.
    pub(crate) fn settings(g: &Group) -> GroupSettings {
        GroupSettings { weight: g.weight, limits: g.limits.clone() }
    }

    /// Sets the virtual duration in seconds.
    pub fn seconds(mut self, seconds: f64) -> Simulation {
        self.duration = secs_to_ns(seconds);
        self
    }

    /// Sets the warm-up in seconds.
    pub fn warmup(mut self, seconds: f64) -> Simulation {
        self.warmup = secs_to_ns(seconds);
        self
    }

    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Simulation {
        self.seed = seed;
        self
    }

    /// Adds a memory pool.
    pub fn memory(mut self, memory: Memory) -> Simulation {
        self.memory = Some(memory);
        self
    }

    /// Schedules a change at `at_seconds`.
    pub fn change(mut self, at_seconds: f64, kind: ChangeKind) -> Simulation {
        self.changes.push(Change { at: secs_to_ns(at_seconds), kind });
        self
    }

    /// Runs the scenario with the controller it describes.
    pub fn run(&self) -> Result<Report, SimError> {
        let name = match &self.controller {
            ControllerSpec::Custom { name, .. } => Some(name.clone()),
            _ => None,
        };
        crate::engine::run(self, self.controller.build(), name)
    }

    /// Runs the scenario with a controller built by the caller (configured by the run).
    pub fn run_with(&self, controller: Box<dyn Controller>) -> Result<Report, SimError> {
        crate::engine::run(self, controller, None)
    }

    /// Checks everything that can be checked before running.
    pub fn validate(&self) -> Result<(), SimError> {
        let invalid = |m: String| SimError::Invalid(format!("scenario '{}': {m}", self.name));
        self.device.validate().map_err(|e| SimError::Invalid(format!("device {e}")))?;
        if self.groups.is_empty() {
            return Err(invalid("no groups: add at least one group with a job".into()));
        }
        if self.duration == 0 || self.warmup >= self.duration {
            let warmup = self.warmup as f64 / 1e9;
            return Err(invalid(format!(
                "the duration must be longer than the warm-up ({warmup} s; the duration includes it)"
            )));
        }
        if self.duration > MAX_DURATION {
            return Err(invalid(format!(
                "{} s of virtual time is more than the {} s a run may take: split it into several runs",
                self.duration as f64 / 1e9,
                MAX_DURATION / 1_000_000_000
            )));
        }
        if self.sample_interval == 0 {
            return Err(invalid("the sample interval must be positive".into()));
        }
        for (i, g) in self.groups.iter().enumerate() {
            Weight::try_from(g.weight).map_err(|m| invalid(format!("group '{}': {m}", g.path)))?;
            Simulation::settings(g).validate(&g.path)?;
            if self.groups[..i].iter().any(|o| o.path.trim_matches('/') == g.path.trim_matches('/')) {
                return Err(invalid(format!("group '{}' is defined twice", g.path)));
            }
            for job in &g.jobs {
                job.validate().map_err(|m| invalid(format!("group '{}': {m}", g.path)))?;
            }
        }
        let needs_memory = self.groups.iter().flat_map(|g| &g.jobs).any(|j| j.mem_bytes > 0 || is_leak(j));
        let has_leak = self.groups.iter().flat_map(|g| &g.jobs).any(is_leak);
        match &self.memory {
            Some(m) => {
                m.validate().map_err(invalid)?;
                if !has_leak {
                    return Err(invalid(
                        "a memory pool needs a leak job (leak_mbps) whose pages reclaim can evict".into(),
                    ));
                }
            }
            None if needs_memory => {
                return Err(invalid("jobs with mem_kb or leak_mbps need a [memory] pool".into()));
            }
            None => {}
        }
        for c in &self.changes {
            if let ChangeKind::Weight { group, weight } = &c.kind {
                if !self.groups.iter().any(|g| g.path == *group) {
                    return Err(invalid(format!("a change names unknown group '{group}'")));
                }
                Weight::try_from(*weight).map_err(|m| invalid(format!("change of '{group}': {m}")))?;
            }
            if let ChangeKind::DeviceSpeed(f) = c.kind {
                if !(f > 0.0 && f.is_finite()) {
                    return Err(invalid(format!("device_speed must be positive, got {f}")));
                }
            }
        }
        Ok(())
    }

    /// Reads a scenario file.
    pub fn load(path: &Path) -> Result<Simulation, SimError> {
        let text =
            std::fs::read_to_string(path).map_err(|reason| SimError::Read { file: path.to_path_buf(), reason })?;
        Simulation::from_toml(&text, path)
    }

    /// Parses a scenario from TOML; `file` names it in errors, which give the line and key.
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
            Simulation::settings(&group)
                .validate(&group.path)
                .map_err(|e| at(key_offset(text, span, "limits"), e.to_string()))?;
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

fn is_leak(job: &Job) -> bool {
    matches!(job.load, Load::Leak { .. })
}

/// Longest virtual duration of one run (a day): a sanity bound — a busy device simulates ~10^5 IOs
/// per virtual second, so a day is already hours of wall time.
const MAX_DURATION: Nanos = 86_400 * 1_000_000_000;

/// Seconds to virtual ns.
pub fn secs_to_ns(seconds: f64) -> Nanos {
    (seconds.max(0.0) * NSEC_PER_SEC as f64).round() as Nanos
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
