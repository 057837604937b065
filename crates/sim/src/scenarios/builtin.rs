//! What a built-in scenario is: the options it takes from the command line ([`Args`]), its entry in
//! the registry ([`Builtin`]) and what it produces ([`Outcome`]: its runs and the comparisons with
//! the source).

use crate::error::SimError;
use crate::report::{Comparison, Report};
use crate::simulation::ControllerSpec;

/// Options a built-in accepts from the command line; each is optional.
#[derive(Clone, Debug, Default)]
pub struct Args {
    /// Group weights, in the scenario's group order.
    pub weights: Option<Vec<u32>>,
    /// Virtual duration, s.
    pub seconds: Option<f64>,
    /// Seed.
    pub seed: Option<u64>,
    /// Run without a controller instead of the scenario's own.
    pub no_control: bool,
}

impl Args {
    /// The weights given, or `default`; an error unless there are as many as the scenario has groups.
    pub fn weights<const N: usize>(&self, default: [u32; N]) -> Result<Vec<u32>, SimError> {
        match &self.weights {
            None => Ok(default.to_vec()),
            Some(w) if w.len() == N => Ok(w.clone()),
            Some(w) => {
                Err(SimError::Invalid(format!("this scenario has {N} group(s) but {} weight(s) were given", w.len())))
            }
        }
    }

    /// The weights given, or `default`, accepting between `min` and `max` groups.
    pub fn weights_between(&self, default: &[u32], min: usize, max: usize) -> Result<Vec<u32>, SimError> {
        let w = self.weights.clone().unwrap_or_else(|| default.to_vec());
        if w.len() < min || w.len() > max {
            return Err(SimError::Invalid(format!("give between {min} and {max} weights, got {}", w.len())));
        }
        Ok(w)
    }

    /// `seconds` or the default.
    pub fn seconds(&self, default: f64) -> f64 {
        self.seconds.unwrap_or(default)
    }

    /// `seed` or 1.
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or(1)
    }

    /// The controller to run: `spec`, or none when `no_control`.
    pub fn controller(&self, spec: ControllerSpec) -> ControllerSpec {
        if self.no_control {
            ControllerSpec::None
        } else {
            spec
        }
    }
}

/// A built-in scenario.
pub struct Builtin {
    /// Name on the command line.
    pub name: &'static str,
    /// One line saying what it shows.
    pub about: &'static str,
    /// Runs it.
    pub run: fn(&Args) -> Result<Outcome, SimError>,
}

/// What a built-in produced: its runs and the comparisons with the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Every run, in order.
    pub runs: Vec<Report>,
    /// The source's results beside ours.
    pub comparisons: Vec<Comparison>,
}

impl Outcome {
    /// True when every comparison holds.
    pub fn ok(&self) -> bool {
        self.comparisons.iter().all(|c| c.ok)
    }

    /// The outcome without wall-clock fields (see [`Report::deterministic`]).
    pub fn deterministic(mut self) -> Outcome {
        self.runs = self.runs.into_iter().map(Report::deterministic).collect();
        self
    }

    /// JSON: the last run's report with the comparisons (so `groups`, `device`, ... are always at the
    /// top), plus `runs` with every run's report when there are several.
    pub fn to_json(&self) -> String {
        let mut last = self.runs.last().expect("an outcome has runs").clone();
        last.comparisons.clone_from(&self.comparisons);
        let mut value = serde_json::to_value(&last).expect("reports serialise");
        if self.runs.len() > 1 {
            value["runs"] = serde_json::to_value(&self.runs).expect("reports serialise");
        }
        serde_json::to_string_pretty(&value).expect("values serialise")
    }

    /// Tables of every run, then the comparisons.
    pub fn to_table(&self) -> String {
        let mut runs: Vec<Report> = self.runs.clone();
        if let Some(last) = runs.last_mut() {
            last.comparisons.clone_from(&self.comparisons);
        }
        runs.iter().map(Report::to_table).collect::<Vec<_>>().join("\n")
    }
}

/// A comparison `ours` vs `source`, ok when `ok`.
pub(crate) fn compare(what: &str, source: impl ToString, ours: impl ToString, ok: bool) -> Comparison {
    Comparison { what: what.to_string(), source: source.to_string(), ours: ours.to_string(), ok }
}
