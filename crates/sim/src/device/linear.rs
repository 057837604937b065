//! The linear device: N identical servers whose service time follows the device's own linear cost
//! model, with a FIFO in front.
//!
//! An IO occupies one server for `N × cost` where `cost` is the model's device time for it
//! (`vtime_to_ns(model.cost(op, len, random, false))`), so that with every server busy the device
//! delivers exactly the throughput its model describes, and an IO alone takes N × its cost. The
//! model's random/sequential decision uses a cursor per group, as the controller does, so a
//! controller given the same parameters is exactly right; give it `ModelParams::scaled(2.0)` to be
//! 2× too optimistic or `scaled(0.5)` to be 2× too pessimistic.

use ioshare_core::iocost::model::{vtime_to_ns, RANDIO_PAGES};
use ioshare_core::{CostModel, LinearModel, ModelParams, Nanos};
use serde::Deserialize;

use super::common::{at_speed, DeviceModel, Request, Service};
use crate::spec::ModelLine;

/// Parameters of a [`Linear`] device.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearSpec {
    /// The device's true cost model (in TOML an `io.cost.model` line or preset, e.g. `"ssd_dfl"`).
    pub model: ModelLine,
    /// Parallel servers.
    pub servers: u32,
    /// IOs the device accepts at once (its tags / NCQ depth); more wait in front of it, and the
    /// controller sees that wait as `started > released`. Default: 4 × servers.
    #[serde(default)]
    pub queue_depth: Option<u32>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Linear {
    model: LinearModel,
    servers: u32,
    queue_depth: u32,
    /// Where each group's last IO ended (`u64::MAX`: none yet), for the random/sequential decision.
    cursors: Vec<u64>,
}

impl Linear {
    /// A device from its parameters.
    pub fn new(spec: &LinearSpec) -> Self {
        let params: ModelParams = spec.model.into();
        Linear {
            model: LinearModel::new(params),
            servers: spec.servers,
            queue_depth: spec.queue_depth.unwrap_or(4 * spec.servers),
            cursors: Vec::new(),
        }
    }
}

impl DeviceModel for Linear {
    fn describe(&self) -> String {
        let p = self.model.params;
        format!("linear x{} (rrandiops={} wrandiops={} rbps={})", self.servers, p.rrandiops, p.wrandiops, p.rbps)
    }

    fn servers(&self) -> u32 {
        self.servers
    }

    fn queue_depth(&self) -> u32 {
        self.queue_depth
    }

    fn serve(&mut self, now: Nanos, req: &Request, speed: f64) -> Service {
        let g = req.group as usize;
        if g >= self.cursors.len() {
            self.cursors.resize(g + 1, u64::MAX);
        }
        let cursor = self.cursors[g];
        let random = cursor == u64::MAX || cursor.abs_diff(req.offset) > RANDIO_PAGES * 4096;
        self.cursors[g] = req.offset + req.len as u64;
        let cost = vtime_to_ns(self.model.cost(req.op, req.len, random, false));
        let busy = at_speed(cost * self.servers as f64, speed);
        Service { start: now, done: now + busy, busy }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::common::Device;
    use ioshare_core::Op;

    fn req(token: u32, offset: u64) -> Request {
        Request { token, group: 0, op: Op::Read, offset, len: 4096 }
    }

    #[test]
    fn service_is_n_times_model_cost_and_fifo_when_full() {
        let spec = LinearSpec { model: ModelParams::SSD_DFL.into(), servers: 2, queue_depth: None };
        let mut d = Device::new(Linear::new(&spec));
        let cost = vtime_to_ns(LinearModel::new(ModelParams::SSD_DFL).cost(Op::Read, 4096, true, false));
        let a = d.arrive(0, req(1, 0)).unwrap();
        assert_eq!(a.busy, (2.0 * cost).round() as u64);
        assert!(d.arrive(0, req(2, 1 << 30)).is_some());
        assert!(d.arrive(10, req(3, 2 << 30)).is_none(), "both servers busy: queued");
        let c = d.finish(a.done, a.slot).unwrap();
        assert_eq!((c.token, c.start, c.slot), (3, a.done, a.slot));
        // The next IO right after the previous one of the group is sequential: cheaper.
        let seq = d.finish(c.done, c.slot);
        assert!(seq.is_none());
        let s = d.arrive(c.done, req(4, (2 << 30) + 4096)).unwrap();
        assert!(s.busy < c.busy);
    }
}
