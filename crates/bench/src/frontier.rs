//! The work-conserving scenario's yardstick: the device's own trade-off between the capacity a
//! saturating neighbour uses and the latency a QD1 reader keeps.
//!
//! On a device that serves FIFO with a queue deeper than its parallelism (a virtual disk, QEMU's
//! throttle), every IO the neighbour keeps in the queue delays the QD1 reader: "p99 ≤ 1.3 × solo with
//! ≥ 90% of the leftover used" cannot hold. So the same run sweeps the uncontrolled neighbour's depth
//! (1, 2, 4, … 32); each depth gives a point (leftover used, QD1 p99 ÷ solo p99), and their upper
//! envelope, starting at (p99 1×, nothing used) for no neighbour, is the frontier. A controller is
//! judged by how far below the frontier its point lies at the latency it achieves, and by whether a
//! kernel peer's point dominates it (more leftover at no worse latency).
//!
//! A controller with a p99 target (× solo) must also hold it, unless the sweep shows the device
//! cannot ([`check_target`]): no depth of the neighbour, not even QD1, kept the reader within the
//! target, or the sweep's latency is not monotonic in the neighbour's depth — on a device whose
//! tail is set by something else (the lab guest's vCPU stalls under TCG: solo p99 75× its p50) the
//! frontier then has no stable point at the target to hold.

use serde::Serialize;

use ioshare_engine::report::RunReport;

use crate::verdict::{RunEntry, Side, Verdict};

/// The neighbour's depths the sweep runs.
pub const DEPTHS: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// A controller within this share of the frontier's leftover at its latency is "on" it (runs on a
/// shared machine vary by a few percent; the criterion).
pub const ON_FRONTIER: f64 = 0.10;

/// Dominance needs this margin on both axes, so that run-to-run noise (a few percent here) does not
/// decide it.
pub const DOMINANCE_MARGIN: f64 = 0.05;

/// One run's place in the trade-off.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// The run (controller, or `neighbour-qdN` for the sweep).
    pub label: String,
    /// QD1 reader's p99 ÷ its solo p99.
    pub p99x: f64,
    /// Share of the leftover capacity the neighbour used.
    pub leftover: f64,
}

/// Name of the sweep's reference run at neighbour depth `depth`.
pub fn sweep_name(depth: u32) -> String {
    format!("neighbour-qd{depth}")
}

/// The place of run `r` (QD1 reader first, neighbour second) given the QD1 reader's solo p99 and the
/// neighbour's capacity alone: the leftover is the capacity minus what the QD1 reader did.
pub fn point(label: &str, r: &RunReport, solo_p99: f64, capacity: f64) -> Point {
    let (qd1, sat) = (&r.tenants[0], &r.tenants[1]);
    let leftover = (capacity - qd1.iops).max(1.0);
    Point { label: label.into(), p99x: qd1.lat_us.p99 / solo_p99.max(1e-9), leftover: sat.iops / leftover }
}

/// The scenario's yardsticks, from its reference runs (`solo`, `capacity`, the sweep).
#[derive(Clone, Debug, Default)]
pub struct Yardsticks {
    /// The QD1 reader's solo p99, µs.
    pub solo_p99: f64,
    /// The QD1 reader's solo p50, µs.
    pub solo_p50: f64,
    /// The neighbour's IOPS alone.
    pub capacity: f64,
    /// The sweep's points.
    pub sweep: Vec<Point>,
    /// Their envelope.
    pub frontier: Vec<(f64, f64)>,
}

impl Yardsticks {
    /// From the reference runs among `runs`; `None` without `solo` and `capacity`.
    pub fn from_runs(runs: &[RunEntry]) -> Option<Yardsticks> {
        let reference = |name: &str| runs.iter().find(|r| r.side == Side::Reference && r.report.controller == name);
        let solo = &reference("solo")?.report.tenants[0].lat_us;
        let (solo_p99, solo_p50) = (solo.p99, solo.p50);
        let capacity = reference("capacity")?.report.device.iops;
        let sweep: Vec<Point> = DEPTHS
            .iter()
            .filter_map(|&d| reference(&sweep_name(d)))
            .map(|r| point(&r.report.controller, &r.report, solo_p99, capacity))
            .collect();
        let frontier = envelope(&sweep);
        Some(Yardsticks { solo_p99, solo_p50, capacity, sweep, frontier })
    }

    /// The place of a controlled run.
    pub fn point(&self, entry: &RunEntry) -> Point {
        point(&entry.report.controller, &entry.report, self.solo_p99, self.capacity)
    }

    /// The sweep in one line: `qd1 41% at 1.4x, qd2 ...`.
    pub fn describe(&self) -> String {
        let pts: Vec<String> = self
            .sweep
            .iter()
            .map(|p| {
                format!("{} {:.0}% at {:.1}x", p.label.trim_start_matches("neighbour-"), p.leftover * 100.0, p.p99x)
            })
            .collect();
        format!("frontier (uncontrolled neighbour's depth: leftover used at QD1 p99 / solo): {}", pts.join(", "))
    }
}

/// The frontier from the sweep's points: sorted by latency, each point at least as high as those
/// before it (the best leftover available at that latency or less), starting at (1, 0).
pub fn envelope(sweep: &[Point]) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> =
        sweep.iter().filter(|p| p.p99x.is_finite() && p.leftover.is_finite()).map(|p| (p.p99x, p.leftover)).collect();
    pts.push((1.0, 0.0));
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (x, y) in pts {
        if out.last().is_none_or(|last| y > last.1) {
            out.push((x, y));
        }
    }
    out
}

/// The frontier's leftover at latency ratio `p99x`: linear between its points, flat beyond the last.
pub fn leftover_at(frontier: &[(f64, f64)], p99x: f64) -> f64 {
    let Some(&(x0, y0)) = frontier.first() else { return f64::NAN };
    if p99x <= x0 {
        return y0;
    }
    for w in frontier.windows(2) {
        let ((xa, ya), (xb, yb)) = (w[0], w[1]);
        if p99x <= xb {
            return ya + (yb - ya) * (p99x - xa) / (xb - xa).max(1e-12);
        }
    }
    frontier.last().map_or(f64::NAN, |p| p.1)
}

/// How a run with a p99 target fared against it, and what the sweep says when it missed.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetCheck {
    /// Within the target (by [`DOMINANCE_MARGIN`], the runs' noise).
    Held,
    /// No sweep point is within the target: even the shallowest neighbour (this point) exceeds it.
    Unreachable(Point),
    /// Some sweep point is within the target, but a deeper neighbour gave a lower p99 than a
    /// shallower one (this pair, by more than the margin): the latency is not the neighbour's doing.
    Unsteady(Point, Point),
    /// Missed although the sweep, steady, had this point within the target.
    Missed(Point),
}

/// The check of a run at `p99x` against a target of `factor` × solo, given the sweep (in the order
/// of [`DEPTHS`]); `None` without a sweep to judge by.
pub fn check_target(sweep: &[Point], factor: f64, p99x: f64) -> Option<TargetCheck> {
    let within = |x: f64| x <= factor * (1.0 + DOMINANCE_MARGIN);
    let first = sweep.first()?;
    if within(p99x) {
        return Some(TargetCheck::Held);
    }
    let Some(met) = sweep.iter().filter(|p| within(p.p99x)).max_by(|a, b| a.leftover.total_cmp(&b.leftover)) else {
        return Some(TargetCheck::Unreachable(first.clone()));
    };
    Some(match sweep.windows(2).find(|w| w[1].p99x * (1.0 + DOMINANCE_MARGIN) < w[0].p99x) {
        Some(w) => TargetCheck::Unsteady(w[0].clone(), w[1].clone()),
        None => TargetCheck::Missed(met.clone()),
    })
}

/// Whether `other` dominates `p` by the margin: more leftover and no worse latency, both by
/// [`DOMINANCE_MARGIN`].
pub fn dominates(other: &Point, p: &Point) -> bool {
    other.leftover >= p.leftover * (1.0 + DOMINANCE_MARGIN) && other.p99x * (1.0 + DOMINANCE_MARGIN) <= p.p99x
}

/// A QD1 reader's point judged on the device's frontier: the leftover its neighbour used against
/// what the uncontrolled sweep's `frontier` ([`envelope`]) used at the reader's p99 (÷ solo), at most
/// [`ON_FRONTIER`] below it.
pub fn verdict(p: &Point, frontier: &[(f64, f64)]) -> Verdict {
    let best = leftover_at(frontier, p.p99x);
    if best <= 0.0 {
        return Verdict {
            pass: p.leftover > 0.0,
            value: p.leftover,
            summary: format!(
                "leftover used {:.0}% at QD1 p99 {:.2}x solo, a latency no uncontrolled neighbour left the reader",
                p.leftover * 100.0,
                p.p99x
            ),
        };
    }
    let below = 1.0 - p.leftover / best;
    Verdict {
        pass: below <= ON_FRONTIER,
        value: p.leftover,
        summary: format!(
            "leftover used {:.0}% at QD1 p99 {:.2}x solo; the frontier has {:.0}% there ({:+.0}%, >= -{:.0}%)",
            p.leftover * 100.0,
            p.p99x,
            best * 100.0,
            -below * 100.0,
            ON_FRONTIER * 100.0
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_qd1_point_is_judged_against_the_frontier_at_its_latency() {
        let point = |p99x, leftover| Point { label: "qd1".into(), p99x, leftover };
        let frontier = [(1.0, 0.0), (2.0, 0.6), (4.0, 0.9), (10.0, 1.0)];
        let v = verdict(&point(3.0, 0.7), &frontier);
        assert!(v.pass, "{v:?}");
        assert!(
            v.summary.starts_with("leftover used 70% at QD1 p99 3.00x solo; the frontier has 75%"),
            "{}",
            v.summary
        );
        assert!(!verdict(&point(3.0, 0.6), &frontier).pass, "20% below");
        assert!(verdict(&point(12.0, 0.95), &frontier).pass, "flat beyond the deepest");
        // Below every sweep point's latency the frontier has nothing: any leftover beats it.
        let v = verdict(&point(0.5, 0.9), &frontier);
        assert!(v.pass && v.summary.ends_with("a latency no uncontrolled neighbour left the reader"), "{}", v.summary);
    }

    fn p(label: &str, p99x: f64, leftover: f64) -> Point {
        Point { label: label.into(), p99x, leftover }
    }

    #[test]
    fn the_frontier_is_the_upper_envelope_from_no_neighbour() {
        // A deeper neighbour that gains nothing (qd32 vs qd16) is not on the envelope.
        let sweep = [p("qd1", 1.4, 0.5), p("qd4", 3.0, 0.85), p("qd16", 8.0, 1.0), p("qd32", 9.0, 0.98)];
        let f = envelope(&sweep);
        assert_eq!(f, [(1.0, 0.0), (1.4, 0.5), (3.0, 0.85), (8.0, 1.0)]);
        assert!((leftover_at(&f, 1.2) - 0.25).abs() < 1e-9, "halfway between no neighbour and qd1");
        assert!((leftover_at(&f, 2.2) - 0.675).abs() < 1e-9);
        assert_eq!(leftover_at(&f, 20.0), 1.0, "flat beyond the deepest");
    }

    #[test]
    fn a_missed_target_is_explained_only_by_what_the_sweep_measured() {
        let steady = [p("qd1", 1.4, 0.5), p("qd2", 1.9, 0.8), p("qd4", 3.0, 0.95)];
        assert_eq!(check_target(&steady, 2.0, 2.09), Some(TargetCheck::Held), "within 5% of 2x");
        assert_eq!(check_target(&steady, 2.0, 2.5), Some(TargetCheck::Missed(p("qd2", 1.9, 0.8))), "the device could");
        // The guest at --iops 3000: even the neighbour at QD1 puts the reader at 2.9x.
        let beyond = [p("qd1", 2.9, 1.0), p("qd2", 4.0, 1.0), p("qd4", 6.0, 1.0)];
        assert_eq!(check_target(&beyond, 2.0, 5.45), Some(TargetCheck::Unreachable(p("qd1", 2.9, 1.0))));
        // And in another run: QD2 at 1.0x after QD1 at 2.9x, then 13.7x.
        let unsteady = [p("qd1", 2.9, 1.0), p("qd2", 1.0, 1.0), p("qd8", 13.7, 1.0)];
        assert_eq!(
            check_target(&unsteady, 2.0, 6.64),
            Some(TargetCheck::Unsteady(p("qd1", 2.9, 1.0), p("qd2", 1.0, 1.0)))
        );
        // A dip within the margin is noise, not unsteadiness.
        let noisy = [p("qd1", 1.5, 0.5), p("qd2", 1.45, 0.8), p("qd4", 3.0, 0.95)];
        assert_eq!(check_target(&[], 2.0, 3.0), None, "no sweep, nothing to judge by");
        assert_eq!(check_target(&noisy, 2.0, 3.0), Some(TargetCheck::Missed(p("qd2", 1.45, 0.8))));
    }

    #[test]
    fn dominance_needs_the_margin_on_both_axes() {
        let io = p("iocost", 2.0, 0.7);
        assert!(dominates(&p("bfq", 1.8, 0.8), &io));
        assert!(!dominates(&p("bfq", 1.8, 0.72), &io), "2.9% more leftover is noise");
        assert!(!dominates(&p("bfq", 1.95, 0.9), &io), "2.5% lower latency is noise");
        assert!(!dominates(&io, &io));
    }
}
