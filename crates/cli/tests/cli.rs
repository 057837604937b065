//! The `ioshare` binary on good and bad input: bad input gets one line on stderr and a non-zero exit.

use std::process::{Command, Output};

fn ioshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioshare")).args(args).output().expect("the binary runs")
}

/// Asserts a failure with exactly one line on stderr containing every `needle`.
fn fails_with(args: &[&str], needles: &[&str]) {
    let out = ioshare(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line expected, got:\n{err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' not in: {err}");
    }
}

#[test]
fn model_prints_the_kernel_coefficients_as_json() {
    let out = ioshare(&["model", "ssd_dfl", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["read"]["page_vtime"], 1_152_074);
    assert_eq!(v["write"]["randio_vtime"], 4_948_676);
    let r32k = v["reference_ios"].as_array().unwrap().iter().find(|r| r["io"] == "32 KiB random read").unwrap();
    assert!((r32k["cost_us"].as_f64().unwrap() - 176.0).abs() < 0.5);
}

#[test]
fn malformed_model_lines_fail_with_one_line() {
    fails_with(&["model", "rbps=1"], &["io.cost.model", "missing rseqiops"]);
    fails_with(&["model", "ssd_dfl wbps=fast"], &["wbps=fast", "non-negative integer"]);
    fails_with(&["model", "nvme"], &["unknown word"]);
}

#[test]
fn bad_sim_input_fails_with_one_line() {
    fails_with(&["sim", "proportional", "--weights", "0,1"], &["weight 0", "between 1 and 10000"]);
    fails_with(&["sim", "proportional", "--weights", "200,10001"], &["weight 10001"]);
    fails_with(&["sim", "proportional", "--weights", "1,2,3,4"], &["between 2 and 3 weights"]);
    fails_with(&["sim", "no-such-scenario"], &["unknown scenario", "--list"]);
    fails_with(&["sim", "/nonexistent/scenario.toml"], &["cannot read scenario file", "No such file"]);
    fails_with(&["sim", "proportional", "--svg", "/etc/passwd"], &["'/etc/passwd' is not a directory"]);
}

#[test]
fn absurd_durations_are_refused() {
    fails_with(&["sim", "proportional", "--seconds", "1e12"], &["more than the 86400 s"]);
    fails_with(&["sim", "proportional", "--seconds", "0.5"], &["warm-up (1 s"]);
}

#[test]
fn exit_status_tells_a_failed_verdict_from_success() {
    // Exit 0 when every comparison with the source holds, 3 when one differs (paper-fig13's
    // 30-period settling, which the kernel's step table cannot meet), 1 for bad input.
    assert_eq!(ioshare(&["sim", "proportional", "--seconds", "3"]).status.code(), Some(0));
    assert_eq!(ioshare(&["sim", "paper-fig13"]).status.code(), Some(3));
    assert_eq!(ioshare(&["sim", "no-such-scenario"]).status.code(), Some(1));
}

#[test]
fn a_malformed_scenario_file_is_named_with_its_line() {
    let dir = std::env::temp_dir().join(format!("ioshare-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    // A shipped file with one wrong value: the error names the file, the line and the key.
    let good = include_str!("../../../scenarios/proportional.toml");
    let bad = good.replacen("servers = 8", "servers = \"eight\"", 1);
    assert_ne!(good, bad, "the shipped file sets servers = 8");
    std::fs::write(&file, bad).unwrap();
    let path = file.to_str().unwrap().to_string();
    let out = ioshare(&["sim", &path]);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    let line = good.lines().position(|l| l.starts_with("servers = 8")).unwrap() + 1;
    assert!(err.contains(&format!("bad.toml:{line}:")) && err.contains("servers"), "{err}");
}
