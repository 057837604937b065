//! The memory guard: priority OOM and early reclaim for a set of memory cgroups, on cgroup v1 or
//! v2 alike, restoring everything it changed when it stops.
//!
//! One [`Guard`] drives one [`GroupWatch`] per guarded group — an [`EventfdWatch`] where memory
//! is a cgroup v1 controller (this host), a [`PressureWatch`] where it is a cgroup v2 one (the
//! lab guest, most current hosts) — and keeps what the two hierarchies share:
//!
//! - **Start.** Every directory is checked to be a memory cgroup of the hierarchy and every group's
//!   settings are validated before anything is changed; then each watch sets its group up, every
//!   write going through the guard's [`Journal`], and the journal's watchdog is armed.
//! - **Poll.** One `poll(2)` over every group's notifications (bounded by the groups that must
//!   read usage on a clock); then each group handles its OOMs first, then reclaim rounds. A round
//!   starts no sooner than [`RECLAIM_INTERVAL`] and the previous round's duration after the
//!   previous one ended, so a group that refills its cache as fast as it is reclaimed gets at most
//!   half of a core of reclaim, never a spinning one.
//! - **Kill.** Always `SIGKILL` (a process that ignores or handles `SIGTERM` is killed all the same),
//!   and only to a process still in the victim's cgroup, through a pidfd ([`crate::kill`]); a victim
//!   that went between the choice and the kill is counted ([`Guard::victims_gone`]), not replaced
//!   by another until the group is looked at again.
//! - **Vanishing groups.** A guarded group removed while guarded (a container stopping) ends its
//!   OOM handling and its reclaim quietly: never an error of [`Guard::poll`].
//! - **Restore.** [`Guard::restore`] (and dropping the guard) writes back every value changed,
//!   newest first, so the kernel's own killer works again everywhere it was paused; if the process
//!   dies instead (a `kill -9`), the journal's watchdog writes the same values back.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::action::Action;
use crate::error::Result;
use crate::hierarchy::v1::EventfdWatch;
use crate::hierarchy::v2::PressureWatch;
use crate::hierarchy::GroupWatch;
use crate::journal::{Changed, Journal};
use crate::kill::Ranks;
use crate::watermark::MemorySettings;

/// The shortest time between two reclaim rounds of a group. A round also waits as long as the
/// previous one took, so reclaim takes at most half of one core however fast a group refills.
pub const RECLAIM_INTERVAL: Duration = Duration::from_millis(1);

/// A guarded group: its watch, and when its last reclaim round ended and how long it took.
#[derive(Debug)]
struct Guarded {
    watch: Box<dyn GroupWatch>,
    last_reclaim: Option<(Instant, Duration)>,
}

/// The running guard. Dropping it restores what it changed.
#[derive(Debug)]
pub struct Guard {
    groups: Vec<Guarded>,
    journal: Journal,
    ranks: Ranks,
    dry_run: bool,
    kills: u64,
    gone: u64,
}

impl Guard {
    /// Guards the cgroup directories `groups`, all of one hierarchy (`v2` says which): sets limits,
    /// takes OOM handling over from the kernel where the settings ask, and registers the
    /// notifications. A directory that is not a memory cgroup of that hierarchy, or invalid
    /// settings, is an error before anything is changed; a failure part-way restores what was
    /// already changed.
    pub fn start(groups: &[(PathBuf, MemorySettings)], v2: bool, dry_run: bool) -> Result<Guard> {
        let watches = groups.iter().map(|(dir, _)| open(dir, v2)).collect::<Result<Vec<_>>>()?;
        for (_, settings) in groups {
            settings.validate()?;
        }
        let ranks = Ranks::of(groups.iter().map(|(dir, settings)| (dir.as_path(), settings)));
        let mut guard = Guard { groups: Vec::new(), journal: Journal::default(), ranks, dry_run, kills: 0, gone: 0 };
        for (mut watch, (_, settings)) in watches.into_iter().zip(groups) {
            watch.start(settings, dry_run, &mut guard.journal)?;
            guard.groups.push(Guarded { watch, last_reclaim: None });
        }
        guard.journal.arm()?;
        Ok(guard)
    }

    /// Waits up to `timeout` for notifications and handles what arrived: OOMs first, then reclaim.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<Action>> {
        let wanted: Vec<Vec<libc::pollfd>> = self.groups.iter().map(|g| g.watch.pollfds()).collect();
        let mut fds = wanted.concat();
        let timeout = self.groups.iter().filter_map(|g| g.watch.usage_check()).fold(timeout, Duration::min);
        if fds.is_empty() {
            std::thread::sleep(timeout);
        } else {
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        }
        let mut actions = Vec::new();
        let mut polled = fds.as_slice();
        for (g, mine) in self.groups.iter_mut().zip(&wanted) {
            let (own, rest) = polled.split_at(mine.len());
            polled = rest;
            let done = g.watch.after_wait(own, &self.ranks, self.dry_run)?;
            self.kills += done.iter().filter(|a| matches!(a, Action::Killed { dry_run: false, .. })).count() as u64;
            self.gone += done.iter().filter(|a| matches!(a, Action::VictimGone { .. })).count() as u64;
            actions.extend(done);
        }
        for g in &mut self.groups {
            if let Some(a) = reclaim_round(g, self.dry_run)? {
                actions.push(a);
            }
        }
        Ok(actions)
    }

    /// Where priority OOM acts on the group at `path` (v1: its limit; v2: the `memory.high` below
    /// it), if the guard guards one there with a limit.
    pub fn acts_at(&self, path: &Path) -> Option<u64> {
        self.groups.iter().find(|g| g.watch.dir() == path)?.watch.acts_at()
    }

    /// Processes killed so far.
    pub fn kills(&self) -> u64 {
        self.kills
    }

    /// Victims that went (exited by themselves, or their cgroup was removed) between the choice and
    /// the kill so far.
    pub fn victims_gone(&self) -> u64 {
        self.gone
    }

    /// Every file the guard changed so far, oldest first.
    pub fn changes(&self) -> Vec<Changed> {
        self.journal.changes()
    }

    /// Writes back the values the guard set that someone else overwrote, and returns their files
    /// ([`Journal::reassert`]).
    pub fn reassert(&mut self) -> Result<Vec<PathBuf>> {
        self.journal.reassert()
    }

    /// Writes back every value the guard changed, newest first; a group that vanished is skipped.
    pub fn restore(&mut self) -> Result<()> {
        self.journal.restore()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("ioshare-memory: cannot restore a memory setting: {e}");
        }
    }
}

/// The watch of the memory cgroup at `dir` on its hierarchy, not yet set up.
fn open(dir: &Path, v2: bool) -> Result<Box<dyn GroupWatch>> {
    Ok(if v2 { Box::new(PressureWatch::open(dir)?) } else { Box::new(EventfdWatch::open(dir)?) })
}

/// One reclaim round of `g` if its usage is above its high watermark and its last round is far
/// enough in the past (see the module notes); none in a dry run.
fn reclaim_round(g: &mut Guarded, dry_run: bool) -> Result<Option<Action>> {
    if dry_run || g.last_reclaim.is_some_and(|(end, took)| end.elapsed() < took.max(RECLAIM_INTERVAL)) {
        return Ok(None);
    }
    let started = Instant::now();
    let Some((from, to)) = g.watch.reclaim()? else { return Ok(None) };
    let took = started.elapsed();
    g.last_reclaim = Some((Instant::now(), took));
    Ok(Some(Action::Reclaimed { group: g.watch.dir().to_path_buf(), from, to, took }))
}
