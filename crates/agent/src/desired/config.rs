//! The agent's desired state: one TOML file, validated completely before anything is applied.
//!
//! ```toml
//! period_ms = 100                  # userspace backend: planning period (default 100, 20..=10000)
//!
//! [[devices]]                      # none: the memory guard alone (rules need `memory` then)
//! path = "/dev/loop3"              # block device path or MAJ:MIN (a whole device)
//! model = "ssd_dfl"                # a built-in set, an io.cost.model line, "profile" (measured
//!                                  # at start, read-only, cached: see [`crate::desired::profile`]),
//!                                  # or "tune:FILE[#SOLUTION]" (see [`crate::desired::tuned`])
//! qos = "rpct=95 rlat=5000 wpct=95 wlat=5000 min=50 max=150"   # optional io.cost.qos line (or tune:…)
//!
//! [[groups]]
//! cgroup = "tenants/*"             # relative to the blkio (v1) or unified (v2) root; * and ? globs
//! weight = 300                     # 1..=10000, default 100
//! limits = "iops-read=5000"        # optional, ioshare's limit syntax: fixed caps on every device
//! memory = { priority = 8, wmark_ratio = 80, wmark_scale_factor = 50, limit = "2G" }   # optional
//!                                  # also oom_group = true (kill the group whole), oom_pressure = 10
//!                                  # (cgroup v2: % of PSI memory full that triggers priority OOM)
//!
//! [metrics]                        # optional: serve Prometheus metrics ([`crate::report::metrics`])
//! listen = "127.0.0.1:9436"        # HOST:PORT, or a bare PORT (127.0.0.1); no section: no endpoint
//!
//! [kubernetes]                     # optional: pods bound to this node declare their own settings
//! node_name = "node-1"             # (see ioshare_kube::config for every key; [`crate::desired::pods`])
//! ```
//! With a `[kubernetes]` section the `[[groups]]` may be left out: the pods are the groups.
//!
//! Every error is one line, `FILE:LINE: key: what is wrong`: TOML syntax and unknown keys from the
//! parser's span, values from the span of the value (each field is `toml::Spanned`). Devices with
//! `model = "profile"` are measured last, once everything else in the file is known to be valid.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ioshare_core::iocost::qos::QosConfig;
use ioshare_core::{Limits, ModelConfig, ModelParams, QosParams, WEIGHT_DEFAULT, WEIGHT_MAX, WEIGHT_MIN};
use ioshare_host::{check_pattern, DiskId};
use ioshare_kube::KubernetesConfig;
use ioshare_memory::MemorySettings;
use serde::Deserialize;
use toml::Spanned;

use crate::desired::profile::{Cached, Measure, NotMeasured, Profiler};
use crate::desired::tuned::{tuned_lines, Tuned};
use crate::error::{Error, Result};

/// Default planning period of the userspace backend.
pub const PERIOD_DEFAULT_MS: u64 = 100;

/// One device under control.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceConfig {
    /// The device.
    pub device: DiskId,
    /// Its cost model.
    pub model: ModelParams,
    /// Latency QoS, if given.
    pub qos: Option<QosParams>,
    /// The tune result its lines came from, if one gave them.
    pub tuned: Option<Tuned>,
}

/// One group rule: the cgroups a pattern matches get this weight and these limits.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupConfig {
    /// Pattern relative to the hierarchy's root (`tenants/*`).
    pub cgroup: String,
    /// Weight, 1..=10000.
    pub weight: u32,
    /// Fixed caps (the agent never lets a cgroup exceed them).
    pub limits: Limits,
    /// Memory isolation (priority OOM, early reclaim), if the rule asks for it.
    pub memory: Option<MemorySettings>,
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Planning period of the userspace backend.
    pub period: Duration,
    /// Devices, in file order.
    pub devices: Vec<DeviceConfig>,
    /// Group rules, in file order (the first that matches a cgroup wins).
    pub groups: Vec<GroupConfig>,
    /// Memory guard: log OOM decisions, kill and reclaim nothing (`ioshare agent run --dry-run`).
    pub memory_dry_run: bool,
    /// Where to serve Prometheus metrics (`None`: nowhere).
    pub metrics: Option<SocketAddr>,
    /// The pods of this node as a source of groups (`None`: no `[kubernetes]` section).
    pub kubernetes: Option<KubernetesConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    period_ms: Option<Spanned<u64>>,
    #[serde(default)]
    devices: Vec<Spanned<RawDevice>>,
    #[serde(default)]
    groups: Vec<Spanned<RawGroup>>,
    metrics: Option<RawMetrics>,
    kubernetes: Option<KubernetesConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    listen: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    path: Spanned<String>,
    model: Spanned<String>,
    qos: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    cgroup: Spanned<String>,
    weight: Option<Spanned<i64>>,
    limits: Option<Spanned<String>>,
    memory: Option<Spanned<MemorySettings>>,
}

impl Config {
    /// Reads and validates `file` without measuring: `model = "profile"` is refused (that is
    /// measured at the agent's start, [`Config::load_profiling`]).
    pub fn load(file: &Path) -> Result<Config> {
        Config::parse(&read(file)?, file)
    }

    /// Reads and validates `file`, then measures the devices with `model = "profile"` with the
    /// engine's profiler (read-only, see [`crate::desired::profile`]), each once: the model is kept in
    /// `cache_dir` and reused while the device is the same one. `progress` gets a line per run;
    /// raising `stop` ends the measurement with an error.
    pub fn load_profiling(file: &Path, cache_dir: &Path, stop: &AtomicBool, progress: &dyn Fn(&str)) -> Result<Config> {
        let profiler = Profiler::new(stop, progress);
        Config::parse_with(&read(file)?, file, &Cached::new(cache_dir, &profiler))
    }

    /// Reads and validates `file` without measuring: `model = "profile"` takes the model an earlier
    /// start cached in `cache_dir`, and is refused where there is none (`ioshare agent check`, and a
    /// running agent's reload: measuring would take the device from the tenants for seconds).
    pub fn load_cached(file: &Path, cache_dir: &Path) -> Result<Config> {
        Config::parse_with(&read(file)?, file, &Cached::new(cache_dir, &NotMeasured))
    }

    /// Validates the text of a configuration; `file` names it in errors; `model = "profile"` is
    /// refused.
    pub fn parse(text: &str, file: &Path) -> Result<Config> {
        Config::parse_with(text, file, &NotMeasured)
    }

    /// Validates the text of a configuration, then measures the devices with `model = "profile"`
    /// with `measurer` (a failure names the device's `model` line).
    pub fn parse_with(text: &str, file: &Path, measurer: &dyn Measure) -> Result<Config> {
        let err = |offset: usize, key: &str, msg: String| Error::Config {
            file: file.to_path_buf(),
            line: line_of(text, offset),
            key: key.to_string(),
            msg,
        };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            let key = key_at(text, offset);
            err(offset, &key, e.message().trim().replace('\n', "; "))
        })?;
        let period_ms = match &raw.period_ms {
            Some(p) if !(20..=10_000).contains(p.get_ref()) => {
                return Err(err(
                    p.span().start,
                    "period_ms",
                    format!("{} is out of range: use 20..=10000", p.get_ref()),
                ))
            }
            Some(p) => *p.get_ref(),
            None => PERIOD_DEFAULT_MS,
        };
        if raw.groups.is_empty() && raw.kubernetes.is_none() {
            return Err(err(
                0,
                "groups",
                "no [[groups]] table and no [kubernetes] section: name at least one cgroup pattern".into(),
            ));
        }
        let mut devices: Vec<DeviceConfig> = Vec::new();
        // Devices to measure once the rest is valid: (index in `devices`, offset of the model value).
        let mut to_measure: Vec<(usize, usize)> = Vec::new();
        for d in &raw.devices {
            let d = d.get_ref();
            let at = |s: &Spanned<String>| s.span().start;
            let device = DiskId::resolve(d.path.get_ref()).map_err(|e| err(at(&d.path), "path", e.to_string()))?;
            if devices.iter().any(|x| x.device.dev == device.dev) {
                return Err(err(at(&d.path), "path", format!("device {} is listed twice", device.dev)));
            }
            let config_dir = file.parent().unwrap_or(Path::new("."));
            let tuned = |s: &Spanned<String>, key: &str| {
                tuned_lines(s.get_ref(), config_dir).transpose().map_err(|m| err(at(s), key, m))
            };
            let tuned_model = tuned(&d.model, "model")?;
            let model = if let Some(t) = &tuned_model {
                parse_model(&t.model_line, &device).map_err(|m| err(at(&d.model), "model", m))?
            } else if d.model.get_ref().trim() == "profile" {
                to_measure.push((devices.len(), at(&d.model)));
                ModelParams::SSD_DFL // replaced by the measurement below
            } else {
                parse_model(d.model.get_ref(), &device).map_err(|m| err(at(&d.model), "model", m))?
            };
            // A tuned model brings its solution's QoS unless the file names another.
            let tuned_qos = match &d.qos {
                Some(q) => tuned(q, "qos")?,
                None => tuned_model.clone(),
            };
            let qos = match (&tuned_qos, &d.qos) {
                (Some(t), q) => {
                    let at_qos = q.as_ref().map_or(at(&d.model), at);
                    Some(parse_qos(&t.qos_line, &device).map_err(|m| err(at_qos, "qos", m))?)
                }
                (None, Some(q)) => Some(parse_qos(q.get_ref(), &device).map_err(|m| err(at(q), "qos", m))?),
                (None, None) => None,
            };
            let tuned = tuned_model.or(tuned_qos).map(|t| t.source);
            devices.push(DeviceConfig { device, model, qos, tuned });
        }
        let mut groups: Vec<GroupConfig> = Vec::new();
        for g in &raw.groups {
            let group = group_config(g.get_ref(), &err)?;
            if groups.iter().any(|x| x.cgroup == group.cgroup) {
                let cgroup = &group.cgroup;
                return Err(err(g.get_ref().cgroup.span().start, "cgroup", format!("'{cgroup}' is listed twice")));
            }
            groups.push(group);
        }
        if devices.is_empty() && groups.iter().all(|g| g.memory.is_none()) {
            return Err(err(
                0,
                "devices",
                "nothing to control: no [[devices]] table for IO and no rule with memory settings; add a [[devices]] \
                 table, or `memory = { ... }` to a rule for the memory guard alone"
                    .into(),
            ));
        }
        let metrics = match &raw.metrics {
            Some(m) => Some(ioshare_observe::endpoint::parse_addr(m.listen.get_ref()).ok_or_else(|| {
                err(
                    m.listen.span().start,
                    "listen",
                    format!(
                        "'{}': give PORT (127.0.0.1 only) or IP:PORT, like 9436 or 127.0.0.1:9436",
                        m.listen.get_ref()
                    ),
                )
            })?),
            None => None,
        };
        for (i, offset) in to_measure {
            devices[i].model = measurer.measure(&devices[i].device).map_err(|m| err(offset, "model", m))?;
        }
        let kubernetes = raw.kubernetes;
        Ok(Config {
            period: Duration::from_millis(period_ms),
            devices,
            groups,
            memory_dry_run: false,
            metrics,
            kubernetes,
        })
    }
}

/// One `[[groups]]` table, validated; `err` makes the error of a key at an offset of the file.
fn group_config(g: &RawGroup, err: &dyn Fn(usize, &str, String) -> Error) -> Result<GroupConfig> {
    let cgroup = g.cgroup.get_ref().trim_end_matches('/').to_string();
    check_pattern(&cgroup).map_err(|e| err(g.cgroup.span().start, "cgroup", e.to_string()))?;
    let weight = match &g.weight {
        Some(w) => {
            let v = *w.get_ref();
            u32::try_from(v).ok().filter(|v| (WEIGHT_MIN..=WEIGHT_MAX).contains(v)).ok_or_else(|| {
                err(w.span().start, "weight", format!("{v} is out of range: weights are {WEIGHT_MIN}..={WEIGHT_MAX}"))
            })?
        }
        None => WEIGHT_DEFAULT,
    };
    let limits = match &g.limits {
        Some(l) => {
            let limits: Limits =
                l.get_ref().parse().map_err(|e: ioshare_core::Error| err(l.span().start, "limits", e.to_string()))?;
            limits.validate().map_err(|e| err(l.span().start, "limits", e.to_string()))?;
            limits
        }
        None => Limits::default(),
    };
    let memory = match &g.memory {
        Some(m) => {
            m.get_ref().validate().map_err(|e| err(m.span().start, "memory", e.to_string()))?;
            Some(*m.get_ref())
        }
        None => None,
    };
    Ok(GroupConfig { cgroup, weight, limits, memory })
}

/// The text of `file`.
fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).map_err(|reason| Error::ReadConfig { file: file.to_path_buf(), reason })
}

/// A device's model from the `model` value: a built-in set name, or an io.cost.model line.
fn parse_model(value: &str, device: &DiskId) -> std::result::Result<ModelParams, String> {
    let line: ModelConfig = value.parse().map_err(|e: ioshare_core::Error| e.to_string())?;
    match line.device {
        Some(d) if d != device.dev => {
            Err(format!("the line names device {d} but this entry is {} ({})", device.dev, device.name))
        }
        _ => Ok(line.params),
    }
}

/// A device's QoS from an io.cost.qos line.
fn parse_qos(value: &str, device: &DiskId) -> std::result::Result<QosParams, String> {
    let line: QosConfig = value.parse().map_err(|e: ioshare_core::Error| e.to_string())?;
    match line.device {
        Some(d) if d != device.dev => {
            Err(format!("the line names device {d} but this entry is {} ({})", device.dev, device.name))
        }
        _ => Ok(line.params),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The key set on the line at `offset` (for parser errors), or `toml` when the line sets none.
fn key_at(text: &str, offset: usize) -> String {
    let line = text.lines().nth(line_of(text, offset) - 1).unwrap_or("");
    match line.split_once('=') {
        Some((k, _)) if !k.trim().is_empty() && !k.contains('[') => k.trim().to_string(),
        _ => "toml".to_string(),
    }
}

/// The default state directory.
pub fn default_state_dir() -> PathBuf {
    PathBuf::from("/run/ioshare")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block device every Linux host has: the first entry of /sys/block.
    fn some_device() -> String {
        let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
        std::fs::read_to_string(entry.path().join("dev")).unwrap().trim().to_string()
    }

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("agent.toml"))
    }

    fn good() -> String {
        format!(
            "period_ms = 200\n[[devices]]\npath = \"{}\"\nmodel = \"ssd_dfl rrandiops=40000\"\nqos = \"rpct=95 rlat=5000\"\n\
             [[groups]]\ncgroup = \"tenants/*\"\nweight = 300\nlimits = \"iops-read=5000\"\n[[groups]]\ncgroup = \"system\"\n",
            some_device()
        )
    }

    #[test]
    fn a_good_file_is_read_whole() {
        let c = parse(&good()).unwrap();
        assert_eq!(c.period, Duration::from_millis(200));
        assert_eq!(c.devices[0].model.rrandiops, 40_000);
        assert_eq!(c.devices[0].qos.unwrap().rlat_us, 5000);
        assert_eq!((c.groups[0].weight, c.groups[1].weight), (300, WEIGHT_DEFAULT));
        assert!(c.groups[0].limits.is_limited() && !c.groups[1].limits.is_limited());
        assert_eq!(c.metrics, None, "no [metrics] section: no endpoint");
    }

    #[test]
    fn metrics_listen_on_localhost_unless_an_address_is_spelled_out() {
        let with = |listen: &str| parse(&format!("{}[metrics]\nlisten = \"{listen}\"\n", good()));
        assert_eq!(with("9436").unwrap().metrics, Some(SocketAddr::from(([127, 0, 0, 1], 9436))));
        assert_eq!(with("0.0.0.0:9436").unwrap().metrics, Some(SocketAddr::from(([0, 0, 0, 0], 9436))));
        let e = with("localhost:9436").unwrap_err().to_string();
        assert!(e.starts_with("agent.toml:13: listen: 'localhost:9436': give PORT"), "{e}");
        let e = parse(&format!("{}[metrics]\nport = 1\n", good())).unwrap_err().to_string();
        assert!(e.starts_with("agent.toml:13: port: unknown field `port`"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let dev = some_device();
        for (text, expect) in [
            (good().replace("weight = 300", "weight = 0"), "agent.toml:8: weight: 0 is out of range"),
            (good().replace("weight = 300", "weigth = 300"), "agent.toml:8: weigth: unknown field `weigth`"),
            (good().replace("iops-read=5000", "iops-read=x"), "agent.toml:9: limits: "),
            (good().replace("ssd_dfl rrandiops=40000", "nvme"), "agent.toml:4: model: invalid io.cost.model"),
            (good().replace("ssd_dfl rrandiops=40000", "profile"), "agent.toml:4: model: measuring"),
            (
                good().replace("ssd_dfl rrandiops=40000", "profile").replace("weight = 300", "weight = 0"),
                "agent.toml:8: weight: 0 is out of range",
            ),
            (good().replace("rpct=95", "rpct=101"), "agent.toml:5: qos: invalid io.cost.qos"),
            (good().replace(&format!("\"{dev}\""), "\"/etc/hostname\""), "agent.toml:3: path: block device"),
            (good().replace("tenants/*", "/abs"), "agent.toml:7: cgroup: invalid cgroup name"),
            (good().replace("period_ms = 200", "period_ms = 5"), "agent.toml:1: period_ms: 5 is out of range"),
            (
                good().replace("cgroup = \"system\"", "cgroup = \"tenants/*\""),
                "agent.toml:11: cgroup: 'tenants/*' is listed twice",
            ),
            ("period_ms = 100\n".to_string(), "agent.toml:1: groups: no [[groups]]"),
            ("[[groups]]\ncgroup = \"a\"\n".to_string(), "agent.toml:1: devices: nothing to control: no [[devices]]"),
            ("[[devices]\n".to_string(), "agent.toml:1: toml:"),
        ] {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.starts_with(expect), "expected '{expect}', got '{e}'");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn memory_settings_are_read_and_validated_with_their_line() {
        let with = |m: &str| good().replace("cgroup = \"system\"\n", &format!("cgroup = \"system\"\nmemory = {m}\n"));
        let c = parse(&with("{ priority = 9, wmark_ratio = 80, limit = \"2G\" }")).unwrap();
        let m = c.groups[1].memory.unwrap();
        assert_eq!((m.priority, m.wmark_ratio, m.wmark_scale_factor, m.limit), (9, 80, 50, Some(2 << 30)));
        assert!(c.groups[0].memory.is_none() && !c.memory_dry_run);
        for (m, expect) in [
            ("{ priority = 13 }", "agent.toml:12: memory: memory.priority = 13 is out of range"),
            ("{ wmark_scale_factor = 0 }", "agent.toml:12: memory: memory.wmark_scale_factor = 0"),
            ("{ limit = \"2X\" }", "agent.toml:12: memory: "),
            ("{ priorty = 3 }", "agent.toml:12: memory: unknown field `priorty`"),
        ] {
            let e = parse(&with(m)).unwrap_err().to_string();
            assert!(e.starts_with(expect), "expected '{expect}', got '{e}'");
        }
    }

    /// Memory rules alone are a configuration (the memory guard without IO control); IO rules alone too.
    #[test]
    fn memory_only_and_io_only_configurations_load() {
        let c = parse("[[groups]]\ncgroup = \"tenants/*\"\nmemory = { priority = 4, limit = \"1G\" }\n").unwrap();
        assert!(c.devices.is_empty());
        assert_eq!(c.groups[0].memory.unwrap().priority, 4);
        let c = parse(&good()).unwrap();
        assert!(!c.devices.is_empty() && c.groups.iter().all(|g| g.memory.is_none()));
    }

    #[test]
    fn a_kubernetes_section_makes_the_groups_optional_and_is_checked_whole() {
        let dev = some_device();
        let base = format!("[[devices]]\npath = \"{dev}\"\nmodel = \"ssd_dfl\"\n");
        let c = parse(&format!("{base}[kubernetes]\nnode_name = \"n1\"\n")).unwrap();
        assert!(c.groups.is_empty());
        assert_eq!(c.kubernetes.unwrap().node_name.as_deref(), Some("n1"));
        let e = parse(&base).unwrap_err().to_string();
        assert!(e.contains("no [[groups]] table and no [kubernetes] section"), "{e}");
        let e = parse(&format!("{base}[kubernetes.qos.burstable]\nweight = 0\n")).unwrap_err().to_string();
        assert!(e.starts_with("agent.toml:") && e.contains("kubernetes.qos.burstable.weight"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn profile_is_measured_by_the_measurer_given() {
        struct Fixed;
        impl Measure for Fixed {
            fn measure(&self, device: &DiskId) -> std::result::Result<ModelParams, String> {
                match device.name.is_empty() {
                    true => Err("no name".into()),
                    false => Ok(ModelParams { rrandiops: 777, ..ModelParams::SSD_DFL }),
                }
            }
        }
        let text = good().replace("ssd_dfl rrandiops=40000", "profile");
        let c = Config::parse_with(&text, Path::new("agent.toml"), &Fixed).unwrap();
        assert_eq!(c.devices[0].model.rrandiops, 777);
    }

    #[test]
    fn a_model_line_for_another_device_is_refused() {
        let text = good().replace("ssd_dfl rrandiops=40000", "4095:0 ssd_dfl");
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("names device 4095:0"), "{e}");
    }
}
