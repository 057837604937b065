//! `--scenario agent`: the host agent on real processes, beside what the kernel offers.
//!
//! Two tenants, each an independent process (an engine worker, started as its own `ioshare`
//! process) in its own cgroup on a loop device over the target — the kernel peers' machinery
//! ([`Peers`]) — both saturating 4 KiB random readers at QD64 with weights A:B. Half-way through,
//! the high-weight tenant drops to a tenth of the device (its saturating job ends; a job capped at
//! 10% of the calibrated IOPS runs throughout). Controlled by: nothing, BFQ weights, static
//! blk-throttle limits at the weight shares of the device's capacity, the ceiling (the high-weight
//! tenant free, the other held to its share by blk-throttle), the agent's userspace backend
//! (IOCost planner writing blk-throttle limits every [`PERIOD_S`]), and — where the host has cgroup
//! v2 with iocost — the agent's kernel backend. One run each, one table.
//!
//! What the controllers are given comes from the uncontrolled run, which runs first: the device's
//! capacity for these two tenants (its total IOPS before the drop) and its p50 latency then. The
//! static limits are the weight shares of that capacity; the agent gets the suite's calibrated model
//! (one process at QD32 on the file, as `ioshare profile` measures) scaled to that capacity, and
//! that p50 as its latency target (vrate 20–500%) — as a user would configure it after profiling
//! the device under its real load. Why not the calibration as it is: one process at QD32 gets a
//! third to a half less than two at QD64 through a loop device here, and a model that far below the
//! device costs the agent that much throughput until vrate has climbed (1–2% per 100 ms period, the
//! kernel's step table) — the calibration's error, not the agent's. The 10% the high-weight tenant
//! drops to is of the calibrated IOPS.
//!
//! Judged on each run's samples (every [`SAMPLE_S`]), for the agent's backends (the subjects; the
//! others carry the same figures for comparison):
//! - before the drop (from [`SETTLE_S`] into the run to the middle): IOPS ratio A/B within
//!   ±[`RATIO_TOLERANCE`], and the total at least [`CEILING_MIN`] of the ceiling's: the most a
//!   controller that writes limits gets at A:B on this device. In the ceiling runs the high-weight
//!   tenant is never throttled and the other is held to its share of the uncontrolled total, then
//!   (a second round) to a B/A-th of what the high one did in the first; a round's total at
//!   exactly A:B counts the low one's IOPS up to a B/A-th of the high one's and the high one's up to
//!   A/B times the low one's. The first round runs before the agent's runs and the second after
//!   them, and each run is judged against the mean of the rounds on its two sides
//!   ([`ceiling_beside`]). Why not the uncontrolled total: on a loop device 128 IOs in flight from two
//!   readers get more than any split that holds one of them back (limits at 2:1 got below 90% of
//!   it in half of the runs of the agent's precision matrix, with the high one free), so a share of
//!   the uncontrolled total judges the device as much as the controller;
//! - after the drop, from two agent periods after it to the end: the low-weight tenant gets at least
//!   [`DONATED_MIN`] of what is left — the uncontrolled total in the same window minus what the
//!   high-weight tenant still does (a single reader process may not reach the whole device's rate,
//!   so the device's capacity for this mix is what no control did with it). No control runs first
//!   and again last, and each run is judged against the mean of the two ([`beside`]), as for the
//!   ceiling: with one uncontrolled run half a minute before the agent's, this yardstick carried the
//!   disk's drift (the ceiling read 83–119% of that run's total from run to run).

use std::sync::atomic::AtomicBool;

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::{ModelConfig, Nanos, QosParams, NSEC_PER_SEC};
use ioshare_engine::job::{JobSpec, Pattern, TenantSpec};
use ioshare_engine::run::RunOptions;

use crate::calibrate::Calibration;
use crate::error::Result;
use crate::kernel::{KernelSetup, Peers, AGENT_PERIOD};
use crate::options::BenchOptions;
use crate::report::ScenarioReport;
use crate::scenario::{Context, Described, Scenario};
use crate::stats::median;
use crate::verdict::{RunEntry, Side, Verdict};

/// The scenario's name.
pub const NAME: &str = "agent";
/// What it shows.
pub const DESCRIPTION: &str = "two saturating 4 KiB random readers (QD64) as separate processes in their own cgroups, \
     weights A:B; mid-run the high-weight one drops to 10% of the device -> with the agent (userspace backend; kernel \
     backend where cgroup v2 has iocost): ratio A/B ±10% and total >= 93% of the ceiling (the high one free, the other \
     held to its share) before the drop, the other takes >= 85% of what is left from 2 periods after it";
/// IOPS ratio tolerance before the drop (acceptance ±10%, goal ±5%).
pub const RATIO_TOLERANCE: f64 = 0.10;
/// Total before the drop, share of the ceiling's total at the same ratio (see the module comment).
pub const CEILING_MIN: f64 = 0.93;
/// Share of the capacity left after the drop the low-weight tenant must take (acceptance; goal 95%).
pub const DONATED_MIN: f64 = 0.85;
/// The agent's planning period, s (that of the bench's agent peers).
pub const PERIOD_S: f64 = AGENT_PERIOD.as_secs_f64();
/// Sample interval, s: one agent period, so the donation is judged from two periods after the drop.
pub const SAMPLE_S: f64 = PERIOD_S;
/// Before-the-drop window starts here (s): the warm-up plus a second for the agent's limits and
/// vrate to settle from "no limits" at the start.
pub const SETTLE_S: f64 = 1.5;
/// The agent's vrate bounds, ppm: 20%..500%.
pub const AGENT_VRATE_PPM: (u32, u32) = (200_000, 5_000_000);
/// Ceiling runs: the low tenant held to its share of the uncontrolled total, then to the high
/// one's rate in the round before ÷ A/B (at its share it may take device time the free high one
/// would use, when the device is the CPU).
pub const CEILING_ROUNDS: usize = 2;
/// Shortest run: each half must hold a settled window of a few seconds.
pub const MIN_DURATION: Nanos = 8 * NSEC_PER_SEC;

/// The scenario.
pub struct HostAgent;

impl Described for HostAgent {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    /// Only where it can run: root, kernel peers asked for.
    fn in_default_suite(&self, opts: &BenchOptions) -> bool {
        opts.kernel_peers && ioshare_host::is_root()
    }
}

impl Scenario for HostAgent {
    /// The uncontrolled runs (first and last), then each controller this host supports (none
    /// without kernel peers).
    fn planned_runs(&self, opts: &BenchOptions, cal: &Calibration, peers: Option<&Peers>, _: bool) -> usize {
        let controlled = controlled(opts, cal, cal.max_iops, f64::NAN);
        let runs = |s: &KernelSetup| if matches!(s, KernelSetup::Ceiling { .. }) { CEILING_ROUNDS } else { 1 };
        peers.map_or(0, |p| 2 + controlled.iter().filter(|s| p.supports(s)).map(runs).sum::<usize>())
    }

    /// Runs the scenario's runs (kernel peers only; without them it reports why it did not run).
    fn run(
        &self,
        ctx: &Context,
        peers: Option<&mut Peers>,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&str),
    ) -> Result<ScenarioReport> {
        let mut report = ScenarioReport {
            name: NAME.into(),
            description: DESCRIPTION.into(),
            runs: Vec::new(),
            verdict: Verdict {
                pass: false,
                value: f64::NAN,
                summary: "not run: it needs the kernel peers (root: loop device, cgroups, worker processes)".into(),
            },
            notes: Vec::new(),
            observed: Vec::new(),
            curves: Vec::new(),
        };
        let Some(peers) = peers else { return Ok(report) };
        let calibration = ctx.calibration;
        let duration = ctx.opts.duration.max(MIN_DURATION);
        let opts = RunOptions { sample_every: (SAMPLE_S * 1e9) as Nanos, ..RunOptions::new(duration) };
        let tenants = tenants(ctx.opts, calibration.max_iops, duration);
        let runs = Runs { ctx, tenants: &tenants, opts: &opts, stop };
        let Some(none) = runs.run(peers, &KernelSetup::Plain, None, progress)? else {
            report.verdict = Verdict::not_judged();
            return Ok(report);
        };
        report.runs.push(none);
        let (h, l) = phases(&report.runs[0], duration)[0];
        let capacity = h + l;
        let setups = controlled(ctx.opts, calibration, capacity, saturated_p50_us(&report.runs[0], duration));
        report.notes.push(format!(
            "{}: the calibration's {:.0} IOPS (one process at QD32 on the file), {capacity:.0} by the two tenants \
             uncontrolled on the loop device — the static limits' and the agent's reference: {}",
            peers.device().display(),
            calibration.max_iops,
            setups
                .iter()
                .filter_map(|s| match s {
                    KernelSetup::Agent { model, qos } => Some(format!(
                        "model {} qos rpct=50 rlat={} min={} max={}",
                        ModelConfig { device: None, ctrl: Ctrl::User, params: *model },
                        qos.rlat_us,
                        qos.min_ppm / 10_000,
                        qos.max_ppm / 10_000
                    )),
                    _ => None,
                })
                .collect::<String>()
        ));
        let subjects: Vec<&str> = setups
            .iter()
            .filter(|s| matches!(s, KernelSetup::Agent { .. } | KernelSetup::AgentKernel { .. }))
            .map(|s| s.name())
            .collect();
        let (a, b) = ctx.opts.weights;
        // The ceiling's first round where it stands in `setups`, its second after the agent's runs:
        // each agent run is judged against the rounds on both sides of it (see `ceiling_beside`).
        let mut second_round: Option<KernelSetup> = None;
        for setup in &setups {
            if let Some(needs) = peers.unsupported(setup) {
                report.notes.push(format!("{}: not run on this host ({needs})", setup.name()));
                continue;
            }
            let ceiling = matches!(setup, KernelSetup::Ceiling { .. });
            let Some(entry) = runs.run(peers, setup, ceiling.then_some(1), progress)? else { break };
            if ceiling {
                // The second round holds the low one to the high one's rate here ÷ A/B.
                let (high, _) = phases(&entry, duration)[0];
                second_round = Some(KernelSetup::Ceiling { lo_iops: ((high * b as f64 / a as f64) as u64).max(1) });
            }
            report.runs.push(entry);
        }
        if let Some(setup) = second_round {
            if let Some(entry) = runs.run(peers, &setup, Some(CEILING_ROUNDS), progress)? {
                report.runs.push(entry);
            }
        }
        // No control again, for the leftover's yardstick on the agent's other side.
        if let Some(entry) = runs.run(peers, &KernelSetup::Plain, None, progress)? {
            report.runs.push(entry);
        }
        judge_all(ctx.opts, duration, &subjects, &mut report);
        let (observed, observe_notes) = ctx.take_observed();
        report.observed = observed;
        report.notes.extend(observe_notes);
        Ok(report)
    }
}

/// What every run of the scenario shares.
struct Runs<'a> {
    ctx: &'a Context<'a>,
    tenants: &'a [TenantSpec],
    opts: &'a RunOptions,
    stop: &'a AtomicBool,
}

impl Runs<'_> {
    /// One run of `setup` (`round` of the ceiling's), observed as the others; `None` once stopped.
    fn run(
        &self,
        peers: &mut Peers,
        setup: &KernelSetup,
        round: Option<usize>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Option<RunEntry>> {
        if self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(None);
        }
        let of = round.map(|r| format!(", round {r} of {CEILING_ROUNDS}")).unwrap_or_default();
        progress(&format!("{} (one process and cgroup per tenant{of})", setup.name()));
        let device = peers.device().to_path_buf();
        let report = self.ctx.observed(Side::Kernel, setup.name(), Some(&device), || {
            peers.run(setup, Some(self.ctx.calibration), self.tenants, self.opts)
        })?;
        Ok(Some(RunEntry { side: Side::Kernel, report, verdict: None }))
    }
}

/// High (weight A) saturating until the middle, plus 10% of the device's IOPS (`max_iops`)
/// throughout; low (weight B) saturating.
fn tenants(opts: &BenchOptions, max_iops: f64, duration: Nanos) -> Vec<TenantSpec> {
    let (a, b) = opts.weights;
    let reader = |name: &str, weight: u32| TenantSpec::new(name, weight, JobSpec::new(Pattern::RandRead, 4096, 64));
    let mut high = reader("high", a);
    high.jobs[0].runtime = Some(duration / 2);
    let mut tenth = JobSpec::new(Pattern::RandRead, 4096, 4);
    tenth.rate_iops = Some(((max_iops / 10.0) as u64).max(1));
    high.jobs.push(tenth);
    vec![high, reader("low", b)]
}

/// The controllers after the uncontrolled run, which measured what the device does for these two
/// tenants: `capacity` IOPS (one process at QD32 — the calibration, `ioshare profile` — gets less
/// from a loop device than two at QD64) at a p50 of `p50_us`. BFQ; static limits at the weight
/// shares of `capacity`; the ceiling (the high one free, the low one at its share); the agent's
/// two backends with the calibrated model scaled to `capacity`
/// and that p50 as latency target (vrate 20–500%).
fn controlled(opts: &BenchOptions, cal: &Calibration, capacity: f64, p50_us: f64) -> Vec<KernelSetup> {
    let (a, b) = opts.weights;
    let share = |w: u32| ((capacity * w as f64 / (a + b) as f64) as u64).max(1);
    let model = cal.model.scaled(capacity / cal.max_iops.max(1.0));
    let lat = p50_us.ceil().max(1.0) as u64;
    let qos = QosParams {
        enable: true,
        rppm: 500_000,
        rlat_us: lat,
        wppm: 500_000,
        wlat_us: lat,
        min_ppm: AGENT_VRATE_PPM.0,
        max_ppm: AGENT_VRATE_PPM.1,
    };
    vec![
        KernelSetup::Bfq,
        KernelSetup::ReadIopsLimits(vec![share(a), share(b)]),
        KernelSetup::Ceiling { lo_iops: share(b) },
        KernelSetup::Agent { model, qos },
        KernelSetup::AgentKernel { model, qos },
    ]
}

/// The median of the per-sample p50 latencies of both tenants before the drop, µs.
fn saturated_p50_us(entry: &RunEntry, duration: Nanos) -> f64 {
    let d = duration as f64 / NSEC_PER_SEC as f64;
    let p50s: Vec<f64> = (entry.report.tenants.iter())
        .flat_map(|t| t.window(SETTLE_S, d / 2.0))
        .map(|s| s.p50_us)
        .filter(|p| p.is_finite() && *p > 0.0)
        .collect();
    median(&p50s).unwrap_or(f64::NAN)
}

/// The figures of one run: (high, low) IOPS before the drop, and after it.
fn phases(entry: &RunEntry, duration: Nanos) -> [(f64, f64); 2] {
    let d = duration as f64 / NSEC_PER_SEC as f64;
    let after = d / 2.0 + 2.0 * PERIOD_S;
    let t = &entry.report.tenants;
    let w = |from, to| (t[0].window_iops(from, to), t[1].window_iops(from, to));
    [w(SETTLE_S, d / 2.0), w(after, d)]
}

/// The ceiling's total before the drop at exactly `target` = high/low: of what each tenant did,
/// only what a split at `target` could keep — the low one's IOPS up to the high one's ÷ `target`,
/// and the high one's up to the low one's × `target` (a round far from the ratio counts for little).
fn ceiling_total(entry: &RunEntry, duration: Nanos, target: f64) -> f64 {
    let [(h, l), _] = phases(entry, duration);
    h.min(l * target) + l.min(h / target)
}

/// A yardstick for the run at `at` in `runs`: the mean `value` of the nearest run of `setup` before
/// it and the nearest after it (the one there is where a side has none; NaN without one). Why beside
/// and why the mean: the disk's speed moves more between 8 s runs than the 7% judged (a ceiling
/// round read 110% of no control beside an agent run at 76% of the best round), and the runs on
/// both sides of a run cancel a drift through it where the better of two runs before it keeps the
/// luckier one.
fn beside(runs: &[RunEntry], at: usize, setup: &KernelSetup, value: impl Fn(&RunEntry) -> f64) -> f64 {
    let name = setup.name();
    let is_round = |(i, r): &(usize, &RunEntry)| *i != at && r.report.controller == name;
    let before = runs[..at].iter().enumerate().rev().find(is_round);
    let after = runs.iter().enumerate().skip(at + 1).find(is_round);
    let values: Vec<f64> = before.into_iter().chain(after).map(|(_, r)| value(r)).collect();
    if values.is_empty() {
        f64::NAN
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The ceiling for the run at `at`: [`beside`] it, the rounds' totals at `target`.
fn ceiling_beside(runs: &[RunEntry], at: usize, duration: Nanos, target: f64) -> f64 {
    beside(runs, at, &KernelSetup::Ceiling { lo_iops: 0 }, |r| ceiling_total(r, duration, target))
}

/// Gives every run its verdict; the scenario's is that of the runs named in `subjects`.
fn judge_all(opts: &BenchOptions, duration: Nanos, subjects: &[&str], report: &mut ScenarioReport) {
    let (a, b) = opts.weights;
    let target = a as f64 / b as f64;
    // Per run: the ceiling, and no control's totals before and after the drop, beside it.
    let yardsticks: Vec<[f64; 3]> = (0..report.runs.len())
        .map(|i| {
            let none = |phase: usize| {
                beside(&report.runs, i, &KernelSetup::Plain, |r| {
                    let (h, l) = phases(r, duration)[phase];
                    h + l
                })
            };
            [ceiling_beside(&report.runs, i, duration, target), none(0), none(1)]
        })
        .collect();
    for (entry, [ceiling, capacity, capacity_after]) in report.runs.iter_mut().zip(yardsticks) {
        let [(h1, l1), (h2, l2)] = phases(entry, duration);
        let ratio = h1 / l1.max(1e-9);
        let of_ceiling = (h1 + l1) / ceiling;
        let left = (capacity_after - h2).max(1.0);
        let taken = l2 / left;
        let pass = (ratio / target - 1.0).abs() <= RATIO_TOLERANCE && of_ceiling >= CEILING_MIN && taken >= DONATED_MIN;
        entry.verdict = Some(Verdict {
            pass: pass && ratio.is_finite() && taken.is_finite(),
            value: ratio,
            summary: format!(
                "before the drop: ratio {ratio:.2} (target {target:.2} ±{:.0}%), total {:.0}% of the ceiling (>= \
                 {:.0}%; the ceiling {:.0}% of no control, {:.0}% here); after: high {h2:.0} IOPS, low took {:.0}% \
                 of the {left:.0} IOPS left (>= {:.0}%)",
                RATIO_TOLERANCE * 100.0,
                of_ceiling * 100.0,
                CEILING_MIN * 100.0,
                ceiling / capacity * 100.0,
                (h1 + l1) / capacity * 100.0,
                taken * 100.0,
                DONATED_MIN * 100.0
            ),
        });
    }
    let subjects: Vec<&RunEntry> =
        report.runs.iter().filter(|r| subjects.contains(&r.report.controller.as_str())).collect();
    if let Some(v) = Verdict::of_subjects(&subjects) {
        report.verdict = v;
    } else if !report.runs.is_empty() {
        report.verdict = Verdict::not_judged();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_engine::report::{RunReport, TenantReport, TenantSample};

    const D: Nanos = MIN_DURATION;

    /// A tenant doing `before` IOPS until the middle and `after` from then, in 100 ms samples.
    fn tenant(before: f64, after: f64) -> TenantReport {
        let d = D as f64 / NSEC_PER_SEC as f64;
        let series = (1..=(d / SAMPLE_S).round() as usize)
            .map(|i| {
                let t_s = i as f64 * SAMPLE_S;
                TenantSample { t_s, iops: if t_s <= d / 2.0 + 1e-9 { before } else { after }, ..Default::default() }
            })
            .collect();
        TenantReport { series, ..Default::default() }
    }

    fn run(name: &str, high: (f64, f64), low: (f64, f64)) -> RunEntry {
        let report = RunReport {
            controller: name.into(),
            tenants: vec![tenant(high.0, high.1), tenant(low.0, low.1)],
            ..Default::default()
        };
        RunEntry { side: Side::Kernel, report, verdict: None }
    }

    fn judged(agent: RunEntry) -> ScenarioReport {
        let mut report = ScenarioReport {
            name: NAME.into(),
            description: DESCRIPTION.into(),
            // Uncontrolled, first and last: 30k in all before the drop, 28k after (the high one at
            // 2k); then 31k and 26k (2k + 24k): 27k left beside the agent at the mean. The ceiling's
            // rounds on both sides of the agent's run: 18k + 10k, of which 9k count at 2:1 → 27k;
            // then 20k + 9k, of which 18k count → 27k.
            runs: vec![
                run("kernel-none", (15_000.0, 2_000.0), (15_000.0, 26_000.0)),
                run("ceiling", (18_000.0, 2_000.0), (10_000.0, 26_000.0)),
                agent,
                run("ceiling", (20_000.0, 2_000.0), (9_000.0, 26_000.0)),
                run("kernel-none", (16_000.0, 2_000.0), (15_000.0, 24_000.0)),
            ],
            verdict: Verdict::not_judged(),
            notes: Vec::new(),
            observed: Vec::new(),
            curves: Vec::new(),
        };
        judge_all(&BenchOptions::default(), D, &["agent"], &mut report);
        report
    }

    #[test]
    fn the_agent_is_judged_on_ratio_total_and_what_it_leaves() {
        // 2:1 at 28.5k (106% of the ceiling), then the low one takes 23k of the 25k left (92%).
        let good = judged(run("agent", (19_000.0, 2_000.0), (9_500.0, 23_000.0)));
        assert!(good.runs[2].verdict.as_ref().unwrap().summary.contains("low took 92% of the 25000 IOPS left"));
        assert!(good.runs[2].verdict.as_ref().unwrap().summary.contains("total 106% of the ceiling"));
        assert!(good.verdict.pass, "{:?}", good.verdict);
        assert!((good.verdict.value - 2.0).abs() < 1e-9);
        assert!(good.verdict.summary.starts_with("agent: before the drop: ratio 2.00"), "{}", good.verdict.summary);
        assert!(!good.runs[0].verdict.as_ref().unwrap().pass, "none does not split 2:1");
        for (agent, why) in [
            (run("agent", (17_000.0, 2_000.0), (11_000.0, 25_000.0)), "ratio 1.55"),
            (run("agent", (16_000.0, 2_000.0), (8_000.0, 25_000.0)), "total 89% of the ceiling"),
            // 21k of the 25k left beside it (26k and 24k left in the uncontrolled runs) is 84%.
            (run("agent", (19_000.0, 2_000.0), (9_500.0, 21_000.0)), "took 84%"),
        ] {
            let v = judged(agent).verdict;
            assert!(!v.pass && v.summary.contains(why), "{why}: {v:?}");
        }
    }

    #[test]
    fn the_ceiling_is_the_mean_of_the_rounds_beside_a_run() {
        let target = 2.0;
        // 18k + 10k counts 27k at 2:1, 22k + 11k all 33k; a round far from 2:1 (30k + 5k: 10k + 5k
        // count) counts for little.
        let runs = vec![
            run("kernel-none", (15_000.0, 2_000.0), (15_000.0, 26_000.0)),
            run("ceiling", (30_000.0, 2_000.0), (5_000.0, 26_000.0)),
            run("ceiling", (18_000.0, 2_000.0), (10_000.0, 26_000.0)),
            run("agent", (19_000.0, 2_000.0), (9_500.0, 25_000.0)),
            run("ceiling", (22_000.0, 2_000.0), (11_000.0, 26_000.0)),
        ];
        // The disk sped up through the agent's run: judged against the mean of 27k and 33k, not
        // the later round alone nor the better one.
        assert!((ceiling_beside(&runs, 3, D, target) - 30_000.0).abs() < 1e-6);
        // Nothing before the uncontrolled run: the nearest round after it alone.
        assert!((ceiling_beside(&runs, 0, D, target) - 15_000.0).abs() < 1e-6);
        // A round is judged beside the others, never against itself.
        assert!((ceiling_beside(&runs, 2, D, target) - (15_000.0 + 33_000.0) / 2.0).abs() < 1e-6);
        assert!(ceiling_beside(&runs[..1], 0, D, target).is_nan());
    }

    #[test]
    fn windows_take_only_whole_samples_inside_them() {
        let t = tenant(100.0, 10.0);
        let d = D as f64 / NSEC_PER_SEC as f64;
        assert!((t.window_iops(SETTLE_S, d / 2.0) - 100.0).abs() < 1e-9);
        assert!((t.window_iops(d / 2.0 + 2.0 * PERIOD_S, d) - 10.0).abs() < 1e-9);
        assert!(t.window_iops(d + 1.0, d + 2.0).is_nan());
    }
}
