//! `ioshare profile` through the binary: `--json` gives the six coefficients with the kernel lines;
//! an existing file is refused without `--destructive` (checksum before and after); bad input gets
//! one line and exit 1; on a loop device (root) the 4 KiB runs merge nothing and the device's
//! `nomerges` is restored, also after `kill -9`. Real IO in short mode (`--quick`) in a scratch
//! directory under this crate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use ioshare_engine::TempTarget;
use ioshare_host::LoopDevice;
use ioshare_testkit::KillOnDrop;
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

/// The disk's `queue/nomerges`.
fn nomerges(dev: &LoopDevice) -> String {
    let name = dev.path().file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_to_string(format!("/sys/block/{name}/queue/nomerges")).unwrap().trim().to_string()
}

/// On a loop device it owns (`--destructive`), profile's 4 KiB runs complete with no merge in the
/// device's counters, and the device's `nomerges` is back to its own value afterwards — also after
/// the profile is killed with SIGKILL mid-run, once the next profile has started (it repairs what
/// the killed one left). The device starts at `nomerges=1`, not the default, so that "back" means
/// its value and not 0.
#[test]
fn four_kib_runs_do_not_merge_and_nomerges_is_restored_even_after_kill_9() {
    if ioshare_testkit::skip_unless_root("four_kib_runs_do_not_merge_and_nomerges_is_restored_even_after_kill_9") {
        return;
    }
    let scratch = scratch("profile-cli-merges");
    let state = scratch.path().join("state");
    let file = TempTarget::create(scratch.path(), 256 << 20, &AtomicBool::new(false), |_, _| {}).unwrap();
    let dev = LoopDevice::attach(file.path(), true).unwrap();
    let q = PathBuf::from(format!("/sys/block/{}/queue/nomerges", dev.path().file_name().unwrap().to_string_lossy()));
    std::fs::write(&q, "1").unwrap();
    let path = dev.path().to_str().unwrap();
    let state_arg = state.to_str().unwrap();
    let args = [path, "--destructive", "--quick", "--json", "--state-dir", state_arg];

    let out = profile(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(json["method"]["merges_off"], true, "{}", json["method"]);
    for run in json["runs"].as_array().unwrap().iter().filter(|r| r["job"].as_str().unwrap().starts_with("4 KiB")) {
        let merges = &run["merges"];
        // Exactly zero: with nomerges=2 the block layer merges nothing, and nothing else uses this
        // loop device. The requests show the counters were read at all.
        assert_eq!(merges["merged"], 0, "{run}");
        assert!(merges["requests"].as_u64().unwrap() > 0, "{run}");
    }
    assert_eq!(nomerges(&dev), "1", "restored after a normal exit");

    // Killed mid-run: nomerges stays switched until the next profile repairs it.
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_ioshare"))
            .args(["profile", path, "--destructive", "--duration", "30", "--rounds", "1", "--state-dir", state_arg])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while nomerges(&dev) != "2" {
        if !child.alive() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the profile ended before switching merges off: {err}");
        }
        assert!(Instant::now() < deadline, "nomerges not switched within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    assert_eq!(nomerges(&dev), "2", "a SIGKILLed profile cannot restore it");
    let out = profile(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = json["notes"].to_string();
    assert!(notes.contains("restored") && notes.contains("nomerges") && notes.contains("killed"), "{notes}");
    assert_eq!(nomerges(&dev), "1", "restored by the next profile");
    assert!(!state.exists(), "no state left");
    std::fs::write(&q, "0").unwrap();
}
