//! The issue path through the C ABI against the same call in Rust: one IO submitted, issued and
//! completed on IOCost (limits stage in front, as `IOSHARE_KIND_IOCOST` builds it). The Rust call
//! is measured on the concrete type (inlined) and through `dyn Controller` (as the ABI holds it);
//! the difference to the ABI is what the ABI adds: argument checks, the controller's magic
//! number, the panic guard, the IO's conversion. Target: within 10 ns.
//!
//! Criterion times each variant on its own; a shared machine drifts by several ns between those
//! runs, so the bench ends with a paired measurement: blocks of each variant interleaved, and the
//! median over blocks of (ABI − Rust), which is the figure to judge.
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::hint::black_box;
use std::ptr;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use ioshare::configure::ioshare_configure;
use ioshare::handle::IoshareCtl;
use ioshare::issue::{ioshare_complete, ioshare_submit};
use ioshare::lifecycle::{ioshare_free, ioshare_new};
use ioshare::types::{IoshareIo, IOSHARE_ISSUE, IOSHARE_KIND_IOCOST, IOSHARE_LOCKED};
use ioshare_core::{
    Completion, Controller, GroupId, GroupSettings, Io, IoCost, Limited, LinearModel, ModelParams, Op, QosParams,
    Submit, TokenGate,
};

/// `ssd_fast`: a 4 KiB read costs 1.3 µs, so one IO every 2 µs always takes the fast path.
const STEP: u64 = 2_000;

fn iocost() -> Limited<IoCost, TokenGate> {
    Limited::new(IoCost::new(LinearModel::new(ModelParams::SSD_FAST), QosParams::default()))
}

/// One way to run the issue path: `n` submit + complete cycles, one IO every [`STEP`].
trait Step {
    fn run(&mut self, n: u64);
}

/// The Rust call on a controller of type `C` (concrete: inlined; `dyn Controller`: as the ABI holds it).
struct RustStep<C: Controller + ?Sized> {
    ctl: Box<C>,
    g: GroupId,
    now: u64,
}

impl<C: Controller + ?Sized> RustStep<C> {
    fn new(mut ctl: Box<C>) -> Self {
        let g = ctl.configure(0, "a", &GroupSettings::default()).unwrap();
        RustStep { ctl, g, now: 0 }
    }
}

impl<C: Controller + ?Sized> Step for RustStep<C> {
    fn run(&mut self, n: u64) {
        for _ in 0..n {
            self.now += STEP;
            let id = self.now / STEP;
            let Submit::Issue { io, .. } =
                self.ctl.submit(self.now, black_box(Io::new(id, self.g, Op::Read, id * 4096, 4096)))
            else {
                panic!("budget must suffice")
            };
            self.ctl.complete(self.now, &io, Completion { released: self.now, started: self.now });
        }
    }
}

/// The same through the ABI, on a controller made with `flags`.
struct AbiStep {
    ctl: *mut IoshareCtl,
    g: u32,
    now: u64,
}

impl AbiStep {
    fn new(flags: u32) -> Self {
        let (mut ctl, mut g) = (ptr::null_mut(), 0);
        // SAFETY: valid strings and out pointers.
        unsafe {
            assert_eq!(ioshare_new(IOSHARE_KIND_IOCOST, c"ssd_fast".as_ptr(), ptr::null(), 0, flags, &mut ctl), 0);
            assert_eq!(ioshare_configure(ctl, 0, c"a".as_ptr(), 100, ptr::null(), &mut g), 0);
        }
        AbiStep { ctl, g, now: 0 }
    }
}

impl Step for AbiStep {
    fn run(&mut self, n: u64) {
        for _ in 0..n {
            self.now += STEP;
            let id = self.now / STEP;
            let mut io = IoshareIo { id, offset: id * 4096, group: self.g, len: 4096, ..Default::default() };
            let mut delay = 0;
            // SAFETY: a live controller, pointers to locals.
            unsafe {
                assert_eq!(ioshare_submit(self.ctl, self.now, black_box(&mut io), &mut delay), IOSHARE_ISSUE);
                ioshare_complete(self.ctl, self.now, &io, self.now, self.now);
            }
        }
    }
}

impl Drop for AbiStep {
    fn drop(&mut self) {
        // SAFETY: made in `new`.
        unsafe { ioshare_free(&mut self.ctl) };
    }
}

fn each_alone(c: &mut Criterion) {
    let steps: [(&str, Box<dyn Step>); 4] = [
        ("issue_path/rust", Box::new(RustStep::new(Box::new(iocost())))),
        ("issue_path/rust_dyn", Box::new(RustStep::<dyn Controller>::new(Box::new(iocost())))),
        ("issue_path/abi", Box::new(AbiStep::new(0))),
        ("issue_path/abi_locked", Box::new(AbiStep::new(IOSHARE_LOCKED))),
    ];
    for (name, mut step) in steps {
        c.bench_function(name, |b| b.iter(|| step.run(1)));
    }
}

/// Paired blocks: what the ABI adds, as the median over interleaved blocks of (ABI block − Rust
/// block), so that the machine's drift between criterion's separate runs cancels out.
fn paired() {
    const BLOCK: u64 = 20_000;
    const BLOCKS: usize = 300;
    let mut steps: [(&str, Box<dyn Step>); 3] = [
        ("rust (concrete)", Box::new(RustStep::new(Box::new(iocost())))),
        ("rust (dyn)", Box::new(RustStep::<dyn Controller>::new(Box::new(iocost())))),
        ("abi", Box::new(AbiStep::new(0))),
    ];
    let mut per_io = [(); 3].map(|_| Vec::with_capacity(BLOCKS));
    for _ in 0..BLOCKS {
        for ((_, step), times) in steps.iter_mut().zip(&mut per_io) {
            let start = Instant::now();
            step.run(BLOCK);
            times.push(start.elapsed().as_nanos() as f64 / BLOCK as f64);
        }
    }
    let over = |rust: &[f64]| per_io[2].iter().zip(rust).map(|(a, r)| a - r).collect::<Vec<_>>();
    let rows = [
        (steps[0].0, per_io[0].clone()),
        (steps[1].0, per_io[1].clone()),
        (steps[2].0, per_io[2].clone()),
        ("abi - rust (concrete)", over(&per_io[0])),
        ("abi - rust (dyn)", over(&per_io[1])),
    ];
    println!("paired: {BLOCKS} interleaved blocks of {BLOCK} IOs, ns per IO (submit + complete)");
    for (name, mut v) in rows {
        v.sort_by(f64::total_cmp);
        let (q1, m, q3) = (v[v.len() / 4], v[v.len() / 2], v[3 * v.len() / 4]);
        println!("  {name:<22} median {m:5.1}  quartiles {q1:5.1} .. {q3:5.1}");
    }
}

criterion_group!(benches, each_alone);

fn main() {
    benches();
    paired();
    Criterion::default().configure_from_args().final_summary();
}
