//! What can weigh cgroups against each other on a block device: kernel iocost (cgroup v2, switched on
//! per device by the v2 root's `io.cost.qos`) or the BFQ scheduler — and whether the device has a
//! blk-mq request queue at all (`/sys/block/X/mq`): iocost and IO schedulers need one, so on a
//! bio-based device (device-mapper, md) neither can be had and weights do nothing.
//!
//! Read-only and infallible: what cannot be read counts as absent.

use std::path::Path;

use ioshare_core::iocost::line::DevNum;
use serde::Serialize;

use crate::scheduler::parse_scheduler;

/// How a block device queues IO, as far as proportional weights are concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BlockQueue {
    /// The IO scheduler in use (`none`, `mq-deadline`, `bfq`, ...); `None` when the device offers no
    /// choice (a bio-based device).
    pub scheduler: Option<String>,
    /// The device has a blk-mq request queue.
    pub blk_mq: bool,
    /// Kernel iocost is on for it: `enable=1` on its line of the v2 root's `io.cost.qos`.
    pub iocost: bool,
}

impl BlockQueue {
    /// Reads device `name` (number `dev`) under `sys_block` (`/sys/block`); `v2_root` is where
    /// `io.cost.qos` is looked for (none: no cgroup v2, so no iocost).
    pub fn read(sys_block: &Path, name: &str, dev: DevNum, v2_root: Option<&Path>) -> BlockQueue {
        let dir = sys_block.join(name);
        let scheduler = std::fs::read_to_string(dir.join("queue/scheduler"))
            .ok()
            .and_then(|text| parse_scheduler(&text).0.map(str::to_string));
        let iocost = v2_root
            .and_then(|root| std::fs::read_to_string(root.join("io.cost.qos")).ok())
            .is_some_and(|text| iocost_enabled(&text, dev));
        BlockQueue { scheduler, blk_mq: dir.join("mq").is_dir(), iocost }
    }

    /// Whether BFQ schedules the device.
    pub fn bfq(&self) -> bool {
        self.scheduler.as_deref() == Some("bfq")
    }
}

/// Whether `dev`'s line in the text of an `io.cost.qos` file has `enable=1`.
fn iocost_enabled(qos: &str, dev: DevNum) -> bool {
    let dev = dev.to_string();
    qos.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|words| words.first() == Some(&dev.as_str()))
        .is_some_and(|words| words.contains(&"enable=1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: DevNum = DevNum { major: 259, minor: 0 };

    #[test]
    fn iocost_is_on_only_where_the_devices_line_says_enable_1() {
        let qos = "8:0 enable=1 ctrl=auto rpct=0.00\n259:0 enable=0 ctrl=auto rpct=0.00 rlat=250000\n";
        assert!(!iocost_enabled(qos, DEV));
        assert!(iocost_enabled(&qos.replace("259:0 enable=0", "259:0 enable=1"), DEV));
        assert!(!iocost_enabled("", DEV), "no line: never configured, so off");
        assert!(!iocost_enabled("259:01 enable=1\n", DEV), "another device");
    }

    #[test]
    fn reads_scheduler_queue_kind_and_iocost_from_a_laid_out_tree() {
        let sys = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("nvme0n1/queue")).unwrap();
        std::fs::create_dir_all(sys.path().join("nvme0n1/mq")).unwrap();
        std::fs::write(sys.path().join("nvme0n1/queue/scheduler"), "none mq-deadline [bfq]\n").unwrap();
        std::fs::create_dir_all(sys.path().join("dm-0/queue")).unwrap();
        std::fs::write(sys.path().join("dm-0/queue/scheduler"), "none\n").unwrap();
        std::fs::write(root.path().join("io.cost.qos"), "259:0 enable=1 ctrl=user\n").unwrap();
        let q = BlockQueue::read(sys.path(), "nvme0n1", DEV, Some(root.path()));
        assert_eq!(q, BlockQueue { scheduler: Some("bfq".into()), blk_mq: true, iocost: true });
        assert!(q.bfq());
        let dm = BlockQueue::read(sys.path(), "dm-0", DevNum { major: 253, minor: 0 }, Some(root.path()));
        assert_eq!(dm, BlockQueue { scheduler: None, blk_mq: false, iocost: false });
        assert!(!BlockQueue::read(sys.path(), "nvme0n1", DEV, None).iocost, "no v2 root: no iocost");
    }
}
