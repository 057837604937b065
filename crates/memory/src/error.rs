//! Errors of the memory guard: one line each, naming what is wrong and how to fix it.

use ioshare_core::error::printable;

/// An error from validating settings or acting on a memory cgroup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A memory setting out of its range.
    #[error("memory.{key} = {value} is out of range: use {range}")]
    Setting {
        /// The setting's name.
        key: &'static str,
        /// The value given.
        value: u64,
        /// The allowed range.
        range: &'static str,
    },
    /// A size that is not a byte count (quoted [`printable`]).
    #[error(
        "memory.limit = '{}' is not a size: use bytes or a number with K, M, G or T (powers of 1024), e.g. \"2G\"",
        printable(.0)
    )]
    Size(String),
    /// Early reclaim needs a limit to compute its watermarks from.
    #[error("{0}: wmark_ratio needs a memory limit (set memory.limit, or a limit on the cgroup itself)")]
    NoLimit(String),
    /// A cgroup file could not be read or written.
    #[error(transparent)]
    Host(#[from] ioshare_host::Error),
    /// The watchdog process could not be started.
    #[error("cannot start the memory guard's watchdog (sh): {source}")]
    Watchdog {
        /// The error.
        source: std::io::Error,
    },
    /// A process could not be killed.
    #[error("cannot kill pid {pid}: {source}")]
    Kill {
        /// The process.
        pid: u32,
        /// The kernel's answer.
        source: std::io::Error,
    },
}

/// Result with the memory guard's error.
pub type Result<T> = std::result::Result<T, Error>;
