//! A judged run: who controlled the IO ([`Side`]), what was measured, and the scenario's criterion
//! applied to it ([`Verdict`]). Plain data every other module of the suite shares; it imports none
//! of them.

use ioshare_engine::report::RunReport;
use serde::Serialize;

/// Whether a run passed its scenario's criterion, and the number behind it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Verdict {
    /// Pass or fail.
    pub pass: bool,
    /// The measured figure the criterion judges.
    pub value: f64,
    /// One line: the figure, the target, and what it means.
    pub summary: String,
}

impl Verdict {
    /// The verdict of a scenario interrupted before the controllers it judges had run.
    pub fn not_judged() -> Verdict {
        Verdict { pass: false, value: f64::NAN, summary: NOT_JUDGED.into() }
    }

    /// A scenario's verdict from its subjects' runs: passes when every judged subject passes; the value
    /// is the first subject's; the summary names each subject with its own. `None` when no subject
    /// was judged.
    pub fn of_subjects(subjects: &[&RunEntry]) -> Option<Verdict> {
        let judged: Vec<(&str, &Verdict)> =
            subjects.iter().filter_map(|r| Some((r.report.controller.as_str(), r.verdict.as_ref()?))).collect();
        let (_, first) = judged.first()?;
        Some(Verdict {
            pass: judged.iter().all(|(_, v)| v.pass),
            value: first.value,
            summary: judged.iter().map(|(name, v)| format!("{name}: {}", v.summary)).collect::<Vec<_>>().join("; "),
        })
    }

    /// `PASS`, `FAIL`, or `INTERRUPTED` for a scenario that was never judged.
    pub fn label(&self) -> &'static str {
        match (self.pass, self.summary == NOT_JUDGED) {
            (true, _) => "PASS",
            (false, true) => "INTERRUPTED",
            (false, false) => "FAIL",
        }
    }
}

const NOT_JUDGED: &str = "not judged: interrupted before its controllers ran";

/// Who controlled the IO of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// One of ioshare's controllers, inline in the engine.
    Ioshare,
    /// The kernel (cgroup settings on a loop device); each tenant in its own process.
    Kernel,
    /// A reference run the others are judged against (solo tenant, baseline).
    Reference,
}

impl Side {
    /// Lower-case name, as in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Side::Ioshare => "ioshare",
            Side::Kernel => "kernel",
            Side::Reference => "reference",
        }
    }
}

/// One run of a scenario.
#[derive(Clone, Debug, Serialize)]
pub struct RunEntry {
    /// Who controlled the IO.
    pub side: Side,
    /// What was measured (controller name, tenants, device, series).
    #[serde(flatten)]
    pub report: RunReport,
    /// The scenario's criterion applied to this run (`None` for reference runs).
    pub verdict: Option<Verdict>,
}
