//! Simulated IOs per second of wall-clock time (the speed target: ≥ 1M/s on one core for the
//! proportional scenario): two saturating 4 KiB random readers at 2:1 on an ssd_dfl linear device
//! (8 servers), with no controller and with IOCost. Criterion reports elements/s = simulated IOs/s.
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ioshare_core::{ModelParams, QosParams};
use ioshare_sim::{ControllerSpec, DeviceSpec, Job, Rw, Simulation};

fn proportional(controller: ControllerSpec) -> Simulation {
    Simulation::new("proportional", DeviceSpec::linear(ModelParams::SSD_DFL, 8))
        .controller(controller)
        .group("a", 200, [Job::closed(Rw::RandRead, 4096, 32)])
        .group("b", 100, [Job::closed(Rw::RandRead, 4096, 32)])
        .seconds(10.0)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sim_proportional_10s");
    g.sample_size(10);
    let iocost = ControllerSpec::IoCost { model: ModelParams::SSD_DFL, qos: QosParams::default(), depth: None };
    for (name, spec) in [("none", ControllerSpec::None), ("iocost", iocost)] {
        let sc = proportional(spec);
        let ios = sc.run().expect("runs").sim.ios;
        g.throughput(Throughput::Elements(ios));
        g.bench_function(name, |b| b.iter(|| sc.run().expect("runs")));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
