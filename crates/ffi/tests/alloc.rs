//! The issue path through the ABI does not allocate: a counting global allocator around
//! `ioshare_submit`, `ioshare_dispatch`, `ioshare_complete` and `ioshare_next_tick`, on every
//! controller kind, while one group goes idle and comes back (deactivation and activation) and the
//! others keep their queues busy. The ABI's controllers reserve their queues when they make them
//! (`QUEUE_RESERVE` IOs each) and keep no event log, so nothing grows.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use ioshare::issue::{ioshare_complete, ioshare_dispatch, ioshare_next_tick, ioshare_submit, ioshare_tick};
use ioshare::lifecycle::{ioshare_free, ioshare_new};
use ioshare::types::*;

/// Counts the allocations a thread makes while its `COUNTING` is set: the test's own thread only.
/// A global flag also counted whatever another thread of the binary (the test harness runs its own)
/// allocated meanwhile: a loaded fresh-clone run counted 4 once, where the same binary then counted
/// 0 in five runs and the issue path runs in virtual time, the same IOs every run.
struct Counting;
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Whether this thread counts its allocations (not while the thread is being torn down).
fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: forwards to the system allocator; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counting() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Rounds (of 2 µs) in which the first group idles, then submits.
const IDLE_ROUNDS: u64 = 100_000;

/// Drives `rounds` steps of a closed loop (at most 16 IOs per group outstanding), one step every
/// 2 µs, the way a reactor would: submit when the group may, dispatch what may go, complete what
/// was issued, tick when due. The first group submits nothing in every other 200 ms (so that it
/// is deactivated, and activated again when it comes back). When `count` is set, allocations are
/// counted in the issue path (not in the planner's tick).
///
/// # Safety
/// `ctl` is a live controller with groups `groups`.
unsafe fn drive(ctl: *mut ioshare::handle::IoshareCtl, groups: &[u32], start: u64, rounds: u64, count: bool) -> u64 {
    let mut now = start;
    let mut issued: Vec<IoshareIo> = Vec::with_capacity(256);
    let mut outstanding = vec![0u32; groups.len()];
    for i in 0..rounds {
        now += 2_000;
        let k = i as usize % groups.len();
        COUNTING.set(count);
        // SAFETY: the caller's contract; every pointer is to a live local.
        unsafe {
            let idle = k == 0 && (i / IDLE_ROUNDS) % 2 == 1;
            if outstanding[k] < 16 && !idle {
                outstanding[k] += 1;
                let mut io = IoshareIo { id: i, offset: i * 4096, group: groups[k], len: 4096, ..Default::default() };
                let mut delay = 0;
                match ioshare_submit(ctl, now, &mut io, &mut delay) {
                    IOSHARE_ISSUE => issued.push(io),
                    IOSHARE_QUEUED => {}
                    e => panic!("submit failed: {e}"),
                }
            }
            let (mut out, mut at) = (IoshareIo::default(), 0);
            while ioshare_dispatch(ctl, now, &mut out, &mut at) == IOSHARE_ISSUE {
                issued.push(out);
            }
            if i % 8 == 0 {
                for io in issued.drain(..) {
                    outstanding[groups.iter().position(|g| *g == io.group).expect("a known group")] -= 1;
                    assert_eq!(ioshare_complete(ctl, now, &io, now - 1_000, now - 1_000), 0);
                }
            }
            COUNTING.set(false);
            if ioshare_next_tick(ctl, &mut at) == 0 && at <= now {
                ioshare_tick(ctl, now);
            }
        }
    }
    now
}

#[test]
fn the_issue_path_allocates_nothing() {
    let kinds: [(u32, Option<&std::ffi::CStr>, &std::ffi::CStr, u32); 4] = [
        (IOSHARE_KIND_IOCOST, Some(c"ssd_dfl"), c"iops-read=100000", 0),
        (IOSHARE_KIND_IOCOST, Some(c"ssd_dfl"), c"", 32),
        (IOSHARE_KIND_TOKEN_BUCKET, None, c"iops-read=100000", 0),
        (IOSHARE_KIND_LEAKY_BUCKET, None, c"iops-read=100000", 0),
    ];
    for (kind, model, limits, depth) in kinds {
        let mut ctl = ptr::null_mut();
        // SAFETY: valid strings and out pointer.
        unsafe {
            let model = model.map_or(ptr::null(), |m| m.as_ptr());
            assert_eq!(ioshare_new(kind, model, ptr::null(), depth, 0, &mut ctl), 0);
            let mut groups = [0u32; 4];
            for (i, g) in groups.iter_mut().enumerate() {
                let path = std::ffi::CString::new(format!("tenants/t{i}")).unwrap();
                assert_eq!(
                    ioshare::configure::ioshare_configure(
                        ctl,
                        0,
                        path.as_ptr(),
                        100 * (i as u32 + 1),
                        limits.as_ptr(),
                        g
                    ),
                    0
                );
            }
            // Counted from the first IO: no warm-up is needed when nothing grows. 64 IOs
            // outstanding in all stay below every queue's reserve.
            ALLOCATIONS.store(0, Ordering::Relaxed);
            drive(ctl, &groups, 0, 4 * IDLE_ROUNDS, true);
            let n = ALLOCATIONS.load(Ordering::Relaxed);
            assert_eq!(n, 0, "kind {kind} (depth {depth}): {n} allocations in the issue path through the ABI");
            assert_eq!(ioshare_free(&mut ctl), 0);
        }
    }
}
