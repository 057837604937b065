//! The cgroup v2 `io.stat` format (what a cgroup did per device, its descendants included):
//!
//! ```text
//! 8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0
//! ```
//!
//! Keys other than the six counters (iocost's `cost.usage` etc.) are accepted and ignored.

use ioshare_core::iocost::line::DevNum;

use crate::blkio_stats::{BlkioStats, DeviceStats, RwCounts};
use crate::error::{parse_error, Result};

/// Parses an `io.stat` file into the same per-device counters as the v1 statistics.
pub fn parse_io_stat(text: &str) -> Result<BlkioStats> {
    let mut stats = BlkioStats::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut words = line.split_whitespace();
        let dev: DevNum = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| parse_error("io.stat", line, "expected MAJ:MIN first"))?;
        let mut d = DeviceStats { dev, ios: RwCounts::default(), bytes: RwCounts::default() };
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                return Err(parse_error("io.stat", word, "expected key=value"));
            };
            let slot = match key {
                "rbytes" => &mut d.bytes.read,
                "wbytes" => &mut d.bytes.write,
                "dbytes" => &mut d.bytes.discard,
                "rios" => &mut d.ios.read,
                "wios" => &mut d.ios.write,
                "dios" => &mut d.ios.discard,
                _ => continue,
            };
            *slot = value.parse().map_err(|_| parse_error("io.stat", word, "expected a non-negative integer"))?;
        }
        stats.devices.push(d);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counters_and_skips_other_keys() {
        let text = "8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0 cost.usage=5\n";
        let stats = parse_io_stat(text).unwrap();
        let d = stats.device(DevNum { major: 8, minor: 16 }).unwrap();
        assert_eq!((d.ios.read, d.ios.write, d.bytes.read, d.bytes.write), (192, 353, 1_459_200, 314_773_504));
        assert!(parse_io_stat("8:16 rios=x").is_err());
        assert!(parse_io_stat("rios=1").is_err());
    }
}
