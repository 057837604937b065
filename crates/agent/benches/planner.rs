//! The userspace backend's planner cost per period: 1000 cgroups on one device, each charged its
//! period's counters, the planner run, and every budget turned into limits — everything the agent
//! does per period except reading and writing the cgroup files. Target: ≤ 5 ms of CPU.
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use ioshare_agent::backend::throttle::{throttle_for, DirUsage};
use ioshare_core::iocost::aggregate::{aggregate_cost, Charge};
use ioshare_core::{
    Controller, GroupId, GroupSettings, IoCost, Limits, LinearModel, ModelParams, Nanos, Op, QosParams, NSEC_PER_MSEC,
};

const GROUPS: usize = 1000;
const PERIOD: Nanos = 100 * NSEC_PER_MSEC;

fn planner_period(c: &mut Criterion) {
    let model = LinearModel::new(ModelParams::SSD_DFL);
    let qos = QosParams { rppm: 950_000, rlat_us: 5000, ..QosParams::default() };
    let mut ctl = IoCost::new(model, qos);
    ctl.set_period_us(PERIOD / 1000);
    // 1000 cgroups in 10 parents, weights 50..=500; a third of them idle in turn.
    let ids: Vec<GroupId> = (0..GROUPS)
        .map(|i| {
            ctl.configure(0, &format!("tenants{}/c{i}", i % 10), &GroupSettings::weight(50 + (i % 10) as u32 * 50))
                .unwrap()
        })
        .collect();
    let caps = Limits::default();
    let period = Duration::from_nanos(PERIOD);
    let mut now: Nanos = 0;
    let mut round = 0usize;
    c.bench_function("agent_period_1000_cgroups", |b| {
        b.iter(|| {
            now += PERIOD;
            round += 1;
            let mut usages = Vec::with_capacity(GROUPS);
            let mut charges = Vec::with_capacity(GROUPS);
            for (i, &id) in ids.iter().enumerate() {
                let ios = if (i + round) % 3 == 0 { 0 } else { 20 + (i as u64 % 50) };
                let u = [
                    DirUsage { ios, bytes: ios * 4096, cost: aggregate_cost(&model, Op::Read, ios, ios * 4096, true) },
                    DirUsage::default(),
                ];
                charges.push(Charge { group: id, abs_cost: u[0].cost, limited: i % 2 == 0 });
                usages.push(u);
            }
            ctl.charge_period(now, &charges);
            ctl.record_completions([1000, 0], [10, 0], 0);
            ctl.tick(now);
            let stats = ctl.stats(now);
            for (i, &id) in ids.iter().enumerate() {
                let alone = stats.groups[id.index()].hweight_active >= 0.999;
                let budget = if alone { None } else { ctl.budget(now, id, PERIOD) };
                black_box(throttle_for(budget, &usages[i], &model, period, &caps));
            }
        })
    });
}

criterion_group!(benches, planner_period);
criterion_main!(benches);
