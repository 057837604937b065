//! The controllers a scenario can run inline, built from the calibration.

use ioshare_core::{Controller, IoCost, LeakyBucketLimiter, LinearModel, NoControl, TokenBucketLimiter};

use super::calibrate::Calibration;

/// One of ioshare's controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctl {
    /// Pass-through.
    None,
    /// IOCost with the measured model and latency targets.
    IoCost,
    /// IOCost with a read-latency target instead: 99% of reads within this many times the QD1
    /// reader's solo p99 (the work-conserving scenario passes that target in the calibration).
    IoCostP99(u32),
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
            Ctl::IoCostP99(2) => "iocost-p99<=2x",
            Ctl::IoCostP99(4) => "iocost-p99<=4x",
            Ctl::IoCostP99(_) => "iocost-p99",
            Ctl::TokenBucket => "token-bucket",
            Ctl::LeakyBucket => "leaky-bucket",
        }
    }

    /// A fresh controller.
    pub fn build(self, cal: &Calibration) -> Box<dyn Controller> {
        match self {
            Ctl::None => Box::new(NoControl::new()),
            Ctl::IoCost | Ctl::IoCostP99(_) => Box::new(IoCost::new(LinearModel::new(cal.model), cal.qos)),
            Ctl::TokenBucket => Box::new(TokenBucketLimiter::new(NoControl::new())),
            Ctl::LeakyBucket => Box::new(LeakyBucketLimiter::new(NoControl::new())),
        }
    }
}
