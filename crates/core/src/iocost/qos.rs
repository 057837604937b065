//! Latency QoS parameters and the kernel's `io.cost.qos` format.
//!
//! QoS says when the device counts as saturated: when more than (100 − rpct)% of reads complete later
//! than `rlat` µs (net of their size cost), likewise for writes, or when IOs wait for a device slot.
//! `min`/`max` bound vrate. The latency targets also set the planning period (§4.1 of the research).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::Error;
use crate::iocost::line::{fmt_centi, parse_centi, parse_error, parse_u64, tokens, Ctrl, DevNum, Token};

const FORMAT: &str = "io.cost.qos";
/// Lowest vrate bound accepted, ppm (1%).
pub const VRATE_MIN_PPM: u32 = 10_000;
/// Highest vrate bound accepted, ppm (10000%).
pub const VRATE_MAX_PPM: u32 = 100_000_000;
/// Shortest planning period, µs.
pub const MIN_PERIOD_US: u64 = 1_000;
/// Longest planning period, µs.
pub const MAX_PERIOD_US: u64 = 1_000_000;

/// Latency targets and vrate bounds of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct QosParams {
    /// Whether the controller is on.
    pub enable: bool,
    /// Read percentile, ppm (950 000 = p95); 0 = latency never counts as busy.
    pub rppm: u32,
    /// Read latency target, µs.
    pub rlat_us: u64,
    /// Write percentile, ppm.
    pub wppm: u32,
    /// Write latency target, µs.
    pub wlat_us: u64,
    /// Lowest vrate, ppm of the model.
    pub min_ppm: u32,
    /// Highest vrate, ppm of the model.
    pub max_ppm: u32,
}

impl Default for QosParams {
    /// The kernel's SSD defaults: 25 ms targets, no percentile, vrate 1%..10000%.
    fn default() -> Self {
        QosParams {
            enable: true,
            rppm: 0,
            rlat_us: 25_000,
            wppm: 0,
            wlat_us: 25_000,
            min_ppm: VRATE_MIN_PPM,
            max_ppm: VRATE_MAX_PPM,
        }
    }
}

impl QosParams {
    /// Planning period in µs (kernel `ioc_refresh_period_us`): the larger latency target times a
    /// multiplier (2× at ≥ p90, 10× at p50), clamped to 1 ms..1 s.
    pub fn period_us(&self) -> u64 {
        let (ppm, lat) =
            if self.rlat_us >= self.wlat_us { (self.rppm, self.rlat_us) } else { (self.wppm, self.wlat_us) };
        let multi = if ppm != 0 { ((1_000_000 - ppm as u64) / 50_000).max(2) } else { 2 };
        multi.saturating_mul(lat).clamp(MIN_PERIOD_US, MAX_PERIOD_US)
    }
}

/// A whole `io.cost.qos` line. Parsing starts from the defaults; omitted keys keep them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QosConfig {
    /// Device the line applies to, if it named one.
    pub device: Option<DevNum>,
    /// `auto` or `user`.
    pub ctrl: Ctrl,
    /// The parameters.
    pub params: QosParams,
}

fn parse_pct_ppm(key: &str, v: &str) -> Result<u32, Error> {
    let centi = parse_centi(FORMAT, key, v)?;
    if centi > 10_000 {
        return Err(parse_error(FORMAT, &format!("{key}={v}"), "a percentile must be between 0 and 100"));
    }
    Ok(centi as u32 * 100)
}

fn parse_vrate_ppm(key: &str, v: &str) -> Result<u32, Error> {
    let ppm = parse_centi(FORMAT, key, v)?.saturating_mul(100);
    Ok(ppm.clamp(VRATE_MIN_PPM as u64, VRATE_MAX_PPM as u64) as u32)
}

impl FromStr for QosConfig {
    type Err = Error;

    fn from_str(line: &str) -> Result<Self, Error> {
        let mut cfg = QosConfig::default();
        let mut ctrl = None;
        let mut user = false;
        for tok in tokens(line) {
            let p = &mut cfg.params;
            match tok {
                Token::Dev(d) => cfg.device = Some(d),
                Token::Word(w) => return Err(parse_error(FORMAT, w, "expected key=value")),
                Token::Pair("enable", v) => p.enable = parse_u64(FORMAT, "enable", v)? != 0,
                Token::Pair("ctrl", v) => ctrl = Some(Ctrl::parse(FORMAT, v)?),
                Token::Pair(k, v) => {
                    user = true;
                    match k {
                        "rpct" => p.rppm = parse_pct_ppm(k, v)?,
                        "wpct" => p.wppm = parse_pct_ppm(k, v)?,
                        "rlat" => p.rlat_us = parse_u64(FORMAT, k, v)?,
                        "wlat" => p.wlat_us = parse_u64(FORMAT, k, v)?,
                        "min" => p.min_ppm = parse_vrate_ppm(k, v)?,
                        "max" => p.max_ppm = parse_vrate_ppm(k, v)?,
                        _ => {
                            return Err(parse_error(
                                FORMAT,
                                k,
                                "unknown key; expected enable, ctrl, rpct, rlat, wpct, wlat, min, max",
                            ))
                        }
                    }
                }
            }
        }
        if cfg.params.min_ppm > cfg.params.max_ppm {
            return Err(parse_error(FORMAT, line, "min must not exceed max"));
        }
        cfg.ctrl = ctrl.unwrap_or(if user { Ctrl::User } else { Ctrl::Auto });
        Ok(cfg)
    }
}

impl fmt::Display for QosConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = self.device {
            write!(f, "{d} ")?;
        }
        let p = &self.params;
        write!(
            f,
            "enable={} ctrl={} rpct={} rlat={} wpct={} wlat={} min={} max={}",
            p.enable as u8,
            self.ctrl,
            fmt_centi(p.rppm as u64 / 100),
            p.rlat_us,
            fmt_centi(p.wppm as u64 / 100),
            p.wlat_us,
            fmt_centi(p.min_ppm as u64 / 100),
            fmt_centi(p.max_ppm as u64 / 100)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(s: &str) -> u64 {
        s.parse::<QosConfig>().unwrap().params.period_us()
    }

    #[test]
    fn period_lengths_follow_the_kernel() {
        // research §4.1: hdd 500 ms, ssd 50 ms, ssd_fast 10 ms; rpct=50 rlat=5ms → 50 ms; p95/p99 → 10 ms.
        assert_eq!(period("rlat=250000 wlat=250000"), 500_000);
        assert_eq!(period(""), 50_000);
        assert_eq!(period("rlat=5000 wlat=5000"), 10_000);
        assert_eq!(period("rpct=50 rlat=5000 wlat=5000"), 50_000);
        assert_eq!(period("rpct=95 rlat=5000 wlat=5000"), 10_000);
        assert_eq!(period("rpct=99 rlat=5000 wlat=5000"), 10_000);
        // Clamps to 1 ms..1 s; the larger target picks the percentile.
        assert_eq!(period("rlat=100 wlat=100"), 1_000);
        assert_eq!(period("rlat=900000 wlat=10"), 1_000_000);
        assert_eq!(period("rpct=50 rlat=1000 wpct=90 wlat=20000"), 40_000);
    }

    #[test]
    fn qos_line_round_trips() {
        let line = "259:0 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=90.50 wlat=20000 min=50.00 max=150.25";
        let cfg: QosConfig = line.parse().unwrap();
        assert_eq!(cfg.params.rppm, 950_000);
        assert_eq!(cfg.params.wppm, 905_000);
        assert_eq!(cfg.params.max_ppm, 1_502_500);
        assert_eq!(cfg.to_string(), line);
        assert_eq!(cfg.to_string().parse::<QosConfig>().unwrap(), cfg);
        assert_eq!(QosConfig::default().to_string().parse::<QosConfig>().unwrap(), QosConfig::default());
    }

    #[test]
    fn vrate_bounds_are_clamped_like_the_kernel() {
        let cfg: QosConfig = "min=0 max=20000".parse().unwrap();
        assert_eq!((cfg.params.min_ppm, cfg.params.max_ppm), (VRATE_MIN_PPM, VRATE_MAX_PPM));
    }

    #[test]
    fn malformed_qos_lines_are_rejected_with_the_reason() {
        for (line, needle) in [
            ("rpct=101", "between 0 and 100"),
            ("rpct=95.123", "two fraction digits"),
            ("rlat=-5", "non-negative integer"),
            ("min=90 max=50", "min must not exceed max"),
            ("latency=5", "unknown key"),
            ("fast", "expected key=value"),
            ("ctrl=x", "'auto' or 'user'"),
        ] {
            let err = line.parse::<QosConfig>().unwrap_err().to_string();
            assert!(err.contains(needle), "{line}: {err}");
        }
    }
}
