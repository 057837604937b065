//! `ioshare observe --replay FILE`: a recording of the kernel IOCost's decisions (`--iocost --record`)
//! replayed through ioshare's planner rules ([`ioshare_core::iocost::replay`]): per device the periods
//! (busy level and vrate step) and the cgroups' donation decisions compared, those decided
//! identically, then each difference with its inputs.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use ioshare_core::iocost::model::VTIME_PER_USEC;
use ioshare_core::iocost::replay::{
    replay, replay_donations, Cause, DonationDifference, DonationReplay, Recorded, Recording, Replay,
};
use ioshare_core::iocost::tree::WEIGHT_ONE;
use serde::Serialize;

use crate::Found;

/// One device's replay, both halves.
#[derive(Serialize)]
struct DeviceReplay {
    device: String,
    replay: Replay,
    donations: DonationReplay,
}

/// Reads `file` (one JSON decision per line), replays each device's decisions, prints the report (a
/// table, or one JSON object with `json`). Found::VerdictFailed (exit 3) when one was decided
/// differently by the rules (not by a record read late or the kernel's overflow).
pub fn run(file: &Path, json: bool) -> anyhow::Result<Found> {
    let text = std::fs::read_to_string(file).with_context(|| format!("--replay {}", file.display()))?;
    let recording = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str::<Recorded>(line).with_context(|| {
                format!("{}:{}: not a decision of `ioshare observe --iocost --record`", file.display(), i + 1)
            })
        })
        .collect::<anyhow::Result<Recording>>()?;
    if recording.is_empty() {
        anyhow::bail!(
            "{}: no decisions: record some with `ioshare observe --iocost --record FILE` under load",
            file.display()
        );
    }
    let devices: BTreeSet<u32> =
        recording.periods.iter().map(|p| p.dev).chain(recording.donations.iter().map(|d| d.dev)).collect();
    let replays: Vec<DeviceReplay> = devices
        .into_iter()
        .map(|dev| {
            let mine = recording.clone().of_device(dev);
            DeviceReplay {
                device: format!("{}:{}", dev >> 20, dev & 0xfffff),
                replay: replay(&mine.periods),
                donations: replay_donations(&mine.donations),
            }
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&replays)?);
    } else {
        print!("{}", table(&replays));
    }
    let all_identical = replays.iter().all(|r| r.replay.differences.is_empty() && r.donations.count(Cause::Rules) == 0);
    Ok(if all_identical { Found::AsExpected } else { Found::VerdictFailed })
}

/// The report: one line per device, then one per difference.
fn table(replays: &[DeviceReplay]) -> String {
    let pct = |v: u64| v as f64 * 100.0 / VTIME_PER_USEC as f64;
    let mut out = format!(
        "{:<10} {:>8} {:>10} {:>9}   {:>9} {:>7} {:>10} {:>6} {:>9} {:>6}\n",
        "device", "periods", "identical", "share", "donation", "donors", "identical", "raced", "overflow", "rules"
    );
    for r in replays {
        out += &format!(
            "{:<10} {:>8} {:>10} {:>8.2}%   {:>9} {:>7} {:>10} {:>6} {:>9} {:>6}\n",
            r.device,
            r.replay.periods,
            r.replay.identical,
            r.replay.identical_share() * 100.0,
            r.donations.decisions,
            r.donations.donors,
            r.donations.identical,
            r.donations.count(Cause::Raced),
            r.donations.count(Cause::KernelUsageOverflow),
            r.donations.count(Cause::Rules)
        );
    }
    for r in replays.iter().filter(|r| !r.replay.differences.is_empty()) {
        out += &format!(
            "\n{}: differences\n{:>8} {:>6} {:>14} {:>19} {:>9} {:>7} {:>5} {:>5}\n",
            r.device, "period", "before", "busy kern/ours", "vrate kern/ours %", "missed r", "rq-wait", "lag", "short"
        );
        for d in &r.replay.differences {
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
    for r in replays.iter().filter(|r| !r.donations.differences.is_empty()) {
        out += &donation_table(&r.device, &r.donations.differences);
    }
    out
}

/// Donation decisions decided otherwise, one line each with its cause (shares of the device, %).
fn donation_table(device: &str, list: &[DonationDifference]) -> String {
    let share = |v: u64| v as f64 * 100.0 / WEIGHT_ONE as f64;
    let mut out = format!(
        "\n{device}: donation decisions decided otherwise (shares of the device, %; raced: read after IOs moved \
         the budget; overflow: the kernel's 32-bit product at a whole device's usage)\n\
         {:>8} {:>8} {:>15} {:>17} {:>7} {:>7} {:>7} {:>8} {:>8}  cause\n",
        "period", "cgroup", "donor kern/ours", "target kern/ours", "hwa", "hwi", "hwm", "usage", "budget"
    );
    for d in list {
        let (k, i) = (&d.kernel, &d.kernel.inputs);
        out += &format!(
            "{:>8} {:>8} {:>7}/{:<7} {:>8.2}/{:<8.2} {:>7.2} {:>7.2} {:>7.2} {:>8.2} {:>7.1}%  {}{}\n",
            k.period,
            k.cgroup,
            k.donated,
            d.donates,
            share(k.new_hwi),
            share(d.new_hwi),
            share(i.hwa),
            share(i.hwi),
            share(i.hwm),
            share(i.usage()),
            i.budget_vtime as f64 * 100.0 / i.period_vtime.max(1) as f64,
            match d.cause {
                Cause::Raced => "raced",
                Cause::KernelUsageOverflow => "overflow",
                Cause::Rules => "RULES",
            },
            if d.candidate { "" } else { "  (not a candidate by the record)" }
        );
    }
    out
}
