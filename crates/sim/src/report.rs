//! What a run measured: per group throughput, share of the device and latency; device utilisation
//! and vrate; time series; memory pressure. Printable as a table, serialisable as JSON.

use std::fmt::Write as _;

use serde::Serialize;

/// Latency summary, µs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// One interval of a group's time series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupPoint {
    /// End of the interval, s.
    pub t_s: f64,
    /// IOs completed per second in the interval.
    pub iops: f64,
    /// Bytes completed per second in the interval.
    pub bw_bytes: f64,
    /// Median latency in the interval, µs (0 without completions).
    pub lat_p50_us: f64,
    /// 99th percentile latency in the interval, µs.
    pub lat_p99_us: f64,
    /// 90th percentile of the device latency (release to completion) in the interval, µs.
    pub dev_lat_p90_us: f64,
}

/// Results of one group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupReport {
    /// Group path.
    pub path: String,
    /// Weight at the end of the run.
    pub weight: u32,
    /// IOs completed (after the warm-up).
    pub ios: u64,
    /// IOs completed per second.
    pub iops: f64,
    /// Bytes completed per second.
    pub bw_bytes: f64,
    /// Fraction of all device cost issued in the run that this group's IO took. The cost of an IO is
    /// the device time it truly occupies, as the DEVICE computes it — for the linear device, its own
    /// (true) linear model, not the controller's — so the share is exact whatever the controller
    /// believes. Swap-out IO charged to the root is counted in the total but in no group.
    pub cost_share: f64,
    /// Latency from submission (before any controller wait) to completion: what the job sees.
    pub lat_us: Latency,
    /// Latency from the controller's release to completion: what the device adds, and what IOCost's
    /// QoS targets judge (before subtracting the size cost).
    pub dev_lat_us: Latency,
    /// Latency quantiles for distribution plots: `[quantile, µs]`.
    pub lat_dist: Vec<[f64; 2]>,
    /// Latency histogram, `[upper_bound_us, count]` per non-empty bucket; buckets grow by 2^(1/4)
    /// from 1 µs (four per doubling), so shares above a bound can be read off directly.
    pub lat_hist: Vec<[f64; 2]>,
    /// Time the group's producers were held back by controller delays, µs.
    pub paused_us: f64,
    /// Largest debt the controller reported for the group, µs.
    pub max_debt_us: u64,
    /// Largest producer delay the controller reported for the group, µs.
    pub max_delay_us: u64,
    /// Time the controller reported the group had IO waiting, µs (end of run).
    pub wait_us: u64,
    /// The group's hierarchical share by active weights at the end, 0..1 (0 without a tree).
    pub hweight_active: f64,
    /// The group's hierarchical share after donation at the end, 0..1.
    pub hweight_inuse: f64,
    /// IOs marked `must_issue` that the group submitted.
    pub must_issue_ios: u64,
    /// Time producers waited for memory reclaim, µs (summed over producers).
    pub mem_stall_us: f64,
    /// Open-loop arrivals dropped at the in-flight cap.
    pub dropped: u64,
    /// Time series.
    pub series: Vec<GroupPoint>,
}

/// One interval of the device's time series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DevicePoint {
    /// End of the interval, s.
    pub t_s: f64,
    /// Utilisation in the interval.
    pub utilization: f64,
    /// Controller vrate at the end of the interval, percent.
    pub vrate_pct: f64,
    /// IOCost's device-depth limit at the end of the interval (0 without the option).
    pub depth_limit: u32,
}

/// Device-wide results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceReport {
    /// The device model.
    pub model: String,
    /// Parallel servers.
    pub servers: u32,
    /// Busy server time / (servers × measured duration).
    pub utilization: f64,
    /// Controller vrate at the end, percent (`stats().device.vrate_pct`).
    pub vrate_pct: f64,
    /// Time-average of vrate over the measured duration, percent.
    pub vrate_pct_mean: f64,
    /// Time series.
    pub series: Vec<DevicePoint>,
}

/// Memory-pressure results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryReport {
    /// How swap IO was charged.
    pub charge: crate::memory::SwapCharge,
    /// Swap-out writes completed.
    pub swap_ios: u64,
    /// Fraction of device cost taken by swap-out IO.
    pub swap_cost_share: f64,
}

/// Facts about the run itself. Only `wall_sec` and `ios_per_wall_sec` depend on the machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimStats {
    /// IOs completed in the whole run (warm-up and swap included).
    pub ios: u64,
    /// IOs submitted in the whole run (to the controller, or for root swap to the device).
    pub submitted: u64,
    /// IOs submitted but not completed at the end (held by the controller or in the device).
    pub in_flight: u64,
    /// Events processed.
    pub events: u64,
    /// Wall-clock time of the run, s (absent in deterministic output).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_sec: Option<f64>,
    /// Simulated IOs per second of wall-clock time (absent in deterministic output).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ios_per_wall_sec: Option<f64>,
}

/// A result of the source beside ours.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// What is compared.
    pub what: String,
    /// The source's figure.
    pub source: String,
    /// Ours.
    pub ours: String,
    /// Whether ours matches within the stated tolerance.
    pub ok: bool,
}

/// Everything one run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Controller name.
    pub controller: String,
    /// Seed.
    pub seed: u64,
    /// Measured duration (after the warm-up), s.
    pub seconds: f64,
    /// Per group, in scenario order.
    pub groups: Vec<GroupReport>,
    /// The device.
    pub device: DeviceReport,
    /// Events the controller logged (`ioshare_core::Event`), counted by kind.
    pub controller_events: std::collections::BTreeMap<String, u64>,
    /// Memory pressure, when the scenario has a memory pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryReport>,
    /// The run itself.
    pub sim: SimStats,
    /// Source figures beside ours (built-in reproductions).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<Comparison>,
}

impl Report {
    /// The group at `path`. Panics when the scenario has no such group (a caller's bug).
    pub fn group(&self, path: &str) -> &GroupReport {
        self.groups.iter().find(|g| g.path == path).unwrap_or_else(|| panic!("no group '{path}' in the report"))
    }

    /// The report without the wall-clock fields: byte-identical JSON for the same scenario and seed.
    pub fn deterministic(mut self) -> Report {
        self.sim.wall_sec = None;
        self.sim.ios_per_wall_sec = None;
        self
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialise")
    }

    /// A readable table.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} — controller {}, {:.1} s measured, seed {}, device {}",
            self.scenario, self.controller, self.seconds, self.seed, self.device.model
        );
        let _ = writeln!(
            s,
            "{:<20} {:>6} {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "group", "weight", "iops", "MB/s", "cost%", "mean µs", "p50 µs", "p90 µs", "p99 µs", "max µs"
        );
        for g in &self.groups {
            let l = &g.lat_us;
            let _ = writeln!(
                s,
                "{:<20} {:>6} {:>10.0} {:>10.1} {:>7.2} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
                g.path,
                g.weight,
                g.iops,
                g.bw_bytes / 1e6,
                g.cost_share * 100.0,
                l.mean,
                l.p50,
                l.p90,
                l.p99,
                l.max
            );
        }
        let _ = writeln!(
            s,
            "device utilisation {:.1}%, vrate {:.1}% (mean {:.1}%)",
            self.device.utilization * 100.0,
            self.device.vrate_pct,
            self.device.vrate_pct_mean
        );
        let extra: Vec<_> = self
            .groups
            .iter()
            .filter(|g| g.max_debt_us > 0 || g.paused_us > 0.0 || g.mem_stall_us > 0.0 || g.dropped > 0)
            .collect();
        for g in extra {
            let _ = writeln!(
                s,
                "  {}: max debt {} µs, max delay {} µs, paused {:.0} µs, reclaim stalls {:.0} µs, dropped {}",
                g.path, g.max_debt_us, g.max_delay_us, g.paused_us, g.mem_stall_us, g.dropped
            );
        }
        if let Some(m) = &self.memory {
            let _ = writeln!(
                s,
                "swap charged to {:?}: {} swap-out writes, {:.1}% of device cost",
                m.charge,
                m.swap_ios,
                m.swap_cost_share * 100.0
            );
        }
        if let (Some(wall), Some(rate)) = (self.sim.wall_sec, self.sim.ios_per_wall_sec) {
            let _ = writeln!(s, "simulated {} IOs in {:.3} s wall ({:.2} M IOs/s)", self.sim.ios, wall, rate / 1e6);
        }
        if !self.comparisons.is_empty() {
            let _ = writeln!(s, "{:<44} {:>18} {:>18}  verdict", "compared with the source", "source", "ours");
            for c in &self.comparisons {
                let verdict = if c.ok { "ok" } else { "DIFFERS" };
                let _ = writeln!(s, "{:<44} {:>18} {:>18}  {verdict}", c.what, c.source, c.ours);
            }
        }
        s
    }
}
