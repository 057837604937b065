//! ioshare-agent: puts real cgroups under IOCost. Desired state comes from a TOML file ([`Config`]);
//! the agent applies it through the kernel's own iocost where the host has it (cgroup v2 `io` with
//! `io.cost.*`), and elsewhere runs ioshare-core's IOCost planner itself over per-period counters,
//! writing blk-throttle limits (cgroup v1 `blkio.throttle.*` or v2 `io.max`) — a third driver of the
//! same controller, next to the simulator and the engine.
//!
//! # Layout
//! ```text
//! desired/   what is wanted: config (the TOML file), rules (which rule takes a cgroup), pods
//!            (a [kubernetes] section's pods), targets (one list of cgroups with weight and caps:
//!            HOW A POD GETS ITS WEIGHT — `targets::targets`, then `targets::userspace_plan`'s leaves)
//! daemon/    the running agent: start, discovery, the period loop, reload, claim, signals
//! backend/   how it reaches the kernel: the Backend trait; kernel/ (iocost files; the kernel's own
//!            IOCost figures, read through ioshare-observe), userspace/ (the planner in steps read →
//!            classify → follow → budget → write; HOW A BUDGET BECOMES A BLK-THROTTLE LIMIT —
//!            `userspace::budget`, then `backend::throttle::throttle_for`)
//! report/    what it shows: status, metrics, share (effective shares and flags), logging, trace, cpu
//! cgroups/   the host's cgroups: check (what it offers, which backend), hierarchy (the tree's files)
//! memory     the memory guard's rules applied through ioshare-memory
//! ```
//!
//! # API
//! ```text
//! Check::probe() -> Check                       // host capabilities, backend auto picks and why,
//!     .select(BackendChoice) -> (BackendKind, Hierarchy)   // the buffered-write caveat; Display, Serialize
//! Config::load(file) -> Config                  // validated whole; errors "FILE:LINE: key: what"
//! Config::load_profiling(file, cache_dir, &stop, &progress)   // model = "profile": measured by the
//!                                               // engine's profiler, read-only, once per device (cached)
//! Agent::start(config, choice, state_dir) -> (Agent, Option<Reverted>)   // reverts a killed agent's
//!     .discover()  .period()  .status()         // state first; applies all or nothing; refused while
//!                                               // another agent controls a cgroup it matches (claim)
//!     .metrics_addr()                           // [metrics] listen: /metrics from each period's Status
//!     .run(&AtomicBool) -> Reverted             // until the flag is set; then reverts everything
//!     .run_reloading(&stop, &reload, &load)     // and on each reload flag, load() applied as a difference
//!     .reload(Config) -> Reloaded               // the difference: unwanted settings restored
//!     .stop() -> Reverted
//! stop_on_signals() -> &'static AtomicBool      // SIGTERM / SIGINT
//! reload_on_sighup() -> &'static AtomicBool     // SIGHUP
//! Config::load_cached(file, cache_dir)          // a reload's read: profiled models from the cache only
//! daemon::reload::request(state_dir, within) -> Outcome   // `ioshare agent reload`: SIGHUP, wait the answer
//! report::logging::init(level, LogFormat)               // tracing on stderr: text or JSON lines
//! Status::read(state_dir) -> Status             // what `ioshare agent status` prints
//! ShareCheck::probe(check, &config, choice)     // `agent check --config`: each managed cgroup's share
//! Shares::check(&config, pods, backend, &hierarchy, sys_block)   // per device, and flags (see [`report::share`])
//! report::logging::init_in_process()                    // the same log for an agent run in-process (bench)
//! revert(state_dir) -> Option<Reverted>        // `ioshare agent revert`: a killed agent's changes
//! ```
//!
//! # What the userspace backend can and cannot do (vs kernel iocost)
//! It sees counters once a period, not IOs: budgets, donation and vrate follow the kernel's planner,
//! but enforcement is blk-throttle's rate limit for the next period, so a burst inside a period is
//! not shaped, a group that overran pays it back the next period (period-granular debt, no per-IO
//! debt or delay), IOs are charged by each cgroup's sequential/random mix as the eBPF observer saw it
//! ([`backend::userspace::io_mix`]; all as random where it cannot run), latency is
//! judged from the period's mean (see [`backend::userspace::latency`]), and a cgroup alone is not limited at all.
//!
//! # Memory isolation
//! Rules with `memory = { priority, wmark_ratio, wmark_scale_factor, limit, oom_group, oom_pressure }`
//! put the matched cgroups under ioshare-memory's guard (priority OOM, early reclaim) on the host's
//! memory hierarchy — cgroup v1 `memory`, or cgroup v2 with `memory` ([`memory`]); every memory file
//! it writes is journaled for revert; `memory_dry_run` logs OOM decisions and changes nothing.

pub mod backend;
pub mod cgroups;
pub mod daemon;
pub mod desired;
mod error;
mod inotify;
pub mod memory;
pub mod report;

pub use cgroups::check::{BackendChoice, BackendKind, Check};
pub use cgroups::hierarchy::{Flavor, Hierarchy, Throttle};
pub use daemon::signals::{reload_on_sighup, stop_on_signals};
pub use daemon::{revert, Agent};
pub use desired::config::{default_state_dir, Config};
pub use desired::profile::Measure;
pub use error::{Error, Result};
pub use report::share::{ShareCheck, Shares};
pub use report::status::Status;
