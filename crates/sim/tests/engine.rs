//! The driver against controllers whose behaviour is known: the pass-through `NoControl`, and a
//! test controller that holds every IO and releases them at a fixed pace, to check the calling
//! protocol (every IO released once and completed once, dispatch wake-ups, ticks at `next_tick`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use ioshare_core::{
    Completion, Controller, Dispatch, Event, GroupId, GroupSettings, Io, ModelParams, Nanos, NoControl, Stats, Submit,
};
use ioshare_sim::{DeviceSpec, Job, Rw, Simulation};

fn two_readers(servers: u32) -> Simulation {
    Simulation::new("t", DeviceSpec::linear(ModelParams::SSD_DFL, servers))
        .group("a", 200, [Job::closed(Rw::RandRead, 4096, 16)])
        .group("b", 100, [Job::closed(Rw::RandRead, 4096, 16)])
        .seconds(2.0)
}

#[test]
fn without_control_a_saturated_linear_device_delivers_its_model() {
    let r = two_readers(4).run().unwrap();
    let iops: f64 = r.groups.iter().map(|g| g.iops).sum();
    // 4k random reads on ssd_dfl: 8518/s when every server is busy (it always is at QD32).
    assert!((iops / 8518.0 - 1.0).abs() < 0.002, "{iops}");
    assert!((r.device.utilization - 1.0).abs() < 0.002, "{}", r.device.utilization);
    // Weights mean nothing without a controller: equal depth, equal share.
    assert!((r.group("a").cost_share - 0.5).abs() < 0.01);
    assert_eq!(r.device.vrate_pct, 100.0);
    // Little's law: 32 in flight at 8518/s → 3.76 ms mean latency.
    let mean = r.group("a").lat_us.mean;
    assert!((mean / (32.0 / 8518.0 * 1e6) - 1.0).abs() < 0.01, "{mean}");
}

#[test]
fn think_time_and_depth_set_a_closed_loop_rate() {
    // QD1 with 1 ms think on an idle 1-server device: one IO per (service + think).
    let r = Simulation::new("t", DeviceSpec::linear(ModelParams::SSD_DFL, 1))
        .group("a", 100, [Job::closed(Rw::RandRead, 4096, 1).with_think_us(1000)])
        .seconds(2.0)
        .run()
        .unwrap();
    let service = 1e6 / 8518.0;
    let want = 1e6 / (service + 1000.0);
    assert!((r.group("a").iops / want - 1.0).abs() < 0.01, "{} vs {want}", r.group("a").iops);
    assert!((r.group("a").lat_us.p99 - service).abs() < 2.0);
}

#[test]
fn open_loop_rate_is_kept_below_saturation() {
    let r = Simulation::new("t", DeviceSpec::linear(ModelParams::SSD_DFL, 8))
        .group("a", 100, [Job::open(Rw::RandRead, 4096, 2000.0)])
        .seconds(5.0)
        .run()
        .unwrap();
    let g = r.group("a");
    // Poisson arrivals: 10 000 expected, standard deviation 100.
    assert!((g.iops - 2000.0).abs() < 2000.0 * 0.03, "{}", g.iops);
    assert_eq!(g.dropped, 0);
}

/// Holds every IO and releases one every `gap` ns; plans every ms. Records what the driver did.
#[derive(Default)]
struct Log {
    submitted: Vec<u64>,
    released: Vec<u64>,
    completed: Vec<u64>,
    ticks: Vec<Nanos>,
    late_dispatch: u32,
    bad_timing: u32,
    /// Ids submitted and not yet completed, with whether they were released.
    inflight: std::collections::HashMap<u64, bool>,
    violations: u32,
}

struct Pacer {
    gap: Nanos,
    next: Nanos,
    queue: VecDeque<Io>,
    tick: Nanos,
    log: Rc<RefCell<Log>>,
    groups: u32,
}

impl Controller for Pacer {
    fn name(&self) -> &'static str {
        "pacer"
    }
    fn configure(&mut self, _now: Nanos, _path: &str, _s: &GroupSettings) -> ioshare_core::Result<GroupId> {
        self.groups += 1;
        Ok(GroupId(self.groups - 1))
    }
    // The pacer numbers its groups and keeps no names: no path is known to it.
    fn group(&self, path: &str) -> ioshare_core::Result<GroupId> {
        Err(ioshare_core::Error::UnknownGroup(path.to_string()))
    }
    fn remove(&mut self, _now: Nanos, path: &str) -> ioshare_core::Result<GroupId> {
        self.group(path)
    }
    fn submit(&mut self, _now: Nanos, io: Io) -> Submit {
        let mut log = self.log.borrow_mut();
        log.submitted.push(io.id);
        if log.inflight.insert(io.id, false).is_some() {
            log.violations += 1;
        }
        self.queue.push_back(io);
        Submit::Queued
    }
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        match self.queue.front() {
            None => Dispatch::Idle,
            Some(_) if now < self.next => Dispatch::At(self.next),
            Some(_) => {
                if now > self.next + 1_000 {
                    self.log.borrow_mut().late_dispatch += 1;
                }
                self.next = now + self.gap;
                let io = self.queue.pop_front().unwrap();
                let mut log = self.log.borrow_mut();
                log.released.push(io.id);
                if log.inflight.insert(io.id, true) != Some(false) {
                    log.violations += 1;
                }
                Dispatch::Io(io)
            }
        }
    }
    fn complete(&mut self, now: Nanos, io: &Io, t: Completion) {
        let mut log = self.log.borrow_mut();
        if !(t.released <= t.started && t.started <= now) {
            log.bad_timing += 1;
        }
        log.completed.push(io.id);
        if log.inflight.remove(&io.id) != Some(true) {
            log.violations += 1;
        }
    }
    fn next_tick(&self) -> Option<Nanos> {
        Some(self.tick)
    }
    fn tick(&mut self, now: Nanos) {
        self.log.borrow_mut().ticks.push(now);
        self.tick += 1_000_000;
    }
    fn stats(&self, _now: Nanos) -> Stats {
        Stats::default()
    }
    fn take_events(&mut self) -> Vec<Event> {
        Vec::new()
    }
}

#[test]
fn driver_follows_the_controller_protocol() {
    let log = Rc::new(RefCell::new(Log::default()));
    let pacer = Pacer { gap: 500_000, next: 0, queue: VecDeque::new(), tick: 1_000_000, log: log.clone(), groups: 0 };
    let r = two_readers(2).seconds(1.0).run_with(Box::new(pacer)).unwrap();
    let log = log.borrow();
    // One release every 0.5 ms, on time: 2000 in a second (the device is much faster).
    assert_eq!(log.released.len(), 2001, "released at 0, 0.5 ms, ..., 1 s");
    assert_eq!(log.late_dispatch, 0, "wake-ups happen when dispatch said");
    assert_eq!(log.bad_timing, 0, "released <= started <= completed");
    // Every IO released once, in submission order (FIFO here), completed once. The driver reuses
    // ids of completed IOs, so follow each id through submit → release → complete.
    assert_eq!(log.violations, 0, "an id submitted, released or completed out of turn");
    assert_eq!(log.released[..], log.submitted[..log.released.len()]);
    assert_eq!(log.completed.len(), log.released.len() - 1, "the last release completes after the end");
    // Ticks exactly at every ms up to the end.
    assert_eq!(log.ticks, (1..=1000).map(|i| i * 1_000_000).collect::<Vec<_>>());
    assert_eq!(r.controller, "pacer");
    assert!((r.groups.iter().map(|g| g.iops).sum::<f64>() - 2000.0).abs() <= 2.0);
}

#[test]
fn device_queue_shows_as_started_after_released() {
    // Two servers, 32 IOs released at once by NoControl: most wait in the device queue, which the
    // latency shows (mean ≈ 16 service times) while each IO is served in 2 × 117 µs.
    let r = two_readers(2).run_with(Box::new(NoControl::new())).unwrap();
    assert!(r.group("a").lat_us.mean > 10.0 * 2.0 * 117.0);
}

/// A service and a leaker in a small memory pool, without a controller (so nothing is throttled)
/// but with each way of charging swap-out IO.
fn leak(charge: ioshare_sim::SwapCharge) -> ioshare_sim::Report {
    Simulation::new("leak", DeviceSpec::linear(ModelParams::SSD_DFL, 4))
        .memory(ioshare_sim::Memory::new(64.0, charge))
        .group("service", 100, [Job::closed(Rw::RandRead, 4096, 8).with_mem_bytes(4096)])
        .group("leaker", 100, [Job::leak(200.0, 1 << 20)])
        .seconds(2.0)
        .run()
        .unwrap()
}

#[test]
fn swap_out_io_is_charged_as_configured() {
    use ioshare_sim::SwapCharge;
    let root = leak(SwapCharge::Root);
    let origin = leak(SwapCharge::Origin);
    let m = root.memory.as_ref().unwrap();
    // 64 MB fill in 0.32 s at 200 MB/s; after that every MiB the leaker takes is swapped out, as
    // fast as the device writes 256 KiB (about 120 MB/s beside the service): hundreds of writes.
    assert!(m.swap_ios > 500, "{}", m.swap_ios);
    // Charged to the root: the device time is nobody's; charged to the origin: the leaker's.
    assert_eq!(root.group("leaker").cost_share, 0.0);
    assert!((m.swap_cost_share - (1.0 - root.group("service").cost_share)).abs() < 1e-9);
    assert!(origin.group("leaker").cost_share > 0.0);
    let om = origin.memory.as_ref().unwrap();
    assert!((origin.group("leaker").cost_share - om.swap_cost_share).abs() < 1e-9);
    // The service waits for reclaim once memory is full.
    assert!(root.group("service").mem_stall_us > 0.0);
    // Debt marks swap IO must_issue; without a controller it changes nothing else.
    let debt = leak(SwapCharge::Debt);
    assert_eq!(debt.group("service").ios, origin.group("service").ios);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Random groups (weights, depths, think times, must-issue shares, reads or writes) under IOCost
    /// with a weight change mid-run: every IO submitted is completed or still in flight at the end.
    #[test]
    fn no_io_is_lost_or_duplicated(
        groups in proptest::collection::vec((1u32..=10_000, 1u32..=16, 0u64..=300, 0.0f64..=1.0, proptest::bool::ANY), 1..5),
        new_weight in 1u32..=10_000,
        seed in 0u64..1000,
    ) {
        let qos = "rpct=90 rlat=2000 wpct=90 wlat=2000".parse::<ioshare_core::QosConfig>().unwrap().params;
        let mut sc = Simulation::new("prop", DeviceSpec::linear(ModelParams::SSD_DFL, 4))
            .iocost(ModelParams::SSD_DFL, qos)
            .seconds(0.3)
            .seed(seed)
            .change(0.15, ioshare_sim::ChangeKind::Weight { group: "g0".into(), weight: new_weight });
        for (i, (w, depth, think, must, read)) in groups.iter().enumerate() {
            let rw = if *read { Rw::RandRead } else { Rw::RandWrite };
            let job = Job::closed(rw, 4096, *depth).with_think_us(*think).with_must_issue(*must);
            sc = sc.group(&format!("g{i}"), *w, [job]);
        }
        let r = sc.run().unwrap();
        proptest::prop_assert_eq!(r.sim.submitted, r.sim.ios + r.sim.in_flight);
        let depth: u64 = groups.iter().map(|g| g.1 as u64).sum();
        proptest::prop_assert!(r.sim.in_flight <= depth, "more in flight than producers");
        proptest::prop_assert!(r.sim.ios > 0);
    }
}
