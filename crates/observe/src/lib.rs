//! ioshare-observe: the kernel's block layer, watched with eBPF and aggregated in the kernel.
//!
//! BPF programs (C, `src/bpf/observe.bpf.c`, built by clang through libbpf-cargo) sit on the block
//! tracepoints Q (`block_bio_queue`), I (`block_rq_insert`), D (`block_rq_issue`) and C
//! (`block_rq_complete`) and count, per (device, cgroup, operation): IOs and bytes per stage, log2
//! histograms of IO size and of the seek distance between consecutive IOs of the same cgroup at each
//! stage (so a scheduler's reordering shows as a different histogram at I than at D), and latency
//! histograms Q→C, I→D, D→C. User space reads the maps when it wants a [`Snapshot`]. The default,
//! light detail ([`Stages::Light`]) attaches only C, with sampled latencies from the request's own
//! timestamps. [`iocost`] reads the kernel IOCost controller's state from its own tracepoints.
//!
//! # API
//! ```text
//! Observer::start(device: Option<(major, minor)>) -> Result<Observer>   // root + BTF; Stages::Light
//! Observer::start_with(device, mode, Stages::{Light, QueueOnly, All})   // Light, QueueOnly: one program per IO
//!     .snapshot() -> Result<Snapshot>     // cumulative since start
//!     .mode() -> AttachMode               // TpBtf or the RawTp fallback
//!     .measure_cost() -> Result<()>       // kernel times the programs: Snapshot::cost
//!     .pause(); .resume() -> Result<()>   // detach / attach the programs again, maps kept
//! Snapshot { elapsed_s, entries: Vec<Entry>, counters, cost }, .since(&earlier), .filtered(pattern)
//! Entry { device, device_name, cgroup_id, cgroup, op, stages[Q,I,D,C]: StageStats, latencies[QC,ID,DC] }
//! Histogram { buckets, sum }, .quantile(kind, q), Kind::{Size, Seek, Latency}.upper_bound(k)/.bucket(v)
//! resolve_device("/dev/loop0" | "loop0" | "7:0") -> Option<(major, minor)>; disk_of(path) -> its disk
//! prometheus::render(&Snapshot) -> String; prometheus::serve(addr, Shared snapshot) -> Endpoint
//! endpoint::Endpoint::serve(addr, Registry, program)   // GET /metrics; stops on drop; endpoint::family
//! iocost::IocostObserver::start()?.snapshot() -> IocostSnapshot { devices, groups, dropped, notes }
//! IocostSnapshot::group(device, cgroup_path) -> Option<&IocGroup>; iocost::render::{table, prometheus, serve}
//! ```

pub mod endpoint;
mod error;
pub mod heatmap;
mod histogram;
pub mod iocost;
mod loader;
mod names;
pub mod prometheus;
mod snapshot;
pub mod table;

#[allow(clippy::all, missing_docs, unsafe_op_in_unsafe_fn)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/observe.skel.rs"));
}

#[allow(clippy::all, missing_docs, unsafe_op_in_unsafe_fn)]
mod iocost_skel {
    include!(concat!(env!("OUT_DIR"), "/iocost.skel.rs"));
}

pub use error::{Error, Result};
pub use histogram::{Histogram, Kind};
pub use loader::{can_trace, skip_unless_traceable, AttachMode, Observer, Stages, DETAIL_ENV, LATENCY_EVERY};
pub use names::{device_name, disk_of, resolve_device, CgroupNames};
pub use snapshot::{Cost, Counters, Entry, Latency, Op, ProgramCost, Snapshot, Stage, StageStats};
