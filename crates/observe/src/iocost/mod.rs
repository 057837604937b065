//! The kernel's IOCost controller seen from inside: per device vrate, busy level, missed-latency ppm,
//! request-wait %, lagging/shortage/surplus counts; per (device, cgroup) weight, active and inuse
//! weights, hweights, usage, wait, debt and delay — what the kernel's `iocost_monitor.py` shows, read
//! by BPF programs on the `iocost_*` tracepoints (`src/bpf/iocost.bpf.c`) with CO-RE: no debug info,
//! no drgn, no `blkcg_debug_stats`.
//!
//! [`IocostObserver::start`] loads and attaches the programs (root and BTF needed; a kernel without the
//! tracepoints is one clear error); [`IocostObserver::snapshot`] reads what they kept into an
//! [`IocostSnapshot`]: each figure as of the last kernel event that touched it (see the programs'
//! header for when those come), with its age. [`render::table`] and [`render::prometheus`] present it.

mod loader;
pub mod render;
mod snapshot;

pub use loader::{iocost_enabled, IocostObserver};
pub use snapshot::{IocDevice, IocEvents, IocGroup, IocostSnapshot};
