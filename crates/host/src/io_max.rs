//! The cgroup v2 `io.max` format (blk-throttle on v2): one line per device with a limit,
//!
//! ```text
//! 8:16 rbps=2097152 wbps=max riops=max wiops=120
//! ```
//!
//! `max` means no limit. The kernel prints all four keys for every device that has at least one limit;
//! when writing it accepts any subset and keeps left-out keys unchanged. [`IoMax`] always prints all
//! four, so writing its line sets exactly what it holds; parsing treats a left-out key as `max`.
//! Zero is refused (a zero limit would stop all IO; use `max` to lift a limit), and IOPS limits must
//! fit in 32 bits as in the kernel.
//!
//! This host has no cgroup v2 `io` controller; where one exists (the lab guest) `ioshare bench` writes
//! these lines with [`crate::Cgroup2::write`].

use std::fmt;
use std::str::FromStr;

use ioshare_core::iocost::line::DevNum;

use crate::error::{parse_error, Error, Result};

/// The format's name in errors.
const FORMAT: &str = "io.max";

/// The limits of one cgroup on one device. `None` is `max` (no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoMax {
    /// The device.
    pub dev: DevNum,
    /// Read bytes per second.
    pub rbps: Option<u64>,
    /// Write bytes per second.
    pub wbps: Option<u64>,
    /// Read IOs per second.
    pub riops: Option<u64>,
    /// Write IOs per second.
    pub wiops: Option<u64>,
}

impl IoMax {
    /// No limits on `dev` (writing this line lifts every limit).
    pub fn unlimited(dev: DevNum) -> Self {
        IoMax { dev, rbps: None, wbps: None, riops: None, wiops: None }
    }

    /// Parses the whole file: one [`IoMax`] per non-empty line.
    pub fn parse_file(text: &str) -> Result<Vec<IoMax>> {
        text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::parse).collect()
    }

    /// Prints lines for a whole file, in order, each ending in a newline (the kernel's layout).
    pub fn format_file(lines: &[IoMax]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

impl FromStr for IoMax {
    type Err = Error;

    fn from_str(line: &str) -> Result<Self> {
        let mut words = line.split_whitespace();
        let dev: DevNum = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| parse_error(FORMAT, line, "expected MAJ:MIN first, like '8:16 rbps=1048576'"))?;
        let mut max = IoMax::unlimited(dev);
        let mut seen = Vec::new();
        for word in words {
            let (key, value) =
                word.split_once('=').ok_or_else(|| parse_error(FORMAT, word, "expected key=value, like riops=1000"))?;
            if seen.contains(&key) {
                return Err(parse_error(FORMAT, line, format!("'{key}' is given twice")));
            }
            seen.push(key);
            let limit_max = match key {
                "riops" | "wiops" => u64::from(u32::MAX),
                _ => u64::MAX,
            };
            let slot = match key {
                "rbps" => &mut max.rbps,
                "wbps" => &mut max.wbps,
                "riops" => &mut max.riops,
                "wiops" => &mut max.wiops,
                _ => return Err(parse_error(FORMAT, word, "unknown key: use rbps, wbps, riops or wiops")),
            };
            *slot = parse_limit(word, value, limit_max)?;
        }
        Ok(max)
    }
}

/// Parses `max` or a positive integer up to `limit_max`.
fn parse_limit(word: &str, value: &str, limit_max: u64) -> Result<Option<u64>> {
    if value == "max" {
        return Ok(None);
    }
    match value.parse::<u64>() {
        Ok(0) => Err(parse_error(FORMAT, word, "a limit of 0 would stop all IO: use max for no limit")),
        Ok(v) if v <= limit_max => Ok(Some(v)),
        Ok(_) => Err(parse_error(FORMAT, word, format!("IOPS limits must be at most {limit_max}"))),
        Err(_) => Err(parse_error(FORMAT, word, "expected a positive integer or max")),
    }
}

impl fmt::Display for IoMax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = |v: Option<u64>| v.map_or_else(|| "max".to_string(), |v| v.to_string());
        write!(
            f,
            "{} rbps={} wbps={} riops={} wiops={}",
            self.dev,
            limit(self.rbps),
            limit(self.wbps),
            limit(self.riops),
            limit(self.wiops)
        )
    }
}

/// Tested against text only: cgroup v2 `io` is absent on this machine (see the module comment).
#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const DEV: DevNum = DevNum { major: 8, minor: 16 };

    #[test]
    fn parses_the_kernels_line() {
        let line = "8:16 rbps=2097152 wbps=max riops=max wiops=120";
        let max: IoMax = line.parse().unwrap();
        assert_eq!(max, IoMax { dev: DEV, rbps: Some(2_097_152), wbps: None, riops: None, wiops: Some(120) });
        assert_eq!(max.to_string(), line);
    }

    #[test]
    fn left_out_keys_are_max_and_printed() {
        let max: IoMax = "8:16 riops=1000".parse().unwrap();
        assert_eq!(max.to_string(), "8:16 rbps=max wbps=max riops=1000 wiops=max");
        assert_eq!(IoMax::unlimited(DEV).to_string(), "8:16 rbps=max wbps=max riops=max wiops=max");
    }

    #[test]
    fn whole_file_round_trips() {
        let text = "8:0 rbps=max wbps=1048576 riops=max wiops=max\n259:0 rbps=10 wbps=max riops=5000 wiops=max\n";
        let lines = IoMax::parse_file(text).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(IoMax::format_file(&lines), text);
        assert!(IoMax::parse_file("").unwrap().is_empty(), "an empty file: no limits anywhere");
    }

    #[test]
    fn bad_input_names_the_problem() {
        for (bad, reason) in [
            ("rbps=1", "expected MAJ:MIN first"),
            ("8:16 rbps", "expected key=value"),
            ("8:16 rlat=5", "unknown key"),
            ("8:16 rbps=0", "use max for no limit"),
            ("8:16 rbps=-1", "expected a positive integer or max"),
            ("8:16 riops=4294967296", "at most 4294967295"),
            ("8:16 rbps=1 rbps=2", "given twice"),
        ] {
            let err = bad.parse::<IoMax>().unwrap_err().to_string();
            assert!(err.starts_with("invalid io.max") && err.contains(reason), "{bad}: {err}");
        }
    }

    fn limit(max: u64) -> impl Strategy<Value = Option<u64>> {
        prop::option::of(1..=max)
    }

    proptest! {
        #[test]
        fn print_then_parse_is_identity(
            major in 0u32..4096, minor in 0u32..1 << 20,
            rbps in limit(u64::MAX), wbps in limit(u64::MAX),
            riops in limit(u32::MAX.into()), wiops in limit(u32::MAX.into()),
        ) {
            let max = IoMax { dev: DevNum { major, minor }, rbps, wbps, riops, wiops };
            prop_assert_eq!(max.to_string().parse::<IoMax>().unwrap(), max);
        }
    }
}
