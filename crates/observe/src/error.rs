//! Typed errors of the observer: every message is one line naming what is wrong and how to fix it.

/// An error from loading the BPF programs, reading their maps, or serving the exposition.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading BPF programs needs root (CAP_BPF and CAP_PERFMON at least).
    #[error("ioshare observe needs root to load its BPF programs: run it with sudo")]
    NotRoot,
    /// The kernel exposes no BTF, so CO-RE relocation (and tp_btf) is impossible.
    #[error("the kernel has no BTF (/sys/kernel/btf/vmlinux missing): observe needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf,
    /// Neither the tp_btf nor the raw_tp programs could be loaded and attached.
    #[error("cannot load the block tracepoint programs (tp_btf: {tp_btf}; raw_tp: {raw_tp}); the kernel needs CONFIG_BPF_EVENTS; IOSHARE_OBSERVE_DEBUG=1 shows libbpf's log")]
    Load {
        /// Why the tp_btf variant failed.
        tp_btf: String,
        /// Why the raw_tp variant failed.
        raw_tp: String,
    },
    /// The loaded programs could not be attached again after a pause.
    #[error("cannot attach the block tracepoint programs again after a pause: {0}")]
    Attach(String),
    /// A map of the loaded programs could not be read.
    #[error("cannot read BPF map '{map}': {reason}")]
    Map {
        /// The map's name.
        map: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The kernel refused to time the programs (BPF_ENABLE_STATS).
    #[error("cannot measure the observer's cost: {0} (BPF_ENABLE_STATS needs root and Linux 5.8+)")]
    Stats(std::io::Error),
    /// The IOCost programs could not be loaded or attached: the kernel has no `iocost` tracepoints, or
    /// its IOCost structs lack a field they read.
    #[error("cannot watch the kernel's IOCost ({0}): it needs a kernel with CONFIG_BLK_CGROUP_IOCOST and its iocost tracepoints; IOSHARE_OBSERVE_DEBUG=1 shows libbpf's log")]
    NoIocost(String),
    /// `IOSHARE_OBSERVE_DETAIL` holds neither `light` nor `full`.
    #[error("IOSHARE_OBSERVE_DETAIL='{0}': set it to light or full, or unset it")]
    Detail(String),
    /// A device given by the user is not a block device.
    #[error("'{0}' is not a block device: give a path like /dev/sda or /dev/loop0, or MAJ:MIN like 8:0")]
    NotABlockDevice(String),
    /// The Prometheus listener could not be started.
    #[error("cannot listen on {addr}: {source} (choose another port)")]
    Listen {
        /// The address asked for.
        addr: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The observer's result type.
pub type Result<T> = std::result::Result<T, Error>;
