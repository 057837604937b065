//! The controllers a scenario can run inline, built from the calibration.

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{Controller, IoCost, LeakyBucketLimiter, LinearModel, NoControl, TokenBucketLimiter};

use super::calibrate::Calibration;

/// One of ioshare's controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctl {
    /// Pass-through.
    None,
    /// IOCost with the measured model and latency targets.
    IoCost,
    /// IOCost with its device-depth option (beyond the kernel): at most the calibration's device
    /// depth in the device, slots handed out by vtime, their number sized by the latency target.
    IoCostQd,
    /// IOCost with a read-latency target instead: 99% of reads within this many times the QD1
    /// reader's solo p99 (the work-conserving scenario passes that target in the calibration).
    IoCostP99(u32),
    /// [`Ctl::IoCostP99`] with the device-depth option.
    IoCostP99Qd(u32),
    /// librbd's token bucket over each tenant's limits.
    TokenBucket,
    /// QEMU's leaky bucket over each tenant's limits.
    LeakyBucket,
}

impl Ctl {
    /// Name as it appears in tables and JSON (the controller's own name).
    pub fn name(self) -> &'static str {
        match self {
            Ctl::None => "none",
            Ctl::IoCost => "iocost",
            Ctl::IoCostQd => "iocost+qd",
            Ctl::IoCostP99(2) => "iocost-p99<=2x",
            Ctl::IoCostP99(4) => "iocost-p99<=4x",
            Ctl::IoCostP99(_) => "iocost-p99",
            Ctl::IoCostP99Qd(2) => "iocost-p99<=2x+qd",
            Ctl::IoCostP99Qd(4) => "iocost-p99<=4x+qd",
            Ctl::IoCostP99Qd(_) => "iocost-p99+qd",
            Ctl::TokenBucket => "token-bucket",
            Ctl::LeakyBucket => "leaky-bucket",
        }
    }

    /// The latency factor of a p99-target variant.
    pub fn p99_factor(self) -> Option<u32> {
        match self {
            Ctl::IoCostP99(f) | Ctl::IoCostP99Qd(f) => Some(f),
            _ => None,
        }
    }

    /// A fresh controller.
    pub fn build(self, cal: &Calibration) -> Box<dyn Controller> {
        match self {
            Ctl::None => Box::new(NoControl::new()),
            Ctl::IoCost | Ctl::IoCostP99(_) => Box::new(IoCost::new(LinearModel::new(cal.model), cal.qos)),
            Ctl::IoCostQd | Ctl::IoCostP99Qd(_) => Box::new(
                IoCost::new(LinearModel::new(cal.model), cal.qos)
                    .with_depth_limit(DepthLimit { max: cal.device_depth }),
            ),
            Ctl::TokenBucket => Box::new(TokenBucketLimiter::new(NoControl::new())),
            Ctl::LeakyBucket => Box::new(LeakyBucketLimiter::new(NoControl::new())),
        }
    }
}
