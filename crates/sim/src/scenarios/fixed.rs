//! `fixed-limits-vs-iocost`: fixed per-group limits (blk-throttle / `io.max` style, here librbd's
//! token bucket) against IOCost's weights, on the same workload. The limits are set the way an
//! operator would — each group capped at its weight's share of the device — so they protect the
//! latency-sensitive group, but the capacity it leaves unused is lost, while IOCost gives it to the
//! batch group and still serves the latency-sensitive group first.

use ioshare_core::{ModelParams, NSEC_PER_MSEC};

use super::basic::{qos_line, ssd_dfl_device};
use super::builtin::{compare, Args, Builtin, Outcome};
use crate::error::SimError;
use crate::simulation::{ControllerSpec, Simulation};
use crate::workload::{Job, Load, Rw};

pub(crate) const BUILTINS: &[Builtin] = &[Builtin {
    name: "fixed-limits-vs-iocost",
    about: "fixed IOPS caps at each group's share waste what a bursty group leaves; IOCost gives it away",
    run: fixed_vs_iocost,
}];

/// Device: ssd_dfl linear, 8 servers (8518 random 4 KiB reads/s). `web` (weight 200) reads in
/// bursts: 4000/s, Poisson, 1 s on, 1 s off. `batch` (weight 100) saturates at QD32. Fixed limits:
/// web 2/3 and batch 1/3 of the device's IOPS. IOCost: the right model, p95 read target 5 ms.
fn fixed_vs_iocost(args: &Args) -> Result<Outcome, SimError> {
    let w = args.weights([200, 100])?;
    let capacity = ModelParams::SSD_DFL.rrandiops as f64;
    let share = |x: u32| (capacity * x as f64 / (w[0] + w[1]) as f64).floor() as u64;
    let mut web = Job::open(Rw::RandRead, 4096, 4000.0);
    web.load = Load::Open { rate: 4000.0, poisson: true, burst: Some((1000 * NSEC_PER_MSEC, 1000 * NSEC_PER_MSEC)), max_outstanding: 4096 };
    let run = |name: &str, controller: ControllerSpec| -> Result<_, SimError> {
        let limits = |iops: u64| format!("iops-read={iops}").parse().map_err(SimError::Core);
        Simulation::new(name, ssd_dfl_device())
            .controller(controller)
            .seconds(args.seconds(20.0))
            .warmup(2.0)
            .seed(args.seed())
            .group("web", w[0], [web.clone()])
            .group("batch", w[1], [Job::closed(Rw::RandRead, 4096, 32)])
            .limit("web", limits(share(w[0]))?)
            .limit("batch", limits(share(w[1]))?)
            .run()
    };
    let fixed = run("fixed limits (token bucket)", ControllerSpec::TokenBucket)?;
    let qos = qos_line("rpct=95 rlat=5000 wpct=95 wlat=5000");
    let iocost = run("iocost", ControllerSpec::IoCost { model: ModelParams::SSD_DFL, qos, depth: None })?;
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let (fu, iu) = (fixed.device.utilization, iocost.device.utilization);
    let (fw, iw) = (fixed.group("web").iops, iocost.group("web").iops);
    let (fb, ib) = (fixed.group("batch").iops, iocost.group("batch").iops);
    let comparisons = vec![
        compare("device utilisation: fixed vs iocost", "fixed wastes", format!("{} vs {}", pct(fu), pct(iu)), iu >= fu + 0.2),
        compare("batch IOPS: fixed vs iocost", "iocost gives away", format!("{fb:.0} vs {ib:.0}"), ib > 1.5 * fb),
        compare(
            "web IOPS (demand 2000/s): fixed vs iocost",
            "both serve it",
            format!("{fw:.0} vs {iw:.0}"),
            (fw / 2000.0 - 1.0).abs() < 0.05 && (iw / 2000.0 - 1.0).abs() < 0.05,
        ),
    ];
    Ok(Outcome { runs: vec![fixed, iocost], comparisons })
}
