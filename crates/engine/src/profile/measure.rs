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
use crate::report::RunReport;
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
}

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

/// The fio command that runs `job` as one round of `plan` does, on `path` (named `name`).
pub fn fio_command(name: &str, job: &JobSpec, plan: &Plan, path: &Path) -> String {
    let rw = match job.pattern {
        Pattern::Read => "read",
        Pattern::Write => "write",
        Pattern::RandRead => "randread",
        Pattern::RandWrite => "randwrite",
        Pattern::RandRw => "randrw",
    };
    let bs = match job.block_size {
        b if b % (1 << 20) == 0 => format!("{}m", b >> 20),
        b => format!("{}k", b >> 10),
    };
    let rate = job.rate_iops.map(|r| format!(" --rate_iops={r}")).unwrap_or_default();
    format!(
        "fio --name={name} --filename={} --direct=1 --ioengine=io_uring --rw={rw} --bs={bs} --iodepth={} \
         --iodepth_batch_submit={} --numjobs=1{rate} --time_based --runtime={}ms --ramp_time={}ms",
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

/// One job's rounds, and what the device's counters saw during them.
#[derive(Clone, Debug, Default)]
pub struct Rounds {
    /// Each round's report, in order.
    pub reports: Vec<RunReport>,
    /// Merges over all rounds (`None`: no counters, or unreadable).
    pub merges: Option<Merges>,
}

/// Runs `jobs` in `plan.rounds` interleaved rounds (round 1 of each job, then round 2 …), reading
/// the device counters file `stat` (`/sys/block/X/stat`, if given) around each run;
/// `progress(job index, run index, runs)` is called before each run. Returns each job's rounds.
pub fn interleaved(
    target: &Target,
    plan: &Plan,
    jobs: &[JobSpec],
    stat: Option<&Path>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(usize, usize, usize),
) -> Result<Vec<Rounds>> {
    let total = jobs.len() * plan.rounds as usize;
    let read = || stat.and_then(|p| std::fs::read_to_string(p).ok()).and_then(|t| DiskStats::parse(&t).ok());
    let mut rounds: Vec<Rounds> =
        jobs.iter().map(|_| Rounds { merges: stat.map(|_| Merges::default()), ..Rounds::default() }).collect();
    for round in 0..plan.rounds as usize {
        for (j, job) in jobs.iter().enumerate() {
            progress(j, round * jobs.len() + j, total);
            let before = read();
            rounds[j].reports.push(run_alone(target, job.clone(), plan, stop)?);
            rounds[j].merges = match (rounds[j].merges, before, read()) {
                (Some(m), Some(a), Some(b)) => {
                    let d = b.since(&a);
                    Some(Merges {
                        merged: m.merged + d.merges[0] + d.merges[1],
                        requests: m.requests + d.ios[0] + d.ios[1],
                    })
                }
                _ => None,
            };
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
    let rounds = interleaved(target, plan, &jobs, stat, stop, &mut |j, i, n| progress(steps[j], i, n))?;
    let merges = rounds.iter().map(|r| r.merges).collect();
    let figure = |step: Step, r: &RunReport| {
        let t = &r.tenants[0];
        if matches!(step, Step::Rbps | Step::Wbps) {
            (t.bw_bytes.round() as u64).max(4096)
        } else {
            (t.iops.round() as u64).max(1)
        }
    };
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
    Ok(Measured { model, writes_measured: writes, runs, spread_pct, merges })
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
        };
        assert_eq!(Step::Rbps.describe(&plan), "128 MiB sequential reads at QD1");
        assert_eq!(Step::Wrandiops.describe(&plan), "4 KiB random writes at QD64");
        let capped = JobSpec { rate_iops: Some(900), ..Step::Rrandiops.job(&plan) };
        assert_eq!(describe(&capped), "4 KiB random reads at QD64 capped at 900 IOPS");
        let fio = fio_command("rseqiops", &Step::Rseqiops.job(&plan), &plan, Path::new("/dev/loop3"));
        for part in ["--filename=/dev/loop3", "--rw=read ", "--bs=4k ", "--iodepth=64 ", "--iodepth_batch_submit=1 "] {
            assert!(fio.contains(part), "{part}: {fio}");
        }
        assert!(fio.contains("--runtime=2500ms --ramp_time=500ms"), "{fio}");
        assert!(fio_command("rbps", &Step::Rbps.job(&plan), &plan, Path::new("f")).contains("--bs=128m --iodepth=1"));
    }
}
