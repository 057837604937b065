//! Checking a device's parameters: the error naming the offending key.

/// A table that does not describe a device: which key, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {msg}")]
pub struct KeyError {
    /// The key (`.` when the problem is the table itself, e.g. a missing key).
    pub key: String,
    /// What is wrong.
    pub msg: String,
}

/// Error unless `value` > 0.
pub(crate) fn positive(key: &str, value: f64) -> Result<(), KeyError> {
    if value > 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(KeyError { key: key.into(), msg: format!("must be a positive number, got {value}") })
    }
}
