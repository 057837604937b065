//! `ioshare observe` end to end: bad input and missing root get one line and exit 1; as root, its JSON
//! counts a known workload on a loop device exactly, and a real Prometheus server scraping its
//! exposition answers a `histogram_quantile` query with the same latency the JSON gives.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ioshare_host::LoopDevice;
use ioshare_observe::{Histogram, Kind};
use ioshare_testkit::KillOnDrop;

fn ioshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioshare")).args(args).output().expect("the binary runs")
}

fn one_line_failure(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit 1 expected: {err}");
    assert_eq!(err.lines().count(), 1, "one line expected, got:\n{err}");
    assert!(err.contains(needle), "'{needle}' not in: {err}");
}

#[test]
fn bad_observe_input_fails_with_one_line() {
    one_line_failure(&ioshare(&["observe", "--device", "/etc/passwd"]), "not a block device");
    one_line_failure(&ioshare(&["observe", "--interval", "0"]), "--interval 0");
    one_line_failure(&ioshare(&["observe", "--duration=0"]), "--duration 0");
    one_line_failure(&ioshare(&["observe", "--prometheus", "nowhere"]), "--prometheus 'nowhere'");
}

#[test]
fn observe_without_root_says_so() {
    let out = if ioshare_host::is_root() {
        // Run the binary as nobody (setpriv is in util-linux, always present on Debian).
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_ioshare")]);
        match cmd.args(["observe", "--duration", "1"]).output() {
            Ok(out) => out,
            Err(e) => {
                eprintln!("skipping observe_without_root_says_so: cannot run setpriv to drop root: {e}");
                return;
            }
        }
    } else {
        ioshare(&["observe", "--duration", "1"])
    };
    one_line_failure(&out, "needs root");
}

/// Skips (returns true, printing why) unless root on a kernel with BTF.
fn skip(test: &str) -> bool {
    ioshare_observe::skip_unless_traceable(test)
}

/// A child killed and reaped when dropped, so a failing test leaves none behind.
fn backing_file() -> tempfile::NamedTempFile {
    let file =
        tempfile::Builder::new().prefix("ioshare-observe-cli-").tempfile_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    file.as_file().set_len(64 << 20).unwrap();
    file
}

/// `count` direct 64 KiB writes to `dev` with dd.
fn write_64k(dev: &Path, count: u32) {
    let status = Command::new("dd")
        .args(["if=/dev/zero", "bs=64k", "oflag=direct", "status=none", &format!("count={count}")])
        .arg(format!("of={}", dev.display()))
        .status()
        .unwrap();
    assert!(status.success(), "dd failed");
}

/// Starts `ioshare observe --json` on `dev` with `extra` options; returns it once it has attached
/// (its first interval printed), with the first line.
fn start_observe(dev: &LoopDevice, extra: &[&str]) -> (KillOnDrop, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ioshare"))
        .args(["observe", "--json", "--interval", "0.2"])
        .arg(format!("--device={}", dev.path().display()))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with('{'), "no JSON from observe: {first:?}");
    (KillOnDrop(child), stdout)
}

/// Sums the write entries of JSON interval lines: (IOs at C, D2C latency histogram).
fn sum_writes(lines: &str) -> (u64, Histogram) {
    let (mut ios, mut d2c) = (0, Histogram::default());
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for e in v["snapshot"]["entries"].as_array().unwrap().iter().filter(|e| e["op"] == "write") {
            ios += e["stages"][3]["ios"].as_u64().unwrap();
            let h = &e["latencies"][2];
            let buckets = h["buckets"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
            d2c.add(&Histogram { buckets, sum: h["sum"].as_u64().unwrap() });
        }
    }
    (ios, d2c)
}

#[test]
fn json_counts_a_known_workload_exactly() {
    if skip("json_counts_a_known_workload_exactly") {
        return;
    }
    let backing = backing_file();
    let dev = LoopDevice::attach(backing.path(), true).unwrap();
    // No fixed observation window (a busy disk can slow the writes past any window): the direct
    // writes have all completed when dd returns, then SIGTERM makes observe print its last interval.
    let (mut observe, mut stdout) = start_observe(&dev, &["--duration", "120", "--detail", "full"]);
    write_64k(dev.path(), 100);
    observe.terminate();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(observe.0.wait().unwrap().success());
    let (ios, d2c) = sum_writes(&rest);
    assert_eq!(ios, 100, "100 direct 64 KiB writes at C");
    assert_eq!(d2c.count(), 100, "each with its D->C latency");
}

/// GET `path` from `port` on localhost; the body, `None` while nothing listens there yet.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    reply.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// The value of a Prometheus instant query, if it returned one sample (`None` also while Prometheus
/// is still starting).
fn prom_query(port: u16, query: &str) -> Option<f64> {
    let encoded: String = query
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    let body = http_get(port, &format!("/api/v1/query?query={encoded}"))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let result = v["data"]["result"].as_array()?;
    (result.len() == 1).then(|| result[0]["value"][1].as_str()?.parse().ok())?
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn prometheus_quantile_agrees_with_json() {
    if skip("prometheus_quantile_agrees_with_json") {
        return;
    }
    if Command::new("prometheus").arg("--version").output().is_err() {
        eprintln!("skipping prometheus_quantile_agrees_with_json: Debian's prometheus package is not installed (./scripts/setup.sh)");
        return;
    }
    let backing = backing_file();
    let dev = LoopDevice::attach(backing.path(), true).unwrap();
    let exporter_port = free_port();
    let (mut observe, mut stdout) =
        start_observe(&dev, &["--duration", "120", "--prometheus", &exporter_port.to_string()]);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             scrape_configs:\n  - job_name: ioshare\n    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n"
        ),
    )
    .unwrap();
    let prom_port = free_port();
    let _prometheus = KillOnDrop(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    write_64k(dev.path(), 100);

    // Wait (bounded) until Prometheus has scraped the completed writes: a condition, not a guess.
    let selector =
        format!(r#"ioshare_bio_latency_seconds_bucket{{device="{}",stage="D2C",op="write"}}"#, device_name(&dev));
    let count_query =
        format!("sum(ioshare_bio_requests_total{{stage=\"C\",op=\"write\",device=\"{}\"}})", device_name(&dev));
    let deadline = Instant::now() + Duration::from_secs(60);
    while prom_query(prom_port, &count_query) != Some(100.0) {
        assert!(Instant::now() < deadline, "Prometheus never saw the 100 writes");
        std::thread::sleep(Duration::from_millis(250));
    }
    let from_prometheus = prom_query(prom_port, &format!("histogram_quantile(0.9, sum by (le) ({selector}))")).unwrap();

    // SIGTERM: observe prints its last interval and exits; the JSON lines cover the whole run.
    observe.terminate();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(observe.0.wait().unwrap().success());
    let (ios, d2c) = sum_writes(&rest);
    assert_eq!(ios, 100);
    let from_json = d2c.quantile(Kind::Latency, 0.9).unwrap();
    // Both interpolate linearly inside the same log2 bucket; only float formatting may differ.
    assert!(
        (from_prometheus - from_json).abs() <= 1e-9 * from_json.max(1e-9),
        "Prometheus p90 {from_prometheus} s, JSON p90 {from_json} s"
    );
    eprintln!("D2C write p90: Prometheus {from_prometheus:.9} s, observe JSON {from_json:.9} s");
}

fn device_name(dev: &LoopDevice) -> String {
    dev.path().file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn bench_observe_without_root_says_so() {
    if !ioshare_host::is_root() {
        one_line_failure(&ioshare(&["bench", "--observe", "--duration", "1"]), "needs root");
        return;
    }
    // As nobody (setpriv: util-linux), from / so that nothing could be created if it went wrong.
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_ioshare")]);
    match cmd.args(["bench", "--observe", "--duration", "1"]).current_dir("/").output() {
        Ok(out) => one_line_failure(&out, "--observe: ioshare observe needs root"),
        Err(e) => eprintln!("skipping bench_observe_without_root_says_so: cannot run setpriv to drop root: {e}"),
    }
}

/// `bench --observe` on a 256 MiB file of this crate's directory (a disk-backed filesystem): every
/// ioshare run of the scenario carries what the observer saw on the file's disk.
#[test]
fn bench_observe_records_each_run() {
    if skip("bench_observe_records_each_run") {
        return;
    }
    let dir = std::env::current_dir().unwrap();
    let target = ioshare_engine::TempTarget::create(&dir, 256 << 20, &Default::default(), |_, _| {}).unwrap();
    if ioshare_observe::disk_of(target.path()).is_none() {
        eprintln!("skipping bench_observe_records_each_run: {} is on no block device", dir.display());
        return;
    }
    let path = target.path().display().to_string();
    let args = ["bench", "--target", &path, "--scenario", "proportional", "--duration", "1", "--no-kernel"];
    let out = Command::new(env!("CARGO_BIN_EXE_ioshare")).args(args).args(["--observe", "--json"]).output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 3)), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let scenario = &json["scenarios"][0];
    let observed = scenario["observed"].as_array().expect("observed runs");
    let runs = scenario["runs"].as_array().unwrap();
    assert_eq!(observed.len(), runs.len(), "one observation per run");
    for (seen, run) in observed.iter().zip(runs) {
        assert_eq!(seen["controller"], run["controller"]);
        // The observer counts the whole run on the whole disk; the bench only its tenants' IOs after
        // the warm-up: never more than the observer.
        let bench_ios: u64 = run["tenants"].as_array().unwrap().iter().map(|t| t["ios"].as_u64().unwrap()).sum();
        let seen_ios = seen["ios"].as_u64().unwrap();
        assert!(bench_ios > 0 && seen_ios >= bench_ios, "observed {seen_ios} IOs, bench {bench_ios}");
        let count =
            |h: &serde_json::Value| h["buckets"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).sum::<u64>();
        assert!(count(&seen["seek_issued"]) > 0, "no seek distances at D: {seen}");
        assert!(count(&seen["latency"][2]) > 0, "no D2C latencies: {seen}");
    }
}

/// `--replay` on a recording of the kernel's decisions (one core's replay test keeps): every period
/// identical and every donation decision either the kernel's or of a named cause, exit 0; a period
/// edited to a level the rules cannot give, or a donation target below what the cgroup's usage gives:
/// listed, exit 3; a file that is not a recording, or holds none: one line, exit 1.
#[test]
fn replay_judges_a_recording_of_the_kernel() {
    let recorded =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/data/kernel-6.1-decisions/bench-donation.jsonl");
    let out = ioshare(&["observe", "--replay", recorded.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    // 23 periods identical; 25 donation decisions, 21 donors, 22 identical, 2 raced, 1 overflow.
    let summary = text.lines().nth(1).unwrap_or_default().split_whitespace().collect::<Vec<_>>();
    assert_eq!(summary, ["259:0", "23", "23", "100.00%", "25", "21", "22", "2", "1", "0"], "{text}");
    assert!(text.contains("overflow") && text.contains("raced"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("edited.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&recorded).unwrap().lines().map(String::from).collect();
    let period = lines.iter().position(|l| l.contains("busy_level")).unwrap();
    let donor = lines.iter().position(|l| l.contains("\"donated\":true,\"new_hwi\":3")).unwrap();
    let mut first: serde_json::Value = serde_json::from_str(&lines[period]).unwrap();
    first["busy_level"] = serde_json::json!(first["busy_level"].as_i64().unwrap() + 7);
    let mut low: serde_json::Value = serde_json::from_str(&lines[donor]).unwrap();
    low["new_hwi"] = serde_json::json!(100);
    let mut edited_lines = lines.clone();
    edited_lines[period] = first.to_string();
    edited_lines[donor] = low.to_string();
    std::fs::write(&edited, edited_lines.join("\n") + "\n").unwrap();
    let out = ioshare(&["observe", "--replay", edited.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let differences = report[0]["replay"]["differences"].as_array().unwrap();
    assert_eq!(differences[0]["kernel"]["period"], first["period"], "{report}");
    let rules: Vec<&serde_json::Value> =
        report[0]["donations"]["differences"].as_array().unwrap().iter().filter(|d| d["cause"] == "Rules").collect();
    assert_eq!(rules.len(), 1, "{report}");
    assert_eq!(rules[0]["kernel"]["period"], low["period"], "{report}");

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"dev\": 1}\n").unwrap();
    one_line_failure(&ioshare(&["observe", "--replay", bad.to_str().unwrap()]), "bad.jsonl:1: not a decision");
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    one_line_failure(&ioshare(&["observe", "--replay", empty.to_str().unwrap()]), "no decisions");
}
