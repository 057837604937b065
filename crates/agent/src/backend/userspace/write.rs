//! Step 5, write: each group's budget turned into blk-throttle limits ([`crate::backend::throttle`]),
//! the limits in force kept when the new ones are within a few percent ([`settle`]; on cgroup v2
//! shaped by [`super::io_max`]: IOPS knobs only, smoothed, at most one write a second); the recorder
//! writes only values that changed, and limits the same as last period's are looked at again (a
//! file someone else changed is set back, [`crate::cgroups::reapply`]) in the period after a write
//! to the cgroup's limit files ([`super::throttle_writes`]; where inotify cannot serve, when
//! [`crate::cgroups::reapply::due`] says). With `--trace` each group's line of the period's
//! [`PeriodRecord`] is built here, and the status' note on a group below its share that no limit
//! held back samples its threads' CPU ([`crate::report::cpu`]).

use ioshare_core::{Nanos, Stats};
use ioshare_host::{Recorder, Written};

use super::budget::budget;
use super::classify::{Classified, COMPETES_AT_FAIR_SHARE};
use super::device::DevicePlanner;
use super::donor::donating;
use super::io_max::iops_only;
use crate::backend::throttle::{settle, throttle_for, KEEP_WITHIN};
use crate::cgroups::hierarchy::{Flavor, Hierarchy};
use crate::cgroups::reapply::Overwrites;
use crate::error::Result;
use crate::report::trace::{GroupRecord, LimitAction};

impl DevicePlanner {
    /// Budgets every present group of `paths` for the next period and writes the limits that
    /// changed; returns how many were written and, when tracing, each group's record. `before` is
    /// the planner's state before the period, `stats` after it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_limits(
        &mut self,
        now: Nanos,
        (h, rec, overwrites): (&Hierarchy, &mut Recorder, &mut Overwrites),
        paths: &[String],
        classified: &Classified,
        before: &Stats,
        stats: &Stats,
        delivered: u64,
    ) -> Result<(usize, Vec<GroupRecord>)> {
        let dev = self.cfg.device.dev;
        let model = *self.ctl.model();
        let horizon = self.period.as_nanos() as Nanos;
        let mut written = 0;
        self.plans += 1;
        let recheck = crate::cgroups::reapply::due(self.plans, self.period);
        self.throttle_writes.sync(&h.root, self.groups.keys());
        // Threads' CPU: every period while tracing, else at each recheck for the active groups (the
        // status' note is only for those).
        let sample_cpu = self.tracing || recheck;
        let mut records = Vec::new();
        for rel in paths {
            let t = self.groups.get_mut(rel).expect("tracked");
            if !t.present {
                continue;
            }
            let g = &stats.groups[t.id.index()];
            t.sole_uncapped = classified.sole_uncapped.as_deref() == Some(rel.as_str());
            let alone = t.gets_no_limit(g);
            let allowed = budget(&mut self.ctl, now, horizon, t, g, stats);
            t.allowed = allowed;
            let planned = throttle_for(allowed, &t.usage, &model, self.period, &t.caps);
            let (planned, throttle) = match h.flavor {
                Flavor::V1 => (planned, settle(&t.throttle, planned, KEEP_WITHIN)),
                Flavor::V2 => {
                    let caps = throttle_for(None, &t.usage, &model, self.period, &t.caps);
                    let planned = iops_only(planned, &caps);
                    (planned, t.io_max.shape(&t.throttle, planned, self.period))
                }
            };
            let state = classified.states.get(rel).copied().unwrap_or_default();
            let cost = t.usage[0].cost + t.usage[1].cost;
            let target = before.groups.get(t.id.index()).map_or(0.0, |g| g.hweight_active);
            // Below its share of what the device did, and not because of a limit: the note.
            t.unused_share = g.active
                && !alone
                && !state.held
                && !state.capped
                && (cost as f64) < COMPETES_AT_FAIR_SHARE * target * delivered as f64;
            if sample_cpu && (self.tracing || g.active) {
                t.cpu = self.cpu.sample(rel, &h.dir(rel), now);
            }
            let action = if throttle != t.throttle {
                LimitAction::Written
            } else if planned != throttle {
                LimitAction::Kept
            } else {
                LimitAction::Same
            };
            if throttle != t.throttle || self.throttle_writes.due(rel, recheck) {
                match overwrites.saw(&h.dir(rel), h.set_throttle(rec, rel, dev, &throttle)?) {
                    Written::Vanished => t.present = false,
                    Written::Changed | Written::Restored => {
                        tracing::trace!(cgroup = %rel, dev = %dev, limits = %throttle, "limits written");
                        written += 1;
                        t.throttle = throttle;
                        t.io_max.wrote();
                    }
                    Written::Unchanged => t.throttle = throttle,
                }
            }
            if self.tracing {
                records.push(GroupRecord {
                    cgroup: rel.clone(),
                    weight: t.weight,
                    ios: [t.usage[0].ios, t.usage[1].ios],
                    bytes: [t.usage[0].bytes, t.usage[1].bytes],
                    cost,
                    target,
                    hweight_active: g.hweight_active,
                    hweight_inuse: g.hweight_inuse,
                    held: state.held,
                    competing: state.competing,
                    short: state.held || state.competing,
                    donating: donating(g),
                    debt_us: g.debt_us,
                    budget: allowed,
                    planned: planned.as_array(),
                    limits: t.throttle.as_array(),
                    action,
                    cpu: t.cpu,
                });
            }
        }
        Ok((written, records))
    }
}
