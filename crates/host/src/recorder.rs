//! The one place that writes IO-control settings to the host, recording each change so that it can
//! be undone: on request, on a signal, or at the next start after a crash.
//!
//! Design:
//! - A setting is one *entry* of a kernel file: one device's line of a blk-throttle file, of `io.max`,
//!   `io.weight`, `io.cost.model` or `io.cost.qos` (see [`Entry`]). Before the first write to an
//!   entry the recorder reads the entry's current line (what writing back restores it: a missing
//!   throttle rule reads as `MAJ:MIN 0`, a missing `io.max` line as all `max`) and appends
//!   `(path, key, previous, new)` to the state file, synced, *before* writing the kernel file. A crash
//!   at any point therefore leaves a state file that restores at least everything written. Later
//!   values of an entry are appended unsynced (a killed process loses nothing in the page cache).
//! - The state file stays as large as what it must restore, however long the agent runs and however
//!   many cgroups come and go: [`Recorder::forget_vanished`] drops the entries whose file vanished
//!   with its cgroup (nothing to restore there), and once the records appended since the file was
//!   last written whole outnumber twice its entries, it is written whole again (to a temporary
//!   name, synced, renamed over the old one: a crash leaves one or the other).
//! - Later writes to the same entry keep the first previous value and update the new one; writing the
//!   value an entry already holds is skipped (only changes are written).
//! - The state file holds the writer's pid. [`Recorder::open`] refuses a state file of a live process
//!   (another agent), and reverts one whose process is gone (a `kill -9`) before starting afresh.
//! - Revert writes each previous line back, newest first, only where the entry still holds what was
//!   written (someone else's later change is left alone and reported); a file that vanished with its
//!   cgroup is skipped: a cgroup that goes away is not an error, mid-period or at revert.
//! - Every path must lie under one of the cgroup roots given at open (the discovered mount points);
//!   anything else is refused before any write.
//! - Memory settings are whole-file values ([`Entry::Memory`]: `memory.limit_in_bytes`,
//!   `memory.oom_control`'s `oom_kill_disable`, `memory.max`, `memory.high`, `memory.oom.group`)
//!   written by the memory guard, which keeps the value it replaced; [`Recorder::note`] journals
//!   them. They are written back unconditionally at revert (the guard's own reclaim moves a v1 limit
//!   for a moment, so "changed since" means nothing for them).
//!
//! The state file is JSON lines: a header `{"pid":N}` then one record per change.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

use ioshare_core::iocost::line::DevNum;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sysfs;

/// Name of the state file inside the state directory.
pub const STATE_FILE: &str = "agent.state";

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

/// One recorded change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The kernel file.
    pub path: PathBuf,
    /// Which entry of it (`MAJ:MIN` or `default`).
    pub key: String,
    /// The line that restores the entry.
    pub previous: String,
    /// The line written.
    pub new: String,
}

#[derive(Serialize, Deserialize)]
struct Header {
    pid: u32,
}

/// What [`Recorder::set`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The entry changed.
    Changed,
    /// The entry already held the value: nothing written.
    Unchanged,
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
}

/// Records appended beyond twice the entries before the state file is written whole again.
const REWRITE_SLACK: usize = 1024;

/// The recording writer: owns the state file of one agent.
#[derive(Debug)]
pub struct Recorder {
    state: PathBuf,
    file: File,
    roots: Vec<PathBuf>,
    changes: Vec<Change>,
    /// Where each entry (file, key) is in `changes`.
    index: HashMap<(PathBuf, String), usize>,
    /// Records in the state file beyond one per entry.
    superseded: usize,
}

impl Recorder {
    /// Opens the state directory `dir` (created if missing) for writes under `roots`. A state file
    /// left by a dead process is reverted first (its result returned); one of a live process is
    /// refused.
    pub fn open(dir: &Path, roots: Vec<PathBuf>) -> Result<(Self, Option<Reverted>)> {
        std::fs::create_dir_all(dir).map_err(|e| sysfs::file_error("create state directory".into(), dir, e))?;
        let state = dir.join(STATE_FILE);
        let recovered = match read_state(&state)? {
            Some((pid, _)) if pid != std::process::id() && process_alive(pid) => {
                return Err(Error::AgentRunning { pid, state });
            }
            Some(_) => Some(revert_file(&state, &roots)?),
            None => None,
        };
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&state)
            .map_err(|e| sysfs::file_error("create".into(), &state, e))?;
        let header = serde_json::to_string(&Header { pid: std::process::id() }).expect("header serialises");
        writeln!(file, "{header}").and_then(|()| file.sync_data()).map_err(|e| state_error(&state, e))?;
        let recorder = Recorder { state, file, roots, changes: Vec::new(), index: HashMap::new(), superseded: 0 };
        Ok((recorder, recovered))
    }

    /// The changes recorded so far, oldest first.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Sets `entry` of kernel file `path` by writing `line`, recording the previous line first.
    pub fn set(&mut self, path: &Path, entry: Entry, line: &str) -> Result<Written> {
        check_under(path, &self.roots)?;
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if vanished(&e) => return Ok(Written::Vanished),
            Err(e) => return Err(sysfs::file_error("read".into(), path, e)),
        };
        let current = entry.current(&text);
        if same_setting(entry, &current, line) {
            return Ok(Written::Unchanged);
        }
        self.record(path, entry.key(), current, line)?;
        let written = match sysfs::write_raw(path, line) {
            Ok(()) => Written::Changed,
            Err(e) if vanished(&e) => Written::Vanished,
            Err(e) => return Err(sysfs::file_error(format!("write '{line}' to"), path, e)),
        };
        self.rewrite_if_long()?;
        Ok(written)
    }

    /// Appends the record of entry (`path`, `key`) now set to `new`: a new entry (its `previous`
    /// line first recorded) synced, a later value of a known one not.
    fn record(&mut self, path: &Path, key: String, previous: String, new: &str) -> Result<()> {
        let (change, known) = match self.index.get(&(path.to_path_buf(), key.clone())) {
            Some(&i) => {
                self.changes[i].new = new.to_string();
                self.superseded += 1;
                (&self.changes[i], true)
            }
            None => {
                self.index.insert((path.to_path_buf(), key.clone()), self.changes.len());
                self.changes.push(Change { path: path.to_path_buf(), key, previous, new: new.to_string() });
                (self.changes.last().expect("just pushed"), false)
            }
        };
        let record = serde_json::to_string(change).expect("change serialises");
        writeln!(self.file, "{record}")
            .and_then(|()| if known { Ok(()) } else { self.file.sync_data() })
            .map_err(|e| state_error(&self.state, e))
    }

    /// Drops the entries whose file is gone (its cgroup was removed: nothing there to restore),
    /// rewriting the state file without them; how many were dropped.
    pub fn forget_vanished(&mut self) -> Result<usize> {
        let before = self.changes.len();
        // A cgroup's files go with its directory, and only with it: one look per directory.
        let mut dirs: HashMap<PathBuf, bool> = HashMap::new();
        self.changes.retain(|c| {
            let dir = c.path.parent().unwrap_or(&c.path);
            *dirs.entry(dir.to_path_buf()).or_insert_with(|| dir.exists())
        });
        let dropped = before - self.changes.len();
        if dropped > 0 {
            self.index = self.changes.iter().enumerate().map(|(i, c)| ((c.path.clone(), c.key.clone()), i)).collect();
            self.rewrite()?;
        }
        Ok(dropped)
    }

    /// Writes the state file whole once superseded records outnumber twice its entries.
    fn rewrite_if_long(&mut self) -> Result<()> {
        if self.superseded > 2 * self.changes.len() + REWRITE_SLACK {
            self.rewrite()?;
        }
        Ok(())
    }

    /// Writes the header and one record per entry to a temporary file, syncs it and renames it over
    /// the state file; later records are appended to it.
    fn rewrite(&mut self) -> Result<()> {
        let tmp = self.state.with_extension("state.tmp");
        let mut text = serde_json::to_string(&Header { pid: std::process::id() }).expect("header serialises") + "\n";
        for c in &self.changes {
            text += &(serde_json::to_string(c).expect("change serialises") + "\n");
        }
        let mut file = File::create(&tmp).map_err(|e| state_error(&tmp, e))?;
        file.write_all(text.as_bytes()).and_then(|()| file.sync_data()).map_err(|e| state_error(&tmp, e))?;
        std::fs::rename(&tmp, &self.state).map_err(|e| state_error(&self.state, e))?;
        if let Some(dir) = self.state.parent() {
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| state_error(dir, e))?;
        }
        self.file = file;
        self.superseded = 0;
        Ok(())
    }

    /// Journals a change someone else wrote (the memory guard): `path` held `previous` and now holds
    /// `new`; revert writes `previous` back ([`Entry::Memory`]). Synced before returning.
    pub fn note(&mut self, path: &Path, previous: &str, new: &str) -> Result<()> {
        check_under(path, &self.roots)?;
        let key = Entry::Memory.key();
        if let Some(&i) = self.index.get(&(path.to_path_buf(), key.clone())) {
            if self.changes[i].new == new {
                return Ok(());
            }
        }
        self.record(path, key, previous.to_string(), new)?;
        self.rewrite_if_long()
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

    /// Restores every recorded entry and removes the state file.
    pub fn revert(self) -> Result<Reverted> {
        let reverted = revert_changes(&self.changes, &self.roots);
        drop(self.file);
        std::fs::remove_file(&self.state).map_err(|e| state_error(&self.state, e))?;
        Ok(reverted)
    }
}

/// Reverts what the state file in `dir` records (an agent killed without cleaning up), if any, and
/// removes it. Refused while the agent that wrote it is alive.
pub fn revert_state_dir(dir: &Path, roots: &[PathBuf]) -> Result<Option<Reverted>> {
    let state = dir.join(STATE_FILE);
    match read_state(&state)? {
        None => Ok(None),
        Some((pid, _)) if process_alive(pid) && pid != std::process::id() => Err(Error::AgentRunning { pid, state }),
        Some(_) => revert_file(&state, roots).map(Some),
    }
}

fn revert_file(state: &Path, roots: &[PathBuf]) -> Result<Reverted> {
    let (_, changes) = read_state(state)?.unwrap_or((0, Vec::new()));
    let reverted = revert_changes(&changes, roots);
    std::fs::remove_file(state).map_err(|e| state_error(state, e))?;
    Ok(reverted)
}

/// The state file's pid and its changes (the last record of an entry carries its latest new line).
fn read_state(state: &Path) -> Result<Option<(u32, Vec<Change>)>> {
    let text = match std::fs::read_to_string(state) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(state_error(state, e)),
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let bad = |what: &str| Error::StateFile { path: state.to_path_buf(), reason: what.to_string() };
    let Some(first) = lines.next() else { return Ok(None) };
    let header: Header = serde_json::from_str(first).map_err(|e| bad(&format!("bad header: {e}")))?;
    let mut changes: Vec<Change> = Vec::new();
    for line in lines {
        // A record cut short by a crash is the last line; what it would have written never was.
        let Ok(c) = serde_json::from_str::<Change>(line) else { continue };
        match changes.iter_mut().find(|x| x.path == c.path && x.key == c.key) {
            Some(x) => x.new = c.new,
            None => changes.push(c),
        }
    }
    Ok(Some((header.pid, changes)))
}

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
        if entry != Entry::Memory && !same_setting(entry, &now, &c.new) && !same_setting(entry, &now, &c.previous) {
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
/// from how they were written, e.g. `io.max` keys in a fixed order).
fn same_setting(entry: Entry, a: &str, b: &str) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match entry {
        Entry::IoMax(_) => match (a.parse::<crate::IoMax>(), b.parse::<crate::IoMax>()) {
            (Ok(x), Ok(y)) => x == y,
            _ => norm(a) == norm(b),
        },
        _ => norm(a) == norm(b),
    }
}

fn vanished(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENODEV)
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn state_error(path: &Path, source: io::Error) -> Error {
    Error::KernelFile { action: "cannot write state file".into(), path: path.to_path_buf(), source }
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
    fn only_paths_under_the_roots_are_allowed() {
        let roots = vec![PathBuf::from("/sys/fs/cgroup/blkio")];
        assert!(check_under(Path::new("/sys/fs/cgroup/blkio/a/blkio.throttle.read_iops_device"), &roots).is_ok());
        assert!(check_under(Path::new("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device"), &roots).is_ok());
        for bad in ["/etc/passwd", "/sys/fs/cgroup/blkio/../memory/x", "relative/x", "/sys/fs/cgroup/blkiox/y"] {
            let err = check_under(Path::new(bad), &roots).unwrap_err().to_string();
            assert!(err.contains("outside"), "{bad}: {err}");
        }
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
            [Change { path: file.clone(), key: "7:3".into(), previous: "7:3 0".into(), new: "7:3 100".into() }]
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
}
