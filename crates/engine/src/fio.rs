//! fio as a reference engine: the same job run by fio on the same target, read back as a
//! [`RunReport`], so the bench can show what the engine adds or saves against the tool users trust.
//!
//! Only what both engines do the same way is translated: pattern, block size, queue depth, think
//! time, rate cap, offset range; O_DIRECT through io_uring, one job, time-based. fio's per-IO
//! latency is its `clat` (submission to completion), ours is from when the job produced the IO;
//! with no controller in between the two differ by the submission call only. CPU is fio's
//! `usr_cpu + sys_cpu` over its run, per IO, comparable with the engine's `cpu.ns_per_io`.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use ioshare_core::{Nanos, NSEC_PER_MSEC, NSEC_PER_USEC};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::job::{JobSpec, Pattern};
use crate::report::{CpuReport, DeviceReport, LatencyUs, RunReport, TenantReport};

/// True when an `fio` program runs on this host (checked once).
pub fn available() -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    *FOUND.get_or_init(|| Command::new("fio").arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// fio's `--rw` name of `pattern`.
pub fn rw(pattern: Pattern) -> &'static str {
    match pattern {
        Pattern::Read => "read",
        Pattern::Write => "write",
        Pattern::RandRead => "randread",
        Pattern::RandWrite => "randwrite",
        Pattern::RandRw => "randrw",
    }
}

/// fio's arguments for `job` on `target`, measured for `duration` after `ramp` (both ns, whole ms).
pub fn args(target: &Path, job: &JobSpec, duration: Nanos, ramp: Nanos) -> Vec<String> {
    let rw = rw(job.pattern);
    let mut a = vec![
        "--name=ioshare-reference".to_string(),
        format!("--filename={}", target.display()),
        format!("--rw={rw}"),
        format!("--rwmixread={}", job.read_pct),
        format!("--bs={}", job.block_size),
        format!("--iodepth={}", job.iodepth),
        "--direct=1".into(),
        "--ioengine=io_uring".into(),
        "--time_based".into(),
        format!("--ramp_time={}ms", ramp / NSEC_PER_MSEC),
        format!("--runtime={}ms", duration / NSEC_PER_MSEC),
        format!("--offset={}", job.offset),
        "--output-format=json".into(),
    ];
    if let Some(size) = job.size {
        a.push(format!("--size={size}"));
    }
    if job.think_time > 0 {
        a.push(format!("--thinktime={}", job.think_time / NSEC_PER_USEC));
    }
    if let Some(rate) = job.rate_iops {
        a.push(format!("--rate_iops={rate}"));
    }
    a
}

/// Runs `job` with fio on `target` for `duration` after `ramp` and reads its JSON back.
pub fn run(target: &Path, job: &JobSpec, duration: Nanos, ramp: Nanos) -> Result<RunReport> {
    let out = Command::new("fio")
        .args(args(target, job, duration, ramp))
        .output()
        .map_err(|e| Error::os("cannot start fio (./scripts/setup.sh installs it)", e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::Reference(format!("fio failed: {}", err.lines().next().unwrap_or("no message"))));
    }
    let json: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::Reference(format!("fio printed no JSON report: {e}")))?;
    report(&json, job.block_size)
}

/// Turns fio's JSON report (one job) into a [`RunReport`] named `fio`.
pub fn report(json: &Value, block_size: u32) -> Result<RunReport> {
    let job = &json["jobs"][0];
    let num = |v: &Value, what: &str| {
        v.as_f64().ok_or_else(|| Error::Reference(format!("fio report lacks {what}: is this fio 3.x?")))
    };
    let runtime_s = num(&job["job_runtime"], "jobs[0].job_runtime")? / 1e3;
    let (read, write) = (&job["read"], &job["write"]);
    let reads = num(&read["total_ios"], "read.total_ios")? as u64;
    let writes = num(&write["total_ios"], "write.total_ios")? as u64;
    let iops = num(&read["iops"], "read.iops")? + num(&write["iops"], "write.iops")?;
    // Latency percentiles of the direction that did the IO (reads when both did).
    let side = if reads > 0 { read } else { write };
    let clat = &side["clat_ns"];
    let pct = |p: &str| clat["percentile"][p].as_f64().unwrap_or(f64::NAN) / 1e3;
    let lat_us = LatencyUs {
        p50: pct("50.000000"),
        p90: pct("90.000000"),
        p95: pct("95.000000"),
        p99: pct("99.000000"),
        p999: pct("99.900000"),
        max: clat["max"].as_f64().unwrap_or(f64::NAN) / 1e3,
        mean: clat["mean"].as_f64().unwrap_or(f64::NAN) / 1e3,
    };
    let cpu_s = |key: &str| num(&job[key], key).map(|pct| pct / 100.0 * runtime_s);
    let (user_s, sys_s) = (cpu_s("usr_cpu")?, cpu_s("sys_cpu")?);
    let ios = reads + writes;
    let bw_bytes = iops * block_size as f64;
    Ok(RunReport {
        controller: "fio".into(),
        window_s: runtime_s,
        interrupted: false,
        tenants: vec![TenantReport {
            name: "fio".into(),
            group: String::new(),
            weight: 0,
            ios,
            iops,
            bw_bytes,
            reads,
            writes,
            lat_us,
            series: Vec::new(),
        }],
        device: DeviceReport { iops, bw_bytes, busy_pct: f64::NAN, avg_inflight: f64::NAN },
        cpu: CpuReport { user_s, sys_s, ns_per_io: (user_s + sys_s) * 1e9 / ios.max(1) as f64 },
        controller_series: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_is_translated_to_fio_options() {
        let mut job = JobSpec::new(Pattern::RandRead, 4096, 32).think(150 * NSEC_PER_USEC);
        job.rate_iops = Some(900);
        let a = args(Path::new("/t"), &job, 2000 * NSEC_PER_MSEC, 200 * NSEC_PER_MSEC);
        for want in [
            "--rw=randread",
            "--bs=4096",
            "--iodepth=32",
            "--direct=1",
            "--ioengine=io_uring",
            "--runtime=2000ms",
            "--ramp_time=200ms",
            "--thinktime=150",
            "--rate_iops=900",
            "--filename=/t",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
        }
    }

    #[test]
    fn fio_json_becomes_a_run_report_with_cpu_per_io() {
        let json: Value = serde_json::from_str(
            r#"{"jobs":[{"job_runtime":2000,"usr_cpu":5.0,"sys_cpu":45.0,
                "read":{"total_ios":160000,"iops":80000.0,
                        "clat_ns":{"mean":390000.0,"max":9000000.0,
                                   "percentile":{"50.000000":380000,"90.000000":500000,"99.000000":700000,"99.900000":1200000}}},
                "write":{"total_ios":0,"iops":0.0,"clat_ns":{}}}]}"#,
        )
        .unwrap();
        let r = report(&json, 4096).unwrap();
        assert_eq!((r.controller.as_str(), r.tenants[0].reads, r.tenants[0].writes), ("fio", 160000, 0));
        assert_eq!(r.device.iops, 80000.0);
        assert_eq!((r.tenants[0].lat_us.p50, r.tenants[0].lat_us.p99), (380.0, 700.0));
        // 50% of one CPU for 2 s = 1 s over 160 000 IOs.
        assert!((r.cpu.ns_per_io - 6250.0).abs() < 1e-6, "{:?}", r.cpu);
        let broken: Value = serde_json::from_str(r#"{"jobs":[{}]}"#).unwrap();
        assert!(report(&broken, 4096).unwrap_err().to_string().contains("job_runtime"));
    }
}
