//! Prometheus text exposition of a cumulative [`Snapshot`], in the shape cloudflare's ebpf_exporter
//! gives its block-IO histograms (cumulative `le` buckets from the kernel's log2 buckets, `_sum`,
//! `_count`), so existing Grafana heatmap panels work; and a minimal HTTP endpoint serving it.
//!
//! Metrics (labels `device`, `cgroup`, `stage`, `op`):
//! - `ioshare_bio_requests_total`, `ioshare_bio_bytes_total` — counters per stage Q, I, D, C;
//! - `ioshare_bio_size_bytes` — histogram of IO sizes per stage;
//! - `ioshare_bio_seek_sectors` — histogram of seek distances per stage (`le="0"` = sequential);
//! - `ioshare_bio_latency_seconds` — histogram per stage pair `Q2C`, `I2D`, `D2C`;
//! - `ioshare_observe_events_total{reason}` — what could not be seen (see [`crate::Counters`]);
//! - `ioshare_observe_program_runs_total`, `…_run_time_seconds_total` — the observer's own cost, when
//!   measured (like ebpf_exporter's `ebpf_program_run_*`).
//!
//! The endpoint is pull-based like ebpf_exporter's, but serves the snapshot the caller last stored
//! (the observer is read once per interval, not per scrape), so a scrape is at most one interval old.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::histogram::{Histogram, Kind};
use crate::snapshot::{Entry, Latency, Snapshot, Stage};

/// Renders `snapshot` (cumulative) as Prometheus text exposition format 0.0.4.
pub fn render(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let stages = |f: &dyn Fn(&mut String, &Entry, Stage)| {
        let mut s = String::new();
        for e in &snapshot.entries {
            for stage in Stage::ALL {
                f(&mut s, e, stage);
            }
        }
        s
    };
    header(
        &mut out,
        "ioshare_bio_requests_total",
        "counter",
        "IOs seen at each block-layer stage (Q bios, I/D/C requests).",
    );
    out += &stages(&|s, e, st| counter(s, "ioshare_bio_requests_total", e, st.label(), e.stage(st).ios));
    header(&mut out, "ioshare_bio_bytes_total", "counter", "Bytes of the IOs seen at each stage.");
    out += &stages(&|s, e, st| counter(s, "ioshare_bio_bytes_total", e, st.label(), e.stage(st).bytes));
    header(&mut out, "ioshare_bio_size_bytes", "histogram", "IO size at each stage.");
    out += &stages(&|s, e, st| histogram(s, "ioshare_bio_size_bytes", e, st.label(), &e.stage(st).size, Kind::Size));
    header(
        &mut out,
        "ioshare_bio_seek_sectors",
        "histogram",
        "Distance in 512-byte sectors from the end of the cgroup's previous IO at the same stage (0 = sequential).",
    );
    out += &stages(&|s, e, st| histogram(s, "ioshare_bio_seek_sectors", e, st.label(), &e.stage(st).seek, Kind::Seek));
    header(
        &mut out,
        "ioshare_bio_latency_seconds",
        "histogram",
        "Latency from bio queued to completion (Q2C), in the scheduler (I2D), in the device (D2C).",
    );
    for e in &snapshot.entries {
        for lat in Latency::ALL {
            histogram(&mut out, "ioshare_bio_latency_seconds", e, lat.label(), e.latency(lat), Kind::Latency);
        }
    }
    header(&mut out, "ioshare_observe_events_total", "counter", "IOs the observer could not count or time fully.");
    let c = &snapshot.counters;
    for (reason, n) in [
        ("dropped_stats_full", c.dropped_stats_full),
        ("missing_queue_time", c.missing_queue_time),
        ("missing_issue_time", c.missing_issue_time),
    ] {
        let _ = writeln!(out, "ioshare_observe_events_total{{reason=\"{reason}\"}} {n}");
    }
    if let Some(cost) = snapshot.cost {
        header(&mut out, "ioshare_observe_program_runs_total", "counter", "Runs of the observer's BPF programs.");
        for stage in Stage::ALL {
            let n = cost.program(stage).runs;
            let _ = writeln!(out, "ioshare_observe_program_runs_total{{stage=\"{}\"}} {n}", stage.label());
        }
        header(&mut out, "ioshare_observe_program_run_time_seconds_total", "counter", "CPU time of those runs.");
        for stage in Stage::ALL {
            let s = cost.program(stage).run_time_ns as f64 * 1e-9;
            let _ = writeln!(out, "ioshare_observe_program_run_time_seconds_total{{stage=\"{}\"}} {s}", stage.label());
        }
    }
    out
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn labels(e: &Entry, stage: &str) -> String {
    format!(
        "device=\"{}\",cgroup=\"{}\",stage=\"{stage}\",op=\"{}\"",
        escape(&e.device_name),
        escape(&e.cgroup),
        e.op.label()
    )
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn counter(out: &mut String, name: &str, e: &Entry, stage: &str, value: u64) {
    let _ = writeln!(out, "{name}{{{}}} {value}", labels(e, stage));
}

fn histogram(out: &mut String, name: &str, e: &Entry, stage: &str, h: &Histogram, kind: Kind) {
    let labels = labels(e, stage);
    let mut cumulative = 0;
    for (k, n) in h.buckets.iter().enumerate() {
        cumulative += n;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{}\"}} {cumulative}", kind.upper_bound(k));
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
    let sum = if kind == Kind::Latency { h.sum as f64 * 1e-9 } else { h.sum as f64 };
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {cumulative}");
}

/// The exposition currently served, replaced by the caller after each reading.
pub type Shared = Arc<Mutex<String>>;

/// Parses `--prometheus`: `HOST:PORT`, or just `PORT` (then bound to 127.0.0.1, localhost only).
pub fn parse_addr(spec: &str) -> Option<SocketAddr> {
    match spec.parse::<u16>() {
        Ok(port) => Some(SocketAddr::from(([127, 0, 0, 1], port))),
        Err(_) => spec.parse().ok(),
    }
}

/// Starts serving `GET /metrics` on `addr` from a background thread; returns the bound address (the
/// real port when 0 was asked for).
pub fn serve(addr: SocketAddr, shared: Shared) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).map_err(|source| Error::Listen { addr: addr.to_string(), source })?;
    let bound = listener.local_addr().map_err(|source| Error::Listen { addr: addr.to_string(), source })?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // Skip the request headers up to the blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request.split(' ').nth(1).unwrap_or("");
            let (status, body) = if path == "/metrics" || path.starts_with("/metrics?") {
                ("200 OK", shared.lock().map(|s| s.clone()).unwrap_or_default())
            } else {
                ("404 Not Found", "ioshare observe serves /metrics\n".to_string())
            };
            let _ = write!(
                &stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Counters, Op, StageStats};

    fn entry() -> Entry {
        let stage = |n| StageStats {
            ios: n,
            bytes: n * 4096,
            size: Histogram { buckets: vec![0; 12].into_iter().chain([n]).collect(), sum: n * 4096 },
            seek: Histogram { buckets: vec![1, 0, 2], sum: 3 },
        };
        Entry {
            device: "7:0".into(),
            device_name: "loop0".into(),
            cgroup_id: 5,
            cgroup: "/a \"b\"".into(),
            op: Op::Read,
            stages: vec![stage(3), stage(0), stage(3), stage(3)],
            latencies: vec![Histogram { buckets: vec![0, 2, 1], sum: 5_000 }; 3],
        }
    }

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let text =
            render(&Snapshot { elapsed_s: 1.0, entries: vec![entry()], counters: Counters::default(), cost: None });
        let l = r#"device="loop0",cgroup="/a \"b\"",stage="Q2C",op="read""#;
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"0.000001\"}} 0\n")), "{text}");
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"0.000002\"}} 2\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"0.000004\"}} 3\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"+Inf\"}} 3\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_sum{{{l}}} 0.000005\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_count{{{l}}} 3\n")));
        let q = r#"device="loop0",cgroup="/a \"b\"",stage="Q",op="read""#;
        assert!(text.contains(&format!("ioshare_bio_seek_sectors_bucket{{{q},le=\"0\"}} 1\n")));
        assert!(text.contains(&format!("ioshare_bio_seek_sectors_bucket{{{q},le=\"2\"}} 3\n")));
        assert!(text.contains(&format!("ioshare_bio_requests_total{{{q}}} 3\n")));
    }

    #[test]
    fn bare_port_binds_localhost() {
        assert_eq!(parse_addr("9435"), Some(SocketAddr::from(([127, 0, 0, 1], 9435))));
        assert_eq!(parse_addr("0.0.0.0:1"), Some(SocketAddr::from(([0, 0, 0, 0], 1))));
        assert_eq!(parse_addr("localhost:x"), None);
    }

    #[test]
    fn endpoint_serves_metrics() {
        let shared: Shared = Arc::new(Mutex::new("m 1\n".to_string()));
        let addr = serve(parse_addr("0").unwrap(), shared).unwrap();
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut reply = String::new();
        std::io::Read::read_to_string(&mut s, &mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 OK") && reply.ends_with("\r\n\r\nm 1\n"), "{reply}");
    }
}
