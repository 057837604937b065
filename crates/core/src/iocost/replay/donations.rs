//! The donation half of the decision replay: each cgroup the kernel weighed for donation in a
//! period, decided again by ioshare's rules ([`DonorInputs`]) from the inputs the kernel had.
//!
//! The kernel reports the decision per cgroup: `iocost_inuse_transfer` for a donor (with its target
//! hweight_inuse) and `iocost_inuse_shortage` for a candidate that keeps its full weight (with what
//! it computed, its hweight_max as a rule). `ioshare observe --iocost --record` reads the inputs at
//! the same event from the kernel's own structures ([`KernelDonation`]). What an event cannot carry
//! exactly:
//! - the budget is read after the kernel threw away what was above the target margin, which leaves
//!   the decision unchanged (the rule reads the budget capped at that margin anyway);
//! - a donor's hweight_max is read at its transfer event, after the period's other candidates were
//!   settled (for a shortage, right after its own decision); a donor's target is below it either
//!   way unless a settled neighbour took its whole share;
//! - the cgroup's vtime and done_vtime are read microseconds after the decision (in the emulated
//!   lab guest, longer), and the kernel charges and completes its IOs without the lock its timer
//!   holds: an IO issued in between leaves less budget and more in flight in the record, one
//!   completed in between less in flight. So where a record differs, the decision it can explain
//!   is bounded below only: by the target the cgroup's own usage gives with the fullest budget the
//!   rule counts and nothing in flight. A kernel target at or above that floor — or a record that
//!   no longer makes the cgroup a candidate — is counted as *raced*; one below it cannot come from
//!   the race and is a difference of the rules.
//!
//! One difference is the kernel's own arithmetic: `hweight_after_donation` multiplies `WEIGHT_ONE`
//! (an `int`) by the usage (a `u32`) in 32 bits, so a usage of the whole device — 2^16 × 2^16 —
//! wraps to 0 and the target becomes 1: a cgroup that used all of the device in a period (its usage
//! counts device time at the base vrate, so a saturating group's can reach it) gives away its whole
//! share. Recorded in the lab guest (Linux 6.1) in the first period of the bench's runs; ioshare
//! multiplies in 64 bits and keeps the share, and the replay names the cause
//! ([`Cause::KernelUsageOverflow`]).
//!
//! Donors in debt are skipped by the kernel's transfer and report nothing; periods with candidates
//! but no group short of budget transfer nothing either.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::iocost::donation::{scale_down_over_share, DonorInputs};
use crate::iocost::tree::WEIGHT_ONE;

/// One cgroup's donation decision in one period as the kernel reported it, with its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDonation {
    /// The device, `MAJOR << 20 | MINOR`.
    pub dev: u32,
    /// The kernel's period counter.
    pub period: u64,
    /// The cgroup's kernfs id.
    pub cgroup: u64,
    /// What the decision read.
    pub inputs: DonorInputs,
    /// Whether it donated (a transfer event) or kept its weight (a shortage event).
    pub donated: bool,
    /// The kernel's target hweight_inuse: a donor's after the scale-down of targets above their
    /// share, or what a shortage computed.
    pub new_hwi: u64,
}

/// Why a decision differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Cause {
    /// The record was read after IOs issued or completed moved its budget or its IOs in flight
    /// (module comment): not a candidate by the record, or a kernel target the race can explain.
    Raced,
    /// The kernel's 32-bit product wrapped at a usage of the whole device: target 1.
    KernelUsageOverflow,
    /// Neither: the rules differ.
    Rules,
}

/// One cgroup-period decided differently.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DonationDifference {
    /// The kernel's record.
    pub kernel: KernelDonation,
    /// Whether ioshare's rules weigh the group for donation at all.
    pub candidate: bool,
    /// ioshare's target hweight_inuse (after the period's scale-down for a donor).
    pub new_hwi: u64,
    /// Whether ioshare's rules make it donate.
    pub donates: bool,
    /// Why.
    pub cause: Cause,
}

/// The donation replay of a recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DonationReplay {
    /// Cgroup-periods compared.
    pub decisions: u64,
    /// Of them, donors the kernel reported.
    pub donors: u64,
    /// Of them, decided identically: the same donor or not, the same target.
    pub identical: u64,
    /// The others, each with its cause.
    pub differences: Vec<DonationDifference>,
}

impl DonationReplay {
    /// How many differ for `cause`.
    pub fn count(&self, cause: Cause) -> usize {
        self.differences.iter().filter(|d| d.cause == cause).count()
    }
}

/// Replays `records` (any order, any devices): per device and period, each cgroup's decision from
/// its inputs, the period's donors' targets scaled down together as the kernel does.
pub fn replay_donations(records: &[KernelDonation]) -> DonationReplay {
    let mut by_period: BTreeMap<(u32, u64), Vec<&KernelDonation>> = BTreeMap::new();
    for r in records {
        by_period.entry((r.dev, r.period)).or_default().push(r);
    }
    let mut out = DonationReplay::default();
    for period in by_period.values() {
        let ours: Vec<Option<u64>> = period.iter().map(|r| r.inputs.donation()).collect();
        let mut targets: Vec<(u64, u64)> =
            period.iter().zip(&ours).filter_map(|(r, d)| d.map(|t| (r.inputs.hwa, t))).collect();
        scale_down_over_share(&mut targets);
        let mut scaled = targets.iter().map(|&(_, t)| t);
        for (r, d) in period.iter().zip(&ours) {
            let candidate = r.inputs.is_candidate();
            let new_hwi = match d {
                Some(_) => scaled.next().expect("one scaled target per donor"),
                None => r.inputs.target(),
            };
            let donates = d.is_some();
            out.decisions += 1;
            out.donors += u64::from(r.donated);
            if candidate && donates == r.donated && new_hwi == r.new_hwi {
                out.identical += 1;
                continue;
            }
            let overflowed = r.donated && r.new_hwi == 1 && !r.inputs.in_debt && r.inputs.usage() == WEIGHT_ONE;
            let cause = if overflowed {
                Cause::KernelUsageOverflow
            } else if !candidate || r.new_hwi >= raced_floor(&r.inputs) {
                Cause::Raced
            } else {
                Cause::Rules
            };
            out.differences.push(DonationDifference { kernel: **r, candidate, new_hwi, donates, cause });
        }
    }
    out
}

/// The lowest target IOs issued or completed after the decision can explain: the one the decision
/// would have made with its budget at the target margin (the most the rule counts) and nothing in
/// flight.
fn raced_floor(inputs: &DonorInputs) -> u64 {
    DonorInputs { budget_vtime: inputs.margin_target as i64, inflight_vtime: 0, ..*inputs }.target()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iocost::model::VTIME_PER_USEC;

    /// A group at half the device, 10 ms periods at vrate 100%, active all period, using `usage_us`.
    fn inputs(usage_us: u64, budget_pct: i64) -> DonorInputs {
        let period_vtime = 10_000 * VTIME_PER_USEC;
        DonorInputs {
            usage_us,
            usage_dur_us: 10_000,
            vtime_base_rate: VTIME_PER_USEC,
            hwa: WEIGHT_ONE / 2,
            hwi: WEIGHT_ONE / 2,
            hwm: WEIGHT_ONE / 2,
            budget_vtime: period_vtime as i64 * budget_pct / 100,
            period_vtime,
            margin_min: period_vtime / 10,
            margin_low: period_vtime / 5,
            margin_target: period_vtime / 2,
            ..DonorInputs::default()
        }
    }

    fn record(period: u64, cgroup: u64, inputs: DonorInputs, donated: bool, new_hwi: u64) -> KernelDonation {
        KernelDonation { dev: 1, period, cgroup, inputs, donated, new_hwi }
    }

    #[test]
    fn a_light_group_donates_down_to_its_usage_and_a_busy_one_keeps_its_share() {
        // 1 ms of 10 used, the budget at the target margin: usage / (1 − 0.5 + 0.5) = 10%.
        let light = inputs(1_000, 50);
        assert_eq!(light.usage(), WEIGHT_ONE / 10 + 1, "rounded up");
        assert_eq!(light.donation(), Some(WEIGHT_ONE / 10 + 1));
        // Budget above the target is thrown away first: the same target, and the excess booked.
        let rich = inputs(1_000, 80);
        assert_eq!(rich.donation(), light.donation());
        assert_eq!(rich.excess() as i64, rich.budget_vtime - light.budget_vtime);
        // Less than the minimum margin left, or waiting: no donation, the target is hwm.
        let poor = inputs(1_000, 5);
        assert_eq!((poor.donation(), poor.target(), poor.excess()), (None, poor.hwm, 0));
        assert!(!poor.is_candidate(), "below the low margin at full weight");
        // IOs in flight count when they cost more than the period's usage.
        let inflight = DonorInputs { inflight_vtime: 5_000 * VTIME_PER_USEC, ..light };
        assert_eq!(inflight.usage(), WEIGHT_ONE / 4, "5 ms at half the device, over 10 ms");
    }

    #[test]
    fn the_kernels_decisions_are_matched_and_a_wrong_target_is_reported() {
        let (light, busy) = (inputs(1_000, 50), inputs(9_000, 30));
        let busy_target = busy.target();
        assert!(busy_target >= busy.hwm, "the busy group keeps its share");
        let records = [
            record(7, 1, light, true, light.target()),
            record(7, 2, busy, false, busy_target),
            record(8, 1, light, true, light.target() + 1),
            // Raced: an IO issued after the decision left the record below the low margin, or with
            // less budget than the kernel's smaller target implies; IOs completed after it, less in
            // flight than its larger one.
            record(9, 2, inputs(9_000, 15), false, busy_target),
            record(10, 1, inputs(1_000, 25), true, light.target()),
            record(11, 1, light, true, 2 * light.target()),
            // Below what any budget gives its usage: the rules.
            record(12, 1, light, true, light.target() / 2),
        ];
        let r = replay_donations(&records);
        assert_eq!((r.decisions, r.donors, r.identical), (7, 5, 2), "{r:?}");
        let by = |cause| -> Vec<u64> {
            r.differences.iter().filter(|d| d.cause == cause).map(|d| d.kernel.period).collect()
        };
        assert_eq!(by(Cause::Raced), [8, 9, 10, 11], "more in flight at the decision explains 8");
        assert_eq!(by(Cause::Rules), [12], "below the floor");
        let first = &r.differences[0];
        assert_eq!((first.new_hwi, first.donates, first.candidate), (light.target(), true, true));
        assert!(!r.differences[1].candidate, "period 9: below the low margin by the record");
    }

    #[test]
    fn a_group_using_the_whole_device_is_the_kernels_32_bit_overflow() {
        // 12 ms of device time in a 10 ms period: usage clamps to the whole device. The kernel's
        // product wraps to 0 and it donates down to 1; ioshare keeps the share.
        let saturating = inputs(12_000, 30);
        assert_eq!(saturating.usage(), WEIGHT_ONE);
        assert_eq!(saturating.donation(), None);
        let r = replay_donations(&[record(2, 1, saturating, true, 1)]);
        assert_eq!((r.identical, r.count(Cause::KernelUsageOverflow)), (0, 1), "{r:?}");
        // The same target of 1 below the whole device is no overflow: the rules differ.
        let r = replay_donations(&[record(2, 1, inputs(9_000, 30), true, 1)]);
        assert_eq!(r.count(Cause::Rules), 1, "{r:?}");
    }

    #[test]
    fn a_malformed_record_is_decided_without_panicking() {
        // A file edited by hand: no hweight_max, no vrate, no period. The replay decides and lists
        // it; nothing divides by zero or clamps into an empty range.
        let odd = DonorInputs { hwm: 0, vtime_base_rate: 0, period_vtime: 0, inflight_vtime: 7, ..inputs(1_000, 50) };
        assert_eq!(odd.target(), 1);
        let r = replay_donations(&[record(1, 1, odd, true, 5)]);
        assert_eq!((r.decisions, r.identical), (1, 0), "{r:?}");
    }

    #[test]
    fn targets_above_their_share_summing_past_one_are_scaled_down_as_the_kernel_does() {
        // Two donors whose targets exceed their active shares and sum past the device.
        let over = DonorInputs { hwa: WEIGHT_ONE / 4, hwm: WEIGHT_ONE, ..inputs(7_000, 50) };
        let t = over.target();
        assert!(2 * t > WEIGHT_ONE && t > over.hwa, "{t}");
        let mut pair = [(over.hwa, t), (over.hwa, t)];
        scale_down_over_share(&mut pair);
        let scaled = pair[0].1;
        assert!(2 * scaled < WEIGHT_ONE && scaled >= (WEIGHT_ONE - 1) / 2 - 1, "{scaled}");
        let r = replay_donations(&[record(3, 1, over, true, scaled), record(3, 2, over, true, scaled)]);
        assert_eq!(r.identical, 2, "{r:?}");
    }
}
