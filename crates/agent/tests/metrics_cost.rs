//! The acceptance benchmark of the agent's `/metrics` endpoint (two minutes long, so not in the test
//! command; figures in docs/agent.md):
//!
//! ```text
//! cargo test -p ioshare-agent --release --test metrics_cost -- --ignored --nocapture --test-threads=1
//! ```
//!
//! - 10 scrapes per second for a minute while the agent controls 200 cgroups (one device, a new
//!   status published every 100 ms period as the agent does) cost at most 1% of a core: the
//!   process's CPU time less the scraper's and the publisher's. Run again with every cgroup also
//!   memory-guarded (twice the series), bounded at 1.5% so that a regression shows;
//! - a scrape with 1 000 cgroups is answered within 50 ms (the fastest of 20, and the endpoint's CPU
//!   time a scrape; the median and slowest, which wait for a core on a loaded machine, are printed).
//!
//! The endpoint is the real one (tiny_http on 127.0.0.1, scraped on a kept-alive connection as
//! Prometheus does); the status is built here, as the agent builds it from its planner each period.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ioshare_agent::memory::MemoryLine;
use ioshare_agent::report::metrics::Metrics;
use ioshare_agent::report::status::{fixture, DeviceLine, GroupLine};
use ioshare_agent::Status;

/// A userspace agent's status with `n` cgroups on one device, each memory-guarded.
fn status(n: usize, periods: u64) -> Status {
    let name = |i: usize| format!("kubepods/burstable/pod{i:04x}-5f1c-4c39-9a3e-0242ac120002/container{i}");
    let groups = (0..n)
        .map(|i| GroupLine {
            weight: 100 + i as u32,
            hweight_active: 1.0 / n as f64,
            hweight_inuse: 0.7 / n as f64,
            usage_share: 0.9 / n as f64,
            debt_us: i as u64,
            ..fixture::group(
                &name(i),
                ["donating", "limited", "running"][i % 3],
                [1000 + i as u64, 0, 4_096_000, 8_192_000],
            )
        })
        .collect();
    let device = DeviceLine { device: "nvme0n1".into(), dev: "259:0".into(), ..fixture::device(groups) };
    let memory = (0..n).map(|i| MemoryLine { priority: (i % 13) as u8, ..fixture::memory(&name(i)) }).collect();
    Status { periods, ..fixture::status(vec![device], memory) }
}

/// A scraper on one kept-alive connection, as Prometheus scrapes.
struct Scraper(BufReader<TcpStream>);

impl Scraper {
    fn connect(addr: SocketAddr) -> Scraper {
        Scraper(BufReader::new(TcpStream::connect(addr).unwrap()))
    }

    /// One scrape: the body.
    fn scrape(&mut self) -> String {
        self.0.get_mut().write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n").unwrap();
        let mut length = None;
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        while line != "\r\n" {
            line.clear();
            self.0.read_line(&mut line).unwrap();
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let mut body = vec![0; length.expect("a Content-Length")];
        self.0.read_exact(&mut body).unwrap();
        String::from_utf8(body).unwrap()
    }
}
/// CPU time (user + system) of this process (`RUSAGE_SELF`) or thread (`RUSAGE_THREAD`).
fn cpu(who: libc::c_int) -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(who, &mut ru), 0);
        ru
    };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn serve() -> Metrics {
    Metrics::serve(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap()
}

/// Scrapes `status` 10 times a second for a minute while a new one is published every 100 ms
/// period: the endpoint's share of a core (the process's CPU time less the scraper's and the
/// publishing thread's: building the status is the agent's work with or without metrics).
fn cost_of_ten_scrapes_a_second(base: Status, what: &str) -> f64 {
    const RUN: Duration = Duration::from_secs(60);
    let metrics = serve();
    let addr = metrics.addr();
    metrics.publish(base.clone());
    let bytes = Scraper::connect(addr).scrape().len();
    let start = Instant::now();
    let process_before = cpu(libc::RUSAGE_SELF);
    let scraper = std::thread::spawn(move || {
        let own_before = cpu(libc::RUSAGE_THREAD);
        let mut scraper = Scraper::connect(addr);
        let mut scrapes = 0u32;
        let mut next = Instant::now();
        while start.elapsed() < RUN {
            next += Duration::from_millis(100);
            scraper.scrape();
            scrapes += 1;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        (scrapes, cpu(libc::RUSAGE_THREAD) - own_before)
    });
    let own_before = cpu(libc::RUSAGE_THREAD);
    let mut periods = 0;
    while start.elapsed() < RUN {
        std::thread::sleep(Duration::from_millis(100));
        periods += 1;
        metrics.publish(Status { periods, ..base.clone() });
    }
    let publisher_cpu = cpu(libc::RUSAGE_THREAD) - own_before;
    let (scrapes, scraper_cpu) = scraper.join().unwrap();
    let elapsed = start.elapsed();
    let server_cpu = cpu(libc::RUSAGE_SELF) - process_before - scraper_cpu - publisher_cpu;
    let share = server_cpu.as_secs_f64() / elapsed.as_secs_f64();
    eprintln!(
        "metrics endpoint, {what} ({bytes} bytes a scrape): {scrapes} scrapes in {:.1} s, {:.0} ms CPU = \
         {:.2}% of a core ({:.2} ms a scrape)",
        elapsed.as_secs_f64(),
        server_cpu.as_secs_f64() * 1e3,
        share * 100.0,
        server_cpu.as_secs_f64() * 1e3 / f64::from(scrapes),
    );
    assert!(scrapes >= 550, "about 10 scrapes a second: {scrapes}");
    share
}

#[test]
#[ignore = "two minutes long: the acceptance benchmark (see the file's comment)"]
fn ten_scrapes_per_second_of_200_cgroups_cost_at_most_one_percent_of_a_core() {
    let mut io_only = status(200, 0);
    io_only.memory.clear();
    let io = cost_of_ten_scrapes_a_second(io_only, "200 cgroups under IO control");
    let all = cost_of_ten_scrapes_a_second(status(200, 0), "200 cgroups under IO and memory control");
    assert!(io <= 0.01, "IO control: the endpoint cost {:.2}% of a core", io * 100.0);
    // Twice the series: at about 1% (0.9-1.1% measured); bounded here so that a regression shows.
    assert!(all <= 0.015, "IO and memory control: the endpoint cost {:.2}% of a core", all * 100.0);
}

#[test]
#[ignore = "timing: the acceptance benchmark (see the file's comment)"]
fn a_scrape_of_1000_cgroups_is_answered_within_50_ms() {
    const GROUPS: usize = 1000;
    let metrics = serve();
    metrics.publish(status(GROUPS, 1));
    let mut scraper = Scraper::connect(metrics.addr());
    let (process_before, own_before) = (cpu(libc::RUSAGE_SELF), cpu(libc::RUSAGE_THREAD));
    let mut times: Vec<Duration> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let body = scraper.scrape();
            let took = t.elapsed();
            assert_eq!(body.matches("ioshare_memory_usage_bytes{").count(), GROUPS);
            took
        })
        .collect();
    let own = cpu(libc::RUSAGE_THREAD) - own_before;
    let server_cpu = (cpu(libc::RUSAGE_SELF) - process_before - own) / 20;
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "metrics endpoint, {GROUPS} cgroups under IO and memory control ({} bytes a scrape): fastest {:.1} ms, \
         median {:.1} ms, slowest {:.1} ms of 20; the endpoint's CPU time {:.1} ms a scrape",
        scraper.scrape().len(),
        ms(times[0]),
        ms(times[10]),
        ms(times[19]),
        ms(server_cpu)
    );
    // On a machine shared with builds the answer waits for a core now and then: the fastest answer
    // and the CPU time it takes are what the endpoint costs; the median and slowest are printed.
    assert!(times[0] <= Duration::from_millis(50), "fastest scrape {:.1} ms", ms(times[0]));
    assert!(server_cpu <= Duration::from_millis(50), "{:.1} ms CPU a scrape", ms(server_cpu));
}
