//! What tenants do: fio-like jobs (pattern, block size, queue depth, think time, rate cap, range,
//! runtime, `must_issue` share), and the per-job generator of offsets and directions.

use ioshare_core::{Limits, Nanos, Op};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How far a rate-capped job may fall behind and catch up by default, ns (1 ms).
pub const DEFAULT_CATCH_UP: Nanos = 1_000_000;

fn default_catch_up() -> Nanos {
    DEFAULT_CATCH_UP
}

/// Access pattern of a job (fio's `rw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Uniformly random reads.
    RandRead,
    /// Uniformly random writes.
    RandWrite,
    /// Uniformly random reads and writes; the share of reads is [`JobSpec::read_pct`].
    RandRw,
}

impl Pattern {
    /// True for the random patterns.
    pub fn is_random(self) -> bool {
        matches!(self, Pattern::RandRead | Pattern::RandWrite | Pattern::RandRw)
    }
}

/// One closed-loop IO stream of a tenant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Access pattern.
    pub pattern: Pattern,
    /// Share of reads for [`Pattern::RandRw`], percent.
    pub read_pct: u8,
    /// Bytes per IO, a multiple of 512.
    pub block_size: u32,
    /// IOs in flight (including those the controller holds).
    pub iodepth: u32,
    /// Pause after each completion before the slot issues again, ns (fio `thinktime`).
    pub think_time: Nanos,
    /// Upper bound on the job's IOPS (fio `rate_iops`), if any.
    pub rate_iops: Option<u64>,
    /// How far a rate-capped job may fall behind its schedule and still issue the IOs it missed, ns
    /// ([`DEFAULT_CATCH_UP`]). A paced tenant standing for a service's arrivals sets more, so that
    /// a scheduling stall of the engine's thread does not lose requests.
    #[serde(default = "default_catch_up")]
    pub catch_up: Nanos,
    /// Start of the job's byte range on the target.
    pub offset: u64,
    /// Length of the range; `None` = to the end of the target.
    pub size: Option<u64>,
    /// How long the job issues IO, ns; `None` = the whole run.
    pub runtime: Option<Nanos>,
    /// Share of IOs marked `must_issue` (charged as debt, never held), percent.
    pub must_issue_pct: f64,
}

impl JobSpec {
    /// A job with `pattern`, `block_size` and `iodepth`, and defaults elsewhere (no think time, no
    /// cap, the whole target, the whole run, no `must_issue` IO, 50% reads for randrw).
    pub fn new(pattern: Pattern, block_size: u32, iodepth: u32) -> Self {
        JobSpec {
            pattern,
            read_pct: 50,
            block_size,
            iodepth,
            think_time: 0,
            rate_iops: None,
            catch_up: DEFAULT_CATCH_UP,
            offset: 0,
            size: None,
            runtime: None,
            must_issue_pct: 0.0,
        }
    }

    /// The same job with a think time.
    pub fn think(mut self, think_time: Nanos) -> Self {
        self.think_time = think_time;
        self
    }

    /// Whether the job issues writes.
    pub fn writes(&self) -> bool {
        match self.pattern {
            Pattern::Read | Pattern::RandRead => false,
            Pattern::Write | Pattern::RandWrite => true,
            Pattern::RandRw => self.read_pct < 100,
        }
    }

    /// Checks the job against a target of `target_size` bytes.
    pub fn validate(&self, tenant: &str, target_size: u64) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidJob { tenant: tenant.to_string(), reason });
        if self.block_size == 0 || self.block_size % 512 != 0 || self.block_size > 128 << 20 {
            return bad(format!("block size {} must be a multiple of 512 up to 128 MiB", self.block_size));
        }
        if !(1..=4096).contains(&self.iodepth) {
            return bad(format!("iodepth {} must be between 1 and 4096", self.iodepth));
        }
        if self.read_pct > 100 {
            return bad(format!("read share {}% must be at most 100", self.read_pct));
        }
        if !(0.0..=100.0).contains(&self.must_issue_pct) {
            return bad(format!("must_issue share {}% must be between 0 and 100", self.must_issue_pct));
        }
        if self.rate_iops == Some(0) {
            return bad("a rate cap of 0 IOPS would never issue; leave it unset for no cap".into());
        }
        if self.offset % 512 != 0 {
            return bad(format!("offset {} must be a multiple of 512", self.offset));
        }
        let end = self.offset.saturating_add(self.size.unwrap_or(target_size.saturating_sub(self.offset)));
        if end > target_size || end < self.offset + self.block_size as u64 {
            return bad(format!(
                "range {}..{end} must hold at least one block and fit in the target ({target_size} bytes)",
                self.offset
            ));
        }
        Ok(())
    }
}

/// A tenant: a controller group and the jobs that issue IO in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantSpec {
    /// Display name.
    pub name: String,
    /// Controller group path.
    pub group: String,
    /// Proportional weight, 1..=10000.
    pub weight: u32,
    /// Rate limits (applied by the token- and leaky-bucket controllers); none by default.
    #[serde(default)]
    pub limits: Limits,
    /// The tenant's jobs.
    pub jobs: Vec<JobSpec>,
}

impl TenantSpec {
    /// A tenant named `name` in group `name` with one job.
    pub fn new(name: &str, weight: u32, job: JobSpec) -> Self {
        TenantSpec {
            name: name.to_string(),
            group: name.to_string(),
            weight,
            limits: Limits::default(),
            jobs: vec![job],
        }
    }

    /// The same tenant with rate limits.
    pub fn limited(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// Produces a job's IOs: direction and offset, deterministically from a seed.
#[derive(Debug)]
pub struct IoGen {
    rng: SmallRng,
    pattern: Pattern,
    read_threshold: u32,
    must_issue_threshold: u32,
    block_size: u64,
    start: u64,
    blocks: u64,
    cursor: u64,
}

impl IoGen {
    /// A generator for `job` on a target of `target_size` bytes (validated before).
    pub fn new(job: &JobSpec, target_size: u64, seed: u64) -> Self {
        let size = job.size.unwrap_or(target_size - job.offset);
        let bs = job.block_size as u64;
        IoGen {
            rng: SmallRng::seed_from_u64(seed),
            pattern: job.pattern,
            read_threshold: (job.read_pct as f64 / 100.0 * u32::MAX as f64) as u32,
            must_issue_threshold: (job.must_issue_pct / 100.0 * u32::MAX as f64) as u32,
            block_size: bs,
            start: job.offset,
            blocks: size / bs,
            cursor: 0,
        }
    }

    /// The next IO: direction, byte offset, and whether it must issue.
    #[inline]
    pub fn next_io(&mut self) -> (Op, u64, bool) {
        let block = if self.pattern.is_random() {
            self.rng.gen_range(0..self.blocks)
        } else {
            let b = self.cursor;
            self.cursor = if b + 1 == self.blocks { 0 } else { b + 1 };
            b
        };
        let op = match self.pattern {
            Pattern::Read | Pattern::RandRead => Op::Read,
            Pattern::Write | Pattern::RandWrite => Op::Write,
            Pattern::RandRw if self.rng.gen::<u32>() < self.read_threshold => Op::Read,
            Pattern::RandRw => Op::Write,
        };
        let must = self.must_issue_threshold != 0 && self.rng.gen::<u32>() < self.must_issue_threshold;
        (op, self.start + block * self.block_size, must)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_jobs_walk_their_range_and_wrap() {
        let mut job = JobSpec::new(Pattern::Write, 4096, 1);
        job.offset = 8192;
        job.size = Some(3 * 4096);
        let mut g = IoGen::new(&job, 1 << 20, 1);
        let offs: Vec<u64> = (0..4).map(|_| g.next_io().1).collect();
        assert_eq!(offs, [8192, 12288, 16384, 8192]);
        assert_eq!(g.next_io().0, Op::Write);
    }

    #[test]
    fn random_jobs_stay_aligned_in_range_and_mix_as_asked() {
        let mut job = JobSpec::new(Pattern::RandRw, 8192, 4);
        job.read_pct = 70;
        job.must_issue_pct = 10.0;
        job.offset = 1 << 20;
        job.size = Some(1 << 20);
        let mut g = IoGen::new(&job, 4 << 20, 7);
        let (mut reads, mut musts) = (0, 0);
        for _ in 0..100_000 {
            let (op, off, must) = g.next_io();
            assert!(off >= 1 << 20 && off + 8192 <= 2 << 20 && off % 8192 == 0, "{off}");
            reads += (op == Op::Read) as u32;
            musts += must as u32;
        }
        // 100k Bernoulli draws: 4 standard deviations is under 0.6 percentage points.
        assert!((69_400..70_600).contains(&reads), "{reads}");
        assert!((9_600..10_400).contains(&musts), "{musts}");
    }

    #[test]
    fn invalid_jobs_are_rejected_with_the_reason() {
        let ok = JobSpec::new(Pattern::RandRead, 4096, 8);
        assert!(ok.validate("a", 1 << 20).is_ok());
        let cases = [
            (JobSpec { block_size: 1000, ..ok.clone() }, "multiple of 512"),
            (JobSpec { iodepth: 0, ..ok.clone() }, "iodepth"),
            (JobSpec { read_pct: 101, ..ok.clone() }, "read share"),
            (JobSpec { rate_iops: Some(0), ..ok.clone() }, "rate cap"),
            (JobSpec { offset: 1 << 20, ..ok.clone() }, "fit in the target"),
            (JobSpec { size: Some(2 << 20), ..ok.clone() }, "fit in the target"),
        ];
        for (job, needle) in cases {
            let msg = job.validate("web", 1 << 20).unwrap_err().to_string();
            assert!(msg.contains(needle) && msg.contains("'web'"), "{msg}");
        }
    }
}
