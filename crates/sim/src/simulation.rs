//! What one simulated run is: device, controller, groups with their jobs, optional memory pool and
//! scheduled changes, duration and seed.
//!
//! Design: a [`Simulation`] is a plain description, built in code with its builder methods or read
//! from a scenario file ([`Simulation::load`], in `scenario_file`), and checked by
//! [`Simulation::validate`]. It knows nothing of how it runs: the engine takes it and implements
//! [`Simulation::run`], so this module imports neither the engine nor the file reader (both import
//! it). A built-in scenario (`scenarios`) builds one or more simulations and judges their reports.
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

use std::fmt;
use std::sync::Arc;

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{
    Controller, GroupSettings, IoCost, LeakyBucketLimiter, Limits, LinearModel, ModelParams, Nanos, NoControl,
    QosParams, TokenBucketLimiter, NSEC_PER_SEC,
};

use crate::device::DeviceSpec;
use crate::error::SimError;
use crate::memory::Memory;
use crate::spec::Weight;
use crate::workload::{Job, Load};

/// Which controller a simulation runs.
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

/// A group of the simulation: a path in the weight tree, its weight, its limits, and its jobs.
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

impl Group {
    /// The controller's settings for this group.
    pub(crate) fn settings(&self) -> GroupSettings {
        GroupSettings { weight: self.weight, limits: self.limits.clone() }
    }
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
    /// A 10-second simulation with seed 1, no controller and no groups yet.
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
            g.settings().validate(&g.path)?;
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
