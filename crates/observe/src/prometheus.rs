//! Prometheus text exposition of a cumulative [`Snapshot`], in the shape cloudflare's ebpf_exporter
//! gives its block-IO histograms (cumulative `le` buckets from the kernel's log2 buckets, `_sum`,
//! `_count`), so existing Grafana heatmap panels work; encoded by prometheus-client (bucket bounds
//! written as Go's clients write them, `le="1e-06"`) and served by [`crate::endpoint`].
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
//! The endpoint is pull-based like ebpf_exporter's, but encodes the snapshot the caller last stored
//! (the observer is read once per interval, not per scrape), so a scrape is at most one interval old.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::endpoint::{family, Endpoint};
use crate::error::Result;
use crate::histogram::{Histogram, Kind};
use crate::snapshot::{Entry, Latency, Snapshot, Stage};

/// The cumulative snapshot served, replaced by the caller after each reading.
pub type Shared = Arc<Mutex<Snapshot>>;

/// Renders `snapshot` (cumulative) as Prometheus text exposition format 0.0.4.
pub fn render(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry(Arc::new(Mutex::new(snapshot.clone()))))
        .expect("writing to a String cannot fail");
    out
}

/// Starts serving `GET /metrics` on `addr` from `shared` (encoded at each scrape) until the
/// [`Endpoint`] is dropped.
pub fn serve(addr: SocketAddr, shared: Shared) -> Result<Endpoint> {
    Endpoint::serve(addr, registry(shared), "ioshare observe")
}

fn registry(shared: Shared) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SnapshotCollector(shared)));
    registry
}

/// observe's metrics over the shared snapshot.
#[derive(Debug)]
struct SnapshotCollector(Shared);

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let snapshot = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        encode(&mut enc, &snapshot)
    }
}

/// A histogram of log2 buckets as its exposition: cumulative `le` buckets, `_sum`, `_count`.
struct Buckets<'a>(&'a Histogram, Kind);

impl TypedMetric for Buckets<'_> {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Buckets<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let Buckets(h, kind) = *self;
        let buckets: Vec<(f64, u64)> = h.buckets.iter().enumerate().map(|(k, &n)| (kind.upper_bound(k), n)).collect();
        let sum = if kind == Kind::Latency { h.sum as f64 * 1e-9 } else { h.sum as f64 };
        encoder.encode_histogram::<NoLabelSet>(sum, h.count(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn encode(enc: &mut DescriptorEncoder, snapshot: &Snapshot) -> fmt::Result {
    let per_stage = |f: fn(&Entry, Stage) -> u64| {
        snapshot
            .entries
            .iter()
            .flat_map(move |e| Stage::ALL.map(|st| (labels(e, st.label()), ConstCounter::new(f(e, st)))))
    };
    family(
        enc,
        "ioshare_bio_requests",
        "IOs seen at each block-layer stage (Q bios, I/D/C requests).",
        per_stage(|e, st| e.stage(st).ios),
    )?;
    family(enc, "ioshare_bio_bytes", "Bytes of the IOs seen at each stage.", per_stage(|e, st| e.stage(st).bytes))?;
    let stage_histograms = |of: fn(&Entry, Stage) -> &Histogram, kind: Kind| {
        snapshot
            .entries
            .iter()
            .flat_map(move |e| Stage::ALL.map(|st| (labels(e, st.label()), Buckets(of(e, st), kind))))
    };
    family(
        enc,
        "ioshare_bio_size_bytes",
        "IO size at each stage.",
        stage_histograms(|e, st| &e.stage(st).size, Kind::Size),
    )?;
    family(
        enc,
        "ioshare_bio_seek_sectors",
        "Distance in 512-byte sectors from the end of the cgroup's previous IO at the same stage (0 = sequential).",
        stage_histograms(|e, st| &e.stage(st).seek, Kind::Seek),
    )?;
    family(
        enc,
        "ioshare_bio_latency_seconds",
        "Latency from bio queued to completion (Q2C), in the scheduler (I2D), in the device (D2C).",
        snapshot
            .entries
            .iter()
            .flat_map(|e| Latency::ALL.map(|lat| (labels(e, lat.label()), Buckets(e.latency(lat), Kind::Latency)))),
    )?;
    let c = &snapshot.counters;
    family(
        enc,
        "ioshare_observe_events",
        "IOs the observer could not count or time fully.",
        [
            ("dropped_stats_full", c.dropped_stats_full),
            ("missing_queue_time", c.missing_queue_time),
            ("missing_issue_time", c.missing_issue_time),
        ]
        .map(|(reason, n)| ([("reason", reason)], ConstCounter::new(n))),
    )?;
    if let Some(cost) = snapshot.cost {
        let stage = |st: Stage| [("stage", st.label())];
        family(
            enc,
            "ioshare_observe_program_runs",
            "Runs of the observer's BPF programs.",
            Stage::ALL.map(|st| (stage(st), ConstCounter::new(cost.program(st).runs))),
        )?;
        family(
            enc,
            "ioshare_observe_program_run_time_seconds",
            "CPU time of those runs.",
            Stage::ALL.map(|st| (stage(st), ConstCounter::new(cost.program(st).run_time_ns as f64 * 1e-9))),
        )?;
    }
    Ok(())
}

/// An entry's labels at `stage` (a stage or a stage pair).
fn labels<'a>(e: &'a Entry, stage: &'a str) -> [(&'static str, &'a str); 4] {
    [("device", &e.device_name), ("cgroup", &e.cgroup), ("stage", stage), ("op", e.op.label())]
}

#[cfg(test)]
mod tests {
    use std::io::Write;

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
        // Bucket bounds as Go's clients (and so ebpf_exporter) write them.
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"1e-06\"}} 0\n")), "{text}");
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"2e-06\"}} 2\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"4e-06\"}} 3\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_bucket{{{l},le=\"+Inf\"}} 3\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_sum{{{l}}} 0.000005\n")));
        assert!(text.contains(&format!("ioshare_bio_latency_seconds_count{{{l}}} 3\n")));
        let q = r#"device="loop0",cgroup="/a \"b\"",stage="Q",op="read""#;
        assert!(text.contains(&format!("ioshare_bio_seek_sectors_bucket{{{q},le=\"0\"}} 1\n")));
        assert!(text.contains(&format!("ioshare_bio_seek_sectors_bucket{{{q},le=\"2\"}} 3\n")));
        assert!(text.contains(&format!("ioshare_bio_requests_total{{{q}}} 3\n")));
    }

    #[test]
    fn endpoint_serves_the_latest_snapshot() {
        let empty = Snapshot { elapsed_s: 0.0, entries: vec![], counters: Counters::default(), cost: None };
        let shared: Shared = Arc::new(Mutex::new(empty));
        let endpoint = serve(crate::endpoint::parse_addr("0").unwrap(), shared.clone()).unwrap();
        let get = || {
            let mut s = std::net::TcpStream::connect(endpoint.addr()).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
            let mut reply = String::new();
            std::io::Read::read_to_string(&mut s, &mut reply).unwrap();
            reply
        };
        let before = get();
        assert!(before.starts_with("HTTP/1.1 200 OK") && !before.contains("ioshare_bio_requests_total{"), "{before}");
        shared.lock().unwrap().entries.push(entry());
        let after = get();
        assert!(
            after.contains(r#"ioshare_bio_requests_total{device="loop0",cgroup="/a \"b\"",stage="C",op="read"} 3"#),
            "{after}"
        );
    }
}
