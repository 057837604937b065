//! What the suite is asked to run ([`BenchOptions`]) and the limits the options are held to.

use std::path::PathBuf;

use ioshare_core::{ModelParams, Nanos, QosParams, NSEC_PER_SEC};

/// Size of the temporary target: every byte is written first, so reads reach the device; large
/// enough that random 4 KiB reads do not stay in a device-side cache of a few hundred MiB.
pub const TEMP_TARGET_SIZE: u64 = 2 << 30;
/// Deepest saturating reader `--iodepth` accepts (each IO holds a buffer of its block size).
pub const MAX_IODEPTH: u32 = 1024;
/// Smallest target the suite accepts (sequential jobs must not wrap every few milliseconds).
pub const MIN_TARGET_SIZE: u64 = 256 << 20;

/// What the suite runs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Scenarios to run, by name; empty = all.
    pub scenarios: Vec<String>,
    /// Weights of the two main tenants (high, low).
    pub weights: (u32, u32),
    /// Queue depth of each saturating reader of the proportional and donation scenarios.
    pub iodepth: u32,
    /// Length of each run, ns.
    pub duration: Nanos,
    /// The device or file to run on; `None` = a temporary file in `temp_dir`.
    pub target: Option<PathBuf>,
    /// Whether writing scenarios may overwrite `target` (without it, a given target is only read:
    /// writing scenarios are skipped, and refused when they are all that was asked for).
    pub destructive: bool,
    /// Where the temporary target is created.
    pub temp_dir: PathBuf,
    /// Whether to run the kernel's controllers as peers (needs root; skipped with a note otherwise).
    pub kernel_peers: bool,
    /// How to start a kernel-peer worker: program and arguments (the CLI passes itself with its hidden
    /// worker flag); the worker calls [`crate::kernel::worker_main`].
    pub worker: Vec<String>,
    /// Watch each run with the eBPF observer ([`crate::observe`]; needs root and BTF).
    pub observe: bool,
    /// IOCost's cost model instead of the calibration's (the calibration still measures the IOPS the
    /// verdicts refer to).
    pub model: Option<ModelParams>,
    /// IOCost's QoS instead of the calibration's p50 line.
    pub qos: Option<QosParams>,
    /// How often the runs sample the controllers' state and the tenants' rates, ns; `None`: every
    /// second (a fifth of runs under 5 s). Runs judged on windows of their own (overhead, agent,
    /// qos-peers, the observer's toggled runs) keep their own interval.
    pub sample_every: Option<Nanos>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            scenarios: Vec::new(),
            weights: (200, 100),
            iodepth: 64,
            duration: 5 * NSEC_PER_SEC,
            target: None,
            destructive: false,
            temp_dir: PathBuf::from("."),
            kernel_peers: true,
            worker: Vec::new(),
            observe: false,
            model: None,
            qos: None,
            sample_every: None,
        }
    }
}
