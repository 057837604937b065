//! Errors of the simulator: each names what is wrong and, for files, where.

use std::path::PathBuf;

/// An error building or running a scenario.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A parameter that cannot work (named in the message).
    #[error("{0}")]
    Invalid(String),
    /// The controller rejected a setting.
    #[error(transparent)]
    Core(#[from] ioshare_core::Error),
    /// A scenario file that is not valid; the message names the line and key.
    #[error("{}:{line}: {msg}", file.display())]
    File {
        /// The file.
        file: PathBuf,
        /// Line, 1-based.
        line: usize,
        /// What is wrong, naming the key.
        msg: String,
    },
    /// A scenario file that cannot be read.
    #[error("cannot read scenario file {}: {reason}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why (kept in the message, not as a source, so it is printed once).
        reason: std::io::Error,
    },
    /// A built-in scenario name that does not exist.
    #[error("unknown scenario '{0}': run `ioshare sim --list` for the built-in ones, or give a .toml file")]
    UnknownScenario(String),
}
