//! Loading and attaching the BPF programs, and reading their maps into [`Snapshot`]s.
//!
//! The tp_btf programs are tried first (typed tracepoint arguments, no tracefs needed); if the kernel
//! refuses them, the raw_tp twins of the same code are loaded instead. Classic tracepoints are not
//! used (they need tracefs mounted), nor kprobes/fentry (unavailable on the kernels this targets).

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, ProgramMut};

use crate::error::{Error, Result};
use crate::histogram::Histogram;
use crate::names::{device_name, CgroupNames};
use crate::skel::types::{obs_key, obs_latency, obs_slot, obs_stage, obs_value};
use crate::skel::{ObserveSkel, ObserveSkelBuilder};
use crate::snapshot::{Cost, Counters, Entry, Op, ProgramCost, Snapshot, Stage, StageStats};

/// Set to anything to see libbpf's log (the verifier's output) on stderr.
pub const DEBUG_ENV: &str = "IOSHARE_OBSERVE_DEBUG";

/// How the programs are attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// BTF-typed raw tracepoints (`tp_btf`).
    TpBtf,
    /// Raw tracepoints (`raw_tp`), the fallback.
    RawTp,
}

/// Which stages an observer watches, and how closely.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stages {
    /// The default: only C (requests completed: counts, sizes, seek distances in completion order),
    /// with Q→C and D→C latencies of one request in [`LATENCY_EVERY`] per CPU, taken from the
    /// timestamps the block layer keeps in the request. One program per IO, no in-flight table, no
    /// clock read for the requests not sampled; no I→D latency, nothing at Q, I, D.
    #[default]
    Light,
    /// Q, I, D and C, with every IO's latencies from the observer's own clock reads (four programs per
    /// IO).
    All,
    /// Only Q (bios queued: counts, sizes, seek distances), no latencies: one program per IO instead
    /// of four, for users that need the sequential/random mix only (the agent).
    QueueOnly,
}

/// Set to `full` (or `light`) to change the detail of [`Observer::start`] in a program that does not
/// choose it, for instance to measure the full detail's cost with `ioshare bench --scenario overhead
/// --observe`; anything else is an error when the observer starts.
pub const DETAIL_ENV: &str = "IOSHARE_OBSERVE_DETAIL";

/// In [`Stages::Light`], latencies are sampled from one completed request in this many per CPU.
pub const LATENCY_EVERY: u32 = 8;

/// The running observer: programs attached until it is dropped (or [`Observer::pause`]d).
pub struct Observer {
    /// One link per attached program; empty while paused.
    links: Vec<Link>,
    skel: ObserveSkel<'static>,
    mode: AttachMode,
    stages: Stages,
    started: Instant,
    names: CgroupNames,
    /// While held, the kernel times every BPF program run (`BPF_ENABLE_STATS`); closing it turns the
    /// timing off again, so nothing global is left changed.
    run_stats: Option<OwnedFd>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").field("mode", &self.mode).finish_non_exhaustive()
    }
}

/// Whether this process can trace the block layer: root, on a kernel with BTF.
pub fn can_trace() -> Result<()> {
    if !ioshare_host::is_root() {
        return Err(Error::NotRoot);
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(Error::NoBtf);
    }
    Ok(())
}

/// For tests that trace: returns `true` (skip) and prints `skipping <test>: <why>` unless
/// [`can_trace`].
pub fn skip_unless_traceable(test: &str) -> bool {
    match can_trace() {
        Ok(()) => false,
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            true
        }
    }
}

impl Observer {
    /// Loads and attaches the programs at the default detail ([`Stages::Light`]), counting IO on the
    /// whole disk `device` (`(major, minor)`) only, or on every device.
    ///
    /// Fails with a one-line reason when not root, when the kernel has no BTF, or when neither attach
    /// style works.
    pub fn start(device: Option<(u32, u32)>) -> Result<Observer> {
        let stages = match std::env::var(DETAIL_ENV).as_deref() {
            Err(_) | Ok("light") => Stages::Light,
            Ok("full") => Stages::All,
            Ok(other) => return Err(Error::Detail(other.to_string())),
        };
        Self::start_with(device, None, stages)
    }

    /// [`Observer::start_as`] watching only `stages`.
    pub fn start_with(device: Option<(u32, u32)>, mode: Option<AttachMode>, stages: Stages) -> Result<Observer> {
        can_trace()?;
        // libbpf prints every refusal (and the verifier's log) to stderr; the errors are reported
        // through `Error::Load`, and the full log only on request.
        if std::env::var_os(DEBUG_ENV).is_none() {
            libbpf_rs::set_print(None);
        }
        let target = device.map_or(0, |(major, minor)| (major << 20) | minor);
        let tp_btf = match mode {
            Some(AttachMode::RawTp) => Err("not tried".to_string()),
            _ => load_and_attach(target, AttachMode::TpBtf, stages).map_err(|e| e.to_string()),
        };
        match tp_btf {
            Ok(observer) => Ok(observer),
            Err(tp_btf) if mode != Some(AttachMode::TpBtf) => load_and_attach(target, AttachMode::RawTp, stages)
                .map_err(|raw_tp| Error::Load { tp_btf, raw_tp: raw_tp.to_string() }),
            Err(tp_btf) => Err(Error::Load { tp_btf, raw_tp: "not tried".to_string() }),
        }
    }

    /// Detaches the programs: the block layer runs none of them until [`Observer::resume`]; the maps
    /// and what they counted stay. IOs in flight across a pause miss their stage times (counted).
    pub fn pause(&mut self) {
        self.links.clear();
    }

    /// Attaches the programs again after [`Observer::pause`] (nothing when already attached), in a new
    /// generation: in-flight entries from before the pause no longer count as live.
    pub fn resume(&mut self) -> Result<()> {
        if self.links.is_empty() {
            if let Some(data) = self.skel.maps.data_data.as_deref_mut() {
                data.generation += 1;
            }
            self.links = attach(&self.programs()).map_err(|e| Error::Attach(e.to_string()))?;
        }
        Ok(())
    }

    /// The programs of this observer's attach style and stages, with their stages, in stage order.
    fn programs(&self) -> Vec<(Stage, ProgramMut<'_>)> {
        let wanted = program_names(self.mode, self.stages);
        let mut found: Vec<(Stage, ProgramMut<'_>)> = self
            .skel
            .object()
            .progs_mut()
            .filter_map(|p| wanted.iter().find(|(_, name)| p.name() == *name).map(|&(stage, _)| (stage, p)))
            .collect();
        found.sort_by_key(|&(stage, _)| stage as usize);
        found
    }

    /// The detail this observer was started with.
    pub fn stages(&self) -> Stages {
        self.stages
    }

    /// Has the kernel time the programs from now on (two clock reads per run, a few tens of ns), so
    /// snapshots carry the observer's own cost in [`Snapshot::cost`].
    pub fn measure_cost(&mut self) -> Result<()> {
        // SAFETY: bpf_enable_stats only issues the BPF_ENABLE_STATS command and returns a new fd or a
        // negative errno.
        let fd = unsafe { libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(Error::Stats(std::io::Error::from_raw_os_error(-fd)));
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        self.run_stats = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    /// Which program flavour is attached.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Reads everything counted since the programs were attached.
    pub fn snapshot(&mut self) -> Result<Snapshot> {
        let maps = &self.skel.maps;
        let mut entries = Vec::new();
        // Device names by number, looked up once per snapshot (not once per series); the cgroup
        // hierarchy walked at most once.
        let mut devices: HashMap<u32, String> = HashMap::new();
        self.names.next_reading();
        for raw_key in maps.slots.keys() {
            let slot = maps
                .slots
                .lookup(&raw_key, MapFlags::ANY)
                .map_err(|e| Error::Map { map: "slots", reason: e.to_string() })?;
            // A key may vanish between keys() and lookup() only if something deleted it; nothing does.
            let Some(slot) = slot else { continue };
            let key: obs_key = from_bytes(&raw_key, "slots")?;
            let slot: obs_slot = from_bytes(&slot, "slots")?;
            let per_cpu = maps
                .stats
                .lookup_percpu(&slot.stats.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| Error::Map { map: "stats", reason: e.to_string() })?
                .unwrap_or_default();
            let value: obs_value = from_bytes(&sum_per_cpu(&per_cpu), "stats")?;
            entries.push(entry(&mut self.names, &mut devices, &key, &value));
        }
        entries.sort_by(|a, b| (&a.device, &a.cgroup, a.op).cmp(&(&b.device, &b.cgroup, b.op)));
        let cost = self.run_stats.as_ref().map(|_| self.cost());
        Ok(Snapshot { elapsed_s: self.started.elapsed().as_secs_f64(), entries, counters: self.counters()?, cost })
    }

    /// Runs, run time and skipped hits of each attached program.
    fn cost(&self) -> Cost {
        let mut cost = Cost::default();
        for (stage, prog) in self.programs() {
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: `info` is a bpf_prog_info of `len` bytes that the kernel fills in.
            let ret = unsafe {
                libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len)
            };
            if ret == 0 {
                cost.programs[stage as usize] =
                    ProgramCost { runs: info.run_cnt, run_time_ns: info.run_time_ns, skipped: info.recursion_misses };
            }
        }
        cost
    }

    fn counters(&self) -> Result<Counters> {
        let read = |index: u32| -> Result<u64> {
            let per_cpu = self
                .skel
                .maps
                .counters
                .lookup_percpu(&index.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| Error::Map { map: "counters", reason: e.to_string() })?
                .unwrap_or_default();
            from_bytes::<u64>(&sum_per_cpu(&per_cpu), "counters")
        };
        Ok(Counters { dropped_stats_full: read(0)?, missing_queue_time: read(1)?, missing_issue_time: read(2)? })
    }
}

/// Opens the object with one flavour of programs (of `stages`) enabled, sets the device filter, loads,
/// attaches.
fn load_and_attach(target_dev: u32, mode: AttachMode, stages: Stages) -> libbpf_rs::Result<Observer> {
    // The skeleton borrows its object storage for its whole life; one small allocation per observer
    // (a pointer) is leaked so the observer can own its skeleton.
    let storage: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = ObserveSkelBuilder::default().open(storage)?;
    if let Some(rodata) = open.maps.rodata_data.as_mut() {
        rodata.target_dev = target_dev;
        rodata.track_inflight = stages == Stages::All;
        rodata.latency_every = LATENCY_EVERY;
    }
    // Only the programs this observer attaches are loaded (the others are not even verified).
    let wanted = program_names(mode, stages);
    for mut prog in open.open_object_mut().progs_mut() {
        let load = wanted.iter().any(|(_, name)| prog.name() == *name);
        prog.set_autoload(load);
    }
    let mut observer = Observer {
        links: Vec::new(),
        skel: open.load()?,
        mode,
        stages,
        started: Instant::now(),
        names: CgroupNames::discover(),
        run_stats: None,
    };
    observer.links = attach(&observer.programs())?;
    Ok(observer)
}

/// The programs (their names in `observe.bpf.c`) of attach style `mode` that watch `stages`, with the
/// stage each one counts at.
fn program_names(mode: AttachMode, stages: Stages) -> Vec<(Stage, &'static str)> {
    let names: &[(Stage, &str)] = match (mode, stages) {
        (AttachMode::TpBtf, Stages::Light) => &[(Stage::C, "btf_rq_complete_light")],
        (AttachMode::RawTp, Stages::Light) => &[(Stage::C, "raw_rq_complete_light")],
        (AttachMode::TpBtf, Stages::QueueOnly) => &[(Stage::Q, "btf_bio_queue")],
        (AttachMode::RawTp, Stages::QueueOnly) => &[(Stage::Q, "raw_bio_queue")],
        (AttachMode::TpBtf, Stages::All) => &[
            (Stage::Q, "btf_bio_queue"),
            (Stage::I, "btf_rq_insert"),
            (Stage::D, "btf_rq_issue"),
            (Stage::C, "btf_rq_complete"),
        ],
        (AttachMode::RawTp, Stages::All) => &[
            (Stage::Q, "raw_bio_queue"),
            (Stage::I, "raw_rq_insert"),
            (Stage::D, "raw_rq_issue"),
            (Stage::C, "raw_rq_complete"),
        ],
    };
    names.to_vec()
}

/// Attaches each of `programs` (the links detach them again when dropped).
fn attach(programs: &[(Stage, ProgramMut<'_>)]) -> libbpf_rs::Result<Vec<Link>> {
    programs.iter().map(|(_, p)| p.attach()).collect()
}

/// Adds up the per-CPU copies of a value made only of `u64` counters, field by field.
fn sum_per_cpu(per_cpu: &[Vec<u8>]) -> Vec<u8> {
    let mut total = vec![0u8; per_cpu.first().map_or(0, Vec::len)];
    for cpu in per_cpu {
        for (sum, word) in total.chunks_exact_mut(8).zip(cpu.chunks_exact(8)) {
            let add = |a: &[u8]| u64::from_ne_bytes(a.try_into().expect("8-byte chunk"));
            sum.copy_from_slice(&add(sum).wrapping_add(add(word)).to_ne_bytes());
        }
    }
    total
}

/// Reads a plain value of `T` (a struct of integers) from the bytes of a map key or value.
pub(crate) fn from_bytes<T: Copy + Default>(bytes: &[u8], map: &'static str) -> Result<T> {
    if bytes.len() != std::mem::size_of::<T>() {
        return Err(Error::Map {
            map,
            reason: format!("{} bytes where {} were expected (stale build?)", bytes.len(), std::mem::size_of::<T>()),
        });
    }
    let mut value = T::default();
    // SAFETY: `T` is one of the skeleton's `repr(C)` structs of integers (or an integer), for which
    // every bit pattern is valid, and exactly `size_of::<T>()` bytes are copied into it.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut value as *mut T).cast::<u8>(), bytes.len()) };
    Ok(value)
}

fn entry(names: &mut CgroupNames, devices: &mut HashMap<u32, String>, key: &obs_key, value: &obs_value) -> Entry {
    let (major, minor) = (key.dev >> 20, key.dev & 0xfffff);
    let device = format!("{major}:{minor}");
    Entry {
        device_name: devices
            .entry(key.dev)
            .or_insert_with(|| device_name(major, minor).unwrap_or_else(|| device.clone()))
            .clone(),
        device,
        cgroup_id: key.cgroup,
        cgroup: names.name(key.cgroup),
        op: Op::from_raw(key.op),
        stages: value.stage.iter().map(stage_stats).collect(),
        latencies: value.latency.iter().map(latency_histogram).collect(),
    }
}

fn stage_stats(stage: &obs_stage) -> StageStats {
    StageStats {
        ios: stage.ios,
        bytes: stage.bytes,
        size: Histogram { buckets: stage.size_hist.to_vec(), sum: stage.bytes },
        seek: Histogram { buckets: stage.seek_hist.to_vec(), sum: stage.seek_sum },
    }
}

fn latency_histogram(latency: &obs_latency) -> Histogram {
    Histogram { buckets: latency.hist.to_vec(), sum: latency.sum_ns }
}
