//! Each cgroup's sequential/random mix, taken from the eBPF observer, for the userspace backend's
//! charges.
//!
//! The counters the backend reads say how many IOs and bytes a cgroup did, not whether they were
//! sequential. The kernel's iocost decides that per bio, from the distance between the bio's start and
//! the end of the cgroup's previous IO on the device: random beyond [`RANDIO_PAGES`] (16 MiB).
//! `ioshare-observe` keeps exactly that distance per (device, cgroup) at Q (`block_bio_queue`, where
//! the kernel's iocost classifies too) as a log2 histogram whose buckets up to [`SEQ_BUCKETS`] end at
//! 16 MiB. So the share of a period's IOs in those buckets is the share the kernel would have charged
//! as sequential, and a direction's charge for the period becomes ([`mixed_cost`])
//! `share × cost(sequential) + (1 − share) × cost(random)` for its IOs at their average size.
//!
//! A cgroup's IO counters include its descendants, so its share does too. IO the observer could not
//! place (a cgroup's first IO has no predecessor) counts as random, as does everything when the
//! observer cannot run (not root, no BTF, programs refused): then the backend charges all IO as
//! random, as it did before, and says why once in the log.

use std::collections::HashMap;

use ioshare_core::iocost::aggregate::aggregate_cost;
use ioshare_core::iocost::model::RANDIO_PAGES;
use ioshare_core::{CostModel, Op};
use ioshare_host::DevNum;
use ioshare_observe::{Observer, Snapshot, Stage, Stages};

/// Seek histogram buckets `0..SEQ_BUCKETS` hold distances up to 16 MiB (`RANDIO_PAGES` 4 KiB pages):
/// the IOs the kernel's iocost charges as sequential.
pub const SEQ_BUCKETS: usize = {
    // Kind::Seek bucket k >= 2 holds (2^(k-2), 2^(k-1)] sectors; 16 MiB = 2^15 sectors is bucket 16.
    let sectors = RANDIO_PAGES * 8;
    (64 - (sectors - 1).leading_zeros()) as usize + 2
};

/// IOs within 16 MiB of the previous one, and all IOs with a predecessor, in one period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    sequential: u64,
    total: u64,
}

/// The observer of one device and the mix it saw in the last period.
#[derive(Debug)]
pub struct IoMix {
    observer: Option<Observer>,
    last: Option<Snapshot>,
    /// Per (cgroup path in the blkio/io hierarchy, direction): the last period's counts.
    period: HashMap<(String, Op), Counts>,
}

impl IoMix {
    /// Watches device `dev`; when the observer cannot run, logs why once and charges all IO as random.
    pub fn start(dev: DevNum) -> IoMix {
        // Only Q: the mix needs Q's seek distances, not the other stages or latencies (a quarter of the
        // observer's cost per IO).
        let observer = match Observer::start_with(Some((dev.major, dev.minor)), None, Stages::QueueOnly) {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::warn!(dev = %dev, "charging all IO as random (no sequential/random mix: {e})");
                None
            }
        };
        IoMix { observer, last: None, period: HashMap::new() }
    }

    /// Whether the observer runs (else every share is 0).
    pub fn observing(&self) -> bool {
        self.observer.is_some()
    }

    /// Reads what happened since the last call (call once per planning period, with the counters).
    pub fn refresh(&mut self) {
        let Some(observer) = self.observer.as_mut() else { return };
        let now = match observer.snapshot() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("observer stopped, charging all IO as random from now on: {e}");
                self.observer = None;
                self.period.clear();
                return;
            }
        };
        self.period.clear();
        if let Some(last) = &self.last {
            for e in now.since(last).entries {
                let op = match e.op {
                    ioshare_observe::Op::Read => Op::Read,
                    ioshare_observe::Op::Write => Op::Write,
                    ioshare_observe::Op::Other => continue,
                };
                let seek = &e.stage(Stage::Q).seek;
                let (sequential, total) = (seek.buckets.iter().take(SEQ_BUCKETS).sum::<u64>(), seek.count());
                let c = self.period.entry((e.cgroup, op)).or_default();
                c.sequential += sequential;
                c.total += total;
            }
        }
        self.last = Some(now);
    }

    /// The share (0..=1) of cgroup `rel`'s (and its descendants') IOs in direction `op` that were
    /// sequential in the last period; 0 when nothing was seen.
    pub fn sequential_share(&self, rel: &str, op: Op) -> f64 {
        let path = format!("/{}", rel.trim_matches('/'));
        let inside = |cgroup: &str| cgroup == path || cgroup.strip_prefix(&path).is_some_and(|r| r.starts_with('/'));
        let c = self.period.iter().filter(|((cgroup, o), _)| *o == op && inside(cgroup)).fold(
            Counts::default(),
            |a, (_, c)| Counts { sequential: a.sequential + c.sequential, total: a.total + c.total },
        );
        if c.total == 0 {
            0.0
        } else {
            c.sequential as f64 / c.total as f64
        }
    }

    /// Absolute cost of cgroup `rel`'s `ios` IOs of direction `op` totalling `bytes` in the last
    /// period, charged by its observed mix ([`mixed_cost`]).
    pub fn charge<M: CostModel>(&self, model: &M, rel: &str, op: Op, ios: u64, bytes: u64) -> u64 {
        mixed_cost(model, op, ios, bytes, self.sequential_share(rel, op))
    }
}

/// Absolute cost of `ios` IOs of direction `op` totalling `bytes`, a share `sequential` (0..=1) of them
/// sequential: each part is charged at the average IO size, the sequential part at the model's
/// sequential base cost and the rest at its random one.
fn mixed_cost<M: CostModel>(model: &M, op: Op, ios: u64, bytes: u64, sequential: f64) -> u64 {
    if ios == 0 {
        return 0;
    }
    let seq_ios = ((ios as f64 * sequential.clamp(0.0, 1.0)).round() as u64).min(ios);
    let seq_bytes = (u128::from(bytes) * u128::from(seq_ios) / u128::from(ios)) as u64;
    aggregate_cost(model, op, seq_ios, seq_bytes, false)
        + aggregate_cost(model, op, ios - seq_ios, bytes - seq_bytes, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::{LinearModel, ModelParams};
    use ioshare_observe::Kind;

    #[test]
    fn sequential_buckets_end_at_16_mib() {
        assert_eq!(Kind::Seek.upper_bound(SEQ_BUCKETS - 1), f64::from(16 << 11));
        assert_eq!(Kind::Seek.bucket(16 << 11), SEQ_BUCKETS - 1);
        assert_eq!(Kind::Seek.bucket((16 << 11) + 1), SEQ_BUCKETS);
    }

    #[test]
    fn mixed_cost_weighs_sequential_and_random_coefficients() {
        let model = LinearModel::new(ModelParams::SSD_DFL);
        let (ios, bytes) = (1000, 1000 * 65536);
        let seq = aggregate_cost(&model, Op::Read, ios, bytes, false);
        let rand = aggregate_cost(&model, Op::Read, ios, bytes, true);
        assert!(seq < rand);
        assert_eq!(mixed_cost(&model, Op::Read, ios, bytes, 1.0), seq);
        assert_eq!(mixed_cost(&model, Op::Read, ios, bytes, 0.0), rand);
        // A quarter sequential: 250 IOs at the sequential price, 750 at the random one.
        let quarter = aggregate_cost(&model, Op::Read, 250, 250 * 65536, false)
            + aggregate_cost(&model, Op::Read, 750, 750 * 65536, true);
        assert_eq!(mixed_cost(&model, Op::Read, ios, bytes, 0.25), quarter);
        assert_eq!(mixed_cost(&model, Op::Write, 0, 0, 0.5), 0);
    }

    #[test]
    fn a_cgroup_share_includes_its_descendants_only() {
        let mut mix = IoMix { observer: None, last: None, period: HashMap::new() };
        let counts = |sequential, total| Counts { sequential, total };
        mix.period.insert(("/t/a".into(), Op::Read), counts(90, 100));
        mix.period.insert(("/t/a/child".into(), Op::Read), counts(10, 100));
        mix.period.insert(("/t/ab".into(), Op::Read), counts(0, 100));
        mix.period.insert(("/t/a".into(), Op::Write), counts(0, 50));
        assert_eq!(mix.sequential_share("t/a", Op::Read), 0.5);
        assert_eq!(mix.sequential_share("/t/ab/", Op::Read), 0.0);
        assert_eq!(mix.sequential_share("t/a", Op::Write), 0.0);
        assert_eq!(mix.sequential_share("t/none", Op::Read), 0.0);
        assert_eq!(mix.sequential_share("t", Op::Read), 100.0 / 300.0);
    }
}
