//! Killing by priority, the same on cgroup v1 and v2: snapshot the subtree of the group out of
//! memory, choose the victim group by [`crate::priority::choose_victim`], kill its largest process
//! (or all of them when the group is one unit, `oom_group`), and wait for the kernel to see it gone,
//! so the next snapshot's usage is current.
//!
//! [`MemoryGroup`] is what the walk needs of a cgroup — usage, processes, children; each hierarchy's
//! module ([`crate::hierarchy::v1`], [`crate::hierarchy::v2`]) implements it for its view of a cgroup.

use std::collections::HashMap;
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
/// kill, so repeated calls move on. `None` when nothing below `group` can be killed.
pub fn kill_next<G: MemoryGroup>(
    group: &G,
    ranks: &Ranks,
    failed: &mut Vec<PathBuf>,
    dry_run: bool,
) -> Result<Option<Action>> {
    loop {
        let tree = snapshot(group, ranks)?;
        let Some(victim) = choose_victim(&tree, &|p: &Path| failed.iter().any(|f| f == p)) else {
            return Ok(None);
        };
        let victim_cg = G::open(&victim.path)?;
        let mut procs = processes_by_size(&victim_cg)?;
        if !ranks.whole.contains(&victim.path) {
            procs.truncate(1);
        }
        let Some(&(pid, _)) = procs.first() else {
            failed.push(victim.path.clone());
            continue;
        };
        let rss = procs.iter().map(|&(_, r)| r).sum();
        let action =
            Action::Killed { group: group.dir().to_path_buf(), victim: victim.path.clone(), pid, rss, dry_run };
        if !dry_run {
            for &(pid, _) in &procs {
                kill(pid)?;
            }
            for &(pid, _) in &procs {
                wait_gone(&victim_cg, pid);
            }
        }
        return Ok(Some(action));
    }
}

/// SIGKILL to `pid`; a process that exited meanwhile (ESRCH) is not an error.
fn kill(pid: u32) -> Result<()> {
    // SAFETY: kill(2) with a pid read from the cgroup; a pid that has exited meanwhile fails with
    // ESRCH, which the next snapshot sees as a process gone.
    if unsafe { libc::kill(pid as i32, libc::SIGKILL) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(Error::Kill { pid, source: e });
        }
    }
    Ok(())
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
