//! The agent's userspace backend on cgroup v2 without iocost — its limits written to `io.max` — holds
//! weights 2:1, in the cgroup-v2 lab guest (`scripts/lab`: Debian's Linux 6.1, an emulated NVMe disk
//! throttled by QEMU to 1200 IOPS so that the TCG guest's CPU is not the limit: at 2000 it delivered
//! 69–79% of the disk while this 2-core host was loaded). One boot: two tenants weighted 200:100,
//! each two fio jobs of 4 KiB random reads at QD32 (the precision matrix's "two jobs" case),
//! `ioshare agent run --backend userspace --trace` over them; the script prints each tenant's IOPS,
//! its `io.max` line every 0.5 s while they read, how many times the agent wrote each tenant's
//! limits, and both `io.max` files after the agent stopped. The assertions are made here.
//!
//! Linux 6.1's blk-throttle lets a group whose `io.max` is rewritten while it is backlogged over its
//! limit (`crates/agent/src/backend/userspace/io_max.rs`); before the agent shaped its v2 writes for
//! that, this case split 0.95–1.91 instead of 2 (1 or 2 runs of 4 within 10%).
//!
//! Skips with the lab's own one-line reason where it cannot run (no qemu, no guest kernel: run
//! scripts/setup.sh).

mod common;

use common::{field, lab};
use ioshare_testkit::skip_unless_lab;

/// QEMU's throttle on the guest's disk, IOPS: the device's capacity and the agent's model.
const DEVICE_IOPS: &str = "1200";

const SCRIPT: &str = r#"
    set -u
    cg=/sys/fs/cgroup
    dev=$(cat /sys/block/nvme0n1/dev)
    echo "iocost $(grep -c "^$dev .*enable=1" $cg/io.cost.qos)"
    hi_lo_tenants
    cat > /tmp/agent.toml <<EOF
period_ms = 100
[[devices]]
path = "/dev/nvme0n1"
model = "ssd_dfl rrandiops=$DEVICE_IOPS rseqiops=$DEVICE_IOPS"
$HI_LO_GROUPS
EOF
    start_agent userspace --trace /tmp/trace.jsonl
    echo "status $(ioshare agent status --state-dir /tmp/state --json | tr -d '\n ')"
    readers=""
    for g in hi lo; do
        sh -c "echo \$\$ > $cg/tenants/$g/cgroup.procs && exec fio --name=r --filename=$LAB_DISK --rw=randread \
            --bs=4k --iodepth=32 --numjobs=2 --group_reporting --thread --ioengine=io_uring --direct=1 --runtime=8 \
            --ramp_time=2 --time_based --eta=never --output-format=terse --terse-version=3 --output=/tmp/$g.out" &
        readers="$readers $!"
    done
    for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
        usleep 500000
        for g in hi lo; do echo "running_$g $(cat $cg/tenants/$g/io.max)"; done
    done
    wait $readers
    for g in hi lo; do
        echo "iops_$g $(awk -F';' '{print $8}' /tmp/$g.out)"
        echo "writes_$g $(grep -o "\"cgroup\":\"tenants/$g\"[^}]*\"action\":\"written\"" /tmp/trace.jsonl | wc -l)"
    done
    echo "periods $(wc -l < /tmp/trace.jsonl)"
    kill $pid
    wait $pid
    echo "stopped $?"
    for g in hi lo; do echo "after_$g $(cat $cg/tenants/$g/io.max | wc -l)"; done
    echo "log $(tr '\n' ' ' < /tmp/agent.log)"
    rmdir $cg/tenants/hi $cg/tenants/lo $cg/tenants
"#;

#[test]
fn userspace_backend_over_io_max_holds_two_to_one() {
    if skip_unless_lab("userspace_backend_over_io_max_holds_two_to_one") {
        return;
    }
    let script = SCRIPT.replace("$DEVICE_IOPS", DEVICE_IOPS);
    let out = lab(&["--iops", DEVICE_IOPS], &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(out.status.success(), "the guest script finished\n{stdout}");
    assert_eq!(field(&stdout, "iocost"), "0", "iocost is not enabled on the disk: io.max is all there is");
    assert_eq!(field(&stdout, "started"), "yes", "the agent wrote its status file\n{stdout}");
    assert!(field(&stdout, "status").contains(r#""backend":"userspace""#), "{stdout}");

    // While they read (a look every 0.5 s): IOPS limits only, the bytes knobs lifted.
    for g in ["hi", "lo"] {
        let looks: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix(&format!("running_{g} "))).collect();
        assert!(looks.iter().all(|l| l.is_empty() || l.contains("rbps=max wbps=max riops=")), "{g}: {looks:?}");
        assert!(looks.iter().any(|l| !l.is_empty() && !l.contains("riops=max")), "{g} limited: {looks:?}");
    }

    // The split: within 10% of 2:1, the precision matrix's acceptance. The disk is QEMU's FIFO
    // of fixed capacity; the limits change by whole periods and blk-throttle dispatches by slices,
    // so a tenant's IOPS over the 8 s window are a few percent off its share in a good run, while
    // a limit the kernel lets the low-weight tenant through (the failure this guards against) took
    // the split to 0.95–1.91.
    let iops = |g: &str| -> f64 { field(&stdout, &format!("iops_{g}")).parse().unwrap() };
    let (hi, lo) = (iops("hi"), iops("lo"));
    assert!(hi > 0.0 && lo > 0.0, "both read: {hi} {lo}");
    let ratio = hi / lo;
    let device: f64 = DEVICE_IOPS.parse().unwrap();
    eprintln!("ratio {ratio:.2} (hi {hi:.0}, lo {lo:.0} IOPS; {:.0}% of the disk)", 100.0 * (hi + lo) / device);
    assert!((ratio / 2.0 - 1.0).abs() <= 0.10, "hi:lo {ratio:.2}, not within 10% of 2 (hi {hi}, lo {lo})");

    // A write a second per tenant at most (setting and lifting come on top), not one every other
    // period: each write is what 6.1 gets wrong.
    let periods: f64 = field(&stdout, "periods").parse().unwrap();
    for g in ["hi", "lo"] {
        let writes: f64 = field(&stdout, &format!("writes_{g}")).parse().unwrap();
        assert!(writes <= 4.0 + periods / 10.0, "{g}: {writes} writes in {periods} periods");
    }

    // Stopped: both io.max files as they were (a fresh cgroup's io.max is empty).
    assert_eq!(field(&stdout, "stopped"), "0", "the agent stopped cleanly on SIGTERM\n{stdout}");
    for g in ["hi", "lo"] {
        assert_eq!(field(&stdout, &format!("after_{g}")), "0", "{g}'s io.max restored\n{stdout}");
    }
}
