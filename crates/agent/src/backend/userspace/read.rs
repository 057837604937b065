//! Step 1, read: what the device and each tracked cgroup did since the last period.
//!
//! The device's counters come first (`/sys/block/X/stat`): whether it was busy decides, in the
//! classification, who counts as held back. Then each tracked cgroup's IO counters (v1
//! `blkio.throttle.io_serviced_recursive` / `io_service_bytes_recursive`, v2 `io.stat`; none are read
//! in a period without IO on the device, [`super::counters`]) are priced at the cost model — counters
//! do not say which IOs were sequential, so each cgroup's sequential share comes from the eBPF
//! observer ([`super::io_mix`]; all random where it cannot run: a sequential stream over-charged,
//! never under-charged).

use ioshare_core::{Nanos, Op};
use std::collections::VecDeque;
use std::path::Path;

use ioshare_host::DiskStats;

use super::counters::{DeviceQuiet, Reading};
use super::device::DevicePlanner;
use super::window::{median, remember, FOLLOW_WINDOW};
use crate::backend::throttle::DirUsage;
use crate::cgroups::hierarchy::Hierarchy;

/// Share of a period the device must have had IO in flight to count as busy.
pub(crate) const DEVICE_BUSY: f64 = 0.9;

/// Mean number of IOs in flight over a period from which the device counts as busy whatever its
/// busy time says: IOs are queued at the device, not at a limit (a loop device's `io_ticks` are
/// sampled at IO start and end, and showed it 30–80% busy with 64 IOs in flight).
pub(crate) const DEVICE_QUEUED: f64 = 4.0;

/// How much the device's mean latency must exceed its recent median for a period to count as one
/// in which it slowed ([`device_slowed`]).
pub(crate) const SLOWED_LATENCY: f64 = 1.3;

/// Whether the device slowed this period: its mean latency (`lat_ms`) at least [`SLOWED_LATENCY`]
/// times the median of the last periods' (`recent`). A group that competed last period and still
/// does IO then keeps competing, whatever its part of the work: the device held it back, its demand
/// did not fall (a group whose demand falls lowers the device's latency).
pub(crate) fn device_slowed(lat_ms: f64, recent: &VecDeque<f64>) -> bool {
    if recent.len() < FOLLOW_WINDOW / 2 {
        return false;
    }
    lat_ms >= SLOWED_LATENCY * median(recent.iter().copied())
}

/// What the device did over one period.
#[derive(Clone, Copy, Debug)]
pub(super) struct DevicePeriod {
    /// How long the period really was, s.
    pub elapsed_s: f64,
    /// The device's counters over it (`None`: not readable, or the first period).
    pub delta: Option<DiskStats>,
    /// Whether nothing it shows moved.
    pub quiet: DeviceQuiet,
    /// Mean IOs in flight: the completed IOs' summed latencies over the period's length.
    pub inflight: f64,
    /// The completed IOs' mean latency, ms (0 without IO).
    pub lat_ms: f64,
    /// Busy: IOs queued at it ([`DEVICE_QUEUED`]) or busy time ([`DEVICE_BUSY`]).
    pub busy: bool,
    /// Busy and slower than lately ([`device_slowed`]).
    pub slowed: bool,
}

impl DevicePlanner {
    /// The device's counters since the last period (and the period's length).
    pub(super) fn read_device(&mut self, now: Nanos, sys_block: &Path) -> DevicePeriod {
        let elapsed_s = self.last_plan.map_or(self.period.as_secs_f64(), |t| now.saturating_sub(t) as f64 / 1e9);
        self.last_plan = Some(now);
        self.last_elapsed_s = elapsed_s;
        let disk = DiskStats::read(sys_block, &self.cfg.device.name).ok();
        let delta = match (disk, self.last_disk) {
            (Some(d), Some(last)) => Some(d.since(&last)),
            _ => None,
        };
        let quiet = DeviceQuiet::judge(self.last_disk.as_ref(), delta.as_ref());
        self.quiet = quiet;
        if disk.is_some() {
            self.last_disk = disk;
        }
        let ticks_ms = delta.map_or(0, |d| d.ticks_ms[0] + d.ticks_ms[1]) as f64;
        let inflight = ticks_ms / (elapsed_s * 1000.0);
        let lat_ms = ticks_ms / delta.map_or(1, |d| (d.ios[0] + d.ios[1]).max(1)) as f64;
        let busy = inflight >= DEVICE_QUEUED
            || delta.is_some_and(|d| d.io_ticks_ms as f64 >= DEVICE_BUSY * elapsed_s * 1000.0);
        DevicePeriod { elapsed_s, delta, quiet, inflight, lat_ms, busy, slowed: false }
    }

    /// Judges the device's latency against its recent median and remembers it (a period with IO).
    pub(super) fn judge_latency(&mut self, period: &mut DevicePeriod) {
        period.slowed = period.busy && device_slowed(period.lat_ms, &self.latencies);
        if period.lat_ms > 0.0 {
            remember(&mut self.latencies, period.lat_ms);
        }
    }

    /// Each present cgroup's usage since the last period, priced; a cgroup that vanished is marked
    /// absent (not an error). Returns what they did together (absolute cost).
    pub(super) fn read_groups(&mut self, h: &Hierarchy, paths: &[String], quiet: DeviceQuiet) -> u64 {
        let dev = self.cfg.device.dev;
        let model = *self.ctl.model();
        let mut delivered = 0;
        for rel in paths {
            let t = self.groups.get_mut(rel).expect("tracked");
            t.usage = Default::default();
            if !t.present {
                continue;
            }
            match t.counters.read(h, rel, dev, quiet) {
                Reading::Gone => {
                    tracing::info!(cgroup = %rel, dev = %dev, "cgroup gone");
                    t.present = false;
                    continue;
                }
                Reading::Skipped | Reading::First => {}
                Reading::Since { ios, bytes } => {
                    for (op, i, b) in [(Op::Read, ios.read, bytes.read), (Op::Write, ios.write, bytes.write)] {
                        t.usage[op.index()] =
                            DirUsage { ios: i, bytes: b, cost: self.mix.charge(&model, rel, op, i, b) };
                    }
                }
            }
            delivered += t.usage[0].cost + t.usage[1].cost;
        }
        delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device slowed when its latency rose past 1.3 × its recent median; not judged on fewer
    /// than half a window.
    #[test]
    fn the_device_slowed_when_its_latency_rose_past_its_recent_median() {
        let recent: VecDeque<f64> = [1.0, 1.1, 0.9, 1.0, 5.0, 1.0].into_iter().collect();
        assert!(device_slowed(1.3, &recent), "1.3 × the median 1.0");
        assert!(!device_slowed(1.25, &recent), "within the noise");
        let few: VecDeque<f64> = [1.0, 1.0].into_iter().collect();
        assert!(!device_slowed(10.0, &few), "not judged on fewer than half a window");
    }
}
