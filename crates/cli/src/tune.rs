//! `ioshare tune`: parses the options, runs ioshare-tune's sweep (ioshare's IOCost inline, or with
//! `--kernel` the kernel's, through the bench crate's kernel peers), or resumes or merges result
//! files, or fits an agent trace with `--from-trace`; prints the points, tables, fits and solutions
//! (or JSON), and writes one SVG per series.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context};
use ioshare_bench::tune_kernel::{self, KernelControl};
use ioshare_engine::interrupt;
use ioshare_engine::profile::measure::Plan;
use ioshare_engine::profile::ProfileOptions;
use ioshare_tune::data::{utc, TraceSource};
use ioshare_tune::from_trace::TraceOptions;
use ioshare_tune::profile_cache::ProfileCache;
use ioshare_tune::runner::{Control, Inline};
use ioshare_tune::solve::Solved;
use ioshare_tune::{export, svg, ControlledBy, Grid, TuneOptions, TuneResult};

/// Arguments of `ioshare tune`.
#[derive(clap::Args)]
#[command(after_help = "\
Method (resctl-bench iocost-qos and iocost-tune, on ioshare's engine): the target is profiled (or
--model given; the profile is cached per device in --cache-dir, so that later sweeps of the device
scale the same model and judge the same target: --reprofile measures it again), then at each vrate
of the grid ioshare's IOCost runs inline with the model scaled by that vrate and vrate pinned
(min=max=100): a latency-sensitive tenant (4 KiB random reads paced at a rate) alone gives MOF, the
most IOPS within its p95 target; beside a saturating antagonist (sequential 64 KiB writes and random
4 KiB reads) at --weights it gives aMOF, the most IOPS still protected (p05 of per-0.1 s
achieved/asked >= 90%), and at a fixed asked rate its isolation, latency impact and the work the
antagonist still got. Each series is fitted against vrate and the solutions (bandwidth,
isolated-bandwidth, isolation, naive, rlat-99-q1..q4, target-p99) are printed as io.cost.model +
io.cost.qos lines, agent [[devices]] entries and a systemd hwdb fragment.

--kernel runs every point under the kernel's IOCost instead (cgroup v2 with io: the lab guest,
scripts/lab): the same tenants, each in its own worker process and cgroup with its weight as io.weight,
the device's io.cost.model/io.cost.qos set to the same pinned lines for each run and written back
after it.

The result file (--out) is rewritten after every point: after Ctrl-C or a crash, --resume FILE
continues it (under the controller that swept it). --from-trace TRACE --model LINE fits the same
series from an agent trace (`ioshare agent run --trace`) instead, without a sweep: the busy periods
binned by vrate (no MOF, aMOF or isolation: a trace does not record what a tenant asked for); the
result is written only with -o. Writing destroys data: as profile, tune writes only to a file it
created (TARGET a directory) or to a file or unmounted device given with --destructive.")]
pub struct Args {
    /// A directory (a temporary file is created there and removed), a file or a block device
    /// (--destructive). Not needed with --merge.
    target: Option<PathBuf>,
    /// The vrate grid, percent: MIN:MAX:STEP [default: 10:200:10; --quick 25:200:25].
    #[arg(long, value_name = "MIN:MAX:STEP")]
    vrate: Option<String>,
    /// Shift the grid by a random offset of up to half a step (kept in the result), so that
    /// several coarse sweeps merge into a finer one.
    #[arg(long)]
    dither: bool,
    /// Weights of the latency-sensitive tenant and the antagonist.
    #[arg(long, value_name = "A,B", default_value = "100,100")]
    weights: String,
    /// The latency-sensitive tenant's p95 target (2ms, 800us) [default: the profile's rule, 1.5 ×
    /// the p95 of its read-latency run]; with --from-trace, the read and write targets of the
    /// solutions' QoS (they set its planning period) [default: the kernel's 25ms].
    #[arg(long, value_name = "LATENCY")]
    lat_target: Option<String>,
    /// Add a solution: the highest vrate whose p99 beside the antagonist is within this (2ms).
    #[arg(long, value_name = "LATENCY")]
    target_p99: Option<String>,
    /// Use this io.cost.model line instead of profiling the target (needs --lat-target).
    #[arg(long, value_name = "LINE")]
    model: Option<String>,
    /// The short sweep: a coarser grid (8 points), shorter runs, a quick profile (under 3 minutes).
    #[arg(long)]
    quick: bool,
    /// Profile the target again instead of taking the profile cached for this device, and cache
    /// the new one.
    #[arg(long, conflicts_with_all = ["model", "resume", "merge", "from_trace"])]
    reprofile: bool,
    /// Where the profile is cached per device (a directory that cannot be written only means the
    /// next sweep profiles again).
    #[arg(long, value_name = "DIR", default_value = ioshare_tune::profile_cache::DEFAULT_DIR)]
    cache_dir: PathBuf,
    /// Run the points under the kernel's IOCost (cgroup v2 with io, root), tenants in cgroups, instead
    /// of ioshare's IOCost inline; every kernel file is restored after each run.
    #[arg(long, conflicts_with_all = ["merge", "from_trace"])]
    kernel: bool,
    /// The result file, rewritten after every point [default: ./ioshare-tune.json; with
    /// --from-trace, written only when given].
    #[arg(short = 'o', long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Fit an agent trace (`ioshare agent run --trace FILE`) instead of sweeping; needs --model.
    #[arg(long, value_name = "TRACE", conflicts_with_all = ["target", "vrate", "dither", "weights", "quick", "resume", "merge", "destructive", "loop_device", "size"])]
    from_trace: Option<PathBuf>,
    /// The trace's device to fit (needed when the trace has several).
    #[arg(long, value_name = "DEV", requires = "from_trace")]
    device: Option<String>,
    /// Continue the sweep in FILE (same device; its settings are kept).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["vrate", "dither", "weights", "lat_target", "model", "quick", "out", "merge"])]
    resume: Option<PathBuf>,
    /// Merge two results of one device (no IO); with --out the merged result is written there.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    merge: Vec<PathBuf>,
    /// Allow writing to an existing file or an unmounted block device: its data is destroyed.
    #[arg(long)]
    destructive: bool,
    /// Run through a loop device (direct IO) over the file; needs root.
    #[arg(long = "loop")]
    loop_device: bool,
    /// Size of the temporary file in a TARGET directory, MiB [default: 2048; --quick 512].
    #[arg(long, value_name = "MIB")]
    size: Option<u64>,
    /// Print the result, fits and solutions as JSON.
    #[arg(long)]
    json: bool,
    /// Write one SVG per series (points, fit, solutions) into this directory.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
}

/// Runs `ioshare tune`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let target_p99 = args.target_p99.as_deref().map(|t| parse_latency("--target-p99", t)).transpose()?;
    if let Some(dir) = &args.svg {
        crate::chart_dir(dir)?;
    }
    let result = if let Some(trace) = &args.from_trace {
        from_trace(trace, &args)?
    } else if !args.merge.is_empty() {
        merge(&args)?
    } else {
        sweep(&args)?
    };
    let solved = result.solutions(target_p99);
    if let Some(dir) = &args.svg {
        for s in &solved.series {
            if let Some(text) = svg::chart(s, &solved.solutions) {
                let path = dir.join(format!("tune-{}.svg", s.name));
                std::fs::write(&path, text).with_context(|| format!("cannot write '{}'", path.display()))?;
            }
        }
    }
    if args.json {
        let out = serde_json::json!({ "result": result, "fits": solved.series, "solutions": solved.solutions, "notes": solved.notes });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table(&result, &solved));
    }
    Ok(())
}

fn from_trace(trace: &std::path::Path, args: &Args) -> anyhow::Result<TuneResult> {
    let Some(model_line) = args.model.clone() else {
        bail!(
            "--from-trace needs --model: the io.cost.model line in force while the trace was recorded (the trace's \
             vrate scales it)"
        );
    };
    if let Some(out) = args.out.as_deref().filter(|o| o.exists()) {
        bail!("'{}' exists: give -o a new file for the result", out.display());
    }
    // The latency target sets the solutions' planning period, as in a sweep.
    let lat = args.lat_target.as_deref().map(|t| parse_latency("--lat-target", t)).transpose()?;
    let qos_line = lat.map(|t| format!("enable=1 ctrl=user rlat={t} wlat={t}"));
    let opts = TraceOptions { device: args.device.clone(), model_line, qos_line };
    let result = ioshare_tune::from_trace::read(trace, &opts)?;
    if let Some(out) = &args.out {
        result.save(out)?;
    }
    Ok(result)
}

fn merge(args: &Args) -> anyhow::Result<TuneResult> {
    if args.target.is_some() {
        bail!("--merge reads two result files and runs no IO: drop TARGET");
    }
    let [a, b] = &args.merge[..] else { bail!("--merge takes two result files") };
    let merged = TuneResult::load(a)?.merge(TuneResult::load(b)?, b)?;
    if let Some(out) = &args.out {
        if out.exists() {
            bail!("'{}' exists: give --out a new file for the merged result", out.display());
        }
        merged.save(out)?;
    }
    Ok(merged)
}

fn sweep(args: &Args) -> anyhow::Result<TuneResult> {
    let Some(target) = &args.target else {
        bail!("give TARGET: a directory (a temporary file is made there), a file or a device with --destructive");
    };
    let quick = args.quick;
    let grid = match &args.vrate {
        Some(text) => Grid::parse(text)?,
        None => Grid::parse(if quick { "25:200:25" } else { "10:200:10" })?,
    };
    let grid = if args.dither { grid.dither() } else { grid };
    let weights = parse_weights(&args.weights)?;
    let lat_target_us = args.lat_target.as_deref().map(|t| parse_latency("--lat-target", t)).transpose()?;
    let base = if quick {
        ProfileOptions { temp_size: 512 << 20, ..ProfileOptions::quick() }
    } else {
        let full = ProfileOptions::default();
        // Two 2 s rounds per run: about 40 s, a third of the full profile.
        ProfileOptions { plan: Plan { duration: 2_000_000_000, rounds: 2, ..full.plan }, ..full }
    };
    let profile = ProfileOptions {
        destructive: args.destructive,
        loop_device: args.loop_device,
        temp_size: args.size.map_or(base.temp_size, |m| m.saturating_mul(1 << 20)),
        ..base
    };
    let resumed = args.resume.as_deref().map(TuneResult::load).transpose()?;
    // A resumed sweep continues under the controller that ran its points.
    let kernel = args.kernel || resumed.as_ref().is_some_and(|r| r.settings.controller == ControlledBy::Kernel);
    let kernel_control = if kernel {
        // Before anything is created or written.
        tune_kernel::check().map_err(anyhow::Error::msg)?;
        Some(KernelControl { worker: crate::bench::worker_command()? })
    } else {
        None
    };
    let control: &dyn Control = match &kernel_control {
        Some(k) => k,
        None => &Inline,
    };
    let out = args.resume.clone().or_else(|| args.out.clone()).unwrap_or_else(|| PathBuf::from("ioshare-tune.json"));
    let cache = Some(ProfileCache { dir: args.cache_dir.clone(), reuse: !args.reprofile });
    let opts = TuneOptions { grid, weights, lat_target_us, model_line: args.model.clone(), quick, profile, out, cache };
    let tty = std::io::stderr().is_terminal();
    let stop = interrupt::stop_flag();
    let found = ioshare_tune::tune(control, target, &opts, resumed, stop, &mut |line| crate::status_line(tty, line));
    crate::clear_status(tty);
    match found {
        Ok(r) => Ok(r),
        Err(ioshare_tune::Error::Interrupted(_))
        | Err(ioshare_tune::Error::Engine(ioshare_engine::Error::Interrupted)) => {
            let kept = if opts.out.exists() {
                format!(
                    "the points so far are in '{}': `ioshare tune {} --resume {}` continues",
                    opts.out.display(),
                    target.display(),
                    opts.out.display()
                )
            } else {
                "interrupted before the baseline was measured: nothing was saved".into()
            };
            eprintln!("ioshare: interrupted; {kept}");
            std::process::exit(130);
        }
        Err(e) => Err(e.into()),
    }
}

fn parse_weights(s: &str) -> anyhow::Result<(u32, u32)> {
    let parse = |p: &str| p.trim().parse::<u32>().ok();
    match s.split_once(',').map(|(a, b)| (parse(a), parse(b))) {
        Some((Some(a), Some(b))) => Ok((a, b)),
        _ => bail!("--weights '{s}': give two integer weights separated by a comma, like 100,100"),
    }
}

/// `2ms`, `800us`, `1.5ms`, `2000` (µs) in µs.
fn parse_latency(flag: &str, s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale <= 60e6 => Ok((v * scale).round().max(1.0) as u64),
        _ => bail!("{flag} '{s}': give a latency above 0 and at most 60s, like 2ms or 800us"),
    }
}

fn table(r: &TuneResult, solved: &Solved) -> String {
    let mut s = match &r.from_trace {
        Some(source) => trace_header(r, source),
        None => sweep_header(r),
    };
    fits_and_solutions(&mut s, r, solved);
    s
}

/// The device line of a result.
fn device_line(r: &TuneResult) -> String {
    let d = &r.device;
    let dev = match (&d.name, &d.dev) {
        (Some(n), Some(dev)) => format!("{n} ({dev})"),
        _ => "no block device (lines without MAJ:MIN)".into(),
    };
    format!("device:   {dev}: {}, {} MiB, model '{}'\n", d.kind, d.size >> 20, d.model)
}

/// A trace result's source and its vrate bins.
fn trace_header(r: &TuneResult, t: &TraceSource) -> String {
    let mut s = device_line(r);
    let _ = writeln!(
        s,
        "trace:    {} ({}): {:.0}..{:.0} s, {} periods, {} informative (busy, with reads) in {} vrate bins",
        t.trace,
        t.device,
        t.span_s.0,
        t.span_s.1,
        t.periods,
        t.informative,
        t.bins.len()
    );
    let _ = writeln!(s, "model:    {}\nqos:      {}", r.settings.model_line, r.settings.qos_line);
    let _ = writeln!(
        s,
        "\n{:>7} {:>8} {:>9} {:>7} {:>12} {:>12}   (read latency: the periods' mean, net of size)",
        "vrate%", "periods", "IOPS", "work%", "lat p50 us", "lat p99 us"
    );
    for b in &t.bins {
        let _ = writeln!(
            s,
            "{:>7.1} {:>8} {:>9.0} {:>7.1} {:>12.0} {:>12.0}",
            b.vrate_pct, b.periods, b.iops, b.delivered_pct, b.lat_p50_us, b.lat_p99_us
        );
    }
    s
}

/// A sweep's settings, baseline and points.
fn sweep_header(r: &TuneResult) -> String {
    let mut s = device_line(r);
    let st = &r.settings;
    let g = &st.grid;
    let _ = writeln!(
        s,
        "sweep:    measured {} under {}; vrate {}..{} step {} (dither {:.2}){}; weights {}:{} \
         (latency-sensitive:antagonist); p95 target {} us",
        utc(r.measured_at),
        st.controller.describe(),
        g.min_pct,
        g.max_pct,
        g.step_pct,
        g.dither_pct,
        if st.quick { ", quick" } else { "" },
        st.weights.0,
        st.weights.1,
        st.lat_target_us
    );
    let _ = writeln!(s, "model:    {}", st.model_line);
    let b = &r.baseline;
    let _ = writeln!(
        s,
        "baseline: no control: MOF {:.0} IOPS; alone at the asked {:.0} IOPS p99 {:.0} us (per-sample mean); antagonist \
         alone {:.1} MB/s, {:.0} IOPS",
        b.mof_iops,
        b.asked_iops,
        b.lat.p99.mean,
        b.antagonist_bw / 1e6,
        b.antagonist_iops
    );
    let _ = writeln!(
        s,
        "\n{:>7} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>13} {:>6} {:>15} {:>6}",
        "vrate%", "MOF", "aMOF", "MOF-aMOF", "isol", "mean", "p99 us", "impact", "work", "vrate p10/50/90", "took"
    );
    for p in &r.points {
        let _ = writeln!(
            s,
            "{:>7.1} {:>8.0} {:>8.0} {:>8.0} {:>6.2} {:>6.2} {:>8.0} {:>6.2}:{:<6.2} {:>6.2} {:>5.0}/{:>4.0}/{:>4.0} {:>5.0}s",
            p.vrate_pct,
            p.mof_iops,
            p.amof_iops,
            p.mof_iops - p.amof_iops,
            p.isolation,
            p.isolation_mean,
            p.lat_p99_us,
            p.lat_impact.0,
            p.lat_impact.1,
            p.work_conserved,
            p.vrate.p10,
            p.vrate.p50,
            p.vrate.p90,
            p.took_s
        );
    }
    let _ = writeln!(
        s,
        "\nlatency beside the antagonist at {:.0} IOPS, per-sample us (mean stdev max):\n{:>7} {:>20} {:>20} {:>20} {:>20}",
        b.asked_iops, "vrate%", "p50", "p90", "p99", "max"
    );
    let cell = |x: &ioshare_tune::stats::Spread| format!("{:.0} {:.0} {:.0}", x.mean, x.stdev, x.max);
    for p in &r.points {
        let l = &p.lat;
        let _ = writeln!(
            s,
            "{:>7.1} {:>20} {:>20} {:>20} {:>20}",
            p.vrate_pct,
            cell(&l.p50),
            cell(&l.p90),
            cell(&l.p99),
            cell(&l.max)
        );
    }
    s
}

/// The fits, the solutions and their lines, and the notes.
fn fits_and_solutions(s: &mut String, r: &TuneResult, solved: &Solved) {
    let d = &r.device;
    let _ = writeln!(s, "\nfits against vrate (left side up to the split, right side after; bends in vrate %):");
    for f in &solved.series {
        match &f.fit {
            Some(fit) => {
                let side =
                    |p: &ioshare_tune::fit::Piecewise| format!("{:.4}@{:.0}..{:.4}@{:.0}", p.y1, p.x1, p.y2, p.x2);
                let right = if fit.split < fit.hi {
                    format!(" | split {:.0} | {}", fit.split, side(&fit.right))
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s,
                    "  {:<15} {:<7} {}{right}  rms {:.3}{}",
                    f.name,
                    format!("{:?}", fit.shape).to_lowercase(),
                    side(&fit.left),
                    fit.rms,
                    if fit.outliers > 0 { format!(", {} outlier(s) left out", fit.outliers) } else { String::new() }
                );
            }
            None => {
                let _ = writeln!(s, "  {:<15} (too few points)", f.name);
            }
        }
    }
    if !solved.solutions.is_empty() {
        solution_rows(s, r, solved);
        let _ = writeln!(s, "\n{}", export::kernel_lines(&solved.solutions));
        // A trace gives no isolation, so no isolated-bandwidth: its latency knee is shown instead.
        let shown = [ioshare_tune::DEFAULT_SOLUTION, "latency-knee"]
            .iter()
            .find_map(|name| solved.solutions.iter().find(|x| x.name == *name));
        if let Some(sol) = shown {
            let _ = writeln!(s, "agent configuration:\n{}", export::agent_devices(d, sol));
        }
        let _ = writeln!(s, "systemd hwdb:\n{}", export::hwdb(d, &solved.solutions));
    }
    for n in r.notes.iter().chain(&solved.notes) {
        let _ = writeln!(s, "note: {n}");
    }
}

/// The solutions and what the fits predict at each (a trace: IOPS and read latency only).
fn solution_rows(s: &mut String, r: &TuneResult, solved: &Solved) {
    if r.from_trace.is_some() {
        let _ = writeln!(
            s,
            "\n{:<20} {:>7} {:>9} {:>12}   (predicted by the fits)",
            "solution", "vrate%", "IOPS", "lat p99 us"
        );
        for sol in &solved.solutions {
            let p = &sol.predicted;
            let _ = writeln!(s, "{:<20} {:>7.1} {:>9.0} {:>12.0}", sol.name, sol.vrate_pct, p.mof_iops, p.lat_p99_us);
        }
        return;
    }
    let _ = writeln!(
        s,
        "\n{:<20} {:>7} {:>8} {:>8} {:>6} {:>8} {:>6}   (predicted by the fits)",
        "solution", "vrate%", "MOF", "aMOF", "isol", "p99 us", "work"
    );
    for sol in &solved.solutions {
        let p = &sol.predicted;
        let _ = writeln!(
            s,
            "{:<20} {:>7.1} {:>8.0} {:>8.0} {:>6.2} {:>8.0} {:>6.2}",
            sol.name, sol.vrate_pct, p.mof_iops, p.amof_iops, p.isolation, p.lat_p99_us, p.work_conserved
        );
    }
}
