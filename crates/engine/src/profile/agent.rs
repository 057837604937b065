//! The agent's `model = "profile"`: the engine's profiler behind the agent's [`Measure`] seam (the
//! agent cannot call the engine itself, which depends on it).
//!
//! A device the agent is to control is in use: it is measured read-only (the write coefficients
//! derived from the reads and a built-in set's write:read ratios, as `ioshare profile --read-only`
//! does), in [`AGENT_PLAN`]'s short interleaved rounds — about 10 s, once per device, since the agent
//! caches the result ([`ioshare_agent::Cached`]). Only the model: no QoS runs (the configuration's
//! `qos` line, or none, says what the latency targets are).

use std::sync::atomic::AtomicBool;

use ioshare_agent::Measure;
use ioshare_core::{ModelParams, NSEC_PER_MSEC, NSEC_PER_SEC};
use ioshare_host::DiskId;

use super::measure::{measure, Plan, Step};
use super::MIN_PROFILE_SIZE;
use crate::target::Target;

/// The runs the agent measures a device with: 3 interleaved rounds of 1 s per run (0.2 s warm-up).
pub const AGENT_PLAN: Plan = Plan {
    duration: NSEC_PER_SEC,
    warmup: 200 * NSEC_PER_MSEC,
    depth: 64,
    big_block: 4 << 20,
    big_depth: 16,
    rounds: 3,
};

/// Measures a device for the agent, read-only, reporting progress through `progress`.
pub struct AgentProfiler<'a> {
    stop: &'a AtomicBool,
    progress: Box<dyn Fn(&str) + 'a>,
}

impl<'a> AgentProfiler<'a> {
    /// A profiler that stops (with an error) when `stop` is raised.
    pub fn new(stop: &'a AtomicBool, progress: impl Fn(&str) + 'a) -> Self {
        AgentProfiler { stop, progress: Box::new(progress) }
    }
}

impl Measure for AgentProfiler<'_> {
    fn measure(&self, device: &DiskId) -> Result<ModelParams, String> {
        let path = std::path::Path::new("/dev").join(&device.name);
        let failed = |e: crate::Error| format!("profiling {} failed: {e}", path.display());
        let target = Target::open_read_only(&path, MIN_PROFILE_SIZE).map_err(failed)?;
        let mut step = |step: Step, i: usize, n: usize| {
            (self.progress)(&format!("profiling {} [run {}/{n}] {}", device.name, i + 1, step.describe(&AGENT_PLAN)))
        };
        Ok(measure(&target, &AGENT_PLAN, false, self.stop, &mut step).map_err(failed)?.model)
    }
}
