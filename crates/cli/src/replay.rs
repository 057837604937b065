//! `ioshare observe --replay FILE`: a recording of the kernel IOCost's periods (`--iocost --record`)
//! replayed through ioshare's planner rules ([`ioshare_core::iocost::replay`]): per device the periods
//! compared and those decided identically, then each difference with its inputs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use ioshare_core::iocost::model::VTIME_PER_USEC;
use ioshare_core::iocost::replay::{replay, KernelPeriod, Replay};

use crate::Found;

/// Reads `file` (one JSON period per line), replays each device's periods, prints the report (a table,
/// or one JSON object with `json`). Found::VerdictFailed (exit 3) when a period was decided differently.
pub fn run(file: &Path, json: bool) -> anyhow::Result<Found> {
    let text = std::fs::read_to_string(file).with_context(|| format!("--replay {}", file.display()))?;
    let mut by_device: BTreeMap<u32, Vec<KernelPeriod>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let p: KernelPeriod = serde_json::from_str(line).with_context(|| {
            format!("{}:{}: not a period of `ioshare observe --iocost --record`", file.display(), i + 1)
        })?;
        by_device.entry(p.dev).or_default().push(p);
    }
    if by_device.is_empty() {
        anyhow::bail!(
            "{}: no periods: record some with `ioshare observe --iocost --record FILE` under load",
            file.display()
        );
    }
    let replays: Vec<(String, Replay)> =
        by_device.iter().map(|(dev, periods)| (format!("{}:{}", dev >> 20, dev & 0xfffff), replay(periods))).collect();
    if json {
        let doc: Vec<_> = replays.iter().map(|(d, r)| serde_json::json!({ "device": d, "replay": r })).collect();
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", table(&replays));
    }
    let all_identical = replays.iter().all(|(_, r)| r.differences.is_empty());
    Ok(if all_identical { Found::AsExpected } else { Found::VerdictFailed })
}

/// The report: one line per device, then one per difference.
fn table(replays: &[(String, Replay)]) -> String {
    let pct = |v: u64| v as f64 * 100.0 / VTIME_PER_USEC as f64;
    let mut out = format!("{:<10} {:>8} {:>10} {:>9}\n", "device", "periods", "identical", "share");
    for (dev, r) in replays {
        out += &format!("{dev:<10} {:>8} {:>10} {:>8.2}%\n", r.periods, r.identical, r.identical_share() * 100.0);
    }
    for (dev, r) in replays.iter().filter(|(_, r)| !r.differences.is_empty()) {
        out += &format!(
            "\n{dev}: differences\n{:>8} {:>6} {:>14} {:>19} {:>9} {:>7} {:>5} {:>5}\n",
            "period", "before", "busy kern/ours", "vrate kern/ours %", "missed r", "rq-wait", "lag", "short"
        );
        for d in &r.differences {
            let k = &d.kernel;
            out += &format!(
                "{:>8} {:>6} {:>7}/{:<6} {:>9.2}/{:<9.2} {:>9} {:>6}% {:>5} {:>5}\n",
                k.period,
                d.prev_busy_level,
                k.busy_level,
                d.busy_level,
                pct(k.new_vrate),
                pct(d.vrate),
                k.missed_ppm[0],
                k.rq_wait_pct,
                k.nr_lagging,
                k.nr_shortages
            );
        }
    }
    out
}
