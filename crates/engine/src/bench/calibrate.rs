//! A quick measurement of the target, before the scenarios: the six numbers of IOCost's linear cost
//! model, latency targets, and the maximum 4 KiB random-read IOPS the verdicts refer to.
//!
//! Why measure rather than scale a built-in model: a file on a virtual disk behaves like no built-in
//! set (here sequential and random 4 KiB reads cost about the same, writes may be cheaper than reads
//! thanks to a host cache), and the mixed-cost scenario is only meaningful with the device's own
//! ratios. The kernel's `iocost_coef_gen` saturates the device with the same six jobs; this does it
//! in 0.6 s each (a later profiling command will measure longer and more carefully). Latency targets
//! follow the shape of resctl-bench's (1.5 × a percentile measured under load), judged at the median:
//! 1.5 × the read and write p50 at saturation (queue depth 32), so that IOCost lowers vrate when the
//! device is driven well past the depth that saturates it. Why p50 and not resctl's p95: the kernel
//! makes the planning period 10 × the target at p50 but 2 × at ≥ p90; with sub-millisecond targets
//! the latter is the 1 ms minimum, ~80 completions on this disk, and on a virtual disk whose latency
//! jumps with the host that is too few: vrate swung 70–104% and two 2:1 readers split 1.6:1; at p50
//! (5 ms periods) 1.92–1.95:1.
//!
//! A step that comes out implausibly low — under a tenth of the 4 KiB random-read rate, in IOPS for
//! the 4 KiB steps or bytes/s for the 1 MiB ones, which no disk's sequential or write path is — is
//! measured again (up to [`TRIES`] times, the best kept): in the QEMU lab guest a stalled vCPU once
//! made the sequential-read step report 1 IOPS, and the resulting model charged about a second of
//! device time for every random read that happened to land near the previous one, so IOCost held
//! every IO for seconds.

use std::sync::atomic::AtomicBool;

use ioshare_core::iocost::qos::QosParams;
use ioshare_core::{ModelConfig, ModelParams, NoControl, NSEC_PER_MSEC};
use serde::Serialize;

use crate::error::Result;
use crate::job::{JobSpec, Pattern, TenantSpec};
use crate::report::RunReport;
use crate::run::{run, RunOptions};
use crate::target::Target;

/// What the suite measured about the target.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// 4 KiB random reads per second at queue depth [`Calibration::device_depth`], no control.
    pub max_iops: f64,
    /// The device queue depth the scenarios' ioshare runs allow (the depth `max_iops` was measured
    /// at): IOs released beyond it wait for a slot in the engine, which IOCost sees as rq-wait, the
    /// kernel's saturation signal for a device whose own queue is too deep to show it.
    pub device_depth: u32,
    /// The measured cost model.
    pub model: ModelParams,
    /// The model as an `io.cost.model` line.
    pub model_line: String,
    /// Latency QoS for IOCost.
    pub qos: QosParams,
}

/// Length of each measurement run.
const STEP: u64 = 600 * NSEC_PER_MSEC;
/// Queue depth of the 4 KiB measurements: where virtual and flash disks reach their IOPS.
const DEPTH: u32 = 32;
/// Latency percentile IOCost judges, ppm (p50; see the module comment).
const LAT_PPM: u32 = 500_000;
/// Latency target = this × the p50 at saturation (SPEC §7's "× 1.5").
const LAT_FACTOR: f64 = 1.5;
/// How often an implausibly low step is measured (see the module comment).
const TRIES: usize = 3;
/// A step below this share of the random-read rate is implausible.
const PLAUSIBLE: f64 = 0.1;

fn measure_one(target: &Target, job: JobSpec, stop: &AtomicBool) -> Result<RunReport> {
    let tenants = [TenantSpec::new("calibrate", 100, job)];
    let opts = RunOptions { duration: STEP, warmup: STEP / 6, sample_every: STEP, device_depth: 0 };
    run(target, &tenants, &mut NoControl::new(), &opts, stop)
}

/// Measures `job`, again while its bytes/s stay below `floor` (at most [`TRIES`] runs); the best run.
fn measure_plausible(target: &Target, job: JobSpec, floor: f64, stop: &AtomicBool) -> Result<RunReport> {
    let mut best = measure_one(target, job.clone(), stop)?;
    for _ in 1..TRIES {
        if best.tenants[0].bw_bytes >= floor || stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let again = measure_one(target, job.clone(), stop)?;
        if again.tenants[0].bw_bytes > best.tenants[0].bw_bytes {
            best = again;
        }
    }
    Ok(best)
}

/// Measures the target (about 4 s).
pub fn measure(target: &Target, stop: &AtomicBool) -> Result<Calibration> {
    let iops = |r: &RunReport| (r.tenants[0].iops.round() as u64).max(1);
    let bps = |r: &RunReport| (r.tenants[0].bw_bytes.round() as u64).max(4096);
    let rrand = measure_one(target, JobSpec::new(Pattern::RandRead, 4096, DEPTH), stop)?;
    let floor = rrand.tenants[0].bw_bytes * PLAUSIBLE;
    let step = |job: JobSpec| measure_plausible(target, job, floor, stop);
    let rseq = step(JobSpec::new(Pattern::Read, 4096, DEPTH))?;
    let rbig = step(JobSpec::new(Pattern::Read, 1 << 20, 8))?;
    let wrand = step(JobSpec::new(Pattern::RandWrite, 4096, DEPTH))?;
    let wseq = step(JobSpec::new(Pattern::Write, 4096, DEPTH))?;
    let wbig = step(JobSpec::new(Pattern::Write, 1 << 20, 8))?;
    let model = ModelParams {
        rbps: bps(&rbig),
        rseqiops: iops(&rseq),
        rrandiops: iops(&rrand),
        wbps: bps(&wbig),
        wseqiops: iops(&wseq),
        wrandiops: iops(&wrand),
    };
    let qos = QosParams {
        rppm: LAT_PPM,
        rlat_us: ((rrand.tenants[0].lat_us.p50 * LAT_FACTOR).ceil() as u64).max(1),
        wppm: LAT_PPM,
        wlat_us: ((wrand.tenants[0].lat_us.p50 * LAT_FACTOR).ceil() as u64).max(1),
        ..QosParams::default()
    };
    let model_line =
        ModelConfig { device: None, ctrl: ioshare_core::iocost::line::Ctrl::User, params: model }.to_string();
    Ok(Calibration { max_iops: rrand.tenants[0].iops, device_depth: DEPTH, model, model_line, qos })
}
