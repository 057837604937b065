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
    Backend {
        /// The backend.
        backend: &'static str,
        /// Why, and what would make it available.
        reason: String,
    },
    /// The memory guard could not start or act.
    #[error("memory guard: {0}")]
    Memory(String),
    /// A host operation failed.
    #[error(transparent)]
    Host(#[from] ioshare_host::Error),
    /// The status file cannot be read.
    #[error("no agent status at {}: {reason} (is `ioshare agent run` running with this --state-dir?)", path.display())]
    Status {
        /// The status file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// Result with the agent's error.
pub type Result<T> = std::result::Result<T, Error>;
