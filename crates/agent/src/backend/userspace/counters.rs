//! Reading the tracked cgroups' IO counters for the userspace backend, and skipping the reads that
//! cannot find anything.
//!
//! Each period the backend wants every tracked cgroup's IO on its device since the last period
//! (v1 `blkio.throttle.io_serviced_recursive` and `io_service_bytes_recursive`, v2 `io.stat`): two
//! files per cgroup on v1, which with 1 000 pods is 20 000 file reads a second — most of the agent's
//! CPU on a node where nothing happens. A cgroup's counters on a device can only move when that
//! device has IO: so in a period in which the device's own counters (`/sys/block/X/stat`, read each
//! period anyway) show no IO completed and none in flight at either end ([`DeviceQuiet`]), no
//! cgroup's counters are read at all, and each keeps its last reading. Nothing is lost by this:
//! the counters are cumulative, so an IO that a skipped read could have seen (one counted by the
//! cgroup but not yet started at the device when the device's stat was read, a window of
//! microseconds) is charged at the next read, at the latest the next period with IO on the device.
//! A cgroup found at start is always read at its first period (its baseline).
//!
//! A read that fails says the cgroup is gone (the discovery drops it too, see
//! [`crate::daemon::tree_watch`]).

use ioshare_host::{DevNum, DiskStats, RwCounts};

use crate::cgroups::hierarchy::Hierarchy;

/// Whether a device had no IO over a period: none completed, none in flight at its start or end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceQuiet(pub bool);

impl DeviceQuiet {
    /// From the device's stat at the start of the period (`last`) and its change since (`delta`,
    /// `None` when either read failed: then the device counts as busy and every cgroup is read).
    pub fn judge(last: Option<&DiskStats>, delta: Option<&DiskStats>) -> DeviceQuiet {
        DeviceQuiet(match (last, delta) {
            (Some(last), Some(d)) => last.in_flight == 0 && d.in_flight == 0 && d.ios == [0, 0] && d.merges == [0, 0],
            _ => false,
        })
    }
}

/// What one period's read of a cgroup's counters found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The cgroup is gone.
    Gone,
    /// Not read (its device was quiet): no IO since the last read.
    Skipped,
    /// The first reading: the baseline, no usage yet.
    First,
    /// IOs and bytes since the last reading, [read, write] as counted by the kernel.
    Since {
        /// IOs since the last reading.
        ios: RwCounts,
        /// Bytes since the last reading.
        bytes: RwCounts,
    },
}

/// One cgroup's counters on one device, as last read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    last: Option<(RwCounts, RwCounts)>,
}

impl Counters {
    /// Counters of a cgroup created since the agent started (`fresh`: all its IO is charged, from
    /// zero) or found at start (its first reading is its baseline).
    pub fn new(fresh: bool) -> Counters {
        Counters { last: fresh.then(Default::default) }
    }

    /// This period's reading of cgroup `rel` on `dev` (see the module comment).
    pub fn read(&mut self, h: &Hierarchy, rel: &str, dev: DevNum, quiet: DeviceQuiet) -> Reading {
        if quiet.0 && self.last.is_some() {
            return Reading::Skipped;
        }
        let Some(stats) = h.usage(rel) else { return Reading::Gone };
        let now = stats.device(dev).map_or_else(Default::default, |d| (d.ios, d.bytes));
        let Some((ios, bytes)) = self.last.replace(now) else { return Reading::First };
        let since = |now: RwCounts, last: RwCounts| RwCounts {
            read: now.read.saturating_sub(last.read),
            write: now.write.saturating_sub(last.write),
            discard: now.discard.saturating_sub(last.discard),
        };
        Reading::Since { ios: since(now.0, ios), bytes: since(now.1, bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::hierarchy::Flavor;

    fn stat(ios: u64, in_flight: u64) -> DiskStats {
        DiskStats { ios: [ios, 0], in_flight, ..Default::default() }
    }

    /// Quiet only with nothing completed and nothing in flight at either end.
    #[test]
    fn a_device_is_quiet_only_without_any_io() {
        let judge = |last: DiskStats, now: DiskStats| DeviceQuiet::judge(Some(&last), Some(&now.since(&last))).0;
        assert!(judge(stat(5, 0), stat(5, 0)));
        assert!(!judge(stat(5, 0), stat(6, 0)), "one completed");
        assert!(!judge(stat(5, 1), stat(5, 0)), "in flight at the start");
        assert!(!judge(stat(5, 0), stat(5, 1)), "in flight at the end");
        assert!(!DeviceQuiet::judge(None, None).0, "unknown: busy");
    }

    /// A v2 tree laid out in a directory: a quiet device skips the read, a busy one reads what
    /// changed since; a cgroup found at start reads its baseline first even on a quiet device; a
    /// removed cgroup is gone.
    #[test]
    fn reads_are_skipped_on_a_quiet_device_and_nothing_is_lost() {
        let root = tempfile::tempdir().unwrap();
        let h = Hierarchy { flavor: Flavor::V2, root: root.path().to_path_buf() };
        let dev = DevNum { major: 7, minor: 3 };
        let dir = root.path().join("a");
        std::fs::create_dir(&dir).unwrap();
        let write = |r: u64| {
            let line = format!("7:3 rbytes={} wbytes=0 rios={r} wios=0 dbytes=0 dios=0\n", r * 4096);
            std::fs::write(dir.join("io.stat"), line).unwrap()
        };
        let (quiet, busy) = (DeviceQuiet(true), DeviceQuiet(false));
        write(10);
        let mut found = Counters::new(false);
        assert_eq!(found.read(&h, "a", dev, quiet), Reading::First, "the baseline, quiet or not");
        write(15);
        assert_eq!(found.read(&h, "a", dev, quiet), Reading::Skipped);
        let r = found.read(&h, "a", dev, busy);
        let five = RwCounts { read: 5, write: 0, discard: 0 };
        assert_eq!(r, Reading::Since { ios: five, bytes: RwCounts { read: 5 * 4096, ..Default::default() } });
        let mut fresh = Counters::new(true);
        assert!(matches!(fresh.read(&h, "a", dev, busy), Reading::Since { ios, .. } if ios.read == 15));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.read(&h, "a", dev, busy), Reading::Gone);
    }
}
