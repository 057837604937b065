//! Ctrl-C and SIGTERM as a flag: the first signal asks every loop to stop, results so far are kept,
//! and cleanup runs through the normal drop path (temporary files, loop devices, cgroups).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static STOP: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the SIGINT/SIGTERM handler (once) and returns the flag it sets. Blocking calls return
/// early with EINTR when a signal arrives (no `SA_RESTART`), so the engine notices at once.
pub fn stop_flag() -> &'static AtomicBool {
    INSTALL.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction with a handler that only stores to an atomic is async-signal-safe.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
    &STOP
}
