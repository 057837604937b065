//! The overhead scenario's observer measurement on real IO (root and BTF, else skipped with the
//! reason): the observer is attached and detached in turns during one run, and each attached window
//! is compared with its detached neighbours.

use std::sync::atomic::AtomicBool;

use ioshare_bench::observe::{Observations, OBSERVED_NONE};
use ioshare_bench::windows::TOGGLE_SAMPLE;
use ioshare_core::{NoControl, NSEC_PER_MSEC, NSEC_PER_SEC};
use ioshare_engine::{run, JobSpec, Pattern, RunOptions, Target, TenantSpec};
use ioshare_host::LoopDevice;

#[test]
fn the_observer_is_attached_in_turns_and_judged_by_its_windows() {
    if ioshare_observe::skip_unless_traceable("the_observer_is_attached_in_turns_and_judged_by_its_windows") {
        return;
    }
    // A loop device of the test's own, so that the observer (which counts a whole disk) sees only this
    // run's IO.
    let backing = tempfile::Builder::new().prefix("ioshare-toggle-").tempfile_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    backing.as_file().set_len(64 << 20).unwrap();
    let dev = LoopDevice::attach(backing.path(), true).unwrap();
    let target = Target::open(dev.path(), 0).unwrap();
    let tenants = [TenantSpec::new("reader", 100, JobSpec::new(Pattern::RandRead, 4096, 8))];
    let opts = RunOptions { sample_every: TOGGLE_SAMPLE, ..RunOptions::new(1200 * NSEC_PER_MSEC) };
    let observations = Observations::new(dev.path());
    let warmup_s = opts.warmup as f64 / NSEC_PER_SEC as f64;
    let (report, compared) = observations
        .toggled(warmup_s, |epoch| {
            run(
                &target,
                &tenants,
                &mut NoControl::new(),
                &RunOptions { epoch: Some(epoch), ..opts },
                &AtomicBool::new(false),
            )
        })
        .unwrap();
    let (observed, notes) = observations.take();
    assert!(notes.is_empty(), "{notes:?}");

    // 100 ms windows, detached first, over 1.2 s with 120 ms of warm-up: attached windows start at
    // 0.1, 0.3, ..., 1.1 s; the first is judged on its samples after the warm-up (0.125-0.2 s), and the
    // last may be cut by the run's end; a stalled disk may leave one out.
    assert!((4..=6).contains(&compared.len()), "{compared:?}");
    assert!(compared.iter().all(|c| c.iops_ratio.is_finite() && c.iops_ratio > 0.0), "{compared:?}");
    // The IO thread (this one) was found and its CPU read in every window.
    assert!(compared.iter().all(|c| c.extra_cpu_ns_per_io.is_some_and(f64::is_finite)), "{compared:?}");
    // The programs ran only while attached, about half of the run: the observer completed fewer IOs
    // than the run did, and more than none (20-80%: windows' IOPS vary by tens of % on a shared disk;
    // the loop device is this test's alone).
    let run_ios: f64 = report.tenants[0]
        .series
        .iter()
        .scan(0.0, |last, s| {
            let len = s.t_s - *last;
            *last = s.t_s;
            Some(s.iops * len)
        })
        .sum();
    let seen = observed.iter().find(|o| o.controller == OBSERVED_NONE).expect("the run was observed");
    let share = seen.ios as f64 / run_ios;
    assert!((0.2..0.8).contains(&share), "observer saw {} of {run_ios:.0} IOs", seen.ios);
}
