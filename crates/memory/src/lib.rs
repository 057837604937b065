//! ioshare-memory: memory isolation in userspace, because IO isolation fails without it — a memory
//! hog pushes its neighbours into direct reclaim and swap IO, and the kernel's OOM killer picks
//! victims by size, not importance. Two mechanisms from Alibaba Cloud Linux's memcg extensions
//! (SPEC §8), which upstream kernels lack, done from userspace over the stock cgroup files:
//!
//! - [`priority`]: priority OOM — on an OOM in an ancestor, the victim is found by walking down from
//!   it, lowest priority first (ties: larger usage), never outside the ancestor's subtree;
//! - [`watermark`]: early reclaim — background reclaim between `wmark_high` and `wmark_low`;
//! - [`guard`]: both, for a set of memory cgroups on cgroup v1 or v2, restoring everything it
//!   changed when it stops — through its [`journal`], whose [`watchdog`] also restores it when the
//!   guard's process dies without stopping;
//! - [`hierarchy`]: what the guard does on each hierarchy — [`hierarchy::v1`] (`oom_kill_disable` +
//!   OOM eventfd; usage-threshold eventfd + reclaim by lowering the limit), [`hierarchy::v2`]
//!   (acting before the kernel's OOM killer: `memory.high` headroom, a PSI `full` trigger,
//!   `memory.events` as the fallback; reclaim through `memory.reclaim`);
//! - [`kill`]: the kill by priority both hierarchies share; [`action`]: what the guard reports.
//!
//! Imports point one way: `guard` → `hierarchy` → `journal` → `watchdog`, `hierarchy` → `kill` →
//! `priority`; `action`, `watermark` (→ `size`, `priority`) and `error` are below them all.
//!
//! The rules are pure functions tested exactly; the guard only reads cgroup files, kills and writes
//! limits through `ioshare-host`'s [`ioshare_host::memcg`].

pub mod action;
pub mod error;
pub mod guard;
pub mod hierarchy;
pub mod journal;
pub mod kill;
pub mod priority;
pub mod size;
pub mod watchdog;
pub mod watermark;

pub use action::Action;
pub use error::{Error, Result};
pub use guard::Guard;
pub use journal::Changed;
pub use priority::{choose_victim, Node, PRIORITY_MAX};
pub use size::parse_size;
pub use watermark::{MemorySettings, Watermarks};
