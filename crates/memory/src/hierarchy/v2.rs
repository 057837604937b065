//! The memory guard on cgroup v2: priority OOM acting *before* the kernel's OOM killer, and early
//! reclaim through `memory.reclaim`, for a set of v2 memory cgroups.
//!
//! cgroup v2 has no `oom_kill_disable`: at `memory.max` the kernel kills by size at once. So, as
//! oomd does, the guard acts on pressure instead of on exhaustion:
//! - For a guarded group with a limit it sets `memory.high` [`HIGH_HEADROOM_PERMILLE`] below
//!   `memory.max` (unless the group's own `memory.high` is lower already). An allocation above it is
//!   not killed but reclaimed for and throttled — time the kernel counts as a memory stall.
//! - It writes a PSI trigger `full <oom_pressure % of the window> <window>` to the group's
//!   `memory.pressure`: when the group's tasks stall on memory for that share of a
//!   [`PRESSURE_WINDOW`], `poll` wakes, and if usage is at or above the `memory.high` it acts at, the
//!   guard kills by the same priority walk as on v1 ([`crate::kill::kill_next`]): one victim per
//!   wake-up, so a group still over the mark after a kill is dealt with a window later.
//! - `memory.events` is the fallback signal (it is polled too): `oom` rising means the kernel got to
//!   `memory.max` first (the guard then walks as well, if usage is still high), `oom_kill` rising is
//!   reported as the kernel's own kill ([`Action::KernelKilled`]). Without PSI the `high` event
//!   (usage crossed `memory.high`) stands in for the pressure trigger.
//! - `oom_group = true` sets `memory.oom.group`, so the kernel's fallback kill takes the container
//!   whole, as the guard's own kill does.
//! - Early reclaim: usage is read every [`WATERMARK_CHECK`] (v2 has no usage-threshold
//!   notification); above `wmark_high` the guard writes `memory.reclaim` in steps of at most
//!   [`RECLAIM_STEP`] until usage is below `wmark_low` or the kernel finds nothing more (EAGAIN),
//!   rate-limited like v1's rounds (never more than half a core).
//!
//! Every value changed is recorded with the one it replaced, written back by [`Guard2::restore`] (and
//! on drop), and by the [`Watchdog`] if the process dies. `dry_run` changes nothing but the limit
//! asked for, and reports the kill it would make.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioshare_host::memcg::v2::{format_limit, Memcg, MemoryEvents, PollFile, Stall};

use crate::action::Action;
use crate::error::{Error, Result};
use crate::hierarchy::v1::{Changed, RECLAIM_INTERVAL, RECLAIM_STEP};
use crate::kill::{kill_next, Ranks};
use crate::watchdog::Watchdog;
use crate::watermark::{MemorySettings, Watermarks};

/// The PSI trigger's window: `oom_pressure` percent of it stalled wakes the guard.
pub const PRESSURE_WINDOW: Duration = Duration::from_secs(1);
/// `memory.high` is set this far below `memory.max`, thousandths of the limit: room in which the
/// kernel throttles instead of killing while the guard chooses.
pub const HIGH_HEADROOM_PERMILLE: u64 = 50;
/// The page size `memory.high` is rounded down to.
const PAGE: u64 = 4096;
/// How often usage is compared with the watermarks.
pub const WATERMARK_CHECK: Duration = Duration::from_millis(5);

/// A group the v2 guard looks after.
#[derive(Clone, Debug)]
pub struct GuardedGroup2 {
    /// The cgroup.
    pub memcg: Memcg,
    /// Its settings.
    pub settings: MemorySettings,
}

/// A file of a v2 memory cgroup the guard may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Max,
    High,
    OomGroup,
}

impl Setting {
    fn file(self) -> &'static str {
        match self {
            Setting::Max => "memory.max",
            Setting::High => "memory.high",
            Setting::OomGroup => "memory.oom.group",
        }
    }

    fn read(self, m: &Memcg) -> Result<String> {
        Ok(match self {
            Setting::Max => format_limit(m.max()?),
            Setting::High => format_limit(m.high()?),
            Setting::OomGroup => (m.oom_group()? as u8).to_string(),
        })
    }

    fn write(self, m: &Memcg, value: &str) -> Result<()> {
        let limit = || if value == "max" { None } else { value.parse().ok() };
        match self {
            Setting::Max => m.set_max(limit())?,
            Setting::High => m.set_high(limit())?,
            Setting::OomGroup => m.set_oom_group(value == "1")?,
        }
        Ok(())
    }
}

/// Priority OOM on one group: its notifications and where it acts.
#[derive(Debug)]
struct OomWatch {
    /// The PSI trigger (`None` where the kernel has no PSI).
    trigger: Option<PollFile>,
    events: PollFile,
    last: MemoryEvents,
    /// Usage at or above this, under pressure, is an OOM to end (the group's `memory.high`).
    act_at: u64,
}

#[derive(Debug)]
struct Watch {
    group: GuardedGroup2,
    oom: Option<OomWatch>,
    marks: Option<Watermarks>,
    last_reclaim: Option<(Instant, Duration)>,
}

/// The running v2 guard. Dropping it restores what it changed.
#[derive(Debug)]
pub struct Guard2 {
    watches: Vec<Watch>,
    ranks: Ranks,
    dry_run: bool,
    changed: Vec<(Memcg, Setting, Changed)>,
    watchdog: Option<Watchdog>,
    /// Processes killed so far.
    pub kills: u64,
}

impl Guard2 {
    /// Validates every group's settings, then sets limits, `memory.high` and `memory.oom.group`,
    /// and opens the notifications. A failure part-way restores what was already changed.
    pub fn start(groups: Vec<GuardedGroup2>, dry_run: bool) -> Result<Guard2> {
        for g in &groups {
            g.settings.validate()?;
        }
        let ranks = Ranks::of(groups.iter().map(|g| (g.memcg.path(), &g.settings)));
        let mut guard = Guard2 { watches: Vec::new(), ranks, dry_run, changed: Vec::new(), watchdog: None, kills: 0 };
        for group in groups {
            let watch = guard.watch(group)?;
            guard.watches.push(watch);
        }
        let restore: Vec<(PathBuf, String)> =
            guard.changed.iter().rev().map(|(_, _, c)| (c.file.clone(), c.previous.clone())).collect();
        guard.watchdog = Watchdog::start(&restore)?;
        Ok(guard)
    }

    fn watch(&mut self, group: GuardedGroup2) -> Result<Watch> {
        let m = &group.memcg;
        let s = group.settings;
        if let Some(limit) = s.limit {
            self.set(m, Setting::Max, limit.to_string())?;
        }
        let max = m.max()?;
        if s.oom_group && !self.dry_run {
            self.set(m, Setting::OomGroup, "1".into())?;
        }
        let oom = match max {
            Some(max) => {
                // Page-aligned, as the kernel keeps it (so `act_at` is what the file then shows).
                let mark = (max - max * HIGH_HEADROOM_PERMILLE / 1000) / PAGE * PAGE;
                let act_at = match m.high()? {
                    Some(h) if h <= mark => h,
                    _ if self.dry_run => max,
                    _ => {
                        self.set(m, Setting::High, mark.to_string())?;
                        mark
                    }
                };
                let stall = PRESSURE_WINDOW * s.oom_pressure / 100;
                let trigger = m.pressure_trigger(Stall::Full, stall, PRESSURE_WINDOW).ok();
                Some(OomWatch { trigger, events: m.events_watch()?, last: m.events()?, act_at })
            }
            None => None,
        };
        let marks = match (s.wmark_ratio, max) {
            (0, _) => None,
            (_, None) => return Err(Error::NoLimit(m.path().display().to_string())),
            (_, Some(max)) => s.watermarks(max),
        };
        Ok(Watch { group, oom, marks, last_reclaim: None })
    }

    /// Writes `value` to `setting` of `m`, remembering the previous value the first time.
    fn set(&mut self, m: &Memcg, setting: Setting, value: String) -> Result<()> {
        let previous = setting.read(m)?;
        setting.write(m, &value)?;
        match self.changed.iter_mut().find(|(c, s, _)| c == m && *s == setting) {
            Some((_, _, c)) => c.new = value,
            None => {
                let file = m.path().join(setting.file());
                self.changed.push((m.clone(), setting, Changed { file, previous, new: value }))
            }
        }
        Ok(())
    }

    /// Waits up to `timeout` for a notification (at most [`WATERMARK_CHECK`] when a group has
    /// watermarks) and handles what arrived: OOMs first, then reclaim.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<Action>> {
        let mut fds: Vec<(usize, bool, libc::pollfd)> = Vec::new();
        for (i, w) in self.watches.iter().enumerate() {
            if let Some(o) = &w.oom {
                for (psi, f) in o.trigger.iter().map(|t| (true, t)).chain([(false, &o.events)]) {
                    fds.push((i, psi, libc::pollfd { fd: f.raw_fd(), events: libc::POLLPRI, revents: 0 }));
                }
            }
        }
        let timeout =
            if self.watches.iter().any(|w| w.marks.is_some()) { timeout.min(WATERMARK_CHECK) } else { timeout };
        let mut raw: Vec<libc::pollfd> = fds.iter().map(|f| f.2).collect();
        if raw.is_empty() {
            std::thread::sleep(timeout);
        } else {
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: `raw` is a valid array of pollfd for the duration of the call.
            unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, ms) };
        }
        let mut pressed = vec![false; self.watches.len()];
        for ((i, psi, _), r) in fds.iter().zip(&raw) {
            if r.revents & (libc::POLLPRI | libc::POLLERR) == 0 {
                continue;
            }
            let o = self.watches[*i].oom.as_mut().expect("polled groups have an OOM watch");
            let file = if *psi { o.trigger.as_mut().expect("polled") } else { &mut o.events };
            // A group removed meanwhile: nothing to re-arm, nothing to do.
            if file.rearm().is_ok() && *psi {
                pressed[*i] = true;
            }
        }
        let mut actions = Vec::new();
        for (i, &psi) in pressed.iter().enumerate() {
            actions.extend(self.check_oom(i, psi)?);
        }
        for i in 0..self.watches.len() {
            if let Some(a) = self.reclaim_if_above(i)? {
                actions.push(a);
            }
        }
        Ok(actions)
    }

    /// Group `i`'s OOM handling after a wake-up (`psi`: its pressure trigger fired).
    fn check_oom(&mut self, i: usize, psi: bool) -> Result<Vec<Action>> {
        let w = &mut self.watches[i];
        let Some(o) = w.oom.as_mut() else { return Ok(Vec::new()) };
        let m = w.group.memcg.clone();
        let mut actions = Vec::new();
        // A group that vanished has nothing more to guard.
        let Ok(now) = m.events() else { return Ok(actions) };
        if now.oom_kill > o.last.oom_kill {
            actions.push(Action::KernelKilled { group: m.path().to_path_buf(), count: now.oom_kill - o.last.oom_kill });
        }
        let oom = now.oom > o.last.oom;
        let signal = psi || oom || (o.trigger.is_none() && now.high > o.last.high);
        o.last = now;
        let act_at = o.act_at;
        if !signal {
            return Ok(actions);
        }
        // One victim per signal: the killed process's memory takes a moment to be uncharged, and a
        // group still over the mark stalls again, which fires the trigger again one window later
        // (as oomd waits after each kill). A dry run leaves `memory.high` alone, so the kernel acts at
        // `memory.max` first: its `oom` event is when the guard would have chosen.
        if m.current()? >= act_at || (self.dry_run && oom) {
            if let Some(action) = kill_next(&m, &self.ranks, &mut Vec::new(), self.dry_run)? {
                actions.push(action);
                self.kills += u64::from(!self.dry_run);
            }
        }
        Ok(actions)
    }

    /// One reclaim round of group `i` if its usage is above its high watermark and the last round is
    /// far enough in the past.
    fn reclaim_if_above(&mut self, i: usize) -> Result<Option<Action>> {
        let w = &self.watches[i];
        let Some(marks) = w.marks else { return Ok(None) };
        if self.dry_run || w.last_reclaim.is_some_and(|(end, took)| end.elapsed() < took.max(RECLAIM_INTERVAL)) {
            return Ok(None);
        }
        let m = w.group.memcg.clone();
        let Ok(from) = m.current() else { return Ok(None) };
        if from <= marks.high {
            return Ok(None);
        }
        let started = Instant::now();
        let mut usage = from;
        while usage >= marks.low {
            let step = (usage - marks.low + 1).min(RECLAIM_STEP);
            let complete = m.reclaim(step)?;
            let now = m.current()?;
            if !complete || now >= usage {
                usage = now;
                break;
            }
            usage = now;
        }
        let took = started.elapsed();
        self.watches[i].last_reclaim = Some((Instant::now(), took));
        Ok(Some(Action::Reclaimed { group: m.path().to_path_buf(), from, to: usage, took }))
    }

    /// Every file the guard changed so far, oldest first.
    pub fn changes(&self) -> Vec<Changed> {
        self.changed.iter().map(|(_, _, c)| c.clone()).collect()
    }

    /// Writes back every value the guard changed, newest first; a group that vanished is skipped.
    pub fn restore(&mut self) -> Result<()> {
        let mut first_error = None;
        while let Some((m, setting, c)) = self.changed.pop() {
            if !m.path().exists() {
                continue;
            }
            if let Err(e) = setting.write(&m, &c.previous) {
                first_error.get_or_insert(e);
            }
        }
        if let Some(w) = self.watchdog.take() {
            w.disarm();
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Where priority OOM acts on the group at `path` (its `memory.high`), if it guards one there.
    pub fn acts_at(&self, path: &Path) -> Option<u64> {
        self.watches.iter().find(|w| w.group.memcg.path() == path)?.oom.as_ref().map(|o| o.act_at)
    }
}

impl Drop for Guard2 {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("ioshare-memory: cannot restore a memory setting: {e}");
        }
    }
}
