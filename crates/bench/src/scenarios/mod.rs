//! The suite's scenarios, one module each, and the one list the suite knows them by ([`ALL`]).
//! Adding a scenario: a module here that implements [`crate::plan::Planned`] (or
//! [`crate::scenario::Scenario`] itself), and one line in [`ALL`].

pub mod agent;
pub mod donation;
pub mod limits;
pub mod mixed_cost;
pub mod nbd;
pub mod overhead;
pub mod proportional;
pub mod qos_peers;
pub mod work_conserving;

use crate::scenario::Scenario;

/// Every scenario, in suite order.
pub const ALL: &[&dyn Scenario] = &[
    &proportional::Proportional,
    &work_conserving::WorkConserving,
    &mixed_cost::MixedCost,
    &limits::Limits,
    &overhead::Overhead,
    &donation::Donation,
    &agent::HostAgent,
    &qos_peers::QosPeers,
    &nbd::Nbd,
];

/// The scenario called `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Scenario> {
    ALL.iter().copied().find(|s| s.name() == name)
}

/// Names of every scenario, in suite order.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|s| s.name()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_found_by_their_unique_names() {
        assert_eq!(
            names(),
            [
                "proportional",
                "work-conserving",
                "mixed-cost",
                "limits",
                "overhead",
                "donation",
                "agent",
                "qos-peers",
                "nbd"
            ]
        );
        for n in names() {
            assert_eq!(by_name(n).unwrap().name(), n);
        }
        assert!(by_name("nope").is_none());
        let writers: Vec<&str> = ALL.iter().filter(|s| s.writes()).map(|s| s.name()).collect();
        assert_eq!(writers, ["mixed-cost"]);
    }
}
