//! Making and freeing controllers, checking their strings, the library's version and last error.
//!
//! A controller is made from a kind and the kernel's own strings: the `io.cost.model` line (or a
//! preset name such as `ssd_dfl`, as `ioshare profile` prints it), the `io.cost.qos` line, and an
//! optional device-depth limit. The check functions let a service validate a whole configuration
//! before it changes anything.

use std::ffi::c_char;

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{
    Controller, IoCost, LeakyGate, Limited, Limits, LinearModel, ModelConfig, NoControl, QosConfig, TokenGate,
};

use crate::error::{guard, last_error, Failure, IOSHARE_E_INVALID, IOSHARE_OK};
use crate::handle::{live, IoshareCtl};
use crate::text::{optional, required};
use crate::types::{
    IOSHARE_KIND_IOCOST, IOSHARE_KIND_IOCOST_LEAKY, IOSHARE_KIND_LEAKY_BUCKET, IOSHARE_KIND_TOKEN_BUCKET,
    IOSHARE_LOCKED,
};

/// The library's version, "MAJOR.MINOR.PATCH" (static storage).
#[no_mangle]
pub extern "C" fn ioshare_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last failed call on this thread (one line, what is wrong and how to fix it).
/// Valid until the next failing call on the same thread; never NULL.
#[no_mangle]
pub extern "C" fn ioshare_last_error() -> *const c_char {
    last_error()
}

/// Parses an `io.cost.model` line or preset.
fn model(text: &str) -> Result<LinearModel, Failure> {
    Ok(LinearModel::new(text.parse::<ModelConfig>()?.params))
}

/// IOs each of a controller's queues is reserved for when made (a group's wait queue and lanes,
/// the released-IO queue, the heaps): the issue path allocates nothing until a queue holds more.
const QUEUE_RESERVE: usize = 128;

/// Builds the controller of `kind`.
fn build(
    kind: u32,
    model_text: Option<&str>,
    qos_text: Option<&str>,
    depth_max: u32,
) -> Result<Box<dyn Controller + Send>, Failure> {
    let iocost = || -> Result<IoCost, Failure> {
        let model = model(
            model_text.ok_or_else(|| Failure::null("model (an io.cost.model line or a preset such as ssd_dfl)"))?,
        )?;
        let qos = qos_text.map(str::parse::<QosConfig>).transpose()?.unwrap_or_default().params;
        let ctl = IoCost::new(model, qos).without_events().reserving(QUEUE_RESERVE);
        Ok(if depth_max > 0 { ctl.with_depth_limit(DepthLimit { max: depth_max }) } else { ctl })
    };
    let bucket_only = || {
        if model_text.is_some() || qos_text.is_some() || depth_max > 0 {
            return Err(Failure::new(
                IOSHARE_E_INVALID,
                "model, qos and depth_max apply to the IOCost kinds only: pass NULL, NULL, 0 for a bucket",
            ));
        }
        Ok(NoControl::default())
    };
    Ok(match kind {
        IOSHARE_KIND_IOCOST => Box::new(Limited::<_, TokenGate>::new(iocost()?).reserving(QUEUE_RESERVE)),
        IOSHARE_KIND_IOCOST_LEAKY => Box::new(Limited::<_, LeakyGate>::new(iocost()?).reserving(QUEUE_RESERVE)),
        IOSHARE_KIND_TOKEN_BUCKET => Box::new(Limited::<_, TokenGate>::new(bucket_only()?).reserving(QUEUE_RESERVE)),
        IOSHARE_KIND_LEAKY_BUCKET => Box::new(Limited::<_, LeakyGate>::new(bucket_only()?).reserving(QUEUE_RESERVE)),
        other => {
            return Err(Failure::new(
                IOSHARE_E_INVALID,
                format!(
                    "kind {other} is unknown: use IOSHARE_KIND_IOCOST, _IOCOST_LEAKY, _TOKEN_BUCKET or _LEAKY_BUCKET"
                ),
            ))
        }
    })
}

/// Makes a controller and stores it in `*out`.
///
/// `kind` is an `IOSHARE_KIND_*`. For the IOCost kinds, `model` is an `io.cost.model` line
/// (`rbps=… rseqiops=… …`) or a preset (`ssd_dfl`, optionally followed by overrides), `qos` an
/// `io.cost.qos` line or NULL for the kernel's defaults, and `depth_max` the device-depth option's
/// limit (0: off, as the kernel). For the buckets, pass NULL, NULL, 0. `flags` is 0 or
/// `IOSHARE_LOCKED`. On failure `*out` is left unchanged and nothing is allocated.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_new(
    kind: u32,
    model: *const c_char,
    qos: *const c_char,
    depth_max: u32,
    flags: u32,
    out: *mut *mut IoshareCtl,
) -> i32 {
    guard(|| {
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        if flags & !IOSHARE_LOCKED != 0 {
            return Err(Failure::new(
                IOSHARE_E_INVALID,
                format!("flags {flags:#x} has unknown bits: pass 0 or IOSHARE_LOCKED"),
            ));
        }
        // SAFETY: the caller's contract.
        let (model, qos) = unsafe { (optional(model, "model")?, optional(qos, "qos")?) };
        let ctl = build(kind, model, qos, depth_max)?;
        // SAFETY: checked non-null, writable by contract.
        unsafe { *out = Box::into_raw(Box::new(IoshareCtl::new(ctl, flags & IOSHARE_LOCKED != 0))) };
        Ok(IOSHARE_OK)
    })
}

/// Frees the controller `*ctl` and sets `*ctl` to NULL, so that later calls through the same
/// variable fail with `IOSHARE_E_NULL` instead of touching freed memory. `*ctl` NULL: nothing to do.
/// Other copies of the pointer must not be used afterwards. IOs the controller still held are
/// dropped: drain them with `ioshare_dispatch` first if they matter.
///
/// # Safety
/// `ctl` is NULL or writable, and `*ctl` is NULL or a controller from `ioshare_new` no other thread
/// is using.
#[no_mangle]
pub unsafe extern "C" fn ioshare_free(ctl: *mut *mut IoshareCtl) -> i32 {
    guard(|| {
        if ctl.is_null() {
            return Err(Failure::null("ctl (the address of the controller pointer)"));
        }
        // SAFETY: checked non-null, readable by contract.
        let ptr = unsafe { *ctl };
        if ptr.is_null() {
            return Ok(IOSHARE_OK);
        }
        // Checked like every call, so that a pointer to something else is refused, not freed.
        // SAFETY: readable by contract.
        unsafe { live(ptr) }?;
        // SAFETY: a live controller made by Box::into_raw in ioshare_new; `ctl` writable by contract.
        let mut owned = unsafe {
            *ctl = std::ptr::null_mut();
            Box::from_raw(ptr)
        };
        owned.retire();
        Ok(IOSHARE_OK)
    })
}

/// Checks an `io.cost.model` line or preset: `IOSHARE_OK`, or `IOSHARE_E_PARSE` with the reason.
///
/// # Safety
/// `text` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ioshare_check_model(text: *const c_char) -> i32 {
    // SAFETY: the caller's contract.
    guard(|| model(unsafe { required(text, "model") }?).map(|_| IOSHARE_OK))
}

/// Checks an `io.cost.qos` line: `IOSHARE_OK`, or `IOSHARE_E_PARSE` with the reason.
///
/// # Safety
/// `text` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ioshare_check_qos(text: *const c_char) -> i32 {
    // SAFETY: the caller's contract.
    guard(|| Ok(unsafe { required(text, "qos") }?.parse::<QosConfig>().map(|_| IOSHARE_OK)?))
}

/// Checks a limits string (`iops-read=5000,bps-write=104857600`, `none`): `IOSHARE_OK`, or
/// `IOSHARE_E_PARSE` (malformed) / `IOSHARE_E_INVALID` (a value out of range) with the reason.
///
/// # Safety
/// `text` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ioshare_check_limits(text: *const c_char) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let limits: Limits = unsafe { required(text, "limits") }?.parse()?;
        limits.validate().map_err(|e| Failure::new(IOSHARE_E_INVALID, format!("invalid limits: {e}")))?;
        Ok(IOSHARE_OK)
    })
}
