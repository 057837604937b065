//! The controllers a scenario can run inline, built from the calibration.

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{Controller, IoCost, LeakyBucketLimiter, LinearModel, NoControl, QosParams, TokenBucketLimiter};

use crate::calibrate::Calibration;

/// One of ioshare's controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerKind {
    /// Pass-through.
    None,
    /// IOCost with the measured model and latency targets.
    IoCost,
    /// IOCost with its device-depth option (beyond the kernel): at most the calibration's device
    /// depth in the device, slots handed out by vtime. Without the calibration's latency targets:
    /// they stand for "the device is driven past the depth that saturates it" (see [`crate::calibrate`]),
    /// which the slot limit now rules out by construction, and on a disk shared with other
    /// machines' or users' IO they are missed whatever ioshare does — the slot limit then shrank
    /// to a few IOs and the total fell to 10–60% of no control. The planning period stays the same.
    IoCostQd,
    /// IOCost with a read-latency target instead: 99% of reads within this many times the QD1
    /// reader's solo p99 (the work-conserving scenario passes that target in the calibration).
    IoCostP99(u32),
    /// [`ControllerKind::IoCostP99`] with the device-depth option: the slot limit follows the p99 target.
    IoCostP99Qd(u32),
    /// librbd's token bucket over each tenant's limits.
    TokenBucket,
    /// QEMU's leaky bucket over each tenant's limits.
    LeakyBucket,
}

impl ControllerKind {
    /// Name as it appears in tables and JSON (the controller's own name).
    pub fn name(self) -> &'static str {
        match self {
            ControllerKind::None => "none",
            ControllerKind::IoCost => "iocost",
            ControllerKind::IoCostQd => "iocost+qd",
            ControllerKind::IoCostP99(2) => "iocost-p99<=2x",
            ControllerKind::IoCostP99(4) => "iocost-p99<=4x",
            ControllerKind::IoCostP99(_) => "iocost-p99",
            ControllerKind::IoCostP99Qd(2) => "iocost-p99<=2x+qd",
            ControllerKind::IoCostP99Qd(4) => "iocost-p99<=4x+qd",
            ControllerKind::IoCostP99Qd(_) => "iocost-p99+qd",
            ControllerKind::TokenBucket => "token-bucket",
            ControllerKind::LeakyBucket => "leaky-bucket",
        }
    }

    /// The latency factor of a p99-target variant.
    pub fn p99_factor(self) -> Option<u32> {
        match self {
            ControllerKind::IoCostP99(f) | ControllerKind::IoCostP99Qd(f) => Some(f),
            _ => None,
        }
    }

    /// A fresh controller.
    pub fn build(self, cal: &Calibration) -> Box<dyn Controller> {
        match self {
            ControllerKind::None => Box::new(NoControl::new()),
            ControllerKind::IoCost | ControllerKind::IoCostP99(_) => {
                Box::new(IoCost::new(LinearModel::new(cal.model), cal.qos))
            }
            ControllerKind::IoCostQd => {
                let qos = cal.qos;
                // No percentile: latency never counts; targets × the p50 multiplier (10 instead of
                // the 2 without a percentile) keep the planning period.
                let no_targets =
                    QosParams { rppm: 0, wppm: 0, rlat_us: qos.rlat_us * 5, wlat_us: qos.wlat_us * 5, ..qos };
                debug_assert_eq!(no_targets.period_us(), qos.period_us());
                Box::new(with_slots(IoCost::new(LinearModel::new(cal.model), no_targets), cal))
            }
            ControllerKind::IoCostP99Qd(_) => {
                Box::new(with_slots(IoCost::new(LinearModel::new(cal.model), cal.qos), cal))
            }
            ControllerKind::TokenBucket => Box::new(TokenBucketLimiter::new(NoControl::new())),
            ControllerKind::LeakyBucket => Box::new(LeakyBucketLimiter::new(NoControl::new())),
        }
    }
}

/// IOCost with the device-depth option at the calibration's device depth.
fn with_slots(c: IoCost, cal: &Calibration) -> IoCost {
    c.with_depth_limit(DepthLimit { max: cal.device_depth })
}
