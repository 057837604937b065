//! What the agent shows: the status file ([`status`]) that `ioshare agent status` prints, the
//! `/metrics` endpoint built from it ([`metrics`]), each cgroup's effective share with what keeps a
//! weight from acting ([`share`]), the log ([`logging`]), the period trace ([`trace`]) and a tuned
//! device's drift from its tune result's curve ([`drift`]).

pub mod cpu;
pub mod drift;
pub mod logging;
pub mod metrics;
pub mod share;
pub mod status;
pub mod trace;
