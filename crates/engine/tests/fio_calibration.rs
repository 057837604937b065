//! Calibration: the same job run by the engine and by fio on the same file must reach similar IOPS,
//! so that what `ioshare bench` reports is the device and not the engine.
//!
//! Job: 4 KiB random reads, iodepth 32, O_DIRECT, io_uring, on a 256 MiB file written in full.
//! Tolerance 15%: both programs drive the same device at the same queue depth, so the only real
//! difference is per-IO CPU cost, which matters when the device outruns one core; the rest is run-to-
//! run noise of a shared virtual disk (a few percent when idle, more with neighbours). Each side runs
//! twice, interleaved (fio, engine, fio, engine), and the better run of each counts, so a burst of
//! neighbour activity during one run does not decide the result.

use std::process::Command;
use std::sync::atomic::AtomicBool;

use ioshare_core::{NoControl, NSEC_PER_MSEC};
use ioshare_engine::{run, JobSpec, Pattern, RunOptions, Target, TempTarget, TenantSpec};

const SECONDS: u64 = 2;

fn fio_iops(path: &std::path::Path) -> f64 {
    let out = Command::new("fio")
        .args([
            "--name=cal",
            "--rw=randread",
            "--bs=4k",
            "--iodepth=32",
            "--direct=1",
            "--ioengine=io_uring",
            "--time_based",
            "--ramp_time=0.2",
            &format!("--runtime={SECONDS}"),
            &format!("--filename={}", path.display()),
            "--output-format=json",
        ])
        .output()
        .expect("fio runs");
    assert!(out.status.success(), "fio failed: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("fio JSON");
    json["jobs"][0]["read"]["iops"].as_f64().expect("read.iops in fio output")
}

#[test]
fn engine_iops_are_within_15_percent_of_fio() {
    if Command::new("fio").arg("--version").output().is_err() {
        println!(
            "SKIP engine_iops_are_within_15_percent_of_fio: fio is not installed (./scripts/setup.sh installs it)"
        );
        return;
    }
    let dir = std::env::current_dir().unwrap();
    let tmp = TempTarget::create(&dir, 256 << 20, &AtomicBool::new(false), |_, _| {}).unwrap();
    let target = Target::open(tmp.path(), 0).unwrap();
    let tenants = [TenantSpec::new("cal", 100, JobSpec::new(Pattern::RandRead, 4096, 32))];
    let opts = RunOptions {
        duration: (SECONDS * 1000 + 200) * NSEC_PER_MSEC,
        warmup: 200 * NSEC_PER_MSEC,
        ..RunOptions::new(0)
    };
    let mut fio = 0f64;
    let mut engine = 0f64;
    for _ in 0..2 {
        fio = fio.max(fio_iops(tmp.path()));
        let r = run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(false)).unwrap();
        engine = engine.max(r.tenants[0].iops);
    }
    println!("calibration: engine {engine:.0} IOPS, fio {fio:.0} IOPS, ratio {:.3}", engine / fio);
    assert!(engine >= 0.85 * fio && engine <= 1.15 * fio, "engine {engine:.0} IOPS vs fio {fio:.0} IOPS");
}
