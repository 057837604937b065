//! A cgroup as the share diagnosis reads it, in either hierarchy: its child cgroups, whether processes
//! live in its subtree, the proportional weight a device's scheduler gives it, and (cgroup v2) the
//! controllers enabled for its children (`cgroup.subtree_control`).
//!
//! Read-only and infallible: a cgroup that vanished or a file that cannot be read counts as absent
//! (no children, no processes, no weight file).

use std::path::Path;

use ioshare_core::iocost::line::DevNum;

use crate::blkio::BFQ_WEIGHT_MAX;
use crate::io_weight::{IoWeight, IO_WEIGHT_MAX};

/// The kernel file a cgroup's proportional weight on a device is read from: each weighing
/// mechanism reads its own (BFQ never reads `io.weight`, iocost never `io.bfq.weight`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFile {
    /// cgroup v2 `io.weight`: kernel iocost, 1..=10000.
    IoCost,
    /// cgroup v2 `io.bfq.weight`: BFQ, 1..=1000.
    BfqV2,
    /// cgroup v1 `blkio.bfq.weight_device` (per-device lines under `default N`), else
    /// `blkio.bfq.weight`: BFQ, 1..=1000.
    BfqV1,
}

impl WeightFile {
    /// The file's name.
    pub fn name(self) -> &'static str {
        match self {
            WeightFile::IoCost => "io.weight",
            WeightFile::BfqV2 => "io.bfq.weight",
            WeightFile::BfqV1 => "blkio.bfq.weight_device",
        }
    }

    /// The largest weight the mechanism takes.
    pub fn max(self) -> u32 {
        match self {
            WeightFile::IoCost => IO_WEIGHT_MAX,
            WeightFile::BfqV2 | WeightFile::BfqV1 => BFQ_WEIGHT_MAX,
        }
    }

    /// The weight the cgroup at `dir` has on `dev`, if the file is there.
    pub fn read(self, dir: &Path, dev: DevNum) -> Option<u32> {
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        match read(self.name()).and_then(|t| t.parse::<IoWeight>().ok()) {
            Some(w) => Some(w.weight_on(dev)),
            None if self == WeightFile::BfqV1 => read("blkio.bfq.weight").and_then(|t| t.trim().parse().ok()),
            None => None,
        }
    }
}

/// The names of the child cgroups of the cgroup at `dir`, sorted.
pub fn child_cgroups(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// Whether any process lives in the cgroup at `dir` or below it: cgroup v2's `cgroup.events`
/// (`populated 1`), else (v1) a non-empty `cgroup.procs` here or in a descendant.
pub fn populated(dir: &Path) -> bool {
    if let Ok(events) = std::fs::read_to_string(dir.join("cgroup.events")) {
        return events.lines().any(|l| l.trim() == "populated 1");
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    !procs.trim().is_empty() || child_cgroups(dir).iter().any(|c| populated(&dir.join(c)))
}

/// The controllers cgroup v2 enables for the children of the cgroup at `dir`
/// (`cgroup.subtree_control`); `None` where there is no such file (cgroup v1).
pub fn subtree_control(dir: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
    Some(text.split_whitespace().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: DevNum = DevNum { major: 7, minor: 3 };

    #[test]
    fn weights_come_from_each_mechanisms_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(WeightFile::IoCost.read(d, DEV), None, "no file: no weight");
        std::fs::write(d.join("io.weight"), "default 100\n7:3 250\n").unwrap();
        std::fs::write(d.join("io.bfq.weight"), "default 40\n").unwrap();
        std::fs::write(d.join("blkio.bfq.weight"), "70\n").unwrap();
        assert_eq!(WeightFile::IoCost.read(d, DEV), Some(250), "the device's own line");
        assert_eq!(WeightFile::IoCost.read(d, DevNum { major: 8, minor: 0 }), Some(100), "else the default");
        assert_eq!(WeightFile::BfqV2.read(d, DEV), Some(40));
        assert_eq!(WeightFile::BfqV1.read(d, DEV), Some(70), "v1 without weight_device: blkio.bfq.weight");
        std::fs::write(d.join("blkio.bfq.weight_device"), "default 70\n7:3 900\n").unwrap();
        assert_eq!(WeightFile::BfqV1.read(d, DEV), Some(900));
        assert_eq!((WeightFile::IoCost.max(), WeightFile::BfqV1.max()), (10_000, 1000));
    }

    #[test]
    fn children_processes_and_subtree_control_of_a_laid_out_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for d in ["v1/a/deep", "v1/b", "v2/x", "v2/y"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::fs::write(r.join("v1/file"), "").unwrap();
        assert_eq!(child_cgroups(&r.join("v1")), ["a", "b"]);
        assert!(child_cgroups(&r.join("gone")).is_empty());
        // v1: cgroup.procs, recursively.
        for (d, procs) in [("v1", ""), ("v1/a", ""), ("v1/a/deep", "42\n"), ("v1/b", "")] {
            std::fs::write(r.join(d).join("cgroup.procs"), procs).unwrap();
        }
        assert!(populated(&r.join("v1")) && populated(&r.join("v1/a")) && !populated(&r.join("v1/b")));
        // v2: cgroup.events decides, whatever cgroup.procs says.
        std::fs::write(r.join("v2/x/cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        std::fs::write(r.join("v2/y/cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
        std::fs::write(r.join("v2/y/cgroup.procs"), "7\n").unwrap();
        assert!(populated(&r.join("v2/x")) && !populated(&r.join("v2/y")));
        std::fs::write(r.join("v2/cgroup.subtree_control"), "memory io\n").unwrap();
        assert_eq!(subtree_control(&r.join("v2")), Some(vec!["memory".to_string(), "io".to_string()]));
        assert_eq!(subtree_control(&r.join("v1")), None);
    }
}
