//! The cgroup-v2 lab (`scripts/lab`, a QEMU guest) from tests: whether it can run here, its script's
//! path, and, for tests that must also pass on cgroup v2 where this host has only v1 (memory), a run
//! of the test binary's own tests inside the guest (`scripts/lab --add <this test binary>`), one boot
//! for all of them. The guest copy is told by an environment variable that it is the guest copy.

use std::path::PathBuf;
use std::process::Command;

/// Set in the guest's copy of a test binary run by [`run_tests_in_lab`].
pub const IN_LAB_ENV: &str = "IOSHARE_TEST_IN_LAB";

/// Whether this process is a test binary's copy running in the lab guest.
pub fn in_lab() -> bool {
    std::env::var_os(IN_LAB_ENV).is_some()
}

/// The workspace's `scripts/lab`.
pub fn lab_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/lab")
}

/// For lab tests: returns `true` (skip) and prints `skipping <test>: <why>` when the lab cannot run
/// here (no qemu or guest kernel: scripts/setup.sh installs them); `false` when it can.
pub fn skip_unless_lab(test: &str) -> bool {
    let check = Command::new(lab_script()).arg("--check").output().expect("scripts/lab runs");
    if check.status.success() {
        return false;
    }
    eprintln!("skipping {test}: {}", String::from_utf8_lossy(&check.stderr).trim());
    true
}

/// What a lab run printed.
#[derive(Debug)]
pub struct LabRun {
    /// Whether the guest's command (the tests) succeeded.
    pub success: bool,
    /// The tests' output: their stdout, then their stderr (the lab keeps the two apart; a test's
    /// "skipping" line and a panic's message are on stderr).
    pub stdout: String,
}

/// Runs this test binary's tests matching `filter` in the lab guest (one at a time, with their
/// output), with `lab_args` for `scripts/lab` (e.g. `--mem 512`). `None`, after printing why, when
/// the lab cannot run here ([`skip_unless_lab`]); `test` names the caller in that line.
pub fn run_tests_in_lab(test: &str, filter: &str, lab_args: &[&str]) -> Option<LabRun> {
    if skip_unless_lab(test) {
        return None;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let name = exe.file_name().expect("a file name").to_string_lossy().into_owned();
    let out = Command::new(lab_script())
        .args(["--no-ioshare", "--timeout", "300"])
        .args(lab_args)
        .arg("--add")
        .arg(&exe)
        .args(["--", "env", &format!("{IN_LAB_ENV}=1"), &name, filter, "--test-threads=1", "--nocapture"])
        .output()
        .expect("scripts/lab runs");
    let stdout = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    Some(LabRun { success: out.status.success(), stdout })
}
