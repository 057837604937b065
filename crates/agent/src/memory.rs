//! Memory isolation in the agent: the groups whose rule carries `memory = { ... }` are put under an
//! [`ioshare_memory::Guard`] on the cgroup v1 `memory` hierarchy (priority OOM, early reclaim).
//!
//! The guard covers a fixed set of cgroups, so when discovery finds the matched set changed (a
//! container started or went away) the guard is stopped — restoring what it changed — and started
//! again over the new set. Priorities apply to every matched cgroup, nested ones included: priority
//! OOM walks the tree. Between periods the agent waits in [`MemoryGuard::poll`] (the guard's
//! eventfds) instead of sleeping, so an OOM is handled within milliseconds. The guard's own
//! watchdog restores its changes if the agent dies; cgroup v2 hosts are not covered yet (the
//! agent says so at start).

use std::path::PathBuf;
use std::time::Duration;

use ioshare_host::{find_cgroups, Memcg};
use ioshare_memory::{Action, Guard, GuardedGroup, MemorySettings};
use serde::{Deserialize, Serialize};

use crate::config::Config;
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
}

/// The agent's memory guard and what it has done.
#[derive(Debug)]
pub struct MemoryGuard {
    root: PathBuf,
    dry_run: bool,
    groups: Vec<(String, MemorySettings)>,
    guard: Option<Guard>,
    lines: Vec<MemoryLine>,
}

impl MemoryGuard {
    /// A guard over the config's memory rules, or `None` when no rule has one. Fails when rules have
    /// memory settings but the host has no cgroup v1 memory hierarchy.
    pub fn start(config: &Config) -> Result<Option<MemoryGuard>> {
        if !config.groups.iter().any(|g| g.memory.is_some()) {
            return Ok(None);
        }
        let caps = ioshare_host::Capabilities::probe();
        let root = caps.v1_mounts.iter().find(|(c, _)| c == "memory").map(|(_, p)| p.clone()).ok_or_else(|| {
            Error::Memory("memory settings need the cgroup v1 memory hierarchy, which this host lacks (cgroup v2 memory is not supported by the agent yet)".into())
        })?;
        let mut g =
            MemoryGuard { root, dry_run: config.memory_dry_run, groups: Vec::new(), guard: None, lines: Vec::new() };
        g.discover(config)?;
        Ok(Some(g))
    }

    /// Matches the memory rules again; restarts the guard when the set of cgroups changed.
    pub fn discover(&mut self, config: &Config) -> Result<()> {
        let mut found: Vec<(String, MemorySettings)> = Vec::new();
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
        let mut guarded = Vec::new();
        for (rel, settings) in &found {
            // A cgroup that vanished between matching and opening is skipped, not an error.
            if let Ok(memcg) = Memcg::at(&self.root.join(rel)) {
                guarded.push(GuardedGroup { memcg, settings: *settings });
            }
        }
        self.guard = Some(Guard::start(guarded, self.dry_run).map_err(|e| Error::Memory(e.to_string()))?);
        self.lines = found
            .iter()
            .map(|(rel, s)| MemoryLine {
                cgroup: rel.clone(),
                priority: s.priority,
                usage: 0,
                limit: None,
                watermarks: None,
                last_reclaim: None,
                oom_kills: 0,
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
            eprintln!("ioshare agent: memory: {}", describe(&a));
            let (group, reclaim) = match &a {
                Action::Killed { group, .. } => (group, None),
                Action::Reclaimed { group, from, to, took } => {
                    (group, Some((from.saturating_sub(*to), took.as_secs_f64() * 1e3)))
                }
            };
            let rel = group.strip_prefix(&self.root).unwrap_or(group).to_string_lossy().into_owned();
            if let Some(line) = self.lines.iter_mut().find(|l| l.cgroup == rel) {
                match reclaim {
                    Some(r) => line.last_reclaim = Some(r),
                    None => line.oom_kills += u64::from(!self.dry_run),
                }
            }
        }
        Ok(())
    }

    /// Reads usage and limits for the status.
    pub fn refresh(&mut self) {
        for (line, (_, settings)) in self.lines.iter_mut().zip(&self.groups) {
            let Ok(m) = Memcg::at(&self.root.join(&line.cgroup)) else { continue };
            line.usage = m.usage().unwrap_or(0);
            line.limit = m.limit().ok().filter(|&l| l < 1 << 62);
            line.watermarks = line.limit.and_then(|l| settings.watermarks(l)).map(|w| (w.high, w.low));
        }
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
        Action::Reclaimed { group, from, to, took } => {
            format!("reclaimed {} MiB in {} ({took:?})", from.saturating_sub(*to) >> 20, group.display())
        }
    }
}
