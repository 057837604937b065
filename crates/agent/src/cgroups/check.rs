//! `ioshare agent check`: what the host offers and which backend the agent would use, and why.
//!
//! - **kernel**: cgroup v2 with the `io` controller and kernel iocost (`io.cost.qos` in the root): the
//!   agent writes `io.cost.model`, `io.cost.qos`, `io.weight` and `io.max`; the kernel does the rest,
//!   per IO, with debt.
//! - **userspace**: blk-throttle is there (v1 `blkio.throttle.*`, or v2 `io.max` without iocost):
//!   ioshare-core's IOCost planner runs in the agent and writes limits each period.
//! - neither: nothing the agent can drive.
//!
//! The buffered-write caveat goes with the hierarchy: only v2 with `io` and `memory` charges
//! writeback to the cgroup that dirtied the pages.

use std::fmt;

use ioshare_host::Capabilities;
use serde::Serialize;

use crate::cgroups::hierarchy::{Flavor, Hierarchy};
use crate::error::{Error, Result};

/// The backend asked for on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The kernel's iocost where it exists, else the userspace planner.
    Auto,
    /// Kernel iocost (cgroup v2).
    Kernel,
    /// The userspace planner over blk-throttle.
    Userspace,
}

/// A backend the agent runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Kernel iocost.
    Kernel,
    /// Userspace IOCost planner writing blk-throttle limits.
    Userspace,
}

impl BackendKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Kernel => "kernel",
            BackendKind::Userspace => "userspace",
        }
    }
}

/// The host's capabilities and the agent's choice.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What the host offers.
    pub capabilities: Capabilities,
    /// The backend `auto` picks, if any.
    pub backend: Option<BackendKind>,
    /// Where it would work.
    pub hierarchy: Option<Hierarchy>,
    /// Why.
    pub why: String,
    /// Whether buffered writes are controlled here, and why.
    pub buffered_writes: String,
}

impl Check {
    /// Probes the host.
    pub fn probe() -> Check {
        Check::from_capabilities(Capabilities::probe())
    }

    /// The choice for given capabilities.
    pub fn from_capabilities(caps: Capabilities) -> Check {
        let v2 = caps.cgroup_v2.clone().filter(|_| caps.io_v2());
        let (backend, hierarchy, why) = match (&v2, &caps.blkio_v1) {
            (Some(root), _) if caps.io_cost => (
                Some(BackendKind::Kernel),
                Some(Hierarchy { flavor: Flavor::V2, root: root.clone() }),
                "cgroup v2 has the io controller and kernel iocost (io.cost.qos): the kernel enforces weights per IO, with debt"
                    .to_string(),
            ),
            (Some(root), _) => (
                Some(BackendKind::Userspace),
                Some(Hierarchy { flavor: Flavor::V2, root: root.clone() }),
                "cgroup v2 io without iocost: the userspace IOCost planner drives io.max limits".to_string(),
            ),
            (None, Some(root)) if caps.blk_throttle_v1 => (
                Some(BackendKind::Userspace),
                Some(Hierarchy { flavor: Flavor::V1, root: root.clone() }),
                "no cgroup v2 io controller (so no kernel iocost); cgroup v1 blkio has blk-throttle: the userspace IOCost \
                 planner drives blkio.throttle.* limits"
                    .to_string(),
            ),
            _ => (None, None, "neither cgroup v2 io nor cgroup v1 blk-throttle is available".to_string()),
        };
        let buffered_writes = if caps.writeback_attributed() {
            "controlled: cgroup v2 with io and memory charges writeback to the cgroup that dirtied the pages"
                .to_string()
        } else {
            "NOT controlled: writeback of dirty page cache runs in kernel flusher threads and is charged to no cgroup \
             (cgroup v1, or v2 without io+memory); limits and weights hold for direct IO, reads, and writes the writer \
             flushes itself (fsync)"
                .to_string()
        };
        Check { capabilities: caps, backend, hierarchy, why, buffered_writes }
    }

    /// The backend and hierarchy for `choice`, or why it cannot run here.
    pub fn select(&self, choice: BackendChoice) -> Result<(BackendKind, Hierarchy)> {
        let caps = &self.capabilities;
        match choice {
            BackendChoice::Auto => match (self.backend, &self.hierarchy) {
                (Some(b), Some(h)) => Ok((b, h.clone())),
                _ => Err(Error::BackendKind { backend: "auto", reason: self.why.clone() }),
            },
            BackendChoice::Kernel => match &caps.cgroup_v2 {
                Some(root) if caps.io_v2() && caps.io_cost => {
                    Ok((BackendKind::Kernel, Hierarchy { flavor: Flavor::V2, root: root.clone() }))
                }
                _ => Err(Error::BackendKind {
                    backend: "kernel",
                    reason: "needs cgroup v2 with the io controller and kernel iocost (io.cost.qos in the v2 root); \
                             use --backend userspace"
                        .into(),
                }),
            },
            BackendChoice::Userspace => match (&caps.cgroup_v2, &caps.blkio_v1) {
                (Some(root), _) if caps.io_v2() => {
                    Ok((BackendKind::Userspace, Hierarchy { flavor: Flavor::V2, root: root.clone() }))
                }
                (_, Some(root)) if caps.blk_throttle_v1 => {
                    Ok((BackendKind::Userspace, Hierarchy { flavor: Flavor::V1, root: root.clone() }))
                }
                _ => Err(Error::BackendKind {
                    backend: "userspace",
                    reason: "needs blk-throttle: cgroup v1 blkio with blkio.throttle.* files, or cgroup v2 io.max"
                        .into(),
                }),
            },
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.capabilities)?;
        match (self.backend, &self.hierarchy) {
            (Some(b), Some(h)) => writeln!(f, "agent backend:        {} in {}", b.name(), h.root.display())?,
            _ => writeln!(f, "agent backend:        none")?,
        }
        writeln!(f, "  why:                {}", self.why)?;
        write!(f, "agent and writes:     buffered writes {}", self.buffered_writes)
    }
}

#[cfg(test)]
mod tests {
    use ioshare_testkit::v1_host;

    use super::*;

    #[test]
    fn v1_host_gets_the_userspace_backend_and_the_caveat() {
        let c = Check::from_capabilities(v1_host());
        assert_eq!(c.backend, Some(BackendKind::Userspace));
        assert_eq!(c.hierarchy.as_ref().unwrap().flavor, Flavor::V1);
        assert!(c.buffered_writes.starts_with("NOT controlled"));
        let e = c.select(BackendChoice::Kernel).unwrap_err().to_string();
        assert!(e.contains("kernel iocost"), "{e}");
        assert!(c.to_string().contains("agent backend:        userspace in /sys/fs/cgroup/blkio"));
    }

    #[test]
    fn v2_host_with_iocost_gets_the_kernel_backend() {
        let caps = Capabilities {
            blkio_v1: None,
            blk_throttle_v1: false,
            v2_controllers: vec!["io".into(), "memory".into()],
            io_cost: true,
            v1_mounts: Vec::new(),
            ..v1_host()
        };
        let c = Check::from_capabilities(caps);
        assert_eq!(c.backend, Some(BackendKind::Kernel));
        assert!(c.buffered_writes.starts_with("controlled"));
        assert_eq!(c.select(BackendChoice::Userspace).unwrap().1.flavor, Flavor::V2);
    }

    #[test]
    fn nothing_to_drive() {
        let caps = Capabilities { blkio_v1: None, blk_throttle_v1: false, cgroup_v2: None, ..v1_host() };
        let c = Check::from_capabilities(caps);
        assert_eq!(c.backend, None);
        assert!(c.select(BackendChoice::Auto).is_err());
    }
}
