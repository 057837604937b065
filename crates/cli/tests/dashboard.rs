//! The Grafana dashboard (`packaging/grafana/ioshare.json`) against a real Prometheus (root, BTF,
//! Debian's prometheus and fio): a real agent (userspace backend, metrics on) controls two blkio
//! cgroups with fio readers on a loop device and memory-guards two memory cgroups, a real
//! `ioshare observe` watches the same device, and Prometheus scrapes both every second. Then every
//! panel's PromQL, taken from the JSON with the template variables substituted, must return series
//! that carry every label its legend names — so a renamed metric or label breaks this test, not
//! the dashboard. The template variables' own queries must offer the device and the cgroups.

#[path = "dashboard/queries.rs"]
mod queries;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioshare_agent::memory::MemoryGuard;
use ioshare_host::memcg::AnyMemCgroup;
use ioshare_host::{BlkioCgroup, Capabilities, LoopDevice};
use ioshare_testkit::KillOnDrop;
use queries::{dashboard, free_port, substitute, targets, variable_values, Prometheus, Scrape, Target, V2_ONLY};
use serde_json::Value;

/// A child that is asked to stop with SIGTERM on drop (the agent reverts what it wrote), killed if
/// it has not within 10 s.
struct Terminated(KillOnDrop);

impl Drop for Terminated {
    fn drop(&mut self) {
        self.0.terminate();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.0.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A loop device over a written 128 MiB file in CARGO_TARGET_TMPDIR (detached, file removed on drop).
struct Device {
    dev: LoopDevice,
    _file: tempfile::NamedTempFile,
}

fn device() -> Device {
    let mut file =
        tempfile::Builder::new().prefix("ioshare-dashboard-").tempfile_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let chunk: Vec<u8> = (0..1 << 20).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    for _ in 0..128 {
        file.write_all(&chunk).unwrap();
    }
    file.as_file().sync_all().unwrap();
    Device { dev: LoopDevice::attach(file.path(), true).unwrap(), _file: file }
}

fn rel(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap().to_string_lossy().into_owned()
}

fn skip(test: &str) -> bool {
    if ioshare_observe::skip_unless_traceable(test) {
        return true;
    }
    for tool in ["prometheus", "fio"] {
        if Command::new(tool).arg("--version").output().is_err() {
            eprintln!("skipping {test}: {tool} is not installed (./scripts/setup.sh)");
            return true;
        }
    }
    if Capabilities::probe().blkio_v1.is_none() || MemoryGuard::hierarchy().is_none() {
        eprintln!("skipping {test}: needs the cgroup v1 blkio hierarchy and a memory controller");
        return true;
    }
    false
}

#[test]
fn every_dashboard_panel_returns_series_from_a_real_agent_and_observer() {
    if skip("every_dashboard_panel_returns_series_from_a_real_agent_and_observer") {
        return;
    }
    let (dashboard, dashboard_file) = dashboard();
    let targets = targets(&dashboard);
    assert!(targets.len() >= 20, "the dashboard's panels: {}", targets.len());

    // The host side: a device, two blkio cgroups with fio readers, two memory cgroups.
    let device = device();
    let name = device.dev.path().file_name().unwrap().to_string_lossy().into_owned();
    let parent = format!("ioshare-dashboard-{}", std::process::id());
    let blkio_root = Capabilities::probe().blkio_v1.unwrap();
    let (memory_root, v2) = MemoryGuard::hierarchy().unwrap();
    let blkio: Vec<BlkioCgroup> =
        ["hi", "lo"].iter().map(|n| BlkioCgroup::create(&format!("{parent}/{n}")).unwrap()).collect();
    let memory: Vec<AnyMemCgroup> =
        ["hi", "lo"].iter().map(|n| AnyMemCgroup::create(v2, &format!("{parent}/{n}")).unwrap()).collect();
    let _readers: Vec<KillOnDrop> = blkio
        .iter()
        .map(|cg| {
            let mut fio = Command::new("fio");
            fio.args(["--name=r", "--rw=randread", "--bs=4k", "--ioengine=libaio", "--direct=1", "--iodepth=16"])
                .args(["--time_based", "--runtime=300", "--output=/dev/null", "--thread"])
                .arg(format!("--filename={}", device.dev.path().display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            KillOnDrop(cg.spawn(fio).unwrap())
        })
        .collect();

    // The agent, metrics on.
    let dir = tempfile::Builder::new().prefix("ioshare-dashboard-").tempdir().unwrap();
    let agent_port = free_port();
    let memory_parent = rel(memory[0].path().parent().unwrap(), &memory_root);
    let config = format!(
        "[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl\"\nqos = \"rpct=95 rlat=5000 wpct=95 wlat=5000 min=50 max=150\"\n\
         [[groups]]\ncgroup = \"{}\"\nweight = 200\n[[groups]]\ncgroup = \"{}\"\nweight = 100\n\
         [[groups]]\ncgroup = \"{memory_parent}/*\"\nmemory = {{ priority = 4, limit = \"1G\", wmark_ratio = 80 }}\n\
         [metrics]\nlisten = \"127.0.0.1:{agent_port}\"\n",
        device.dev.path().display(),
        rel(blkio[0].path(), &blkio_root),
        rel(blkio[1].path(), &blkio_root),
    );
    std::fs::write(dir.path().join("agent.toml"), config).unwrap();
    let log = dir.path().join("agent.log");
    let _agent = Terminated(KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_ioshare"))
            .args(["agent", "run", "--backend", "userspace"])
            .arg(format!("--config={}", dir.path().join("agent.toml").display()))
            .arg(format!("--state-dir={}", dir.path().join("state").display()))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    ));
    // The observer on the same device.
    let observe_port = free_port();
    let _observe = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_ioshare"))
            .args(["observe", "--json", "--interval", "1", "--prometheus", &observe_port.to_string()])
            .arg(format!("--device={}", device.dev.path().display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let prometheus = Prometheus::start(&[
        Scrape { job: "agent", port: agent_port, path: "/metrics" },
        Scrape { job: "observe", port: observe_port, path: "/metrics" },
    ]);

    // The cgroups each panel must show: the IO ones, the memory ones.
    let io_cgroups: BTreeSet<String> = blkio.iter().map(|c| rel(c.path(), &blkio_root)).collect();
    let memory_cgroups: BTreeSet<String> = memory.iter().map(|c| rel(c.path(), &memory_root)).collect();
    let cgroup_regex = format!(".*{parent}/(hi|lo)");
    let queries: Vec<(&Target, String)> =
        targets.iter().map(|t| (t, substitute(&t.expr, &name, &cgroup_regex))).collect();

    // Wait (bounded) until every panel has data: a few scrapes of both, and two for each rate().
    let failures = |final_check: bool| -> Vec<String> {
        let mut failed = Vec::new();
        for (t, q) in &queries {
            let Some(series) = prometheus.query(q) else {
                failed.push(format!("{}: query failed: {q}", t.panel));
                continue;
            };
            if series.is_empty() {
                if !v2 && V2_ONLY.iter().any(|m| q.contains(m)) {
                    if final_check {
                        eprintln!("'{}' has no data on this cgroup v1 host (v2 only): {q}", t.panel);
                    }
                    continue;
                }
                failed.push(format!("{}: no series: {q}", t.panel));
                continue;
            }
            failed.extend(t.unlabelled(&series));
            // The agent's per-cgroup panels show both of this test's cgroups.
            let shown: BTreeSet<String> =
                series.iter().filter_map(|s| s.get("cgroup").and_then(Value::as_str).map(String::from)).collect();
            let expected = if q.contains("ioshare_cgroup_") {
                Some(&io_cgroups)
            } else if q.contains("ioshare_memory_") {
                Some(&memory_cgroups)
            } else {
                None
            };
            if let Some(expected) = expected.filter(|e| !e.is_subset(&shown)) {
                failed.push(format!("{}: cgroups {shown:?}, expected {expected:?}", t.panel));
            }
        }
        failed
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let failed = failures(false);
        if failed.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 90 s, {} of {} panel queries fail:\n{}\nagent log:\n{}",
            failed.len(),
            queries.len(),
            failed.join("\n"),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(failures(true).is_empty());

    // The template variables offer this device and these cgroups.
    for (label, values) in variable_values(&dashboard, &prometheus) {
        let expected: BTreeSet<String> = match label.as_str() {
            "device" => [name.clone()].into(),
            "cgroup" => io_cgroups.union(&memory_cgroups).cloned().collect(),
            other => panic!("a variable over '{other}' the test does not know"),
        };
        assert!(expected.is_subset(&values), "variable over {label}: {values:?}, expected {expected:?}");
    }
    eprintln!(
        "{} panel queries of {}: each returned series with its legend's labels (v2-only ones excepted on v1)",
        queries.len(),
        dashboard_file.display()
    );
}
