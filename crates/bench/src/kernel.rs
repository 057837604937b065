//! Kernel peers: the same tenants with the kernel in control (and, as a peer of the same kind, the
//! ioshare agent's userspace backend writing blk-throttle limits on cgroup v1). Each tenant runs in its
//! own worker process (the `ioshare` binary started again with a hidden flag) inside its own cgroup,
//! where the kernel's controller applies. Workers open the device, report ready, start together on
//! "go", and print their [`RunReport`] as one JSON line.
//!
//! Which cgroups: where cgroup v2 has the `io` controller (a v2 host, or the QEMU lab guest) the peers
//! use v2 — `io.bfq.weight`, `io.max`, and the kernel's own IOCost (`io.cost.model`/`io.cost.qos` from
//! the same calibration ioshare's IOCost uses, `io.weight` per tenant); elsewhere cgroup v1 `blkio`
//! (BFQ weights, blk-throttle), which has no IOCost. Which device: a block device target is used as
//! it is (v2; its scheduler is restored afterwards); a file, or any target under v1, gets a loop
//! device with direct IO (`losetup --direct-io=on`) over it.
//!
//! Cleanup: workers are killed and reaped, cgroups removed, iocost switched back off, the scheduler
//! restored and a loop device detached — by drop guards, so errors and interrupts clean up too (the
//! host crate's loop devices also auto-clear if this process dies).

use std::io::{BufRead, BufReader, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ioshare_agent::desired::config::{Config, DeviceConfig, GroupConfig};
use ioshare_agent::BackendChoice;
use ioshare_core::iocost::line::Ctrl;
use ioshare_core::iocost::qos::QosConfig;
use ioshare_core::{Limits, ModelConfig, ModelParams, Nanos, NoControl, QosParams};
use ioshare_host::{
    is_root, BlkioCgroup, BlockDevice, Capabilities, Cgroup2, DiskId, IoMax, KernelIoCost, LoopDevice, ThrottleKnob,
    BFQ_WEIGHT_MAX, BFQ_WEIGHT_MIN, IO_WEIGHT_MAX, IO_WEIGHT_MIN,
};
use serde::{Deserialize, Serialize};

use ioshare_engine::interrupt;
use ioshare_engine::job::TenantSpec;
use ioshare_engine::report::{ControllerSample, CpuReport, DeviceReport, RunReport};
use ioshare_engine::run::{run, RunOptions};
use ioshare_engine::target::{Target, TargetKind};
use ioshare_engine::Error as EngineError;

use crate::calibrate::Calibration;
use crate::decisions::DecisionRecorder;
use crate::error::{Error, Result};

/// How the kernel controls a kernel-peer run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelSetup {
    /// Loop device with no scheduler and no cgroup settings: the kernel-side baseline.
    Plain,
    /// BFQ on the loop device, each tenant's weight as its cgroup's `blkio.bfq.weight` (clamped to
    /// BFQ's 1..1000).
    Bfq,
    /// blk-throttle read IOPS limits, one per tenant (`blkio.throttle.read_iops_device`, v2
    /// `io.max riops=`).
    ReadIopsLimits(Vec<u64>),
    /// The most any limit-writing controller gets at a ratio: the first tenant without a limit,
    /// the second held to `lo_iops` reads a second by blk-throttle (as in `ReadIopsLimits`).
    Ceiling {
        /// The second tenant's read IOPS limit.
        lo_iops: u64,
    },
    /// The kernel's IOCost (cgroup v2 only) with the calibration's model and QoS, each tenant's
    /// weight as its `io.weight`.
    IoCost,
    /// The kernel's IOCost (cgroup v2 only) with the lines given, each tenant's weight as its
    /// `io.weight`: how `ioshare tune --kernel` pins a point ([`crate::tune_kernel`]). Its periods are
    /// not replayed (vrate is pinned: there are no decisions to compare).
    PinnedIoCost {
        /// The cost model (scaled by the point's vrate).
        model: ModelParams,
        /// The QoS (vrate pinned).
        qos: QosParams,
    },
    /// The ioshare agent's userspace backend: ioshare-core's IOCost planner every 100 ms over the
    /// tenants' cgroups, writing blk-throttle limits (model and QoS from the calibration).
    Agent {
        /// The device's cost model.
        model: ModelParams,
        /// Latency QoS.
        qos: QosParams,
    },
    /// The ioshare agent's kernel backend (cgroup v2 with iocost): the agent writes `io.cost.model`,
    /// `io.cost.qos` and each tenant's `io.weight`, as `ioshare agent run --backend kernel` does.
    AgentKernel {
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
            KernelSetup::Ceiling { .. } => "ceiling",
            KernelSetup::IoCost => "kernel-iocost",
            KernelSetup::PinnedIoCost { .. } => "kernel-iocost-pinned",
            KernelSetup::Agent { .. } => "agent",
            KernelSetup::AgentKernel { .. } => "agent-kernel",
        }
    }

    /// The blk-throttle read IOPS limit of the `i`th tenant, if the setup gives it one.
    fn read_iops_limit(&self, i: usize) -> Option<u64> {
        match self {
            KernelSetup::ReadIopsLimits(l) => l.get(i).copied(),
            KernelSetup::Ceiling { lo_iops } => (i == 1).then_some(*lo_iops),
            _ => None,
        }
    }

    /// The `io.cost.model` and `io.cost.qos` lines (without the device) the setup switches the
    /// kernel's IOCost on with, if it does: the calibration's for `IoCost`, its own for `PinnedIoCost`.
    fn iocost_lines(&self, cal: Option<&Calibration>) -> Result<Option<(String, QosParams)>> {
        match (self, cal) {
            (KernelSetup::IoCost, Some(cal)) => Ok(Some((cal.model_line.clone(), cal.qos))),
            (KernelSetup::IoCost, None) => {
                Err(peer_error(self.name(), "its lines come from a calibration: Peers::run"))
            }
            (KernelSetup::PinnedIoCost { model, qos }, _) => {
                Ok(Some((ModelConfig { device: None, ctrl: Ctrl::User, params: *model }.to_string(), *qos)))
            }
            _ => Ok(None),
        }
    }
}

/// The device the kernel peers run on.
enum PeerDevice {
    /// A loop device over the target.
    Loop(LoopDevice),
    /// The target itself, a whole-disk block device.
    Block(BlockDevice),
}

impl Deref for PeerDevice {
    type Target = BlockDevice;

    fn deref(&self) -> &BlockDevice {
        match self {
            PeerDevice::Loop(d) => d,
            PeerDevice::Block(d) => d,
        }
    }
}

/// A tenant's cgroup, in whichever hierarchy the peers use.
enum PeerCgroup {
    V1(BlkioCgroup),
    V2(Cgroup2),
}

impl PeerCgroup {
    fn path(&self) -> &Path {
        match self {
            PeerCgroup::V1(cg) => cg.path(),
            PeerCgroup::V2(cg) => cg.path(),
        }
    }

    fn spawn(&self, cmd: Command) -> ioshare_host::Result<Child> {
        match self {
            PeerCgroup::V1(cg) => cg.spawn(cmd),
            PeerCgroup::V2(cg) => cg.spawn(cmd),
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

/// The device the kernel peers run on, which cgroups they use, and how to start workers.
pub struct Peers {
    dev: PeerDevice,
    /// cgroup v2 (`io`) rather than v1 `blkio`.
    v2: bool,
    /// The kernel's IOCost exists (`io.cost.qos` in the v2 root).
    io_cost: bool,
    worker: Vec<String>,
    runs: u32,
    /// The last kernel-iocost run's decisions, replayed (a note for its scenario).
    decisions: Option<String>,
}

fn peer_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::KernelPeer(format!("{what}: {e}"))
}

impl Peers {
    /// Chooses the cgroup hierarchy and opens the device (a loop device over `target` where needed).
    /// `Ok(None)` when no worker command was given; `Err(reason)` (a note for the report) when the host
    /// cannot run kernel peers.
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
        let skipped = |e: ioshare_host::Error| format!("kernel peers skipped: {e}");
        let peers =
            |dev, v2| Peers { dev, v2, io_cost: v2 && caps.io_cost, worker: worker.to_vec(), runs: 0, decisions: None };
        if caps.io_v2() {
            let block = Target::open_shared(target, 0).is_ok_and(|t| t.kind() == TargetKind::BlockDevice);
            let dev = if block {
                PeerDevice::Block(BlockDevice::open(target).map_err(skipped)?)
            } else {
                PeerDevice::Loop(LoopDevice::attach(target, true).map_err(skipped)?)
            };
            return Ok(Some(peers(dev, true)));
        }
        if caps.blkio_v1.is_none() || !caps.bfq || !caps.blk_throttle_v1 {
            return Err("kernel peers skipped: this host has neither cgroup v2 io nor cgroup v1 blkio with BFQ and \
                        blk-throttle"
                .into());
        }
        let dev = LoopDevice::attach(target, true).map_err(skipped)?;
        Ok(Some(peers(PeerDevice::Loop(dev), false)))
    }

    /// Whether `setup` can run here (the kernel's IOCost needs cgroup v2 with `io.cost.qos`).
    pub fn supports(&self, setup: &KernelSetup) -> bool {
        self.unsupported(setup).is_none()
    }

    /// Why `setup` cannot run on this host, if it cannot.
    pub fn unsupported(&self, setup: &KernelSetup) -> Option<&'static str> {
        match setup {
            KernelSetup::IoCost | KernelSetup::PinnedIoCost { .. } | KernelSetup::AgentKernel { .. }
                if !self.io_cost =>
            {
                Some("it needs cgroup v2 io with the kernel's iocost")
            }
            // The agent peer drives blk-throttle through cgroup v1 here.
            KernelSetup::Agent { .. } if self.v2 => Some("its peer drives blk-throttle through cgroup v1 blkio"),
            _ => None,
        }
    }

    /// What the last kernel-iocost run's decisions were against ioshare's rules (taken once).
    pub fn take_decisions(&mut self) -> Option<String> {
        self.decisions.take()
    }

    /// The device the peers run on (a loop device over the target, or the target itself).
    pub fn device(&self) -> &Path {
        self.dev.path()
    }

    /// Which cgroups the peers use, for the report.
    pub fn describe(&self) -> String {
        let how = match (self.v2, self.io_cost) {
            (true, true) => "cgroup v2 (io.bfq.weight, io.max, kernel IOCost: io.weight + io.cost.model/qos)",
            (true, false) => "cgroup v2 (io.bfq.weight, io.max; no kernel IOCost: io.cost.qos missing)",
            (false, _) => "cgroup v1 blkio (BFQ, blk-throttle; the kernel's IOCost needs cgroup v2 io: run the bench in scripts/lab)",
        };
        format!("kernel peers: {how} on {}", self.dev.path().display())
    }

    /// Runs `tenants` under `setup`, one worker process and cgroup per tenant, and merges their
    /// reports (device figures: sums; busy share: the largest of the workers' views). An interrupt
    /// reaches the workers too (same process group): they stop and report what they measured. Only
    /// [`KernelSetup::IoCost`] needs the calibration `cal` (its lines).
    pub fn run(
        &mut self,
        setup: &KernelSetup,
        cal: Option<&Calibration>,
        tenants: &[TenantSpec],
        opts: &RunOptions,
    ) -> Result<RunReport> {
        if let Some(why) = self.unsupported(setup) {
            return Err(peer_error(setup.name(), why));
        }
        self.runs += 1;
        let sched = if *setup == KernelSetup::Bfq { "bfq" } else { "none" };
        self.dev.set_scheduler(sched).map_err(|e| peer_error("setting the device's scheduler", e))?;
        // Declared before the cgroups and workers: dropped last, after the workers are reaped.
        let iocost = setup.iocost_lines(cal)?.map(|(model, qos)| self.enable_iocost(&model, qos)).transpose()?;
        // Declared before the workers so that the workers are reaped before the cgroups are removed.
        let mut groups = Vec::new();
        let mut workers = Workers(Vec::new());
        for (i, t) in tenants.iter().enumerate() {
            let name = format!("ioshare-bench-{}/run{}-{}", std::process::id(), self.runs, t.name);
            let cg = if self.v2 { self.cgroup_v2(&name, setup, i, t)? } else { self.cgroup_v1(&name, setup, i, t)? };
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
                .map_err(|e| EngineError::os("kernel peer: sending a worker its job", e))?;
            expect_line(stdout, &t.name, "ready")?;
        }
        let state = std::env::temp_dir().join(format!("ioshare-bench-agent-{}", std::process::id()));
        let agent = match setup {
            KernelSetup::Agent { model, qos } => {
                Some(self.start_agent(BackendChoice::Userspace, *model, *qos, &groups, tenants, &state)?)
            }
            KernelSetup::AgentKernel { model, qos } => {
                Some(self.start_agent(BackendChoice::Kernel, *model, *qos, &groups, tenants, &state)?)
            }
            _ => None,
        };
        let recorder = (*setup == KernelSetup::IoCost).then(|| DecisionRecorder::start(self.dev.dev()));
        let stop = AtomicBool::new(false);
        // Where the kernel's IOCost is on, its vrate is read while the workers run.
        let vrate_from = iocost.as_ref().and_then(|_| Capabilities::probe().cgroup_v2);
        let dev = self.dev.dev().to_string();
        let (reports, vrates) = std::thread::scope(|s| {
            let agent = agent.map(|a| s.spawn(|| a.run(&stop)));
            let (dev, stop) = (&dev, &stop);
            let sampler = vrate_from.map(|root| s.spawn(move || sample_vrate(&root.join("io.stat"), dev, opts, stop)));
            let reports = collect(&mut workers, tenants);
            stop.store(true, Ordering::Relaxed);
            let vrates = sampler.map_or_else(Vec::new, |h| h.join().expect("vrate sampler thread"));
            // The agent reverts its limits before the cgroups go.
            match agent.map(|h| h.join().expect("agent thread")) {
                Some(Err(e)) => (Err(peer_error("the agent", e)), vrates),
                _ => (reports, vrates),
            }
        });
        self.decisions = recorder.map(DecisionRecorder::finish);
        let reports = reports?;
        // Empty once the agent stopped (it removes its state and status files).
        let _ = std::fs::remove_dir(&state);
        drop(workers);
        let mut report = merge(setup.name(), reports);
        report.controller_series = vrates;
        Ok(report)
    }

    /// A v1 blkio cgroup for tenant `t` (the `i`th) configured for `setup`.
    fn cgroup_v1(&self, name: &str, setup: &KernelSetup, i: usize, t: &TenantSpec) -> Result<PeerCgroup> {
        let cg = BlkioCgroup::create(name).map_err(|e| peer_error("creating a cgroup", e))?;
        match setup {
            KernelSetup::Plain
            | KernelSetup::IoCost
            | KernelSetup::PinnedIoCost { .. }
            | KernelSetup::Agent { .. }
            | KernelSetup::AgentKernel { .. } => Ok(()),
            KernelSetup::Bfq => cg.set_bfq_weight(t.weight.clamp(BFQ_WEIGHT_MIN, BFQ_WEIGHT_MAX)),
            KernelSetup::ReadIopsLimits(_) | KernelSetup::Ceiling { .. } => match setup.read_iops_limit(i) {
                Some(limit) => cg.set_throttle(self.dev.dev(), ThrottleKnob::ReadIops, limit),
                None => Ok(()),
            },
        }
        .map_err(|e| peer_error("configuring a cgroup", e))?;
        Ok(PeerCgroup::V1(cg))
    }

    /// A v2 cgroup (with `io` enabled) for tenant `t` (the `i`th) configured for `setup`.
    fn cgroup_v2(&self, name: &str, setup: &KernelSetup, i: usize, t: &TenantSpec) -> Result<PeerCgroup> {
        let cg = Cgroup2::create(name, &["io"]).map_err(|e| peer_error("creating a cgroup", e))?;
        match setup {
            KernelSetup::Plain => Ok(()),
            KernelSetup::Bfq => cg.write("io.bfq.weight", &t.weight.clamp(BFQ_WEIGHT_MIN, BFQ_WEIGHT_MAX).to_string()),
            KernelSetup::ReadIopsLimits(_) | KernelSetup::Ceiling { .. } => match setup.read_iops_limit(i) {
                Some(limit) => {
                    cg.write("io.max", &IoMax { riops: Some(limit), ..IoMax::unlimited(self.dev.dev()) }.to_string())
                }
                None => Ok(()),
            },
            KernelSetup::Agent { .. } | KernelSetup::AgentKernel { .. } => Ok(()),
            KernelSetup::IoCost | KernelSetup::PinnedIoCost { .. } => {
                cg.write("io.weight", &format!("default {}", t.weight.clamp(IO_WEIGHT_MIN, IO_WEIGHT_MAX)))
            }
        }
        .map_err(|e| peer_error("configuring a cgroup", e))?;
        Ok(PeerCgroup::V2(cg))
    }

    /// Switches the kernel's IOCost on for the device with `model` (an `io.cost.model` line without
    /// the device) and `qos` (the same ioshare's IOCost runs with), until the guard is dropped.
    fn enable_iocost(&self, model: &str, qos: QosParams) -> Result<KernelIoCost> {
        let qos = QosConfig { device: None, ctrl: Ctrl::User, params: qos }.to_string();
        KernelIoCost::enable(self.dev.dev(), model, &qos).map_err(|e| peer_error("enabling the kernel's iocost", e))
    }

    /// Starts the agent's `backend` over the tenants' cgroups (weights from the tenants).
    fn start_agent(
        &self,
        backend: BackendChoice,
        model: ModelParams,
        qos: QosParams,
        groups: &[PeerCgroup],
        tenants: &[TenantSpec],
        state: &Path,
    ) -> Result<ioshare_agent::Agent> {
        let caps = Capabilities::probe();
        let root = if self.v2 { caps.cgroup_v2 } else { caps.blkio_v1 };
        let root = root.ok_or_else(|| peer_error("the agent", "no cgroup hierarchy with io control"))?;
        let device = DiskId::resolve(&self.dev.dev().to_string()).map_err(|e| peer_error("the agent", e))?;
        let groups = groups
            .iter()
            .zip(tenants)
            .map(|(cg, t)| GroupConfig {
                cgroup: cg.path().strip_prefix(&root).unwrap_or(cg.path()).to_string_lossy().into_owned(),
                weight: t.weight,
                limits: Limits::default(),
                memory: None,
            })
            .collect();
        let config = Config {
            period: AGENT_PERIOD,
            devices: vec![DeviceConfig { device, model, qos: Some(qos), tuned: None }],
            groups,
            memory_dry_run: false,
            metrics: None,
            kubernetes: None,
        };
        // The agent's warnings (a rule that loses cgroups, a missing observer, ...) on stderr, as
        // `ioshare agent run` logs them.
        ioshare_agent::report::logging::init_in_process().map_err(|e| peer_error("the agent's log", e))?;
        let (mut agent, _) =
            ioshare_agent::Agent::start(config, backend, state).map_err(|e| peer_error("starting the agent", e))?;
        // The agent's period trace on request (`ioshare agent trace PATH.<run>.jsonl` reads it): why a
        // run's ratio or total is what it is (docs/agent.md).
        if let Some(path) = std::env::var_os(AGENT_TRACE_ENV) {
            let path = std::path::PathBuf::from(path).with_extension(format!("{}.jsonl", self.runs));
            agent.trace_to(
                ioshare_agent::report::trace::TraceWriter::create(&path).map_err(|e| peer_error("trace", e))?,
            );
        }
        Ok(agent)
    }
}

/// Environment variable naming where the agent peers write their period trace (`PATH.<run>.jsonl`).
pub const AGENT_TRACE_ENV: &str = "IOSHARE_BENCH_AGENT_TRACE";

/// The agent peer's planning period.
pub const AGENT_PERIOD: Duration = Duration::from_millis(100);

/// The kernel IOCost's vrate for device `dev` (`MAJ:MIN`), read from the v2 root's `io.stat`
/// (`cost.vrate=`) every sample interval of `opts` until `stop`, times in seconds from the start
/// (the workers start with it, within a few ms). A read that fails or lacks the key is skipped.
fn sample_vrate(io_stat: &Path, dev: &str, opts: &RunOptions, stop: &AtomicBool) -> Vec<ControllerSample> {
    let start = std::time::Instant::now();
    let every = Duration::from_nanos(opts.sample_every);
    let mut next = every;
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = start.elapsed();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next += every;
        let text = std::fs::read_to_string(io_stat).unwrap_or_default();
        if let Some(vrate_pct) = parse_vrate(&text, dev) {
            samples.push(ControllerSample { t_s: now.as_secs_f64(), vrate_pct, ..ControllerSample::default() });
        }
    }
    samples
}

/// `cost.vrate` of device `dev`'s line in an `io.stat` text.
fn parse_vrate(io_stat: &str, dev: &str) -> Option<f64> {
    let line = io_stat.lines().find(|l| l.split_whitespace().next() == Some(dev))?;
    line.split_whitespace().find_map(|kv| kv.strip_prefix("cost.vrate="))?.parse().ok()
}

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
    out.read_line(&mut line).map_err(|e| EngineError::os(format!("kernel peer: reading worker '{tenant}'"), e))?;
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
    input.read_line(&mut line).map_err(|e| EngineError::os("worker: reading the request", e))?;
    let req: WorkerRequest = serde_json::from_str(&line).map_err(|e| peer_error("worker: malformed request", e))?;
    let target = Target::open_shared(&req.target, 0)?;
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock, s: &str| {
        writeln!(out, "{s}").and_then(|_| out.flush()).map_err(|e| EngineError::os("worker: writing to the parent", e))
    };
    say(&mut out, "ready")?;
    line.clear();
    input.read_line(&mut line).map_err(|e| EngineError::os("worker: waiting for go", e))?;
    if line.trim() != "go" {
        return Ok(());
    }
    let opts = RunOptions { warmup: req.warmup, sample_every: req.sample_every, ..RunOptions::new(req.duration) };
    let report = run(&target, std::slice::from_ref(&req.tenant), &mut NoControl::new(), &opts, stop)?;
    Ok(say(&mut out, &serde_json::to_string(&report).expect("report serialises"))?)
}

#[cfg(test)]
mod tests {
    use super::parse_vrate;

    #[test]
    fn vrate_is_read_from_the_devices_io_stat_line() {
        let text = "8:0 rbytes=1 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=97.50 cost.usage=3\n\
                    259:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=114.68 cost.usage=0\n";
        assert_eq!(parse_vrate(text, "259:0"), Some(114.68));
        assert_eq!(parse_vrate(text, "8:0"), Some(97.5));
        assert_eq!(parse_vrate(text, "259:1"), None, "no line for the device");
        assert_eq!(parse_vrate("259:0 rbytes=1 rios=1\n", "259:0"), None, "iocost off: no vrate");
    }
}
