//! Groups: made or changed at any time, by path or by parent and name; found by path; named by id.
//!
//! A group is a path in the weight tree (`tenants/gold`); configuring a path creates its missing
//! ancestors at the default weight (IOCost) and sets the group's weight and limits. Nothing changes
//! when a setting is invalid.

use std::ffi::c_char;

use ioshare_core::{GroupSettings, Limits, Nanos};

use crate::error::{Failure, IOSHARE_E_INVALID, IOSHARE_E_RANGE, IOSHARE_E_UNKNOWN_GROUP, IOSHARE_OK};
use crate::handle::{with_ctl, IoshareCtl, State};
use crate::text::{optional, required};
use crate::types::unknown_group;

/// Configures `path` in `state` and writes its id to `out` (if not NULL).
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn configure_path(
    state: &mut State,
    now: Nanos,
    path: &str,
    weight: u32,
    limits: Option<&str>,
    out: *mut u32,
) -> Result<i32, Failure> {
    let limits: Limits = limits.unwrap_or("").parse()?;
    let id = state.ctl.configure(now, path, &GroupSettings { weight, limits })?;
    state.groups.learn(&*state.ctl, now, path, id);
    if !out.is_null() {
        // SAFETY: non-null, writable by contract.
        unsafe { *out = id.0 };
    }
    Ok(IOSHARE_OK)
}

/// Creates the group at `path` (and its missing ancestors) or changes its settings: `weight`
/// 1..=10000, `limits` in ioshare's syntax (`iops-read=5000,bps-total=…`; NULL or "" for none).
/// Writes the group's id to `*group` when `group` is not NULL. Ids start at 0 and stay the group's
/// until it is removed; a removed group's id goes to a group created later.
///
/// # Safety
/// `ctl` as every call; the strings NULL or NUL-terminated; `group` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_configure(
    ctl: *mut IoshareCtl,
    now: u64,
    path: *const c_char,
    weight: u32,
    limits: *const c_char,
    group: *mut u32,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, |state| {
            let (path, limits) = (required(path, "path")?, optional(limits, "limits")?);
            configure_path(state, now, path, weight, limits, group)
        })
    }
}

/// As `ioshare_configure`, for the child `name` of group `parent` (`name` has no '/').
///
/// # Safety
/// As `ioshare_configure`.
#[no_mangle]
pub unsafe extern "C" fn ioshare_configure_child(
    ctl: *mut IoshareCtl,
    now: u64,
    parent: u32,
    name: *const c_char,
    weight: u32,
    limits: *const c_char,
    group: *mut u32,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, |state| {
            let (name, limits) = (required(name, "name")?, optional(limits, "limits")?);
            if name.is_empty() || name.contains('/') {
                return Err(Failure::new(
                    IOSHARE_E_INVALID,
                    format!("child name '{}' must be one non-empty path component, without '/'", name.escape_default()),
                ));
            }
            let path = format!("{}/{name}", state.groups.path(parent).ok_or_else(|| unknown_group(parent))?);
            configure_path(state, now, &path, weight, limits, group)
        })
    }
}

/// Removes group `group` when nothing of it is left: no child groups, no IO queued, none in flight
/// (`IOSHARE_E_BUSY` otherwise, and nothing changes). Its id goes to a group created later; until
/// then IO naming it fails with `IOSHARE_E_UNKNOWN_GROUP`. A service removes a tenant's group when
/// the tenant leaves (a client disconnects), after its last IO completed.
///
/// # Safety
/// `ctl` as every call.
#[no_mangle]
pub unsafe extern "C" fn ioshare_remove(ctl: *mut IoshareCtl, now: u64, group: u32) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, |state| {
            let path = state.groups.path(group).ok_or_else(|| unknown_group(group))?.to_string();
            state.ctl.remove(now, &path)?;
            state.groups.forget(group);
            Ok(IOSHARE_OK)
        })
    }
}

/// Writes the id of the group at `path` to `*group`, or fails with `IOSHARE_E_UNKNOWN_GROUP`.
///
/// # Safety
/// `ctl` as every call; `path` NULL or NUL-terminated; `group` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_group_find(ctl: *mut IoshareCtl, path: *const c_char, group: *mut u32) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, |state| {
            let path = required(path, "path")?;
            if group.is_null() {
                return Err(Failure::null("group"));
            }
            let id = state.groups.find(path).ok_or_else(|| {
                Failure::new(
                    IOSHARE_E_UNKNOWN_GROUP,
                    format!("no group at '{}': configure it first", path.escape_default()),
                )
            })?;
            *group = id;
            Ok(IOSHARE_OK)
        })
    }
}

/// Copies the path of group `group`, NUL-terminated, into `buf` of `cap` bytes. Returns the path's
/// length (without the NUL), or `IOSHARE_E_RANGE` when `cap` is too small (the message says the
/// size needed; `buf` is left unchanged).
///
/// # Safety
/// `ctl` as every call; `buf` NULL or writable for `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn ioshare_group_path(ctl: *mut IoshareCtl, group: u32, buf: *mut c_char, cap: usize) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, |state| {
            if buf.is_null() {
                return Err(Failure::null("buf"));
            }
            let path = state.groups.path(group).ok_or_else(|| unknown_group(group))?;
            if path.len() >= cap {
                return Err(Failure::new(
                    IOSHARE_E_RANGE,
                    format!("buf of {cap} bytes is too small: the path needs {}", path.len() + 1),
                ));
            }
            std::ptr::copy_nonoverlapping(path.as_ptr(), buf.cast(), path.len());
            *buf.add(path.len()) = 0;
            Ok(path.len() as i32)
        })
    }
}
