//! One guard over either hierarchy: the v1 [`Guard`] where memory is a cgroup v1 controller (this
//! host), the v2 [`Guard2`] where it is a cgroup v2 controller (the lab guest, most current hosts).
//! Callers (the agent, the tests) use the same calls on both.

use std::path::PathBuf;
use std::time::Duration;

use ioshare_host::memcg::{v1, v2};

use crate::action::Action;
use crate::error::Result;
use crate::hierarchy::v1::{Changed, Guard, GuardedGroup};
use crate::hierarchy::v2::{Guard2, GuardedGroup2};
use crate::watermark::MemorySettings;

/// A running guard on cgroup v1 or v2.
#[derive(Debug)]
pub enum AnyGuard {
    /// cgroup v1 (`oom_kill_disable`, eventfds, reclaim by lowering the limit).
    V1(Guard),
    /// cgroup v2 (PSI triggers, `memory.events`, `memory.high`, `memory.reclaim`).
    V2(Guard2),
}

impl AnyGuard {
    /// Guards the cgroup directories `groups` (all of one hierarchy: `v2` says which). A directory
    /// that is not a memory cgroup of that hierarchy is an error; nothing is changed then.
    pub fn start(groups: &[(PathBuf, MemorySettings)], v2: bool, dry_run: bool) -> Result<AnyGuard> {
        if v2 {
            let groups = groups
                .iter()
                .map(|(dir, settings)| Ok(GuardedGroup2 { memcg: v2::Memcg::at(dir)?, settings: *settings }))
                .collect::<Result<Vec<_>>>()?;
            Ok(AnyGuard::V2(Guard2::start(groups, dry_run)?))
        } else {
            let groups = groups
                .iter()
                .map(|(dir, settings)| Ok(GuardedGroup { memcg: v1::Memcg::at(dir)?, settings: *settings }))
                .collect::<Result<Vec<_>>>()?;
            Ok(AnyGuard::V1(Guard::start(groups, dry_run)?))
        }
    }

    /// Waits up to `timeout` for notifications and handles them.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<Action>> {
        match self {
            AnyGuard::V1(g) => g.poll(timeout),
            AnyGuard::V2(g) => g.poll(timeout),
        }
    }

    /// Every file changed so far, oldest first.
    pub fn changes(&self) -> Vec<Changed> {
        match self {
            AnyGuard::V1(g) => g.changes(),
            AnyGuard::V2(g) => g.changes(),
        }
    }

    /// Processes killed so far.
    pub fn kills(&self) -> u64 {
        match self {
            AnyGuard::V1(g) => g.kills,
            AnyGuard::V2(g) => g.kills,
        }
    }

    /// Writes back everything changed.
    pub fn restore(&mut self) -> Result<()> {
        match self {
            AnyGuard::V1(g) => g.restore(),
            AnyGuard::V2(g) => g.restore(),
        }
    }
}
