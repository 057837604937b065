//! Killing by priority, the same on cgroup v1 and v2: snapshot the subtree of the group out of
//! memory, choose the victim group by [`crate::priority::choose_victim`], kill its largest process
//! (or all of them when the group is one unit, `oom_group`), and wait for the kernel to see it gone,
//! so the next snapshot's usage is current.
//!
//! The kill is `SIGKILL`, never `SIGTERM`: a process short of memory must not be asked (it may
//! ignore the request, or allocate to handle it). It goes through a pidfd and only to a process
//! still in the victim's cgroup: the cgroup's process list is read before the kill, and a process
//! that exits meanwhile frees its pid, which the kernel may give to a new process anywhere. So the
//! pid is pinned first (`pidfd_open`), then checked to be in the victim's cgroup still, then
//! signalled through the pidfd: a victim that exited by itself, or whose cgroup was removed, between
//! the choice and the kill is reported as [`Action::VictimGone`], and nobody else is signalled.
//!
//! [`MemoryGroup`] is what the walk needs of a cgroup — usage, processes, children; each hierarchy's
//! module ([`crate::hierarchy::v1`], [`crate::hierarchy::v2`]) implements it for its view of a cgroup.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::action::Action;
use crate::error::{Error, Result};
use crate::priority::{choose_victim, Node};
use crate::watermark::MemorySettings;

/// How long a guard waits for a killed process to leave its cgroup.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// A memory cgroup as the priority walk reads it.
pub trait MemoryGroup: Clone + Sized {
    /// The view of the cgroup at `dir`.
    fn open(dir: &Path) -> ioshare_host::Result<Self>;
    /// Its directory.
    fn dir(&self) -> &Path;
    /// Memory charged to it and its descendants, bytes.
    fn usage(&self) -> ioshare_host::Result<u64>;
    /// The processes in it (not in its children).
    fn pids(&self) -> ioshare_host::Result<Vec<u32>>;
    /// Its child cgroups.
    fn kids(&self) -> ioshare_host::Result<Vec<Self>>;
}

/// What the walk knows of the guarded groups: priorities, and which are killed as a unit.
#[derive(Clone, Debug, Default)]
pub struct Ranks {
    /// Priority per cgroup directory (others: 0).
    pub priorities: HashMap<PathBuf, u8>,
    /// Groups whose processes all die together (`oom_group`).
    pub whole: Vec<PathBuf>,
}

impl Ranks {
    /// The ranks of the guarded groups, each named by its cgroup directory.
    pub fn of<'a>(groups: impl IntoIterator<Item = (&'a Path, &'a MemorySettings)>) -> Ranks {
        let mut ranks = Ranks::default();
        for (path, settings) in groups {
            ranks.priorities.insert(path.to_path_buf(), settings.priority);
            if settings.oom_group {
                ranks.whole.push(path.to_path_buf());
            }
        }
        ranks
    }
}

/// The subtree of `root` as the priority rule sees it.
pub fn snapshot<G: MemoryGroup>(root: &G, ranks: &Ranks) -> Result<Node> {
    // A cgroup that vanished has nothing below it to choose.
    let children = root.kids().unwrap_or_default();
    let children = children.iter().filter_map(|c| snapshot(c, ranks).ok()).collect();
    Ok(Node {
        path: root.dir().to_path_buf(),
        priority: ranks.priorities.get(root.dir()).copied().unwrap_or(0),
        usage: root.usage()?,
        procs: root.pids()?.len(),
        children,
    })
}

/// Chooses the next victim below `group` and kills it (in a dry run only reports it): its largest
/// process, or every process when it is a whole group. `failed` collects groups with nothing left to
/// kill, so repeated calls move on. `None` when nothing below `group` can be killed, or `group` is
/// gone; [`Action::VictimGone`] when the victim went between the choice and the kill (its memory is
/// freed anyway: the caller looks again before choosing another).
pub fn kill_next<G: MemoryGroup>(
    group: &G,
    ranks: &Ranks,
    failed: &mut Vec<PathBuf>,
    dry_run: bool,
) -> Result<Option<Action>> {
    loop {
        // The group out of memory was removed: nothing left to relieve.
        let Ok(tree) = snapshot(group, ranks) else { return Ok(None) };
        let Some(victim) = choose_victim(&tree, &|p: &Path| failed.iter().any(|f| f == p)) else {
            return Ok(None);
        };
        let gone = |pid| Action::VictimGone { group: group.dir().to_path_buf(), victim: victim.path.clone(), pid };
        // Its cgroup removed since the snapshot: its processes are gone with it.
        let Ok(victim_cg) = G::open(&victim.path) else { return Ok(Some(gone(None))) };
        let Ok(mut procs) = processes_by_size(&victim_cg) else { return Ok(Some(gone(None))) };
        if !ranks.whole.contains(&victim.path) {
            procs.truncate(1);
        }
        let Some(&(pid, _)) = procs.first() else {
            failed.push(victim.path.clone());
            continue;
        };
        let rss = procs.iter().map(|&(_, r)| r).sum();
        if dry_run {
            let action =
                Action::Killed { group: group.dir().to_path_buf(), victim: victim.path.clone(), pid, rss, dry_run };
            return Ok(Some(action));
        }
        let mut killed = Vec::new();
        for &(pid, rss) in &procs {
            if kill_in(&victim_cg, pid)? {
                killed.push((pid, rss));
            }
        }
        let Some(&(first, _)) = killed.first() else { return Ok(Some(gone(Some(pid)))) };
        for &(pid, _) in &killed {
            wait_gone(&victim_cg, pid);
        }
        let rss = killed.iter().map(|&(_, r)| r).sum();
        let action =
            Action::Killed { group: group.dir().to_path_buf(), victim: victim.path.clone(), pid: first, rss, dry_run };
        return Ok(Some(action));
    }
}

/// SIGKILL to process `pid` of cgroup `g`, if it is still there (see the module notes): `false`
/// when it exited, or left `g`, before the kill.
fn kill_in<G: MemoryGroup>(g: &G, pid: u32) -> Result<bool> {
    let failed = |source| Error::Kill { pid, source };
    // SAFETY: pidfd_open(2) takes a pid and flags; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ESRCH) => Ok(false),
            // A kernel without pidfds (before 5.3): checked, then killed by pid.
            Some(libc::ENOSYS) => kill_by_pid(g, pid),
            _ => Err(failed(e)),
        };
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // The pidfd names one process for good; if that process is in the victim's cgroup, it is the
    // one chosen (or one started there since: the same group's).
    if !g.pids().is_ok_and(|p| p.contains(&pid)) {
        return Ok(false);
    }
    // SAFETY: pidfd_send_signal(2) on a pidfd we own, with no siginfo and no flags.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if sent != 0 {
        let e = std::io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ESRCH) { Ok(false) } else { Err(failed(e)) };
    }
    Ok(true)
}

/// [`kill_in`] without pidfds: the check and the kill are not atomic (a pid freed and reused in
/// between is possible, if unlikely, within microseconds).
fn kill_by_pid<G: MemoryGroup>(g: &G, pid: u32) -> Result<bool> {
    if !g.pids().is_ok_and(|p| p.contains(&pid)) {
        return Ok(false);
    }
    // SAFETY: kill(2) with a pid just read from the victim's cgroup.
    if unsafe { libc::kill(pid as i32, libc::SIGKILL) } != 0 {
        let e = std::io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ESRCH) { Ok(false) } else { Err(Error::Kill { pid, source: e }) };
    }
    Ok(true)
}

/// The processes of `g` itself with their resident sets in bytes, largest first.
fn processes_by_size<G: MemoryGroup>(g: &G) -> Result<Vec<(u32, u64)>> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let rss = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/statm"))
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |pages| pages * page)
    };
    let mut procs: Vec<(u32, u64)> = g.pids()?.into_iter().map(|p| (p, rss(p))).collect();
    procs.sort_by_key(|&(_, rss)| std::cmp::Reverse(rss));
    Ok(procs)
}

/// Waits (bounded) until `pid` has left `g`: the kernel frees its memory as it exits.
fn wait_gone<G: MemoryGroup>(g: &G, pid: u32) {
    let deadline = Instant::now() + KILL_WAIT;
    while Instant::now() < deadline && g.pids().is_ok_and(|p| p.contains(&pid)) {
        std::thread::sleep(Duration::from_millis(5));
    }
}
