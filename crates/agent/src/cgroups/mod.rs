//! The host's cgroups as the agent finds them: what the host offers and so which backend runs
//! ([`check`]), the files of the cgroup tree the agent reads and writes ([`hierarchy`]), and the
//! values someone else overwrote there, written back ([`reapply`]). Both backends, the memory guard
//! and the reports stand on it.

pub mod check;
pub mod hierarchy;
pub mod reapply;
