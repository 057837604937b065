//! The running agent: discovery of cgroups, the backend's work each period, the status file, and
//! revert on the way out.
//!
//! - Start: the backend is chosen ([`Check`]; memory rules alone need none), the agent registered with the others running ([`Claim`]:
//!   refused if one controls a cgroup its rules match), the [`Recorder`] opened on the state directory
//!   (which reverts whatever a killed agent left), and the configuration applied whole: if any write fails,
//!   everything already written is reverted and the error returned — nothing half-applied.
//! - Every [`DISCOVERY_EVERY`] the group patterns are matched again, and the discovery runs when
//!   something it depends on changed ([`crate::daemon::tree_watch`]: inotify on the pods' cgroups, the pods'
//!   updates, the rules' matches; a full rescan every [`RESCAN_EVERY`](crate::daemon::tree_watch::RESCAN_EVERY)), so a cgroup created later (a
//!   container starting) is tracked within that time; the first rule that matches a cgroup wins, and
//!   a match nested below another match is skipped (its IO is already counted in its ancestor's
//!   recursive counters). With a `[kubernetes]` section the pods' updates are drained first and
//!   their cgroups join the rules' matches as one list of [`CgroupSettings`]s ([`crate::desired::targets`],
//!   [`crate::desired::pods`]); a target that went while its cgroup stayed (a pod deleted before kubelet
//!   removed its cgroup) has what was written to it restored. A cgroup that vanished is dropped without error, and so are its entries
//!   in the state file (nothing is left to restore there): under churn — containers by the
//!   thousand — what the agent holds stays proportional to the cgroups alive.
//! - The [`Backend`] does the rest: the kernel's iocost configured ([`crate::backend::kernel`]), or
//!   ioshare's planner run every period ([`crate::backend::userspace`]).
//! - Values someone else overwrote (a `daemon-reload`, a runtime) are written back within
//!   [`crate::cgroups::reapply::RECHECK_WITHIN`], counted and said once in the log ([`crate::cgroups::reapply`]).
//! - The status is written to the status file and, with a `[metrics]` section, handed to the
//!   `/metrics` endpoint ([`Metrics`], bound before anything is written to the host): every period
//!   in which a device had IO (userspace backend) or the discovery changed what is controlled, else every
//!   [`STATUS_EVERY`] (with 1 000 pods, rewriting it every period of an idle node cost ~5% of a core).
//! - Reload (SIGHUP sets the flag [`run_reloading`](Agent::run_reloading) watches): the
//!   configuration is read again and applied as a difference ([`reload`]).
//! - Stop (a signal sets the flag [`run`](Agent::run) watches, or [`Agent::stop`]): the endpoint
//!   closed, every recorded change reverted, the state and status files removed.

pub(crate) mod claim;
pub mod reload;
pub(crate) mod signals;
pub(crate) mod tree_watch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ioshare_core::Nanos;
use ioshare_host::{Recorder, Reverted};

use crate::backend::kernel::KernelIocost;
use crate::backend::userspace::UserspacePlanner;
use crate::backend::{Backend, HostFiles};
use crate::cgroups::check::{BackendChoice, BackendKind, Check};
use crate::cgroups::hierarchy::Hierarchy;
use crate::cgroups::reapply::Overwrites;
use crate::daemon::claim::Claim;
use crate::daemon::tree_watch::Discovery;
use crate::desired::config::Config;
use crate::desired::pods::Pods;
use crate::desired::targets::{targets, CgroupSettings, Owner, PodRef};
use crate::error::Result;
use crate::memory::MemoryGuard;
use crate::report::drift::DriftWatch;
use crate::report::metrics::Metrics;
use crate::report::share::watch::{Host, ShareWatch};
use crate::report::status::Status;
use crate::report::trace::TraceWriter;

/// How often the group patterns are matched again.
pub const DISCOVERY_EVERY: Duration = Duration::from_millis(200);
/// How often the status is written while nothing moves (see the module comment).
pub const STATUS_EVERY: Duration = Duration::from_secs(1);
/// Longest sleep of the loop (how fast a stop request is noticed).
const TICK: Duration = Duration::from_millis(20);

/// A running agent.
#[derive(Debug)]
pub struct Agent {
    config: Config,
    backend: Box<dyn Backend>,
    hierarchy: Hierarchy,
    recorder: Recorder,
    /// What the last discovery found to apply, cgroup by cgroup.
    targets: BTreeMap<String, CgroupSettings>,
    /// Every cgroup the last discovery wants written (the targets, and the userspace backend's
    /// leaves below pods): what a reload or a release keeps.
    managed: BTreeSet<String>,
    /// The pod (and container) of each managed cgroup a pod owns, for the status and metrics.
    named: BTreeMap<String, PodRef>,
    /// This node's pods, with a `[kubernetes]` section.
    pods: Option<Pods>,
    state_dir: PathBuf,
    sys_block: PathBuf,
    start: Instant,
    periods: u64,
    /// Whether the first discovery ran (cgroups found later are new: charged from their creation).
    discovered: bool,
    /// Memory isolation, when a rule asks for it.
    memory: Option<MemoryGuard>,
    /// Reloads asked for so far (SIGHUP).
    reloads: u64,
    /// Each managed cgroup's share, for the status.
    shares: ShareWatch,
    /// The registration of the cgroups it controls, held while it runs.
    claim: Claim,
    /// The `/metrics` endpoint, when the configuration asks for it.
    metrics: Option<Metrics>,
    /// The period trace (`--trace`), when asked for.
    trace: Option<TraceWriter>,
    /// Tuned devices watched for drift from their tune result's curve.
    drift: DriftWatch,
    /// Values someone else overwrote, written back.
    overwrites: Overwrites,
    /// When the discovery must run ([`crate::daemon::tree_watch`]).
    discovery: Discovery,
    /// The last discovery changed what is controlled: the status is written at the next period.
    status_dirty: bool,
    /// When the status was last written.
    status_written: Option<Instant>,
}

impl Agent {
    /// Starts on this host with the backend `choice`; returns what a killed agent's state file
    /// reverted, if there was one.
    /// A configuration without devices (memory rules alone) needs no IO backend: where the host has
    /// none, the memory hierarchy stands in and no device is planned.
    pub fn start(config: Config, choice: BackendChoice, state_dir: &Path) -> Result<(Agent, Option<Reverted>)> {
        let (backend, hierarchy) = match Check::probe().select(choice) {
            Err(_) if config.devices.is_empty() => memory_only()?,
            selected => selected?,
        };
        Agent::start_in(config, backend, hierarchy, state_dir, Path::new("/sys/block"))
    }

    /// Starts with an explicit backend and hierarchy (tests point these at a directory tree with the
    /// kernel's file layout); `sys_block` is where device counters are read.
    pub fn start_in(
        config: Config,
        backend: BackendKind,
        hierarchy: Hierarchy,
        state_dir: &Path,
        sys_block: &Path,
    ) -> Result<(Agent, Option<Reverted>)> {
        crate::desired::rules::warn_overlaps(&config);
        let metrics = config.metrics.map(Metrics::serve).transpose()?;
        // Before anything is written: a source that cannot work stops the start with its line.
        let pods = config.kubernetes.as_ref().map(|k| Pods::start(k, &hierarchy.root)).transpose()?;
        let mut roots = vec![hierarchy.root.clone()];
        roots.extend(MemoryGuard::hierarchy().map(|(root, _)| root).filter(|r| *r != hierarchy.root));
        let claim = Claim::register(&config, &hierarchy, state_dir)?;
        let (recorder, recovered) = Recorder::open(state_dir, roots)?;
        let backend: Box<dyn Backend> = match backend {
            BackendKind::Kernel => Box::new(KernelIocost::default()),
            BackendKind::Userspace => Box::new(UserspacePlanner::default()),
        };
        let mut agent = Agent {
            config,
            backend,
            hierarchy,
            recorder,
            targets: BTreeMap::new(),
            managed: BTreeSet::new(),
            named: BTreeMap::new(),
            pods,
            state_dir: state_dir.to_path_buf(),
            sys_block: sys_block.to_path_buf(),
            start: Instant::now(),
            periods: 0,
            discovered: false,
            memory: None,
            reloads: 0,
            shares: ShareWatch::default(),
            claim,
            metrics,
            trace: None,
            drift: DriftWatch::default(),
            overwrites: Overwrites::default(),
            discovery: Discovery::default(),
            status_dirty: false,
            status_written: None,
        };
        let exact = agent.memory_asks();
        let started = MemoryGuard::start(&agent.config, &exact, &mut agent.recorder).map(|m| agent.memory = m);
        match started.and_then(|()| agent.apply_initial()) {
            Ok(()) => Ok((agent, recovered)),
            Err(e) => {
                // All or nothing: undo what was written before the failure.
                if let Some(m) = agent.memory.take() {
                    let _ = m.stop();
                }
                let _ = agent.recorder.revert();
                Err(e)
            }
        }
    }

    /// Writes every device's [`PeriodRecord`](crate::report::trace::PeriodRecord) to `trace` from the next
    /// period on (userspace backend; the kernel plans by itself).
    pub fn trace_to(&mut self, trace: TraceWriter) {
        self.trace = Some(trace);
        self.backend.set_tracing();
    }

    /// The backend in use.
    pub fn backend(&self) -> BackendKind {
        self.backend.kind()
    }

    /// The backend's name, or `none` when no device is configured (memory rules alone).
    pub fn backend_name(&self) -> &'static str {
        if self.config.devices.is_empty() {
            "none"
        } else {
            self.backend.kind().name()
        }
    }

    /// The hierarchy in use.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    fn apply_initial(&mut self) -> Result<()> {
        self.set_devices()?;
        self.discover()?;
        self.write_status()
    }

    /// The host's files as the backend writes them.
    fn host(&mut self) -> (&mut dyn Backend, HostFiles<'_>) {
        let host = HostFiles {
            hierarchy: &self.hierarchy,
            recorder: &mut self.recorder,
            overwrites: &mut self.overwrites,
            sys_block: &self.sys_block,
        };
        (self.backend.as_mut(), host)
    }

    /// Hands the configured devices to the backend; how many were added, removed or changed.
    fn set_devices(&mut self) -> Result<usize> {
        let (devices, period) = (self.config.devices.clone(), self.config.period);
        let (backend, mut host) = self.host();
        backend.set_devices(&mut host, &devices, period)
    }

    /// Matches the group patterns again and takes the pods' updates: new cgroups are tracked
    /// (kernel backend: their weight and caps written now), vanished ones dropped, and what was
    /// written to a cgroup no longer wanted restored. Fails when the pod source ended for good.
    pub fn discover(&mut self) -> Result<()> {
        if let Some(p) = self.pods.as_mut() {
            p.drain()?;
        }
        let pods = self.pods.as_ref().map_or(&[][..], |p| p.targets());
        let found = match self.config.devices.is_empty() {
            true => BTreeMap::new(), // no IO control: the memory guard matches its own rules
            false => targets(&self.hierarchy.root, &self.config.groups, pods),
        };
        let now = self.now();
        // A pod's target that went while its cgroup stays (the pod deleted before kubelet removed its
        // cgroup): restore what was written to it (below). A rule's goes only at a reload, which
        // restores what it no longer wants itself.
        let released = self.targets.iter().any(|(rel, t)| {
            !matches!(t.owner, Owner::Rule(_)) && !found.contains_key(rel) && self.hierarchy.dir(rel).is_dir()
        });
        let mut managed: BTreeSet<String> = found.keys().cloned().collect();
        let mut named: BTreeMap<String, PodRef> =
            found.iter().filter_map(|(rel, t)| Some((rel.clone(), t.pod()?.clone()))).collect();
        let fresh = self.discovered;
        let (backend, mut host) = self.host();
        let synced = backend.sync(&mut host, now, &found, fresh)?;
        for (rel, pod) in synced.leaves {
            managed.insert(rel.clone());
            if let Some(p) = pod {
                named.insert(rel, p);
            }
        }
        let gone = synced.gone;
        if found != self.targets || managed != self.managed || named != self.named {
            self.status_dirty = true;
            self.shares.invalidate();
        }
        self.targets = found;
        self.managed = managed;
        self.named = named;
        let pods = self.pods.as_ref().map_or(&[][..], |p| p.targets());
        self.discovery.discovered(Instant::now(), &self.hierarchy.root, pods);
        self.discovered = true;
        let exact = self.memory_asks();
        if self.memory.is_none() && !exact.is_empty() {
            self.memory = MemoryGuard::start(&self.config, &exact, &mut self.recorder)?;
        } else if let Some(m) = self.memory.as_mut() {
            m.discover(&self.config, &exact, &mut self.recorder)?;
        }
        // (The memory guard does not say which of its groups went: looked at every time.)
        if gone > 0 || self.memory.is_some() {
            self.recorder.forget_vanished()?;
            self.overwrites.forget_vanished();
        }
        if released {
            self.release_unwanted()?;
        }
        Ok(())
    }

    /// Writes back what someone else overwrote ([`crate::cgroups::reapply`]): what the backend holds in
    /// force by itself, and the memory guard's files.
    fn reassert(&mut self) -> Result<()> {
        let (backend, mut host) = self.host();
        backend.reassert(&mut host)?;
        if let Some(m) = self.memory.as_mut() {
            m.reassert(&mut self.overwrites)?;
        }
        Ok(())
    }

    /// The pods' memory settings, by cgroup (the memory guard takes those that exist).
    fn memory_asks(&self) -> Vec<(String, ioshare_memory::MemorySettings)> {
        let pods = self.pods.as_ref().map_or(&[][..], |p| p.targets());
        pods.iter().filter_map(|(rel, t)| Some((rel.clone(), t.memory?))).collect()
    }

    /// One planning period (userspace backend; the kernel backend only refreshes its status).
    pub fn period(&mut self) -> Result<()> {
        let now = self.now();
        if let Some(m) = self.memory.as_mut() {
            m.refresh();
        }
        let (backend, mut host) = self.host();
        let device_io = backend.period(&mut host, now)?;
        if let Some(trace) = self.trace.as_mut() {
            trace.write(&self.backend.take_records())?;
        }
        // A backend without figures of its own (the kernel's) has its shares looked at again
        // whenever due; the planner's, after a period with IO.
        // Asked only when the shares are due (each device's planner stats: O(groups)).
        let backend = &self.backend;
        let planner = || backend.activity(now).unwrap_or_default();
        self.shares.refresh_if_due(
            Instant::now(),
            device_io || !self.backend.has_figures(),
            &self.config,
            self.pods.as_ref().map_or(&[][..], Pods::targets),
            Host { backend: self.backend.kind(), hierarchy: &self.hierarchy, sys_block: &self.sys_block },
            &planner,
        );
        self.periods += 1;
        if crate::cgroups::reapply::due(self.periods, self.config.period) {
            self.reassert()?;
        }
        let moved = device_io || std::mem::take(&mut self.status_dirty);
        match moved || self.status_written.is_none_or(|t| t.elapsed() >= STATUS_EVERY) {
            true => self.write_status(),
            false => Ok(()),
        }
    }

    /// [`discover`](Agent::discover) if one of its inputs changed ([`crate::daemon::tree_watch`]).
    fn discover_if_due(&mut self) -> Result<()> {
        let pods_changed = self.pods.as_mut().map(Pods::drain).transpose()?.unwrap_or(false);
        let rules = crate::desired::rules::matched(&self.hierarchy.root, &self.config.groups);
        let always = self.memory.is_some() || self.config.devices.is_empty();
        match self.discovery.due(Instant::now(), rules, pods_changed, always) {
            true => self.discover(),
            false => Ok(()),
        }
    }

    /// The current status.
    pub fn status(&self) -> Status {
        let now = self.now();
        let devices = self.backend.status(now);
        Status {
            pid: std::process::id(),
            pid_start_ticks: crate::report::status::own_start_ticks(),
            period_ms: self.config.period.as_millis() as u64,
            backend: self.backend_name().to_string(),
            root: self.hierarchy.root.clone(),
            periods: self.periods,
            updated_unix: SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            devices,
            memory: self.memory.as_ref().map(|m| m.lines().to_vec()).unwrap_or_default(),
            shares: self.shares.report().cloned(),
            kubernetes: self.pods.as_ref().map(|p| p.status(&self.named, &|rel| self.targets.contains_key(rel))),
            overwritten: self.overwrites.count(),
            drift: Vec::new(),
        }
    }

    fn write_status(&mut self) -> Result<()> {
        self.status_written = Some(Instant::now());
        let mut status = self.status();
        self.drift.observe(&self.config, &mut status);
        status.write(&self.state_dir)?;
        if let Some(m) = &self.metrics {
            m.publish(status);
        }
        Ok(())
    }

    /// Where the `/metrics` endpoint listens, if there is one.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(Metrics::addr)
    }

    /// Runs until `stop` is set, then reverts everything it wrote.
    pub fn run(self, stop: &AtomicBool) -> Result<Reverted> {
        self.run_loop(stop, None)
    }

    /// [`run`](Agent::run), and each time `reload` is set (SIGHUP), clears it and applies the
    /// configuration `load` reads ([`reload`]); a configuration that `load` refuses, or that cannot
    /// be applied, leaves the running one in force.
    pub fn run_reloading(
        self,
        stop: &AtomicBool,
        reload: &AtomicBool,
        load: &dyn Fn() -> Result<Config>,
    ) -> Result<Reverted> {
        self.run_loop(stop, Some((reload, load)))
    }

    fn run_loop(
        mut self,
        stop: &AtomicBool,
        reload: Option<(&AtomicBool, &dyn Fn() -> Result<Config>)>,
    ) -> Result<Reverted> {
        let mut next_discovery = Instant::now() + DISCOVERY_EVERY;
        let mut next_period = Instant::now() + self.config.period;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let step = if let Some((_, load)) = reload.filter(|(flag, _)| flag.swap(false, Ordering::Relaxed)) {
                self.reload_from(load)
            } else if now >= next_discovery {
                next_discovery = next_deadline(next_discovery, DISCOVERY_EVERY, now);
                self.discover_if_due()
            } else if now >= next_period {
                next_period = next_deadline(next_period, self.config.period, now);
                self.period()
            } else {
                let wait = next_discovery.min(next_period).saturating_duration_since(now).min(TICK);
                match self.memory.as_mut() {
                    Some(m) => m.poll(wait),
                    None => {
                        std::thread::sleep(wait);
                        Ok(())
                    }
                }
            };
            if let Err(e) = step {
                let _ = self.stop();
                return Err(e);
            }
        }
        self.stop()
    }

    /// Reverts everything written and removes the state and status files.
    pub fn stop(mut self) -> Result<Reverted> {
        drop(self.metrics.take());
        crate::report::status::Status::remove(&self.state_dir);
        reload::Outcome::remove(&self.state_dir);
        if let Some(m) = self.memory.take() {
            m.stop()?;
        }
        Ok(self.recorder.revert()?)
    }
}

/// The deadline after `due` (passed at `now`): one `every` later, or `every` from now when that is
/// past too — the loop fell behind (a stopped process): it resyncs rather than catching up on every
/// missed deadline at once.
fn next_deadline(due: Instant, every: Duration, now: Instant) -> Instant {
    let next = due + every;
    if next < now {
        now + every
    } else {
        next
    }
}

/// The hierarchy of a configuration with memory rules alone on a host without an IO backend: the
/// memory controller's (no device is planned, so the backend does nothing).
fn memory_only() -> Result<(BackendKind, Hierarchy)> {
    let (root, v2) = MemoryGuard::needed_hierarchy()?;
    let flavor = if v2 { crate::cgroups::hierarchy::Flavor::V2 } else { crate::cgroups::hierarchy::Flavor::V1 };
    Ok((BackendKind::Userspace, Hierarchy { flavor, root }))
}

/// Reverts what a killed agent recorded in `state_dir` (`ioshare agent revert`); `None` if there
/// was nothing to revert. Only files under this host's blkio and memory (v1) and unified (v2) roots
/// are touched.
pub fn revert(state_dir: &Path) -> Result<Option<Reverted>> {
    let caps = ioshare_host::Capabilities::probe();
    let memory = caps.memory_v1().cloned();
    let roots: Vec<PathBuf> = caps.blkio_v1.into_iter().chain(caps.cgroup_v2).chain(memory).collect();
    let reverted = ioshare_host::revert_state_dir(state_dir, &roots)?;
    crate::report::status::Status::remove(state_dir);
    Ok(reverted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a stop of 10 s the loop runs one discovery and one period, not the 50 and 100 missed.
    #[test]
    fn deadlines_resync_after_a_gap() {
        let (t0, every) = (Instant::now(), Duration::from_millis(200));
        assert_eq!(next_deadline(t0, every, t0 + Duration::from_millis(5)), t0 + every, "on time: one step on");
        let resumed = t0 + Duration::from_secs(10);
        assert_eq!(next_deadline(t0, every, resumed), resumed + every, "behind: from now");
    }
}
