//! A guarded group on cgroup v2: priority OOM acting *before* the kernel's OOM killer, and early
//! reclaim through `memory.reclaim`.
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
//!   [`RECLAIM_STEP`] until usage is below `wmark_low` or the kernel finds nothing more (EAGAIN).
//!
//! Every change (`memory.max`, `memory.high`, `memory.oom.group`) goes through the guard's
//! [`Journal`]. `dry_run` changes nothing but the limit asked for, and reports the kill it would
//! make.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ioshare_host::memcg::v2::{format_limit, parse_limit, Memcg, MemoryEvents, PollFile, Stall};

use super::{GroupWatch, RECLAIM_STEP};
use crate::action::Action;
use crate::error::Result;
use crate::journal::{Journal, Knob};
use crate::kill::{kill_next, MemoryGroup, Ranks};
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

/// A guarded cgroup v2 memory cgroup: its PSI trigger and `memory.events`.
#[derive(Debug)]
pub struct PressureWatch {
    memcg: Memcg,
    oom: Option<OomWatch>,
    marks: Option<Watermarks>,
}

impl PressureWatch {
    /// The cgroup v2 memory cgroup at `dir`, not yet set up.
    pub fn open(dir: &Path) -> Result<PressureWatch> {
        Ok(PressureWatch { memcg: Memcg::at(dir)?, oom: None, marks: None })
    }

    /// The group's OOM handling after a wake-up (`psi`: its pressure trigger fired).
    fn check_oom(&mut self, psi: bool, ranks: &Ranks, dry_run: bool) -> Result<Vec<Action>> {
        let Some(o) = self.oom.as_mut() else { return Ok(Vec::new()) };
        let m = &self.memcg;
        let mut actions = Vec::new();
        // A group that vanished has nothing more to guard.
        let Ok(now) = m.events() else { return Ok(actions) };
        if now.oom_kill > o.last.oom_kill {
            actions.push(Action::KernelKilled { group: m.path().to_path_buf(), count: now.oom_kill - o.last.oom_kill });
        }
        let oom = now.oom > o.last.oom;
        let signal = psi || oom || (o.trigger.is_none() && now.high > o.last.high);
        o.last = now;
        if !signal {
            return Ok(actions);
        }
        // One victim per signal: the killed process's memory takes a moment to be uncharged, and a
        // group still over the mark stalls again, which fires the trigger again one window later
        // (as oomd waits after each kill). A dry run leaves `memory.high` alone, so the kernel acts at
        // `memory.max` first: its `oom` event is when the guard would have chosen.
        if m.current().is_ok_and(|c| c >= o.act_at) || (dry_run && oom) {
            actions.extend(kill_next(m, ranks, &mut Vec::new(), dry_run)?);
        }
        Ok(actions)
    }
}

impl GroupWatch for PressureWatch {
    fn start(&mut self, s: &MemorySettings, dry_run: bool, journal: &mut Journal) -> Result<()> {
        let m = &self.memcg;
        if let Some(limit) = s.limit {
            journal.set(Setting::Max.of(m), limit.to_string())?;
        }
        let max = m.max()?;
        if s.oom_group && !dry_run {
            journal.set(Setting::OomGroup.of(m), "1".into())?;
        }
        if let Some(max) = max {
            // Page-aligned, as the kernel keeps it (so `act_at` is what the file then shows).
            let mark = (max - max * HIGH_HEADROOM_PERMILLE / 1000) / PAGE * PAGE;
            let act_at = match m.high()? {
                Some(h) if h <= mark => h,
                _ if dry_run => max,
                _ => {
                    journal.set(Setting::High.of(m), mark.to_string())?;
                    mark
                }
            };
            let stall = PRESSURE_WINDOW * s.oom_pressure / 100;
            let trigger = m.pressure_trigger(Stall::Full, stall, PRESSURE_WINDOW).ok();
            self.oom = Some(OomWatch { trigger, events: m.events_watch()?, last: m.events()?, act_at });
        }
        self.marks = s.watermarks_under(max, m.path())?;
        Ok(())
    }

    fn dir(&self) -> &Path {
        self.memcg.path()
    }

    fn acts_at(&self) -> Option<u64> {
        self.oom.as_ref().map(|o| o.act_at)
    }

    fn pollfds(&self) -> Vec<libc::pollfd> {
        let Some(o) = &self.oom else { return Vec::new() };
        let files = o.trigger.iter().chain([&o.events]);
        files.map(|f| libc::pollfd { fd: f.raw_fd(), events: libc::POLLPRI, revents: 0 }).collect()
    }

    fn usage_check(&self) -> Option<Duration> {
        self.marks.map(|_| WATERMARK_CHECK)
    }

    fn after_wait(&mut self, polled: &[libc::pollfd], ranks: &Ranks, dry_run: bool) -> Result<Vec<Action>> {
        let mut psi = false;
        if let Some(o) = self.oom.as_mut() {
            let files = o.trigger.iter_mut().map(|t| (true, t)).chain([(false, &mut o.events)]);
            for ((is_trigger, file), p) in files.zip(polled) {
                // A group removed meanwhile: nothing to re-arm, nothing to do.
                if p.revents & (libc::POLLPRI | libc::POLLERR) != 0 && file.rearm().is_ok() && is_trigger {
                    psi = true;
                }
            }
        }
        self.check_oom(psi, ranks, dry_run)
    }

    fn reclaim(&self) -> Result<Option<(u64, u64)>> {
        let Some(marks) = self.marks else { return Ok(None) };
        let m = &self.memcg;
        let Ok(from) = m.current() else { return Ok(None) };
        if from <= marks.high {
            return Ok(None);
        }
        let mut usage = from;
        while usage >= marks.low {
            let step = (usage - marks.low + 1).min(RECLAIM_STEP);
            let complete = match m.reclaim(step) {
                Ok(complete) => complete,
                Err(_) if !m.path().exists() => return Ok(None), // removed mid-round
                Err(e) => return Err(e.into()),
            };
            let Ok(now) = m.current() else { return Ok(None) };
            if !complete || now >= usage {
                usage = now;
                break;
            }
            usage = now;
        }
        Ok(Some((from, usage)))
    }
}

/// A file of a v2 memory cgroup the guard may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Max,
    High,
    OomGroup,
}

impl Setting {
    /// This setting of `m`, as the journal changes it.
    fn of(self, m: &Memcg) -> (Memcg, Setting) {
        (m.clone(), self)
    }

    fn name(self) -> &'static str {
        match self {
            Setting::Max => "memory.max",
            Setting::High => "memory.high",
            Setting::OomGroup => "memory.oom.group",
        }
    }
}

/// A setting of one group: `memory.max` and `memory.high` as bytes or `max`, `memory.oom.group` as
/// `0` or `1`.
impl Knob for (Memcg, Setting) {
    fn file(&self) -> PathBuf {
        self.0.path().join(self.1.name())
    }

    fn read(&self) -> Result<String> {
        let m = &self.0;
        Ok(match self.1 {
            Setting::Max => format_limit(m.max()?),
            Setting::High => format_limit(m.high()?),
            Setting::OomGroup => (m.oom_group()? as u8).to_string(),
        })
    }

    fn write(&self, value: &str) -> Result<()> {
        let m = &self.0;
        match self.1 {
            Setting::Max => m.set_max(parse_limit("memory.max", value)?)?,
            Setting::High => m.set_high(parse_limit("memory.high", value)?)?,
            Setting::OomGroup => m.set_oom_group(value == "1")?,
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
        self.current()
    }
    fn pids(&self) -> ioshare_host::Result<Vec<u32>> {
        self.procs()
    }
    fn kids(&self) -> ioshare_host::Result<Vec<Self>> {
        self.children()
    }
}
