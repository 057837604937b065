//! The limiters' scenarios (`ioshare sim token-bucket|leaky-bucket|rbd-vs-qemu|weight-and-cap`).
//!
//! The first three run QD128 4 KiB random writes held to 5000 IOPS on a device far faster (a linear
//! device following `ssd_dfl` scaled 100 times, 128 servers: about 1.8 M random 4 KiB writes a
//! second, 70 µs each), so that every figure is the limiter's own.
//!
//! By Little's law both limiters give a mean latency of 128 / 5000 s = 25.6 ms; how it is spread is
//! what differs (SPEC §4). librbd's token bucket with a 1000 ms tick admits 5000 IOs at each tick
//! within a few ms, then holds the 128 next ones until the following tick: 128/5000 = 2.56% of IOs
//! wait about a second, the rest see only the device (p95 < 15 ms). QEMU's leaky bucket admits one IO
//! every 200 µs once its `avg/10` slack is used, so every IO waits its turn behind the 127 others:
//! 25.6 ms each.
//!
//! `weight-and-cap` puts a leaky bucket in front of IOCost: two readers at weights 2:1, the heavy one
//! capped at 1500 IOPS, and IOCost gives the light one what the cap leaves.

use std::sync::Arc;

use ioshare_core::{Controller, IoCost, LeakyGate, Limited, Limits, LinearModel, ModelParams, QosParams};

use super::builtin::{compare, Args, Builtin, Outcome};
use crate::error::SimError;
use crate::report::{Comparison, Report};
use crate::simulation::{ControllerSpec, Simulation};
use crate::workload::{Job, Rw};
use crate::device::DeviceSpec;

pub(crate) const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "token-bucket",
        about: "QD128 4k random writes under librbd's token bucket at 5000 IOPS, 1 s tick: 2.56% of IOs wait ~1 s",
        run: token_bucket,
    },
    Builtin {
        name: "leaky-bucket",
        about: "QD128 4k random writes under QEMU's leaky bucket at 5000 IOPS: every IO waits ~25.6 ms",
        run: leaky_bucket,
    },
    Builtin {
        name: "rbd-vs-qemu",
        about: "the token-bucket and leaky-bucket runs side by side: same mean latency, opposite spreads",
        run: rbd_vs_qemu,
    },
    Builtin {
        name: "qos-rbd-vs-qemu",
        about: "the QoS article's QD128 reproduction, librbd vs QEMU under 5000 IOPS (= rbd-vs-qemu)",
        run: rbd_vs_qemu,
    },
    Builtin {
        name: "weight-and-cap",
        about: "IOCost weights 2:1 with the heavy group capped at 1500 IOPS: the light group gets the rest",
        run: weight_and_cap,
    },
];

/// The group every run limits.
const TENANT: &str = "tenant";
/// The limit of every run, IOPS.
const LIMIT: f64 = 5000.0;
/// Mean latency both limiters must give at QD128: 128 / 5000 s, in µs.
const MEAN_US: f64 = 128.0 / LIMIT * 1e6;

/// The limits of the tenant in the token-bucket run: librbd with a 1000 ms tick.
const TOKEN_LIMITS: &str = "iops-total=5000,tick-min-ms=1000";
/// The limits of the tenant in the leaky-bucket run.
const LEAKY_LIMITS: &str = "iops-total=5000";

/// `text` as limits (the scenarios' own constants).
fn limits(text: &str) -> Limits {
    text.parse().expect("the scenario's limits parse")
}

/// QD128 4 KiB random writes for 60 s after a 1 s warm-up (the buckets start full: the first second
/// has no long waits).
fn qd128(args: &Args, name: &str, controller: ControllerSpec, tenant_limits: &str) -> Result<Report, SimError> {
    let w = args.weights([100])?;
    Simulation::new(name, DeviceSpec::linear(ModelParams::SSD_DFL.scaled(100.0), 128))
        .controller(args.controller(controller))
        .seconds(args.seconds(61.0))
        .warmup(1.0)
        .seed(args.seed())
        .group(TENANT, w[0], [Job::closed(Rw::RandWrite, 4096, 128)])
        .limit(TENANT, limits(tenant_limits))
        .run()
}

/// Latency at quantile `q` of the tenant, µs (from the report's distribution).
fn quantile_us(report: &Report, q: f64) -> f64 {
    let dist = &report.group(TENANT).lat_dist;
    dist.iter().find(|[quantile, _]| *quantile >= q).or(dist.last()).map_or(0.0, |[_, us]| *us)
}

/// The comparisons both limiters share: throughput and mean latency.
fn shared_comparisons(label: &str, report: &Report) -> Vec<Comparison> {
    let g = report.group(TENANT);
    vec![
        compare(&format!("{label}: IOPS"), "5000 ±1%", format!("{:.0}", g.iops), (g.iops / LIMIT - 1.0).abs() <= 0.01),
        compare(
            &format!("{label}: mean latency"),
            "25.6 ms ±2%",
            format!("{:.2} ms", g.lat_us.mean / 1e3),
            (g.lat_us.mean / MEAN_US - 1.0).abs() <= 0.02,
        ),
    ]
}

fn token_comparisons(report: &Report) -> Vec<Comparison> {
    let p95 = quantile_us(report, 0.95);
    let mut out = shared_comparisons("token bucket", report);
    out.push(compare("token bucket: p95 latency", "< 15 ms", format!("{:.2} ms", p95 / 1e3), p95 < 15_000.0));
    // From the latency histogram: its bucket holding 900 ms spans 881–1049 ms, and the token bucket's
    // waits are either the device's (µs) or about a tick (1 s), so the share above 881 ms is the share
    // that waited ≥ 900 ms.
    let g = report.group(TENANT);
    let total: f64 = g.lat_hist.iter().map(|[_, n]| n).sum();
    let slow: f64 = g.lat_hist.iter().filter(|[upper, _]| *upper >= 900_000.0).map(|[_, n]| n).sum();
    let share = 100.0 * slow / total.max(1.0);
    out.push(compare(
        "token bucket: IOs waiting ≥ 900 ms",
        "2.56% ±0.3%",
        format!("{share:.2}%"),
        (share - 2.56).abs() <= 0.3,
    ));
    out
}

fn leaky_comparisons(report: &Report) -> Vec<Comparison> {
    let (p1, p99) = (quantile_us(report, 0.01), quantile_us(report, 0.99));
    let mut out = shared_comparisons("leaky bucket", report);
    // p1 ≥ 24 ms and p99 ≤ 27 ms put at least 98% of IOs between 24 and 27 ms.
    out.push(compare(
        "leaky bucket: IOs between 24 and 27 ms",
        "≥ 98% (p1 ≥ 24 ms, p99 ≤ 27 ms)",
        format!("p1 {:.2} ms, p99 {:.2} ms", p1 / 1e3, p99 / 1e3),
        p1 >= 24_000.0 && p99 <= 27_000.0,
    ));
    out
}

fn token_run(args: &Args) -> Result<Report, SimError> {
    qd128(args, "token-bucket", ControllerSpec::TokenBucket, TOKEN_LIMITS)
}

fn leaky_run(args: &Args) -> Result<Report, SimError> {
    qd128(args, "leaky-bucket", ControllerSpec::LeakyBucket, LEAKY_LIMITS)
}

fn token_bucket(args: &Args) -> Result<Outcome, SimError> {
    let report = token_run(args)?;
    let comparisons = token_comparisons(&report);
    Ok(Outcome { runs: vec![report], comparisons })
}

fn leaky_bucket(args: &Args) -> Result<Outcome, SimError> {
    let report = leaky_run(args)?;
    let comparisons = leaky_comparisons(&report);
    Ok(Outcome { runs: vec![report], comparisons })
}

fn rbd_vs_qemu(args: &Args) -> Result<Outcome, SimError> {
    let (token, leaky) = (token_run(args)?, leaky_run(args)?);
    let mut comparisons = token_comparisons(&token);
    comparisons.extend(leaky_comparisons(&leaky));
    Ok(Outcome { runs: vec![token, leaky], comparisons })
}

/// IOCost, with a leaky bucket in front of it, on the core scenarios' device (8 servers following
/// `ssd_dfl`, 8518 random 4 KiB reads a second).
fn iocost_with_leaky_limits() -> ControllerSpec {
    let build = || -> Box<dyn Controller> {
        let iocost = IoCost::new(LinearModel::new(ModelParams::SSD_DFL), QosParams::default());
        Box::new(Limited::<IoCost, LeakyGate>::new(iocost))
    };
    ControllerSpec::Custom { name: "iocost+leaky-bucket".to_string(), build: Arc::new(build) }
}

/// Two saturating 4 KiB random readers at weights 2:1, first uncapped, then with the heavy one capped
/// at 1500 IOPS (a leaky bucket in front of IOCost): IOCost gives the light one what the cap leaves.
fn weight_and_cap(args: &Args) -> Result<Outcome, SimError> {
    const CAP: f64 = 1500.0;
    let w = args.weights([200, 100])?;
    let run = |name: &str, heavy_limits: &str| {
        Simulation::new(name, super::basic::ssd_dfl_device())
            .controller(args.controller(iocost_with_leaky_limits()))
            .seconds(args.seconds(10.0))
            .warmup(2.0)
            .seed(args.seed())
            .group("heavy", w[0], [Job::closed(Rw::RandRead, 4096, 32)])
            .group("light", w[1], [Job::closed(Rw::RandRead, 4096, 32)])
            .limit("heavy", limits(heavy_limits))
            .run()
    };
    let free = run("weight-and-cap (no cap)", "none")?;
    let capped = run("weight-and-cap", "iops-read=1500")?;
    let capacity = free.group("heavy").iops + free.group("light").iops;
    let (heavy, light) = (capped.group("heavy").iops, capped.group("light").iops);
    let ratio = free.group("heavy").iops / free.group("light").iops;
    let want = w[0] as f64 / w[1] as f64;
    let comparisons = vec![
        compare(
            "no cap: heavy / light IOPS",
            format!("{want:.2} ±5%"),
            format!("{ratio:.3}"),
            (ratio / want - 1.0).abs() <= 0.05,
        ),
        compare("capped heavy group", "1500 IOPS ±2%", format!("{heavy:.0}"), (heavy / CAP - 1.0).abs() <= 0.02),
        compare(
            "light group: what the cap leaves",
            format!("{:.0} IOPS ±5%", capacity - CAP),
            format!("{light:.0}"),
            (light / (capacity - CAP) - 1.0).abs() <= 0.05,
        ),
    ];
    Ok(Outcome { runs: vec![free, capped], comparisons })
}
