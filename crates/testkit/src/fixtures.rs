//! Hosts written out: [`ioshare_host::Capabilities`] as a probe would find them, for tests of what
//! the benchmark and the agent decide from them. A test changes the fields it is about with struct
//! update syntax (`Capabilities { root: false, ..v1_host() }`).

use ioshare_host::Capabilities;

/// A hybrid host as root, like the development machine: cgroup v1 `blkio` with blk-throttle and BFQ,
/// v1 `memory`, loop devices, and a v2 tree without the `io` controller (so no kernel iocost).
pub fn v1_host() -> Capabilities {
    Capabilities {
        root: true,
        loop_devices: true,
        blkio_v1: Some("/sys/fs/cgroup/blkio".into()),
        blk_throttle_v1: true,
        bfq: true,
        cgroup_v2: Some("/sys/fs/cgroup/unified".into()),
        v2_controllers: vec!["hugetlb".into()],
        io_cost: false,
        v1_mounts: vec![
            ("blkio".into(), "/sys/fs/cgroup/blkio".into()),
            ("memory".into(), "/sys/fs/cgroup/memory".into()),
        ],
    }
}
