//! The memory guard on cgroup v1: priority OOM and early reclaim for a set of memory cgroups,
//! driven by the kernel's eventfd notifications (no polling of usage).
//!
//! - **Priority OOM.** For every guarded group with a limit the guard sets `oom_kill_disable=1`, so a
//!   task that hits the limit waits (`under_oom`) instead of being killed by the kernel, and listens
//!   on the group's OOM eventfd. On a notification it snapshots the group's subtree, picks the victim
//!   by [`crate::priority::choose_victim`], kills its largest process, waits for the kernel to see it
//!   gone, and repeats — re-snapshotting, so usage is current — until the group is out of OOM. With
//!   `dry_run` it changes nothing: the kernel's killer stays in charge and the guard logs the choice
//!   it would have made.
//! - **Early reclaim.** For a group with watermarks the guard listens on a usage eventfd at
//!   `wmark_high`; when usage is above it, it lowers the limit in steps of at most [`RECLAIM_STEP`]
//!   (the kernel reclaims down to each step, or refuses what it cannot reclaim) until usage is below
//!   `wmark_low`, then restores the limit. A round starts no sooner than [`RECLAIM_INTERVAL`] and the
//!   previous round's duration after it, so a group that refills its cache as fast as it is reclaimed
//!   gets at most half of a core of reclaim, never a spinning one.
//! - **Restore.** Every value the guard changes (limits, `oom_kill_disable`) is remembered with the
//!   value it replaced and written back by [`Guard::restore`] (and on drop), so after the guard the
//!   kernel's own killer works again everywhere it was paused. If the process dies instead (a
//!   `kill -9`), the [`Watchdog`] started with the guard writes the same values back.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ioshare_host::memcg::v1::{EventFd, Memcg};

use crate::action::Action;
use crate::error::{Error, Result};
use crate::kill::{kill_next, Ranks};
use crate::watchdog::Watchdog;
use crate::watermark::{MemorySettings, Watermarks};

/// The most one reclaim step takes at once, bytes: the group's own allocations meanwhile meet a
/// limit at most this far below their usage.
pub const RECLAIM_STEP: u64 = 16 << 20;
/// Free room under the limit that ends an OOM: the kernel wakes the waiting tasks when memory is
/// uncharged, but `under_oom` reads 1 until they have run again, which on a busy machine takes a
/// while; killing on meanwhile would take a second victim for nothing. A waiting task needs one
/// charge batch (or a huge page, 2 MiB).
pub const OOM_ROOM: u64 = 4 << 20;
/// The shortest time between two reclaim rounds of a group. A round also waits as long as the
/// previous one took, so reclaim takes at most half of one core however fast a group refills.
pub const RECLAIM_INTERVAL: Duration = Duration::from_millis(1);

/// A group the guard looks after.
#[derive(Clone, Debug)]
pub struct GuardedGroup {
    /// The memory cgroup.
    pub memcg: Memcg,
    /// Its settings.
    pub settings: MemorySettings,
}

/// A file a guard changed: the value it replaced and the one it wrote (for the agent's journal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    /// The cgroup file.
    pub file: PathBuf,
    /// Its value before the guard, as written back.
    pub previous: String,
    /// The value the guard wrote.
    pub new: String,
}

/// Per group: its notifications and counters.
#[derive(Debug)]
struct Watch {
    group: GuardedGroup,
    oom: Option<EventFd>,
    above_high: Option<(EventFd, Watermarks)>,
    /// When the last reclaim round ended, and how long it took.
    last_reclaim: Option<(Instant, Duration)>,
}

/// The running guard. Dropping it restores what it changed.
#[derive(Debug)]
pub struct Guard {
    watches: Vec<Watch>,
    ranks: Ranks,
    dry_run: bool,
    /// (group, setting, previous value, value written) of every change, oldest first.
    changed: Vec<(Memcg, Setting, u64, u64)>,
    /// Restores the changes if this process dies; `None` once restored (or when nothing changed).
    watchdog: Option<Watchdog>,
    /// Processes killed so far.
    pub kills: u64,
}

/// A value the guard may change on a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Limit,
    OomKillDisable,
}

impl Setting {
    /// The cgroup file that holds it (`oom_kill_disable` is written to `memory.oom_control`).
    fn file(self) -> &'static str {
        match self {
            Setting::Limit => "memory.limit_in_bytes",
            Setting::OomKillDisable => "memory.oom_control",
        }
    }
}

impl Guard {
    /// Validates every group's settings, then sets limits, pauses the kernel's OOM killer where the
    /// guard decides instead, and registers the notifications. Nothing is changed unless every
    /// group's settings are valid; a failure part-way restores what was already changed.
    pub fn start(groups: Vec<GuardedGroup>, dry_run: bool) -> Result<Guard> {
        for g in &groups {
            g.settings.validate()?;
        }
        let ranks = Ranks::of(groups.iter().map(|g| (g.memcg.path(), &g.settings)));
        let mut guard = Guard { watches: Vec::new(), ranks, dry_run, changed: Vec::new(), watchdog: None, kills: 0 };
        for group in groups {
            let watch = guard.watch(group)?;
            guard.watches.push(watch);
        }
        guard.watchdog = guard.start_watchdog()?;
        Ok(guard)
    }

    /// A watchdog restoring, newest first, every value changed so far (the limits reclaim lowers
    /// for a moment included).
    fn start_watchdog(&self) -> Result<Option<Watchdog>> {
        let restore: Vec<(PathBuf, String)> = self
            .changed
            .iter()
            .rev()
            .map(|(m, setting, previous, _)| (m.path().join(setting.file()), previous.to_string()))
            .collect();
        Watchdog::start(&restore)
    }

    fn watch(&mut self, group: GuardedGroup) -> Result<Watch> {
        let m = &group.memcg;
        if let Some(limit) = group.settings.limit {
            self.set(m, Setting::Limit, limit)?;
        }
        let limit = m.limit()?;
        let limited = limit < unlimited_threshold();
        let oom = if limited {
            if !self.dry_run {
                self.set(m, Setting::OomKillDisable, 1)?;
            }
            Some(m.oom_event()?)
        } else {
            None
        };
        let above_high = match group.settings.watermarks(limit) {
            Some(_) if !limited => return Err(Error::NoLimit(m.path().display().to_string())),
            Some(w) => {
                // Reclaim lowers the limit for a moment: recorded (unchanged) so that it is restored
                // should the guard die mid-round.
                if !self.changed.iter().any(|(c, s, _, _)| c == m && *s == Setting::Limit) {
                    self.changed.push((m.clone(), Setting::Limit, limit, limit));
                }
                Some((m.usage_event(w.high)?, w))
            }
            None => None,
        };
        Ok(Watch { group, oom, above_high, last_reclaim: None })
    }

    /// Writes `value` to `setting` of `m`, remembering the previous value the first time.
    fn set(&mut self, m: &Memcg, setting: Setting, value: u64) -> Result<()> {
        let previous = match setting {
            Setting::Limit => m.limit()?,
            Setting::OomKillDisable => m.oom_control()?.oom_kill_disable as u64,
        };
        match self.changed.iter_mut().find(|(c, s, _, _)| c == m && *s == setting) {
            Some(c) => c.3 = value,
            None => self.changed.push((m.clone(), setting, previous, value)),
        }
        write(m, setting, value)
    }

    /// Waits up to `timeout` for a notification and handles what arrived: OOMs first, then reclaim.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<Action>> {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        for w in &self.watches {
            for fd in w.oom.iter().chain(w.above_high.as_ref().map(|(fd, _)| fd)) {
                fds.push(libc::pollfd { fd: fd.raw_fd(), events: libc::POLLIN, revents: 0 });
            }
        }
        if !fds.is_empty() {
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        } else {
            std::thread::sleep(timeout);
        }
        let mut actions = Vec::new();
        for i in 0..self.watches.len() {
            let fired = self.watches[i].oom.as_ref().map_or(Ok(0), EventFd::take)?;
            let under = fired > 0 || self.watches[i].group.memcg.oom_control().is_ok_and(|c| c.under_oom);
            if under && self.watches[i].oom.is_some() {
                actions.extend(self.end_oom(i)?);
            }
        }
        for i in 0..self.watches.len() {
            if let Some((fd, _)) = &self.watches[i].above_high {
                fd.take()?;
            }
            if let Some(a) = self.reclaim_if_above(i)? {
                actions.push(a);
            }
        }
        Ok(actions)
    }

    /// Kills by priority until group `i` is out of OOM (or, in a dry run, reports the first choice).
    fn end_oom(&mut self, i: usize) -> Result<Vec<Action>> {
        let group = self.watches[i].group.memcg.clone();
        let mut actions = Vec::new();
        let mut failed: Vec<PathBuf> = Vec::new();
        while self.dry_run
            || (group.oom_control()?.under_oom && group.limit()?.saturating_sub(group.usage()?) < OOM_ROOM)
        {
            let Some(action) = kill_next(&group, &self.ranks, &mut failed, self.dry_run)? else { break };
            actions.push(action);
            if self.dry_run {
                break;
            }
            self.kills += 1;
        }
        Ok(actions)
    }

    /// One reclaim round of group `i` if its usage is above its high watermark and the last round is
    /// far enough in the past (see the module notes).
    fn reclaim_if_above(&mut self, i: usize) -> Result<Option<Action>> {
        let w = &self.watches[i];
        let Some((_, marks)) = w.above_high else { return Ok(None) };
        if self.dry_run || w.last_reclaim.is_some_and(|(end, took)| end.elapsed() < took.max(RECLAIM_INTERVAL)) {
            return Ok(None);
        }
        let m = w.group.memcg.clone();
        let from = m.usage()?;
        if from <= marks.high {
            return Ok(None);
        }
        let started = Instant::now();
        let limit = m.limit()?;
        let mut usage = from;
        while usage >= marks.low {
            let step = usage.saturating_sub(RECLAIM_STEP).max(marks.low.saturating_sub(1));
            match m.set_limit(step) {
                Ok(()) => {}
                Err(ioshare_host::Error::LimitBelowUsage { .. }) => break, // nothing more reclaimable
                Err(e) => {
                    let _ = m.set_limit(limit);
                    return Err(e.into());
                }
            }
            let now = m.usage()?;
            if now >= usage {
                break;
            }
            usage = now;
        }
        m.set_limit(limit)?;
        let took = started.elapsed();
        self.watches[i].last_reclaim = Some((Instant::now(), took));
        Ok(Some(Action::Reclaimed { group: m.path().to_path_buf(), from, to: usage, took }))
    }

    /// Every file the guard changed so far, oldest first.
    pub fn changes(&self) -> Vec<Changed> {
        self.changed
            .iter()
            .map(|(m, setting, previous, new)| Changed {
                file: m.path().join(setting.file()),
                previous: previous.to_string(),
                new: new.to_string(),
            })
            .collect()
    }

    /// Writes back every value the guard changed, newest first; a group that vanished is skipped.
    pub fn restore(&mut self) -> Result<()> {
        let mut first_error = None;
        while let Some((m, setting, previous, _)) = self.changed.pop() {
            if !m.path().exists() {
                continue;
            }
            if let Err(e) = write(&m, setting, previous) {
                first_error.get_or_insert(e);
            }
        }
        if let Some(w) = self.watchdog.take() {
            w.disarm();
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("ioshare-memory: cannot restore a memory setting: {e}");
        }
    }
}

fn write(m: &Memcg, setting: Setting, value: u64) -> Result<()> {
    match setting {
        Setting::Limit => m.set_limit(value)?,
        Setting::OomKillDisable => m.set_oom_kill_disable(value != 0)?,
    }
    Ok(())
}

/// Limits at or above this read as "no limit" (the kernel shows a page-rounded `i64::MAX`).
fn unlimited_threshold() -> u64 {
    1 << 62
}
