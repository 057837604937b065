//! `model = "profile"`: a device's cost model measured at start, cached, and reused on the next start.
//!
//! The agent measures with the engine's profiler (`Profiler`): a device it is to control is in use,
//! so it is measured read-only (the write coefficients derived from the reads and a built-in set's
//! write:read ratios, as `ioshare profile --read-only` does), in [`AGENT_PLAN`]'s short interleaved
//! rounds — about 10 s, once per device. Only the model: no QoS runs (the configuration's `qos`
//! line, or none, says what the latency targets are).
//!
//! `Cached` wraps the measurer with a cache directory (`/var/cache/ioshare` by default): one file
//! per device, `model-MAJ_MIN.json`, holding the device's identity and the measured `io.cost.model`
//! line. The identity is what makes a cached model belong to *this* device: the name, size, and
//! whatever sysfs gives to tell one device from another (the disk's WWID or serial, a loop device's
//! backing file). A cache file whose identity differs (another disk got the same number, a loop device
//! now over another file) is measured again and replaced; a cache file that cannot be read or written
//! is not an error (the model is then measured every start, and said so in the log).
//!
//! [`Measure`] is the seam between reading a configuration and measuring a device: the agent's start
//! puts the cached `Profiler` behind it ([`Config::load_profiling`](crate::Config::load_profiling)),
//! a load that only validates puts `NotMeasured` ([`Config::load`](crate::Config::load)), and tests
//! put doubles that answer a fixed model without IO.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::{ModelConfig, ModelParams, NSEC_PER_MSEC, NSEC_PER_SEC};
use ioshare_engine::profile::measure::{measure, Plan, Step};
use ioshare_engine::profile::MIN_PROFILE_SIZE;
use ioshare_engine::Target;
use ioshare_host::DiskId;
use serde::{Deserialize, Serialize};

/// Default directory of the cache of measured models.
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/ioshare";

/// The runs the agent measures a device with: 3 interleaved rounds of 1 s per run (0.2 s warm-up),
/// each IO submitted alone.
pub const AGENT_PLAN: Plan = Plan {
    duration: NSEC_PER_SEC,
    warmup: 200 * NSEC_PER_MSEC,
    depth: 64,
    big_block: 4 << 20,
    big_depth: 16,
    rounds: 3,
    // Each IO submitted alone: the agent only reads the device, so it cannot switch merging off,
    // and merged sequential IOs would make seqiops count requests, not the IOs IOCost charges.
    submit_batch: 1,
    max_jobs: 1,
};

/// Measures a device's cost model: the seam between the configuration and the profiler, there so
/// that tests can answer without IO (`Profiler` is the one the agent uses).
pub trait Measure {
    /// `device`'s model, or one line saying why it could not be measured.
    fn measure(&self, device: &DiskId) -> Result<ModelParams, String>;
}

/// The engine's profiler, read-only, reporting progress through `progress`.
pub(crate) struct Profiler<'a> {
    stop: &'a AtomicBool,
    progress: &'a dyn Fn(&str),
}

impl<'a> Profiler<'a> {
    /// A profiler that stops (with an error) when `stop` is raised.
    pub(crate) fn new(stop: &'a AtomicBool, progress: &'a dyn Fn(&str)) -> Self {
        Profiler { stop, progress }
    }
}

impl Measure for Profiler<'_> {
    fn measure(&self, device: &DiskId) -> Result<ModelParams, String> {
        let path = Path::new("/dev").join(&device.name);
        let failed = |e: ioshare_engine::Error| format!("profiling {} failed: {e}", path.display());
        let target = Target::open_read_only(&path, MIN_PROFILE_SIZE).map_err(failed)?;
        let mut step = |step: Step, i: usize, n: usize| {
            (self.progress)(&format!("profiling {} [run {}/{n}] {}", device.name, i + 1, step.describe(&AGENT_PLAN)))
        };
        let stat = Path::new("/sys/block").join(&device.name).join("stat");
        Ok(measure(&target, &AGENT_PLAN, false, Some(&stat), self.stop, &mut step).map_err(failed)?.model)
    }
}

/// The measurer of a load that only validates: refuses, naming what to use instead.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NotMeasured;

impl Measure for NotMeasured {
    fn measure(&self, device: &DiskId) -> Result<ModelParams, String> {
        Err(format!(
            "measuring {} is left to the agent's start (`ioshare agent run`; this load only validates the file): \
             or give the io.cost.model line `ioshare profile` prints, or a built-in set (hdd, ssd_qd1, ssd_dfl, \
             ssd_fast)",
            device.name
        ))
    }
}

/// A measurer with a cache: a model measured once per device is reused on later starts.
pub(crate) struct Cached<'a> {
    dir: PathBuf,
    inner: &'a dyn Measure,
}

/// What a cache file holds.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct CacheEntry {
    /// [`DiskId::identity`] of the device measured.
    identity: String,
    /// The measured model, as an `io.cost.model` line without device.
    model: String,
}

impl<'a> Cached<'a> {
    /// Caches `inner`'s measurements in `dir` (created when first needed).
    pub(crate) fn new(dir: &Path, inner: &'a dyn Measure) -> Self {
        Cached { dir: dir.to_path_buf(), inner }
    }

    /// The cache file of `device`.
    fn file(&self, device: &DiskId) -> PathBuf {
        self.dir.join(format!("model-{}_{}.json", device.dev.major, device.dev.minor))
    }

    /// The cached model of `device`, if the cache holds one for this very device.
    fn lookup(&self, device: &DiskId) -> Option<ModelParams> {
        let text = std::fs::read_to_string(self.file(device)).ok()?;
        let entry: CacheEntry = serde_json::from_str(&text).ok()?;
        if entry.identity != device.identity() {
            return None;
        }
        entry.model.parse::<ModelConfig>().ok().map(|m| m.params)
    }

    fn store(&self, device: &DiskId, model: &ModelParams) -> std::io::Result<()> {
        let line = ModelConfig { device: None, ctrl: Ctrl::User, params: *model }.to_string();
        let entry = CacheEntry { identity: device.identity(), model: line };
        let text = serde_json::to_string_pretty(&entry).expect("entry serialises");
        std::fs::create_dir_all(&self.dir)?;
        ioshare_host::replace_file(&self.file(device), text.as_bytes())
    }
}

impl Measure for Cached<'_> {
    fn measure(&self, device: &DiskId) -> Result<ModelParams, String> {
        if let Some(model) = self.lookup(device) {
            return Ok(model);
        }
        let model = self.inner.measure(device)?;
        if let Err(e) = self.store(device, &model) {
            tracing::warn!(
                "could not cache the model of {} in {}: {e} (it will be measured again next start)",
                device.name,
                self.dir.display()
            );
        }
        Ok(model)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// Counts its calls; answers a fixed model.
    struct Counting(Cell<u32>);

    impl Measure for Counting {
        fn measure(&self, _: &DiskId) -> Result<ModelParams, String> {
            self.0.set(self.0.get() + 1);
            Ok(ModelParams { rrandiops: 12_345, ..ModelParams::SSD_DFL })
        }
    }

    fn some_device() -> DiskId {
        let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
        DiskId::resolve(std::fs::read_to_string(entry.path().join("dev")).unwrap().trim()).unwrap()
    }

    #[test]
    fn a_model_is_measured_once_then_read_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let counting = Counting(Cell::new(0));
        let cached = Cached::new(&dir.path().join("cache"), &counting);
        let dev = some_device();
        assert_eq!(cached.measure(&dev).unwrap().rrandiops, 12_345);
        assert_eq!(cached.measure(&dev).unwrap().rrandiops, 12_345);
        assert_eq!(counting.0.get(), 1, "the second start reused the cache");
        // Another start, another process: the file alone is enough.
        assert_eq!(Cached::new(&dir.path().join("cache"), &NotMeasured).measure(&dev).unwrap().rrandiops, 12_345);
    }

    #[test]
    fn a_cache_file_of_another_device_is_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let counting = Counting(Cell::new(0));
        let cached = Cached::new(dir.path(), &counting);
        let dev = some_device();
        let stale = CacheEntry { identity: "another disk".into(), model: "rrandiops=1".into() };
        std::fs::write(cached.file(&dev), serde_json::to_string(&stale).unwrap()).unwrap();
        assert_eq!(cached.measure(&dev).unwrap().rrandiops, 12_345);
        assert_eq!(counting.0.get(), 1);
        assert_eq!(cached.lookup(&dev).unwrap().rrandiops, 12_345, "replaced");
    }

    #[test]
    fn an_unwritable_cache_still_measures() {
        let counting = Counting(Cell::new(0));
        let cached = Cached::new(Path::new("/proc/ioshare-no-such-dir"), &counting);
        assert_eq!(cached.measure(&some_device()).unwrap().rrandiops, 12_345);
    }
}
