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
            Ctl::TokenBucket => "token-bucket",
            Ctl::LeakyBucket => "leaky-bucket",
        }
    }

    /// A fresh controller.
    pub fn build(self, cal: &Calibration) -> Box<dyn Controller> {
        match self {
            Ctl::None => Box::new(NoControl::new()),
            Ctl::IoCost => Box::new(IoCost::new(LinearModel::new(cal.model), cal.qos)),
            Ctl::TokenBucket => Box::new(TokenBucketLimiter::new(NoControl::new())),
            Ctl::LeakyBucket => Box::new(LeakyBucketLimiter::new(NoControl::new())),
        }
    }
}
