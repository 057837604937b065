//! Decision replay: the kernel's own periods, fed to ioshare's planner rules, decision by decision.
//!
//! Outcomes (a 2:1 split within 5%) cannot judge fidelity where the kernel's own runs differ by 20–40%
//! (the emulated lab guest). Each period's decision can be judged exactly: given the inputs the
//! kernel had, does ioshare decide what it decided? The kernel reports them at its
//! `iocost_ioc_vrate_adj` tracepoint (recorded by `ioshare observe --iocost --record`): the period's
//! missed-latency ppm, request-wait %, lagging and shortage counts, the QoS thresholds, vrate before
//! and bounds — and what it decided: the new busy level and, when that level moves vrate, the new
//! vrate. The busy level before a period is the previous period's record's; a period without a
//! record had level 0 (the kernel emits the event whenever the level is not 0, changed, or IOs lag),
//! as has a period after the device went idle (the kernel resets it then).
//!
//! What the recording cannot carry: the number of IOs completed in the period. Linux 6.1 (the lab's
//! kernel) has no rule on it; ioshare keeps the level through a period without completions while IOs
//! lag (the kernel's 2026 fix). The replay gives the rules one completion, which is 6.1's behaviour.
//! The busy level and the vrate step are replayed here; each cgroup's donation decision, from the
//! per-cgroup events, in [`donations`]. A recording holds both kinds of line ([`Recorded`]).

use serde::{Deserialize, Serialize};

mod donations;
pub use donations::{replay_donations, Cause, DonationDifference, DonationReplay, KernelDonation};

use super::planner::{adjust_vrate, adjusts_vrate, next_busy_level, PeriodSignals};

/// One period of one device as the kernel reported it (raw kernel units).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelPeriod {
    /// The device, `MAJOR << 20 | MINOR`.
    pub dev: u32,
    /// The kernel's period counter.
    pub period: u64,
    /// Base vrate before the decision (vtime per µs; 100% = [`super::model::VTIME_PER_USEC`]).
    pub vrate: u64,
    /// The event's new vrate: the decision when the level moves vrate.
    pub new_vrate: u64,
    /// vrate bounds, same units.
    pub vrate_min: u64,
    /// See `vrate_min`.
    pub vrate_max: u64,
    /// Busy level after the decision.
    pub busy_level: i32,
    /// Reads, writes that missed their target, ppm.
    pub missed_ppm: [u32; 2],
    /// Request wait, % of the period.
    pub rq_wait_pct: u32,
    /// Cgroups with IOs lagging.
    pub nr_lagging: i32,
    /// Cgroups short of budget.
    pub nr_shortages: i32,
    /// QoS: share of reads / writes that must meet their target, ppm.
    pub rppm: u32,
    /// See `rppm`.
    pub wppm: u32,
    /// Active cgroups at the event: with none, the period ends the device's activity and the
    /// kernel resets the busy level.
    pub nr_active: u32,
}

/// One line of a recording: a period's vrate decision or one cgroup's donation decision.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Recorded {
    /// A period (`iocost_ioc_vrate_adj`).
    Period(KernelPeriod),
    /// A cgroup's donation decision (`iocost_inuse_transfer`, `iocost_inuse_shortage`).
    Donation(KernelDonation),
}

/// A recording's decisions of both kinds, as read from the kernel or from a file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recording {
    /// The periods' vrate decisions.
    pub periods: Vec<KernelPeriod>,
    /// The cgroups' donation decisions.
    pub donations: Vec<KernelDonation>,
}

impl Recording {
    /// Keeps only device `dev`'s decisions.
    pub fn of_device(mut self, dev: u32) -> Recording {
        self.periods.retain(|p| p.dev == dev);
        self.donations.retain(|d| d.dev == dev);
        self
    }

    /// Its lines, periods first, each as [`Recorded`] serializes it.
    pub fn lines(&self) -> impl Iterator<Item = Recorded> + '_ {
        self.periods.iter().copied().map(Recorded::Period).chain(self.donations.iter().copied().map(Recorded::Donation))
    }

    /// Whether it holds no decision.
    pub fn is_empty(&self) -> bool {
        self.periods.is_empty() && self.donations.is_empty()
    }
}

impl FromIterator<Recorded> for Recording {
    fn from_iter<I: IntoIterator<Item = Recorded>>(lines: I) -> Recording {
        let mut out = Recording::default();
        for line in lines {
            match line {
                Recorded::Period(p) => out.periods.push(p),
                Recorded::Donation(d) => out.donations.push(d),
            }
        }
        out
    }
}

/// What differed in one period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    /// The kernel's record.
    pub kernel: KernelPeriod,
    /// The busy level before, as the replay inferred it.
    pub prev_busy_level: i32,
    /// ioshare's busy level.
    pub busy_level: i32,
    /// ioshare's vrate (the kernel's `vrate` when it does not move it).
    pub vrate: u64,
}

/// The replay of a recording: periods compared, identical, and every difference.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Replay {
    /// Periods compared.
    pub periods: u64,
    /// Of them, where ioshare decided the same busy level and vrate.
    pub identical: u64,
    /// The others.
    pub differences: Vec<Difference>,
}

impl Replay {
    /// Share of the periods decided identically (1.0 for none compared).
    pub fn identical_share(&self) -> f64 {
        if self.periods == 0 {
            1.0
        } else {
            self.identical as f64 / self.periods as f64
        }
    }
}

/// ioshare's decision for period `p` after a period at busy level `prev`: (busy level, vrate).
pub fn decide(prev: i32, p: &KernelPeriod) -> (i32, u64) {
    const MILLION: u64 = 1_000_000;
    let signals = PeriodSignals {
        missed_ppm: p.missed_ppm,
        rq_wait_pct: p.rq_wait_pct,
        ppm_rthr: MILLION - u64::from(p.rppm).min(MILLION),
        ppm_wthr: MILLION - u64::from(p.wppm).min(MILLION),
        nr_shortages: p.nr_shortages.max(0) as u32,
        nr_lagging: p.nr_lagging.max(0) as u32,
        // Not recorded; see the module comment.
        nr_done: 1,
    };
    let busy = next_busy_level(prev, &signals);
    let vrate = match adjusts_vrate(busy, signals.nr_lagging) {
        true => adjust_vrate(p.vrate, busy, p.vrate_min, p.vrate_max),
        false => p.vrate,
    };
    (busy, vrate)
}

/// Replays `periods` (any order, any devices): each against ioshare's decision from the busy level
/// its device's previous period left.
pub fn replay(periods: &[KernelPeriod]) -> Replay {
    let mut sorted = periods.to_vec();
    sorted.sort_by_key(|p| (p.dev, p.period));
    let mut out = Replay::default();
    let mut last: Option<&KernelPeriod> = None;
    for p in &sorted {
        let prev = match last {
            Some(l) if l.dev == p.dev && l.period + 1 == p.period && l.nr_active > 0 => l.busy_level,
            _ => 0,
        };
        let (busy_level, vrate) = decide(prev, p);
        let kernel_vrate = if adjusts_vrate(p.busy_level, p.nr_lagging.max(0) as u32) { p.new_vrate } else { p.vrate };
        out.periods += 1;
        if busy_level == p.busy_level && vrate == kernel_vrate {
            out.identical += 1;
        } else {
            out.differences.push(Difference { kernel: *p, prev_busy_level: prev, busy_level, vrate });
        }
        last = Some(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iocost::model::VTIME_PER_USEC;

    /// A period of device 1 at vrate 100% (bounds 50–150%), targets met by 90% of reads.
    fn period(n: u64, busy_level: i32) -> KernelPeriod {
        KernelPeriod {
            dev: 1,
            period: n,
            vrate: VTIME_PER_USEC,
            new_vrate: VTIME_PER_USEC,
            vrate_min: VTIME_PER_USEC / 2,
            vrate_max: VTIME_PER_USEC * 3 / 2,
            busy_level,
            rppm: 900_000,
            wppm: 900_000,
            nr_active: 2,
            ..KernelPeriod::default()
        }
    }

    #[test]
    fn a_run_of_missed_periods_is_replayed_exactly_and_a_wrong_record_is_reported() {
        // Reads miss in periods 10..16: the level climbs 1..6, vrate steps 1% down from level 4.
        let mut periods: Vec<KernelPeriod> =
            (10..16).map(|n| KernelPeriod { missed_ppm: [200_000, 0], ..period(n, (n - 9) as i32) }).collect();
        let mut vrate = VTIME_PER_USEC;
        for p in &mut periods {
            p.vrate = vrate;
            p.new_vrate = adjust_vrate(vrate, p.busy_level, p.vrate_min, p.vrate_max);
            vrate = if p.busy_level >= 4 { p.new_vrate } else { vrate };
        }
        // Then targets met with margin and one group short: level -1 (after a gap: from 0).
        periods.push(KernelPeriod { nr_shortages: 1, vrate, new_vrate: vrate, ..period(30, -1) });
        let r = replay(&periods);
        assert_eq!((r.periods, r.identical, r.differences.len()), (7, 7, 0), "{r:?}");
        assert!(vrate < VTIME_PER_USEC, "the replayed run stepped vrate down");
        // A record the rules cannot produce: level 3 right after level 1.
        periods[1].busy_level = 3;
        let r = replay(&periods);
        assert_eq!(r.identical, 5);
        assert_eq!(r.differences[0].kernel.period, 11);
        assert_eq!((r.differences[0].prev_busy_level, r.differences[0].busy_level), (1, 2));
        assert_eq!(r.differences[1].prev_busy_level, 3, "the next period starts from the kernel's level");
        assert!((r.identical_share() - 5.0 / 7.0).abs() < 1e-12);
        // A period that ended with no active cgroup resets the level: the next starts from 0.
        periods[1].busy_level = 2;
        periods[1].nr_active = 0;
        periods[2].busy_level = 1;
        let r = replay(&periods);
        assert_eq!((r.identical, r.differences.len()), (6, 1), "{r:?}");
        assert_eq!(r.differences[0].kernel.period, 13, "12 follows 11's reset, 13 then differs from 12's 1");
    }

    #[test]
    fn lagging_ios_keep_vrate_below_zero_and_the_hysteresis_band_coasts() {
        // Level -1 with a lagging group: the kernel does not move vrate (new_vrate is then its
        // effective rate, which the replay does not compare).
        let lagging = KernelPeriod { nr_shortages: 1, nr_lagging: 1, new_vrate: 12345, ..period(5, 0) };
        assert_eq!(decide(0, &lagging), (0, VTIME_PER_USEC));
        assert_eq!(replay(&[lagging]).identical, 1);
        // 9% of reads missing against a 10% allowance: inside the band, level 0 whatever came before.
        let band = KernelPeriod { missed_ppm: [90_000, 0], ..period(6, 0) };
        assert_eq!(decide(7, &band).0, 0);
    }
}
