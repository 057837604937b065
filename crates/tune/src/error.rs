//! What can go wrong in a tune: bad input (named, with the fix), a result file that does not fit,
//! the engine's errors, the controller's (`--kernel`), an interrupt.

use std::path::PathBuf;

/// A tune error; every message is one line naming what is wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Options that cannot be swept (a vrate grid, weights, a latency target).
    #[error("{0}")]
    InvalidOptions(String),
    /// A result or checkpoint file that cannot be used.
    #[error("'{path}': {reason}")]
    BadResult {
        /// The file.
        path: PathBuf,
        /// What is wrong with it and what to do.
        reason: String,
    },
    /// The latency-sensitive tenant misses its target even alone and uncontrolled.
    #[error("{0}")]
    Unreachable(String),
    /// The engine failed (target, IO, profile).
    #[error(transparent)]
    Engine(#[from] ioshare_engine::Error),
    /// The IOCost in control could not be set up, or a run under it failed (`--kernel`: cgroup v2,
    /// the kernel's iocost, its worker processes).
    #[error("{0}")]
    Control(String),
    /// Ctrl-C or SIGTERM: the checkpoint holds the points finished so far.
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// Reading or writing a file.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A tune result.
pub type Result<T> = std::result::Result<T, Error>;
