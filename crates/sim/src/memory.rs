//! Memory pressure: a shared pool of pages, a leaking process, and the swap-out IO reclaim issues.
//!
//! The model of the paper's memory-leak experiment, reduced to what matters for IO isolation:
//! - jobs with `mem_bytes` take that much memory for each IO they issue and give it back when the
//!   IO completes (a service's transient allocations); a [`crate::Load::Leak`] job takes memory and
//!   never gives it back;
//! - when the pool has too little free memory, the allocating producer must wait for reclaim: it
//!   issues a swap-out write of `swap_kb` evicting the leaker's pages (the only reclaimable memory),
//!   and may allocate once that write completes;
//! - that write is charged according to [`SwapCharge`]: to the root (never throttled), to the group
//!   whose pages are evicted with ordinary throttling (so a victim's reclaim waits behind the
//!   leaker's budget: priority inversion), or to that group as IOCost debt (`must_issue`: issued at
//!   once, repaid later, the leaker's producer delayed).

use serde::Deserialize;

/// Who pays for swap-out IO, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwapCharge {
    /// Issued by the root: bypasses the controller, never throttled.
    Root,
    /// Charged to the owner of the evicted pages and throttled like its other IO.
    Origin,
    /// Charged to the owner as debt (`must_issue`), the kernel's IOCost behaviour.
    Debt,
}

/// A memory pool shared by every group of a scenario.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// Pool size, MB (10^6 bytes).
    pub total_mb: f64,
    /// Size of one swap-out write, KiB.
    #[serde(default = "default_swap_kb")]
    pub swap_kb: u32,
    /// How swap-out IO is charged.
    pub charge: SwapCharge,
}

fn default_swap_kb() -> u32 {
    256
}

impl Memory {
    /// A pool of `total_mb` with 256 KiB swap-out writes charged as `charge`.
    pub fn new(total_mb: f64, charge: SwapCharge) -> Memory {
        Memory { total_mb, swap_kb: default_swap_kb(), charge }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), String> {
        if self.total_mb.is_nan() || self.total_mb <= 0.0 {
            return Err(format!("memory total_mb must be positive, got {}", self.total_mb));
        }
        if self.swap_kb == 0 {
            return Err("memory swap_kb must be at least 1".into());
        }
        Ok(())
    }
}

/// Free memory of the pool while a scenario runs.
#[derive(Debug)]
pub(crate) struct Pool {
    pub free: u64,
    pub swap_bytes: u32,
    pub charge: SwapCharge,
}

impl Pool {
    pub fn new(m: &Memory) -> Pool {
        Pool { free: (m.total_mb * 1e6) as u64, swap_bytes: m.swap_kb * 1024, charge: m.charge }
    }

    /// Takes `bytes` if free.
    pub fn take(&mut self, bytes: u64) -> bool {
        if self.free >= bytes {
            self.free -= bytes;
            true
        } else {
            false
        }
    }
}
