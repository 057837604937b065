//! The userspace backend on real processes (root only): fio readers in blkio cgroups on a loop
//! device, the agent planning over them every 100 ms and writing blk-throttle limits.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{throttle_snapshot, wait_for, Rig};
use ioshare_agent::{Agent, BackendChoice, Config};
use ioshare_host::skip_unless_root;

/// Queue depth of each reader.
const DEPTH: u32 = 16;

/// Runs `body` with an agent started on `config` in another thread; stops it (reverting) after.
fn with_agent<T>(config: &std::path::Path, state: &std::path::Path, body: impl FnOnce() -> T) -> T {
    let config = Config::load(config).unwrap();
    let (agent, _) = Agent::start(config, BackendChoice::Userspace, state).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let runner = s.spawn(|| agent.run(&stop));
        // Stop the agent even when `body` panics, so it reverts before the rig is torn down.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let guard = StopOnDrop(&stop);
        let out = body();
        drop(guard);
        let reverted = runner.join().unwrap().unwrap();
        assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
        out
    })
}

#[test]
fn weights_split_two_readers_and_idle_share_is_donated() {
    if skip_unless_root("weights_split_two_readers_and_idle_share_is_donated") {
        return;
    }
    let rig = Rig::new("split", &["hi", "lo"]);
    let before = throttle_snapshot(&rig.root);
    let state = tempfile::tempdir().unwrap();

    // Uncontrolled: both readers saturating, then the high-weight one at a tenth of the device.
    let hi = rig.fio(0, DEPTH, &[]);
    let lo = rig.fio(1, DEPTH, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let (free, free_lat) = rig.rates(Duration::from_millis(2000));
    let free_total: f64 = free.iter().sum();
    let iops = free_total.round() as u64;
    let slow_rate = format!("--rate_iops={}", iops / 10);
    drop(hi);
    let slow = rig.fio(0, 4, &[&slow_rate]);
    std::thread::sleep(Duration::from_millis(500));
    let (free_slow, _) = rig.rates(Duration::from_millis(2000));
    drop(slow);

    // The model: this device's measured random-read rate (what `ioshare profile` would measure).
    let model = format!("ssd_dfl rrandiops={iops} rseqiops={iops}");
    // Latency target: half the mean read latency at saturation, judged at the median, so that vrate
    // settles where the device is kept busy (throughput at half the saturated queue depth is near
    // the maximum here) but not flooded (which is when fio's queue depth, not weight, would split it).
    let qos = format!("rpct=50 rlat={} min=20 max=500", (free_lat * 0.5).round().max(50.0));
    let config = rig.config(state.path(), &model, Some(&qos), &[200, 100], 100);

    let (split, slowed) = with_agent(&config, state.path(), || {
        let hi = rig.fio(0, DEPTH, &[]);
        std::thread::sleep(Duration::from_millis(2500));
        let (split, _) = rig.rates(Duration::from_millis(3000));
        eprintln!("{}", ioshare_agent::Status::read(state.path()).unwrap());
        drop(hi);
        let _slow = rig.fio(0, 4, &[&slow_rate]);
        std::thread::sleep(Duration::from_millis(1000));
        let (slowed, _) = rig.rates(Duration::from_millis(2000));
        eprintln!("{}", ioshare_agent::Status::read(state.path()).unwrap());
        (split, slowed)
    });
    drop(lo);
    let ratio = split[0] / split[1];
    let total = split[0] + split[1];
    let kept = slowed[1] / free_slow[1];
    eprintln!(
        "uncontrolled {:.0}+{:.0}={free_total:.0} IOPS at {free_lat:.0} µs; {qos}; agent 2:1 {:.0}+{:.0}={total:.0} IOPS, \
         ratio {ratio:.2}, total {:.0}% of uncontrolled; hi at a tenth: lo {:.0} IOPS with the agent, {:.0} without ({:.0}%)",
        free[0],
        free[1],
        split[0],
        split[1],
        100.0 * total / free_total,
        slowed[1],
        free_slow[1],
        100.0 * kept
    );
    // Acceptance is 2.0 ± 10%; the test allows ± 20% because three other engineers compile on this
    // machine's two cores meanwhile and the loop device's host disk varies run to run (the bench
    // measures the tight figure).
    assert!((1.6..=2.4).contains(&ratio), "ratio {ratio:.2}");
    // Acceptance: ≥ 90% of uncontrolled; 80% here for the same noise.
    assert!(total >= 0.8 * free_total, "total {total:.0} of {free_total:.0}");
    // Donation: with the high-weight tenant at a tenth, the other does (nearly) what it does with no
    // control at all in the same mix — the agent keeps nothing idle (acceptance 85%; 70% for noise).
    assert!(kept >= 0.7, "lo kept {:.0}% of its uncontrolled rate", 100.0 * kept);
    assert_eq!(throttle_snapshot(&rig.root), before, "stopping the agent restored every throttle file");
}
