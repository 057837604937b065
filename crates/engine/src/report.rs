//! What a run measured, as plain data: serialisable for `--json` and for the bench's worker processes.

use serde::{Deserialize, Serialize};

/// Latency percentiles of a tenant, µs, from its HDR histogram.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile (the kernel's usual latency target percentile for SSDs).
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// One sample interval (1 s by default) of a tenant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantSample {
    /// End of the interval, seconds since the run started.
    pub t_s: f64,
    /// IOs completed per second in the interval.
    pub iops: f64,
    /// Bytes per second in the interval.
    pub bw_bytes: f64,
    /// Median latency in the interval, µs.
    pub p50_us: f64,
    /// 90th percentile latency in the interval, µs.
    #[serde(default)]
    pub p90_us: f64,
    /// 99th percentile latency in the interval, µs.
    pub p99_us: f64,
    /// Largest latency in the interval, µs.
    #[serde(default)]
    pub max_us: f64,
}

/// A tenant's results over the measurement window (the run minus its warm-up).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantReport {
    /// Tenant name.
    pub name: String,
    /// Controller group path.
    pub group: String,
    /// Weight.
    pub weight: u32,
    /// IOs completed in the window.
    pub ios: u64,
    /// IOs per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Latency from the moment the job produced the IO (before the controller) to its completion.
    pub lat_us: LatencyUs,
    /// Per-interval time series over the whole run.
    pub series: Vec<TenantSample>,
}

impl TenantReport {
    /// Mean IOPS over the samples that lie wholly in `[from, to]` seconds of the run (NaN if none
    /// does).
    pub fn window_iops(&self, from: f64, to: f64) -> f64 {
        let (mut ios, mut secs) = (0.0, 0.0);
        for (s, len) in self.window_spans(from, to) {
            ios += s.iops * len;
            secs += len;
        }
        if secs > 0.0 {
            ios / secs
        } else {
            f64::NAN
        }
    }

    /// The samples that lie wholly in `[from, to]` seconds of the run (1 µs of slack for rounding).
    pub fn window(&self, from: f64, to: f64) -> impl Iterator<Item = &TenantSample> {
        self.window_spans(from, to).map(|(s, _)| s)
    }

    /// [`TenantReport::window`]'s samples with their lengths, s.
    fn window_spans(&self, from: f64, to: f64) -> impl Iterator<Item = (&TenantSample, f64)> {
        whole_spans(&self.series, |s| s.t_s, from, to)
    }
}

/// The samples of `series` (each ending at `t_s` seconds, starting where the one before ended, the
/// first at 0) that lie wholly in `[from, to]` (1 µs of slack for rounding), with their lengths, s.
fn whole_spans<T>(series: &[T], t_s: fn(&T) -> f64, from: f64, to: f64) -> impl Iterator<Item = (&T, f64)> {
    let starts = std::iter::once(0.0).chain(series.iter().map(t_s));
    series
        .iter()
        .zip(starts)
        .filter(move |(s, start)| *start >= from - 1e-6 && t_s(s) <= to + 1e-6)
        .map(move |(s, start)| (s, t_s(s) - start))
}

/// Device-side figures over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// All tenants' IOPS.
    pub iops: f64,
    /// All tenants' bytes per second.
    pub bw_bytes: f64,
    /// Share of the window with at least one IO in flight, percent (iostat's %util).
    pub busy_pct: f64,
    /// Mean number of IOs in flight on the device.
    pub avg_inflight: f64,
}

/// Where the engine thread's CPU time went over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    /// User time, seconds.
    pub user_s: f64,
    /// System time (io_uring submission and completion), seconds.
    pub sys_s: f64,
    /// CPU time per completed IO, ns.
    pub ns_per_io: f64,
}

/// One group in a controller sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupSample {
    /// Group path.
    pub path: String,
    /// Hierarchical share by active weights, 0..1.
    pub hweight_active: f64,
    /// Hierarchical share after donation, 0..1.
    pub hweight_inuse: f64,
    /// Outstanding debt, µs.
    pub debt_us: u64,
    /// Producer delay, µs.
    pub delay_us: u64,
    /// IOs the controller holds.
    pub queued: u64,
    /// IOCost's budget for the group: vnow − its vtime, µs of device time at vrate 100%.
    #[serde(default)]
    pub vbudget_us: i64,
}

/// The controller's state at the end of one sample interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ControllerSample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// Virtual-time rate, percent of the cost model.
    pub vrate_pct: f64,
    /// Busy level.
    pub busy_level: i32,
    /// Missed latency targets in the last period, ppm, [read, write].
    pub missed_ppm: [u32; 2],
    /// Time IOs waited for a device slot in the last period, percent of the period.
    pub rq_wait_pct: u32,
    /// IOCost's device-depth limit (its option beyond the kernel), 0 when not in use.
    #[serde(default)]
    pub depth_limit: u32,
    /// Mean IOs on the device over the interval; 0 where the engine does not see the device's queue
    /// (the kernel peers, whose IO waits in the kernel's scheduler).
    #[serde(default)]
    pub inflight: f64,
    /// Per group.
    pub groups: Vec<GroupSample>,
}

/// Everything one run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Who controlled the IO (`none`, `iocost`, `bfq`, ...).
    pub controller: String,
    /// Length of the measurement window, seconds.
    pub window_s: f64,
    /// True when the run was cut short by an interrupt.
    pub interrupted: bool,
    /// Per tenant.
    pub tenants: Vec<TenantReport>,
    /// Device totals.
    pub device: DeviceReport,
    /// Engine CPU use.
    pub cpu: CpuReport,
    /// Controller state over time (empty when the kernel controls the IO).
    pub controller_series: Vec<ControllerSample>,
}

impl RunReport {
    /// Mean IOs on the device over the controller samples that lie wholly in `[from, to]` seconds
    /// of the run; `None` where none does or none recorded it ([`ControllerSample::inflight`]).
    pub fn window_inflight(&self, from: f64, to: f64) -> Option<f64> {
        let (mut weighted, mut secs) = (0.0, 0.0);
        for (s, len) in whole_spans(&self.controller_series, |s| s.t_s, from, to) {
            weighted += s.inflight * len;
            secs += len;
        }
        (secs > 0.0 && weighted > 0.0).then(|| weighted / secs)
    }
}
