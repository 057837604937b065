//! The agent's signals: SIGTERM and SIGINT stop it (reverting what it wrote), SIGHUP asks it to read
//! its configuration again. Each raises a flag the run loop polls; the one handler only stores to an
//! atomic (async-signal-safe). A process that never asks for the SIGHUP flag keeps SIGHUP's default.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    let flag = if sig == libc::SIGHUP { &RELOAD } else { &STOP };
    flag.store(true, Ordering::Relaxed);
}

/// Points `signals` at [`on_signal`].
fn install(signals: &[libc::c_int]) {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the sigaction
    // struct is zero-initialised then filled, as sigaction(2) requires.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        for &sig in signals {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// A flag set by SIGTERM or SIGINT (installed once), for [`Agent::run`](crate::Agent::run).
pub fn stop_on_signals() -> &'static AtomicBool {
    install(&[libc::SIGTERM, libc::SIGINT]);
    &STOP
}

/// A flag set by SIGHUP (installed on the first call), for
/// [`Agent::run_reloading`](crate::Agent::run_reloading), which clears it when it reloads.
pub fn reload_on_sighup() -> &'static AtomicBool {
    install(&[libc::SIGHUP]);
    &RELOAD
}
