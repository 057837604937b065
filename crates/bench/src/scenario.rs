//! What a scenario is to the suite: something that describes itself ([`Described`]) and runs and
//! judges its runs ([`Scenario`]), given the target, the options and the device measurement
//! ([`Context`]).
//!
//! Most scenarios are a plan — tenants, controllers, kernel peers, reference runs — and a criterion
//! applied to every run: they implement [`crate::plan::Planned`], and the shared runner
//! ([`crate::plan`]) makes them a [`Scenario`]. A scenario whose runs depend on each other (the agent
//! scenario configures its controllers from its first run) implements [`Scenario`] itself. The
//! suite knows them only through the list in [`crate::scenarios::ALL`].

use std::path::Path;
use std::sync::atomic::AtomicBool;

use ioshare_engine::report::RunReport;
use ioshare_engine::target::Target;

use crate::calibrate::Calibration;
use crate::error::Result;
use crate::kernel::Peers;
use crate::observe::{Observations, RunObserved};
use crate::options::BenchOptions;
use crate::report::ScenarioReport;
use crate::verdict::Side;

/// What a scenario says about itself.
pub trait Described {
    /// Name (`--scenario NAME`, the report's and the chart's name).
    fn name(&self) -> &'static str;

    /// What it shows and how it is judged, in one line.
    fn description(&self) -> &'static str;

    /// Whether its tenants write (it then needs a target bench may overwrite: its own temporary
    /// file, or one given with `--destructive`).
    fn writes(&self) -> bool {
        false
    }

    /// Whether the suite runs it when no scenario is named.
    fn in_default_suite(&self, _opts: &BenchOptions) -> bool {
        true
    }
}

/// A scenario of the suite.
pub trait Scenario: Described {
    /// Runs it will make with these options and kernel peers, and whether an observer is attached
    /// (for the progress line).
    fn planned_runs(&self, opts: &BenchOptions, cal: &Calibration, peers: Option<&Peers>, observed: bool) -> usize;

    /// Runs every run of the scenario and judges them. On interrupt (`stop`), returns the runs
    /// finished. `progress` gets a line as each run starts.
    fn run(
        &self,
        ctx: &Context,
        peers: Option<&mut Peers>,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&str),
    ) -> Result<ScenarioReport>;
}

/// A scenario as the suite runs it: under a name in the report, with its own weights or the suite's.
#[derive(Clone, Copy)]
pub struct Case {
    /// Name of the case's scenario report.
    pub name: &'static str,
    /// The scenario.
    pub scenario: &'static dyn Scenario,
    /// The weights of its two tenants (`None`: the suite's).
    pub weights: Option<(u32, u32)>,
}

impl Case {
    /// The scenario under its own name, with the suite's weights.
    pub fn plain(scenario: &'static dyn Scenario) -> Case {
        Case { name: scenario.name(), scenario, weights: None }
    }
}

/// What every scenario needs.
pub struct Context<'a> {
    /// The target.
    pub target: &'a Target,
    /// Suite options (weights, duration).
    pub opts: &'a BenchOptions,
    /// The device measurement.
    pub calibration: &'a Calibration,
    /// The eBPF observer's observations, with `--observe`.
    pub observe: Option<&'a Observations>,
}

impl Context<'_> {
    /// Runs `run` under the observer when there is one (see [`crate::observe`]).
    pub fn observed<E>(
        &self,
        side: Side,
        name: &str,
        device: Option<&Path>,
        run: impl FnOnce() -> std::result::Result<RunReport, E>,
    ) -> std::result::Result<RunReport, E> {
        match self.observe {
            Some(obs) => obs.observed(side, name, device, run),
            None => run(),
        }
    }

    /// What the observer saw in the scenario's runs, and its notes (empty without `--observe`).
    pub fn take_observed(&self) -> (Vec<RunObserved>, Vec<String>) {
        self.observe.map(Observations::take).unwrap_or_default()
    }
}
