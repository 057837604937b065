//! Memory isolation in the agent: the groups whose rule carries `memory = { ... }` are put under an
//! [`ioshare_memory::Guard`] (priority OOM, early reclaim) on the host's memory hierarchy: cgroup
//! v1 `memory` where it is bound to v1 (this host), cgroup v2 where v2 has the `memory` controller.
//!
//! The guard covers a fixed set of cgroups, so when discovery finds the matched set changed (a
//! container started or went away) the guard is stopped — restoring what it changed — and started
//! again over the new set. Priorities apply to every matched cgroup, nested ones included: priority
//! OOM walks the tree. Between periods the agent waits in [`MemoryGuard::poll`] (the guard's
//! eventfds, PSI triggers) instead of sleeping, so an OOM is handled within milliseconds. Every file
//! the guard changes is journaled in the agent's [`Recorder`] (so `ioshare agent revert` restores it
//! after a `kill -9`), and the guard's own watchdog restores them at once when the agent dies.

use std::path::PathBuf;
use std::time::Duration;

use ioshare_host::memcg::{v1, v2};
use ioshare_host::{find_cgroups, Capabilities, Recorder};
use ioshare_memory::{Action, Guard, MemorySettings};
use serde::{Deserialize, Serialize};

use crate::desired::config::Config;
use crate::error::{Error, Result};

/// One guarded cgroup in the status file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryLine {
    /// Cgroup path relative to the memory root.
    pub cgroup: String,
    /// Priority 0..=12.
    pub priority: u8,
    /// Usage, bytes.
    pub usage: u64,
    /// Limit, bytes (`None`: no limit).
    pub limit: Option<u64>,
    /// Early reclaim watermarks (high, low), bytes.
    pub watermarks: Option<(u64, u64)>,
    /// Last background reclaim: bytes reclaimed and milliseconds taken.
    pub last_reclaim: Option<(u64, f64)>,
    /// Processes the agent killed in an OOM of this cgroup.
    pub oom_kills: u64,
    /// Processes the kernel's own OOM killer killed in it while the agent watched (cgroup v2).
    #[serde(default)]
    pub kernel_kills: u64,
    /// PSI memory pressure, `some` and `full` avg10 percent (cgroup v2; `None` on v1).
    #[serde(default)]
    pub pressure: Option<(f64, f64)>,
    /// Background reclaim rounds since the agent started guarding it.
    #[serde(default)]
    pub reclaims: u64,
    /// Seconds those rounds took.
    #[serde(default)]
    pub reclaim_seconds: f64,
}

/// The agent's memory guard and what it has done.
#[derive(Debug)]
pub struct MemoryGuard {
    root: PathBuf,
    /// The hierarchy is cgroup v2.
    v2: bool,
    dry_run: bool,
    groups: Vec<(String, MemorySettings)>,
    guard: Option<Guard>,
    lines: Vec<MemoryLine>,
}

impl MemoryGuard {
    /// The memory hierarchy's root on this host and whether it is cgroup v2 (`None`: no memory
    /// controller anywhere). Needed before the recorder opens: writes are allowed below it.
    pub fn hierarchy() -> Option<(PathBuf, bool)> {
        let caps = Capabilities::probe();
        match caps.memory_v1() {
            Some(root) => Some((root.clone(), false)),
            None if caps.memory_v2() => caps.cgroup_v2.map(|root| (root, true)),
            None => None,
        }
    }

    /// [`MemoryGuard::hierarchy`], or the error of memory settings on a host without one.
    pub fn needed_hierarchy() -> Result<(PathBuf, bool)> {
        Self::hierarchy().ok_or_else(|| {
            Error::Memory(
                "memory settings need a memory controller (cgroup v1 memory, or cgroup v2 with memory), which this host lacks"
                    .into(),
            )
        })
    }

    /// A guard over the config's memory rules and the `exact` cgroups (relative paths: pods' cgroups,
    /// guarded where they exist), or `None` when none asks for it; every change it makes is journaled
    /// in `recorder`. Fails when memory settings are asked for but the host has no memory controller.
    pub fn start(
        config: &Config,
        exact: &[(String, MemorySettings)],
        recorder: &mut Recorder,
    ) -> Result<Option<MemoryGuard>> {
        if !config.groups.iter().any(|g| g.memory.is_some()) && exact.is_empty() {
            return Ok(None);
        }
        let (root, v2) = Self::needed_hierarchy()?;
        let mut g = MemoryGuard {
            root,
            v2,
            dry_run: config.memory_dry_run,
            groups: Vec::new(),
            guard: None,
            lines: Vec::new(),
        };
        g.discover(config, exact, recorder)?;
        Ok(Some(g))
    }

    /// Matches the memory rules again, takes the `exact` cgroups that exist (before the rules'
    /// matches: a pod's settings win its cgroup); restarts the guard when the set of cgroups changed.
    pub fn discover(
        &mut self,
        config: &Config,
        exact: &[(String, MemorySettings)],
        recorder: &mut Recorder,
    ) -> Result<()> {
        let mut found: Vec<(String, MemorySettings)> =
            exact.iter().filter(|(rel, _)| self.root.join(rel).is_dir()).cloned().collect();
        for rule in &config.groups {
            let Some(settings) = rule.memory else { continue };
            for rel in find_cgroups(&self.root, &rule.cgroup) {
                if !found.iter().any(|(r, _)| *r == rel) {
                    found.push((rel, settings));
                }
            }
        }
        if found == self.groups && (self.guard.is_some() || found.is_empty()) {
            return Ok(());
        }
        if let Some(mut old) = self.guard.take() {
            old.restore().map_err(|e| Error::Memory(e.to_string()))?;
        }
        // A cgroup that vanished between matching and opening is skipped, not an error.
        let guarded: Vec<(PathBuf, MemorySettings)> = found
            .iter()
            .map(|(rel, s)| (self.root.join(rel), *s))
            .filter(|(dir, _)| if self.v2 { v2::Memcg::at(dir).is_ok() } else { v1::Memcg::at(dir).is_ok() })
            .collect();
        let guard = Guard::start(&guarded, self.v2, self.dry_run).map_err(|e| Error::Memory(e.to_string()))?;
        for c in guard.changes() {
            recorder.note(&c.file, &c.previous, &c.new)?;
            tracing::info!(file = %c.file.display(), value = %c.new, previous = %c.previous, "memory setting written");
        }
        self.guard = Some(guard);
        // A cgroup still guarded keeps its counts (they only ever grow, as Prometheus counters must).
        let old = std::mem::take(&mut self.lines);
        self.lines = found
            .iter()
            .map(|(rel, s)| {
                let before = old.iter().find(|l| l.cgroup == *rel);
                MemoryLine {
                    cgroup: rel.clone(),
                    priority: s.priority,
                    usage: 0,
                    limit: None,
                    watermarks: None,
                    last_reclaim: before.and_then(|b| b.last_reclaim),
                    oom_kills: before.map_or(0, |b| b.oom_kills),
                    kernel_kills: before.map_or(0, |b| b.kernel_kills),
                    pressure: None,
                    reclaims: before.map_or(0, |b| b.reclaims),
                    reclaim_seconds: before.map_or(0.0, |b| b.reclaim_seconds),
                }
            })
            .collect();
        self.groups = found;
        self.refresh();
        Ok(())
    }

    /// Waits up to `timeout` for the guard's notifications and handles them; logs what it did.
    pub fn poll(&mut self, timeout: Duration) -> Result<()> {
        let Some(guard) = self.guard.as_mut() else {
            std::thread::sleep(timeout);
            return Ok(());
        };
        let actions = guard.poll(timeout).map_err(|e| Error::Memory(e.to_string()))?;
        for a in actions {
            match &a {
                Action::Reclaimed { .. } | Action::VictimGone { .. } => tracing::info!("memory: {}", describe(&a)),
                Action::Killed { .. } | Action::KernelKilled { .. } => tracing::warn!("memory: {}", describe(&a)),
            }
            let group = a.group();
            let rel = group.strip_prefix(&self.root).unwrap_or(group).to_string_lossy().into_owned();
            if let Some(line) = self.lines.iter_mut().find(|l| l.cgroup == rel) {
                match &a {
                    Action::Killed { .. } => line.oom_kills += u64::from(!self.dry_run),
                    Action::VictimGone { .. } => {}
                    Action::Reclaimed { from, to, took, .. } => {
                        let freed = from.saturating_sub(*to);
                        line.last_reclaim = Some((freed, took.as_secs_f64() * 1e3));
                        line.reclaims += 1;
                        line.reclaim_seconds += took.as_secs_f64();
                    }
                    Action::KernelKilled { count, .. } => line.kernel_kills += count,
                }
            }
        }
        Ok(())
    }

    /// Writes back the values the guard set that someone else overwrote, counting them in
    /// `overwrites` ([`crate::cgroups::reapply`]); the recorder's journal already holds the value to restore.
    pub fn reassert(&mut self, overwrites: &mut crate::cgroups::reapply::Overwrites) -> Result<()> {
        let Some(guard) = self.guard.as_mut() else { return Ok(()) };
        for file in guard.reassert().map_err(|e| Error::Memory(e.to_string()))? {
            overwrites.saw(&file, ioshare_host::Written::Restored);
        }
        Ok(())
    }

    /// Reads usage and limits for the status.
    pub fn refresh(&mut self) {
        for (line, (_, settings)) in self.lines.iter_mut().zip(&self.groups) {
            let dir = self.root.join(&line.cgroup);
            if self.v2 {
                let Ok(m) = v2::Memcg::at(&dir) else { continue };
                line.usage = m.current().unwrap_or(0);
                line.limit = m.max().ok().flatten();
                line.pressure = m.pressure().ok().map(|p| (p.some.avg10, p.full.avg10));
            } else {
                let Ok(m) = v1::Memcg::at(&dir) else { continue };
                line.usage = m.usage().unwrap_or(0);
                line.limit = m.limit().ok().filter(|&l| l < 1 << 62);
            }
            line.watermarks = line.limit.and_then(|l| settings.watermarks(l)).map(|w| (w.high, w.low));
        }
    }

    /// Whether the guard in force holds `file` (wrote it and will restore it).
    pub fn holds(&self, file: &std::path::Path) -> bool {
        self.guard.as_ref().is_some_and(|g| g.changes().iter().any(|c| c.file == file))
    }

    /// The status lines.
    pub fn lines(&self) -> &[MemoryLine] {
        &self.lines
    }

    /// Stops the guard, restoring everything it changed.
    pub fn stop(mut self) -> Result<()> {
        match self.guard.take() {
            Some(mut g) => g.restore().map_err(|e| Error::Memory(e.to_string())),
            None => Ok(()),
        }
    }
}

fn describe(a: &Action) -> String {
    match a {
        Action::Killed { group, victim, pid, rss, dry_run } => format!(
            "OOM in {}: {} pid {pid} ({} MiB) in {}",
            group.display(),
            if *dry_run { "would kill" } else { "killed" },
            rss >> 20,
            victim.display()
        ),
        Action::VictimGone { group, victim, pid } => format!(
            "OOM in {}: the victim in {}{} went before the kill; nothing killed",
            group.display(),
            victim.display(),
            pid.map_or(String::new(), |p| format!(" (pid {p})"))
        ),
        Action::Reclaimed { group, from, to, took } => {
            format!("reclaimed {} MiB in {} ({took:?})", from.saturating_sub(*to) >> 20, group.display())
        }
        Action::KernelKilled { group, count } => {
            format!("the kernel's OOM killer killed {count} process(es) in {}", group.display())
        }
    }
}
