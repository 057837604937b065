//! One scenario's results as plain data ([`ScenarioReport`]): what the scenarios return and the
//! table, JSON and SVG renderers read.

use serde::Serialize;

use crate::observe::RunObserved;
use crate::verdict::{RunEntry, Verdict};

/// One scenario's runs and verdict.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The runs, in the order they ran.
    pub runs: Vec<RunEntry>,
    /// The scenario's verdict: every ioshare controller it judges passed.
    pub verdict: Verdict,
    /// Remarks (a peer that could not run, a controller not yet available).
    pub notes: Vec<String>,
    /// What the eBPF observer saw per run (with `--observe`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<RunObserved>,
}
