//! ioshare-host: the kernel-side plumbing. Loop devices, cgroup v1 `blkio` (blk-throttle limits, BFQ
//! weights), cgroup v2 cgroups and the kernel's IOCost (where v2 has `io`: the QEMU lab guest), the
//! cgroup v2 `io.max`/`io.weight`/`io.stat` formats, block device counters, and a probe of what this
//! host offers, so `ioshare bench` can run each tenant under the kernel's own controllers as peers of
//! ioshare's, and the agent can find, read and (through one recording writer) set cgroups.
//!
//! # API
//! ```text
//! LoopDevice::attach(file: &Path, direct_io: bool) -> Result<LoopDevice>   // losetup --find --show [--direct-io=on]
//!     deref -> &BlockDevice              // .path() /dev/loopN, .dev() 7:N, .scheduler(),
//!                                       // .set_scheduler(name): this loop device only
//!     drop                              // scheduler restored, device detached (the kernel also
//!                                       // detaches it if the process dies: autoclear)
//! BlkioCgroup::create(name) -> Result<BlkioCgroup>   // e.g. "ioshare-bench-<pid>/tenant-a", below our
//!                                                    // own blkio cgroup; refused if it exists
//!     .path() -> &Path
//!     .set_bfq_weight(1..=1000) -> Result<()>        // blkio.bfq.weight; Error::BfqWeightMissing if BFQ
//!                                                    // is not loaded; acts on devices using bfq
//!     .set_throttle(dev, ThrottleKnob, value) -> Result<()>   // blkio.throttle.*_device, 0 = no limit
//!     .add_pid(pid) -> Result<()>                    // cgroup.procs
//!     .spawn(Command) -> Result<Child>               // child joins before exec: all its IO counts
//!     .stats() -> Result<BlkioStats>                 // blkio.throttle.io_serviced/io_service_bytes
//!     .bfq_stats() -> Result<BlkioStats>             // blkio.bfq.io_serviced/io_service_bytes
//!     .remove() -> Result<()>                        // what drop does, with the error returned
//!     drop                                           // tasks moved back, cgroup (and empty parents
//!                                                    // of its name) removed
//! remove_stale_cgroups(prefix) -> Result<Vec<PathBuf>>  // "<prefix><pid>" cgroups of dead processes
//!                                                    // (a SIGKILLed bench), at the next start
//! BlockDevice::open(path) -> Result<BlockDevice>     // an existing whole disk: .path(), .dev(),
//!                                                    // .scheduler(), .set_scheduler(name) restored
//!                                                    // on drop
//! Cgroup2::create(name, controllers) -> Result<Cgroup2> // cgroup v2, below our own v2 cgroup, with
//!                                                    // e.g. ["io"] enabled on the way down
//!     .path() / .write(file, value) / .read(file)    // any interface file: io.weight, io.max, ...
//!     .add_pid(pid) / .spawn(Command)                // as for BlkioCgroup
//!     .io_stats() -> Result<BlkioStats>              // io.stat
//!     .remove() / drop                               // as for BlkioCgroup
//! remove_stale_cgroups2(prefix)                      // remove_stale_cgroups for v2
//! KernelIoCost::enable(dev, model, qos) -> Result<KernelIoCost>  // root io.cost.model/qos for one
//!                                                    // device; the old lines written back on drop
//! ThrottleKnob::{ReadBps, WriteBps, ReadIops, WriteIops}
//! BlkioStats { devices: Vec<DeviceStats { dev, ios: RwCounts, bytes: RwCounts }> }, .device(dev)
//! Capabilities::probe() -> Capabilities, .kernel_peers() -> Vec<KernelPeer>, .layout() -> CgroupLayout
//!     (v1 / v2 / hybrid), .v1_mounts (every v1 controller's mount point), Display, Serialize
//! read_throttle_stats(dir, recursive) -> BlkioStats   // a v1 cgroup's blk-throttle counters
//! parse_io_stat(text) -> BlkioStats                  // a v2 io.stat file, same counters
//! DiskStats::read(sys_block, name), .since(&earlier)  // /sys/block/X/stat: IOs, sectors, latency sums
//! BlockDevice::resolve("/dev/loop3" | "7:3")          // whole device: number and /sys/block name
//! find_cgroups(root, "tenants/*") -> Vec<String>; check_pattern(p)   // cgroups by glob
//! pattern_matches(pattern, rel); pattern_covers(wide, narrow)   // a path by glob; glob within glob
//! patterns_overlap(a, b) -> Option<String>           // a path both match (shortest), if any
//! BlockQueue::read(sys_block, name, dev, v2_root)      // scheduler, blk-mq or not, iocost on or off
//! WeightFile::{IoCost, BfqV2, BfqV1}.read(dir, dev)  // the weight a cgroup has under each mechanism
//! child_cgroups(dir); populated(dir); subtree_control(dir)   // a cgroup as the share diagnosis reads it
//! Recorder::open(state_dir, roots) -> (Recorder, Option<Reverted>)  // the one recording writer:
//!     .set(path, Entry, line) -> Written             // previous line stored (synced) before the write
//!     .touch(path, Entry)  .revert() -> Reverted     // a killed writer's state reverted at open
//!     .revert_where(|c| ..) -> Reverted              // part of it (a device gone), forgotten after
//!     .forget_vanished() -> usize                    // entries of removed cgroups dropped
//!                                                    // state file: checksummed lines, atomic rewrites
//! revert_state_dir(dir, roots) -> Option<Reverted>   // `ioshare agent revert`; .unreadable names
//!                                                    // the lines of a damaged state file
//! memcg::v1::Memcg (v1 memory: usage, limit, oom_control, eventfds), memcg::v2::Memcg (v2 memory:
//!     current, max, high, events, pressure + PSI triggers, oom.group, reclaim), memcg::v2::PollFile
//!     (POLLPRI on a kernfs/PSI file)
//! memcg::AnyMemCgroup::create(v2, name)              // a memory cgroup of either hierarchy, removed
//!                                                    // on drop: .path() .usage() .set_limit() .spawn()
//! IoMax (io.max line: FromStr/Display, parse_file/format_file), IoWeight (io.weight file: FromStr/Display)
//! is_root() -> bool
//! replace_file(path, contents)                       // written beside it, renamed over it
//! glob_matches(pattern, name)                         // one component by glob (* and ?)
//! formats::{parse_rwstat, find_mount, read_state_file, ...}   // the parsers, for the fuzz targets
//! AttrSwitch::set(state_dir, file, value) -> Result<AttrSwitch>   // a sysfs attribute (queue/nomerges)
//!     .previous() .file() .restore() -> Restored;  drop restores // set for a while, recorded first
//! repair_attrs(state_dir) -> Vec<Repaired>           // restores what a killed writer left switched
//! ProcessStat::read(pid) -> Option<ProcessStat { state, start_ticks, user/system ticks }>   // /proc/PID/stat: exited,
//!                                                    // stopped, and a reused pid told apart
//! ```
//! Errors are [`Error`]: one line each, naming what is wrong and how to fix it.
//!
//! What this development host allows: cgroup v1 `blkio` with
//! blk-throttle and BFQ; no cgroup v2 `io` controller, so `io.max`/`io.weight` are formats only here
//! (the agent's kernel backend writes them, tested against a directory tree).
//! cgroup v1 cannot attribute buffered writes to a file system (writeback runs in kernel threads): use
//! direct IO on the loop device for kernel-peer runs.

mod attr_switch;
mod blkio;
mod blkio_stats;
mod block_device;
mod block_queue;
mod capabilities;
mod cgroup2;
mod cgroup_dir;
mod cgroup_glob;
mod cgroup_io;
mod cgroup_mounts;
mod disk_stats;
mod error;
mod io_max;
mod io_stat;
mod io_weight;
mod journal;
mod loop_device;
mod loop_sys;
pub mod memcg;
mod privilege;
mod process;
mod recorder;
mod replace_file;
mod scheduler;
mod sysfs;

/// The text formats the crate reads from kernel and state files, by the functions that parse them:
/// public so that the fuzz targets (`tests/fuzz.rs`) reach them; the rest of the API reads the files.
pub mod formats {
    pub use crate::blkio_stats::{parse_rwstat, StatsSource};
    pub use crate::cgroup_mounts::{cgroup_dir, find_mount, own_cgroup, v1_mounts, CgroupMount, MountedHierarchy};
    pub use crate::journal::{encode as encode_state_line, read as read_state_file, Contents, Header};
    pub use crate::memcg::v1::stat_value;
    pub use crate::scheduler::parse_scheduler;
}

pub use attr_switch::{repair as repair_attrs, AttrSwitch, Repaired, Restored};
pub use blkio::{remove_stale_cgroups, BlkioCgroup, ThrottleKnob, BFQ_WEIGHT_MAX, BFQ_WEIGHT_MIN};
pub use blkio_stats::{read_throttle_stats, BlkioStats, DeviceStats, RwCounts};
pub use block_device::BlockDevice;
pub use block_queue::BlockQueue;
pub use capabilities::{Capabilities, CgroupLayout, KernelPeer};
pub use cgroup2::{remove_stale_cgroups2, Cgroup2, KernelIoCost};
pub use cgroup_glob::{
    check_pattern, find_cgroups, matches as glob_matches, pattern_covers, pattern_matches, patterns_overlap,
};
pub use cgroup_io::{child_cgroups, populated, subtree_control, WeightFile};
pub use disk_stats::{DiskId, DiskStats};
pub use error::{Error, Result};
pub use io_max::IoMax;
pub use io_stat::parse_io_stat;
pub use io_weight::{IoWeight, IO_WEIGHT_DEFAULT, IO_WEIGHT_MAX, IO_WEIGHT_MIN};
pub use ioshare_core::iocost::line::DevNum;
pub use journal::{Change, STATE_FILE};
pub use loop_device::LoopDevice;
pub use privilege::is_root;
pub use process::ProcessStat;
pub use recorder::{check_under, revert_state_dir, Entry, Recorder, Reverted, Written, REWRITE_SLACK};
pub use replace_file::replace_file;
