//! Whether the planner has a group donating: the status, the classification and the budget ask.

use ioshare_core::GroupStats;

/// How far a group's in-use share must fall below its active share for it to count as donating
/// (hweights are 16-bit fixed point: a smaller gap is rounding).
pub const DONATING_SLACK: f64 = 1e-3;

/// Whether the planner has the group donating part of its share this period.
pub(crate) fn donating(g: &GroupStats) -> bool {
    g.hweight_inuse + DONATING_SLACK < g.hweight_active
}
