//! The issue path: submit, dispatch, complete; and the planner: next_tick, tick.
//!
//! These calls run for every IO. They check their arguments (a failure allocates its message; a
//! success allocates nothing) and call core's controller; on a controller made without
//! `IOSHARE_LOCKED` they take no lock.

use ioshare_core::{Completion, Dispatch, Submit};

use crate::error::{Failure, IOSHARE_OK};
use crate::handle::{with_ctl, IoshareCtl};
use crate::types::{IoshareIo, IOSHARE_IDLE, IOSHARE_ISSUE, IOSHARE_QUEUED, IOSHARE_WAIT};

/// Offers an IO at time `now` (ns, the caller's monotonic clock).
///
/// Returns `IOSHARE_ISSUE`: issue it now; `*io` now carries its charge, and `*delay_ns` (when
/// `delay_ns` is not NULL) the time the group's producer should pause before submitting more (debt
/// from `IOSHARE_IO_MUST_ISSUE` IO; 0 otherwise). Or `IOSHARE_QUEUED`: the controller holds the IO
/// and hands it back from `ioshare_dispatch`; ask `ioshare_dispatch` when.
///
/// # Safety
/// `ctl` as every call; `io` NULL or readable and writable; `delay_ns` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_submit(ctl: *mut IoshareCtl, now: u64, io: *mut IoshareIo, delay_ns: *mut u64) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, move |state| {
            let slot = io.as_mut().ok_or_else(|| Failure::null("io"))?;
            let core_io = slot.to_core(&state.groups)?;
            match state.ctl.submit(now, core_io) {
                Submit::Issue { io: issued, delay } => {
                    // A controller changes only the charge of an IO it issues (core's `Io`).
                    slot.charge = issued.charge;
                    debug_assert_eq!(*slot, IoshareIo::from_core(&issued));
                    if let Some(d) = delay_ns.as_mut() {
                        *d = delay;
                    }
                    Ok(IOSHARE_ISSUE)
                }
                Submit::Queued => Ok(IOSHARE_QUEUED),
            }
        })
    }
}

/// Releases the next held IO that may go at `now`: `IOSHARE_ISSUE` with it in `*io`;
/// `IOSHARE_WAIT` with the time to ask again in `*at`; or `IOSHARE_IDLE` when nothing is held.
///
/// # Safety
/// `ctl` as every call; `io` and `at` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_dispatch(ctl: *mut IoshareCtl, now: u64, io: *mut IoshareIo, at: *mut u64) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, move |state| {
            let io = io.as_mut().ok_or_else(|| Failure::null("io"))?;
            let at = at.as_mut().ok_or_else(|| Failure::null("at"))?;
            Ok(match state.ctl.dispatch(now) {
                Dispatch::Io(released) => {
                    *io = IoshareIo::from_core(&released);
                    IOSHARE_ISSUE
                }
                Dispatch::At(t) => {
                    *at = t;
                    IOSHARE_WAIT
                }
                Dispatch::Idle => IOSHARE_IDLE,
            })
        })
    }
}

/// Reports that the device finished `*io` (the value `submit` or `dispatch` released) at `now`;
/// `released` is when the controller released it, `started` when the device began serving it
/// (`released` when unknown). The latency feeds IOCost's vrate. Report every released IO once.
///
/// # Safety
/// `ctl` as every call; `io` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_complete(
    ctl: *mut IoshareCtl,
    now: u64,
    io: *const IoshareIo,
    released: u64,
    started: u64,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, move |state| {
            let io = io.as_ref().ok_or_else(|| Failure::null("io"))?.to_core(&state.groups)?;
            let timing = Completion { released, started: started.max(released) };
            state.ctl.complete(now, &io, timing);
            Ok(IOSHARE_OK)
        })
    }
}

/// Writes when the planner wants to run next to `*at` (`IOSHARE_OK`), or returns `IOSHARE_IDLE`
/// when it has nothing to plan.
///
/// # Safety
/// `ctl` as every call; `at` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_next_tick(ctl: *mut IoshareCtl, at: *mut u64) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, move |state| {
            let at = at.as_mut().ok_or_else(|| Failure::null("at"))?;
            Ok(match state.ctl.next_tick() {
                Some(t) => {
                    *at = t;
                    IOSHARE_OK
                }
                None => IOSHARE_IDLE,
            })
        })
    }
}

/// Runs the planner at `now` (call it at the time `ioshare_next_tick` names).
///
/// # Safety
/// `ctl` as every call.
#[no_mangle]
pub unsafe extern "C" fn ioshare_tick(ctl: *mut IoshareCtl, now: u64) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, move |state| {
            state.ctl.tick(now);
            Ok(IOSHARE_OK)
        })
    }
}
