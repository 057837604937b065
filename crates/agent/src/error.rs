//! Errors of the agent: one line each, naming what is wrong and how to fix it.

use std::path::PathBuf;

use ioshare_core::error::printable;

/// An error from loading the configuration, choosing a backend, or applying settings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file cannot be read.
    #[error("cannot read {}: {reason}", file.display())]
    ReadConfig {
        /// The file.
        file: PathBuf,
        /// The OS's answer.
        reason: std::io::Error,
    },
    /// A bad key or value in the configuration: `FILE:LINE: key: what is wrong`, key and message
    /// [`printable`] (they may quote the file).
    #[error("{}:{line}: {}: {}", file.display(), printable(.key), printable(.msg))]
    Config {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// The key (or table) at fault.
        key: String,
        /// What is wrong and how to fix it.
        msg: String,
    },
    /// The backend asked for cannot run on this host.
    #[error("backend {backend} is not available here: {reason}")]
    BackendKind {
        /// The backend.
        backend: &'static str,
        /// Why, and what would make it available.
        reason: String,
    },
    /// The memory guard could not start or act.
    #[error("memory guard: {0}")]
    Memory(String),
    /// The pod source cannot start or work (one line from ioshare-kube, `kubernetes: ...`).
    #[error("{0}")]
    Kubernetes(String),
    /// The metrics endpoint could not start.
    #[error("metrics endpoint: {0}")]
    Metrics(ioshare_observe::Error),
    /// The log cannot be set up (a bad `--log-level` or `RUST_LOG`).
    #[error("{0}")]
    Log(String),
    /// A reloaded configuration could be read but not applied.
    #[error(
        "reload not applied: {error}; {}",
        if *recovered { "the previous configuration is in force" } else { "nor could the previous one be put back" }
    )]
    Reload {
        /// Why it could not be applied.
        error: String,
        /// Whether the previous configuration is in force again.
        recovered: bool,
    },
    /// No agent runs with this state directory (`ioshare agent reload`).
    #[error("no agent running with state in {}: {reason}", state_dir.display())]
    NotRunning {
        /// The state directory asked about.
        state_dir: PathBuf,
        /// What says so.
        reason: String,
    },
    /// A host operation failed.
    #[error(transparent)]
    Host(#[from] ioshare_host::Error),
    /// Another running agent controls a cgroup this one's rules match.
    #[error(
        "{} is already controlled by another ioshare agent (pid {pid}, state directory {}): stop it first, \
         or change the rules so that no cgroup is matched by both",
        cgroup.display(),
        state_dir.display()
    )]
    AlreadyControlled {
        /// The cgroup (or the pattern both agents have).
        cgroup: PathBuf,
        /// The other agent's pid.
        pid: u32,
        /// Its state directory.
        state_dir: PathBuf,
    },
    /// The registry of running agents cannot be used.
    #[error("cannot register with the other running agents: {0} (each agent registers the cgroups it controls there)")]
    Registry(String),
    /// The status file cannot be read.
    #[error("no agent status at {}: {reason} (is `ioshare agent run` running with this --state-dir?)", path.display())]
    Status {
        /// The status file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The period trace (`--trace`) cannot be written or read.
    #[error("trace {}: {reason}", path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// Result with the agent's error.
pub type Result<T> = std::result::Result<T, Error>;
