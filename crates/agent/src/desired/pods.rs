//! Pods as a source of groups: with a `[kubernetes]` section the agent runs ioshare-kube's
//! [`PodSource`] (list and watch of this node's pods on its own thread) and turns what the pods ask
//! for into [`CgroupSettings`]s beside the configuration's rules ([`crate::desired::targets`]).
//!
//! - Start: the source is started and, for up to [`FIRST_LIST_WITHIN`], the agent waits for its
//!   first complete list, so the pods are applied with everything else — all or nothing — and a
//!   source that cannot work (credentials refused, the ClusterRole missing) stops the start with its
//!   one line. An API server that does not answer in that time is not an error: the agent starts
//!   with the rules and takes the pods when the list comes.
//! - Each discovery ([`crate::daemon::DISCOVERY_EVERY`]) drains the updates ([`Pods::drain`]): a
//!   pod's target follows its annotations; a deleted or finished pod's are dropped (the discovery
//!   restores what was written to its cgroups if they still exist, and forgets them if they are
//!   gone). Nothing else drops a pod: while the API server is unreachable the last known state stays
//!   in force, and cgroups of known pods that appear meanwhile are taken.
//! - A pod's cgroups are kubelet's: the pod's own (its settings, a leaf), each container's that asks
//!   for settings of its own, and the QoS class cgroups the configuration gives a `class_weight`
//!   (inner). Whichever comes first, the API's pod or its cgroup, it is applied at the first
//!   discovery that sees both.
//! - A source that ends for good ([`Update::Fatal`]) stops the agent with its line: a node agent
//!   that silently stopped following its pods would be worse.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ioshare_kube::source::{Connection, PodStates, SourceOptions, Update};
use ioshare_kube::{DesiredPod, KubernetesConfig, PodSource};
use serde::{Deserialize, Serialize};

use crate::desired::targets::{CgroupSettings, Owner, PodRef};
use crate::error::{Error, Result};

/// How long the start waits for the first complete list of pods.
pub const FIRST_LIST_WITHIN: Duration = Duration::from_secs(10);

/// The running pod source and the state it described so far.
pub struct Pods {
    source: PodSource,
    states: PodStates,
    /// The pods' targets, rebuilt when an update changes them.
    targets: Vec<(String, CgroupSettings)>,
}

impl std::fmt::Debug for Pods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pods").field("node", &self.source.node()).field("pods", &self.states.pods.len()).finish()
    }
}

impl Pods {
    /// Starts watching the pods of this node; `hierarchy` is the root kubelet's tree is under (the
    /// blkio root on cgroup v1, the unified root on v2). Waits for the first list (see the module
    /// comment); fails in one line when the source cannot start or work.
    pub fn start(config: &KubernetesConfig, hierarchy: &Path) -> Result<Pods> {
        let options = SourceOptions { config: config.clone(), hierarchy: hierarchy.to_path_buf() };
        let source = PodSource::start(options).map_err(|e| Error::Kubernetes(e.to_string()))?;
        tracing::info!(node = source.node(), "kubernetes: watching this node's pods");
        let mut pods = Pods { source, states: PodStates::default(), targets: Vec::new() };
        let deadline = Instant::now() + FIRST_LIST_WITHIN;
        while !pods.states.synced {
            let left = deadline.saturating_duration_since(Instant::now());
            match pods.source.updates().recv_timeout(left) {
                Ok(update) => pods.fold(update)?,
                Err(_) => {
                    tracing::warn!(
                        "kubernetes: no list of pods within {} s; starting with the rules, pods follow when it comes",
                        FIRST_LIST_WITHIN.as_secs()
                    );
                    break;
                }
            }
        }
        pods.rebuild();
        Ok(pods)
    }

    /// Folds every update waiting; true when the targets changed. An error when the source ended
    /// for good.
    pub fn drain(&mut self) -> Result<bool> {
        let mut changed = false;
        while let Ok(update) = self.source.updates().try_recv() {
            changed |= matches!(update, Update::Pod(_) | Update::Gone { .. } | Update::Classes(_));
            self.fold(update)?;
        }
        if changed {
            self.rebuild();
        }
        Ok(changed)
    }

    fn fold(&mut self, update: Update) -> Result<()> {
        match &update {
            Update::Pod(p) => {
                for f in
                    p.findings.iter().filter(|f| !self.states.pods.get(&p.uid).is_some_and(|o| o.findings.contains(f)))
                {
                    tracing::warn!(pod = %format!("{}/{}", p.namespace, p.name), reason = %f.reason, "{}", f.message);
                }
            }
            Update::Gone { name, .. } => tracing::info!(pod = %name, "kubernetes: pod gone"),
            Update::Connection(Connection::Unreachable(why)) => {
                tracing::warn!("{why}; the last known pods stay in force")
            }
            Update::Connection(Connection::Reachable) => tracing::info!("kubernetes: the API server answers again"),
            Update::Fatal(line) => return Err(Error::Kubernetes(line.clone())),
            Update::Synced | Update::Classes(_) | Update::Warning(_) => {}
        }
        if let Some(w) = self.states.apply(update) {
            tracing::warn!("{w}");
        }
        Ok(())
    }

    fn rebuild(&mut self) {
        let mut out: Vec<(String, CgroupSettings)> = self
            .states
            .classes
            .iter()
            .map(|c| {
                let t = CgroupSettings {
                    weight: c.weight,
                    limits: Default::default(),
                    memory: None,
                    inner: true,
                    owner: Owner::Class(c.qos),
                };
                (c.cgroup.to_string_lossy().into_owned(), t)
            })
            .collect();
        for p in self.states.pods.values() {
            out.extend(pod_targets(p));
        }
        self.targets = out;
    }

    /// The pods' targets (paths relative to the hierarchy's root; not all need exist).
    pub fn targets(&self) -> &[(String, CgroupSettings)] {
        &self.targets
    }

    /// What `agent status` shows of the source; `cgroups` are the managed cgroups' pods, and
    /// `controlled` says whether a pod's cgroup is under control (it exists and is applied).
    pub fn status(&self, cgroups: &BTreeMap<String, PodRef>, controlled: &dyn Fn(&str) -> bool) -> KubeStatus {
        let findings = self
            .states
            .pods
            .values()
            .flat_map(|p| {
                p.findings.iter().map(|f| PodFinding {
                    pod: format!("{}/{}", p.namespace, p.name),
                    reason: f.reason.to_string(),
                    message: f.message.clone(),
                })
            })
            .collect();
        let api_server = match &self.states.connection {
            None | Some(Connection::Reachable) if self.states.synced => "reachable".to_string(),
            None | Some(Connection::Reachable) => "listing".to_string(),
            Some(Connection::Unreachable(why)) => format!("unreachable ({why}): the last known pods stay in force"),
        };
        let pods = self
            .states
            .pods
            .values()
            .map(|p| {
                let cgroup = p.cgroup.as_ref().map(|c| c.to_string_lossy().into_owned());
                PodLine {
                    pod: format!("{}/{}", p.namespace, p.name),
                    qos: p.qos.to_string(),
                    controlled: cgroup.as_deref().is_some_and(controlled),
                    cgroup,
                    weight: p.settings.weight,
                    limits: p.settings.limits.to_string(),
                    memory_priority: p.settings.memory.map(|m| m.priority),
                }
            })
            .collect();
        KubeStatus { node: self.source.node().to_string(), api_server, pods, cgroups: cgroups.clone(), findings }
    }
}

/// A pod's targets: its own cgroup, and each container's that asks for settings of its own.
fn pod_targets(p: &DesiredPod) -> Vec<(String, CgroupSettings)> {
    let named = |container: Option<&str>| {
        Owner::Pod(PodRef { namespace: p.namespace.clone(), pod: p.name.clone(), container: container.map(Into::into) })
    };
    let target = |s: &ioshare_kube::Settings, owner: Owner| CgroupSettings {
        weight: s.weight,
        limits: s.limits.clone(),
        memory: s.memory,
        inner: false,
        owner,
    };
    let mut out = Vec::new();
    if let Some(cgroup) = &p.cgroup {
        out.push((cgroup.to_string_lossy().into_owned(), target(&p.settings, named(None))));
    }
    for c in &p.containers {
        if let (Some(cgroup), Some(settings)) = (&c.cgroup, &c.settings) {
            out.push((cgroup.to_string_lossy().into_owned(), target(settings, named(Some(&c.name)))));
        }
    }
    out
}

/// One thing a pod asked for that was not taken as asked (also an Event on the pod).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodFinding {
    /// `namespace/name`.
    pub pod: String,
    /// The Event's reason (`OutOfPolicy`, `InvalidAnnotation`, ...).
    pub reason: String,
    /// What was asked, what applies instead, and the rule.
    pub message: String,
}

/// One pod of the node in the status file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodLine {
    /// `namespace/name`.
    pub pod: String,
    /// Its QoS class.
    pub qos: String,
    /// Its cgroup, relative to the hierarchy's root (`None`: its UID cannot name one).
    pub cgroup: Option<String>,
    /// Whether its cgroup exists and is under control (else kubelet has not made it yet).
    pub controlled: bool,
    /// The weight it gets.
    pub weight: u32,
    /// Its fixed caps (`none` when it has none).
    pub limits: String,
    /// Its memory priority, when it has memory settings.
    pub memory_priority: Option<u8>,
}

/// The pod source in the status file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeStatus {
    /// The node whose pods are watched.
    pub node: String,
    /// `reachable`, `listing`, or `unreachable (why): ...`.
    pub api_server: String,
    /// The pods known on the node.
    pub pods: Vec<PodLine>,
    /// Each controlled cgroup's pod (and container).
    pub cgroups: BTreeMap<String, PodRef>,
    /// What pods asked for that was not taken as asked.
    pub findings: Vec<PodFinding>,
}
