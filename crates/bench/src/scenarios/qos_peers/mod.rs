//! `qos-peers`: ioshare's two limiters beside the programs they restate, on the QoS article's
//! experiment — one 4 KiB random reader at QD128 under a 5000 IOPS limit (`steady`), and a burst
//! (`burst`: limit 2000, burst 5000 for 2 s, i.e. a bucket of 10 000 IOs).
//!
//! Six rows per case, in pairs:
//! - QEMU's block throttle (`util/throttle.c`, a leaky bucket), for real: fio in the lab guest on a disk
//!   QEMU throttles (`scripts/lab --throttle iops-total=…`); beside it ioshare's `leaky-bucket` in the
//!   engine on real IO (a loop device over memory, [`memdev`]; the suite's target where none can be
//!   made), and in the simulator (virtual time);
//! - librbd's QoS (`TokenBucketThrottle`, a token bucket refilled on a 50 ms tick), for real: fio's rbd
//!   engine against the one-node cluster of `scripts/ceph`, `rbd_qos_iops_limit`/`_burst`/
//!   `_burst_seconds` set on the image; beside it ioshare's `token-bucket`, engine and simulator.
//!
//! Every row's latency is the job's (submission to completion, time held by the limiter included),
//! read from a whole distribution: fio's `json+` histogram, every IO the engine completed
//! ([`record::Recording`]), the simulator's histogram. Besides the usual quantiles each row gives two
//! shares that tell the algorithms apart: IOs that passed at once (under [`AT_ONCE_US`]) and IOs that
//! waited about a whole tick (at least [`TICK_SHARE`] of librbd's 50 ms tick). A token bucket lets a
//! tick's tokens go at once and holds the rest until the next tick: two modes, near 0 and near the
//! tick. A leaky bucket spaces every IO: none at once, all at about QD / limit.
//!
//! Judged, for each ioshare row whose real program ran: achieved IOPS and mean latency within
//! ±[`TOLERANCE`] of the real program's, and the two shares within [`SHAPE_POINTS`] percentage points
//! of its. A real program that fell more than [`TOLERANCE`] short of the rate its limits allow was not
//! limited by its limiter (under TCG the lab guest's CPUs may not issue 5000 IOPS on a loaded host):
//! its pair is not judged, with a note. Every run is `max(--duration, 10 s)` long with no warm-up (the buckets start full in all
//! of them, so the burst case's bucket counts in the achieved rate: `avg + max × max-length / run`).
//! A real program that cannot run here (no lab guest, Ceph not installed, not root) is skipped with its
//! script's one-line reason; its pair is then not judged. Not in the default suite (two guest boots
//! and a cluster start: about two minutes); the lab guest runs under TCG here, so its latencies carry
//! the emulator's overhead.

pub mod dist;
mod memdev;
mod peers;
mod record;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use ioshare_core::{Limits, ModelParams, NSEC_PER_SEC};
use ioshare_engine::report::{LatencyUs, RunReport, TenantReport};
use ioshare_engine::run::{run, RunOptions};
use ioshare_engine::target::Target;
use ioshare_sim::{ControllerSpec, DeviceSpec, Job, Rw, Simulation};

use self::dist::Dist;
use self::memdev::MemoryDevice;
use self::record::Recording;
use crate::calibrate::Calibration;
use crate::controllers::ControllerKind;
use crate::error::Result;
use crate::kernel::Peers;
use crate::options::BenchOptions;
use crate::plan::reader;
use crate::report::{Curve, ScenarioReport};
use crate::scenario::{Context, Described, Scenario};
use crate::verdict::{RunEntry, Side, Verdict};

/// The scenario's name.
pub const NAME: &str = "qos-peers";
/// What it shows.
pub const DESCRIPTION: &str = "QD128 4 KiB random reader under 5000 IOPS, and 2000 with a 5000 burst for 2 s: QEMU's \
     throttle (lab guest) and librbd's QoS (scripts/ceph) for real beside ioshare's leaky and token buckets (engine, \
     simulator) -> IOPS and mean within 5% of the real program's, shares at once / near the tick within 10 points";
/// Achieved IOPS and mean latency within this share of the real program's.
pub const TOLERANCE: f64 = 0.05;
/// The shares at once and near the tick within this many percentage points of the real program's.
pub const SHAPE_POINTS: f64 = 10.0;
/// An IO under this latency passed the limiter at once, µs: a fifth of a tick, so that a device's own
/// latency under a burst of a tick's IOs (a few ms on this machine's disk) still counts as at once.
pub const AT_ONCE_US: f64 = TICK_MS * 1e3 / 5.0;
/// librbd's default tick (`rbd_qos_schedule_tick_min`), and ioshare's token bucket's, ms.
pub const TICK_MS: f64 = 50.0;
/// An IO that waited at least this share of a tick waited for the next tick.
pub const TICK_SHARE: f64 = 0.9;
/// Shortest run, s: the burst (3.3 s at the burst rate) and a few seconds after it.
pub const MIN_SECONDS: u64 = 10;
/// The reader's queue depth (the article's).
const IODEPTH: u32 = 128;

/// One case of the experiment: an IOPS limit, and perhaps a burst.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Name (the rows' tenant name).
    pub name: &'static str,
    /// Average IOPS.
    pub limit: u64,
    /// Burst: (IOPS, seconds).
    pub burst: Option<(u64, u64)>,
}

/// The article's cases.
pub const CASES: [Case; 2] =
    [Case { name: "steady", limit: 5000, burst: None }, Case { name: "burst", limit: 2000, burst: Some((5000, 2)) }];

impl Case {
    /// The limits in ioshare's (and QEMU's) names: `iops-total=2000,iops-total-max=5000,…`.
    pub fn qemu_throttle(&self) -> String {
        let mut s = format!("iops-total={}", self.limit);
        if let Some((rate, secs)) = self.burst {
            let _ = write!(s, ",iops-total-max={rate},iops-total-max-length={secs}");
        }
        s
    }

    /// ioshare's limits for the case.
    pub fn limits(&self) -> Limits {
        self.qemu_throttle().parse().expect("the scenario's limits parse")
    }

    /// librbd's image options for the case (a burst of 0 is no burst).
    pub fn rbd_config(&self) -> [(&'static str, u64); 3] {
        let (burst, secs) = self.burst.unwrap_or((0, 1));
        [("rbd_qos_iops_limit", self.limit), ("rbd_qos_iops_burst", burst), ("rbd_qos_iops_burst_seconds", secs)]
    }

    /// The IOPS a reader faster than every rate achieves in `seconds` with both buckets full at the
    /// start: the average, plus the burst bucket (`max × max-length`) spread over the run.
    pub fn expected_iops(&self, seconds: f64) -> f64 {
        self.limit as f64 + self.burst.map_or(0.0, |(rate, secs)| (rate * secs) as f64 / seconds)
    }
}

/// The two algorithms, each with the program it restates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
    Leaky,
    Token,
}

impl Algo {
    fn ioshare(self) -> ControllerKind {
        match self {
            Algo::Leaky => ControllerKind::LeakyBucket,
            Algo::Token => ControllerKind::TokenBucket,
        }
    }

    fn sim(self) -> ControllerSpec {
        match self {
            Algo::Leaky => ControllerSpec::LeakyBucket,
            Algo::Token => ControllerSpec::TokenBucket,
        }
    }

    fn real(self) -> &'static str {
        match self {
            Algo::Leaky => "qemu-throttle",
            Algo::Token => "librbd-qos",
        }
    }
}

/// Who produced a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Real,
    Engine,
    Sim,
}

/// One row: its measurement, or why it could not be made.
struct Row {
    case: Case,
    algo: Algo,
    who: Who,
    measured: std::result::Result<Measured, String>,
}

/// What a row measured.
#[derive(Clone, Debug)]
struct Measured {
    iops: f64,
    lat: LatencyUs,
    dist: Dist,
}

impl Measured {
    /// Share of IOs that passed at once, %.
    fn at_once_pct(&self) -> f64 {
        100.0 * self.dist.share(|us| us < AT_ONCE_US)
    }

    /// Share of IOs that waited about a tick or more, %.
    fn near_tick_pct(&self) -> f64 {
        100.0 * self.dist.share(|us| us >= TICK_SHARE * TICK_MS * 1e3)
    }
}

impl Row {
    /// Whether it achieved its limits' rate within [`TOLERANCE`] (or more): whether its limiter, and
    /// not something else (the lab guest's emulated CPUs, a loaded disk), set its rate.
    fn held_its_limit(&self, seconds: u64) -> bool {
        self.measured.as_ref().is_ok_and(|m| m.iops >= (1.0 - TOLERANCE) * self.case.expected_iops(seconds as f64))
    }

    fn name(&self) -> String {
        match self.who {
            Who::Real => self.algo.real().to_string(),
            Who::Engine => self.algo.ioshare().name().to_string(),
            Who::Sim => format!("{}-sim", self.algo.ioshare().name()),
        }
    }

    /// The judgement of an ioshare row against its real program's row (`None`: a real row, or one
    /// whose real program did not run).
    fn verdict(&self, real: &Row, seconds: u64) -> Option<Verdict> {
        let (Ok(m), Ok(r)) = (&self.measured, &real.measured) else { return None };
        if self.who == Who::Real || !real.held_its_limit(seconds) {
            return None;
        }
        let iops = m.iops / r.iops - 1.0;
        let mean = m.lat.mean / r.lat.mean - 1.0;
        let (once, tick) = (m.at_once_pct() - r.at_once_pct(), m.near_tick_pct() - r.near_tick_pct());
        let pass = iops.abs() <= TOLERANCE
            && mean.abs() <= TOLERANCE
            && once.abs() <= SHAPE_POINTS
            && tick.abs() <= SHAPE_POINTS;
        Some(Verdict {
            pass,
            value: m.iops,
            summary: format!(
                "{} vs {}: IOPS {:+.1}%, mean {:+.1}% (±{:.0}%), at once {:+.1}, near tick {:+.1} points (±{SHAPE_POINTS:.0})",
                self.case.name,
                real.name(),
                iops * 100.0,
                mean * 100.0,
                TOLERANCE * 100.0,
                once,
                tick
            ),
        })
    }
}

/// The scenario.
pub struct QosPeers;

impl Described for QosPeers {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    /// Only when asked for: it boots the lab guest twice and starts a Ceph cluster.
    fn in_default_suite(&self, _: &BenchOptions) -> bool {
        false
    }
}

impl Scenario for QosPeers {
    /// The engine's runs and the lab's boots, one per case and limiter, and one cluster (the
    /// simulator's runs take no time worth a progress line).
    fn planned_runs(&self, _: &BenchOptions, _: &Calibration, _: Option<&Peers>, _: bool) -> usize {
        CASES.len() * 3 + 1
    }

    fn run(
        &self,
        ctx: &Context,
        _: Option<&mut Peers>,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&str),
    ) -> Result<ScenarioReport> {
        let seconds = (ctx.opts.duration / NSEC_PER_SEC).max(MIN_SECONDS);
        let stopped = || stop.load(Ordering::Relaxed);
        let mut rows = Vec::new();
        let memory = MemoryDevice::new();
        let (target, depth, device_note) = match &memory {
            Ok(m) => {
                (&m.target, 0, format!("engine rows: on {} over a sparse file in /dev/shm", m.target.path().display()))
            }
            Err(why) => (
                ctx.target,
                ctx.calibration.device_depth,
                format!("engine rows: on the suite's target (no memory-backed loop device: {why})"),
            ),
        };
        for algo in [Algo::Leaky, Algo::Token] {
            for case in CASES {
                if stopped() {
                    break;
                }
                progress(&format!("{} {}: engine", algo.ioshare().name(), case.name));
                let measured = Ok(engine(target, depth, ctx.calibration, algo, &case, seconds, stop)?);
                rows.push(Row { case, algo, who: Who::Engine, measured });
                rows.push(Row { case, algo, who: Who::Sim, measured: simulate(algo, &case, seconds) });
            }
        }
        drop(memory);
        for case in CASES {
            if stopped() {
                break;
            }
            progress(&format!("qemu-throttle {}: fio in the lab guest", case.name));
            let measured = peers::qemu(&case, seconds).map(from_fio);
            rows.push(Row { case, algo: Algo::Leaky, who: Who::Real, measured });
        }
        if !stopped() {
            progress("librbd-qos: fio's rbd engine on a one-node Ceph cluster");
            for (case, run) in CASES.iter().zip(peers::librbd(&CASES, seconds)) {
                rows.push(Row { case: *case, algo: Algo::Token, who: Who::Real, measured: run.map(from_fio) });
            }
        }
        let mut report = report(&rows, seconds, stopped());
        report.notes.insert(0, device_note);
        Ok(report)
    }
}

/// ioshare's limiter on real IO: the engine on `target` (with `device_depth` slots, 0 = unlimited),
/// every IO's latency recorded.
fn engine(
    target: &Target,
    device_depth: u32,
    cal: &Calibration,
    algo: Algo,
    case: &Case,
    seconds: u64,
    stop: &AtomicBool,
) -> Result<Measured> {
    let tenants = [reader(case.name, 100, IODEPTH).limited(case.limits())];
    let mut ctl = Recording::new(algo.ioshare().build(cal));
    let opts = RunOptions { warmup: 0, device_depth, ..RunOptions::new(seconds * NSEC_PER_SEC) };
    let report = run(target, &tenants, &mut ctl, &opts, stop)?;
    let dist = ctl.dist();
    Ok(Measured { iops: report.tenants[0].iops, lat: dist.latency(), dist })
}

/// ioshare's limiter in virtual time: the reader on a device far faster than the limit (the
/// simulator's `rbd-vs-qemu` device: `ssd_dfl` scaled 100 times, 128 servers), seed 1.
fn simulate(algo: Algo, case: &Case, seconds: u64) -> std::result::Result<Measured, String> {
    const TENANT: &str = "tenant";
    let report =
        Simulation::new(&format!("{NAME}-{}", case.name), DeviceSpec::linear(ModelParams::SSD_DFL.scaled(100.0), 128))
            .controller(algo.sim())
            .seconds(seconds as f64)
            .seed(1)
            .group(TENANT, 100, [Job::closed(Rw::RandRead, 4096, IODEPTH)])
            .limit(TENANT, case.limits())
            .run()
            .map_err(|e| e.to_string())?;
    let g = report.group(TENANT);
    // The histogram's buckets are 2^(1/4) wide; each IO counts at its bucket's upper bound.
    let dist = Dist::new(g.lat_hist.iter().map(|[us, n]| (*us, *n)).collect());
    let p999 = g.lat_dist.iter().find(|[q, _]| *q >= 0.999).map_or(dist.quantile(0.999), |[_, us]| *us);
    let l = &g.lat_us;
    let lat = LatencyUs { p50: l.p50, p90: l.p90, p95: l.p95, p99: l.p99, p999, max: l.max, mean: l.mean };
    Ok(Measured { iops: g.iops, lat, dist })
}

fn from_fio(run: peers::FioRun) -> Measured {
    let lat = LatencyUs { mean: run.mean_us, ..run.dist.latency() };
    Measured { iops: run.iops, lat, dist: run.dist }
}

/// The scenario's report: a run per row that measured, a note per row with what the table lacks (or
/// why it was skipped), the curves, the verdict.
fn report(rows: &[Row], seconds: u64, interrupted: bool) -> ScenarioReport {
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    let mut curves = Vec::new();
    for row in rows {
        let real = rows.iter().find(|r| r.who == Who::Real && r.algo == row.algo && r.case.name == row.case.name);
        let who = format!("{} {}", row.case.name, row.name());
        let m = match &row.measured {
            Ok(m) => m,
            Err(why) => {
                notes.push(format!("{who}: skipped — {why}"));
                continue;
            }
        };
        let expected = row.case.expected_iops(seconds as f64);
        if row.who == Who::Real && !row.held_its_limit(seconds) {
            notes.push(format!(
                "{who} fell short of its limits by more than {:.0}%: something else than its limiter set its rate \
                 (the lab guest runs under TCG here), so its pair is not judged",
                TOLERANCE * 100.0
            ));
        }
        notes.push(format!(
            "{who}: {:.0} IOPS ({:+.1}% of the {expected:.0} the limits allow), mean {:.2} ms, at once {:.1}%, near the tick {:.1}%",
            m.iops,
            (m.iops / expected - 1.0) * 100.0,
            m.lat.mean / 1e3,
            m.at_once_pct(),
            m.near_tick_pct()
        ));
        let tenant = TenantReport {
            name: row.case.name.into(),
            weight: 100,
            ios: m.dist.total() as u64,
            iops: m.iops,
            bw_bytes: m.iops * 4096.0,
            reads: m.dist.total() as u64,
            lat_us: m.lat.clone(),
            ..TenantReport::default()
        };
        let mut report = RunReport {
            controller: row.name(),
            window_s: seconds as f64,
            tenants: vec![tenant],
            ..RunReport::default()
        };
        report.device.iops = m.iops;
        report.device.busy_pct = f64::NAN;
        let side = if row.who == Who::Real { Side::Reference } else { Side::Ioshare };
        let verdict = real.and_then(|r| row.verdict(r, seconds));
        runs.push(RunEntry { side, report, verdict });
        let panel = format!("{} vs ioshare's {} — {}", row.algo.real(), row.algo.ioshare().name(), row.case.name);
        curves.push(Curve { panel, name: row.name(), points: m.dist.cdf(300) });
    }
    let subjects: Vec<&RunEntry> = runs.iter().filter(|r| r.verdict.is_some()).collect();
    let verdict = match Verdict::of_subjects(&subjects) {
        Some(v) => v,
        None if interrupted => Verdict::not_judged(),
        // No real program ran: nothing to judge against, which is not a failure of ioshare's.
        None => Verdict {
            pass: true,
            value: f64::NAN,
            summary: "not judged: no real program ran here (see the notes)".into(),
        },
    };
    curves.sort_by(|a, b| a.panel.cmp(&b.panel));
    ScenarioReport {
        name: NAME.into(),
        description: DESCRIPTION.into(),
        runs,
        verdict,
        notes,
        observed: Vec::new(),
        curves,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(iops: f64, lat_us: &[(f64, f64)]) -> Measured {
        let dist = Dist::new(lat_us.to_vec());
        Measured { iops, lat: dist.latency(), dist }
    }

    fn row(case: Case, algo: Algo, who: Who, m: std::result::Result<Measured, String>) -> Row {
        Row { case, algo, who, measured: m }
    }

    #[test]
    fn cases_speak_each_programs_names() {
        let [steady, burst] = CASES;
        assert_eq!(steady.qemu_throttle(), "iops-total=5000");
        assert_eq!(burst.qemu_throttle(), "iops-total=2000,iops-total-max=5000,iops-total-max-length=2");
        assert_eq!(burst.rbd_config()[1], ("rbd_qos_iops_burst", 5000));
        assert_eq!(steady.rbd_config()[1], ("rbd_qos_iops_burst", 0));
        // A bucket of 10 000 IOs over 10 s adds 1000 IOPS to the average.
        assert_eq!(burst.expected_iops(10.0), 3000.0);
        assert_eq!(steady.expected_iops(10.0), 5000.0);
        assert_eq!(
            burst.limits().to_string(),
            steady.limits().to_string().replace("5000", "2000") + "," + "iops-total-max=5000,iops-total-max-length=2"
        );
    }

    #[test]
    fn an_ioshare_row_is_judged_on_rate_mean_and_both_shares() {
        let case = CASES[0];
        // librbd: half at once (50 µs), half near the 50 ms tick.
        let real = row(case, Algo::Token, Who::Real, Ok(measured(5000.0, &[(50.0, 50.0), (48_000.0, 50.0)])));
        // The engine's device takes a few ms for a tick's IOs: still at once.
        let close = row(case, Algo::Token, Who::Engine, Ok(measured(5100.0, &[(3_000.0, 52.0), (49_000.0, 48.0)])));
        let v = close.verdict(&real, 10).unwrap();
        assert!(v.pass, "{v:?}");
        assert!(v.summary.starts_with("steady vs librbd-qos: IOPS +2.0%"), "{}", v.summary);
        // Same rate and mean, but spaced like a leaky bucket: the shape fails it.
        let spaced = row(case, Algo::Token, Who::Engine, Ok(measured(5000.0, &[(24_000.0, 100.0)])));
        assert!(!spaced.verdict(&real, 10).unwrap().pass);
        let slow = row(case, Algo::Token, Who::Sim, Ok(measured(4500.0, &[(50.0, 50.0), (48_000.0, 50.0)])));
        assert!(!slow.verdict(&real, 10).unwrap().pass);
        // Nothing to judge against, or a real row itself.
        let skipped = row(case, Algo::Token, Who::Real, Err("ceph: missing ceph-mon".into()));
        assert!(close.verdict(&skipped, 10).is_none() && real.verdict(&real, 10).is_none());
        // A real program short of its own limit was not limited by it: nothing to judge against.
        let short = row(case, Algo::Token, Who::Real, Ok(measured(4000.0, &[(50.0, 50.0), (60_000.0, 50.0)])));
        assert!(close.verdict(&short, 10).is_none());
    }

    #[test]
    fn skipped_programs_get_a_note_and_leave_the_scenario_unjudged() {
        let case = CASES[0];
        let rows = vec![
            row(case, Algo::Leaky, Who::Engine, Ok(measured(5000.0, &[(25_600.0, 10.0)]))),
            row(case, Algo::Leaky, Who::Real, Err("lab: no guest kernel".into())),
            row(CASES[1], Algo::Token, Who::Real, Ok(measured(2000.0, &[(64_000.0, 10.0)]))),
        ];
        let r = report(&rows, 10, false);
        assert_eq!(r.runs.len(), 2);
        assert!(r.notes.iter().any(|n| n.starts_with("burst librbd-qos fell short of its limits")), "{:?}", r.notes);
        assert!(r.runs[0].verdict.is_none());
        assert!(r.notes.iter().any(|n| n == "steady qemu-throttle: skipped — lab: no guest kernel"), "{:?}", r.notes);
        assert!(r.notes[0].starts_with("steady leaky-bucket: 5000 IOPS (+0.0% of the 5000"), "{:?}", r.notes);
        assert!(r.verdict.pass && r.verdict.summary.starts_with("not judged"));
        assert_eq!(r.curves.len(), 2);
        assert_eq!(r.curves[1].panel, "qemu-throttle vs ioshare's leaky-bucket — steady");
    }
}
