//! A device's model and QoS from a tune result: `model = "tune:FILE"` or `"tune:FILE#SOLUTION"` (and
//! the same for `qos`) in `[[devices]]`.
//!
//! `ioshare tune` sweeps a device's vrate and writes a result file whose solutions are each an
//! `io.cost.model` and an `io.cost.qos` line; the agent takes one of them (by default
//! [`ioshare_tune::DEFAULT_SOLUTION`]) as the device's lines, checked like lines written by hand (a
//! line for another device is refused). A relative FILE is relative to the configuration file. With
//! `model` from a tune result and no `qos`, the solution's QoS line comes with it: a solution's model
//! and QoS were chosen together. Where they came from is kept ([`Tuned`]) for `agent check`.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Where a device's lines came from when a tune result gave them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Tuned {
    /// The tune result file.
    pub file: PathBuf,
    /// The solution taken.
    pub solution: String,
    /// When the sweep was measured, seconds since the Unix epoch.
    pub measured_at: u64,
}

/// A solution's lines and where they came from.
#[derive(Clone, Debug)]
pub struct TunedLines {
    /// The `io.cost.model` line.
    pub model_line: String,
    /// The `io.cost.qos` line.
    pub qos_line: String,
    /// Where they came from.
    pub source: Tuned,
}

/// The tune result a `model` or `qos` value names (`tune:FILE[#SOLUTION]`), if it names one: its
/// lines, FILE taken relative to `config_dir`; an error line naming what is wrong otherwise.
pub fn tuned_lines(value: &str, config_dir: &Path) -> Option<Result<TunedLines, String>> {
    let reference = value.trim().strip_prefix("tune:")?;
    let (file, solution) = match reference.split_once('#') {
        Some((file, solution)) => (file, Some(solution)),
        None => (reference, None),
    };
    if file.is_empty() {
        return Some(Err("'tune:' names no file: use tune:FILE or tune:FILE#SOLUTION".into()));
    }
    let file = config_dir.join(file);
    Some(
        ioshare_tune::TuneResult::load(&file)
            .and_then(|result| result.solution(solution))
            .map(|applied| TunedLines {
                model_line: applied.model_line,
                qos_line: applied.qos_line,
                source: Tuned { file, solution: applied.name, measured_at: applied.measured_at },
            })
            .map_err(|e| e.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tune_references_are_taken_and_a_bad_one_says_why() {
        let dir = tempfile::tempdir().unwrap();
        assert!(tuned_lines("ssd_dfl", dir.path()).is_none());
        assert!(tuned_lines("rpct=95 rlat=5000", dir.path()).is_none());
        let e = tuned_lines("tune:", dir.path()).unwrap().unwrap_err();
        assert!(e.contains("names no file"), "{e}");
        let e = tuned_lines("tune:missing.json#bandwidth", dir.path()).unwrap().unwrap_err();
        assert!(e.contains("missing.json") && e.contains("cannot read"), "{e}");
        std::fs::write(dir.path().join("not.json"), "{}").unwrap();
        let e = tuned_lines("tune:not.json", dir.path()).unwrap().unwrap_err();
        assert!(e.contains("not a tune result"), "{e}");
    }
}
