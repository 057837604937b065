//! The Grafana dashboard (`packaging/grafana/ioshare.json`) against a real Prometheus (root, BTF,
//! Debian's prometheus and fio): a real agent (userspace backend, metrics on) controls two blkio
//! cgroups with fio readers on a loop device and memory-guards two memory cgroups, a real
//! `ioshare observe` watches the same device, and Prometheus scrapes both every second. Then every
//! panel's PromQL, taken from the JSON with the template variables substituted, must return series
//! that carry every label its legend names — so a renamed metric or label breaks this test, not
//! the dashboard. The template variables' own queries must offer the device and the cgroups.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioshare_agent::memory::MemoryGuard;
use ioshare_host::memcg::AnyMemCgroup;
use ioshare_host::{BlkioCgroup, Capabilities, LoopDevice};
use ioshare_testkit::KillOnDrop;
use serde_json::Value;

/// Metrics the kernel gives only on cgroup v2: their panels may be empty on a v1 host. The kernel
/// IOCost's (`ioshare_iocost_*`, the agent's kernel backend) are checked in the lab guest instead
/// (`lab_agent.rs`).
const V2_ONLY: &[&str] = &[
    "ioshare_memory_pressure_ratio",
    "ioshare_iocost_vrate_ratio",
    "ioshare_iocost_busy_level",
    "ioshare_iocost_rq_wait_ratio",
    "ioshare_iocost_hweight_ratio",
    "ioshare_iocost_debt_seconds",
    "ioshare_iocost_delay_seconds",
    "ioshare_iocost_wait_seconds_total",
];

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET `path` from `port` on localhost: the body of a 200 reply. HTTP/1.0, so that the body is not
/// chunked and ends with the connection.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    head.split(' ').nth(1).is_some_and(|code| code == "200").then(|| body.to_string())
}

/// A Prometheus server on a free 127.0.0.1 port with its data in a temporary directory, scraping
/// `targets` (job name, port) every second; stopped and its directory removed on drop.
struct Prometheus {
    _server: KillOnDrop,
    _dir: tempfile::TempDir,
    port: u16,
}

impl Prometheus {
    fn start(targets: &[(&str, u16)]) -> Prometheus {
        let dir = tempfile::Builder::new().prefix("ioshare-dashboard-prometheus-").tempdir().unwrap();
        let mut config = "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n".to_string();
        for (job, port) in targets {
            config += &format!("  - job_name: {job}\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n");
        }
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let server = KillOnDrop(
            Command::new("prometheus")
                .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/-/ready").is_none() {
            assert!(Instant::now() < deadline, "Prometheus not ready after 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        Prometheus { _server: server, _dir: dir, port }
    }

    /// The series an instant query returns: each one's labels (`None` if the query failed).
    fn query(&self, promql: &str) -> Option<Vec<serde_json::Map<String, Value>>> {
        let encoded: String = promql
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        let body = http_get(self.port, &format!("/api/v1/query?query={encoded}"))?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let result = v["data"]["result"].as_array()?;
        Some(result.iter().filter_map(|r| r["metric"].as_object().cloned()).collect())
    }
}

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

/// One panel query of the dashboard.
struct Target {
    panel: String,
    expr: String,
    /// Labels the legend shows (`{{cgroup}}`).
    legend_labels: Vec<String>,
}

/// Every target of every panel (rows' nested panels included).
fn targets(dashboard: &Value) -> Vec<Target> {
    fn walk(panels: &Value, out: &mut Vec<Target>) {
        for p in panels.as_array().into_iter().flatten() {
            walk(&p["panels"], out);
            for t in p["targets"].as_array().into_iter().flatten() {
                let legend = t["legendFormat"].as_str().unwrap_or("");
                let legend_labels =
                    legend.split("{{").skip(1).filter_map(|s| s.split_once("}}")).map(|(l, _)| l.trim().to_string());
                out.push(Target {
                    panel: p["title"].as_str().unwrap().to_string(),
                    expr: t["expr"].as_str().expect("every target has PromQL").to_string(),
                    legend_labels: legend_labels.collect(),
                });
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// `expr` with the dashboard's variables as Grafana would fill them for this test's device and
/// cgroups (a 1 s scrape interval gives `$__rate_interval` = 4 s; 5 s here).
fn substitute(expr: &str, device: &str, cgroups: &str) -> String {
    let s = expr
        .replace("$__rate_interval", "5s")
        .replace("$__interval", "1s")
        .replace("${device}", device)
        .replace("$device", device)
        .replace("${cgroup}", cgroups)
        .replace("$cgroup", cgroups);
    assert!(!s.contains('$'), "a variable the test does not know in: {expr}");
    s
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
    let dashboard_file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../packaging/grafana/ioshare.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&dashboard_file).unwrap()).unwrap();
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
    let prometheus = Prometheus::start(&[("agent", agent_port), ("observe", observe_port)]);

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
            for s in &series {
                for l in &t.legend_labels {
                    if s.get(l).and_then(Value::as_str).is_none_or(str::is_empty) {
                        failed.push(format!("{}: a series without the legend's label '{l}': {s:?}", t.panel));
                    }
                }
            }
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
    for var in dashboard["templating"]["list"].as_array().unwrap().iter().filter(|v| v["type"] == "query") {
        let definition = var["definition"].as_str().unwrap();
        let inner = definition.strip_prefix("label_values(").and_then(|s| s.strip_suffix(')')).unwrap();
        let (selector, label) = inner.rsplit_once(',').unwrap();
        let label = label.trim();
        let series = prometheus.query(&format!("count by ({label}) ({selector})")).unwrap();
        let values: BTreeSet<String> =
            series.iter().filter_map(|s| s.get(label).and_then(Value::as_str).map(String::from)).collect();
        let expected: BTreeSet<String> = match label {
            "device" => [name.clone()].into(),
            "cgroup" => io_cgroups.union(&memory_cgroups).cloned().collect(),
            other => panic!("a variable over '{other}' the test does not know"),
        };
        assert!(expected.is_subset(&values), "variable {}: {values:?}, expected {expected:?}", var["name"]);
    }
    eprintln!(
        "{} panel queries of {}: each returned series with its legend's labels (v2-only ones excepted on v1)",
        queries.len(),
        dashboard_file.display()
    );
}
