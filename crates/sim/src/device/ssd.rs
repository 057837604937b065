//! Flash device: parallel channels, a write buffer that absorbs bursts, and garbage collection that
//! slows the device once the buffer is full.
//!
//! An IO holds a channel for its access latency (`read_us`/`write_us`, in parallel across channels)
//! and then for its data transfer through the device's read or write data path at `read_mbps` or
//! `write_mbps` (large IOs are striped: one IO alone gets the whole bandwidth, many share it; reads
//! and writes do not wait for each other's transfers). Writes fill a buffer of `buffer_mb` that drains in the background at
//! `flush_mbps`. When a write does not fit, garbage collection starts: writes take `gc_write_factor`
//! times longer and reads `gc_read_factor` times longer. It stops as soon as the buffer has room
//! again, or — with `collapse = true`, the bursty "fast then collapse" behaviour of consumer drives —
//! only once the buffer has drained completely.

use ioshare_core::{Nanos, Op};
use serde::Deserialize;

use super::common::{at_speed, transfer_ns, DeviceModel, Request, Service};
use super::param::{positive, KeyError};

/// Parameters of an [`Ssd`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdSpec {
    /// Parallel channels (internal parallelism).
    pub channels: u32,
    /// Base latency of a read on one channel, µs.
    pub read_us: f64,
    /// Base latency of a write on one channel, µs.
    pub write_us: f64,
    /// Device read bandwidth, MB/s (10^6 bytes), shared by the channels.
    pub read_mbps: f64,
    /// Device write bandwidth, MB/s, shared by the channels.
    pub write_mbps: f64,
    /// Write buffer size, MB (0: no buffer, writes never trigger garbage collection).
    #[serde(default)]
    pub buffer_mb: f64,
    /// Background drain rate of the buffer, MB/s.
    #[serde(default)]
    pub flush_mbps: f64,
    /// Write slowdown while collecting garbage.
    #[serde(default = "one")]
    pub gc_write_factor: f64,
    /// Read slowdown while collecting garbage.
    #[serde(default = "one")]
    pub gc_read_factor: f64,
    /// Stay slow until the buffer is empty ("fast then collapse").
    #[serde(default)]
    pub collapse: bool,
    /// IOs the device accepts at once (its tags / NCQ depth); more wait in front of it, and the
    /// controller sees that wait as `started > released`. Default: 4 × channels.
    #[serde(default)]
    pub queue_depth: Option<u32>,
}

fn one() -> f64 {
    1.0
}

impl SsdSpec {
    pub(crate) fn validate(&self) -> Result<(), KeyError> {
        positive("channels", self.channels as f64)?;
        positive("read_us", self.read_us)?;
        positive("write_us", self.write_us)?;
        positive("read_mbps", self.read_mbps)?;
        positive("write_mbps", self.write_mbps)?;
        positive("gc_write_factor", self.gc_write_factor)?;
        positive("gc_read_factor", self.gc_read_factor)?;
        if self.buffer_mb > 0.0 {
            positive("flush_mbps", self.flush_mbps)?;
        }
        Ok(())
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Ssd {
    spec: SsdSpec,
    buffer_cap: f64,
    level: f64,
    level_at: Nanos,
    gc: bool,
    /// When the read and the write data paths are free for the next transfer.
    data_path_free: [Nanos; 2],
}

impl Ssd {
    /// A device from its parameters.
    pub fn new(spec: &SsdSpec) -> Self {
        Ssd {
            spec: spec.clone(),
            buffer_cap: spec.buffer_mb * 1e6,
            level: 0.0,
            level_at: 0,
            gc: false,
            data_path_free: [0; 2],
        }
    }

    /// Drains the buffer up to `now` and updates the garbage-collection state.
    fn drain(&mut self, now: Nanos) {
        let dt = (now - self.level_at) as f64 / 1e9;
        self.level = (self.level - dt * self.spec.flush_mbps * 1e6).max(0.0);
        self.level_at = now;
        if self.gc && (self.level <= 0.0 || (!self.spec.collapse && self.level < self.buffer_cap)) {
            self.gc = false;
        }
    }
}

impl DeviceModel for Ssd {
    fn describe(&self) -> String {
        format!("ssd x{} ({} µs read, {} µs write)", self.spec.channels, self.spec.read_us, self.spec.write_us)
    }

    fn servers(&self) -> u32 {
        self.spec.channels
    }

    fn queue_depth(&self) -> u32 {
        self.spec.queue_depth.unwrap_or(4 * self.spec.channels)
    }

    fn serve(&mut self, now: Nanos, req: &Request, speed: f64) -> Service {
        if self.buffer_cap > 0.0 {
            self.drain(now);
        }
        let s = &self.spec;
        let (mut access, mut transfer) = match req.op {
            Op::Read => (s.read_us * 1e3, transfer_ns(req.len, s.read_mbps * 1e6)),
            Op::Write => (s.write_us * 1e3, transfer_ns(req.len, s.write_mbps * 1e6)),
        };
        if self.buffer_cap > 0.0 {
            if req.op == Op::Write && !self.gc {
                if self.level + req.len as f64 <= self.buffer_cap {
                    self.level += req.len as f64;
                } else {
                    self.gc = true;
                }
            }
            if self.gc {
                let factor = if req.op == Op::Write { s.gc_write_factor } else { s.gc_read_factor };
                access *= factor;
                transfer *= factor;
            }
        }
        let accessed = now + (access / speed).round() as Nanos;
        let path = &mut self.data_path_free[req.op.index()];
        let from = accessed.max(*path);
        *path = from + at_speed(transfer, speed);
        let done = *path;
        Service { start: now, done, busy: done - now }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::common::{Device, Started};

    fn spec(collapse: bool) -> SsdSpec {
        SsdSpec {
            channels: 1,
            read_us: 100.0,
            write_us: 20.0,
            read_mbps: 1000.0,
            write_mbps: 1000.0,
            buffer_mb: 1.5,
            flush_mbps: 100.0,
            gc_write_factor: 10.0,
            gc_read_factor: 3.0,
            collapse,
            queue_depth: None,
        }
    }

    fn write(d: &mut Device, now: Nanos) -> Started {
        let s = d.arrive(now, Request { token: 0, group: 0, op: Op::Write, offset: 0, len: 1 << 20 }).unwrap();
        assert!(d.finish(s.done, s.slot).is_none());
        s
    }

    #[test]
    fn buffer_absorbs_then_gc_slows_then_recovers() {
        let mut d = Device::new(Ssd::new(&spec(false)));
        let fast = write(&mut d, 0).busy;
        let slow = write(&mut d, 1000).busy; // buffer (1.5 MB) cannot take a second MiB
        assert!(slow as f64 > 9.0 * fast as f64, "{fast} {slow}");
        // After 20 ms at 100 MB/s the buffer has drained 2 MB: fast again.
        assert_eq!(write(&mut d, 20_000_000).busy, fast);
    }

    #[test]
    fn channels_overlap_access_but_share_the_data_path() {
        let mut spec = spec(false);
        (spec.channels, spec.buffer_mb) = (4, 0.0);
        let mut d = Device::new(Ssd::new(&spec));
        let read = |d: &mut Device, len| d.arrive(0, Request { token: 0, group: 0, op: Op::Read, offset: 0, len });
        // Four 4 KiB reads at once: 100 µs access each in parallel, then 4.1 µs transfers in turn.
        let done: Vec<Nanos> = (0..4).map(|_| read(&mut d, 4096).unwrap().done).collect();
        assert_eq!(done, vec![104_096, 108_192, 112_288, 116_384]);
        assert!(read(&mut d, 4096).is_none(), "all four channels busy");
        // A large IO alone gets the whole 1000 MB/s.
        let mut d = Device::new(Ssd::new(&spec));
        assert_eq!(read(&mut d, 1_000_000).unwrap().done, 100_000 + 1_000_000);
    }

    #[test]
    fn collapse_stays_slow_until_the_buffer_is_empty() {
        let mut d = Device::new(Ssd::new(&spec(true)));
        write(&mut d, 0);
        write(&mut d, 1_000); // triggers GC
        let read = |d: &mut Device, t| {
            let s = d.arrive(t, Request { token: 0, group: 0, op: Op::Read, offset: 0, len: 4096 }).unwrap();
            assert!(d.finish(s.done, s.slot).is_none());
            s.busy
        };
        let slow = read(&mut d, 5_000_000); // half drained: still collapsed
        let fast = read(&mut d, 20_000_000); // empty: recovered
        assert!(slow > 2 * fast, "{slow} {fast}");
    }
}
