//! packaging/nbdkit's filter against the real nbdkit (Debian: nbdkit, nbdkit-plugin-dev,
//! libnbd-bin): built here from its sources and the static library cargo built, run over the
//! `memory` plugin on a unix socket in a temporary directory; each test stops its nbdkit in a Drop
//! guard. Skips with the reason when nbdkit, its headers or libnbd's clients are missing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The filter, built once per test binary (the tests run in parallel threads of one process and
/// would otherwise write the same file at once); `None` with the reason printed when it cannot be.
fn filter() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(build_filter).clone()
}

/// Builds the filter from its sources and the static library.
fn build_filter() -> Option<PathBuf> {
    for tool in ["nbdkit", "nbdinfo", "nbdcopy"] {
        if Command::new(tool).arg("--version").output().is_err() {
            println!("skipped: {tool} is missing (scripts/setup.sh installs nbdkit, nbdkit-plugin-dev, libnbd-bin)");
            return None;
        }
    }
    let cflags = Command::new("pkg-config").args(["--cflags", "nbdkit"]).output().ok().filter(|o| o.status.success());
    let Some(cflags) = cflags else {
        println!("skipped: nbdkit's filter headers are missing (install nbdkit-plugin-dev)");
        return None;
    };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/nbdkit");
    let exe = std::env::current_exe().expect("the test knows its path");
    let lib = exe.parent().expect("tests run from target/<profile>/deps").join("libioshare.a");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nbdkit-ioshare-filter-{}.so", std::process::id()));
    let status = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-O2", "-o"])
        .arg(&out)
        .args(String::from_utf8_lossy(&cflags.stdout).split_whitespace())
        .arg("-I")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
        .arg(src.join("nbdkit-ioshare-filter.c"))
        .arg(src.join("config-file.c"))
        .arg(lib)
        .args(["-lpthread", "-ldl", "-lm"])
        .status()
        .expect("cc runs");
    assert!(status.success(), "building the filter failed");
    Some(out)
}

/// A running nbdkit with the filter, killed and reaped on drop; its directory removed.
struct Server {
    child: Child,
    dir: PathBuf,
}

impl Server {
    /// Starts nbdkit with `groups` as the filter's config and `extra` parameters; waits until its
    /// socket exists (or it exits).
    fn start(filter: &Path, name: &str, groups: &str, extra: &[&str]) -> Result<Server, String> {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nbd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the test directory is made");
        std::fs::write(dir.join("groups.conf"), groups).expect("the config is written");
        let log = std::fs::File::create(dir.join("nbdkit.log")).expect("the log is made");
        let child = Command::new("nbdkit")
            .args(["-f", "-U"])
            .arg(dir.join("sock"))
            .arg(format!("--filter={}", filter.display()))
            .args(["memory", "64M"])
            .arg(format!("ioshare-filter-config={}", dir.join("groups.conf").display()))
            .arg(format!("ioshare-stats-file={}", dir.join("stats.prom").display()))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nbdkit starts");
        let mut server = Server { child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.dir.join("sock").exists() {
            if let Some(status) = server.child.try_wait().expect("nbdkit can be waited for") {
                return Err(format!("nbdkit exited ({status}): {}", server.log()));
            }
            assert!(Instant::now() < deadline, "nbdkit made no socket in 10 s: {}", server.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.dir.join("sock").display())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("nbdkit.log")).unwrap_or_default()
    }

    /// The value of `metric` in the stats file, if written.
    fn stat(&self, metric: &str) -> Option<f64> {
        let text = std::fs::read_to_string(self.dir.join("stats.prom")).ok()?;
        text.lines().find_map(|l| l.strip_prefix(metric)?.strip_prefix(' ')?.parse().ok())
    }

    /// nbdcopy reading `export` to nowhere in 4 KiB requests (every block: no extents), `requests`
    /// in flight on each of `connections` connections; the caller kills it.
    fn block_reader(&self, export: &str, requests: u32, connections: u32) -> Child {
        Command::new("nbdcopy")
            .args(["--no-extents", "--request-size=4096"])
            .arg(format!("--requests={requests}"))
            .arg(format!("--connections={connections}"))
            .arg(self.uri(export))
            .arg("null:")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nbdcopy starts")
    }

    /// Rewrites the filter's config file with a new modification time (the filter reloads when it
    /// changes; two writes within the file system's time resolution could look like one).
    fn rewrite_config(&self, text: &str) {
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(self.dir.join("groups.conf"), text).expect("the config is rewritten");
    }

    /// Waits (polling the stats file, which the filter rewrites every second) until `ok` holds.
    fn wait_for(&self, what: &str, ok: impl Fn(&Server) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !ok(self) {
            assert!(
                Instant::now() < deadline,
                "{what}: not seen in 15 s; stats:\n{:?}\nlog:\n{}",
                std::fs::read_to_string(self.dir.join("stats.prom")),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn an_unknown_export_is_refused_with_a_line_in_the_log() {
    let Some(filter) = filter() else { return };
    let server = Server::start(&filter, "unknown", "gold 200\n", &[]).expect("nbdkit starts");
    let known = Command::new("nbdinfo").arg(server.uri("gold")).output().expect("nbdinfo runs");
    assert!(known.status.success(), "gold refused: {}", server.log());
    let unknown = Command::new("nbdinfo").arg(server.uri("nope")).output().expect("nbdinfo runs");
    assert!(!unknown.status.success(), "an export missing from the config was served");
    assert!(server.log().contains("export 'nope' is not in"), "no line in the log: {}", server.log());
}

#[test]
fn a_model_the_kernel_would_refuse_stops_nbdkit_from_starting() {
    let Some(filter) = filter() else { return };
    for bad in [&["ioshare-model=rbps=abc"][..], &["ioshare-model=ssd_dfl model=quadratic"], &["ioshare-qos=rpct=200"]]
    {
        let err = Server::start(&filter, "model", "gold 200\n", bad)
            .err()
            .unwrap_or_else(|| panic!("nbdkit started with {bad:?}"));
        assert!(err.contains("io.cost."), "{bad:?}: the error does not name the line: {err}");
    }
}

#[test]
fn a_broken_config_on_reload_keeps_the_running_one() {
    let Some(filter) = filter() else { return };
    let server = Server::start(&filter, "reload", "gold 200\n", &[]).expect("nbdkit starts");
    let weight = r#"ioshare_nbd_group_weight{group="gold"}"#;
    server.wait_for("weight 200", |s| s.stat(weight) == Some(200.0));
    server.rewrite_config("gold heavy\n");
    server.wait_for("the broken file reported", |s| s.stat("ioshare_nbd_config_errors_total") == Some(1.0));
    assert_eq!(server.stat(weight), Some(200.0), "the broken file changed the running config");
    assert!(server.log().contains("keeping the running config"), "no line in the log: {}", server.log());
    assert!(
        Command::new("nbdinfo").arg(server.uri("gold")).output().unwrap().status.success(),
        "gold refused after the broken file"
    );
    server.rewrite_config("gold 300\nsilver 100\n");
    server.wait_for("the fixed file applied", |s| s.stat(weight) == Some(300.0));
}

#[test]
fn a_client_that_disconnects_mid_io_leaves_no_connection_or_queued_io() {
    let Some(filter) = filter() else { return };
    // 20 reads a second: nbdcopy's requests (every block read: no extents) queue in the controller at once.
    let server = Server::start(&filter, "disconnect", "slow 100 iops-read=20\n", &[]).expect("nbdkit starts");
    let mut client = server.block_reader("slow", 16, 2);
    let queued = r#"ioshare_nbd_group_queued{group="slow"}"#;
    let conns = r#"ioshare_nbd_group_connections{group="slow"}"#;
    server.wait_for("IO queued for slow", |s| s.stat(queued).unwrap_or(0.0) > 0.0);
    client.kill().expect("nbdcopy is killed");
    client.wait().expect("nbdcopy is reaped");
    server
        .wait_for("no connection and no queued IO left", |s| s.stat(conns) == Some(0.0) && s.stat(queued) == Some(0.0));
}

#[test]
fn a_group_the_config_drops_is_removed_when_its_last_connection_leaves() {
    let Some(filter) = filter() else { return };
    let server = Server::start(&filter, "drop", "gold 200\nslow 100 iops-read=20\n", &[]).expect("nbdkit starts");
    let removed = "ioshare_nbd_groups_removed_total";
    let conns = r#"ioshare_nbd_group_connections{group="slow"}"#;
    // A client of slow, held at 20 reads a second: connected while the config drops slow.
    let mut client = server.block_reader("slow", 4, 1);
    server.wait_for("slow connected", |s| s.stat(conns) == Some(1.0));
    server.rewrite_config("gold 200\n");
    server.wait_for("the reload applied", |s| s.stat("ioshare_nbd_config_reloads_total") == Some(1.0));
    // Its connection still flows in its group: nothing removed yet, and slow's new clients refused.
    assert_eq!(server.stat(removed), Some(0.0), "slow was removed under its connection");
    assert!(!Command::new("nbdinfo").arg(server.uri("slow")).output().unwrap().status.success());
    client.kill().expect("nbdcopy is killed");
    client.wait().expect("nbdcopy is reaped");
    server.wait_for("slow removed after its last connection", |s| s.stat(removed) == Some(1.0));
    // The controller goes on: gold serves, and a group added again gets a working id.
    server.rewrite_config("gold 200\nsilver 50\n");
    let silver = r#"ioshare_nbd_group_weight{group="silver"}"#;
    server.wait_for("silver configured", |s| s.stat(silver) == Some(50.0));
    for export in ["gold", "silver"] {
        let out = Command::new("nbdcopy").arg(server.uri(export)).arg("null:").output().unwrap();
        assert!(out.status.success(), "{export}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(server.stat(removed), Some(1.0));
}
