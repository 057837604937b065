//! Helpers shared by the CLI tests: a child process killed on failure, blkio cgroup lookup, and the
//! cgroup-v2 lab (`scripts/lab`). Each test binary uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::Mutex;

/// A child process of the test (`ioshare observe`, `ioshare agent run`), killed and reaped if the test
/// fails before it ended it.
pub struct Reaped(pub Child);

impl Reaped {
    /// Sends SIGTERM (the way the CLI's long-running commands are told to stop cleanly).
    pub fn terminate(&self) {
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether a blkio cgroup named `name` exists anywhere in the first levels of the hierarchy.
pub fn cgroup_exists(name: &str) -> bool {
    fn walk(dir: &Path, name: &str, depth: u32) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else { return false };
        entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .any(|e| e.file_name().to_string_lossy() == name || (depth > 0 && walk(&e.path(), name, depth - 1)))
    }
    walk(Path::new("/sys/fs/cgroup/blkio"), name, 3)
}

/// One guest at a time per test binary: two TCG guests on two shared cores would mostly measure each
/// other.
static ONE_GUEST: Mutex<()> = Mutex::new(());

fn lab_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/lab")
}

/// `None` (after printing why) when the lab cannot run on this machine.
pub fn lab_ready(test: &str) -> Option<()> {
    let out = Command::new(lab_script()).arg("--check").output().expect("scripts/lab runs");
    if out.status.success() {
        return Some(());
    }
    eprintln!("skipping {test}: {}", String::from_utf8_lossy(&out.stderr).trim());
    None
}

/// Runs `sh -c script` in a guest with this build's `ioshare` and `options`; returns the output
/// (stderr, printed here, carries the lab's timing).
pub fn lab(options: &[&str], script: &str) -> Output {
    let _one = ONE_GUEST.lock().unwrap_or_else(|p| p.into_inner());
    let out = Command::new(lab_script())
        .args(["--ioshare", env!("CARGO_BIN_EXE_ioshare"), "--timeout", "300"])
        .args(options)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("scripts/lab runs");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The value after `key ` on the line that starts with it.
pub fn field<'a>(stdout: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key} ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no '{key}' line in:\n{stdout}"))
        .trim()
}
