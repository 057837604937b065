//! A MOCK of cgroup v2's `io` files, for the tests that run the agent where this host has no cgroup
//! v2 `io` controller (`kernel_mock.rs`, `churn_mock.rs`; the lab guest runs the real thing): a
//! directory tree laid out as the unified hierarchy, plain files (a write replaces the whole file,
//! where the kernel would merge one device's line), counters written by the test — the cgroups'
//! and, so that the agent sees IO on the device whenever a cgroup's counters moved, the device's
//! `stat` in a `/sys/block` of the mock's own.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use ioshare_agent::{Agent, BackendKind, Config, Flavor, Hierarchy};
use ioshare_host::Reverted;
use tempfile::TempDir;

/// A whole block device of this host: its `MAJ:MIN` (configuration validation resolves devices for
/// real) and its name. A disk rather than a loop device where the host has one, as other tests attach
/// and detach loop devices and the agent ends its control of a device whose identity (`diskseq`)
/// changed (the mock tests only read the device's counters; nothing is written to it).
pub fn some_device() -> (String, String) {
    let mut entries: Vec<_> = std::fs::read_dir("/sys/block").unwrap().flatten().map(|e| e.path()).collect();
    entries.sort_by_key(|p| (p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("loop")), p.clone()));
    let first = entries.first().expect("a block device");
    let dev = std::fs::read_to_string(first.join("dev")).unwrap().trim().to_string();
    (dev, first.file_name().unwrap().to_string_lossy().into_owned())
}

/// The mock tree, the agent's state directory, and the device the configurations name.
pub struct V2Tree {
    /// The tree's root (the unified hierarchy's root).
    pub root: TempDir,
    /// The agent's state directory.
    pub state: TempDir,
    /// [`some_device`].
    pub dev: String,
    /// The mock's `/sys/block`, with the device's `stat` and `dev`.
    sys_block: TempDir,
    /// The device's stat file, and the IOs it says were completed so far.
    disk_stat: PathBuf,
    disk_ios: Cell<u64>,
}

impl V2Tree {
    /// An empty tree.
    pub fn new() -> V2Tree {
        let (dev, name) = some_device();
        let sys_block = tempfile::tempdir().unwrap();
        let disk = sys_block.path().join(name);
        std::fs::create_dir(&disk).unwrap();
        std::fs::write(disk.join("dev"), format!("{dev}\n")).unwrap();
        let tree = V2Tree {
            root: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
            dev,
            disk_stat: disk.join("stat"),
            sys_block,
            disk_ios: Cell::new(0),
        };
        tree.bump_disk();
        tree
    }

    /// One more IO completed on the device (its `stat`'s read IOs).
    fn bump_disk(&self) {
        self.disk_ios.set(self.disk_ios.get() + 1);
        std::fs::write(&self.disk_stat, format!("{} 0 0 0 0 0 0 0 0 0 0\n", self.disk_ios.get())).unwrap();
    }

    /// Where `rel` is in the tree.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// A cgroup `rel` with the `io` files a fresh cgroup has.
    pub fn cgroup(&self, rel: &str) {
        let dir = self.path(rel);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("io.weight"), "default 100\n").unwrap();
        std::fs::write(dir.join("io.max"), "").unwrap();
        std::fs::write(dir.join("io.stat"), "").unwrap();
    }

    /// Every file of the tree with its text.
    pub fn snapshot(&self) -> std::collections::BTreeMap<PathBuf, String> {
        let mut out = std::collections::BTreeMap::new();
        let mut dirs = vec![self.root.path().to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    dirs.push(e.path());
                } else {
                    out.insert(e.path(), std::fs::read_to_string(e.path()).unwrap());
                }
            }
        }
        out
    }

    /// The text of file `rel`.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Cgroup `rel`'s `io.stat`: `rios` 4 KiB reads on the device so far.
    pub fn reads(&self, rel: &str, rios: u64) {
        let line = format!("{} rbytes={} wbytes=0 rios={rios} wios=0 dbytes=0 dios=0\n", self.dev, rios * 4096);
        std::fs::write(self.path(rel).join("io.stat"), line).unwrap();
        self.bump_disk();
    }

    /// The agent with `backend` over the tree, on the configuration `toml`; device counters from
    /// the mock's `/sys/block`.
    pub fn start(&self, toml: &str, backend: BackendKind) -> ioshare_agent::Result<(Agent, Option<Reverted>)> {
        let config = Config::parse(toml, Path::new("agent.toml"))?;
        let hierarchy = Hierarchy { flavor: Flavor::V2, root: self.root.path().to_path_buf() };
        Agent::start_in(config, backend, hierarchy, self.state.path(), self.sys_block.path())
    }
}
