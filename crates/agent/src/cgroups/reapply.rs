//! Values the agent wrote that someone else overwrote, written back.
//!
//! Other writers share the cgroup files the agent controls: `systemctl daemon-reload` rewrites the
//! `IOWeight=`/`IOReadIOPSMax=`… of every unit it knows (its own defaults where the unit says
//! nothing), a container runtime sets a container's block-IO class when it updates it, an admin
//! runs `echo`. Left alone, one such write silently ends the agent's control of that cgroup. So the
//! agent looks at everything it wrote again at least every [`RECHECK_WITHIN`] and writes back what
//! someone else changed — one mechanism for every backend, riding on the planning period:
//!
//! - The [`Recorder`](ioshare_host::Recorder), the one place that writes, knows the value it last
//!   wrote to each entry: a write that finds the entry holding something else says
//!   [`Written::Restored`]. Revert on exit (or after a crash) still restores the value from before
//!   the agent's *first* write — the host's own, not the intruder's: the intruder's value lost to
//!   the agent while it ran, and an exiting agent gives back what it found.
//! - Userspace backend: each device's planner writes its limits when they change and, every
//!   [`due`] period, also those it believes unchanged ([`crate::backend::userspace::DeviceLoop::plan`]).
//! - Kernel backend: every [`due`] period the root's `io.cost.model`/`io.cost.qos` lines and each
//!   applied cgroup's `io.weight` and `io.max` are written again (only what differs is written).
//! - Memory: the guard compares each file it set with what it read back after its write, and
//!   writes back those that differ ([`crate::memory::MemoryGuard::reassert`]).
//!
//! Each value written back is counted ([`Overwrites::count`]: the status' `overwritten`, the
//! metric `ioshare_agent_overwritten_total`) and said once in the log per file, so a writer that
//! fights the agent every second does not flood the log.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ioshare_host::Written;

/// The longest a value someone else overwrote stays overwritten (with a planning period longer than
/// this, one period).
pub const RECHECK_WITHIN: Duration = Duration::from_secs(1);

/// Whether period number `n` (counted from 1) of length `period` looks at every value again: every
/// [`RECHECK_WITHIN`] (each look reads the files of every controlled cgroup, so not every period).
pub fn due(n: u64, period: Duration) -> bool {
    let every = (RECHECK_WITHIN.as_nanos() / period.as_nanos().max(1)).max(1) as u64;
    n % every == 0
}

/// The values written back so far, and the files already named in the log.
#[derive(Debug, Default)]
pub struct Overwrites {
    count: u64,
    said: BTreeSet<PathBuf>,
}

impl Overwrites {
    /// Takes what a write of `file` did and passes it on: a [`Written::Restored`] is counted, and
    /// logged the first time for that file.
    pub fn saw(&mut self, file: &Path, written: Written) -> Written {
        if written == Written::Restored {
            self.count += 1;
            if self.said.insert(file.to_path_buf()) {
                tracing::warn!(
                    file = %file.display(),
                    "someone else overwrote a value the agent wrote; written back (said once per file)"
                );
            }
        }
        written
    }

    /// Values written back so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Forgets the files that went with their cgroup (a cgroup made later under the same name is
    /// another one), so what it holds stays the size of what the agent controls.
    pub fn forget_vanished(&mut self) {
        self.said.retain(|f| f.exists());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_about_every_second_whatever_the_period() {
        let at = |period_ms: u64| (1..=40).filter(|&n| due(n, Duration::from_millis(period_ms))).collect::<Vec<_>>();
        assert_eq!(at(100), [10, 20, 30, 40]);
        assert_eq!(at(250), [4, 8, 12, 16, 20, 24, 28, 32, 36, 40]);
        assert_eq!(at(2000).len(), 40, "a period longer than the bound: every period");
    }

    #[test]
    fn only_restores_count_and_each_file_is_said_once() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "").unwrap();
        let mut o = Overwrites::default();
        for (file, w) in
            [(&a, Written::Changed), (&a, Written::Restored), (&a, Written::Restored), (&b, Written::Restored)]
        {
            assert_eq!(o.saw(file, w), w);
        }
        assert_eq!((o.count(), o.said.len()), (3, 2));
        o.forget_vanished();
        assert_eq!(o.said.into_iter().collect::<Vec<_>>(), [a], "b does not exist");
    }
}
