//! Statistics: the controller's (vrate, busy level, …) and its groups' (usage, wait, debt, delay).
//! These allocate (core builds a snapshot); call them from a stats path, not per IO.

use crate::error::{Failure, IOSHARE_OK};
use crate::handle::{with_ctl, IoshareCtl};
use crate::types::{unknown_group, IoshareCtlStats, IoshareGroupStats};

/// Writes the controller's statistics at `now` to `*stats`, and those of its first `cap` groups
/// (by id) to `groups[0..cap]` (`groups` may be NULL when `cap` is 0). `stats->nr_groups` says
/// how many ids there are; a removed group's free id reads as zeros.
///
/// # Safety
/// `ctl` as every call; `stats` NULL or writable; `groups` NULL or writable for `cap` entries.
#[no_mangle]
pub unsafe extern "C" fn ioshare_stats(
    ctl: *mut IoshareCtl,
    now: u64,
    stats: *mut IoshareCtlStats,
    groups: *mut IoshareGroupStats,
    cap: usize,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, |state| {
            let out = stats.as_mut().ok_or_else(|| Failure::null("stats"))?;
            if groups.is_null() && cap > 0 {
                return Err(Failure::null("groups (with cap > 0)"));
            }
            let snap = state.ctl.stats(now);
            *out = IoshareCtlStats::from_core(&snap.device, snap.groups.len());
            for (i, g) in snap.groups.iter().take(cap).enumerate() {
                *groups.add(i) = IoshareGroupStats::from_core(i as u32, g);
            }
            Ok(IOSHARE_OK)
        })
    }
}

/// Writes the statistics of group `group` at `now` to `*stats`.
///
/// # Safety
/// `ctl` as every call; `stats` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ioshare_stats_group(
    ctl: *mut IoshareCtl,
    now: u64,
    group: u32,
    stats: *mut IoshareGroupStats,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        with_ctl(ctl, |state| {
            let out = stats.as_mut().ok_or_else(|| Failure::null("stats"))?;
            if !state.groups.is_live(group) {
                return Err(unknown_group(group));
            }
            let snap = state.ctl.stats(now);
            let g = &snap.groups[group as usize];
            *out = IoshareGroupStats::from_core(group, g);
            Ok(IOSHARE_OK)
        })
    }
}
