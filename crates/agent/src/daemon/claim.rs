//! Which cgroups a running agent controls, registered host-wide, so that a second agent on the same
//! cgroups refuses to start and names the first: two agents writing the same limits would undo each
//! other's every period, and each one's revert would restore the other's values.
//!
//! Design:
//! - Each running agent holds an exclusive `flock` on its own file in a registry directory
//!   ([`REGISTRY_DIR`]; for a user other than root, `ioshare-agents-UID` in the temp directory),
//!   which names its pid, state directory and rules (each rule's hierarchy root and pattern).
//!   The kernel releases the lock when the process dies, however it dies: a file whose lock can be
//!   taken is a dead agent's, and is removed.
//! - Reading the others and adding one's own file happen under a lock on the registry's parent
//!   directory, so two agents starting at once cannot both pass.
//! - Two agents conflict when, under the same root, a cgroup is matched by a rule of each now, or a
//!   pattern is the same in both (a cgroup created later would be matched by both).
//! - An agent with a `[kubernetes]` section claims whole subtrees: kubelet's `kubepods` and
//!   `kubepods.slice` (below its `--cgroup-root`), under the IO hierarchy's root and the memory
//!   hierarchy's (pods may ask for either), as its pods' cgroups come and go by the minute. A subtree
//!   conflicts with another agent's subtree that contains it or lies in it, and with a rule that
//!   matches a cgroup in it now or whose pattern's leading literal components lie in it (a rule
//!   `kubepods/*/*` on a node where kubelet has not started yet).
//! - Two agents with the same state directory are refused by the recorder (one agent per state file),
//!   whatever their rules.
//! - A reload re-registers the agent's new rules the same way ([`Claim::update`]), its own file aside.
//! - Nothing is left behind: the last agent to exit removes the registry directory, and its parent
//!   (`/run/ioshare`) if an agent made it, each only when empty (`rmdir`). An agent that makes the
//!   parent leaves a mark in it ([`MADE_MARK`]) once it holds the lock: the mark, not the memory of
//!   one agent, says so, because another agent may lock the parent between its making and its
//!   maker's registration (and a crashed maker's mark still lets the next last agent clean up). The
//!   removal is done under the parent's lock, and an agent registering checks, once it holds that
//!   lock, that the parent is still linked (else it was just removed: it makes it again and
//!   retries); so no registration lands in a directory being removed.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use ioshare_host::{find_cgroups, patterns_overlap};
use serde::{Deserialize, Serialize};

use crate::cgroups::hierarchy::Hierarchy;
use crate::desired::config::Config;
use crate::error::{Error, Result};
use crate::memory::MemoryGuard;

/// Where root's agents register.
pub const REGISTRY_DIR: &str = "/run/ioshare/agents";

/// The file in the registry's parent that says an agent made it (so the last agent out removes it).
pub const MADE_MARK: &str = ".made-by-ioshare-agent";

/// What an agent's registry file says.
#[derive(Debug, Serialize, Deserialize)]
struct Registered {
    pid: u32,
    state_dir: PathBuf,
    #[serde(flatten)]
    claims: Claims,
}

/// What an agent controls: rules' patterns and whole subtrees, each with its hierarchy's root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// (hierarchy root, pattern relative to it) of each rule.
    pub rules: Vec<(PathBuf, String)>,
    /// (hierarchy root, subtree relative to it): every cgroup in it, made now or later (pods').
    #[serde(default)]
    pub subtrees: Vec<(PathBuf, PathBuf)>,
}

impl From<Vec<(PathBuf, String)>> for Claims {
    /// The claims of rules alone.
    fn from(rules: Vec<(PathBuf, String)>) -> Claims {
        Claims { rules, subtrees: Vec::new() }
    }
}

/// A running agent's registration: its file, locked; removed on drop, with the registry directory
/// when that leaves it empty.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    /// Held open: the lock lives as long as the descriptor.
    file: File,
}

impl Claim {
    /// Registers an agent running `config` on `hierarchy` with state in `state_dir`, in this user's
    /// registry ([`registry_dir`]); refused if a running agent claims a cgroup its rules match or its
    /// pods' subtrees hold.
    pub fn register(config: &Config, hierarchy: &Hierarchy, state_dir: &Path) -> Result<Claim> {
        Claim::register_in(&registry_dir(), claims(config, hierarchy), state_dir)
    }

    /// Registers `claims` (rules' (hierarchy root, pattern), subtrees) for an agent with state in
    /// `state_dir`, in `registry`.
    pub fn register_in(registry: &Path, claims: impl Into<Claims>, state_dir: &Path) -> Result<Claim> {
        let claims = claims.into();
        let _locked = check_others(registry, &claims, None)?;
        static SEQUENCE: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let path = registry.join(format!("{pid}-{}.json", SEQUENCE.fetch_add(1, Ordering::Relaxed)));
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| registry_error("cannot create", &path, e))?;
        let me = Registered { pid, state_dir: std::path::absolute(state_dir).unwrap_or_default(), claims };
        let written = lock(&file, libc::LOCK_EX | libc::LOCK_NB)
            .and_then(|()| file.write_all(serde_json::to_string(&me).expect("serialises").as_bytes()));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            return Err(registry_error("cannot write", &path, e));
        }
        Ok(Claim { path, file })
    }

    /// Registers `config`'s rules instead of those registered (a reload): refused, the registration
    /// left as it was, if a running agent claims a cgroup they match.
    pub fn update(&mut self, config: &Config, hierarchy: &Hierarchy) -> Result<()> {
        self.update_claims(claims(config, hierarchy))
    }

    /// [`Claim::update`] with the claims themselves.
    fn update_claims(&mut self, claims: impl Into<Claims>) -> Result<()> {
        let claims = claims.into();
        let registry = self.path.parent().unwrap_or(Path::new("/"));
        let _locked = check_others(registry, &claims, Some(&self.path))?;
        let text = std::fs::read_to_string(&self.path).map_err(|e| registry_error("cannot read", &self.path, e))?;
        let old: Registered = serde_json::from_str(&text).map_err(|e| Error::Registry(format!("{e}")))?;
        let me = Registered { claims, ..old };
        self.file
            .set_len(0)
            .and_then(|()| self.file.write_all_at(serde_json::to_string(&me).expect("serialises").as_bytes(), 0))
            .map_err(|e| registry_error("cannot write", &self.path, e))
    }
}

/// The registry error of `action` on `path`.
fn registry_error(action: &str, path: &Path, e: io::Error) -> Error {
    Error::Registry(format!("{action} {}: {e}", path.display()))
}

/// How often [`lock_registry`] makes the directory again when an exiting agent removed it under it.
const VANISHED_RETRIES: usize = 100;

/// Makes `registry` and its parent if needed and locks the parent (held while the returned file
/// lives): registering, and removing the registry and the parent when the last agent exits, happen
/// under that lock. A parent this call made gets the [`MADE_MARK`]. A parent found unlinked once
/// locked was removed in between by an exiting agent: it is made again.
fn lock_registry(registry: &Path) -> Result<File> {
    let failed = |e| registry_error("cannot create", registry, e);
    let parent = registry.parent().unwrap_or(Path::new("/"));
    let mut made_parent = false;
    for _ in 0..VANISHED_RETRIES {
        std::fs::create_dir_all(parent.parent().unwrap_or(Path::new("/"))).map_err(failed)?;
        match std::fs::create_dir(parent) {
            Ok(()) => made_parent = true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(e)),
        }
        let dir = match File::open(parent) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(registry_error("cannot open", parent, e)),
        };
        lock(&dir, libc::LOCK_EX).map_err(|e| registry_error("cannot lock", parent, e))?;
        if dir.metadata().map_err(|e| registry_error("cannot read", parent, e))?.nlink() == 0 {
            continue;
        }
        if made_parent {
            File::create(parent.join(MADE_MARK)).map_err(failed)?;
        }
        match std::fs::create_dir(registry) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(failed(e)),
            _ => return Ok(dir),
        }
    }
    Err(Error::Registry(format!("{} keeps vanishing: another process removes it", parent.display())))
}

/// Locks `registry` ([`lock_registry`]), removes dead agents' files, and refuses `claims` if a running
/// agent's — other than the one registered at `own` — overlap them; returns the lock.
fn check_others(registry: &Path, claims: &Claims, own: Option<&Path>) -> Result<File> {
    let dir = lock_registry(registry)?;
    let entries = std::fs::read_dir(registry).map_err(|e| registry_error("cannot list", registry, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if Some(path.as_path()) == own {
            continue;
        }
        let Ok(file) = File::open(&path) else { continue };
        if lock(&file, libc::LOCK_SH | libc::LOCK_NB).is_ok() {
            let _ = std::fs::remove_file(&path); // a dead agent's
            continue;
        }
        let Ok(other) = serde_json::from_reader::<_, Registered>(&file) else { continue };
        if let Some(cgroup) = overlap(claims, &other.claims) {
            return Err(Error::AlreadyControlled { cgroup, pid: other.pid, state_dir: other.state_dir });
        }
    }
    Ok(dir)
}

impl Drop for Claim {
    /// Removes the file; then, under the lock on the registry's parent, the registry if empty, and
    /// the parent if an agent made it ([`MADE_MARK`]) and it is empty.
    fn drop(&mut self) {
        let Some(registry) = self.path.parent() else { return };
        let parent = registry.parent().unwrap_or(Path::new("/"));
        let locked = File::open(parent).and_then(|dir| lock(&dir, libc::LOCK_EX).map(|()| dir));
        let _ = std::fs::remove_file(&self.path);
        let mark = parent.join(MADE_MARK);
        if locked.is_ok() && std::fs::remove_dir(registry).is_ok() && std::fs::remove_file(&mark).is_ok() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// This user's registry: [`REGISTRY_DIR`] for root, `ioshare-agents-UID` in the temp directory
/// otherwise (an agent of another user cannot write root's cgroups anyway).
pub fn registry_dir() -> PathBuf {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    match unsafe { libc::geteuid() } {
        0 => PathBuf::from(REGISTRY_DIR),
        uid => std::env::temp_dir().join(format!("ioshare-agents-{uid}")),
    }
}

/// What `config` claims: the (root, pattern) of each rule — IO rules under the hierarchy's root when
/// devices are configured, memory rules under the memory hierarchy's root — and, with a
/// `[kubernetes]` section, kubelet's subtrees under both roots (see the module comment).
fn claims(config: &Config, hierarchy: &Hierarchy) -> Claims {
    let memory_root = MemoryGuard::hierarchy().map(|(root, _)| root);
    let mut out = Claims::default();
    for g in &config.groups {
        if !config.devices.is_empty() {
            out.rules.push((hierarchy.root.clone(), g.cgroup.clone()));
        }
        if let (Some(root), Some(_)) = (&memory_root, g.memory) {
            out.rules.push((root.clone(), g.cgroup.clone()));
        }
    }
    if let Some(k) = &config.kubernetes {
        let io_root = (!config.devices.is_empty()).then(|| hierarchy.root.clone());
        let mut roots: Vec<PathBuf> = io_root.into_iter().chain(memory_root).collect();
        roots.dedup();
        for root in roots {
            for top in ["kubepods", "kubepods.slice"] {
                out.subtrees.push((root.clone(), k.cgroup_root.join(top)));
            }
        }
    }
    out
}

/// The first cgroup both claim (as a path), if any.
fn overlap(ours: &Claims, theirs: &Claims) -> Option<PathBuf> {
    for (root, pattern) in &ours.rules {
        for (their_root, their_pattern) in theirs.rules.iter().filter(|(r, _)| r == root) {
            if pattern == their_pattern {
                return Some(their_root.join(pattern));
            }
            let mine = find_cgroups(root, pattern);
            if let Some(c) = find_cgroups(root, their_pattern).into_iter().find(|c| mine.contains(c)) {
                return Some(root.join(c));
            }
        }
    }
    for (root, subtree) in &ours.subtrees {
        for (_, their) in theirs.subtrees.iter().filter(|(r, _)| r == root) {
            if subtree.starts_with(their) || their.starts_with(subtree) {
                return Some(root.join(subtree.min(their)));
            }
        }
    }
    let rule_in_subtree = |rules: &[(PathBuf, String)], subtrees: &[(PathBuf, PathBuf)]| {
        subtrees.iter().find_map(|(root, subtree)| {
            rules.iter().filter(|(r, _)| r == root).find_map(|(_, pattern)| rule_in(root, pattern, subtree))
        })
    };
    rule_in_subtree(&ours.rules, &theirs.subtrees).or_else(|| rule_in_subtree(&theirs.rules, &ours.subtrees))
}

/// A cgroup under `root` that rule `pattern` claims in `subtree`: when the pattern's leading
/// components match the subtree's path, whatever it matches in there, now or later (a rule
/// `kubepods/*/*`, or `*/burstable/*`, on a node where kubelet has not started yet).
fn rule_in(root: &Path, pattern: &str, subtree: &Path) -> Option<PathBuf> {
    let depth = subtree.components().count();
    let parts: Vec<&str> = pattern.split('/').collect();
    if parts.len() < depth {
        return None;
    }
    patterns_overlap(&parts[..depth].join("/"), &subtree.to_string_lossy())?;
    Some(root.join(pattern))
}

/// flock(2) on `file`.
fn lock(file: &File, how: libc::c_int) -> io::Result<()> {
    // SAFETY: flock(2) on a descriptor `file` owns for the duration of the call.
    if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cgroup tree of plain directories: `tenants/{a,b}`, `batch/c`.
    fn tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for d in ["tenants/a", "tenants/b", "batch/c"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        root
    }

    #[test]
    fn overlapping_rules_are_refused_naming_the_first() {
        let (registry, root) = (tempfile::tempdir().unwrap(), tree());
        let r = |p: &str| vec![(root.path().to_path_buf(), p.to_string())];
        let first = Claim::register_in(registry.path(), r("tenants/*"), Path::new("/state/one")).unwrap();
        for (pattern, cgroup) in [("tenants/b", "tenants/b"), ("tenants/*", "tenants/*")] {
            let rules = [r(pattern), r("later/*")].concat();
            let err = Claim::register_in(registry.path(), rules, Path::new("/state/two")).unwrap_err().to_string();
            let pid = std::process::id();
            assert!(err.contains(&format!("pid {pid}")) && err.contains("/state/one"), "{err}");
            assert!(err.contains(cgroup), "{pattern}: {err}");
        }
        let _other = Claim::register_in(registry.path(), r("batch/*"), Path::new("/state/three")).unwrap();
        let _elsewhere =
            Claim::register_in(registry.path(), vec![("/other".into(), "tenants/*".into())], Path::new("/s")).unwrap();
        drop(first);
        let _second = Claim::register_in(registry.path(), r("tenants/a"), Path::new("/state/two")).unwrap();
        assert_eq!(std::fs::read_dir(registry.path()).unwrap().count(), 3, "the first's file removed");
    }

    /// A registry file nobody holds locked is a dead agent's: removed, not a conflict.
    /// A reload's rules are checked against the other agents only, and then are what others see.
    #[test]
    fn an_update_is_refused_on_anothers_cgroups_and_then_claims_the_new_ones() {
        let (registry, root) = (tempfile::tempdir().unwrap(), tree());
        let r = |p: &str| vec![(root.path().to_path_buf(), p.to_string())];
        let mut mine = Claim::register_in(registry.path(), r("tenants/a"), Path::new("/state/one")).unwrap();
        let _other = Claim::register_in(registry.path(), r("batch/*"), Path::new("/state/two")).unwrap();
        let err = mine.update_claims(r("batch/c")).unwrap_err().to_string();
        assert!(err.contains("/state/two") && err.contains("batch/c"), "{err}");
        mine.update_claims(r("tenants/*")).unwrap(); // overlaps only its own registration
        let err = Claim::register_in(registry.path(), r("tenants/b"), Path::new("/s")).unwrap_err().to_string();
        assert!(err.contains("/state/one"), "the new rules are registered: {err}");
        let text = std::fs::read_to_string(&mine.path).unwrap();
        let registered: Registered = serde_json::from_str(&text).unwrap();
        assert_eq!((registered.claims, registered.state_dir), (r("tenants/*").into(), PathBuf::from("/state/one")));
    }

    /// The last agent out removes the registry, and the parent it made; not a parent it found.
    #[test]
    fn the_last_agent_out_removes_the_registry_and_the_parent_it_made() {
        let (top, root) = (tempfile::tempdir().unwrap(), tree());
        let (parent, registry) = (top.path().join("run"), top.path().join("run/agents"));
        let r = |p: &str| vec![(root.path().to_path_buf(), p.to_string())];
        let first = Claim::register_in(&registry, r("tenants/a"), Path::new("/state/one")).unwrap();
        let second = Claim::register_in(&registry, r("tenants/b"), Path::new("/state/two")).unwrap();
        drop(first);
        assert!(registry.is_dir(), "another agent still runs");
        drop(second);
        assert!(!registry.exists() && !parent.exists(), "the first agent made both: both removed");

        std::fs::create_dir(&parent).unwrap();
        std::fs::write(parent.join("agent.state"), "").unwrap();
        drop(Claim::register_in(&registry, r("tenants/a"), Path::new("/state/one")).unwrap());
        assert!(!registry.exists() && parent.is_dir(), "a parent it found stays");
        std::fs::remove_file(parent.join("agent.state")).unwrap();
        drop(Claim::register_in(&registry, r("tenants/a"), Path::new("/state/one")).unwrap());
        assert!(!registry.exists() && parent.is_dir(), "also when empty: it did not make it");
    }

    /// Agents starting while others exit: each registration lands in a directory that stays (none is
    /// lost to a removal), and the last out leaves nothing.
    #[test]
    fn agents_starting_while_others_exit_never_lose_their_registration() {
        let (top, root) = (tempfile::tempdir().unwrap(), tree());
        let registry = top.path().join("run/agents");
        std::thread::scope(|s| {
            for t in 0..4 {
                let (registry, root) = (&registry, root.path());
                s.spawn(move || {
                    for i in 0..200 {
                        let rules = vec![(root.to_path_buf(), format!("t{t}-{i}"))];
                        let claim = Claim::register_in(registry, rules, Path::new("/state")).unwrap();
                        assert!(claim.path.exists(), "thread {t}, round {i}: registered in a linked directory");
                    }
                });
            }
        });
        assert!(!top.path().join("run").exists(), "the last out removed the registry and its parent");
    }

    #[test]
    fn a_dead_agents_file_is_removed() {
        let (registry, root) = (tempfile::tempdir().unwrap(), tree());
        let rules = vec![(root.path().to_path_buf(), "tenants/*".to_string())];
        let dead = Registered { pid: 1, state_dir: "/state/dead".into(), claims: rules.clone().into() };
        let stale = registry.path().join("1-0.json");
        std::fs::write(&stale, serde_json::to_string(&dead).unwrap()).unwrap();
        let claim = Claim::register_in(registry.path(), rules, Path::new("/state/new")).unwrap();
        assert!(!stale.exists());
        drop(claim);
        assert!(!registry.path().exists(), "its file removed on drop, and the registry, empty, with it");
    }

    /// A pods agent claims kubelet's subtrees: a second one, or a rule reaching into them (matching a
    /// cgroup there now, or able to later), is refused naming the first; rules elsewhere are not.
    #[test]
    fn pods_subtrees_are_claimed_against_other_pods_agents_and_rules_reaching_in() {
        let (registry, root) = (tempfile::tempdir().unwrap(), tree());
        let root = root.path().to_path_buf();
        let pods = |top: &str| Claims {
            rules: Vec::new(),
            subtrees: ["kubepods", "kubepods.slice"].iter().map(|t| (root.clone(), Path::new(top).join(t))).collect(),
        };
        let first = Claim::register_in(registry.path(), pods(""), Path::new("/state/node")).unwrap();
        let refused = |claims: Claims| {
            let err = Claim::register_in(registry.path(), claims, Path::new("/s")).unwrap_err().to_string();
            assert!(err.contains(&format!("pid {}", std::process::id())) && err.contains("/state/node"), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            err
        };
        let err = refused(pods(""));
        assert!(err.contains("kubepods"), "{err}");
        let r = |p: &str| Claims::from(vec![(root.clone(), p.to_string())]);
        for pattern in ["kubepods", "kubepods/*/*", "*/burstable/*", "kubepods.slice/kubepods-burstable.slice/*"] {
            let err = refused(r(pattern));
            assert!(err.contains(pattern), "{pattern}: {err}");
        }
        let _tenants = Claim::register_in(registry.path(), r("tenants/*"), Path::new("/s2")).unwrap();
        let _elsewhere = Claim::register_in(registry.path(), pods("other-root"), Path::new("/s3")).unwrap();
        drop(first);
        let _rule = Claim::register_in(registry.path(), r("kubepods/*/*"), Path::new("/s4")).unwrap();
        let err = Claim::register_in(registry.path(), pods(""), Path::new("/s5")).unwrap_err().to_string();
        assert!(err.contains("/s4") && err.contains("kubepods/*/*"), "the other way round too: {err}");
    }

    /// A configuration with a `[kubernetes]` section claims kubelet's subtrees below its
    /// `cgroup_root` on the IO hierarchy (and the memory one, where the host has it).
    #[test]
    fn a_kubernetes_section_claims_kubelets_subtrees() {
        use ioshare_core::iocost::line::DevNum;
        use ioshare_core::ModelParams;
        let device = crate::desired::config::DeviceConfig {
            device: ioshare_host::DiskId { dev: DevNum { major: 7, minor: 3 }, name: "loop3".into() },
            model: ModelParams::SSD_DFL,
            qos: None,
            tuned: None,
        };
        let kubernetes = ioshare_kube::KubernetesConfig { cgroup_root: "k8s".into(), ..Default::default() };
        let config = Config {
            period: std::time::Duration::from_millis(100),
            devices: vec![device],
            groups: Vec::new(),
            memory_dry_run: false,
            metrics: None,
            kubernetes: Some(kubernetes),
        };
        let h = Hierarchy { flavor: crate::cgroups::hierarchy::Flavor::V1, root: "/sys/fs/cgroup/blkio".into() };
        let c = claims(&config, &h);
        assert!(c.rules.is_empty());
        let io: Vec<&Path> = c.subtrees.iter().filter(|(r, _)| *r == h.root).map(|(_, s)| s.as_path()).collect();
        assert_eq!(io, [Path::new("k8s/kubepods"), Path::new("k8s/kubepods.slice")]);
        let memory = MemoryGuard::hierarchy().map(|(root, _)| root).filter(|r| *r != h.root);
        assert_eq!(c.subtrees.len(), 2 + 2 * usize::from(memory.is_some()), "{c:?}");
    }
}
