//! The device's latency verdicts for a period, from its own counters (`/sys/block/X/stat`).
//!
//! The kernel's iocost judges each completion against the target; the counters give only the sum of
//! the period's latencies per direction. The agent takes their mean, net of the average IO's size
//! cost (as iocost judges latency net of size), and assumes an exponential distribution around it:
//! the share of IOs later than the target `t` is then `exp(-t / mean)`. So the planner sees a
//! missed-ppm that rises smoothly with the mean instead of all-or-nothing. Where eBPF histograms are
//! available (observe), they would give the real percentile. Device-slot waits are not visible in
//! the counters: rq-wait is reported as zero.

use ioshare_core::iocost::model::VTIME_PER_NSEC;
use ioshare_core::{CostModel, Op, QosParams};
use ioshare_host::DiskStats;
use serde::Serialize;

/// A period's verdicts, [read, write].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Verdicts {
    /// Completions within the target.
    pub met: [u64; 2],
    /// Completions later than the target.
    pub missed: [u64; 2],
    /// Mean latency net of size cost, µs (0 without completions).
    pub mean_us: [f64; 2],
}

impl Verdicts {
    /// Whether each direction missed no more than its percentile in `qos` lets miss (a direction
    /// without a target always does).
    pub fn met_targets(&self, qos: &QosParams) -> bool {
        const MILLION: u64 = 1_000_000;
        [qos.rppm, qos.wppm].iter().enumerate().all(|(rw, &ppm)| {
            let judged = self.met[rw] + self.missed[rw];
            ppm == 0 || self.missed[rw] * MILLION <= judged * (MILLION - u64::from(ppm))
        })
    }
}

/// The verdicts for the counters accumulated over a period (`delta`).
pub fn verdicts<M: CostModel>(delta: &DiskStats, model: &M, qos: &QosParams) -> Verdicts {
    let mut v = Verdicts::default();
    for op in [Op::Read, Op::Write] {
        let rw = op.index();
        let ios = delta.ios[rw];
        if ios == 0 {
            continue;
        }
        let mean_us = delta.ticks_ms[rw] as f64 * 1000.0 / ios as f64;
        let avg_len = (delta.sectors[rw] * 512 / ios).min(u64::from(u32::MAX)) as u32;
        let size_us = model.size_cost(op, avg_len) as f64 / VTIME_PER_NSEC as f64 / 1000.0;
        let net = (mean_us - size_us).max(0.0);
        let target = if rw == 0 { qos.rlat_us } else { qos.wlat_us } as f64;
        let missed_share = if net <= 0.0 { 0.0 } else { (-target / net).exp() };
        let missed = (ios as f64 * missed_share).round() as u64;
        v.met[rw] = ios - missed.min(ios);
        v.missed[rw] = missed.min(ios);
        v.mean_us[rw] = net;
    }
    v
}

#[cfg(test)]
mod tests {
    use ioshare_core::{LinearModel, ModelParams};

    use super::*;

    #[test]
    fn missed_share_follows_the_mean() {
        let model = LinearModel::new(ModelParams::SSD_DFL);
        let qos = QosParams { rppm: 950_000, rlat_us: 1000, ..QosParams::default() };
        let d = |ticks_ms| DiskStats {
            ios: [1000, 0],
            sectors: [8000, 0],
            ticks_ms: [ticks_ms, 0],
            ..DiskStats::default()
        };
        // Mean 1 ms (net ~0.99 ms) vs a 1 ms target: e^-1 ≈ 37% late.
        let v = verdicts(&d(1000), &model, &qos);
        assert!((360..=375).contains(&v.missed[0]), "{v:?}");
        assert_eq!(v.met[0] + v.missed[0], 1000);
        // A fast device: hardly any late.
        assert!(verdicts(&d(100), &model, &qos).missed[0] < 1);
        // Nothing done: nothing judged.
        assert_eq!(verdicts(&DiskStats::default(), &model, &qos), Verdicts::default());
        // p95: 5% may miss.
        let judged = |met, missed| Verdicts { met: [met, 0], missed: [missed, 0], mean_us: [0.0; 2] };
        assert!(judged(950, 50).met_targets(&qos) && !judged(949, 51).met_targets(&qos));
        assert!(judged(0, 1000).met_targets(&QosParams { rppm: 0, ..qos }), "no target");
    }
}
