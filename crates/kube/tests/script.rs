//! `scripts/k8s` leaves nothing behind: Ctrl-C stops etcd and the API server and removes the run
//! directory; after a kill -9 of the script the next start (here `--check`) does. The same with a node
//! (`--node`, root) running a pod: containerd, kubelet, the shim and the pod's processes stopped, the
//! cgroup root gone from every hierarchy, nothing mounted below the run directory. Skipped, with the
//! reason, when the binaries are not built (or, for the node, containerd and runc are missing or the
//! tests do not run as root).

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
    /// The script with `args` (`--node` or none).
    fn start(args: &[&str]) -> Option<Run> {
        let check = Command::new(script()).arg("--check").args(args).output().unwrap();
        if !check.status.success() {
            eprintln!("skipped: {}", String::from_utf8_lossy(&check.stdout).trim());
            return None;
        }
        let mut command = Command::new(script());
        command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).process_group(0);
        // As in a terminal's foreground job, SIGINT at its default: a runner that started the tests in
        // the background of a non-interactive shell passes SIGINT down ignored, and bash cannot trap a
        // signal ignored on entry (the script would never see the Ctrl-C this test sends).
        // SAFETY: signal(2) is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            })
        };
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let dir = Path::new(line.trim()).parent().expect("a kubeconfig path").to_path_buf();
        Some(Run { child, dir })
    }

    /// The PIDs of the servers it started (etcd, the API server; with a node containerd and kubelet).
    fn servers(&self) -> Vec<i32> {
        ["etcd.pid", "apiserver.pid", "containerd.pid", "kubelet.pid"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(self.dir.join(f)).ok())
            .map(|pid| pid.trim().parse().unwrap())
            .collect()
    }

    /// With a node: starts a pod (a busybox sleep in the tenant image) and returns the PIDs of what
    /// runs in kubelet's cgroups (the sandbox's pause, the container) and the cgroup root.
    fn pod(&self) -> (Vec<i32>, String) {
        let file = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap().trim().to_string();
        let kubectl = |args: &[&str]| {
            let out = Command::new(self.dir.join("bin/kubectl"))
                .arg("--kubeconfig")
                .arg(self.dir.join("kubeconfig"))
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let overrides = format!(
            r#"{{"spec": {{"nodeName": "{}", "hostNetwork": true, "containers": [{{"name": "s", "image": "{}",
                "imagePullPolicy": "Never", "command": ["sleep", "600"]}}]}}}}"#,
            file("ioshare_k8s_node"),
            file("ioshare_k8s_tenant_image")
        );
        kubectl(&["run", "s", "--image", "unused", "--overrides", &overrides]);
        kubectl(&["wait", "--for=condition=Ready", "pod/s", "--timeout=120s"]);
        let root = file("ioshare_k8s_cgroup_root");
        let mut pids = Vec::new();
        let mut dirs = vec![Path::new("/sys/fs/cgroup/blkio").join(&root)];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    dirs.push(e.path());
                } else if e.file_name() == "cgroup.procs" {
                    let procs = std::fs::read_to_string(e.path()).unwrap();
                    pids.extend(procs.lines().map(|l| l.parse::<i32>().unwrap()));
                }
            }
        }
        assert!(pids.len() >= 2, "the pod's pause and sleep run in kubelet's cgroups: {pids:?}");
        (pids, root)
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

/// Whether within `timeout` every one of `pids` is gone, `dir` removed, nothing mounted below it, and
/// the cgroup root (if any) gone from every hierarchy.
fn gone_within(pids: &[i32], dir: &Path, cgroup_root: Option<&str>, timeout: Duration) -> bool {
    let mounted = || std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(&*dir.to_string_lossy());
    let cgroups = || {
        cgroup_root.is_some_and(|root| {
            std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten().any(|h| h.path().join(root).exists())
        })
    };
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if pids.iter().all(|p| !alive(*p)) && !dir.exists() && !mounted() && !cgroups() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// With a node (`args` not empty): a pod started, what runs in kubelet's cgroups and the cgroup root.
fn pod_if_node(run: &Run, args: &[&str]) -> (Vec<i32>, Option<String>) {
    match args.is_empty() {
        true => (Vec::new(), None),
        false => {
            let (pids, root) = run.pod();
            (pids, Some(root))
        }
    }
}

/// One run of the script at a time: two nodes at once would double the load on the machine's two
/// cores, and the kill -9 tests' `--check` removes the leftovers of killed runs while another test's
/// run is starting (a failure one time in three with the four tests in parallel).
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_run_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_RUN_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Ctrl-C, with or without a node (`args`).
fn ctrl_c_removes_everything(args: &[&str]) {
    let Some(mut run) = Run::start(args) else { return };
    let (mut pids, root) = pod_if_node(&run, args);
    pids.extend(run.servers());
    assert!(pids.iter().all(|p| alive(*p)));
    // What a terminal's Ctrl-C does: SIGINT to the foreground process group.
    run.signal_group(libc::SIGINT);
    let status = run.child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    let gone = gone_within(&pids, &run.dir, root.as_deref(), Duration::from_secs(60));
    assert!(gone, "left: {pids:?} {} {root:?}", run.dir.display());
}

/// kill -9 then `--check`, with or without a node (`args`).
fn the_next_start_removes_a_killed_runs_leftovers(args: &[&str]) {
    let Some(mut run) = Run::start(args) else { return };
    let (mut pids, root) = pod_if_node(&run, args);
    pids.extend(run.servers());
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(run.child.id() as i32, libc::SIGKILL) }, 0);
    assert_eq!(run.child.wait().unwrap().signal(), Some(libc::SIGKILL));
    std::thread::sleep(Duration::from_millis(500));
    assert!(pids.iter().all(|p| alive(*p)) && run.dir.exists(), "nothing stops them but the next start");
    let out = Command::new(script()).arg("--check").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("removing the leftovers of a killed run: {}", run.dir.display())), "{said}");
    let gone = gone_within(&pids, &run.dir, root.as_deref(), Duration::from_secs(60));
    assert!(gone, "left: {pids:?} {} {root:?}", run.dir.display());
}

#[test]
fn ctrl_c_stops_both_servers_and_removes_the_directory() {
    let _serial = one_run_at_a_time();
    ctrl_c_removes_everything(&[]);
}

#[test]
fn after_a_kill_9_the_next_start_removes_the_leftovers() {
    let _serial = one_run_at_a_time();
    the_next_start_removes_a_killed_runs_leftovers(&[]);
}

#[test]
fn ctrl_c_with_a_node_stops_its_pods_and_removes_its_cgroups_and_mounts() {
    let _serial = one_run_at_a_time();
    ctrl_c_removes_everything(&["--node"]);
}

#[test]
fn after_a_kill_9_with_a_node_the_next_start_removes_its_pods_cgroups_and_mounts() {
    let _serial = one_run_at_a_time();
    the_next_start_removes_a_killed_runs_leftovers(&["--node"]);
}
