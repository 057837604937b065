//! Memory pressure: a shared pool of pages, a leaking process, and the swap-out IO reclaim issues.
//!
//! The model of the paper's memory-leak experiment, reduced to what matters for IO isolation:
//! - jobs with `mem_bytes` take that much memory for each IO they issue and give it back when the
//!   IO completes (a service's transient allocations); a [`crate::Load::Leak`] job takes memory and
//!   never gives it back;
//! - allocations are served in order: a producer that finds too little free memory, or others
//!   already waiting, queues behind them; reclaim then issues swap-out writes of `swap_kb`, evicting
//!   the leaker's pages (the only reclaimable memory), until the waiters' needs are covered, and
//!   every completed write (like every freed allocation) serves the queue from its head. So a
//!   victim's allocation waits for the swap IO in front of it: how fast that IO goes decides how
//!   long the victim stalls;
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

/// Swap-out writes in flight at most (reclaim's own concurrency).
const MAX_SWAP_INFLIGHT: u64 = 32;

/// A producer waiting for memory: (job, slot, bytes, since when).
pub(crate) type Waiter = (u32, u32, u64, ioshare_core::Nanos);

/// The pool while a scenario runs.
#[derive(Debug)]
pub(crate) struct Pool {
    free: u64,
    waiters: std::collections::VecDeque<Waiter>,
    waiting_bytes: u64,
    swap_inflight: u64,
    pub swap_bytes: u32,
    pub charge: SwapCharge,
}

impl Pool {
    pub fn new(m: &Memory) -> Pool {
        Pool {
            free: (m.total_mb * 1e6) as u64,
            waiters: Default::default(),
            waiting_bytes: 0,
            swap_inflight: 0,
            swap_bytes: m.swap_kb * 1024,
            charge: m.charge,
        }
    }

    /// Takes `need` bytes if nobody is waiting and they are free; else queues the producer.
    pub fn allocate(&mut self, w: Waiter) -> bool {
        if self.waiters.is_empty() && self.free >= w.2 {
            self.free -= w.2;
            return true;
        }
        self.waiting_bytes += w.2;
        self.waiters.push_back(w);
        false
    }

    /// Returns memory: an allocation given back, or a completed swap-out write.
    pub fn release(&mut self, bytes: u64, swap: bool) {
        self.free += bytes;
        if swap {
            self.swap_inflight -= 1;
        }
    }

    /// The next waiter whose need is now free, taking its memory.
    pub fn serve(&mut self) -> Option<Waiter> {
        let &w = self.waiters.front()?;
        if self.free < w.2 {
            return None;
        }
        self.free -= w.2;
        self.waiting_bytes -= w.2;
        self.waiters.pop_front()
    }

    /// Whether another swap-out write is needed to cover the waiters (and may be issued); counts it.
    pub fn needs_swap(&mut self) -> bool {
        let coming = self.free + self.swap_inflight * self.swap_bytes as u64;
        if self.waiting_bytes > coming && self.swap_inflight < MAX_SWAP_INFLIGHT {
            self.swap_inflight += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_queue_in_order_and_reclaim_covers_the_deficit() {
        let mut p = Pool::new(&Memory { total_mb: 0.01, swap_kb: 4, charge: SwapCharge::Debt });
        assert!(p.allocate((0, 0, 6_000, 0)), "10 kB free");
        assert!(!p.allocate((1, 0, 8_192, 1)), "4 kB left: waits");
        assert!(!p.allocate((2, 0, 100, 2)), "small, but behind a waiter");
        // Deficit 8292 − 4000 free: two 4 KiB writes.
        assert!(p.needs_swap() && p.needs_swap() && !p.needs_swap());
        p.release(4096, true);
        assert_eq!(p.serve(), None, "8096 free: not yet enough for the head, and nobody passes it");
        p.release(4096, true);
        assert_eq!(p.serve().map(|w| w.0), Some(1), "12192 free: the head is served");
        assert_eq!(p.serve().map(|w| w.0), Some(2));
        assert_eq!(p.serve(), None);
        assert!(!p.needs_swap());
    }
}
