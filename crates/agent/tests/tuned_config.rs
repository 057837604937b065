//! `[[devices]]` lines from a tune result (`model = "tune:FILE#SOLUTION"`): a result file written
//! as `ioshare tune` writes it, with fixture points (the solver's input, not a measurement), read by
//! the agent's configuration like a file an operator names.

use ioshare_agent::Config;
use ioshare_tune::data::{Baseline, ControlledBy, DeviceId, Point, Settings};
use ioshare_tune::{Grid, TuneResult};

/// A result swept from 50% to 150% on `dev`: the protected capacity and isolation fall, the work
/// conserved rises with vrate (the shape real sweeps have; fixture data, not a measurement).
fn swept(dev: &str, measured_at: u64) -> TuneResult {
    let points = (0..=10)
        .map(|i| {
            let v = 50.0 + 10.0 * f64::from(i);
            let x = (v - 50.0) / 100.0;
            Point {
                vrate_pct: v,
                mof_iops: 1000.0,
                amof_iops: 900.0 - 500.0 * x,
                isolation: 0.99 - 0.4 * x * x,
                isolation_mean: 1.0 - 0.2 * x,
                lat_p99_us: 1500.0 + 2000.0 * x,
                lat_impact: (0.1 + x, 0.05),
                work_conserved: 0.5 + 0.45 * x,
                antagonist_p99_us: 5000.0,
                vrate: Default::default(),
                lat: Default::default(),
                took_s: 10.0,
                amof_trials: Vec::new(),
            }
        })
        .collect();
    TuneResult {
        version: ioshare_tune::data::FORMAT_VERSION,
        measured_at,
        device: DeviceId {
            name: Some("loop9".into()),
            dev: Some(dev.into()),
            kind: "loop device over a file".into(),
            model: "loop9".into(),
            size: 1 << 30,
        },
        settings: Settings {
            grid: Grid { min_pct: 50.0, max_pct: 150.0, step_pct: 10.0, dither_pct: 0.0 },
            weights: (100, 100),
            lat_target_us: 2000,
            quick: true,
            model_line: "ctrl=user model=linear rbps=1000000000 rseqiops=50000 rrandiops=40000 wbps=1000000000 \
                         wseqiops=50000 wrandiops=40000"
                .into(),
            qos_line: "enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=2000 min=60.00 max=100.00".into(),
            controller: ControlledBy::Inline,
        },
        baseline: Baseline { mof_iops: 1000.0, asked_iops: 400.0, ..Default::default() },
        points,
        notes: Vec::new(),
        from_trace: None,
    }
}

#[test]
fn a_device_takes_a_tune_solutions_model_and_qos_and_says_where_from() {
    let dir = tempfile::tempdir().unwrap();
    // A block device every Linux host has: the first entry of /sys/block.
    let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
    let dev = std::fs::read_to_string(entry.path().join("dev")).unwrap().trim().to_string();
    let result = swept(&dev, 1_700_000_000);
    result.save(&dir.path().join("tuned.json")).unwrap();
    let expected = result.solution(None).unwrap();
    let config = |device: &str| {
        let file = dir.path().join("agent.toml");
        std::fs::write(&file, format!("[[devices]]\npath = \"{dev}\"\n{device}[[groups]]\ncgroup = \"t/*\"\n"))
            .unwrap();
        Config::load(&file)
    };
    let c = config("model = \"tune:tuned.json\"\n").unwrap();
    let d = &c.devices[0];
    let model: ioshare_core::ModelConfig = expected.model_line.parse().unwrap();
    let qos: ioshare_core::QosConfig = expected.qos_line.parse().unwrap();
    assert_eq!(d.model, model.params, "the solution's model");
    assert_eq!(d.qos, Some(qos.params), "and its QoS with it");
    let source = d.tuned.as_ref().unwrap();
    assert_eq!((source.solution.as_str(), source.measured_at), (ioshare_tune::DEFAULT_SOLUTION, 1_700_000_000));
    // A QoS line given by hand wins over the solution's.
    let c = config("model = \"tune:tuned.json\"\nqos = \"rpct=90 rlat=7000\"\n").unwrap();
    assert_eq!(c.devices[0].qos.unwrap().rlat_us, 7000);
    // A solution the result does not have, and a result for another device, are refused in one line.
    let e = config("model = \"tune:tuned.json#fastest\"\n").unwrap_err().to_string();
    assert!(e.contains("agent.toml:3: model:") && e.contains("no solution 'fastest'"), "{e}");
    swept("1:1", 1_700_000_000).save(&dir.path().join("other.json")).unwrap();
    let e = config("model = \"tune:other.json\"\n").unwrap_err().to_string();
    assert!(e.contains("names device 1:1"), "{e}");
}
