//! `scripts/k8s` leaves nothing behind: Ctrl-C stops etcd and the API server and removes the run
//! directory; after a kill -9 of the script the next start (here `--check`) does. Skipped, with the
//! reason, when the binaries are not built.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::script;

/// The script as a child in a process group of its own; on drop (a failed test) SIGTERM, and
/// `--check` to remove what a killed script left.
struct Run {
    child: Child,
    dir: PathBuf,
}

impl Run {
    fn start() -> Option<Run> {
        let check = Command::new(script()).arg("--check").output().unwrap();
        if !check.status.success() {
            eprintln!("skipped: {}", String::from_utf8_lossy(&check.stdout).trim());
            return None;
        }
        let mut child =
            Command::new(script()).stdin(Stdio::null()).stdout(Stdio::piped()).process_group(0).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let dir = Path::new(line.trim()).parent().expect("a kubeconfig path").to_path_buf();
        Some(Run { child, dir })
    }

    /// etcd's and the API server's PIDs.
    fn servers(&self) -> Vec<i32> {
        ["etcd.pid", "apiserver.pid"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.join(f)).unwrap().trim().parse().unwrap())
            .collect()
    }

    fn signal_group(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on the process group of our own child (it leads it: process_group(0)).
        assert_eq!(unsafe { libc::kill(-(self.child.id() as i32), signal) }, 0);
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = Command::new(script()).arg("--check").output();
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is gone for our purposes: read its state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

fn gone_within(pids: &[i32], dir: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if pids.iter().all(|p| !alive(*p)) && !dir.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn ctrl_c_stops_both_servers_and_removes_the_directory() {
    let Some(mut run) = Run::start() else { return };
    let servers = run.servers();
    assert!(servers.iter().all(|p| alive(*p)));
    // What a terminal's Ctrl-C does: SIGINT to the foreground process group.
    run.signal_group(libc::SIGINT);
    let status = run.child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(gone_within(&servers, &run.dir, Duration::from_secs(15)), "left: {servers:?} {}", run.dir.display());
}

#[test]
fn after_a_kill_9_the_next_start_removes_the_leftovers() {
    let Some(mut run) = Run::start() else { return };
    let servers = run.servers();
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(run.child.id() as i32, libc::SIGKILL) }, 0);
    assert_eq!(run.child.wait().unwrap().signal(), Some(libc::SIGKILL));
    std::thread::sleep(Duration::from_millis(500));
    assert!(servers.iter().all(|p| alive(*p)) && run.dir.exists(), "nothing stops them but the next start");
    let out = Command::new(script()).arg("--check").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("removing the leftovers of a killed run: {}", run.dir.display())), "{said}");
    assert!(gone_within(&servers, &run.dir, Duration::from_secs(15)), "left: {servers:?} {}", run.dir.display());
}
