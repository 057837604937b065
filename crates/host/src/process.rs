//! A process as `/proc/PID/stat` shows it: whether it still runs, is stopped or has exited, and when
//! it started — which tells a process from a later one the kernel gave the same pid.
//!
//! The line is `PID (COMM) STATE PPID ...`, where COMM (the executable's name, up to 15 bytes) may
//! itself hold spaces and parentheses: fields are counted after the *last* `)`. The start time is
//! field 22, in clock ticks since boot; it never changes for a process, and a pid reused later gets
//! a later one. The CPU it used so far, all its threads, is fields 14 and 15 (user, system) in ticks.

use crate::error::{parse_error, Result};

/// The format's name in errors.
const FORMAT: &str = "/proc/PID/stat";

/// What `/proc/PID/stat` says of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessStat {
    /// The state letter: `R` running, `S` sleeping, `D` in IO, `T` stopped (SIGSTOP), `t` traced,
    /// `Z` exited but not yet reaped (zombie), `X` dead.
    pub state: char,
    /// When the process started, clock ticks since boot (field 22, `starttime`).
    pub start_ticks: u64,
    /// CPU time in user mode so far, all threads, clock ticks (field 14, `utime`).
    pub user_ticks: u64,
    /// CPU time in the kernel so far, all threads, clock ticks (field 15, `stime`).
    pub system_ticks: u64,
}

impl ProcessStat {
    /// Parses the text of a `/proc/PID/stat` file.
    pub fn parse(text: &str) -> Result<ProcessStat> {
        let bad = |reason: &str| parse_error(FORMAT, text.trim(), reason);
        let (_, after) = text.rsplit_once(')').ok_or_else(|| bad("expected 'PID (COMM) STATE ...'"))?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let state = match fields.first().map(|s| s.chars().collect::<Vec<char>>()).as_deref() {
            Some(&[c]) if c.is_ascii_alphabetic() => c,
            _ => return Err(bad("expected a one-letter state after the command name")),
        };
        // Field 3 (the state) is fields[0], so field N is fields[N - 3].
        let field = |n: usize, what: &str| {
            fields.get(n - 3).and_then(|s| s.parse().ok()).ok_or_else(|| bad(&format!("expected {what} as a number")))
        };
        Ok(ProcessStat {
            state,
            start_ticks: field(22, "the start time (field 22)")?,
            user_ticks: field(14, "the user time (field 14)")?,
            system_ticks: field(15, "the system time (field 15)")?,
        })
    }

    /// Process `pid` as it is now; `None` if there is no such process (or `/proc` cannot tell).
    pub fn read(pid: u32) -> Option<ProcessStat> {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|t| ProcessStat::parse(&t).ok())
    }

    /// The start time of this process.
    pub fn own_start_ticks() -> Option<u64> {
        ProcessStat::read(std::process::id()).map(|p| p.start_ticks)
    }

    /// CPU time used so far, all threads: (user, system), seconds.
    pub fn cpu_seconds(&self) -> (f64, f64) {
        // SAFETY: sysconf only reads a constant of the running system.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        (self.user_ticks as f64 / hz, self.system_ticks as f64 / hz)
    }

    /// Whether the process has exited (a zombie its parent has not reaped yet, or dead).
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// Whether the process is stopped (SIGSTOP, or a debugger).
    pub fn stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_and_start_time_after_the_last_parenthesis() {
        let line = "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10\n";
        assert_eq!(
            ProcessStat::parse(line).unwrap(),
            ProcessStat { state: 'S', start_ticks: 987_654, user_ticks: 5, system_ticks: 3 }
        );
        // SAFETY: as in cpu_seconds.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert_eq!(ProcessStat::parse(line).unwrap().cpu_seconds(), (5.0 / hz, 3.0 / hz));
        let zombie = "7 (x) Z 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert!(ProcessStat::parse(zombie).unwrap().exited());
        for bad in [
            "",
            "4242 sleep S 1",
            "1 (x) S 1 2 3",
            "1 (x) Sleeping 1",
            "1 (x) S 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 -5",
        ] {
            let err = ProcessStat::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid /proc/PID/stat"), "{bad}: {err}");
        }
    }

    #[test]
    fn reads_this_process() {
        let me = ProcessStat::read(std::process::id()).unwrap();
        assert_eq!(ProcessStat::own_start_ticks(), Some(me.start_ticks));
        assert!(!me.exited() && !me.stopped());
        assert_eq!(ProcessStat::read(u32::MAX), None);
    }
}
