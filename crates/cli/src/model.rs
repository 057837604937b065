//! `ioshare model`: the coefficients a cost model line implies, and the cost of reference IOs.

use anyhow::Context;
use ioshare_core::iocost::model::{vtime_to_ns, LinearCoefs};
use ioshare_core::{CostModel, LinearModel, ModelConfig, Op};
use serde::Serialize;

/// Arguments of `ioshare model`.
#[derive(clap::Args)]
pub struct Args {
    /// An io.cost.model line, e.g. 'rbps=488636629 rseqiops=8932 rrandiops=8518 wbps=427891549
    /// wseqiops=28755 wrandiops=21940', or a preset (hdd, ssd_qd1, ssd_dfl, ssd_fast) with overrides.
    line: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Coefs {
    page_vtime: u64,
    seqio_vtime: u64,
    randio_vtime: u64,
    page_ns: f64,
    seqio_ns: f64,
    randio_ns: f64,
}

impl From<LinearCoefs> for Coefs {
    fn from(c: LinearCoefs) -> Self {
        Coefs {
            page_vtime: c.page,
            seqio_vtime: c.seqio,
            randio_vtime: c.randio,
            page_ns: vtime_to_ns(c.page),
            seqio_ns: vtime_to_ns(c.seqio),
            randio_ns: vtime_to_ns(c.randio),
        }
    }
}

#[derive(Serialize)]
struct ReferenceIo {
    io: String,
    cost_us: f64,
    iops_at_full_share: f64,
}

#[derive(Serialize)]
struct Report {
    model: String,
    read: Coefs,
    write: Coefs,
    reference_ios: Vec<ReferenceIo>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg: ModelConfig = args.line.parse().context("cannot use the model line")?;
    let model = LinearModel::new(cfg.params);
    let mut reference_ios = Vec::new();
    for (op, name) in [(Op::Read, "read"), (Op::Write, "write")] {
        for (len, random) in [(4096u32, true), (4096, false), (32 * 1024, true), (1 << 20, false)] {
            let us = vtime_to_ns(model.cost(op, len, random, false)) / 1000.0;
            let kind = if random { "random" } else { "sequential" };
            reference_ios.push(ReferenceIo {
                io: format!("{} KiB {kind} {name}", len / 1024),
                cost_us: us,
                iops_at_full_share: if us > 0.0 { 1e6 / us } else { f64::INFINITY },
            });
        }
    }
    let report =
        Report { model: cfg.to_string(), read: model.coefs[0].into(), write: model.coefs[1].into(), reference_ios };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("{}\n", report.model);
    println!(
        "{:<6} {:>14} {:>14} {:>14} {:>12} {:>12} {:>12}",
        "", "page vtime", "seqio vtime", "randio vtime", "page ns", "seqio ns", "randio ns"
    );
    for (name, c) in [("read", &report.read), ("write", &report.write)] {
        println!(
            "{name:<6} {:>14} {:>14} {:>14} {:>12.1} {:>12.1} {:>12.1}",
            c.page_vtime, c.seqio_vtime, c.randio_vtime, c.page_ns, c.seqio_ns, c.randio_ns
        );
    }
    println!("\n{:<26} {:>10} {:>14}", "reference IO", "cost µs", "IOPS at 100%");
    for r in &report.reference_ios {
        println!("{:<26} {:>10.1} {:>14.0}", r.io, r.cost_us, r.iops_at_full_share);
    }
    Ok(())
}
