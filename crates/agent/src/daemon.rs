//! The running agent: discovery of cgroups, the backend's work each period, the status file, and
//! revert on the way out.
//!
//! - Start: the backend is chosen ([`Check`]), the [`Recorder`] opened on the state directory (which
//!   reverts whatever a killed agent left), and the configuration applied whole: if any write fails,
//!   everything already written is reverted and the error returned — nothing half-applied.
//! - Every [`DISCOVERY_EVERY`] the group patterns are matched again, so a cgroup created later (a
//!   container starting) is tracked within that time; the first rule that matches a cgroup wins, and
//!   a match nested below another match is skipped (its IO is already counted in its ancestor's
//!   recursive counters). A cgroup that vanished is dropped without error, and so are its entries
//!   in the state file (nothing is left to restore there): under churn — containers by the
//!   thousand — what the agent holds stays proportional to the cgroups alive.
//! - Kernel backend: the root's `io.cost.model`/`io.cost.qos` per device at start, `io.weight` and
//!   `io.max` (fixed caps) per cgroup as it is found; the kernel does the rest.
//! - Userspace backend: every period each device's [`DeviceLoop`] plans and writes limits.
//! - Stop (a signal sets the flag [`run`](Agent::run) watches, or [`Agent::stop`]): every recorded
//!   change is reverted, the state and status files removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::iocost::qos::QosConfig;
use ioshare_core::{LinearModel, ModelConfig, Nanos};
use ioshare_host::{find_cgroups, Recorder, Reverted};

use crate::check::{Backend, BackendChoice, Check};
use crate::config::{Config, DeviceConfig, GroupConfig};
use crate::error::Result;
use crate::hierarchy::{Hierarchy, Throttle};
use crate::limits::throttle_for;
use crate::memory::MemoryGuard;
use crate::status::{DeviceLine, GroupLine, Status};
use crate::userspace::DeviceLoop;

/// How often the group patterns are matched again.
pub const DISCOVERY_EVERY: Duration = Duration::from_millis(200);
/// Longest sleep of the loop (how fast a stop request is noticed).
const TICK: Duration = Duration::from_millis(20);

/// A running agent.
#[derive(Debug)]
pub struct Agent {
    config: Config,
    backend: Backend,
    hierarchy: Hierarchy,
    recorder: Recorder,
    devices: Vec<DeviceLoop>,
    /// Kernel backend: cgroups applied, with their rule.
    applied: BTreeMap<String, usize>,
    state_dir: PathBuf,
    sys_block: PathBuf,
    start: Instant,
    periods: u64,
    /// Whether the first discovery ran (cgroups found later are new: charged from their creation).
    discovered: bool,
    /// Memory isolation, when a rule asks for it.
    memory: Option<MemoryGuard>,
}

impl Agent {
    /// Starts on this host with the backend `choice`; returns what a killed agent's state file
    /// reverted, if there was one.
    pub fn start(config: Config, choice: BackendChoice, state_dir: &Path) -> Result<(Agent, Option<Reverted>)> {
        let (backend, hierarchy) = Check::probe().select(choice)?;
        Agent::start_in(config, backend, hierarchy, state_dir, Path::new("/sys/block"))
    }

    /// Starts with an explicit backend and hierarchy (tests point these at a directory tree with the
    /// kernel's file layout); `sys_block` is where device counters are read.
    pub fn start_in(
        config: Config,
        backend: Backend,
        hierarchy: Hierarchy,
        state_dir: &Path,
        sys_block: &Path,
    ) -> Result<(Agent, Option<Reverted>)> {
        let mut roots = vec![hierarchy.root.clone()];
        roots.extend(MemoryGuard::hierarchy().map(|(root, _)| root).filter(|r| *r != hierarchy.root));
        let (recorder, recovered) = Recorder::open(state_dir, roots)?;
        let devices = config.devices.iter().map(|d| DeviceLoop::new(d.clone(), config.period)).collect();
        let mut agent = Agent {
            config,
            backend,
            hierarchy,
            recorder,
            devices,
            applied: BTreeMap::new(),
            state_dir: state_dir.to_path_buf(),
            sys_block: sys_block.to_path_buf(),
            start: Instant::now(),
            periods: 0,
            discovered: false,
            memory: None,
        };
        let started = MemoryGuard::start(&agent.config, &mut agent.recorder).map(|m| agent.memory = m);
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

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The hierarchy in use.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    fn apply_initial(&mut self) -> Result<()> {
        for d in &self.config.devices {
            let dev = d.device.dev;
            match self.backend {
                Backend::Kernel => {
                    let model = ModelConfig { device: Some(dev), ctrl: Ctrl::User, params: d.model };
                    self.hierarchy.set_root_line(&mut self.recorder, "io.cost.model", dev, &model.to_string())?;
                    let qos = match d.qos {
                        Some(params) => QosConfig { device: Some(dev), ctrl: Ctrl::User, params }.to_string(),
                        None => format!("{dev} enable=1 ctrl=auto"),
                    };
                    self.hierarchy.set_root_line(&mut self.recorder, "io.cost.qos", dev, &qos)?;
                }
                Backend::Userspace => self.hierarchy.activate_accounting(&mut self.recorder, dev)?,
            }
        }
        self.discover()?;
        self.write_status()
    }

    /// Matches the group patterns again: new cgroups are tracked (kernel backend: their weight and
    /// caps written now), vanished ones dropped.
    pub fn discover(&mut self) -> Result<()> {
        let found = self.matches();
        let now = self.now();
        for d in &mut self.devices {
            d.mark_all_absent();
        }
        let applied = self.applied.len();
        self.applied.retain(|rel, _| found.contains_key(rel));
        let mut gone = applied - self.applied.len();
        for (rel, &rule) in &found {
            let g = &self.config.groups[rule];
            match self.backend {
                Backend::Userspace => {
                    for d in &mut self.devices {
                        d.track(now, rel, g.weight, &g.limits, self.discovered)?;
                    }
                }
                Backend::Kernel => {
                    if self.applied.get(rel) == Some(&rule) {
                        continue;
                    }
                    for d in &self.config.devices {
                        let dev = d.device.dev;
                        let caps = fixed_caps(d, g, self.config.period);
                        self.hierarchy.set_weight(&mut self.recorder, rel, dev, g.weight)?;
                        self.hierarchy.set_throttle(&mut self.recorder, rel, dev, &caps)?;
                    }
                    self.applied.insert(rel.clone(), rule);
                }
            }
        }
        for d in &mut self.devices {
            gone += d.drop_absent(now)?;
        }
        self.discovered = true;
        if let Some(m) = self.memory.as_mut() {
            m.discover(&self.config, &mut self.recorder)?;
        }
        // (The memory guard does not say which of its groups went: looked at every time.)
        if gone > 0 || self.memory.is_some() {
            self.recorder.forget_vanished()?;
        }
        Ok(())
    }

    /// Every cgroup the rules match now, with the first rule matching it; nested matches dropped.
    fn matches(&self) -> BTreeMap<String, usize> {
        let mut found: BTreeMap<String, usize> = BTreeMap::new();
        for (i, g) in self.config.groups.iter().enumerate() {
            for rel in find_cgroups(&self.hierarchy.root, &g.cgroup) {
                found.entry(rel).or_insert(i);
            }
        }
        let nested: Vec<String> = found
            .keys()
            .filter(|rel| {
                let p = Path::new(rel.as_str());
                p.ancestors().skip(1).any(|a| found.contains_key(a.to_string_lossy().as_ref()))
            })
            .cloned()
            .collect();
        for rel in nested {
            found.remove(&rel);
        }
        found
    }

    /// One planning period (userspace backend; the kernel backend only refreshes its status).
    pub fn period(&mut self) -> Result<()> {
        let now = self.now();
        if let Some(m) = self.memory.as_mut() {
            m.refresh();
        }
        if self.backend == Backend::Userspace {
            for d in &mut self.devices {
                d.plan(now, &self.hierarchy, &mut self.recorder, &self.sys_block)?;
            }
        }
        self.periods += 1;
        self.write_status()
    }

    /// The current status.
    pub fn status(&self) -> Status {
        let now = self.now();
        let devices = match self.backend {
            Backend::Userspace => self.devices.iter().map(|d| d.status(now)).collect(),
            Backend::Kernel => self
                .config
                .devices
                .iter()
                .map(|d| DeviceLine {
                    device: d.device.name.clone(),
                    dev: d.device.dev.to_string(),
                    vrate_pct: 0.0,
                    busy_level: 0,
                    lat_us: [0.0; 2],
                    target_us: d.qos.map_or([0, 0], |q| [q.rlat_us, q.wlat_us]),
                    groups: self
                        .applied
                        .iter()
                        .map(|(rel, &rule)| {
                            let g = &self.config.groups[rule];
                            let caps = fixed_caps(d, g, self.config.period);
                            GroupLine {
                                cgroup: rel.clone(),
                                weight: g.weight,
                                hweight_active: 0.0,
                                hweight_inuse: 0.0,
                                usage_share: 0.0,
                                limits: caps.as_array(),
                                state: "kernel".into(),
                            }
                        })
                        .collect(),
                })
                .collect(),
        };
        Status {
            pid: std::process::id(),
            backend: self.backend.name().to_string(),
            root: self.hierarchy.root.clone(),
            periods: self.periods,
            updated_unix: SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            devices,
            memory: self.memory.as_ref().map(|m| m.lines().to_vec()).unwrap_or_default(),
        }
    }

    fn write_status(&self) -> Result<()> {
        self.status().write(&self.state_dir)
    }

    /// Runs until `stop` is set, then reverts everything it wrote.
    pub fn run(mut self, stop: &AtomicBool) -> Result<Reverted> {
        let mut next_discovery = Instant::now() + DISCOVERY_EVERY;
        let mut next_period = Instant::now() + self.config.period;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let step = if now >= next_discovery {
                next_discovery += DISCOVERY_EVERY;
                self.discover()
            } else if now >= next_period {
                next_period += self.config.period;
                if next_period < now {
                    next_period = now + self.config.period; // fell behind (a stopped process): resync
                }
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
        crate::status::Status::remove(&self.state_dir);
        if let Some(m) = self.memory.take() {
            m.stop()?;
        }
        Ok(self.recorder.revert()?)
    }
}

/// Kernel backend: the blk-throttle caps of rule `g` on device `d` — its fixed limits only (the
/// kernel's iocost does the sharing).
fn fixed_caps(d: &DeviceConfig, g: &GroupConfig, period: Duration) -> Throttle {
    throttle_for(None, &Default::default(), &LinearModel::new(d.model), period, &g.limits)
}

/// Reverts what a killed agent recorded in `state_dir` (`ioshare agent revert`); `None` if there
/// was nothing to revert. Only files under this host's blkio and memory (v1) and unified (v2) roots
/// are touched.
pub fn revert(state_dir: &Path) -> Result<Option<Reverted>> {
    let caps = ioshare_host::Capabilities::probe();
    let memory = caps.memory_v1().cloned();
    let roots: Vec<PathBuf> = caps.blkio_v1.into_iter().chain(caps.cgroup_v2).chain(memory).collect();
    let reverted = ioshare_host::revert_state_dir(state_dir, &roots)?;
    crate::status::Status::remove(state_dir);
    Ok(reverted)
}

/// A flag set by SIGTERM or SIGINT (installed once), for [`Agent::run`].
pub fn stop_on_signals() -> &'static AtomicBool {
    static STOP: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the sigaction
    // struct is zero-initialised then filled, as sigaction(2) requires.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGINT] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    &STOP
}
