//! The device cost model: what one IO costs in device time, and the kernel's `io.cost.model` format.
//!
//! IOCost does not count IOs or bytes; it charges each IO the device time it is expected to occupy.
//! The linear model describes a device by six numbers — sequential bandwidth and sequential and random
//! 4 KiB IOPS, for reads and writes — and derives three coefficients per direction (kernel
//! `calc_lcoefs`): a per-4 KiB-page cost (1 s / pages per second) and a base cost for a sequential or a
//! random IO (1 s / IOPS minus one page), so that a 4 KiB IO of either kind costs exactly 1 s / IOPS.
//! Costs are in device virtual time, where one second is 2^37 units; rounding follows the kernel.
//!
//! An IO is random when it starts more than 16 MiB from where the group's previous IO ended (the
//! group keeps that cursor, not the model); an IO merged into an issued request pays only its pages.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::io::Op;
use crate::iocost::line::{parse_error, parse_u64, tokens, Ctrl, DevNum, Token};

/// Virtual-time units per second of device time (2^37).
pub const VTIME_PER_SEC: u64 = 1 << 37;
/// Virtual-time units per µs (truncated), also the value of vrate = 100%.
pub const VTIME_PER_USEC: u64 = VTIME_PER_SEC / 1_000_000;
/// Virtual-time units per ns (truncated).
pub const VTIME_PER_NSEC: u64 = VTIME_PER_SEC / 1_000_000_000;
/// Seek distance in 4 KiB pages above which an IO counts as random (16 MiB).
pub const RANDIO_PAGES: u64 = 4096;
/// log2 of the cost model's page size (4 KiB).
const PAGE_SHIFT: u32 = 12;

const FORMAT: &str = "io.cost.model";

/// Kernel-style `ceil(a / b)` on u64 (`DIV64_U64_ROUND_UP`).
pub fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Converts virtual-time units to nanoseconds of device time at 100% vrate.
pub fn vtime_to_ns(v: u64) -> f64 {
    v as f64 * 1e9 / VTIME_PER_SEC as f64
}

/// A pluggable cost model: device time of an IO, in vtime units.
pub trait CostModel: fmt::Debug + Send {
    /// Absolute cost of an IO of `len` bytes; `random` from the group's cursor; `merged` IOs pay size only.
    fn cost(&self, op: Op, len: u32, random: bool, merged: bool) -> u64;
    /// Size-only cost, subtracted from a completion's latency before it is judged against the target.
    fn size_cost(&self, op: Op, len: u32) -> u64;
}

/// The six numbers that describe a device (`io.cost.model` coefficients).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelParams {
    /// Sequential read bandwidth, bytes/s.
    pub rbps: u64,
    /// Sequential 4 KiB read IOPS.
    pub rseqiops: u64,
    /// Random 4 KiB read IOPS.
    pub rrandiops: u64,
    /// Sequential write bandwidth, bytes/s.
    pub wbps: u64,
    /// Sequential 4 KiB write IOPS.
    pub wseqiops: u64,
    /// Random 4 KiB write IOPS.
    pub wrandiops: u64,
}

impl ModelParams {
    /// The kernel's built-in set for rotational disks.
    pub const HDD: ModelParams = ModelParams {
        rbps: 174_019_176,
        rseqiops: 41_708,
        rrandiops: 370,
        wbps: 178_075_866,
        wseqiops: 42_705,
        wrandiops: 378,
    };
    /// The kernel's built-in set for SSDs with queue depth 1.
    pub const SSD_QD1: ModelParams = ModelParams {
        rbps: 245_855_193,
        rseqiops: 61_575,
        rrandiops: 6_946,
        wbps: 141_365_009,
        wseqiops: 33_716,
        wrandiops: 26_796,
    };
    /// The kernel's default set for SSDs.
    pub const SSD_DFL: ModelParams = ModelParams {
        rbps: 488_636_629,
        rseqiops: 8_932,
        rrandiops: 8_518,
        wbps: 427_891_549,
        wseqiops: 28_755,
        wrandiops: 21_940,
    };
    /// The kernel's set for fast SSDs.
    pub const SSD_FAST: ModelParams = ModelParams {
        rbps: 3_102_524_156,
        rseqiops: 724_816,
        rrandiops: 778_122,
        wbps: 1_742_780_862,
        wseqiops: 425_702,
        wrandiops: 443_193,
    };

    /// The built-in set called `name` (`hdd`, `ssd_qd1`, `ssd_dfl`, `ssd_fast`).
    pub fn preset(name: &str) -> Option<ModelParams> {
        match name {
            "hdd" => Some(Self::HDD),
            "ssd_qd1" => Some(Self::SSD_QD1),
            "ssd_dfl" => Some(Self::SSD_DFL),
            "ssd_fast" => Some(Self::SSD_FAST),
            _ => None,
        }
    }

    /// Every parameter multiplied by `factor` (a faster device for `factor` > 1).
    pub fn scaled(&self, factor: f64) -> ModelParams {
        let s = |v: u64| ((v as f64 * factor).round() as u64).max(1);
        ModelParams {
            rbps: s(self.rbps),
            rseqiops: s(self.rseqiops),
            rrandiops: s(self.rrandiops),
            wbps: s(self.wbps),
            wseqiops: s(self.wseqiops),
            wrandiops: s(self.wrandiops),
        }
    }

    const KEYS: [&'static str; 6] = ["rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"];

    fn field(&mut self, key: &str) -> Option<&mut u64> {
        Some(match key {
            "rbps" => &mut self.rbps,
            "rseqiops" => &mut self.rseqiops,
            "rrandiops" => &mut self.rrandiops,
            "wbps" => &mut self.wbps,
            "wseqiops" => &mut self.wseqiops,
            "wrandiops" => &mut self.wrandiops,
            _ => return None,
        })
    }
}

/// A whole `io.cost.model` line: optional device, ctrl, and the six coefficients.
///
/// Parsing accepts the kernel's syntax and, for convenience, a preset name (`ssd_dfl`) standing for
/// its six numbers, which later `key=value` pairs may override. Without a preset every coefficient
/// must be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ModelConfig {
    /// Device the line applies to, if it named one.
    pub device: Option<DevNum>,
    /// `auto` or `user`.
    pub ctrl: Ctrl,
    /// The coefficients.
    pub params: ModelParams,
}

impl FromStr for ModelConfig {
    type Err = Error;

    fn from_str(line: &str) -> Result<Self, Error> {
        let mut device = None;
        let mut ctrl = None;
        let mut params = ModelParams { rbps: 0, rseqiops: 0, rrandiops: 0, wbps: 0, wseqiops: 0, wrandiops: 0 };
        let mut given = [false; 6];
        let mut preset = false;
        for tok in tokens(line) {
            match tok {
                Token::Dev(d) => device = Some(d),
                Token::Word(w) => match ModelParams::preset(w) {
                    Some(p) if !preset => {
                        params = p;
                        preset = true;
                    }
                    _ => {
                        return Err(parse_error(
                            FORMAT,
                            w,
                            "unknown word; expected key=value or one of hdd, ssd_qd1, ssd_dfl, ssd_fast",
                        ))
                    }
                },
                Token::Pair("ctrl", v) => ctrl = Some(Ctrl::parse(FORMAT, v)?),
                Token::Pair("model", "linear") => {}
                Token::Pair("model", v) => {
                    return Err(parse_error(FORMAT, &format!("model={v}"), "only model=linear exists"))
                }
                Token::Pair(k, v) => {
                    let slot = params.field(k).ok_or_else(|| {
                        parse_error(
                            FORMAT,
                            k,
                            "unknown key; expected ctrl, model, rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops",
                        )
                    })?;
                    *slot = parse_u64(FORMAT, k, v)?;
                    given[ModelParams::KEYS.iter().position(|x| *x == k).expect("known key")] = true;
                }
            }
        }
        if !preset {
            if let Some(i) = given.iter().position(|g| !g) {
                return Err(parse_error(
                    FORMAT,
                    line,
                    &format!(
                        "missing {}: give all six coefficients or start from a preset such as ssd_dfl",
                        ModelParams::KEYS[i]
                    ),
                ));
            }
        }
        let any_given = given.iter().any(|g| *g);
        let ctrl = ctrl.unwrap_or(if any_given || !preset { Ctrl::User } else { Ctrl::Auto });
        Ok(ModelConfig { device, ctrl, params })
    }
}

impl fmt::Display for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = self.device {
            write!(f, "{d} ")?;
        }
        let p = &self.params;
        write!(
            f,
            "ctrl={} model=linear rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
            self.ctrl, p.rbps, p.rseqiops, p.rrandiops, p.wbps, p.wseqiops, p.wrandiops
        )
    }
}

/// Linear-model coefficients of one direction, in vtime units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LinearCoefs {
    /// Cost per 4 KiB page.
    pub page: u64,
    /// Base cost of a sequential IO.
    pub seqio: u64,
    /// Base cost of a random IO.
    pub randio: u64,
}

impl LinearCoefs {
    /// The kernel's `calc_lcoefs`.
    pub fn from_rates(bps: u64, seqiops: u64, randiops: u64) -> Self {
        let mut page = 0;
        if bps != 0 {
            let bps_pages = ceil_div(bps, 1 << PAGE_SHIFT);
            page = if bps_pages != 0 { ceil_div(VTIME_PER_SEC, bps_pages) } else { 1 };
        }
        let base = |iops: u64| {
            if iops == 0 {
                return 0;
            }
            ceil_div(VTIME_PER_SEC, iops).saturating_sub(page)
        };
        LinearCoefs { page, seqio: base(seqiops), randio: base(randiops) }
    }
}

/// The kernel's linear cost model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LinearModel {
    /// The parameters it was built from.
    pub params: ModelParams,
    /// Coefficients, [read, write].
    pub coefs: [LinearCoefs; 2],
}

impl LinearModel {
    /// Derives the coefficients.
    pub fn new(params: ModelParams) -> Self {
        let p = &params;
        LinearModel {
            params,
            coefs: [
                LinearCoefs::from_rates(p.rbps, p.rseqiops, p.rrandiops),
                LinearCoefs::from_rates(p.wbps, p.wseqiops, p.wrandiops),
            ],
        }
    }
}

impl CostModel for LinearModel {
    #[inline]
    fn cost(&self, op: Op, len: u32, random: bool, merged: bool) -> u64 {
        if len == 0 {
            return 0;
        }
        let c = &self.coefs[op.index()];
        let pages = ((len >> PAGE_SHIFT) as u64).max(1);
        let base = match (merged, random) {
            (true, _) => 0,
            (false, true) => c.randio,
            (false, false) => c.seqio,
        };
        base + pages * c.page
    }

    #[inline]
    fn size_cost(&self, op: Op, len: u32) -> u64 {
        (len >> PAGE_SHIFT) as u64 * self.coefs[op.index()].page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coefs(p: ModelParams) -> [(u64, u64, u64); 2] {
        LinearModel::new(p).coefs.map(|c| (c.page, c.seqio, c.randio))
    }

    #[test]
    fn builtin_sets_give_the_kernel_coefficients() {
        // research/iocost-kernel.md §3.1 table.
        assert_eq!(coefs(ModelParams::HDD), [(3_234_924, 60_342, 368_221_708), (3_161_261, 57_074, 360_433_855)]);
        assert_eq!(coefs(ModelParams::SSD_QD1), [(2_289_734, 0, 17_497_044), (3_982_238, 94_134, 1_146_847)]);
        assert_eq!(
            coefs(ModelParams::SSD_DFL),
            [(1_152_074, 14_235_181, 14_983_047), (1_315_634, 3_464_021, 4_948_676)]
        );
        assert_eq!(coefs(ModelParams::SSD_FAST), [(181_449, 8_171, 0), (323_018, 0, 0)]);
    }

    #[test]
    fn paper_example_32k_random_read_costs_176us() {
        let m = LinearModel::new(ModelParams::SSD_DFL);
        let us = vtime_to_ns(m.cost(Op::Read, 32 * 1024, true, false)) / 1000.0;
        assert!((us - 176.0).abs() < 0.5, "{us}");
        // 4 KiB IOs cost exactly 1 s / IOPS (up to the ceil rounding of one unit).
        let c = m.cost(Op::Read, 4096, true, false);
        assert!(c.abs_diff(ceil_div(VTIME_PER_SEC, 8_518)) <= 1, "{c}");
    }

    #[test]
    fn merged_io_pays_size_only_and_empty_io_is_free() {
        let m = LinearModel::new(ModelParams::SSD_DFL);
        assert_eq!(m.cost(Op::Write, 8192, true, true), 2 * m.coefs[1].page);
        assert_eq!(m.cost(Op::Read, 0, true, false), 0);
        // Sub-page IOs cost one page; size cost rounds partial pages down.
        assert_eq!(m.cost(Op::Read, 512, false, false), m.coefs[0].seqio + m.coefs[0].page);
        assert_eq!(m.size_cost(Op::Read, 512), 0);
    }

    #[test]
    fn model_line_round_trips() {
        let line = "8:16 ctrl=user model=linear rbps=488636629 rseqiops=8932 rrandiops=8518 wbps=427891549 wseqiops=28755 wrandiops=21940";
        let cfg: ModelConfig = line.parse().unwrap();
        assert_eq!(cfg.params, ModelParams::SSD_DFL);
        assert_eq!(cfg.device, Some(DevNum { major: 8, minor: 16 }));
        assert_eq!(cfg.to_string(), line);
        assert_eq!(cfg.to_string().parse::<ModelConfig>().unwrap(), cfg);
    }

    #[test]
    fn presets_and_overrides() {
        let cfg: ModelConfig = "ssd_dfl".parse().unwrap();
        assert_eq!((cfg.params, cfg.ctrl), (ModelParams::SSD_DFL, Ctrl::Auto));
        let cfg: ModelConfig = "hdd rrandiops=400".parse().unwrap();
        assert_eq!((cfg.params.rrandiops, cfg.params.rbps, cfg.ctrl), (400, ModelParams::HDD.rbps, Ctrl::User));
    }

    #[test]
    fn malformed_model_lines_are_rejected_with_the_reason() {
        for (line, needle) in [
            ("rbps=1 rseqiops=2", "missing rrandiops"),
            ("ssd_dfl rbps=abc", "non-negative integer"),
            ("ssd_dfl foo=1", "unknown key"),
            ("ssd_dfl model=quadratic", "model=linear"),
            ("nvme", "unknown word"),
            ("ssd_dfl ctrl=manual", "'auto' or 'user'"),
        ] {
            let err = line.parse::<ModelConfig>().unwrap_err().to_string();
            assert!(err.contains(needle), "{line}: {err}");
            assert!(err.starts_with("invalid io.cost.model"), "{err}");
        }
    }
}
