//! The cgroup v2 `memory` controller's files, for memory isolation in userspace where the host (or
//! the lab guest) has cgroup v2 memory: usage (`memory.current`), the hard and soft caps
//! (`memory.max`, `memory.high`), `memory.events` (`high`, `max`, `oom`, `oom_kill`), the group's
//! memory pressure (`memory.pressure`, PSI) with **triggers**, `memory.oom.group`, proactive reclaim
//! (`memory.reclaim`) and `memory.stat`.
//!
//! Notifications without polling usage: the kernel wakes `poll(2)` with `POLLPRI` on a cgroup file
//! it changed (`memory.events` when an event was counted, at most every 10 ms) and on a PSI file
//! holding a trigger (`"full <stall µs> <window µs>"` written to it: fires when the group's stall
//! time within the window exceeds the stall). Both are a [`PollFile`]; a kernfs file must be read
//! again after each wake-up to re-arm it ([`PollFile::rearm`]).
//!
//! [`Memcg`] is a view of an existing v2 cgroup directory; create cgroups with [`crate::Cgroup2`].
//! Writes here are raw: the memory guard records what it changes and writes it back.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::listing;
use crate::error::{parse_error, Error, Result};
use crate::sysfs;

/// The counters of `memory.events`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryEvents {
    /// Times usage went over `memory.high` (the allocating task reclaimed and was throttled).
    pub high: u64,
    /// Times an allocation hit `memory.max`.
    pub max: u64,
    /// Times reclaim at `memory.max` failed and the OOM killer was invoked.
    pub oom: u64,
    /// Processes the kernel's OOM killer killed in the group.
    pub oom_kill: u64,
}

impl MemoryEvents {
    /// Parses `memory.events` (`key count` lines; unknown keys are ignored).
    pub fn parse(text: &str) -> Result<MemoryEvents> {
        let mut out = MemoryEvents::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let bad = || parse_error("memory.events", line, "expected 'key number' lines");
            let (key, value) = line.split_once(' ').ok_or_else(bad)?;
            let value: u64 = value.trim().parse().map_err(|_| bad())?;
            match key {
                "high" => out.high = value,
                "max" => out.max = value,
                "oom" => out.oom = value,
                "oom_kill" => out.oom_kill = value,
                _ => {}
            }
        }
        Ok(out)
    }
}

/// One line of a PSI file (`some` or `full`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PressureLine {
    /// Share of time stalled over the last 10 s, percent.
    pub avg10: f64,
    /// Total stall time, microseconds.
    pub total_us: u64,
}

/// `memory.pressure`: `some` (at least one task stalled on memory) and `full` (all non-idle tasks).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pressure {
    /// The `some` line.
    pub some: PressureLine,
    /// The `full` line.
    pub full: PressureLine,
}

impl Pressure {
    /// Parses a PSI file (`some avg10=.. avg60=.. avg300=.. total=..`, then `full ...`).
    pub fn parse(text: &str) -> Result<Pressure> {
        let mut out = Pressure::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let bad = || {
                parse_error("memory.pressure", line, "expected 'some|full avg10=N ... total=N' lines, avg10 0..=100")
            };
            let mut words = line.split_whitespace();
            let slot = match words.next() {
                Some("some") => &mut out.some,
                Some("full") => &mut out.full,
                _ => return Err(bad()),
            };
            for (key, value) in words.filter_map(|w| w.split_once('=')) {
                match key {
                    // A share of time: NaN, infinities and values outside 0..=100 are not one.
                    "avg10" => slot.avg10 = value.parse().ok().filter(|v| (0.0..=100.0).contains(v)).ok_or_else(bad)?,
                    "total" => slot.total_us = value.parse().map_err(|_| bad())?,
                    _ => {}
                }
            }
        }
        Ok(out)
    }
}

/// Which tasks a PSI trigger counts as stalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// At least one task stalled.
    Some,
    /// Every non-idle task of the group stalled at once (no progress at all).
    Full,
}

/// A value of `memory.max`/`memory.high` (`max` = no limit) as bytes; `None` for `max`.
pub fn parse_limit(file: &'static str, text: &str) -> Result<Option<u64>> {
    match text.trim() {
        "max" => Ok(None),
        t => t.parse().map(Some).map_err(|_| parse_error(file, t, "expected a byte count or 'max'")),
    }
}

/// The text that sets `memory.max`/`memory.high` to `bytes` (`None`: no limit).
pub fn format_limit(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "max".to_string(), |b| b.to_string())
}

/// A view of an existing cgroup v2 directory with the memory controller enabled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Memcg {
    dir: PathBuf,
}

impl Memcg {
    /// The cgroup at `dir` (e.g. `/sys/fs/cgroup/tenants/web`); checks it has the memory files.
    pub fn at(dir: &Path) -> Result<Memcg> {
        if !dir.join("memory.current").exists() {
            return Err(Error::NotAMemcgV2(dir.to_path_buf()));
        }
        Ok(Memcg { dir: dir.to_path_buf() })
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn read(&self, file: &str) -> Result<String> {
        sysfs::read(&self.dir.join(file))
    }

    /// Memory charged to the group and its descendants, bytes (`memory.current`).
    pub fn current(&self) -> Result<u64> {
        let text = self.read("memory.current")?;
        text.trim().parse().map_err(|_| parse_error("memory.current", text.trim(), "expected a byte count"))
    }

    /// The hard limit, bytes (`memory.max`; `None`: no limit).
    pub fn max(&self) -> Result<Option<u64>> {
        parse_limit("memory.max", &self.read("memory.max")?)
    }

    /// Sets `memory.max`. Below the usage the kernel reclaims and, failing that, OOM-kills.
    pub fn set_max(&self, bytes: Option<u64>) -> Result<()> {
        sysfs::write(&self.dir.join("memory.max"), &format_limit(bytes))
    }

    /// The throttling limit, bytes (`memory.high`; `None`: no limit).
    pub fn high(&self) -> Result<Option<u64>> {
        parse_limit("memory.high", &self.read("memory.high")?)
    }

    /// Sets `memory.high`: above it the group's allocating tasks reclaim and are throttled (a memory
    /// stall PSI counts); the kernel never OOM-kills for `memory.high`.
    pub fn set_high(&self, bytes: Option<u64>) -> Result<()> {
        sysfs::write(&self.dir.join("memory.high"), &format_limit(bytes))
    }

    /// `memory.events` (hierarchical: the group and its descendants).
    pub fn events(&self) -> Result<MemoryEvents> {
        MemoryEvents::parse(&self.read("memory.events")?)
    }

    /// `memory.pressure`.
    pub fn pressure(&self) -> Result<Pressure> {
        Pressure::parse(&self.read("memory.pressure")?)
    }

    /// Whether the kernel's OOM killer kills the whole group at once (`memory.oom.group`).
    pub fn oom_group(&self) -> Result<bool> {
        Ok(self.read("memory.oom.group")?.trim() == "1")
    }

    /// Sets `memory.oom.group`.
    pub fn set_oom_group(&self, whole: bool) -> Result<()> {
        sysfs::write(&self.dir.join("memory.oom.group"), if whole { "1" } else { "0" })
    }

    /// Asks the kernel to reclaim `bytes` from the group now (`memory.reclaim`); `false` when it
    /// reclaimed less (EAGAIN: nothing more was reclaimable).
    pub fn reclaim(&self, bytes: u64) -> Result<bool> {
        let file = self.dir.join("memory.reclaim");
        match sysfs::write_raw(&file, &bytes.to_string()) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(false),
            Err(e) => Err(sysfs::file_error(format!("write '{bytes}' to"), &file, e)),
        }
    }

    /// The processes in this cgroup itself (not its descendants), from `cgroup.procs`.
    pub fn procs(&self) -> Result<Vec<u32>> {
        listing::procs(&self.dir)
    }

    /// The child cgroups of this one.
    pub fn children(&self) -> Result<Vec<Memcg>> {
        Ok(listing::child_dirs(&self.dir)?.into_iter().map(|dir| Memcg { dir }).collect())
    }

    /// Wakes when the kernel counts a memory event in the group (`memory.events` changed).
    pub fn events_watch(&self) -> Result<PollFile> {
        PollFile::open(&self.dir.join("memory.events"), None)
    }

    /// A PSI trigger on `memory.pressure`: wakes when `stall` time within a `window` (500 ms..10 s)
    /// exceeds `threshold`; at most once per window. Removed when dropped.
    pub fn pressure_trigger(&self, stall: Stall, threshold: Duration, window: Duration) -> Result<PollFile> {
        let kind = match stall {
            Stall::Some => "some",
            Stall::Full => "full",
        };
        let line = format!("{kind} {} {}", threshold.as_micros(), window.as_micros());
        PollFile::open(&self.dir.join("memory.pressure"), Some(&line))
    }
}

/// A kernel file polled for `POLLPRI`: a cgroup file the kernel notifies on change, or a PSI file
/// with a trigger written to it. Closing it (drop) ends the notifications.
#[derive(Debug)]
pub struct PollFile {
    file: File,
    path: PathBuf,
}

impl PollFile {
    fn open(path: &Path, trigger: Option<&str>) -> Result<PollFile> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(trigger.is_some())
            .open(path)
            .map_err(|e| sysfs::file_error("open".to_string(), path, e))?;
        if let Some(line) = trigger {
            // The kernel wants the trigger in one write, NUL-terminated like a C string.
            let mut bytes = line.as_bytes().to_vec();
            bytes.push(0);
            file.write_all(&bytes).map_err(|e| match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => Error::Parse {
                    format: "PSI trigger",
                    input: line.to_string(),
                    reason: format!("refused by {} ({e}); windows are 500 ms..10 s", path.display()),
                },
                _ => sysfs::file_error(format!("write the trigger '{line}' to"), path, e),
            })?;
        }
        let mut watch = PollFile { file, path: path.to_path_buf() };
        watch.rearm()?;
        Ok(watch)
    }

    /// Reads the file from the start (its current contents), which re-arms a kernfs notification.
    pub fn rearm(&mut self) -> Result<String> {
        let mut text = String::new();
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_string(&mut text))
            .map_err(|e| sysfs::file_error("read".to_string(), &self.path, e))?;
        Ok(text)
    }

    /// The descriptor, for polling several at once (`POLLPRI`).
    pub fn raw_fd(&self) -> i32 {
        self.file.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pressure_and_limits_are_parsed() {
        let e = MemoryEvents::parse("low 0\nhigh 7\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n").unwrap();
        assert_eq!(e, MemoryEvents { high: 7, max: 3, oom: 1, oom_kill: 1 });
        assert!(MemoryEvents::parse("oom x").unwrap_err().to_string().contains("memory.events"));
        let p = Pressure::parse(
            "some avg10=1.50 avg60=0.00 avg300=0.00 total=2500\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=900\n",
        )
        .unwrap();
        assert_eq!((p.some.avg10, p.some.total_us, p.full.avg10, p.full.total_us), (1.5, 2500, 0.25, 900));
        assert!(Pressure::parse("most avg10=1").is_err());
        assert_eq!(parse_limit("memory.max", "max\n").unwrap(), None);
        assert_eq!(parse_limit("memory.max", "4096\n").unwrap(), Some(4096));
        assert!(parse_limit("memory.high", "lots").unwrap_err().to_string().contains("memory.high"));
        assert_eq!(format_limit(None), "max");
        assert_eq!(format_limit(Some(10)), "10");
    }
}
