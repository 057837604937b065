//! `ioshare profile`: parses the options, runs the engine's device profile, prints the runs, the
//! model and the kernel lines (or JSON).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::bail;
use ioshare_core::iocost::model::vtime_to_ns;
use ioshare_core::{LinearModel, NSEC_PER_SEC};
use ioshare_engine::interrupt;
use ioshare_engine::profile::measure::Plan;
use ioshare_engine::profile::{self, Profile, ProfileOptions};

/// Arguments of `ioshare profile`.
#[derive(clap::Args)]
#[command(after_help = "\
Writing destroys data. profile writes only to a file it created itself (TARGET a directory), or to
a file or block device given with --destructive; a block device is then opened exclusively (O_EXCL),
which the kernel refuses while it is mounted, so a mounted device is never written. An existing file
or device without --destructive is refused before any IO, unless --read-only asks for reads only.

Method (kernel iocost_coef_gen.py, resctl-bench iocost-params): saturating sequential 128 MiB reads
and writes at QD1 (rbps, wbps), sequential and random 4 KiB reads and writes at QD64 (seqiops,
randiops), each in interleaved rounds, the best round counting; then 4 KiB random reads (writes)
capped at 90% of the measured randiops: latency target = 1.5 x the p95 (p50 on a rotational disk) of
the median round; vrate min=60 max=100. IOs are not merged: on a whole disk profile owns (--loop, or
a device with --destructive) queue/nomerges is 2 for the runs and restored afterwards (a killed
profile's setting is restored by the next one); elsewhere each IO is submitted alone. The output
states the method and an equivalent fio command per run, and the merges the disk counted.")]
pub struct Args {
    /// A directory (a temporary file is created there, written, measured and removed), a file, or a
    /// block device.
    target: PathBuf,
    /// Measure reads only (never writes; a mounted device may be read). Write coefficients are then
    /// derived from the reads and a built-in set's write:read ratios, and the output says so.
    #[arg(long)]
    read_only: bool,
    /// Allow writing to an existing file or an unmounted block device: its data is destroyed.
    #[arg(long, conflicts_with = "read_only")]
    destructive: bool,
    /// Measure through a loop device (direct IO) over the file; needs root. The lines then name
    /// the loop device.
    #[arg(long = "loop")]
    loop_device: bool,
    /// Length of each round, seconds. Each of the 8 runs (4 with --read-only) is split into
    /// --rounds interleaved rounds; the best round gives a coefficient, the median one a latency.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    duration: f64,
    /// Rounds per run.
    #[arg(long, value_name = "N", default_value_t = 4)]
    rounds: u32,
    /// Short mode: one 1 s round per run and a 256 MiB temporary file (about 10 s; rougher figures).
    #[arg(long, conflicts_with_all = ["duration", "rounds", "size"])]
    quick: bool,
    /// Size of the temporary file created in a TARGET directory, MiB.
    #[arg(long, value_name = "MIB", default_value_t = 2048)]
    size: u64,
    /// Queue depth of the 4 KiB runs (per job).
    #[arg(long, default_value_t = 64)]
    depth: u32,
    /// Most parallel jobs (threads, one io_uring each) a run is raised to, as fio's --numjobs: the
    /// first round adds one job at a time while one more adds at least 5%. 1: one job.
    #[arg(long, value_name = "N", default_value_t = profile::MAX_JOBS)]
    jobs: u32,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Where device settings profile changes (queue/nomerges) are recorded until restored; a
    /// killed profile's are restored by the next profile with the same directory.
    #[arg(long, value_name = "DIR", default_value = profile::STATE_DIR, hide = true)]
    state_dir: PathBuf,
}

/// Runs `ioshare profile`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let base = if args.quick {
        ProfileOptions::quick()
    } else {
        let duration = (args.duration.max(0.0) * 1e9) as u64;
        let full = ProfileOptions::default();
        ProfileOptions {
            plan: Plan { duration, warmup: (duration / 6).min(2 * NSEC_PER_SEC), rounds: args.rounds, ..full.plan },
            temp_size: args.size.saturating_mul(1 << 20),
            ..full
        }
    };
    let opts = ProfileOptions {
        plan: Plan { depth: args.depth, max_jobs: args.jobs, ..base.plan },
        read_only: args.read_only,
        destructive: args.destructive,
        loop_device: args.loop_device,
        state_dir: args.state_dir,
        ..base
    };
    if let Err(msg) = opts.validate() {
        bail!(msg);
    }
    let tty = std::io::stderr().is_terminal();
    let stop = interrupt::stop_flag();
    let result = profile::profile(&args.target, &opts, stop, &mut |line| crate::status_line(tty, line));
    crate::clear_status(tty);
    let found = match result {
        Ok(p) => p,
        Err(ioshare_engine::Error::Interrupted) => {
            eprintln!("ioshare: {}", ioshare_engine::Error::Interrupted);
            // The shell's code for Ctrl-C.
            std::process::exit(130);
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else {
        print!("{}", table(&found));
    }
    Ok(())
}

fn table(p: &Profile) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let created = if p.created { ", created and removed by profile" } else { "" };
    let _ = writeln!(s, "target: {} ({}{created}, {} MiB)", p.measured.display(), p.kind, p.size >> 20);
    if let Some(d) = &p.disk {
        let rot = match d.rotational {
            Some(true) => ", rotational",
            Some(false) => ", non-rotational",
            None => "",
        };
        let _ = writeln!(s, "disk:   {} ({}{rot})", d.name, d.dev);
    }
    let m = &p.method;
    let batch = if m.submit_batch == 1 {
        "each IO submitted alone".to_string()
    } else {
        format!("IOs submitted in batches of {}", m.submit_batch)
    };
    let _ = writeln!(s, "method: merges {}", m.merges);
    let _ = writeln!(
        s,
        "        {}, {batch}, scheduler {}; bandwidth runs {} at QD{}, 4 KiB runs at QD{} per job; parallel jobs \
         raised from 1 (up to {}) in the first round while one more added 5%; {} round(s) of {:.1} s per run ({:.1} s \
         warm-up), interleaved, the best counting",
        m.io,
        m.scheduler.as_deref().unwrap_or("(none)"),
        ioshare_engine::profile::measure::size_name(m.big_block),
        m.big_depth,
        m.depth,
        m.max_jobs,
        m.rounds,
        m.round_s,
        m.warmup_s
    );
    let _ = writeln!(
        s,
        "\n{:<10} {:<48} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>17}",
        "run", "job", "jobs", "IOPS", "MB/s", "p50 us", "p95 us", "p99 us", "spread", "merged/requests"
    );
    for r in &p.runs {
        let merged = r.merges.map_or("-".to_string(), |m| format!("{}/{}", m.merged, m.requests));
        let _ = writeln!(
            s,
            "{:<10} {:<48} {:>4} {:>9.0} {:>9.1} {:>9.0} {:>9.0} {:>9.0} {:>6.0}% {:>17}",
            r.name,
            r.job,
            r.jobs,
            r.iops,
            r.bw_bytes / 1e6,
            r.lat_us.p50,
            r.lat_us.p95,
            r.lat_us.p99,
            r.spread_pct,
            merged
        );
    }
    let _ = writeln!(s, "\nfio equivalents (one round each):");
    for r in &p.runs {
        let _ = writeln!(s, "  {}", r.fio);
    }
    let model = LinearModel::new(p.model);
    let _ = writeln!(s, "\nmodel (device time per IO at 100% vrate):");
    for (name, c) in [("read", model.coefs[0]), ("write", model.coefs[1])] {
        let derived = if name == "write" && !p.writes_measured { "  (derived, not measured)" } else { "" };
        let _ = writeln!(
            s,
            "  {name:<5}  per 4 KiB page {:>8.1} ns   sequential base {:>8.1} us   random base {:>8.1} us{derived}",
            vtime_to_ns(c.page),
            vtime_to_ns(c.seqio) / 1e3,
            vtime_to_ns(c.randio) / 1e3
        );
    }
    let _ = writeln!(s, "\nio.cost.model: {}", p.model_line);
    let _ = writeln!(s, "io.cost.qos:   {}", p.qos_line);
    for n in &p.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
