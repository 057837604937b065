//! A tune's result file — also its checkpoint: the device it measured, the settings, the uncontrolled
//! baseline and every finished point, rewritten atomically (a temporary file renamed over it) after
//! each point, so an interrupted or crashed sweep loses at most the point it was on and `--resume`
//! continues from it. Fits and solutions are not stored: they are computed from the points whenever
//! the file is read ([`TuneResult::solutions`]), so a merged file needs no refitting step.
//!
//! [`TuneResult::load`] and [`TuneResult::solution`] are the reader the agent uses for
//! `model = "tune:FILE#SOLUTION"`.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::data::{DeviceId, TuneResult, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::fit::Fit;
use crate::from_trace;
use crate::solve::{self, Solution, Solved};

/// The solution the agent and systemd's `iocost` use when none is named.
pub const DEFAULT_SOLUTION: &str = "isolated-bandwidth";

/// One solution ready to apply: what the agent takes from a result.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    /// The solution's name.
    pub name: String,
    /// The `io.cost.model` line (with `MAJ:MIN` when the device has one).
    pub model_line: String,
    /// The `io.cost.qos` line (likewise).
    pub qos_line: String,
    /// When the sweep was measured, seconds since the Unix epoch.
    pub measured_at: u64,
    /// The device it was measured on.
    pub device: DeviceId,
}

impl TuneResult {
    /// Reads a result (or checkpoint) file, refusing one of another version.
    pub fn load(path: &Path) -> Result<TuneResult> {
        let bad = |reason: String| Error::BadResult { path: path.to_path_buf(), reason };
        let text = fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a tune result (bad JSON: {e})")))?;
        match v.get("version").and_then(|v| v.as_u64()) {
            Some(n) if n == FORMAT_VERSION as u64 => {}
            Some(n) => {
                return Err(bad(format!(
                    "written by tune format {n}, this is {FORMAT_VERSION}: run the sweep again with this ioshare"
                )))
            }
            None => return Err(bad("not a tune result (no version)".into())),
        }
        serde_json::from_value(v).map_err(|e| bad(format!("not a tune result: {e}")))
    }

    /// Writes the result atomically: a temporary file beside `path`, synced, renamed over it.
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |what: &str, source| Error::Io { what: format!("{what} '{}'", path.display()), source };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "tune".into());
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let text = serde_json::to_string_pretty(self).expect("a result serialises");
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io("cannot write the result", e)
        })
    }

    /// The points of `other` (same device, same settings but the grid) added to these; a vrate both
    /// measured keeps both points.
    pub fn merge(mut self, other: TuneResult, other_path: &Path) -> Result<TuneResult> {
        let bad = |reason: String| Error::BadResult { path: other_path.to_path_buf(), reason };
        if let Some(why) = self.device.mismatch(&other.device) {
            return Err(bad(format!("cannot merge: {why}")));
        }
        if let Some(why) = self.settings.mismatch(&other.settings) {
            return Err(bad(format!("cannot merge: {why}")));
        }
        self.points.extend(other.points);
        self.points.sort_by(|a, b| a.vrate_pct.total_cmp(&b.vrate_pct));
        self.measured_at = self.measured_at.max(other.measured_at);
        self.notes.push(format!("merged with a sweep of grid {:?}", other.settings.grid));
        Ok(self)
    }

    /// The fits and solutions of the points so far.
    pub fn solutions(&self, target_p99_us: Option<u64>) -> Solved {
        match &self.from_trace {
            Some(source) => from_trace::solve(self, source, target_p99_us),
            None => solve::solve(self, target_p99_us),
        }
    }

    /// The fitted latency against vrate the agent's drift check compares with (a sweep's `lat-p99`,
    /// the tenant's p99 beside the antagonist; a trace's `lat`, the median of the periods' mean read
    /// latency), and the solution's vrate on its axis; `None` without such a fit or solution.
    pub fn latency_curve(&self, solution: &str) -> Option<(Fit, f64)> {
        let solved = self.solutions(None);
        let name = if self.from_trace.is_some() { "lat" } else { "lat-p99" };
        let fit = solved.series.iter().find(|s| s.name == name)?.fit?;
        let vrate = solved.solutions.iter().find(|s| s.name == solution)?.vrate_pct;
        Some((fit, vrate))
    }

    /// The solution called `name` (`None`: [`DEFAULT_SOLUTION`]) as lines to apply; an error naming
    /// the solutions there are when it has none by that name.
    pub fn solution(&self, name: Option<&str>) -> Result<Applied> {
        let name = name.unwrap_or(DEFAULT_SOLUTION);
        let solved = self.solutions(None);
        let found: Option<&Solution> = solved.solutions.iter().find(|s| s.name == name);
        let Some(s) = found else {
            let names: Vec<&str> = solved.solutions.iter().map(|s| s.name.as_str()).collect();
            return Err(Error::InvalidOptions(format!(
                "the tune result has no solution '{name}': it has {}",
                if names.is_empty() { "none (too few points)".to_string() } else { names.join(", ") }
            )));
        };
        Ok(Applied {
            name: s.name.clone(),
            model_line: s.model_line.clone(),
            qos_line: s.qos_line.clone(),
            measured_at: self.measured_at,
            device: self.device.clone(),
        })
    }
}
