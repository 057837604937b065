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
//!
//! The observer's table holds a fixed number of (device, cgroup, direction) series, never freed: on
//! a host where containers come and go by the thousand it fills with series of removed cgroups —
//! each read every period, so the reading costs more and more — and then the IO of new ones is no
//! longer seen (the observer counts it as dropped). So once series of removed cgroups number
//! [`STALE_SERIES`] and as many as the live ones, or the table overflowed with at least half of it
//! stale, the mix starts a fresh observer (an empty table; one period without a mix) and logs it.
//! When the live cgroups alone fill the table, it logs once that IO it cannot place is charged as
//! random. (Whether a series' cgroup is gone is looked up every [`STALE_CHECK_EVERY`] new series.)

use std::collections::HashMap;
use std::path::PathBuf;

use ioshare_core::iocost::aggregate::aggregate_cost;
use ioshare_core::iocost::model::RANDIO_PAGES;
use ioshare_core::{CostModel, Op};
use ioshare_host::{Capabilities, DevNum};
use ioshare_observe::{Observer, Snapshot, Stage, Stages};

/// Seek histogram buckets `0..SEQ_BUCKETS` hold distances up to 16 MiB (`RANDIO_PAGES` 4 KiB pages):
/// the IOs the kernel's iocost charges as sequential.
pub const SEQ_BUCKETS: usize = {
    // Kind::Seek bucket k >= 2 holds (2^(k-2), 2^(k-1)] sectors; 16 MiB = 2^15 sectors is bucket 16.
    let sectors = RANDIO_PAGES * 8;
    (64 - (sectors - 1).leading_zeros()) as usize + 2
};

/// Series of removed cgroups (and at least as many as the live ones) in the observer's table that
/// make the mix start a fresh observer.
pub const STALE_SERIES: usize = 256;

/// New series in the table between two looks at which of its cgroups are gone.
pub const STALE_CHECK_EVERY: usize = 64;

/// IOs within 16 MiB of the previous one, and all IOs with a predecessor, in one period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    sequential: u64,
    total: u64,
}

/// What the mix keeps of a snapshot: per (cgroup id, direction), the cgroup's path and its counts
/// so far; and the IOs the observer dropped so far.
#[derive(Debug, Default)]
struct Reading {
    series: HashMap<(u64, Op), (String, Counts)>,
    dropped: u64,
}

impl Reading {
    fn of(snapshot: &Snapshot) -> Reading {
        let mut series = HashMap::new();
        for e in &snapshot.entries {
            let op = match e.op {
                ioshare_observe::Op::Read => Op::Read,
                ioshare_observe::Op::Write => Op::Write,
                ioshare_observe::Op::Other => continue,
            };
            let seek = &e.stage(Stage::Q).seek;
            let counts = Counts { sequential: seek.buckets.iter().take(SEQ_BUCKETS).sum(), total: seek.count() };
            series.insert((e.cgroup_id, op), (e.cgroup.clone(), counts));
        }
        Reading { series, dropped: snapshot.counters.dropped_stats_full }
    }
}

/// The observer of one device and the mix it saw in the last period.
#[derive(Debug)]
pub struct IoMix {
    dev: DevNum,
    observer: Option<Observer>,
    /// The last reading (`None` before the first of an observer): per series, its cgroup's path
    /// and counts so far (only what the mix needs of a snapshot, which holds every histogram).
    last: Option<Reading>,
    /// Per (cgroup path in the blkio/io hierarchy, direction): the last period's counts.
    period: HashMap<(String, Op), Counts>,
    /// The hierarchy the observer names cgroups in (to tell removed ones).
    root: Option<PathBuf>,
    /// Whether a table full of live cgroups was logged.
    full_logged: bool,
    /// Series in the table at the last look at which cgroups are gone.
    checked_series: usize,
}

impl IoMix {
    /// Watches device `dev`; when the observer cannot run, logs why once and charges all IO as random.
    pub fn start(dev: DevNum) -> IoMix {
        let caps = Capabilities::probe();
        let root = caps.blkio_v1.or(caps.cgroup_v2);
        IoMix {
            dev,
            observer: observe(dev),
            last: None,
            period: HashMap::new(),
            root,
            full_logged: false,
            checked_series: 0,
        }
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
        if self.renew_if_stale(&now) {
            return;
        }
        let now = Reading::of(&now);
        if let Some(last) = &self.last {
            for (key, (cgroup, c)) in &now.series {
                let before = last.series.get(key).map_or(Counts::default(), |(_, c)| *c);
                let p = self.period.entry((cgroup.clone(), key.1)).or_default();
                p.sequential += c.sequential.saturating_sub(before.sequential);
                p.total += c.total.saturating_sub(before.total);
            }
        }
        self.last = Some(now);
    }

    /// Starts a fresh observer when the table holds too many series of removed cgroups (see the
    /// module comment): true when it did (no mix this period). Logs a table full of live cgroups.
    fn renew_if_stale(&mut self, now: &Snapshot) -> bool {
        let series = now.entries.len();
        let dropped = now.counters.dropped_stats_full;
        let overflowed = self.last.as_ref().is_some_and(|l| dropped > l.dropped);
        if !overflowed && series < self.checked_series + STALE_CHECK_EVERY {
            return false;
        }
        self.checked_series = series;
        let removed = |cgroup: &str| {
            cgroup.starts_with('#')
                || self.root.as_ref().is_some_and(|r| !r.join(cgroup.trim_start_matches('/')).exists())
        };
        let stale = now.entries.iter().filter(|e| removed(&e.cgroup)).count();
        let live = series - stale;
        if stale >= STALE_SERIES.max(live) || (overflowed && 2 * stale >= series) {
            tracing::info!(
                dev = %self.dev,
                "the observer's table holds {series} series, {stale} of removed cgroups ({dropped} IOs not seen): started afresh"
            );
            self.observer = None; // its maps are freed before the new ones are made
            self.observer = observe(self.dev);
            self.last = None;
            self.checked_series = 0;
            return true;
        }
        if overflowed && !self.full_logged {
            self.full_logged = true;
            tracing::warn!(
                dev = %self.dev,
                "the observer's table is full ({live} series of live cgroups): IO it cannot place is charged as random"
            );
        }
        false
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

/// An observer of the bios queued to device `dev`, or `None` (logged why).
fn observe(dev: DevNum) -> Option<Observer> {
    // Only Q, not the observer's default light detail (C alone, one program per IO too, at about the
    // same cost per run): the mix needs the seek distance per bio in submission order, which is what
    // the kernel's iocost classifies (at its issue path, before merging) and what the blk-throttle
    // counters the backend charges count. At C the unit is the request — sequential bios merged into
    // one count once — and the order is completion order, so the share there is not the share of the
    // counted IOs the kernel would charge as sequential. No other stage, no latencies.
    match Observer::start_with(Some((dev.major, dev.minor)), None, Stages::QueueOnly) {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!(dev = %dev, "charging all IO as random (no sequential/random mix: {e})");
            None
        }
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
        let mut mix = IoMix {
            dev: DevNum { major: 7, minor: 0 },
            observer: None,
            last: None,
            period: HashMap::new(),
            root: None,
            full_logged: false,
            checked_series: 0,
        };
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
