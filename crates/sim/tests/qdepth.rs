//! Issue 13: saturation that hides in a device queue deeper than the device's parallelism, through
//! the built-in scenarios `ioshare sim qdepth-*` prints. Each runs the kernel-faithful IOCost, whose
//! comparison documents the kernel's drift (it would be this test's failure with the option off),
//! and IOCost with the device-depth option, whose comparisons are the acceptance. The
//! tolerances live beside the scenarios, so the CLI and the tests cannot drift apart.

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{ModelParams, QosParams};
use ioshare_sim::scenarios::{find, Args, Outcome};
use ioshare_sim::{ControllerSpec, DeviceSpec, Job, Report, Rw, Scenario};

fn run(name: &str, args: Args) -> Outcome {
    let out = (find(name).expect("built-in exists").run)(&args).expect("scenario runs");
    assert!(out.ok(), "{name}:\n{}", out.to_table());
    out
}

fn runs<'a>(out: &'a Outcome, controller: &str) -> Vec<&'a Report> {
    out.runs.iter().filter(|r| r.controller == controller).collect()
}

#[test]
fn case_1_saturating_readers_split_by_weight_only_with_the_option() {
    for weights in [[200, 100], [400, 100], [100, 200]] {
        let out = run("qdepth-split", Args { weights: Some(weights.to_vec()), ..Args::default() });
        let want = weights[0] as f64 / weights[1] as f64;
        for r in runs(&out, "iocost+qd") {
            let ratio = r.group("a").cost_share / r.group("b").cost_share;
            assert!((ratio / want - 1.0).abs() <= 0.03, "{weights:?}: {ratio}");
        }
        // The kernel-faithful controller: the device queue's split, whatever the weights.
        for r in runs(&out, "iocost") {
            assert!((r.group("a").cost_share - 0.5).abs() < 0.02);
        }
    }
}

#[test]
fn case_2_weight_1_beside_10000_gets_its_weight_only_with_the_option() {
    let out = run("qdepth-weight", Args::default());
    assert!(runs(&out, "iocost")[0].group("light").cost_share > 0.4);
    assert!(runs(&out, "iocost+qd")[0].group("light").cost_share < 1e-4 + 2.0 / 65_536.0);
}

#[test]
fn case_3_a_group_back_from_idle_gets_its_share_not_a_flood() {
    let out = run("qdepth-return", Args::default());
    assert_eq!(out.runs.len(), 2);
    let option = runs(&out, "iocost+qd")[0];
    assert!(option.device.vrate_pct_mean <= 105.0, "{}", option.device.vrate_pct_mean);
}

#[test]
fn with_the_option_the_low_reader_takes_what_the_dropped_one_leaves() {
    run("qdepth-donation", Args::default());
}

#[test]
fn with_the_option_a_latency_target_moves_the_point_along_the_trade_off() {
    let out = run("qdepth-latency", Args::default());
    // solo, then (kernel, option) at 2x and at 4x.
    assert_eq!(out.runs.len(), 5);
}

/// The slot queue holds only groups at or above their share of the slots (limit × hweight_active,
/// at least one): a QD1 reader beside a saturating group never waits for a slot, even with every
/// slot taken and the neighbour's IOs queued for them. Four slots on a linear device with 8 servers
/// of constant service time: entering at once, the reader finds a free server and its latency is
/// its service time, exactly as solo; queued behind the neighbour's waiting IOs it would first wait
/// for one of the four to complete (up to a quarter of a service time more on average).
#[test]
fn with_the_option_a_group_below_its_share_of_slots_never_waits_for_one() {
    let device = DeviceSpec::linear(ModelParams::SSD_DFL, 8).with_queue_depth(128);
    let depth = Some(DepthLimit { max: 4 });
    let ctl = ControllerSpec::IoCost { model: ModelParams::SSD_DFL, qos: QosParams::default(), depth };
    let reader = Job::closed(Rw::RandRead, 4096, 1).with_think_us(100);
    let base = |ctl: ControllerSpec| {
        Scenario::new("slot-share", device.clone())
            .controller(ctl)
            .group("reader", 200, [reader.clone()])
            .seconds(3.0)
            .warmup(1.0)
            .seed(1)
    };
    let solo = base(ControllerSpec::None).run().expect("runs").group("reader").lat_us.clone();
    let r = base(ctl).group("batch", 100, [Job::closed(Rw::RandRead, 4096, 32)]).run().expect("runs");
    let (reader, batch) = (r.group("reader"), r.group("batch"));
    assert!(reader.lat_us.max <= solo.max * 1.001, "reader {:?} vs solo {:?}", reader.lat_us, solo);
    // The limit still binds the neighbour: the reader's IO counts against it, so the batch keeps
    // three or four of the eight servers busy (1% for the rate estimate).
    let servers = batch.iops / ModelParams::SSD_DFL.rrandiops as f64 * 8.0;
    assert!((3.0 * 0.99..=4.0 * 1.01).contains(&servers), "batch {} IOPS = {servers:.2} servers", batch.iops);
}

/// An unreachable latency target (p99 below the device's service time) shrinks the slot limit to
/// one and stops there: vrate is not lowered for it, so the reader keeps its budget and its solo
/// latency and the neighbour its slot. Lowering vrate, as the kernel's busy level would, only
/// idles the device (the kernel-faithful controller beside it, for contrast).
#[test]
fn with_the_option_an_unreachable_target_keeps_one_slot_and_vrate() {
    let device = DeviceSpec::linear(ModelParams::SSD_DFL, 8).with_queue_depth(128);
    let qos = "rpct=99 rlat=500".parse::<ioshare_core::QosConfig>().expect("valid").params;
    let run = |depth: Option<DepthLimit>| {
        Scenario::new("unreachable", device.clone())
            .controller(ControllerSpec::IoCost { model: ModelParams::SSD_DFL, qos, depth })
            .group("reader", 200, [Job::closed(Rw::RandRead, 4096, 1).with_think_us(100)])
            .group("batch", 100, [Job::closed(Rw::RandRead, 4096, 32)])
            .seconds(4.0)
            .warmup(2.0)
            .seed(1)
            .run()
            .expect("runs")
    };
    let kernel = run(None);
    let option = run(Some(DepthLimit { max: 32 }));
    assert!(kernel.device.vrate_pct_mean < 50.0, "kernel-faithful vrate {}", kernel.device.vrate_pct_mean);
    // 939.5 µs: the linear device's service time, the reader's latency alone.
    assert!(option.device.vrate_pct_mean >= 99.0, "vrate {}", option.device.vrate_pct_mean);
    assert!(option.group("reader").lat_us.max < 940.0, "{:?}", option.group("reader").lat_us);
    // One slot for the batch while the reader's IO is in too (its reservation): one server busy.
    let servers = option.group("batch").iops / ModelParams::SSD_DFL.rrandiops as f64 * 8.0;
    assert!((0.99..=1.01).contains(&servers), "batch on {servers:.3} servers");
}
