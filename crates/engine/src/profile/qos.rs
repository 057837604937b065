//! The QoS suggestion, resctl-bench's `iocost-params` rule: 4 KiB random reads (writes) at the
//! model runs' depth, capped at [`QOS_LOAD`] of the measured random IOPS, in interleaved rounds;
//! the latency target is ⌈[`QOS_FACTOR`] × the judged percentile of the median round⌉ (p95 on a
//! non-rotational disk, p50 on a rotational one, as the kernel tool chooses); vrate bounds
//! [`QOS_VRATE_PCT`]. Without writes the write target is the read one.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use ioshare_core::{ModelParams, QosParams};

use super::measure::{self, Jobs, Plan, Step};
use super::{check_stop, profile_run, ProfileRun, QOS_FACTOR, QOS_LOAD, QOS_VRATE_PCT, READ_LATENCY_RUN};
use crate::error::Result;
use crate::job::JobSpec;
use crate::report::RunReport;
use crate::target::Target;

/// Runs the capped latency runs (with the parallel jobs `jobs_of` the random run) and derives the
/// QoS parameters; returns them with the runs (the median round of each; merges counted in the
/// device counters `stat`). `status(i, name, job)` is called before each run.
#[allow(clippy::too_many_arguments)]
pub(super) fn suggest(
    dev: &Target,
    plan: &Plan,
    stat: Option<&Path>,
    jobs_of: &dyn Fn(Step) -> u32,
    model: &ModelParams,
    rotational: bool,
    writes: bool,
    stop: &AtomicBool,
    status: &mut dyn FnMut(usize, &str, &str),
) -> Result<(QosParams, Vec<ProfileRun>)> {
    let pct: u32 = if rotational { 50 } else { 95 };
    let percentile = |r: &RunReport| {
        let lat = &r.tenants[0].lat_us;
        if rotational {
            lat.p50
        } else {
            lat.p95
        }
    };
    let steps: Vec<Step> = [Step::Rrandiops, Step::Wrandiops].into_iter().filter(|s| writes || !s.writes()).collect();
    let jobs: Vec<JobSpec> = steps
        .iter()
        .map(|&step| {
            let randiops = if step.writes() { model.wrandiops } else { model.rrandiops };
            let cap = ((randiops as f64 * QOS_LOAD).round() as u64).max(1);
            JobSpec { rate_iops: Some(cap), ..step.job(plan) }
        })
        .collect();
    let name = |step: Step| if step.writes() { "wlat" } else { READ_LATENCY_RUN };
    let counts: Vec<u32> = steps.iter().map(|&s| jobs_of(s)).collect();
    let rounds = measure::interleaved(dev, plan, &jobs, Jobs::Fixed(&counts), stat, stop, &mut |j, i, _| {
        status(i, name(steps[j]), &measure::describe(&jobs[j]))
    })?;
    check_stop(stop)?;
    let mut runs = Vec::new();
    let mut targets = Vec::new();
    for ((&step, job), rounds) in steps.iter().zip(&jobs).zip(rounds) {
        let mut reports = rounds.reports;
        reports.sort_by(|a, b| percentile(a).total_cmp(&percentile(b)));
        let median = &reports[reports.len() / 2];
        let spread = measure::spread(reports.iter().map(percentile));
        runs.push(profile_run(name(step), job, rounds.jobs, plan, dev, median, spread, rounds.merges));
        targets.push(((percentile(median) * QOS_FACTOR).ceil() as u64).max(1));
    }
    let rlat_us = targets[0];
    let qos = QosParams {
        enable: true,
        rppm: pct * 10_000,
        rlat_us,
        wppm: pct * 10_000,
        wlat_us: targets.get(1).copied().unwrap_or(rlat_us),
        min_ppm: QOS_VRATE_PCT.0 * 10_000,
        max_ppm: QOS_VRATE_PCT.1 * 10_000,
    };
    Ok((qos, runs))
}
