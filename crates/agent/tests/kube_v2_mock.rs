//! Pods on cgroup v2 through the agent's kernel backend (root only): a real API server
//! (`scripts/k8s`: etcd + kube-apiserver on loopback, no kubelet — pods bound with `spec.nodeName`
//! stay Pending, which is all the pod source needs) and kubelet's systemd-driver tree (what v2 hosts
//! run) laid out by the test in the MOCK of cgroup v2's files (`common/v2_mock.rs`): this host has
//! no cgroup v2 `io` controller, so the files are plain files (a write replaces the whole file where
//! the kernel would merge one device's line) and the kernel's iocost, which would do the rest, is
//! absent; what is checked is what the agent writes where, and when. The lab's cgroup-v2 guest
//! (`scripts/lab`) is where it runs for real. Skipped, with the reason, when not root or when the
//! binaries are not built (`scripts/setup.sh`).

mod common;
#[path = "../../kube/tests/common/mod.rs"]
mod k8s;

use std::time::Duration;

use common::v2_mock::V2Tree;
use common::{pod_controlled as controlled, run_agent_during, wait_for};
use ioshare_agent::{BackendKind, Status};
use ioshare_testkit::skip_unless_root;
use k8s::{unique, K8s};

/// The container cgroup kubelet's systemd driver makes for a containerd container.
const SCOPE: &str = "cri-containerd-4f1c0d2e9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d.scope";

/// The acceptance bound of the issue: a change in force within 1 s (discovery every 200 ms).
const WITHIN: Duration = Duration::from_secs(1);

/// Two pods, one Burstable (weight 300) and one Guaranteed (700), on kubelet's systemd tree: each
/// pod's slice gets its annotated weight in `io.weight` (`MAJ:MIN N`), the burstable class slice the
/// configuration's `class_weight` (40), and nothing else is written (`kubepods.slice`, the
/// besteffort class without a `class_weight`, the containers' scopes); `agent status` names both
/// pods. An annotation change is in force within 1 s; a deleted pod's slice (kubelet not done yet)
/// gets the line that restores its weight from before the agent within 1 s; and after the agent
/// stops every file is as before.
#[test]
fn pods_on_the_systemd_tree_get_their_io_weights_from_the_kernel_backend() {
    let test = "pods_on_the_systemd_tree_get_their_io_weights_from_the_kernel_backend";
    if skip_unless_root(test) {
        return;
    }
    let Some(k8s) = K8s::shared() else { return };
    let (ns, node) = (unique("v2"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let requests = serde_json::json!({"requests": {"cpu": "100m"}});
    let limits = serde_json::json!({"limits": {"cpu": "100m", "memory": "64Mi"}});
    let burst = k8s.pod_with(&ns, "burst", &node, &[("io.ioshare.dev/weight", "300")], requests);
    let guar = k8s.pod_with(&ns, "guar", &node, &[("io.ioshare.dev/weight", "700")], limits);

    let tree = V2Tree::new();
    let dev = tree.dev.clone();
    // The iocost files as the kernel shows them before anyone configured the device.
    let (model, qos) = (
        format!("{dev} ctrl=auto model=linear rbps=0 rseqiops=0 rrandiops=0 wbps=0 wseqiops=0 wrandiops=0"),
        format!("{dev} enable=0 ctrl=auto rpct=0.00 rlat=0 wpct=0.00 wlat=0 min=0.00 max=0.00"),
    );
    std::fs::write(tree.path("io.cost.model"), &model).unwrap();
    std::fs::write(tree.path("io.cost.qos"), &qos).unwrap();
    // kubelet's systemd tree, written out (not taken from the code under test): the uid's `-` as `_`.
    let slice = |uid: &str| uid.replace('-', "_");
    let (kubepods, burstable) = ("kubepods.slice", "kubepods.slice/kubepods-burstable.slice");
    let besteffort = "kubepods.slice/kubepods-besteffort.slice";
    let burst_rel = format!("{burstable}/kubepods-burstable-pod{}.slice", slice(&burst));
    let guar_rel = format!("{kubepods}/kubepods-pod{}.slice", slice(&guar));
    for rel in [kubepods, burstable, besteffort, &burst_rel, &guar_rel] {
        tree.cgroup(rel);
    }
    for rel in [&burst_rel, &guar_rel] {
        tree.cgroup(&format!("{rel}/{SCOPE}"));
    }
    let before = tree.snapshot();

    let config = format!(
        "period_ms = 100\n[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\n\
         [kubernetes]\nnode_name = \"{node}\"\nkubeconfig = \"{}\"\ncgroup_driver = \"auto\"\n\
         [kubernetes.qos.burstable]\nclass_weight = 40\n",
        k8s.kubeconfig.display()
    );
    let (agent, recovered) = tree.start(&config, BackendKind::Kernel).unwrap();
    assert!(recovered.is_none());
    let state = tree.state.path();
    let weight = |rel: &str| tree.read(&format!("{rel}/io.weight"));
    let set = |w: u32| format!("{dev} {w}");
    run_agent_during(agent, || {
        let applied = || {
            weight(&burst_rel) == set(300)
                && weight(&guar_rel) == set(700)
                && weight(burstable) == set(40)
                && controlled(state, &burst_rel) == Some((300, format!("{ns}/burst")))
                && controlled(state, &guar_rel) == Some((700, format!("{ns}/guar")))
        };
        let took = wait_for(WITHIN, applied);
        let status = Status::read(state).unwrap();
        assert!(took.is_some(), "both pods and the class at their weights within {WITHIN:?}: {status}");
        eprintln!("pods applied {took:?} after the start returned");
        let shown = status.to_string();
        assert!(shown.contains(&format!("{ns}/burst")) && shown.contains(&format!("{ns}/guar")), "{shown}");
        for rel in [kubepods, besteffort, &format!("{burst_rel}/{SCOPE}"), &format!("{guar_rel}/{SCOPE}")] {
            let path = tree.path(&format!("{rel}/io.weight"));
            assert_eq!(std::fs::read_to_string(&path).unwrap(), before[&path], "{rel} is not the agent's to write");
        }

        k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "burst", "io.ioshare.dev/weight=500"]);
        let took = wait_for(WITHIN, || weight(&burst_rel) == set(500));
        assert!(took.is_some(), "annotation change in force within {WITHIN:?}: {}", weight(&burst_rel));
        eprintln!("annotation change written {took:?} after kubectl returned");

        // Deleted while kubelet has not removed its slice yet: the weight from before the agent
        // (the kernel's `MAJ:MIN default` drops the per-device line, leaving `default 100`).
        k8s.kubectl(&["-n", &ns, "delete", "pod", "guar", "--grace-period=0", "--force"]);
        let took = wait_for(WITHIN, || weight(&guar_rel) == format!("{dev} default"));
        assert!(took.is_some(), "deleted pod's weight restored within {WITHIN:?}: {}", weight(&guar_rel));
        eprintln!("deleted pod's weight restored {took:?} after kubectl returned");
        assert!(wait_for(WITHIN, || controlled(state, &guar_rel).is_none()).is_some(), "forgotten in the status");
    });

    // Stopped: every file as before, reading each restoring line as the kernel applies it (see
    // `as_the_kernel_shows`).
    let after: std::collections::BTreeMap<_, _> = tree
        .snapshot()
        .into_iter()
        .map(|(path, text)| (path.clone(), as_the_kernel_shows(&dev, &before[&path], text)))
        .collect();
    assert_eq!(after, before);
}

/// A file's text after the agent's restoring write, as the kernel would show it: the mock keeps the
/// line written (`MAJ:MIN default` in `io.weight`), where the kernel drops that device's override
/// and shows the file as before. Only where the file held no override of the device before.
fn as_the_kernel_shows(dev: &str, before: &str, text: String) -> String {
    let had_override = before.lines().any(|l| l.starts_with(&format!("{dev} ")));
    if text == format!("{dev} default") && !had_override {
        before.to_string()
    } else {
        text
    }
}
