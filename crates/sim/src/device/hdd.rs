//! Rotating disk: one actuator, seek time growing with distance, rotational latency, cheap
//! sequential IO, a read-ahead segment cache and reordering of the queue within a window (like NCQ
//! or an elevator).
//!
//! Read-ahead: a read that misses the cache but starts where one of the last `cache_segments` reads
//! ended (a sequential stream) also reads the next `readahead_kb` into one of `cache_segments`
//! segments (least recently filled replaced); a later read inside a segment is served from the
//! cache at `interface_mbps`. Random reads read nothing ahead. This is why real disks keep several interleaved
//! sequential streams cheap, and what lets a linear cost model with per-stream sequential detection
//! describe them. Writes go to the platter.
//!
//! Service time: an IO that starts within `track_kb` of where the head is continues the current
//! stream and pays only the transfer at `mbps`. Any other IO pays a seek of
//! `seek_min_ms + (seek_max_ms − seek_min_ms) × sqrt(distance / capacity)` (the classic square-root
//! seek curve), a rotational delay drawn uniformly from one revolution, and the transfer. When the
//! actuator frees up it serves, among the first `window` queued IOs, the one closest to the head
//! (window 1 = FIFO) — unless the oldest queued IO has waited longer than `max_wait_ms`, which is
//! then served first (the starvation guard of NCQ firmware and of mq-deadline's expiry).

use std::collections::VecDeque;

use ioshare_core::Nanos;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use super::common::{at_speed, transfer_ns, DeviceModel, Queued, Request, Service};
use super::param::{positive, KeyError};

/// Parameters of an [`Hdd`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddSpec {
    /// Spindle speed, revolutions per minute.
    pub rpm: f64,
    /// Shortest (track-to-track) seek, ms.
    pub seek_min_ms: f64,
    /// Full-stroke seek, ms.
    pub seek_max_ms: f64,
    /// Capacity, GB (10^9 bytes); offsets wrap around it.
    pub capacity_gb: f64,
    /// Media transfer rate, MB/s.
    pub mbps: f64,
    /// Distance from the head, KiB, within which an IO counts as continuing the stream.
    #[serde(default = "default_track_kb")]
    pub track_kb: u64,
    /// Reordering window, queued IOs (1 = FIFO).
    #[serde(default = "default_window")]
    pub window: u32,
    /// Bytes read ahead after a read that misses the cache, KiB (0 disables the cache).
    #[serde(default = "default_readahead")]
    pub readahead_kb: u64,
    /// Read-ahead segments kept.
    #[serde(default = "default_segments")]
    pub cache_segments: u32,
    /// Transfer rate of cache hits, MB/s.
    #[serde(default = "default_interface")]
    pub interface_mbps: f64,
    /// Longest an IO may be passed over by reordering, ms.
    #[serde(default = "default_max_wait")]
    pub max_wait_ms: f64,
    /// IOs the device accepts at once (its tags / NCQ depth); more wait in front of it, and the
    /// controller sees that wait as `started > released`. Default: 32 (NCQ).
    #[serde(default)]
    pub queue_depth: Option<u32>,
}

fn default_track_kb() -> u64 {
    64
}

fn default_window() -> u32 {
    1
}

fn default_max_wait() -> f64 {
    100.0
}

fn default_readahead() -> u64 {
    0
}

fn default_segments() -> u32 {
    16
}

fn default_interface() -> f64 {
    600.0
}

impl HddSpec {
    pub(crate) fn validate(&self) -> Result<(), KeyError> {
        positive("rpm", self.rpm)?;
        positive("seek_min_ms", self.seek_min_ms)?;
        positive("capacity_gb", self.capacity_gb)?;
        positive("mbps", self.mbps)?;
        positive("window", self.window as f64)?;
        positive("interface_mbps", self.interface_mbps)?;
        if self.readahead_kb > 0 {
            positive("cache_segments", self.cache_segments as f64)?;
        }
        if self.seek_max_ms < self.seek_min_ms {
            return Err(KeyError { key: "seek_max_ms".into(), msg: "must be at least seek_min_ms".into() });
        }
        Ok(())
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Hdd {
    spec: HddSpec,
    capacity: u64,
    head: u64,
    rng: SmallRng,
    /// Read-ahead segments `[start, end)`, oldest first.
    segments: VecDeque<(u64, u64)>,
    /// Where the last reads that missed the cache ended, oldest first (stream detection).
    ends: VecDeque<u64>,
}

impl Hdd {
    /// A disk from its parameters; `seed` drives the rotational positions.
    pub fn new(spec: &HddSpec, seed: u64) -> Self {
        Hdd {
            spec: spec.clone(),
            capacity: (spec.capacity_gb * 1e9) as u64,
            head: 0,
            rng: SmallRng::seed_from_u64(seed ^ 0x4844_4400),
            segments: VecDeque::new(),
            ends: VecDeque::new(),
        }
    }

    /// Where the part of a read starting at `offset` that is not in a read-ahead segment begins.
    fn uncached_from(&self, offset: u64) -> u64 {
        self.segments.iter().find(|&&(s, e)| s <= offset && offset < e).map_or(offset, |&(_, e)| e)
    }

    fn distance(&self, req: &Request) -> u64 {
        (req.offset % self.capacity).abs_diff(self.head)
    }
}

impl DeviceModel for Hdd {
    fn describe(&self) -> String {
        format!("hdd {} rpm (window {})", self.spec.rpm, self.spec.window)
    }

    fn servers(&self) -> u32 {
        1
    }

    fn queue_depth(&self) -> u32 {
        self.spec.queue_depth.unwrap_or(32)
    }

    fn serve(&mut self, now: Nanos, req: &Request, speed: f64) -> Service {
        let s = &self.spec;
        let start = req.offset % self.capacity;
        let end = start + req.len as u64;
        let reading = req.op == ioshare_core::Op::Read && s.readahead_kb > 0;
        let from = if reading { self.uncached_from(start).min(end) } else { start };
        let mut ns = transfer_ns((from - start) as u32, s.interface_mbps * 1e6);
        if from == end {
            let busy = at_speed(ns, speed);
            return Service { start: now, done: now + busy, busy };
        }
        let dist = from.abs_diff(self.head);
        let streaming = reading && self.ends.contains(&from);
        let ahead = if streaming { s.readahead_kb * 1024 } else { 0 };
        ns += (end - from + ahead) as f64 * 1e9 / (s.mbps * 1e6);
        let end = end + ahead;
        let keep = s.cache_segments as usize;
        if streaming {
            if self.segments.len() >= keep {
                self.segments.pop_front();
            }
            self.segments.push_back((start, end));
        }
        if reading {
            if self.ends.len() >= keep {
                self.ends.pop_front();
            }
            self.ends.push_back(end);
        }
        if dist > s.track_kb * 1024 {
            let frac = (dist as f64 / self.capacity as f64).sqrt();
            ns += (s.seek_min_ms + (s.seek_max_ms - s.seek_min_ms) * frac) * 1e6;
            ns += self.rng.gen::<f64>() * 60e9 / s.rpm;
        }
        self.head = end % self.capacity;
        let busy = at_speed(ns, speed);
        Service { start: now, done: now + busy, busy }
    }

    /// The oldest IO if it waited longer than `max_wait_ms`, else the one closest to the head among
    /// the first `window`.
    fn pick(&self, now: Nanos, queue: &VecDeque<Queued>) -> usize {
        if (now - queue[0].arrived) as f64 > self.spec.max_wait_ms * 1e6 {
            return 0;
        }
        let window = (self.spec.window as usize).min(queue.len());
        (0..window).min_by_key(|&i| self.distance(&queue[i].req)).expect("queue not empty")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::common::Device;
    use ioshare_core::Op;

    fn spec(window: u32) -> HddSpec {
        HddSpec {
            rpm: 7200.0,
            seek_min_ms: 1.0,
            seek_max_ms: 15.0,
            capacity_gb: 1000.0,
            mbps: 200.0,
            track_kb: 64,
            window,
            max_wait_ms: 100.0,
            readahead_kb: 0,
            cache_segments: 16,
            interface_mbps: 600.0,
            queue_depth: None,
        }
    }

    fn req(token: u32, offset: u64) -> Request {
        Request { token, group: 0, op: Op::Read, offset, len: 4096 }
    }

    #[test]
    fn sequential_is_cheap_and_random_pays_seek_and_rotation() {
        let mut d = Device::new(Hdd::new(&spec(1), 7));
        let first = d.arrive(0, req(0, 500_000_000_000)).unwrap();
        assert!(first.busy > 1_000_000, "far seek: at least the minimum seek");
        assert!(d.finish(first.done, 0).is_none());
        let seq = d.arrive(first.done, req(1, 500_000_004_096)).unwrap();
        assert!(seq.busy < 100_000, "sequential: transfer only, {}", seq.busy);
    }

    #[test]
    fn reordering_window_serves_the_closest_queued_io() {
        for (window, expect) in [(1, 1), (4, 3)] {
            let mut d = Device::new(Hdd::new(&spec(window), 1));
            let a = d.arrive(0, req(0, 0)).unwrap();
            for (token, off) in [(1, 900_000_000_000), (2, 600_000_000_000), (3, 8192)] {
                assert!(d.arrive(0, req(token, off)).is_none());
            }
            assert_eq!(d.finish(a.done, 0).unwrap().token, expect, "window {window}");
        }
    }

    #[test]
    fn read_ahead_keeps_interleaved_streams_cheap() {
        let mut d = Device::new(Hdd::new(&HddSpec { readahead_kb: 256, ..spec(1) }, 3));
        let mut t = 0;
        let mut busy = Vec::new();
        for i in 0..8u64 {
            for stream in [0, 500_000_000_000u64] {
                let s = d.arrive(t, req(0, stream + i * 4096)).unwrap();
                assert!(d.finish(s.done, 0).is_none());
                t = s.done;
                busy.push(s.busy);
            }
        }
        // The first two reads of each stream hit the platter (the very first one where the head
        // is; the second is recognised as sequential and reads ahead); the next six hit the cache.
        assert!(busy[1..4].iter().all(|b| *b > 1_000_000), "{busy:?}");
        assert!(busy[4..].iter().all(|b| *b < 10_000), "{busy:?}");
    }

    #[test]
    fn an_io_passed_over_too_long_goes_first() {
        let mut d = Device::new(Hdd::new(&spec(4), 1));
        let a = d.arrive(0, req(0, 0)).unwrap();
        assert!(d.arrive(0, req(1, 900_000_000_000)).is_none());
        assert!(d.arrive(0, req(2, 8192)).is_none());
        // At 150 ms the far IO has waited beyond 100 ms: served before the close one.
        assert_eq!(d.finish(150_000_000.max(a.done), 0).unwrap().token, 1);
    }
}
