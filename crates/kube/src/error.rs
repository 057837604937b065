//! The errors of starting a pod source: each one line, saying what to fix.

/// Why a [`crate::PodSource`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No node name, or an invalid `[kubernetes]` value.
    #[error("kubernetes: {0}")]
    Config(String),
    /// No usable credentials (kubeconfig unreadable, not in a cluster).
    #[error("kubernetes: no credentials for the API server: {0}")]
    Credentials(String),
    /// The source's thread or runtime could not be made.
    #[error("kubernetes: cannot start the pod source: {0}")]
    Start(std::io::Error),
}
