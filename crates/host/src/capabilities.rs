//! What the kernel of this host offers for IO control, so `ioshare bench` and the agent can say which
//! kernel peers apply: root, cgroup v1 `blkio` (blk-throttle, BFQ), cgroup v2 `io` (`io.max`,
//! `io.weight`) and kernel iocost (`io.cost.qos`/`io.cost.model`).
//!
//! The probe only reads files; it changes nothing and never fails (what cannot be read counts as
//! absent).
//! - BFQ: offered if a loop device lists `bfq` among its schedulers, or if the blkio hierarchy carries
//!   BFQ's files (the policy registers them when the scheduler is loaded). With no loop device and BFQ
//!   built as a module that is not loaded yet, this reads "absent" although writing `bfq` to a
//!   scheduler file would load it.
//! - cgroup v2 `io`: listed in the v2 root's `cgroup.controllers`; kernel iocost: `io.cost.qos` in the
//!   v2 root (it exists only where the `io` controller lives on v2 and the kernel has iocost).
//! - Buffered writes are written back by kernel threads; only cgroup v2 with both `io` and `memory`
//!   charges that writeback to the cgroup that dirtied the pages. Elsewhere the kernel's controllers
//!   (and so the kernel peers) see direct IO and reads only.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cgroup_mounts::{host_v1_mounts, mount_point, MountedHierarchy};
use crate::privilege::is_root;
use crate::scheduler::parse_scheduler;

/// A kernel mechanism that can run as a peer of ioshare's controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelPeer {
    /// BFQ proportional weights through cgroup v1 `blkio.bfq.weight`.
    BfqV1,
    /// blk-throttle limits through cgroup v1 `blkio.throttle.*`.
    ThrottleV1,
    /// blk-throttle limits through cgroup v2 `io.max`.
    IoMaxV2,
    /// Weights through cgroup v2 `io.weight` (BFQ or iocost).
    IoWeightV2,
    /// Kernel iocost through cgroup v2 `io.cost.qos`/`io.cost.model`.
    IoCostV2,
}

impl fmt::Display for KernelPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelPeer::BfqV1 => "bfq (cgroup v1 blkio.bfq.weight)",
            KernelPeer::ThrottleV1 => "blk-throttle (cgroup v1 blkio.throttle.*)",
            KernelPeer::IoMaxV2 => "blk-throttle (cgroup v2 io.max)",
            KernelPeer::IoWeightV2 => "weights (cgroup v2 io.weight)",
            KernelPeer::IoCostV2 => "kernel iocost (cgroup v2 io.cost.qos/model)",
        })
    }
}

/// How the host's cgroup hierarchies are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupLayout {
    /// Only cgroup v1 hierarchies.
    V1,
    /// Only the unified (v2) hierarchy.
    V2,
    /// v1 controller hierarchies plus a v2 hierarchy (systemd's "hybrid" mode).
    Hybrid,
    /// No cgroup hierarchy mounted.
    None,
}

impl fmt::Display for CgroupLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupLayout::V1 => "v1 (legacy: one hierarchy per controller)",
            CgroupLayout::V2 => "v2 (unified)",
            CgroupLayout::Hybrid => "hybrid (v1 controllers plus a v2 hierarchy)",
            CgroupLayout::None => "none mounted",
        })
    }
}

/// What this host offers for kernel-side IO control.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Running as root (needed for loop devices and cgroup files).
    pub root: bool,
    /// The loop driver is available (`/dev/loop-control` exists).
    pub loop_devices: bool,
    /// Where the cgroup v1 `blkio` hierarchy is mounted.
    pub blkio_v1: Option<PathBuf>,
    /// The blkio hierarchy has blk-throttle's files.
    pub blk_throttle_v1: bool,
    /// The BFQ scheduler can be selected on a loop device.
    pub bfq: bool,
    /// Where the cgroup v2 hierarchy is mounted.
    pub cgroup_v2: Option<PathBuf>,
    /// Controllers available in the v2 hierarchy (`cgroup.controllers` of its root).
    pub v2_controllers: Vec<String>,
    /// Kernel iocost's `io.cost.qos`/`io.cost.model` exist in the v2 root.
    pub io_cost: bool,
    /// Every mounted v1 controller and where (co-mounted controllers share a mount point).
    pub v1_mounts: Vec<(String, PathBuf)>,
}

impl Capabilities {
    /// Probes this host (reads only).
    pub fn probe() -> Self {
        let blkio_v1 = mount_point(MountedHierarchy::V1("blkio"));
        let cgroup_v2 = mount_point(MountedHierarchy::V2);
        let has = |dir: &Option<PathBuf>, file: &str| dir.as_ref().is_some_and(|d| d.join(file).exists());
        let v2_controllers = cgroup_v2
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("cgroup.controllers")).ok())
            .map(|text| text.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        Capabilities {
            root: is_root(),
            loop_devices: Path::new("/dev/loop-control").exists(),
            blk_throttle_v1: has(&blkio_v1, "blkio.throttle.read_iops_device"),
            bfq: loop_offers_bfq(Path::new("/sys/block")) || has(&blkio_v1, "blkio.bfq.io_serviced"),
            io_cost: has(&cgroup_v2, "io.cost.qos"),
            blkio_v1,
            cgroup_v2,
            v2_controllers,
            v1_mounts: host_v1_mounts(),
        }
    }

    /// Whether cgroup v2 has the `memory` controller (the lab guest; not this host, where memory is
    /// bound to v1).
    pub fn memory_v2(&self) -> bool {
        self.v2_controllers.iter().any(|c| c == "memory")
    }

    /// The cgroup v1 memory hierarchy's mount point, if there is one.
    pub fn memory_v1(&self) -> Option<&PathBuf> {
        self.v1_mounts.iter().find(|(c, _)| c == "memory").map(|(_, p)| p)
    }

    /// How the hierarchies are laid out.
    pub fn layout(&self) -> CgroupLayout {
        match (self.v1_mounts.iter().any(|(c, _)| !c.starts_with("name=") && c != "systemd"), &self.cgroup_v2) {
            (true, Some(_)) => CgroupLayout::Hybrid,
            (true, None) => CgroupLayout::V1,
            (false, Some(_)) => CgroupLayout::V2,
            (false, None) => CgroupLayout::None,
        }
    }

    /// Whether the cgroup v2 `io` controller is available.
    pub fn io_v2(&self) -> bool {
        self.v2_controllers.iter().any(|c| c == "io")
    }

    /// Whether the kernel charges buffered-write writeback to the cgroup that dirtied the pages (cgroup
    /// v2 with `io` and `memory`).
    pub fn writeback_attributed(&self) -> bool {
        self.io_v2() && self.v2_controllers.iter().any(|c| c == "memory")
    }

    /// The kernel peers that can run here (root is required for all of them).
    pub fn kernel_peers(&self) -> Vec<KernelPeer> {
        if !self.root {
            return Vec::new();
        }
        let v1 = self.blkio_v1.is_some();
        [
            (KernelPeer::BfqV1, v1 && self.bfq),
            (KernelPeer::ThrottleV1, v1 && self.blk_throttle_v1),
            (KernelPeer::IoMaxV2, self.io_v2()),
            (KernelPeer::IoWeightV2, self.io_v2()),
            (KernelPeer::IoCostV2, self.io_v2() && self.io_cost),
        ]
        .into_iter()
        .filter_map(|(peer, ok)| ok.then_some(peer))
        .collect()
    }
}

impl fmt::Display for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        writeln!(f, "root:                 {}", if self.root { "yes" } else { "no (kernel peers need root)" })?;
        writeln!(f, "cgroup layout:        {}", self.layout())?;
        for (controller, point) in &self.v1_mounts {
            writeln!(f, "  v1 {controller:<17} {}", point.display())?;
        }
        writeln!(
            f,
            "loop devices:         {}",
            if self.loop_devices { "yes" } else { "no (/dev/loop-control missing: modprobe loop)" }
        )?;
        match &self.blkio_v1 {
            Some(dir) => writeln!(
                f,
                "cgroup v1 blkio:      {} (blk-throttle: {}, BFQ: {})",
                dir.display(),
                yes_no(self.blk_throttle_v1),
                yes_no(self.bfq)
            )?,
            None => writeln!(f, "cgroup v1 blkio:      not mounted")?,
        }
        match &self.cgroup_v2 {
            Some(dir) => {
                let controllers =
                    if self.v2_controllers.is_empty() { "none".to_string() } else { self.v2_controllers.join(" ") };
                writeln!(f, "cgroup v2:            {} (controllers: {controllers})", dir.display())?;
            }
            None => writeln!(f, "cgroup v2:            not mounted")?,
        }
        writeln!(
            f,
            "cgroup v2 io:         {}",
            if self.io_v2() { "present (io.max, io.weight)" } else { "absent (no io.max/io.weight)" }
        )?;
        writeln!(f, "kernel iocost:        {}", if self.io_cost { "present (io.cost.qos/model)" } else { "absent" })?;
        writeln!(
            f,
            "buffered writes:      {}",
            if self.writeback_attributed() {
                "charged to the cgroup that dirtied them (cgroup v2 io + memory)"
            } else {
                "not charged to cgroups (writeback runs in kernel threads): kernel limits see direct IO and reads"
            }
        )?;
        let peers = self.kernel_peers();
        if peers.is_empty() {
            write!(f, "kernel peers:         none")
        } else {
            let names: Vec<String> = peers.iter().map(ToString::to_string).collect();
            write!(f, "kernel peers:         {}", names.join(", "))
        }
    }
}

/// Whether the first loop device under `sys_block` offers the `bfq` scheduler.
fn loop_offers_bfq(sys_block: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(sys_block) else { return false };
    entries
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .and_then(|e| std::fs::read_to_string(e.path().join("queue/scheduler")).ok())
        .is_some_and(|text| parse_scheduler(&text).1.contains(&"bfq"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real probe on this host agrees with the files it reads.
    #[test]
    fn probe_matches_the_host() {
        let caps = Capabilities::probe();
        assert_eq!(caps.root, is_root());
        assert_eq!(caps.loop_devices, Path::new("/dev/loop-control").exists());
        if let Some(dir) = &caps.blkio_v1 {
            assert!(dir.join("cgroup.procs").exists(), "{} is not a cgroup directory", dir.display());
        }
        if let Some(dir) = &caps.cgroup_v2 {
            assert!(dir.join("cgroup.controllers").exists(), "{} is not a cgroup v2 root", dir.display());
        }
        eprintln!("{caps}");
    }
}
