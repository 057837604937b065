//! C strings coming in: NULL and UTF-8 checks with a message naming the argument.

use std::ffi::{c_char, CStr};

use crate::error::{Failure, IOSHARE_E_PARSE};

/// The text of a required C string argument called `what`.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that outlives the returned reference.
pub unsafe fn required<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: forwarded from the caller.
    unsafe { optional(ptr, what) }?.ok_or_else(|| Failure::null(what))
}

/// The text of an optional C string argument (`None` for NULL).
///
/// # Safety
/// As [`required`].
pub unsafe fn optional<'a>(ptr: *const c_char, what: &str) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes.to_str().map(Some).map_err(|e| {
        Failure::new(IOSHARE_E_PARSE, format!("{what} is not UTF-8 (byte {}): pass ASCII text", e.valid_up_to()))
    })
}
