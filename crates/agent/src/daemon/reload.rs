//! Reload without restart: SIGHUP (`ioshare agent reload` sends it) makes the running agent read its
//! configuration again and apply it as a difference.
//!
//! - The file is read and validated whole first ([`Config::load_cached`](crate::Config::load_cached)
//!   in the CLI). A bad one changes nothing: the running configuration stays in force, and the error —
//!   one line, `FILE:LINE: key: what is wrong` — is logged and answered to `ioshare agent reload`.
//! - A good one replaces the configuration and the agent's state is brought to it
//!   ([`Agent::reload`]): its rules are registered instead of the old ones (refused if another running
//!   agent claims a cgroup they match, [`crate::daemon::claim`]); a device whose model or QoS changed gets a new controller (its planner
//!   starts afresh), a device no longer listed loses its own; a changed period applies from the next
//!   one; the rules are matched again as at a discovery, every matched cgroup's weight and caps set
//!   (kernel backend: written now; userspace: planned from the next period); cgroups newly matched are
//!   charged for IO from now on; the memory guard is started, restarted with the new settings, or
//!   stopped.
//! - Then every setting the agent recorded that the new state no longer wants — of a cgroup no rule
//!   matches now, of a device no longer listed, a memory file the guard no longer holds — is restored
//!   to its value from before the agent (the recorder's journal keeps it:
//!   [`Recorder::revert_where`](ioshare_host::Recorder::revert_where)), where it still holds what
//!   the agent wrote, and is no longer recorded. Settings the new configuration keeps are not rewritten: the recorder writes only
//!   values that differ.
//! - A write that fails halfway brings the previous configuration back the same way; if even that
//!   fails the agent stops, reverting everything (the run loop's answer to any failed write).
//! - The answer for `ioshare agent reload`: [`Outcome`] in the state directory, counted per agent
//!   pid, so [`request`] can wait for the answer to its own signal.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use ioshare_host::{Change, Entry, Reverted};
use serde::{Deserialize, Serialize};

use super::Agent;
use crate::desired::config::Config;
use crate::desired::pods::Pods;
use crate::error::{Error, Result};
use crate::memory::MemoryGuard;
use crate::report::status::Status;

/// Name of the outcome file in the state directory.
pub const OUTCOME_FILE: &str = "reload.json";

/// How long [`request`] waits for the agent's answer by default (a reload takes milliseconds; the
/// agent notices the signal within its loop's 20 ms tick).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// A status older than this says the agent is not running: it rewrites the status every period,
/// and periods are at most 10 s.
pub const STATUS_STALE_AFTER: Duration = Duration::from_secs(30);

/// What a reload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Rules new in the file.
    pub rules_added: usize,
    /// Rules whose weight, limits or memory settings changed.
    pub rules_changed: usize,
    /// Rules no longer in the file.
    pub rules_removed: usize,
    /// Devices added, removed, or with a new model or QoS.
    pub devices_changed: usize,
    /// Whether the planning period changed.
    pub period_changed: bool,
    /// What restoring the settings no longer wanted did.
    pub restored: Reverted,
}

impl fmt::Display for Reloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rule(s) added, {} changed, {} removed; {} device(s) changed{}; {} setting(s) restored",
            self.rules_added,
            self.rules_changed,
            self.rules_removed,
            self.devices_changed,
            if self.period_changed { "; period changed" } else { "" },
            self.restored.restored
        )
    }
}

/// The agent's answer to a reload, for `ioshare agent reload`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The agent's pid.
    pub pid: u32,
    /// Reloads this agent was asked for, this one included.
    pub reloads: u64,
    /// Whether the new configuration is in force (else the previous one still is).
    pub applied: bool,
    /// What changed, or the one-line error (`FILE:LINE: key: what`).
    pub message: String,
}

impl Outcome {
    /// Writes the outcome into `dir` atomically (temporary name, then rename).
    fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string(self).expect("outcome serialises");
        ioshare_host::replace_file(&dir.join(OUTCOME_FILE), text.as_bytes())
    }

    /// The last outcome written in `dir`, if any.
    pub fn read(dir: &Path) -> Option<Outcome> {
        serde_json::from_str(&std::fs::read_to_string(dir.join(OUTCOME_FILE)).ok()?).ok()
    }

    /// Removes the outcome file from `dir` (the agent stopped).
    pub fn remove(dir: &Path) {
        let _ = std::fs::remove_file(dir.join(OUTCOME_FILE));
    }
}

impl Agent {
    /// Applies `config` as a difference from the running one (see the module comment); the memory
    /// guard's dry-run setting (a command-line flag, not in the file) is kept. An error means the
    /// previous configuration is in force again — unless [`Error::Reload`] says it could not be
    /// restored either.
    pub fn reload(&mut self, mut config: Config) -> Result<Reloaded> {
        config.memory_dry_run = self.config.memory_dry_run;
        crate::desired::rules::warn_overlaps(&config);
        let old = std::mem::replace(&mut self.config, config);
        match self.converge(&old) {
            Ok(done) => Ok(done),
            Err(error) => {
                let new = std::mem::replace(&mut self.config, old);
                let recovered = self.converge(&new).is_ok();
                Err(Error::Reload { error: error.to_string(), recovered })
            }
        }
    }

    /// Reads the configuration with `load` and applies it; logs and answers the outcome. Fails only
    /// when the agent cannot go on (a failed reload whose previous configuration could not be put
    /// back).
    pub(super) fn reload_from(&mut self, load: &dyn Fn() -> Result<Config>) -> Result<()> {
        self.reloads += 1;
        let outcome = match load().and_then(|config| self.reload(config)) {
            Ok(done) => {
                tracing::info!(reloads = self.reloads, "reloaded: {done}");
                Ok(done.to_string())
            }
            Err(e @ Error::Reload { recovered: false, .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(reloads = self.reloads, "reload refused, the running configuration is kept: {e}");
                Err(e.to_string())
            }
        };
        let answer = Outcome {
            pid: std::process::id(),
            reloads: self.reloads,
            applied: outcome.is_ok(),
            message: outcome.unwrap_or_else(|e| e),
        };
        if let Err(e) = answer.write(&self.state_dir) {
            tracing::warn!("cannot write the reload's outcome in {}: {e}", self.state_dir.display());
        }
        self.write_status()
    }

    /// Brings the agent's state from `old` to `self.config`; logs each rule and device that changed.
    fn converge(&mut self, old: &Config) -> Result<Reloaded> {
        // Another running agent on the cgroups the new rules match: refused before anything changes.
        self.claim.update(&self.config, &self.hierarchy)?;
        let mut done = Reloaded { period_changed: self.config.period != old.period, ..Reloaded::default() };
        if done.period_changed {
            tracing::info!(
                from_ms = old.period.as_millis() as u64,
                to_ms = self.config.period.as_millis() as u64,
                "period changed"
            );
        }
        for g in &self.config.groups {
            match old.groups.iter().find(|o| o.cgroup == g.cgroup) {
                None => {
                    tracing::info!(
                        rule = %g.cgroup,
                        weight = g.weight,
                        limits = %g.limits,
                        memory = g.memory.is_some(),
                        "rule added"
                    );
                    done.rules_added += 1;
                }
                Some(o) if o != g => {
                    tracing::info!(
                        rule = %g.cgroup,
                        weight = g.weight,
                        limits = %g.limits,
                        memory = g.memory.is_some(),
                        previous_weight = o.weight,
                        previous_limits = %o.limits,
                        "rule changed"
                    );
                    done.rules_changed += 1;
                }
                Some(_) => {}
            }
        }
        for o in old.groups.iter().filter(|o| !self.config.groups.iter().any(|g| g.cgroup == o.cgroup)) {
            tracing::info!(rule = %o.cgroup, "rule removed");
            done.rules_removed += 1;
        }

        done.devices_changed = self.set_devices()?;

        // The memory guard: stopped (restoring what it wrote) when no rule asks for it any more,
        // started when one does now; else the discovery below restarts it if its cgroups or their
        // settings changed.
        // The pod source: started again when its section changed (before the groups are matched).
        if self.config.kubernetes != old.kubernetes {
            self.pods = None; // the old source stops first
            if let Some(k) = &self.config.kubernetes {
                tracing::info!("kubernetes section changed: the pod source starts again");
                self.pods = Some(Pods::start(k, &self.hierarchy.root)?);
            }
        }
        let exact = self.memory_asks();
        let wants_memory = self.config.groups.iter().any(|g| g.memory.is_some()) || !exact.is_empty();
        match self.memory.take() {
            Some(m) if !wants_memory => m.stop()?,
            Some(m) => self.memory = Some(m),
            None if wants_memory => self.memory = MemoryGuard::start(&self.config, &exact, &mut self.recorder)?,
            None => {}
        }

        // Groups: matched again, every setting written where it differs; cgroups found now existed
        // before the reload, so they are charged from now on, not for their whole past.
        self.discovered = false;
        self.discover()?;
        self.backend.forget_absent();
        done.restored = self.release_unwanted()?;
        Ok(done)
    }

    /// Restores every recorded setting the current state does not want (see the module comment).
    pub(super) fn release_unwanted(&mut self) -> Result<Reverted> {
        let root = self.hierarchy.root.clone();
        let managed: BTreeSet<PathBuf> = self.managed.iter().map(|rel| self.hierarchy.dir(rel)).collect();
        let devices: Vec<_> = self.config.devices.iter().map(|d| d.device.dev).collect();
        let memory = self.memory.as_ref();
        let wanted = |c: &Change| match c.entry() {
            Entry::Memory => memory.is_some_and(|m| m.holds(&c.path)),
            Entry::IoWeightDefault => true,
            Entry::Throttle(dev) | Entry::IoMax(dev) | Entry::IoWeightDevice(dev) | Entry::IoCost(dev) => {
                devices.contains(&dev) && c.path.parent().is_some_and(|dir| dir == root || managed.contains(dir))
            }
        };
        for c in self.recorder.changes().iter().filter(|c| !wanted(c)) {
            tracing::info!(
                file = %c.path.display(),
                key = %c.key,
                value = %c.previous,
                "restoring what the agent found"
            );
        }
        let reverted = self.recorder.revert_where(|c| !wanted(c))?;
        for (c, now) in &reverted.changed_by_others {
            tracing::warn!(
                file = %c.path.display(),
                key = %c.key,
                now = %now,
                "left alone: changed by someone else since the agent wrote it"
            );
        }
        Ok(reverted)
    }
}

/// Asks the agent running with state in `state_dir` to reload its configuration (SIGHUP) and waits
/// up to `within` for its answer. Fails, in one line, when no agent runs there.
pub fn request(state_dir: &Path, within: Duration) -> Result<Outcome> {
    let not_running = |reason: String| Error::NotRunning { state_dir: state_dir.to_path_buf(), reason };
    let status = Status::read(state_dir)?;
    let pid = status.pid;
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(not_running(format!(
            "its status names pid {pid}, which is gone (a killed agent? `ioshare agent revert` restores what it left)"
        )));
    }
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let age = now - status.updated_unix;
    if age > STATUS_STALE_AFTER.as_secs_f64() {
        return Err(not_running(format!("pid {pid} has not updated its status for {age:.0} s (stopped or hung?)")));
    }
    let answered = |o: &Outcome| o.pid == pid;
    let before = Outcome::read(state_dir).filter(answered).map_or(0, |o| o.reloads);
    // SAFETY: kill(2) with a pid read from the agent's status; the checks above make it the live agent.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGHUP) } != 0 {
        return Err(not_running(format!("cannot signal pid {pid}: {}", std::io::Error::last_os_error())));
    }
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(o) = Outcome::read(state_dir).filter(|o| answered(o) && o.reloads > before) {
            return Ok(o);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(not_running(format!("pid {pid} was signalled but did not answer within {} s (see its log)", within.as_secs())))
}
