//! Typed errors of the core: every message names what is wrong and how to fix it.

/// An error from configuring a controller or parsing one of its text formats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A weight outside the kernel's range.
    #[error("invalid weight {weight} for group '{path}': weights must be between 1 and 10000")]
    InvalidWeight {
        /// Group path.
        path: String,
        /// Offending weight.
        weight: u32,
    },
    /// A path that is empty or has empty components.
    #[error("invalid group path '{0}': use names separated by '/', like 'workload/web'")]
    InvalidPath(String),
    /// A group that does not exist.
    #[error("unknown group '{0}': configure it first")]
    UnknownGroup(String),
    /// A group that cannot be removed yet.
    #[error("cannot remove group '{path}': {reason}")]
    GroupBusy {
        /// Group path.
        path: String,
        /// Why, and what to do first.
        reason: String,
    },
    /// A malformed kernel-format line (`io.cost.model`, `io.cost.qos`) or limit syntax; the input is
    /// quoted [`printable`].
    #[error("invalid {format} '{}': {}", printable(.input), printable(.reason))]
    Parse {
        /// Which format (`io.cost.model`, `io.cost.qos`).
        format: &'static str,
        /// The offending token or line.
        input: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A setting the controller cannot honour.
    #[error("invalid setting: {0}")]
    Invalid(String),
}

/// `text` with its control characters escaped (`\n`, `\u{0}`, `\u{1b}`): quoted in a message, outside
/// text keeps the message one line that a terminal prints as it is.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Result with the core's error.
pub type Result<T> = std::result::Result<T, Error>;
