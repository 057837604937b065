//! `ioshare tune` on bad input: one line naming what is wrong, exit 1, nothing written (no result
//! file, no temporary file in the target directory). No IO is run: every case is refused first.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use tempfile::TempDir;

fn ioshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioshare")).args(args).output().expect("ioshare runs")
}

/// Asserts exit 1 with one line on stderr containing every needle.
fn refused(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "'{n}' not in: {err}");
    }
}

/// A scratch directory on the disk (where a sweep would create its temporary file).
fn scratch() -> TempDir {
    tempfile::Builder::new().prefix("tune-cli-").tempdir_in(std::env::current_dir().unwrap()).unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// A result file as tune writes it, with no points.
fn result(version: u32, model: &str, weights: (u32, u32)) -> serde_json::Value {
    let spread = json!({ "mean": 0.0, "stdev": 0.0, "max": 0.0 });
    json!({
        "version": version,
        "measured_at": 1_700_000_000u64,
        "device": { "name": "vda", "dev": "254:0", "kind": "file", "model": model, "size": 67108864u64 },
        "settings": {
            "grid": { "min_pct": 50.0, "max_pct": 150.0, "step_pct": 50.0, "dither_pct": 0.0 },
            "weights": [weights.0, weights.1],
            "lat_target_us": 2000,
            "quick": true,
            "model_line": "ctrl=user model=linear rbps=1000000000 rseqiops=50000 rrandiops=40000 wbps=1000000000 wseqiops=50000 wrandiops=40000",
            "qos_line": "enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=2000 min=60.00 max=100.00"
        },
        "baseline": {
            "mof_iops": 1000.0, "asked_iops": 400.0,
            "lat": { "p50": spread, "p90": spread, "p99": spread, "max": spread },
            "antagonist_bw": 1e8, "antagonist_iops": 1000.0
        },
        "points": [],
        "notes": []
    })
}

#[test]
fn grids_that_cannot_be_swept_and_bad_targets_are_refused_before_anything_is_written() {
    let dir = scratch();
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("r.json");
    let o = out.to_str().unwrap();
    refused(&ioshare(&["tune", d, "--vrate", "0:100:10", "--out", o]), &["--vrate '0:100:10'", "cannot be pinned"]);
    refused(&ioshare(&["tune", d, "--vrate", "100:50:10", "--out", o]), &["above the highest", "swap"]);
    refused(&ioshare(&["tune", d, "--lat-target", "0", "--out", o]), &["--lat-target"]);
    refused(&ioshare(&["tune", d, "--weights", "0,100", "--out", o]), &["--weights 0,100", "1..=10000"]);
    refused(&ioshare(&["tune", d, "--model", "rbps=1", "--out", o]), &["--model", "missing rseqiops"]);
    let model = "rbps=1000000000 rseqiops=50000 rrandiops=40000 wbps=1000000000 wseqiops=50000 wrandiops=40000";
    refused(&ioshare(&["tune", d, "--model", model, "--out", o]), &["--lat-target"]);
    refused(&ioshare(&["tune", "--out", o]), &["give TARGET"]);
    assert!(entries(dir.path()).is_empty(), "nothing written: {:?}", entries(dir.path()));
    // An existing result is not overwritten by a new sweep.
    std::fs::write(&out, "{}").unwrap();
    refused(&ioshare(&["tune", d, "--out", o]), &["exists", "--resume"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{}");
}

#[test]
fn a_result_of_another_version_or_device_is_not_resumed_nor_merged() {
    let dir = scratch();
    let d = dir.path().to_str().unwrap();
    let write = |name: &str, v: serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let old = write("old.json", result(99, "vda", (100, 100)));
    refused(&ioshare(&["tune", d, "--resume", &old]), &["old.json", "format 99", "run the sweep again"]);
    let other = write("other.json", result(1, "another-disk", (100, 100)));
    refused(&ioshare(&["tune", d, "--resume", &other]), &["other.json", "cannot resume here", "another-disk"]);
    let a = write("a.json", result(1, "vda", (100, 100)));
    let b = write("b.json", result(1, "vda", (200, 100)));
    refused(&ioshare(&["tune", "--merge", &a, &b]), &["b.json", "cannot merge", "weights"]);
    refused(&ioshare(&["tune", "--merge", &a, &other]), &["cannot merge", "another-disk"]);
    // The files are as they were, and no temporary file was made in the target directory.
    assert_eq!(entries(dir.path()), ["a.json", "b.json", "old.json", "other.json"]);
    // Two results of one device merge without IO.
    let out = ioshare(&["tune", "--merge", &a, &a, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["device"]["model"], "vda");
    assert!(v["notes"][0].as_str().unwrap().contains("solutions need at least 3"), "{v}");
}

#[test]
fn kernel_without_cgroup_v2_io_is_refused_before_anything_is_written() {
    let caps = ioshare_host::Capabilities::probe();
    if caps.root && caps.io_v2() && caps.io_cost {
        eprintln!(
            "skipped: this host has the kernel's IOCost in cgroup v2, where --kernel runs (docs/tune.md: the lab run)"
        );
        return;
    }
    let why: &[&str] =
        if caps.root { &["--kernel needs the kernel's IOCost", "scripts/lab"] } else { &["--kernel needs root"] };
    let dir = scratch();
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("r.json");
    refused(&ioshare(&["tune", d, "--kernel", "--quick", "--out", out.to_str().unwrap()]), why);
    assert!(entries(dir.path()).is_empty(), "nothing written: {:?}", entries(dir.path()));
    // A sweep the kernel ran is resumed under the kernel, so it is refused here too.
    let mut kernel = result(1, "vda", (100, 100));
    kernel["settings"]["controller"] = json!("kernel");
    std::fs::write(&out, kernel.to_string()).unwrap();
    refused(&ioshare(&["tune", d, "--resume", out.to_str().unwrap()]), why);
    assert_eq!(entries(dir.path()), ["r.json"]);
}

const MODEL: &str = "ctrl=user model=linear rbps=1000000000 rseqiops=50000 rrandiops=40000 wbps=1000000000 \
                     wseqiops=50000 wrandiops=40000";

/// An agent trace (the record `ioshare agent run --trace` writes) of `n` periods of 0.1 s on
/// `device`: vrate sweeping 60–140% and back, read latency flat at 300 µs up to 110%, then 25 µs
/// more per percent (synthetic: the knee is known).
fn write_trace(path: &Path, device: &str, n: usize) {
    let mut text = String::new();
    for i in 0..n {
        let phase = (i % 160) as f64 / 80.0;
        let v = 60.0 + 80.0 * if phase <= 1.0 { phase } else { 2.0 - phase };
        let lat = 300.0 + 25.0 * (v - 110.0).max(0.0);
        let rec = json!({
            "t_s": i as f64 * 0.1, "device": device, "elapsed_s": 0.1, "util": 1.0, "inflight": 4.0, "busy": true,
            "lat_us": [lat, 0.0], "rq_wait": false, "delivered_pct": v.min(100.0), "vrate_pct": v, "busy_level": 0,
            "groups": [{ "cgroup": "t/a", "ios": [(v * 20.0) as u64, 0] }]
        });
        text.push_str(&format!("{rec}\n"));
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn from_trace_finds_the_knee_and_writes_a_result_the_agent_takes() {
    let dir = scratch();
    // A block device every Linux host has (the first of /sys/block): the lines carry its MAJ:MIN.
    let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
    let name = entry.file_name().to_string_lossy().into_owned();
    let dev = std::fs::read_to_string(entry.path().join("dev")).unwrap().trim().to_string();
    let trace = dir.path().join("trace.jsonl");
    write_trace(&trace, &name, 320);
    let out = dir.path().join("tuned.json");
    let (t, o) = (trace.to_str().unwrap(), out.to_str().unwrap());
    let run = ioshare(&["tune", "--from-trace", t, "--model", MODEL, "--lat-target", "2ms", "-o", o, "--json"]);
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(v["result"]["from_trace"]["periods"], 320);
    assert!(v["result"]["settings"]["qos_line"].as_str().unwrap().contains("rlat=2000"), "{v}");
    let knee = v["solutions"].as_array().unwrap().iter().find(|s| s["name"] == "latency-knee").unwrap();
    // The knee is at 110%; bins are 5% wide (their vrate the mean of their periods): within one bin.
    let at = knee["vrate_pct"].as_f64().unwrap();
    assert!((at - 110.0).abs() <= 5.0, "knee at {at}: {v}");
    assert!(knee["model_line"].as_str().unwrap().starts_with(&format!("{dev} ")), "{knee}");
    // The agent's configuration takes the result like a sweep's.
    let config = dir.path().join("agent.toml");
    let devices = format!("[[devices]]\npath = \"{dev}\"\nmodel = \"tune:tuned.json#latency-knee\"\n");
    std::fs::write(&config, format!("{devices}[[groups]]\ncgroup = \"t/*\"\n")).unwrap();
    let c = ioshare_agent::Config::load(&config).unwrap();
    let tuned = c.devices[0].tuned.as_ref().unwrap();
    assert_eq!(tuned.solution, "latency-knee");
    // The table names what a trace cannot give.
    let table = ioshare(&["tune", "--from-trace", t, "--model", MODEL]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("informative") && text.contains("no MOF, aMOF, isolation"), "{text}");
}

#[test]
fn from_trace_refuses_too_little_load_another_device_and_no_model() {
    let dir = scratch();
    let trace = dir.path().join("trace.jsonl");
    let out = dir.path().join("r.json");
    let (t, o) = (trace.to_str().unwrap(), out.to_str().unwrap());
    write_trace(&trace, "loop9", 30);
    refused(
        &ioshare(&["tune", "--from-trace", t, "--model", MODEL, "-o", o]),
        &["too little load on loop9", "need 50+"],
    );
    write_trace(&trace, "loop9", 320);
    let other = ["tune", "--from-trace", t, "--device", "nvme0n1", "--model", MODEL, "-o", o];
    refused(&ioshare(&other), &["no periods of device nvme0n1", "loop9"]);
    refused(&ioshare(&["tune", "--from-trace", t, "-o", o]), &["--from-trace needs --model"]);
    assert_eq!(entries(dir.path()), ["trace.jsonl"], "nothing written");
}
