//! IOCost's costs: the issue fast path (every IO pays it) and the planner (once per period).
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ioshare_core::iocost::depth::DepthLimit;
use ioshare_core::{
    Completion, Controller, Dispatch, GroupId, GroupSettings, Io, IoCost, LinearModel, ModelParams, Nanos, Op,
    QosParams, Submit,
};

/// A device where a 4 KiB read costs 1.3 µs (`ssd_fast`), so a group issuing one IO every 2 µs
/// never runs out of budget: every submit takes the fast path.
fn controller(groups: usize) -> (IoCost, Vec<GroupId>) {
    controller_with(groups, None)
}

/// [`controller`], with the device-depth option when `depth` is given.
fn controller_with(groups: usize, depth: Option<u32>) -> (IoCost, Vec<GroupId>) {
    let mut ctl = IoCost::new(LinearModel::new(ModelParams::SSD_FAST), QosParams::default());
    if let Some(max) = depth {
        ctl = ctl.with_depth_limit(DepthLimit { max });
    }
    let ids = (0..groups)
        .map(|i| ctl.configure(0, &format!("parent{}/g{i}", i % 100), &GroupSettings::default()).unwrap())
        .collect();
    (ctl, ids)
}

fn fast_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("iocost_fast_path");
    // "+qd": the device-depth option's slot accounting on the same path (a slot is always free).
    for (name, depth, groups) in
        [("submit_dispatch", None, 1usize), ("submit_dispatch", None, 100), ("submit_dispatch+qd", Some(32), 1)]
    {
        let (mut ctl, ids) = controller_with(groups, depth);
        let mut now: Nanos = 0;
        let mut id = 0u64;
        group.bench_with_input(BenchmarkId::new(name, groups), &groups, |b, _| {
            b.iter(|| {
                now += 2_000;
                id += 1;
                let g = ids[id as usize % ids.len()];
                let io = Io::new(id, g, Op::Read, id * 4096, 4096);
                let Submit::Issue { io, .. } = ctl.submit(now, io) else { panic!("budget must suffice") };
                black_box(&ctl.dispatch(now));
                // Completion and the planner keep the state realistic; they are part of the cycle.
                ctl.complete(now, &io, Completion { released: now, started: now });
                if ctl.next_tick().is_some_and(|t| t <= now) {
                    ctl.tick(now);
                }
            })
        });
    }
    group.finish();
}

fn planner(c: &mut Criterion) {
    let mut group = c.benchmark_group("iocost_planner_tick");
    group.sample_size(20);
    for groups in [10usize, 1_000, 10_000] {
        group.bench_with_input(BenchmarkId::from_parameter(groups), &groups, |b, &n| {
            let (mut ctl, ids) = controller(n);
            let mut id = 0u64;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Every group issues in the period (untimed); every tenth saturates — it keeps
                    // submitting until an IO waits — so the planner has both donors and shortages.
                    let tick_at = ctl.next_tick().unwrap_or(1_000);
                    let at = tick_at - 1_000;
                    for (k, &g) in ids.iter().enumerate() {
                        loop {
                            id += 1;
                            match ctl.submit(at, Io::new(id, g, Op::Read, id * 4096, 4096)) {
                                Submit::Issue { io, .. } => {
                                    ctl.complete(at, &io, Completion { released: at, started: at })
                                }
                                Submit::Queued => break,
                            }
                            if k % 10 != 0 {
                                break;
                            }
                        }
                    }
                    while let Dispatch::Io(io) = ctl.dispatch(at) {
                        ctl.complete(at, &io, Completion { released: at, started: at });
                    }
                    let start = Instant::now();
                    ctl.tick(tick_at);
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, fast_path, planner);
criterion_main!(benches);
