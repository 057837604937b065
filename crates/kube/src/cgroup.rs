//! Which cgroups kubelet makes for a pod: the names of both of its cgroup drivers, relative to a
//! hierarchy's root (cgroup v1: the same path under `blkio` and under `memory`; v2: under the unified
//! root), so one layout serves every hierarchy.
//!
//! ```text
//! cgroupfs  kubepods/pod<uid>                                  Guaranteed: directly under kubepods
//!           kubepods/burstable/pod<uid>/<id>                   containerd, docker: the bare id
//!           kubepods/besteffort/pod<uid>/crio-<id>             CRI-O
//! systemd   kubepods.slice/kubepods-pod<uid_>.slice            uid's '-' written as '_'
//!           kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
//!                                                              (crio-<id>.scope, docker-<id>.scope)
//! ```
//! Static pods' cgroups are named after their `kubernetes.io/config.hash`, not the mirror pod's UID
//! ([`crate::pod::PodFacts::cgroup_uid`]). Names taken from the API are checked before they become a
//! path: a UID, hash or container id with anything but letters, digits, `-` and `_` is refused, so no
//! annotation can point the agent at `..`.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Kubelet's cgroup driver (its `cgroupDriver` setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// Plain directories: `kubepods/burstable/pod<uid>`.
    Cgroupfs,
    /// systemd slices and scopes: `kubepods.slice/kubepods-burstable.slice/...`.
    Systemd,
}

impl Driver {
    /// Finds the driver from the tree under `root` (a hierarchy's root, plus kubelet's
    /// `--cgroup-root` if it has one): `kubepods.slice` means systemd, `kubepods` cgroupfs; `None`
    /// while kubelet has made neither; an error when both exist (two kubelets, or a leftover).
    pub fn detect(root: &Path) -> Result<Option<Driver>, String> {
        let systemd = root.join("kubepods.slice").is_dir();
        let cgroupfs = root.join("kubepods").is_dir();
        match (systemd, cgroupfs) {
            (true, true) => Err(format!(
                "both {0}/kubepods and {0}/kubepods.slice exist: set cgroup_driver to the kubelet's cgroupDriver",
                root.display()
            )),
            (true, false) => Ok(Some(Driver::Systemd)),
            (false, true) => Ok(Some(Driver::Cgroupfs)),
            (false, false) => Ok(None),
        }
    }
}

/// A pod's QoS class (`status.qosClass`), which decides its parent cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum QosClass {
    /// Requests equal limits for every resource of every container.
    Guaranteed,
    /// Anything between.
    Burstable,
    /// No requests or limits at all.
    BestEffort,
}

impl QosClass {
    /// Every class.
    pub const ALL: [QosClass; 3] = [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort];

    /// The class from the API's spelling (`Guaranteed`, `Burstable`, `BestEffort`).
    pub fn parse(s: &str) -> Option<QosClass> {
        QosClass::ALL.into_iter().find(|q| q.as_str() == s)
    }

    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// The lower-case name kubelet gives the class's cgroup; `None` for Guaranteed (no cgroup of its own).
    fn cgroup_name(self) -> Option<&'static str> {
        match self {
            QosClass::Guaranteed => None,
            QosClass::Burstable => Some("burstable"),
            QosClass::BestEffort => Some("besteffort"),
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The container runtime, from the scheme of a `containerID` (`containerd://…`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Runtime {
    /// `containerd://`.
    Containerd,
    /// `cri-o://`.
    CriO,
    /// `docker://` (cri-dockerd).
    Docker,
}

/// A running container's id as the pod's status gives it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ContainerId {
    /// Its runtime.
    pub runtime: Runtime,
    /// The id (hex).
    pub id: String,
}

impl ContainerId {
    /// Parses `containerd://<id>`, `cri-o://<id>` or `docker://<id>`.
    pub fn parse(s: &str) -> Result<ContainerId, String> {
        let (scheme, id) = s.split_once("://").ok_or_else(|| format!("container id '{s}' has no runtime scheme"))?;
        let runtime = match scheme {
            "containerd" => Runtime::Containerd,
            "cri-o" => Runtime::CriO,
            "docker" => Runtime::Docker,
            _ => return Err(format!("container id '{s}': unknown runtime '{scheme}' (containerd, cri-o, docker)")),
        };
        check_name("container id", id)?;
        Ok(ContainerId { runtime, id: id.to_string() })
    }
}

/// Where kubelet puts pods: its driver and its `--cgroup-root` (relative to the hierarchy's root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The driver.
    pub driver: Driver,
    /// Kubelet's `--cgroup-root` without the leading `/`; empty for the default (`/`).
    pub root: PathBuf,
}

impl Layout {
    /// The cgroup of all pods of class `qos` (`kubepods/burstable`; `kubepods` for Guaranteed).
    pub fn qos(&self, qos: QosClass) -> PathBuf {
        let mut path = self.root.clone();
        match self.driver {
            Driver::Cgroupfs => {
                path.push("kubepods");
                if let Some(class) = qos.cgroup_name() {
                    path.push(class);
                }
            }
            Driver::Systemd => {
                path.push("kubepods.slice");
                if let Some(class) = qos.cgroup_name() {
                    path.push(format!("kubepods-{class}.slice"));
                }
            }
        }
        path
    }

    /// The pod's cgroup; `uid` is its UID (or a static pod's config hash). An error when `uid`
    /// could not be a UID.
    pub fn pod(&self, qos: QosClass, uid: &str) -> Result<PathBuf, String> {
        check_name("pod uid", uid)?;
        let name = match self.driver {
            Driver::Cgroupfs => format!("pod{uid}"),
            Driver::Systemd => {
                let prefix = qos.cgroup_name().map_or("kubepods".to_string(), |c| format!("kubepods-{c}"));
                format!("{prefix}-pod{}.slice", uid.replace('-', "_"))
            }
        };
        Ok(self.qos(qos).join(name))
    }

    /// A container's cgroup inside its pod's.
    pub fn container(&self, qos: QosClass, uid: &str, container: &ContainerId) -> Result<PathBuf, String> {
        let id = &container.id;
        let name = match (self.driver, container.runtime) {
            (Driver::Cgroupfs, Runtime::Containerd | Runtime::Docker) => id.clone(),
            (Driver::Cgroupfs, Runtime::CriO) => format!("crio-{id}"),
            (Driver::Systemd, Runtime::Containerd) => format!("cri-containerd-{id}.scope"),
            (Driver::Systemd, Runtime::CriO) => format!("crio-{id}.scope"),
            (Driver::Systemd, Runtime::Docker) => format!("docker-{id}.scope"),
        };
        Ok(self.pod(qos, uid)?.join(name))
    }
}

/// Refuses a name that is empty or has anything but ASCII letters, digits, `-` and `_`.
fn check_name(what: &str, s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 128 || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(format!("{what} '{s}' is not a name kubelet gives a cgroup (letters, digits, '-', '_')"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";

    fn layout(driver: Driver) -> Layout {
        Layout { driver, root: PathBuf::new() }
    }

    fn id(s: &str) -> ContainerId {
        ContainerId::parse(s).unwrap()
    }

    #[test]
    fn cgroupfs_paths_put_guaranteed_pods_directly_under_kubepods() {
        let l = layout(Driver::Cgroupfs);
        let cases = [
            (QosClass::Guaranteed, "kubepods", format!("kubepods/pod{UID}")),
            (QosClass::Burstable, "kubepods/burstable", format!("kubepods/burstable/pod{UID}")),
            (QosClass::BestEffort, "kubepods/besteffort", format!("kubepods/besteffort/pod{UID}")),
        ];
        for (qos, class, pod) in cases {
            assert_eq!(l.qos(qos), Path::new(class));
            assert_eq!(l.pod(qos, UID).unwrap(), Path::new(&pod));
        }
        let c = |s: &str| l.container(QosClass::Burstable, UID, &id(s)).unwrap();
        assert_eq!(c("containerd://abc123"), Path::new(&format!("kubepods/burstable/pod{UID}/abc123")));
        assert_eq!(c("docker://abc123"), Path::new(&format!("kubepods/burstable/pod{UID}/abc123")));
        assert_eq!(c("cri-o://abc123"), Path::new(&format!("kubepods/burstable/pod{UID}/crio-abc123")));
    }

    #[test]
    fn systemd_paths_nest_slices_and_escape_the_uid() {
        let l = layout(Driver::Systemd);
        let u = UID.replace('-', "_");
        let cases = [
            (QosClass::Guaranteed, "kubepods.slice", format!("kubepods.slice/kubepods-pod{u}.slice")),
            (
                QosClass::Burstable,
                "kubepods.slice/kubepods-burstable.slice",
                format!("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice"),
            ),
            (
                QosClass::BestEffort,
                "kubepods.slice/kubepods-besteffort.slice",
                format!("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice"),
            ),
        ];
        for (qos, class, pod) in cases {
            assert_eq!(l.qos(qos), Path::new(class));
            assert_eq!(l.pod(qos, UID).unwrap(), Path::new(&pod));
        }
        let pod = format!("kubepods.slice/kubepods-pod{u}.slice");
        let c = |s: &str| l.container(QosClass::Guaranteed, UID, &id(s)).unwrap();
        assert_eq!(c("containerd://ab12"), Path::new(&format!("{pod}/cri-containerd-ab12.scope")));
        assert_eq!(c("cri-o://ab12"), Path::new(&format!("{pod}/crio-ab12.scope")));
        assert_eq!(c("docker://ab12"), Path::new(&format!("{pod}/docker-ab12.scope")));
    }

    #[test]
    fn a_cgroup_root_prefixes_every_path() {
        let l = Layout { driver: Driver::Cgroupfs, root: PathBuf::from("kubelet.slice/nested") };
        assert_eq!(
            l.pod(QosClass::BestEffort, "abc").unwrap(),
            Path::new("kubelet.slice/nested/kubepods/besteffort/podabc")
        );
    }

    #[test]
    fn names_that_could_escape_the_tree_are_refused() {
        let l = layout(Driver::Cgroupfs);
        for bad in ["", "..", "../../etc", "a/b", "a b", "a.b", &"x".repeat(129)] {
            let e = l.pod(QosClass::Burstable, bad).unwrap_err();
            assert!(e.starts_with("pod uid '") && e.contains("not a name"), "{e}");
        }
        for (bad, expect) in [
            ("abc", "has no runtime scheme"),
            ("rkt://abc", "unknown runtime 'rkt'"),
            ("containerd://../x", "not a name"),
            ("containerd://", "not a name"),
        ] {
            let e = ContainerId::parse(bad).unwrap_err();
            assert!(e.contains(expect) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn qos_classes_parse_from_the_api_spelling_only() {
        for q in QosClass::ALL {
            assert_eq!(QosClass::parse(q.as_str()), Some(q));
            assert_eq!(q.to_string(), q.as_str());
        }
        for bad in ["", "guaranteed", "Best-Effort", "Burstable "] {
            assert_eq!(QosClass::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_driver_is_detected_from_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Driver::detect(dir.path()), Ok(None));
        std::fs::create_dir(dir.path().join("kubepods")).unwrap();
        assert_eq!(Driver::detect(dir.path()), Ok(Some(Driver::Cgroupfs)));
        std::fs::create_dir(dir.path().join("kubepods.slice")).unwrap();
        let e = Driver::detect(dir.path()).unwrap_err();
        assert!(e.contains("both") && e.contains("cgroup_driver"), "{e}");
        std::fs::remove_dir(dir.path().join("kubepods")).unwrap();
        assert_eq!(Driver::detect(dir.path()), Ok(Some(Driver::Systemd)));
        // A file of that name is not kubelet's tree.
        let file = tempfile::tempdir().unwrap();
        std::fs::write(file.path().join("kubepods"), "").unwrap();
        assert_eq!(Driver::detect(file.path()), Ok(None));
    }
}
