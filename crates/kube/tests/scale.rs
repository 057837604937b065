//! The pod source with 1 000 pods on its node (API objects only: no kubelet), against a real API
//! server (`scripts/k8s`); about 35 s here, most of it creating the pods. `--nocapture` shows the
//! figures: the time to the first complete hand-over, the memory the source added to this process, the
//! CPU its thread used in ten quiet seconds (bounded: 2% of a core, and 64 MiB, the agent's budget),
//! and how soon one annotation change among the 1 000 arrives.

mod common;

use std::time::{Duration, Instant};

use common::{source, unique, wait_for, K8s};
use ioshare_kube::source::PodStates;

const PODS: usize = 1000;

/// This process's resident memory, bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

/// CPU time (user + system) of this process's thread named `name`, seconds.
fn thread_cpu(name: &str) -> f64 {
    let ticks = 100.0; // USER_HZ
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap();
            let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split_whitespace().collect();
            let (utime, stime): (f64, f64) = (fields[11].parse().unwrap(), fields[12].parse().unwrap());
            return (utime + stime) / ticks;
        }
    }
    panic!("no thread named {name}");
}

#[test]
fn a_thousand_pods_are_handed_over_quickly_and_cheaply() {
    let Some(k8s) = K8s::start() else { return };
    let (ns, node) = (unique("scale"), unique("node"));
    k8s.namespace(&ns, &[], &[]);
    let t = Instant::now();
    k8s.weighted_pods(&ns, &node, PODS);
    eprintln!("created {PODS} pods in {:.1} s", t.elapsed().as_secs_f64());

    let before = rss();
    let t = Instant::now();
    let src = source(&k8s.kubeconfig, &node, "cgroup_driver = \"cgroupfs\"\n", std::path::Path::new("/nonexistent"));
    let mut s = PodStates::default();
    assert!(wait_for(&src, &mut s, Duration::from_secs(120), |s| s.synced && s.pods.len() == PODS));
    let synced = t.elapsed();
    let cpu0 = thread_cpu("ioshare-kube");
    std::thread::sleep(Duration::from_secs(10));
    let cpu = thread_cpu("ioshare-kube") - cpu0;
    let added = rss().saturating_sub(before);

    let t = Instant::now();
    k8s.kubectl(&["-n", &ns, "annotate", "--overwrite", "pod", "p500", "io.ioshare.dev/weight=4321"]);
    assert!(wait_for(&src, &mut s, Duration::from_secs(30), |s| s.by_name(&ns, "p500").map(|p| p.settings.weight)
        == Some(4321)));
    let change = t.elapsed();
    eprintln!(
        "{PODS} pods: handed over {:.2} s after start; source thread CPU while quiet {:.2}% of a core; \
         memory added {:.1} MiB (the pods' states included); one change handed over {:.0} ms after kubectl \
         started (its own run included)",
        synced.as_secs_f64(),
        cpu / 10.0 * 100.0,
        added as f64 / (1 << 20) as f64,
        change.as_secs_f64() * 1000.0
    );
    assert!(cpu / 10.0 < 0.02, "quiet CPU {:.3}", cpu / 10.0);
    assert!(added < 64 << 20, "memory added {added}");
    src.stop();
}
