//! Cost per IO of the limiters, against the pass-through controller.
//!
//! - `fast_path`: an IO that passes at once (limits set far above the offered rate): the path every IO
//!   of a group under its limit takes. Target ≤ 50 ns per IO.
//! - `held_back`: a group running at its limit, every IO held and released later: submit plus the
//!   dispatch that releases it.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ioshare_core::limit::Knob;
use ioshare_core::{
    Controller, Dispatch, GroupSettings, Io, KnobLimit, LeakyBucketLimiter, Limits, NoControl, Op, Submit,
    TokenBucketLimiter,
};

/// Read and write IOPS and bps knobs all set: the most buckets a direction can pass.
fn limits(iops: u64) -> Limits {
    Limits::none()
        .with(Knob::IopsRead, KnobLimit::avg(iops))
        .with(Knob::BpsRead, KnobLimit::avg(iops * 8192))
        .with(Knob::IopsWrite, KnobLimit::avg(iops))
        .with(Knob::BpsWrite, KnobLimit::avg(iops * 8192))
}

fn fast_path<C: Controller>(c: &mut Criterion, name: &str, mut ctrl: C) {
    let settings = GroupSettings { limits: limits(1_000_000_000), ..GroupSettings::default() };
    let group = ctrl.configure(0, "tenant", &settings).unwrap();
    let mut now = 0;
    let mut id = 0;
    let mut bench = c.benchmark_group("fast_path");
    bench.throughput(Throughput::Elements(1));
    bench.bench_function(name, |b| {
        b.iter(|| {
            now += 100;
            id += 1;
            let op = if id & 1 == 0 { Op::Read } else { Op::Write };
            match ctrl.submit(now, Io::new(id, group, op, id * 4096, 4096)) {
                Submit::Issue { io, .. } => black_box(io),
                Submit::Queued => panic!("the fast path must not queue"),
            };
        })
    });
    bench.finish();
}

fn held_back<C: Controller>(c: &mut Criterion, name: &str, mut ctrl: C) {
    // 10 000 IOPS total; IOs are offered 4 µs apart (250 000/s), so all but the first wait.
    let settings = GroupSettings {
        limits: Limits::none().with(Knob::IopsTotal, KnobLimit::avg(10_000)),
        ..GroupSettings::default()
    };
    let group = ctrl.configure(0, "tenant", &settings).unwrap();
    let mut now = 0;
    let mut id = 0;
    let mut bench = c.benchmark_group("held_back");
    bench.throughput(Throughput::Elements(1));
    bench.bench_function(name, |b| {
        b.iter(|| {
            now += 4_000;
            id += 1;
            let _ = black_box(ctrl.submit(now, Io::new(id, group, Op::Write, id * 4096, 4096)));
            // Release whatever is due, jumping to the release time as a driver would.
            let mut released = 0;
            while released == 0 {
                match ctrl.dispatch(now) {
                    Dispatch::Io(io) => {
                        black_box(io);
                        released += 1;
                    }
                    Dispatch::At(at) => now = at,
                    Dispatch::Idle => break,
                }
            }
        })
    });
    bench.finish();
}

fn limiters(c: &mut Criterion) {
    fast_path(c, "none", NoControl::new());
    fast_path(c, "token-bucket", TokenBucketLimiter::default());
    fast_path(c, "leaky-bucket", LeakyBucketLimiter::default());
    held_back(c, "token-bucket", TokenBucketLimiter::default());
    held_back(c, "leaky-bucket", LeakyBucketLimiter::default());
}

criterion_group!(benches, limiters);
criterion_main!(benches);
