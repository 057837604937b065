//! `ioshare profile` through the binary: `--json` gives the six coefficients with the kernel lines;
//! an existing file is refused without `--destructive` (checksum before and after); bad input gets
//! one line and exit 1. Real IO in short mode (`--quick`) in a scratch directory under this crate.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::AtomicBool;

use ioshare_engine::TempTarget;
use tempfile::TempDir;

/// A scratch directory on the disk under test (not /tmp, which may be tmpfs), removed with what is in
/// it, also when an assertion fails.
fn scratch(tag: &str) -> TempDir {
    tempfile::Builder::new().prefix(&format!("{tag}-")).tempdir_in(std::env::current_dir().unwrap()).unwrap()
}

fn profile(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioshare")).arg("profile").args(args).output().expect("ioshare runs")
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().expect("sha256sum runs");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().expect("a checksum").to_string()
}

#[test]
fn json_gives_the_six_coefficients_with_the_kernel_lines() {
    let scratch = scratch("profile-cli-json");
    let out = profile(&[scratch.path().to_str().unwrap(), "--quick", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let line = json["model_line"].as_str().unwrap();
    for key in ["rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"] {
        let v = json["model"][key].as_u64().unwrap();
        assert!(v > 0, "{key}");
        assert!(line.contains(&format!(" {key}={v}")), "{key}={v} in {line}");
    }
    assert!(line.contains("ctrl=user model=linear"), "{line}");
    let qos = json["qos_line"].as_str().unwrap();
    for key in ["rpct=", "rlat=", "wpct=", "wlat=", "min=60.00", "max=100.00"] {
        assert!(qos.contains(key), "{key} in {qos}");
    }
    assert_eq!(json["runs"].as_array().unwrap().len(), 8);
    assert_eq!(json["writes_measured"], true);
    // Progress went to stderr, one line per run when stderr is not a terminal.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().any(|l| l.contains("[run 8/8") && l.contains("wlat")), "{err}");
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0, "temporary file removed");
}

#[test]
fn an_existing_file_is_refused_with_one_line_and_kept_intact() {
    let scratch = scratch("profile-cli-refuse");
    let file = TempTarget::create(scratch.path(), 64 << 20, &AtomicBool::new(false), |_, _| {}).unwrap();
    let before = sha256(file.path());
    let path = file.path().to_str().unwrap();
    for (args, needle) in [
        (vec![path, "--quick"], "--destructive"),
        (vec!["/nonexistent/ioshare", "--quick"], "does not exist"),
        (vec![path, "--duration", "0.1"], "between 0.5 and 600"),
        (vec![path, "--depth", "0"], "queue depths"),
    ] {
        let out = profile(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.starts_with("ioshare: ") && err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    assert_eq!(sha256(file.path()), before, "data intact");
}
