//! The profile a sweep starts from, measured once per device and reused by the sweeps after it.
//!
//! A sweep's vrates scale the profile's cost model, and its default latency target is the
//! profile's rule; both move with every profile: over eight profiles of this host's loop device the
//! model's `rrandiops` moved 88–99k and the default target 2446–3533 µs, and `bandwidth` followed
//! the target. Two sweeps that each profile answer for two models and two targets, so their vrates
//! do not compare. The first sweep of a device therefore stores what it took from its profile —
//! the model, the suggested QoS line and the judged target — and later sweeps of the same device
//! take it from here (`ioshare tune --reprofile` measures again and replaces the entry).
//!
//! An entry belongs to one device and one way of measuring it: the disk behind the target (for a
//! file, or a loop device over one, the disk holding the file) by [`DiskId::identity`], what was
//! measured (file, loop device, block device), its size and whether the profile was the quick one.
//! An entry with another key is measured again and replaced. A target on no block device has no
//! entry, and a cache that cannot be read or written is not an error: the profile is measured, and
//! the sweep's notes say why it was not cached.

use std::path::{Path, PathBuf};

use ioshare_core::{ModelConfig, ModelParams, QosConfig, QosParams};
use ioshare_host::DiskId;
use serde::{Deserialize, Serialize};

/// Default directory of the cache (shared with the agent's cache of measured models).
pub const DEFAULT_DIR: &str = "/var/cache/ioshare";

/// What a sweep takes from a profile.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileTaken {
    /// The cost model the vrates scale.
    pub model: ModelParams,
    /// The profile's suggested QoS.
    pub qos: QosParams,
    /// The latency target the sweep judges by default, µs.
    pub lat_target_us: u64,
    /// When the profile was measured, seconds since the epoch.
    pub measured_at: u64,
}

/// What makes an entry the one for a sweep: the device and how it was measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey {
    /// The entry's file name.
    file: String,
    /// The disk's identity and the way of measuring, compared on lookup.
    identity: String,
}

impl CacheKey {
    /// The key of a profile of `target` measured as `kind` (`file`, `loop device over a file`,
    /// `block device`), `size` bytes, quick or not; `None` for a target on no block device.
    pub fn of(target: &Path, kind: &str, size: u64, quick: bool) -> Option<Self> {
        let disk = ioshare_engine::profile::disk::disk_of(target)?;
        let id = DiskId { dev: disk.dev, name: disk.name };
        let plan = if quick { "quick" } else { "default" };
        let short = kind.split_whitespace().next().unwrap_or("target");
        let file = format!("tune-profile-{}_{}-{short}-{}MiB-{plan}.json", id.dev.major, id.dev.minor, size >> 20);
        let identity = format!("{} | {kind}, {size} bytes, {plan} profile", id.identity());
        Some(CacheKey { file, identity })
    }
}

/// A cache file.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    identity: String,
    measured_at: u64,
    model: String,
    qos: String,
    lat_target_us: u64,
}

/// The cache: a directory of one file per key.
#[derive(Clone, Debug)]
pub struct ProfileCache {
    /// Where the entries are.
    pub dir: PathBuf,
    /// Whether an entry found is used (`false`: measure again and replace it).
    pub reuse: bool,
}

impl ProfileCache {
    /// The profile cached for `key`, if there is one for this very device and `reuse` is set.
    pub fn lookup(&self, key: &CacheKey) -> Option<ProfileTaken> {
        if !self.reuse {
            return None;
        }
        let text = std::fs::read_to_string(self.dir.join(&key.file)).ok()?;
        let e: Entry = serde_json::from_str(&text).ok()?;
        if e.identity != key.identity {
            return None;
        }
        Some(ProfileTaken {
            model: e.model.parse::<ModelConfig>().ok()?.params,
            qos: e.qos.parse::<QosConfig>().ok()?.params,
            lat_target_us: e.lat_target_us,
            measured_at: e.measured_at,
        })
    }

    /// Stores `taken` under `key` (the directory made when missing; the file replaced at once).
    pub fn store(&self, key: &CacheKey, taken: &ProfileTaken) -> std::io::Result<()> {
        use ioshare_core::iocost::line::Ctrl;
        let entry = Entry {
            identity: key.identity.clone(),
            measured_at: taken.measured_at,
            model: ModelConfig { device: None, ctrl: Ctrl::User, params: taken.model }.to_string(),
            qos: QosConfig { device: None, ctrl: Ctrl::User, params: taken.qos }.to_string(),
            lat_target_us: taken.lat_target_us,
        };
        let text = serde_json::to_string_pretty(&entry).expect("an entry serialises");
        std::fs::create_dir_all(&self.dir)?;
        ioshare_host::replace_file(&self.dir.join(&key.file), text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken() -> ProfileTaken {
        ProfileTaken {
            model: ModelParams { rrandiops: 91_234, ..ModelParams::SSD_DFL },
            qos: QosParams { enable: true, rppm: 950_000, rlat_us: 2_345, ..QosParams::default() },
            lat_target_us: 3_120,
            measured_at: 1_764_500_000,
        }
    }

    #[test]
    fn an_entry_is_found_for_its_device_and_way_of_measuring_only() {
        let dir = tempfile::tempdir().unwrap();
        let here = std::env::current_dir().unwrap();
        let Some(key) = CacheKey::of(&here, "loop device over a file", 2 << 30, false) else {
            // This directory is on no block device (tmpfs, overlay): nothing to cache.
            return;
        };
        let cache = ProfileCache { dir: dir.path().join("cache"), reuse: true };
        assert_eq!(cache.lookup(&key), None, "an empty cache");
        cache.store(&key, &taken()).unwrap();
        assert_eq!(cache.lookup(&key), Some(taken()), "model, QoS and target as stored");
        let quick = CacheKey::of(&here, "loop device over a file", 2 << 30, true).unwrap();
        let smaller = CacheKey::of(&here, "loop device over a file", 1 << 30, false).unwrap();
        let file = CacheKey::of(&here, "file", 2 << 30, false).unwrap();
        for other in [&quick, &smaller, &file] {
            assert_eq!(cache.lookup(other), None, "{other:?}");
        }
        // Another device under the same file name: measured again.
        let moved = CacheKey { identity: "another disk".into(), ..key.clone() };
        assert_eq!(cache.lookup(&moved), None);
        // --reprofile: the entry is there but not used.
        assert_eq!(ProfileCache { reuse: false, ..cache.clone() }.lookup(&key), None);
        // A cache file that does not parse is no entry, not an error.
        std::fs::write(cache.dir.join(&key.file), "{").unwrap();
        assert_eq!(cache.lookup(&key), None);
        assert_eq!(CacheKey::of(Path::new("/proc/self/status"), "file", 1, false), None);
    }
}
