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
    /// Latency distributions the scenario's chart draws, one panel per [`Curve::panel`] (the
    /// `qos-peers` scenario: each real program beside ioshare's restatement of it); empty elsewhere.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curves: Vec<Curve>,
}

/// One latency distribution of a run, as its cumulative curve.
#[derive(Clone, Debug, Serialize)]
pub struct Curve {
    /// The chart panel it belongs to (curves of one panel share its axes).
    pub panel: String,
    /// Who ran (the legend).
    pub name: String,
    /// (latency ms, % of IOs at or below it), by latency.
    pub points: Vec<(f64, f64)>,
}
