//! What a memory guard did, for logs and `agent status`: a kill by priority, a victim that went
//! before the kill, a reclaim round, or a kill the kernel's own OOM killer made. Both hierarchies' guards and the kill walk report it.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the guard did, for logs and `agent status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A process was killed (or, in a dry run, would have been) to end an OOM in `group`.
    Killed {
        /// The group under OOM.
        group: PathBuf,
        /// The group the victim was chosen in.
        victim: PathBuf,
        /// The process.
        pid: u32,
        /// Its resident memory, bytes.
        rss: u64,
        /// True in a dry run: nothing was killed.
        dry_run: bool,
    },
    /// The victim chosen to end an OOM in `group` went before the kill: its process exited by
    /// itself, or its cgroup was removed, between the choice and the kill. Nothing was killed.
    VictimGone {
        /// The group under OOM.
        group: PathBuf,
        /// The group the victim was chosen in.
        victim: PathBuf,
        /// The process chosen (`None`: its cgroup was gone before its processes were read).
        pid: Option<u32>,
    },
    /// Background reclaim ran in `group`.
    Reclaimed {
        /// The group.
        group: PathBuf,
        /// Usage before and after, bytes.
        from: u64,
        /// Usage after.
        to: u64,
        /// How long it took.
        took: Duration,
    },
    /// The kernel's own OOM killer killed in `group` (cgroup v2: `memory.events` `oom_kill` rose).
    KernelKilled {
        /// The group.
        group: PathBuf,
        /// Processes killed since the last look.
        count: u64,
    },
}

impl Action {
    /// The guarded group the action concerns.
    pub fn group(&self) -> &Path {
        match self {
            Action::Killed { group, .. }
            | Action::VictimGone { group, .. }
            | Action::Reclaimed { group, .. }
            | Action::KernelKilled { group, .. } => group,
        }
    }
}
