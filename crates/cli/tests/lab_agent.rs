//! The agent's kernel backend for real, inside the cgroup-v2 lab guest (`scripts/lab`: cgroup v2 with
//! `io`, the kernel's iocost, an emulated NVMe disk). One boot: a shell script in the guest writes a
//! configuration, starts `ioshare agent run --backend kernel` in the background and checks what it
//! wrote (`io.cost.model`, `io.cost.qos` in the root, `io.weight` and `io.max` in the tenants), creates
//! a cgroup after the start and times how long until it is under control, then kills the agent with
//! SIGKILL, runs `ioshare agent revert`, and prints a snapshot of every file from before and after;
//! then runs `ioshare bench --scenario agent`, whose peers there include the agent's kernel backend.
//! The assertions are made here, on the lines the script prints.
//!
//! Skips with the lab's own one-line reason where it cannot run (no qemu, no guest kernel: run
//! scripts/setup.sh). The lab removes its run directory and QEMU itself, also when the test fails.

mod common;

use common::{field, lab};
use ioshare_testkit::skip_unless_lab;

/// The guest's script. `snap NAME` prints every file the agent may touch, one `NAME file: value`
/// line each (multi-line files joined with `;`), for cgroups `a` (there before the start) and `b`
/// (created after it); `b`'s lines are compared with `a`'s from before (both fresh cgroups).
const SCRIPT: &str = r#"
    set -u
    cg=/sys/fs/cgroup
    dev=$(cat /sys/block/nvme0n1/dev)
    echo "dev $dev"
    mkdir $cg/tenants && echo +io > $cg/tenants/cgroup.subtree_control && mkdir $cg/tenants/a || exit 20
    one() { tr '\n' ';' < "$1"; }
    snap() {
        echo "$1 io.cost.model: $(grep "^$dev " $cg/io.cost.model)"
        echo "$1 io.cost.qos: $(grep "^$dev " $cg/io.cost.qos)"
        for g in a b; do
            [ -d $cg/tenants/$g ] || continue
            echo "$1 $g/io.weight: $(one $cg/tenants/$g/io.weight)"
            echo "$1 $g/io.max: $(one $cg/tenants/$g/io.max)"
        done
    }
    # The hundredths lose a leading zero: shell arithmetic reads "08" and "09" as bad octal.
    centis() { read up _ < /proc/uptime; f=${up#*.}; echo $(( ${up%.*} * 100 + ${f#0} )); }
    snap before
    cat > /tmp/agent.toml <<EOF
[[devices]]
path = "/dev/nvme0n1"
model = "ssd_dfl rrandiops=40000"
qos = "rpct=95 rlat=5000 wpct=90 wlat=7000 min=50 max=150"
[[groups]]
cgroup = "tenants/*"
weight = 300
limits = "iops-read=5000"
EOF
    start_kernel_agent
    echo "status $(ioshare agent status --state-dir /tmp/state --json | tr -d '\n ')"
    snap running
    t0=$(centis)
    mkdir $cg/tenants/b
    until grep -q "^$dev 300" $cg/tenants/b/io.weight && grep -q "riops=5000" $cg/tenants/b/io.max; do
        usleep 20000
        [ $(( $(centis) - t0 )) -gt 500 ] && break
    done
    echo "late_ms $(( ($(centis) - t0) * 10 ))"
    snap late
    kill -9 $pid
    wait $pid 2>/dev/null
    echo "killed $?"
    snap killed
    ioshare agent revert --state-dir /tmp/state > /tmp/revert.out 2>&1
    echo "revert $? $(tr '\n' ' ' < /tmp/revert.out)"
    snap after
    echo "log $(tr '\n' ' ' < /tmp/agent.log)"
    rmdir $cg/tenants/a $cg/tenants/b $cg/tenants
    ioshare bench --target $LAB_DISK --scenario agent --duration 8 --json > /tmp/bench.json 2> /tmp/bench.err
    echo "bench $?"
    echo "bench_json $(tr -d '\n' < /tmp/bench.json)"
    echo "bench_left $(ls -d $cg/ioshare-bench-* 2>/dev/null | wc -l)"
    echo "bench_qos $(grep "^$dev " $cg/io.cost.qos)"
"#;

/// Every `NAME file: value` line of snapshot `name`, as (file, value).
fn snapshot(stdout: &str, name: &str) -> Vec<(String, String)> {
    let prefix = format!("{name} ");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .filter_map(|l| l.split_once(": ").map(|(f, v)| (f.to_string(), v.trim().to_string())))
        .collect()
}

fn value<'a>(snap: &'a [(String, String)], file: &str) -> &'a str {
    snap.iter().find(|(f, _)| f == file).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("no {file} in {snap:?}"))
}

#[test]
fn kernel_backend_writes_iocost_controls_late_cgroups_and_reverts_after_kill() {
    if skip_unless_lab("kernel_backend_writes_iocost_controls_late_cgroups_and_reverts_after_kill") {
        return;
    }
    let out = lab(&[], SCRIPT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(out.status.success(), "the guest script finished\n{stdout}");
    let dev = field(&stdout, "dev");
    assert_eq!(field(&stdout, "started"), "yes", "the agent wrote its status file\n{stdout}");
    assert!(field(&stdout, "status").contains(r#""backend":"kernel""#), "{stdout}");

    // What the running agent wrote: the model and QoS lines in the root, weight and caps per tenant.
    let running = snapshot(&stdout, "running");
    let model = value(&running, "io.cost.model");
    assert!(model.starts_with(&format!("{dev} ctrl=user model=linear")), "{model}");
    assert!(model.contains("rrandiops=40000"), "{model}");
    let qos = value(&running, "io.cost.qos");
    for part in
        ["enable=1", "ctrl=user", "rpct=95.00", "rlat=5000", "wpct=90.00", "wlat=7000", "min=50.00", "max=150.00"]
    {
        assert!(qos.contains(part), "io.cost.qos lacks {part}: {qos}");
    }
    assert!(value(&running, "a/io.weight").contains(&format!("{dev} 300")), "{running:?}");
    assert!(
        value(&running, "a/io.max").contains(&format!("{dev} rbps=max wbps=max riops=5000 wiops=max")),
        "{running:?}"
    );

    // A cgroup created after the start: acceptance says under control within 1 s (discovery runs
    // every 200 ms; the guest's clock is /proc/uptime, in hundredths of a second).
    let late_ms: u64 = field(&stdout, "late_ms").parse().unwrap();
    let late = snapshot(&stdout, "late");
    assert!(value(&late, "b/io.weight").contains(&format!("{dev} 300")), "{late:?}");
    assert!(value(&late, "b/io.max").contains("riops=5000"), "{late:?}");
    assert!(late_ms <= 1000, "the late cgroup took {late_ms} ms to be controlled");

    // SIGKILL leaves everything in place (nothing reverted it) ...
    assert_eq!(snapshot(&stdout, "killed"), late, "a killed agent reverts nothing by itself");
    // ... and `ioshare agent revert` restores every file from its state file.
    assert!(field(&stdout, "revert").starts_with("0 restored"), "{stdout}");
    let before = snapshot(&stdout, "before");
    let after = snapshot(&stdout, "after");
    for (file, was) in &before {
        let now = value(&after, file);
        match (file.as_str(), was.is_empty()) {
            // The kernel lists a device in io.cost.* only once iocost was configured for it, and
            // never drops the line again: "not configured" comes back as iocost switched off with
            // the kernel's own (auto) model.
            ("io.cost.qos", true) => assert!(now.contains("enable=0"), "{file}: iocost is off again: {now}"),
            ("io.cost.model", true) => assert!(now.contains("ctrl=auto"), "{file}: the kernel's model again: {now}"),
            _ => assert_eq!(now, was, "{file} restored"),
        }
    }
    // `b` did not exist before: it is back to what a fresh cgroup has (`a`'s files before the start).
    for file in ["io.weight", "io.max"] {
        assert_eq!(value(&after, &format!("b/{file}")), value(&before, &format!("a/{file}")), "b/{file} restored");
    }

    // The bench's agent scenario with the kernel backend as a peer (the guest's disk is throttled by
    // nothing but TCG, so only that it ran, did IO, and cleaned up is asserted; its verdicts are
    // figures for the report).
    assert!(matches!(field(&stdout, "bench"), "0" | "3"), "the bench completed\n{stdout}");
    let suite: serde_json::Value = serde_json::from_str(field(&stdout, "bench_json")).expect("bench printed JSON");
    let runs = suite["scenarios"][0]["runs"].as_array().expect("runs");
    let names: Vec<&str> = runs.iter().map(|r| r["controller"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["kernel-none", "bfq", "blk-throttle", "ceiling", "agent-kernel", "ceiling", "kernel-none"],
        "every v2 peer ran, the ceiling's and no control's rounds on both sides of the agent's"
    );
    for run in runs {
        for t in run["tenants"].as_array().unwrap() {
            assert!(t["iops"].as_f64().unwrap() > 0.0, "{} tenant {} did IO", run["controller"], t["name"]);
        }
    }
    eprintln!("agent-kernel: {}", runs[4]["verdict"]["summary"]);
    assert_eq!(field(&stdout, "bench_left"), "0", "the bench removed its cgroups");
    assert!(field(&stdout, "bench_qos").contains("enable=0"), "iocost switched off again: {stdout}");
}
