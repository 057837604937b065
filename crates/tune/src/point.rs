//! Measuring one vrate point on real IO, with ioshare's IOCost inline.
//!
//! Two tenants, in the roles of resctl-bench's rd-hashd and memory hog:
//! - the **latency-sensitive** tenant: 4 KiB random reads paced at a request rate, with as many in
//!   flight as the rate needs at twice its latency target (Little's law) — so, like a service with
//!   bounded concurrency, latency beyond that costs it throughput;
//! - the **antagonist**: sequential 64 KiB writes at QD8 and random 4 KiB reads at QD32, saturating.
//!
//! At vrate V the controller is IOCost with the cost model scaled by V and vrate pinned at 100%
//! (`min=max=100`, [`Pinned`]): the same as pinning `min=max=V` on the model, without the kernel's
//! 4%-a-period walk from 100% to V at the start of every run, and exactly the lines a solution
//! prints. Which IOCost runs them is the [`Runner`]'s business (ioshare's inline, or the kernel's).
//! The vrate reported is the effective one (the controller's × V).
//!
//! The latency target is judged at p95, the percentile IOCost itself judges on a non-rotational
//! disk (the default target is 1.5 × the profile's read p95): on a shared 2-CPU host the p99 of a
//! userspace engine's reads holds the scheduling stalls of other work, which no vrate changes.
//!
//! Per point: **MOF** — the highest rate the tenant sustains alone (≥ 95% of asked) with its p95
//! within target, by bisection; **aMOF** — the same beside the antagonist with isolation ≥
//! [`PROTECTED`], bisected below MOF from the tenant's weight share of it; and one longer
//! **isolation run** beside the antagonist at the baseline's asked rate, which gives isolation (p05
//! of the per-sample achieved ÷ asked), latency impact, work conserved, and the vrate and latency
//! tables. Samples are 0.1 s (the anchor's are 1 s): a point lasts seconds, not minutes, and the p05
//! of 1 s samples would be the worst of a few.

use ioshare_core::{ModelParams, Nanos, QosParams, NSEC_PER_MSEC, NSEC_PER_SEC};
use ioshare_engine::report::{RunReport, TenantReport};
use ioshare_engine::{JobSpec, Pattern, RunOptions, TenantSpec};

use crate::data::{Baseline, Point, Trial};
use crate::error::{Error, Result};
use crate::runner::{Pinned, Runner};
use crate::stats::{mean_stdev, quantile, LatTable, VrateDist};

/// Isolation a protected rate must reach: the p05 of per-sample achieved ÷ asked (resctl's 90%).
pub const PROTECTED: f64 = 0.9;
/// Share of the asked rate a solo run must achieve to count.
const SOLO_ACHIEVED: f64 = 0.95;
/// The isolation runs ask for this share of the tenant's weight share of the baseline MOF (the
/// anchor's protection runs start at 0.8 × the service's share).
const ASKED_SHARE: f64 = 0.8;
/// Per-sample interval, ns.
const SAMPLE: Nanos = 100 * NSEC_PER_MSEC;
/// Warm-up of every run, ns (queues fill; the controller is pinned from the start).
const WARMUP: Nanos = 200 * NSEC_PER_MSEC;
/// How far the paced tenant may fall behind and still issue what it missed, ns: requests keep
/// arriving while the engine's thread is off the CPU, and one sample's worth is caught up (a tenant
/// held back longer by the controller loses the rest, which isolation counts).
const CATCH_UP: Nanos = SAMPLE;
/// Fewest IOs the latency-sensitive tenant may keep in flight (a service answers a few requests at once).
const MIN_DEPTH: u32 = 4;
/// Most IOs the latency-sensitive tenant keeps in flight.
const MAX_DEPTH: u32 = 256;

/// How long the runs of a point are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// One bisection step, ns (warm-up included).
    pub step: Nanos,
    /// The isolation run, ns.
    pub isolation: Nanos,
    /// Bisection steps for MOF at a point.
    pub mof_steps: u32,
    /// Bisection steps for aMOF.
    pub amof_steps: u32,
    /// Bisection steps for the baseline MOF.
    pub baseline_steps: u32,
}

impl Timing {
    /// The default sweep's runs: 1 s steps (5 for MOF, 6 for aMOF: its runs above the rise are
    /// what `isolated-bandwidth` is read from), a 3 s isolation run.
    pub fn default_sweep() -> Timing {
        Timing { step: NSEC_PER_SEC, isolation: 3 * NSEC_PER_SEC, mof_steps: 5, amof_steps: 6, baseline_steps: 8 }
    }

    /// `--quick`: 0.7 s steps, 3 each, a 2 s isolation run (bisection to an eighth of the range).
    pub fn quick() -> Timing {
        Timing {
            step: 700 * NSEC_PER_MSEC,
            isolation: 2 * NSEC_PER_SEC,
            mof_steps: 3,
            amof_steps: 3,
            baseline_steps: 6,
        }
    }

    /// Expected length of one point, ns (for the ETA).
    pub fn per_point(&self) -> Nanos {
        self.step * (self.mof_steps + self.amof_steps) as u64 + self.isolation
    }
}

/// What the runs share: who runs them, the model, the tenants' weights and target, the timing.
pub struct Rig<'a> {
    /// Runs the tenants on the target under the IOCost in control.
    pub runner: &'a dyn Runner,
    /// The cost model a point scales.
    pub model: ModelParams,
    /// Latency targets for the planning period (percentiles are not used: vrate is pinned).
    pub qos: QosParams,
    /// Weights: latency-sensitive tenant, antagonist.
    pub weights: (u32, u32),
    /// The tenant's p95 target, µs.
    pub lat_target_us: u64,
    /// Run lengths.
    pub timing: Timing,
    /// IOs per submission (1 where merges could not be switched off).
    pub submit_batch: u32,
}

/// Which tenants a run has.
#[derive(Clone, Copy)]
enum Who {
    Tenant(f64),
    Antagonist,
    Both(f64),
}

/// The highest rate in (0, hi] that passes, in `steps` runs, the first ones as `start` says,
/// then midpoints between the highest pass and the lowest miss (geometric after
/// [`Start::TopThenFloor`]), until a midpoint is no longer strictly between them — which ends a
/// search whose top passed, and a geometric one whose floor missed. 0 when nothing passes.
fn search(hi: f64, start: Start, steps: u32, mut pass: impl FnMut(f64, u32) -> Result<bool>) -> Result<f64> {
    let (mut lo, mut hi) = (0.0, hi.round().max(1.0));
    for i in 0..steps {
        let rate = match (i, start) {
            (0, Start::Share(share)) => (share * hi).round().max(1.0),
            (0, _) => hi,
            (1, Start::TopThenFloor(f)) => f.round().max(1.0),
            (_, Start::TopThenFloor(_)) => (lo * hi).sqrt().round(),
            _ => ((lo + hi) / 2.0).round().max(1.0),
        };
        if i > 0 && (rate <= lo || rate >= hi) {
            break;
        }
        if pass(rate, i)? {
            lo = rate;
        } else {
            hi = rate;
        }
    }
    Ok(lo)
}

/// Where a bisection starts.
#[derive(Clone, Copy)]
enum Start {
    /// At the top of the range; a pass there ends it.
    Top,
    /// At the top, then at this floor (nothing passes when it misses), then geometric midpoints:
    /// for the baseline, whose range spans orders of magnitude.
    TopThenFloor(f64),
    /// At this share of the range: aMOF, where the tenant's weight share of MOF is what the
    /// controller is there to give it, so the runs land about where passes turn into misses
    /// (started at MOF, which a saturating antagonist at 1:1 let pass at none of 60 points in three
    /// sweeps here, the first run of a point told nothing and the rest stepped by eighths).
    Share(f64),
}

impl Rig<'_> {
    /// The latency-sensitive tenant's weight share.
    fn share(&self) -> f64 {
        self.weights.0 as f64 / (self.weights.0 + self.weights.1) as f64
    }

    /// Run 0, uncontrolled: the tenant's MOF alone, its latency at the asked rate, the antagonist alone.
    pub fn baseline(&self, progress: &mut dyn FnMut(&str)) -> Result<Baseline> {
        let hi = self.model.rrandiops as f64 * 1.2;
        let steps = self.timing.baseline_steps;
        let mut lowest_miss: Option<(f64, f64, f64)> = None;
        let mof = search(hi, Start::TopThenFloor(hi / 256.0), steps, |rate, i| {
            progress(&format!("baseline: capacity alone, step {}/{steps} at {rate:.0} IOPS", i + 1));
            let r = self.run(None, Who::Tenant(rate), self.timing.step)?;
            let (ok, p95) = self.solo_ok(&r, rate);
            if !ok && lowest_miss.is_none_or(|(r0, _, _)| rate < r0) {
                lowest_miss = Some((rate, p95, r.tenants[0].iops));
            }
            Ok(ok)
        })?;
        if mof <= 0.0 {
            let (rate, p95, got) = lowest_miss.unwrap_or((hi, f64::NAN, f64::NAN));
            return Err(Error::Unreachable(format!(
                "the latency-sensitive tenant cannot meet its target alone and uncontrolled even at {rate:.0} IOPS (it did \
                 {got:.0} IOPS, p95 {p95:.0} us against a target of {} us): give a --lat-target above that, or tune when \
                 the host is quieter",
                self.lat_target_us
            )));
        }
        let asked = (mof * self.share() * ASKED_SHARE).max(1.0).round();
        progress(&format!("baseline: the tenant alone at {asked:.0} IOPS"));
        let solo = self.run(None, Who::Tenant(asked), self.timing.isolation)?;
        progress("baseline: the antagonist alone");
        let ant = self.run(None, Who::Antagonist, self.timing.isolation)?;
        Ok(Baseline {
            mof_iops: mof,
            asked_iops: asked,
            lat: LatTable::of(self.samples(&solo.tenants[0], self.timing.isolation)),
            antagonist_bw: ant.tenants[0].bw_bytes,
            antagonist_iops: ant.tenants[0].iops,
        })
    }

    /// Measures the point at vrate `v` percent.
    pub fn point(&self, v: f64, base: &Baseline, progress: &mut dyn FnMut(&str)) -> Result<Point> {
        let started = std::time::Instant::now();
        let t = self.timing;
        let hi = (base.mof_iops.min(self.model.rrandiops as f64 * v / 100.0) * 1.1).max(1.0);
        let mut mof = 0.0;
        // A point where every step missed, though the baseline passed, is searched once more: on a
        // shared disk a stall of other IO can cover a whole search of short runs.
        for attempt in 0..2 {
            mof = search(hi, Start::Top, t.mof_steps, |rate, i| {
                let again = if attempt > 0 { " (again)" } else { "" };
                progress(&format!("capacity alone{again}, step {}/{} at {rate:.0} IOPS", i + 1, t.mof_steps));
                let r = self.run(Some(v), Who::Tenant(rate), t.step)?;
                Ok(self.solo_ok(&r, rate).0)
            })?;
            if mof > 0.0 {
                break;
            }
        }
        let mut amof_trials = Vec::new();
        let amof = if mof > 0.0 {
            search(mof, Start::Share(self.share()), t.amof_steps, |rate, i| {
                progress(&format!("protected capacity, step {}/{} at {rate:.0} IOPS", i + 1, t.amof_steps));
                let r = self.run(Some(v), Who::Both(rate), t.step)?;
                let iso = quantile(&self.achieved(&r.tenants[0], rate, t.step), 0.05);
                let passed = iso >= PROTECTED && r.tenants[0].lat_us.p95 <= self.lat_target_us as f64;
                amof_trials.push(Trial { iops: rate, passed });
                Ok(passed)
            })?
        } else {
            0.0
        };
        progress(&format!("isolation at {:.0} IOPS beside the antagonist", base.asked_iops));
        let r = self.run(Some(v), Who::Both(base.asked_iops), t.isolation)?;
        let (ls, ant) = (&r.tenants[0], &r.tenants[1]);
        let ratios = self.achieved(ls, base.asked_iops, t.isolation);
        let solo_p90 = base.lat.p90.mean.max(1.0);
        let impact: Vec<f64> =
            self.samples(ls, t.isolation).filter(|s| s.iops > 0.0).map(|s| (s.p90_us - solo_p90) / solo_p90).collect();
        let vrates: Vec<f64> = r
            .controller_series
            .iter()
            .filter(|c| c.t_s * 1e9 >= WARMUP as f64)
            .map(|c| c.vrate_pct * v / 100.0)
            .collect();
        Ok(Point {
            vrate_pct: v,
            mof_iops: mof,
            amof_iops: amof,
            isolation: finite(quantile(&ratios, 0.05)),
            isolation_mean: finite(mean_stdev(&ratios).0),
            lat_p99_us: ls.lat_us.p99,
            lat_impact: {
                let (m, sd) = mean_stdev(&impact);
                (finite(m), finite(sd))
            },
            work_conserved: ant.bw_bytes / base.antagonist_bw.max(1.0),
            antagonist_p99_us: ant.lat_us.p99,
            vrate: VrateDist::of(&vrates),
            lat: LatTable::of(self.samples(ls, t.isolation)),
            took_s: started.elapsed().as_secs_f64(),
            amof_trials,
        })
    }

    /// Whether a solo run at `rate` achieved it within target, and its p95.
    fn solo_ok(&self, r: &RunReport, rate: f64) -> (bool, f64) {
        let t = &r.tenants[0];
        (t.iops >= SOLO_ACHIEVED * rate && t.lat_us.p95 <= self.lat_target_us as f64, t.lat_us.p95)
    }

    /// The samples of a run of `len` ns after its warm-up.
    fn samples<'r>(
        &self,
        t: &'r TenantReport,
        len: Nanos,
    ) -> impl Iterator<Item = &'r ioshare_engine::report::TenantSample> + 'r {
        t.window(WARMUP as f64 / 1e9, len as f64 / 1e9)
    }

    /// Per-sample achieved ÷ asked after the warm-up.
    fn achieved(&self, t: &TenantReport, asked: f64, len: Nanos) -> Vec<f64> {
        self.samples(t, len).map(|s| s.iops / asked.max(1.0)).collect()
    }

    /// One run: `who` under IOCost pinned at `vrate` percent (`None`: uncontrolled).
    fn run(&self, vrate: Option<f64>, who: Who, duration: Nanos) -> Result<RunReport> {
        let mut tenants = Vec::new();
        if let Who::Tenant(rate) | Who::Both(rate) = who {
            tenants.push(self.latency_tenant(rate));
        }
        if matches!(who, Who::Antagonist | Who::Both(_)) {
            tenants.push(self.antagonist());
        }
        let pinned = vrate.map(|v| Pinned::at(&self.model, &self.qos, v));
        let opts = RunOptions {
            warmup: WARMUP,
            sample_every: SAMPLE,
            submit_batch: self.submit_batch,
            ..RunOptions::new(duration)
        };
        let report = self.runner.run(pinned.as_ref(), &tenants, &opts)?;
        if report.interrupted {
            return Err(Error::Interrupted("the point under way is dropped".into()));
        }
        Ok(report)
    }

    fn latency_tenant(&self, rate: f64) -> TenantSpec {
        let depth =
            (rate * 2.0 * self.lat_target_us as f64 / 1e6).ceil().clamp(MIN_DEPTH as f64, MAX_DEPTH as f64) as u32;
        let job = JobSpec {
            rate_iops: Some(rate.max(1.0) as u64),
            catch_up: CATCH_UP,
            ..JobSpec::new(Pattern::RandRead, 4096, depth)
        };
        TenantSpec::new("latency-sensitive", self.weights.0, job)
    }

    fn antagonist(&self) -> TenantSpec {
        let mut t = TenantSpec::new("antagonist", self.weights.1, JobSpec::new(Pattern::Write, 64 << 10, 8));
        t.jobs.push(JobSpec::new(Pattern::RandRead, 4096, 32));
        t
    }
}

/// `x`, or 0 for a figure with no samples behind it (NaN does not survive JSON).
fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates a search tries against a tenant that passes up to `limit`, and what it returns.
    fn tried(hi: f64, start: Start, steps: u32, limit: f64) -> (Vec<f64>, f64) {
        let mut rates = Vec::new();
        let found = search(hi, start, steps, |rate, _| {
            rates.push(rate);
            Ok(rate <= limit)
        })
        .unwrap();
        (rates, found)
    }

    /// aMOF at 1:1 starts at half of MOF and steps by sixteenths after four runs; from the top (the
    /// MOF search) the first run at MOF misses and the rest step by eighths; the baseline's floor
    /// ends the search when it misses.
    #[test]
    fn searches_start_where_their_start_says() {
        let (rates, found) = tried(1600.0, Start::Share(0.5), 4, 950.0);
        assert_eq!((rates, found), (vec![800.0, 1200.0, 1000.0, 900.0], 900.0));
        let (rates, found) = tried(1600.0, Start::Top, 4, 950.0);
        assert_eq!((rates, found), (vec![1600.0, 800.0, 1200.0, 1000.0], 800.0));
        assert_eq!(tried(1600.0, Start::Top, 4, 2000.0), (vec![1600.0], 1600.0), "a pass at the top ends it");
        assert_eq!(tried(1600.0, Start::TopThenFloor(16.0), 8, 10.0), (vec![1600.0, 16.0], 0.0));
    }
}
