//! The memory controller's files on either cgroup hierarchy, for memory isolation done in userspace.
//!
//! - [`v1`]: the cgroup v1 `memory` controller (this host) — usage and limit, `oom_kill_disable`,
//!   and eventfd notifications through `cgroup.event_control`;
//! - [`v2`]: cgroup v2 with `+memory` (the lab guest, most current hosts) — `memory.current`,
//!   `memory.max`/`memory.high`, `memory.events`, PSI triggers, `memory.reclaim`;
//! - [`AnyMemCgroup`]: a memory cgroup of either hierarchy that this process creates and removes
//!   (tests, experiments).
//!
//! Each hierarchy's `Memcg` is a view of an existing directory, checked to be a memory cgroup of
//! that hierarchy; the two list a group's processes and child cgroups alike (`listing`). Writes are
//! raw: callers that must undo them (the memory guard, the agent) record what they change.

mod any;
mod listing;
pub mod v1;
pub mod v2;

pub use any::AnyMemCgroup;
