//! The device measurement shared by `ioshare profile` and the bench's calibration: the six runs of
//! the kernel's `iocost_coef_gen.py` on the engine, one after another with no controller.
//!
//! - bps: sequential reads (writes) of large blocks, bytes per second — by default the kernel
//!   tool's 128 MiB blocks at depth 1 ([`Plan::big_block`], [`Plan::big_depth`]), which the block
//!   layer splits into the device's largest requests, all in flight at once;
//! - seqiops: sequential 4 KiB reads (writes) at depth, IOs per second;
//! - randiops: uniformly random 4 KiB reads (writes) at depth, IOs per second.
//!
//! What IOCost charges is each IO as submitted, while a device serves requests: when the block
//! layer merges neighbouring sequential 4 KiB IOs into one request, a seqiops run counts twice or
//! more the IOs the device could serve unmerged, and a model built from it charges sequential IO
//! half of what it costs. The runs must therefore issue IOs the block layer does not merge. The
//! caller switches merging off where it may (`queue/nomerges=2` on a device the profile owns); where
//! it may not, [`Plan::submit_batch`] 1 submits each IO alone, which io_uring does without a plug,
//! so neighbours never meet in a plug (the kernel tool's fio submits one IO per call the same way).
//! The device's merge counters (`/sys/block/X/stat`) are read around every run, so the result says
//! how many merges there were ([`Merges`]).
//!
//! Jobs: like fio's `--numjobs`, a run may use several engines in parallel (threads, one io_uring
//! each, each on its own equal part of the target). The kernel tool's help advises raising
//! `--numjobs` on fast devices until the device saturates; with [`Plan::max_jobs`] above 1 the first
//! round of each run does that — one job, then one more while the last added at least
//! [`MORE_JOBS_GAIN`] — and the later rounds use the best count. On this 2-vCPU VM a loop device's
//! 4 KiB IOPS grew 2× from one fio job to four at the same per-job depth, against 1.2× for one job
//! at four times the depth: the submitting CPU, not the queue depth, was the limit.
//!
//! Each run is split into [`Plan::rounds`] rounds, interleaved (round 1 of every run, then round 2
//! …), and a coefficient is the best round's figure. Why the best and not the mean: at saturation
//! a run measures a capacity, and anything else on the host (other programs' IO or CPU; on this
//! 2-vCPU machine the engine's thread competes with compilers) can only take from it, so the best
//! round is the closest to what the device gives; interleaving spreads each run over the whole
//! measurement, so a burst of neighbour activity costs each run at most the rounds it overlaps.
//!
//! Without writes (a target the caller may not overwrite) the write side is not measured: it is the
//! measured read side times the write:read ratios of a built-in set ([`WRITE_RATIOS_FROM`], the
//! kernel's default for SSDs), and [`Measured::writes_measured`] says so.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use ioshare_core::{ModelParams, Nanos, NoControl, NSEC_PER_MSEC};
use ioshare_host::DiskStats;
use serde::Serialize;

use crate::error::Result;
use crate::job::{JobSpec, Pattern, TenantSpec};
use crate::report::{LatencyUs, RunReport};
use crate::run::{run, RunOptions};
use crate::target::Target;

/// Name of the built-in set whose write:read ratios stand in for unmeasured writes.
pub const WRITE_RATIOS_FROM: &str = "ssd_dfl";

/// How long and how deep the measurement runs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Length of each run, warm-up included, ns.
    pub duration: Nanos,
    /// Leading part of each run left out of its figures (queues fill, caches settle), ns.
    pub warmup: Nanos,
    /// Queue depth of the 4 KiB runs.
    pub depth: u32,
    /// Block size of the bandwidth runs, bytes.
    pub big_block: u32,
    /// Queue depth of the bandwidth runs.
    pub big_depth: u32,
    /// Rounds each run is split into (interleaved; the best counts).
    pub rounds: u32,
    /// IOs submitted together (1: each alone, so the block layer cannot merge them in a plug).
    pub submit_batch: u32,
    /// Most parallel jobs a run is raised to (1: one job, no raising; see the module comment).
    pub max_jobs: u32,
}

/// Least gain (ratio) one more parallel job must bring for the count to be raised again (the kernel
/// tool's advice, as the issue that asked for it put it: until one more job adds less than 5%).
pub const MORE_JOBS_GAIN: f64 = 1.05;

impl Plan {
    /// The options of one run of this plan.
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            warmup: self.warmup,
            sample_every: self.duration,
            submit_batch: self.submit_batch,
            ..RunOptions::new(self.duration)
        }
    }
}

/// What the device's counters saw during a run's rounds (all of them, warm-up included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Merges {
    /// IOs the block layer merged into a queued request (reads and writes).
    pub merged: u64,
    /// Requests the device completed.
    pub requests: u64,
}

/// One of the six coefficient runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// Large sequential reads.
    Rbps,
    /// 4 KiB sequential reads.
    Rseqiops,
    /// 4 KiB random reads.
    Rrandiops,
    /// Large sequential writes.
    Wbps,
    /// 4 KiB sequential writes.
    Wseqiops,
    /// 4 KiB random writes.
    Wrandiops,
}

impl Step {
    /// The six, in the kernel tool's order.
    pub const ALL: [Step; 6] =
        [Step::Rbps, Step::Rseqiops, Step::Rrandiops, Step::Wbps, Step::Wseqiops, Step::Wrandiops];

    /// The coefficient's name in `io.cost.model`.
    pub fn name(self) -> &'static str {
        match self {
            Step::Rbps => "rbps",
            Step::Rseqiops => "rseqiops",
            Step::Rrandiops => "rrandiops",
            Step::Wbps => "wbps",
            Step::Wseqiops => "wseqiops",
            Step::Wrandiops => "wrandiops",
        }
    }

    /// True for the write runs.
    pub fn writes(self) -> bool {
        matches!(self, Step::Wbps | Step::Wseqiops | Step::Wrandiops)
    }

    /// The job that measures it.
    pub fn job(self, plan: &Plan) -> JobSpec {
        match self {
            Step::Rbps => JobSpec::new(Pattern::Read, plan.big_block, plan.big_depth),
            Step::Rseqiops => JobSpec::new(Pattern::Read, 4096, plan.depth),
            Step::Rrandiops => JobSpec::new(Pattern::RandRead, 4096, plan.depth),
            Step::Wbps => JobSpec::new(Pattern::Write, plan.big_block, plan.big_depth),
            Step::Wseqiops => JobSpec::new(Pattern::Write, 4096, plan.depth),
            Step::Wrandiops => JobSpec::new(Pattern::RandWrite, 4096, plan.depth),
        }
    }

    /// What the run does, for progress lines and tables.
    pub fn describe(self, plan: &Plan) -> String {
        describe(&self.job(plan))
    }
}

/// `4 KiB random reads at QD64`, `128 MiB sequential writes at QD1`.
pub fn describe(job: &JobSpec) -> String {
    let size = size_name(job.block_size);
    let kind = match job.pattern {
        Pattern::Read => "sequential reads",
        Pattern::Write => "sequential writes",
        Pattern::RandRead => "random reads",
        Pattern::RandWrite => "random writes",
        Pattern::RandRw => "random reads and writes",
    };
    let rate = job.rate_iops.map(|r| format!(" capped at {r} IOPS")).unwrap_or_default();
    format!("{size} {kind} at QD{}{rate}", job.iodepth)
}

/// `4 KiB`, `128 MiB`.
pub fn size_name(bytes: u32) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// The fio command that runs `job` in `jobs` parallel jobs as one round of `plan` does, on `path`
/// (named `name`; `size`: its size in bytes, split evenly between the jobs).
pub fn fio_command(name: &str, job: &JobSpec, jobs: u32, plan: &Plan, path: &Path, size: u64) -> String {
    let rw = crate::fio::rw(job.pattern);
    let bs = match job.block_size {
        b if b % (1 << 20) == 0 => format!("{}m", b >> 20),
        b => format!("{}k", b >> 10),
    };
    let rate = job.rate_iops.map(|r| format!(" --rate_iops={}", (r / jobs as u64).max(1))).unwrap_or_default();
    let part = part_size(size, jobs, job.block_size);
    let split = if jobs > 1 { format!(" --size={part} --offset_increment={part}") } else { String::new() };
    format!(
        "fio --name={name} --filename={} --direct=1 --ioengine=io_uring --rw={rw} --bs={bs} --iodepth={} \
         --iodepth_batch_submit={} --numjobs={jobs}{split}{rate} --time_based --runtime={}ms --ramp_time={}ms",
        path.display(),
        job.iodepth,
        plan.submit_batch.min(job.iodepth),
        (plan.duration - plan.warmup) / NSEC_PER_MSEC,
        plan.warmup / NSEC_PER_MSEC
    )
}

/// What the six runs found.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The coefficients (write side derived when not measured).
    pub model: ModelParams,
    /// Whether the write runs took place.
    pub writes_measured: bool,
    /// Each run that took place, with its best round.
    pub runs: Vec<(Step, RunReport)>,
    /// For each run, how far its rounds disagreed: (best − worst) / best of the figure, percent.
    pub spread_pct: Vec<f64>,
    /// For each run, the merges the device counted during its rounds (`None`: no counters given).
    pub merges: Vec<Option<Merges>>,
    /// For each run, the parallel jobs it ran with.
    pub jobs: Vec<u32>,
}

impl Measured {
    /// The report of `step`, if it ran.
    pub fn report(&self, step: Step) -> Option<&RunReport> {
        self.runs.iter().find(|(s, _)| *s == step).map(|(_, r)| r)
    }
}

/// Runs one job alone with no control.
pub fn run_alone(target: &Target, job: JobSpec, plan: &Plan, stop: &AtomicBool) -> Result<RunReport> {
    let tenants = [TenantSpec::new("profile", 100, job)];
    run(target, &tenants, &mut NoControl::new(), &plan.run_options(), stop)
}

/// Bytes of each of `jobs` equal parts of a target of `size` bytes, whole blocks of `block`.
fn part_size(size: u64, jobs: u32, block: u32) -> u64 {
    (size / jobs as u64 / block as u64).max(1) * block as u64
}

/// Most parallel jobs of `block`-sized IOs a target of `size` bytes has parts for (at least 1).
fn most_jobs(size: u64, block: u32, max: u32) -> u32 {
    (size / block as u64).clamp(1, max as u64) as u32
}

/// Runs `job` in `jobs` parallel engines (threads, each with its own ring, each on its own equal
/// part of the target, a rate cap split evenly), no control; one report of them all: IOs and bytes
/// summed, latency percentiles the IO-weighted means of the jobs' (the jobs are alike, so their
/// distributions are too).
pub fn run_jobs(target: &Target, job: &JobSpec, jobs: u32, plan: &Plan, stop: &AtomicBool) -> Result<RunReport> {
    let jobs = most_jobs(target.size(), job.block_size, jobs);
    if jobs <= 1 {
        return run_alone(target, job.clone(), plan, stop);
    }
    let part = part_size(target.size(), jobs, job.block_size);
    let reports: Vec<Result<RunReport>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs as u64)
            .map(|k| {
                let part_job = JobSpec {
                    offset: k * part,
                    size: Some(part),
                    rate_iops: job.rate_iops.map(|r| (r / jobs as u64).max(1)),
                    ..job.clone()
                };
                s.spawn(move || run_alone(target, part_job, plan, stop))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a profile job thread panicked")).collect()
    });
    let reports = reports.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(combine(reports))
}

/// One report of parallel jobs' reports (see [`run_jobs`]).
fn combine(mut reports: Vec<RunReport>) -> RunReport {
    let ios: u64 = reports.iter().map(|r| r.tenants[0].ios).sum::<u64>().max(1);
    let weighted = |f: &dyn Fn(&LatencyUs) -> f64| {
        reports.iter().map(|r| f(&r.tenants[0].lat_us) * r.tenants[0].ios as f64).sum::<f64>() / ios as f64
    };
    let lat_us = LatencyUs {
        p50: weighted(&|l| l.p50),
        p90: weighted(&|l| l.p90),
        p95: weighted(&|l| l.p95),
        p99: weighted(&|l| l.p99),
        p999: weighted(&|l| l.p999),
        max: reports.iter().map(|r| r.tenants[0].lat_us.max).fold(0.0, f64::max),
        mean: weighted(&|l| l.mean),
    };
    let sum = |f: &dyn Fn(&RunReport) -> f64| reports.iter().map(f).sum::<f64>();
    let (iops, bw) = (sum(&|r| r.tenants[0].iops), sum(&|r| r.tenants[0].bw_bytes));
    let (reads, writes) = (sum(&|r| r.tenants[0].reads as f64) as u64, sum(&|r| r.tenants[0].writes as f64) as u64);
    let (dev_iops, dev_bw) = (sum(&|r| r.device.iops), sum(&|r| r.device.bw_bytes));
    let interrupted = reports.iter().any(|r| r.interrupted);
    let mut first = reports.swap_remove(0);
    let t = &mut first.tenants[0];
    (t.ios, t.iops, t.bw_bytes, t.reads, t.writes, t.lat_us) = (ios, iops, bw, reads, writes, lat_us);
    (first.device.iops, first.device.bw_bytes, first.interrupted) = (dev_iops, dev_bw, interrupted);
    first
}

/// One job's rounds, and what the device's counters saw during them.
#[derive(Clone, Debug, Default)]
pub struct Rounds {
    /// Each round's report, in order.
    pub reports: Vec<RunReport>,
    /// Merges over all rounds (`None`: no counters, or unreadable).
    pub merges: Option<Merges>,
    /// Parallel jobs the rounds ran with.
    pub jobs: u32,
}

/// How many parallel jobs each run of [`interleaved`] uses.
#[derive(Clone, Copy)]
pub enum Jobs<'a> {
    /// These counts, one per job.
    Fixed(&'a [u32]),
    /// Raised in the first round from 1 up to [`Plan::max_jobs`] while one more adds at least
    /// [`MORE_JOBS_GAIN`] of `figure` (see the module comment).
    Raised(&'a dyn Fn(&RunReport) -> f64),
}

/// Runs `jobs` in `plan.rounds` interleaved rounds (round 1 of each job, then round 2 …), reading
/// the device counters file `stat` (`/sys/block/X/stat`, if given) around each run;
/// `progress(job index, run index, runs)` is called before each run. Returns each job's rounds.
pub fn interleaved(
    target: &Target,
    plan: &Plan,
    jobs: &[JobSpec],
    counts: Jobs,
    stat: Option<&Path>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(usize, usize, usize),
) -> Result<Vec<Rounds>> {
    let total = jobs.len() * plan.rounds as usize;
    let read = || stat.and_then(|p| std::fs::read_to_string(p).ok()).and_then(|t| DiskStats::parse(&t).ok());
    let mut rounds: Vec<Rounds> = (0..jobs.len())
        .map(|j| Rounds {
            merges: stat.map(|_| Merges::default()),
            jobs: match counts {
                Jobs::Fixed(c) => c[j],
                Jobs::Raised(_) => 1,
            },
            ..Rounds::default()
        })
        .collect();
    for round in 0..plan.rounds as usize {
        for (j, job) in jobs.iter().enumerate() {
            progress(j, round * jobs.len() + j, total);
            let r = &mut rounds[j];
            let mut merges = r.merges;
            let mut counted = |n: u32| -> Result<RunReport> {
                let before = read();
                let report = run_jobs(target, job, n, plan, stop)?;
                merges = match (merges, before, read()) {
                    (Some(m), Some(a), Some(b)) => {
                        let d = b.since(&a);
                        let (merged, requests) = (d.merges[0] + d.merges[1], d.ios[0] + d.ios[1]);
                        Some(Merges { merged: m.merged + merged, requests: m.requests + requests })
                    }
                    _ => None,
                };
                Ok(report)
            };
            let report = match counts {
                Jobs::Raised(figure) if round == 0 => {
                    let (mut best, mut n) = (counted(1)?, 1);
                    while n < most_jobs(target.size(), job.block_size, plan.max_jobs) {
                        let more = counted(n + 1)?;
                        let gain = figure(&more) / figure(&best).max(f64::MIN_POSITIVE);
                        if gain > 1.0 {
                            (best, n) = (more, n + 1);
                        }
                        if gain < MORE_JOBS_GAIN {
                            break;
                        }
                    }
                    r.jobs = n;
                    best
                }
                _ => counted(r.jobs)?,
            };
            r.merges = merges;
            r.reports.push(report);
        }
    }
    Ok(rounds)
}

/// Measures the six coefficients (the three read ones only unless `writes`), reading the device
/// counters `stat` around each run (see [`interleaved`]); `progress(step, i, n)` is called before
/// each of the n runs.
pub fn measure(
    target: &Target,
    plan: &Plan,
    writes: bool,
    stat: Option<&Path>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Step, usize, usize),
) -> Result<Measured> {
    let steps: Vec<Step> = Step::ALL.into_iter().filter(|s| writes || !s.writes()).collect();
    let jobs: Vec<JobSpec> = steps.iter().map(|s| s.job(plan)).collect();
    let figure = |step: Step, r: &RunReport| {
        let t = &r.tenants[0];
        if matches!(step, Step::Rbps | Step::Wbps) {
            (t.bw_bytes.round() as u64).max(4096)
        } else {
            (t.iops.round() as u64).max(1)
        }
    };
    // Bandwidth and IOPS alike: more jobs are worth it when they move more bytes.
    let moved = |r: &RunReport| r.tenants[0].bw_bytes;
    let rounds =
        interleaved(target, plan, &jobs, Jobs::Raised(&moved), stat, stop, &mut |j, i, n| progress(steps[j], i, n))?;
    let merges = rounds.iter().map(|r| r.merges).collect();
    let counts = rounds.iter().map(|r| r.jobs).collect();
    let mut spread_pct = Vec::new();
    let runs: Vec<(Step, RunReport)> = steps
        .iter()
        .zip(rounds)
        .map(|(&step, Rounds { reports, .. })| {
            spread_pct.push(spread(reports.iter().map(|r| figure(step, r) as f64)));
            let best = reports.into_iter().max_by_key(|r| figure(step, r)).expect("at least one round");
            (step, best)
        })
        .collect();
    let value = |step: Step| runs.iter().find(|(s, _)| *s == step).map(|(s, r)| figure(*s, r));
    let (rbps, rseqiops, rrandiops) =
        (value(Step::Rbps).unwrap_or(1), value(Step::Rseqiops).unwrap_or(1), value(Step::Rrandiops).unwrap_or(1));
    let model = match (value(Step::Wbps), value(Step::Wseqiops), value(Step::Wrandiops)) {
        (Some(wbps), Some(wseqiops), Some(wrandiops)) => {
            ModelParams { rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops }
        }
        _ => with_preset_writes(ModelParams { rbps, rseqiops, rrandiops, wbps: 0, wseqiops: 0, wrandiops: 0 }),
    };
    Ok(Measured { model, writes_measured: writes, runs, spread_pct, merges, jobs: counts })
}

/// (largest − smallest) / largest of `values`, percent; 0 for fewer than two.
pub fn spread(values: impl Iterator<Item = f64>) -> f64 {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi > 0.0 && lo.is_finite() {
        (hi - lo) / hi * 100.0
    } else {
        0.0
    }
}

/// `read`'s read side with a write side in the proportions of [`WRITE_RATIOS_FROM`].
pub fn with_preset_writes(read: ModelParams) -> ModelParams {
    let p = ModelParams::preset(WRITE_RATIOS_FROM).expect("built-in set");
    let scale = |measured: u64, pr: u64, pw: u64| ((measured as f64 * pw as f64 / pr as f64).round() as u64).max(1);
    ModelParams {
        wbps: scale(read.rbps, p.rbps, p.wbps),
        wseqiops: scale(read.rseqiops, p.rseqiops, p.wseqiops),
        wrandiops: scale(read.rrandiops, p.rrandiops, p.wrandiops),
        ..read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::NSEC_PER_SEC;

    #[test]
    fn unmeasured_writes_keep_the_preset_ratios() {
        let p = ModelParams::SSD_DFL;
        // The preset itself maps to itself, and a device twice as fast gets twice the write side.
        assert_eq!(with_preset_writes(p), p);
        let doubled = with_preset_writes(ModelParams { wbps: 0, wseqiops: 0, wrandiops: 0, ..p.scaled(2.0) });
        assert_eq!(doubled, p.scaled(2.0));
    }

    #[test]
    fn parallel_jobs_sum_their_ios_and_weigh_their_latencies() {
        let report = |ios: u64, p50: f64| RunReport {
            controller: "none".into(),
            window_s: 1.0,
            interrupted: false,
            tenants: vec![crate::TenantReport {
                ios,
                iops: ios as f64,
                bw_bytes: ios as f64 * 4096.0,
                reads: ios,
                lat_us: LatencyUs { p50, max: p50 * 2.0, ..LatencyUs::default() },
                ..Default::default()
            }],
            device: Default::default(),
            cpu: Default::default(),
            controller_series: Vec::new(),
        };
        let r = combine(vec![report(300, 100.0), report(100, 500.0)]);
        let t = &r.tenants[0];
        assert_eq!((t.ios, t.iops, t.bw_bytes, t.reads), (400, 400.0, 400.0 * 4096.0, 400));
        assert_eq!((t.lat_us.p50, t.lat_us.max), (200.0, 1000.0));
        // Parts in whole blocks: 1 GiB in three parts of 4 KiB blocks, and at least one block.
        assert_eq!(part_size(1 << 30, 3, 4096), 357_912_576);
        assert_eq!((most_jobs(256 << 20, 128 << 20, 8), most_jobs(1 << 20, 1 << 20, 8)), (2, 1));
        assert_eq!(most_jobs(1 << 30, 4096, 8), 8);
    }

    #[test]
    fn spread_is_relative_to_the_largest() {
        assert_eq!(spread([80.0, 100.0, 90.0].into_iter()), 20.0);
        assert_eq!(spread([5.0].into_iter()), 0.0);
        assert_eq!(spread(std::iter::empty()), 0.0);
    }

    #[test]
    fn descriptions_name_size_pattern_and_depth() {
        let plan = Plan {
            duration: 3 * NSEC_PER_SEC,
            warmup: NSEC_PER_SEC / 2,
            depth: 64,
            big_block: 128 << 20,
            big_depth: 1,
            rounds: 1,
            submit_batch: 1,
            max_jobs: 4,
        };
        assert_eq!(Step::Rbps.describe(&plan), "128 MiB sequential reads at QD1");
        assert_eq!(Step::Wrandiops.describe(&plan), "4 KiB random writes at QD64");
        let capped = JobSpec { rate_iops: Some(900), ..Step::Rrandiops.job(&plan) };
        assert_eq!(describe(&capped), "4 KiB random reads at QD64 capped at 900 IOPS");
        let fio = fio_command("rseqiops", &Step::Rseqiops.job(&plan), 1, &plan, Path::new("/dev/loop3"), 1 << 30);
        for part in ["--filename=/dev/loop3", "--rw=read ", "--bs=4k ", "--iodepth=64 ", "--iodepth_batch_submit=1 "] {
            assert!(fio.contains(part), "{part}: {fio}");
        }
        assert!(fio.contains("--numjobs=1 --time_based --runtime=2500ms --ramp_time=500ms"), "{fio}");
        let big = fio_command("rbps", &Step::Rbps.job(&plan), 3, &plan, Path::new("f"), 1 << 30);
        // Three jobs, each on a third of the target in whole 128 MiB blocks (2 of them: 256 MiB).
        assert!(big.contains("--bs=128m --iodepth=1 --iodepth_batch_submit=1 --numjobs=3"), "{big}");
        assert!(big.contains(" --size=268435456 --offset_increment=268435456 "), "{big}");
    }
}
