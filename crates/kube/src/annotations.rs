//! The annotations a pod (or its namespace) writes to ask for isolation.
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     io.ioshare.dev/weight: "300"                          # the pod, among the pods of its QoS class
//!     io.ioshare.dev/limits: "iops-read=5000,bps-write=10485760"   # ioshare's limit syntax
//!     io.ioshare.dev/memory.priority: "8"                   # 0..=12, priority OOM
//!     io.ioshare.dev/memory.wmark_ratio: "80"               # early reclaim from 80% of the limit
//!     io.ioshare.dev/memory.wmark_scale_factor: "50"
//!     io.ioshare.dev/weight.container.db: "800"             # one container, among its pod's containers
//!     blockio.resources.beta.kubernetes.io/pod: gold        # the runtimes' block-IO class names,
//!     blockio.resources.beta.kubernetes.io/container.db: silver   # mapped by the agent config
//! ```
//! The same pod-level keys on a namespace are the defaults of its pods. A key under
//! `io.ioshare.dev/` that names no setting, or a value that does not parse, is reported as a
//! [`Finding`] and otherwise ignored. Annotation names (after the `/`) are at most 63 characters, so
//! a per-container key leaves room for container names of up to 63 − 11 − the setting's name.

use std::collections::BTreeMap;

use crate::finding::{Finding, Reason};
use crate::settings::{Key, Origin, Request};

/// The domain of ioshare's annotations.
pub const DOMAIN: &str = "io.ioshare.dev";
/// The domain of the container runtimes' block-IO class annotations (goresctrl's).
pub const BLOCKIO_DOMAIN: &str = "blockio.resources.beta.kubernetes.io";
/// The separator of a per-container key: `io.ioshare.dev/weight.container.NAME`.
const CONTAINER_INFIX: &str = ".container.";

/// Whom an annotation addresses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The pod's cgroup (or, on a namespace, each of its pods').
    Pod,
    /// One container's cgroup.
    Container(String),
}

/// The annotation key that sets `key` for `scope`.
pub fn annotation(key: Key, scope: &Scope) -> String {
    match scope {
        Scope::Pod => format!("{DOMAIN}/{key}"),
        Scope::Container(name) => format!("{DOMAIN}/{key}{CONTAINER_INFIX}{name}"),
    }
}

/// Reads an annotation key: `None` when it is not under [`DOMAIN`], an error when it is but names
/// no setting.
pub fn parse_key(annotation: &str) -> Option<Result<(Key, Scope), String>> {
    let rest = annotation.strip_prefix(DOMAIN)?.strip_prefix('/')?;
    let (setting, scope) = match rest.split_once(CONTAINER_INFIX) {
        Some((_, "")) => return Some(Err(format!("{annotation} names no container after '{CONTAINER_INFIX}'"))),
        Some((setting, name)) => (setting, Scope::Container(name.to_string())),
        None => (rest, Scope::Pod),
    };
    let names: Vec<&str> = Key::ALL.iter().map(|k| k.name()).collect();
    Some(
        Key::from_name(setting)
            .map(|key| (key, scope))
            .ok_or_else(|| format!("{annotation} is not a setting of ioshare (settings: {})", names.join(", "))),
    )
}

/// Which object the annotations are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Object {
    /// A namespace: pod-level keys only, the defaults of its pods.
    Namespace,
    /// A pod.
    Pod,
}

/// What one object's annotations ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// For the pod (on a namespace: for each of its pods).
    pub pod: Request,
    /// Per container, by name (pods only).
    pub containers: BTreeMap<String, Request>,
    /// Keys and values not taken.
    pub findings: Vec<Finding>,
}

/// Reads ioshare's annotations of one object; every other annotation is left alone.
pub fn read(annotations: &BTreeMap<String, String>, object: Object) -> Asked {
    let mut asked = Asked::default();
    for (name, value) in annotations {
        let (key, scope) = match parse_key(name) {
            None => continue,
            Some(Err(e)) => {
                asked.findings.push(Finding::new(Reason::UnknownAnnotation, format!("{e}: ignored")));
                continue;
            }
            Some(Ok(parsed)) => parsed,
        };
        let origin = match object {
            Object::Namespace => Origin::Namespace { key: name.clone() },
            Object::Pod => Origin::Pod { key: name.clone() },
        };
        let request = match (&scope, object) {
            (Scope::Pod, _) => &mut asked.pod,
            (Scope::Container(_), Object::Namespace) => {
                let msg = format!("namespace annotation {name}: per-container keys are read on pods only: ignored");
                asked.findings.push(Finding::new(Reason::UnknownAnnotation, msg));
                continue;
            }
            (Scope::Container(c), Object::Pod) => asked.containers.entry(c.clone()).or_default(),
        };
        if let Err(e) = request.set(key, value, origin.clone()) {
            let msg = format!("{origin}: {e}: the default applies");
            asked.findings.push(Finding::new(Reason::InvalidAnnotation, msg));
        }
    }
    asked
}

/// The block-IO class names a pod chose (`blockio.resources.beta.kubernetes.io/pod`,
/// `…/container.NAME`), each with the annotation that chose it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockioChoice {
    /// The pod's class: (annotation, class).
    pub pod: Option<(String, String)>,
    /// Per container: name → (annotation, class).
    pub containers: BTreeMap<String, (String, String)>,
}

/// Reads the block-IO class annotations.
pub fn blockio(annotations: &BTreeMap<String, String>) -> BlockioChoice {
    let mut choice = BlockioChoice::default();
    for (name, class) in annotations {
        let Some(rest) = name.strip_prefix(BLOCKIO_DOMAIN).and_then(|r| r.strip_prefix('/')) else { continue };
        let picked = (name.clone(), class.trim().to_string());
        if rest == "pod" {
            choice.pod = Some(picked);
        } else if let Some(container) = rest.strip_prefix("container.").filter(|c| !c.is_empty()) {
            choice.containers.insert(container.to_string(), picked);
        }
    }
    choice
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn keys_parse_for_the_pod_and_per_container() {
        for key in Key::ALL {
            for scope in [Scope::Pod, Scope::Container("db".into()), Scope::Container("web-1".into())] {
                let a = annotation(key, &scope);
                assert_eq!(parse_key(&a), Some(Ok((key, scope))), "{a}");
            }
        }
        assert_eq!(annotation(Key::MemoryPriority, &Scope::Pod), "io.ioshare.dev/memory.priority");
        assert_eq!(annotation(Key::Weight, &Scope::Container("db".into())), "io.ioshare.dev/weight.container.db");
        for other in
            ["ioshare.dev/weight", "io.ioshare.dev.x/weight", "io.ioshare.devweight", "kubernetes.io/weight", ""]
        {
            assert_eq!(parse_key(other), None, "{other}");
        }
        for (bad, expect) in [
            ("io.ioshare.dev/wieght", "io.ioshare.dev/wieght is not a setting of ioshare (settings: weight, limits,"),
            ("io.ioshare.dev/", "is not a setting"),
            ("io.ioshare.dev/weight.container.", "names no container"),
            ("io.ioshare.dev/memory.container.db", "io.ioshare.dev/memory.container.db is not a setting"),
            ("io.ioshare.dev/container.db.weight", "is not a setting"),
        ] {
            let e = parse_key(bad).unwrap().unwrap_err();
            assert!(e.starts_with(expect) || e.contains(expect), "{bad}: {e}");
        }
    }

    #[test]
    fn a_pod_asks_per_pod_and_per_container_and_bad_keys_become_findings() {
        let a = read(
            &map(&[
                ("io.ioshare.dev/weight", "300"),
                ("io.ioshare.dev/limits", "iops-read=5000"),
                ("io.ioshare.dev/memory.priority", "8"),
                ("io.ioshare.dev/weight.container.db", "800"),
                ("io.ioshare.dev/memory.wmark_ratio.container.db", "eighty"),
                ("io.ioshare.dev/colour", "blue"),
                ("app.kubernetes.io/name", "shop"),
            ]),
            Object::Pod,
        );
        let s = a.pod.settings();
        assert_eq!((s.weight, s.memory.unwrap().priority), (300, 8));
        assert!(s.limits.is_limited());
        assert_eq!(a.containers["db"].settings().weight, 800);
        assert_eq!(a.containers["db"].wmark_ratio, None, "the bad value is not taken");
        let messages: Vec<String> = a.findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "UnknownAnnotation: io.ioshare.dev/colour is not a setting of ioshare (settings: weight, limits, \
                 memory.priority, memory.wmark_ratio, memory.wmark_scale_factor): ignored",
                "InvalidAnnotation: annotation io.ioshare.dev/memory.wmark_ratio.container.db: 'eighty' is not a \
                 whole number: the default applies",
            ]
        );
    }

    #[test]
    fn a_namespace_gives_pod_level_defaults_only() {
        let a = read(
            &map(&[("io.ioshare.dev/weight", "50"), ("io.ioshare.dev/weight.container.db", "800")]),
            Object::Namespace,
        );
        assert_eq!(a.pod.weight.as_ref().unwrap().origin, Origin::Namespace { key: "io.ioshare.dev/weight".into() });
        assert!(a.containers.is_empty());
        assert_eq!(a.findings.len(), 1);
        assert!(a.findings[0].message.contains("per-container keys are read on pods only"), "{}", a.findings[0]);
    }

    #[test]
    fn blockio_classes_are_read_for_the_pod_and_containers() {
        let c = blockio(&map(&[
            ("blockio.resources.beta.kubernetes.io/pod", " gold "),
            ("blockio.resources.beta.kubernetes.io/container.db", "silver"),
            ("blockio.resources.beta.kubernetes.io/container.", "ignored"),
            ("blockio.resources.beta.kubernetes.io/other", "ignored"),
            ("io.ioshare.dev/weight", "5"),
        ]));
        assert_eq!(c.pod, Some(("blockio.resources.beta.kubernetes.io/pod".into(), "gold".into())));
        assert_eq!(c.containers.len(), 1);
        assert_eq!(c.containers["db"].1, "silver");
        assert_eq!(blockio(&BTreeMap::new()), BlockioChoice::default());
    }
}
