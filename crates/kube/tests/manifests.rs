//! packaging/kubernetes against a real API server (`scripts/k8s`): every manifest passes server-side
//! validation and admission (`kubectl apply --dry-run=server`), and the ConfigMap's agent config has
//! a `[kubernetes]` section this crate accepts. Skipped, with the reason, when the binaries are not
//! built (`scripts/setup.sh`).

mod common;

use common::{manifest, K8s};
use ioshare_kube::KubernetesConfig;

const MANIFESTS: [&str; 5] = ["namespace.yaml", "rbac.yaml", "configmap.yaml", "daemonset.yaml", "networkpolicy.yaml"];

#[test]
fn every_manifest_passes_server_side_validation() {
    let Some(k8s) = K8s::shared() else { return };
    // Namespaced objects are only checked by a dry run when their namespace exists.
    k8s.kubectl(&["apply", "-f", &manifest("namespace.yaml")]);
    for name in MANIFESTS {
        let out = k8s.kubectl(&["apply", "--dry-run=server", "-f", &manifest(name)]);
        assert!(out.contains("(server dry run)"), "{name}: {out}");
    }
    let out = k8s.kubectl(&["apply", "--dry-run=server", "-k", &manifest("")]);
    assert_eq!(
        out.lines().count(),
        7,
        "namespace, service account, role, binding, config map, daemon set, network policy: {out}"
    );

    // The server does check: the same DaemonSet with a misspelt field or a wrong value is refused.
    let daemonset = std::fs::read_to_string(manifest("daemonset.yaml")).unwrap();
    for (from, to, expect) in [
        ("privileged: true", "privilegd: true", "privilegd"),
        ("mountPropagation: HostToContainer", "mountPropagation: Sideways", "Sideways"),
        ("fieldPath: spec.nodeName", "fieldPath: spec.node", "spec.node"),
    ] {
        let broken = daemonset.replace(from, to);
        assert_ne!(broken, daemonset, "{from}");
        let e = k8s.try_kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&broken)).unwrap_err();
        assert!(e.contains(expect), "{to}: {e}");
    }
}

#[test]
fn the_config_maps_agent_config_has_a_valid_kubernetes_section() {
    let Some(k8s) = K8s::shared() else { return };
    let json = k8s.kubectl(&["create", "--dry-run=client", "-o", "json", "-f", &manifest("configmap.yaml")]);
    let map: serde_json::Value = serde_json::from_str(&json).unwrap();
    let text = map["data"]["agent.toml"].as_str().expect("data.agent.toml");
    let file: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("agent.toml: {e}"));
    let section = file["kubernetes"].clone();
    let config: KubernetesConfig = section.try_into().unwrap_or_else(|e| panic!("[kubernetes]: {e}"));
    assert_eq!(config.policies.len(), 1);
    assert_eq!(config.blockio_classes.len(), 2);
    assert_eq!(config.qos.len(), 3);
}
