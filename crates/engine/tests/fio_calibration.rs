//! Calibration: the engine must not be slower than fio on the same job and file, so that what
//! `ioshare bench` reports is the device and not the engine. Being faster is fine (and happens: the
//! engine registers its file and buffers and submits in small batches, so it spends less CPU per IO
//! than fio, which matters on a 2-vCPU machine where the CPU, not the disk, sets the pace); the
//! comparison both ways, with CPU per IO, is printed by `ioshare bench --scenario overhead`.
//!
//! Job: 4 KiB random reads, iodepth 32, O_DIRECT, io_uring, on a 256 MiB file written in full.
//! One-sided tolerance, engine >= 85% of fio: both drive the same device at the same queue depth;
//! what remains is run-to-run noise of a shared virtual disk (interleaved runs here differ by up to
//! ~10%, more while other programs compete for the two CPUs). Each side runs twice, interleaved (fio,
//! engine, fio, engine), and the better run of each counts, so one disturbed run does not decide.

use std::sync::atomic::AtomicBool;

use ioshare_core::{NoControl, NSEC_PER_MSEC};
use ioshare_engine::{fio, run, JobSpec, Pattern, RunOptions, Target, TempTarget, TenantSpec};

const RUN: u64 = 2000 * NSEC_PER_MSEC;
const WARMUP: u64 = 200 * NSEC_PER_MSEC;

#[test]
fn engine_is_not_slower_than_fio_on_the_same_job() {
    if !fio::available() {
        println!(
            "SKIP engine_is_not_slower_than_fio_on_the_same_job: fio is not installed (./scripts/setup.sh installs it)"
        );
        return;
    }
    let dir = std::env::current_dir().unwrap();
    let tmp = TempTarget::create(&dir, 256 << 20, &AtomicBool::new(false), |_, _| {}).unwrap();
    let target = Target::open(tmp.path(), 0).unwrap();
    let job = JobSpec::new(Pattern::RandRead, 4096, 32);
    let tenants = [TenantSpec::new("cal", 100, job.clone())];
    let opts = RunOptions { duration: RUN + WARMUP, warmup: WARMUP, ..RunOptions::new(0) };
    let (mut best_fio, mut best_engine) = (None::<ioshare_engine::RunReport>, None::<ioshare_engine::RunReport>);
    let better = |best: &mut Option<ioshare_engine::RunReport>, r: ioshare_engine::RunReport| {
        if best.as_ref().is_none_or(|b| r.device.iops > b.device.iops) {
            *best = Some(r);
        }
    };
    for _ in 0..2 {
        better(&mut best_fio, fio::run(tmp.path(), &job, RUN, WARMUP).unwrap());
        better(
            &mut best_engine,
            run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(false)).unwrap(),
        );
    }
    let (fio, engine) = (best_fio.unwrap(), best_engine.unwrap());
    // Same job: both did reads and only reads (a fio JSON parsed from the wrong section gives none).
    for (who, t) in [("fio", &fio.tenants[0]), ("engine", &engine.tenants[0])] {
        assert!(t.reads > 0 && t.writes == 0, "{who}: {} reads, {} writes", t.reads, t.writes);
    }
    let ratio = engine.device.iops / fio.device.iops;
    println!(
        "calibration: engine {:.0} IOPS ({:.0} ns CPU/IO), fio {:.0} IOPS ({:.0} ns CPU/IO), ratio {ratio:.3}",
        engine.device.iops, engine.cpu.ns_per_io, fio.device.iops, fio.cpu.ns_per_io
    );
    assert!(ratio >= 0.85, "engine {:.0} IOPS is below 85% of fio's {:.0}", engine.device.iops, fio.device.iops);
}
