//! A guarded group on cgroup v1: priority OOM and early reclaim driven by the kernel's eventfd
//! notifications (no polling of usage).
//!
//! - **Priority OOM.** For a group with a limit the guard sets `oom_kill_disable=1`, so a task that
//!   hits the limit waits (`under_oom`) instead of being killed by the kernel, and listens on the
//!   group's OOM eventfd. On a notification it kills by priority ([`crate::kill::kill_next`]) —
//!   re-snapshotting between kills, so usage is current — until the group is out of OOM (or has
//!   [`OOM_ROOM`] free under its limit). With `dry_run` it changes nothing but the limit asked for:
//!   the kernel's killer stays in charge and the guard reports the choice it would have made.
//! - **Early reclaim.** For a group with watermarks the guard listens on a usage eventfd at
//!   `wmark_high`; when usage is above it, it lowers the limit in steps of at most
//!   [`RECLAIM_STEP`] (the kernel reclaims down to each step, or refuses what it cannot reclaim)
//!   until usage is below `wmark_low`, then puts the limit back. The limit is in the journal from
//!   the start, so the watchdog restores it should the guard die mid-round.
//!
//! Every change (the limit, `oom_kill_disable`) goes through the guard's [`Journal`], which writes
//! it back when the guard stops: after the guard the kernel's own killer works again everywhere it
//! was paused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ioshare_host::memcg::v1::{EventFd, Memcg};

use super::{GroupWatch, RECLAIM_STEP};
use crate::action::Action;
use crate::error::Result;
use crate::journal::{Journal, Knob};
use crate::kill::{kill_next, MemoryGroup, Ranks};
use crate::watermark::{MemorySettings, Watermarks};

/// Free room under the limit that ends an OOM: the kernel wakes the waiting tasks when memory is
/// uncharged, but `under_oom` reads 1 until they have run again, which on a busy machine takes a
/// while; killing on meanwhile would take a second victim for nothing. A waiting task needs one
/// charge batch (or a huge page, 2 MiB).
pub const OOM_ROOM: u64 = 4 << 20;

/// Limits at or above this read as "no limit" (the kernel shows a page-rounded `i64::MAX`).
const UNLIMITED: u64 = 1 << 62;

/// A guarded cgroup v1 memory cgroup: its OOM and usage-threshold eventfds.
#[derive(Debug)]
pub struct EventfdWatch {
    memcg: Memcg,
    /// The group's limit, once started (`None`: no limit).
    limit: Option<u64>,
    oom: Option<EventFd>,
    above_high: Option<(EventFd, Watermarks)>,
}

impl EventfdWatch {
    /// The cgroup v1 memory cgroup at `dir`, not yet set up.
    pub fn open(dir: &Path) -> Result<EventfdWatch> {
        Ok(EventfdWatch { memcg: Memcg::at(dir)?, limit: None, oom: None, above_high: None })
    }

    /// Whether the group is still out of memory: under OOM with less than [`OOM_ROOM`] free. A group
    /// removed meanwhile (its notification fires on removal) is not.
    fn short_of_memory(&self) -> bool {
        let m = &self.memcg;
        let free = match (m.limit(), m.usage()) {
            (Ok(limit), Ok(usage)) => limit.saturating_sub(usage),
            _ => return false,
        };
        m.oom_control().is_ok_and(|c| c.under_oom) && free < OOM_ROOM
    }

    /// Kills by priority until the group is out of OOM (or, in a dry run, reports the first choice).
    fn end_oom(&self, ranks: &Ranks, dry_run: bool) -> Result<Vec<Action>> {
        let m = &self.memcg;
        let mut actions = Vec::new();
        let mut failed: Vec<PathBuf> = Vec::new();
        while dry_run || self.short_of_memory() {
            let Some(action) = kill_next(m, ranks, &mut failed, dry_run)? else { break };
            actions.push(action);
            if dry_run {
                break;
            }
        }
        Ok(actions)
    }
}

impl GroupWatch for EventfdWatch {
    fn start(&mut self, settings: &MemorySettings, dry_run: bool, journal: &mut Journal) -> Result<()> {
        let m = &self.memcg;
        if let Some(limit) = settings.limit {
            journal.set(Setting::Limit.of(m), limit.to_string())?;
        }
        let limit = Some(m.limit()?).filter(|&l| l < UNLIMITED);
        if limit.is_some() {
            if !dry_run {
                journal.set(Setting::OomKillDisable.of(m), "1".into())?;
            }
            self.oom = Some(m.oom_event()?);
        }
        if let Some(marks) = settings.watermarks_under(limit, m.path())? {
            // Reclaim lowers the limit for a moment: recorded (unchanged) so that it is restored
            // should the guard die mid-round.
            journal.remember(Setting::Limit.of(m))?;
            self.above_high = Some((m.usage_event(marks.high)?, marks));
        }
        self.limit = limit;
        Ok(())
    }

    fn dir(&self) -> &Path {
        self.memcg.path()
    }

    fn acts_at(&self) -> Option<u64> {
        self.oom.as_ref().and(self.limit)
    }

    fn pollfds(&self) -> Vec<libc::pollfd> {
        let fds = self.oom.iter().chain(self.above_high.as_ref().map(|(fd, _)| fd));
        fds.map(|fd| libc::pollfd { fd: fd.raw_fd(), events: libc::POLLIN, revents: 0 }).collect()
    }

    fn usage_check(&self) -> Option<Duration> {
        None
    }

    fn after_wait(&mut self, _polled: &[libc::pollfd], ranks: &Ranks, dry_run: bool) -> Result<Vec<Action>> {
        let mut actions = Vec::new();
        if let Some(oom) = &self.oom {
            // `under_oom` also catches an OOM that outlasted the round its notification started.
            if oom.take()? > 0 || self.memcg.oom_control().is_ok_and(|c| c.under_oom) {
                actions = self.end_oom(ranks, dry_run)?;
            }
        }
        if let Some((fd, _)) = &self.above_high {
            fd.take()?;
        }
        Ok(actions)
    }

    fn reclaim(&self) -> Result<Option<(u64, u64)>> {
        let Some((_, marks)) = self.above_high else { return Ok(None) };
        let m = &self.memcg;
        // A group removed meanwhile has nothing to reclaim.
        let Ok(from) = m.usage() else { return Ok(None) };
        if from <= marks.high {
            return Ok(None);
        }
        let limit = m.limit()?;
        let mut usage = from;
        while usage >= marks.low {
            let step = usage.saturating_sub(RECLAIM_STEP).max(marks.low.saturating_sub(1));
            match m.set_limit(step) {
                Ok(()) => {}
                Err(ioshare_host::Error::LimitBelowUsage { .. }) => break, // nothing more reclaimable
                Err(_) if !m.path().exists() => return Ok(None),           // removed mid-round
                Err(e) => {
                    let _ = m.set_limit(limit);
                    return Err(e.into());
                }
            }
            let Ok(now) = m.usage() else { return Ok(None) };
            if now >= usage {
                break;
            }
            usage = now;
        }
        match m.set_limit(limit) {
            Err(_) if !m.path().exists() => Ok(None),
            done => done.map(|()| Some((from, usage))).map_err(Into::into),
        }
    }
}

/// A value the guard may change on a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Limit,
    OomKillDisable,
}

impl Setting {
    /// This setting of `m`, as the journal changes it.
    fn of(self, m: &Memcg) -> (Memcg, Setting) {
        (m.clone(), self)
    }
}

/// A setting of one group (`oom_kill_disable` is written to `memory.oom_control`; both are numbers).
impl Knob for (Memcg, Setting) {
    fn file(&self) -> PathBuf {
        let name = match self.1 {
            Setting::Limit => "memory.limit_in_bytes",
            Setting::OomKillDisable => "memory.oom_control",
        };
        self.0.path().join(name)
    }

    fn read(&self) -> Result<String> {
        let value = match self.1 {
            Setting::Limit => self.0.limit()?,
            Setting::OomKillDisable => self.0.oom_control()?.oom_kill_disable as u64,
        };
        Ok(value.to_string())
    }

    fn write(&self, value: &str) -> Result<()> {
        match self.1 {
            Setting::Limit => {
                let bytes = value.parse().map_err(|_| ioshare_host::Error::Parse {
                    format: "memory.limit_in_bytes",
                    input: value.to_string(),
                    reason: "expected a byte count".into(),
                })?;
                self.0.set_limit(bytes)?
            }
            Setting::OomKillDisable => self.0.set_oom_kill_disable(value != "0")?,
        }
        Ok(())
    }
}

impl MemoryGroup for Memcg {
    fn open(dir: &Path) -> ioshare_host::Result<Self> {
        Memcg::at(dir)
    }
    fn dir(&self) -> &Path {
        self.path()
    }
    fn usage(&self) -> ioshare_host::Result<u64> {
        Memcg::usage(self)
    }
    fn pids(&self) -> ioshare_host::Result<Vec<u32>> {
        self.procs()
    }
    fn kids(&self) -> ioshare_host::Result<Vec<Self>> {
        self.children()
    }
}
