//! A memory cgroup this process creates on either hierarchy, for the tests and experiments that
//! run the same scenario on cgroup v1 (this host) and cgroup v2 (the lab guest): the v1 `memory`
//! hierarchy's [`MemCgroup`], or a [`Cgroup2`] with `+memory` enabled on the way down.

use std::path::Path;

use super::v1::MemCgroup;
use super::v2::Memcg;
use crate::cgroup2::Cgroup2;
use crate::error::Result;

/// A memory cgroup this process creates on either hierarchy — v1 `memory` ([`MemCgroup`]) or v2
/// with `+memory` enabled on the way down ([`Cgroup2`]) — and removes on drop (tests, experiments).
#[derive(Debug)]
pub enum AnyMemCgroup {
    /// On the v1 memory hierarchy.
    V1(MemCgroup),
    /// On cgroup v2.
    V2(Cgroup2),
}

impl AnyMemCgroup {
    /// Creates `name` below this process's cgroup of the chosen hierarchy; refused if it exists.
    pub fn create(v2: bool, name: &str) -> Result<AnyMemCgroup> {
        Ok(if v2 {
            AnyMemCgroup::V2(Cgroup2::create(name, &["memory"])?)
        } else {
            AnyMemCgroup::V1(MemCgroup::create(name)?)
        })
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        match self {
            AnyMemCgroup::V1(g) => g.memcg().path(),
            AnyMemCgroup::V2(g) => g.path(),
        }
    }

    /// Memory charged to it, bytes (`memory.usage_in_bytes` or `memory.current`).
    pub fn usage(&self) -> Result<u64> {
        match self {
            AnyMemCgroup::V1(g) => g.memcg().usage(),
            AnyMemCgroup::V2(g) => Memcg::at(g.path())?.current(),
        }
    }

    /// Sets its hard limit (`memory.limit_in_bytes` or `memory.max`).
    pub fn set_limit(&self, bytes: u64) -> Result<()> {
        match self {
            AnyMemCgroup::V1(g) => g.memcg().set_limit(bytes),
            AnyMemCgroup::V2(g) => Memcg::at(g.path())?.set_max(Some(bytes)),
        }
    }

    /// Spawns `cmd` inside it (joins before exec, so every allocation is charged here).
    pub fn spawn(&self, cmd: std::process::Command) -> Result<std::process::Child> {
        match self {
            AnyMemCgroup::V1(g) => g.spawn(cmd),
            AnyMemCgroup::V2(g) => g.spawn(cmd),
        }
    }
}
