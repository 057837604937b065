//! A real sweep, short: a 64 MiB temporary file on the disk under test (not /tmp, which may be
//! tmpfs), the quick profile, a three-point grid, then a resume that measures only the point taken
//! out of the file. About 40 s; no root needed (a file, not a loop device). The profile is cached
//! in a directory of the test's own.

use std::sync::atomic::AtomicBool;

use ioshare_engine::profile::ProfileOptions;
use ioshare_tune::profile_cache::{CacheKey, ProfileCache};
use ioshare_tune::runner::Inline;
use ioshare_tune::{tune, Grid, TuneOptions, TuneResult};
use tempfile::TempDir;

/// A scratch directory in the crate's directory (on the disk), removed with what is in it.
fn scratch() -> TempDir {
    tempfile::Builder::new().prefix("tune-sweep-").tempdir_in(std::env::current_dir().unwrap()).unwrap()
}

#[test]
fn a_short_sweep_measures_every_point_checkpoints_and_resumes() {
    let dir = scratch();
    let cache_dir = scratch();
    let out = dir.path().join("result.json");
    let opts = TuneOptions {
        grid: Grid::parse("40:160:60").unwrap(),
        weights: (100, 100),
        // A target any disk meets even beside other tests' IO (the profile's suggestion, 1.5 × a
        // percentile at 90% load, was missed alone at 264 IOPS while another sweep ran): this test
        // judges the sweep's mechanics and the controller's hold, not the device's latency.
        lat_target_us: Some(50_000),
        model_line: None,
        quick: true,
        profile: ProfileOptions { temp_size: 64 << 20, ..ProfileOptions::quick() },
        out: out.clone(),
        cache: Some(ProfileCache { dir: cache_dir.path().to_path_buf(), reuse: true }),
    };
    let stop = AtomicBool::new(false);
    let mut lines = 0;
    let r = tune(&Inline, dir.path(), &opts, None, &stop, &mut |_| lines += 1).unwrap();
    assert!(lines > 10, "a status line before each run");
    let vrates: Vec<f64> = r.points.iter().map(|p| p.vrate_pct).collect();
    assert_eq!(vrates, [40.0, 100.0, 160.0]);
    let (low, high) = (&r.points[0], &r.points[2]);
    // At 40% of the profiled model the antagonist is held to well under what it does alone; at
    // 160% it is not held by vtime at all. The profile's model is the device's saturated rate within
    // a round's spread (a busy host's rounds disagree by up to ~30%), so 40% leaves it at most
    // ~0.4 × 1.3 ≈ 0.55 of its uncontrolled throughput, and 160% at least ~1.6 / 1.3 ≈ 1.2 × that:
    // the order of the two cannot flip unless the controller does not act.
    assert!(
        low.work_conserved < high.work_conserved,
        "work conserved at 40%: {:.2}, at 160%: {:.2}",
        low.work_conserved,
        high.work_conserved
    );
    for p in &r.points {
        assert!(p.amof_iops <= p.mof_iops + 1.0, "protected capacity above capacity alone: {p:?}");
        assert!((0.0..=1.5).contains(&p.isolation), "{p:?}");
        assert!((p.vrate.p50 - p.vrate_pct).abs() < 0.5, "vrate is pinned: {:?}", p.vrate);
    }
    // The file is the result, and it gives the agent's solution.
    let saved = TuneResult::load(&out).unwrap();
    // JSON keeps floats to within an ulp, not bit for bit: the identity, settings and points compare.
    assert_eq!((&saved.device, &saved.settings), (&r.device, &r.settings));
    let saved_vrates: Vec<f64> = saved.points.iter().map(|p| p.vrate_pct).collect();
    assert_eq!(saved_vrates, vrates);
    let applied = saved.solution(None).unwrap();
    assert_eq!(applied.name, "isolated-bandwidth");
    // Its vrate floored at the solution's point, free above it under the sweep's target at p95.
    assert!(
        applied.qos_line.contains("rpct=95.00 rlat=50000") && applied.qos_line.contains("min=100.00"),
        "{}",
        applied.qos_line
    );
    assert!(saved.solution(Some("nope")).unwrap_err().to_string().contains("bandwidth"));
    // The profile is cached for this device and way of measuring: the next sweep scales this model.
    // (A scratch directory on no block device — overlay, tmpfs — has no key and nothing cached.)
    if let Some(key) = CacheKey::of(dir.path(), &r.device.kind, r.device.size, true) {
        let cached = opts.cache.as_ref().unwrap().lookup(&key).expect("the profile was cached");
        assert_eq!(r.settings.model(), cached.model);
    }

    // A sweep cut short after two points: --resume measures the third only.
    let mut cut = saved.clone();
    cut.points.pop();
    cut.save(&out).unwrap();
    let resumed = tune(&Inline, dir.path(), &opts, Some(cut.clone()), &stop, &mut |_| {}).unwrap();
    assert_eq!(resumed.points.len(), 3);
    assert_eq!(resumed.points[..2], cut.points[..], "the finished points are kept as they were");
    assert_eq!(resumed.baseline, cut.baseline, "the baseline is not measured again");
    // Nothing is left beside the result: the temporary file and the checkpoint's temporary are gone.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("result.json")]);
}
