//! IOCost on a device throttled like QEMU's `throttling.iops-total`, the lab guest's disk
//! (`ioshare sim throttle-drift`).
//!
//! QEMU's throttle is a leaky bucket that lets `iops / 10` operations through at once after the
//! guest has used less than the limit (the remote device's `burst`). While IOCost holds vrate below
//! what the device serves, that allowance fills up; when vrate climbs past the device, the
//! allowance absorbs the excess for a while at no latency, so the busy level keeps falling and vrate
//! keeps climbing (1–2% a period) until the allowance is spent and the excess queues in the device's
//! FIFO. There the groups split by queue depth, not weight: the saturating high-weight group's IOs
//! all sit in the device, none wait in the controller, its budget is unused, and it donates. vrate
//! then needs seconds to come back down (no step until the busy level reaches 4), undershoots, and
//! the cycle repeats about every 10 s. The kernel does the same (docs/fidelity.md: its own vrate
//! from `io.stat` swinging 88–115% in the guest, fio's two readers at 1.02–1.95 instead of 3), so the
//! kernel-faithful controller's drift here is the comparison that documents the kernel's
//! behaviour; the device-depth option holds the weights' split.
//!
//! The runs: the faithful controller on the throttle without a burst allowance (the control: the
//! split holds), with it at the bench's 32 device slots and at a kernel-like deep queue (both drift:
//! the engine's slots are not the cause), with a model 19% above the device (the bench's 0.3 s
//! calibration rounds measured 3582 IOPS of a 3000 IOPS throttle, the allowance counted as
//! capacity: the device is over-committed from the start), and the device-depth option with the
//! burst.

use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{ModelParams, QosConfig, QosParams};

use super::builtin::{compare, Args, Builtin, Outcome};
use crate::device::remote::RemoteSpec;
use crate::device::DeviceSpec;
use crate::error::SimError;
use crate::report::Report;
use crate::simulation::{ControllerSpec, Simulation};
use crate::workload::{Job, Rw};

pub(crate) const BUILTINS: &[Builtin] = &[Builtin {
    name: "throttle-drift",
    about: "two saturating readers (1:3) on a QEMU-style 3000 IOPS throttle with its burst: kernel IOCost drifts; +qd holds",
    run: drift,
}];

/// The guest's throttle, IOs/s.
pub const IOPS: u64 = 3000;
/// QEMU's burst allowance without an explicit `iops-total-max`: a tenth of a second's worth.
pub const BURST: f64 = IOPS as f64 / 10.0;
/// Device latency beyond the throttle's pacing, µs (an emulated NVMe disk over a host file).
const LATENCY_US: f64 = 100.0;
/// The bench's device slots, and a queue as deep as the guest's NVMe one.
pub const BENCH_SLOTS: u32 = 32;
pub const DEEP_QUEUE: u32 = 1024;
/// The bench's calibration in the guest: 3582 IOPS measured of the 3000 (the burst counted).
pub const CALIBRATED_IOPS: u64 = 3582;
/// Each reader's queue depth, as the bench's proportional scenario.
const QD: u32 = 64;
/// Acceptance of the split where it holds: within 3% of the weights'.
pub const TOLERANCE: f64 = 0.03;
/// A faithful run drifts when its ratio ends this far below the weights' (the kernel's own runs in
/// the guest: 1.02–1.95 of 3), with vrate past the device's rate on the way.
const DRIFTED: f64 = 0.9;

/// The guest's disk: QEMU's throttle at [`IOPS`] with burst allowance `burst`, accepting `depth` IOs.
pub fn qemu_throttle(burst: f64, depth: u32) -> DeviceSpec {
    DeviceSpec::Remote(RemoteSpec {
        iops: IOPS as f64,
        mbps: 1e5,
        latency_us: LATENCY_US,
        io_unit_kb: 256,
        queue_depth: Some(depth),
        burst,
    })
}

/// A cost model of `iops` random and sequential 4 KiB reads (the throttle counts IOs, not bytes).
pub fn model(iops: u64) -> ModelParams {
    let bps = 4 << 30;
    ModelParams { rbps: bps, rseqiops: iops, rrandiops: iops, wbps: bps, wseqiops: iops, wrandiops: iops }
}

/// The bench's calibrated QoS in the guest: p50 read and write targets of 16 ms.
pub fn qos() -> QosParams {
    "rpct=50 rlat=16000 wpct=50 wlat=16000".parse::<QosConfig>().expect("valid").params
}

/// One run: weights `w` on `device` under `controller`, 10 s (1 s warm-up) unless `args` say.
fn run(args: &Args, name: &str, device: DeviceSpec, controller: ControllerSpec, w: &[u32]) -> Result<Report, SimError> {
    let mut r = Simulation::new(name, device)
        .controller(args.controller(controller))
        .group("high", w[0], [Job::closed(Rw::RandRead, 4096, QD)])
        .group("low", w[1], [Job::closed(Rw::RandRead, 4096, QD)])
        .seconds(args.seconds(10.0))
        .warmup(1.0)
        .seed(args.seed())
        .run()?;
    r.controller = name.to_string();
    Ok(r)
}

/// The second group's IOPS over the first's.
pub fn ratio(r: &Report) -> f64 {
    r.group("low").iops / r.group("high").iops.max(1e-9)
}

/// The highest vrate at a sample's end, %.
pub fn peak_vrate(r: &Report) -> f64 {
    r.device.series.iter().map(|p| p.vrate_pct).fold(0.0, f64::max)
}

fn drift(args: &Args) -> Result<Outcome, SimError> {
    let w = args.weights([100, 300])?;
    let want = w[1] as f64 / w[0] as f64;
    let faithful = |model_iops| ControllerSpec::IoCost { model: model(model_iops), qos: qos(), depth: None };
    let mut out = Outcome { runs: Vec::new(), comparisons: Vec::new() };

    let r = run(args, "iocost, no burst", qemu_throttle(0.0, DEEP_QUEUE), faithful(IOPS), &w)?;
    let got = ratio(&r);
    out.comparisons.push(compare(
        "iocost on the throttle without a burst: low/high IOPS",
        format!("{want:.2} ±3%"),
        format!("{got:.3}"),
        (got / want - 1.0).abs() <= TOLERANCE,
    ));
    out.runs.push(r);

    for (name, depth, model_iops) in [
        ("iocost, burst, 32 slots", BENCH_SLOTS, IOPS),
        ("iocost, burst, deep queue", DEEP_QUEUE, IOPS),
        ("iocost, burst, model +19%", BENCH_SLOTS, CALIBRATED_IOPS),
    ] {
        let r = run(args, name, qemu_throttle(BURST, depth), faithful(model_iops), &w)?;
        let (got, peak) = (ratio(&r), peak_vrate(&r) * model_iops as f64 / IOPS as f64);
        out.comparisons.push(compare(
            &format!("{name}: low/high IOPS (the kernel's drift), peak vrate as % of the device"),
            format!("< {:.2}, > 105%", want * DRIFTED),
            format!("{got:.3}, {peak:.0}%"),
            got < want * DRIFTED && peak > 105.0,
        ));
        out.runs.push(r);
    }

    // The option, as the bench runs it: no latency target (the period kept), 32 slots.
    let q = qos();
    let no_targets = QosParams { rppm: 0, wppm: 0, rlat_us: q.rlat_us * 5, wlat_us: q.wlat_us * 5, ..q };
    let option = ControllerSpec::IoCost {
        model: model(CALIBRATED_IOPS),
        qos: no_targets,
        depth: Some(DepthLimit { max: BENCH_SLOTS }),
    };
    let r = run(args, "iocost+qd, burst, model +19%", qemu_throttle(BURST, DEEP_QUEUE), option, &w)?;
    let got = ratio(&r);
    out.comparisons.push(compare(
        "iocost+qd on the throttle with its burst, model +19%: low/high IOPS, utilisation",
        format!("{want:.2} ±3%, ≥ 97%"),
        format!("{got:.3}, {:.1}%", r.device.utilization * 100.0),
        (got / want - 1.0).abs() <= TOLERANCE && r.device.utilization >= 0.97,
    ));
    out.runs.push(r);
    Ok(out)
}
