//! The kernel backend's status lines: the kernel's own IOCost figures (read by ioshare-observe's
//! IOCost reader, [`crate::backend`]'s kernel backend) in the columns the userspace planner's share —
//! vrate, busy level, hweights, usage — plus the kernel's debt, delay and wait per cgroup, and a flag
//! column that says at a glance which cgroup is idle, donating, in debt or delayed ([`flags`]).

use std::fmt;

use ioshare_observe::iocost::{IocDevice, IocGroup};

use super::{write_group_columns, write_group_header, DeviceLine, GroupLine};

/// Device line `line` with the kernel's figures `k` (`None`: not reported, `note` says why) in the
/// columns the planner's share: vrate, busy level, missed ppm.
pub fn device_line(line: DeviceLine, k: Option<&IocDevice>, note: String) -> DeviceLine {
    match k {
        Some(k) => DeviceLine {
            vrate_pct: k.vrate_pct,
            busy_level: k.busy_level,
            missed_ppm: k.missed_ppm,
            iocost: Some(k.clone()),
            note,
            ..line
        },
        None => DeviceLine { iocost: None, note, ..line },
    }
}

/// Group line `line` with the kernel's figures `k` in the columns the planner's share (hweights,
/// last period's usage — none while idle —, debt) and its [`flags`] as its state; `not reported` without them (no IO yet, or no
/// figures on the device: its line says why).
pub fn group_line(line: GroupLine, k: Option<&IocGroup>) -> GroupLine {
    match k {
        Some(k) => GroupLine {
            hweight_active: k.hweight_active_pct / 100.0,
            hweight_inuse: k.hweight_inuse_pct / 100.0,
            // The kernel's figure is the usage flushed last, which for a cgroup that went idle covers
            // the periods since the flush before (several hundred % of one period): idle, it used none.
            usage_share: if k.is_active { k.usage_pct / 100.0 } else { 0.0 },
            debt_us: (k.debt_ms * 1000.0).round() as u64,
            state: flags(k),
            iocost: Some(k.clone()),
            ..line
        },
        None => GroupLine { state: "not reported".into(), iocost: None, ..line },
    }
}

/// A cgroup's flags as the kernel's IOCost holds it, comma-separated: `idle` or `active`, then
/// `donating` (its inuse weight below its active one: it gives part of its share away), `in-debt`
/// (it used more than its budget and pays it back), `delayed` (its issuers are held back for that
/// debt).
pub fn flags(g: &IocGroup) -> String {
    let mut flags = vec![if g.is_active { "active" } else { "idle" }];
    if g.is_active && g.weight_inuse < g.weight_active {
        flags.push("donating");
    }
    if g.debt_ms > 0.0 {
        flags.push("in-debt");
    }
    if g.delay_ms > 0.0 {
        flags.push("delayed");
    }
    flags.join(",")
}

/// Device `d`'s lines of the table, for the kernel backend; `pod_of` names a cgroup's pod after its
/// row.
pub(super) fn fmt_device(f: &mut fmt::Formatter<'_>, d: &DeviceLine, pod_of: &dyn Fn(&str) -> String) -> fmt::Result {
    let target = |t: u64| if t == 0 { "-".to_string() } else { t.to_string() };
    let targets = format!("targets r/w {}/{} µs", target(d.target_us[0]), target(d.target_us[1]));
    match &d.iocost {
        Some(k) => writeln!(
            f,
            "\n{} ({}): vrate {:.1}%  busy {}  missed r/w {:.2}%/{:.2}% ({targets})  rq-wait {}%  \
             cgroups active {} lagging {} short {} donating {}  (kernel IOCost, {:.1} s ago)",
            d.device,
            d.dev,
            k.vrate_pct,
            k.busy_level,
            f64::from(k.missed_ppm[0]) / 1e4,
            f64::from(k.missed_ppm[1]) / 1e4,
            k.rq_wait_pct,
            k.active,
            k.lagging,
            k.shortages,
            k.surpluses,
            k.age_s
        )?,
        None => writeln!(f, "\n{} ({}): kernel IOCost, {targets}", d.device, d.dev)?,
    }
    if !d.note.is_empty() {
        writeln!(f, "  {}", d.note)?;
    }
    write_group_header(f)?;
    writeln!(f, " {:>9} {:>9} {:>9}  flags", "debt ms", "delay ms", "wait ms")?;
    for g in &d.groups {
        let kernel = |of: fn(&IocGroup) -> f64| g.iocost.as_ref().map_or("-".to_string(), |k| format!("{:.2}", of(k)));
        write_group_columns(f, g)?;
        writeln!(
            f,
            " {:>9} {:>9} {:>9}  {}{}",
            kernel(|k| k.debt_ms),
            kernel(|k| k.delay_ms),
            kernel(|k| k.wait_us as f64 / 1000.0),
            g.state,
            pod_of(&g.cgroup)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::check::BackendKind;
    use crate::report::status::fixture;

    #[test]
    fn flags_say_idle_donating_in_debt_and_delayed() {
        let g = fixture::iocost_group("/tenants/a");
        assert_eq!(flags(&g), "active,donating,in-debt");
        assert_eq!(flags(&IocGroup { weight_inuse: 200.0, debt_ms: 0.0, ..g.clone() }), "active");
        assert_eq!(flags(&IocGroup { delay_ms: 3.0, ..g.clone() }), "active,donating,in-debt,delayed");
        assert_eq!(flags(&IocGroup { is_active: false, debt_ms: 0.0, ..g }), "idle");
    }

    #[test]
    fn the_kernel_backends_table_shows_the_kernels_figures() {
        let a =
            group_line(fixture::group("tenants/a", "", [5000, 0, 0, 0]), Some(&fixture::iocost_group("/tenants/a")));
        assert_eq!((a.hweight_inuse, a.usage_share, a.debt_us), (0.5, 0.61, 1500), "the shared columns");
        let idle = IocGroup { is_active: false, usage_pct: 264.9, ..fixture::iocost_group("/tenants/a") };
        assert_eq!(
            group_line(fixture::group("tenants/a", "", [0; 4]), Some(&idle)).usage_share,
            0.0,
            "idle: none used"
        );
        let b = group_line(fixture::group("tenants/b", "", [0; 4]), None);
        let mut s = fixture::status(
            vec![device_line(fixture::device(vec![a, b]), Some(&fixture::iocost_device()), String::new())],
            vec![],
        );
        s.backend = BackendKind::Kernel.name().into();
        let text = s.to_string();
        for part in [
            "loop3 (7:3): vrate 87.5%  busy 3  missed r/w 25.00%/0.00% (targets r/w 1000/- µs)  rq-wait 4%  \
             cgroups active 2 lagging 0 short 1 donating 1  (kernel IOCost, 0.1 s ago)",
            "debt ms  delay ms   wait ms  flags",
            "     1.50      0.00      1.00  active,donating,in-debt",
            "-         -         -  not reported",
        ] {
            assert!(text.contains(part), "'{part}' missing from\n{text}");
        }
        let none = device_line(fixture::device(vec![]), None, "no figures: why".into());
        s.devices = vec![none];
        let text = s.to_string();
        assert!(text.contains("loop3 (7:3): kernel IOCost, targets r/w 1000/- µs\n  no figures: why\n"), "{text}");
    }
}
