//! What is wanted: the admin's TOML file ([`config`]), which rule takes which cgroup ([`rules`]), the
//! pods a `[kubernetes]` section brings ([`pods`]), and the one list of cgroups to apply that both
//! make, with each cgroup's weight and caps ([`targets`]: where a pod's weight becomes its cgroups'
//! weights). A device's model may be measured at start ([`profile`]), or taken with its QoS from a
//! tune result ([`tuned`]).

pub mod config;
pub(crate) mod pods;
pub mod profile;
pub(crate) mod rules;
pub(crate) mod targets;
pub mod tuned;
