//! The kernel-faithful IOCost's drift on the lab guest's disk (QEMU's throttle with its
//! burst allowance), reproduced in virtual time through the built-in `throttle-drift`, and its cause
//! pinned down: the burst (without it the split holds exactly), not the bench's 32 device slots (a
//! kernel-like deep queue drifts alike), and vrate climbing past the device while the burst hides
//! the excess (every interval where the split collapses follows one where vrate was over the
//! device). The device-depth option holds the split on the same device. The tolerances live beside
//! the scenario.

use ioshare_sim::scenarios::{find, Args, Outcome};
use ioshare_sim::Report;

fn outcome() -> Outcome {
    let out = (find("throttle-drift").expect("built-in exists").run)(&Args::default()).expect("scenario runs");
    assert!(out.ok(), "{}", out.to_table());
    out
}

fn named<'a>(out: &'a Outcome, name: &str) -> &'a Report {
    out.runs.iter().find(|r| r.controller == name).unwrap_or_else(|| panic!("no run {name}"))
}

/// Per sample interval: (end s, low/high IOPS, vrate % at the end).
fn series(r: &Report) -> Vec<(f64, f64, f64)> {
    let (high, low) = (&r.group("high").series, &r.group("low").series);
    high.iter()
        .zip(low)
        .zip(&r.device.series)
        .map(|((h, l), d)| (h.t_s, l.iops / h.iops.max(1e-9), d.vrate_pct))
        .collect()
}

#[test]
fn without_the_burst_the_faithful_split_holds_for_10_s() {
    let out = outcome();
    let r = named(&out, "iocost, no burst");
    // The whole run within 3% (the scenario's comparison), and every second after the first two
    // (vrate settles from its start at 100%) within the 5%: a second holds six periods,
    // and vrate still moves ±6% around the device without the burst, which shifts a second's split
    // by up to 4% (the exact figures of this seed).
    for (t, ratio, _) in series(r).into_iter().filter(|p| p.0 > 2.0) {
        assert!((ratio / 3.0 - 1.0).abs() <= 0.05, "t {t}: {ratio}");
    }
    assert!(r.device.utilization >= 0.97, "{}", r.device.utilization);
}

#[test]
fn with_the_burst_the_faithful_split_collapses_after_vrate_overshoots_at_any_queue_depth() {
    let out = outcome();
    for name in ["iocost, burst, 32 slots", "iocost, burst, deep queue"] {
        let s = series(named(&out, name));
        // The FIFO's split (queue depths equal: 1:1) in some second...
        let collapse = s.iter().position(|p| p.1 < 1.2).unwrap_or_else(|| panic!("{name}: no collapse {s:?}"));
        // ...after seconds of the weights' split (8%: the seconds around vrate's turns)...
        let held = s[..collapse].iter().filter(|p| (p.1 / 3.0 - 1.0).abs() <= 0.08).count();
        assert!(held >= 3, "{name}: {held} seconds at the weights' split before the collapse: {s:?}");
        // ...and after vrate climbed past the device (at most a second before: vrate is read at
        // each second's end and falls once the latency target is missed).
        let peak = s[..=collapse].iter().map(|p| p.2).fold(0.0, f64::max);
        assert!(peak > 110.0, "{name}: vrate peaked at {peak}% before the collapse: {s:?}");
    }
}

#[test]
fn a_model_above_the_device_drifts_from_the_start() {
    let out = outcome();
    let s = series(named(&out, "iocost, burst, model +19%"));
    assert!(s[1].1 < 1.2, "the first measured second is already the FIFO's split: {s:?}");
}

#[test]
fn the_device_depth_option_holds_the_split_on_the_throttle() {
    let out = outcome();
    let r = named(&out, "iocost+qd, burst, model +19%");
    // Every second after the first (its model still settles) within the scenario's 3% comparison:
    // the depth gate keeps the IOs in the controller, not in the throttle's FIFO, so a second's
    // split is the weights' up to the rounding of ~500 IOs a second per group (0.2%) and vrate's
    // small moves.
    for (t, ratio, _) in series(r).into_iter().skip(1) {
        assert!((ratio / 3.0 - 1.0).abs() <= 0.03, "t {t}: {ratio}");
    }
}
