//! The agent on the node with the packaged manifests' metrics settings, scraped by a real Prometheus
//! (Debian's `prometheus`; skipped, with the reason, where it is not installed), and the Grafana
//! dashboard's queries answered with the pods' series.
//!
//! The manifests are read with kubectl's own YAML reader (offline), and what must agree for the
//! cluster's Prometheus to reach the agent is asserted from them, so that an edit of one file without
//! the others fails here: the ConfigMap's `[metrics] listen` port is the DaemonSet's `prometheus.io/port`
//! annotation and its container port named `metrics`, which the PodMonitor and the NetworkPolicy name;
//! the PodMonitor's path is the `prometheus.io/path` annotation; that container runs the agent on the
//! ConfigMap's `agent.toml`, and the pod is not on the host network (`0.0.0.0` is the pod's IP).
//! The agent then runs in this process on the ConfigMap's agent config, changed only where a test
//! must (listed at [`Packaged::agent_config`]), with two pods of the node — a BestEffort one and a
//! Burstable one, each taking the ConfigMap's defaults for its class — and Prometheus scrapes it with
//! the usual annotation-driven job's settings: the annotation's path, every second. Every panel query
//! of `packaging/grafana/ioshare.json` over the agent's metrics must return series, each labelled
//! with the pod whose cgroup it is (`namespace`, `pod`, and the `cgroup` inside the pod's), both pods
//! on the IO panels and the memory-guarded one on the memory panels. The block-layer panels are
//! `ioshare observe`'s, which the DaemonSet does not run, and the kernel's and PSI panels are cgroup
//! v2's: those are listed, not required.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use ioshare_agent::memory::MemoryGuard;
use ioshare_agent::{Agent, BackendChoice, Config, Status};
use ioshare_testkit::skip_unless_root;
use serde_json::{json, Value};

use super::{node, NodePods, Tenant};
use crate::common::{pod_controlled, run_agent_during, wait_for, Rig};
use crate::dashboard::{dashboard, substitute, targets, variable_values, Labels, Prometheus, Scrape, Target, V2_ONLY};
use crate::k8s::{manifest, K8s};

/// Prometheus's job: the name of the usual job that scrapes pods by their `prometheus.io/` annotations.
const JOB: &str = "kubernetes-pods";
/// The metric families of `ioshare observe` (the dashboard's block-layer panels), which the DaemonSet
/// does not run.
const OBSERVE_ONLY: &str = "ioshare_bio_";
/// How long the panels may take to all show the pods after Prometheus started: a few scrapes, and
/// two within the 5 s window of each `rate()` (measured: see the test's last line).
const PANELS_PATIENCE: Duration = Duration::from_secs(60);

/// A manifest of packaging/kubernetes as JSON, read by kubectl's own YAML reader without a server
/// (`label --local` that sets a label every manifest already carries to its value: nothing changes).
fn manifest_json(k8s: &K8s, name: &str) -> Value {
    let file = manifest(name);
    let out =
        k8s.kubectl(&["label", "--local", "--overwrite", "-o", "json", "-f", &file, "app.kubernetes.io/name=ioshare"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Whether every label of `selector` (a `matchLabels`) is one of `labels` with the same value.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector.as_object().is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels[k] == *v))
}

/// What the packaged manifests say about metrics, their agreement asserted.
struct Packaged {
    /// The ConfigMap's `agent.toml`.
    agent_toml: toml::Table,
    /// The path the DaemonSet's `prometheus.io/path` annotation gives.
    path: String,
}

impl Packaged {
    /// Reads the ConfigMap, DaemonSet, PodMonitor and NetworkPolicy; panics, naming the files, where
    /// they disagree on how the agent's metrics are reached.
    fn read(k8s: &K8s) -> Packaged {
        let cm = manifest_json(k8s, "configmap.yaml");
        let text = cm["data"]["agent.toml"].as_str().expect("configmap.yaml: data.agent.toml");
        let agent_toml: toml::Table =
            toml::from_str(text).unwrap_or_else(|e| panic!("configmap.yaml: agent.toml: {e}"));
        let listen = agent_toml.get("metrics").and_then(|m| m.get("listen")).and_then(toml::Value::as_str);
        let listen = listen.expect("configmap.yaml: agent.toml has no [metrics] listen: no /metrics to scrape");
        let port = ioshare_observe::endpoint::parse_addr(listen).expect("configmap.yaml: [metrics] listen").port();

        let ds = manifest_json(k8s, "daemonset.yaml");
        let pod = &ds["spec"]["template"];
        let annotations = &pod["metadata"]["annotations"];
        assert_eq!(annotations["prometheus.io/scrape"], "true", "daemonset.yaml: prometheus.io/scrape");
        assert_eq!(
            annotations["prometheus.io/port"],
            port.to_string(),
            "daemonset.yaml's prometheus.io/port is not the port of configmap.yaml's [metrics] listen {listen:?}"
        );
        let path = annotations["prometheus.io/path"].as_str().expect("daemonset.yaml: prometheus.io/path").to_string();
        assert_ne!(
            pod["spec"]["hostNetwork"], true,
            "daemonset.yaml: on the host network, 0.0.0.0 is every node address"
        );
        let containers = pod["spec"]["containers"].as_array().expect("daemonset.yaml: containers");
        let named = |c: &Value| c["ports"].as_array().and_then(|p| p.iter().find(|p| p["name"] == "metrics")).is_some();
        let agent = containers.iter().find(|c| named(c)).expect("daemonset.yaml: no container port named metrics");
        let metrics = agent["ports"].as_array().unwrap().iter().find(|p| p["name"] == "metrics").unwrap();
        assert_eq!(
            metrics["containerPort"], port,
            "daemonset.yaml's container port 'metrics' is not the port of configmap.yaml's [metrics] listen {listen:?}"
        );
        // That container runs the agent on this ConfigMap's agent.toml.
        let volume = pod["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["configMap"]["name"] == cm["metadata"]["name"]);
        let volume = volume.expect("daemonset.yaml: no volume of configmap.yaml's ConfigMap");
        let mount = agent["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == volume["name"]);
        let dir =
            mount.and_then(|m| m["mountPath"].as_str()).expect("daemonset.yaml: the ConfigMap's volume is not mounted");
        let command: Vec<&str> = agent["command"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let config = command.iter().position(|a| *a == "--config").map(|i| command[i + 1]);
        assert_eq!(config, Some(format!("{dir}/agent.toml").as_str()), "daemonset.yaml: the agent's --config");

        let labels = &pod["metadata"]["labels"];
        let pm = manifest_json(k8s, "podmonitor.yaml");
        assert!(selects(&pm["spec"]["selector"]["matchLabels"], labels), "podmonitor.yaml selects other pods");
        let endpoint = &pm["spec"]["podMetricsEndpoints"][0];
        assert_eq!(endpoint["port"], "metrics", "podmonitor.yaml: the port");
        assert_eq!(
            endpoint["path"],
            path.as_str(),
            "podmonitor.yaml's path is not daemonset.yaml's prometheus.io/path"
        );
        let np = manifest_json(k8s, "networkpolicy.yaml");
        assert!(selects(&np["spec"]["podSelector"]["matchLabels"], labels), "networkpolicy.yaml selects other pods");
        let ports: Vec<&Value> = np["spec"]["ingress"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|i| i["ports"].as_array())
            .flatten()
            .collect();
        assert!(!ports.is_empty(), "networkpolicy.yaml admits no port");
        for p in ports {
            assert!(
                p["port"] == "metrics" || p["port"] == port,
                "networkpolicy.yaml admits port {}, not the metrics port",
                p["port"]
            );
        }
        Packaged { agent_toml, path }
    }

    /// The ConfigMap's agent config with only what this test must change:
    /// - `[metrics] listen`: 127.0.0.1 and a port the system picks, not `0.0.0.0:PORT` — in the
    ///   DaemonSet's pod that is the pod's own IP, here it would be this machine's every address
    ///   (tests serve on loopback only), and a fixed port may be taken by another run;
    /// - the device: this test's loop device, not the nodes' disk, with `ssd_dfl` for `profile` (which
    ///   would measure the device for ~10 s);
    /// - `[kubernetes]`: the node's name and the admin kubeconfig, which the DaemonSet's pod takes from
    ///   `NODE_NAME` and its service account, and kubelet's `cgroupRoot` of the test node (a real
    ///   node's is the hierarchy's root, the default).
    fn agent_config(&self, device: &Path, k8s: &K8s) -> Config {
        let mut toml = self.agent_toml.clone();
        toml["metrics"]["listen"] = "127.0.0.1:0".into();
        let devices = toml["devices"].as_array_mut().expect("configmap.yaml: [[devices]]");
        assert_eq!(devices.len(), 1, "configmap.yaml: one device");
        devices[0]["path"] = device.display().to_string().into();
        devices[0]["model"] = "ssd_dfl".into();
        let kube = toml["kubernetes"].as_table_mut().expect("configmap.yaml: [kubernetes]");
        for (key, value) in [
            ("node_name", k8s.node_file("node")),
            ("kubeconfig", k8s.kubeconfig.display().to_string()),
            ("cgroup_root", k8s.node_file("cgroup_root")),
        ] {
            assert!(
                kube.insert(key.into(), value.into()).is_none(),
                "configmap.yaml sets kubernetes.{key}: now overridden"
            );
        }
        let text = toml::to_string(&toml).unwrap();
        Config::parse(&text, Path::new("configmap.yaml:agent.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }
}

/// What the dashboard's panels must show here: the device, and the pods (name, cgroup) on the IO
/// panels and on the memory panels, all of namespace `ns`.
struct Expected<'a> {
    ns: &'a str,
    device: String,
    io: Vec<&'a Tenant>,
    memory: Vec<&'a Tenant>,
}

impl Expected<'_> {
    /// What is wrong with the series query `q` of panel target `t` returned (nothing: empty).
    fn check(&self, t: &Target, q: &str, series: &[Labels]) -> Vec<String> {
        let label = |s: &Labels, l: &str| s.get(l).and_then(Value::as_str).unwrap_or("").to_string();
        let mut failed = t.unlabelled(series);
        if series.is_empty() {
            failed.push(format!("{}: no series: {q}", t.panel));
        }
        let other_device = series.iter().find(|s| s.contains_key("device") && label(s, "device") != self.device);
        failed.extend(other_device.map(|s| format!("{}: another device's series: {s:?}", t.panel)));
        let pods = if q.contains("ioshare_memory_") {
            &self.memory
        } else if q.contains("ioshare_cgroup_") {
            &self.io
        } else {
            return failed;
        };
        // Every series is of a pod's cgroup and labelled with that pod.
        for s in series {
            let of = self.io.iter().chain(&self.memory).find(|p| p.name == label(s, "pod"));
            if !of.is_some_and(|p| label(s, "namespace") == self.ns && label(s, "cgroup").starts_with(&p.pod)) {
                failed.push(format!("{}: a series not labelled with its pod: {s:?}", t.panel));
            }
        }
        let shown: BTreeSet<String> = series.iter().map(|s| label(s, "pod")).collect();
        let missing: Vec<&str> = pods.iter().map(|p| p.name.as_str()).filter(|p| !shown.contains(*p)).collect();
        if !missing.is_empty() {
            failed.push(format!("{}: no series of pod(s) {missing:?}: {q}", t.panel));
        }
        failed
    }
}

#[test]
fn prometheus_scrapes_the_pods_series_with_the_packaged_metrics_settings() {
    const TEST: &str = "prometheus_scrapes_the_pods_series_with_the_packaged_metrics_settings";
    if skip_unless_root(TEST) || !Prometheus::available(TEST) || !K8s::node_available() {
        return;
    }
    if MemoryGuard::hierarchy().is_none() {
        eprintln!("skipping {TEST}: no memory controller (the memory panels show a pod's memory cgroup)");
        return;
    }
    let started = Instant::now();
    // Declared before the pods, so dropped after them: no pod's fio holds the device when it goes.
    let rig = Rig::new("kube-metrics", &["probe"]);
    let state = tempfile::tempdir().unwrap();
    let (k8s, _turn) = node().expect("scripts/k8s --node starts (its check passed)");
    let turn = started.elapsed();
    let packaged = Packaged::read(&k8s);
    let pods = NodePods::new(&k8s, "metrics");
    let dev = rig.dev.path();
    // a: BestEffort, nothing annotated: the ConfigMap's BestEffort default (weight 25, iops-total=2000).
    // b: Burstable (a memory limit): the ConfigMap's Burstable default (weight 100, memory priority
    // 6), with early reclaim annotated (the watermarks' panel).
    let a = Tenant::start_with(&k8s, &pods.ns, "a", &[], json!({}), dev);
    let b = Tenant::start_with(
        &k8s,
        &pods.ns,
        "b",
        &[("io.ioshare.dev/memory.wmark_ratio", "80")],
        json!({"limits": {"memory": "256Mi"}}),
        dev,
    );
    assert!(b.pod.contains("/kubepods/burstable/"), "b is Burstable: {}", b.pod);

    let (agent, _) = Agent::start(packaged.agent_config(dev, &k8s), BackendChoice::Userspace, state.path()).unwrap();
    let addr = agent.metrics_addr().expect("configmap.yaml's [metrics] section serves /metrics");
    let (first, ready, figures) = run_agent_during(agent, || {
        let both = || pod_controlled(state.path(), &a.pod).is_some() && pod_controlled(state.path(), &b.pod).is_some();
        assert!(wait_for(Duration::from_secs(10), both).is_some(), "{}", Status::read(state.path()).unwrap());
        // Each at its class's default weight from the ConfigMap.
        let default = |class: &str| packaged.agent_toml["kubernetes"]["qos"][class]["weight"].as_integer();
        let weight = |t: &Tenant| pod_controlled(state.path(), &t.pod).map(|(w, _)| i64::from(w));
        assert_eq!((weight(&a), weight(&b)), (default("besteffort"), default("burstable")));
        let prometheus = Prometheus::start(&[Scrape { job: JOB, port: addr.port(), path: &packaged.path }]);
        let scraping = Instant::now();
        // Prometheus hands its targets to the scraper only every 5 s (its discovery manager's pace).
        let up = || prometheus.query(&format!("up{{job=\"{JOB}\"}}")).is_some_and(|s| !s.is_empty());
        while !up() {
            assert!(scraping.elapsed() < PANELS_PATIENCE, "Prometheus did not scrape the agent in {PANELS_PATIENCE:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let first = scraping.elapsed();
        let expected = Expected {
            ns: &pods.ns,
            device: rig.dev.path().file_name().unwrap().to_string_lossy().into(),
            io: vec![&a, &b],
            memory: vec![&b],
        };
        panels_show_the_pods(&prometheus, &expected);
        let ready = scraping.elapsed();
        eprintln!("{}", Status::read(state.path()).unwrap());
        variables_offer_the_pods(&prometheus, &expected);
        (first, ready, scrape_figures(&prometheus, &pods.ns))
    });
    eprintln!(
        "node and turn {:.1} s; Prometheus's first scrape {:.1} s after it was ready, the dashboard's agent panels all \
         showed the pods {:.1} s after it was ready; {figures}; whole test before the pods' deletion {:.1} s",
        turn.as_secs_f64(),
        first.as_secs_f64(),
        ready.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Waits (bounded) until every panel query over the agent's metrics returns what `expected` says;
/// lists the others.
fn panels_show_the_pods(prometheus: &Prometheus, expected: &Expected) {
    let (dashboard, file) = dashboard();
    let cgroups = format!(".*/pod({})(/.*)?", expected.io.iter().map(|p| p.uid()).collect::<Vec<_>>().join("|"));
    let all = targets(&dashboard);
    let (required, listed): (Vec<&Target>, Vec<&Target>) =
        all.iter().partition(|t| !t.expr.contains(OBSERVE_ONLY) && !V2_ONLY.iter().any(|m| t.expr.contains(m)));
    assert!(
        required.len() >= 15,
        "the dashboard's agent panels: {} of {} in {}",
        required.len(),
        all.len(),
        file.display()
    );
    let queries: Vec<(&Target, String)> =
        required.iter().map(|t| (*t, substitute(&t.expr, &expected.device, &cgroups))).collect();
    let deadline = Instant::now() + PANELS_PATIENCE;
    loop {
        let failed: Vec<String> = queries
            .iter()
            .flat_map(|(t, q)| match prometheus.query(q) {
                Some(series) => expected.check(t, q, &series),
                None => vec![format!("{}: query failed: {q}", t.panel)],
            })
            .collect();
        if failed.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after {PANELS_PATIENCE:?}, {} of {} panel queries fail:\n{}",
            failed.len(),
            queries.len(),
            failed.join("\n")
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    for t in listed {
        let why = if t.expr.contains(OBSERVE_ONLY) {
            "ioshare observe's, not run by the DaemonSet"
        } else {
            "cgroup v2 only"
        };
        eprintln!("not required ({why}): '{}' {}", t.panel, t.expr);
    }
    eprintln!("{} panel queries of {} returned the pods' series", queries.len(), file.display());
}

/// The dashboard's template variables offer the device and the pods' container cgroups.
fn variables_offer_the_pods(prometheus: &Prometheus, expected: &Expected) {
    let (dashboard, _) = dashboard();
    for (label, values) in variable_values(&dashboard, prometheus) {
        let wanted: BTreeSet<String> = match label.as_str() {
            "device" => [expected.device.clone()].into(),
            "cgroup" => expected.io.iter().map(|p| p.container.clone()).collect(),
            other => panic!("a variable over '{other}' the test does not know"),
        };
        assert!(wanted.is_subset(&values), "variable over {label}: {values:?}, expected {wanted:?}");
    }
}

/// Prometheus's own figures of the job: the target up, the last scrape's duration and samples, the
/// slowest scrape, and how many of the series are the pods'.
fn scrape_figures(prometheus: &Prometheus, ns: &str) -> String {
    let value = |q: String| {
        let v = prometheus.query_values(&q).unwrap_or_else(|| panic!("query failed: {q}"));
        v.first().map_or(f64::NAN, |(_, x)| *x)
    };
    let job = format!("job=\"{JOB}\"");
    assert_eq!(value(format!("up{{{job}}}")), 1.0, "the target is up");
    format!(
        "scrape of {} samples in {:.1} ms (slowest {:.1} ms), {} of them the pods' series",
        value(format!("scrape_samples_scraped{{{job}}}")),
        value(format!("scrape_duration_seconds{{{job}}}")) * 1e3,
        value(format!("max_over_time(scrape_duration_seconds{{{job}}}[5m])")) * 1e3,
        value(format!("count({{{job},namespace=\"{ns}\"}})"))
    )
}
