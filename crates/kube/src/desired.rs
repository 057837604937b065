//! A pod's desired state: its settings resolved from every place that may ask, held to its
//! namespace's policy, with the cgroups they go to. A pure function of the config, the cgroup layout,
//! the pod and its namespace.
//!
//! For the pod's own cgroup, lowest first: the agent config's default for the pod's QoS class, the
//! namespace's annotations, the block-IO class the pod chose, the pod's annotations; then the policy.
//! For a container's cgroup (only when something asks for that container): its block-IO class, then
//! its `….container.NAME` annotations; then the policy. A container nobody asks for is left as the
//! kernel and kubelet made it (equal weights among its siblings).

use std::collections::BTreeSet;
use std::path::PathBuf;

use ioshare_core::Limits;
use serde::Serialize;

use crate::annotations::{self, Object};
use crate::cgroup::{ContainerId, Layout, QosClass};
use crate::config::{baseline_limits, KubernetesConfig};
use crate::finding::{Finding, Reason};
use crate::pod::{NamespaceFacts, PodFacts};
use crate::policy;
use crate::settings::{Origin, Request, Settings};

/// One container's part of a pod's desired state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DesiredContainer {
    /// Its name in the pod spec.
    pub name: String,
    /// Its cgroup, relative to a hierarchy's root; `None` until the runtime has created it.
    pub cgroup: Option<PathBuf>,
    /// What to apply to it; `None` when nothing asks for this container.
    pub settings: Option<Settings>,
}

/// What the agent should do for one pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DesiredPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The API object's UID (the key of this state).
    pub uid: String,
    /// QoS class.
    pub qos: QosClass,
    /// The pod's cgroup relative to a hierarchy's root; `None` when its UID cannot name one.
    pub cgroup: Option<PathBuf>,
    /// What to apply to the pod's cgroup.
    pub settings: Settings,
    /// Its containers, in spec order.
    pub containers: Vec<DesiredContainer>,
    /// What was not taken as asked (each becomes an Event on the pod).
    pub findings: Vec<Finding>,
}

/// A QoS class's own cgroup and the weight the agent config gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassCgroup {
    /// The class.
    pub qos: QosClass,
    /// Its cgroup, relative to a hierarchy's root.
    pub cgroup: PathBuf,
    /// Its weight among its siblings (the other class cgroup and the Guaranteed pods).
    pub weight: u32,
}

/// The class cgroups the agent config gives a weight.
pub fn class_cgroups(config: &KubernetesConfig, layout: &Layout) -> Vec<ClassCgroup> {
    config
        .qos
        .iter()
        .filter_map(|(qos, rule)| Some(ClassCgroup { qos: *qos, cgroup: layout.qos(*qos), weight: rule.class_weight? }))
        .collect()
}

/// Resolves one pod; `namespace` is `None` when the namespace is not known (yet).
pub fn desired(
    config: &KubernetesConfig,
    layout: &Layout,
    pod: &PodFacts,
    namespace: Option<&NamespaceFacts>,
) -> DesiredPod {
    let empty = NamespaceFacts::default();
    let ns = namespace.unwrap_or(&empty);
    let mut findings = Vec::new();
    let from_namespace = annotations::read(&ns.annotations, Object::Namespace);
    let from_pod = annotations::read(&pod.annotations, Object::Pod);
    findings.extend(from_namespace.findings);
    findings.extend(from_pod.findings);
    let classes = annotations::blockio(&pod.annotations);
    let mut class_request = |choice: Option<&(String, String)>| match choice {
        None => Request::default(),
        Some((annotation, class)) => match config.blockio_classes.get(class) {
            Some(rule) => {
                rule.request.with_origin(&Origin::BlockioClass { class: class.clone(), annotation: annotation.clone() })
            }
            None => {
                let known: Vec<&str> = config.blockio_classes.keys().map(String::as_str).collect();
                let msg = format!(
                    "{annotation}: class '{class}' is not in the agent config's kubernetes.blockio_classes ({}): ignored",
                    if known.is_empty() { "none defined".to_string() } else { known.join(", ") }
                );
                findings.push(Finding::new(Reason::UnknownBlockioClass, msg));
                Request::default()
            }
        },
    };
    let pod_class = class_request(classes.pod.as_ref());
    let container_classes: Vec<Request> =
        pod.containers.iter().map(|c| class_request(classes.containers.get(&c.name))).collect();

    let policy = config.policy_for(&pod.namespace, &ns.labels);
    let mut request =
        config.qos_default(pod.qos).overlaid(&from_namespace.pod).overlaid(&pod_class).overlaid(&from_pod.pod);
    if let Some(p) = policy {
        findings.extend(policy::apply(p, &mut request, &baseline_limits(config, pod.qos), "pod", &pod.namespace));
    }

    let known: BTreeSet<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    let asked: BTreeSet<&str> =
        from_pod.containers.keys().chain(classes.containers.keys()).map(String::as_str).collect();
    for name in asked.difference(&known) {
        let msg = format!("per-container settings for '{name}', but the pod has no such container: ignored");
        findings.push(Finding::new(Reason::UnknownContainer, msg));
    }

    let cgroup = layout.pod(pod.qos, &pod.cgroup_uid).map_err(|e| bad_name(&mut findings, e)).ok();
    let mut containers = Vec::new();
    for (c, class) in pod.containers.iter().zip(container_classes) {
        let mut request = from_pod.containers.get(&c.name).map_or(class.clone(), |own| class.overlaid(own));
        if let Some(p) = policy.filter(|_| !request.is_empty()) {
            let whom = format!("container {}", c.name);
            findings.extend(policy::apply(p, &mut request, &Limits::none(), &whom, &pod.namespace));
        }
        let cgroup = c.id.as_ref().and_then(|id| {
            ContainerId::parse(id)
                .and_then(|id| layout.container(pod.qos, &pod.cgroup_uid, &id))
                .map_err(|e| bad_name(&mut findings, e))
                .ok()
        });
        let settings = (!request.is_empty()).then(|| request.settings());
        containers.push(DesiredContainer { name: c.name.clone(), cgroup, settings });
    }
    DesiredPod {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        qos: pod.qos,
        cgroup,
        settings: request.settings(),
        containers,
        findings,
    }
}

fn bad_name(findings: &mut Vec<Finding>, e: String) {
    findings.push(Finding::new(Reason::InvalidCgroupName, format!("{e}: not controlled")));
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::cgroup::Driver;
    use crate::pod::ContainerFacts;

    const CONFIG: &str = r#"
[kubernetes.qos.burstable]
weight = 200
limits = "iops-total=1000"
memory = { priority = 2 }
class_weight = 300
[kubernetes.qos.besteffort]
weight = 20
[kubernetes.blockio_classes.gold]
weight = 900
memory = { wmark_ratio = 70 }
[kubernetes.blockio_classes.slow]
limits = "bps-total=1000000"
[[kubernetes.policies]]
name = "tenants"
namespaces = ["team-*"]
weight = [10, 500]
raise_limits = false
memory_priority = [0, 6]
"#;

    fn config() -> KubernetesConfig {
        #[derive(serde::Deserialize)]
        struct File {
            kubernetes: KubernetesConfig,
        }
        toml::from_str::<File>(CONFIG).unwrap().kubernetes
    }

    fn layout() -> Layout {
        Layout { driver: Driver::Cgroupfs, root: PathBuf::new() }
    }

    fn pod(ns: &str, qos: QosClass, annotations: &[(&str, &str)]) -> PodFacts {
        PodFacts {
            namespace: ns.into(),
            name: "web".into(),
            uid: "u-1".into(),
            cgroup_uid: "u-1".into(),
            node: Some("n".into()),
            qos,
            finished: false,
            annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            containers: vec![
                ContainerFacts { name: "app".into(), id: Some("containerd://a1".into()) },
                ContainerFacts { name: "db".into(), id: None },
            ],
        }
    }

    fn namespace(annotations: &[(&str, &str)]) -> NamespaceFacts {
        NamespaceFacts {
            labels: BTreeMap::new(),
            annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn messages(d: &DesiredPod) -> Vec<String> {
        d.findings.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_plain_pod_gets_its_qos_default_and_its_cgroups() {
        let d = desired(&config(), &layout(), &pod("shop", QosClass::Burstable, &[]), None);
        assert_eq!((d.settings.weight, d.settings.limits.to_string().as_str()), (200, "iops-total=1000"));
        assert_eq!(d.settings.memory.unwrap().priority, 2);
        assert_eq!(d.cgroup.as_deref(), Some(Path::new("kubepods/burstable/podu-1")));
        assert_eq!(d.containers[0].cgroup.as_deref(), Some(Path::new("kubepods/burstable/podu-1/a1")));
        assert_eq!(d.containers[1].cgroup, None, "not created yet");
        assert!(d.containers.iter().all(|c| c.settings.is_none()));
        assert!(d.findings.is_empty());
        let plain = desired(&config(), &layout(), &pod("shop", QosClass::Guaranteed, &[]), None);
        assert_eq!(plain.settings, Settings::default(), "no default for Guaranteed: the built-in ones");
        assert_eq!(plain.cgroup.as_deref(), Some(Path::new("kubepods/podu-1")));
    }

    #[test]
    fn each_layer_overrides_the_one_below() {
        let c = config();
        let ns = namespace(&[("io.ioshare.dev/weight", "150"), ("io.ioshare.dev/memory.priority", "4")]);
        let d = desired(&c, &layout(), &pod("shop", QosClass::Burstable, &[]), Some(&ns));
        assert_eq!((d.settings.weight, d.settings.memory.unwrap().priority), (150, 4), "namespace over QoS default");
        let with_class = pod("shop", QosClass::Burstable, &[("blockio.resources.beta.kubernetes.io/pod", "gold")]);
        let d = desired(&c, &layout(), &with_class, Some(&ns));
        assert_eq!(d.settings.weight, 900, "block-IO class over namespace");
        assert_eq!((d.settings.memory.unwrap().priority, d.settings.memory.unwrap().wmark_ratio), (4, 70));
        let own = pod(
            "shop",
            QosClass::Burstable,
            &[("blockio.resources.beta.kubernetes.io/pod", "gold"), ("io.ioshare.dev/weight", "7")],
        );
        assert_eq!(desired(&c, &layout(), &own, Some(&ns)).settings.weight, 7, "the pod's own annotation over all");
    }

    #[test]
    fn containers_get_settings_only_when_asked_for() {
        let p = pod(
            "shop",
            QosClass::Burstable,
            &[
                ("io.ioshare.dev/weight.container.app", "800"),
                ("blockio.resources.beta.kubernetes.io/container.db", "slow"),
                ("io.ioshare.dev/weight.container.cache", "5"),
                ("blockio.resources.beta.kubernetes.io/container.ghost", "gold"),
            ],
        );
        let d = desired(&config(), &layout(), &p, None);
        let app = d.containers[0].settings.as_ref().unwrap();
        assert_eq!((app.weight, app.limits.is_limited()), (800, false), "the pod's limits are not copied down");
        let db = d.containers[1].settings.as_ref().unwrap();
        assert_eq!((db.weight, db.limits.to_string().as_str()), (100, "bps-total=1000000"));
        assert_eq!(d.settings.weight, 200, "the pod keeps its own");
        assert_eq!(
            messages(&d),
            [
                "UnknownContainer: per-container settings for 'cache', but the pod has no such container: ignored",
                "UnknownContainer: per-container settings for 'ghost', but the pod has no such container: ignored",
            ]
        );
    }

    #[test]
    fn invalid_values_fall_back_and_out_of_policy_ones_are_clamped() {
        let p = pod(
            "team-a",
            QosClass::Burstable,
            &[
                ("io.ioshare.dev/weight", "lots"),
                ("io.ioshare.dev/memory.priority", "11"),
                ("io.ioshare.dev/limits", "iops-total=50000"),
                ("io.ioshare.dev/weight.container.app", "9000"),
                ("blockio.resources.beta.kubernetes.io/pod", "platinum"),
            ],
        );
        let d = desired(&config(), &layout(), &p, None);
        assert_eq!(d.settings.weight, 200, "invalid: the QoS default");
        assert_eq!(d.settings.memory.unwrap().priority, 6, "clamped");
        assert_eq!(d.settings.limits.to_string(), "iops-total=1000", "raising is forbidden");
        assert_eq!(d.containers[0].settings.as_ref().unwrap().weight, 500, "containers are held to the policy too");
        assert_eq!(
            messages(&d),
            [
                "InvalidAnnotation: annotation io.ioshare.dev/weight: 'lots' is not a weight: use a whole number \
                 1..=10000: the default applies",
                "UnknownBlockioClass: blockio.resources.beta.kubernetes.io/pod: class 'platinum' is not in the agent \
                 config's kubernetes.blockio_classes (gold, slow): ignored",
                "OutOfPolicy: annotation io.ioshare.dev/memory.priority: memory priority 11 of the pod is outside \
                 policy 'tenants' (namespace team-a) memory priority range 0..=6: 6 applied",
                "OutOfPolicy: annotation io.ioshare.dev/limits: limits iops-total=50000 of the pod loosen iops-total \
                 of the QoS default (iops-total=1000), which policy 'tenants' (namespace team-a) does not allow \
                 (raise_limits = false): iops-total=1000 applied",
                "OutOfPolicy: annotation io.ioshare.dev/weight.container.app: weight 9000 of the container app is \
                 outside policy 'tenants' (namespace team-a) weight range 10..=500: 500 applied",
            ]
        );
        // The same pod in a namespace no policy covers keeps what it asked for (valid values only).
        let free = desired(
            &config(),
            &layout(),
            &pod(
                "shop",
                QosClass::Burstable,
                &p.annotations.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>(),
            ),
            None,
        );
        assert_eq!(
            (free.settings.memory.unwrap().priority, free.settings.limits.to_string().as_str()),
            (11, "iops-total=50000")
        );
    }

    #[test]
    fn names_that_cannot_be_cgroups_are_reported_not_used() {
        let mut p = pod("shop", QosClass::BestEffort, &[]);
        p.cgroup_uid = "../../etc".into();
        p.containers[1].id = Some("containerd://x".into());
        let d = desired(&config(), &layout(), &p, None);
        assert_eq!(d.cgroup, None);
        assert!(d.containers.iter().all(|c| c.cgroup.is_none()));
        assert_eq!(d.findings.len(), 3, "{:?}", messages(&d));
        assert!(d
            .findings
            .iter()
            .all(|f| f.reason == Reason::InvalidCgroupName && f.message.ends_with(": not controlled")));
        let mut q = pod("shop", QosClass::BestEffort, &[]);
        q.containers[0].id = Some("podman://a1".into());
        let d = desired(&config(), &layout(), &q, None);
        assert_eq!(messages(&d), ["InvalidCgroupName: container id 'podman://a1': unknown runtime 'podman' (containerd, cri-o, docker): not controlled"]);
    }

    #[test]
    fn class_cgroups_carry_the_configured_weights() {
        let c = class_cgroups(&config(), &layout());
        assert_eq!(
            c,
            [ClassCgroup { qos: QosClass::Burstable, cgroup: PathBuf::from("kubepods/burstable"), weight: 300 }]
        );
        let systemd = Layout { driver: Driver::Systemd, root: PathBuf::new() };
        assert_eq!(class_cgroups(&config(), &systemd)[0].cgroup, Path::new("kubepods.slice/kubepods-burstable.slice"));
    }
}
