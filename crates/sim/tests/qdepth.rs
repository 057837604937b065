//! Issue 13: saturation that hides in a device queue deeper than the device's parallelism.
//!
//! Every case runs twice on the same linear ssd_dfl device (8 servers, 8518 random 4 KiB reads/s):
//! with the kernel-faithful IOCost, where the test documents the kernel's behaviour (shares drift
//! towards each group's share of the device queue, vrate drifts above what the device serves), and
//! with ioshare's device-depth option (`ioshare_core::iocost::depth`, at most 32 IOs in the device),
//! where the split is the weights'. Virtual time: the figures are exact for the seed, the bounds
//! are the acceptance (±3%, or the 16-bit hweight for weight 1 beside 10 000).

use ioshare_core::{ModelParams, QosParams, NSEC_PER_MSEC};
use ioshare_sim::{DeviceSpec, Job, Load, Report, Rw, Scenario};

/// The option's device depth: the simulator's default device queue (4 × 8 servers).
const DEPTH: u32 = 32;

fn device(queue_depth: u32) -> DeviceSpec {
    DeviceSpec::linear(ModelParams::SSD_DFL, 8).with_queue_depth(queue_depth)
}

fn run(sc: Scenario, option: bool) -> Report {
    let sc = if option {
        sc.iocost_depth(ModelParams::SSD_DFL, QosParams::default(), DEPTH)
    } else {
        sc.iocost(ModelParams::SSD_DFL, QosParams::default())
    };
    sc.run().expect("scenario runs")
}

fn two_readers(queue_depth: u32, weights: (u32, u32), iodepths: (u32, u32)) -> Scenario {
    Scenario::new("qdepth", device(queue_depth))
        .group("a", weights.0, [Job::closed(Rw::RandRead, 4096, iodepths.0)])
        .group("b", weights.1, [Job::closed(Rw::RandRead, 4096, iodepths.1)])
        .seconds(10.0)
        .warmup(2.0)
        .seed(1)
}

fn ratio(r: &Report) -> f64 {
    r.group("a").cost_share / r.group("b").cost_share
}

#[test]
fn case_1_saturating_readers_split_by_queue_depth_unless_ioshare_owns_the_device_slots() {
    // A device queue of 128 (like this VM's virtio disk): two saturating readers never wait for a
    // device slot, and no latency target is set, so nothing shows the over-commit.
    for (wa, wb) in [(200, 100), (400, 100), (100, 200)] {
        for qd in [32, 64] {
            let sc = two_readers(128, (wa, wb), (qd, qd));
            let want = wa as f64 / wb as f64;
            let faithful = run(sc.clone(), false);
            assert!((ratio(&faithful) - 1.0).abs() < 0.05, "kernel: queue-depth split, got {}", ratio(&faithful));
            assert!(faithful.device.vrate_pct_mean > 125.0, "kernel: vrate drifts, {}", faithful.device.vrate_pct_mean);
            let option = run(sc, true);
            assert!((ratio(&option) / want - 1.0).abs() <= 0.03, "{wa}:{wb} QD{qd}: {}", ratio(&option));
            assert!(option.device.utilization >= 0.95, "{}", option.device.utilization);
            assert!(option.device.vrate_pct_mean <= 105.0, "{}", option.device.vrate_pct_mean);
        }
    }
}

#[test]
fn case_2_weight_1_beside_10000_takes_its_queue_depth_share_unless_the_option_is_on() {
    // The case: weight 1 at QD256 beside weight 10 000 at QD32, the default device queue
    // (32). The heavy-weight group never runs out of budget, only of IOs: it donates, and the
    // device's FIFO serves the weight-1 group's queue.
    let sc = two_readers(32, (1, 10_000), (256, 32));
    let faithful = run(sc.clone(), false);
    assert!(faithful.group("a").cost_share > 0.4, "{}", faithful.group("a").cost_share);
    let option = run(sc, true);
    // 1/10001 of the device, within the kernel's 16-bit hweight (1/65536 steps).
    let share = option.group("a").cost_share;
    assert!(share < 1.0 / 10_001.0 + 2.0 / 65_536.0, "{share}");
    assert!(option.device.utilization >= 0.95, "{}", option.device.utilization);
    // With a device queue as deep as the servers, the kernel-faithful controller is right already.
    let served = run(two_readers(8, (1, 10_000), (256, 32)), false);
    assert!(served.group("a").cost_share < 1.0 / 10_001.0 + 2.0 / 65_536.0, "{}", served.group("a").cost_share);
    // Both at QD32 on a 64-deep device queue: the kernel splits by queue depth, 50%.
    let faithful = run(two_readers(64, (1, 10_000), (32, 32)), false);
    assert!((faithful.group("a").cost_share - 0.5).abs() < 0.01 && faithful.device.vrate_pct_mean > 140.0);
    let option = run(two_readers(64, (1, 10_000), (32, 32)), true);
    assert!(option.group("a").cost_share < 1.0 / 10_001.0 + 2.0 / 65_536.0);
}

/// Per 50 ms interval ending in (from_s, to_s]: the returning group's share of the IOs.
fn back_shares(r: &Report, from_s: f64, to_s: f64) -> Vec<f64> {
    let (back, steady) = (&r.group("back").series, &r.group("steady").series);
    back.iter()
        .zip(steady)
        .filter(|(p, _)| p.t_s > from_s + 1e-9 && p.t_s <= to_s + 1e-9)
        .map(|(b, s)| b.iops / (b.iops + s.iops))
        .collect()
}

#[test]
fn case_3_a_group_returning_from_idle_gets_its_share_not_a_flood() {
    // "steady" reads alone at QD32 while "back" (equal weight, up to 256 IOs outstanding) is idle
    // from 0.3 s to 3.0 s. Alone at QD32 the device queue never overflows: the kernel raises vrate
    // whenever steady is throttled, and nothing ever says the device is full.
    let mut back = Job::open(Rw::RandRead, 4096, 40_000.0);
    back.load = Load::Open {
        rate: 40_000.0,
        poisson: false,
        burst: Some((300 * NSEC_PER_MSEC, 2_700 * NSEC_PER_MSEC)),
        max_outstanding: 256,
    };
    let mut sc = Scenario::new("return-from-idle", device(32))
        .group("steady", 100, [Job::closed(Rw::RandRead, 4096, 32)])
        .group("back", 100, [back])
        .seconds(3.3)
        .seed(1);
    sc.sample_interval = 50 * NSEC_PER_MSEC;
    let vrate_at = |r: &Report, t: f64| r.device.series.iter().find(|p| p.t_s >= t - 1e-9).map(|p| p.vrate_pct).unwrap();

    // The most a returning group may take in its first 50 ms: its half, plus the start budget of half
    // a period of vtime spent at its share (0.5) — a quarter of the interval with the 50 ms period of
    // the default QoS.
    let half_period_s = QosParams::default().period_us() as f64 / 2e6;
    let bound = 0.5 + half_period_s * 0.5 / 0.05;
    assert!((bound - 0.75).abs() < 1e-9);

    let faithful = run(sc.clone(), false);
    assert!(vrate_at(&faithful, 3.0) > 125.0, "kernel: vrate drifted to {}", vrate_at(&faithful, 3.0));
    // On return the budget vrate over-commits goes out, the device queue is served FIFO, and the
    // returning group's 256 IOs take the device's queue.
    let shares = back_shares(&faithful, 3.0, 3.3);
    assert!(shares.iter().all(|&s| s > bound), "{shares:?}");

    let option = run(sc, true);
    assert!(vrate_at(&option, 3.0) <= 105.0, "vrate {}", vrate_at(&option, 3.0));
    // The first interval within the start budget, then half each (±3%).
    let shares = back_shares(&option, 3.0, 3.3);
    assert!(shares[0] <= bound, "{shares:?}");
    assert!(shares[1..].iter().all(|&s| (s - 0.5).abs() <= 0.03 * 0.5), "{shares:?}");
}
