//! Kernel peers: the same tenants with the kernel in control (and, as a peer of the same kind, the
//! ioshare agent's userspace backend writing blk-throttle limits). A loop device with direct IO
//! (`losetup --direct-io=on`) is put over the target; each tenant runs in its own worker process
//! (the `ioshare` binary started again with a hidden flag) inside its own cgroup v1 `blkio` group,
//! where BFQ weights or blk-throttle limits apply. Workers open the loop device, report ready, start
//! together on "go", and print their [`RunReport`] as one JSON line.
//!
//! Cleanup: workers are killed and reaped, cgroups removed, the loop device's scheduler restored and
//! the device detached — by drop guards, so errors and interrupts clean up too (the host crate's
//! loop devices also auto-clear if this process dies).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ioshare_agent::config::{Config, DeviceConfig, GroupConfig};
use ioshare_agent::BackendChoice;
use ioshare_core::{Limits, ModelParams, Nanos, NoControl, QosParams};
use ioshare_host::{
    is_root, BlkioCgroup, BlockDevice, Capabilities, LoopDevice, ThrottleKnob, BFQ_WEIGHT_MAX, BFQ_WEIGHT_MIN,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::interrupt;
use crate::job::TenantSpec;
use crate::report::{CpuReport, DeviceReport, RunReport};
use crate::run::{run, RunOptions};
use crate::target::Target;

/// How the kernel controls a kernel-peer run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelSetup {
    /// Loop device with no scheduler and no cgroup settings: the kernel-side baseline.
    Plain,
    /// BFQ on the loop device, each tenant's weight as its cgroup's `blkio.bfq.weight` (clamped to
    /// BFQ's 1..1000).
    Bfq,
    /// blk-throttle read IOPS limits, one per tenant (`blkio.throttle.read_iops_device`).
    ReadIopsLimits(Vec<u64>),
    /// The ioshare agent's userspace backend: ioshare-core's IOCost planner every 100 ms over the
    /// tenants' cgroups, writing blk-throttle limits (model and QoS from the calibration).
    Agent {
        /// The device's cost model.
        model: ModelParams,
        /// Latency QoS.
        qos: QosParams,
    },
}

impl KernelSetup {
    /// Name in tables and JSON.
    pub fn name(&self) -> &'static str {
        match self {
            KernelSetup::Plain => "kernel-none",
            KernelSetup::Bfq => "bfq",
            KernelSetup::ReadIopsLimits(_) => "blk-throttle",
            KernelSetup::Agent { .. } => "agent",
        }
    }
}

/// What a worker is asked to run.
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerRequest {
    /// The loop device.
    pub target: PathBuf,
    /// The tenant.
    pub tenant: TenantSpec,
    /// Run length, warm-up and sample interval, ns.
    pub duration: Nanos,
    /// Warm-up, ns.
    pub warmup: Nanos,
    /// Sample interval, ns.
    pub sample_every: Nanos,
}

/// The loop device the kernel peers run on, and how to start workers.
pub struct Peers {
    dev: LoopDevice,
    worker: Vec<String>,
    runs: u32,
}

fn peer_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::KernelPeer(format!("{what}: {e}"))
}

impl Peers {
    /// Attaches the loop device over `target`. `Ok(None)` when no worker command was given;
    /// `Err(reason)` (a note for the report) when the host cannot run kernel peers.
    pub fn prepare(target: &Path, worker: &[String]) -> std::result::Result<Option<Peers>, String> {
        if worker.is_empty() {
            return Ok(None);
        }
        if !is_root() {
            return Err(
                "kernel peers (BFQ, blk-throttle, agent) skipped: they need root for loop devices and cgroups".into()
            );
        }
        let caps = Capabilities::probe();
        if caps.blkio_v1.is_none() || !caps.bfq || !caps.blk_throttle_v1 {
            return Err("kernel peers skipped: this host lacks cgroup v1 blkio with BFQ and blk-throttle".into());
        }
        let dev = LoopDevice::attach(target, true).map_err(|e| format!("kernel peers skipped: {e}"))?;
        Ok(Some(Peers { dev, worker: worker.to_vec(), runs: 0 }))
    }

    /// Runs `tenants` under `setup`, one worker process and cgroup per tenant, and merges their
    /// reports (device figures: sums; busy share: the largest of the workers' views). An interrupt
    /// reaches the workers too (same process group): they stop and report what they measured.
    pub fn run(&mut self, setup: &KernelSetup, tenants: &[TenantSpec], opts: &RunOptions) -> Result<RunReport> {
        self.runs += 1;
        let sched = if *setup == KernelSetup::Bfq { "bfq" } else { "none" };
        self.dev.set_scheduler(sched).map_err(|e| peer_error("setting the loop device's scheduler", e))?;
        // Declared before the workers so that the workers are reaped before the cgroups are removed.
        let mut groups = Vec::new();
        let mut workers = Workers(Vec::new());
        for (i, t) in tenants.iter().enumerate() {
            let name = format!("ioshare-bench-{}/run{}-{}", std::process::id(), self.runs, t.name);
            let cg = BlkioCgroup::create(&name).map_err(|e| peer_error("creating a cgroup", e))?;
            match setup {
                KernelSetup::Plain | KernelSetup::Agent { .. } => Ok(()),
                KernelSetup::Bfq => cg.set_bfq_weight(t.weight.clamp(BFQ_WEIGHT_MIN, BFQ_WEIGHT_MAX)),
                KernelSetup::ReadIopsLimits(l) => cg.set_throttle(self.dev.dev(), ThrottleKnob::ReadIops, l[i]),
            }
            .map_err(|e| peer_error("configuring a cgroup", e))?;
            let mut cmd = Command::new(&self.worker[0]);
            cmd.args(&self.worker[1..]).stdin(Stdio::piped()).stdout(Stdio::piped());
            let mut child = cg.spawn(cmd).map_err(|e| peer_error("starting a worker", e))?;
            let stdin = child.stdin.take().expect("piped stdin");
            let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
            workers.0.push((child, stdin, stdout));
            groups.push(cg);
        }
        for ((_, stdin, stdout), t) in workers.0.iter_mut().zip(tenants) {
            let req = WorkerRequest {
                target: self.dev.path().to_path_buf(),
                tenant: t.clone(),
                duration: opts.duration,
                warmup: opts.warmup,
                sample_every: opts.sample_every,
            };
            writeln!(stdin, "{}", serde_json::to_string(&req).expect("request serialises"))
                .map_err(|e| Error::os("kernel peer: sending a worker its job", e))?;
            expect_line(stdout, &t.name, "ready")?;
        }
        let state = std::env::temp_dir().join(format!("ioshare-bench-agent-{}", std::process::id()));
        let agent = match setup {
            KernelSetup::Agent { model, qos } => Some(self.start_agent(*model, *qos, &groups, tenants, &state)?),
            _ => None,
        };
        let stop = AtomicBool::new(false);
        let reports = std::thread::scope(|s| {
            let agent = agent.map(|a| s.spawn(|| a.run(&stop)));
            let reports = collect(&mut workers, tenants);
            stop.store(true, Ordering::Relaxed);
            // The agent reverts its limits before the cgroups go.
            match agent.map(|h| h.join().expect("agent thread")) {
                Some(Err(e)) => Err(peer_error("the agent", e)),
                _ => reports,
            }
        })?;
        // Empty once the agent stopped (it removes its state and status files).
        let _ = std::fs::remove_dir(&state);
        drop(workers);
        Ok(merge(setup.name(), reports))
    }

    /// Starts the agent's userspace backend over the tenants' cgroups (weights from the tenants).
    fn start_agent(
        &self,
        model: ModelParams,
        qos: QosParams,
        groups: &[BlkioCgroup],
        tenants: &[TenantSpec],
        state: &Path,
    ) -> Result<ioshare_agent::Agent> {
        let root = Capabilities::probe().blkio_v1.ok_or_else(|| peer_error("the agent", "no blkio hierarchy"))?;
        let device = BlockDevice::resolve(&self.dev.dev().to_string()).map_err(|e| peer_error("the agent", e))?;
        let groups = groups
            .iter()
            .zip(tenants)
            .map(|(cg, t)| GroupConfig {
                cgroup: cg.path().strip_prefix(&root).unwrap_or(cg.path()).to_string_lossy().into_owned(),
                weight: t.weight,
                limits: Limits::default(),
            })
            .collect();
        let config =
            Config { period: AGENT_PERIOD, devices: vec![DeviceConfig { device, model, qos: Some(qos) }], groups };
        let (agent, _) = ioshare_agent::Agent::start(config, BackendChoice::Userspace, state)
            .map_err(|e| peer_error("starting the agent", e))?;
        Ok(agent)
    }
}

/// The agent peer's planning period.
const AGENT_PERIOD: Duration = Duration::from_millis(100);

/// Starts the ready workers together and reads their reports.
fn collect(workers: &mut Workers, tenants: &[TenantSpec]) -> Result<Vec<RunReport>> {
    for (_, stdin, _) in &mut workers.0 {
        // A worker that died shows up when its result is read.
        let _ = writeln!(stdin, "go");
    }
    let mut reports = Vec::new();
    for ((_, _, stdout), t) in workers.0.iter_mut().zip(tenants) {
        let line = expect_line(stdout, &t.name, "{")?;
        let r: RunReport = serde_json::from_str(&line)
            .map_err(|e| peer_error(&format!("reading the result of tenant '{}'", t.name), e))?;
        reports.push(r);
    }
    Ok(reports)
}

/// Reads one line from a worker; it must start with `prefix`.
fn expect_line(out: &mut BufReader<ChildStdout>, tenant: &str, prefix: &str) -> Result<String> {
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| Error::os(format!("kernel peer: reading worker '{tenant}'"), e))?;
    if !line.starts_with(prefix) {
        return Err(peer_error(
            &format!("worker for tenant '{tenant}'"),
            "it stopped without a result (its error is printed above)",
        ));
    }
    Ok(line)
}

/// Running workers; killed (if still running) and reaped on drop.
struct Workers(Vec<(Child, ChildStdin, BufReader<ChildStdout>)>);

impl Drop for Workers {
    fn drop(&mut self) {
        for (child, _, _) in &mut self.0 {
            if !matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

fn merge(name: &str, reports: Vec<RunReport>) -> RunReport {
    let n = reports.len().max(1) as f64;
    let mut out = RunReport { controller: name.into(), ..RunReport::default() };
    let mut cpu = CpuReport::default();
    let mut dev = DeviceReport::default();
    let mut ios = 0.0;
    for r in reports {
        out.window_s += r.window_s / n;
        out.interrupted |= r.interrupted;
        dev.iops += r.device.iops;
        dev.bw_bytes += r.device.bw_bytes;
        dev.busy_pct = dev.busy_pct.max(r.device.busy_pct);
        dev.avg_inflight += r.device.avg_inflight;
        cpu.user_s += r.cpu.user_s;
        cpu.sys_s += r.cpu.sys_s;
        ios += r.device.iops * r.window_s;
        out.tenants.extend(r.tenants);
    }
    cpu.ns_per_io = (cpu.user_s + cpu.sys_s) * 1e9 / ios.max(1.0);
    out.device = dev;
    out.cpu = cpu;
    out
}

/// The worker side: reads a [`WorkerRequest`] line from stdin, opens the target, prints `ready`,
/// waits for `go`, runs the tenant with no inline control (the kernel controls it), and prints the
/// report as one JSON line. Ctrl-C stops it early with the results so far.
pub fn worker_main() -> Result<()> {
    let stop = interrupt::stop_flag();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = String::new();
    input.read_line(&mut line).map_err(|e| Error::os("worker: reading the request", e))?;
    let req: WorkerRequest = serde_json::from_str(&line).map_err(|e| peer_error("worker: malformed request", e))?;
    let target = Target::open_shared(&req.target, 0)?;
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock, s: &str| {
        writeln!(out, "{s}").and_then(|_| out.flush()).map_err(|e| Error::os("worker: writing to the parent", e))
    };
    say(&mut out, "ready")?;
    line.clear();
    input.read_line(&mut line).map_err(|e| Error::os("worker: waiting for go", e))?;
    if line.trim() != "go" {
        return Ok(());
    }
    let opts =
        RunOptions { duration: req.duration, warmup: req.warmup, sample_every: req.sample_every, device_depth: 0 };
    let report = run(&target, std::slice::from_ref(&req.tenant), &mut NoControl::new(), &opts, stop)?;
    say(&mut out, &serde_json::to_string(&report).expect("report serialises"))
}
