//! Status codes, the per-thread message of the last failure, and the guard every entry point runs in.
//!
//! A failing call stores one line (what is wrong and how to fix it) in a thread-local buffer that
//! `ioshare_last_error` returns; a successful call leaves it alone, like `errno`. Only failures
//! allocate. Panics never cross the ABI: [`guard`] turns them into `IOSHARE_E_INTERNAL`.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use ioshare_core::Error;

/// Success.
pub const IOSHARE_OK: i32 = 0;
/// A required pointer is NULL (a controller freed with `ioshare_free` is NULL: it clears the pointer).
pub const IOSHARE_E_NULL: i32 = -1;
/// A value out of range: unknown kind, operation or flag, a weight outside 1..=10000, a name with '/'.
pub const IOSHARE_E_INVALID: i32 = -2;
/// A malformed string: model, QoS, limits or group path, or text that is not UTF-8.
pub const IOSHARE_E_PARSE: i32 = -3;
/// A group id or path the controller does not have.
pub const IOSHARE_E_UNKNOWN_GROUP: i32 = -4;
/// The pointer is not a live controller made by `ioshare_new`.
pub const IOSHARE_E_NOT_CONTROLLER: i32 = -5;
/// An output buffer is too small; the message says the size needed.
pub const IOSHARE_E_RANGE: i32 = -6;
/// A group that cannot be removed yet: it has child groups, or IO queued or in flight.
pub const IOSHARE_E_BUSY: i32 = -8;
/// A bug inside the library (a caught panic); the controller refuses every later call but `ioshare_free`.
pub const IOSHARE_E_INTERNAL: i32 = -7;

/// A failed call: its code and its message. Boxed, so that a `Result<i32, Failure>` fits in two
/// registers and the issue path's success costs no copies.
#[derive(Debug)]
pub struct Failure(Box<FailureText>);

/// What a [`Failure`] holds.
#[derive(Debug)]
struct FailureText {
    /// One of the negative `IOSHARE_E_*` codes.
    code: i32,
    /// One line: what is wrong and how to fix it.
    message: String,
}

impl Failure {
    /// A failure with `code` and `message` (cold: the issue path never builds one when it succeeds).
    #[cold]
    #[inline(never)]
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Failure(Box::new(FailureText { code, message: message.into() }))
    }

    /// A required pointer argument that is NULL.
    #[cold]
    #[inline(never)]
    pub fn null(what: &str) -> Self {
        Failure::new(IOSHARE_E_NULL, format!("{what} is NULL: pass a valid pointer"))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = match e {
            Error::Parse { .. } | Error::InvalidPath(_) => IOSHARE_E_PARSE,
            Error::UnknownGroup(_) => IOSHARE_E_UNKNOWN_GROUP,
            Error::InvalidWeight { .. } | Error::Invalid(_) => IOSHARE_E_INVALID,
            Error::GroupBusy { .. } => IOSHARE_E_BUSY,
        };
        Failure::new(code, e.to_string())
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(c"no error".to_owned());
}

/// Stores `message` as this thread's last error (NUL bytes shown as `\0`).
fn set_last(message: &str) {
    let text = CString::new(message.replace('\0', "\\0")).expect("NUL bytes were replaced");
    LAST.with(|last| *last.borrow_mut() = text);
}

/// This thread's last error message; valid until the next failing call on this thread.
pub fn last_error() -> *const c_char {
    LAST.with(|last| last.borrow().as_ptr())
}

/// Runs an entry point's body: its outcome, or its failure's code with the message stored.
#[inline(always)]
pub fn guard(body: impl FnOnce() -> Result<i32, Failure>) -> i32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(failure)) => {
            set_last(&failure.0.message);
            failure.0.code
        }
        Err(panic) => {
            set_last(&format!("internal error in libioshare: {}; please report it", panic_text(&*panic)));
            IOSHARE_E_INTERNAL
        }
    }
}

/// The message of a caught panic.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}
