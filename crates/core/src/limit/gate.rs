//! The interface between the limit stage and an algorithm: a group's buckets as one gate.
//!
//! The stage ([`crate::limit::stage`]) keeps each group's waiting IO in [`Lanes`] and asks the group's
//! gate two questions: may this new IO pass now ([`Gate::offer`]), and which waiting IO may leave now,
//! or when to ask again ([`Gate::next`]). A gate charges an IO when it lets it pass. The gate sees the
//! lanes read-only; the stage appends and removes, telling the gate with [`Gate::popped`].

use crate::io::{Io, Nanos, Op};
use crate::limit::knobs::{Algorithm, Knob, Limits};
use crate::limit::lanes::Lanes;

/// Answer of [`Gate::next`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The front of this direction's lane may leave now (it has been charged).
    Release(Op),
    /// Nothing may leave before this time (always later than the `now` asked about).
    At(Nanos),
    /// Nothing waits.
    Empty,
}

/// One group's buckets under one limiting algorithm.
pub trait Gate {
    /// Controller name of the algorithm standing alone (`token-bucket`, `leaky-bucket`).
    const NAME: &'static str;
    /// The algorithm, for [`Limits::validate_for`].
    const ALGORITHM: Algorithm;

    /// Buckets for `limits` (validated for [`Gate::ALGORITHM`]) created at `now`.
    fn new(now: Nanos, limits: &Limits) -> Self;

    /// A new IO arrives at `now` (not yet in `lanes`). Returns true, having charged it, if it may pass
    /// now; false if the stage must append it to its lane.
    fn offer(&mut self, now: Nanos, lanes: &Lanes, io: &Io) -> bool;

    /// Which lane front may leave at `now` (charged), or when to ask again.
    fn next(&mut self, now: Nanos, lanes: &Lanes) -> Next;

    /// The stage removed the front of `op`'s lane after [`Next::Release`].
    fn popped(&mut self, op: Op);

    /// Charges an IO that may not wait (`must_issue`) and passes anyway, ahead of waiting IO.
    fn force(&mut self, now: Nanos, lanes: &Lanes, io: &Io);
}

/// The knobs of a group that are set, per direction, in index order: what an IO of each direction
/// must pass. Precomputed so the fast path touches only those.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveKnobs {
    knobs: [[Knob; 4]; 2],
    len: [usize; 2],
}

impl ActiveKnobs {
    /// The set knobs of `limits`.
    pub fn of(limits: &Limits) -> Self {
        let mut active = ActiveKnobs { knobs: [[Knob::IopsTotal; 4]; 2], len: [0; 2] };
        for op in [Op::Read, Op::Write] {
            for knob in Knob::ALL.into_iter().filter(|k| k.applies_to(op) && limits.knob(*k).is_set()) {
                let i = op.index();
                active.knobs[i][active.len[i]] = knob;
                active.len[i] += 1;
            }
        }
        active
    }

    /// The set knobs an IO of direction `op` must pass.
    pub fn for_op(&self, op: Op) -> &[Knob] {
        &self.knobs[op.index()][..self.len[op.index()]]
    }
}
