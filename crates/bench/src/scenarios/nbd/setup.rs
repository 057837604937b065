//! What the nbd scenario runs on, each piece removed by its drop guard (also on an error or an
//! interrupt): the tools it needs ([`missing_tool`]), the filter built from `packaging/nbdkit` and the
//! static `libioshare.a` cargo built beside the `ioshare` binary ([`build_filter`]), the device
//! ([`CappedDevice`]: a file the scenario writes, a loop device over it with direct IO, and the
//! blkio cgroup that caps what nbdkit may do on it), and one nbdkit at a time ([`Server`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use ioshare_engine::target::TempTarget;
use ioshare_host::{is_root, BlkioCgroup, Capabilities, LoopDevice, ProcessStat, ThrottleKnob};

/// Size of the scenario's file, bytes: written in full, so every read reaches the disk.
pub const FILE_SIZE: u64 = 1 << 30;
/// How long nbdkit may take to make its socket.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The one-line reason the scenario cannot run here, if it cannot.
pub fn missing_tool() -> Option<String> {
    if !is_root() {
        return Some("not root (it needs a loop device and a blkio cgroup)".into());
    }
    let caps = Capabilities::probe();
    if caps.blkio_v1.is_none() || !caps.blk_throttle_v1 {
        return Some("no cgroup v1 blkio with blk-throttle (it caps the device with it)".into());
    }
    let runs = |cmd: &str, args: &[&str]| {
        Command::new(cmd).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    };
    if !runs("nbdkit", &["--version"]) {
        return Some("nbdkit is missing (scripts/setup.sh installs nbdkit and nbdkit-plugin-dev)".into());
    }
    if !runs("pkg-config", &["--exists", "nbdkit"]) {
        return Some("nbdkit's filter headers are missing (install nbdkit-plugin-dev)".into());
    }
    if !runs("fio", &["--enghelp=nbd"]) {
        return Some("fio with its nbd engine is missing (Debian's fio has it, built with libnbd)".into());
    }
    if !runs("cc", &["--version"]) {
        return Some("no C compiler (cc) to build the filter".into());
    }
    if static_library().is_none() {
        return Some("libioshare.a is not beside the ioshare binary: cargo build --release -p ioshare-ffi".into());
    }
    None
}

/// The filter's sources: `IOSHARE_NBDKIT_SRC`, else `packaging/nbdkit` of the sources this was built from.
fn filter_sources() -> PathBuf {
    std::env::var_os("IOSHARE_NBDKIT_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/nbdkit"))
}

/// `libioshare.a` beside the running binary (`target/release/`), or one directory up (a test binary
/// in `target/release/deps/`).
fn static_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().skip(1).take(2).map(|d| d.join("libioshare.a")).find(|p| p.is_file())
}

/// Builds the filter into `dir`; `Err` with the compiler's complaint.
pub fn build_filter(dir: &Path) -> Result<PathBuf, String> {
    let lib = static_library().ok_or("libioshare.a not found: cargo build --release -p ioshare-ffi")?;
    let cflags =
        Command::new("pkg-config").args(["--cflags", "nbdkit"]).output().map_err(|e| format!("pkg-config: {e}"))?;
    let src = filter_sources();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ffi/include");
    let out = dir.join("nbdkit-ioshare-filter.so");
    let built = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-O2", "-o"])
        .arg(&out)
        .args(String::from_utf8_lossy(&cflags.stdout).split_whitespace())
        .arg("-I")
        .arg(include)
        .arg(src.join("nbdkit-ioshare-filter.c"))
        .arg(src.join("config-file.c"))
        .arg(lib)
        .args(["-lpthread", "-ldl", "-lm"])
        .output()
        .map_err(|e| format!("cc: {e}"))?;
    if !built.status.success() {
        let why = String::from_utf8_lossy(&built.stderr);
        return Err(format!("building the filter failed: {}", why.lines().next().unwrap_or("no output")));
    }
    Ok(out)
}

/// A directory for the run's files (socket, filter, configs, logs), removed on drop.
pub struct WorkDir(PathBuf);

impl WorkDir {
    /// Creates `ioshare-bench-nbd-<pid>` in the system's temporary directory (a stale one of a killed
    /// run with the same pid is replaced).
    pub fn create() -> Result<WorkDir, String> {
        let dir = std::env::temp_dir().join(format!("ioshare-bench-nbd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(WorkDir(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The device: a loop device (direct IO) over a file the scenario wrote, and a blkio cgroup whose
/// blk-throttle limits cap what nbdkit, started inside it, reads and writes there a second.
/// Fields drop in order: the cgroup, the loop device, the file.
pub struct CappedDevice {
    cgroup: BlkioCgroup,
    device: LoopDevice,
    _file: TempTarget,
}

impl CappedDevice {
    /// Writes the file in `dir`, attaches the loop device, creates the cgroup with its caps.
    pub fn new(dir: &Path, read_iops: u64, write_iops: u64, stop: &AtomicBool) -> Result<CappedDevice, String> {
        let file = TempTarget::create(dir, FILE_SIZE, stop, |_, _| {}).map_err(|e| e.to_string())?;
        let device = LoopDevice::attach(file.path(), true).map_err(|e| e.to_string())?;
        let cgroup =
            BlkioCgroup::create(&format!("ioshare-bench-{}/nbdkit", std::process::id())).map_err(|e| e.to_string())?;
        for (knob, iops) in [(ThrottleKnob::ReadIops, read_iops), (ThrottleKnob::WriteIops, write_iops)] {
            cgroup.set_throttle(device.dev(), knob, iops).map_err(|e| e.to_string())?;
        }
        Ok(CappedDevice { cgroup, device, _file: file })
    }

    /// `/dev/loopN`.
    pub fn path(&self) -> &Path {
        self.device.path()
    }
}

/// How one nbdkit is started: its threads, its filters (outermost first) and their parameters after
/// the plugin's.
#[derive(Clone, Debug, Default)]
pub struct ServerSpec {
    /// Threads per connection (`--threads`): requests of one client nbdkit works on at once.
    pub threads: u32,
    /// `--filter=` values.
    pub filters: Vec<String>,
    /// `KEY=VALUE` parameters of the filters.
    pub params: Vec<String>,
}

/// A running nbdkit (the `file` plugin on the capped device, a unix socket in the work directory),
/// killed and reaped on drop.
pub struct Server {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Server {
    /// Starts nbdkit in the device's cgroup and waits for its socket.
    pub fn start(device: &CappedDevice, dir: &Path, spec: &ServerSpec) -> Result<Server, String> {
        let socket = dir.join("nbd.sock");
        let log = dir.join("nbdkit.log");
        let _ = std::fs::remove_file(&socket);
        let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = Command::new("nbdkit");
        cmd.args(["-f", "-U"]).arg(&socket).arg(format!("--threads={}", spec.threads.max(1)));
        cmd.args(spec.filters.iter().map(|f| format!("--filter={f}")));
        // cache=none: nbdkit drops what it read from the page cache, so every read reaches the device;
        // fadvise=random: no read-ahead.
        cmd.arg("file").arg(format!("file={}", device.path().display())).args(["cache=none", "fadvise=random"]);
        cmd.args(&spec.params).stdin(Stdio::null()).stdout(Stdio::null()).stderr(log_file);
        let child = device.cgroup.spawn(cmd).map_err(|e| format!("starting nbdkit: {e}"))?;
        let mut server = Server { child, socket, log };
        let deadline = Instant::now() + START_TIMEOUT;
        while !server.socket.exists() {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("nbdkit exited ({status}): {}", server.log_tail()));
            }
            if Instant::now() > deadline {
                return Err(format!("nbdkit made no socket in {START_TIMEOUT:?}: {}", server.log_tail()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// The NBD URI of `export`.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }

    /// CPU time nbdkit has used so far (all its threads): (user, system), seconds.
    pub fn cpu_seconds(&self) -> Option<(f64, f64)> {
        ProcessStat::read(self.child.id()).map(|p| p.cpu_seconds())
    }

    /// The last line of its log.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().last().unwrap_or("no output").trim().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
