//! The agent's Prometheus metrics: `GET /metrics` on the address of the configuration's `[metrics]`
//! section (no section: no endpoint), encoded at each scrape from the [`Status`] the agent last
//! published — the value it writes to the status file every period, built from the planner's and the
//! memory guard's own state. So Prometheus sees what `ioshare agent status` shows and what is
//! enforced, nothing is counted twice, and a cgroup gone from the status is gone from the next
//! scrape (no series outlives its cgroup: label cardinality is the cgroups controlled now).
//!
//! Names: `ioshare_` prefix, base units (seconds, bytes, ratios 0..1), counters end in `_total`.
//! - Agent: `ioshare_agent_periods_total`, `ioshare_agent_overwritten_total` (values someone else
//!   overwrote, written back: [`crate::cgroups::reapply`]).
//! - Device (label `device`): `ioshare_device_vrate_ratio`, `…_busy_level`, `…_latency_seconds{op}`
//!   (the period's mean net of size, as the planner judged it), `…_latency_target_seconds{op}`,
//!   `…_missed_target_ratio{op}` (completions later than the target), the model's capacity
//!   `…_model_iops{op,pattern}` and `…_model_bytes_per_second{op}`.
//! - Cgroup on a device (labels `device` and the cgroup's, below): `ioshare_cgroup_weight`,
//!   `…_hweight_active_ratio`, `…_hweight_inuse_ratio`, `…_usage_ratio` (device time used last
//!   period), `…_limit_iops{op}` and `…_limit_bytes_per_second{op}` (limits in force; no series when
//!   none), `…_donating` and `…_waiting` (0/1: held at its limit), `…_debt_seconds`.
//! - Memory-guarded cgroup: `ioshare_memory_usage_bytes`, `…_limit_bytes`, `…_watermark_bytes{level}`,
//!   `…_reclaims_total`, `…_reclaim_seconds_total`, `…_oom_kills_total{killer="ioshare"|"kernel"}`,
//!   `…_pressure_ratio{kind="some"|"full"}` (PSI avg10, cgroup v2).
//!
//! Cgroup labels are always `cgroup` (path below the hierarchy's root), `namespace`, `pod` and
//! `container` — the last three empty (so not written: to Prometheus an empty label is no label)
//! unless the pod source ([`crate::desired::pods`]) names the cgroup's pod (and container, for a container's
//! own cgroup) in the status. With the kernel backend the kernel plans: the
//! planner's series (vrate, hweights, usage, donation, debt, latency) are left out, and the kernel's
//! own IOCost figures in the status are served under the names `ioshare observe --iocost` gives them,
//! by its renderer ([`ioshare_observe::iocost::render::encode_devices`] and `encode_groups`) with
//! the agent's labels: `ioshare_iocost_vrate_ratio`, `…_busy_level`, `…_missed_ratio{op}`,
//! `…_rq_wait_ratio`, `…_cgroups{state}` per device; `ioshare_iocost_weight{kind}`,
//! `…_hweight_ratio{kind}`, `…_usage_seconds_total`, `…_wait_seconds_total`, `…_indebt_seconds_total`,
//! `…_indelay_seconds_total`, `…_debt_seconds`, `…_delay_seconds`, `…_events_total{event}` per
//! cgroup (no series for a device or cgroup the kernel has not reported).

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use ioshare_observe::endpoint::{family, Endpoint};
use ioshare_observe::iocost::render as iocost;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::cgroups::check::BackendKind;
use crate::error::{Error, Result};
use crate::report::status::{DeviceLine, GroupLine, Status};

/// The status the endpoint serves (`None` until the first is published).
type Latest = Arc<Mutex<Option<Arc<Status>>>>;

/// The agent's running `/metrics` endpoint; stops when dropped.
#[derive(Debug)]
pub struct Metrics {
    latest: Latest,
    endpoint: Endpoint,
}

impl Metrics {
    /// Starts serving on `addr` (nothing is served before the first [`publish`](Metrics::publish)).
    pub fn serve(addr: SocketAddr) -> Result<Metrics> {
        let latest = Latest::default();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(StatusCollector(latest.clone())));
        let endpoint = Endpoint::serve(addr, registry, "ioshare agent").map_err(Error::Metrics)?;
        Ok(Metrics { latest, endpoint })
    }

    /// Makes `status` the one scrapes see from now on.
    pub fn publish(&self, status: Status) {
        let old = self.latest.lock().unwrap_or_else(PoisonError::into_inner).replace(Arc::new(status));
        drop(old); // outside the lock
    }

    /// The address bound (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr()
    }
}

/// Encodes the latest status at each scrape.
#[derive(Debug)]
struct StatusCollector(Latest);

impl Collector for StatusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let latest = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match latest {
            Some(status) => encode(&mut encoder, &status),
            None => Ok(()),
        }
    }
}

/// A cgroup's labels: its path, and the Kubernetes namespace, pod and container it belongs to
/// (empty until a pod source fills them).
#[derive(Clone, Copy, Debug)]
struct CgroupLabels<'a> {
    cgroup: &'a str,
    namespace: &'a str,
    pod: &'a str,
    container: &'a str,
}

impl<'a> CgroupLabels<'a> {
    /// The labels of `cgroup`, with its pod's names when the status says a pod owns it.
    fn of(s: &'a Status, cgroup: &'a str) -> Self {
        match s.kubernetes.as_ref().and_then(|k| k.cgroups.get(cgroup)) {
            Some(p) => CgroupLabels {
                cgroup,
                namespace: &p.namespace,
                pod: &p.pod,
                container: p.container.as_deref().unwrap_or(""),
            },
            None => CgroupLabels { cgroup, namespace: "", pod: "", container: "" },
        }
    }
}

impl EncodeLabelSet for CgroupLabels<'_> {
    /// Empty values are left out: to Prometheus an empty label is no label, and the bytes add up.
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        let labels =
            [("cgroup", self.cgroup), ("namespace", self.namespace), ("pod", self.pod), ("container", self.container)];
        for label in labels.into_iter().filter(|(_, v)| !v.is_empty()) {
            label.encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// One label.
type Label<'a> = [(&'static str, &'a str); 1];
/// A cgroup on a device.
type IoLabels<'a> = (Label<'a>, CgroupLabels<'a>);

const OPS: [&str; 2] = ["read", "write"];

fn gauge(v: f64) -> ConstGauge<f64> {
    ConstGauge::new(v)
}

fn encode(enc: &mut DescriptorEncoder, s: &Status) -> fmt::Result {
    let no_labels: [(&str, &str); 0] = [];
    family(
        enc,
        "ioshare_agent_periods",
        "Planning periods the agent ran.",
        [(no_labels, ConstCounter::new(s.periods))],
    )?;
    family(
        enc,
        "ioshare_agent_overwritten",
        "Values someone else overwrote that the agent wrote back.",
        [(no_labels, ConstCounter::new(s.overwritten))],
    )?;
    // The kernel backend's status has no planner state (the kernel plans): leave those series out.
    let planner = s.backend == BackendKind::Userspace.name();
    encode_devices(enc, &s.devices, planner)?;
    encode_groups(enc, s, planner)?;
    if s.backend == BackendKind::Kernel.name() {
        encode_kernel(enc, s)?;
    }
    encode_memory(enc, s)
}

/// The kernel's IOCost figures (kernel backend), by observe's renderer with the agent's labels.
fn encode_kernel(enc: &mut DescriptorEncoder, s: &Status) -> fmt::Result {
    let devices = s.devices.iter().filter_map(|d| d.iocost.as_ref().map(|k| (dev(d), k)));
    iocost::encode_devices(enc, devices)?;
    let groups = s
        .devices
        .iter()
        .flat_map(|d| d.groups.iter().filter_map(move |g| g.iocost.as_ref().map(|k| (io_labels(s, d, g), k))));
    iocost::encode_groups(enc, groups)
}

fn encode_devices(enc: &mut DescriptorEncoder, devices: &[DeviceLine], planner: bool) -> fmt::Result {
    let planned = || devices.iter().filter(move |_| planner);
    family(
        enc,
        "ioshare_device_vrate_ratio",
        "Virtual-time rate: the share of the cost model the planner lets the device's cgroups use.",
        planned().map(|d| (dev(d), gauge(d.vrate_pct / 100.0))),
    )?;
    family(
        enc,
        "ioshare_device_busy_level",
        "The planner's busy level (negative: spare capacity, positive: latency targets missed).",
        planned().map(|d| (dev(d), ConstGauge::new(i64::from(d.busy_level)))),
    )?;
    family(
        enc,
        "ioshare_device_latency_seconds",
        "Mean completion latency last period net of the IO size's cost, as the planner judged it.",
        planned().flat_map(|d| per_op(d).map(|(i, l)| (l, gauge(d.lat_us[i] / 1e6)))),
    )?;
    family(
        enc,
        "ioshare_device_latency_target_seconds",
        "The QoS latency target (no series without one).",
        devices.iter().flat_map(|d| {
            per_op(d).filter(|&(i, _)| d.target_us[i] != 0).map(|(i, l)| (l, gauge(d.target_us[i] as f64 / 1e6)))
        }),
    )?;
    family(
        enc,
        "ioshare_device_missed_target_ratio",
        "Share of last period's completions later than the latency target.",
        planned().flat_map(|d| per_op(d).map(|(i, l)| (l, gauge(f64::from(d.missed_ppm[i]) / 1e6)))),
    )?;
    family(
        enc,
        "ioshare_device_model_iops",
        "The cost model's capacity in 4 KiB IOs per second.",
        devices.iter().filter_map(|d| d.model.map(|m| (d, m))).flat_map(|(d, m)| {
            [
                ("read", "seq", m.rseqiops),
                ("read", "rand", m.rrandiops),
                ("write", "seq", m.wseqiops),
                ("write", "rand", m.wrandiops),
            ]
            .map(|(op, pattern, v)| {
                ([("device", d.device.as_str()), ("op", op), ("pattern", pattern)], ConstGauge::new(v))
            })
        }),
    )?;
    family(
        enc,
        "ioshare_device_model_bytes_per_second",
        "The cost model's sequential bandwidth.",
        devices.iter().filter_map(|d| d.model.map(|m| (d, m))).flat_map(|(d, m)| {
            [("read", m.rbps), ("write", m.wbps)]
                .map(|(op, v)| ([("device", d.device.as_str()), ("op", op)], ConstGauge::new(v)))
        }),
    )
}

fn encode_groups(enc: &mut DescriptorEncoder, s: &Status, planner: bool) -> fmt::Result {
    let all = || s.devices.iter().flat_map(|d| d.groups.iter().map(move |g| (io_labels(s, d, g), g)));
    let planned = || all().filter(move |_| planner);
    family(
        enc,
        "ioshare_cgroup_weight",
        "The cgroup's weight.",
        all().map(|(l, g)| (l, ConstGauge::new(i64::from(g.weight)))),
    )?;
    family(
        enc,
        "ioshare_cgroup_hweight_active_ratio",
        "Share of the device by weight among the active cgroups.",
        planned().map(|(l, g)| (l, gauge(g.hweight_active))),
    )?;
    family(
        enc,
        "ioshare_cgroup_hweight_inuse_ratio",
        "Share of the device in use after donation.",
        planned().map(|(l, g)| (l, gauge(g.hweight_inuse))),
    )?;
    family(
        enc,
        "ioshare_cgroup_usage_ratio",
        "Device time the cgroup used last period, share of the period.",
        planned().map(|(l, g)| (l, gauge(g.usage_share))),
    )?;
    let limits = |first: usize| {
        all().flat_map(move |(l, g)| {
            OPS.into_iter()
                .enumerate()
                .filter(move |&(i, _)| g.limits[first + i] != 0)
                .map(move |(i, op)| ((l, [("op", op)]), ConstGauge::new(g.limits[first + i])))
        })
    };
    family(enc, "ioshare_cgroup_limit_iops", "IOs per second limit in force (no series: none).", limits(0))?;
    family(enc, "ioshare_cgroup_limit_bytes_per_second", "Bandwidth limit in force (no series: none).", limits(2))?;
    family(
        enc,
        "ioshare_cgroup_donating",
        "1 while the cgroup gives part of its share to others.",
        planned().map(|(l, g)| (l, ConstGauge::new(i64::from(g.state == "donating")))),
    )?;
    family(
        enc,
        "ioshare_cgroup_waiting",
        "1 while the cgroup's IO waits at the limit the planner set (it wants more than its share).",
        planned().map(|(l, g)| (l, ConstGauge::new(i64::from(g.state == "limited")))),
    )?;
    family(
        enc,
        "ioshare_cgroup_debt_seconds",
        "Device time the cgroup used beyond its budget, still to pay back.",
        planned().map(|(l, g)| (l, gauge(g.debt_us as f64 / 1e6))),
    )
}

/// A device's label.
fn dev(d: &DeviceLine) -> Label<'_> {
    [("device", d.device.as_str())]
}

/// A device's labels with `op`, and the index of the op in `[read, write]` arrays.
fn per_op(d: &DeviceLine) -> impl Iterator<Item = (usize, [(&'static str, &str); 2])> {
    OPS.into_iter().enumerate().map(move |(i, op)| (i, [("device", d.device.as_str()), ("op", op)]))
}

fn io_labels<'a>(s: &'a Status, d: &'a DeviceLine, g: &'a GroupLine) -> IoLabels<'a> {
    (dev(d), CgroupLabels::of(s, &g.cgroup))
}

fn encode_memory(enc: &mut DescriptorEncoder, s: &Status) -> fmt::Result {
    let each = || s.memory.iter().map(|m| (CgroupLabels::of(s, &m.cgroup), m));
    family(enc, "ioshare_memory_usage_bytes", "Memory in use.", each().map(|(l, m)| (l, ConstGauge::new(m.usage))))?;
    family(
        enc,
        "ioshare_memory_limit_bytes",
        "Memory limit (no series: none).",
        each().filter_map(|(l, m)| m.limit.map(|v| (l, ConstGauge::new(v)))),
    )?;
    family(
        enc,
        "ioshare_memory_watermark_bytes",
        "Early-reclaim watermarks: reclaim starts above high and stops below low.",
        each().filter_map(|(l, m)| m.watermarks.map(|w| (l, w))).flat_map(|(l, (high, low))| {
            [("high", high), ("low", low)].map(|(level, v)| ((l, [("level", level)]), ConstGauge::new(v)))
        }),
    )?;
    family(
        enc,
        "ioshare_memory_reclaims",
        "Background reclaim rounds.",
        each().map(|(l, m)| (l, ConstCounter::new(m.reclaims))),
    )?;
    family(
        enc,
        "ioshare_memory_reclaim_seconds",
        "Time spent in background reclaim.",
        each().map(|(l, m)| (l, ConstCounter::new(m.reclaim_seconds))),
    )?;
    family(
        enc,
        "ioshare_memory_oom_kills",
        "Processes killed on OOM: by ioshare's priority OOM, or by the kernel's OOM killer (cgroup v2).",
        each().flat_map(|(l, m)| {
            [("ioshare", m.oom_kills), ("kernel", m.kernel_kills)]
                .map(|(killer, n)| ((l, [("killer", killer)]), ConstCounter::new(n)))
        }),
    )?;
    family(
        enc,
        "ioshare_memory_pressure_ratio",
        "PSI memory pressure: share of the last 10 s some or all tasks stalled on memory (cgroup v2).",
        each().filter_map(|(l, m)| m.pressure.map(|p| (l, p))).flat_map(|(l, (some, full))| {
            [("some", some), ("full", full)].map(|(kind, pct)| ((l, [("kind", kind)]), gauge(pct / 100.0)))
        }),
    )
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};

    use super::*;
    use crate::report::status::{fixture, kernel};

    /// A userspace agent's status: device loop3 with `groups`, the first donating with a read IOPS
    /// limit, the others held at their limits; each also memory-guarded.
    fn status(groups: &[&str]) -> Status {
        let lines = groups
            .iter()
            .enumerate()
            .map(|(i, g)| match i {
                0 => fixture::group(g, "donating", [30000, 0, 0, 0]),
                _ => fixture::group(g, "limited", [100, 0, 0, 409600]),
            })
            .collect();
        fixture::status(vec![fixture::device(lines)], groups.iter().map(|g| fixture::memory(g)).collect())
    }

    fn scrape(m: &Metrics) -> String {
        let mut s = std::net::TcpStream::connect(m.addr()).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        let (head, body) = reply.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        body.to_string()
    }

    fn serve() -> Metrics {
        Metrics::serve(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap()
    }

    const WEB: &str = r#"cgroup="tenants/web""#;
    const DB: &str = r#"cgroup="tenants/db""#;

    #[test]
    fn a_pods_cgroups_carry_its_namespace_pod_and_container() {
        let pod = |container: Option<&str>| crate::desired::targets::PodRef {
            namespace: "shop".into(),
            pod: "web-0".into(),
            container: container.map(Into::into),
        };
        let mut s = status(&["kubepods/podu1", "kubepods/podu1/c1", "tenants/db"]);
        s.kubernetes = Some(crate::desired::pods::KubeStatus {
            node: "n1".into(),
            api_server: "reachable".into(),
            pods: vec![],
            cgroups: [("kubepods/podu1".to_string(), pod(None)), ("kubepods/podu1/c1".to_string(), pod(Some("app")))]
                .into(),
            findings: vec![],
        });
        let m = serve();
        m.publish(s);
        let text = scrape(&m);
        for line in [
            r#"ioshare_cgroup_weight{device="loop3",cgroup="kubepods/podu1",namespace="shop",pod="web-0"} 200"#,
            r#"ioshare_cgroup_weight{device="loop3",cgroup="kubepods/podu1/c1",namespace="shop",pod="web-0",container="app"} 200"#,
            r#"ioshare_cgroup_weight{device="loop3",cgroup="tenants/db"} 200"#,
            r#"ioshare_memory_usage_bytes{cgroup="kubepods/podu1",namespace="shop",pod="web-0"} 314572800"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn every_series_of_the_status_is_exposed_in_base_units() {
        let m = serve();
        assert_eq!(scrape(&m), "", "nothing before the first status");
        m.publish(status(&["tenants/web", "tenants/db"]));
        let text = scrape(&m);
        for line in [
            "ioshare_agent_periods_total 7".to_string(),
            r#"ioshare_device_vrate_ratio{device="loop3"} 0.875"#.into(),
            r#"ioshare_device_busy_level{device="loop3"} -2"#.into(),
            r#"ioshare_device_latency_seconds{device="loop3",op="read"} 0.00035"#.into(),
            r#"ioshare_device_latency_target_seconds{device="loop3",op="read"} 0.001"#.into(),
            r#"ioshare_device_missed_target_ratio{device="loop3",op="read"} 0.0125"#.into(),
            r#"ioshare_device_model_iops{device="loop3",op="read",pattern="rand"} 8518"#.into(),
            r#"ioshare_device_model_bytes_per_second{device="loop3",op="write"} 427891549"#.into(),
            format!(r#"ioshare_cgroup_weight{{device="loop3",{WEB}}} 200"#),
            format!(r#"ioshare_cgroup_hweight_active_ratio{{device="loop3",{WEB}}} 0.5"#),
            format!(r#"ioshare_cgroup_hweight_inuse_ratio{{device="loop3",{WEB}}} 0.25"#),
            format!(r#"ioshare_cgroup_usage_ratio{{device="loop3",{WEB}}} 0.125"#),
            format!(r#"ioshare_cgroup_limit_iops{{device="loop3",{WEB},op="read"}} 30000"#),
            format!(r#"ioshare_cgroup_limit_bytes_per_second{{device="loop3",{DB},op="write"}} 409600"#),
            format!(r#"ioshare_cgroup_donating{{device="loop3",{WEB}}} 1"#),
            format!(r#"ioshare_cgroup_donating{{device="loop3",{DB}}} 0"#),
            format!(r#"ioshare_cgroup_waiting{{device="loop3",{DB}}} 1"#),
            format!(r#"ioshare_cgroup_debt_seconds{{device="loop3",{WEB}}} 0.0015"#),
            format!(r#"ioshare_memory_usage_bytes{{{WEB}}} 314572800"#),
            format!(r#"ioshare_memory_limit_bytes{{{WEB}}} 536870912"#),
            format!(r#"ioshare_memory_watermark_bytes{{{WEB},level="low"}} 416284672"#),
            format!(r#"ioshare_memory_reclaims_total{{{WEB}}} 3"#),
            format!(r#"ioshare_memory_reclaim_seconds_total{{{WEB}}} 0.5"#),
            format!(r#"ioshare_memory_oom_kills_total{{{WEB},killer="ioshare"}} 1"#),
            format!(r#"ioshare_memory_oom_kills_total{{{WEB},killer="kernel"}} 2"#),
            format!(r#"ioshare_memory_pressure_ratio{{{WEB},kind="some"}} 0.025"#),
        ] {
            assert!(text.contains(&format!("{line}\n")), "'{line}' missing from:\n{text}");
        }
        // Limits not in force have no series; a write target of 0 is none.
        assert!(!text.contains(&format!(r#"ioshare_cgroup_limit_iops{{device="loop3",{WEB},op="write"}}"#)), "{text}");
        assert!(!text.contains(r#"ioshare_device_latency_target_seconds{device="loop3",op="write"}"#), "{text}");
        // One HELP per family, and Prometheus' own linter finds nothing to say about the names.
        assert_eq!(text.matches("# HELP ").count(), text.matches("# TYPE ").count());
        lint(&text);
    }

    /// `promtool check metrics` (Debian's prometheus package) on `text`, when installed.
    fn lint(text: &str) {
        let Ok(mut child) = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        else {
            eprintln!("not linting the exposition: promtool is not installed (./scripts/setup.sh installs it)");
            return;
        };
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics:\n{said}");
    }

    #[test]
    fn a_vanished_cgroup_leaves_the_metrics() {
        let m = serve();
        m.publish(status(&["tenants/web", "tenants/db"]));
        assert!(scrape(&m).contains("tenants/db"));
        m.publish(status(&["tenants/web"]));
        let text = scrape(&m);
        assert!(text.contains("tenants/web") && !text.contains("tenants/db"), "{text}");
    }

    #[test]
    fn the_kernel_backend_exposes_the_kernels_iocost_not_planner_state() {
        let m = serve();
        let web =
            kernel::group_line(fixture::group("tenants/web", "", [0; 4]), Some(&fixture::iocost_group("/tenants/web")));
        let db = kernel::group_line(fixture::group("tenants/db", "", [0; 4]), None);
        let mut s = fixture::status(
            vec![kernel::device_line(fixture::device(vec![web, db]), Some(&fixture::iocost_device()), String::new())],
            vec![],
        );
        s.backend = BackendKind::Kernel.name().into();
        m.publish(s);
        let text = scrape(&m);
        for line in [
            r#"ioshare_iocost_vrate_ratio{device="loop3"} 0.875"#.to_string(),
            r#"ioshare_iocost_busy_level{device="loop3"} 3.0"#.into(),
            r#"ioshare_iocost_missed_ratio{device="loop3",op="read"} 0.25"#.into(),
            r#"ioshare_iocost_cgroups{device="loop3",state="surplus"} 1.0"#.into(),
            format!(r#"ioshare_iocost_hweight_ratio{{device="loop3",{WEB},kind="inuse"}} 0.5"#),
            format!(r#"ioshare_iocost_usage_seconds_total{{device="loop3",{WEB}}} 2.5"#),
            format!(r#"ioshare_iocost_wait_seconds_total{{device="loop3",{WEB}}} 0.001"#),
            format!(r#"ioshare_iocost_debt_seconds{{device="loop3",{WEB}}} 0.0015"#),
            format!(r#"ioshare_iocost_delay_seconds{{device="loop3",{WEB}}} 0.0"#),
        ] {
            assert!(text.contains(&format!("{line}\n")), "'{line}' missing from:\n{text}");
        }
        // A cgroup the kernel has not reported has its weight, and no kernel series.
        assert!(text.contains(&format!(r#"ioshare_cgroup_weight{{device="loop3",{DB}}} 200"#)), "{text}");
        assert!(!text.contains(&format!(r#"ioshare_iocost_debt_seconds{{device="loop3",{DB}}}"#)), "{text}");
        lint(&text);
        assert!(text.contains(&format!(r#"ioshare_cgroup_weight{{device="loop3",{WEB}}} 200"#)), "{text}");
        assert!(text.contains(r#"ioshare_device_model_iops{device="loop3""#), "{text}");
        for planner in
            ["ioshare_device_vrate_ratio{", "ioshare_cgroup_hweight_active_ratio{", "ioshare_cgroup_debt_seconds{"]
        {
            assert!(!text.contains(planner), "{planner} with the kernel backend:\n{text}");
        }
    }
}
