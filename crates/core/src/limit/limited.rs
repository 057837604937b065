//! Composition: a limit stage in front of any controller.
//!
//! `Limited<C, G>` is itself a [`Controller`]. An IO first passes its group's limits (gate `G`); only
//! then is it submitted to the inner controller `C`, which applies its own policy (IOCost's
//! proportional budget, or nothing for [`NoControl`]). So a group may have a weight and limits at
//! once: the limits cap it, and the weights share what the caps leave. Limits only is
//! `Limited<NoControl, G>`, weight only is `C` alone (or `Limited` with no limits set), neither is
//! `NoControl`.
//!
//! Groups are created by the inner controller (which may add ancestors); the stage follows its ids.
//! Limits apply to the IO a group issues itself, not to its descendants'. Statistics are the inner
//! controller's with the stage's queue and wait added. A producer delay the inner controller asks for
//! when a held-back IO reaches it cannot travel through [`Dispatch`]; it shows in the inner's stats.

use crate::controller::{Completion, Controller, Dispatch, Event, Stats, Submit};
use crate::error::Result;
use crate::group::GroupSettings;
use crate::io::{GroupId, Io, Nanos};
use crate::limit::gate::Gate;
use crate::limit::leaky_gate::LeakyGate;
use crate::limit::stage::LimitStage;
use crate::limit::token_gate::TokenGate;
use crate::none::NoControl;

/// Limits (algorithm `G`) applied in front of the controller `C`.
#[derive(Clone, Debug)]
pub struct Limited<C, G> {
    inner: C,
    stage: LimitStage<G>,
}

/// librbd's token bucket on its own.
pub type TokenBucketLimiter = Limited<NoControl, TokenGate>;
/// QEMU's leaky bucket on its own.
pub type LeakyBucketLimiter = Limited<NoControl, LeakyGate>;

impl<C: Controller, G: Gate> Limited<C, G> {
    /// Limits in front of `inner`.
    pub fn new(inner: C) -> Self {
        Limited { inner, stage: LimitStage::default() }
    }

    /// The same limits with each limited group's lanes reserved for `ios` IOs when its limits are
    /// set, so that holding IO back allocates nothing until a lane holds more (the inner controller
    /// reserves its own queues, e.g. [`crate::IoCost::reserving`]).
    pub fn reserving(mut self, ios: usize) -> Self {
        self.stage.reserve = ios;
        self
    }

    /// The inner controller.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// The limiter state of group `id`, if it has limits.
    pub fn gate(&self, id: GroupId) -> Option<&G> {
        self.stage.gate(id)
    }
}

impl<C: Controller + Default, G: Gate> Default for Limited<C, G> {
    fn default() -> Self {
        Limited::new(C::default())
    }
}

impl<C: Controller, G: Gate> Controller for Limited<C, G> {
    /// The limiter's name (`token-bucket`, `leaky-bucket`); see [`Limited::inner`] for the rest.
    fn name(&self) -> &'static str {
        G::NAME
    }

    fn configure(&mut self, now: Nanos, path: &str, settings: &GroupSettings) -> Result<GroupId> {
        settings.validate(path)?;
        settings.limits.validate_for(G::ALGORITHM).map_err(|e| e.for_group(path))?;
        let id = self.inner.configure(now, path, settings)?;
        self.stage.configure(now, id, &settings.limits);
        Ok(id)
    }

    fn group(&self, path: &str) -> Result<GroupId> {
        self.inner.group(path)
    }

    fn remove(&mut self, now: Nanos, path: &str) -> Result<GroupId> {
        let id = self.inner.group(path)?;
        self.stage.check_empty(id, path)?;
        self.inner.remove(now, path)?;
        self.stage.clear(id);
        Ok(id)
    }

    fn submit(&mut self, now: Nanos, io: Io) -> Submit {
        if self.stage.admit(now, io) {
            self.inner.submit(now, io)
        } else {
            Submit::Queued
        }
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        let limits_next = loop {
            match self.stage.dispatch(now) {
                Dispatch::Io(io) => match self.inner.submit(now, io) {
                    Submit::Issue { io, .. } => return Dispatch::Io(io),
                    Submit::Queued => continue,
                },
                Dispatch::At(at) => break Some(at),
                Dispatch::Idle => break None,
            }
        };
        match self.inner.dispatch(now) {
            Dispatch::Io(io) => Dispatch::Io(io),
            Dispatch::At(at) => Dispatch::At(limits_next.map_or(at, |l| l.min(at))),
            Dispatch::Idle => limits_next.map_or(Dispatch::Idle, Dispatch::At),
        }
    }

    fn complete(&mut self, now: Nanos, io: &Io, timing: Completion) {
        self.inner.complete(now, io, timing);
    }

    fn next_tick(&self) -> Option<Nanos> {
        self.inner.next_tick()
    }

    fn tick(&mut self, now: Nanos) {
        self.inner.tick(now);
    }

    fn stats(&self, now: Nanos) -> Stats {
        let mut stats = self.inner.stats(now);
        for (i, group) in stats.groups.iter_mut().enumerate() {
            let id = GroupId(i as u32);
            group.queued += self.stage.queued(id);
            group.wait_us += self.stage.waited_us(id);
        }
        stats
    }

    fn take_events(&mut self) -> Vec<Event> {
        self.inner.take_events()
    }
}
