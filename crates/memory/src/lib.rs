//! ioshare-memory: memory isolation in userspace, because IO isolation fails without it — a memory
//! hog pushes its neighbours into direct reclaim and swap IO, and the kernel's OOM killer picks
//! victims by size, not importance. Two mechanisms from Alibaba Cloud Linux's memcg extensions
//! (SPEC §8), which upstream kernels lack, done from userspace over the stock cgroup files:
//!
//! - [`priority`]: priority OOM — on an OOM in an ancestor, the victim is found by walking down from
//!   it, lowest priority first (ties: larger usage), never outside the ancestor's subtree;
//! - [`watermark`]: early reclaim — background reclaim between `wmark_high` and `wmark_low`;
//! - [`hierarchy::v1`]: both, on cgroup v1 (`oom_kill_disable` + OOM eventfd; usage-threshold eventfd +
//!   reclaim by lowering the limit), restoring everything it changed when it stops — and, through
//!   its [`watchdog`], when its process dies without stopping;
//! - [`hierarchy::v2`]: both on cgroup v2, acting before the kernel's OOM killer (`memory.high` headroom, a
//!   PSI `full` trigger, `memory.events` as the fallback) and reclaiming through `memory.reclaim`;
//! - [`kill`]: the kill by priority both guards share; [`any`]: either guard behind one type.
//!
//! The rules are pure functions tested exactly; the guard only reads cgroup files, kills and writes
//! limits through `ioshare-host`'s [`ioshare_host::memcg`].

pub mod action;
pub mod any;
pub mod error;
pub mod hierarchy;
pub mod kill;
pub mod priority;
pub mod size;
pub mod watchdog;
pub mod watermark;

pub use action::Action;
pub use any::AnyGuard;
pub use error::{Error, Result};
pub use hierarchy::v1::{Changed, Guard, GuardedGroup};
pub use hierarchy::v2::{Guard2, GuardedGroup2};
pub use priority::{choose_victim, Node, PRIORITY_MAX};
pub use size::parse_size;
pub use watermark::{MemorySettings, Watermarks};
