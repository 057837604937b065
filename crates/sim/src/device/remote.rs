//! Network block storage (cloud volumes): provisioned IOPS and throughput caps plus network latency.
//!
//! The volume admits IOs in order through a pacer: each IO counts `ceil(len / io_unit_kb)`
//! operations against the IOPS cap and its bytes against the throughput cap, and holds the pacer for
//! the longer of the two. It starts when the pacer reaches it (later than its arrival when the caps
//! are reached, which the controller sees as queueing) and completes one network round trip,
//! `latency_us`, later. Utilisation is the share of the provisioned capacity used.
//!
//! With a `burst` allowance the pacer is a leaky bucket like QEMU's throttle: the bucket holds the
//! operations admitted and not yet leaked at the cap's rate, and an IO starts as soon as the bucket
//! holds no more than `burst` — after a lull, up to `burst` operations go at once. (QEMU lets
//! `iops / 10` through this way when no `iops-total-max` is set: the lab guest's disk.)

use ioshare_core::Nanos;
use serde::Deserialize;

use super::common::{at_speed, DeviceModel, Request, Service};
use super::param::{positive, KeyError};

/// Parameters of a [`Remote`] volume.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSpec {
    /// Provisioned IOPS.
    pub iops: f64,
    /// Provisioned throughput, MB/s.
    pub mbps: f64,
    /// Round-trip latency of one IO, µs.
    pub latency_us: f64,
    /// Largest IO counted as one operation, KiB (cloud volumes count 256 KiB).
    #[serde(default = "default_unit")]
    pub io_unit_kb: u32,
    /// IOs the device accepts at once (its tags / NCQ depth); more wait in front of it, and the
    /// controller sees that wait as `started > released`. Default: 64.
    #[serde(default)]
    pub queue_depth: Option<u32>,
    /// Operations the pacer lets through at once after it fell behind (QEMU's throttle: a leaky
    /// bucket of `iops / 10` operations when no burst is configured); 0: none, every IO waits its
    /// turn.
    #[serde(default)]
    pub burst: f64,
}

fn default_unit() -> u32 {
    256
}

impl RemoteSpec {
    pub(crate) fn validate(&self) -> Result<(), KeyError> {
        positive("iops", self.iops)?;
        positive("mbps", self.mbps)?;
        positive("latency_us", self.latency_us)?;
        positive("io_unit_kb", self.io_unit_kb as f64)?;
        if !(self.burst >= 0.0 && self.burst.is_finite()) {
            return Err(KeyError { key: "burst".into(), msg: "must be 0 or more operations".into() });
        }
        Ok(())
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Remote {
    spec: RemoteSpec,
    /// When the bucket is empty again (the pacer's position): an IO may start once the bucket holds
    /// at most the burst allowance.
    pacer: Nanos,
}

impl Remote {
    /// A volume from its parameters.
    pub fn new(spec: &RemoteSpec) -> Self {
        Remote { spec: spec.clone(), pacer: 0 }
    }
}

impl DeviceModel for Remote {
    fn describe(&self) -> String {
        format!("remote ({} IOPS, {} MB/s, {} µs)", self.spec.iops, self.spec.mbps, self.spec.latency_us)
    }

    fn servers(&self) -> u32 {
        1
    }

    fn queue_depth(&self) -> u32 {
        self.spec.queue_depth.unwrap_or(64)
    }

    /// IOs hold the pacer, not a server: each starts when the pacer reaches it.
    fn holds_servers(&self) -> bool {
        false
    }

    fn serve(&mut self, now: Nanos, req: &Request, speed: f64) -> Service {
        let s = &self.spec;
        let ops = req.len.div_ceil(s.io_unit_kb * 1024).max(1) as f64;
        let hold = (ops * 1e9 / s.iops).max(req.len as f64 * 1e9 / (s.mbps * 1e6));
        let busy = at_speed(hold, speed);
        let burst_ns = (s.burst * 1e9 / s.iops).round() as Nanos;
        let start = self.pacer.saturating_sub(burst_ns).max(now);
        self.pacer = self.pacer.max(start) + busy;
        let done = start + busy + (s.latency_us * 1e3).round() as Nanos;
        Service { start, done, busy }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::common::Device;
    use ioshare_core::Op;

    #[test]
    fn caps_pace_ios_and_latency_is_added() {
        let spec =
            RemoteSpec { iops: 1000.0, mbps: 100.0, latency_us: 500.0, io_unit_kb: 256, queue_depth: None, burst: 0.0 };

        let mut d = Device::new(Remote::new(&spec));
        let r = |token, len| Request { token, group: 0, op: Op::Read, offset: 0, len };
        let a = d.arrive(0, r(0, 4096)).unwrap();
        assert_eq!((a.start, a.done), (0, 1_000_000 + 500_000));
        let b = d.arrive(0, r(1, 4096)).unwrap();
        assert_eq!(b.start, 1_000_000, "IOPS cap: one per ms");
        // 1 MiB: 4 operations (4 ms) but 10.5 ms of the 100 MB/s throughput cap.
        let c = d.arrive(0, r(2, 1 << 20)).unwrap();
        assert_eq!(c.busy, 10_485_760);
    }

    #[test]
    fn a_burst_allowance_lets_that_many_through_after_a_lull_then_paces() {
        let spec =
            RemoteSpec { iops: 1000.0, mbps: 1e5, latency_us: 1.0, io_unit_kb: 256, queue_depth: None, burst: 3.0 };
        let mut d = Device::new(Remote::new(&spec));
        let r = |token| Request { token, group: 0, op: Op::Read, offset: 0, len: 4096 };
        // Four at once: the bucket holds 0, 1, 2, 3 ops when each arrives — all within the allowance.
        let starts: Vec<Nanos> = (0..5).map(|t| d.arrive(0, r(t)).unwrap().start).collect();
        assert_eq!(starts, [0, 0, 0, 0, 1_000_000], "the fifth waits until one op has leaked");
        // Back to the cap's pace while the bucket stays full.
        assert_eq!(d.arrive(0, r(5)).unwrap().start, 2_000_000);
        // After 10 ms the bucket is empty again: a new burst.
        assert_eq!(d.arrive(20_000_000, r(6)).unwrap().start, 20_000_000);
        let bad = RemoteSpec { burst: -1.0, ..spec };
        assert_eq!(bad.validate().unwrap_err().key, "burst");
    }
}
