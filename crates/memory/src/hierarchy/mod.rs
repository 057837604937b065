//! What the one [`crate::guard::Guard`] asks of a guarded group on its hierarchy: the
//! [`GroupWatch`] trait, implemented for cgroup v1 ([`v1`]: eventfds, `oom_kill_disable`, reclaim by
//! lowering the limit) and cgroup v2 ([`v2`]: PSI triggers and `memory.events` ahead of the kernel's
//! killer, `memory.reclaim`).
//!
//! The guard owns what both hierarchies share — the change journal and its restore, the wait on
//! every group's notifications, the count of kills, the pacing and timing of reclaim rounds — and a
//! watch does the rest for its group: set it up (every change through the journal), read its
//! notifications after a wait and end an OOM they show, and reclaim one round when usage is above
//! the high watermark. Both end an OOM by the same priority walk ([`crate::kill::kill_next`]), over
//! their hierarchy's view of a cgroup ([`crate::kill::MemoryGroup`]).

use std::path::Path;
use std::time::Duration;

use crate::action::Action;
use crate::error::Result;
use crate::journal::Journal;
use crate::kill::Ranks;
use crate::watermark::MemorySettings;

pub mod v1;
pub mod v2;

/// The most one reclaim step takes at once, bytes: on v1 the group's own allocations meanwhile meet
/// a limit at most this far below their usage; on v2 one `memory.reclaim` write asks for no more.
pub const RECLAIM_STEP: u64 = 16 << 20;

/// One guarded memory cgroup on its hierarchy.
pub trait GroupWatch: std::fmt::Debug + Send {
    /// Sets the group up with `settings` — its limit, the guard's OOM handling, the notifications —
    /// writing every change through `journal` (in a dry run only the limit asked for). A failure
    /// part-way leaves what was changed in `journal`, to be restored.
    fn start(&mut self, settings: &MemorySettings, dry_run: bool, journal: &mut Journal) -> Result<()>;

    /// The group's directory.
    fn dir(&self) -> &Path;

    /// Where priority OOM acts: the usage, bytes, at which the guard chooses a victim (`None`: the
    /// group has no limit, so no OOM of its own).
    fn acts_at(&self) -> Option<u64>;

    /// The descriptors to wait on for this group, with the events awaited.
    fn pollfds(&self) -> Vec<libc::pollfd>;

    /// The longest a wait may last before this group's usage is read again (`None`: a notification
    /// says when usage crossed the high watermark).
    fn usage_check(&self) -> Option<Duration>;

    /// After a wait (`polled`: this group's [`GroupWatch::pollfds`] as `poll(2)` returned them):
    /// reads its notifications, re-arming them, and ends an OOM they or the group's state show by
    /// killing by priority (in a dry run, reports the first choice). What it did.
    fn after_wait(&mut self, polled: &[libc::pollfd], ranks: &Ranks, dry_run: bool) -> Result<Vec<Action>>;

    /// If usage is above the high watermark: one reclaim round towards below the low one.
    /// `(usage before, usage after)`, bytes; `None` when there was nothing to do.
    fn reclaim(&self) -> Result<Option<(u64, u64)>>;
}
