//! What the agent shows: the status file ([`status`]) that `ioshare agent status` prints, the
//! `/metrics` endpoint built from it ([`metrics`]), each cgroup's effective share with what keeps a
//! weight from acting ([`share`]), the log ([`logging`]) and the period trace ([`trace`]).

pub mod cpu;
pub mod logging;
pub mod metrics;
pub mod share;
pub mod status;
pub mod trace;
