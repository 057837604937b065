//! A MOCK of cgroup v2's `io` files, for the tests that run the agent where this host has no cgroup
//! v2 `io` controller (`kernel_mock.rs`, `churn_mock.rs`; the lab guest runs the real thing): a
//! directory tree laid out as the unified hierarchy, plain files (a write replaces the whole file,
//! where the kernel would merge one device's line), counters written by the test.

use std::path::{Path, PathBuf};

use ioshare_agent::{Agent, Backend, Config, Flavor, Hierarchy};
use ioshare_host::Reverted;
use tempfile::TempDir;

/// A whole block device of this host, `MAJ:MIN` (configuration validation resolves devices for real),
/// whose identity stays while the test runs: a disk rather than a loop device, as other tests attach
/// and detach loop devices and the agent ends its control of a device whose identity (`diskseq`)
/// changed (the mock tests only read the device's counters; nothing is written to it). A loop
/// device only where the host has nothing else.
pub fn some_device() -> String {
    let mut entries: Vec<_> = std::fs::read_dir("/sys/block").unwrap().flatten().map(|e| e.path()).collect();
    entries.sort_by_key(|p| (p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("loop")), p.clone()));
    let first = entries.first().expect("a block device");
    std::fs::read_to_string(first.join("dev")).unwrap().trim().to_string()
}

/// The mock tree, the agent's state directory, and the device the configurations name.
pub struct V2Tree {
    /// The tree's root (the unified hierarchy's root).
    pub root: TempDir,
    /// The agent's state directory.
    pub state: TempDir,
    /// [`some_device`].
    pub dev: String,
}

impl V2Tree {
    /// An empty tree.
    pub fn new() -> V2Tree {
        V2Tree { root: tempfile::tempdir().unwrap(), state: tempfile::tempdir().unwrap(), dev: some_device() }
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

    /// The text of file `rel`.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Cgroup `rel`'s `io.stat`: `rios` 4 KiB reads on the device so far.
    pub fn reads(&self, rel: &str, rios: u64) {
        let line = format!("{} rbytes={} wbytes=0 rios={rios} wios=0 dbytes=0 dios=0\n", self.dev, rios * 4096);
        std::fs::write(self.path(rel).join("io.stat"), line).unwrap();
    }

    /// The agent with `backend` over the tree, on the configuration `toml`; device counters from
    /// this host's `/sys/block`.
    pub fn start(&self, toml: &str, backend: Backend) -> ioshare_agent::Result<(Agent, Option<Reverted>)> {
        let config = Config::parse(toml, Path::new("agent.toml"))?;
        let hierarchy = Hierarchy { flavor: Flavor::V2, root: self.root.path().to_path_buf() };
        Agent::start_in(config, backend, hierarchy, self.state.path(), Path::new("/sys/block"))
    }
}
