//! The NBD clients: one fio run whose jobs (each its own process and NBD connection, fio's `nbd`
//! engine through libnbd) read or read and write 4 KiB at random on their exports ([`Client`]), and
//! what fio reports of each ([`Measured`]: rate, IOs, latency distribution from `json+`'s bins, and
//! the rate over time from its IOPS log, stamped with the wall clock). Rates are compared over
//! windows of wall-clock time ([`common_window`]): fio starts its jobs a few hundred ms apart (each
//! connects first), and a job alone on the device at the start or the end of a run skewed a 2:1
//! split by up to 0.1 over a whole run of five seconds.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::scenarios::qos_peers::dist::Dist;

/// Interval of the IOPS logs, ms.
pub const LOG_MS: u64 = 250;
/// A run's figures leave out this much after the last client started, s (the controller's first
/// periods).
pub const WARM_S: f64 = 1.0;

/// One fio job: a client of one export.
#[derive(Clone, Debug)]
pub struct Client {
    /// Job name (unique in a run).
    pub name: String,
    /// The export (the filter's group).
    pub export: String,
    /// Requests in flight.
    pub iodepth: u32,
    /// Share of reads, % (100: reads only).
    pub read_pct: u32,
    /// Paced at this many IOPS (`rate_iops`), or saturating.
    pub rate_iops: Option<u64>,
    /// Starts this long after the others, s.
    pub start_s: u64,
    /// Runs this long, s (the run's length when `None`).
    pub runtime_s: Option<u64>,
}

impl Client {
    /// A saturating 4 KiB random reader of `export` at `iodepth`, named after it.
    pub fn reader(export: &str, iodepth: u32) -> Client {
        Client {
            name: export.into(),
            export: export.into(),
            iodepth,
            read_pct: 100,
            rate_iops: None,
            start_s: 0,
            runtime_s: None,
        }
    }

    /// fio's options for this job (after the global ones).
    fn args(&self, uri: &str, dir: &Path) -> Vec<String> {
        let mut a =
            vec![format!("--name={}", self.name), format!("--uri={uri}"), format!("--iodepth={}", self.iodepth)];
        a.push(if self.read_pct >= 100 { "--rw=randread".into() } else { "--rw=randrw".into() });
        if self.read_pct < 100 {
            a.push(format!("--rwmixread={}", self.read_pct));
        }
        if let Some(r) = self.rate_iops {
            a.push(format!("--rate_iops={r}"));
        }
        if self.start_s > 0 {
            a.push(format!("--startdelay={}", self.start_s));
        }
        if let Some(s) = self.runtime_s {
            a.push(format!("--runtime={s}"));
        }
        a.push(format!("--write_iops_log={}", dir.join(&self.name).display()));
        a.push(format!("--log_avg_msec={LOG_MS}"));
        a.push("--log_unix_epoch=1".into());
        a
    }
}

/// What fio measured of one job.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// IOs (reads and writes) per second over the job's measured time.
    pub iops: f64,
    /// IOs completed in it.
    pub ios: u64,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Completion latencies of reads and writes.
    pub dist: Dist,
    /// (wall-clock s at the end of the interval, IOPS in it) every [`LOG_MS`].
    pub series: Vec<(f64, f64)>,
}

impl Measured {
    /// Mean IOPS of the logged intervals ending between `from` and `to` (wall-clock s; NaN without any).
    pub fn window_iops(&self, from: f64, to: f64) -> f64 {
        let inside: Vec<f64> = self.series.iter().filter(|(t, _)| *t > from && *t <= to).map(|p| p.1).collect();
        inside.iter().sum::<f64>() / inside.len() as f64
    }

    /// When its first logged interval began and its last ended (NaN without any).
    pub fn span(&self) -> (f64, f64) {
        let first = self.series.first().map_or(f64::NAN, |p| p.0 - LOG_MS as f64 / 1e3);
        (first, self.series.last().map_or(f64::NAN, |p| p.0))
    }
}

/// The wall-clock window in which every job of `jobs` ran: from [`WARM_S`] after the last one
/// started to when the first one ended.
pub fn common_window(jobs: &[Measured]) -> (f64, f64) {
    let from = jobs.iter().map(|j| j.span().0).fold(f64::NEG_INFINITY, f64::max) + WARM_S;
    (from, jobs.iter().map(|j| j.span().1).fold(f64::INFINITY, f64::min))
}

/// Runs `clients` against `uri_of(export)` for `seconds` (`ramp_s` of it left out of the figures),
/// in `dir`; the jobs' figures in the order given.
pub fn run(
    clients: &[Client],
    uri_of: impl Fn(&str) -> String,
    seconds: u64,
    ramp_s: u64,
    size: u64,
    dir: &Path,
) -> Result<Vec<Measured>, String> {
    let mut cmd = Command::new("fio");
    cmd.args(["--output-format=json+", "--ioengine=nbd", "--bs=4k", "--time_based"])
        .arg(format!("--size={size}"))
        .arg(format!("--runtime={}", seconds + ramp_s));
    if ramp_s > 0 {
        cmd.arg(format!("--ramp_time={ramp_s}"));
    }
    for c in clients {
        cmd.args(c.args(&uri_of(&c.export), dir));
    }
    let out = cmd.output().map_err(|e| format!("fio: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!("fio failed: {}", why.lines().last().unwrap_or("no output").trim()));
    }
    let mut jobs = parse(&text)?;
    for (c, m) in clients.iter().zip(jobs.iter_mut()) {
        m.series = read_log(dir, &c.name)?;
    }
    if jobs.len() != clients.len() {
        return Err(format!("fio reported {} jobs of {}", jobs.len(), clients.len()));
    }
    Ok(jobs)
}

/// fio's `json+` output (anything before its opening brace is skipped): each job's figures.
pub fn parse(text: &str) -> Result<Vec<Measured>, String> {
    let start = text.find('{').ok_or("fio printed no JSON")?;
    let v: Value = serde_json::from_str(&text[start..]).map_err(|e| format!("fio's JSON: {e}"))?;
    let jobs = v["jobs"].as_array().ok_or("fio's JSON has no jobs")?;
    jobs.iter()
        .map(|job| {
            let mut m = Measured::default();
            let mut points = Vec::new();
            for (dir, count) in [("read", &mut m.reads), ("write", &mut m.writes)] {
                let side = &job[dir];
                *count = side["total_ios"].as_u64().unwrap_or(0);
                m.iops += side["iops"].as_f64().ok_or("fio's JSON has no iops")?;
                points.extend(Dist::fio_bins(&side["clat_ns"]));
            }
            m.ios = m.reads + m.writes;
            m.dist = Dist::new(points);
            Ok(m)
        })
        .collect()
}

/// The IOPS log of job `name` (`NAME_iops.N.log`: ms, IOPS, direction, …), reads and writes of one
/// interval added.
fn read_log(dir: &Path, name: &str) -> Result<Vec<(f64, f64)>, String> {
    let prefix = format!("{name}_iops.");
    let entry = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .ok_or_else(|| format!("fio wrote no IOPS log for {name}"))?;
    let text = std::fs::read_to_string(entry.path()).map_err(|e| format!("{}: {e}", entry.path().display()))?;
    Ok(parse_log(&text))
}

/// fio's IOPS log: `ms, IOPS, direction, block size, …` per line, in s; the directions of one
/// interval (stamped within half an interval of each other) added.
pub fn parse_log(text: &str) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for line in text.lines() {
        let mut f = line.split(',').map(str::trim);
        let (Some(Ok(ms)), Some(Ok(iops))) = (f.next().map(str::parse::<u64>), f.next().map(str::parse::<f64>)) else {
            continue;
        };
        let t = ms as f64 / 1e3;
        match out.last_mut() {
            Some(last) if (t - last.0).abs() < LOG_MS as f64 / 2e3 => last.1 += iops,
            _ => out.push((t, iops)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_add_reads_and_writes() {
        let text = r#"fio: connected to NBD server
{"jobs": [
 {"read": {"iops": 700.0, "total_ios": 7000, "clat_ns": {"bins": {"100000": 7000}}},
  "write": {"iops": 300.0, "total_ios": 3000, "clat_ns": {"bins": {"200000": 3000}}}},
 {"read": {"iops": 50.0, "total_ios": 500, "clat_ns": {"bins": {"1000000": 500}}},
  "write": {"iops": 0.0, "total_ios": 0}}]}"#;
        let jobs = parse(text).unwrap();
        assert_eq!((jobs[0].iops, jobs[0].ios, jobs[0].writes), (1000.0, 10_000, 3000));
        assert_eq!((jobs[0].dist.quantile(0.7), jobs[0].dist.quantile(0.71)), (100.0, 200.0));
        assert_eq!((jobs[1].ios, jobs[1].dist.quantile(0.99)), (500, 1000.0));
        assert!(parse("no json").is_err());
    }

    #[test]
    fn a_log_adds_an_intervals_directions_and_averages_a_window() {
        let log = "1000251, 4000, 0, 4096, 0\n1000252, 1000, 1, 4096, 0\n1000502, 6000, 0, 4096, 0\n1000751, 8000, 0, 4096, 0\n";
        let series = parse_log(log);
        assert_eq!(series, [(1000.251, 5000.0), (1000.502, 6000.0), (1000.751, 8000.0)]);
        let m = Measured { series, ..Measured::default() };
        assert_eq!(m.window_iops(1000.3, 1000.8), 7000.0);
        assert!(m.window_iops(2.0, 3.0).is_nan());
        // Started 0.3 s later and ended 0.2 s earlier: the window is where both ran, less the warm-up.
        let later = Measured { series: vec![(1000.551, 1.0), (1000.6, 1.0)], ..Measured::default() };
        let (from, to) = common_window(&[m, later]);
        assert!((from - (1000.301 + WARM_S)).abs() < 1e-9 && to == 1000.6, "{from} {to}");
    }
}
