//! The cgroup v1 `memory` controller's files, for memory isolation done in userspace: usage and
//! limit, the OOM control (`oom_kill_disable` pauses a group's tasks at OOM instead of killing them),
//! statistics, and eventfd notifications through `cgroup.event_control` (OOM, and usage crossing a
//! threshold), which is how a userspace daemon learns of an OOM or of a watermark crossing without
//! polling (all of this was checked on a cgroup v1 host: `tests/memcg.rs`).
//!
//! [`Memcg`] is a view of an existing memory cgroup directory — a container's, a service's — that it
//! neither created nor removes; [`MemCgroup`] is one this process creates below its own memory cgroup
//! and removes on drop (tests, the bench). Writes here are raw: the agent records what it changes
//! through its own journal before calling them.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use super::listing;
use crate::cgroup_dir::CgroupDir;
use crate::cgroup_mounts::MountedHierarchy;
use crate::error::{parse_error, Error, Result};
use crate::sysfs;

/// The state in `memory.oom_control`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OomControl {
    /// Tasks that hit the limit are paused instead of killed by the kernel.
    pub oom_kill_disable: bool,
    /// The group is under OOM now (its tasks wait while `oom_kill_disable` is set).
    pub under_oom: bool,
    /// OOM kills the kernel made in this group so far.
    pub oom_kill: u64,
}

impl OomControl {
    /// Parses the text of `memory.oom_control` (`key value` lines; unknown keys are ignored).
    pub fn parse(text: &str) -> Result<OomControl> {
        let mut out = OomControl::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line.split_once(' ').ok_or_else(|| bad_oom(line))?;
            let value: u64 = value.trim().parse().map_err(|_| bad_oom(line))?;
            match key {
                "oom_kill_disable" => out.oom_kill_disable = value != 0,
                "under_oom" => out.under_oom = value != 0,
                "oom_kill" => out.oom_kill = value,
                _ => {}
            }
        }
        Ok(out)
    }
}

/// The counter `key` in the text of a `memory.stat` file (`key value` lines), if present.
pub fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

fn bad_oom(line: &str) -> Error {
    parse_error("memory.oom_control", line, "expected 'key number' lines")
}

/// A view of an existing cgroup v1 memory cgroup directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Memcg {
    dir: PathBuf,
}

impl Memcg {
    /// The memory cgroup at `dir` (e.g. `/sys/fs/cgroup/memory/tenants/web`); checks that it is one.
    pub fn at(dir: &Path) -> Result<Memcg> {
        if !dir.join("memory.usage_in_bytes").exists() {
            return Err(Error::NotAMemcgV1(dir.to_path_buf()));
        }
        Ok(Memcg { dir: dir.to_path_buf() })
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn read_u64(&self, file: &'static str) -> Result<u64> {
        let text = sysfs::read(&self.dir.join(file))?;
        text.trim().parse().map_err(|_| parse_error(file, text.trim(), "expected a byte count"))
    }

    /// Memory charged to the group and its descendants, bytes (`memory.usage_in_bytes`).
    pub fn usage(&self) -> Result<u64> {
        self.read_u64("memory.usage_in_bytes")
    }

    /// The hard limit, bytes (`memory.limit_in_bytes`; "no limit" reads as a page-rounded i64::MAX).
    pub fn limit(&self) -> Result<u64> {
        self.read_u64("memory.limit_in_bytes")
    }

    /// Sets the hard limit, bytes. Below the usage the kernel reclaims first and refuses (EBUSY) what
    /// it cannot reclaim: that is [`Error::LimitBelowUsage`].
    pub fn set_limit(&self, bytes: u64) -> Result<()> {
        let file = self.dir.join("memory.limit_in_bytes");
        sysfs::write_raw(&file, &bytes.to_string()).map_err(|e| match e.raw_os_error() {
            Some(libc::EBUSY) => Error::LimitBelowUsage { cgroup: self.dir.clone(), bytes },
            _ => sysfs::file_error(format!("write '{bytes}' to"), &file, e),
        })
    }

    /// `memory.oom_control`.
    pub fn oom_control(&self) -> Result<OomControl> {
        OomControl::parse(&sysfs::read(&self.dir.join("memory.oom_control"))?)
    }

    /// Sets `oom_kill_disable`: with it, tasks hitting the limit wait (under OOM) instead of being
    /// killed, until memory is freed or the flag is cleared again.
    pub fn set_oom_kill_disable(&self, disable: bool) -> Result<()> {
        sysfs::write(&self.dir.join("memory.oom_control"), if disable { "1" } else { "0" })
    }

    /// A counter of `memory.stat` (e.g. `total_cache`, `total_rss`, `total_pgmajfault`), if present.
    pub fn stat(&self, key: &str) -> Result<Option<u64>> {
        Ok(stat_value(&sysfs::read(&self.dir.join("memory.stat"))?, key))
    }

    /// The processes in this cgroup itself (not its descendants), from `cgroup.procs`.
    pub fn procs(&self) -> Result<Vec<u32>> {
        listing::procs(&self.dir)
    }

    /// The child cgroups (directories) of this one.
    pub fn children(&self) -> Result<Vec<Memcg>> {
        Ok(listing::child_dirs(&self.dir)?.into_iter().map(|dir| Memcg { dir }).collect())
    }

    /// Notifies when the group goes under OOM (`memory.oom_control` through `cgroup.event_control`).
    pub fn oom_event(&self) -> Result<EventFd> {
        self.register("memory.oom_control", None)
    }

    /// Notifies when usage crosses `bytes`, in either direction (`memory.usage_in_bytes` threshold).
    pub fn usage_event(&self, bytes: u64) -> Result<EventFd> {
        self.register("memory.usage_in_bytes", Some(bytes))
    }

    /// Registers an eventfd for `file` (with an argument) with `cgroup.event_control`.
    fn register(&self, file: &'static str, arg: Option<u64>) -> Result<EventFd> {
        let efd = EventFd::new()?;
        let target_path = self.dir.join(file);
        let target = File::open(&target_path).map_err(|e| sysfs::file_error("open".to_string(), &target_path, e))?;
        let line = match arg {
            Some(a) => format!("{} {} {a}", efd.fd.as_raw_fd(), target.as_raw_fd()),
            None => format!("{} {}", efd.fd.as_raw_fd(), target.as_raw_fd()),
        };
        // The kernel takes its own references to both files; ours may close after the write.
        sysfs::write(&self.dir.join("cgroup.event_control"), &line)?;
        Ok(efd)
    }
}

/// An eventfd the kernel signals (cgroup v1 notifications). The registration ends when it is closed
/// (dropped) or when the cgroup is removed.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    fn new() -> Result<EventFd> {
        // SAFETY: eventfd has no memory preconditions; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::KernelFile {
                action: "cannot create an eventfd".into(),
                path: PathBuf::from("eventfd"),
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Waits up to `timeout` for notifications; returns how many arrived (0 on timeout).
    pub fn wait(&self, timeout: Duration) -> Result<u64> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n <= 0 {
            return Ok(0);
        }
        self.take()
    }

    /// Reads and resets the count of notifications so far (0 if none, without waiting).
    pub fn take(&self) -> Result<u64> {
        let mut count = 0u64;
        // SAFETY: reads exactly 8 bytes into a u64 we own.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        if n == 8 {
            Ok(count)
        } else {
            Ok(0)
        }
    }

    /// The descriptor, for polling several at once.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

/// A memory cgroup created below this process's own memory cgroup and removed on drop.
#[derive(Debug)]
pub struct MemCgroup {
    cgroup: CgroupDir,
    files: Memcg,
}

impl MemCgroup {
    /// Creates `name` (e.g. `ioshare-test-<pid>/a`) in the memory hierarchy; refused if it exists.
    pub fn create(name: &str) -> Result<MemCgroup> {
        let cgroup = CgroupDir::create(MountedHierarchy::V1("memory"), Error::MemoryNotMounted, name, &|_| Ok(()))?;
        let files = Memcg::at(cgroup.path())?;
        Ok(MemCgroup { cgroup, files })
    }

    /// Its memory files.
    pub fn memcg(&self) -> &Memcg {
        &self.files
    }

    /// Spawns `cmd` inside it (joins before exec, so every allocation is charged here).
    pub fn spawn(&self, cmd: Command) -> Result<Child> {
        self.cgroup.spawn(cmd)
    }

    /// Removes it now, reporting failure (drop does the same but can only print).
    pub fn remove(mut self) -> Result<()> {
        self.cgroup.remove()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_control_is_parsed() {
        let c = OomControl::parse("oom_kill_disable 1\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(c, OomControl { oom_kill_disable: true, under_oom: false, oom_kill: 3 });
        assert!(OomControl::parse("oom_kill_disable yes").unwrap_err().to_string().contains("memory.oom_control"));
    }
}
