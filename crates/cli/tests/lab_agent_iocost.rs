//! The agent's kernel backend shows the kernel's own IOCost, checked against the kernel's files in the
//! cgroup-v2 lab guest (`scripts/lab`: Linux 6.1 with IOCost, an emulated NVMe disk throttled by QEMU).
//! One boot: a shell script starts `ioshare agent run --backend kernel` with its `/metrics` endpoint,
//! runs two fio readers in tenants weighted 200:100 for 4 s, prints the agent's status file while
//! they read and `agent status` after, and once both went idle the status, the agent's `/metrics`
//! and each tenant's and the root's `io.stat`. The assertions are made here, on the lines the script
//! prints; the Grafana dashboard's kernel IOCost queries are checked against that `/metrics` too.
//!
//! Skips with the lab's own one-line reason where it cannot run (no qemu, no guest kernel: run
//! scripts/setup.sh).

mod common;

use common::{field, lab};
use ioshare_testkit::skip_unless_lab;
use serde_json::Value;

const SCRIPT: &str = r#"
    set -u
    cg=/sys/fs/cgroup
    dev=$(cat /sys/block/nvme0n1/dev)
    echo "dev $dev"
    ifconfig lo 127.0.0.1 up
    hi_lo_tenants
    cat > /tmp/agent.toml <<EOF
[[devices]]
path = "/dev/nvme0n1"
model = "ssd_dfl rrandiops=2000 rseqiops=2000"
qos = "rpct=90 rlat=3000 wpct=0 wlat=0 min=10 max=500"
$HI_LO_GROUPS
[metrics]
listen = "127.0.0.1:9436"
EOF
    start_kernel_agent
    readers=""
    for g in hi lo; do
        sh -c "echo \$\$ > $cg/tenants/$g/cgroup.procs && exec fio --name=r --filename=$LAB_DISK --rw=randread \
            --bs=4k --iodepth=16 --ioengine=io_uring --direct=1 --size=512M --runtime=4 --time_based \
            --eta=never --output=/dev/null" &
        readers="$readers $!"
    done
    # While they read: every status file in which both tenants are active (up to 20, 0.1 s apart;
    # the file itself, which the agent rewrites each period the kernel reports something new).
    n=0
    both=0
    while [ $n -lt 60 ] && [ $both -lt 20 ] && kill -0 $readers 2>/dev/null; do
        s=$(cat /tmp/state/status.json)
        if [ $(echo "$s" | grep -o '"state":"active' | wc -l) -ge 2 ]; then
            echo "busy $s"
            both=$((both + 1))
        fi
        usleep 100000
        n=$((n + 1))
    done
    ioshare agent status --state-dir /tmp/state | sed 's/^/table /'
    wait $readers
    # Both tenants go idle a period or two after their IO ends (the kernel's statistics are final
    # then); the agent's status says so within a period.
    i=0
    until [ $(ioshare agent status --state-dir /tmp/state --json | tr -d ' \n' | grep -o '"state":"idle' | wc -l) -ge 2 ] \
        || [ $i -gt 100 ]; do usleep 100000; i=$((i + 1)); done
    # One more status write after the last change (the agent writes one at least once a second).
    sleep 1.2
    echo "idle $(ioshare agent status --state-dir /tmp/state --json | tr -d '\n')"
    echo "metrics $(wget -q -O - http://127.0.0.1:9436/metrics | grep '^ioshare_iocost_' | tr '\n' '|')"
    for g in hi lo; do echo "iostat_$g $(grep "^$dev " $cg/tenants/$g/io.stat)"; done
    echo "iostat_root $(grep "^$dev " $cg/io.stat)"
    kill $pid
    wait $pid
    echo "stopped $?"
    echo "log $(tr '\n' ' ' < /tmp/agent.log)"
    rmdir $cg/tenants/hi $cg/tenants/lo $cg/tenants
"#;

/// `key`'s value in an io.stat line (`MAJ:MIN k=v k=v ...`).
fn io_stat(line: &str, key: &str) -> f64 {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key} in io.stat line {line}"))
        .parse()
        .unwrap()
}

/// The status's line for cgroup `rel` on its one device.
fn group<'a>(status: &'a Value, rel: &str) -> &'a Value {
    let groups = status["devices"][0]["groups"].as_array().expect("groups");
    groups.iter().find(|g| g["cgroup"] == rel).unwrap_or_else(|| panic!("no {rel} in {status}"))
}

/// The value of the `/metrics` sample `name{labels}` in `samples` (`|`-separated lines).
fn metric(samples: &str, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{{{labels}}} ");
    samples
        .split('|')
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {prefix} in {samples}"))
        .parse()
        .unwrap()
}

/// Each dashboard query over a kernel IOCost series (`ioshare_iocost_*`; the host's dashboard test
/// cannot scrape them on cgroup v1) against the agent's `/metrics` in the guest: its metric has
/// samples carrying the query's exact label matchers and every label its legend names.
fn dashboard_queries_find_their_series(samples: &str) {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/grafana/ioshare.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let targets =
        dashboard["panels"].as_array().unwrap().iter().flat_map(|p| p["targets"].as_array().into_iter().flatten());
    let mut checked = 0;
    for t in targets {
        let (expr, legend) = (t["expr"].as_str().unwrap(), t["legendFormat"].as_str().unwrap_or(""));
        let Some(at) = expr.find("ioshare_iocost_") else { continue };
        let name: String = expr[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let selector = expr[at + name.len()..].strip_prefix('{').and_then(|r| r.split_once('}')).map_or("", |(s, _)| s);
        let exact: Vec<&str> = selector.split(',').filter(|m| m.contains("=\"") && !m.contains("=~")).collect();
        let legend_labels: Vec<String> = legend
            .split("{{")
            .skip(1)
            .filter_map(|r| r.split_once("}}"))
            .map(|(l, _)| format!("{}=\"", l.trim()))
            .collect();
        let found = samples
            .split('|')
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .any(|l| exact.iter().all(|m| l.contains(m)) && legend_labels.iter().all(|l2| l.contains(l2.as_str())));
        assert!(
            found,
            "dashboard query {expr} (legend {legend}): no sample of {name} with {exact:?} {legend_labels:?}"
        );
        checked += 1;
    }
    assert!(checked >= 7, "the dashboard's kernel IOCost queries: {checked}");
}

#[test]
fn kernel_backend_status_and_metrics_carry_the_kernels_iocost() {
    if skip_unless_lab("kernel_backend_status_and_metrics_carry_the_kernels_iocost") {
        return;
    }
    let out = lab(&["--iops", "2000"], SCRIPT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(out.status.success(), "the guest script finished\n{stdout}");
    assert_eq!(field(&stdout, "started"), "yes", "the agent wrote its status file\n{stdout}");
    assert_eq!(field(&stdout, "stopped"), "0", "the agent stopped cleanly on SIGTERM\n{stdout}");
    assert!(!field(&stdout, "log").contains("IOCost figures"), "the figures were read: {stdout}");

    // While both read: statuses in which both are active. Each cgroup's figures are as of the last
    // kernel event that touched it, and a cgroup's activation refreshes only itself and its
    // ancestors, so the one active before keeps the hweight it had alone until the next period's
    // walk of the active cgroups (a few ms; the agent reads every 100 ms): at least one status must
    // show both at their hweights by weight, 200:100 (the kernel's fixed point rounds a hweight to
    // 1/65536; 1% allowed).
    let busy: Vec<Value> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("busy "))
        .map(|l| serde_json::from_str(l).expect("status JSON"))
        .collect();
    assert!(!busy.is_empty(), "no status with both tenants active while they read\n{stdout}");
    let by_weight = |s: &Value| {
        [("tenants/hi", 2.0 / 3.0), ("tenants/lo", 1.0 / 3.0)]
            .iter()
            .all(|(rel, share)| (group(s, rel)["hweight_active"].as_f64().unwrap() - share).abs() < 0.01)
    };
    let at_weights = busy.iter().filter(|s| by_weight(s)).count();
    assert!(at_weights > 0, "no status with both at 2/3 and 1/3: {busy:#?}");
    eprintln!("{at_weights} of {} statuses with both tenants active show them at 2/3 and 1/3", busy.len());
    for s in &busy {
        let device = &s["devices"][0];
        assert!(device["iocost"]["vrate_pct"].as_f64().is_some_and(|v| v > 0.0), "the kernel's vrate: {device}");
    }
    let table: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("table ")).collect();
    assert!(table.iter().any(|l| l.contains("(kernel IOCost, ")), "the device line: {table:#?}");
    assert!(table.iter().any(|l| l.contains("debt ms  delay ms   wait ms  flags")), "{table:#?}");

    // Once both are idle: the usage the agent shows, in its status and its /metrics, is io.stat's
    // cost.usage (both the kernel's final statistics: exact, but for /metrics' decimal seconds);
    // vrate is the root io.stat's cost.vrate (which rounds it to 0.01%); debt and delay are there.
    let idle: Value = serde_json::from_str(field(&stdout, "idle")).expect("status JSON");
    let samples = field(&stdout, "metrics");
    let root = field(&stdout, "iostat_root");
    let vrate = idle["devices"][0]["iocost"]["vrate_pct"].as_f64().expect("vrate in the status");
    assert!((vrate - io_stat(root, "cost.vrate")).abs() <= 0.005 + 1e-9, "vrate {vrate} vs io.stat {root}");
    let served = metric(samples, "ioshare_iocost_vrate_ratio", r#"device="nvme0n1""#);
    assert!((served * 100.0 - vrate).abs() < 1e-6, "/metrics vrate {served} vs status {vrate}");
    for (rel, name) in [("tenants/hi", "hi"), ("tenants/lo", "lo")] {
        let g = group(&idle, rel);
        let k = &g["iocost"];
        let stat = field(&stdout, &format!("iostat_{name}"));
        let usage_us = k["usage_us"].as_f64().expect("usage_us");
        let kernel_us = io_stat(stat, "cost.usage");
        assert!(kernel_us > 0.0, "{rel} used the device: {stat}");
        assert_eq!(usage_us, kernel_us, "{rel}: status usage vs io.stat cost.usage");
        let labels = format!(r#"device="nvme0n1",cgroup="{rel}""#);
        let served_us = metric(samples, "ioshare_iocost_usage_seconds_total", &labels) * 1e6;
        assert!((served_us - kernel_us).abs() < 1.0, "{rel}: /metrics usage {served_us} µs vs io.stat {kernel_us}");
        for key in ["debt_ms", "delay_ms", "wait_us", "hweight_inuse_pct"] {
            assert!(k[key].is_number(), "{rel}: {key} in the status: {k}");
        }
        for family in
            ["ioshare_iocost_debt_seconds", "ioshare_iocost_delay_seconds", "ioshare_iocost_wait_seconds_total"]
        {
            metric(samples, family, &labels);
        }
        assert!(g["state"].as_str().unwrap().starts_with("idle"), "{rel}: {g}");
        eprintln!(
            "{rel}: usage {usage_us} µs = io.stat {kernel_us} µs (/metrics {served_us:.1}); debt {} ms, delay {} ms, \
             wait {} µs",
            k["debt_ms"], k["delay_ms"], k["wait_us"]
        );
    }
    dashboard_queries_find_their_series(samples);
}
