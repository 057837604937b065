//! The guard's watchdog: a small shell process that restores what the guard changed if the guard's
//! process dies without doing it (a `kill -9`, a crash), so no group stays with the kernel's OOM
//! killer paused or a limit lowered mid-reclaim.
//!
//! The watchdog holds the read end of a pipe whose write end only the guard's process has. When the
//! guard stops normally it writes `done` and the watchdog exits without touching anything (the guard
//! restored the values itself); when the process dies the pipe closes, `read` returns nothing, and
//! the watchdog writes every recorded value back, newest first. It is `sh` (always present), started
//! in its own session so that a signal to the agent's process group does not take it along.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::error::{Error, Result};

/// The script: wait for the guard's word or its death, then restore `FILE VALUE` pairs on death.
const SCRIPT: &str = r#"read -r word; [ "$word" = done ] && exit 0
while [ $# -ge 2 ]; do [ -e "$1" ] && echo "$2" > "$1"; shift 2; done"#;

/// A running watchdog; [`Watchdog::disarm`] ends it without restoring.
#[derive(Debug)]
pub struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Watchdog {
    /// Starts a watchdog that writes each `(file, value)` back, in the order given, if this process
    /// dies before [`Watchdog::disarm`]; none when there is nothing to restore.
    pub fn start(restore: &[(PathBuf, String)]) -> Result<Option<Watchdog>> {
        if restore.is_empty() {
            return Ok(None);
        }
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(SCRIPT).arg("ioshare-memory-watchdog");
        for (file, value) in restore {
            cmd.arg(file).arg(value);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: setsid is async-signal-safe; the child leaves our session and process group.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|source| Error::Watchdog { source })?;
        let stdin = child.stdin.take();
        Ok(Some(Watchdog { child, stdin }))
    }

    /// Tells the watchdog the guard restored everything itself; waits for it to exit.
    pub fn disarm(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "done");
        }
        let _ = self.child.wait();
    }
}
