//! A controller that records every IO's latency as the job sees it ([`Recording`]): from the
//! controller's `submit` (when the job offered the IO, before any wait in the limiter) to its
//! `complete`. The engine's report keeps only quantiles; the scenario needs the whole distribution
//! (its two modes, its chart), so it wraps the limiter and forwards every call unchanged.

use std::collections::HashMap;

use ioshare_core::{Completion, Controller, Dispatch, Event, GroupId, GroupSettings, Io, Nanos, Result, Stats, Submit};

use super::dist::Dist;

/// `inner`, with each IO's submit-to-complete latency recorded.
pub struct Recording {
    inner: Box<dyn Controller>,
    offered: HashMap<u64, Nanos>,
    latencies_ns: Vec<Nanos>,
}

impl Recording {
    /// Records the IOs `inner` controls.
    pub fn new(inner: Box<dyn Controller>) -> Recording {
        Recording { inner, offered: HashMap::new(), latencies_ns: Vec::new() }
    }

    /// The latencies recorded, as a distribution (µs, 1 µs resolution).
    pub fn dist(&self) -> Dist {
        let mut counts: HashMap<u64, f64> = HashMap::new();
        for ns in &self.latencies_ns {
            *counts.entry(ns / 1000).or_default() += 1.0;
        }
        Dist::new(counts.into_iter().map(|(us, n)| (us as f64, n)).collect())
    }
}

impl Controller for Recording {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn configure(&mut self, now: Nanos, path: &str, settings: &GroupSettings) -> Result<GroupId> {
        self.inner.configure(now, path, settings)
    }

    fn group(&self, path: &str) -> Result<GroupId> {
        self.inner.group(path)
    }

    fn remove(&mut self, now: Nanos, path: &str) -> Result<GroupId> {
        self.inner.remove(now, path)
    }

    fn submit(&mut self, now: Nanos, io: Io) -> Submit {
        self.offered.insert(io.id, now);
        self.inner.submit(now, io)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.inner.dispatch(now)
    }

    fn complete(&mut self, now: Nanos, io: &Io, timing: Completion) {
        if let Some(at) = self.offered.remove(&io.id) {
            self.latencies_ns.push(now.saturating_sub(at));
        }
        self.inner.complete(now, io, timing);
    }

    fn next_tick(&self) -> Option<Nanos> {
        self.inner.next_tick()
    }

    fn tick(&mut self, now: Nanos) {
        self.inner.tick(now);
    }

    fn stats(&self, now: Nanos) -> Stats {
        self.inner.stats(now)
    }

    fn take_events(&mut self) -> Vec<Event> {
        self.inner.take_events()
    }
}
