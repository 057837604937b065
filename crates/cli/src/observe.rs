//! `ioshare observe`: parses the options, runs the eBPF observer, prints each interval (a live view on
//! a terminal, plain tables otherwise, or JSON lines), serves Prometheus and writes SVG heatmaps; with
//! `--iocost`, the same for the kernel IOCost's internals.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::Found;
use ioshare_engine::interrupt;
use ioshare_observe::heatmap::{self, Column};
use ioshare_observe::iocost::{self, IocostObserver, IocostSnapshot};
use ioshare_observe::{prometheus, table, Kind, Latency, Observer, Snapshot, Stage, Stages};

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
    /// How closely to watch: `light` (the default) counts requests at completion with the latencies
    /// of one request in 8 from the kernel's own timestamps, one program per IO; `queue` counts bios
    /// as queued (Q) without latencies, one program per IO (what the agent uses for its mix); `full`
    /// counts every stage (Q, I, D, C) with every IO's Q2C, I2D and D2C latency, four programs per IO.
    #[arg(long, value_enum, default_value_t = Detail::Light)]
    detail: Detail,
    /// Watch the kernel's IOCost instead of the block layer: per device vrate, busy level, missed
    /// latency targets, request wait, lagging/short/donating cgroups; per cgroup weights, hweights,
    /// usage, wait, debt and delay (cgroup v2 with io.cost.qos enabled; from its tracepoints).
    #[arg(long, conflicts_with_all = ["svg", "detail", "cost"])]
    iocost: bool,
    /// With --iocost: also write the kernel's decisions to this new file, one JSON object per line,
    /// for --replay: every period's (its vrate event: the period's inputs and the busy level and
    /// vrate it decided) and every cgroup's donation decision with the state it was made on.
    #[arg(long, value_name = "FILE", requires = "iocost")]
    record: Option<PathBuf>,
    /// Replay a --record file through ioshare's planner rules instead of watching: per device the
    /// periods and donation decisions compared, those decided identically, and each difference (no
    /// root needed).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["iocost", "svg", "prometheus", "cost", "duration"])]
    replay: Option<PathBuf>,
    /// Also measure the observer's own CPU time per event (kernel BPF run-time statistics, which cost
    /// two clock reads per event while on).
    #[arg(long)]
    cost: bool,
}

/// `--detail`: the observer's stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Detail {
    /// Completions only, latencies sampled (`Stages::Light`).
    Light,
    /// Bios as queued, no latencies (`Stages::QueueOnly`).
    Queue,
    /// Every stage and every IO's latencies (`Stages::All`).
    Full,
}

impl Detail {
    fn stages(self) -> Stages {
        match self {
            Detail::Light => Stages::Light,
            Detail::Queue => Stages::QueueOnly,
            Detail::Full => Stages::All,
        }
    }
}

/// Heatmap series: (file name, title, kind, how to take it from an interval).
type Series = (&'static str, String, Kind, Box<dyn Fn(&Snapshot) -> ioshare_observe::Histogram>);

/// The heatmaps an observer of `detail` has data for.
fn series(detail: Detail) -> Vec<Series> {
    let watched = |s: Stage| match detail {
        Detail::Light => s == Stage::C,
        Detail::Queue => s == Stage::Q,
        Detail::Full => true,
    };
    let mut all: Vec<Series> = Stage::ALL
        .iter()
        .filter(|&&s| watched(s))
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
    let timed = |l: Latency| match detail {
        Detail::Light => l != Latency::ID,
        Detail::Queue => false,
        Detail::Full => true,
    };
    for l in Latency::ALL.into_iter().filter(|&l| timed(l)) {
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
    if let Some(file) = &args.replay {
        return crate::replay::run(file, args.json);
    }
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
    if args.iocost {
        return watch_iocost(&args, device, prom_addr);
    }
    let mut observer = Observer::start_with(device, None, args.detail.stages())?;
    if args.cost {
        observer.measure_cost()?;
    }

    let tty = std::io::stdout().is_terminal() && !args.json;
    let stop = interrupt::stop_flag();
    let series = series(args.detail);
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

/// `ioshare observe --iocost`: reads the kernel IOCost's state each interval and prints it (tables, or
/// one JSON object per interval), serving it to Prometheus when asked.
fn watch_iocost(
    args: &Args,
    device: Option<(u32, u32)>,
    prom_addr: Option<std::net::SocketAddr>,
) -> anyhow::Result<Found> {
    let mut record = match &args.record {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .with_context(|| format!("--record {}: give a new file's path", path.display()))?,
        )),
        None => None,
    };
    let mut observer = IocostObserver::start()?;
    let device_filter = device.map(|(major, minor)| format!("{major}:{minor}"));
    let read = |observer: &mut IocostObserver| -> anyhow::Result<IocostSnapshot> {
        let mut snap = observer.snapshot()?.filtered(device_filter.as_deref(), args.cgroup.as_deref());
        if let Some((major, minor)) = device.filter(|_| snap.devices.is_empty()) {
            match iocost::iocost_enabled(major, minor) {
                Some(true) => {}
                Some(false) => snap.notes.push(format!(
                    "{major}:{minor} has no IOCost enabled: echo '{major}:{minor} enable=1' > /sys/fs/cgroup/io.cost.qos"
                )),
                None => snap.notes.push(
                    "no IOCost here: cgroup v2 at /sys/fs/cgroup has no io controller (io.cost.qos missing)".to_string(),
                ),
            }
        }
        Ok(snap)
    };
    let shared: iocost::render::Shared = Arc::new(Mutex::new(read(&mut observer)?));
    let _endpoint = match prom_addr {
        Some(addr) => {
            let endpoint = iocost::render::serve(addr, shared.clone())?;
            eprintln!("ioshare observe: serving IOCost metrics at http://{}/metrics", endpoint.addr());
            Some(endpoint)
        }
        None => None,
    };
    let stop = interrupt::stop_flag();
    let started = Instant::now();
    let mut out = std::io::stdout().lock();
    loop {
        let elapsed = started.elapsed().as_secs_f64();
        let next = args.interval * ((elapsed / args.interval).floor() + 1.0);
        let end = args.duration.map_or(next, |d| next.min(d));
        sleep_until(started + Duration::from_secs_f64(end), stop);
        let snap = read(&mut observer)?;
        let t = started.elapsed().as_secs_f64();
        if let Some(file) = record.as_mut() {
            let (mut decisions, lost) = observer.take_decisions()?;
            if let Some((major, minor)) = device {
                decisions = decisions.of_device(major << 20 | minor);
            }
            for line in decisions.lines() {
                writeln!(file, "{}", serde_json::to_string(&line)?)?;
            }
            file.flush()?;
            if lost > 0 {
                eprintln!(
                    "ioshare observe: {lost} decisions lost so far: the kernel reported them faster than they were read"
                );
            }
        }
        if args.json {
            writeln!(out, "{}", serde_json::json!({ "t_s": t, "iocost": snap }))?;
        } else {
            writeln!(out, "--- {t:.1} s ---\n{}", iocost::render::table(&snap))?;
        }
        out.flush()?;
        *shared.lock().expect("the Prometheus thread never panics while holding the lock") = snap;
        if stop.load(Ordering::Relaxed) || args.duration.is_some_and(|d| t >= d - 1e-3) {
            return Ok(Found::AsExpected);
        }
    }
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

/// The terminal view: the interval's table, then heatmaps of Q2C latency and seek distance at D (at C
/// in light detail, at Q in queue detail) over the last intervals (one column each).
fn live_view(delta: &Snapshot, seconds: f64, t: f64, columns: &[Vec<Column>], series: &[Series]) -> String {
    const WIDTH: usize = 60;
    let mut view = format!("ioshare observe — {t:.0} s (Ctrl-C to stop)\n\n{}", table::render(delta, seconds));
    let seek =
        ["seek-D", "seek-C", "seek-Q"].into_iter().find(|n| series.iter().any(|s| s.0 == *n)).unwrap_or("seek-Q");
    for name in ["latency-Q2C", seek] {
        if let Some(i) = series.iter().position(|s| s.0 == name) {
            let cols = &columns[i][columns[i].len().saturating_sub(WIDTH)..];
            view += &format!("\n{} (last {} intervals)\n{}", series[i].1, cols.len(), heatmap::text(series[i].2, cols));
        }
    }
    view
}
