//! A real API server for tests: `scripts/k8s` (etcd + kube-apiserver on 127.0.0.1), started as a child
//! and stopped by [`K8s`]'s `Drop` (the script then stops both servers and removes its directory; it
//! also does so by itself when this process dies without dropping).

#![allow(dead_code)] // each test binary uses its own part of this

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ioshare_kube::source::{PodStates, SourceOptions};
use ioshare_kube::{KubernetesConfig, PodSource};

/// What the shipped ClusterRole (packaging/kubernetes/rbac.yaml) lets the agent do, as `verb resource`.
pub const AGENT_RIGHTS: [(&str, &str); 4] =
    [("list", "pods"), ("watch", "pods"), ("list", "namespaces"), ("create", "events")];

/// How long a test waits for something the source should see.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The repository's `scripts/k8s`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/k8s")
}

/// A file of `packaging/kubernetes`, as a path string for kubectl.
pub fn manifest(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/kubernetes").join(name).display().to_string()
}

/// A running control plane.
pub struct K8s {
    child: Child,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The run directory (certificates, logs, `bin`).
    pub dir: PathBuf,
    lines: Mutex<Receiver<String>>,
}

impl K8s {
    /// Starts one, or says why it cannot (binaries not built) and returns `None`.
    pub fn start() -> Option<K8s> {
        K8s::start_with(&[])
    }

    /// Starts one with a node (`scripts/k8s --node`: containerd and a kubelet that run pods; root
    /// only), or says why it cannot and returns `None`.
    pub fn start_node() -> Option<K8s> {
        K8s::start_with(&["--node"])
    }

    /// Whether [`K8s::start_node`] can run here; if not, says why (the test's skip line).
    pub fn node_available() -> bool {
        K8s::check(&["--node"])
    }

    fn check(args: &[&str]) -> bool {
        let check = Command::new(script()).arg("--check").args(args).output().expect("run scripts/k8s --check");
        if !check.status.success() {
            eprintln!("skipped: {}", String::from_utf8_lossy(&check.stdout).trim());
        }
        check.status.success()
    }

    fn start_with(args: &[&str]) -> Option<K8s> {
        if !K8s::check(args) {
            return None;
        }
        let mut child = Command::new(script())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start scripts/k8s");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut k8s = K8s { child, kubeconfig: PathBuf::new(), dir: PathBuf::new(), lines: Mutex::new(rx) };
        // Until the first line the guard owns the child, so a failure here still stops it.
        let first = k8s.line(Duration::from_secs(180)).expect("scripts/k8s printed no kubeconfig path");
        k8s.kubeconfig = PathBuf::from(first.trim());
        k8s.dir = k8s.kubeconfig.parent().unwrap().to_path_buf();
        Some(k8s)
    }

    /// One control plane shared by the tests of a binary that run at once; stopped when the last of
    /// them drops it.
    pub fn shared() -> Option<Arc<K8s>> {
        static SHARED: Mutex<Weak<K8s>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k8s) = shared.upgrade() {
            return Some(k8s);
        }
        let k8s = Arc::new(K8s::start()?);
        *shared = Arc::downgrade(&k8s);
        Some(k8s)
    }

    fn line(&self, timeout: Duration) -> Option<String> {
        self.lines.lock().unwrap().recv_timeout(timeout).ok()
    }

    fn signal(&self, signal: libc::c_int, ack: &str) {
        // SAFETY: kill(2) on our own child's PID.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, signal) }, 0, "signal scripts/k8s");
        let deadline = Instant::now() + Duration::from_secs(180);
        while Instant::now() < deadline {
            match self.line(deadline - Instant::now()) {
                Some(l) if l.trim() == ack => return,
                Some(_) => continue,
                None => break,
            }
        }
        panic!("scripts/k8s did not answer '{ack}'");
    }

    /// Stops the API server (etcd keeps the data).
    pub fn stop_apiserver(&self) {
        self.signal(libc::SIGUSR1, "api server stopped");
    }

    /// Starts the API server again and waits until it is ready.
    pub fn start_apiserver(&self) {
        self.signal(libc::SIGUSR2, "api server ready");
    }

    /// What `scripts/k8s --node` wrote of its node: `name` is `node_name`, `cgroup_root` kubelet's
    /// cgroupRoot (relative to a hierarchy's root), `tenant_image` the image with fio and busybox.
    pub fn node_file(&self, name: &str) -> String {
        let path = self.dir.join(format!("ioshare_k8s_{name}"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (started without --node?)", path.display()))
            .trim()
            .to_string()
    }

    /// The API server's URL.
    pub fn server(&self) -> String {
        std::fs::read_to_string(self.dir.join("server-url")).unwrap().trim().to_string()
    }

    /// Runs kubectl as admin; `Err(stderr)` when it fails.
    pub fn try_kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        self.try_kubectl_as(&self.kubeconfig, args, stdin)
    }

    /// Runs kubectl with another kubeconfig.
    pub fn try_kubectl_as(&self, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        let mut child = Command::new(self.dir.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        if let Some(text) = stdin {
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// Runs kubectl as admin; panics with its error when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.try_kubectl(args, None).unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
    }

    /// `kubectl apply -f -` of `yaml`.
    pub fn apply(&self, yaml: &str) {
        self.try_kubectl(&["apply", "-f", "-"], Some(yaml)).unwrap_or_else(|e| panic!("kubectl apply: {e}\n{yaml}"));
    }

    /// A namespace with its `default` ServiceAccount (no controller manager makes it here), labels
    /// and annotations given as `key=value`.
    pub fn namespace(&self, name: &str, labels: &[&str], annotations: &[&str]) {
        self.kubectl(&["create", "namespace", name]);
        self.kubectl(&["-n", name, "create", "serviceaccount", "default"]);
        if !labels.is_empty() {
            self.kubectl(&[&["label", "namespace", name][..], labels].concat());
        }
        if !annotations.is_empty() {
            self.kubectl(&[&["annotate", "namespace", name][..], annotations].concat());
        }
    }

    /// A pod bound to `node` (it stays Pending: no kubelet), with annotations; returns its UID.
    /// BestEffort: its container has no requests or limits.
    pub fn pod(&self, namespace: &str, name: &str, node: &str, annotations: &[(&str, &str)]) -> String {
        self.pod_with(namespace, name, node, annotations, serde_json::json!({}))
    }

    /// [`K8s::pod`] with its container's `resources` (limits alone make it Guaranteed).
    pub fn pod_with(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        annotations: &[(&str, &str)],
        resources: serde_json::Value,
    ) -> String {
        let annotations: serde_json::Map<String, serde_json::Value> =
            annotations.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect();
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"nodeName": node, "automountServiceAccountToken": false,
                     "containers": [{"name": "app", "image": "busybox", "resources": resources}]}
        });
        self.apply(&pod.to_string());
        self.kubectl(&["-n", namespace, "get", "pod", name, "-o", "jsonpath={.metadata.uid}"])
    }

    /// Pods `p0`…`p{n-1}` bound to `node` (Pending: no kubelet), pod `i` annotated with weight
    /// `1 + i % 1000`; created in lists of 250.
    pub fn weighted_pods(&self, namespace: &str, node: &str, n: usize) {
        let items: Vec<serde_json::Value> = (0..n)
            .map(|i| {
                serde_json::json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("p{i}"), "namespace": namespace,
                                 "annotations": {"io.ioshare.dev/weight": format!("{}", 1 + i % 1000)}},
                    "spec": {"nodeName": node, "automountServiceAccountToken": false,
                             "containers": [{"name": "app", "image": "busybox"}]}
                })
            })
            .collect();
        for chunk in items.chunks(250) {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": chunk}).to_string();
            self.try_kubectl(&["create", "-f", "-"], Some(&list)).unwrap();
        }
    }

    /// Waits until `kubeconfig`'s user may do each `verb resource` (`kubectl auth can-i`): the API
    /// server's RBAC authorizer learns a new binding from its watch cache, a moment after `kubectl apply`
    /// returns, and on a loaded machine a client started at once can still be refused (a CI run saw it).
    pub fn wait_for_rights(&self, kubeconfig: &Path, rights: &[(&str, &str)]) {
        let deadline = Instant::now() + PATIENCE;
        for (verb, resource) in rights {
            while self.try_kubectl_as(kubeconfig, &["auth", "can-i", verb, resource, "-A"], None).is_err() {
                assert!(Instant::now() < deadline, "the role's right to {verb} {resource} never came into force");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// A kubeconfig that authenticates with `token` (for a ServiceAccount's rights).
    pub fn token_kubeconfig(&self, token: &str, into: &Path) -> PathBuf {
        let path = into.join("token.kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\n\
             current-context: c\n",
            self.server(),
            self.dir.join("ca.crt").display()
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for K8s {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's PID; the script's trap stops etcd and the API server.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// A source for `node` over `kubeconfig` with `config` (TOML of the `[kubernetes]` section's body).
pub fn source(kubeconfig: &Path, node: &str, config: &str, hierarchy: &Path) -> PodSource {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        kubernetes: KubernetesConfig,
    }
    let text = format!("[kubernetes]\nnode_name = {node:?}\nkubeconfig = {:?}\n{config}", kubeconfig.display());
    let config = toml::from_str::<File>(&text).unwrap_or_else(|e| panic!("{e}\n{text}")).kubernetes;
    PodSource::start(SourceOptions { config, hierarchy: hierarchy.to_path_buf() }).expect("start the pod source")
}

/// Folds updates into `states` until `done` holds; false after `timeout`. Warnings are printed.
pub fn wait_for(
    source: &PodSource,
    states: &mut PodStates,
    timeout: Duration,
    mut done: impl FnMut(&PodStates) -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done(states) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match source.updates().recv_timeout(left) {
            Ok(update) => {
                if let Some(w) = states.apply(update) {
                    eprintln!("warning: {w}");
                }
            }
            Err(_) => return done(states),
        }
    }
}

/// A name unique to this process and call (namespaces and nodes of parallel tests never meet).
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}
