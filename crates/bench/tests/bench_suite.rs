//! The bench suite end to end on the default temporary target, short runs, no kernel peers (those
//! are tested through the `ioshare` binary, which is their worker): results reach the observer and
//! the report, an interrupt keeps what finished, and the temporary file is gone afterwards.

use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_bench::calibrate::Calibration;
use ioshare_bench::{run_suite, BenchOptions, ScenarioReport, Side, SuiteWatcher, TargetInfo};
use ioshare_core::NSEC_PER_MSEC;

/// Records what the suite reports and raises `stop` after the first scenario (an "interrupt").
struct StopAfterFirst<'a> {
    stop: &'a AtomicBool,
    progress: Vec<String>,
    calibrated: bool,
    done: Vec<String>,
}

impl SuiteWatcher for StopAfterFirst<'_> {
    fn progress(&mut self, line: &str) {
        self.progress.push(line.to_string());
    }

    fn calibrated(&mut self, target: &TargetInfo, cal: &Calibration) {
        assert!(target.temporary && target.size == 2 << 30);
        assert!(cal.max_iops > 0.0 && cal.model.rrandiops > 0, "{cal:?}");
        self.calibrated = true;
    }

    fn scenario_done(&mut self, report: &ScenarioReport) {
        self.done.push(report.name.clone());
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn suite_reports_judged_runs_and_cleans_up_after_an_interrupt() {
    // On the disk under test (not /tmp, which may be tmpfs); removed also when an assertion fails.
    let scratch =
        tempfile::Builder::new().prefix("bench-suite-test-").tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let opts = BenchOptions {
        scenarios: vec!["proportional".into(), "overhead".into()],
        duration: 600 * NSEC_PER_MSEC,
        temp_dir: scratch.path().to_path_buf(),
        kernel_peers: false,
        sample_every: Some(100 * NSEC_PER_MSEC),
        ..BenchOptions::default()
    };
    let stop = AtomicBool::new(false);
    let mut obs = StopAfterFirst { stop: &stop, progress: Vec::new(), calibrated: false, done: Vec::new() };
    let suite = run_suite(&opts, &stop, &mut obs).unwrap();
    assert!(obs.calibrated);
    assert!(obs.progress.iter().any(|l| l.contains("writing the temporary target")));
    assert!(obs.progress.iter().any(|l| l.contains("proportional: iocost")), "{:?}", obs.progress);
    assert_eq!(obs.done, ["proportional"]);
    assert!(suite.interrupted, "stopped before the second scenario");
    assert_eq!(suite.scenarios.len(), 1);
    let sc = &suite.scenarios[0];
    let names: Vec<&str> = sc.runs.iter().map(|r| r.report.controller.as_str()).collect();
    assert_eq!(names, ["none", "iocost", "iocost+qd"]);
    assert!(sc.runs.iter().all(|r| r.side == Side::Ioshare && r.verdict.is_some()));
    // Sampled every 100 ms as asked: five samples in a 600 ms run, 0.1 s apart give or take the
    // event loop's lateness (tens of µs here; 5 ms allowed for a busy machine).
    for r in &sc.runs {
        let t: Vec<f64> = r.report.controller_series.iter().map(|c| c.t_s).collect();
        assert!(
            t.len() >= 5 && t.windows(2).all(|w| (w[1] - w[0] - 0.1).abs() < 0.005),
            "{}: {t:?}",
            r.report.controller
        );
    }
    assert!(sc.verdict.summary.starts_with("iocost+qd: IOPS ratio"), "{:?}", sc.verdict);
    // The JSON carries the fields the issue names.
    let json = serde_json::to_value(&suite).unwrap();
    let run = &json["scenarios"][0]["runs"][1];
    assert_eq!(json["scenarios"][0]["name"], "proportional");
    assert_eq!(run["controller"], "iocost");
    assert!(run["verdict"]["pass"].is_boolean());
    let t = &run["tenants"][0];
    assert_eq!((t["name"].as_str(), t["weight"].as_u64()), (Some("high"), Some(200)));
    for key in ["iops", "bw_bytes"] {
        assert!(t[key].as_f64().unwrap() > 0.0, "{key}");
    }
    for key in ["p50", "p90", "p99", "p999", "max"] {
        assert!(t["lat_us"][key].as_f64().unwrap() > 0.0, "{key}");
    }
    let left: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
    assert!(left.is_empty(), "the temporary target is removed: {left:?}");
}
