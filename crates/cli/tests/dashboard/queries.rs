//! The Grafana dashboard's queries against a real Prometheus, shared by the tests that run them: the
//! dashboard's own (`crates/cli/tests/dashboard.rs`: an agent and `ioshare observe` on this host) and
//! the whole-node one (`crates/agent/tests/kube_node.rs`, which includes this file by path: the agent
//! configured from the packaged Kubernetes manifests). A Prometheus server (Debian's `prometheus`) on a
//! free 127.0.0.1 port with its data in a temporary directory; the dashboard's panel queries taken
//! from `packaging/grafana/ioshare.json` with the template variables filled as Grafana would; the
//! template variables' own queries. What a test expects of the series is the test's.

#![allow(dead_code)] // each test binary uses part of it

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioshare_testkit::KillOnDrop;
use serde_json::Value;

/// The labels of one series a query returned.
pub type Labels = serde_json::Map<String, Value>;

/// Metrics the kernel gives only on cgroup v2: their panels may be empty on a v1 host. The kernel
/// IOCost's (`ioshare_iocost_*`, the agent's kernel backend) are checked in the lab guest instead
/// (`lab_agent.rs`).
pub const V2_ONLY: &[&str] = &[
    "ioshare_memory_pressure_ratio",
    "ioshare_iocost_vrate_ratio",
    "ioshare_iocost_busy_level",
    "ioshare_iocost_rq_wait_ratio",
    "ioshare_iocost_hweight_ratio",
    "ioshare_iocost_debt_seconds",
    "ioshare_iocost_delay_seconds",
    "ioshare_iocost_wait_seconds_total",
];

/// A TCP port free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
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

/// What Prometheus scrapes: a job's name, the target's port on 127.0.0.1 and the metrics path.
pub struct Scrape<'a> {
    /// The job (Prometheus's `job` label).
    pub job: &'a str,
    /// The target's port on 127.0.0.1.
    pub port: u16,
    /// The path it serves its metrics on.
    pub path: &'a str,
}

/// A Prometheus server on a free 127.0.0.1 port with its data in a temporary directory, scraping
/// its targets every second; stopped and its directory removed on drop.
pub struct Prometheus {
    _server: KillOnDrop,
    _dir: tempfile::TempDir,
    port: u16,
}

impl Prometheus {
    /// Starts one scraping `scrapes` and waits (up to 60 s) until it is ready.
    pub fn start(scrapes: &[Scrape]) -> Prometheus {
        let jobs: String = scrapes
            .iter()
            .map(|s| {
                format!(
                    "  - job_name: {}\n    metrics_path: {}\n    static_configs: [{{targets: ['127.0.0.1:{}']}}]\n",
                    s.job, s.path, s.port
                )
            })
            .collect();
        Prometheus::start_with(&jobs)
    }

    /// Starts one with `jobs` (the YAML list under `scrape_configs:`, indented by two) and waits (up
    /// to 60 s) until it is ready.
    pub fn start_with(jobs: &str) -> Prometheus {
        let dir = tempfile::Builder::new().prefix("ioshare-dashboard-prometheus-").tempdir().unwrap();
        let config = format!("global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n{jobs}");
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let mut server = KillOnDrop(
            Command::new("prometheus")
                .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/-/ready").is_none() {
            let log = || std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
            assert!(server.alive(), "Prometheus stopped; its log:\n{}", log());
            assert!(Instant::now() < deadline, "Prometheus not ready after 60 s; its log:\n{}", log());
            std::thread::sleep(Duration::from_millis(200));
        }
        Prometheus { _server: server, _dir: dir, port }
    }

    /// Whether the `prometheus` binary runs here; if not, says why (the test's skip line).
    pub fn available(test: &str) -> bool {
        let runs = Command::new("prometheus").arg("--version").output().is_ok();
        if !runs {
            eprintln!("skipping {test}: prometheus is not installed (./scripts/setup.sh)");
        }
        runs
    }

    /// The series an instant query returns: each one's labels (`None` if the query failed).
    pub fn query(&self, promql: &str) -> Option<Vec<Labels>> {
        self.query_values(promql).map(|v| v.into_iter().map(|(labels, _)| labels).collect())
    }

    /// The series an instant query returns with their values (`None` if the query failed).
    pub fn query_values(&self, promql: &str) -> Option<Vec<(Labels, f64)>> {
        let encoded: String = promql
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        let body = http_get(self.port, &format!("/api/v1/query?query={encoded}"))?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let result = v["data"]["result"].as_array()?;
        let value = |r: &Value| r["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
        Some(result.iter().filter_map(|r| Some((r["metric"].as_object()?.clone(), value(r)))).collect())
    }
}

/// One panel query of the dashboard.
pub struct Target {
    /// The panel's title.
    pub panel: String,
    /// Its PromQL, variables unfilled.
    pub expr: String,
    /// Labels the legend shows (`{{cgroup}}`).
    pub legend_labels: Vec<String>,
}

impl Target {
    /// What is wrong with `series` the query returned: one line per series without a label its legend
    /// shows.
    pub fn unlabelled(&self, series: &[Labels]) -> Vec<String> {
        let missing = |s: &Labels, l: &str| s.get(l).and_then(Value::as_str).is_none_or(str::is_empty);
        series
            .iter()
            .flat_map(|s| self.legend_labels.iter().filter(move |l| missing(s, l)).map(move |l| (s, l)))
            .map(|(s, l)| format!("{}: a series without the legend's label '{l}': {s:?}", self.panel))
            .collect()
    }
}

/// The dashboard (`packaging/grafana/ioshare.json`, from a crate directory of this repository) and
/// its file.
pub fn dashboard() -> (Value, PathBuf) {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../packaging/grafana/ioshare.json");
    (serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap(), file)
}

/// Every target of every panel (rows' nested panels included).
pub fn targets(dashboard: &Value) -> Vec<Target> {
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

/// `expr` with the dashboard's variables as Grafana would fill them for a test's device and
/// cgroups (regular expressions; a 1 s scrape interval gives `$__rate_interval` = 4 s; 5 s here).
pub fn substitute(expr: &str, device: &str, cgroups: &str) -> String {
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

/// The values each template variable of `dashboard` offers, by the label it is over (`device`,
/// `cgroup`): its `label_values(SELECTOR, LABEL)` asked of `prometheus`.
pub fn variable_values(dashboard: &Value, prometheus: &Prometheus) -> Vec<(String, BTreeSet<String>)> {
    let vars = dashboard["templating"]["list"].as_array().unwrap().iter().filter(|v| v["type"] == "query");
    vars.map(|var| {
        let definition = var["definition"].as_str().unwrap();
        let inner = definition.strip_prefix("label_values(").and_then(|s| s.strip_suffix(')')).unwrap();
        let (selector, label) = inner.rsplit_once(',').unwrap();
        let label = label.trim();
        let series = prometheus.query(&format!("count by ({label}) ({selector})")).unwrap();
        let values = series.iter().filter_map(|s| s.get(label).and_then(Value::as_str).map(String::from)).collect();
        (label.to_string(), values)
    })
    .collect()
}
