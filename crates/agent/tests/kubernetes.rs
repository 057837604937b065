//! The agent taking its groups from pods (root only): a real API server (`scripts/k8s`: etcd +
//! kube-apiserver on loopback, no kubelet — pods bound with `spec.nodeName` stay Pending, which is
//! all the pod source needs), the agent's userspace backend on this cgroup-v1 host, a loop device,
//! and kubelet's cgroupfs layout laid out by the test under a test-unique `cgroup_root` inside the
//! blkio hierarchy (`<root>/kubepods/besteffort/pod<uid>/<container>`; the machine's own kubepods
//! is never touched). Tenants are fio readers in the pods' container cgroups. Skipped, with the
//! reason, when not root or when the binaries are not built (`scripts/setup.sh`).

mod common;
#[path = "../../kube/tests/common/mod.rs"]
mod k8s;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    fio_in, median, pod_controlled as controlled, run_agent_during, snapshot_at, split_where_limited, wait_for,
    PeriodSample, Rig,
};
use ioshare_agent::backend::userspace::donor::DONATING_SLACK;
use ioshare_agent::report::share::ShareCheck;
use ioshare_agent::{Agent, BackendChoice, Check, Config, Status};
use ioshare_host::{BlkioCgroup, LoopDevice};
use ioshare_testkit::skip_unless_root;
use k8s::{manifest, unique, K8s, AGENT_RIGHTS};

/// The tests share the disk and the machine's two cores: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Queue depth of each reader and its jobs (as in the userspace backend's test: saturating).
const DEPTH: u32 = 32;
const SATURATING: &[&str] = &["--numjobs=2"];

/// kubelet's layout under a test-unique `cgroup_root` of the blkio hierarchy: pod and container
/// cgroups made and removed by the test as kubelet would, named as its cgroupfs driver does, or as
/// its systemd driver does (the agent then finds the driver from the tree).
struct Node {
    /// The `cgroup_root`, relative to the blkio root.
    root: String,
    /// Named as kubelet's systemd driver names them.
    systemd: bool,
    /// Container cgroups by pod uid (dropped, so removed with their empty parents, in reverse).
    cgroups: Vec<(String, BlkioCgroup)>,
}

/// A pod's QoS class, which decides its parent cgroup.
#[derive(Clone, Copy)]
enum Qos {
    Guaranteed,
    BestEffort,
}

impl Node {
    fn new(test: &str) -> Node {
        Node { root: format!("ioshare-agent-test-{}-{test}", std::process::id()), systemd: false, cgroups: Vec::new() }
    }

    /// A node whose kubelet runs the systemd driver.
    fn systemd(test: &str) -> Node {
        let mut node = Node::new(test);
        node.systemd = true;
        node
    }

    /// What the agent's configuration says of the driver: cgroupfs, or for systemd nothing (found
    /// from the tree).
    fn driver(&self) -> &'static str {
        if self.systemd {
            "auto"
        } else {
            "cgroupfs"
        }
    }

    /// The pod's cgroup (BestEffort), relative to the blkio root.
    fn pod(&self, uid: &str) -> String {
        self.pod_of(Qos::BestEffort, uid)
    }

    /// The cgroup of a pod of class `qos`, relative to the blkio root (written out, not taken from
    /// the code under test): Guaranteed pods directly under kubepods; systemd's slices carry the
    /// class in their names and the uid with `_` for `-`.
    fn pod_of(&self, qos: Qos, uid: &str) -> String {
        let root = &self.root;
        let slice_uid = uid.replace('-', "_");
        match (self.systemd, qos) {
            (false, Qos::Guaranteed) => format!("{root}/kubepods/pod{uid}"),
            (false, Qos::BestEffort) => format!("{root}/kubepods/besteffort/pod{uid}"),
            (true, Qos::Guaranteed) => format!("{root}/kubepods.slice/kubepods-pod{slice_uid}.slice"),
            (true, Qos::BestEffort) => {
                format!("{root}/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{slice_uid}.slice")
            }
        }
    }

    /// The container cgroup kubelet makes in a pod: the bare id under cgroupfs, a containerd scope
    /// under systemd.
    fn container_name(&self) -> String {
        let id = "4f1c0d2e9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d";
        if self.systemd {
            format!("cri-containerd-{id}.scope")
        } else {
            "app".to_string()
        }
    }

    /// Makes the pod's cgroup with one container cgroup in it, as kubelet does.
    fn start(&mut self, uid: &str) -> &BlkioCgroup {
        self.start_of(Qos::BestEffort, uid)
    }

    /// [`Node::start`] for a pod of class `qos`.
    fn start_of(&mut self, qos: Qos, uid: &str) -> &BlkioCgroup {
        let c = BlkioCgroup::create(&format!("{}/{}", self.pod_of(qos, uid), self.container_name())).unwrap();
        self.cgroups.push((uid.to_string(), c));
        &self.cgroups.last().unwrap().1
    }

    /// Removes the pod's cgroups, as kubelet does once the pod is gone.
    fn stop(&mut self, uid: &str) {
        if let Some(i) = self.cgroups.iter().position(|(u, _)| u == uid) {
            self.cgroups.remove(i).1.remove().unwrap();
        }
    }

    fn container(&self, uid: &str) -> &BlkioCgroup {
        &self.cgroups.iter().find(|(u, _)| u == uid).expect("started").1
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        while let Some((_, c)) = self.cgroups.pop() {
            drop(c);
        }
    }
}

/// The agent config: `device` with `model` (and `qos`), the `[kubernetes]` section for `node`
/// through `kubeconfig`, the laid-out tree, and `extra` TOML after it.
fn config(dir: &Path, device: &Path, model: &str, qos: Option<&str>, k: (&Path, &str, &Node), extra: &str) -> Config {
    let (kubeconfig, node, tree) = k;
    let mut text = format!("period_ms = 100\n[[devices]]\npath = \"{}\"\nmodel = \"{model}\"\n", device.display());
    if let Some(q) = qos {
        text += &format!("qos = \"{q}\"\n");
    }
    text += &format!(
        "[kubernetes]\nnode_name = \"{node}\"\nkubeconfig = \"{}\"\ncgroup_driver = \"{}\"\ncgroup_root = \"{}\"\n{extra}",
        kubeconfig.display(),
        tree.driver(),
        tree.root
    );
    let path = dir.join("agent.toml");
    std::fs::write(&path, &text).unwrap();
    Config::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Runs `body` with an agent on `config` in another thread; stops it (reverting) after, also when
/// `body` panics.
fn with_agent<T>(config: Config, state: &Path, body: impl FnOnce() -> T) -> T {
    let (agent, _) = Agent::start(config, BackendChoice::Userspace, state).unwrap();
    run_agent_during(agent, body)
}

/// The figures of both pods as the agent saw them in one period, and their read IOs then.
struct View {
    hweight_active: [f64; 2],
    hweight_inuse: [f64; 2],
    riops: [u64; 2],
    sample: PeriodSample,
}

/// Read IOs of each of `cgroups` per second over `window`, and the agent's view each period meanwhile.
fn rates_and_views(
    cgroups: [&BlkioCgroup; 2],
    rels: [&str; 2],
    dev: ioshare_host::DevNum,
    state: &Path,
    window: Duration,
) -> ([f64; 2], Vec<View>) {
    let ios = |c: &BlkioCgroup| c.stats().unwrap().device(dev).map_or(0, |d| d.ios.read);
    let before = [ios(cgroups[0]), ios(cgroups[1])];
    let start = Instant::now();
    let (mut views, mut last) = (Vec::new(), None);
    // Polled every 10 ms so that each view's IO counts are read soon after its period (100 ms) began.
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(10));
        let Ok(st) = Status::read(state) else { continue };
        if last == Some(st.periods) {
            continue;
        }
        last = Some(st.periods);
        let g = |rel: &str| st.devices[0].groups.iter().find(|g| g.cgroup == rel).cloned();
        if let (Some(a), Some(b)) = (g(rels[0]), g(rels[1])) {
            views.push(View {
                hweight_active: [a.hweight_active, b.hweight_active],
                hweight_inuse: [a.hweight_inuse, b.hweight_inuse],
                riops: [a.limits[0], b.limits[0]],
                sample: PeriodSample {
                    at: Instant::now(),
                    ios: [ios(cgroups[0]), ios(cgroups[1])],
                    first_limit: a.limits[0],
                },
            });
        }
    }
    let secs = start.elapsed().as_secs_f64();
    ([0, 1].map(|i| (ios(cgroups[i]) - before[i]) as f64 / secs), views)
}

fn skip(test: &str) -> Option<std::sync::Arc<K8s>> {
    if skip_unless_root(test) {
        return None;
    }
    K8s::shared()
}

#[test]
fn pods_share_the_device_by_their_annotations_and_follow_their_changes() {
    let Some(k8s) = skip("pods_share_the_device_by_their_annotations_and_follow_their_changes") else { return };
    let _serial = one_at_a_time();
    let (ns, node_name) = (unique("share"), unique("node"));
    k8s.namespace(&ns, &["tier=tenant"], &[]);
    let a = k8s.pod(&ns, "a", &node_name, &[("io.ioshare.dev/weight", "200")]);
    let b = k8s.pod(&ns, "b", &node_name, &[("io.ioshare.dev/weight", "100")]);
    let rig = Rig::new("kube", &["probe"]);
    let mut node = Node::new("kube-share");
    node.start(&a);
    node.start(&b);
    let (pa, pb) = (node.pod(&a), node.pod(&b));
    let before = snapshot_at(&rig.root, &node.root);
    let state = tempfile::tempdir().unwrap();

    // Uncontrolled: both readers saturating; the model is the device's measured random-read rate.
    let (iops, free_lat) = {
        let _ra = fio_in(node.container(&a), rig.dev.path(), DEPTH, SATURATING);
        let _rb = fio_in(node.container(&b), rig.dev.path(), DEPTH, SATURATING);
        std::thread::sleep(Duration::from_millis(500));
        let (free, _) = rates_and_views(
            [node.container(&a), node.container(&b)],
            ["", ""],
            rig.devnum(),
            state.path(),
            Duration::from_secs(2),
        );
        let name = rig.dev.path().file_name().unwrap().to_string_lossy().into_owned();
        let disk = || ioshare_host::DiskStats::read(Path::new("/sys/block"), &name).unwrap();
        let d0 = disk();
        std::thread::sleep(Duration::from_secs(1));
        let d = disk().since(&d0);
        ((free[0] + free[1]).round() as u64, d.ticks_ms[0] as f64 * 1000.0 / d.ios[0].max(1) as f64)
    };
    let model = format!("ssd_dfl rrandiops={iops} rseqiops={iops}");
    let qos = format!("rpct=50 rlat={} min=20 max=500", (free_lat * 0.7).round().max(50.0));
    let policy =
        "[[kubernetes.policies]]\nname = \"tenants\"\nnamespace_selector = \"tier=tenant\"\nweight = [10, 500]\n";
    let cfg = config(state.path(), rig.dev.path(), &model, Some(&qos), (&k8s.kubeconfig, &node_name, &node), policy);

    with_agent(cfg, state.path(), || {
        let _ra = fio_in(node.container(&a), rig.dev.path(), DEPTH, SATURATING);
        let _rb = fio_in(node.container(&b), rig.dev.path(), DEPTH, SATURATING);
        assert!(
            wait_for(Duration::from_secs(5), || controlled(state.path(), &pa).is_some()
                && controlled(state.path(), &pb).is_some())
            .is_some(),
            "both pods under control"
        );
        assert_eq!(controlled(state.path(), &pa), Some((200, format!("{ns}/a"))), "the status names the pod");
        std::thread::sleep(Duration::from_millis(2000));
        // The userspace backend plans a pod's own cgroups below it (blk-throttle is not hierarchical
        // on v1): the readers' container cgroups carry the limits, the pods their weights.
        let (split, views) = rates_and_views(
            [node.container(&a), node.container(&b)],
            [&format!("{pa}/app"), &format!("{pb}/app")],
            rig.devnum(),
            state.path(),
            Duration::from_secs(3),
        );
        let status = Status::read(state.path()).unwrap();
        eprintln!("{status}");
        // Judged as the userspace backend's test judges its 2:1 rules (see there for the reasons):
        // the hweights in the periods both competed, the limits that follow them, and the real split
        // when the high-weight pod's limit (not the busy machine) held it.
        let both: Vec<&View> = views
            .iter()
            .filter(|v| (0..2).all(|i| v.hweight_inuse[i] + DONATING_SLACK >= v.hweight_active[i]))
            .collect();
        let hw = median(both.iter().map(|v| v.hweight_inuse[0] / v.hweight_inuse[1]).collect());
        let lim = median(both.iter().map(|v| v.riops[0] as f64 / v.riops[1].max(1) as f64).collect());
        let ratio = split[0] / split[1];
        let samples: Vec<PeriodSample> = views.iter().map(|v| v.sample).collect();
        let (limited, intervals) = split_where_limited(&samples, 0.85);
        eprintln!(
            "uncontrolled {iops} IOPS at {free_lat:.0} µs; pods 2:1 through the agent: {:.0}+{:.0} IOPS, ratio {ratio:.2}, \
             {limited:.2} over the {intervals} of {} intervals a's limit held it; {} of {} periods both competing, \
             median hweight ratio {hw:.3}, read-limit ratio {lim:.2}; load {}",
            split[0],
            split[1],
            views.len().saturating_sub(1),
            both.len(),
            views.len(),
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
        );
        // Both saturate: neither donates in at least 70% of the periods (each keeps its IO in
        // flight through the host disk's dips, where its rate falls: 26–31 of 31 in eight runs here;
        // judged by its rate, the high-weight pod donated in 11 of 31 periods of one run, and the
        // split fell to 1.47).
        assert!(both.len() * 10 >= views.len() * 7, "both pods competed in {} of {} periods", both.len(), views.len());
        assert!((hw / 2.0 - 1.0).abs() <= 0.02, "hweights follow the annotations 2:1: {hw:.3}");
        assert!(lim >= 1.5, "read limits follow the hweights 2:1: {lim:.2}");
        // The real split where a's limit held it (± 15%: b may pass its own limit by up to 30% in an
        // interval, blk-throttle's slices restarting whenever a limit is written; judged over at least
        // a third of the window's intervals).
        if intervals * 3 >= views.len() {
            assert!(
                (limited / 2.0 - 1.0).abs() <= 0.15,
                "ratio {limited:.2} over the {intervals} intervals a was at its limit (whole window {ratio:.2})"
            );
        } else {
            eprintln!(
                "ratio not judged: a was at its limit in {intervals} of {} intervals",
                views.len().saturating_sub(1)
            );
        }

        // An annotation changed: applied within 1 s of kubectl returning.
        k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "b", "io.ioshare.dev/weight=400"]);
        let took = wait_for(Duration::from_secs(5), || controlled(state.path(), &pb).is_some_and(|(w, _)| w == 400));
        eprintln!("annotation change applied after {took:?}");
        assert!(took.is_some_and(|t| t < Duration::from_secs(1)), "took {took:?}");

        // Out of policy: clamped to the range, a finding in the status, an Event on the pod.
        k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "a", "io.ioshare.dev/weight=5000"]);
        let took = wait_for(Duration::from_secs(5), || controlled(state.path(), &pa).is_some_and(|(w, _)| w == 500));
        assert!(took.is_some_and(|t| t < Duration::from_secs(1)), "clamped within 1 s: {took:?}");
        let status = Status::read(state.path()).unwrap();
        let findings = &status.kubernetes.as_ref().unwrap().findings;
        assert!(
            findings.iter().any(|f| f.pod == format!("{ns}/a")
                && f.reason == "OutOfPolicy"
                && f.message.contains("io.ioshare.dev/weight")
                && f.message.contains("500 applied")),
            "{findings:?}"
        );
        assert!(status.to_string().contains("OutOfPolicy"), "agent status shows it:\n{status}");
        let event = wait_for(Duration::from_secs(10), || {
            k8s.kubectl(&["-n", &ns, "get", "events.events.k8s.io", "-o", "jsonpath={.items[*].reason}"])
                .contains("OutOfPolicy")
        });
        assert!(event.is_some(), "an OutOfPolicy Event on the pod");

        // Pod b deleted while its cgroup stays (kubelet removes it later): forgotten, its files
        // restored within 1 s; then its cgroup goes without error.
        k8s.kubectl(&["-n", &ns, "delete", "pod", "b", "--grace-period=0", "--force"]);
        let restored = || {
            let now = snapshot_at(&rig.root, &pb);
            now.iter().all(|(path, v)| before.get(path).is_none_or(|b| b == v) && v.trim().is_empty())
        };
        let took = wait_for(Duration::from_secs(5), || controlled(state.path(), &pb).is_none() && restored());
        eprintln!("deleted pod forgotten and restored after {took:?}");
        assert!(took.is_some_and(|t| t < Duration::from_secs(1)), "took {took:?}");
        drop(_rb);
        node.stop(&b);
        std::thread::sleep(Duration::from_millis(300));
        assert!(controlled(state.path(), &pa).is_some(), "a is still controlled");
    });
    assert_eq!(
        snapshot_at(&rig.root, &node.root),
        before.into_iter().filter(|(p, _)| !p.starts_with(rig.root.join(&pb))).collect(),
        "stopping the agent restored every throttle file"
    );
}

/// A small loop device for the tests that need a device but no real IO.
fn small_device(dir: &Path) -> LoopDevice {
    let file = dir.join("disk.img");
    std::fs::write(&file, vec![0u8; 16 << 20]).unwrap();
    LoopDevice::attach(&file, true).unwrap()
}

#[test]
fn pods_come_and_go_each_under_control_within_a_second_of_its_cgroup() {
    pods_come_and_go("pods_come_and_go_each_under_control_within_a_second_of_its_cgroup", 30);
}

/// The benchmark size of the test above: 100 pods created and deleted.
#[test]
#[ignore = "benchmark: 100 pods, about a minute; run with --ignored --nocapture"]
fn a_hundred_pods_come_and_go() {
    pods_come_and_go("a_hundred_pods_come_and_go", 100);
}

/// `pods` pods created (five alive at a time) and deleted: each under control within 1 s of its
/// cgroup and API object both existing (p50, p99 printed), nothing left behind.
fn pods_come_and_go(test: &str, pods: usize) {
    let Some(k8s) = skip(test) else { return };
    let _serial = one_at_a_time();
    let (ns, node_name) = (unique("churn"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let dev = small_device(dir.path());
    let mut node = Node::new("kube-churn");
    let state = tempfile::tempdir().unwrap();
    let cfg = config(state.path(), dev.path(), "ssd_dfl", None, (&k8s.kubeconfig, &node_name, &node), "");
    let delays = with_agent(cfg, state.path(), || {
        // [cgroup last, object last]
        let mut delays: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        // A pod's cgroup is named after its UID, which the API server gives, so kubelet makes it
        // after the object exists; a static pod's after its config hash, which the test chooses, so
        // its cgroup can come first. Half the pods each way.
        let mut keys: Vec<String> = Vec::new();
        let delete = |i: usize, key: &str, node: &mut Node| {
            k8s.kubectl(&["-n", &ns, "delete", "pod", &format!("p{i}"), "--grace-period=0", "--force"]);
            node.stop(key);
        };
        for i in 0..pods {
            let (name, weight) = (format!("p{i}"), 10 + i as u32);
            let w = weight.to_string();
            // From when both exist: exactly when the cgroup comes last; when the object comes last,
            // from before kubectl sends it (an upper bound: kubectl's own run is counted).
            let (key, both) = if i % 2 == 0 {
                let uid = k8s.pod(&ns, &name, &node_name, &[("io.ioshare.dev/weight", &w)]);
                node.start(&uid);
                (uid, Instant::now())
            } else {
                let hash = format!("{i:032x}");
                node.start(&hash);
                let sent = Instant::now();
                k8s.pod(&ns, &name, &node_name, &[("io.ioshare.dev/weight", &w), ("kubernetes.io/config.hash", &hash)]);
                (hash, sent)
            };
            let rel = node.pod(&key);
            let took =
                wait_for(Duration::from_secs(5), || controlled(state.path(), &rel).is_some_and(|(x, _)| x == weight));
            assert!(took.is_some(), "pod {name} never under control");
            delays[i % 2].push(both.elapsed());
            keys.push(key);
            if i >= 5 {
                // The older pods go: the API object first, then kubelet's cgroups.
                delete(i - 5, &keys[i - 5], &mut node);
            }
        }
        for (i, key) in keys.iter().enumerate().skip(pods - 5) {
            delete(i, key, &mut node);
        }
        let empty = wait_for(Duration::from_secs(5), || {
            Status::read(state.path()).is_ok_and(|s| {
                s.devices[0].groups.is_empty()
                    && s.kubernetes.as_ref().is_some_and(|k| k.pods.is_empty() && k.cgroups.is_empty())
            })
        });
        assert!(empty.is_some(), "nothing left: {}", Status::read(state.path()).unwrap());
        delays
    });
    let pct = |d: &[Duration], q: f64| {
        let mut d = d.to_vec();
        d.sort();
        d[((d.len() as f64 * q).ceil() as usize).clamp(1, d.len()) - 1]
    };
    let [cgroup_last, object_last] = &delays;
    eprintln!(
        "{pods} pods, each under control after its cgroup and API object both existed: cgroup last p50 {:?} p99 {:?}; \
         object last (from before kubectl, an upper bound) p50 {:?} p99 {:?}; load {}",
        pct(cgroup_last, 0.5),
        pct(cgroup_last, 0.99),
        pct(object_last, 0.5),
        pct(object_last, 0.99),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    // Acceptance: within 1 s (discovery every 200 ms, the status every 100 ms). Where the object
    // came last the bound includes kubectl's own run, which a loaded machine stretches: printed.
    assert!(pct(cgroup_last, 0.99) < Duration::from_secs(1), "p99 {:?}", pct(cgroup_last, 0.99));
}

/// kubelet's systemd driver: its tree laid out (`kubepods.slice/kubepods-besteffort.slice/
/// kubepods-besteffort-pod<uid_>.slice/cri-containerd-<id>.scope`, a Guaranteed pod's slice directly
/// in `kubepods.slice`), the driver left for the agent to find from the tree; both pods mapped to
/// their slices and under control at their annotated weights, their scopes planned by the userspace
/// backend as the pods' leaves, and nothing left once they go.
#[test]
fn the_systemd_layout_is_found_from_the_tree_and_mapped() {
    let Some(k8s) = skip("the_systemd_layout_is_found_from_the_tree_and_mapped") else { return };
    let _serial = one_at_a_time();
    let (ns, node_name) = (unique("systemd"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let dev = small_device(dir.path());
    let mut node = Node::systemd("kube-systemd");
    let state = tempfile::tempdir().unwrap();
    let cfg = config(state.path(), dev.path(), "ssd_dfl", None, (&k8s.kubeconfig, &node_name, &node), "");
    let limits = serde_json::json!({"limits": {"cpu": "100m", "memory": "64Mi"}});
    let best = k8s.pod(&ns, "best", &node_name, &[("io.ioshare.dev/weight", "300")]);
    let guaranteed = k8s.pod_with(&ns, "guaranteed", &node_name, &[("io.ioshare.dev/weight", "700")], limits);
    node.start_of(Qos::BestEffort, &best);
    node.start_of(Qos::Guaranteed, &guaranteed);
    let pods = [
        (node.pod_of(Qos::BestEffort, &best), 300, "best"),
        (node.pod_of(Qos::Guaranteed, &guaranteed), 700, "guaranteed"),
    ];
    with_agent(cfg, state.path(), || {
        for (rel, weight, name) in &pods {
            // Deadline, not expectation: the first discovery runs at start; a loaded machine may delay
            // the status by seconds.
            let took =
                wait_for(Duration::from_secs(10), || controlled(state.path(), rel).is_some_and(|(w, _)| w == *weight));
            let st = Status::read(state.path()).unwrap();
            assert!(took.is_some(), "pod {name} not under control at {rel}: {st}");
            let scope = format!("{rel}/{}", node.container_name());
            let k = st.kubernetes.as_ref().unwrap();
            assert_eq!(k.cgroups.get(&scope).map(|p| p.pod.as_str()), Some(*name), "its scope named: {k:?}");
            assert!(st.devices[0].groups.iter().any(|g| g.cgroup == scope), "its scope planned as a leaf: {st}");
        }
        // The status' share view (refreshed every second) lists both pods at their weights.
        let in_view = || {
            Status::read(state.path()).ok().and_then(|s| s.shares).is_some_and(|sh| {
                pods.iter().all(|(rel, weight, name)| {
                    sh.devices[0].groups.iter().any(|g| {
                        g.cgroup == *rel && g.weight == *weight && g.pod.as_deref() == Some(&format!("{ns}/{name}"))
                    })
                })
            })
        };
        assert!(wait_for(Duration::from_secs(10), in_view).is_some(), "{}", Status::read(state.path()).unwrap());
        for (name, uid) in [("best", &best), ("guaranteed", &guaranteed)] {
            k8s.kubectl(&["-n", &ns, "delete", "pod", name, "--grace-period=0", "--force"]);
            node.stop(uid);
        }
        let empty = wait_for(Duration::from_secs(10), || {
            Status::read(state.path()).is_ok_and(|s| {
                s.devices[0].groups.is_empty() && s.kubernetes.as_ref().is_some_and(|k| k.pods.is_empty())
            })
        });
        assert!(empty.is_some(), "nothing left: {}", Status::read(state.path()).unwrap());
    });
}

/// `ioshare agent check --config` with a `[kubernetes]` section: the node's pods listed once, their
/// cgroups in the share view at their annotated weights, named by pod; nothing written.
#[test]
fn agent_check_shows_the_pods_shares() {
    let Some(k8s) = skip("agent_check_shows_the_pods_shares") else { return };
    let _serial = one_at_a_time();
    let (ns, node_name) = (unique("check"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let dev = small_device(dir.path());
    let mut node = Node::new("kube-check");
    let uid = k8s.pod(&ns, "web", &node_name, &[("io.ioshare.dev/weight", "250")]);
    node.start(&uid);
    let cfg = config(dir.path(), dev.path(), "ssd_dfl", None, (&k8s.kubeconfig, &node_name, &node), "");
    let before = snapshot_at(&node_root(), &node.root);
    let report = ShareCheck::probe(Check::probe(), &cfg, BackendChoice::Userspace).unwrap();
    let g = report.shares.devices[0].groups.iter().find(|g| g.cgroup == node.pod(&uid));
    let g = g.unwrap_or_else(|| panic!("the pod's cgroup is not in the view: {report}"));
    assert_eq!((g.weight, g.rule, g.pod.as_deref()), (250, 0, Some(format!("{ns}/web").as_str())), "{report}");
    assert!(report.to_string().contains(&format!("pod {ns}/web")), "{report}");
    assert_eq!(snapshot_at(&node_root(), &node.root), before, "a check writes nothing");
}

/// The blkio hierarchy's root, where the laid-out trees are.
fn node_root() -> std::path::PathBuf {
    ioshare_host::Capabilities::probe().blkio_v1.expect("blkio mounted")
}

#[test]
fn the_last_state_holds_while_the_api_server_is_away_and_changes_follow_its_return() {
    if skip_unless_root("the_last_state_holds_while_the_api_server_is_away_and_changes_follow_its_return") {
        return;
    }
    let _serial = one_at_a_time();
    // Its own server: the other tests must not see it go away.
    let Some(k8s) = K8s::start() else { return };
    let (ns, node_name) = (unique("restart"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let uid = k8s.pod(&ns, "keep", &node_name, &[("io.ioshare.dev/weight", "300")]);
    let late = k8s.pod(&ns, "late", &node_name, &[("io.ioshare.dev/weight", "40")]);
    let dir = tempfile::tempdir().unwrap();
    let dev = small_device(dir.path());
    let mut node = Node::new("kube-restart");
    node.start(&uid);
    let rel = node.pod(&uid);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(state.path(), dev.path(), "ssd_dfl", None, (&k8s.kubeconfig, &node_name, &node), "");
    with_agent(cfg, state.path(), || {
        assert!(wait_for(Duration::from_secs(5), || controlled(state.path(), &rel).is_some()).is_some());
        k8s.stop_apiserver();
        let away = wait_for(Duration::from_secs(30), || {
            Status::read(state.path())
                .is_ok_and(|s| s.kubernetes.is_some_and(|k| k.api_server.starts_with("unreachable")))
        });
        assert!(away.is_some(), "the outage shows in the status");
        // A cgroup that appears meanwhile for a known pod is still taken: the last state is in force.
        node.start(&late);
        let taken = wait_for(Duration::from_secs(1), || controlled(state.path(), &node.pod(&late)).is_some());
        assert!(taken.is_some(), "a known pod's cgroup is taken while the API server is away");
        assert_eq!(controlled(state.path(), &rel).map(|c| c.0), Some(300), "the last state stays in force");
        k8s.start_apiserver();
        let back = Instant::now();
        k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "keep", "io.ioshare.dev/weight=900"]);
        let took = wait_for(Duration::from_secs(30), || controlled(state.path(), &rel).is_some_and(|(w, _)| w == 900));
        let took = took.map(|_| back.elapsed());
        eprintln!("change applied {took:?} after the API server was back");
        assert!(took.is_some_and(|t| t < Duration::from_secs(5)), "{took:?}");
    });
}

#[test]
fn the_agent_works_with_its_cluster_role_and_without_one_fails_in_one_line() {
    let Some(k8s) = skip("the_agent_works_with_its_cluster_role_and_without_one_fails_in_one_line") else { return };
    let _serial = one_at_a_time();
    let (ns, node_name) = (unique("rbac"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let uid = k8s.pod(&ns, "p", &node_name, &[("io.ioshare.dev/weight", "250")]);
    k8s.kubectl(&["apply", "-f", &manifest("namespace.yaml"), "-f", &manifest("rbac.yaml")]);
    k8s.kubectl(&["-n", &ns, "create", "serviceaccount", "nobody"]);
    let dir = tempfile::tempdir().unwrap();
    let dev = small_device(dir.path());
    let mut node = Node::new("kube-rbac");
    node.start(&uid);
    let rel = node.pod(&uid);
    let state = tempfile::tempdir().unwrap();

    let token = k8s.kubectl(&["-n", "ioshare-system", "create", "token", "ioshare-agent"]);
    let agent = k8s.token_kubeconfig(token.trim(), dir.path());
    k8s.wait_for_rights(&agent, &AGENT_RIGHTS);
    let cfg = config(state.path(), dev.path(), "ssd_dfl", None, (&agent, &node_name, &node), "");
    with_agent(cfg, state.path(), || {
        let took = wait_for(Duration::from_secs(5), || controlled(state.path(), &rel).is_some_and(|(w, _)| w == 250));
        assert!(took.is_some(), "the pod is controlled with the ClusterRole's rights");
    });

    let token = k8s.kubectl(&["-n", &ns, "create", "token", "nobody"]);
    let nobody = k8s.token_kubeconfig(token.trim(), dir.path());
    let cfg = config(state.path(), dev.path(), "ssd_dfl", None, (&nobody, &node_name, &node), "");
    let e = Agent::start(cfg, BackendChoice::Userspace, state.path()).expect_err("no rights, no agent").to_string();
    eprintln!("{e}");
    assert!(!e.contains('\n'), "{e}");
    assert!(e.starts_with("kubernetes: the agent is not allowed to list and watch "), "{e}");
    assert!(e.contains("rbac.yaml"), "{e}");
    assert!(Status::read(state.path()).is_err(), "nothing written");
}

#[test]
fn the_config_maps_agent_config_is_one_the_agent_accepts() {
    // packaging/kubernetes/configmap.yaml's agent.toml (its block, unindented), with this machine's
    // first block device for the nodes' disk and a built-in model for "profile" (which would
    // measure it).
    let yaml = std::fs::read_to_string(manifest("configmap.yaml")).unwrap();
    let (_, block) = yaml.split_once("agent.toml: |\n").expect("data.agent.toml");
    let text: String = block.lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
    let dev = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
    let dev = std::fs::read_to_string(dev.path().join("dev")).unwrap();
    let text = text.replace("/dev/nvme0n1", dev.trim()).replace("model = \"profile\"", "model = \"ssd_dfl\"");
    let config = Config::parse(&text, Path::new("agent.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let k = config.kubernetes.expect("a [kubernetes] section");
    assert!(config.groups.is_empty(), "the pods are the groups");
    assert_eq!((k.qos.len(), k.blockio_classes.len(), k.policies.len()), (3, 2, 1));
}

/// This process's CPU time (user + system), seconds, and resident memory, bytes.
fn own_usage() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split_whitespace().collect();
    let cpu = (fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap()) / 100.0; // USER_HZ
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches(" kB").parse().unwrap();
    (cpu, kb * 1024)
}

/// The acceptance benchmark: 1 000 pods on the node (API objects, their cgroups laid out), the
/// agent controlling all of them; its CPU while nothing changes and the memory it added.
/// `cargo test --release -p ioshare-agent --test kubernetes -- --ignored --nocapture` (root).
#[test]
#[ignore = "benchmark: about a minute and a half; run with --ignored --nocapture"]
fn a_thousand_pods_through_the_agent() {
    const PODS: usize = 1000;
    if skip_unless_root("a_thousand_pods_through_the_agent") {
        return;
    }
    let _serial = one_at_a_time();
    let Some(k8s) = K8s::start() else { return };
    let (ns, node_name) = (unique("thousand"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    k8s.weighted_pods(&ns, &node_name, PODS);
    let uids = k8s.kubectl(&["-n", &ns, "get", "pods", "-o", "jsonpath={.items[*].metadata.uid}"]);
    let mut node = Node::new("kube-thousand");
    for uid in uids.split_whitespace() {
        node.start(uid);
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = small_device(dir.path());
    let state = tempfile::tempdir().unwrap();
    let cfg = config(state.path(), dev.path(), "ssd_dfl", None, (&k8s.kubeconfig, &node_name, &node), "");
    let (_, rss0) = own_usage();
    let start = Instant::now();
    let (took, cpu, rss) = with_agent(cfg, state.path(), || {
        let all = wait_for(Duration::from_secs(120), || {
            Status::read(state.path()).is_ok_and(|s| {
                s.kubernetes.is_some_and(|k| k.pods.len() == PODS && k.pods.iter().all(|p| p.controlled))
            })
        });
        assert!(all.is_some(), "all {PODS} pods under control");
        let took = start.elapsed();
        std::thread::sleep(Duration::from_secs(2));
        let (cpu0, _) = own_usage();
        std::thread::sleep(Duration::from_secs(10));
        let (cpu1, rss) = own_usage();
        (took, (cpu1 - cpu0) / 10.0, rss)
    });
    let added = rss.saturating_sub(rss0);
    eprintln!(
        "{PODS} pods through the agent: all under control {:.1} s after start; steady state {:.2}% of a core, \
         {:.1} MiB added to the process; load {}",
        took.as_secs_f64(),
        cpu * 100.0,
        added as f64 / (1 << 20) as f64,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    assert!(added < 64 << 20, "memory added {added}");
    assert!(cpu < 0.02, "steady-state CPU {:.3} of a core", cpu);
}
