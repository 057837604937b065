//! Who runs a point's tenants. The sweep measures the same way whichever IOCost is in control: it
//! asks a [`Runner`] to run the tenants for a while under IOCost pinned by a [`Pinned`] pair of
//! lines (or uncontrolled) and judges the [`RunReport`] it gets back. Two runners exist:
//! - [`Inline`] (the default): ioshare's IOCost on the engine's issue path, in this process;
//! - the kernel's IOCost (`ioshare tune --kernel`, cgroup v2): implemented by the bench crate, whose
//!   kernel peers already run each tenant in its own worker process and cgroup (this crate cannot
//!   depend on bench: bench depends on the agent, which depends on this crate).
//!
//! A [`Control`] makes the runner once the sweep has opened its target, and names what the result
//! records ([`ControlledBy`]), so that `--resume` and `--merge` keep one controller's points apart
//! from another's.
//!
//! Pinning: at vrate V both runners get the same lines — the cost model scaled by V and vrate pinned
//! at 100% (`min=max=100`, latency percentiles off), exactly what a solution prints. That equals
//! `min=max=V` on the model as measured, without the kernel's walk of 4% a period from where vrate
//! was to V at the start of every run.

use std::sync::atomic::AtomicBool;

use ioshare_core::{Controller, IoCost, LinearModel, ModelParams, NoControl, QosParams};
use ioshare_engine::{RunOptions, RunReport, Target, TenantSpec};

use crate::data::ControlledBy;
use crate::error::Result;

/// The lines that pin a point: `io.cost.model` and `io.cost.qos` as parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pinned {
    /// The cost model scaled by the point's vrate.
    pub model: ModelParams,
    /// The QoS: vrate pinned at 100%, latency percentiles off (the targets set the planning period).
    pub qos: QosParams,
}

impl Pinned {
    /// The lines for vrate `v` percent: `model` scaled by `v`, `qos` with `min=max=100` and
    /// `rpct=wpct=0`.
    pub fn at(model: &ModelParams, qos: &QosParams, v: f64) -> Pinned {
        Pinned {
            model: model.scaled(v / 100.0),
            qos: QosParams { enable: true, rppm: 0, wppm: 0, min_ppm: 1_000_000, max_ppm: 1_000_000, ..*qos },
        }
    }
}

/// Runs a point's tenants under an IOCost.
pub trait Runner {
    /// Runs `tenants` (each with its weight) as `opts` says under IOCost with `pinned`'s lines, or
    /// with no control at all for `None`; the report's tenants are in the order given, and its
    /// `controller_series` holds the vrate the controller reported (percent of the pinned model).
    fn run(&self, pinned: Option<&Pinned>, tenants: &[TenantSpec], opts: &RunOptions) -> Result<RunReport>;
}

/// Makes a sweep's [`Runner`] once its target is open.
pub trait Control {
    /// What the result records as the controller of its points.
    fn controlled_by(&self) -> ControlledBy;

    /// The runner for `target` (the sweep's opened target; `stop` is set by Ctrl-C).
    fn open<'a>(&self, target: &'a Target, stop: &'a AtomicBool) -> Result<Box<dyn Runner + 'a>>;
}

/// ioshare's IOCost inline, on the engine's issue path (the default).
pub struct Inline;

impl Control for Inline {
    fn controlled_by(&self) -> ControlledBy {
        ControlledBy::Inline
    }

    fn open<'a>(&self, target: &'a Target, stop: &'a AtomicBool) -> Result<Box<dyn Runner + 'a>> {
        Ok(Box::new(InlineRunner { target, stop }))
    }
}

/// The engine on the sweep's target, with ioshare's IOCost or no control.
struct InlineRunner<'a> {
    target: &'a Target,
    stop: &'a AtomicBool,
}

impl Runner for InlineRunner<'_> {
    fn run(&self, pinned: Option<&Pinned>, tenants: &[TenantSpec], opts: &RunOptions) -> Result<RunReport> {
        let mut ctl: Box<dyn Controller> = match pinned {
            None => Box::new(NoControl::new()),
            Some(p) => Box::new(IoCost::new(LinearModel::new(p.model), p.qos)),
        };
        Ok(ioshare_engine::run(self.target, tenants, ctl.as_mut(), opts, self.stop)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_scales_the_model_and_pins_vrate_at_100() {
        let qos =
            QosParams { enable: true, rppm: 950_000, rlat_us: 900, wppm: 950_000, wlat_us: 2000, ..Default::default() };
        let p = Pinned::at(&ModelParams::SSD_DFL, &qos, 150.0);
        assert_eq!(p.model, ModelParams::SSD_DFL.scaled(1.5));
        assert_eq!((p.qos.min_ppm, p.qos.max_ppm, p.qos.rppm, p.qos.wppm), (1_000_000, 1_000_000, 0, 0));
        assert_eq!((p.qos.rlat_us, p.qos.wlat_us), (900, 2000), "the targets still set the planning period");
        assert!(p.qos.enable);
        assert_eq!(Pinned::at(&ModelParams::SSD_DFL, &qos, 100.0).model, ModelParams::SSD_DFL);
    }
}
