//! A kernel attribute (one sysfs file, such as a device's `queue/nomerges`) set for the length of a
//! measurement and put back afterwards: on drop, after Ctrl-C through the normal drop path, and
//! after a crash by the next [`repair`].
//!
//! Design:
//! - Before the attribute is written, its current value and the writer (pid and start time, so a
//!   pid the kernel reused is told apart) are saved in a state file of their own in the state
//!   directory: one line in the recorder's journal format (`CRC JSON`, [`crate::journal`]), written
//!   under a temporary name, synced and renamed. A crash therefore leaves no state file or a whole
//!   one, and never a changed attribute without its record; a change that cannot be recorded is
//!   not made.
//! - Restore writes the saved value back only while the attribute still holds the value written
//!   (someone else's later change is left alone and reported), then removes the state file.
//! - [`repair`] restores the state files of writers that are gone (a `kill -9`) and leaves those of
//!   live ones alone. A sysfs attribute does not survive a reboot, so the state directory belongs on
//!   a tmpfs (`/run`): after a reboot there is nothing to repair.
//! - One state file per attribute: a second writer of the same attribute is refused while the
//!   first lives ([`Error::AttributeBusy`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::journal::{decode, encode, write_error};
use crate::{sysfs, ProcessStat};

/// Ending of the state files in the state directory.
const SUFFIX: &str = ".attr";

/// The record of one switched attribute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// The writer's pid.
    pid: u32,
    /// The writer's start time (clock ticks since boot), 0 if unknown.
    start: u64,
    /// The attribute file.
    file: PathBuf,
    /// The value it held before.
    previous: String,
    /// The value written.
    new: String,
}

/// An attribute switched to another value; restored on drop.
#[derive(Debug)]
pub struct AttrSwitch {
    record: Record,
    state: PathBuf,
    restored: bool,
}

impl AttrSwitch {
    /// Sets attribute `file` to `value`, recording its current value in `state_dir` (created if
    /// missing) first. A leftover record of a dead writer for the same file is repaired first.
    pub fn set(state_dir: &Path, file: &Path, value: &str) -> Result<AttrSwitch> {
        let state = state_dir.join(state_name(file));
        if let Some(old) = read_record(&state)? {
            if alive(&old) {
                return Err(Error::AttributeBusy { file: file.to_path_buf(), pid: old.pid });
            }
            restore_record(&old, &state)?;
        }
        let previous = sysfs::read(file)?.trim().to_string();
        let record = Record {
            pid: std::process::id(),
            start: ProcessStat::own_start_ticks().unwrap_or(0),
            file: file.to_path_buf(),
            previous,
            new: value.to_string(),
        };
        if record.previous != record.new {
            // Made here, after any repair above, which removes the directory with its last record.
            std::fs::create_dir_all(state_dir).map_err(|e| write_error(state_dir, e))?;
            write_record(&state, &record)?;
            if let Err(e) = sysfs::write(file, value) {
                let _ = std::fs::remove_file(&state);
                return Err(e);
            }
        }
        Ok(AttrSwitch { restored: record.previous == record.new, record, state })
    }

    /// The value the attribute held before.
    pub fn previous(&self) -> &str {
        &self.record.previous
    }

    /// The attribute file.
    pub fn file(&self) -> &Path {
        &self.record.file
    }

    /// Puts the previous value back (what drop does, with the outcome returned).
    pub fn restore(mut self) -> Result<Restored> {
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> Result<Restored> {
        if std::mem::replace(&mut self.restored, true) {
            return Ok(Restored::Done);
        }
        restore_record(&self.record, &self.state)
    }
}

impl Drop for AttrSwitch {
    fn drop(&mut self) {
        match self.restore_inner() {
            Ok(Restored::ChangedByOthers(now)) => eprintln!(
                "ioshare-host: left {} at '{now}': someone else changed it after it was set to '{}'",
                self.record.file.display(),
                self.record.new
            ),
            Ok(_) => {}
            Err(e) => eprintln!("ioshare-host: cannot restore {}: {e}", self.record.file.display()),
        }
    }
}

/// What restoring a record did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restored {
    /// The previous value is back.
    Done,
    /// The attribute is gone (its device was removed): nothing to restore.
    Vanished,
    /// It holds neither the value written nor the previous one (someone else changed it): left as
    /// it is, with what it holds.
    ChangedByOthers(String),
}

/// One record [`repair`] dealt with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repaired {
    /// The attribute file (or, for an unreadable record, the state file).
    pub file: PathBuf,
    /// The value written back (empty unless restored).
    pub value: String,
    /// What happened.
    pub outcome: Restored,
}

/// Restores every attribute recorded in `state_dir` by a writer that is gone; records of live
/// writers are left alone, an unreadable record is named in the error. A missing directory holds
/// nothing to repair.
pub fn repair(state_dir: &Path) -> Result<Vec<Repaired>> {
    let entries = match std::fs::read_dir(state_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::StateFile { path: state_dir.to_path_buf(), reason: e.to_string() }),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let state = entry.path();
        if !state.to_string_lossy().ends_with(SUFFIX) {
            continue;
        }
        match read_record(&state)? {
            Some(r) if !alive(&r) => {
                let outcome = restore_record(&r, &state)?;
                out.push(Repaired { file: r.file, value: r.previous, outcome });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Writes `r.previous` back where the attribute still holds `r.new` (or already `r.previous`),
/// then removes the state file, and the state directory when that leaves it empty.
fn restore_record(r: &Record, state: &Path) -> Result<Restored> {
    let outcome = match std::fs::read_to_string(&r.file) {
        Err(_) => Restored::Vanished,
        Ok(now) if now.trim() == r.new => {
            sysfs::write(&r.file, &r.previous)?;
            Restored::Done
        }
        Ok(now) if now.trim() == r.previous => Restored::Done,
        Ok(now) => Restored::ChangedByOthers(now.trim().to_string()),
    };
    match std::fs::remove_file(state) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(write_error(state, e)),
        _ => {
            // The state directory goes with its last record (`rmdir`: only when empty).
            let _ = state.parent().map(std::fs::remove_dir);
            Ok(outcome)
        }
    }
}

/// Whether the writer of `r` still runs (the same process: pid and start time).
fn alive(r: &Record) -> bool {
    ProcessStat::read(r.pid).is_some_and(|p| !p.exited() && (r.start == 0 || p.start_ticks == r.start))
        && !(r.pid == std::process::id() && r.start == ProcessStat::own_start_ticks().unwrap_or(0))
}

/// The state file's name for attribute `file`: its path with `/` as `_`.
fn state_name(file: &Path) -> String {
    let flat: String =
        file.to_string_lossy().trim_start_matches('/').chars().map(|c| if c == '/' { '_' } else { c }).collect();
    flat + SUFFIX
}

/// The record in `state`: `None` if there is none; an unreadable one is an error naming the file.
fn read_record(state: &Path) -> Result<Option<Record>> {
    let bytes = match std::fs::read(state) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::StateFile { path: state.to_path_buf(), reason: e.to_string() }),
    };
    let bad = |why: &str| Error::StateFile { path: state.to_path_buf(), reason: why.to_string() };
    let json = decode(bytes.strip_suffix(b"\n").unwrap_or(&bytes)).map_err(bad)?;
    serde_json::from_str(json).map(Some).map_err(|_| bad("not an attribute record"))
}

/// Writes `r` to `state` atomically: a temporary file, synced, renamed over it.
fn write_record(state: &Path, r: &Record) -> Result<()> {
    let tmp = state.with_extension("new");
    let mut file =
        OpenOptions::new().create(true).write(true).truncate(true).open(&tmp).map_err(|e| write_error(&tmp, e))?;
    let written = file.write_all(encode(r).as_bytes()).and_then(|()| file.sync_data());
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, state)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_error(&tmp, e));
    }
    if let Some(dir) = state.parent() {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain file stands in for the sysfs attribute.
    fn attr(value: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nomerges");
        std::fs::write(&file, format!("{value}\n")).unwrap();
        let state = dir.path().join("state");
        (dir, file, state)
    }

    fn read(file: &Path) -> String {
        std::fs::read_to_string(file).unwrap().trim().to_string()
    }

    #[test]
    fn set_records_first_and_drop_restores() {
        let (_d, file, state) = attr("0");
        let s = AttrSwitch::set(&state, &file, "2").unwrap();
        assert_eq!((read(&file).as_str(), s.previous()), ("2", "0"));
        let rec = read_record(&state.join(state_name(&file))).unwrap().unwrap();
        assert_eq!((rec.previous.as_str(), rec.new.as_str(), rec.pid), ("0", "2", std::process::id()));
        drop(s);
        assert_eq!(read(&file), "0");
        assert!(!state.exists(), "the state file is removed, and the directory with it");
    }

    #[test]
    fn a_crashed_writers_record_is_repaired_and_a_live_ones_refused() {
        let (_d, file, state) = attr("1");
        std::mem::forget(AttrSwitch::set(&state, &file, "2").unwrap()); // "killed": no drop
        assert_eq!(read(&file), "2");
        // Our own record counts as a dead writer's (the same process cannot still be holding it).
        let repaired = repair(&state).unwrap();
        assert_eq!(repaired, [Repaired { file: file.clone(), value: "1".into(), outcome: Restored::Done }]);
        assert_eq!(read(&file), "1");
        assert!(repair(&state).unwrap().is_empty());

        // A live writer (another process: pid 1) keeps its record, and the attribute is refused.
        let other = Record { pid: 1, start: 0, file: file.clone(), previous: "1".into(), new: "2".into() };
        assert!(!state.exists(), "the directory went with its last record");
        std::fs::create_dir(&state).unwrap();
        write_record(&state.join(state_name(&file)), &other).unwrap();
        assert!(repair(&state).unwrap().is_empty());
        let err = AttrSwitch::set(&state, &file, "2").unwrap_err();
        assert!(matches!(err, Error::AttributeBusy { pid: 1, .. }), "{err}");
    }

    #[test]
    fn someone_elses_later_change_is_left_alone() {
        let (_d, file, state) = attr("0");
        let s = AttrSwitch::set(&state, &file, "2").unwrap();
        std::fs::write(&file, "1\n").unwrap();
        assert_eq!(s.restore().unwrap(), Restored::ChangedByOthers("1".into()));
        assert_eq!(read(&file), "1");
    }

    #[test]
    fn a_damaged_record_is_named() {
        let (_d, file, state) = attr("0");
        std::mem::forget(AttrSwitch::set(&state, &file, "2").unwrap());
        let path = state.join(state_name(&file));
        let text = std::fs::read_to_string(&path).unwrap().replace("\"0\"", "\"9\"");
        std::fs::write(&path, text).unwrap();
        let err = repair(&state).unwrap_err().to_string();
        assert!(err.contains("checksum mismatch") && err.contains(".attr"), "{err}");
        assert!(state_name(Path::new("/sys/block/loop3/queue/nomerges")) == "sys_block_loop3_queue_nomerges.attr");
    }
}
