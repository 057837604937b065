//! IOCost (placeholder while the controller is written; see model.rs and qos.rs).

pub mod line;
pub mod model;
pub mod qos;

use crate::controller::{Completion, Controller, Dispatch, Event, Stats, Submit};
use crate::error::Result;
use crate::group::GroupSettings;
use crate::io::{GroupId, Io, Nanos};
use model::{CostModel, LinearModel};
use qos::QosParams;

/// The IOCost controller of one device.
#[derive(Debug)]
pub struct IoCost<M: CostModel = LinearModel> {
    model: M,
    qos: QosParams,
}

impl<M: CostModel> IoCost<M> {
    /// A controller for a device described by `model`, with latency QoS `qos`.
    pub fn new(model: M, qos: QosParams) -> Self {
        IoCost { model, qos }
    }
}

impl<M: CostModel> Controller for IoCost<M> {
    fn name(&self) -> &'static str {
        "iocost"
    }
    fn configure(&mut self, _now: Nanos, _path: &str, _settings: &GroupSettings) -> Result<GroupId> {
        let _ = (&self.model, &self.qos);
        todo!()
    }
    fn submit(&mut self, _now: Nanos, _io: Io) -> Submit {
        todo!()
    }
    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        todo!()
    }
    fn complete(&mut self, _now: Nanos, _io: &Io, _timing: Completion) {
        todo!()
    }
    fn next_tick(&self) -> Option<Nanos> {
        todo!()
    }
    fn tick(&mut self, _now: Nanos) {
        todo!()
    }
    fn stats(&self, _now: Nanos) -> Stats {
        todo!()
    }
    fn take_events(&mut self) -> Vec<Event> {
        todo!()
    }
}
