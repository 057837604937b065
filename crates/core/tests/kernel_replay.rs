//! The kernel's own decisions, replayed: periods Linux 6.1's IOCost reported in the cgroup-v2 lab
//! guest (`ioshare observe --iocost --record`, under the bench's proportional, work-conserving and
//! donation scenarios and under two fio readers at weights 2:1 with 2 ms and 50 ms read-latency
//! targets), kept in `tests/data/kernel-6.1-periods/`. Each period's busy level and vrate step, from
//! the inputs the kernel had, must be what the kernel decided: a change to the planner's rules that
//! departs from the kernel fails here, with the periods that differ.

use std::path::Path;

use ioshare_core::iocost::planner::adjusts_vrate;
use ioshare_core::iocost::replay::{replay, KernelPeriod};

fn recording(name: &str) -> Vec<KernelPeriod> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-6.1-periods").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}"))).collect()
}

#[test]
fn every_recorded_kernel_period_is_decided_as_the_kernel_decided_it() {
    let (mut periods, mut stepped) = (0, 0);
    for name in [
        "bench-proportional.jsonl",
        "bench-work-conserving.jsonl",
        "bench-donation.jsonl",
        "fio-rlat-2ms.jsonl",
        "fio-rlat-50ms.jsonl",
    ] {
        let recorded = recording(name);
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
    assert_eq!(periods, 702);
    assert!(stepped >= 70, "only {stepped} vrate steps recorded");
}
