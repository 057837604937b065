//! The agent on a whole node (root only): `scripts/k8s --node` runs etcd, kube-apiserver, Debian's
//! containerd and runc and a real kubelet on loopback; pods run real containers from the tenant
//! image the script built and imported (fio), in the cgroups kubelet itself makes under its own
//! `cgroupRoot` (`<root>/kubepods/besteffort/pod<uid>/<container-id>`, cgroupfs driver). The agent
//! follows the pods through the API server and shares a loop device (over a file the test creates)
//! between two of them by their annotations with its userspace backend (this host's blkio is cgroup
//! v1). Skipped, with the reason, when not root or when the node cannot run (`scripts/setup.sh`
//! builds kubelet and installs containerd and runc). Everything is removed also when a test fails:
//! its pods are deleted (the `NodePods` guard), the agent reverts what it wrote
//! (`run_agent_during`), the loop device goes after the pods (the `Rig`), and the script deletes
//! whatever pods are left and stops every process it started (the `K8s` guard).
//!
//! The tests take turns on one node ([`node`]), each with its own device and pods in a namespace of
//! its own. The second (`kube_node/metrics.rs`) runs the agent on the packaged manifests' metrics
//! settings and has a real Prometheus scrape it.

mod common;
#[path = "../../cli/tests/dashboard/queries.rs"]
mod dashboard;
#[path = "../../kube/tests/common/mod.rs"]
mod k8s;
#[path = "kube_node/metrics.rs"]
mod metrics;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use common::{fio_args, median, pod_controlled, run_agent_during, split_where_limited, wait_for, PeriodSample, Rig};
use ioshare_agent::backend::userspace::donor::DONATING_SLACK;
use ioshare_agent::report::cpu::CpuWatch;
use ioshare_agent::{Agent, BackendChoice, Config, Status};
use ioshare_host::read_throttle_stats;
use ioshare_testkit::skip_unless_root;
use k8s::{unique, K8s};

/// Queue depth of each tenant's fio jobs, and two jobs (threads) each: saturating, as in the
/// userspace backend's test.
const DEPTH: u32 = 32;
const SATURATING: &[&str] = &["--numjobs=2"];
/// Share of the 100 ms samples in which a tenant's busiest thread may be CPU-bound for its rate to
/// count as the IO controller's doing (as in the userspace backend's test).
const CPU_BOUND_SAMPLES: f64 = 0.2;
/// How long a pod may take to start or go on this loaded machine (measured: 1–3 s each).
const POD_PATIENCE: Duration = Duration::from_secs(60);

/// The node, shared by the tests of this binary that run at once (started by the first, stopped
/// when the last drops it), and this test's turn on it: the tests measure IO on the node one at a
/// time. `None` when it cannot start (the reason printed). A test run alone starts its own.
fn node() -> Option<(Arc<K8s>, MutexGuard<'static, ()>)> {
    static NODE: Mutex<Weak<K8s>> = Mutex::new(Weak::new());
    static TURN: Mutex<()> = Mutex::new(());
    let k8s = {
        let mut shared = NODE.lock().unwrap_or_else(PoisonError::into_inner);
        match shared.upgrade() {
            Some(k8s) => k8s,
            None => {
                let k8s = Arc::new(K8s::start_node()?);
                *shared = Arc::downgrade(&k8s);
                k8s
            }
        }
    };
    Some((k8s, TURN.lock().unwrap_or_else(PoisonError::into_inner)))
}

/// A namespace of the node for one test's pods; its pods are deleted (and waited for: no fio of
/// theirs holds the test's device then) on drop. Declare it after the device and the agent's state.
struct NodePods<'a> {
    k8s: &'a K8s,
    ns: String,
}

impl<'a> NodePods<'a> {
    /// A new namespace named after `prefix`.
    fn new(k8s: &'a K8s, prefix: &str) -> NodePods<'a> {
        let ns = unique(prefix);
        k8s.namespace(&ns, &[], &[]);
        NodePods { k8s, ns }
    }
}

impl Drop for NodePods<'_> {
    fn drop(&mut self) {
        let timeout = format!("--timeout={}s", POD_PATIENCE.as_secs());
        let args = ["-n", &self.ns, "delete", "pods", "--all", "--wait=true", &timeout];
        if let Err(e) = self.k8s.try_kubectl(&args, None) {
            eprintln!("deleting the pods of {}: {e}", self.ns);
        }
    }
}

/// Creates `pod` (a Pod object with its name and namespace) and waits until it runs.
fn run_pod(k8s: &K8s, pod: &serde_json::Value) {
    k8s.apply(&pod.to_string());
    let (ns, name) = (pod["metadata"]["namespace"].as_str().unwrap(), pod["metadata"]["name"].as_str().unwrap());
    let timeout = format!("--timeout={}s", POD_PATIENCE.as_secs());
    let running =
        k8s.try_kubectl(&["-n", ns, "wait", "--for=jsonpath={.status.phase}=Running", "pod", name, &timeout], None);
    assert!(running.is_ok(), "pod {name} is not running: {}", k8s.kubectl(&["-n", ns, "describe", "pod", name]));
}

/// A pod of the node running fio against the device.
struct Tenant {
    name: String,
    /// The pod's cgroup, relative to the blkio root (kubelet's `cgroupRoot` included).
    pod: String,
    /// The fio container's cgroup, likewise.
    container: String,
}

impl Tenant {
    /// Creates pod `name` (privileged, hostNetwork, BestEffort) with IO weight `weight`, running fio on
    /// `device`; waits until it runs and returns its cgroups.
    fn start(k8s: &K8s, ns: &str, name: &str, weight: u32, device: &Path) -> Tenant {
        let weight = weight.to_string();
        let t = Tenant::start_with(k8s, ns, name, &[("io.ioshare.dev/weight", &weight)], serde_json::json!({}), device);
        assert!(t.pod.contains("/kubepods/besteffort/"), "{name} is BestEffort: {}", t.pod);
        t
    }

    /// [`Tenant::start`] with `annotations` and the container's `resources` (which set the pod's
    /// QoS class, and so where kubelet puts its cgroup).
    fn start_with(
        k8s: &K8s,
        ns: &str,
        name: &str,
        annotations: &[(&str, &str)],
        resources: serde_json::Value,
        device: &Path,
    ) -> Tenant {
        let mut command = vec!["fio".to_string()];
        command.extend(fio_args(device, DEPTH, 600, SATURATING));
        let annotations: serde_json::Map<String, serde_json::Value> =
            annotations.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect();
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "spec": {"nodeName": k8s.node_file("node"), "hostNetwork": true, "restartPolicy": "Never",
                     "automountServiceAccountToken": false, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "fio", "image": k8s.node_file("tenant_image"),
                                     "imagePullPolicy": "Never", "command": command, "resources": resources,
                                     "securityContext": {"privileged": true}}]}
        });
        run_pod(k8s, &pod);
        let get = |path: &str| k8s.kubectl(&["-n", ns, "get", "pod", name, "-o", &format!("jsonpath={path}")]);
        let id = get("{.status.containerStatuses[0].containerID}");
        let id = id.strip_prefix("containerd://").unwrap_or_else(|| panic!("a containerd container id: {id}"));
        // kubelet's cgroupfs layout: Guaranteed pods directly under kubepods, the others in their class's.
        let class = get("{.status.qosClass}").to_lowercase();
        let class = if class == "guaranteed" { String::new() } else { format!("{class}/") };
        let pod = format!("{}/kubepods/{class}pod{}", k8s.node_file("cgroup_root"), get("{.metadata.uid}"));
        Tenant { name: name.to_string(), container: format!("{pod}/{id}"), pod }
    }

    /// The pod's UID (the end of its cgroup's name).
    fn uid(&self) -> &str {
        self.pod.rsplit_once("/pod").unwrap().1
    }
}

/// The agent config: `device` with `model`, the `[kubernetes]` section for the script's node.
fn config(dir: &Path, device: &Path, model: &str, k8s: &K8s) -> Config {
    let text = format!(
        "period_ms = 100\n[[devices]]\npath = \"{}\"\nmodel = \"{model}\"\n[kubernetes]\nnode_name = \"{}\"\n\
         kubeconfig = \"{}\"\ncgroup_driver = \"cgroupfs\"\ncgroup_root = \"{}\"\n",
        device.display(),
        k8s.node_file("node"),
        k8s.kubeconfig.display(),
        k8s.node_file("cgroup_root")
    );
    let path = dir.join("agent.toml");
    std::fs::write(&path, &text).unwrap();
    Config::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The tenants as the agent saw them in one period, and the first two's read IOs then.
struct View {
    hweight_active: Vec<f64>,
    hweight_inuse: Vec<f64>,
    riops: Vec<u64>,
    sample: PeriodSample,
}

/// What a window measured: each tenant's read IOPS, the agent's view every period (when it runs),
/// and per tenant the share of 100 ms samples in which its threads were CPU-bound.
struct Window {
    iops: Vec<f64>,
    views: Vec<View>,
    cpu_bound: Vec<f64>,
}

/// Measures `tenants` (their container cgroups under the blkio root `blkio`) on device `dev` over
/// `window`.
fn measure(blkio: &Path, tenants: &[&Tenant], dev: ioshare_host::DevNum, state: &Path, window: Duration) -> Window {
    let dirs: Vec<PathBuf> = tenants.iter().map(|t| blkio.join(&t.container)).collect();
    let ios =
        |d: &Path| read_throttle_stats(d, false).ok().and_then(|s| s.device(dev).map(|d| d.ios.read)).unwrap_or(0);
    let mut cpu = CpuWatch::default();
    let clock = Instant::now();
    let (mut bound, mut samples) = (vec![0u32; tenants.len()], 0u32);
    let mut sample = |bound: &mut Vec<u32>, samples: &mut u32| {
        let now = clock.elapsed().as_nanos() as u64;
        let used: Option<Vec<_>> = tenants.iter().zip(&dirs).map(|(t, d)| cpu.sample(&t.container, d, now)).collect();
        if let Some(used) = used {
            *samples += 1;
            bound.iter_mut().zip(used).for_each(|(b, u)| *b += u32::from(u.cpu_bound()));
        }
    };
    let (mut views, mut last) = (Vec::new(), None);
    sample(&mut bound, &mut samples);
    let before: Vec<u64> = dirs.iter().map(|d| ios(d)).collect();
    let start = Instant::now();
    // Polled every 10 ms so that each view's IO counts are read soon after its period (100 ms)
    // began; the CPU sampled every 100 ms.
    let mut polls = 0u32;
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(10));
        polls += 1;
        if polls % 10 == 0 {
            sample(&mut bound, &mut samples);
        }
        // One view per period the agent planned (a stale status is not counted again).
        let Ok(st) = Status::read(state) else { continue };
        if last == Some(st.periods) {
            continue;
        }
        last = Some(st.periods);
        let groups: Option<Vec<_>> =
            tenants.iter().map(|t| st.devices[0].groups.iter().find(|g| g.cgroup == t.container)).collect();
        if let Some(g) = groups {
            views.push(View {
                hweight_active: g.iter().map(|g| g.hweight_active).collect(),
                hweight_inuse: g.iter().map(|g| g.hweight_inuse).collect(),
                riops: g.iter().map(|g| g.limits[0]).collect(),
                sample: PeriodSample {
                    at: Instant::now(),
                    ios: [0, 1].map(|i| dirs.get(i).map_or(0, |d| ios(d))),
                    first_limit: g[0].limits[0],
                },
            });
        }
    }
    let secs = start.elapsed().as_secs_f64();
    Window {
        iops: dirs.iter().zip(&before).map(|(d, b)| (ios(d) - b) as f64 / secs).collect(),
        views,
        cpu_bound: bound.iter().map(|&n| f64::from(n) / f64::from(samples.max(1))).collect(),
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string()
}

#[test]
fn pods_on_a_real_node_share_a_device_by_their_annotations() {
    if skip_unless_root("pods_on_a_real_node_share_a_device_by_their_annotations") || !K8s::node_available() {
        return;
    }
    let started = Instant::now();
    // Declared before the pods, so dropped after them: no pod's fio holds the device when it goes.
    let rig = Rig::new("kube-node", &["probe"]);
    let state = tempfile::tempdir().unwrap();
    let (k8s, _turn) = node().expect("scripts/k8s --node starts (its check passed)");
    let node_up = started.elapsed();
    let pods = NodePods::new(&k8s, "node");
    let ns = pods.ns.clone();
    let dev = rig.dev.path();

    // Uncontrolled: a alone (what it can do by itself), then both; the model is the device's
    // measured random-read rate with both (what `ioshare profile` would measure).
    let t = Instant::now();
    let a = Tenant::start(&k8s, &ns, "a", 200, dev);
    let pod_running = t.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let solo = measure(&rig.root, &[&a], rig.devnum(), state.path(), Duration::from_millis(1500)).iops[0];
    let b = Tenant::start(&k8s, &ns, "b", 100, dev);
    std::thread::sleep(Duration::from_millis(500));
    let free = measure(&rig.root, &[&a, &b], rig.devnum(), state.path(), Duration::from_secs(2)).iops;
    let iops = (free[0] + free[1]).round() as u64;
    let model = format!("ssd_dfl rrandiops={iops} rseqiops={iops}");
    // And with a held to a fifth of that by a static blk-throttle limit (the held-back case below):
    // what the device gives b beside it. Not the uncontrolled total less a's fifth: this device's
    // rate grows with the IOs in flight at it, and a's wait at its limit (measured: b took 72–79% of
    // that, not held by its limit).
    let cap = iops / 5;
    let a_limit_file = rig.root.join(&a.container).join("blkio.throttle.read_iops_device");
    std::fs::write(&a_limit_file, format!("{} {cap}", rig.devnum())).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let beside_capped = measure(&rig.root, &[&a, &b], rig.devnum(), state.path(), Duration::from_secs(2)).iops;
    std::fs::write(&a_limit_file, format!("{} 0", rig.devnum())).unwrap();
    let cfg = config(state.path(), dev, &model, &k8s);

    let (mut agent, _) = Agent::start(cfg, BackendChoice::Userspace, state.path()).unwrap();
    // Its period trace, on request (read it with `ioshare agent trace FILE`).
    if let Some(to) = std::env::var_os("IOSHARE_AGENT_TEST_TRACE_TO") {
        agent.trace_to(ioshare_agent::report::trace::TraceWriter::create(std::path::Path::new(&to)).unwrap());
    }
    let (split, held, forgotten) = run_agent_during(agent, || {
        let both = || pod_controlled(state.path(), &a.pod).is_some() && pod_controlled(state.path(), &b.pod).is_some();
        assert!(wait_for(Duration::from_secs(5), both).is_some(), "{}", Status::read(state.path()).unwrap());
        // The agent mapped each pod to kubelet's own cgroup and named it.
        assert_eq!(pod_controlled(state.path(), &a.pod), Some((200, format!("{ns}/a"))));
        assert_eq!(pod_controlled(state.path(), &b.pod), Some((100, format!("{ns}/b"))));
        std::thread::sleep(Duration::from_secs(2));
        let split = measure(&rig.root, &[&a, &b], rig.devnum(), state.path(), Duration::from_secs(3));
        eprintln!("{}", Status::read(state.path()).unwrap());

        // Held back: a capped by a fixed limit of its own annotation at a fifth of what both did
        // uncontrolled; b, at its weight's third, takes what a leaves (a at its cap donates).
        k8s.kubectl(&[
            "-n",
            &ns,
            "annotate",
            "--overwrite",
            "pod",
            &a.name,
            &format!("io.ioshare.dev/limits=iops-read={cap}"),
        ]);
        let capped = || {
            Status::read(state.path()).is_ok_and(|st| {
                st.devices[0].groups.iter().any(|g| g.cgroup == a.container && g.limits[0] != 0 && g.limits[0] <= cap)
            })
        };
        assert!(
            wait_for(Duration::from_secs(5), capped).is_some(),
            "a capped: {}",
            Status::read(state.path()).unwrap()
        );
        std::thread::sleep(Duration::from_secs(1));
        let held = measure(&rig.root, &[&a, &b], rig.devnum(), state.path(), Duration::from_secs(3));
        eprintln!("{}", Status::read(state.path()).unwrap());
        k8s.kubectl(&["-n", &ns, "annotate", "pod", &a.name, "io.ioshare.dev/limits-"]);

        // An annotation changed: applied within 1 s of kubectl returning.
        k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", &b.name, "io.ioshare.dev/weight=400"]);
        let took =
            wait_for(Duration::from_secs(5), || pod_controlled(state.path(), &b.pod).is_some_and(|(w, _)| w == 400));
        eprintln!("annotation change applied after {took:?}");
        assert!(took.is_some_and(|t| t < Duration::from_secs(1)), "took {took:?}");

        // Pod b deleted: kubelet stops its container and removes its cgroups, the API object goes,
        // and the agent forgets it — nothing of it left in its state.
        let t = Instant::now();
        k8s.kubectl(&["-n", &ns, "delete", "pod", &b.name, "--wait=false"]);
        let gone = wait_for(POD_PATIENCE, || {
            !rig.root.join(&b.pod).exists()
                && std::fs::read_to_string(state.path().join("status.json")).is_ok_and(|s| !s.contains(b.uid()))
        });
        let forgotten = t.elapsed();
        assert!(gone.is_some(), "pod b forgotten and its cgroups gone: {}", Status::read(state.path()).unwrap());
        assert!(pod_controlled(state.path(), &a.pod).is_some(), "a is still controlled");
        (split, held, forgotten)
    });
    let state_files: Vec<String> = std::fs::read_dir(state.path())
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    assert!(state_files.iter().all(|s| !s.contains(b.uid())), "pod b left in the agent's state directory");

    // The agent's decisions, judged as the userspace backend's test judges its 2:1 rules (see there
    // for the reasons): in the periods neither tenant donated, the hweights are the annotations' 2:1
    // (± 2%: 16-bit fixed point and the donation slack) and the read limits follow them from below
    // (median ≥ 1.5).
    let both: Vec<&View> = split
        .views
        .iter()
        .filter(|v| (0..2).all(|i| v.hweight_inuse[i] + DONATING_SLACK >= v.hweight_active[i]))
        .collect();
    let hw = median(both.iter().map(|v| v.hweight_inuse[0] / v.hweight_inuse[1]).collect());
    let lim = median(both.iter().map(|v| v.riops[0] as f64 / v.riops[1].max(1) as f64).collect());
    let (sa, sb) = (split.iops[0], split.iops[1]);
    let (ratio, total) = (sa / sb, sa + sb);
    let bound =
        format!("CPU-bound in {:.0}% / {:.0}% of the samples", split.cpu_bound[0] * 100.0, split.cpu_bound[1] * 100.0);
    eprintln!(
        "node up (and this test's turn) in {:.1} s, pod running {:.1} s after kubectl apply; uncontrolled: a \
         alone {solo:.0} IOPS, both {:.0}+{:.0}; through the agent 2:1 {sa:.0}+{sb:.0} IOPS, ratio {ratio:.2} \
         ({bound}); {} of {} periods both competing, median hweight ratio {hw:.3}, read-limit ratio {lim:.2}; \
         deleted pod forgotten after {:.1} s; load {}",
        node_up.as_secs_f64(),
        pod_running.as_secs_f64(),
        free[0],
        free[1],
        both.len(),
        split.views.len(),
        forgotten.as_secs_f64(),
        load()
    );
    assert!(split.views.len() >= 10, "the status was read every period: {}", split.views.len());
    assert!(both.len() >= 3, "both pods competed in {} of {} periods", both.len(), split.views.len());
    assert!((hw / 2.0 - 1.0).abs() <= 0.02, "hweights follow the annotations 2:1: {hw:.3}");
    assert!(lim >= 1.5, "read limits follow the hweights 2:1: {lim:.2}");
    // The real split is judged where both tenants could use their shares, measured (as in the
    // userspace backend's test and the laid-out pods' test): neither was CPU-bound (on two busy cores
    // the fio threads get equal CPU and IOCost, work-conserving, drifts to 1:1 by design), a alone did
    // at least its 2/3 of what both did under the agent (else its own queue held it), and over the
    // intervals between periods in which a did at least 85% of its read limit (its limit, not the
    // host's disk dipping below the limits, held it; the disk here dips to 40% for a second). ± 15%:
    // the acceptance is ± 10% over 15 s; this window is 3 s, in which one stalled period moves the
    // ratio by a few percent more, and b may pass its limit by up to 30% in an interval (below).
    let mean_limit = |i: usize| split.views.iter().map(|v| v.riops[i] as f64).sum::<f64>() / split.views.len() as f64;
    let b_limit = mean_limit(1);
    // blk-throttle enforced them: b stayed near its limits (30% over: blk-throttle's slices restart
    // whenever a limit is written, as the userspace backend's test found).
    assert!(sb <= 1.3 * b_limit, "b did {sb:.0} IOPS under a mean limit of {b_limit:.0}");
    let samples: Vec<PeriodSample> = split.views.iter().map(|v| v.sample).collect();
    let (limited, intervals) = split_where_limited(&samples, 0.85);
    let over = format!("{limited:.2} over the {intervals} of {} intervals a's limit held it", samples.len() - 1);
    if split.cpu_bound.iter().any(|&c| c >= CPU_BOUND_SAMPLES) {
        eprintln!("ratio {ratio:.2}, {over}, not judged: a tenant was held by the CPU ({bound})");
    } else if solo < total * 2.0 / 3.0 {
        eprintln!("ratio {ratio:.2} not judged: a alone did {solo:.0} IOPS, less than 2/3 of the {total:.0} both did");
    } else if intervals * 3 < samples.len() {
        eprintln!("ratio {ratio:.2} not judged: {over}");
    } else {
        eprintln!("ratio {ratio:.2}, {over}");
        assert!(
            (limited / 2.0 - 1.0).abs() <= 0.15,
            "ratio {limited:.2} where a's limit held it (whole window {ratio:.2})"
        );
    }
    // The held-back case: a capped by its own annotation, b at its weight's third takes what a
    // leaves (work-conserving: a's weight-share that it cannot use goes to b). The agent's decisions
    // are judged exactly: a's read limit is its cap and b has none in every period after the first
    // of the window. The real IO is judged against b's own weight-share: b did at least 1.5 times
    // the mean read limit it had in the 2:1 split (held to its share it would do at most 1.3 times:
    // blk-throttle's slack; taking what a leaves, it did 2.2–4.0 times in seven runs here). It is not
    // judged against b beside a statically capped a measured before the agent started: the host's
    // disk drifts by more than the 15% such a judgement could allow between windows 20 s apart
    // (b beside the static cap 51–88 kIOPS over seven runs; b through the agent 70–120% of it).
    let cap = cap as f64;
    let (ha, hb) = (held.iops[0], held.iops[1]);
    let left = beside_capped[1];
    let bound =
        format!("CPU-bound in {:.0}% / {:.0}% of the samples", held.cpu_bound[0] * 100.0, held.cpu_bound[1] * 100.0);
    eprintln!(
        "a capped at {cap:.0} IOPS: without the agent a {:.0}, b {left:.0}; through the agent a {ha:.0}, b {hb:.0} \
         IOPS (b:a {:.2}), b {:.0}% of what it did beside the static cap and {:.2} × its mean limit in the 2:1 \
         split ({bound})",
        beside_capped[0],
        hb / ha.max(1.0),
        100.0 * hb / left,
        hb / b_limit
    );
    for v in held.views.iter().skip(1) {
        assert!(v.riops[0] != 0 && v.riops[0] as f64 <= cap, "a's read limit {} with its cap {cap:.0}", v.riops[0]);
        assert_eq!(v.riops[1], 0, "b limited while a is held by its own cap");
    }
    assert!(ha <= 1.3 * cap, "a did {ha:.0} IOPS capped at {cap:.0}");
    if held.cpu_bound.iter().any(|&c| c >= CPU_BOUND_SAMPLES) {
        eprintln!("b's take not judged: a tenant was held by the CPU ({bound})");
    } else {
        assert!(
            hb >= 1.5 * b_limit,
            "b took {hb:.0} IOPS beside a capped at {cap:.0}, its limit in the split {b_limit:.0}"
        );
    }
    eprintln!("whole test before the node's teardown: {:.1} s", started.elapsed().as_secs_f64());
}
