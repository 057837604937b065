//! The status' line of a device watched for drift from its tuned curve (computed by
//! [`crate::report::drift`]), and how the table prints it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What `agent status` shows of a device whose lines came from a tune result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriftLine {
    /// Device name.
    pub device: String,
    /// The tune result and solution in force (`FILE#SOLUTION`).
    pub tuned: String,
    /// Busy periods in the window.
    pub judged: u32,
    /// Those whose read latency exceeded the tuned curve.
    pub exceeded: u32,
    /// Whether most of them did (with enough judged): the device left its tuned curve.
    pub drift: bool,
    /// The command that re-tunes the device (or why the curve cannot be read).
    pub retune: String,
}

impl fmt::Display for DriftLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seen = format!("{} of {} busy periods above the tuned latency", self.exceeded, self.judged);
        match self.drift {
            true => write!(f, "{}: DRIFT from {} ({seen}); re-tune: {}", self.device, self.tuned, self.retune),
            false => write!(f, "{}: on its tuned curve {} ({seen})", self.device, self.tuned),
        }
    }
}
