//! Findings: what the agent did not take as asked from a pod, said so that a tenant reading
//! `kubectl describe pod` (the finding becomes a Warning Event on the pod) or an admin reading `agent
//! status` knows which annotation and which rule. One line each, no trailing period.

use std::fmt;

use serde::Serialize;

/// Why a value was not taken as written; the Event's `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Reason {
    /// A value that does not parse or is outside the kernel's range: the default was used.
    InvalidAnnotation,
    /// A key under ioshare's domain that means nothing: ignored.
    UnknownAnnotation,
    /// A valid value outside the admin's policy for the pod's namespace: clamped.
    OutOfPolicy,
    /// A `blockio.resources.beta.kubernetes.io` class the agent's config does not define: ignored.
    UnknownBlockioClass,
    /// A per-container key for a container the pod does not have: ignored.
    UnknownContainer,
    /// The pod's UID (or static-pod hash) or a container id cannot name a cgroup: not controlled.
    InvalidCgroupName,
}

impl Reason {
    /// The Event reason (PascalCase).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidAnnotation => "InvalidAnnotation",
            Reason::UnknownAnnotation => "UnknownAnnotation",
            Reason::OutOfPolicy => "OutOfPolicy",
            Reason::UnknownBlockioClass => "UnknownBlockioClass",
            Reason::UnknownContainer => "UnknownContainer",
            Reason::InvalidCgroupName => "InvalidCgroupName",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing not taken as asked.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Finding {
    /// Why.
    pub reason: Reason,
    /// What was asked, what was applied instead, and the rule (names the annotation).
    pub message: String,
}

impl Finding {
    /// A finding; `message` is kept to one line.
    pub fn new(reason: Reason, message: impl Into<String>) -> Finding {
        Finding { reason, message: message.into().replace('\n', " ") }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}
