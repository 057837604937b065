//! The cgroup v2 `io.weight` format (proportional weights, used by BFQ and by kernel iocost):
//!
//! ```text
//! default 100
//! 8:16 200
//! ```
//!
//! The first line is the cgroup's default weight, each further line a per-device override. Weights are
//! 1..=10000. (Writing accepts `N`, `default N`, `MAJ:MIN N` and `MAJ:MIN default`, one per write; this
//! module models the file as read, and each of its lines is also a valid write.)
//!
//! This host has no cgroup v2 `io` controller; where one exists (the lab guest) `ioshare bench` writes
//! weights with [`crate::Cgroup2::write`].

use std::fmt;
use std::str::FromStr;

use ioshare_core::iocost::line::DevNum;

use crate::error::{parse_error, Error, Result};

/// The format's name in errors.
const FORMAT: &str = "io.weight";
/// Smallest cgroup v2 weight.
pub const IO_WEIGHT_MIN: u32 = 1;
/// Largest cgroup v2 weight.
pub const IO_WEIGHT_MAX: u32 = 10_000;
/// The kernel's default weight.
pub const IO_WEIGHT_DEFAULT: u32 = 100;

/// The contents of an `io.weight` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoWeight {
    /// The weight on devices without an override.
    pub default: u32,
    /// Per-device overrides, in file order.
    pub devices: Vec<(DevNum, u32)>,
}

impl Default for IoWeight {
    fn default() -> Self {
        IoWeight { default: IO_WEIGHT_DEFAULT, devices: Vec::new() }
    }
}

impl IoWeight {
    /// The weight that applies on `dev`.
    pub fn weight_on(&self, dev: DevNum) -> u32 {
        self.devices.iter().find(|(d, _)| *d == dev).map_or(self.default, |&(_, w)| w)
    }
}

impl FromStr for IoWeight {
    type Err = Error;

    /// Parses a whole file: exactly one `default N` line, any number of `MAJ:MIN N` lines.
    fn from_str(text: &str) -> Result<Self> {
        let mut default = None;
        let mut devices: Vec<(DevNum, u32)> = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let [key, value] = words[..] else {
                return Err(parse_error(FORMAT, line, "expected 'default N' or 'MAJ:MIN N'"));
            };
            let weight = parse_weight(line, value)?;
            if key == "default" {
                if default.replace(weight).is_some() {
                    return Err(parse_error(FORMAT, line, "the default weight is given twice"));
                }
                continue;
            }
            let dev: DevNum =
                key.parse().map_err(|()| parse_error(FORMAT, line, "expected 'default' or MAJ:MIN first"))?;
            if devices.iter().any(|(d, _)| *d == dev) {
                return Err(parse_error(FORMAT, line, format!("device {dev} is given twice")));
            }
            devices.push((dev, weight));
        }
        let default = default.ok_or_else(|| parse_error(FORMAT, text.trim(), "missing the 'default N' line"))?;
        Ok(IoWeight { default, devices })
    }
}

/// Parses a weight in 1..=10000.
fn parse_weight(line: &str, value: &str) -> Result<u32> {
    match value.parse::<u32>() {
        Ok(w) if (IO_WEIGHT_MIN..=IO_WEIGHT_MAX).contains(&w) => Ok(w),
        _ => Err(parse_error(FORMAT, line, "weights are integers from 1 to 10000")),
    }
}

impl fmt::Display for IoWeight {
    /// Prints the file as the kernel does: `default N`, then one line per device, each ending in `\n`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "default {}", self.default)?;
        for (dev, weight) in &self.devices {
            writeln!(f, "{dev} {weight}")?;
        }
        Ok(())
    }
}

/// Tested against text only: cgroup v2 `io` is absent on this machine (see the module comment).
#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_and_prints_the_kernels_file() {
        let text = "default 100\n8:16 200\n259:0 50\n";
        let weight: IoWeight = text.parse().unwrap();
        assert_eq!(weight.default, 100);
        assert_eq!(weight.weight_on(DevNum { major: 8, minor: 16 }), 200);
        assert_eq!(weight.weight_on(DevNum { major: 8, minor: 0 }), 100, "no override: the default");
        assert_eq!(weight.to_string(), text);
        assert_eq!(IoWeight::default().to_string(), "default 100\n");
    }

    #[test]
    fn bad_input_names_the_problem() {
        for (bad, reason) in [
            ("8:16 200\n", "missing the 'default N' line"),
            ("default 0\n", "from 1 to 10000"),
            ("default 10001\n", "from 1 to 10000"),
            ("default 100\ndefault 50\n", "given twice"),
            ("default 100\n8:16 5\n8:16 6\n", "device 8:16 is given twice"),
            ("default 100\nsda 5\n", "expected 'default' or MAJ:MIN"),
            ("default\n", "expected 'default N' or 'MAJ:MIN N'"),
        ] {
            let err = bad.parse::<IoWeight>().unwrap_err().to_string();
            assert!(err.starts_with("invalid io.weight") && err.contains(reason), "{bad:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn print_then_parse_is_identity(
            default in IO_WEIGHT_MIN..=IO_WEIGHT_MAX,
            overrides in prop::collection::btree_map((0u32..4096, 0u32..1 << 20), IO_WEIGHT_MIN..=IO_WEIGHT_MAX, 0..8),
        ) {
            let devices = overrides.into_iter().map(|((major, minor), w)| (DevNum { major, minor }, w)).collect();
            let weight = IoWeight { default, devices };
            prop_assert_eq!(weight.to_string().parse::<IoWeight>().unwrap(), weight);
        }
    }
}
