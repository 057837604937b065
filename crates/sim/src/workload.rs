//! Workloads: what each job of a group submits, and when.
//!
//! A [`Job`] has an IO pattern (direction, random or sequential, block size, offset range, the share
//! of `must_issue` IO, memory needed per IO) and a [`Load`] saying when IOs are produced:
//! - [`Load::Closed`]: `iodepth` producers, each submitting its next IO `think` after the previous
//!   completes (fio's `iodepth` + `thinktime`);
//! - [`Load::Open`]: arrivals at `rate` per second, Poisson or evenly spaced, optionally only during
//!   the "on" part of an on/off burst cycle; never more than `max_outstanding` in flight (arrivals
//!   beyond are counted as dropped);
//! - [`Load::Seeking`]: a closed loop that adjusts its concurrency every `period` to keep the
//!   `pct` percentile of its latency under `target` (additive increase, multiplicative decrease; the
//!   paper's latency-sensitive readers);
//! - [`Load::Leak`]: a leaking process that allocates `bs` bytes every `bs / rate` and never frees
//!   them; under memory pressure its growth forces swap-out IO (see [`crate::memory`]).
//!
//! In TOML a job is one flat table: the load follows from which keys are present (`rate` → open,
//! `lat_target_us` → seeking, `leak_mbps` → leak, otherwise closed).

use ioshare_core::{Nanos, Op, NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC};
use rand::rngs::SmallRng;
use rand::Rng;
use serde::Deserialize;

/// Direction and locality of a job's IO (fio's `rw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    RandRead,
    /// Random writes.
    RandWrite,
    /// Random mix of reads and writes (`read_share` of reads).
    RandRw,
    /// Sequential mix of reads and writes (`read_share` of reads).
    #[serde(alias = "readwrite")]
    Rw,
}

impl Rw {
    /// Whether offsets are random.
    pub fn random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }
}

/// When a job produces IO. See the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    /// Fixed number of producers, each waiting for its IO and thinking before the next.
    Closed {
        /// Producers (IOs in flight at most).
        iodepth: u32,
        /// Pause between a completion and the producer's next IO.
        think: Nanos,
    },
    /// Arrivals at a rate, whatever the completions.
    Open {
        /// Mean arrivals per second (during "on" phases).
        rate: f64,
        /// Exponential inter-arrival times (else evenly spaced).
        poisson: bool,
        /// On/off cycle: arrivals only during the first `.0` of every `.0 + .1`.
        burst: Option<(Nanos, Nanos)>,
        /// In-flight cap; arrivals beyond it are dropped and counted.
        max_outstanding: u32,
    },
    /// A closed loop whose concurrency follows a latency target.
    Seeking {
        /// Latency target.
        target: Nanos,
        /// Percentile judged against the target, 0..100.
        pct: f64,
        /// Concurrency ceiling.
        max_depth: u32,
        /// Control period.
        period: Nanos,
        /// Pause between a completion and the producer's next IO.
        think: Nanos,
    },
    /// A memory leak growing at `rate` bytes per second in steps of the job's block size.
    Leak {
        /// Growth, bytes per second.
        rate: f64,
    },
}

/// One job of a group. Build with [`Job::closed`], [`Job::open`], [`Job::seeking`], [`Job::leak`]
/// and refine with the `with_*` methods.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "JobFile")]
pub struct Job {
    /// Direction and locality.
    pub rw: Rw,
    /// Share of reads in mixed patterns, 0..1.
    pub read_share: f64,
    /// Block size, bytes.
    pub bs: u32,
    /// Start of the offset range; `None` gives each job its own 16 GiB-aligned region.
    pub offset: Option<u64>,
    /// Size of the offset range, bytes.
    pub size: u64,
    /// Fraction of IOs marked `must_issue` (charged as debt by IOCost), 0..1.
    pub must_issue: f64,
    /// Memory each IO needs while in flight, bytes (only with a [`crate::memory::Memory`] pool).
    pub mem_bytes: u64,
    /// When IOs are produced.
    pub load: Load,
}

/// Default offset range of a job (16 GiB).
pub const DEFAULT_SIZE: u64 = 16 << 30;

impl Job {
    fn with_load(rw: Rw, bs: u32, load: Load) -> Job {
        Job { rw, read_share: 0.5, bs, offset: None, size: DEFAULT_SIZE, must_issue: 0.0, mem_bytes: 0, load }
    }

    /// A closed-loop job with `iodepth` producers and no think time.
    pub fn closed(rw: Rw, bs: u32, iodepth: u32) -> Job {
        Self::with_load(rw, bs, Load::Closed { iodepth, think: 0 })
    }

    /// An open-loop job with Poisson arrivals at `rate` per second.
    pub fn open(rw: Rw, bs: u32, rate: f64) -> Job {
        Self::with_load(rw, bs, Load::Open { rate, poisson: true, burst: None, max_outstanding: 4096 })
    }

    /// A latency-seeking closed loop keeping the `pct` percentile under `target_us`.
    pub fn seeking(rw: Rw, bs: u32, target_us: u64, pct: f64) -> Job {
        let load = Load::Seeking {
            target: target_us * NSEC_PER_USEC,
            pct,
            max_depth: 256,
            period: 100 * NSEC_PER_MSEC,
            think: 0,
        };
        Self::with_load(rw, bs, load)
    }

    /// A memory leak growing at `mbps` MB/s in `chunk` byte steps.
    pub fn leak(mbps: f64, chunk: u32) -> Job {
        Self::with_load(Rw::Write, chunk, Load::Leak { rate: mbps * 1e6 })
    }

    /// Sets the think time (closed and seeking loads).
    pub fn with_think_us(mut self, us: u64) -> Job {
        if let Load::Closed { think, .. } | Load::Seeking { think, .. } = &mut self.load {
            *think = us * NSEC_PER_USEC;
        }
        self
    }

    /// Sets the fraction of `must_issue` IOs.
    pub fn with_must_issue(mut self, fraction: f64) -> Job {
        self.must_issue = fraction;
        self
    }

    /// Sets the offset range.
    pub fn with_range(mut self, offset: u64, size: u64) -> Job {
        self.offset = Some(offset);
        self.size = size;
        self
    }

    /// Sets the memory each IO needs.
    pub fn with_mem_bytes(mut self, bytes: u64) -> Job {
        self.mem_bytes = bytes;
        self
    }

    /// Checks the parameters, naming the offending key.
    pub fn validate(&self) -> Result<(), String> {
        let frac = |k: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!("{k} must be between 0 and 1, got {v}"))
            }
        };
        frac("read_share", self.read_share)?;
        frac("must_issue", self.must_issue)?;
        if self.bs == 0 {
            return Err("bs must be at least 1 byte".into());
        }
        if self.size < self.bs as u64 {
            return Err(format!("size {} is smaller than bs {}", self.size, self.bs));
        }
        match self.load {
            Load::Closed { iodepth: 0, .. } => Err("iodepth must be at least 1".into()),
            Load::Open { rate, .. } if rate <= 0.0 || !rate.is_finite() => {
                Err(format!("rate must be a positive number of IOs per second, got {rate}"))
            }
            Load::Open { max_outstanding: 0, .. } => Err("max_outstanding must be at least 1".into()),
            Load::Open { burst: Some((0, _)), .. } => Err("burst_on_ms must be positive".into()),
            Load::Seeking { pct, .. } if !(0.0..100.0).contains(&pct) || pct == 0.0 => {
                Err(format!("lat_pct must be above 0 and below 100, got {pct}"))
            }
            Load::Seeking { max_depth: 0, .. } => Err("max_depth must be at least 1".into()),
            Load::Seeking { target: 0, .. } => Err("lat_target_us must be positive".into()),
            Load::Leak { rate } if rate <= 0.0 || !rate.is_finite() => {
                Err(format!("leak_mbps must be positive, got {}", rate / 1e6))
            }
            _ => Ok(()),
        }
    }

    /// Draws the next IO's direction, offset and `must_issue` flag; `cursor` is the job's sequential
    /// position, `base` the start of its range.
    pub(crate) fn draw(&self, rng: &mut SmallRng, cursor: &mut u64, base: u64) -> (Op, u64, bool) {
        let op = match self.rw {
            Rw::Read | Rw::RandRead => Op::Read,
            Rw::Write | Rw::RandWrite => Op::Write,
            Rw::RandRw | Rw::Rw => {
                if rng.gen::<f64>() < self.read_share {
                    Op::Read
                } else {
                    Op::Write
                }
            }
        };
        let bs = self.bs as u64;
        let blocks = self.size / bs;
        let block = if self.rw.random() {
            rng.gen_range(0..blocks)
        } else {
            let b = *cursor % blocks;
            *cursor = b + 1;
            b
        };
        let must = self.must_issue > 0.0 && rng.gen::<f64>() < self.must_issue;
        (op, base + block * bs, must)
    }

    /// Time from one open-loop arrival at `now` to the next.
    pub(crate) fn next_arrival(&self, now: Nanos, rng: &mut SmallRng) -> Nanos {
        let Load::Open { rate, poisson, burst, .. } = self.load else { unreachable!("open loads only") };
        let mean = NSEC_PER_SEC as f64 / rate;
        let gap = if poisson { -mean * (1.0 - rng.gen::<f64>()).ln() } else { mean };
        let t = now + gap.round().max(1.0) as Nanos;
        match burst {
            Some((on, off)) if t % (on + off) >= on => (t / (on + off) + 1) * (on + off),
            _ => t,
        }
    }
}

/// The new concurrency of a latency-seeking client after a control period whose latencies were
/// `observed` at its percentile: one more when under target, 10% fewer (at least one) when over.
pub(crate) fn seek_depth(depth: u32, observed: Nanos, target: Nanos, max_depth: u32) -> u32 {
    if observed > target {
        depth.saturating_sub((depth / 10).max(1)).max(1)
    } else {
        (depth + 1).min(max_depth)
    }
}

/// A job as written in a scenario file: one flat table. See the module documentation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    rw: Option<Rw>,
    read_share: Option<f64>,
    bs: Option<u32>,
    offset: Option<u64>,
    size: Option<u64>,
    must_issue: Option<f64>,
    mem_kb: Option<u64>,
    iodepth: Option<u32>,
    think_us: Option<u64>,
    rate: Option<f64>,
    arrival: Option<Arrival>,
    burst_on_ms: Option<u64>,
    burst_off_ms: Option<u64>,
    max_outstanding: Option<u32>,
    lat_target_us: Option<u64>,
    lat_pct: Option<f64>,
    max_depth: Option<u32>,
    control_ms: Option<u64>,
    leak_mbps: Option<f64>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Arrival {
    Poisson,
    Uniform,
}

impl TryFrom<JobFile> for Job {
    type Error = String;

    fn try_from(f: JobFile) -> Result<Job, String> {
        let kinds = [f.rate.is_some(), f.lat_target_us.is_some(), f.leak_mbps.is_some()];
        if kinds.iter().filter(|k| **k).count() > 1 {
            return Err("a job has one load: give at most one of rate, lat_target_us, leak_mbps".into());
        }
        let only = |present: bool, key: &str, kind: &str| {
            if present {
                Err(format!("{key} applies only to {kind} jobs"))
            } else {
                Ok(())
            }
        };
        let open = f.rate.is_some();
        let seeking = f.lat_target_us.is_some();
        let leak = f.leak_mbps.is_some();
        only(f.iodepth.is_some() && (open || seeking || leak), "iodepth", "closed")?;
        only(f.think_us.is_some() && (open || leak), "think_us", "closed and seeking")?;
        for (present, key) in [
            (f.arrival.is_some(), "arrival"),
            (f.burst_on_ms.is_some(), "burst_on_ms"),
            (f.burst_off_ms.is_some(), "burst_off_ms"),
            (f.max_outstanding.is_some(), "max_outstanding"),
        ] {
            only(present && !open, key, "open (rate)")?;
        }
        for (present, key) in [
            (f.lat_pct.is_some(), "lat_pct"),
            (f.max_depth.is_some(), "max_depth"),
            (f.control_ms.is_some(), "control_ms"),
        ] {
            only(present && !seeking, key, "seeking (lat_target_us)")?;
        }
        let think = f.think_us.unwrap_or(0) * NSEC_PER_USEC;
        let load = if let Some(rate) = f.rate {
            let burst = match (f.burst_on_ms, f.burst_off_ms) {
                (None, None) => None,
                (Some(on), Some(off)) => Some((on * NSEC_PER_MSEC, off * NSEC_PER_MSEC)),
                _ => return Err("give both burst_on_ms and burst_off_ms, or neither".into()),
            };
            Load::Open {
                rate,
                poisson: !matches!(f.arrival, Some(Arrival::Uniform)),
                burst,
                max_outstanding: f.max_outstanding.unwrap_or(4096),
            }
        } else if let Some(target) = f.lat_target_us {
            Load::Seeking {
                target: target * NSEC_PER_USEC,
                pct: f.lat_pct.unwrap_or(90.0),
                max_depth: f.max_depth.unwrap_or(256),
                period: f.control_ms.unwrap_or(100) * NSEC_PER_MSEC,
                think,
            }
        } else if let Some(mbps) = f.leak_mbps {
            Load::Leak { rate: mbps * 1e6 }
        } else {
            Load::Closed { iodepth: f.iodepth.unwrap_or(1), think }
        };
        let rw = match (f.rw, leak) {
            (Some(rw), _) => rw,
            (None, true) => Rw::Write,
            (None, false) => return Err("missing key rw (read, write, randread, randwrite, randrw, rw)".into()),
        };
        let job = Job {
            rw,
            read_share: f.read_share.unwrap_or(0.5),
            bs: f.bs.unwrap_or(if leak { 1 << 20 } else { 4096 }),
            offset: f.offset,
            size: f.size.unwrap_or(DEFAULT_SIZE),
            must_issue: f.must_issue.unwrap_or(0.0),
            mem_bytes: f.mem_kb.unwrap_or(0) * 1024,
            load,
        };
        job.validate()?;
        Ok(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sequential_jobs_walk_their_range_and_random_jobs_stay_in_it() {
        let mut rng = SmallRng::seed_from_u64(1);
        let seq = Job::closed(Rw::Read, 4096, 1).with_range(0, 3 * 4096);
        let mut cursor = 0;
        let offs: Vec<u64> = (0..4).map(|_| seq.draw(&mut rng, &mut cursor, 100).1).collect();
        assert_eq!(offs, vec![100, 4196, 8292, 100]);
        let rand = Job::closed(Rw::RandRw, 4096, 1).with_range(0, 1 << 20).with_must_issue(0.5);
        let draws: Vec<_> = (0..1000).map(|_| rand.draw(&mut rng, &mut cursor, 0)).collect();
        assert!(draws.iter().all(|(_, off, _)| off % 4096 == 0 && *off < 1 << 20));
        let reads = draws.iter().filter(|d| d.0 == Op::Read).count();
        let musts = draws.iter().filter(|d| d.2).count();
        assert!((400..600).contains(&reads) && (400..600).contains(&musts), "{reads} {musts}");
    }

    #[test]
    fn bursts_defer_arrivals_to_the_next_on_phase() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut job = Job::open(Rw::RandRead, 4096, 1000.0);
        job.load =
            Load::Open { rate: 1000.0, poisson: false, burst: Some((10_000_000, 90_000_000)), max_outstanding: 8 };
        assert_eq!(job.next_arrival(0, &mut rng), 1_000_000);
        assert_eq!(job.next_arrival(9_500_000, &mut rng), 100_000_000);
    }

    #[test]
    fn seeking_depth_is_aimd() {
        assert_eq!(seek_depth(10, 5, 10, 64), 11);
        assert_eq!(seek_depth(64, 5, 10, 64), 64);
        assert_eq!(seek_depth(50, 20, 10, 64), 45);
        assert_eq!(seek_depth(1, 20, 10, 64), 1);
    }

    #[test]
    fn job_tables_are_checked() {
        let job: Job = toml::from_str("rw = \"randread\"\niodepth = 8\nthink_us = 100").unwrap();
        assert_eq!(job.load, Load::Closed { iodepth: 8, think: 100_000 });
        for (text, needle) in [
            ("rw = \"randread\"\nrate = 10\niodepth = 2", "iodepth applies only to closed"),
            ("iodepth = 2", "missing key rw"),
            ("rw = \"randread\"\nmust_issue = 2.0", "must_issue must be between 0 and 1"),
            ("rw = \"randread\"\nrate = 5\nlat_target_us = 100", "at most one of"),
            ("rw = \"scan\"", "unknown variant"),
            ("rw = \"read\"\ndepth = 1", "unknown field `depth`"),
        ] {
            let err = toml::from_str::<Job>(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
