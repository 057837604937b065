//! The suite's errors: the engine's (targets, IO, the profiler), and the kernel peers' own.

/// An error from running the suite.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening the target, running IO, measuring the device.
    #[error(transparent)]
    Engine(#[from] ioshare_engine::Error),
    /// A kernel-peer run could not be set up or a worker failed.
    #[error("kernel peer: {0}")]
    KernelPeer(String),
}

/// Result with the suite's error.
pub type Result<T> = std::result::Result<T, Error>;
