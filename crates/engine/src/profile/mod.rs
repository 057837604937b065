//! `ioshare profile`: measure a device's IOCost model and suggest latency targets, the way the
//! kernel's `iocost_coef_gen.py` and resctl-bench's `iocost-params` do, on the engine.
//!
//! Steps:
//! 1. The target: a directory gets a temporary file of [`ProfileOptions::temp_size`] bytes, written
//!    in full (so reads reach the device) and removed afterwards; a file or block device is measured
//!    in place. With [`ProfileOptions::loop_device`] (root) a loop device with direct IO is put over
//!    the file and that is measured, so the lines name the loop device.
//! 2. The model: the six saturating runs of [`measure`] (the kernel tool's 128 MiB sequential at
//!    QD1, 4 KiB sequential and 4 KiB random at QD64, reads and writes), no controller, with IOs the
//!    block layer does not merge: on a whole disk the profile owns, `queue/nomerges=2` for the
//!    runs (recorded in [`ProfileOptions::state_dir`] first, restored after, and by the next
//!    profile after a crash); elsewhere each IO submitted alone. The merges the disk counted are
//!    reported per run.
//! 3. The QoS suggestion, resctl-bench's rule: 4 KiB random reads (writes) at the same depth capped
//!    at 90% of the measured `rrandiops` (`wrandiops`); the target is 1.5 × the latency percentile
//!    the kernel would judge — p95 on a non-rotational device, p50 on a rotational one (as sysfs
//!    `queue/rotational` says; virtio disks and loop devices often claim rotational) — in the
//!    median of the interleaved rounds, rounded up to whole µs; vrate bounds min=60% max=100%,
//!    resctl's defaults.
//!
//! Never destroys data: writing runs go only to the file profile created, or to a file or device
//! the caller named with [`ProfileOptions::destructive`]; a block device is then opened with
//! O_EXCL, which the kernel refuses while it is mounted. An existing file or device without
//! `destructive` is refused before any IO unless [`ProfileOptions::read_only`] asks for reads only;
//! then the target is opened read-only and the write coefficients are derived from the reads and
//! the write:read ratios of a built-in set ([`measure::WRITE_RATIOS_FROM`]), and said so.

pub mod disk;
pub mod measure;
pub mod prepare;
mod qos;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::{ModelConfig, ModelParams, QosConfig, QosParams, NSEC_PER_MSEC, NSEC_PER_SEC};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::job::JobSpec;
use crate::report::{LatencyUs, RunReport};
use disk::Disk;
use measure::{Merges, Plan};

/// Most parallel jobs a run is raised to: the kernel tool raises `--numjobs` until the device
/// saturates; beyond twice the CPUs of a small machine more threads only queue for them.
pub const MAX_JOBS: u32 = 8;
/// Block size of the bandwidth runs: the kernel tool's `--seqio-block-mb` default (128 MiB, at QD1).
pub const BIG_BLOCK: u32 = 128 << 20;
/// Smallest target profile measures (large sequential runs must not wrap every few milliseconds).
pub const MIN_PROFILE_SIZE: u64 = 64 << 20;
/// Share of the measured random IOPS the latency runs are capped at (resctl-bench: 90%).
pub const QOS_LOAD: f64 = 0.9;
/// Latency target = this × the percentile latency at [`QOS_LOAD`] (resctl-bench: 1.5).
pub const QOS_FACTOR: f64 = 1.5;
/// The name of the run whose latency gives the suggested read target.
pub const READ_LATENCY_RUN: &str = "rlat";
/// Rounds disagreeing by more than this (percent) get a note.
pub const SPREAD_WARN_PCT: f64 = 10.0;
/// Suggested vrate bounds, percent (resctl-bench's `min=60 max=100`).
pub const QOS_VRATE_PCT: (u32, u32) = (60, 100);
/// Where profile records the device settings it changes, until it restores them (a tmpfs: the
/// settings do not outlive a reboot either).
pub const STATE_DIR: &str = "/run/ioshare-profile";

/// What to measure and how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileOptions {
    /// How long and how deep the runs are (4 KiB runs at the kernel tool's QD64 by default), in
    /// interleaved rounds (see [`measure`]).
    pub plan: Plan,
    /// Measure reads only (any target; writes derived from a built-in set).
    pub read_only: bool,
    /// Allow writing to an existing file or an unmounted block device (its data is destroyed).
    pub destructive: bool,
    /// Measure through a loop device (direct IO) over the file; needs root.
    pub loop_device: bool,
    /// Size of the temporary file created when the target is a directory, bytes.
    pub temp_size: u64,
    /// Where changed device settings are recorded until restored ([`STATE_DIR`]).
    pub state_dir: PathBuf,
}

impl Default for ProfileOptions {
    /// The full profile: 8 runs in 4 rounds of 3 s (0.5 s warm-up) — about 100 s with writes, 50 s
    /// read-only — on a 2 GiB temporary file (random reads over it do not stay in a device cache
    /// of a few hundred MiB); bandwidth runs as the kernel tool's, 128 MiB blocks at QD1.
    fn default() -> Self {
        ProfileOptions {
            plan: Plan {
                duration: 3 * NSEC_PER_SEC,
                warmup: NSEC_PER_SEC / 2,
                depth: 64,
                big_block: BIG_BLOCK,
                big_depth: 1,
                rounds: 4,
                submit_batch: crate::run::SUBMIT_BATCH,
                max_jobs: MAX_JOBS,
            },
            read_only: false,
            destructive: false,
            loop_device: false,
            temp_size: 2 << 30,
            state_dir: PathBuf::from(STATE_DIR),
        }
    }
}

impl ProfileOptions {
    /// The short mode for tests and a first look: one round of 1 s (0.2 s warm-up) per run, a
    /// 256 MiB temporary file.
    pub fn quick() -> Self {
        let full = ProfileOptions::default();
        ProfileOptions {
            plan: Plan { duration: NSEC_PER_SEC, warmup: 200 * NSEC_PER_MSEC, rounds: 1, ..full.plan },
            temp_size: 256 << 20,
            ..full
        }
    }

    /// Checks the options before anything is created.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let p = &self.plan;
        if p.duration < NSEC_PER_SEC / 2 || p.duration > 600 * NSEC_PER_SEC {
            return Err("profile duration must be between 0.5 and 600 seconds per round".into());
        }
        if !(1..=100).contains(&p.rounds) {
            return Err("rounds must be between 1 and 100".into());
        }
        if p.warmup * 2 > p.duration {
            return Err("the warm-up must be at most half of each run".into());
        }
        if !(1..=MAX_JOBS).contains(&p.max_jobs) {
            return Err(format!("jobs must be between 1 and {MAX_JOBS}"));
        }
        if !(1..=1024).contains(&p.depth) || !(1..=256).contains(&p.big_depth) {
            return Err("queue depths must be between 1 and 1024 (4 KiB runs) and 1 and 256 (bandwidth runs)".into());
        }
        if p.big_block < 64 << 10 || p.big_block > BIG_BLOCK || p.big_block % 4096 != 0 {
            return Err("the bandwidth runs' block size must be a multiple of 4 KiB from 64 KiB to 128 MiB".into());
        }
        if self.temp_size < MIN_PROFILE_SIZE {
            return Err(format!("the temporary file must hold at least {} MiB", MIN_PROFILE_SIZE >> 20));
        }
        if self.read_only && self.destructive {
            return Err("--read-only and --destructive contradict each other: give one".into());
        }
        Ok(())
    }
}

/// One measurement run, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileRun {
    /// What it determined (`rbps` … `wrandiops`, `rlat`, `wlat`).
    pub name: &'static str,
    /// The job (`4 KiB random reads at QD64`).
    pub job: String,
    /// Parallel jobs it ran with (each at the job's depth, on its own part of the target).
    pub jobs: u32,
    /// IOs per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Latency percentiles, µs.
    pub lat_us: LatencyUs,
    /// How far the rounds disagreed, percent: (best − worst) / best of the coefficient (of the
    /// judged percentile for `rlat`/`wlat`). High values mean a busy host or a variable device.
    pub spread_pct: f64,
    /// IOs the disk merged into queued requests during the run's rounds, and requests it completed
    /// (its `/sys/block/X/stat`; other IO on the same disk counts too). `None`: no counters.
    pub merges: Option<Merges>,
    /// The fio command that does one round of the run.
    pub fio: String,
}

/// How the runs were made: enough to repeat them with fio (each run's command is in
/// [`ProfileRun::fio`]).
#[derive(Clone, Debug, Serialize)]
pub struct Method {
    /// Whether the disk's merging was switched off for the runs (`queue/nomerges=2`).
    pub merges_off: bool,
    /// How merges were kept out, in words.
    pub merges: String,
    /// IOs per submission (1: each alone, never plugged).
    pub submit_batch: u32,
    /// Most parallel jobs a run was raised to (each run's count is in [`ProfileRun::jobs`]).
    pub max_jobs: u32,
    /// The IO interface: `io_uring, O_DIRECT`.
    pub io: &'static str,
    /// Block size and queue depth of the bandwidth runs.
    pub big_block: u32,
    /// Queue depth of the bandwidth runs.
    pub big_depth: u32,
    /// Queue depth of the 4 KiB runs.
    pub depth: u32,
    /// Rounds per run (interleaved; the best counts for the model, the median for latencies).
    pub rounds: u32,
    /// Length of a round, seconds.
    pub round_s: f64,
    /// Leading part of a round not counted, seconds.
    pub warmup_s: f64,
    /// The disk's IO scheduler during the runs, if it has one.
    pub scheduler: Option<String>,
}

/// What profile found.
#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    /// The path given.
    pub target: PathBuf,
    /// What IO went to: the target, the temporary file, or the loop device.
    pub measured: PathBuf,
    /// `file`, `block device`, or `loop device over a file`.
    pub kind: &'static str,
    /// Size of what was measured, bytes.
    pub size: u64,
    /// Whether profile created (and removed) the file.
    pub created: bool,
    /// The whole disk the lines are for, when there is one.
    pub disk: Option<Disk>,
    /// The cost model.
    pub model: ModelParams,
    /// It as an `io.cost.model` line (with `MAJ:MIN` when the disk is known).
    pub model_line: String,
    /// Whether the write coefficients were measured (false: derived, see the notes).
    pub writes_measured: bool,
    /// How the runs were made.
    pub method: Method,
    /// The suggested latency targets and vrate bounds.
    pub qos: QosParams,
    /// They as an `io.cost.qos` line.
    pub qos_line: String,
    /// Every run, in order.
    pub runs: Vec<ProfileRun>,
    /// What the reader should know (derived values, the disk the lines name).
    pub notes: Vec<String>,
}

/// Measures `target` (a directory, file or block device; see the module comment). `progress` gets
/// a status line before each run and while a temporary file is written. Everything profile created
/// (temporary file, loop device) is removed before it returns, on every path; an interrupt
/// (`stop`) ends it with [`Error::Interrupted`].
pub fn profile(
    target: &Path,
    opts: &ProfileOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<Profile> {
    opts.validate().map_err(Error::InvalidOptions)?;
    let repaired = prepare::repair(&opts.state_dir)?;
    let mut prepared = prepare::prepare(target, opts, stop, progress)?;
    prepared.notes.splice(0..0, repaired);
    profile_prepared(target, &mut prepared, opts, stop, progress)
}

/// [`profile`] on a target already [prepared](prepare::prepare) with the same `opts` (validated):
/// the caller keeps the target (and what was made for it) open after the profile. The prepared
/// notes move into the result.
pub fn profile_prepared(
    target: &Path,
    prepared: &mut prepare::Prepared,
    opts: &ProfileOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<Profile> {
    let writes = !opts.read_only;
    let mut plan = Plan { submit_batch: prepared.submit_batch.min(opts.plan.submit_batch), ..opts.plan };
    let size = prepared.dev.size();
    if (plan.big_block as u64) * 2 > size {
        plan.big_block = ((size / 2).next_power_of_two() / 2).max(64 << 10) as u32;
        prepared.notes.push(format!(
            "bandwidth runs with {} blocks: the target holds less than two of {}",
            measure::size_name(plan.big_block),
            measure::size_name(opts.plan.big_block)
        ));
    }
    let total = if writes { 8 } else { 4 } * plan.rounds as usize;
    let started = Instant::now();
    let mut status = |i: usize, name: &str, job: &str| {
        let left = (total - i) as u64 * opts.plan.duration / NSEC_PER_SEC;
        progress(&format!(
            "[run {}/{total} · {:.0}s elapsed · ~{left}s left] {name}: {job}",
            i + 1,
            started.elapsed().as_secs_f64()
        ));
    };
    let dev = &prepared.dev;
    let stat = prepared.stat.as_deref();
    let measured = measure::measure(dev, &plan, writes, stat, stop, &mut |step, i, _| {
        status(i, step.name(), &step.describe(&plan))
    })?;
    check_stop(stop)?;
    let mut runs: Vec<ProfileRun> = measured
        .runs
        .iter()
        .zip(measured.spread_pct.iter().zip(&measured.merges).zip(&measured.jobs))
        .map(|((step, r), ((&spread, &merges), &jobs))| {
            profile_run(step.name(), &step.job(&plan), jobs, &plan, dev, r, spread, merges)
        })
        .collect();
    let model = measured.model;
    let mut notes = std::mem::take(&mut prepared.notes);
    if !writes {
        notes.push(format!(
            "write coefficients not measured (--read-only): the measured read side × the write:read ratios of the \
             built-in set {}",
            measure::WRITE_RATIOS_FROM
        ));
    }
    let rotational = prepared.disk.as_ref().and_then(|d| d.rotational) == Some(true);
    let first = measured.runs.len() * plan.rounds as usize;
    let jobs_of = |step: measure::Step| {
        measured.runs.iter().zip(&measured.jobs).find(|((s, _), _)| *s == step).map_or(1, |(_, &n)| n)
    };
    let (qos, lat_runs) =
        qos::suggest(dev, &plan, stat, &jobs_of, &model, rotational, writes, stop, &mut |i, name, job| {
            status(first + i, name, job)
        })?;
    runs.extend(lat_runs);
    if !writes {
        notes.push("write latency target not measured (--read-only): set equal to the read target".into());
    }
    if let Some(worst) =
        runs.iter().filter(|r| r.spread_pct > SPREAD_WARN_PCT).max_by(|a, b| a.spread_pct.total_cmp(&b.spread_pct))
    {
        notes.push(format!(
            "rounds disagreed by up to {:.0}% ({}): the host was busy{} or the device varies; re-run when it is \
             quiet, or with more --rounds",
            worst.spread_pct,
            worst.name,
            host_load().map_or(String::new(), |l| format!(" (load average {l})"))
        ));
    }
    if let Some(worst) = runs.iter().filter_map(|r| Some((r, r.merges?))).max_by_key(|(_, m)| m.merged) {
        if worst.1.merged > 0 {
            notes.push(format!(
                "the disk merged {} IOs during {} ({}): its coefficient counts merged requests{}",
                worst.1.merged,
                worst.0.name,
                worst.0.job,
                if prepared.kind == "file" { " (or other IO on the same disk merged)" } else { "" }
            ));
        }
    }
    let device = prepared.disk.as_ref().map(|d| d.dev);
    let method = Method {
        merges_off: prepared.merges_off,
        merges: prepared.merges.clone(),
        submit_batch: plan.submit_batch,
        max_jobs: plan.max_jobs,
        io: "io_uring, O_DIRECT",
        big_block: plan.big_block,
        big_depth: plan.big_depth,
        depth: plan.depth,
        rounds: plan.rounds,
        round_s: plan.duration as f64 / NSEC_PER_SEC as f64,
        warmup_s: plan.warmup as f64 / NSEC_PER_SEC as f64,
        scheduler: prepared.scheduler.clone(),
    };
    Ok(Profile {
        target: target.to_path_buf(),
        measured: prepared.measured.clone(),
        kind: prepared.kind,
        size: dev.size(),
        created: prepared.created,
        disk: prepared.disk.clone(),
        model,
        model_line: ModelConfig { device, ctrl: Ctrl::User, params: model }.to_string(),
        writes_measured: writes,
        method,
        qos,
        qos_line: QosConfig { device, ctrl: Ctrl::User, params: qos }.to_string(),
        runs,
        notes,
    })
}

/// The host's 1-minute load average and CPU count (`2.9 on 2 CPUs`), when /proc tells: how busy
/// the host was while the rounds ran — profile's figures are as good as the quietest round.
fn host_load() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let one: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    Some(format!("{one:.1} on {cpus} CPUs"))
}

pub(crate) fn check_stop(stop: &AtomicBool) -> Result<()> {
    if stop.load(Ordering::Relaxed) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn profile_run(
    name: &'static str,
    job: &JobSpec,
    jobs: u32,
    plan: &Plan,
    dev: &crate::Target,
    r: &RunReport,
    spread_pct: f64,
    merges: Option<Merges>,
) -> ProfileRun {
    let t = &r.tenants[0];
    ProfileRun {
        name,
        job: measure::describe(job),
        jobs,
        iops: t.iops,
        bw_bytes: t.bw_bytes,
        lat_us: t.lat_us.clone(),
        spread_pct,
        merges,
        fio: measure::fio_command(name, job, jobs, plan, dev.path(), dev.size()),
    }
}
