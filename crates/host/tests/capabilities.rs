//! What the kernel peers, the cgroup layout and the report follow from a host's capabilities, on hosts
//! written out (`ioshare_testkit::v1_host`). The probe of this host itself is tested beside it
//! (`src/capabilities.rs`).

use ioshare_host::{Capabilities, CgroupLayout, KernelPeer};
use ioshare_testkit::v1_host;

#[test]
fn peers_follow_what_the_host_has() {
    assert_eq!(v1_host().kernel_peers(), [KernelPeer::BfqV1, KernelPeer::ThrottleV1]);
    assert!(Capabilities { root: false, ..v1_host() }.kernel_peers().is_empty(), "nothing without root");
    assert_eq!(v1_host().layout(), CgroupLayout::Hybrid);
    let v2 = Capabilities {
        blkio_v1: None,
        v1_mounts: Vec::new(),
        v2_controllers: vec!["io".into(), "memory".into()],
        io_cost: true,
        ..v1_host()
    };
    assert_eq!(v2.kernel_peers(), [KernelPeer::IoMaxV2, KernelPeer::IoWeightV2, KernelPeer::IoCostV2]);
    assert!(v2.writeback_attributed() && !v1_host().writeback_attributed());
    assert_eq!(v2.layout(), CgroupLayout::V2);
}

#[test]
fn display_names_every_fact() {
    let text = v1_host().to_string();
    assert!(text.contains("cgroup v1 blkio:      /sys/fs/cgroup/blkio (blk-throttle: yes, BFQ: yes)"), "{text}");
    assert!(text.contains("cgroup v2 io:         absent"), "{text}");
    assert!(text.contains("kernel iocost:        absent"), "{text}");
    assert!(text.contains("buffered writes:      not charged to cgroups"), "{text}");
    assert!(
        text.ends_with(
            "kernel peers:         bfq (cgroup v1 blkio.bfq.weight), blk-throttle (cgroup v1 blkio.throttle.*)"
        ),
        "{text}"
    );
}
