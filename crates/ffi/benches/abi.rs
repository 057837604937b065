//! The issue path through the C ABI against the same call in Rust: one IO submitted, issued and
//! completed on IOCost (limits stage in front, as `IOSHARE_KIND_IOCOST` builds it). The Rust call
//! is measured on the concrete type (inlined) and through `dyn Controller` (as the ABI holds it);
//! the difference to the ABI is what the ABI adds: argument checks, the controller's magic
//! number, the panic guard. Target: within 10 ns.
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::hint::black_box;
use std::ptr;

use criterion::{criterion_group, criterion_main, Criterion};
use ioshare::configure::ioshare_configure;
use ioshare::issue::{ioshare_complete, ioshare_submit};
use ioshare::lifecycle::{ioshare_free, ioshare_new};
use ioshare::types::{IoshareIo, IOSHARE_ISSUE, IOSHARE_KIND_IOCOST, IOSHARE_LOCKED};
use ioshare_core::{
    Completion, Controller, GroupSettings, Io, IoCost, Limited, LinearModel, ModelParams, Op, QosParams, Submit,
    TokenGate,
};

/// `ssd_fast`: a 4 KiB read costs 1.3 µs, so one IO every 2 µs always takes the fast path.
const STEP: u64 = 2_000;

fn iocost() -> Limited<IoCost, TokenGate> {
    Limited::new(IoCost::new(LinearModel::new(ModelParams::SSD_FAST), QosParams::default()))
}

/// One submit + complete cycle on `ctl`, generic so that the concrete type inlines.
fn bench_rust<C: Controller + ?Sized>(c: &mut Criterion, name: &str, ctl: &mut C) {
    let g = ctl.configure(0, "a", &GroupSettings::default()).unwrap();
    let (mut now, mut id) = (0u64, 0u64);
    c.bench_function(name, |b| {
        b.iter(|| {
            now += STEP;
            id += 1;
            let Submit::Issue { io, .. } = ctl.submit(now, black_box(Io::new(id, g, Op::Read, id * 4096, 4096))) else {
                panic!("budget must suffice")
            };
            ctl.complete(now, &io, Completion { released: now, started: now });
        })
    });
}

fn rust_call(c: &mut Criterion) {
    bench_rust(c, "issue_path/rust", &mut iocost());
    let mut boxed: Box<dyn Controller> = Box::new(iocost());
    bench_rust(c, "issue_path/rust_dyn", &mut *boxed);
}

fn abi_call(c: &mut Criterion) {
    for (name, flags) in [("issue_path/abi", 0), ("issue_path/abi_locked", IOSHARE_LOCKED)] {
        let mut ctl = ptr::null_mut();
        let mut g = 0;
        // SAFETY: valid strings and out pointers.
        unsafe {
            assert_eq!(ioshare_new(IOSHARE_KIND_IOCOST, c"ssd_fast".as_ptr(), ptr::null(), 0, flags, &mut ctl), 0);
            assert_eq!(ioshare_configure(ctl, 0, c"a".as_ptr(), 100, ptr::null(), &mut g), 0);
        }
        let (mut now, mut id) = (0u64, 0u64);
        c.bench_function(name, |b| {
            b.iter(|| {
                now += STEP;
                id += 1;
                let mut io = IoshareIo { id, offset: id * 4096, group: g, len: 4096, ..Default::default() };
                let mut delay = 0;
                // SAFETY: a live controller, pointers to locals.
                unsafe {
                    assert_eq!(ioshare_submit(ctl, now, black_box(&mut io), &mut delay), IOSHARE_ISSUE);
                    ioshare_complete(ctl, now, &io, now, now);
                }
            })
        });
        // SAFETY: made above.
        unsafe { ioshare_free(&mut ctl) };
    }
}

criterion_group!(benches, rust_call, abi_call);
criterion_main!(benches);
