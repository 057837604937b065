//! The overhead scenario's alternating runs on real IO: a controller switched on and off every
//! [`ALTERNATE_WINDOW`] within one run decides only in its on windows, and the windows compare what it
//! did with no control beside it. Runs on a file of its own in the crate's scratch directory (no root).

use std::sync::atomic::AtomicBool;

use ioshare_bench::alternating::{Alternating, ALTERNATE_SAMPLE, ALTERNATE_WINDOW};
use ioshare_bench::plan::iops_limit;
use ioshare_bench::windows::{compare_windows, iops_ratios, median_estimate};
use ioshare_core::{Controller, NoControl, TokenBucketLimiter, NSEC_PER_MSEC, NSEC_PER_SEC};
use ioshare_engine::target::TempTarget;
use ioshare_engine::{run, JobSpec, Pattern, RunOptions, Target, TenantSpec};

/// Limit of the limited case, IOPS: far below what any disk serves a QD8 reader.
const LIMIT: u64 = 1000;

/// One 1.2 s alternating run of a QD8 4 KiB random reader (`limited`: at [`LIMIT`]) under `ctl`: the
/// median of its on windows' IOPS over their off neighbours', the number of windows, and the IOPS of
/// the whole run.
fn alternate(target: &Target, ctl: Box<dyn Controller>, limited: bool) -> (f64, usize, f64) {
    let mut reader = TenantSpec::new("reader", 100, JobSpec::new(Pattern::RandRead, 4096, 8));
    if limited {
        reader = reader.limited(iops_limit(LIMIT));
    }
    let opts = RunOptions { sample_every: ALTERNATE_SAMPLE, ..RunOptions::new(1200 * NSEC_PER_MSEC) };
    let mut alternating = Alternating::new(ctl, ALTERNATE_WINDOW);
    let report = run(target, &[reader], &mut alternating, &opts, &AtomicBool::new(false)).unwrap();
    let compared = compare_windows(&report, &alternating.windows(), opts.warmup as f64 / NSEC_PER_SEC as f64);
    let (median, _, _) = median_estimate(&iops_ratios(&compared)).expect("windows were compared");
    (median, compared.len(), report.device.iops)
}

#[test]
fn a_controller_decides_only_in_its_on_windows() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = TempTarget::create(dir, 64 << 20, &AtomicBool::new(false), |_, _| {}).unwrap();
    let target = Target::open(file.path(), 0).unwrap();
    // About 55 windows of 10 ms after the warm-up, half of them on: each on window compared.
    let (same, n, whole) = alternate(&target, Box::new(NoControl::new()), false);
    assert!(n >= 40, "{n} windows compared");
    // Nothing differs between on and off: the median ratio is 1 but for the disk's weather, which
    // moves single windows by 10-30% on a shared disk and the median of ~50 by a few %.
    assert!((0.8..1.25).contains(&same), "no control in turns with itself: {same}");
    // Half the run limited to 1000 IOPS: the on windows run at the limit (plus a bucket's refill
    // between them) and the off windows at the disk's rate, ten times that on any disk this runs on
    // (the unlimited run above did `whole` IOPS).
    assert!(whole > 10.0 * LIMIT as f64, "the disk serves {whole} IOPS: too slow to tell");
    let (limited, _, _) = alternate(&target, Box::new(TokenBucketLimiter::new(NoControl::new())), true);
    assert!(limited < 0.5, "the limit holds only while on: on/off {limited}");
}
