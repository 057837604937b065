//! The cgroup v1 `blkio` read/write statistics format (`blkio.throttle.io_serviced`,
//! `blkio.throttle.io_service_bytes`, and their `blkio.bfq.*` twins, which BFQ keeps for the IO it
//! dispatched):
//!
//! ```text
//! 7:0 Read 48
//! 7:0 Write 300
//! 7:0 Sync 348
//! 7:0 Async 0
//! 7:0 Discard 0
//! 7:0 Total 348
//! Total 348
//! ```
//!
//! Read, Write and Discard are kept per device; Sync/Async/Total are sums of those and the final
//! `Total` line is the sum over devices, so they are checked for form and otherwise dropped.

use ioshare_core::iocost::line::DevNum;

use crate::error::{parse_error, Result};

/// Per-direction counters of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RwCounts {
    /// Reads.
    pub read: u64,
    /// Writes.
    pub write: u64,
    /// Discards.
    pub discard: u64,
}

/// Which pair of statistics files to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsSource {
    /// `blkio.throttle.io_serviced` / `io_service_bytes`: counted by blk-throttle.
    Throttle,
    /// `blkio.bfq.io_serviced` / `io_service_bytes`: counted by BFQ on devices that use it.
    Bfq,
}

impl StatsSource {
    /// The (IOs, bytes) file names.
    pub(crate) fn files(self) -> (&'static str, &'static str) {
        match self {
            StatsSource::Throttle => ("blkio.throttle.io_serviced", "blkio.throttle.io_service_bytes"),
            StatsSource::Bfq => ("blkio.bfq.io_serviced", "blkio.bfq.io_service_bytes"),
        }
    }
}

/// What a cgroup did on one device since it was created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceStats {
    /// The device.
    pub dev: DevNum,
    /// IOs (from `*.io_serviced`).
    pub ios: RwCounts,
    /// Bytes (from `*.io_service_bytes`).
    pub bytes: RwCounts,
}

/// A cgroup's IO statistics (v1 blk-throttle's or BFQ's, or v2 `io.stat` as [`crate::parse_io_stat`]
/// reads it), one entry per device it did IO on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlkioStats {
    /// Per device, in the kernel's order.
    pub devices: Vec<DeviceStats>,
}

impl BlkioStats {
    /// The statistics of `dev`, if the cgroup did IO on it.
    pub fn device(&self, dev: DevNum) -> Option<&DeviceStats> {
        self.devices.iter().find(|d| d.dev == dev)
    }

    /// Combines the texts of the `io_serviced` and `io_service_bytes` files of `source`.
    pub fn from_files(source: StatsSource, serviced: &str, service_bytes: &str) -> Result<Self> {
        let (ios_file, bytes_file) = source.files();
        let mut stats = BlkioStats::default();
        for (dev, ios) in parse_rwstat(ios_file, serviced)? {
            stats.entry(dev).ios = ios;
        }
        for (dev, bytes) in parse_rwstat(bytes_file, service_bytes)? {
            stats.entry(dev).bytes = bytes;
        }
        Ok(stats)
    }

    /// The entry of `dev`, added with zero counts if missing.
    fn entry(&mut self, dev: DevNum) -> &mut DeviceStats {
        let i = match self.devices.iter().position(|d| d.dev == dev) {
            Some(i) => i,
            None => {
                self.devices.push(DeviceStats { dev, ios: RwCounts::default(), bytes: RwCounts::default() });
                self.devices.len() - 1
            }
        };
        &mut self.devices[i]
    }
}

/// Reads blk-throttle's statistics of the v1 cgroup directory `dir`, with its descendants' IO when
/// `recursive` (`blkio.throttle.io_serviced_recursive` / `io_service_bytes_recursive`).
pub fn read_throttle_stats(dir: &std::path::Path, recursive: bool) -> Result<BlkioStats> {
    let (ios, bytes) = StatsSource::Throttle.files();
    let suffix = if recursive { "_recursive" } else { "" };
    let serviced = crate::sysfs::read(&dir.join(format!("{ios}{suffix}")))?;
    let service_bytes = crate::sysfs::read(&dir.join(format!("{bytes}{suffix}")))?;
    BlkioStats::from_files(StatsSource::Throttle, &serviced, &service_bytes)
}

/// Parses one rwstat file (`format` names it in errors) into per-device counters.
pub fn parse_rwstat(format: &'static str, text: &str) -> Result<Vec<(DevNum, RwCounts)>> {
    let mut out: Vec<(DevNum, RwCounts)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let count = |word: &str| {
            word.parse::<u64>().map_err(|_| parse_error(format, line, "expected a non-negative integer count"))
        };
        match words[..] {
            ["Total", total] => {
                count(total)?;
            }
            [dev, op, value] => {
                let dev: DevNum = dev.parse().map_err(|()| parse_error(format, line, "expected MAJ:MIN first"))?;
                let value = count(value)?;
                let i = match out.iter().position(|(d, _)| *d == dev) {
                    Some(i) => i,
                    None => {
                        out.push((dev, RwCounts::default()));
                        out.len() - 1
                    }
                };
                let counts = &mut out[i].1;
                match op {
                    "Read" => counts.read = value,
                    "Write" => counts.write = value,
                    "Discard" => counts.discard = value,
                    "Sync" | "Async" | "Total" => {}
                    _ => return Err(parse_error(format, line, "expected Read, Write, Sync, Async, Discard or Total")),
                }
            }
            _ => return Err(parse_error(format, line, "expected 'MAJ:MIN OP COUNT' or 'Total COUNT'")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: DevNum = DevNum { major: 7, minor: 0 };

    /// The files as the kernel printed them after 48 reads and 300 writes (research note B4).
    const SERVICED: &str =
        "7:0 Read 48\n7:0 Write 300\n7:0 Sync 348\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 348\nTotal 348\n";
    const BYTES: &str =
        "7:0 Read 3145728\n7:0 Write 1228800\n7:0 Sync 4374528\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 4374528\nTotal 4374528\n";

    #[test]
    fn parses_counts_per_device() {
        let stats = BlkioStats::from_files(StatsSource::Throttle, SERVICED, BYTES).unwrap();
        assert_eq!(
            stats.device(DEV),
            Some(&DeviceStats {
                dev: DEV,
                ios: RwCounts { read: 48, write: 300, discard: 0 },
                bytes: RwCounts { read: 3_145_728, write: 1_228_800, discard: 0 },
            })
        );
        assert_eq!(stats.device(DevNum { major: 8, minor: 0 }), None);
    }

    #[test]
    fn empty_cgroup_has_no_devices() {
        assert_eq!(BlkioStats::from_files(StatsSource::Bfq, "Total 0\n", "Total 0\n").unwrap(), BlkioStats::default());
    }

    #[test]
    fn several_devices_keep_their_order() {
        let text = "8:0 Read 1\n8:0 Write 2\n7:3 Read 5\n7:3 Write 6\nTotal 14\n";
        let parsed = parse_rwstat("blkio.throttle.io_serviced", text).unwrap();
        let devs: Vec<String> = parsed.iter().map(|(d, _)| d.to_string()).collect();
        assert_eq!(devs, ["8:0", "7:3"]);
        assert_eq!(parsed[1].1, RwCounts { read: 5, write: 6, discard: 0 });
    }

    #[test]
    fn malformed_lines_are_rejected_with_the_line() {
        for bad in ["7:0 Read x", "seven Read 1", "7:0 Peek 1", "7:0 Read", "Total -1"] {
            let err = parse_rwstat("blkio.throttle.io_serviced", bad).unwrap_err().to_string();
            assert!(err.starts_with(&format!("invalid blkio.throttle.io_serviced '{bad}'")), "{err}");
        }
    }
}
