//! The recorder's state file: a journal of records, one line each, `CRC JSON` — the record as JSON
//! after its CRC-32 in eight hex digits — so that a line torn by a crash or damaged on disk is
//! recognised and skipped without losing the lines around it.
//!
//! Design:
//! - The first line is the header (the writer's pid), every next one a [`Change`]: the whole entry
//!   (path, key, previous and new line), so any one intact record of an entry is enough to restore
//!   it, and a damaged record loses at most the value it carried.
//! - Records are appended with one `write(2)` each ([`JournalFile::append`]): a crash can tear only the
//!   line being written, the last one, whose setting was not made yet (the recorder writes the kernel
//!   file after the record).
//! - The whole file is only ever replaced atomically ([`JournalFile::create`]): written to
//!   `agent.state.new`, synced, renamed over `agent.state`, so a crash leaves the old file or the new
//!   one, never a mix. The recorder starts its journal this way, and rewrites it without the entries
//!   that are gone when it has grown (compaction).
//! - [`read`] returns every record it can read, merged per entry (the last `new` of an entry, and the
//!   one recorded before it), and names each line it cannot read.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Name of the state file inside the state directory.
pub const STATE_FILE: &str = "agent.state";
/// Where a new state file is written before it is renamed over [`STATE_FILE`].
const STATE_FILE_NEW: &str = "agent.state.new";
/// Longest part of an unreadable line quoted when naming it.
const EXCERPT: usize = 160;

/// One recorded change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The kernel file.
    pub path: PathBuf,
    /// Which entry of it (`MAJ:MIN`, `default` or `memory`).
    pub key: String,
    /// The line that restores the entry.
    pub previous: String,
    /// The line written last.
    pub new: String,
    /// The line recorded as `new` before the last one: what the file still holds if the writer died
    /// between recording `new` and writing it. Not a field of a record: reading the journal takes it
    /// from the entry's record before.
    #[serde(skip)]
    pub earlier: Option<String>,
}

/// The journal's first line: the writer's pid.
#[derive(Serialize, Deserialize)]
pub struct Header {
    /// The writer's pid.
    pub pid: u32,
}

/// What a state file holds.
#[derive(Debug, Default)]
pub struct Contents {
    /// The writer's pid (`None`: the header is damaged).
    pub pid: Option<u32>,
    /// Every entry with an intact record, in the order of their first records.
    pub changes: Vec<Change>,
    /// Each line that could not be read: `line N: why: what it holds`.
    pub unreadable: Vec<String>,
}

/// Reads the state file `path`: `None` if there is none (or it is empty).
pub fn read(path: &Path) -> Result<Option<Contents>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::StateFile { path: path.to_path_buf(), reason: e.to_string() }),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.strip_suffix(b"\n").unwrap_or(&bytes).split(|&b| b == b'\n').collect();
    let mut out = Contents::default();
    for (i, raw) in lines.iter().enumerate() {
        let cut_short = i + 1 == lines.len() && !complete;
        let record = if cut_short {
            Err("cut short (the writer stopped while writing it, before making its setting)")
        } else {
            decode(raw)
        };
        let parsed = record.and_then(|json| {
            if i == 0 {
                serde_json::from_str::<Header>(json).map(|h| out.pid = Some(h.pid)).map_err(|_| "not a header")
            } else {
                serde_json::from_str::<Change>(json).map(|c| merge(&mut out.changes, c)).map_err(|_| "not a record")
            }
        });
        if let Err(why) = parsed {
            let what = if i == 0 { "header" } else { "record" };
            let excerpt = String::from_utf8_lossy(&raw[..raw.len().min(EXCERPT)]);
            out.unreadable.push(format!("line {} ({what}): {why}: {excerpt}", i + 1));
        }
    }
    Ok(Some(out))
}

/// Adds a record to the entries read so far: a new entry, or the entry's latest value.
fn merge(changes: &mut Vec<Change>, c: Change) {
    match changes.iter_mut().find(|x| x.path == c.path && x.key == c.key) {
        Some(x) => x.earlier = Some(std::mem::replace(&mut x.new, c.new)),
        None => changes.push(c),
    }
}

/// The JSON of a line whose checksum matches.
pub(crate) fn decode(line: &[u8]) -> std::result::Result<&str, &'static str> {
    let text = std::str::from_utf8(line).map_err(|_| "not text")?;
    let (crc, json) = text.split_once(' ').ok_or("no checksum")?;
    let crc = u32::from_str_radix(crc, 16).ok().filter(|_| crc.len() == 8).ok_or("no checksum")?;
    if crc32(json.as_bytes()) != crc {
        return Err("checksum mismatch");
    }
    Ok(json)
}

/// A line of the journal: `value`'s JSON after its CRC-32.
pub fn encode<T: Serialize>(value: &T) -> String {
    let json = serde_json::to_string(value).expect("records serialise");
    format!("{:08x} {json}\n", crc32(json.as_bytes()))
}

/// CRC-32 (IEEE 802.3, as zlib and `crc32` compute it).
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// The state file of a running writer, open for appending.
#[derive(Debug)]
pub(crate) struct JournalFile {
    path: PathBuf,
    file: File,
    lines: usize,
}

impl JournalFile {
    /// Replaces the state file in `dir` with a header for `pid` and one record per change, atomically
    /// (see the module comment).
    pub(crate) fn create(dir: &Path, pid: u32, changes: &[Change]) -> Result<JournalFile> {
        let path = dir.join(STATE_FILE);
        let new = dir.join(STATE_FILE_NEW);
        let mut text = encode(&Header { pid });
        for c in changes {
            text += &encode(c);
        }
        let mut file =
            OpenOptions::new().create(true).write(true).truncate(true).open(&new).map_err(|e| write_error(&new, e))?;
        let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_data());
        if let Err(e) = written.and_then(|()| std::fs::rename(&new, &path)) {
            let _ = std::fs::remove_file(&new);
            return Err(write_error(&new, e));
        }
        // The rename on disk too (best effort: a crash of the process alone never loses it).
        let _ = File::open(dir).and_then(|d| d.sync_all());
        Ok(JournalFile { path, file, lines: 1 + changes.len() })
    }

    /// Appends a record of `change`; `sync`: on disk before returning.
    pub(crate) fn append(&mut self, change: &Change, sync: bool) -> Result<()> {
        let line = encode(change);
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| if sync { self.file.sync_data() } else { Ok(()) })
            .map_err(|e| write_error(&self.path, e))?;
        self.lines += 1;
        Ok(())
    }

    /// Lines in the file (header and records).
    pub(crate) fn lines(&self) -> usize {
        self.lines
    }

    /// The state file of `dir` opened read-only, so that appending fails (a full disk, in tests).
    #[cfg(test)]
    pub(crate) fn read_only_for_test(dir: &Path) -> JournalFile {
        let path = dir.join(STATE_FILE);
        JournalFile { file: File::open(&path).unwrap(), path, lines: 1 }
    }

    /// Removes the state file (everything in it was reverted).
    pub(crate) fn remove(self) -> Result<()> {
        drop(self.file);
        remove(&self.path)
    }
}

/// Removes the state file `path` and a new one left beside it by a crash during a rewrite.
pub(crate) fn remove(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_file(dir.join(STATE_FILE_NEW));
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(write_error(path, e)),
        _ => Ok(()),
    }
}

/// A failed write to the state directory.
pub(crate) fn write_error(path: &Path, source: io::Error) -> Error {
    Error::StateFileWrite { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, new: &str) -> Change {
        Change { path: path.into(), key: "7:3".into(), previous: "7:3 0".into(), new: new.into(), earlier: None }
    }

    #[test]
    fn crc32_is_the_standard_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn lines_carry_their_checksum_and_read_back_merged() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = JournalFile::create(dir.path(), 42, &[change("/c/a", "7:3 100")]).unwrap();
        j.append(&change("/c/b", "7:3 5"), true).unwrap();
        j.append(&change("/c/a", "7:3 200"), false).unwrap();
        assert_eq!(j.lines(), 4);
        let text = std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap();
        for line in text.lines() {
            let (crc, json) = line.split_once(' ').unwrap();
            assert_eq!(crc, format!("{:08x}", crc32(json.as_bytes())), "{line}");
        }
        let c = read(&dir.path().join(STATE_FILE)).unwrap().unwrap();
        assert_eq!(c.pid, Some(42));
        assert!(c.unreadable.is_empty());
        assert_eq!(c.changes.len(), 2, "one entry per (path, key)");
        assert_eq!((c.changes[0].new.as_str(), c.changes[0].earlier.as_deref()), ("7:3 200", Some("7:3 100")));
        assert!(!dir.path().join(STATE_FILE_NEW).exists());
        j.remove().unwrap();
        assert!(read(&dir.path().join(STATE_FILE)).unwrap().is_none());
    }

    /// A flipped byte costs its own line only; a line cut short at the end is named as such; the
    /// entry of a damaged record is still read from its other records.
    #[test]
    fn damaged_lines_are_named_and_the_others_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let mut j = JournalFile::create(dir.path(), 42, &[]).unwrap();
        for (p, v) in [("/c/a", "7:3 1"), ("/c/b", "7:3 2"), ("/c/a", "7:3 3"), ("/c/d", "7:3 4"), ("/c/e", "7:3 5")] {
            j.append(&change(p, v), false).unwrap();
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let starts: Vec<usize> = std::iter::once(0)
            .chain(bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1))
            .collect();
        bytes[starts[1] + 20] ^= 0x04; // line 2: /c/a's first record
        bytes[starts[4] + 30] ^= 0x01; // line 5: /c/d's only record
        bytes.truncate(starts[5] + 25); // line 6: /c/e's, cut short
        std::fs::write(&path, &bytes).unwrap();
        let c = read(&path).unwrap().unwrap();
        let paths: Vec<&str> = c.changes.iter().map(|c| c.path.to_str().unwrap()).collect();
        assert_eq!(paths, ["/c/b", "/c/a"], "/c/a from its second record; /c/d and /c/e lost");
        assert_eq!(c.unreadable.len(), 3, "{:?}", c.unreadable);
        assert!(c.unreadable[0].starts_with("line 2 (record): checksum mismatch"), "{:?}", c.unreadable);
        assert!(c.unreadable[1].starts_with("line 5 (record): checksum mismatch"), "{:?}", c.unreadable);
        assert!(c.unreadable[1].contains("\"/c/d\""), "the damaged line is quoted: {:?}", c.unreadable);
        assert!(c.unreadable[2].starts_with("line 6 (record): cut short"), "{:?}", c.unreadable);
    }

    #[test]
    fn a_damaged_header_loses_the_pid_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        JournalFile::create(dir.path(), 42, &[change("/c/a", "7:3 1")]).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[12] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let c = read(&path).unwrap().unwrap();
        assert_eq!(c.pid, None);
        assert_eq!(c.changes.len(), 1);
        assert!(c.unreadable[0].starts_with("line 1 (header)"), "{:?}", c.unreadable);
        // Lines without a checksum (not this format) are named, not guessed at.
        std::fs::write(&path, "{\"pid\":1}\n").unwrap();
        assert_eq!(read(&path).unwrap().unwrap().unreadable.len(), 1);
    }

    /// A rewrite replaces the whole file or nothing: a crash before the rename leaves the old file
    /// (and a `.new` that [`remove`] clears).
    #[test]
    fn a_rewrite_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let mut j = JournalFile::create(dir.path(), 42, &[]).unwrap();
        j.append(&change("/c/a", "7:3 1"), false).unwrap();
        std::fs::write(dir.path().join(STATE_FILE_NEW), "00000000 {\"pid\"").unwrap(); // a crash mid-rewrite
        assert_eq!(read(&path).unwrap().unwrap().changes.len(), 1, "the old file is whole");
        let j2 = JournalFile::create(dir.path(), 43, &[change("/c/b", "7:3 2")]).unwrap();
        let c = read(&path).unwrap().unwrap();
        assert_eq!((c.pid, c.changes.len(), c.changes[0].path.to_str()), (Some(43), 1, Some("/c/b")));
        drop(j);
        std::fs::write(dir.path().join(STATE_FILE_NEW), "x").unwrap();
        j2.remove().unwrap();
        assert!(!path.exists() && !dir.path().join(STATE_FILE_NEW).exists());
    }
}
