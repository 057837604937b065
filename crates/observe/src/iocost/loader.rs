//! Loading the IOCost programs and reading their maps into an [`IocostSnapshot`].
//!
//! All programs are raw tracepoints on the `iocost` events; a kernel built without IOCost has none of
//! them and loading fails with [`Error::NoIocost`]. Cgroups removed since their last event are left out
//! of a snapshot (one note says how many) and their entries deleted, so the map does not fill with the
//! dead.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::time::Duration;

use ioshare_core::iocost::donation::DonorInputs;
use ioshare_core::iocost::replay::{KernelDonation, KernelPeriod, Recording};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, RingBufferBuilder};

use super::snapshot::{debt_ms, vrate_pct, weight, IocDevice, IocEvents, IocGroup, IocostSnapshot};
use crate::error::{Error, Result};
use crate::iocost_skel::types::{ioc_device, ioc_donation, ioc_group, ioc_group_key, ioc_period};
use crate::iocost_skel::{IocostSkel, IocostSkelBuilder};
use crate::loader::{can_trace, from_bytes, DEBUG_ENV};
use crate::names::{device_name, CgroupNames};

/// The running IOCost reader: programs attached until it is dropped.
pub struct IocostObserver {
    _links: Vec<Link>,
    skel: IocostSkel<'static>,
    names: CgroupNames,
}

impl std::fmt::Debug for IocostObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IocostObserver").finish_non_exhaustive()
    }
}

impl IocostObserver {
    /// Loads and attaches the programs. Fails with one line when not root, without BTF, or when the
    /// kernel has no IOCost tracepoints (built without `CONFIG_BLK_CGROUP_IOCOST`).
    pub fn start() -> Result<IocostObserver> {
        can_trace()?;
        if std::env::var_os(DEBUG_ENV).is_none() {
            libbpf_rs::set_print(None);
        }
        // As in the block observer: the skeleton borrows its object storage for its whole life.
        let storage: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let load =
            |storage| -> libbpf_rs::Result<IocostSkel<'static>> { IocostSkelBuilder::default().open(storage)?.load() };
        let skel = load(storage).map_err(|e| Error::NoIocost(e.to_string()))?;
        let links = skel
            .object()
            .progs_mut()
            .map(|p| p.attach())
            .collect::<libbpf_rs::Result<Vec<Link>>>()
            .map_err(|e| Error::NoIocost(e.to_string()))?;
        Ok(IocostObserver { _links: links, skel, names: CgroupNames::discover() })
    }

    /// Takes the decisions the kernel reported since the last call, oldest first — every period's
    /// vrate decision (`iocost_ioc_vrate_adj`) and every cgroup's donation decision, for
    /// [`ioshare_core::iocost::replay`] — and how many were lost to a full buffer since the observer
    /// started (256 KiB each: about 2 700 periods and 1 800 donation decisions; call it at least
    /// every second).
    pub fn take_decisions(&mut self) -> Result<(Recording, u64)> {
        let mut recording = Recording::default();
        let (mut bad_period, mut bad_donation) = (None, None);
        let (periods, donations) = (&mut recording.periods, &mut recording.donations);
        let map_error = |map| move |e: libbpf_rs::Error| Error::Map { map, reason: e.to_string() };
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&self.skel.maps.periods, |raw: &[u8]| keep(raw, "periods", period, periods, &mut bad_period))
            .map_err(map_error("periods"))?
            .add(&self.skel.maps.donations, |raw: &[u8]| keep(raw, "donations", donation, donations, &mut bad_donation))
            .map_err(map_error("donations"))?;
        let both = "periods and donations";
        builder.build().map_err(map_error(both))?.consume().map_err(map_error(both))?;
        if let Some(e) = bad_period.or(bad_donation) {
            return Err(e);
        }
        let lost = self.skel.maps.bss_data.as_deref().map_or(0, |b| b.decisions_lost);
        Ok((recording, lost))
    }

    /// Reads the latest state of every device and (device, cgroup) the kernel reported.
    pub fn snapshot(&mut self) -> Result<IocostSnapshot> {
        let now = monotonic_ns();
        let age = |at_ns: u64| Duration::from_nanos(now.saturating_sub(at_ns)).as_secs_f64();
        let maps = &self.skel.maps;
        let mut names: HashMap<u32, (String, String)> = HashMap::new();
        let mut dev_names = |dev: u32| {
            names
                .entry(dev)
                .or_insert_with(|| {
                    let (major, minor) = (dev >> 20, dev & 0xfffff);
                    let number = format!("{major}:{minor}");
                    (number.clone(), device_name(major, minor).unwrap_or(number))
                })
                .clone()
        };
        let mut snap = IocostSnapshot::default();
        for raw_key in maps.devices.keys() {
            let Some(raw) = lookup(&maps.devices, &raw_key, "devices")? else { continue };
            let dev: u32 = from_bytes(&raw_key, "devices")?;
            let d: ioc_device = from_bytes(&raw, "devices")?;
            let (device, device_name) = dev_names(dev);
            snap.devices.push(IocDevice {
                device,
                device_name,
                age_s: age(d.at_ns),
                vrate_pct: vrate_pct(d.vrate),
                busy_level: d.busy_level,
                period_ms: f64::from(d.period_us) / 1000.0,
                period: d.period,
                missed_ppm: d.missed_ppm,
                rq_wait_pct: d.rq_wait_pct,
                lagging: d.nr_lagging,
                shortages: d.nr_shortages,
                surpluses: d.nr_surpluses,
                active: d.nr_active,
                vrate_events: d.vrate_events,
            });
        }
        self.names.next_reading();
        let mut removed = 0;
        for raw_key in maps.groups.keys() {
            let Some(raw) = lookup(&maps.groups, &raw_key, "groups")? else { continue };
            let key: ioc_group_key = from_bytes(&raw_key, "groups")?;
            let g: ioc_group = from_bytes(&raw, "groups")?;
            let cgroup = self.names.name(key.cgroup);
            // A removed cgroup is named `#<id>`: its figures are final and nobody can look it up.
            if cgroup.starts_with('#') {
                removed += 1;
                let _ = maps.groups.delete(&raw_key);
                continue;
            }
            let period_us =
                snap.devices.iter().find(|d| d.device == dev_names(key.dev).0).map_or(0.0, |d| d.period_ms * 1000.0);
            let (device, device_name) = dev_names(key.dev);
            snap.groups.push(IocGroup {
                device,
                device_name,
                cgroup_id: key.cgroup,
                cgroup,
                level: g.level,
                age_s: age(g.at_ns),
                is_active: g.active > 0,
                weight: weight(g.weight, 1.0),
                weight_active: weight(g.active, 1.0),
                weight_inuse: weight(g.inuse, 1.0),
                hweight_active_pct: weight(g.hweight_active, 100.0),
                hweight_inuse_pct: weight(g.hweight_inuse, 100.0),
                usage_pct: if period_us > 0.0 { g.usage_delta_us as f64 * 100.0 / period_us } else { 0.0 },
                debt_ms: debt_ms(g.abs_vdebt),
                delay_ms: g.delay_ns as f64 / 1e6,
                usage_us: g.usage_us,
                wait_us: g.wait_us,
                indebt_us: g.indebt_us,
                indelay_us: g.indelay_us,
                events: IocEvents {
                    activated: g.events[0],
                    idled: g.events[1],
                    shortage: g.events[2],
                    transfer: g.events[3],
                    adjust: g.events[4],
                    forgiven: g.events[5],
                },
            });
        }
        snap.devices.sort_by(|a, b| a.device_name.cmp(&b.device_name));
        snap.groups.sort_by(|a, b| (&a.device_name, &a.cgroup).cmp(&(&b.device_name, &b.cgroup)));
        inner_active_from_leaves(&mut snap.groups);
        if removed > 0 {
            snap.notes.push(format!("{removed} cgroup(s) removed since their last IOCost event: left out"));
        }
        snap.dropped = self.skel.maps.bss_data.as_deref().map_or(0, |b| b.dropped);
        if snap.dropped > 0 {
            snap.notes
                .push(format!("{} IOCost events not kept: more devices or cgroups than the maps hold", snap.dropped));
        }
        Ok(snap)
    }
}

/// A cgroup with descendants on the same device is active while one of its leaves is: the kernel
/// zeroes an inner cgroup's weights after the idle event of its last active child, with no event of
/// its own, so its recorded state would still read active.
fn inner_active_from_leaves(groups: &mut [IocGroup]) {
    let active: Vec<bool> = groups
        .iter()
        .map(|g| {
            let mut leaves = descendants(groups, g).filter(|d| descendants(groups, d).next().is_none()).peekable();
            if leaves.peek().is_none() {
                g.is_active
            } else {
                leaves.any(|d| d.is_active)
            }
        })
        .collect();
    for (g, a) in groups.iter_mut().zip(active) {
        g.is_active = a;
    }
}

/// The cgroups below `g` on its device.
fn descendants<'a>(groups: &'a [IocGroup], g: &'a IocGroup) -> impl Iterator<Item = &'a IocGroup> {
    let prefix = if g.cgroup == "/" { "/".to_string() } else { format!("{}/", g.cgroup) };
    groups.iter().filter(move |d| d.device == g.device && d.cgroup != g.cgroup && d.cgroup.starts_with(&prefix))
}

/// Whether IOCost is enabled on device `major:minor` (the v2 root's `io.cost.qos` says `enable=1`);
/// `None` when that file cannot be read (no cgroup v2 `io` controller here).
pub fn iocost_enabled(major: u32, minor: u32) -> Option<bool> {
    let qos = std::fs::read_to_string("/sys/fs/cgroup/io.cost.qos").ok()?;
    let prefix = format!("{major}:{minor} ");
    Some(qos.lines().any(|l| l.starts_with(&prefix) && l.split_whitespace().any(|w| w == "enable=1")))
}

fn lookup(map: &impl MapCore, key: &[u8], name: &'static str) -> Result<Option<Vec<u8>>> {
    map.lookup(key, MapFlags::ANY).map_err(|e| Error::Map { map: name, reason: e.to_string() })
}

/// CLOCK_MONOTONIC in ns: the clock of `bpf_ktime_get_ns`.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the kernel to fill in.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One ring buffer record, converted into `into`; a record of the wrong size stops the read (-1) and
/// is kept in `bad`.
fn keep<R: Copy + Default, T>(
    raw: &[u8],
    map: &'static str,
    convert: fn(&R) -> T,
    into: &mut Vec<T>,
    bad: &mut Option<Error>,
) -> i32 {
    match from_bytes::<R>(raw, map) {
        Ok(r) => {
            into.push(convert(&r));
            0
        }
        Err(e) => {
            *bad = Some(e);
            -1
        }
    }
}

/// A period record as the replay reads it.
fn period(p: &ioc_period) -> KernelPeriod {
    KernelPeriod {
        dev: p.dev,
        period: p.period,
        vrate: p.vrate,
        new_vrate: p.new_vrate,
        vrate_min: p.vrate_min,
        vrate_max: p.vrate_max,
        busy_level: p.busy_level,
        missed_ppm: p.missed_ppm,
        rq_wait_pct: p.rq_wait_pct,
        nr_lagging: p.nr_lagging,
        nr_shortages: p.nr_shortages,
        rppm: p.rppm,
        wppm: p.wppm,
        nr_active: p.nr_active,
    }
}

/// A donation record as the replay reads it.
fn donation(d: &ioc_donation) -> KernelDonation {
    KernelDonation {
        dev: d.dev,
        period: d.period,
        cgroup: d.cgroup,
        inputs: DonorInputs {
            usage_us: d.usage_us,
            inflight_vtime: d.inflight_vtime,
            usage_dur_us: d.usage_dur_us,
            vtime_base_rate: d.vtime_base_rate,
            hwa: u64::from(d.hwa),
            hwi: u64::from(d.hwi),
            hwm: u64::from(d.hwm),
            budget_vtime: d.budget_vtime,
            period_vtime: d.period_vtime,
            margin_min: d.margin_min,
            margin_low: d.margin_low,
            margin_target: d.margin_target,
            waiting: d.waiting != 0,
            in_debt: d.in_debt != 0,
        },
        donated: d.donated != 0,
        new_hwi: d.new_hwi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cgroup: &str, level: u32, is_active: bool) -> IocGroup {
        IocGroup {
            device: "259:0".into(),
            device_name: "nvme0n1".into(),
            cgroup_id: 0,
            cgroup: cgroup.into(),
            level,
            age_s: 0.0,
            is_active,
            weight: 100.0,
            weight_active: 0.0,
            weight_inuse: 0.0,
            hweight_active_pct: 0.0,
            hweight_inuse_pct: 0.0,
            usage_pct: 0.0,
            debt_ms: 0.0,
            delay_ms: 0.0,
            usage_us: 0,
            wait_us: 0,
            indebt_us: 0,
            indelay_us: 0,
            events: IocEvents::default(),
        }
    }

    #[test]
    fn an_inner_cgroup_is_active_while_a_leaf_below_it_is() {
        // As recorded: the parents still read active after their leaves' idle events.
        let mut groups = vec![
            group("/", 0, true),
            group("/t", 1, true),
            group("/t/a", 2, false),
            group("/t/b", 2, false),
            group("/u", 1, true),
            group("/u/c", 2, true),
            group("/v", 1, true),
        ];
        inner_active_from_leaves(&mut groups);
        let active: Vec<(&str, bool)> = groups.iter().map(|g| (g.cgroup.as_str(), g.is_active)).collect();
        assert_eq!(
            active,
            [("/", true), ("/t", false), ("/t/a", false), ("/t/b", false), ("/u", true), ("/u/c", true), ("/v", true)]
        );
    }
}
