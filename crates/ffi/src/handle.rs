//! The controller object behind the opaque `ioshare_ctl *`, and the one way in: [`with_ctl`].
//!
//! [`with_ctl`] checks the pointer (NULL, then a magic number that tells a controller from other
//! memory), takes the mutex of a controller made `IOSHARE_LOCKED`, refuses a controller a panic left
//! inconsistent, and runs the call. A controller without the flag takes no lock: its caller keeps
//! it to one thread at a time, and the issue path stays lock-free.

use std::cell::UnsafeCell;
use std::sync::{Mutex, PoisonError};

use ioshare_core::Controller;

use crate::error::{Failure, IOSHARE_E_INTERNAL, IOSHARE_E_NOT_CONTROLLER};
use crate::groups::GroupTable;

/// "ioshare" + 1: marks a live controller.
const MAGIC: u64 = 0x696f_7368_6172_6501;

/// An IO controller made by `ioshare_new` (opaque to C).
pub struct IoshareCtl {
    magic: u64,
    lock: Option<Mutex<()>>,
    state: UnsafeCell<State>,
}

/// What a call may change.
pub struct State {
    /// The controller.
    pub ctl: Box<dyn Controller + Send>,
    /// Its groups' paths.
    pub groups: GroupTable,
    /// Set when a call panicked: the controller may be inconsistent.
    broken: bool,
}

impl IoshareCtl {
    /// A controller object around `ctl`, locked on every call when `locked`.
    pub fn new(ctl: Box<dyn Controller + Send>, locked: bool) -> Self {
        IoshareCtl {
            magic: MAGIC,
            lock: locked.then(|| Mutex::new(())),
            state: UnsafeCell::new(State { ctl, groups: GroupTable::default(), broken: false }),
        }
    }

    /// Marks the object dead before it is freed, so that a caller's stale copy of the pointer that
    /// still reaches the memory reads a wrong magic rather than a live controller.
    pub fn retire(&mut self) {
        // Volatile: the object is freed right after, and a plain store to it may be elided.
        // SAFETY: a valid, exclusive reference.
        unsafe { std::ptr::write_volatile(&mut self.magic, 0) };
    }
}

/// The controller behind `ctl`, or why it is not one.
///
/// # Safety
/// `ctl` is NULL or points to memory the caller may read.
#[inline]
pub unsafe fn live<'a>(ctl: *const IoshareCtl) -> Result<&'a IoshareCtl, Failure> {
    if ctl.is_null() {
        return Err(Failure::null("controller"));
    }
    // SAFETY: non-null; the caller guarantees it is readable.
    let ctl = unsafe { &*ctl };
    if ctl.magic != MAGIC {
        return Err(Failure::new(
            IOSHARE_E_NOT_CONTROLLER,
            "not a live ioshare controller: pass what ioshare_new returned, before ioshare_free",
        ));
    }
    Ok(ctl)
}

/// Runs `call` on the controller behind `ctl`, as described in the module documentation.
///
/// # Safety
/// `ctl` is NULL or points to memory the caller may read (ideally a live controller).
#[inline]
pub unsafe fn with_ctl<R>(
    ctl: *const IoshareCtl,
    call: impl FnOnce(&mut State) -> Result<R, Failure>,
) -> Result<R, Failure> {
    // SAFETY: forwarded from the caller.
    let ctl = unsafe { live(ctl) }?;
    let _held = ctl.lock.as_ref().map(|m| m.lock().unwrap_or_else(PoisonError::into_inner));
    // SAFETY: exclusive access: the mutex is held, or the caller keeps an unlocked controller to
    // one thread at a time (the ABI's contract).
    let raw = ctl.state.get();
    // SAFETY: as above.
    let state = unsafe { &mut *raw };
    if state.broken {
        return Err(Failure::new(
            IOSHARE_E_INTERNAL,
            "the controller failed in an earlier call: free it and make a new one",
        ));
    }
    // Marks the controller broken if `call` unwinds (the panic itself is caught by the entry
    // point's guard); forgotten on return, so the normal path pays nothing.
    // SAFETY: `raw` is valid; the pointer is only written after `call`'s borrow has ended.
    let mark = BreakOnUnwind(unsafe { std::ptr::addr_of_mut!((*raw).broken) });
    let result = call(state);
    std::mem::forget(mark);
    result
}

/// Sets the flag when dropped, which only happens while a panic unwinds through [`with_ctl`].
struct BreakOnUnwind(*mut bool);

impl Drop for BreakOnUnwind {
    fn drop(&mut self) {
        // SAFETY: points into the controller's state, alive for the whole call.
        unsafe { *self.0 = true };
    }
}
