//! The cgroup v2 `io.stat` format (what a cgroup did per device, its descendants included):
//!
//! ```text
//! 8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0
//! ```
//!
//! The one parser of this format: [`crate::Cgroup2::io_stats`] and the agent's v2 hierarchy read it here.
//! The kernel prints one line per device the cgroup has a blkg on, so a device listed twice is malformed
//! input and refused (summing or keeping either line would both guess). Keys other than the six
//! counters (iocost's `cost.usage` etc.) are accepted and ignored; a missing counter reads as zero.

use ioshare_core::iocost::line::DevNum;

use crate::blkio_stats::{BlkioStats, DeviceStats, RwCounts};
use crate::error::{parse_error, Result};

/// Parses an `io.stat` file into the same per-device counters as the v1 statistics, in the kernel's
/// order. Errors name the offending line: a first word that is not `MAJ:MIN`, a word that is not
/// `key=value`, a counter that is not a non-negative integer, a device listed twice.
pub fn parse_io_stat(text: &str) -> Result<BlkioStats> {
    let mut stats = BlkioStats::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut words = line.split_whitespace();
        let dev: DevNum = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| parse_error("io.stat", line, "expected MAJ:MIN first"))?;
        if stats.device(dev).is_some() {
            return Err(parse_error(
                "io.stat",
                line,
                format!("device {dev} is listed twice (the kernel prints one line each)"),
            ));
        }
        let mut d = DeviceStats { dev, ios: RwCounts::default(), bytes: RwCounts::default() };
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                return Err(parse_error("io.stat", line, format!("'{word}' is not key=value")));
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
            *slot = value
                .parse()
                .map_err(|_| parse_error("io.stat", line, format!("'{word}': expected a non-negative integer")))?;
        }
        stats.devices.push(d);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVME: DevNum = DevNum { major: 259, minor: 0 };
    const LOOP: DevNum = DevNum { major: 7, minor: 0 };

    /// The error's text for `text`, which must be refused.
    fn refused(text: &str) -> String {
        parse_io_stat(text).expect_err(text).to_string()
    }

    #[test]
    fn parses_every_device_in_order() {
        let text = "259:0 rbytes=8192 wbytes=4096 rios=2 wios=1 dbytes=0 dios=0\n\
                    7:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=512 dios=1\n";
        let stats = parse_io_stat(text).unwrap();
        let devs: Vec<DevNum> = stats.devices.iter().map(|d| d.dev).collect();
        assert_eq!(devs, [NVME, LOOP]);
        let nvme = stats.device(NVME).unwrap();
        assert_eq!(nvme.ios, RwCounts { read: 2, write: 1, discard: 0 });
        assert_eq!(nvme.bytes, RwCounts { read: 8192, write: 4096, discard: 0 });
        let lo = stats.device(LOOP).unwrap();
        assert_eq!((lo.ios.discard, lo.bytes.discard), (1, 512));
    }

    #[test]
    fn unknown_keys_are_ignored_and_missing_counters_are_zero() {
        let text = "8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 cost.vrate=100.00 cost.usage=5 newkey=x\n";
        let d = *parse_io_stat(text).unwrap().device(DevNum { major: 8, minor: 16 }).unwrap();
        assert_eq!(d.ios, RwCounts { read: 192, write: 353, discard: 0 });
        assert_eq!(d.bytes, RwCounts { read: 1_459_200, write: 314_773_504, discard: 0 });
    }

    #[test]
    fn empty_text_has_no_devices() {
        assert_eq!(parse_io_stat("").unwrap(), BlkioStats::default());
        assert_eq!(parse_io_stat("\n  \n").unwrap(), BlkioStats::default());
    }

    #[test]
    fn a_device_listed_twice_is_refused() {
        let text = "7:0 rios=1 wios=0\n8:0 rios=3\n7:0 rios=2 wios=5\n";
        let err = refused(text);
        assert_eq!(
            err,
            "invalid io.stat '7:0 rios=2 wios=5': device 7:0 is listed twice (the kernel prints one line each)"
        );
    }

    #[test]
    fn a_bad_count_is_refused_with_its_line() {
        for (bad, word) in
            [("259:0 rios=x", "rios=x"), ("259:0 rbytes=12 wios=-1", "wios=-1"), ("259:0 dios=", "dios=")]
        {
            assert_eq!(refused(bad), format!("invalid io.stat '{bad}': '{word}': expected a non-negative integer"));
        }
    }

    #[test]
    fn malformed_lines_are_refused_with_the_line() {
        assert_eq!(refused("nvme rios=1"), "invalid io.stat 'nvme rios=1': expected MAJ:MIN first");
        assert_eq!(refused("rios=1"), "invalid io.stat 'rios=1': expected MAJ:MIN first");
        assert_eq!(refused("259:0 rios"), "invalid io.stat '259:0 rios': 'rios' is not key=value");
    }
}
