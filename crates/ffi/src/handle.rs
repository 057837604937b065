//! The controller object behind the opaque `ioshare_ctl *`, and the one way in: [`with_ctl`].
//!
//! A controller's first word says how a call may enter it: [`UNLOCKED`] or [`LOCKED`] (how it was
//! made), [`BROKEN`] (a call panicked and may have left it inconsistent), or anything else (not a
//! controller, or one already freed). [`with_ctl`] checks the pointer against NULL, then compares
//! that word once: an unlocked, healthy controller — the issue path's case — goes straight to the
//! call. Every other case takes the slow path: the mutex of a controller made `IOSHARE_LOCKED`
//! (its word re-read under the lock), or the error that names what is wrong. An unlocked
//! controller's caller keeps it to one thread at a time, so the issue path takes no lock.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ioshare_core::Controller;

use crate::error::{guard, Failure, IOSHARE_E_INTERNAL, IOSHARE_E_NOT_CONTROLLER};
use crate::groups::GroupTable;

/// "ioshare" + 1: a live controller without a lock.
const UNLOCKED: u64 = 0x696f_7368_6172_6501;
/// "ioshare" + 2: a live controller whose calls take its mutex.
const LOCKED: u64 = 0x696f_7368_6172_6502;
/// "ioshare" + 3: a live controller a panicking call left inconsistent; only `ioshare_free` accepts it.
const BROKEN: u64 = 0x696f_7368_6172_6503;

/// An IO controller made by `ioshare_new` (opaque to C).
pub struct IoshareCtl {
    /// [`UNLOCKED`], [`LOCKED`] or [`BROKEN`] while alive; 0 once freed.
    magic: AtomicU64,
    /// Held by every call on a [`LOCKED`] controller.
    lock: Mutex<()>,
    state: UnsafeCell<State>,
}

/// What a call may change.
pub struct State {
    /// The controller.
    pub ctl: Box<dyn Controller + Send>,
    /// Its groups' paths.
    pub groups: GroupTable,
}

impl IoshareCtl {
    /// A controller object around `ctl`, locked on every call when `locked`.
    pub fn new(ctl: Box<dyn Controller + Send>, locked: bool) -> Self {
        IoshareCtl {
            magic: AtomicU64::new(if locked { LOCKED } else { UNLOCKED }),
            lock: Mutex::new(()),
            state: UnsafeCell::new(State { ctl, groups: GroupTable::default() }),
        }
    }

    /// Marks the object dead before it is freed, so that a caller's stale copy of the pointer that
    /// still reaches the memory reads a wrong magic rather than a live controller.
    pub fn retire(&mut self) {
        // An atomic store is never elided, though the object is freed right after.
        self.magic.store(0, Relaxed);
    }
}

/// The controller behind `ctl` (healthy or broken), or why it is not one.
///
/// # Safety
/// `ctl` is NULL or points to memory the caller may read.
pub unsafe fn live<'a>(ctl: *const IoshareCtl) -> Result<&'a IoshareCtl, Failure> {
    // SAFETY: NULL or readable, by the caller's contract.
    let ctl = unsafe { ctl.as_ref() }.ok_or_else(|| Failure::null("controller"))?;
    match ctl.magic.load(Relaxed) {
        UNLOCKED | LOCKED | BROKEN => Ok(ctl),
        _ => Err(not_a_controller()),
    }
}

/// Runs an entry point's `call` on the controller behind `ctl`, as described in the module
/// documentation, inside [`guard`]: its outcome, or a failure's code with the message stored.
///
/// # Safety
/// `ctl` is NULL or points to memory the caller may read (ideally a live controller).
#[inline(always)]
pub unsafe fn with_ctl(ctl: *const IoshareCtl, call: impl FnOnce(&mut State) -> Result<i32, Failure>) -> i32 {
    // SAFETY: NULL or readable, by the caller's contract.
    match unsafe { ctl.as_ref() } {
        // The issue path: the guard around the call alone, its outcome returned in a register.
        // SAFETY: an unlocked controller: its caller keeps it to one thread at a time.
        Some(c) if c.magic.load(Relaxed) == UNLOCKED => guard(move || unsafe { run(c, call) }),
        // SAFETY: forwarded.
        _ => unsafe { with_ctl_slow(ctl, call) },
    }
}

/// [`with_ctl`] for any controller that is not unlocked and healthy: a locked one runs `call`
/// under its mutex; any other fails.
///
/// # Safety
/// As [`with_ctl`].
#[inline(never)]
unsafe fn with_ctl_slow(ctl: *const IoshareCtl, call: impl FnOnce(&mut State) -> Result<i32, Failure>) -> i32 {
    guard(move || {
        // SAFETY: NULL or readable, by `with_ctl`'s contract.
        let ctl = unsafe { ctl.as_ref() }.ok_or_else(|| Failure::null("controller"))?;
        let _held = enter_slow(ctl)?;
        // SAFETY: exclusive access: the mutex is held.
        unsafe { run(ctl, call) }
    })
}

/// The way into a controller that is not unlocked and healthy: the held lock of a locked one, or
/// the failure that names what is wrong.
fn enter_slow(ctl: &IoshareCtl) -> Result<MutexGuard<'_, ()>, Failure> {
    match ctl.magic.load(Relaxed) {
        LOCKED => {
            let held = ctl.lock.lock().unwrap_or_else(PoisonError::into_inner);
            // Re-read under the lock: a call that panicked marked it while holding the lock.
            if ctl.magic.load(Relaxed) == LOCKED {
                Ok(held)
            } else {
                Err(broken())
            }
        }
        BROKEN => Err(broken()),
        _ => Err(not_a_controller()),
    }
}

/// Runs `call` with exclusive access to `ctl`'s state, marking `ctl` broken if `call` panics (the
/// panic itself is caught by the entry point's guard).
///
/// # Safety
/// The caller has exclusive access to `ctl`'s state (the lock is held, or the controller is unlocked).
#[inline(always)]
unsafe fn run(ctl: &IoshareCtl, call: impl FnOnce(&mut State) -> Result<i32, Failure>) -> Result<i32, Failure> {
    // Forgotten on return, so the normal path pays nothing.
    let mark = BreakOnUnwind(&ctl.magic);
    // SAFETY: exclusive, by this function's contract.
    let result = call(unsafe { &mut *ctl.state.get() });
    std::mem::forget(mark);
    result
}

/// The failure for a controller a panicking call left inconsistent.
#[cold]
fn broken() -> Failure {
    Failure::new(IOSHARE_E_INTERNAL, "the controller failed in an earlier call: free it and make a new one")
}

/// The failure for a pointer that is not a live controller.
#[cold]
fn not_a_controller() -> Failure {
    Failure::new(
        IOSHARE_E_NOT_CONTROLLER,
        "not a live ioshare controller: pass what ioshare_new returned, before ioshare_free",
    )
}

/// Marks the controller [`BROKEN`] when dropped, which only happens while a panic unwinds through [`run`].
struct BreakOnUnwind<'a>(&'a AtomicU64);

impl Drop for BreakOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.store(BROKEN, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::IOSHARE_OK;
    use ioshare_core::{IoCost, LinearModel, ModelParams, QosParams};

    fn controller(locked: bool) -> IoshareCtl {
        IoshareCtl::new(Box::new(IoCost::new(LinearModel::new(ModelParams::SSD_FAST), QosParams::default())), locked)
    }

    #[test]
    fn a_call_that_panics_leaves_the_controller_refusing_every_later_call() {
        for locked in [false, true] {
            let ctl = controller(locked);
            // SAFETY: a live controller.
            let call = |panics: bool| unsafe {
                with_ctl(&ctl, |_| {
                    assert!(!panics, "a bug inside a call");
                    Ok(IOSHARE_OK)
                })
            };
            assert_eq!(call(false), IOSHARE_OK, "locked: {locked}");
            assert_eq!(call(true), IOSHARE_E_INTERNAL, "the panic is caught (locked: {locked})");
            assert_eq!(call(false), IOSHARE_E_INTERNAL, "later calls are refused (locked: {locked})");
            // SAFETY: a live (broken) controller: free still accepts it.
            assert!(unsafe { live(&ctl) }.is_ok());
        }
    }

    #[test]
    fn a_retired_controller_is_not_a_controller() {
        let mut ctl = controller(false);
        ctl.retire();
        // SAFETY: readable memory.
        let call = unsafe { with_ctl(&ctl, |_| Ok(IOSHARE_OK)) };
        assert_eq!(call, IOSHARE_E_NOT_CONTROLLER);
    }
}
