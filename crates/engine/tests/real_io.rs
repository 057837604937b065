//! The engine on real IO: a temporary file in the crate's directory (a disk-backed filesystem),
//! O_DIRECT through io_uring, the pass-through controller. Runs are short (about a second each);
//! assertions are on properties that hold on any disk, with tolerances explained where they appear.

use std::sync::atomic::AtomicBool;

use ioshare_core::{NoControl, NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC};
use ioshare_engine::{run, JobSpec, Pattern, RunOptions, Target, TempTarget, TenantSpec};

fn temp_target(size: u64) -> TempTarget {
    let dir = std::env::current_dir().unwrap();
    TempTarget::create(&dir, size, &AtomicBool::new(false), |_, _| {}).unwrap()
}

#[test]
fn two_tenants_get_ios_latencies_and_series() {
    let tmp = temp_target(64 << 20);
    let target = Target::open(tmp.path(), 0).unwrap();
    let tenants = [
        TenantSpec::new("a", 200, JobSpec::new(Pattern::RandRead, 4096, 8)),
        TenantSpec::new("b", 100, JobSpec::new(Pattern::Write, 65536, 2)),
    ];
    let opts = RunOptions {
        duration: 1200 * NSEC_PER_MSEC,
        warmup: 200 * NSEC_PER_MSEC,
        sample_every: 300 * NSEC_PER_MSEC,
        ..RunOptions::new(0)
    };
    let r = run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(false)).unwrap();
    assert_eq!(r.controller, "none");
    assert!(!r.interrupted);
    // The window is the run minus the warm-up: never shorter than that by more than one loop turn;
    // longer by how late the engine thread gets the CPU back at the end, which on a loaded 2-core
    // machine can be tens of milliseconds, so only a gross overrun (a stop that is ignored) fails.
    assert!(r.window_s >= 0.99 && r.window_s < 1.5, "{}", r.window_s);
    let (a, b) = (&r.tenants[0], &r.tenants[1]);
    assert_eq!((a.name.as_str(), a.weight, b.weight), ("a", 200, 100));
    assert!(a.ios > 100 && b.ios > 10, "{} {}", a.ios, b.ios);
    assert_eq!((a.reads, a.writes, b.reads), (a.ios, 0, 0));
    assert_eq!(b.bw_bytes, b.iops * 65536.0);
    let l = &a.lat_us;
    assert!(0.0 < l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max, "{l:?}");
    // Samples every 300 ms over 1.2 s: 3 or 4 intervals depending on loop timing at the end.
    assert!((3..=4).contains(&a.series.len()), "{:?}", a.series);
    assert!(a.series.iter().all(|s| s.iops > 0.0));
    // Ten IOs outstanding keep the device busy except while the engine thread waits for a CPU to reap
    // completions; a quarter of the window is far below what even a loaded machine gives, and a
    // busy figure that is not measured at all (0) or not a share (> 100) fails.
    assert!(r.device.busy_pct > 25.0 && r.device.busy_pct <= 100.0, "{:?}", r.device);
    // At most the 10 slots are in flight.
    assert!(r.device.avg_inflight > 1.0 && r.device.avg_inflight <= 10.0, "{:?}", r.device);
    assert_eq!(r.controller_series.len(), a.series.len());
}

#[test]
fn rate_cap_and_think_time_bound_a_job() {
    let tmp = temp_target(16 << 20);
    let target = Target::open(tmp.path(), 0).unwrap();
    let mut capped = JobSpec::new(Pattern::RandRead, 4096, 4);
    capped.rate_iops = Some(500);
    // QD1 with 2 ms think: each IO takes at least 2 ms of think plus its service time.
    let thinker = JobSpec::new(Pattern::RandRead, 4096, 1).think(2 * NSEC_PER_MSEC);
    let tenants = [TenantSpec::new("capped", 100, capped), TenantSpec::new("thinker", 100, thinker)];
    let opts = RunOptions::new(NSEC_PER_SEC);
    let r = run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(false)).unwrap();
    // Never above the cap: the property under test (the pacer allows 1 ms of catch-up, 0.5 IO here;
    // +5% covers the window edges). Below it only by what the pacer loses while this thread waits for
    // a CPU; half the cap leaves room for a busy 2-core machine and still fails a pacer that
    // throttles far too much.
    assert!((250.0..=525.0).contains(&r.tenants[0].iops), "{}", r.tenants[0].iops);
    // At most 500/s; timer overshoot of sleeps makes it lower, never higher.
    assert!(r.tenants[1].iops <= 500.0 && r.tenants[1].iops > 100.0, "{}", r.tenants[1].iops);
}

#[test]
fn a_job_runtime_shorter_than_the_run_stops_it() {
    let tmp = temp_target(16 << 20);
    let target = Target::open(tmp.path(), 0).unwrap();
    let mut short = JobSpec::new(Pattern::RandRead, 4096, 2);
    short.runtime = Some(300 * NSEC_PER_MSEC);
    let long = JobSpec::new(Pattern::RandRead, 4096, 1).think(500 * NSEC_PER_USEC);
    let tenants = [TenantSpec::new("short", 100, short), TenantSpec::new("long", 100, long)];
    let opts = RunOptions {
        duration: 800 * NSEC_PER_MSEC,
        warmup: 0,
        sample_every: 100 * NSEC_PER_MSEC,
        ..RunOptions::new(0)
    };
    let r = run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(false)).unwrap();
    let short = &r.tenants[0].series;
    assert!(short.iter().filter(|s| s.t_s < 0.29).all(|s| s.iops > 0.0), "{short:?}");
    assert!(short.iter().filter(|s| s.t_s > 0.41).all(|s| s.iops == 0.0), "{short:?}");
    assert!(r.tenants[1].series.iter().all(|s| s.iops > 0.0));
}

#[test]
fn a_set_stop_flag_ends_the_run_as_interrupted() {
    let tmp = temp_target(16 << 20);
    let target = Target::open(tmp.path(), 0).unwrap();
    let tenants = [TenantSpec::new("a", 100, JobSpec::new(Pattern::RandRead, 4096, 4))];
    let opts = RunOptions::new(10 * NSEC_PER_SEC);
    let started = std::time::Instant::now();
    let r = run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(true)).unwrap();
    assert!(r.interrupted);
    assert!(started.elapsed().as_secs() < 2);
}

#[test]
fn device_depth_caps_the_ios_on_the_device() {
    let tmp = temp_target(16 << 20);
    let target = Target::open(tmp.path(), 0).unwrap();
    let tenants = [TenantSpec::new("a", 100, JobSpec::new(Pattern::RandRead, 4096, 16))];
    let opts = RunOptions { device_depth: 4, ..RunOptions::new(600 * NSEC_PER_MSEC) };
    let r = run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(false)).unwrap();
    // 16 IOs outstanding, at most 4 of them on the device: the rest wait in the engine.
    assert!(r.device.avg_inflight <= 4.0 && r.device.avg_inflight > 1.0, "{:?}", r.device);
    assert!(r.tenants[0].ios > 100);
    // So does each sample's mean.
    let depths: Vec<f64> = r.controller_series.iter().map(|s| s.inflight).collect();
    assert!(depths.len() >= 3 && depths.iter().all(|&d| d > 1.0 && d <= 4.0), "{depths:?}");
}

#[test]
fn an_epoch_sets_the_runs_time_zero() {
    let tmp = temp_target(16 << 20);
    let target = Target::open(tmp.path(), 0).unwrap();
    let tenants = [TenantSpec::new("a", 100, JobSpec::new(Pattern::RandRead, 4096, 2))];
    // Time zero 300 ms ago: the engine's clock already reads >= 0.3 s when it starts issuing, so the
    // first sample ends there, and the 600 ms run has only its second half left.
    let epoch = std::time::Instant::now() - std::time::Duration::from_millis(300);
    let opts = RunOptions { epoch: Some(epoch), ..RunOptions::new(600 * NSEC_PER_MSEC) };
    let r = run(&target, &tenants, &mut NoControl::new(), &opts, &AtomicBool::new(false)).unwrap();
    let series = &r.tenants[0].series;
    assert!(series[0].t_s >= 0.3, "{series:?}");
    assert!(series.last().unwrap().t_s <= 0.6 + 1e-3, "{series:?}");
}
