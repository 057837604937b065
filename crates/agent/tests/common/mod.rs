//! Helpers of the agent's root tests: a loop device over a filled file, blkio cgroups, fio readers
//! in them, IO counts per cgroup, agent configurations, and a snapshot of every throttle file; and
//! ([`v2_mock`]) a directory tree with cgroup v2's file layout for the mock tests.

#![allow(dead_code)] // each test binary uses part of this module

pub mod v2_mock;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ioshare_agent::Agent;

use ioshare_host::{BlkioCgroup, Capabilities, DevNum, DiskStats, LoopDevice, ThrottleKnob};
use ioshare_testkit::KillOnDrop;
use tempfile::NamedTempFile;

/// Size of the device the readers read: large enough that the page cache of the backing file's
/// host does not hold it all (the loop device uses direct IO, so only the host's own cache could).
const DEVICE_MIB: u64 = 512;

/// A loop device over a written (not sparse) file, plus cgroups below one test-unique parent.
/// Field order is drop order: cgroups, device, file.
pub struct Rig {
    /// The cgroups, in the order asked for.
    pub cgroups: Vec<BlkioCgroup>,
    /// The device.
    pub dev: LoopDevice,
    /// Its backing file.
    pub file: NamedTempFile,
    /// The blkio root.
    pub root: PathBuf,
}

impl Rig {
    /// A rig with cgroups `names` below `ioshare-agent-test-<pid>-<test>`.
    pub fn new(test: &str, names: &[&str]) -> Rig {
        let mut file = tempfile::Builder::new()
            .prefix("ioshare-agent-test-")
            .tempfile_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("create a backing file in CARGO_TARGET_TMPDIR");
        // Written data, not holes: reading a hole costs the disk nothing.
        let chunk: Vec<u8> = (0..1 << 20).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        for _ in 0..DEVICE_MIB {
            file.write_all(&chunk).unwrap();
        }
        file.as_file().sync_all().unwrap();
        let dev = LoopDevice::attach(file.path(), true).unwrap();
        let parent = format!("ioshare-agent-test-{}-{test}", std::process::id());
        let cgroups: Vec<BlkioCgroup> =
            names.iter().map(|n| BlkioCgroup::create(&format!("{parent}/{n}")).unwrap()).collect();
        // blk-throttle counts a device's per-cgroup statistics once a rule was written for it.
        cgroups[0].set_throttle(dev.dev(), ThrottleKnob::ReadIops, 0).unwrap();
        let root = Capabilities::probe().blkio_v1.expect("blkio mounted");
        Rig { cgroups, dev, file, root }
    }

    /// Cgroup `i`'s path relative to the blkio root (what the agent's configuration names).
    pub fn rel(&self, i: usize) -> String {
        self.cgroups[i].path().strip_prefix(&self.root).unwrap().to_string_lossy().into_owned()
    }

    /// The test-unique parent of the cgroups, relative to the root.
    pub fn parent(&self) -> String {
        let rel = self.rel(0);
        rel.rsplit_once('/').map_or(rel.clone(), |(p, _)| p.to_string())
    }

    /// Starts fio 4 KiB random reads at `depth` in cgroup `i`; `extra` fio options (e.g.
    /// `--rate_iops=500`). Killed on drop.
    pub fn fio(&self, i: usize, depth: u32, extra: &[&str]) -> KillOnDrop {
        fio_in(&self.cgroups[i], self.dev.path(), depth, extra)
    }

    /// Read IOs cgroup `i` completed on the device so far.
    pub fn ios(&self, i: usize) -> u64 {
        self.cgroups[i].stats().unwrap().device(self.dev.dev()).map_or(0, |d| d.ios.read)
    }

    /// IOPS of each cgroup over the next `window`, and the device's mean read latency in µs.
    pub fn rates(&self, window: Duration) -> (Vec<f64>, f64) {
        let name = self.dev.path().file_name().unwrap().to_string_lossy().into_owned();
        let disk = || DiskStats::read(Path::new("/sys/block"), &name).unwrap();
        let (before, disk_before) = ((0..self.cgroups.len()).map(|i| self.ios(i)).collect::<Vec<u64>>(), disk());
        let start = Instant::now();
        std::thread::sleep(window);
        let secs = start.elapsed().as_secs_f64();
        let d = disk().since(&disk_before);
        let lat_us = d.ticks_ms[0] as f64 * 1000.0 / d.ios[0].max(1) as f64;
        ((0..self.cgroups.len()).map(|i| (self.ios(i) - before[i]) as f64 / secs).collect(), lat_us)
    }

    /// A configuration file in `dir`: this device with `model`, optional `qos`, cgroup `i` at
    /// `weights[i]`, planning every `period_ms`.
    pub fn config(&self, dir: &Path, model: &str, qos: Option<&str>, weights: &[u32], period_ms: u64) -> PathBuf {
        let mut text = format!(
            "period_ms = {period_ms}\n[[devices]]\npath = \"{}\"\nmodel = \"{model}\"\n",
            self.dev.path().display()
        );
        if let Some(q) = qos {
            text += &format!("qos = \"{q}\"\n");
        }
        for (i, w) in weights.iter().enumerate() {
            text += &format!("[[groups]]\ncgroup = \"{}\"\nweight = {w}\n", self.rel(i));
        }
        let path = dir.join("agent.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The device's number.
    pub fn devnum(&self) -> DevNum {
        self.dev.dev()
    }
}

impl Rig {
    /// Every blk-throttle limit file the agent could touch for this rig — the root's own and every
    /// one below the rig's parent cgroup — with its contents. (Not the whole hierarchy: other
    /// programs' cgroups come and go meanwhile.)
    pub fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        snapshot_at(&self.root, &self.parent())
    }
}

/// [`Rig::snapshot`] of the cgroups below `parent` (relative to the blkio `root`), for a test that
/// took the rig apart.
pub fn snapshot_at(root: &Path, parent: &str) -> BTreeMap<PathBuf, String> {
    let mut out = throttle_snapshot(&root.join(parent));
    for knob in [ThrottleKnob::ReadBps, ThrottleKnob::WriteBps, ThrottleKnob::ReadIops, ThrottleKnob::WriteIops] {
        let path = root.join(knob.file_name());
        out.insert(path.clone(), std::fs::read_to_string(&path).unwrap());
    }
    out
}

/// fio 4 KiB random reads at `depth` from `device` in `cgroup`, `extra` options added; killed on drop.
pub fn fio_in(cgroup: &BlkioCgroup, device: &Path, depth: u32, extra: &[&str]) -> KillOnDrop {
    let mut cmd = Command::new("fio");
    cmd.args(fio_args(device, depth, 120, extra)).stdout(Stdio::null()).stderr(Stdio::null());
    KillOnDrop(cgroup.spawn(cmd).expect("start fio (scripts/setup.sh installs it)"))
}

/// fio's arguments for 4 KiB random reads at `depth` from `device` for `runtime_s` seconds, `extra`
/// options added.
pub fn fio_args(device: &Path, depth: u32, runtime_s: u32, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> =
        ["--name=r", "--rw=randread", "--bs=4k", "--ioengine=libaio", "--direct=1", "--time_based"]
            .map(String::from)
            .into();
    args.extend([format!("--runtime={runtime_s}"), format!("--iodepth={depth}"), "--output=/dev/null".into()]);
    args.push(format!("--filename={}", device.display()));
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push("--thread".into()); // jobs as threads: fio's forked job processes call setsid() and outlive a kill
    args
}

/// Every blk-throttle limit file under `dir` (recursively) with its contents.
pub fn throttle_snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(path);
            } else if name.starts_with("blkio.throttle.") && name.ends_with("_device") {
                out.insert(path.clone(), std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    out
}

/// Polls `cond` every 5 ms until it holds or `limit` passes; returns the time it took.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// Runs `agent` in another thread while `body` runs; stops it (reverting) after, also when `body`
/// panics, so it reverts before the rig is torn down. Asserts nobody else changed what it wrote.
pub fn run_agent_during<T>(agent: Agent, body: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let runner = s.spawn(|| agent.run(&stop));
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let guard = StopOnDrop(&stop);
        let out = body();
        drop(guard);
        let reverted = runner.join().unwrap().unwrap();
        assert!(reverted.changed_by_others.is_empty(), "{reverted:?}");
        out
    })
}

/// The weight of the pod whose cgroup is `rel` and its `namespace/name`, while the agent's status
/// in `state` says it is under control.
pub fn pod_controlled(state: &Path, rel: &str) -> Option<(u32, String)> {
    let st = ioshare_agent::Status::read(state).ok()?;
    let p = st.kubernetes?.pods.into_iter().find(|p| p.cgroup.as_deref() == Some(rel) && p.controlled)?;
    Some((p.weight, p.pod))
}

/// The median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Two tenants' read IOs so far and the first one's read limit (0: none), as a test saw them when
/// the agent's status showed a new period.
#[derive(Clone, Copy, Debug)]
pub struct PeriodSample {
    /// When the counts were read.
    pub at: Instant,
    /// Each tenant's read IOs so far.
    pub ios: [u64; 2],
    /// The first tenant's read-IOPS limit in the period that began.
    pub first_limit: u64,
}

impl PeriodSample {
    /// Each tenant's read IOs since `earlier`.
    fn since(&self, earlier: &PeriodSample) -> [u64; 2] {
        [0, 1].map(|i| self.ios[i] - earlier.ios[i])
    }
}

/// The split (the first tenant's IOs over the second's) over the intervals between consecutive
/// samples in which the first tenant did at least `held` of the read limit in force — where its
/// limit, not the device, held it — and how many intervals those were. A device that dips below the
/// limits for a period splits by its own queue (about 1:1 at equal depths) until the agent's vrate
/// follows it down; those intervals say nothing about the limits, and are left out one by one
/// rather than by a whole window's mean.
pub fn split_where_limited(samples: &[PeriodSample], held: f64) -> (f64, usize) {
    let (mut first, mut second, mut n) = (0u64, 0u64, 0usize);
    for w in samples.windows(2) {
        let secs = w[1].at.duration_since(w[0].at).as_secs_f64();
        let did = w[1].since(&w[0]);
        if w[0].first_limit > 0 && did[0] as f64 >= held * w[0].first_limit as f64 * secs {
            (first, second, n) = (first + did[0], second + did[1], n + 1);
        }
    }
    (first as f64 / second.max(1) as f64, n)
}

/// The first tenant's part of both tenants' IOs between each sample and the one before it: the
/// period whose end the sample's status shows (`None` for the first sample, or without IO).
pub fn first_parts(samples: &[PeriodSample]) -> Vec<Option<f64>> {
    let part = |[a, b]: [u64; 2]| (a + b > 0).then(|| a as f64 / (a + b) as f64);
    let later = samples.windows(2).map(|w| part(w[1].since(&w[0])));
    samples.first().map(|_| None).into_iter().chain(later).collect()
}
