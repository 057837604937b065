//! The kernel's own decisions, replayed: periods and donation decisions Linux 6.1's IOCost reported
//! in the cgroup-v2 lab guest (`ioshare observe --iocost --record`, under the bench's proportional,
//! work-conserving and donation scenarios, under two fio readers at weights 2:1 with 2 ms and 50 ms
//! read-latency targets, and under the same pair with one reader held to a light rate — the high
//! one, then the low one — so that it donates), kept in `tests/data/kernel-6.1-decisions/`. Each
//! period's busy level and vrate step, from the inputs the kernel had, must be what the kernel
//! decided; each donation decision too, but for those the record cannot carry exactly (read after
//! IOs moved the budget) and the kernel's own 32-bit overflow — counted, and pinned, here. A change
//! to the planner's rules that departs from the kernel fails here, with the decisions that differ.

use std::path::Path;

use ioshare_core::iocost::planner::adjusts_vrate;
use ioshare_core::iocost::replay::{replay, replay_donations, Cause, Recorded, Recording};

fn recording(name: &str) -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-6.1-decisions").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str::<Recorded>(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}"))).collect()
}

const RECORDINGS: [&str; 7] = [
    "bench-proportional.jsonl",
    "bench-work-conserving.jsonl",
    "bench-donation.jsonl",
    "fio-rlat-2ms.jsonl",
    "fio-rlat-50ms.jsonl",
    "fio-light-high-reader.jsonl",
    "fio-light-low-reader.jsonl",
];

#[test]
fn every_recorded_kernel_period_is_decided_as_the_kernel_decided_it() {
    let (mut periods, mut stepped) = (0, 0);
    for name in RECORDINGS {
        let recorded = recording(name).periods;
        let r = replay(&recorded);
        assert_eq!(r.periods as usize, recorded.len());
        assert!(
            r.differences.is_empty(),
            "{name}: {} of {} differ: {:#?}",
            r.differences.len(),
            r.periods,
            r.differences
        );
        periods += r.periods;
        stepped += recorded
            .iter()
            .filter(|p| adjusts_vrate(p.busy_level, p.nr_lagging.max(0) as u32) && p.new_vrate != p.vrate)
            .count();
    }
    // What the recordings exercise: levels from -8 to 155, vrate stepped both ways.
    assert_eq!(periods, 894);
    assert!(stepped >= 70, "only {stepped} vrate steps recorded");
}

#[test]
fn every_recorded_donation_decision_is_the_kernels_or_has_a_named_cause() {
    let (mut decisions, mut donors, mut identical, mut raced, mut overflowed) = (0, 0, 0, 0, 0);
    for name in RECORDINGS {
        let r = replay_donations(&recording(name).donations);
        assert_eq!(r.count(Cause::Rules), 0, "{name}: decided otherwise: {:#?}", r.differences);
        decisions += r.decisions;
        donors += r.donors;
        identical += r.identical;
        raced += r.count(Cause::Raced);
        overflowed += r.count(Cause::KernelUsageOverflow);
    }
    assert_eq!((decisions, donors, identical, raced, overflowed), (285, 178, 262, 10, 13));
}
