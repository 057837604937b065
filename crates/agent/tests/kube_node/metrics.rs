//! The agent on the node with the packaged manifests' metrics settings, scraped by a real Prometheus
//! (Debian's `prometheus`; skipped, with the reason, where it is not installed) as the packaged
//! scrape settings have it, and the Grafana dashboard's queries answered with the pods' series.
//!
//! The manifests are read with kubectl's own YAML reader (offline), and what must agree for the
//! cluster's Prometheus to reach the agent is asserted from them, so that an edit of one file without
//! the others fails here: the ConfigMap's `[metrics] listen` port is the DaemonSet's `prometheus.io/port`
//! annotation and its container port named `metrics`, which the PodMonitor and the NetworkPolicy name;
//! the PodMonitor's path is the `prometheus.io/path` annotation; that container runs the agent on the
//! ConfigMap's `agent.toml`, and the pod is not on the host network (`0.0.0.0` is the pod's IP).
//!
//! The agent then runs in this process on the ConfigMap's agent config, changed only where a test
//! must (listed at [`Packaged::agent_config`]), with two pods of the node — a BestEffort one and a
//! Burstable one, each taking the ConfigMap's defaults for its class. A pod made from the DaemonSet's
//! template stands in for the agent's (its labels, annotations and named port; see
//! [`Packaged::stand_in`]), and Prometheus finds the agent through it with two jobs: the usual
//! annotation-driven one, and the one the Prometheus operator makes of podmonitor.yaml (selector,
//! port, path, `honorLabels`, and the target labels it adds: namespace, pod, container). Both scrape
//! every second. Every panel query of `packaging/grafana/ioshare.json` over the agent's metrics must
//! return series, each labelled with the pod whose cgroup it is (`namespace`, `pod`, and the `cgroup`
//! inside the pod's), both pods on the IO panels and the memory-guarded one on the memory panels —
//! from both jobs, so a scrape job that renames the agent's labels (the operator's, without
//! `honorLabels`: `exported_pod`) fails here. The block-layer panels are `ioshare observe`'s, which
//! the DaemonSet does not run, and the kernel's and PSI panels are cgroup v2's: those are listed, not
//! required.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use ioshare_agent::memory::MemoryGuard;
use ioshare_agent::{Agent, BackendChoice, Config, Status};
use ioshare_testkit::skip_unless_root;
use serde_json::{json, Value};

use super::{node, run_pod, NodePods, Tenant};
use crate::common::{pod_controlled, run_agent_during, wait_for, Rig};
use crate::dashboard::{dashboard, substitute, targets, variable_values, Labels, Prometheus, Target, V2_ONLY};
use crate::k8s::{manifest, K8s};

/// The name of the usual job that scrapes pods by their `prometheus.io/` annotations.
const ANNOTATIONS_JOB: &str = "kubernetes-pods";
/// What the pod standing in for the DaemonSet's runs: fio's null engine at one IO a second (no block
/// IO: the agent runs in this test's process).
const IDLE: [&str; 9] = [
    "fio",
    "--name=idle",
    "--ioengine=null",
    "--size=1m",
    "--time_based",
    "--runtime=600",
    "--rate_iops=1",
    "--thread",
    "--output=/dev/null",
];
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
    /// The DaemonSet's pod template.
    template: Value,
    /// The name of its container that runs the agent.
    container: String,
    /// The PodMonitor.
    pod_monitor: Value,
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
        let container = agent["name"].as_str().expect("daemonset.yaml: the agent container's name").to_string();
        Packaged { agent_toml, template: pod.clone(), container, pod_monitor: pm }
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

impl Packaged {
    /// A pod of the node in `ns` standing in for the DaemonSet's, for Prometheus to discover (the
    /// agent itself runs in this test's process): the template's labels and annotations and its agent
    /// container's name and port named `metrics`, with the port the agent listens on here (`port`) in
    /// the `prometheus.io/port` annotation and that container port (both are the ConfigMap's port in
    /// the manifests, asserted in [`Packaged::read`]). On the host network, as the test node has no
    /// pod network: its IP is the node's, 127.0.0.1, where the agent listens.
    fn stand_in(&self, k8s: &K8s, ns: &str, port: u16) {
        let mut annotations = self.template["metadata"]["annotations"].clone();
        annotations["prometheus.io/port"] = port.to_string().into();
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "ioshare-agent", "namespace": ns, "labels": self.template["metadata"]["labels"],
                         "annotations": annotations},
            "spec": {"nodeName": k8s.node_file("node"), "hostNetwork": true, "restartPolicy": "Never",
                     "automountServiceAccountToken": false, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": self.container, "image": k8s.node_file("tenant_image"),
                                     "imagePullPolicy": "Never", "command": IDLE,
                                     "ports": [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]}]}
        });
        run_pod(k8s, &pod);
    }

    /// Prometheus's jobs for the agent, both over the pods [`discover`] wrote to `targets`: the usual
    /// annotation-driven one, as prometheus-community's chart has it (the annotations' path and port,
    /// the pod's namespace and name as target labels, `honor_labels`), and the part that matters here
    /// of what the Prometheus operator makes of podmonitor.yaml (its selector, port, path and
    /// `honorLabels`; the pod's namespace, name and container as target labels). Returns them and the
    /// operator job's name.
    fn scrape_jobs(&self, targets: &Path) -> (String, String) {
        let sd = format!("    file_sd_configs: [{{files: ['{}']}}]\n", targets.display());
        let pm = &self.pod_monitor;
        let operator_job = format!(
            "podMonitor/{}/{}/0",
            pm["metadata"]["namespace"].as_str().unwrap(),
            pm["metadata"]["name"].as_str().unwrap()
        );
        let endpoint = &pm["spec"]["podMetricsEndpoints"][0];
        let selector = pm["spec"]["selector"]["matchLabels"].as_object().unwrap();
        let labels: Vec<String> =
            selector.keys().map(|l| format!("__meta_kubernetes_pod_label_{}", label_name(l))).collect();
        let values: Vec<&str> = selector.values().map(|v| v.as_str().unwrap()).collect();
        // Each job: its name, `honor_labels`, and any further settings; then its relabelling rules.
        let job = |head: String, rules: Vec<String>| {
            let rules: String = rules.iter().map(|r| format!("      - {r}\n")).collect();
            format!("  - job_name: {head}\n{sd}    relabel_configs:\n{rules}")
        };
        let target =
            |meta: &str, label: &str| format!("{{source_labels: [__meta_kubernetes_{meta}], target_label: {label}}}");
        let annotation = |a: &str| format!("__meta_kubernetes_pod_annotation_prometheus_io_{a}");
        let annotations_job = job(
            format!("{ANNOTATIONS_JOB}\n    honor_labels: true"),
            vec![
                format!("{{source_labels: [{}], action: keep, regex: 'true'}}", annotation("scrape")),
                format!("{{source_labels: [{}], target_label: __metrics_path__, regex: '(.+)'}}", annotation("path")),
                format!(
                    "{{source_labels: [__address__, {}], target_label: __address__, regex: '([^:]+)(?::\\d+)?;(\\d+)', \
                     replacement: '$1:$2'}}",
                    annotation("port")
                ),
                target("namespace", "namespace"),
                target("pod_name", "pod"),
            ],
        );
        let operator = job(
            format!(
                "{operator_job}\n    honor_labels: {}\n    metrics_path: {}",
                endpoint["honorLabels"].as_bool().unwrap_or(false),
                endpoint["path"].as_str().unwrap_or("/metrics")
            ),
            vec![
                format!("{{source_labels: [{}], action: keep, regex: '{}'}}", labels.join(", "), values.join(";")),
                format!(
                    "{{source_labels: [__meta_kubernetes_pod_container_port_name], action: keep, regex: '{}'}}",
                    endpoint["port"].as_str().unwrap()
                ),
                target("namespace", "namespace"),
                target("pod_container_name", "container"),
                target("pod_name", "pod"),
            ],
        );
        let jobs = annotations_job + &operator;
        (jobs, operator_job)
    }
}

/// A pod label's or annotation's name as Prometheus's Kubernetes discovery puts it in a label name:
/// every character a label name cannot have made `_`.
fn label_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// Writes to `file`, for `file_sd_configs`, the targets Prometheus's Kubernetes discovery (role
/// `pod`) gives for the pods of `ns`, with the meta labels the jobs' rules read — as the pod objects
/// the API server returns say: Debian's prometheus is built without Kubernetes discovery. One target
/// per container port (`IP:PORT`), one per container without ports (`IP`). The test node's pods have
/// no IP (kubelet gives a node on loopback no address): its `--node-ip`, 127.0.0.1, stands in, the IP
/// a host-network pod has on a real node.
fn discover(k8s: &K8s, ns: &str, file: &Path) {
    let pods: Value = serde_json::from_str(&k8s.kubectl(&["-n", ns, "get", "pods", "-o", "json"])).unwrap();
    let mut targets = Vec::new();
    for pod in pods["items"].as_array().unwrap() {
        let ip = pod["status"]["podIP"].as_str().unwrap_or("127.0.0.1");
        let mut meta = serde_json::Map::new();
        meta.insert("__meta_kubernetes_namespace".into(), ns.into());
        meta.insert("__meta_kubernetes_pod_name".into(), pod["metadata"]["name"].clone());
        meta.insert("__meta_kubernetes_pod_ip".into(), ip.into());
        for kind in ["label", "annotation"] {
            for (k, v) in pod["metadata"][format!("{kind}s")].as_object().into_iter().flatten() {
                meta.insert(format!("__meta_kubernetes_pod_{kind}_{}", label_name(k)), v.clone());
            }
        }
        for c in pod["spec"]["containers"].as_array().unwrap() {
            let mut meta = meta.clone();
            meta.insert("__meta_kubernetes_pod_container_name".into(), c["name"].clone());
            let ports = c["ports"].as_array().cloned().unwrap_or_default();
            if ports.is_empty() {
                targets.push(json!({"targets": [ip], "labels": meta}));
            }
            for p in ports {
                let mut meta = meta.clone();
                meta.insert("__meta_kubernetes_pod_container_port_name".into(), p["name"].clone());
                meta.insert(
                    "__meta_kubernetes_pod_container_port_number".into(),
                    p["containerPort"].to_string().into(),
                );
                targets.push(json!({"targets": [format!("{ip}:{}", p["containerPort"])], "labels": meta}));
            }
        }
    }
    std::fs::write(file, serde_json::to_string(&targets).unwrap()).unwrap();
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
        packaged.stand_in(&k8s, &pods.ns, addr.port());
        let scraping = Scraping::start(&k8s, &packaged, &pods.ns);
        let (prometheus, first) = (&scraping.prometheus, scraping.ready.elapsed());
        let expected = Expected {
            ns: &pods.ns,
            device: rig.dev.path().file_name().unwrap().to_string_lossy().into(),
            io: vec![&a, &b],
            memory: vec![&b],
        };
        panels_show_the_pods(prometheus, &expected);
        let ready = scraping.ready.elapsed();
        eprintln!("{}", Status::read(state.path()).unwrap());
        variables_offer_the_pods(prometheus, &expected);
        (first, ready, scrape_figures(prometheus, &[ANNOTATIONS_JOB, &scraping.operator_job], "a|b"))
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

/// Prometheus running the packaged scrape jobs over the pods of the test's namespace.
struct Scraping {
    prometheus: Prometheus,
    /// The operator job's name.
    operator_job: String,
    /// When Prometheus was ready.
    ready: Instant,
    /// Where the discovered targets are (Prometheus reads the file again while it runs).
    _discovered: tempfile::TempDir,
}

impl Scraping {
    /// Starts Prometheus with [`Packaged::scrape_jobs`] over the pods of `ns` as [`discover`] finds
    /// them, and waits (bounded) until both jobs scraped the agent once: its discovery hands targets
    /// to the scraper only every 5 s.
    fn start(k8s: &K8s, packaged: &Packaged, ns: &str) -> Scraping {
        let discovered = tempfile::tempdir().unwrap();
        let targets = discovered.path().join("targets.json");
        discover(k8s, ns, &targets);
        let (jobs, operator_job) = packaged.scrape_jobs(&targets);
        let prometheus = Prometheus::start_with(&jobs);
        let ready = Instant::now();
        let both_up = || prometheus.query("up").is_some_and(|s| s.len() == 2);
        while !both_up() {
            assert!(
                ready.elapsed() < PANELS_PATIENCE,
                "Prometheus did not scrape the agent by both jobs in {PANELS_PATIENCE:?}: up {:?}\n{jobs}\n{}: {}",
                prometheus.query("up"),
                targets.display(),
                std::fs::read_to_string(&targets).unwrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Scraping { prometheus, operator_job, ready, _discovered: discovered }
    }
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

/// Prometheus's own figures: each job's target up; the annotation-driven job's last scrape (its
/// samples, duration, and how many are the series of the pods whose names match `pods`); the slowest
/// scrape of either job.
fn scrape_figures(prometheus: &Prometheus, jobs: &[&str], pods: &str) -> String {
    let value = |q: String| {
        let v = prometheus.query_values(&q).unwrap_or_else(|| panic!("query failed: {q}"));
        v.first().map_or(f64::NAN, |(_, x)| *x)
    };
    for job in jobs {
        assert_eq!(value(format!("up{{job=\"{job}\"}}")), 1.0, "job {job}'s target is up");
    }
    let job = format!("job=\"{ANNOTATIONS_JOB}\"");
    format!(
        "{} jobs up; a scrape of {} samples in {:.1} ms, {} of them the pods' series (slowest scrape {:.1} ms)",
        jobs.len(),
        value(format!("scrape_samples_scraped{{{job}}}")),
        value(format!("scrape_duration_seconds{{{job}}}")) * 1e3,
        value(format!("count({{{job},pod=~\"{pods}\"}})")),
        value("max(max_over_time(scrape_duration_seconds[5m]))".into()) * 1e3,
    )
}
