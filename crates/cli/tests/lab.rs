//! The cgroup-v2 lab (`scripts/lab`) for real: a QEMU guest (TCG here, KVM where it boots) with this
//! build's `ioshare`, cgroup v2 `io`/`memory`, a throttled NVMe data disk, null_blk and zram; and
//! `ioshare bench` running its kernel peers on cgroup v2 there, the kernel's own IOCost included.
//!
//! Two boots in all (each ~5-15 s under TCG on a busy 2-core machine, the bench ~30 s), one at a time.
//! Skips with the lab's own one-line reason where it cannot run (no qemu, no guest kernel: run
//! scripts/setup.sh). The lab removes its run directory and QEMU itself, also when a test fails.

mod common;

use common::{field, lab};
use ioshare_testkit::skip_unless_lab;
use serde_json::Value;

#[test]
fn guest_has_cgroup_v2_io_the_disks_and_ioshare_and_returns_the_status() {
    if skip_unless_lab("guest_has_cgroup_v2_io_the_disks_and_ioshare_and_returns_the_status") {
        return;
    }
    let script = r#"
        echo "controllers $(cat /sys/fs/cgroup/cgroup.subtree_control)"
        echo "files $(cd /sys/fs/cgroup && ls io.cost.model io.cost.qos memory.reclaim 2>&1 | tr '\n' ' ')"
        echo "disks $LAB_DISK $LAB_NULLB $LAB_ZRAM $(ls $LAB_DISK $LAB_NULLB $LAB_ZRAM 2>&1 | tr '\n' ' ')"
        echo "schedulers $(cat /sys/block/nvme0n1/queue/scheduler)"
        echo "ioshare $(ioshare --version)"
        echo "iops $(fio --name=r --filename=$LAB_DISK --rw=randread --bs=4k --direct=1 --ioengine=io_uring \
            --iodepth=16 --runtime=2 --time_based --output-format=terse | cut -d';' -f8)"
        echo "to-stderr" >&2
        exit 7
    "#;
    let out = lab(&["--iops", "1000", "--null-blk", "--zram", "16M"], script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "the lab exits with the command's status\n{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains("to-stderr") && stderr.contains("to-stderr\n"),
        "the command's stderr on stderr\n{stderr}"
    );
    assert_eq!(field(&stdout, "controllers"), "io memory");
    assert_eq!(field(&stdout, "files"), "io.cost.model io.cost.qos memory.reclaim");
    assert_eq!(
        field(&stdout, "disks"),
        "/dev/nvme0n1 /dev/nullb0 /dev/zram0 /dev/nullb0 /dev/nvme0n1 /dev/zram0",
        "the NVMe disk, null_blk and zram exist and are named in the environment"
    );
    assert!(field(&stdout, "schedulers").contains("bfq"), "BFQ is loaded\n{stdout}");
    assert!(field(&stdout, "ioshare").starts_with("ioshare "), "{stdout}");
    // QEMU's throttle caps the disk: 1000 IOPS. Its leaky bucket lets a burst of a tenth of a second
    // through at the start, so a 2 s run may average up to ~5% above; 20% leaves room for fio's own
    // accounting. The lower bound only says IO happened (TCG on a shared machine may be slow).
    let iops: f64 = field(&stdout, "iops").parse().expect("fio printed its read IOPS");
    assert!(iops > 0.0 && iops <= 1200.0, "throttled to 1000 IOPS, fio read {iops}");
}

#[test]
fn bench_runs_kernel_peers_on_cgroup_v2_and_cleans_up() {
    if skip_unless_lab("bench_runs_kernel_peers_on_cgroup_v2_and_cleans_up") {
        return;
    }
    let script = r#"
        ioshare bench --target $LAB_DISK --scenario proportional --duration 1 --json > /tmp/out.json 2> /tmp/progress
        echo "status $?"
        echo "json $(tr -d '\n' < /tmp/out.json)"
        echo "left $(ls -d /sys/fs/cgroup/ioshare-bench-* 2>/dev/null | wc -l)"
        echo "qos $(cat /sys/fs/cgroup/io.cost.qos)"
        echo "scheduler $(cat /sys/block/nvme0n1/queue/scheduler)"
    "#;
    let out = lab(&["--iops", "3000"], script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // 3: the suite completed but a verdict failed (1 s runs under TCG are short for IOCost to settle).
    assert!(matches!(field(&stdout, "status"), "0" | "3"), "bench completed\n{stdout}");
    let suite: Value = serde_json::from_str(field(&stdout, "json")).expect("bench printed JSON");
    let runs = suite["scenarios"][0]["runs"].as_array().expect("runs");
    let kernel: Vec<&str> =
        runs.iter().filter(|r| r["side"] == "kernel").map(|r| r["controller"].as_str().unwrap()).collect();
    assert_eq!(kernel, ["bfq", "blk-throttle", "kernel-iocost"], "every v2 kernel peer ran");
    for run in runs {
        for t in run["tenants"].as_array().unwrap() {
            assert!(t["iops"].as_f64().unwrap() > 0.0, "{} tenant {} did IO", run["controller"], t["name"]);
        }
    }
    let notes = suite["notes"].to_string();
    assert!(notes.contains("cgroup v2") && notes.contains("/dev/nvme0n1"), "{notes}");
    assert_eq!(field(&stdout, "left"), "0", "the bench removed its cgroups");
    assert!(field(&stdout, "qos").contains("enable=0"), "kernel iocost switched off again: {stdout}");
    assert!(field(&stdout, "scheduler").starts_with("[none]"), "the disk's scheduler restored: {stdout}");
}
