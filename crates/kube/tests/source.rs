//! The pod source against a real API server (`scripts/k8s`: etcd + kube-apiserver on loopback; no
//! kubelet, so pods bound with `spec.nodeName` stay Pending, which is all the source needs). Each test
//! uses namespaces and a node name of its own, so the tests share one server; the restart test has
//! its own. Skipped, with the reason, when the binaries are not built (`scripts/setup.sh`).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{manifest, source, unique, wait_for, K8s, AGENT_RIGHTS, PATIENCE};
use ioshare_kube::source::{Connection, PodStates, Update};
use ioshare_kube::{ClassCgroup, QosClass, Reason};

const CGROUPFS: &str = "cgroup_driver = \"cgroupfs\"\n";

fn weight(states: &PodStates, ns: &str, pod: &str) -> Option<u32> {
    states.by_name(ns, pod).map(|p| p.settings.weight)
}

#[test]
fn pods_of_this_node_are_handed_over_and_follow_their_changes() {
    let Some(k8s) = K8s::shared() else { return };
    let (ns, node) = (unique("watch"), unique("node"));
    k8s.namespace(&ns, &[], &["io.ioshare.dev/weight=50"]);
    let a = k8s.pod(&ns, "a", &node, &[("io.ioshare.dev/weight", "300")]);
    k8s.pod(&ns, "elsewhere", "another-node", &[]);
    k8s.pod(&ns, "plain", &node, &[]);
    // The driver is found in the tree: a laid-out cgroupfs root.
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir(tree.path().join("kubepods")).unwrap();
    let src = source(&k8s.kubeconfig, &node, "[kubernetes.qos.besteffort]\nclass_weight = 25\n", tree.path());
    let mut s = PodStates::default();

    assert!(wait_for(&src, &mut s, PATIENCE, |s| s.synced && s.pods.len() == 2), "listed: {:?}", s.pods.keys());
    let besteffort = ClassCgroup { qos: QosClass::BestEffort, cgroup: "kubepods/besteffort".into(), weight: 25 };
    assert_eq!(s.classes, [besteffort], "the class cgroups, named for the driver found");
    let pod = s.pods.get(&a).expect("pod a by its uid");
    assert_eq!((pod.namespace.as_str(), pod.name.as_str(), pod.settings.weight), (ns.as_str(), "a", 300));
    assert_eq!(pod.cgroup.as_deref(), Some(Path::new(&format!("kubepods/besteffort/pod{a}"))));
    assert_eq!(pod.containers.len(), 1);
    assert_eq!(weight(&s, &ns, "plain"), Some(50), "the namespace's annotation is the default");
    assert!(s.by_name(&ns, "elsewhere").is_none(), "a pod of another node is not ours");

    // Changes of the pod, of the namespace, a new pod, a finished pod, a deleted pod.
    k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "a", "io.ioshare.dev/weight=700"]);
    assert!(wait_for(&src, &mut s, PATIENCE, |s| weight(s, &ns, "a") == Some(700)), "annotation change");
    k8s.kubectl(&["annotate", "--overwrite", "namespace", &ns, "io.ioshare.dev/weight=60"]);
    assert!(wait_for(&src, &mut s, PATIENCE, |s| weight(s, &ns, "plain") == Some(60)), "namespace change");
    assert_eq!(weight(&s, &ns, "a"), Some(700), "the pod's own annotation still wins");
    k8s.pod(&ns, "late", &node, &[("io.ioshare.dev/weight", "10")]);
    assert!(wait_for(&src, &mut s, PATIENCE, |s| weight(s, &ns, "late") == Some(10)), "new pod");
    let status = r#"{"status":{"phase":"Succeeded"}}"#;
    k8s.kubectl(&["-n", &ns, "patch", "pod", "late", "--subresource=status", "--type=merge", "-p", status]);
    assert!(wait_for(&src, &mut s, PATIENCE, |s| s.by_name(&ns, "late").is_none()), "a finished pod is gone");
    k8s.kubectl(&["-n", &ns, "delete", "pod", "a", "--grace-period=0", "--force"]);
    assert!(wait_for(&src, &mut s, PATIENCE, |s| !s.pods.contains_key(&a)), "deleted pod forgotten");
    assert_eq!(s.pods.len(), 1, "only 'plain' is left: {:?}", s.pods.values().map(|p| &p.name).collect::<Vec<_>>());
    assert_eq!(s.fatal, None);
    src.stop();
}

#[test]
fn out_of_policy_and_invalid_annotations_become_events_on_the_pod() {
    let Some(k8s) = K8s::shared() else { return };
    let (ns, node) = (unique("policy"), unique("node"));
    k8s.namespace(&ns, &["tier=tenant"], &[]);
    let uid = k8s.pod(
        &ns,
        "greedy",
        &node,
        &[("io.ioshare.dev/weight", "5000"), ("io.ioshare.dev/memory.priority", "twelve")],
    );
    let policy =
        "[[kubernetes.policies]]\nname = \"tenants\"\nnamespace_selector = \"tier=tenant\"\nweight = [10, 500]\n";
    let src = source(&k8s.kubeconfig, &node, &format!("{CGROUPFS}{policy}"), Path::new("/nonexistent"));
    let mut s = PodStates::default();
    assert!(wait_for(&src, &mut s, PATIENCE, |s| s.pods.contains_key(&uid)));
    let pod = &s.pods[&uid];
    assert_eq!(pod.settings.weight, 500, "clamped");
    assert_eq!(pod.settings.memory, None, "invalid: the default (none)");
    let reasons: Vec<Reason> = pod.findings.iter().map(|f| f.reason).collect();
    assert_eq!(reasons, [Reason::InvalidAnnotation, Reason::OutOfPolicy]);

    // Read the Events back through the API (events.k8s.io, regarding the pod).
    let deadline = Instant::now() + PATIENCE;
    let events = loop {
        let out = k8s.kubectl(&["-n", &ns, "get", "events.events.k8s.io", "-o", "json"]);
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        let ours: Vec<(String, String)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["regarding"]["uid"] == uid.as_str() && e["reportingController"] == "ioshare-agent")
            .map(|e| (e["reason"].as_str().unwrap().to_string(), e["note"].as_str().unwrap().to_string()))
            .collect();
        if ours.len() >= 2 || Instant::now() > deadline {
            break ours;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(events.len(), 2, "{events:?}");
    let out_of_policy = events.iter().find(|(r, _)| r == "OutOfPolicy").expect("an OutOfPolicy event");
    assert!(
        out_of_policy.1.contains("annotation io.ioshare.dev/weight")
            && out_of_policy.1.contains("policy 'tenants'")
            && out_of_policy.1.contains("500 applied"),
        "{}",
        out_of_policy.1
    );
    let invalid = events.iter().find(|(r, _)| r == "InvalidAnnotation").expect("an InvalidAnnotation event");
    assert!(invalid.1.contains("io.ioshare.dev/memory.priority") && invalid.1.contains("'twelve'"), "{}", invalid.1);

    // An unrelated change re-sends the pod but records nothing twice.
    k8s.kubectl(&["-n", &ns, "label", "pod", "greedy", "touched=yes"]);
    k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "greedy", "io.ioshare.dev/weight=400"]);
    assert!(wait_for(&src, &mut s, PATIENCE, |s| s.pods[&uid].settings.weight == 400));
    assert_eq!(s.pods[&uid].findings.len(), 1, "only the invalid priority is left");
    std::thread::sleep(Duration::from_secs(1));
    let out = k8s.kubectl(&["-n", &ns, "get", "events.events.k8s.io", "-o", "jsonpath={.items[*].reason}"]);
    assert_eq!(out.split_whitespace().count(), 2, "no new event: {out}");
    src.stop();
}

#[test]
fn a_cluster_role_is_enough_and_without_one_the_source_fails_in_one_line() {
    let Some(k8s) = K8s::shared() else { return };
    let (ns, node) = (unique("rbac"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let uid = k8s.pod(&ns, "p", &node, &[("io.ioshare.dev/weight", "0")]);
    // The shipped ServiceAccount, ClusterRole and binding (packaging/kubernetes), and a ServiceAccount
    // with no rights at all.
    k8s.kubectl(&["apply", "-f", &manifest("namespace.yaml"), "-f", &manifest("rbac.yaml")]);
    k8s.kubectl(&["-n", &ns, "create", "serviceaccount", "nobody"]);
    let dir = tempfile::tempdir().unwrap();

    let token = k8s.kubectl(&["-n", "ioshare-system", "create", "token", "ioshare-agent"]);
    let agent = k8s.token_kubeconfig(token.trim(), dir.path());
    k8s.wait_for_rights(&agent, &AGENT_RIGHTS);
    assert!(k8s.try_kubectl_as(&agent, &["get", "secrets", "-A"], None).is_err(), "the role grants no secrets");
    let src = source(&agent, &node, CGROUPFS, Path::new("/nonexistent"));
    let mut s = PodStates::default();
    assert!(wait_for(&src, &mut s, PATIENCE, |s| s.synced && s.pods.contains_key(&uid)), "fatal: {:?}", s.fatal);
    assert_eq!(s.pods[&uid].findings[0].reason, Reason::InvalidAnnotation);
    // The finding's Event is recorded with the role's rights: no warning comes back.
    std::thread::sleep(Duration::from_secs(2));
    while let Ok(u) = src.updates().try_recv() {
        assert!(!matches!(u, Update::Warning(_) | Update::Fatal(_)), "{u:?}");
    }
    src.stop();

    let token = k8s.kubectl(&["-n", &ns, "create", "token", "nobody"]);
    let nobody = k8s.token_kubeconfig(token.trim(), dir.path());
    let src = source(&nobody, &node, CGROUPFS, Path::new("/nonexistent"));
    let mut s = PodStates::default();
    assert!(wait_for(&src, &mut s, PATIENCE, |s| s.fatal.is_some()), "no fatal error without rights");
    let line = s.fatal.unwrap();
    eprintln!("{line}");
    assert!(!line.contains('\n'), "{line}");
    assert!(line.starts_with("kubernetes: the agent is not allowed to list and watch "), "{line}");
    assert!(line.contains(&format!("system:serviceaccount:{ns}:nobody")) && line.contains("rbac.yaml"), "{line}");
    assert!(s.pods.is_empty());
    assert!(src.updates().recv_timeout(Duration::from_secs(1)).is_err(), "the thread has ended");

    // No credentials at all: start itself fails in one line.
    let missing = dir.path().join("missing.kubeconfig");
    let e = ioshare_kube::PodSource::start(ioshare_kube::SourceOptions {
        config: ioshare_kube::KubernetesConfig {
            kubeconfig: Some(missing),
            node_name: Some(node),
            ..Default::default()
        },
        hierarchy: "/nonexistent".into(),
    })
    .err()
    .expect("no kubeconfig, no source")
    .to_string();
    assert!(e.starts_with("kubernetes: no credentials for the API server: ") && !e.contains('\n'), "{e}");
}

#[test]
fn no_update_is_lost_when_the_api_server_restarts() {
    // Its own server: the others must not see it go away.
    let Some(k8s) = K8s::start() else { return };
    let (ns, node) = (unique("restart"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let keep = k8s.pod(&ns, "keep", &node, &[("io.ioshare.dev/weight", "100")]);
    let doomed = k8s.pod(&ns, "doomed", &node, &[]);
    let src = source(&k8s.kubeconfig, &node, CGROUPFS, Path::new("/nonexistent"));
    let mut s = PodStates::default();
    assert!(wait_for(&src, &mut s, PATIENCE, |s| s.synced && s.pods.len() == 2));

    k8s.stop_apiserver();
    assert!(
        wait_for(&src, &mut s, PATIENCE, |s| matches!(s.connection, Some(Connection::Unreachable(_)))),
        "the outage is reported"
    );
    assert_eq!(s.pods.len(), 2, "the last state stays while the server is away");
    k8s.start_apiserver();
    let back = Instant::now();
    // Changes made as soon as the server is back, while the source is still backing off.
    k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "keep", "io.ioshare.dev/weight=900"]);
    k8s.kubectl(&["-n", &ns, "delete", "pod", "doomed", "--grace-period=0", "--force"]);
    let new = k8s.pod(&ns, "new", &node, &[("io.ioshare.dev/weight", "42")]);
    assert!(
        wait_for(&src, &mut s, PATIENCE, |s| {
            s.pods.get(&keep).map(|p| p.settings.weight) == Some(900)
                && !s.pods.contains_key(&doomed)
                && s.pods.get(&new).map(|p| p.settings.weight) == Some(42)
        }),
        "every change after the restart arrives: {:?}",
        s.pods.values().map(|p| (&p.name, p.settings.weight)).collect::<Vec<_>>()
    );
    let took = back.elapsed();
    eprintln!("all changes applied {:.1} s after the server was ready", took.as_secs_f64());
    assert_eq!(s.connection, Some(Connection::Reachable));
    assert!(took < Duration::from_secs(15), "{took:?}");
    src.stop();
}
