//! The scenario's criteria, one pure function per case: a case's figures in, its [`Verdict`] out
//! (the thresholds are the scenario's constants; [`super`] says why each is what it is).

use super::{CAP_IOPS, CAP_TOLERANCE, DONATED_MIN, DONATION_DELAY_S, RATIO_TOLERANCE, TOTAL_MIN};
use crate::verdict::Verdict;

/// Case 1: the ratio of the two clients' IOPS against the weights' `target`, and their total against
/// `reference` (the same clients without the filter).
pub fn split_verdict(high: f64, low: f64, target: f64, reference: f64) -> Verdict {
    let ratio = high / low.max(1e-9);
    let total = (high + low) / reference;
    Verdict {
        pass: (ratio / target - 1.0).abs() <= RATIO_TOLERANCE && total >= TOTAL_MIN,
        value: ratio,
        summary: format!(
            "ratio {ratio:.2} (target {target:.2} ±{:.0}%), total {:.0}% of no filter (>= {:.0}%)",
            RATIO_TOLERANCE * 100.0,
            total * 100.0,
            TOTAL_MIN * 100.0
        ),
    }
}

/// Case 2: what the other client took after the drop against what the paced one left of `capacity`.
pub fn donation_verdict(other_after: f64, paced: f64, capacity: f64) -> Verdict {
    let left = (capacity - paced).max(1.0);
    let taken = other_after / left;
    Verdict {
        pass: taken >= DONATED_MIN,
        value: taken,
        summary: format!(
            "from {DONATION_DELAY_S:.0} s after the drop the other took {other_after:.0} IOPS, {:.0}% of the {left:.0} \
             left beside the paced {paced:.0} (>= {:.0}%)",
            taken * 100.0,
            DONATED_MIN * 100.0
        ),
    }
}

/// Case 4: the capped client's IOPS against the cap.
pub fn cap_verdict(iops: f64, cap: u64) -> Verdict {
    let off = iops / cap as f64 - 1.0;
    Verdict {
        pass: off.abs() <= CAP_TOLERANCE,
        value: iops,
        summary: format!(
            "{iops:.0} IOPS under iops-read={cap} ({:+.1}%, within ±{:.0}%)",
            off * 100.0,
            CAP_TOLERANCE * 100.0
        ),
    }
}

/// Case 5: nbdkit's CPU per IO, µs: the filter's at the cap against the rate filter's at the same cap
/// (both hold every request until its time), and, reported, the filter's at 2:1 against none's.
pub fn cpu_verdict(cap_us: f64, rate_us: f64, filter_us: f64, none_us: f64) -> Verdict {
    Verdict {
        pass: cap_us <= rate_us,
        value: cap_us,
        summary: format!(
            "nbdkit CPU per IO at the {CAP_IOPS} cap {cap_us:.1} us with the filter, {rate_us:.1} us with the rate \
             filter (<= it); at 2:1 {filter_us:.1} us with the filter, {none_us:.1} us without ({:+.1} us, {:.2}x)",
            filter_us - none_us,
            filter_us / none_us
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_needs_the_ratio_and_the_total() {
        let v = split_verdict(6540.0, 3288.0, 2.0, 10_000.0);
        assert!(v.pass, "{v:?}");
        assert!(v.summary.starts_with("ratio 1.99 (target 2.00 ±5%), total 98%"), "{}", v.summary);
        // 5% off 2.00 is 1.90: 1.901 is in, 1.899 out.
        assert!(split_verdict(1901.0, 1000.0, 2.0, 2901.0).pass);
        assert!(!split_verdict(1899.0, 1000.0, 2.0, 2899.0).pass);
        // The right ratio with 10% of the device idle fails on the total.
        assert!(!split_verdict(6000.0, 3000.0, 2.0, 10_000.0).pass);
        assert!(!split_verdict(6000.0, 0.0, 2.0, 6000.0).pass, "a client that did nothing");
    }

    #[test]
    fn the_drop_is_judged_on_what_the_paced_client_leaves() {
        // 10 000 of capacity, the paced one at 660: 9340 left.
        let v = donation_verdict(8500.0, 660.0, 10_000.0);
        assert!(v.pass && (v.value - 8500.0 / 9340.0).abs() < 1e-12, "{v:?}");
        assert!(!donation_verdict(8300.0, 660.0, 10_000.0).pass);
        assert!(!donation_verdict(f64::NAN, 660.0, 10_000.0).pass, "no samples after the drop");
    }

    #[test]
    fn cap_and_cpu_have_their_bounds() {
        assert!(cap_verdict(4998.0, 5000).pass && cap_verdict(5240.0, 5000).pass);
        assert!(!cap_verdict(5300.0, 5000).pass && !cap_verdict(4700.0, 5000).pass);
        let v = cpu_verdict(35.0, 153.0, 44.0, 20.0);
        assert!(v.pass && v.summary.ends_with("20.0 us without (+24.0 us, 2.20x)"), "{}", v.summary);
        assert!(!cpu_verdict(160.0, 153.0, 44.0, 20.0).pass);
        assert!(!cpu_verdict(f64::NAN, 153.0, 44.0, 20.0).pass, "nbdkit's CPU unknown");
    }
}
