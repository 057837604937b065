//! The agent config's `[kubernetes]` section: where the API server and the pods' cgroups are, the
//! admin's defaults per QoS class, the block-IO class table, and the policies that bound what tenants
//! may ask for.
//!
//! ```toml
//! [kubernetes]
//! node_name = "node-1"            # default: $NODE_NAME (the downward API), else the host name
//! kubeconfig = "/etc/kubeconfig"  # default: in-cluster credentials, else $KUBECONFIG or ~/.kube/config
//! cgroup_driver = "auto"          # cgroupfs | systemd | auto (from the tree: kubepods or kubepods.slice)
//! cgroup_root = ""                # kubelet's --cgroup-root, if not "/"
//! events = true                   # record findings as Events on the pods
//!
//! [kubernetes.qos.guaranteed]     # defaults per QoS class (guaranteed, burstable, besteffort):
//! weight = 400                    # the same keys as an annotation, as in a [[groups]] rule
//! memory = { priority = 10 }
//! [kubernetes.qos.besteffort]
//! weight = 50
//! limits = "iops-total=2000"
//! class_weight = 25               # the weight of the class's own cgroup (kubepods/besteffort)
//!                                 # against the burstable one and each Guaranteed pod
//!
//! [kubernetes.blockio_classes.gold]   # blockio.resources.beta.kubernetes.io/pod: gold
//! weight = 800
//!
//! [[kubernetes.policies]]         # the first policy that matches a pod's namespace bounds it
//! name = "tenants"
//! namespaces = ["team-*"]         # globs; and/or
//! namespace_selector = "tier=tenant"   # a label selector on the namespace's labels
//! weight = [10, 500]              # the weight range tenants may ask for (clamped)
//! raise_limits = false            # may tenants loosen or drop their QoS default's limits?
//! memory_priority = [0, 6]        # the memory priority range (clamped)
//! ```
//! Every value is checked when the section is read ([`KubernetesConfig`] deserializes only when
//! valid); an error names the key (`kubernetes.qos.burstable.weight: ...`) in one line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ioshare_core::{Limits, WEIGHT_MAX, WEIGHT_MIN};
use ioshare_memory::PRIORITY_MAX;
use serde::Deserialize;

use crate::cgroup::{Driver, QosClass};
use crate::selector::Selector;
use crate::settings::{Key, Origin, Request};
use ioshare_host::glob_matches;

/// Which cgroup driver kubelet uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriverChoice {
    /// Found from the tree (`kubepods.slice` or `kubepods`).
    #[default]
    Auto,
    /// kubelet's `cgroupDriver: cgroupfs`.
    Cgroupfs,
    /// kubelet's `cgroupDriver: systemd`.
    Systemd,
}

impl DriverChoice {
    /// The driver named, if one is.
    pub fn fixed(self) -> Option<Driver> {
        match self {
            DriverChoice::Auto => None,
            DriverChoice::Cgroupfs => Some(Driver::Cgroupfs),
            DriverChoice::Systemd => Some(Driver::Systemd),
        }
    }
}

/// Settings an admin gives a QoS class or a block-IO class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// The settings, each with this rule as its origin.
    pub request: Request,
    /// The weight of the QoS class's own cgroup (QoS defaults of Burstable and BestEffort only).
    pub class_weight: Option<u32>,
}

/// Bounds on what the pods of some namespaces may ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Its name in findings (`policies[N]` when not given).
    pub name: String,
    /// Namespace name globs; empty: any namespace.
    pub namespaces: Vec<String>,
    /// A selector on the namespace's labels; `None`: any labels.
    pub namespace_selector: Option<Selector>,
    /// The weights a pod may have, inclusive.
    pub weight: (u32, u32),
    /// Whether a pod may loosen or drop the limits of its QoS default.
    pub raise_limits: bool,
    /// The memory priorities a pod may have, inclusive.
    pub memory_priority: (u8, u8),
}

impl Policy {
    /// Whether the policy covers a namespace of this name and these labels.
    pub fn covers(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.namespaces.is_empty() || self.namespaces.iter().any(|p| glob_matches(p, namespace)))
            && self.namespace_selector.as_ref().is_none_or(|s| s.matches(labels))
    }
}

/// The validated `[kubernetes]` section.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawConfig")]
pub struct KubernetesConfig {
    /// The node whose pods to watch; `None`: `$NODE_NAME`, else the host name (see [`Self::node`]).
    pub node_name: Option<String>,
    /// A kubeconfig file; `None`: in-cluster credentials, else the usual kubeconfig.
    pub kubeconfig: Option<PathBuf>,
    /// Kubelet's cgroup driver.
    pub cgroup_driver: DriverChoice,
    /// Kubelet's `--cgroup-root`, relative (no leading `/`); empty for the default.
    pub cgroup_root: PathBuf,
    /// Whether findings are recorded as Events on the pods.
    pub events: bool,
    /// The admin's defaults per QoS class.
    pub qos: BTreeMap<QosClass, Rule>,
    /// The block-IO classes pods may choose, by name.
    pub blockio_classes: BTreeMap<String, Rule>,
    /// Policies, first match wins.
    pub policies: Vec<Policy>,
}

impl Default for KubernetesConfig {
    /// No defaults, no classes, no policies; everything else found at run time.
    fn default() -> Self {
        RawConfig::default().try_into().expect("the empty section is valid")
    }
}

impl KubernetesConfig {
    /// The node to watch: `node_name`, else `$NODE_NAME`, else the host name.
    pub fn node(&self) -> Result<String, String> {
        if let Some(n) = &self.node_name {
            return Ok(n.clone());
        }
        if let Some(n) = std::env::var("NODE_NAME").ok().filter(|n| !n.trim().is_empty()) {
            return Ok(n.trim().to_string());
        }
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| "no node name: set kubernetes.node_name or NODE_NAME".to_string())
    }

    /// The admin's default request for a QoS class (empty when the config gives none).
    pub fn qos_default(&self, qos: QosClass) -> Request {
        self.qos.get(&qos).map(|r| r.request.clone()).unwrap_or_default()
    }

    /// The first policy covering the namespace, if any.
    pub fn policy_for(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Option<&Policy> {
        self.policies.iter().find(|p| p.covers(namespace, labels))
    }
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    node_name: Option<String>,
    kubeconfig: Option<PathBuf>,
    #[serde(default)]
    cgroup_driver: DriverChoice,
    #[serde(default)]
    cgroup_root: String,
    events: Option<bool>,
    #[serde(default)]
    qos: RawQos,
    #[serde(default)]
    blockio_classes: BTreeMap<String, RawRule>,
    #[serde(default)]
    policies: Vec<RawPolicy>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQos {
    guaranteed: Option<RawRule>,
    burstable: Option<RawRule>,
    besteffort: Option<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    weight: Option<i64>,
    limits: Option<String>,
    memory: Option<RawMemory>,
    class_weight: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    priority: Option<i64>,
    wmark_ratio: Option<i64>,
    wmark_scale_factor: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Option<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    namespace_selector: Option<String>,
    weight: Option<[i64; 2]>,
    raise_limits: Option<bool>,
    memory_priority: Option<[i64; 2]>,
}

impl RawRule {
    /// The rule, its values checked by the same parser as annotations; `at` names it in errors.
    fn check(self, at: &str, origin: &Origin, class_weight_allowed: bool) -> Result<Rule, String> {
        let mut request = Request::default();
        let memory = self.memory.unwrap_or(RawMemory { priority: None, wmark_ratio: None, wmark_scale_factor: None });
        let numbers = [
            (Key::Weight, self.weight),
            (Key::MemoryPriority, memory.priority),
            (Key::WmarkRatio, memory.wmark_ratio),
            (Key::WmarkScaleFactor, memory.wmark_scale_factor),
        ];
        for (key, value) in numbers.into_iter().filter_map(|(k, v)| Some((k, v?))) {
            request.set(key, &value.to_string(), origin.clone()).map_err(|e| format!("{at}.{key}: {e}"))?;
        }
        if let Some(limits) = &self.limits {
            request.set(Key::Limits, limits, origin.clone()).map_err(|e| format!("{at}.limits: {e}"))?;
        }
        let class_weight = match self.class_weight {
            None => None,
            Some(_) if !class_weight_allowed => {
                return Err(format!(
                    "{at}.class_weight: only the burstable and besteffort classes have a cgroup of their own \
                     (Guaranteed pods sit directly in kubepods)"
                ))
            }
            Some(w) => {
                Some(u32::try_from(w).ok().filter(|w| (WEIGHT_MIN..=WEIGHT_MAX).contains(w)).ok_or_else(|| {
                    format!("{at}.class_weight: {w} is out of range: weights are {WEIGHT_MIN}..={WEIGHT_MAX}")
                })?)
            }
        };
        Ok(Rule { request, class_weight })
    }
}

/// An inclusive range `[lo, hi]` within `lo_max..=hi_max`.
fn range<T: TryFrom<i64> + Copy>(at: &str, r: Option<[i64; 2]>, min: i64, max: i64) -> Result<(T, T), String> {
    let [lo, hi] = r.unwrap_or([min, max]);
    if lo > hi || lo < min || hi > max {
        return Err(format!("{at}: [{lo}, {hi}] is not a range within [{min}, {max}] (use [low, high])"));
    }
    let conv = |v: i64| T::try_from(v).map_err(|_| format!("{at}: {v} is out of range"));
    Ok((conv(lo)?, conv(hi)?))
}

impl TryFrom<RawConfig> for KubernetesConfig {
    type Error = String;

    fn try_from(raw: RawConfig) -> Result<Self, String> {
        if raw.node_name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err("kubernetes.node_name: empty (leave it out to use $NODE_NAME or the host name)".into());
        }
        let mut qos = BTreeMap::new();
        for (class, rule) in [
            (QosClass::Guaranteed, raw.qos.guaranteed),
            (QosClass::Burstable, raw.qos.burstable),
            (QosClass::BestEffort, raw.qos.besteffort),
        ] {
            if let Some(rule) = rule {
                let at = format!("kubernetes.qos.{}", class.as_str().to_ascii_lowercase());
                qos.insert(class, rule.check(&at, &Origin::QosDefault(class), class != QosClass::Guaranteed)?);
            }
        }
        let mut blockio_classes = BTreeMap::new();
        for (name, rule) in raw.blockio_classes {
            let at = format!("kubernetes.blockio_classes.{name}");
            // The origin's annotation is filled in when a pod chooses the class.
            let origin = Origin::BlockioClass { class: name.clone(), annotation: String::new() };
            blockio_classes.insert(name, rule.check(&at, &origin, false)?);
        }
        let mut policies = Vec::new();
        for (i, p) in raw.policies.into_iter().enumerate() {
            let at = format!("kubernetes.policies[{i}]");
            let namespace_selector = match p.namespace_selector {
                Some(s) => Some(s.parse::<Selector>().map_err(|e| format!("{at}.namespace_selector: {e}"))?),
                None => None,
            };
            policies.push(Policy {
                name: p.name.unwrap_or_else(|| format!("policies[{i}]")),
                namespaces: p.namespaces,
                namespace_selector,
                weight: range(&format!("{at}.weight"), p.weight, WEIGHT_MIN.into(), WEIGHT_MAX.into())?,
                raise_limits: p.raise_limits.unwrap_or(true),
                memory_priority: range(&format!("{at}.memory_priority"), p.memory_priority, 0, PRIORITY_MAX.into())?,
            });
        }
        let cgroup_root = raw.cgroup_root.trim().trim_matches('/');
        if cgroup_root.split('/').any(|c| c == ".." || c == ".") {
            return Err(format!("kubernetes.cgroup_root: '{}' must not contain '.' or '..'", raw.cgroup_root));
        }
        Ok(KubernetesConfig {
            node_name: raw.node_name.map(|n| n.trim().to_string()),
            kubeconfig: raw.kubeconfig,
            cgroup_driver: raw.cgroup_driver,
            cgroup_root: PathBuf::from(cgroup_root),
            events: raw.events.unwrap_or(true),
            qos,
            blockio_classes,
            policies,
        })
    }
}

/// The limits of a QoS default (what a pod may not loosen when its policy says so).
pub fn baseline_limits(config: &KubernetesConfig, qos: QosClass) -> Limits {
    config.qos_default(qos).settings().limits
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::limit::Knob;

    fn parse(text: &str) -> Result<KubernetesConfig, String> {
        #[derive(Deserialize)]
        struct File {
            kubernetes: KubernetesConfig,
        }
        toml::from_str::<File>(text).map(|f| f.kubernetes).map_err(|e| e.message().to_string())
    }

    const FULL: &str = r#"
[kubernetes]
node_name = "node-1"
kubeconfig = "/etc/kubeconfig"
cgroup_driver = "systemd"
cgroup_root = "/nested/"
events = false
[kubernetes.qos.guaranteed]
weight = 400
memory = { priority = 10 }
[kubernetes.qos.besteffort]
weight = 50
limits = "iops-total=2000"
class_weight = 25
[kubernetes.blockio_classes.gold]
weight = 800
memory = { wmark_ratio = 80, wmark_scale_factor = 20 }
[[kubernetes.policies]]
name = "tenants"
namespaces = ["team-*"]
namespace_selector = "tier=tenant"
weight = [10, 500]
raise_limits = false
memory_priority = [0, 6]
[[kubernetes.policies]]
"#;

    #[test]
    fn a_full_section_is_read() {
        let c = parse(FULL).unwrap();
        assert_eq!(c.node().unwrap(), "node-1");
        assert_eq!(c.kubeconfig, Some(PathBuf::from("/etc/kubeconfig")));
        assert_eq!(c.cgroup_driver.fixed(), Some(Driver::Systemd));
        assert_eq!(c.cgroup_root, PathBuf::from("nested"));
        assert!(!c.events);
        let g = c.qos_default(QosClass::Guaranteed).settings();
        assert_eq!((g.weight, g.memory.unwrap().priority), (400, 10));
        assert_eq!(c.qos[&QosClass::BestEffort].class_weight, Some(25));
        assert_eq!(baseline_limits(&c, QosClass::BestEffort).knob(Knob::IopsTotal).avg, 2000);
        assert!(!baseline_limits(&c, QosClass::Burstable).is_limited());
        assert_eq!(c.blockio_classes["gold"].request.settings().memory.unwrap().wmark_ratio, 80);
        let p = &c.policies[0];
        assert_eq!(
            (p.name.as_str(), p.weight, p.raise_limits, p.memory_priority),
            ("tenants", (10, 500), false, (0, 6))
        );
        let open = &c.policies[1];
        assert_eq!(
            (open.name.as_str(), open.weight, open.raise_limits, open.memory_priority),
            ("policies[1]", (1, 10000), true, (0, 12))
        );
        // An empty section: nothing but defaults.
        let empty = parse("[kubernetes]\n").unwrap();
        assert_eq!(empty, KubernetesConfig::default());
        assert!(empty.events && empty.qos.is_empty() && empty.policies.is_empty());
        assert_eq!(empty.cgroup_driver, DriverChoice::Auto);
    }

    #[test]
    fn policies_cover_by_name_glob_and_namespace_labels() {
        let c = parse(FULL).unwrap();
        let tenant: BTreeMap<String, String> = [("tier".to_string(), "tenant".to_string())].into();
        let none = BTreeMap::new();
        assert_eq!(c.policy_for("team-a", &tenant).unwrap().name, "tenants");
        assert_eq!(c.policy_for("team-a", &none).unwrap().name, "policies[1]", "selector unmet: next policy");
        assert_eq!(c.policy_for("ops", &tenant).unwrap().name, "policies[1]", "name unmet: next policy");
        assert!(KubernetesConfig::default().policy_for("x", &none).is_none());
    }

    #[test]
    fn bad_values_name_their_key_in_one_line() {
        let with = |extra: &str| parse(&format!("[kubernetes]\n{extra}"));
        for (extra, expect) in [
            ("[kubernetes.qos.burstable]\nweight = 0", "kubernetes.qos.burstable.weight: '0' is not a weight"),
            ("[kubernetes.qos.burstable]\nlimits = \"iops=x\"", "kubernetes.qos.burstable.limits: "),
            (
                "[kubernetes.qos.burstable]\nmemory = { priority = 13 }",
                "kubernetes.qos.burstable.memory.priority: '13'",
            ),
            (
                "[kubernetes.qos.burstable]\nmemory = { wmark_ratio = 101 }",
                "kubernetes.qos.burstable.memory.wmark_ratio: ",
            ),
            ("[kubernetes.qos.burstable]\nmemory = { prio = 1 }", "unknown field `prio`"),
            (
                "[kubernetes.qos.burstable]\nclass_weight = 0",
                "kubernetes.qos.burstable.class_weight: 0 is out of range",
            ),
            (
                "[kubernetes.qos.guaranteed]\nclass_weight = 10",
                "kubernetes.qos.guaranteed.class_weight: only the burstable",
            ),
            ("[kubernetes.qos.bursty]\nweight = 1", "unknown field `bursty`"),
            ("[kubernetes.blockio_classes.gold]\nweight = 10001", "kubernetes.blockio_classes.gold.weight: "),
            (
                "[kubernetes.blockio_classes.gold]\nclass_weight = 10",
                "kubernetes.blockio_classes.gold.class_weight: only",
            ),
            (
                "[[kubernetes.policies]]\nweight = [500, 10]",
                "kubernetes.policies[0].weight: [500, 10] is not a range within [1, 10000]",
            ),
            ("[[kubernetes.policies]]\nweight = [0, 10]", "kubernetes.policies[0].weight: [0, 10]"),
            ("[[kubernetes.policies]]\nmemory_priority = [0, 13]", "kubernetes.policies[0].memory_priority: [0, 13]"),
            (
                "[[kubernetes.policies]]\nnamespace_selector = \"a in (b\"",
                "kubernetes.policies[0].namespace_selector: invalid label selector",
            ),
            ("[[kubernetes.policies]]\nweigth = [1, 2]", "unknown field `weigth`"),
            ("cgroup_driver = \"cgroupv2\"", "unknown variant `cgroupv2`"),
            ("cgroup_root = \"a/../b\"", "kubernetes.cgroup_root: 'a/../b' must not contain"),
            ("node_name = \" \"", "kubernetes.node_name: empty"),
            ("colour = 1", "unknown field `colour`"),
        ] {
            let e = with(extra).unwrap_err();
            assert!(e.contains(expect), "{extra}: expected '{expect}' in '{e}'");
            assert!(!e.trim_end().contains('\n'), "{e}");
        }
    }
}
