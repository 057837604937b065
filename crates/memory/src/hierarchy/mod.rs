//! The memory guard on each hierarchy: cgroup v1 ([`v1`]) and cgroup v2 ([`v2`]).

pub mod v1;
pub mod v2;
