//! The one place that writes IO-control settings to the host, recording each change so that it can
//! be undone: on request, on a signal, or at the next start after a crash.
//!
//! ioshare-memory's guard keeps a journal of its own as well (`ioshare_memory`'s `journal`): it runs
//! without the agent too, and a change of its (an OOM killer paused) must be undone the moment its
//! process dies, by its watchdog, not at a later start. The agent records the guard's changes here as
//! well, so this file alone restores everything after a crash.
//!
//! Design:
//! - A setting is one *entry* of a kernel file: one device's line of a blk-throttle file, of `io.max`,
//!   `io.weight`, `io.cost.model` or `io.cost.qos` (see [`Entry`]). Before the first write to an
//!   entry the recorder reads the entry's current line (what writing back restores it: a missing
//!   throttle rule reads as `MAJ:MIN 0`, a missing `io.max` line as all `max`) and appends
//!   `(path, key, previous, new)` to the state file, synced, *before* writing the kernel file. A crash
//!   at any point therefore leaves a state file that restores at least everything written, and a
//!   change that cannot be recorded (a full or read-only state directory) is not made: the error
//!   says so. Later values of an entry are appended unsynced (a killed process loses nothing in the
//!   page cache).
//! - Later writes to the same entry keep the first previous value and update the new one; writing the
//!   value an entry already holds is skipped (only changes are written). An entry found holding
//!   something other than the value last written to it here was overwritten by someone else (a
//!   `daemon-reload`, a container runtime): the write puts it back and says so
//!   ([`Written::Restored`]), and revert still restores the value from before the first write, not
//!   the intruder's.
//! - The state file is a checksummed journal ([`crate::journal`]): a line torn by a crash or damaged
//!   costs that line only; revert restores every entry it can read and names the lines it cannot.
//!   It is rewritten whole (write, sync, rename) from the live entries when it has grown, so a
//!   long-running agent's file stays the size of what it controls.
//! - A crash between recording a value and writing it leaves the kernel holding the value recorded
//!   before; revert counts that one as the writer's too.
//! - The state file holds the writer's pid. [`Recorder::open`] refuses a state file of a live process
//!   (another agent), and reverts one whose process is gone (a `kill -9`) before starting afresh.
//! - Revert writes each previous line back, newest first, only where the entry still holds what was
//!   written (someone else's later change is left alone and reported); a file that vanished with its
//!   cgroup is skipped: a cgroup that goes away is not an error, mid-period or at revert.
//!   [`Recorder::revert_where`] reverts a part and forgets it (a device that went away).
//! - Entries whose file is gone are forgotten (nothing of them is left to restore, and a cgroup
//!   created later under the same name is another one): all of a cgroup's when a write finds its
//!   files gone, and any at the next compaction. So the state file of an agent over cgroups that come
//!   and go holds the live ones only.
//! - Every path must lie under one of the cgroup roots given at open (the discovered mount points);
//!   anything else is refused before any write.
//! - Memory settings are whole-file values ([`Entry::Memory`]: `memory.limit_in_bytes`,
//!   `memory.oom_control`'s `oom_kill_disable`, `memory.max`, `memory.high`, `memory.oom.group`)
//!   written by the memory guard, which keeps the value it replaced; [`Recorder::note`] journals
//!   them. They are written back unconditionally at revert (the guard's own reclaim moves a v1 limit
//!   for a moment, so "changed since" means nothing for them).

use std::io;
use std::path::{Component, Path, PathBuf};

use ioshare_core::iocost::line::DevNum;

use crate::error::{Error, Result};
use crate::journal::{self, Change, Contents, JournalFile, STATE_FILE};
use crate::sysfs;

/// Records appended beyond twice the entries tracked that make the next record rewrite the state
/// file from the entries (compaction: a period's limit changes would otherwise grow it forever).
pub const REWRITE_SLACK: usize = 256;

/// One setting inside a kernel file: which line of it a write changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A device's line of a cgroup v1 `blkio.throttle.*_device` file (`MAJ:MIN VALUE`, 0 = no rule).
    Throttle(DevNum),
    /// A device's line of a cgroup v2 `io.max` file.
    IoMax(DevNum),
    /// A device's override in `io.weight` (`MAJ:MIN N`; `MAJ:MIN default` removes it).
    IoWeightDevice(DevNum),
    /// The `default N` line of `io.weight`.
    IoWeightDefault,
    /// A device's line of the root's `io.cost.model` or `io.cost.qos`.
    IoCost(DevNum),
    /// A memory cgroup file's whole value (written by the memory guard, journaled by [`Recorder::note`]).
    Memory,
}

impl Entry {
    /// The key recorded in the state file.
    fn key(self) -> String {
        match self {
            Entry::IoWeightDefault => "default".to_string(),
            Entry::Memory => "memory".to_string(),
            Entry::Throttle(d) | Entry::IoMax(d) | Entry::IoWeightDevice(d) | Entry::IoCost(d) => d.to_string(),
        }
    }

    /// The line that, written to the file, sets the entry to what `text` (the file's contents) shows.
    pub fn current(self, text: &str) -> String {
        let line_of = |dev: DevNum| {
            let prefix = format!("{dev} ");
            text.lines().map(str::trim).find(|l| l.starts_with(&prefix)).map(str::to_string)
        };
        match self {
            Entry::Throttle(d) => line_of(d).unwrap_or_else(|| format!("{d} 0")),
            Entry::IoMax(d) => line_of(d).unwrap_or_else(|| crate::IoMax::unlimited(d).to_string()),
            Entry::IoWeightDevice(d) => line_of(d).unwrap_or_else(|| format!("{d} default")),
            Entry::IoWeightDefault => text
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("default "))
                .map_or_else(|| format!("default {}", crate::IO_WEIGHT_DEFAULT), str::to_string),
            Entry::IoCost(d) => line_of(d).unwrap_or_else(|| format!("{d} ctrl=auto")),
            Entry::Memory => text.trim().to_string(),
        }
    }
}

/// What [`Recorder::set`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The entry changed.
    Changed,
    /// The entry already held the value: nothing written.
    Unchanged,
    /// The entry held something else than the value last written to it here — someone else
    /// overwrote it — and the value was written back.
    Restored,
    /// The file is gone (its cgroup was removed): nothing written, not an error.
    Vanished,
}

/// What a revert did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reverted {
    /// Entries set back to their previous line.
    pub restored: usize,
    /// Entries whose file is gone (cgroup removed).
    pub vanished: usize,
    /// Entries someone else changed since: left alone, with what they hold now.
    pub changed_by_others: Vec<(Change, String)>,
    /// Lines of the state file that could not be read (`line N (record): why: what it holds`): the
    /// settings they recorded, if nothing else recorded them, are not restored.
    pub unreadable: Vec<String>,
}

/// The recording writer: owns the state file of one agent.
#[derive(Debug)]
pub struct Recorder {
    dir: PathBuf,
    journal: JournalFile,
    roots: Vec<PathBuf>,
    changes: Vec<Change>,
}

impl Recorder {
    /// Opens the state directory `dir` (created if missing) for writes under `roots`. A state file
    /// left by a dead process is reverted first (its result returned); one of a live process is
    /// refused.
    pub fn open(dir: &Path, roots: Vec<PathBuf>) -> Result<(Self, Option<Reverted>)> {
        std::fs::create_dir_all(dir).map_err(|e| journal::write_error(dir, e))?;
        let state = dir.join(STATE_FILE);
        let recovered = match journal::read(&state)? {
            Some(Contents { pid: Some(pid), .. }) if pid != std::process::id() && process_alive(pid) => {
                return Err(Error::AgentRunning { pid, state });
            }
            Some(contents) => Some(revert_contents(&state, contents, &roots)?),
            None => None,
        };
        let journal = JournalFile::create(dir, std::process::id(), &[])?;
        Ok((Recorder { dir: dir.to_path_buf(), journal, roots, changes: Vec::new() }, recovered))
    }

    /// The changes recorded so far, oldest first.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Sets `entry` of kernel file `path` by writing `line`, recording the previous line first. A file
    /// that is gone (its cgroup removed) writes nothing, and the cgroup's entries are forgotten.
    pub fn set(&mut self, path: &Path, entry: Entry, line: &str) -> Result<Written> {
        check_under(path, &self.roots)?;
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if vanished(&e) => return Ok(self.vanished(path)),
            Err(e) => return Err(sysfs::file_error("read".into(), path, e)),
        };
        let current = entry.current(&text);
        if same_setting(entry, &current, line) {
            return Ok(Written::Unchanged);
        }
        let key = entry.key();
        let ours = self.changes.iter().find(|c| c.path == path && c.key == key).map(|c| c.new.as_str());
        let overwritten = ours.is_some_and(|ours| !same_setting(entry, &current, ours));
        self.record(path, key, &current, line)?;
        match sysfs::write_raw(path, line) {
            Ok(()) if overwritten => Ok(Written::Restored),
            Ok(()) => Ok(Written::Changed),
            Err(e) if vanished(&e) => Ok(self.vanished(path)),
            Err(e) => Err(sysfs::file_error(format!("write '{line}' to"), path, e)),
        }
    }

    /// Forgets the entries of `path`'s cgroup directory whose files are gone (ENODEV, a device gone
    /// under an existing cgroup, leaves them: see [`Recorder::revert_where`]).
    fn vanished(&mut self, path: &Path) -> Written {
        if let Some(dir) = path.parent() {
            self.changes.retain(|c| c.path.parent() != Some(dir) || c.path.exists());
        }
        Written::Vanished
    }

    /// Drops the entries whose cgroup directory is gone (nothing there to restore: a cgroup's files
    /// go with its directory), rewriting the journal without them; how many were dropped. Called
    /// as cgroups come and go, so the state file stays the size of what the agent controls.
    pub fn forget_vanished(&mut self) -> Result<usize> {
        let before = self.changes.len();
        let mut dirs: std::collections::HashMap<PathBuf, bool> = std::collections::HashMap::new();
        self.changes.retain(|c| {
            let dir = c.path.parent().unwrap_or(&c.path);
            *dirs.entry(dir.to_path_buf()).or_insert_with(|| dir.exists())
        });
        let dropped = before - self.changes.len();
        if dropped > 0 {
            self.journal = JournalFile::create(&self.dir, std::process::id(), &self.changes)?;
        }
        Ok(dropped)
    }

    /// Journals a change someone else wrote (the memory guard): `path` held `previous` and now holds
    /// `new`; revert writes `previous` back ([`Entry::Memory`]).
    pub fn note(&mut self, path: &Path, previous: &str, new: &str) -> Result<()> {
        check_under(path, &self.roots)?;
        let key = Entry::Memory.key();
        if self.changes.iter().any(|c| c.path == path && c.key == key && c.new == new) {
            return Ok(());
        }
        self.record(path, key, previous, new)
    }

    /// Records that entry `key` of `path`, holding `current`, is about to be set to `new`: the
    /// entry's first record keeps `current` as the line to restore and is synced; later ones carry
    /// the same previous line and are appended unsynced (a killed process loses nothing in the page
    /// cache; a power loss resets the kernel's settings too). A journal grown to twice its entries
    /// (plus [`REWRITE_SLACK`]) is rewritten first, from the entries as the kernel holds them now,
    /// without those whose file is gone.
    fn record(&mut self, path: &Path, key: String, current: &str, new: &str) -> Result<()> {
        if self.journal.lines() > 2 * self.changes.len() + REWRITE_SLACK {
            self.changes.retain(|c| c.path.exists());
            self.journal = JournalFile::create(&self.dir, std::process::id(), &self.changes)?;
        }
        let (change, first) = match self.changes.iter().position(|c| c.path == path && c.key == key) {
            Some(i) => {
                let c = &mut self.changes[i];
                c.earlier = Some(std::mem::replace(&mut c.new, new.to_string()));
                (c.clone(), false)
            }
            None => {
                let c = Change {
                    path: path.to_path_buf(),
                    key,
                    previous: current.to_string(),
                    new: new.to_string(),
                    earlier: None,
                };
                self.changes.push(c.clone());
                (c, true)
            }
        };
        self.journal.append(&change, first)
    }

    /// Writes `entry`'s current line back to `path` unchanged (nothing to record): some kernel files
    /// act on being written at all, e.g. blk-throttle starts counting a device's per-cgroup
    /// statistics once a rule for it was written, even `MAJ:MIN 0`.
    pub fn touch(&mut self, path: &Path, entry: Entry) -> Result<Written> {
        check_under(path, &self.roots)?;
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if vanished(&e) => return Ok(Written::Vanished),
            Err(e) => return Err(sysfs::file_error("read".into(), path, e)),
        };
        let line = entry.current(&text);
        sysfs::write_raw(path, &line).map_err(|e| sysfs::file_error(format!("write '{line}' to"), path, e))?;
        Ok(Written::Unchanged)
    }

    /// Restores the entries `which` selects and stops tracking them, e.g. those of a device that went
    /// away: what can still be restored is, and none of them is written again. The state file is
    /// rewritten without them.
    pub fn revert_where(&mut self, which: impl Fn(&Change) -> bool) -> Result<Reverted> {
        let (chosen, kept): (Vec<Change>, Vec<Change>) = self.changes.drain(..).partition(which);
        self.changes = kept;
        let reverted = revert_changes(&chosen, &self.roots);
        self.journal = JournalFile::create(&self.dir, std::process::id(), &self.changes)?;
        Ok(reverted)
    }

    /// Restores every recorded entry and removes the state file.
    pub fn revert(self) -> Result<Reverted> {
        let reverted = revert_changes(&self.changes, &self.roots);
        self.journal.remove()?;
        Ok(reverted)
    }
}

/// Reverts what the state file in `dir` records (an agent killed without cleaning up), if any, and
/// removes it. Refused while the agent that wrote it is alive.
pub fn revert_state_dir(dir: &Path, roots: &[PathBuf]) -> Result<Option<Reverted>> {
    let state = dir.join(STATE_FILE);
    match journal::read(&state)? {
        None => Ok(None),
        Some(Contents { pid: Some(pid), .. }) if process_alive(pid) && pid != std::process::id() => {
            Err(Error::AgentRunning { pid, state })
        }
        Some(contents) => revert_contents(&state, contents, roots).map(Some),
    }
}

/// Reverts what the state file `state` held (`contents`: a dead writer's; a damaged header counts
/// as one, since a live writer's header is written whole before any record) and removes it.
fn revert_contents(state: &Path, contents: Contents, roots: &[PathBuf]) -> Result<Reverted> {
    let reverted = Reverted { unreadable: contents.unreadable, ..revert_changes(&contents.changes, roots) };
    journal::remove(state)?;
    Ok(reverted)
}

/// Writes each change's previous line back, newest first, where the entry still holds a line the
/// writer recorded (its last `new`, the one before it, or the previous line itself).
fn revert_changes(changes: &[Change], roots: &[PathBuf]) -> Reverted {
    let mut out = Reverted::default();
    for c in changes.iter().rev() {
        if check_under(&c.path, roots).is_err() {
            out.changed_by_others.push((c.clone(), "outside the cgroup roots: not touched".into()));
            continue;
        }
        let text = match std::fs::read_to_string(&c.path) {
            Ok(t) => t,
            Err(_) => {
                out.vanished += 1;
                continue;
            }
        };
        let entry = entry_of(&c.key, &c.path);
        let now = entry.current(&text);
        let ours = std::iter::once(&c.new).chain(&c.earlier).chain(std::iter::once(&c.previous));
        if entry != Entry::Memory && !ours.into_iter().any(|line| same_setting(entry, &now, line)) {
            out.changed_by_others.push((c.clone(), now));
            continue;
        }
        match sysfs::write_raw(&c.path, &c.previous) {
            Ok(()) => out.restored += 1,
            Err(_) => out.vanished += 1,
        }
    }
    out
}

impl Change {
    /// The entry of its file it stands for (the agent's reload tells its own entries apart by it).
    pub fn entry(&self) -> Entry {
        entry_of(&self.key, &self.path)
    }
}

/// The entry a recorded key of a file stands for.
fn entry_of(key: &str, path: &Path) -> Entry {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let dev = key.parse::<DevNum>().unwrap_or(DevNum { major: 0, minor: 0 });
    match name {
        _ if key == "default" => Entry::IoWeightDefault,
        _ if key == "memory" => Entry::Memory,
        "io.max" => Entry::IoMax(dev),
        "io.weight" => Entry::IoWeightDevice(dev),
        "io.cost.model" | "io.cost.qos" => Entry::IoCost(dev),
        _ => Entry::Throttle(dev),
    }
}

/// Whether two lines of an entry mean the same setting (the kernel prints some lines differently
/// from how they were written: `io.max` keys in a fixed order; `io.cost.qos`/`io.cost.model` with
/// every parameter, where `MAJ:MIN enable=1 ctrl=auto` was written — so there one line's words all in
/// the other's is the same setting).
fn same_setting(entry: Entry, a: &str, b: &str) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match entry {
        Entry::IoMax(_) => match (a.parse::<crate::IoMax>(), b.parse::<crate::IoMax>()) {
            (Ok(x), Ok(y)) => x == y,
            _ => norm(a) == norm(b),
        },
        Entry::IoCost(_) => {
            let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<std::collections::BTreeSet<_>>();
            let (a, b) = (words(a), words(b));
            a.is_subset(&b) || b.is_subset(&a)
        }
        _ => norm(a) == norm(b),
    }
}

fn vanished(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENODEV)
}

/// Whether `pid` is a live process: a zombie (killed, its parent has not reaped it yet) is not.
fn process_alive(pid: u32) -> bool {
    crate::ProcessStat::read(pid).is_some_and(|p| !p.exited())
}

/// Refuses `path` unless it lies below one of `roots` (no `..`, relative or out-of-tree paths).
pub fn check_under(path: &Path, roots: &[PathBuf]) -> Result<()> {
    let clean = path.is_absolute() && !path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir));
    if clean && roots.iter().any(|r| path.starts_with(r) && path != r.as_path()) {
        return Ok(());
    }
    Err(Error::OutsideCgroupRoots { path: path.to_path_buf() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: DevNum = DevNum { major: 7, minor: 3 };

    #[test]
    fn current_lines_of_each_entry() {
        assert_eq!(Entry::Throttle(DEV).current("7:0 5\n7:3 100\n"), "7:3 100");
        assert_eq!(Entry::Throttle(DEV).current(""), "7:3 0");
        assert_eq!(Entry::IoMax(DEV).current(""), "7:3 rbps=max wbps=max riops=max wiops=max");
        assert_eq!(Entry::IoWeightDefault.current("default 300\n7:3 50\n"), "default 300");
        assert_eq!(Entry::IoWeightDevice(DEV).current("default 300\n7:3 50\n"), "7:3 50");
        assert_eq!(Entry::IoWeightDevice(DEV).current("default 300\n"), "7:3 default");
        assert_eq!(Entry::IoCost(DEV).current(""), "7:3 ctrl=auto");
    }

    #[test]
    fn a_change_names_its_entry() {
        let change = |path: &str, key: &str| Change {
            path: PathBuf::from(path),
            key: key.into(),
            previous: String::new(),
            new: String::new(),
            earlier: None,
        };
        assert_eq!(change("/r/a/blkio.throttle.read_iops_device", "7:3").entry(), Entry::Throttle(DEV));
        assert_eq!(change("/r/a/io.max", "7:3").entry(), Entry::IoMax(DEV));
        assert_eq!(change("/r/a/io.weight", "7:3").entry(), Entry::IoWeightDevice(DEV));
        assert_eq!(change("/r/a/io.weight", "default").entry(), Entry::IoWeightDefault);
        assert_eq!(change("/r/io.cost.qos", "7:3").entry(), Entry::IoCost(DEV));
        assert_eq!(change("/m/a/memory.limit_in_bytes", "memory").entry(), Entry::Memory);
    }

    #[test]
    fn only_paths_under_the_roots_are_allowed() {
        let roots = vec![PathBuf::from("/sys/fs/cgroup/blkio")];
        assert!(check_under(Path::new("/sys/fs/cgroup/blkio/a/blkio.throttle.read_iops_device"), &roots).is_ok());
        assert!(check_under(Path::new("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device"), &roots).is_ok());
        for bad in ["/etc/passwd", "/sys/fs/cgroup/blkio/../memory/x", "relative/x", "/sys/fs/cgroup/blkiox/y"] {
            let err = check_under(Path::new(bad), &roots).unwrap_err().to_string();
            assert!(err.contains("outside"), "{bad}: {err}");
        }
    }

    /// A value someone else wrote over the recorder's is written back as `Restored`; revert restores
    /// the value from before the recorder's first write, not the intruder's.
    #[test]
    fn an_overwritten_entry_is_restored_and_reverts_to_the_first_previous() {
        let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let file = root.path().join("io.weight");
        std::fs::write(&file, "7:3 50").unwrap();
        let (mut rec, _) = Recorder::open(state.path(), vec![root.path().to_path_buf()]).unwrap();
        let entry = Entry::IoWeightDevice(DEV);
        assert_eq!(rec.set(&file, entry, "7:3 300").unwrap(), Written::Changed);
        assert_eq!(rec.set(&file, entry, "7:3 300").unwrap(), Written::Unchanged);
        std::fs::write(&file, "7:3 999").unwrap(); // someone else
        assert_eq!(rec.set(&file, entry, "7:3 300").unwrap(), Written::Restored);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7:3 300");
        assert_eq!(rec.set(&file, entry, "7:3 200").unwrap(), Written::Changed, "a change of its own is no restore");
        let reverted = rec.revert().unwrap();
        assert_eq!((reverted.restored, std::fs::read_to_string(&file).unwrap().as_str()), (1, "7:3 50"));
    }

    /// The kernel shows `io.cost.qos` with every parameter where fewer were written: the same
    /// setting, neither written again nor someone else's at revert; a parameter that differs is.
    #[test]
    fn an_iocost_line_the_kernel_completes_is_the_same_setting() {
        let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let file = root.path().join("io.cost.qos");
        let full = |enable: u8| format!("7:3 enable={enable} ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000");
        std::fs::write(&file, full(0)).unwrap();
        let (mut rec, _) = Recorder::open(state.path(), vec![root.path().to_path_buf()]).unwrap();
        let entry = Entry::IoCost(DEV);
        assert_eq!(rec.set(&file, entry, "7:3 enable=1 ctrl=auto").unwrap(), Written::Changed);
        std::fs::write(&file, full(1)).unwrap(); // as the kernel shows it
        assert_eq!(rec.set(&file, entry, "7:3 enable=1 ctrl=auto").unwrap(), Written::Unchanged);
        std::fs::write(&file, full(0)).unwrap(); // someone turned it off
        assert_eq!(rec.set(&file, entry, "7:3 enable=1 ctrl=auto").unwrap(), Written::Restored);
        std::fs::write(&file, full(1)).unwrap();
        let reverted = rec.revert().unwrap();
        assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), full(0));
    }

    /// A memory setting the guard wrote is journaled and written back at a crash's recovery, even
    /// when the file holds something else by then.
    #[test]
    fn memory_notes_are_reverted_unconditionally() {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let file = root.path().join("memory.high");
        let roots = vec![root.path().to_path_buf()];
        let (mut rec, _) = Recorder::open(state.path(), roots.clone()).unwrap();
        std::fs::write(&file, "1000").unwrap();
        rec.note(&file, "max", "1000").unwrap();
        rec.note(&file, "max", "1000").unwrap();
        assert_eq!(rec.changes().len(), 1, "one entry per file");
        assert!(rec.note(Path::new("/etc/x"), "1", "2").is_err(), "outside the roots");
        std::fs::write(&file, "900").unwrap();
        std::mem::forget(rec);
        let (rec, recovered) = Recorder::open(state.path(), roots).unwrap();
        assert_eq!(recovered.unwrap().restored, 1);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "max");
        rec.revert().unwrap();
    }

    /// A writer killed with `kill -9` whose parent has not reaped it yet (a zombie) is gone: its
    /// state file may be reverted (found running `ioshare agent revert` right after a `kill -9`).
    #[test]
    fn a_zombie_writer_is_not_alive() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        assert!(process_alive(pid));
        child.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while crate::ProcessStat::read(pid).is_some_and(|p| !p.exited()) {
            assert!(std::time::Instant::now() < deadline, "no zombie after 10 s");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(crate::ProcessStat::read(pid).is_some(), "not reaped yet: a zombie");
        assert!(!process_alive(pid));
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }

    /// Plain files stand in for kernel files: record, change again, revert, and a crash's recovery.
    #[test]
    fn records_reverts_and_recovers() {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let file = root.path().join("blkio.throttle.read_iops_device");
        std::fs::write(&file, "7:0 5\n").unwrap();
        let roots = vec![root.path().to_path_buf()];
        let (mut rec, recovered) = Recorder::open(state.path(), roots.clone()).unwrap();
        assert!(recovered.is_none());
        assert_eq!(rec.set(&file, Entry::Throttle(DEV), "7:3 100").unwrap(), Written::Changed);
        // A plain file is replaced by the write; emulate the kernel's merge of lines.
        std::fs::write(&file, "7:0 5\n7:3 100\n").unwrap();
        assert_eq!(rec.set(&file, Entry::Throttle(DEV), "7:3 100").unwrap(), Written::Unchanged);
        assert_eq!(
            rec.changes(),
            [Change {
                path: file.clone(),
                key: "7:3".into(),
                previous: "7:3 0".into(),
                new: "7:3 100".into(),
                earlier: None
            }]
        );
        let gone = root.path().join("gone/blkio.throttle.read_iops_device");
        assert_eq!(rec.set(&gone, Entry::Throttle(DEV), "7:3 1").unwrap(), Written::Vanished);
        assert!(rec.set(Path::new("/tmp/x"), Entry::Throttle(DEV), "7:3 1").is_err());

        // A "crash": the recorder is forgotten without reverting; the state file names our own pid,
        // which counts as gone for a new open from the same process.
        std::mem::forget(rec);
        let (rec, recovered) = Recorder::open(state.path(), roots).unwrap();
        let recovered = recovered.expect("the crashed state is reverted");
        assert_eq!(recovered.restored, 1);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7:3 0", "the previous line written back");
        rec.revert().unwrap();
        assert!(!state.path().join(STATE_FILE).exists());
    }

    /// A recorder over one plain file standing in for a throttle file holding `7:0 5`.
    fn one_file() -> (tempfile::TempDir, tempfile::TempDir, PathBuf, Vec<PathBuf>) {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let file = root.path().join("blkio.throttle.read_iops_device");
        std::fs::write(&file, "7:0 5\n").unwrap();
        let roots = vec![root.path().to_path_buf()];
        (root, state, file, roots)
    }

    /// Killed between recording a value and writing it: the kernel file holds the value recorded
    /// before, which revert recognises as the writer's and restores.
    #[test]
    fn a_crash_between_record_and_write_is_reverted() {
        let (_root, state, file, roots) = one_file();
        let (mut rec, _) = Recorder::open(state.path(), roots.clone()).unwrap();
        rec.set(&file, Entry::Throttle(DEV), "7:3 100").unwrap();
        std::fs::write(&file, "7:3 100\n").unwrap();
        rec.record(&file, Entry::Throttle(DEV).key(), "7:3 100", "7:3 200").unwrap(); // no write: killed
        std::mem::forget(rec);
        let reverted = revert_state_dir(state.path(), &roots).unwrap().unwrap();
        assert_eq!((reverted.restored, reverted.changed_by_others.len()), (1, 0), "{reverted:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7:3 0");
    }

    /// A record that cannot be written stops the change: the kernel file is not touched.
    #[test]
    fn nothing_is_written_that_could_not_be_recorded() {
        let (_root, state, file, roots) = one_file();
        let (mut rec, _) = Recorder::open(state.path(), roots).unwrap();
        // The journal's file handle made read-only: every append fails, as on a full disk.
        rec.journal = JournalFile::read_only_for_test(state.path());
        let err = rec.set(&file, Entry::Throttle(DEV), "7:3 100").unwrap_err();
        assert!(matches!(err, Error::StateFileWrite { .. }), "{err}");
        assert!(err.to_string().contains("free space"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7:0 5\n", "the kernel file untouched");
    }

    /// A journal that grew (a limit rewritten every period) is rewritten from its entries: the file
    /// stays the size of what is controlled, and still reverts everything.
    #[test]
    fn the_journal_is_compacted() {
        let (_root, state, file, roots) = one_file();
        let (mut rec, _) = Recorder::open(state.path(), roots.clone()).unwrap();
        for i in 1..=3 * REWRITE_SLACK {
            rec.set(&file, Entry::Throttle(DEV), &format!("7:3 {i}")).unwrap();
            std::fs::write(&file, format!("7:3 {i}\n")).unwrap();
        }
        let lines = std::fs::read_to_string(state.path().join(STATE_FILE)).unwrap().lines().count();
        assert!(lines <= REWRITE_SLACK + 3, "{lines} lines for one entry");
        std::mem::forget(rec);
        let reverted = revert_state_dir(state.path(), &roots).unwrap().unwrap();
        assert_eq!(reverted.restored, 1, "{reverted:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7:3 0");
    }

    /// A damaged line is named; the entries of the other lines are restored.
    #[test]
    fn a_damaged_state_file_restores_what_it_can_read() {
        let (root, state, file, roots) = one_file();
        let other = root.path().join("blkio.throttle.write_iops_device");
        std::fs::write(&other, "").unwrap();
        let (mut rec, _) = Recorder::open(state.path(), roots.clone()).unwrap();
        rec.set(&file, Entry::Throttle(DEV), "7:3 100").unwrap();
        rec.set(&other, Entry::Throttle(DEV), "7:3 50").unwrap();
        std::mem::forget(rec);
        let path = state.path().join(STATE_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let damaged = text.replacen("read_iops", "read_iopz", 1);
        std::fs::write(&path, damaged).unwrap();
        let reverted = revert_state_dir(state.path(), &roots).unwrap().unwrap();
        assert_eq!(reverted.restored, 1, "{reverted:?}");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "7:3 0");
        assert_eq!(reverted.unreadable.len(), 1, "{reverted:?}");
        assert!(reverted.unreadable[0].contains("line 2") && reverted.unreadable[0].contains("read_iopz"));
        assert!(!path.exists());
    }

    /// `revert_where` restores a part and forgets it, in memory and in the state file.
    #[test]
    fn a_part_is_reverted_and_forgotten() {
        let (_root, state, file, roots) = one_file();
        let (mut rec, _) = Recorder::open(state.path(), roots).unwrap();
        rec.set(&file, Entry::Throttle(DEV), "7:3 100").unwrap();
        rec.set(&file, Entry::Throttle(DevNum { major: 7, minor: 4 }), "7:4 9").unwrap();
        std::fs::write(&file, "7:3 100\n7:4 9\n").unwrap();
        let reverted = rec.revert_where(|c| c.key == "7:3").unwrap();
        assert_eq!(reverted.restored, 1);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7:3 0");
        assert_eq!(rec.changes().len(), 1);
        let on_disk = journal::read(&state.path().join(STATE_FILE)).unwrap().unwrap();
        assert_eq!(on_disk.changes, rec.changes(), "the state file rewritten without it");
        rec.revert().unwrap();
    }

    /// A cgroup removed takes its entries with it: forgotten when a write finds it gone, and by
    /// the next compaction otherwise.
    #[test]
    fn entries_of_removed_cgroups_are_forgotten() {
        let (root, state, file, roots) = one_file();
        let (mut rec, _) = Recorder::open(state.path(), roots.clone()).unwrap();
        let cgroup = |name: &str| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            ["blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"].map(|f| {
                std::fs::write(dir.join(f), "").unwrap();
                dir.join(f)
            })
        };
        let (gone, quiet) = (cgroup("gone"), cgroup("quiet"));
        for f in gone.iter().chain(&quiet) {
            rec.set(f, Entry::Throttle(DEV), "7:3 7").unwrap();
        }
        rec.set(&file, Entry::Throttle(DEV), "7:3 1").unwrap();
        assert_eq!(rec.changes().len(), 5);
        std::fs::remove_dir_all(root.path().join("gone")).unwrap();
        std::fs::remove_dir_all(root.path().join("quiet")).unwrap();
        assert_eq!(rec.set(&gone[0], Entry::Throttle(DEV), "7:3 8").unwrap(), Written::Vanished);
        assert_eq!(rec.changes().len(), 3, "both files of the cgroup a write found gone");
        for i in 2..=2 * REWRITE_SLACK {
            rec.set(&file, Entry::Throttle(DEV), &format!("7:3 {i}")).unwrap();
            std::fs::write(&file, format!("7:3 {i}\n")).unwrap();
        }
        assert_eq!(rec.changes().len(), 1, "the other removed one at the compaction");
        let on_disk = journal::read(&state.path().join(STATE_FILE)).unwrap().unwrap();
        assert!(on_disk.changes.iter().all(|c| c.path == file), "{:?}", on_disk.changes);
        rec.revert().unwrap();
    }
}
