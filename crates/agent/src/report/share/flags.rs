//! The diagnosis: why a cgroup's weight or limits may not do on a device what the configuration
//! says. Each check is one function of a [`Case`] (one cgroup on one device) giving at most one
//! [`Flag`], a line saying why and what to do; [`CHECKS`] lists them.
//!
//! - `no_competition`: no sibling does IO, so its weight cannot act (it gets its parent's share).
//! - `controller_off`: cgroup v2 without `io` in a parent's `cgroup.subtree_control` on the path.
//! - `no_weight_control`: kernel backend, and the device is not under iocost (BFQ does not read the
//!   `io.weight` the agent writes; a bio-based device can have neither).
//! - `weight_clamped`: BFQ schedules the device and the weight is above BFQ's 1..1000.
//! - `limit_never_binds`: a limit at or above what the device can do by its model (the larger of
//!   its sequential and random IOPS, its bandwidth; a total: the larger direction).
//! - `limit_below_share`: a limit below its share of that capacity: the limit, not the weight,
//!   decides what it gets.
//! - `shadowed_rule`: a later rule also matches it and loses it (the first match wins).
//! - `unmanaged_competitor`: userspace backend, and a cgroup no rule matches is active beside it on
//!   its path — the planner limits only the cgroups its rules match.

use ioshare_core::limit::Knob;
use ioshare_core::ModelParams;
use ioshare_host::{BlockQueue, BFQ_WEIGHT_MAX};
use serde::{Deserialize, Serialize};

use super::tree::{Levels, PathShare};
use crate::cgroups::check::BackendKind;
use crate::cgroups::hierarchy::{Flavor, Hierarchy};
use crate::desired::config::{DeviceConfig, GroupConfig};
use crate::desired::rules::losing;
use crate::desired::targets::{CgroupSettings, Owner};

/// What a flag is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagKind {
    /// No active sibling: the weight cannot act.
    NoCompetition,
    /// cgroup v2 `io` not enabled on the path.
    ControllerOff,
    /// Kernel backend on a device without iocost.
    NoWeightControl,
    /// A weight beyond the device's scheduler's range.
    WeightClamped,
    /// A limit the device can never reach.
    LimitNeverBinds,
    /// A limit below what the weight gives.
    LimitBelowShare,
    /// A rule that loses cgroups to an earlier one, or never applies.
    ShadowedRule,
    /// An active cgroup no rule manages beside it (userspace backend).
    UnmanagedCompetitor,
}

/// One finding: its kind and one line saying why and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// What it is about.
    pub kind: FlagKind,
    /// Why, and what to do.
    pub message: String,
}

/// One cgroup on one device, as the checks see it.
pub struct Case<'a> {
    /// The cgroup, relative to the root.
    pub rel: &'a str,
    /// What is applied to it, and who asked (a rule, a pod).
    pub target: &'a CgroupSettings,
    /// All rules.
    pub groups: &'a [GroupConfig],
    /// Its share.
    pub path: &'a PathShare,
    /// The device.
    pub device: &'a DeviceConfig,
    /// How the device queues IO.
    pub queue: &'a BlockQueue,
    /// The backend.
    pub backend: BackendKind,
    /// The hierarchy.
    pub hierarchy: &'a Hierarchy,
}

impl Case<'_> {
    fn device_name(&self) -> &str {
        &self.device.device.name
    }
}

/// One check.
type Check = fn(&Case, &mut Levels) -> Option<Flag>;

/// Every check, in the order flags are listed.
pub const CHECKS: [Check; 8] = [
    no_competition,
    controller_off,
    no_weight_control,
    weight_clamped,
    limit_never_binds,
    limit_below_share,
    shadowed_rule,
    unmanaged_competitor,
];

/// The flags of `case`.
pub fn diagnose(case: &Case, levels: &mut Levels) -> Vec<Flag> {
    CHECKS.iter().filter_map(|check| check(case, levels)).collect()
}

fn flag(kind: FlagKind, message: String) -> Option<Flag> {
    Some(Flag { kind, message })
}

/// `rel`'s parent as a message names it.
fn parent_name(rel: &str) -> String {
    match rel.rsplit_once('/') {
        Some((parent, _)) => format!("`{parent}`"),
        None => "the root".to_string(),
    }
}

fn no_competition(c: &Case, _: &mut Levels) -> Option<Flag> {
    let own = c.path.levels.last().filter(|l| l.cgroup == c.rel)?;
    if own.active_siblings > 0 {
        return None;
    }
    let parent = parent_name(c.rel);
    flag(
        FlagKind::NoCompetition,
        format!(
            "no sibling under {parent} does IO: weight {} cannot act (a weight only divides a device between siblings \
             that compete) and it gets all of {parent}'s share; weigh the ancestor that has competitors instead, or \
             put its competitors under the same parent",
            c.target.weight
        ),
    )
}

fn controller_off(c: &Case, _: &mut Levels) -> Option<Flag> {
    let parent = c.path.controller_off.as_ref()?;
    let file = c.hierarchy.dir(parent).join("cgroup.subtree_control");
    let name = if parent.is_empty() { "the root".to_string() } else { format!("`{parent}`") };
    flag(
        FlagKind::ControllerOff,
        format!(
            "`io` is not enabled in {0}: `{1}` has no io.weight of its own there and its IO counts as {name}'s (the \
             share shown is {name}'s); enable it: echo +io > {0}",
            file.display(),
            c.rel
        ),
    )
}

fn no_weight_control(c: &Case, _: &mut Levels) -> Option<Flag> {
    if c.backend != BackendKind::Kernel || c.queue.iocost {
        return None;
    }
    let (name, dev) = (c.device_name(), c.device.device.dev);
    let qos = c.hierarchy.root.join("io.cost.qos");
    let enable = format!(
        "`ioshare agent run` switches iocost on for it at start (or: echo '{dev} enable=1' > {})",
        qos.display()
    );
    let message = match (c.queue.blk_mq, c.queue.bfq()) {
        (false, _) => format!(
            "{name} has no blk-mq request queue (device-mapper or another bio-based device): neither iocost nor BFQ \
             can run on it, so io.weight does nothing there; configure the disks below it instead"
        ),
        (true, true) => format!(
            "iocost is off on {name} and BFQ, which schedules it, reads io.bfq.weight, not the io.weight the agent \
             writes: weight {} does nothing there now; {enable}",
            c.target.weight
        ),
        (true, false) => format!(
            "iocost is off on {name} and its scheduler is {}, not BFQ: io.weight does nothing there now; {enable}",
            c.queue.scheduler.as_deref().unwrap_or("none")
        ),
    };
    flag(FlagKind::NoWeightControl, message)
}

fn weight_clamped(c: &Case, _: &mut Levels) -> Option<Flag> {
    let weight = c.target.weight;
    if !c.queue.bfq() || weight <= BFQ_WEIGHT_MAX {
        return None;
    }
    let file = match c.hierarchy.flavor {
        Flavor::V1 => "blkio.bfq.weight",
        Flavor::V2 => "io.bfq.weight",
    };
    let own = match c.backend {
        BackendKind::Userspace => "the agent's planner",
        BackendKind::Kernel => "iocost",
    };
    flag(
        FlagKind::WeightClamped,
        format!(
            "BFQ schedules {0} and takes weights 1..{BFQ_WEIGHT_MAX} only (the kernel refuses more in {file}): weight \
             {weight} is at most {BFQ_WEIGHT_MAX} wherever BFQ weighs this cgroup, which squeezes its ratios to its \
             siblings (at most 10:1 against the default 100); keep weights <= {BFQ_WEIGHT_MAX} on BFQ devices, or \
             schedule {0} with none or mq-deadline so that {own} alone weighs it",
            c.device_name()
        ),
    )
}

/// The most of `knob`'s unit the device does by its model: the larger of its sequential and random
/// IOPS, its bandwidth; for a total, the larger direction.
pub fn capacity(m: &ModelParams, knob: Knob) -> u64 {
    let (read_iops, write_iops) = (m.rseqiops.max(m.rrandiops), m.wseqiops.max(m.wrandiops));
    match knob {
        Knob::IopsRead => read_iops,
        Knob::IopsWrite => write_iops,
        Knob::IopsTotal => read_iops.max(write_iops),
        Knob::BpsRead => m.rbps,
        Knob::BpsWrite => m.wbps,
        Knob::BpsTotal => m.rbps.max(m.wbps),
    }
}

/// "IOPS" or "B/s".
fn unit(knob: Knob) -> &'static str {
    match knob.unit() {
        ioshare_core::limit::Unit::Iops => "IOPS",
        ioshare_core::limit::Unit::Bps => "B/s",
    }
}

/// The knobs set in `c`'s rule with their value and the device's capacity for them.
fn set_knobs(c: &Case) -> Vec<(Knob, u64, u64)> {
    let limits = &c.target.limits;
    Knob::ALL
        .iter()
        .map(|&k| (k, limits.knob(k).avg, capacity(&c.device.model, k)))
        .filter(|&(_, avg, _)| avg != 0)
        .collect()
}

fn limit_never_binds(c: &Case, _: &mut Levels) -> Option<Flag> {
    let over: Vec<String> = set_knobs(c)
        .into_iter()
        .filter(|&(_, avg, cap)| avg >= cap)
        .map(|(k, avg, cap)| format!("{k}={avg} >= {cap} {}", unit(k)))
        .collect();
    if over.is_empty() {
        return None;
    }
    flag(
        FlagKind::LimitNeverBinds,
        format!(
            "{} on {}: at or above the most its model says the device can do, so it never binds; lower it to the cap \
             you mean, or drop it",
            over.join(", "),
            c.device_name()
        ),
    )
}

fn limit_below_share(c: &Case, _: &mut Levels) -> Option<Flag> {
    let share = c.path.share;
    let under: Vec<String> = set_knobs(c)
        .into_iter()
        .filter(|&(_, avg, cap)| (avg as f64) < share * cap as f64)
        .map(|(k, avg, cap)| {
            format!("{k}={avg} < {:.0} {} ({:.1}% of {cap})", share * cap as f64, unit(k), share * 100.0)
        })
        .collect();
    if under.is_empty() {
        return None;
    }
    flag(
        FlagKind::LimitBelowShare,
        format!(
            "{} on {}: below what its share of the device gives at full speed, so the limit, not the weight, sets what \
             it gets; raise the limit or lower the weight",
            under.join(", "),
            c.device_name()
        ),
    )
}

fn shadowed_rule(c: &Case, _: &mut Levels) -> Option<Flag> {
    let Owner::Rule(rule) = c.target.owner else { return None }; // a pod's cgroup is no rule's
    let later = losing(c.groups, c.rel, rule);
    if later.is_empty() {
        return None;
    }
    let named: Vec<String> = later
        .iter()
        .map(|&i| format!("rule {} (`{}`, weight {})", i + 1, c.groups[i].cgroup, c.groups[i].weight))
        .collect();
    let first = rule + 1;
    flag(
        FlagKind::ShadowedRule,
        format!(
            "{} also matches it, but rule {first} (`{}`) comes first and wins; move a rule above rule {first} if it is \
             meant for this cgroup",
            named.join(", "),
            c.groups[rule].cgroup
        ),
    )
}

fn unmanaged_competitor(c: &Case, levels: &mut Levels) -> Option<Flag> {
    if c.backend != BackendKind::Userspace {
        return None;
    }
    let mut names = Vec::new();
    for level in c.path.levels.iter() {
        let parent = level.cgroup.rsplit_once('/').map_or("", |(p, _)| p);
        // The cgroup on the path is managed or above a managed one: never in the list.
        names.extend(levels.active_children(parent).unmanaged.iter().map(|s| format!("`{s}`")));
    }
    if names.is_empty() {
        return None;
    }
    let more = names.len().saturating_sub(3);
    names.truncate(3);
    let list = if more > 0 { format!("{} and {more} more", names.join(", ")) } else { names.join(", ") };
    flag(
        FlagKind::UnmanagedCompetitor,
        format!(
            "{list}: active beside it on its path and matched by no rule — the userspace backend limits only the \
             cgroups its rules match, so these take what they want whatever the weights say; add rules for them"
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ioshare_core::Limits;
    use ioshare_host::DiskId;

    use super::super::tree::memory::MemoryTree;
    use super::*;

    const DEV: ioshare_core::iocost::line::DevNum = ioshare_core::iocost::line::DevNum { major: 7, minor: 3 };

    struct Fixture {
        groups: Vec<GroupConfig>,
        managed: BTreeMap<String, u32>,
        device: DeviceConfig,
        queue: BlockQueue,
        backend: BackendKind,
        hierarchy: Hierarchy,
        tree: MemoryTree,
    }

    /// Rules `(pattern, weight, limits)`, all managing the cgroup of the same name (`t/web`), the
    /// tree `nodes`, SSD_DFL on loop3 with no scheduler, userspace backend on v1.
    fn fixture(rules: &[(&str, u32, &str)], nodes: &[(&str, u32, bool)]) -> Fixture {
        let groups: Vec<GroupConfig> = rules
            .iter()
            .map(|&(p, w, l)| GroupConfig {
                cgroup: p.into(),
                weight: w,
                limits: if l.is_empty() { Limits::default() } else { l.parse().unwrap() },
                memory: None,
            })
            .collect();
        let managed = groups.iter().filter(|g| !g.cgroup.contains('*')).map(|g| (g.cgroup.clone(), g.weight)).collect();
        Fixture {
            groups,
            managed,
            device: DeviceConfig {
                device: DiskId { dev: DEV, name: "loop3".into() },
                model: ModelParams::SSD_DFL,
                qos: None,
                tuned: None,
            },
            queue: BlockQueue { scheduler: Some("none".into()), blk_mq: true, iocost: false },
            backend: BackendKind::Userspace,
            hierarchy: Hierarchy { flavor: Flavor::V1, root: "/sys/fs/cgroup/blkio".into() },
            tree: MemoryTree::new(nodes),
        }
    }

    impl Fixture {
        /// The flags of cgroup `rel`, managed by rule `rule`.
        fn flags(&mut self, rel: &str, rule: usize) -> Vec<Flag> {
            let mut levels = Levels::new(&mut self.tree, &self.managed);
            let path = levels.path_share(rel);
            let target = CgroupSettings::of_rule(rule, &self.groups[rule]);
            let case = Case {
                rel,
                target: &target,
                groups: &self.groups,
                path: &path,
                device: &self.device,
                queue: &self.queue,
                backend: self.backend,
                hierarchy: &self.hierarchy,
            };
            diagnose(&case, &mut levels)
        }

        fn kinds(&mut self, rel: &str, rule: usize) -> Vec<FlagKind> {
            self.flags(rel, rule).into_iter().map(|f| f.kind).collect()
        }
    }

    /// t/web (rule 1) beside an active t/db (rule 2): nothing to say.
    fn two_tenants() -> Fixture {
        fixture(
            &[("t/web", 300, ""), ("t/db", 100, "")],
            &[("t", 100, true), ("t/web", 300, true), ("t/db", 100, true)],
        )
    }

    #[test]
    fn a_plain_case_has_no_flags() {
        assert!(two_tenants().flags("t/web", 0).is_empty());
    }

    #[test]
    fn no_competing_sibling() {
        let mut f = fixture(&[("t/web", 300, "")], &[("t", 100, true), ("t/web", 300, true), ("t/db", 100, false)]);
        let flags = f.flags("t/web", 0);
        assert_eq!(flags.len(), 1);
        assert_eq!(flags[0].kind, FlagKind::NoCompetition);
        assert!(flags[0].message.starts_with("no sibling under `t` does IO: weight 300 cannot act"), "{flags:?}");
    }

    #[test]
    fn controller_not_enabled_on_the_path() {
        let mut f = two_tenants();
        f.hierarchy = Hierarchy { flavor: Flavor::V2, root: "/sys/fs/cgroup".into() };
        f.tree.controller_off.insert("t".into());
        let flags = f.flags("t/web", 0);
        assert_eq!(flags.iter().map(|f| f.kind).collect::<Vec<_>>(), [FlagKind::ControllerOff]);
        assert!(flags[0].message.contains("echo +io > /sys/fs/cgroup/t/cgroup.subtree_control"), "{flags:?}");
        assert!(flags[0].message.contains("counts as `t`'s"), "{flags:?}");
    }

    #[test]
    fn kernel_backend_without_iocost() {
        let mut f = two_tenants();
        f.backend = BackendKind::Kernel;
        f.hierarchy = Hierarchy { flavor: Flavor::V2, root: "/sys/fs/cgroup".into() };
        let flags = f.flags("t/web", 0);
        assert_eq!(flags.iter().map(|f| f.kind).collect::<Vec<_>>(), [FlagKind::NoWeightControl]);
        assert!(flags[0].message.contains("its scheduler is none, not BFQ"), "{flags:?}");
        assert!(flags[0].message.contains("echo '7:3 enable=1' > /sys/fs/cgroup/io.cost.qos"), "{flags:?}");
        f.queue.scheduler = Some("bfq".into());
        assert!(f.flags("t/web", 0)[0].message.contains("reads io.bfq.weight, not the io.weight"));
        f.queue = BlockQueue { scheduler: None, blk_mq: false, iocost: false };
        assert!(f.flags("t/web", 0)[0].message.contains("no blk-mq request queue"));
        f.queue = BlockQueue { scheduler: Some("none".into()), blk_mq: true, iocost: true };
        assert!(f.flags("t/web", 0).is_empty(), "under iocost the weights act");
        f.backend = BackendKind::Userspace;
        f.queue.iocost = false;
        assert!(f.flags("t/web", 0).is_empty(), "the userspace planner needs no kernel weighing");
    }

    #[test]
    fn weight_above_bfqs_range() {
        let mut f = fixture(
            &[("t/web", 5000, ""), ("t/db", 1000, "")],
            &[("t", 100, true), ("t/web", 5000, true), ("t/db", 1000, true)],
        );
        assert!(f.flags("t/web", 0).is_empty(), "no BFQ, no clamp");
        f.queue.scheduler = Some("bfq".into());
        assert_eq!(f.kinds("t/web", 0), [FlagKind::WeightClamped]);
        assert!(f.flags("t/web", 0)[0].message.contains("weight 5000 is at most 1000"));
        assert!(f.flags("t/db", 1).is_empty(), "1000 is within BFQ's range");
    }

    #[test]
    fn limits_above_capacity_or_below_the_share() {
        // SSD_DFL: reads at most 8932 IOPS (sequential), writes 28755 IOPS, 488636629 B/s read.
        // Shares: web 300/400 = 75%, db 25%.
        let mut f = fixture(
            &[("t/web", 300, "iops-read=8932,bps-read=100000000"), ("t/db", 100, "iops-write=7000,iops-read=2000")],
            &[("t", 100, true), ("t/web", 300, true), ("t/db", 100, true)],
        );
        let web = f.flags("t/web", 0);
        assert_eq!(
            web.iter().map(|f| f.kind).collect::<Vec<_>>(),
            [FlagKind::LimitNeverBinds, FlagKind::LimitBelowShare]
        );
        assert!(web[0].message.starts_with("iops-read=8932 >= 8932 IOPS on loop3"), "{web:?}");
        // 75% of 488636629 B/s = 366477472 > 100000000.
        assert!(web[1].message.starts_with("bps-read=100000000 < 366477472 B/s (75.0% of 488636629)"), "{web:?}");
        // db: 25% of 28755 = 7189 > 7000 (below); 25% of 8932 = 2233 > 2000 (below).
        let db = f.flags("t/db", 1);
        assert_eq!(db.iter().map(|f| f.kind).collect::<Vec<_>>(), [FlagKind::LimitBelowShare]);
        assert!(
            db[0].message.starts_with("iops-read=2000 < 2233 IOPS (25.0% of 8932), iops-write=7000 < 7189 IOPS"),
            "{db:?}"
        );
        assert_eq!(capacity(&ModelParams::SSD_DFL, Knob::IopsTotal), 28755, "a total: the larger direction");
    }

    #[test]
    fn a_later_rule_that_also_matches() {
        let mut f = fixture(
            &[("t/web", 300, ""), ("t/db", 100, ""), ("t/*", 700, ""), ("t/w?b", 50, "")],
            &[("t", 100, true), ("t/web", 300, true), ("t/db", 100, true)],
        );
        let flags = f.flags("t/web", 0);
        assert_eq!(flags.iter().map(|f| f.kind).collect::<Vec<_>>(), [FlagKind::ShadowedRule]);
        assert!(
            flags[0].message.starts_with("rule 3 (`t/*`, weight 700), rule 4 (`t/w?b`, weight 50) also matches it, but rule 1 (`t/web`) comes first"),
            "{flags:?}"
        );
    }

    #[test]
    fn unmanaged_active_cgroups_beside_the_path() {
        // `sys` at the top and `t/cron` beside web are no rule's; `t/idle` is not active; `t` holds
        // managed cgroups, so it is not a competitor of `u`'s.
        let mut f = two_tenants();
        f.tree = MemoryTree::new(&[
            ("t", 100, true),
            ("sys", 100, true),
            ("t/web", 300, true),
            ("t/db", 100, true),
            ("t/cron", 100, true),
            ("t/idle", 100, false),
        ]);
        let flags = f.flags("t/web", 0);
        assert_eq!(flags.iter().map(|f| f.kind).collect::<Vec<_>>(), [FlagKind::UnmanagedCompetitor]);
        assert!(flags[0].message.starts_with("`sys`, `t/cron`: active beside it"), "{flags:?}");
        f.backend = BackendKind::Kernel;
        f.queue.iocost = true;
        assert!(f.flags("t/web", 0).is_empty(), "the kernel weighs every cgroup");
    }
}
