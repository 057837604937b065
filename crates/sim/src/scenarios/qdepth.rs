//! Saturation that hides in a device queue deeper than the device's parallelism
//! (`ioshare sim qdepth-split|qdepth-weight|qdepth-return`).
//!
//! Each built-in runs the same case twice on a linear ssd_dfl device (8 servers, 8518 random 4 KiB
//! reads/s): with the kernel-faithful IOCost, whose comparison documents the kernel's behaviour
//! (shares drift towards each group's share of the device queue, vrate drifts above what the device
//! serves), and with ioshare's device-depth option (`ioshare_core::iocost::depth`, at most 32 IOs in
//! the device), whose comparisons are the acceptance: the weights' split within 3% (or the
//! kernel's 16-bit hweight for weight 1 beside 10 000), vrate at what the device serves, no flood
//! beyond the start budget when a group returns.

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{ModelParams, QosConfig, QosParams, NSEC_PER_MSEC, NSEC_PER_SEC};

use super::builtin::{compare, Args, Builtin, Outcome};
use crate::error::SimError;
use crate::report::Report;
use crate::simulation::{ControllerSpec, Simulation};
use crate::workload::{Job, Load, Rw};
use crate::device::DeviceSpec;

pub(crate) const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "qdepth-split",
        about: "two saturating readers (2:1) on a device queue of 128: kernel IOCost splits by queue depth; +qd by weight",
        run: split,
    },
    Builtin {
        name: "qdepth-weight",
        about: "weight 1 at QD256 beside weight 10000 at QD32, device queue 32: kernel gives weight 1 half; +qd 1/10001",
        run: weight,
    },
    Builtin {
        name: "qdepth-latency",
        about: "QD1 reader beside a saturating one, device queue 128, p99 targets 2x/4x solo: +qd moves along the trade-off",
        run: latency,
    },
    Builtin {
        name: "qdepth-donation",
        about: "the bench's donation with +qd: 2:1 readers, the high one drops to a rate-capped tenth -> the low one takes what it leaves",
        run: donation,
    },
    Builtin {
        name: "qdepth-return",
        about: "a group back from 2.7 s idle beside one that ran alone: kernel floods on drifted vrate; +qd its share",
        run: back_from_idle,
    },
];

/// The option's device depth: the simulator's default device queue (4 × 8 servers).
const DEPTH: u32 = 32;
/// Acceptance: within 3% of the weights' split.
const TOLERANCE: f64 = 0.03;
/// Weight 1 beside 10 000 gets 1/10001, or what the kernel's 16-bit hweight rounds it to.
const HWEIGHT_SLACK: f64 = 2.0 / 65_536.0;

fn device(queue_depth: u32) -> DeviceSpec {
    DeviceSpec::linear(ModelParams::SSD_DFL, 8).with_queue_depth(queue_depth)
}

/// The kernel-faithful IOCost and the one with the option, with the default QoS (no latency target).
fn controllers(args: &Args) -> [(&'static str, ControllerSpec); 2] {
    let spec = |depth| ControllerSpec::IoCost { model: ModelParams::SSD_DFL, qos: QosParams::default(), depth };
    [("iocost", args.controller(spec(None))), ("iocost+qd", args.controller(spec(Some(DepthLimit { max: DEPTH }))))]
}

fn named(mut r: Report, name: &str) -> Report {
    r.controller = name.to_string();
    r
}

fn split(args: &Args) -> Result<Outcome, SimError> {
    let w = args.weights([200, 100])?;
    let want = w[0] as f64 / w[1] as f64;
    let mut out = Outcome { runs: Vec::new(), comparisons: Vec::new() };
    for qd in [32, 64] {
        for (name, ctl) in controllers(args) {
            let r = Simulation::new(&format!("qdepth-split QD{qd}"), device(128))
                .controller(ctl)
                .group("a", w[0], [Job::closed(Rw::RandRead, 4096, qd)])
                .group("b", w[1], [Job::closed(Rw::RandRead, 4096, qd)])
                .seconds(args.seconds(10.0))
                .warmup(2.0)
                .seed(args.seed())
                .run()?;
            let got = r.group("a").cost_share / r.group("b").cost_share.max(1e-12);
            let (vrate, util) = (r.device.vrate_pct_mean, r.device.utilization);
            out.comparisons.push(if name == "iocost" {
                compare(
                    &format!("{name} QD{qd}: cost share a/b (the kernel's queue-depth split), vrate"),
                    "≈ 1.00, > 125%",
                    format!("{got:.3}, {vrate:.0}%"),
                    (got - 1.0).abs() < 0.05 && vrate > 125.0,
                )
            } else {
                compare(
                    &format!("{name} QD{qd}: cost share a/b, utilisation, vrate"),
                    format!("{want:.2} ±3%, ≥ 95%, ≤ 105%"),
                    format!("{got:.3}, {:.1}%, {vrate:.0}%", util * 100.0),
                    (got / want - 1.0).abs() <= TOLERANCE && util >= 0.95 && vrate <= 105.0,
                )
            });
            out.runs.push(named(r, name));
        }
    }
    Ok(out)
}

fn weight(args: &Args) -> Result<Outcome, SimError> {
    let w = args.weights([1, 10_000])?;
    let want = w[0] as f64 / (w[0] + w[1]) as f64;
    let mut out = Outcome { runs: Vec::new(), comparisons: Vec::new() };
    for (name, ctl) in controllers(args) {
        let r = Simulation::new("qdepth-weight", device(32))
            .controller(ctl)
            .group("light", w[0], [Job::closed(Rw::RandRead, 4096, 256)])
            .group("heavy", w[1], [Job::closed(Rw::RandRead, 4096, 32)])
            .seconds(args.seconds(10.0))
            .warmup(2.0)
            .seed(args.seed())
            .run()?;
        let got = r.group("light").cost_share;
        out.comparisons.push(if name == "iocost" {
            compare(
                &format!("{name}: light group's cost share (the kernel: the heavy one runs out of IOs and donates)"),
                "> 40%",
                format!("{:.1}%", got * 100.0),
                got > 0.4,
            )
        } else {
            compare(
                &format!("{name}: light group's cost share, utilisation"),
                format!("{want:.2e} (+ 16-bit hweight), ≥ 95%"),
                format!("{got:.2e}, {:.1}%", r.device.utilization * 100.0),
                got <= want + HWEIGHT_SLACK && r.device.utilization >= 0.95,
            )
        });
        out.runs.push(named(r, name));
    }
    Ok(out)
}

/// When "back" returns (it reads from 0 to 0.3 s, is idle until 3.0 s, then reads again).
const RETURN_S: f64 = 3.0;
/// Length of the intervals the return is judged in.
const INTERVAL_MS: u64 = 50;

/// Per interval ending in (from_s, to_s]: the returning group's share of the IOs.
fn back_shares(r: &Report, from_s: f64, to_s: f64) -> Vec<f64> {
    let (back, steady) = (&r.group("back").series, &r.group("steady").series);
    back.iter()
        .zip(steady)
        .filter(|(p, _)| p.t_s > from_s + 1e-9 && p.t_s <= to_s + 1e-9)
        .map(|(b, s)| b.iops / (b.iops + s.iops).max(1e-9))
        .collect()
}

/// vrate at the first sample at or after `t_s`.
fn vrate_at(r: &Report, t_s: f64) -> f64 {
    r.device.series.iter().find(|p| p.t_s >= t_s - 1e-9).map_or(f64::NAN, |p| p.vrate_pct)
}

fn back_from_idle(args: &Args) -> Result<Outcome, SimError> {
    let w = args.weights([100, 100])?;
    // "steady" reads alone at QD32 while "back" (up to 256 IOs outstanding) is idle: the device
    // queue never overflows, so the kernel raises vrate whenever steady is throttled and nothing
    // ever says the device is full.
    let mut back = Job::open(Rw::RandRead, 4096, 40_000.0);
    back.load = Load::Open {
        rate: 40_000.0,
        poisson: false,
        burst: Some((300 * NSEC_PER_MSEC, 2_700 * NSEC_PER_MSEC)),
        max_outstanding: 256,
    };
    let share = w[1] as f64 / (w[0] + w[1]) as f64;
    // The most the returning group may take in its first interval: its share, plus the start budget
    // (half a period of vtime) spent at its share.
    let half_period_s = QosParams::default().period_us() as f64 / 2e6;
    let bound = share + half_period_s * share / (INTERVAL_MS as f64 / 1e3);
    let mut out = Outcome { runs: Vec::new(), comparisons: Vec::new() };
    for (name, ctl) in controllers(args) {
        let mut sc = Simulation::new("qdepth-return", device(32))
            .controller(ctl)
            .group("steady", w[0], [Job::closed(Rw::RandRead, 4096, 32)])
            .group("back", w[1], [back.clone()])
            .seconds(RETURN_S + 0.3)
            .seed(args.seed());
        sc.sample_interval = INTERVAL_MS * NSEC_PER_MSEC;
        let r = sc.run()?;
        let vrate = vrate_at(&r, RETURN_S);
        let shares = back_shares(&r, RETURN_S, RETURN_S + 0.3);
        let list = shares.iter().map(|s| format!("{:.0}", s * 100.0)).collect::<Vec<_>>().join("/");
        out.comparisons.push(if name == "iocost" {
            compare(
                &format!("{name}: vrate before the return; back's % per 50 ms after (the kernel's flood)"),
                format!("> 125%; all > {:.0}%", bound * 100.0),
                format!("{vrate:.0}%; {list}"),
                vrate > 125.0 && shares.iter().all(|&s| s > bound),
            )
        } else {
            let first_ok = shares.first().is_some_and(|&s| s <= bound);
            let rest_ok = shares.iter().skip(1).all(|&s| (s / share - 1.0).abs() <= TOLERANCE);
            compare(
                &format!("{name}: vrate before the return; back's % per 50 ms after"),
                format!("≤ 105%; first ≤ {:.0}%, then {:.0} ±3%", bound * 100.0, share * 100.0),
                format!("{vrate:.0}%; {list}"),
                vrate <= 105.0 && first_ok && rest_ok,
            )
        });
        out.runs.push(named(r, name));
    }
    Ok(out)
}

/// The work-conserving trade-off on a 128-deep device queue: a QD1 reader with 100 µs think time
/// (weight 200) beside a saturating QD32 reader (weight 100), under IOCost with a p99 read target of
/// 2× and 4× the reader's solo p99. The kernel-faithful controller lands where the device queue puts
/// it whatever the target; with the option the slot limit follows the target, moving the point along
/// the trade-off while the saturating reader still uses the leftover, and the reader's p99 holds the
/// target. Before misses shrank the limit at once and growth waited for a miss paid for by met IOs,
/// both rows overshot (2.21x and 4.19x): a 50 ms period judged 13–32 IOs, and one probe past
/// the target cost them all, and at the device's maximum the reader's slot wait went unjudged.
fn latency(args: &Args) -> Result<Outcome, SimError> {
    let w = args.weights([200, 100])?;
    let reader = Job::closed(Rw::RandRead, 4096, 1).with_think_us(100);
    let base = |ctl: ControllerSpec, batch: bool| {
        let sc = Simulation::new("qdepth-latency", device(128))
            .controller(ctl)
            .group("reader", w[0], [reader.clone()])
            .seconds(args.seconds(10.0))
            .warmup(2.0)
            .seed(args.seed());
        if batch {
            sc.group("batch", w[1], [Job::closed(Rw::RandRead, 4096, 32)])
        } else {
            sc
        }
    };
    let solo = named(base(ControllerSpec::None, false).run()?, "solo");
    let solo_p99 = solo.group("reader").lat_us.p99;
    let capacity = ModelParams::SSD_DFL.rrandiops as f64;
    // (p99 ÷ solo, share of the leftover the batch used).
    let point = |r: &Report| {
        let leftover = capacity - r.group("reader").iops;
        (r.group("reader").lat_us.p99 / solo_p99, r.group("batch").iops / leftover)
    };
    let mut out = Outcome { runs: vec![solo], comparisons: Vec::new() };
    let mut points = Vec::new();
    for factor in [2u32, 4] {
        let line = format!("rpct=99 rlat={}", (solo_p99 * factor as f64).ceil() as u64);
        let qos = line.parse::<QosConfig>().map_err(|e| SimError::Invalid(e.to_string()))?.params;
        for depth in [None, Some(DepthLimit { max: DEPTH })] {
            let name = if depth.is_some() { "iocost+qd" } else { "iocost" };
            let ctl = args.controller(ControllerSpec::IoCost { model: ModelParams::SSD_DFL, qos, depth });
            let r = base(ctl, true).run()?;
            let (p99x, used) = point(&r);
            points.push((name, factor, p99x, used));
            out.runs.push(named(r, &format!("{name} p99<={factor}x")));
        }
    }
    let find = |name: &str, factor: u32| *points.iter().find(|p| p.0 == name && p.1 == factor).expect("ran");
    let show = |p: (&str, u32, f64, f64)| format!("{:.2}x, {:.0}%", p.2, p.3 * 100.0);
    let (k2, k4, q2, q4) = (find("iocost", 2), find("iocost", 4), find("iocost+qd", 2), find("iocost+qd", 4));
    out.comparisons.push(compare(
        "iocost, p99 <= 2x and 4x solo: reader p99 / solo, leftover used (the kernel: the target moves nothing)",
        "the same point",
        format!("{} / {}", show(k2), show(k4)),
        (k2.2 / k4.2 - 1.0).abs() < 0.05,
    ));
    // The option's rows hold their target: the reader's p99 at most the `rlat` it was given.
    out.comparisons.push(compare(
        "iocost+qd, p99 <= 2x solo: reader p99 / solo, leftover used",
        format!("<= 2x and below the kernel's {:.2}x, >= 90%", k2.2),
        show(q2),
        q2.2 * solo_p99 <= (solo_p99 * 2.0).ceil() && q2.2 < 0.75 * k2.2 && q2.3 >= 0.9,
    ));
    out.comparisons.push(compare(
        "iocost+qd, p99 <= 4x solo: reader p99 / solo, leftover used",
        format!("<= 4x and above the 2x target's {:.2}x, >= 90%", q2.2),
        show(q4),
        q4.2 * solo_p99 <= (solo_p99 * 4.0).ceil() && q4.2 > q2.2 && q4.3 >= 0.9,
    ));
    Ok(out)
}

/// When the high tenant of `qdepth-donation` drops to its trickle.
const DROP_S: f64 = 2.0;
/// Acceptance of `qdepth-donation` (the bench's): the low tenant takes at least this share of the
/// capacity the high one leaves, in every interval from [`SETTLE_MS`] after the drop.
const LEFTOVER_MIN: f64 = 0.9;
/// Time the planner has to move budget after the drop: the first 50 ms interval (the high tenant's
/// last IOs still complete in it, and donation waits for a period's end). Before the fix the low
/// tenant took 63% of the leftover in that interval, then 36% in the next (its banked budget spent,
/// the device idle while high kept its weight); with it, 98% and more from the second interval on.
const SETTLE_MS: u64 = 50;

/// The bench's donation scenario with the option: "high" (weight 200) reads at QD64 until
/// [`DROP_S`], beside a rate-capped reader at a tenth of its share with at most 4 IOs outstanding
/// that runs throughout; "low" (weight 100) reads at QD64. The trickle finds low's IOs queued for a
/// slot at nearly every submission: counted as short of device for any such wait, high kept its full
/// weight after the drop, low spent the budget it had banked while queued and then waited for
/// budget with the device idle (`ioshare_core::iocost::depth`'s module doc).
fn donation(args: &Args) -> Result<Outcome, SimError> {
    let w = args.weights([200, 100])?;
    let capacity = ModelParams::SSD_DFL.rrandiops as f64;
    let high_share = capacity * w[0] as f64 / (w[0] + w[1]) as f64;
    let mut saturating = Job::open(Rw::RandRead, 4096, 2.0 * capacity);
    saturating.load = Load::Open {
        rate: 2.0 * capacity,
        poisson: false,
        burst: Some(((DROP_S * 1e9) as u64, 1_000 * NSEC_PER_SEC)),
        max_outstanding: 64,
    };
    let mut trickle = Job::open(Rw::RandRead, 4096, high_share / 10.0);
    trickle.load = Load::Open { rate: high_share / 10.0, poisson: true, burst: None, max_outstanding: 4 };
    let (_, option) = controllers(args).into_iter().find(|(n, _)| *n == "iocost+qd").expect("listed");
    let mut sc = Simulation::new("qdepth-donation", device(128))
        .controller(option)
        .group("high", w[0], [saturating, trickle])
        .group("low", w[1], [Job::closed(Rw::RandRead, 4096, 64)])
        .seconds(DROP_S + 1.0)
        .seed(args.seed());
    sc.sample_interval = INTERVAL_MS * NSEC_PER_MSEC;
    let r = sc.run()?;
    let from = DROP_S + SETTLE_MS as f64 / 1e3;
    let taken: Vec<f64> = r
        .group("high")
        .series
        .iter()
        .zip(&r.group("low").series)
        .filter(|(h, _)| h.t_s > from + INTERVAL_MS as f64 / 1e3 - 1e-9)
        .map(|(h, l)| l.iops / (capacity - h.iops).max(1.0))
        .collect();
    let least = taken.iter().copied().fold(f64::INFINITY, f64::min);
    let comparison = compare(
        &format!("iocost+qd: low's share of the capacity high leaves, least 50 ms interval from {from:.1} s"),
        format!(">= {:.0}%", LEFTOVER_MIN * 100.0),
        format!("{:.0}%", least * 100.0),
        !taken.is_empty() && least >= LEFTOVER_MIN,
    );
    Ok(Outcome { runs: vec![named(r, "iocost+qd")], comparisons: vec![comparison] })
}
