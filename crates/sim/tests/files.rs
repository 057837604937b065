//! Scenario files: the shipped ones parse and run, a malformed one gets an error naming the file,
//! the line and the key, and the same file and seed give byte-identical JSON.

use std::path::{Path, PathBuf};

use ioshare_sim::{SimError, Simulation};

fn shipped() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn shipped_scenarios_parse_and_run() {
    let files = shipped();
    assert!(files.len() >= 4, "{files:?}");
    for f in files {
        let sc = Simulation::load(&f).unwrap_or_else(|e| panic!("{e}"));
        let r = sc.seconds(1.0).warmup(0.0).run().unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(r.groups.iter().map(|g| g.ios).sum::<u64>() > 0, "{}: no IO completed", f.display());
    }
}

#[test]
fn same_file_and_seed_give_byte_identical_json() {
    for f in shipped() {
        let sc = Simulation::load(&f).unwrap().seconds(2.0).warmup(0.5);
        let a = sc.run().unwrap().deterministic().to_json();
        let b = sc.run().unwrap().deterministic().to_json();
        assert_eq!(a, b, "{}", f.display());
        // A different seed draws different offsets: the detailed results differ.
        let c = sc.clone().seed(sc.seed + 1).run().unwrap().deterministic().to_json();
        assert_ne!(a, c, "{}: the seed changes nothing", f.display());
    }
}

fn error(text: &str) -> String {
    match Simulation::from_toml(text, Path::new("bad.toml")) {
        Err(e @ SimError::File { .. }) => e.to_string(),
        other => panic!("expected a file error, got {other:?}"),
    }
}

const GOOD: &str = r#"seconds = 1.0
[device]
kind = "linear"
model = "ssd_dfl"
servers = 4
[controller]
kind = "iocost"
[[groups]]
path = "a"
weight = 100
[[groups.jobs]]
rw = "randread"
iodepth = 4
"#;

#[test]
fn malformed_files_name_the_file_line_and_key() {
    assert!(Simulation::from_toml(GOOD, Path::new("good.toml")).is_ok());
    // IOCost's device-depth option.
    let with_depth = GOOD.replacen("kind = \"iocost\"", "kind = \"iocost\"\ndepth_limit = 8", 1);
    let sc = Simulation::from_toml(&with_depth, Path::new("good.toml")).unwrap();
    assert!(format!("{:?}", sc.controller).contains("DepthLimit { max: 8 }"), "{:?}", sc.controller);
    for (from, to, line, needle) in [
        ("weight = 100", "weight = 0", 10, "weight 0 is out of range"),
        ("iodepth = 4", "iodepth = 4\ndepth = 2", 14, "unknown field `depth`"),
        ("servers = 4", "servers = \"four\"", 5, "servers"),
        ("model = \"ssd_dfl\"", "model = \"ssd_dfl rbps=x\"", 4, "rbps"),
        ("kind = \"iocost\"", "kind = \"iocost\"\nqos = \"rpct=101\"", 8, "between 0 and 100"),
        ("kind = \"iocost\"", "kind = \"bfq\"", 7, "unknown variant `bfq`"),
        ("kind = \"iocost\"", "kind = \"iocost\"\ndepth_limit = 0", 6, "depth_limit must be at least 1"),
        ("rw = \"randread\"", "rw = \"randread\"\nrate = 5.0", 11, "iodepth applies only to closed"),
        ("servers = 4", "servers = 4\nspeed = 2", 6, "[device]: speed: unknown field `speed`"),
        ("path = \"a\"", "path = \"a//b\"", 9, "invalid group path"),
        ("weight = 100", "weight = 100\nlimits = { iops-read = 5, iops-read-max = 1 }", 11, "cannot be lower"),
        ("weight = 100", "weight = 100\nlimits = { iops-wrong = 5 }", 11, "iops-wrong"),
    ] {
        assert!(GOOD.contains(from));
        let msg = error(&GOOD.replacen(from, to, 1));
        assert!(msg.starts_with(&format!("bad.toml:{line}:")), "{to}: {msg}");
        assert!(msg.contains(needle), "{to}: {msg}");
    }
    assert!(error("seconds = 1.0\n[device]\npreset = \"floppy\"\n[[groups]]\npath = \"a\"\n").contains("gp3"));
    // A preset override that breaks a rule: the override's own line.
    let msg = error("seconds = 1.0\n[device]\npreset = \"nvme-ssd\"\nchannels = 0\n[[groups]]\npath = \"a\"\n");
    assert!(msg.starts_with("bad.toml:4: [device]: channels: must be a positive number"), "{msg}");
    // TOML syntax errors stay on one line.
    let msg = error("seconds = \n");
    assert!(msg.starts_with("bad.toml:1:") && !msg.contains('\n'), "{msg}");
    let missing = Simulation::load(Path::new("/nonexistent/x.toml")).unwrap_err().to_string();
    assert!(missing.contains("/nonexistent/x.toml"), "{missing}");
}

#[test]
fn json_has_the_fields_the_issues_require() {
    use ioshare_sim::scenarios::{find, Args};
    for name in ["proportional", "work-conserving", "debt", "vrate"] {
        let out = (find(name).unwrap().run)(&Args { seconds: Some(3.0), ..Args::default() }).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out.to_json()).unwrap();
        for g in v["groups"].as_array().unwrap() {
            assert!(g["path"].is_string() && g["weight"].is_u64(), "{name}");
            assert!(g["iops"].is_f64() && g["cost_share"].is_f64(), "{name}");
            for k in ["mean", "p50", "p90", "p95", "p99", "max"] {
                assert!(g["lat_us"][k].is_f64(), "{name}: lat_us.{k}");
            }
            // Issue 3: `lat_hist` as [[upper_bound_us, count], ...], counting every completed IO.
            let hist = g["lat_hist"].as_array().unwrap();
            let counted: f64 = hist.iter().map(|b| b[1].as_f64().unwrap()).sum();
            assert_eq!(counted as u64, g["ios"].as_u64().unwrap(), "{name}: lat_hist counts");
            assert!(hist.windows(2).all(|w| w[0][0].as_f64() < w[1][0].as_f64()), "{name}: bounds ascend");
        }
        assert!(v["device"]["utilization"].is_f64() && v["device"]["vrate_pct"].is_f64(), "{name}");
        assert!(v["sim"]["ios_per_wall_sec"].is_f64(), "{name}");
        let det: serde_json::Value = serde_json::from_str(&out.deterministic().to_json()).unwrap();
        assert!(det["sim"].get("ios_per_wall_sec").is_none() && det["sim"]["ios"].is_u64());
    }
}
