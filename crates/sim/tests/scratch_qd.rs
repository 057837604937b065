use ioshare_core::*;
use ioshare_sim::*;
#[test]
fn explore() {
    for (d1, d2, qd) in [(256, 32, 32), (32, 32, 64), (32,32,32), (256,32,8)] {
        let sc = Scenario::new("c2", DeviceSpec::linear(ModelParams::SSD_DFL, 8).with_queue_depth(qd))
            .group("a", 1, [Job::closed(Rw::RandRead, 4096, d1)])
            .group("b", 10000, [Job::closed(Rw::RandRead, 4096, d2)])
            .seconds(10.0).warmup(2.0).seed(1);
        for opt in [false, true] {
            let s2 = if opt { sc.clone().iocost_depth(ModelParams::SSD_DFL, QosParams::default(), 32) } else { sc.clone().iocost(ModelParams::SSD_DFL, QosParams::default()) };
            let r = s2.run().unwrap();
            let (a, b) = (r.group("a"), r.group("b"));
            println!("{d1}/{d2} qd{qd} opt {opt}: share {:.6} vrate {:.1} util {:.3} hw a {:.5}/{:.5} b {:.4}/{:.4} iops {} {} ev {:?}", a.cost_share, r.device.vrate_pct_mean, r.device.utilization, a.hweight_active, a.hweight_inuse, b.hweight_active, b.hweight_inuse, a.iops, b.iops, r.controller_events);
        }
    }
}
