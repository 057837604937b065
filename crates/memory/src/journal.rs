//! The guard's change journal: every cgroup file a guard changes, with the value it replaced, so
//! that the value can be written back — by [`Journal::restore`] when the guard stops (or is
//! dropped), and by the journal's [`Watchdog`] when the guard's process dies without stopping.
//!
//! The journal knows no hierarchy. A change is made through a [`Knob`] — one file of one memory
//! cgroup, read and written through its hierarchy's view — and recorded as text, the form the
//! watchdog writes back and the agent journals in its own state file ([`Changed`]).
//!
//! Why a journal of its own beside host's recorder (the agent's state file): the guard also runs
//! without the agent (the bench, the memory tests), and what it changes cannot wait for a later
//! start to be undone — a group whose OOM killer is paused hangs its tasks at the next OOM — so the
//! guard keeps what it changed in memory for its watchdog to restore the moment its process dies. The
//! recorder keeps the same changes on disk, for `ioshare agent revert` and the agent's next start.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::watchdog::Watchdog;

/// A file a guard changed: the value it replaced and the one it wrote (for the agent's journal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    /// The cgroup file.
    pub file: PathBuf,
    /// Its value before the guard, as written back.
    pub previous: String,
    /// The value the guard wrote.
    pub new: String,
}

/// One file of one memory cgroup that a guard may change, read and written as text.
pub trait Knob: std::fmt::Debug + Send {
    /// The file.
    fn file(&self) -> PathBuf;
    /// Its value now, as text [`Knob::write`] takes back.
    fn read(&self) -> Result<String>;
    /// Writes `value` (as [`Knob::read`] gives it) to the file.
    fn write(&self, value: &str) -> Result<()>;
}

/// One file in the journal: its knob, its change, and what the file read after the guard's last
/// write (`None` when only remembered): a file that reads otherwise later was overwritten by
/// someone else ([`Journal::reassert`]).
type Entry = (Box<dyn Knob>, Changed, Option<String>);

/// The changes of one guard, oldest first, and the watchdog that restores them should the process
/// die.
#[derive(Debug, Default)]
pub struct Journal {
    changes: Vec<Entry>,
    /// Restores the changes if this process dies; `None` until armed, and once restored.
    watchdog: Option<Watchdog>,
}

impl Journal {
    /// Writes `value` through `knob`, having recorded the value it replaces the first time its file
    /// is changed.
    pub fn set(&mut self, knob: impl Knob + 'static, value: String) -> Result<()> {
        let i = self.record(knob)?;
        let (knob, change, shown) = &mut self.changes[i];
        change.new = value;
        knob.write(&change.new)?;
        // The kernel may show a value otherwise than it was written (a limit rounded to pages).
        *shown = knob.read().ok();
        Ok(())
    }

    /// Writes back the value the guard set to every file that reads otherwise than after the guard's
    /// write — someone else overwrote it — and returns those files. A file of a group that vanished,
    /// or one only remembered ([`Journal::remember`]), is left alone. The value to restore stays the
    /// one from before the guard's first write.
    pub fn reassert(&mut self) -> Result<Vec<PathBuf>> {
        let mut restored = Vec::new();
        for (knob, change, shown) in &mut self.changes {
            let Some(expected) = shown.as_ref() else { continue };
            let Ok(now) = knob.read() else { continue }; // its group went
            if now != *expected {
                knob.write(&change.new)?;
                *shown = knob.read().ok();
                restored.push(change.file.clone());
            }
        }
        Ok(restored)
    }

    /// Records `knob`'s file as it is, without writing it: for a value the guard changes for
    /// moments at a time (reclaim lowering a limit), so that the watchdog writes it back should the
    /// guard die in such a moment.
    pub fn remember(&mut self, knob: impl Knob + 'static) -> Result<()> {
        self.record(knob).map(drop)
    }

    /// The index of `knob`'s file in the journal, recorded with its current value if new.
    fn record(&mut self, knob: impl Knob + 'static) -> Result<usize> {
        let file = knob.file();
        if let Some(i) = self.changes.iter().position(|(_, c, _)| c.file == file) {
            return Ok(i);
        }
        let previous = knob.read()?;
        let new = previous.clone();
        self.changes.push((Box::new(knob), Changed { file, previous, new }, None));
        Ok(self.changes.len() - 1)
    }

    /// Starts the watchdog over the changes so far: should this process die before
    /// [`Journal::restore`], it writes them back, newest first.
    pub fn arm(&mut self) -> Result<()> {
        let restore: Vec<(PathBuf, String)> =
            self.changes.iter().rev().map(|(_, c, _)| (c.file.clone(), c.previous.clone())).collect();
        self.watchdog = Watchdog::start(&restore)?;
        Ok(())
    }

    /// Every change so far, oldest first.
    pub fn changes(&self) -> Vec<Changed> {
        self.changes.iter().map(|(_, c, _)| c.clone()).collect()
    }

    /// Writes back every previous value, newest first (a group that vanished is skipped), and
    /// disarms the watchdog. The first error, after trying them all.
    pub fn restore(&mut self) -> Result<()> {
        let mut first_error = None;
        while let Some((knob, c, _)) = self.changes.pop() {
            if !c.file.parent().is_some_and(Path::exists) {
                continue;
            }
            if let Err(e) = knob.write(&c.previous) {
                first_error.get_or_insert(e);
            }
        }
        if let Some(w) = self.watchdog.take() {
            w.disarm();
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain file as a knob.
    #[derive(Debug)]
    struct FileKnob(PathBuf);

    impl Knob for FileKnob {
        fn file(&self) -> PathBuf {
            self.0.clone()
        }
        fn read(&self) -> Result<String> {
            Ok(std::fs::read_to_string(&self.0).unwrap())
        }
        fn write(&self, value: &str) -> Result<()> {
            std::fs::write(&self.0, value).unwrap();
            Ok(())
        }
    }

    fn read(file: &Path) -> String {
        std::fs::read_to_string(file).unwrap()
    }

    #[test]
    fn the_first_value_is_recorded_once_and_written_back_on_restore() {
        let dir = tempfile::tempdir().unwrap();
        let (limit, paused, gone) = (dir.path().join("limit"), dir.path().join("paused"), dir.path().join("gone"));
        std::fs::create_dir(&gone).unwrap();
        for (file, value) in [(&limit, "100"), (&paused, "0"), (&gone.join("f"), "a")] {
            std::fs::write(file, value).unwrap();
        }
        let mut journal = Journal::default();
        journal.set(FileKnob(limit.clone()), "80".into()).unwrap();
        journal.remember(FileKnob(paused.clone())).unwrap();
        journal.set(FileKnob(limit.clone()), "60".into()).unwrap();
        journal.set(FileKnob(gone.join("f")), "b".into()).unwrap();
        assert_eq!((read(&limit), read(&paused)), ("60".into(), "0".into()), "remember writes nothing");
        let change = |file: &Path, previous: &str, new: &str| Changed {
            file: file.to_path_buf(),
            previous: previous.into(),
            new: new.into(),
        };
        assert_eq!(
            journal.changes(),
            [change(&limit, "100", "60"), change(&paused, "0", "0"), change(&gone.join("f"), "a", "b")]
        );

        std::fs::write(&paused, "1").unwrap(); // changed for a moment, as reclaim does
        std::fs::remove_dir_all(&gone).unwrap(); // a group that vanished is skipped
        journal.restore().unwrap();
        assert_eq!((read(&limit), read(&paused)), ("100".into(), "0".into()));
        assert!(!gone.exists());
        assert!(journal.changes().is_empty(), "restored once");
    }

    /// A value the guard set and someone else overwrote is written back; a remembered file is not
    /// the guard's to write; restore still gives back the value from before the guard.
    #[test]
    fn an_overwritten_value_is_reasserted_and_restore_still_gives_the_first_back() {
        let dir = tempfile::tempdir().unwrap();
        let (limit, paused) = (dir.path().join("limit"), dir.path().join("paused"));
        std::fs::write(&limit, "100").unwrap();
        std::fs::write(&paused, "0").unwrap();
        let mut journal = Journal::default();
        journal.set(FileKnob(limit.clone()), "80".into()).unwrap();
        journal.remember(FileKnob(paused.clone())).unwrap();
        assert!(journal.reassert().unwrap().is_empty(), "nothing overwritten yet");
        std::fs::write(&limit, "500").unwrap();
        std::fs::write(&paused, "1").unwrap();
        assert_eq!(journal.reassert().unwrap(), std::slice::from_ref(&limit));
        assert_eq!((read(&limit), read(&paused)), ("80".into(), "1".into()));
        assert!(journal.reassert().unwrap().is_empty(), "once written back, nothing more to do");
        journal.restore().unwrap();
        assert_eq!(read(&limit), "100");
    }
}
