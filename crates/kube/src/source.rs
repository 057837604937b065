//! The pod source: this node's pods and every namespace, listed then watched through the API server
//! on a thread of its own, turned into [`DesiredPod`]s and handed to the synchronous side.
//!
//! Two watchers (kube's `watcher`: list, then watch from the list's resourceVersion; on a closed
//! watch, watch again; on 410 Gone, list again) feed one loop on a current-thread tokio runtime. Pods
//! are watched with `fieldSelector=spec.nodeName=NODE`; finished pods count as gone. Errors are
//! retried with a capped exponential backoff ([`RETRY_MAX`]) while the last state stays in force;
//! the first unreachable error and the return are each reported once. An authorization error (401,
//! 403) before the first complete list is [`Update::Fatal`]: the source cannot work without its
//! rights, and retrying would only hide that. Pods are resolved once the namespaces are listed, so a
//! namespace's defaults apply from the first update on; a pod's findings are recorded as Warning
//! Events on it (events.k8s.io) once each, again only when they change.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use serde::Serialize;
use tokio::sync::oneshot;

use crate::cgroup::{Driver, Layout};
use crate::config::KubernetesConfig;
use crate::desired::{class_cgroups, desired, ClassCgroup, DesiredPod};
use crate::error::Error;
use crate::finding::Finding;
use crate::pod::{NamespaceFacts, PodFacts};

/// The longest wait between two tries while the API server fails: the state is back within this
/// (plus one list) of the server's return.
pub const RETRY_MAX: Duration = Duration::from_secs(3);
/// The first wait after an error.
pub const RETRY_MIN: Duration = Duration::from_millis(200);
/// The controller name on recorded Events.
pub const REPORTER: &str = "ioshare-agent";

/// What the source needs.
#[derive(Clone, Debug)]
pub struct SourceOptions {
    /// The `[kubernetes]` section.
    pub config: KubernetesConfig,
    /// A hierarchy root under which kubelet's tree is looked for when `cgroup_driver = "auto"`
    /// (`/sys/fs/cgroup/blkio` on cgroup v1, `/sys/fs/cgroup` on v2).
    pub hierarchy: PathBuf,
}

/// Whether the API server answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Connection {
    /// It answers again.
    Reachable,
    /// It does not (the error, one line); the last state stays valid.
    Unreachable(String),
}

/// What the source hands over.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Update {
    /// A pod's desired state, new or changed.
    Pod(Box<DesiredPod>),
    /// A pod was deleted or finished: forget it.
    Gone {
        /// Its UID.
        uid: String,
        /// `namespace/name`, for logs.
        name: String,
    },
    /// A complete list was handed over: every pod alive is known.
    Synced,
    /// The QoS class cgroups' weights (sent when the layout is known or changes).
    Classes(Vec<ClassCgroup>),
    /// The API server became unreachable or reachable.
    Connection(Connection),
    /// Something worth a line in the log that does not stop the source (an Event not recorded, an
    /// ambiguous cgroup tree).
    Warning(String),
    /// The source cannot work (credentials or rights refused); its thread has ended.
    Fatal(String),
}

/// The state the updates describe, kept on the synchronous side: fold every [`Update`] into it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PodStates {
    /// Desired state by pod UID.
    pub pods: BTreeMap<String, DesiredPod>,
    /// The class cgroups' weights.
    pub classes: Vec<ClassCgroup>,
    /// The API server's state as last reported (`None` before any report).
    pub connection: Option<Connection>,
    /// Whether a complete list has been handed over.
    pub synced: bool,
    /// The fatal error, if the source stopped.
    pub fatal: Option<String>,
}

impl PodStates {
    /// Folds one update in; returns warnings for the caller to log.
    pub fn apply(&mut self, update: Update) -> Option<String> {
        match update {
            Update::Pod(p) => {
                self.pods.insert(p.uid.clone(), *p);
            }
            Update::Gone { uid, .. } => {
                self.pods.remove(&uid);
            }
            Update::Synced => self.synced = true,
            Update::Classes(c) => self.classes = c,
            Update::Connection(c) => self.connection = Some(c),
            Update::Warning(w) => return Some(w),
            Update::Fatal(f) => self.fatal = Some(f),
        }
        None
    }

    /// The pod `namespace/name`, if known.
    pub fn by_name(&self, namespace: &str, name: &str) -> Option<&DesiredPod> {
        self.pods.values().find(|p| p.namespace == namespace && p.name == name)
    }
}

/// A running pod source. Dropping it stops its thread.
pub struct PodSource {
    node: String,
    updates: Receiver<Update>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl PodSource {
    /// Loads the credentials and starts watching. Errors (no node name, no credentials) are one line;
    /// everything after — including refused rights — arrives as [`Update`]s.
    pub fn start(options: SourceOptions) -> Result<PodSource, Error> {
        let node = options.config.node().map_err(Error::Config)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Error::Start)?;
        let client = runtime.block_on(client(&options.config))?;
        let (tx, updates) = mpsc::channel();
        let (stop, stopped) = oneshot::channel();
        let watch = Watch::new(options, node.clone(), client, tx);
        let thread = std::thread::Builder::new()
            .name("ioshare-kube".into())
            .spawn(move || runtime.block_on(watch.run(stopped)))
            .map_err(Error::Start)?;
        Ok(PodSource { node, updates, stop: Some(stop), thread: Some(thread) })
    }

    /// The node whose pods are watched.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The updates, in order.
    pub fn updates(&self) -> &Receiver<Update> {
        &self.updates
    }

    /// Stops watching and joins the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for PodSource {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A client from the configured kubeconfig, else the pod's service account, else the usual kubeconfig.
async fn client(config: &KubernetesConfig) -> Result<Client, Error> {
    let one_line = |e: &dyn std::fmt::Display| e.to_string().replace('\n', " ");
    let cfg = match &config.kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| Error::Credentials(format!("{}: {}", path.display(), one_line(&e))))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Credentials(format!("{}: {}", path.display(), one_line(&e))))?
        }
        // In a pod, its service account; elsewhere $KUBECONFIG or ~/.kube/config (kube's own `infer`
        // tries them the other way round, so a stray kubeconfig would win over the pod's identity).
        None => match kube::Config::incluster() {
            Ok(in_cluster) => in_cluster,
            Err(in_cluster) => kube::Config::from_kubeconfig(&KubeConfigOptions::default()).await.map_err(|e| {
                Error::Credentials(format!(
                    "not in a pod ({}) and no kubeconfig ({}): set kubernetes.kubeconfig",
                    one_line(&in_cluster),
                    one_line(&e)
                ))
            })?,
        },
    };
    Client::try_from(cfg).map_err(|e| Error::Credentials(one_line(&e)))
}

/// Exponential backoff from [`RETRY_MIN`] to [`RETRY_MAX`], with jitter so that a fleet of agents
/// does not retry in step; reset by the stream on success.
struct Retry {
    next: Duration,
    seed: u64,
}

impl Retry {
    fn new() -> Retry {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Retry { next: RETRY_MIN, seed: seed | 1 }
    }
}

impl Iterator for Retry {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // xorshift: a jitter of up to a quarter of the delay, no dependency for it.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let delay = self.next;
        self.next = (self.next * 2).min(RETRY_MAX);
        let jitter = delay.mul_f64((self.seed % 1000) as f64 / 4000.0);
        Some((delay - jitter).max(RETRY_MIN / 2))
    }
}

impl Backoff for Retry {
    fn reset(&mut self) {
        self.next = RETRY_MIN;
    }
}

/// A list in progress (between a watcher's `Init` and `InitDone`).
type Listing<T> = Option<HashMap<String, T>>;

/// Which watcher an item came from (boxed: API objects are large, and the two differ by five times).
enum Item {
    Pod(Box<Result<Event<Pod>, watcher::Error>>),
    Namespace(Box<Result<Event<Namespace>, watcher::Error>>),
}

/// The watch loop's state.
struct Watch {
    config: KubernetesConfig,
    hierarchy: PathBuf,
    node: String,
    client: Client,
    tx: Sender<Update>,
    recorder: Recorder,
    layout: Option<Layout>,
    tree_warning: Option<String>,
    pods: HashMap<String, PodFacts>,
    namespaces: HashMap<String, NamespaceFacts>,
    pod_listing: Listing<PodFacts>,
    namespace_listing: Listing<NamespaceFacts>,
    pods_listed: bool,
    namespaces_listed: bool,
    sent: HashMap<String, DesiredPod>,
    recorded: HashMap<String, BTreeSet<Finding>>,
    reachable: bool,
}

impl Watch {
    fn new(options: SourceOptions, node: String, client: Client, tx: Sender<Update>) -> Watch {
        let reporter = Reporter { controller: REPORTER.into(), instance: Some(node.clone()) };
        Watch {
            recorder: Recorder::new(client.clone(), reporter),
            config: options.config,
            hierarchy: options.hierarchy,
            node,
            client,
            tx,
            layout: None,
            tree_warning: None,
            pods: HashMap::new(),
            namespaces: HashMap::new(),
            pod_listing: None,
            namespace_listing: None,
            pods_listed: false,
            namespaces_listed: false,
            sent: HashMap::new(),
            recorded: HashMap::new(),
            reachable: true,
        }
    }

    fn pod_stream(&self) -> impl Stream<Item = Item> {
        let config = watcher::Config::default().fields(&format!("spec.nodeName={}", self.node));
        watcher(Api::<Pod>::all(self.client.clone()), config).backoff(Retry::new()).map(|r| Item::Pod(Box::new(r)))
    }

    fn namespace_stream(&self) -> impl Stream<Item = Item> {
        watcher(Api::<Namespace>::all(self.client.clone()), watcher::Config::default())
            .backoff(Retry::new())
            .map(|r| Item::Namespace(Box::new(r)))
    }

    async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let mut items = std::pin::pin!(futures::stream::select(self.pod_stream(), self.namespace_stream()));
        loop {
            let item = tokio::select! {
                _ = &mut stop => return,
                item = items.next() => item,
            };
            let Some(item) = item else { return };
            let went_on = match item {
                Item::Pod(r) => match *r {
                    Ok(e) => self.on_pod(e),
                    Err(e) => self.on_error("pods", self.pods_listed, e),
                },
                Item::Namespace(r) => match *r {
                    Ok(e) => self.on_namespace(e),
                    Err(e) => self.on_error("namespaces", self.namespaces_listed, e),
                },
            };
            if !went_on {
                return;
            }
        }
    }

    /// Sends an update; false when nobody listens any more.
    fn send(&self, update: Update) -> bool {
        self.tx.send(update).is_ok()
    }

    fn on_error(&mut self, what: &str, listed: bool, e: watcher::Error) -> bool {
        let api = match &e {
            watcher::Error::InitialListFailed(kube::Error::Api(r))
            | watcher::Error::WatchStartFailed(kube::Error::Api(r))
            | watcher::Error::WatchFailed(kube::Error::Api(r)) => Some(r),
            watcher::Error::WatchError(r) => Some(r),
            _ => None,
        };
        if let Some(r) = api {
            if r.code == 410 {
                return true; // expired: the watcher lists again by itself
            }
            if !listed && (r.code == 401 || r.code == 403) {
                let verb = if r.code == 401 { "is not authenticated" } else { "is not allowed" };
                let line = format!(
                    "kubernetes: the agent {verb} to list and watch {what} ({} {}): {}; it needs get, list and \
                     watch on pods and namespaces and create on events (packaging/kubernetes/rbac.yaml)",
                    r.code,
                    r.reason,
                    r.message.replace('\n', " ")
                );
                self.send(Update::Fatal(line));
                return false;
            }
        }
        if self.reachable {
            self.reachable = false;
            let line = format!("kubernetes: watching {what}: {}", e.to_string().replace('\n', " "));
            return self.send(Update::Connection(Connection::Unreachable(line)));
        }
        true
    }

    fn back(&mut self) -> bool {
        if self.reachable {
            return true;
        }
        self.reachable = true;
        self.send(Update::Connection(Connection::Reachable))
    }

    fn on_pod(&mut self, event: Event<Pod>) -> bool {
        if !self.back() {
            return false;
        }
        let facts = |pod: &Pod| PodFacts::from_pod(pod).ok();
        match event {
            Event::Init => self.pod_listing = Some(HashMap::new()),
            Event::InitApply(pod) => {
                if let (Some(listing), Some(f)) = (self.pod_listing.as_mut(), facts(&pod)) {
                    if !f.finished {
                        listing.insert(f.uid.clone(), f);
                    }
                }
            }
            Event::InitDone => {
                self.pods = self.pod_listing.take().unwrap_or_default();
                self.pods_listed = true;
                return self.resolve_all() && (!self.namespaces_listed || self.send(Update::Synced));
            }
            Event::Apply(pod) => {
                let Some(f) = facts(&pod) else { return true };
                let uid = f.uid.clone();
                if f.finished || f.node.as_deref() != Some(self.node.as_str()) {
                    self.pods.remove(&uid);
                } else {
                    self.pods.insert(uid.clone(), f);
                }
                return self.resolve(&uid);
            }
            Event::Delete(pod) => {
                let Some(uid) = pod.metadata.uid else { return true };
                self.pods.remove(&uid);
                return self.resolve(&uid);
            }
        }
        true
    }

    fn on_namespace(&mut self, event: Event<Namespace>) -> bool {
        if !self.back() {
            return false;
        }
        match event {
            Event::Init => self.namespace_listing = Some(HashMap::new()),
            Event::InitApply(ns) => {
                if let (Some(listing), Some((name, f))) =
                    (self.namespace_listing.as_mut(), NamespaceFacts::from_namespace(&ns))
                {
                    listing.insert(name, f);
                }
            }
            Event::InitDone => {
                self.namespaces = self.namespace_listing.take().unwrap_or_default();
                let first = !self.namespaces_listed;
                self.namespaces_listed = true;
                return self.resolve_all() && (!(first && self.pods_listed) || self.send(Update::Synced));
            }
            Event::Apply(ns) => {
                let Some((name, f)) = NamespaceFacts::from_namespace(&ns) else { return true };
                if self.namespaces.get(&name) != Some(&f) {
                    self.namespaces.insert(name.clone(), f);
                    return self.resolve_namespace(&name);
                }
            }
            Event::Delete(ns) => {
                let Some(name) = ns.metadata.name else { return true };
                self.namespaces.remove(&name);
                return self.resolve_namespace(&name);
            }
        }
        true
    }

    /// The layout to name cgroups with: the configured driver, else the one found in the tree (sent
    /// as [`Update::Classes`] when it changes), else cgroupfs (kubelet's default) until one is found.
    fn layout(&mut self) -> Layout {
        let driver = match self.config.cgroup_driver.fixed() {
            Some(d) => Some(d),
            None => match Driver::detect(&self.hierarchy.join(&self.config.cgroup_root)) {
                Ok(d) => d,
                Err(e) => {
                    if self.tree_warning.as_ref() != Some(&e) {
                        let _ = self.tx.send(Update::Warning(format!("kubernetes: {e}")));
                        self.tree_warning = Some(e);
                    }
                    None
                }
            },
        };
        let layout = Layout { driver: driver.unwrap_or(Driver::Cgroupfs), root: self.config.cgroup_root.clone() };
        if self.layout.as_ref() != Some(&layout) {
            self.layout = Some(layout.clone());
            let _ = self.tx.send(Update::Classes(class_cgroups(&self.config, &layout)));
        }
        layout
    }

    fn resolve_all(&mut self) -> bool {
        if !self.namespaces_listed {
            return true;
        }
        self.layout(); // sends the class cgroups even while there is no pod
        let uids: BTreeSet<String> = self.pods.keys().chain(self.sent.keys()).cloned().collect();
        uids.iter().all(|uid| self.resolve(uid))
    }

    fn resolve_namespace(&mut self, namespace: &str) -> bool {
        let uids: Vec<String> =
            self.pods.values().filter(|p| p.namespace == namespace).map(|p| p.uid.clone()).collect();
        uids.iter().all(|uid| self.resolve(uid))
    }

    /// Sends the pod's desired state if it changed, or `Gone` if the pod is no more; records new
    /// findings as Events.
    fn resolve(&mut self, uid: &str) -> bool {
        if !self.namespaces_listed {
            return true;
        }
        let Some(pod) = self.pods.get(uid).cloned() else {
            self.recorded.remove(uid);
            return match self.sent.remove(uid) {
                Some(p) => {
                    self.send(Update::Gone { uid: uid.to_string(), name: format!("{}/{}", p.namespace, p.name) })
                }
                None => true,
            };
        };
        // A new layout changes the pod's paths, so its state differs from the one sent: sent again.
        let layout = self.layout();
        let state = desired(&self.config, &layout, &pod, self.namespaces.get(&pod.namespace));
        if self.sent.get(uid) == Some(&state) {
            return true;
        }
        self.record(&state);
        self.sent.insert(uid.to_string(), state.clone());
        self.send(Update::Pod(Box::new(state)))
    }

    /// Records the findings not recorded for this pod before, each as a Warning Event on it.
    fn record(&mut self, state: &DesiredPod) {
        let now: BTreeSet<Finding> = state.findings.iter().cloned().collect();
        let before = self.recorded.insert(state.uid.clone(), now.clone()).unwrap_or_default();
        if !self.config.events {
            return;
        }
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(state.name.clone()),
            namespace: Some(state.namespace.clone()),
            uid: Some(state.uid.clone()),
            ..Default::default()
        };
        for finding in now.difference(&before).cloned() {
            let (recorder, reference, tx) = (self.recorder.clone(), reference.clone(), self.tx.clone());
            let pod = format!("{}/{}", state.namespace, state.name);
            tokio::spawn(async move {
                let event = KubeEvent {
                    type_: EventType::Warning,
                    reason: finding.reason.as_str().to_string(),
                    note: Some(finding.message.clone()),
                    action: "Resolve".into(),
                    secondary: None,
                };
                if let Err(e) = recorder.publish(&event, &reference).await {
                    let line = format!(
                        "kubernetes: cannot record an Event on pod {pod}: {}",
                        e.to_string().replace('\n', " ")
                    );
                    let _ = tx.send(Update::Warning(line));
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_grow_to_the_cap_with_jitter_and_start_over_on_reset() {
        let mut r = Retry::new();
        let delays: Vec<Duration> = r.by_ref().take(12).collect();
        assert!(delays.iter().all(|d| *d >= RETRY_MIN / 2 && *d <= RETRY_MAX), "{delays:?}");
        assert!(delays[0] <= RETRY_MIN, "{delays:?}");
        assert!(delays[8..].iter().all(|d| *d >= RETRY_MAX * 3 / 4), "capped, at most a quarter off: {delays:?}");
        r.reset();
        assert!(r.next().unwrap() <= RETRY_MIN);
    }

    #[test]
    fn pod_states_follow_the_updates() {
        let pod = |uid: &str, weight: u32| {
            let mut p = DesiredPod {
                namespace: "ns".into(),
                name: format!("p{uid}"),
                uid: uid.into(),
                qos: crate::QosClass::Burstable,
                cgroup: None,
                settings: Default::default(),
                containers: vec![],
                findings: vec![],
            };
            p.settings.weight = weight;
            Update::Pod(Box::new(p))
        };
        let mut s = PodStates::default();
        for u in [pod("1", 10), pod("2", 20), pod("1", 30), Update::Synced] {
            assert_eq!(s.apply(u), None);
        }
        assert_eq!(s.by_name("ns", "p1").unwrap().settings.weight, 30);
        assert!(s.synced && s.pods.len() == 2);
        s.apply(Update::Gone { uid: "2".into(), name: "ns/p2".into() });
        assert!(s.by_name("ns", "p2").is_none());
        s.apply(Update::Connection(Connection::Unreachable("down".into())));
        assert_eq!(s.pods.len(), 1, "the last state stays while the server is away");
        assert_eq!(s.apply(Update::Warning("w".into())), Some("w".into()));
        s.apply(Update::Fatal("f".into()));
        assert_eq!(s.fatal.as_deref(), Some("f"));
    }
}
