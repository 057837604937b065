//! A block device's own counters (`/sys/block/NAME/stat`, the per-device line of
//! `/proc/diskstats`), and finding a device by path or `MAJ:MIN`.
//!
//! The file has 11 to 17 numbers: reads completed, reads merged (IOs the block layer joined to a
//! request already queued), sectors read, ms spent reading,
//! the same four for writes, IOs in flight, ms the device was busy (io_ticks), weighted ms in queue,
//! then discard and flush counters (newer kernels). The ms totals are summed per IO in ns by the
//! kernel and printed in ms, so their deltas over a period give the mean latency of the period's IOs.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use ioshare_core::iocost::line::DevNum;

use crate::error::{parse_error, Error, Result};
use crate::sysfs;

/// The counters of one device at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Completed IOs, [read, write].
    pub ios: [u64; 2],
    /// IOs merged into requests already queued, [read, write] (each merged IO is one fewer
    /// completed request: `ios` counts requests).
    pub merges: [u64; 2],
    /// 512-byte sectors transferred, [read, write].
    pub sectors: [u64; 2],
    /// Sum of the completed IOs' latencies in ms, [read, write].
    pub ticks_ms: [u64; 2],
    /// IOs in flight now.
    pub in_flight: u64,
    /// ms during which at least one IO was in flight.
    pub io_ticks_ms: u64,
    /// Sum over time of the number of IOs in flight, in ms.
    pub time_in_queue_ms: u64,
}

impl DiskStats {
    /// Parses the text of a `stat` file.
    pub fn parse(text: &str) -> Result<Self> {
        let n: Vec<u64> = text
            .split_whitespace()
            .map(|w| w.parse().map_err(|_| parse_error("block stat", text.trim(), "expected numbers only")))
            .collect::<Result<_>>()?;
        if n.len() < 11 {
            return Err(parse_error("block stat", text.trim(), "expected at least 11 numbers"));
        }
        Ok(DiskStats {
            ios: [n[0], n[4]],
            merges: [n[1], n[5]],
            sectors: [n[2], n[6]],
            ticks_ms: [n[3], n[7]],
            in_flight: n[8],
            io_ticks_ms: n[9],
            time_in_queue_ms: n[10],
        })
    }

    /// Reads the counters of the block device `name` (`loop0`, `sda`) under `sys_block`.
    pub fn read(sys_block: &Path, name: &str) -> Result<Self> {
        Self::parse(&sysfs::read(&sys_block.join(name).join("stat"))?)
    }

    /// Counters accumulated since `earlier` (wrapping like the kernel's unsigned longs).
    pub fn since(&self, earlier: &DiskStats) -> DiskStats {
        let d = |a: u64, b: u64| a.wrapping_sub(b);
        DiskStats {
            ios: [d(self.ios[0], earlier.ios[0]), d(self.ios[1], earlier.ios[1])],
            merges: [d(self.merges[0], earlier.merges[0]), d(self.merges[1], earlier.merges[1])],
            sectors: [d(self.sectors[0], earlier.sectors[0]), d(self.sectors[1], earlier.sectors[1])],
            ticks_ms: [d(self.ticks_ms[0], earlier.ticks_ms[0]), d(self.ticks_ms[1], earlier.ticks_ms[1])],
            in_flight: self.in_flight,
            io_ticks_ms: d(self.io_ticks_ms, earlier.io_ticks_ms),
            time_in_queue_ms: d(self.time_in_queue_ms, earlier.time_in_queue_ms),
        }
    }
}

/// A whole block device: its number and its name under `/sys/block`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskId {
    /// `MAJ:MIN`.
    pub dev: DevNum,
    /// The name under `/sys/block` (`loop0`, `nvme0n1`).
    pub name: String,
}

impl DiskId {
    /// Resolves `spec`, a device path (`/dev/loop3`) or a `MAJ:MIN`, to a whole block device (not a
    /// partition: IO control acts on whole devices).
    pub fn resolve(spec: &str) -> Result<Self> {
        let bad = |reason: String| Error::BlockDevice { name: spec.to_string(), reason };
        let dev = match spec.parse::<DevNum>() {
            Ok(dev) => dev,
            Err(()) => {
                let meta = std::fs::metadata(spec).map_err(|e| bad(format!("cannot stat it: {e}")))?;
                if !meta.file_type().is_block_device() {
                    return Err(bad("not a block device (give /dev/NAME or MAJ:MIN)".into()));
                }
                DevNum { major: libc::major(meta.rdev()), minor: libc::minor(meta.rdev()) }
            }
        };
        let link = PathBuf::from(format!("/sys/dev/block/{dev}"));
        let target = std::fs::canonicalize(&link).map_err(|_| bad(format!("no block device {dev} on this host")))?;
        if target.join("partition").exists() {
            return Err(bad("is a partition: IO control applies to whole devices (give the disk)".into()));
        }
        let name = target.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        Ok(DiskId { dev, name })
    }

    /// What tells this disk apart from another that later gets the same name and number: its name,
    /// number, size in sectors, and the first of the WWID, serial, or (a loop device) backing file
    /// that sysfs has — the key of what is measured once per disk and cached.
    pub fn identity(&self) -> String {
        let sys = Path::new("/sys/block").join(&self.name);
        let read = |rel: &str| std::fs::read_to_string(sys.join(rel)).ok().map(|s| s.trim().to_string());
        let size = read("size").unwrap_or_default();
        let which = ["device/wwid", "wwid", "device/serial", "serial", "loop/backing_file"]
            .into_iter()
            .find_map(|rel| read(rel).filter(|v| !v.is_empty()).map(|v| format!("{rel}={v}")))
            .unwrap_or_default();
        format!("{} {} size={size} {which}", self.name, self.dev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_subtracts() {
        let a = DiskStats::parse("   82104       14   656944   230815        0        0        0        0        0     2036   230815        0        0        0        0        0        0\n").unwrap();
        assert_eq!((a.ios, a.sectors, a.ticks_ms, a.io_ticks_ms), ([82104, 0], [656944, 0], [230815, 0], 2036));
        assert_eq!(a.merges, [14, 0]);
        let b = DiskStats { ios: [82204, 10], merges: [20, 3], ticks_ms: [230915, 5], ..a };
        let d = b.since(&a);
        assert_eq!((d.ios, d.merges, d.ticks_ms), ([100, 10], [6, 3], [100, 5]));
        assert!(DiskStats::parse("1 2 3").is_err());
        assert!(DiskStats::parse("1 2 x 4 5 6 7 8 9 10 11").is_err());
    }

    #[test]
    fn bad_device_specs_are_named() {
        let err = DiskId::resolve("/etc/hostname").unwrap_err().to_string();
        assert!(err.contains("not a block device"), "{err}");
        let err = DiskId::resolve("4095:1048575").unwrap_err().to_string();
        assert!(err.contains("no block device"), "{err}");
    }
}
