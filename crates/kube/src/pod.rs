//! The facts about a pod and a namespace that decide a pod's settings and cgroups, taken out of the
//! API objects once, so that everything after is plain data.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Pod, PodSpec};

use crate::cgroup::QosClass;

/// Annotation kubelet puts on a static pod's mirror: the config hash that names its cgroups.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Annotation with a static pod's config hash.
pub const HASH_ANNOTATION: &str = "kubernetes.io/config.hash";

/// One container of a pod (init containers and sidecars included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerFacts {
    /// Its name in the pod spec.
    pub name: String,
    /// The runtime's id (`containerd://…`) once it has been created.
    pub id: Option<String>,
}

/// What the agent needs to know about a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The API object's UID.
    pub uid: String,
    /// The UID its cgroups are named after: a static pod's config hash, else [`Self::uid`].
    pub cgroup_uid: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Its QoS class (`status.qosClass`, or worked out from the spec when the status has none yet).
    pub qos: QosClass,
    /// Whether it has finished (`Succeeded` or `Failed`): its cgroups are gone or going.
    pub finished: bool,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its containers, in spec order (init containers first).
    pub containers: Vec<ContainerFacts>,
}

impl PodFacts {
    /// Reads a pod object; an error when it lacks a namespace, name or UID.
    pub fn from_pod(pod: &Pod) -> Result<PodFacts, String> {
        let meta = &pod.metadata;
        let field = |v: &Option<String>, what: &str| {
            v.clone().filter(|s| !s.is_empty()).ok_or_else(|| format!("a pod without {what}"))
        };
        let namespace = field(&meta.namespace, "a namespace")?;
        let name = field(&meta.name, "a name")?;
        let uid = field(&meta.uid, "a uid")?;
        let annotations = meta.annotations.clone().unwrap_or_default();
        let cgroup_uid = [MIRROR_ANNOTATION, HASH_ANNOTATION]
            .iter()
            .find_map(|a| annotations.get(*a).filter(|h| !h.is_empty()).cloned())
            .unwrap_or_else(|| uid.clone());
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref());
        let qos = status
            .and_then(|s| s.qos_class.as_deref())
            .and_then(QosClass::parse)
            .unwrap_or_else(|| pod.spec.as_ref().map_or(QosClass::BestEffort, qos_of_spec));
        let mut ids = BTreeMap::new();
        if let Some(s) = status {
            for c in s.init_container_statuses.iter().chain(&s.container_statuses).flatten() {
                if let Some(id) = c.container_id.as_ref().filter(|id| !id.is_empty()) {
                    ids.insert(c.name.clone(), id.clone());
                }
            }
        }
        let containers = pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
            .map(|c| ContainerFacts { name: c.name.clone(), id: ids.get(&c.name).cloned() })
            .collect();
        Ok(PodFacts {
            namespace,
            name,
            uid,
            cgroup_uid,
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            qos,
            finished: matches!(phase, Some("Succeeded" | "Failed")),
            annotations,
            containers,
        })
    }

    /// `namespace/name`.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Kubernetes' QoS rule over the spec (for a pod whose status has no class yet): Guaranteed when
/// every container has CPU and memory limits and its requests (defaulting to the limits) equal
/// them, BestEffort when no container requests or limits anything, else Burstable.
fn qos_of_spec(spec: &PodSpec) -> QosClass {
    let containers: Vec<_> = spec.init_containers.iter().flatten().chain(&spec.containers).collect();
    let resources = |c: &&k8s_openapi::api::core::v1::Container| c.resources.clone().unwrap_or_default();
    let any = containers
        .iter()
        .map(resources)
        .any(|r| r.requests.is_some_and(|m| !m.is_empty()) || r.limits.is_some_and(|m| !m.is_empty()));
    if !any {
        return QosClass::BestEffort;
    }
    let guaranteed = containers.iter().map(resources).all(|r| {
        let limits = r.limits.unwrap_or_default();
        let requests = r.requests.unwrap_or_default();
        ["cpu", "memory"].iter().all(|res| limits.contains_key(*res))
            && requests.iter().all(|(k, v)| limits.get(k) == Some(v))
    });
    if guaranteed {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// What the agent needs to know about a namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceFacts {
    /// Its labels (for policy selectors).
    pub labels: BTreeMap<String, String>,
    /// Its annotations (defaults for its pods).
    pub annotations: BTreeMap<String, String>,
}

impl NamespaceFacts {
    /// Reads a namespace object; `None` without a name.
    pub fn from_namespace(ns: &Namespace) -> Option<(String, NamespaceFacts)> {
        let name = ns.metadata.name.clone().filter(|n| !n.is_empty())?;
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        let annotations = ns.metadata.annotations.clone().unwrap_or_default();
        Some((name, NamespaceFacts { labels, annotations }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_running_pod_is_read_with_its_container_ids() {
        let p = pod(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web", "uid": "u-1", "annotations": {"a": "b"}},
            "spec": {"nodeName": "node-1", "initContainers": [{"name": "init"}],
                     "containers": [{"name": "app"}, {"name": "sidecar"}]},
            "status": {"phase": "Running", "qosClass": "Burstable",
                       "initContainerStatuses": [{"name": "init", "containerID": "containerd://i1", "image": "", "imageID": "", "ready": false, "restartCount": 0}],
                       "containerStatuses": [{"name": "app", "containerID": "containerd://a1", "image": "", "imageID": "", "ready": true, "restartCount": 0},
                                             {"name": "sidecar", "containerID": "", "image": "", "imageID": "", "ready": false, "restartCount": 0}]}
        }));
        let f = PodFacts::from_pod(&p).unwrap();
        assert_eq!((f.full_name().as_str(), f.uid.as_str(), f.cgroup_uid.as_str()), ("shop/web", "u-1", "u-1"));
        assert_eq!((f.node.as_deref(), f.qos, f.finished), (Some("node-1"), QosClass::Burstable, false));
        assert_eq!(f.annotations["a"], "b");
        let c: Vec<(&str, Option<&str>)> = f.containers.iter().map(|c| (c.name.as_str(), c.id.as_deref())).collect();
        assert_eq!(c, [("init", Some("containerd://i1")), ("app", Some("containerd://a1")), ("sidecar", None)]);
    }

    #[test]
    fn static_pods_are_named_by_their_config_hash() {
        for key in [MIRROR_ANNOTATION, HASH_ANNOTATION] {
            let p = pod(serde_json::json!({
                "metadata": {"namespace": "kube-system", "name": "etcd-node-1", "uid": "mirror-uid",
                             "annotations": {key: "6a1f0c7e9d8b"}},
                "spec": {"containers": [{"name": "etcd"}]}
            }));
            assert_eq!(PodFacts::from_pod(&p).unwrap().cgroup_uid, "6a1f0c7e9d8b", "{key}");
        }
    }

    #[test]
    fn finished_pods_and_broken_objects_are_told_apart() {
        for (phase, finished) in
            [("Pending", false), ("Running", false), ("Succeeded", true), ("Failed", true), ("Unknown", false)]
        {
            let p = pod(
                serde_json::json!({"metadata": {"namespace": "a", "name": "b", "uid": "c"}, "status": {"phase": phase}}),
            );
            assert_eq!(PodFacts::from_pod(&p).unwrap().finished, finished, "{phase}");
        }
        for (meta, expect) in [
            (serde_json::json!({"name": "b", "uid": "c"}), "a pod without a namespace"),
            (serde_json::json!({"namespace": "a", "uid": "c"}), "a pod without a name"),
            (serde_json::json!({"namespace": "a", "name": "b", "uid": ""}), "a pod without a uid"),
        ] {
            assert_eq!(PodFacts::from_pod(&pod(serde_json::json!({"metadata": meta}))).unwrap_err(), expect);
        }
    }

    #[test]
    fn the_qos_class_is_worked_out_when_the_status_lacks_it() {
        let with = |resources: serde_json::Value| {
            let p = pod(serde_json::json!({"metadata": {"namespace": "a", "name": "b", "uid": "c"},
                "spec": {"containers": [{"name": "x", "resources": resources}]}}));
            PodFacts::from_pod(&p).unwrap().qos
        };
        assert_eq!(with(serde_json::json!({})), QosClass::BestEffort);
        assert_eq!(with(serde_json::json!({"requests": {"cpu": "1"}})), QosClass::Burstable);
        assert_eq!(with(serde_json::json!({"limits": {"cpu": "1", "memory": "1Gi"}})), QosClass::Guaranteed);
        assert_eq!(
            with(
                serde_json::json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
            ),
            QosClass::Guaranteed
        );
        assert_eq!(
            with(serde_json::json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}})),
            QosClass::Burstable
        );
        assert_eq!(with(serde_json::json!({"limits": {"cpu": "1"}})), QosClass::Burstable);
        // The status wins when it has a class.
        let p = pod(serde_json::json!({"metadata": {"namespace": "a", "name": "b", "uid": "c"},
            "spec": {"containers": [{"name": "x"}]}, "status": {"qosClass": "Guaranteed"}}));
        assert_eq!(PodFacts::from_pod(&p).unwrap().qos, QosClass::Guaranteed);
    }

    #[test]
    fn namespaces_are_read_with_labels_and_annotations() {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "team-a", "labels": {"tier": "tenant"}, "annotations": {"io.ioshare.dev/weight": "50"}}
        }))
        .unwrap();
        let (name, f) = NamespaceFacts::from_namespace(&ns).unwrap();
        assert_eq!(
            (name.as_str(), f.labels["tier"].as_str(), f.annotations["io.ioshare.dev/weight"].as_str()),
            ("team-a", "tenant", "50")
        );
        assert!(NamespaceFacts::from_namespace(&Namespace::default()).is_none());
    }
}
