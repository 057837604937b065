//! An [`IocostSnapshot`] as an operator reads it: aligned tables (one for devices, one for cgroups, the
//! columns of `iocost_monitor.py`) and Prometheus exposition.
//!
//! Metrics (labels `device`, and `cgroup` for per-cgroup ones), named like the observer's; the agent's
//! kernel backend serves the same families with its own labels through [`encode_devices`] and
//! [`encode_groups`]:
//! - `ioshare_iocost_vrate_ratio`, `ioshare_iocost_busy_level`, `ioshare_iocost_missed_ratio{op}`,
//!   `ioshare_iocost_rq_wait_ratio`, `ioshare_iocost_cgroups{state=active|lagging|shortage|surplus}`;
//! - `ioshare_iocost_weight{kind=configured|active|inuse}`, `ioshare_iocost_hweight_ratio{kind=active|inuse}`,
//!   `ioshare_iocost_usage_seconds_total`, `…_wait_seconds_total`, `…_indebt_seconds_total`,
//!   `…_indelay_seconds_total` (io.stat's `cost.*` counters), `ioshare_iocost_debt_seconds`,
//!   `ioshare_iocost_delay_seconds`, `ioshare_iocost_events_total{event}`.

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::snapshot::{IocDevice, IocGroup, IocostSnapshot};
use crate::endpoint::{family, Endpoint};
use crate::error::Result;

/// The snapshot served, replaced by the caller after each reading.
pub type Shared = Arc<Mutex<IocostSnapshot>>;

/// The devices' and cgroups' tables, then the snapshot's notes, one per line.
pub fn table(snap: &IocostSnapshot) -> String {
    let devices: Vec<Vec<String>> = snap
        .devices
        .iter()
        .map(|d| {
            vec![
                d.device_name.clone(),
                format!("{:.2}", d.vrate_pct),
                format!("{:+}", d.busy_level),
                format!("{:.0}", d.period_ms),
                format!("{}:{}", d.missed_ppm[0], d.missed_ppm[1]),
                d.rq_wait_pct.to_string(),
                d.active.to_string(),
                d.lagging.to_string(),
                d.shortages.to_string(),
                d.surpluses.to_string(),
                format!("{:.1}", d.age_s),
            ]
        })
        .collect();
    let mut out = aligned(
        &[
            "DEVICE",
            "VRATE%",
            "BUSY",
            "PER ms",
            "MISSED ppm r:w",
            "RQWAIT%",
            "ACTIVE",
            "LAG",
            "SHORT",
            "SURPLUS",
            "AGE s",
        ],
        &devices,
        1,
    );
    if snap.devices.is_empty() {
        out.push_str("(no IOCost device has reported yet: is io.cost.qos enable=1 on a device with IO?)\n");
    }
    out.push('\n');
    let groups: Vec<Vec<String>> = snap.groups.iter().map(group_row).collect();
    out += &aligned(
        &[
            "DEVICE",
            "CGROUP",
            "ACT",
            "WEIGHT",
            "INUSE/ACTIVE",
            "HWI%/HWA%",
            "USAGE%",
            "USAGE ms",
            "WAIT ms",
            "DEBT ms",
            "DELAY ms",
            "INDEBT ms",
            "AGE s",
        ],
        &groups,
        2,
    );
    for note in &snap.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

fn group_row(g: &IocGroup) -> Vec<String> {
    vec![
        g.device_name.clone(),
        g.cgroup.clone(),
        if g.is_active { "*".into() } else { String::new() },
        format!("{:.0}", g.weight),
        format!("{:.0}/{:.0}", g.weight_inuse, g.weight_active),
        format!("{:.1}/{:.1}", g.hweight_inuse_pct, g.hweight_active_pct),
        format!("{:.1}", g.usage_pct),
        format!("{:.1}", g.usage_us as f64 / 1000.0),
        format!("{:.1}", g.wait_us as f64 / 1000.0),
        format!("{:.2}", g.debt_ms),
        format!("{:.2}", g.delay_ms),
        format!("{:.1}", g.indebt_us as f64 / 1000.0),
        format!("{:.1}", g.age_s),
    ]
}

/// Rows under a header, columns padded; the first `names` columns left-aligned, numbers right-aligned.
fn aligned(header: &[&str], rows: &[Vec<String>], names: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in r.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            if i < names {
                let _ = write!(line, "{cell}{pad}  ");
            } else {
                let _ = write!(line, "{pad}{cell}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Renders `snap` as Prometheus text exposition format 0.0.4.
pub fn prometheus(snap: &IocostSnapshot) -> String {
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry(Arc::new(Mutex::new(snap.clone()))))
        .expect("writing to a String cannot fail");
    out
}

/// Starts serving `GET /metrics` on `addr` from `shared` until the [`Endpoint`] is dropped.
pub fn serve(addr: SocketAddr, shared: Shared) -> Result<Endpoint> {
    Endpoint::serve(addr, registry(shared), "ioshare observe --iocost")
}

fn registry(shared: Shared) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(IocostCollector(shared)));
    registry
}

#[derive(Debug)]
struct IocostCollector(Shared);

impl Collector for IocostCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let snap = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        encode(&mut enc, &snap)
    }
}

/// One of a cgroup's cumulative µs counters.
type Micros = fn(&IocGroup) -> u64;

fn encode(enc: &mut DescriptorEncoder, snap: &IocostSnapshot) -> fmt::Result {
    encode_devices(enc, snap.devices.iter().map(|d| ([("device", d.device_name.clone())], d)))?;
    encode_groups(
        enc,
        snap.groups.iter().map(|g| ([("device", g.device_name.clone()), ("cgroup", g.cgroup.clone())], g)),
    )
}

/// Writes the per-device families (`ioshare_iocost_vrate_ratio`, `…_busy_level`, `…_missed_ratio{op}`,
/// `…_rq_wait_ratio`, `…_cgroups{state}`) of `devices`, each with the labels its caller gives it
/// (`device`; the ioshare agent's are its own): one renderer for `ioshare observe --iocost` and the
/// agent's kernel backend.
pub fn encode_devices<'a, L>(
    enc: &mut DescriptorEncoder,
    devices: impl Iterator<Item = (L, &'a IocDevice)> + Clone,
) -> fmt::Result
where
    L: EncodeLabelSet + Clone,
{
    let gauge = |v: f64| ConstGauge::new(v);
    family(
        enc,
        "ioshare_iocost_vrate_ratio",
        "The kernel IOCost's base vrate (1 = 100%).",
        devices.clone().map(|(l, d)| (l, gauge(d.vrate_pct / 100.0))),
    )?;
    family(
        enc,
        "ioshare_iocost_busy_level",
        "IOCost's busy level: above 0 QoS targets are missed, below 0 cgroups are short while targets are met.",
        devices.clone().map(|(l, d)| (l, gauge(f64::from(d.busy_level)))),
    )?;
    family(
        enc,
        "ioshare_iocost_missed_ratio",
        "Share of IOs over their latency target in the last reported period.",
        devices.clone().flat_map(|(l, d)| {
            [("read", d.missed_ppm[0]), ("write", d.missed_ppm[1])]
                .map(|(op, ppm)| ((l.clone(), [("op", op)]), gauge(f64::from(ppm) / 1e6)))
        }),
    )?;
    family(
        enc,
        "ioshare_iocost_rq_wait_ratio",
        "Share of the last reported period requests waited for a driver tag.",
        devices.clone().map(|(l, d)| (l, gauge(f64::from(d.rq_wait_pct) / 100.0))),
    )?;
    family(
        enc,
        "ioshare_iocost_cgroups",
        "Active cgroups, and of them lagging, short of budget, donating (as of the last vrate event).",
        devices.flat_map(|(l, d)| {
            [
                ("active", f64::from(d.active)),
                ("lagging", f64::from(d.lagging)),
                ("shortage", f64::from(d.shortages)),
                ("surplus", f64::from(d.surpluses)),
            ]
            .map(|(state, n)| ((l.clone(), [("state", state)]), gauge(n)))
        }),
    )
}

/// Writes the per-cgroup families (`ioshare_iocost_weight{kind}`, `…_hweight_ratio{kind}`, the
/// `cost.*` counters `…_usage_seconds_total`, `…_wait_seconds_total`, `…_indebt_seconds_total`,
/// `…_indelay_seconds_total`, `…_debt_seconds`, `…_delay_seconds`, `…_events_total{event}`) of
/// `groups`, each with the labels its caller gives it (`device` and `cgroup`).
pub fn encode_groups<'a, L>(
    enc: &mut DescriptorEncoder,
    groups: impl Iterator<Item = (L, &'a IocGroup)> + Clone,
) -> fmt::Result
where
    L: EncodeLabelSet + Clone,
{
    let gauge = |v: f64| ConstGauge::new(v);
    family(
        enc,
        "ioshare_iocost_weight",
        "The cgroup's weight as configured, active (0 while idle) and inuse (lower while donating).",
        groups.clone().flat_map(|(l, g)| {
            [("configured", g.weight), ("active", g.weight_active), ("inuse", g.weight_inuse)]
                .map(|(kind, w)| ((l.clone(), [("kind", kind)]), gauge(w)))
        }),
    )?;
    family(
        enc,
        "ioshare_iocost_hweight_ratio",
        "The cgroup's share of the device through the hierarchy, by active and by inuse weights.",
        groups.clone().flat_map(|(l, g)| {
            [("active", g.hweight_active_pct), ("inuse", g.hweight_inuse_pct)]
                .map(|(kind, pct)| ((l.clone(), [("kind", kind)]), gauge(pct / 100.0)))
        }),
    )?;
    let counters: [(&str, &str, Micros); 4] = [
        ("ioshare_iocost_usage_seconds", "Device time the cgroup used (io.stat cost.usage).", |g| g.usage_us),
        ("ioshare_iocost_wait_seconds", "Time the cgroup waited for budget (io.stat cost.wait).", |g| g.wait_us),
        ("ioshare_iocost_indebt_seconds", "Time the cgroup was in debt (io.stat cost.indebt).", |g| g.indebt_us),
        ("ioshare_iocost_indelay_seconds", "Time the cgroup was delayed (io.stat cost.indelay).", |g| g.indelay_us),
    ];
    for (name, help, of) in counters {
        family(enc, name, help, groups.clone().map(|(l, g)| (l, ConstCounter::new(of(g) as f64 * 1e-6))))?;
    }
    family(
        enc,
        "ioshare_iocost_debt_seconds",
        "The cgroup's debt, in device time.",
        groups.clone().map(|(l, g)| (l, gauge(g.debt_ms / 1000.0))),
    )?;
    family(
        enc,
        "ioshare_iocost_delay_seconds",
        "The delay in force on the cgroup's issuers.",
        groups.clone().map(|(l, g)| (l, gauge(g.delay_ms / 1000.0))),
    )?;
    family(
        enc,
        "ioshare_iocost_events",
        "IOCost's events for the cgroup: activated, idled, shortage, transfer, adjust, forgiven.",
        groups.flat_map(|(l, g)| {
            let e = g.events;
            [
                ("activated", e.activated),
                ("idled", e.idled),
                ("shortage", e.shortage),
                ("transfer", e.transfer),
                ("adjust", e.adjust),
                ("forgiven", e.forgiven),
            ]
            .map(|(event, n)| ((l.clone(), [("event", event)]), ConstCounter::new(n)))
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iocost::IocEvents;

    fn snap() -> IocostSnapshot {
        IocostSnapshot {
            devices: vec![IocDevice {
                device: "259:0".into(),
                device_name: "nvme0n1".into(),
                age_s: 0.1,
                vrate_pct: 87.5,
                busy_level: 3,
                period_ms: 40.0,
                period: 12,
                missed_ppm: [250_000, 0],
                rq_wait_pct: 4,
                lagging: 0,
                shortages: 1,
                surpluses: 1,
                active: 2,
                vrate_events: 9,
            }],
            groups: vec![IocGroup {
                device: "259:0".into(),
                device_name: "nvme0n1".into(),
                cgroup_id: 42,
                cgroup: "/tenants/a".into(),
                level: 2,
                age_s: 0.1,
                is_active: true,
                weight: 200.0,
                weight_active: 200.0,
                weight_inuse: 150.0,
                hweight_active_pct: 66.7,
                hweight_inuse_pct: 50.0,
                usage_pct: 61.0,
                debt_ms: 1.5,
                delay_ms: 0.0,
                usage_us: 2_500_000,
                wait_us: 1000,
                indebt_us: 0,
                indelay_us: 0,
                events: IocEvents { activated: 1, transfer: 4, ..IocEvents::default() },
            }],
            dropped: 0,
            notes: vec!["1 cgroup(s) removed since their last IOCost event: left out".into()],
        }
    }

    #[test]
    fn tables_show_the_monitor_columns_and_the_notes() {
        let text = table(&snap());
        assert!(text.contains("nvme0n1   87.50    +3"), "{text}");
        assert!(text.contains("/tenants/a    *     200       150/200  50.0/66.7"), "{text}");
        assert!(text.contains("note: 1 cgroup(s) removed"), "{text}");
        let empty = table(&IocostSnapshot::default());
        assert!(empty.contains("no IOCost device has reported yet"), "{empty}");
    }

    #[test]
    fn prometheus_names_follow_the_observers_style() {
        let text = prometheus(&snap());
        assert!(text.contains("ioshare_iocost_vrate_ratio{device=\"nvme0n1\"} 0.875\n"), "{text}");
        assert!(text.contains("ioshare_iocost_missed_ratio{device=\"nvme0n1\",op=\"read\"} 0.25\n"), "{text}");
        assert!(text.contains("ioshare_iocost_usage_seconds_total{device=\"nvme0n1\",cgroup=\"/tenants/a\"} 2.5\n"));
        assert!(text
            .contains("ioshare_iocost_events_total{device=\"nvme0n1\",cgroup=\"/tenants/a\",event=\"transfer\"} 4\n"));
        assert!(text
            .contains("ioshare_iocost_hweight_ratio{device=\"nvme0n1\",cgroup=\"/tenants/a\",kind=\"inuse\"} 0.5\n"));
    }
}
