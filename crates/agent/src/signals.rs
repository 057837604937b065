//! The agent's signals: SIGTERM and SIGINT stop it (reverting what it wrote), each a flag the run
//! loop polls; the handler only stores to an atomic (async-signal-safe).

use std::sync::atomic::{AtomicBool, Ordering};

/// A flag set by SIGTERM or SIGINT (installed once), for [`Agent::run`](crate::Agent::run).
pub fn stop_on_signals() -> &'static AtomicBool {
    static STOP: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the sigaction
    // struct is zero-initialised then filled, as sigaction(2) requires.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGINT] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    &STOP
}
