//! The plain data of a tune: the device, the settings, the uncontrolled baseline, the points, and
//! the whole result they make ([`TuneResult`]; reading, writing and solving it live in
//! [`crate::result`]); a result fitted from an agent trace instead of a sweep carries its
//! [`TraceSource`] (built by [`crate::from_trace`]).

use std::fs;
use std::path::Path;

use ioshare_core::{ModelParams, QosParams};
use serde::{Deserialize, Serialize};

use crate::grid::Grid;
use crate::stats::{LatTable, VrateDist};

/// Which device a result is for: what the lines name, and what identifies the device across runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceId {
    /// Kernel name of the disk the lines are for (`vda`, `loop3`, `nvme0n1`), if there is one.
    pub name: Option<String>,
    /// Its `MAJ:MIN`, if there is one.
    pub dev: Option<String>,
    /// What was measured: `file`, `block device`, `loop device over a file`.
    pub kind: String,
    /// The device model behind it (sysfs `device/model`, else the disk's name): what `--resume`
    /// and `--merge` compare, and what the hwdb fragment matches.
    pub model: String,
    /// Size of what was measured, bytes.
    pub size: u64,
}

impl DeviceId {
    /// The model of the disk behind `target` (for a file, or a loop device over one, the disk
    /// holding the file): sysfs `device/model`, else the disk's name; `unknown` without a disk.
    pub fn model_of(target: &Path) -> String {
        ioshare_engine::profile::disk::disk_of(target).map_or_else(
            || "unknown".into(),
            |d| {
                fs::read_to_string(Path::new("/sys/block").join(&d.name).join("device/model"))
                    .map(|m| m.trim().to_string())
                    .ok()
                    .filter(|m| !m.is_empty())
                    .unwrap_or(d.name)
            },
        )
    }

    /// Why a result for `other` cannot continue or join one for `self`, if it cannot.
    pub fn mismatch(&self, other: &DeviceId) -> Option<String> {
        if self.model != other.model || self.kind != other.kind {
            return Some(format!(
                "it was measured on {} ({}), not on {} ({})",
                other.model, other.kind, self.model, self.kind
            ));
        }
        (self.size != other.size).then(|| format!("it was measured on {} bytes, not {}", other.size, self.size))
    }
}

/// Which IOCost ran a sweep's points ([`crate::runner`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlledBy {
    /// ioshare's IOCost inline, on the engine's issue path (the default; results from before the
    /// kernel runner existed are these).
    #[default]
    Inline,
    /// The kernel's IOCost (cgroup v2), each tenant in its own worker process and cgroup.
    Kernel,
}

impl ControlledBy {
    /// In words, for tables and messages.
    pub fn describe(self) -> &'static str {
        match self {
            ControlledBy::Inline => "ioshare's IOCost inline",
            ControlledBy::Kernel => "the kernel's IOCost (cgroup v2, --kernel)",
        }
    }

    /// Why points `other` ran cannot join points this one runs (resumed or merged), if they cannot.
    pub fn refuses(self, other: ControlledBy) -> Option<String> {
        (self != other).then(|| format!("its points ran under {}, not {}", other.describe(), self.describe()))
    }
}

/// What a sweep was asked to do: everything two results must share to be resumed or merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The vrate grid (with its dither).
    pub grid: Grid,
    /// Weights of the latency-sensitive tenant and the antagonist.
    pub weights: (u32, u32),
    /// The latency-sensitive tenant's p95 target, µs.
    pub lat_target_us: u64,
    /// Whether this was a `--quick` sweep.
    pub quick: bool,
    /// The cost model the points scale (`io.cost.model` line without the device).
    pub model_line: String,
    /// The latency targets the planning period comes from (`io.cost.qos` line without the device):
    /// the profile's suggestion, or the latency target at p95.
    pub qos_line: String,
    /// Which IOCost ran the points.
    #[serde(default)]
    pub controller: ControlledBy,
}

impl Settings {
    /// The model.
    pub fn model(&self) -> ModelParams {
        self.model_line.parse::<ioshare_core::ModelConfig>().map(|c| c.params).unwrap_or(ModelParams::SSD_DFL)
    }

    /// The QoS the planning period comes from.
    pub fn qos(&self) -> QosParams {
        self.qos_line.parse::<ioshare_core::QosConfig>().map(|c| c.params).unwrap_or_default()
    }

    /// Why `other`'s points cannot join these, if they cannot (the grid may differ).
    pub fn mismatch(&self, other: &Settings) -> Option<String> {
        if self.weights != other.weights {
            return Some(format!(
                "its weights are {}:{}, not {}:{}",
                other.weights.0, other.weights.1, self.weights.0, self.weights.1
            ));
        }
        if self.lat_target_us != other.lat_target_us {
            return Some(format!("its latency target is {} us, not {} us", other.lat_target_us, self.lat_target_us));
        }
        if let Some(why) = self.controller.refuses(other.controller) {
            return Some(why);
        }
        (self.model_line != other.model_line).then(|| "it scales another cost model".to_string())
    }
}

/// The uncontrolled reference (run 0, no controller).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The most random 4 KiB reads per second the latency-sensitive tenant does within its target
    /// alone, uncontrolled.
    pub mof_iops: f64,
    /// The rate the isolation runs ask for: 80% of its weight share of `mof_iops`.
    pub asked_iops: f64,
    /// Its per-second latency at `asked_iops` alone, µs.
    pub lat: LatTable,
    /// The antagonist alone, uncontrolled: bytes per second.
    pub antagonist_bw: f64,
    /// The antagonist alone: IOs per second.
    pub antagonist_iops: f64,
}

/// One vrate point of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The pinned vrate (min = max), percent.
    pub vrate_pct: f64,
    /// MOF: the latency-sensitive tenant's most IOPS within its target, alone.
    pub mof_iops: f64,
    /// aMOF: the same beside the antagonist, with isolation ≥ [`crate::point::PROTECTED`] (the protected capacity).
    pub amof_iops: f64,
    /// Isolation at the baseline's asked rate beside the antagonist: the 5th percentile of the
    /// per-sample achieved ÷ asked.
    pub isolation: f64,
    /// Mean of the per-sample achieved ÷ asked.
    pub isolation_mean: f64,
    /// The tenant's p99 over the isolation run, µs.
    pub lat_p99_us: f64,
    /// Latency impact: mean and deviation of (per-sample p90 − baseline p90) ÷ baseline p90 (the
    /// per-sample p99 of 0.1 s holds a few IOs: too noisy to compare).
    pub lat_impact: (f64, f64),
    /// The antagonist's bytes per second in the isolation run ÷ alone uncontrolled.
    pub work_conserved: f64,
    /// The antagonist's p99 in the isolation run, µs (its writes and reads together).
    pub antagonist_p99_us: f64,
    /// vrate over the isolation run's samples after warm-up, percent.
    pub vrate: VrateDist,
    /// The tenant's per-sample latency in the isolation run.
    pub lat: LatTable,
    /// How long the point took, seconds.
    pub took_s: f64,
    /// The aMOF bisection's runs, in order (none in results of earlier builds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amof_trials: Vec<Trial>,
}

/// One bisection run: the rate asked and whether it passed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The tenant's asked rate, IOPS.
    pub iops: f64,
    /// Whether the run met the criterion.
    pub passed: bool,
}

/// Version of the result format and of the method; a file of another version is refused.
pub const FORMAT_VERSION: u32 = 1;

/// A whole tune: device, settings, baseline and points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneResult {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// When the sweep started, seconds since the Unix epoch.
    pub measured_at: u64,
    /// The device.
    pub device: DeviceId,
    /// What was asked.
    pub settings: Settings,
    /// The uncontrolled reference.
    pub baseline: Baseline,
    /// The finished points, lowest vrate first.
    pub points: Vec<Point>,
    /// Remarks (the profile's notes, what the sweep skipped).
    pub notes: Vec<String>,
    /// Set when the result was fitted from an agent trace (`--from-trace`), not swept: then
    /// `points` and `baseline` are empty and the series are the trace's vrate bins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_trace: Option<TraceSource>,
}

/// The agent trace a result was fitted from ([`crate::from_trace`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSource {
    /// The trace file, as given.
    pub trace: String,
    /// The device whose periods were read.
    pub device: String,
    /// First and last period's time, seconds since the agent started.
    pub span_s: (f64, f64),
    /// The device's periods in the trace.
    pub periods: usize,
    /// Those that count (busy, with reads completed).
    pub informative: usize,
    /// The vrate bins with enough informative periods, lowest first.
    pub bins: Vec<TraceBin>,
}

/// The informative periods of one vrate bin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceBin {
    /// Mean vrate of its periods, percent.
    pub vrate_pct: f64,
    /// Its periods.
    pub periods: usize,
    /// IOs per second the cgroups completed over them.
    pub iops: f64,
    /// Mean work done, percent of the model's capacity.
    pub delivered_pct: f64,
    /// Median of the periods' mean read latency (net of size), µs.
    pub lat_p50_us: f64,
    /// 99th percentile of the same, µs.
    pub lat_p99_us: f64,
}

/// `2026-11-28 17:50 UTC` from seconds since the epoch.
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02} UTC")
}
