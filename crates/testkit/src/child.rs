//! A child process a test started, killed and reaped when the guard drops, so a test that fails
//! halfway leaves no process behind.

use std::process::Child;

/// A child process of a test, killed (SIGKILL) and reaped on drop unless it ended before.
pub struct KillOnDrop(pub Child);

impl KillOnDrop {
    /// Whether the child is still running (not yet exited).
    pub fn alive(&mut self) -> bool {
        self.0.try_wait().expect("wait on the test's child").is_none()
    }

    /// Sends SIGTERM: how the CLI's long-running commands are told to stop cleanly.
    pub fn terminate(&self) {
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped (drop reaps it).
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
