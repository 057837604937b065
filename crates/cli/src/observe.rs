//! `ioshare observe`: parses the options, runs the eBPF observer, prints each interval (a live view on
//! a terminal, plain tables otherwise, or JSON lines), serves Prometheus and writes SVG heatmaps.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::Found;
use ioshare_engine::interrupt;
use ioshare_observe::heatmap::{self, Column};
use ioshare_observe::{prometheus, table, Kind, Latency, Observer, Snapshot, Stage};

/// Arguments of `ioshare observe`.
#[derive(clap::Args)]
pub struct Args {
    /// Only this device: /dev/X, a kernel name (sda, loop0) or MAJ:MIN; a partition means its disk.
    /// Default: every device.
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// Only cgroups whose path (in the blkio/io hierarchy) contains this text.
    #[arg(long, value_name = "PATTERN")]
    cgroup: Option<String>,
    /// Seconds between readings.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Print one JSON object per interval (what happened in it) instead of tables.
    #[arg(long)]
    json: bool,
    /// Write heatmaps over time (seek distance per stage, latency per stage pair) into this directory.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics; a bare PORT binds 127.0.0.1 only.
    #[arg(long, value_name = "ADDR")]
    prometheus: Option<String>,
    /// Also measure the observer's own CPU time per event (kernel BPF run-time statistics, which cost
    /// two clock reads per event while on).
    #[arg(long)]
    cost: bool,
}

/// Heatmap series: (file name, title, kind, how to take it from an interval).
type Series = (&'static str, String, Kind, Box<dyn Fn(&Snapshot) -> ioshare_observe::Histogram>);

fn series() -> Vec<Series> {
    let mut all: Vec<Series> = Stage::ALL
        .iter()
        .map(|&s| {
            let name: &'static str = match s {
                Stage::Q => "seek-Q",
                Stage::I => "seek-I",
                Stage::D => "seek-D",
                Stage::C => "seek-C",
            };
            let f: Box<dyn Fn(&Snapshot) -> ioshare_observe::Histogram> = Box::new(move |d| d.merged_seek(s));
            (name, format!("Seek distance at {} ({name})", s.label()), Kind::Seek, f)
        })
        .collect();
    for l in Latency::ALL {
        let name: &'static str = match l {
            Latency::QC => "latency-Q2C",
            Latency::ID => "latency-I2D",
            Latency::DC => "latency-D2C",
        };
        all.push((name, format!("Latency {}", l.label()), Kind::Latency, Box::new(move |d| d.merged_latency(l))));
    }
    all
}

/// Runs `ioshare observe`.
pub fn run(args: Args) -> anyhow::Result<Found> {
    if !(args.interval.is_finite() && args.interval > 0.0) {
        bail!("--interval {}: give a positive number of seconds, like 1 or 0.5", args.interval);
    }
    if let Some(d) = args.duration.filter(|d| !(d.is_finite() && *d > 0.0)) {
        bail!("--duration {d}: give a positive number of seconds, like 30");
    }
    let device = match &args.device {
        None => None,
        Some(spec) => Some(
            ioshare_observe::resolve_device(spec)
                .ok_or_else(|| ioshare_observe::Error::NotABlockDevice(spec.clone()))?,
        ),
    };
    let prom_addr = match &args.prometheus {
        None => None,
        Some(spec) => Some(ioshare_observe::endpoint::parse_addr(spec).with_context(|| {
            format!("--prometheus '{spec}': give PORT (127.0.0.1 only) or HOST:PORT, like 9435 or 127.0.0.1:9435")
        })?),
    };
    if let Some(dir) = &args.svg {
        crate::chart_dir(dir)?;
    }
    let mut observer = Observer::start(device)?;
    if args.cost {
        observer.measure_cost()?;
    }

    let tty = std::io::stdout().is_terminal() && !args.json;
    let stop = interrupt::stop_flag();
    let series = series();
    let mut columns: Vec<Vec<Column>> = vec![Vec::new(); series.len()];
    let started = Instant::now();
    let mut previous = observer.snapshot()?;
    let shared: prometheus::Shared = Arc::new(Mutex::new(previous.filtered(args.cgroup.as_deref())));
    let _endpoint = match prom_addr {
        Some(addr) => {
            let endpoint = prometheus::serve(addr, shared.clone())?;
            eprintln!("ioshare observe: serving Prometheus metrics at http://{}/metrics", endpoint.addr());
            Some(endpoint)
        }
        None => None,
    };
    let mut out = std::io::stdout().lock();
    loop {
        let elapsed = started.elapsed().as_secs_f64();
        let next = args.interval * ((elapsed / args.interval).floor() + 1.0);
        let end = args.duration.map_or(next, |d| next.min(d));
        sleep_until(started + Duration::from_secs_f64(end), stop);
        let current = observer.snapshot()?;
        let seconds = current.elapsed_s - previous.elapsed_s;
        *shared.lock().expect("the Prometheus thread never panics while holding the lock") =
            current.filtered(args.cgroup.as_deref());
        let delta = current.since(&previous).filtered(args.cgroup.as_deref());
        let t = started.elapsed().as_secs_f64();
        for (cols, (_, _, _, take)) in columns.iter_mut().zip(&series) {
            cols.push((t, take(&delta)));
        }
        if args.json {
            let line = serde_json::json!({ "interval_s": seconds, "snapshot": delta });
            writeln!(out, "{line}")?;
        } else if tty {
            write!(out, "\x1b[H\x1b[2J{}", live_view(&delta, seconds, t, &columns, &series))?;
        } else {
            writeln!(out, "--- {t:.1} s ---\n{}", table::render(&delta, seconds))?;
        }
        out.flush()?;
        previous = current;
        if stop.load(Ordering::Relaxed) || args.duration.is_some_and(|d| t >= d - 1e-3) {
            break;
        }
    }
    if let Some(dir) = &args.svg {
        for (cols, (name, title, kind, _)) in columns.iter().zip(&series) {
            let y = if *kind == Kind::Seek { "seek distance" } else { "latency" };
            let path = dir.join(format!("{name}.svg"));
            std::fs::write(&path, heatmap::svg(title, y, *kind, cols))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        eprintln!("ioshare observe: heatmaps written to {}", dir.display());
    }
    Ok(Found::AsExpected)
}

/// Sleeps until `deadline` or until Ctrl-C.
fn sleep_until(deadline: Instant, stop: &std::sync::atomic::AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
    }
}

/// The terminal view: the interval's table, then heatmaps of Q2C latency and seek distance at D over
/// the last intervals (one column each).
fn live_view(delta: &Snapshot, seconds: f64, t: f64, columns: &[Vec<Column>], series: &[Series]) -> String {
    const WIDTH: usize = 60;
    let mut view = format!("ioshare observe — {t:.0} s (Ctrl-C to stop)\n\n{}", table::render(delta, seconds));
    for name in ["latency-Q2C", "seek-D"] {
        if let Some(i) = series.iter().position(|s| s.0 == name) {
            let cols = &columns[i][columns[i].len().saturating_sub(WIDTH)..];
            view += &format!("\n{} (last {} intervals)\n{}", series[i].1, cols.len(), heatmap::text(series[i].2, cols));
        }
    }
    view
}
