//! The pass-through controller: every IO is issued at once. The baseline of every comparison.

use crate::controller::{Completion, Controller, Dispatch, Event, GroupStats, Stats, Submit};
use crate::error::Result;
use crate::group::{GroupNames, GroupSettings};
use crate::io::{GroupId, Io, Nanos};

/// Issues everything immediately; counts IOs per group.
#[derive(Debug, Default)]
pub struct NoControl {
    names: GroupNames,
    weights: Vec<u32>,
    issued: Vec<u64>,
}

impl NoControl {
    /// A controller with no groups.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Controller for NoControl {
    fn name(&self) -> &'static str {
        "none"
    }

    fn configure(&mut self, _now: Nanos, path: &str, settings: &GroupSettings) -> Result<GroupId> {
        settings.validate(path)?;
        let (id, new) = self.names.insert(path)?;
        if new && id.index() == self.weights.len() {
            self.weights.push(settings.weight);
            self.issued.push(0);
        } else {
            self.weights[id.index()] = settings.weight;
            if new {
                self.issued[id.index()] = 0;
            }
        }
        Ok(id)
    }

    fn group(&self, path: &str) -> Result<GroupId> {
        self.names.require(path)
    }

    fn remove(&mut self, _now: Nanos, path: &str) -> Result<GroupId> {
        let id = self.names.remove(path, |_, _| Ok(()))?;
        (self.weights[id.index()], self.issued[id.index()]) = (0, 0);
        Ok(id)
    }

    fn submit(&mut self, _now: Nanos, io: Io) -> Submit {
        self.issued[io.group.index()] += 1;
        Submit::Issue { io, delay: 0 }
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        Dispatch::Idle
    }

    fn complete(&mut self, _now: Nanos, _io: &Io, _timing: Completion) {}

    fn next_tick(&self) -> Option<Nanos> {
        None
    }

    fn tick(&mut self, _now: Nanos) {}

    fn stats(&self, _now: Nanos) -> Stats {
        let mut stats = Stats::default();
        stats.device.vrate_pct = 100.0;
        stats.groups = (0..self.names.len())
            .map(|i| GroupStats {
                path: self.names.path(GroupId(i as u32)).to_string(),
                weight: self.weights[i],
                issued: self.issued[i],
                ..GroupStats::default()
            })
            .collect();
        stats
    }

    fn take_events(&mut self) -> Vec<Event> {
        Vec::new()
    }
}
