//! Early (background) reclaim watermarks, as Alibaba Cloud Linux's `memory.wmark_ratio` and
//! `memory.wmark_scale_factor` define them (SPEC §8):
//!
//! - `wmark_high = limit × ratio / 100` (ratio 0 disables early reclaim);
//! - `wmark_low = wmark_high − limit × scale_factor / 10000` (scale_factor 1..=1000, default 50).
//!
//! When usage crosses `wmark_high`, reclaim in the background until usage is below `wmark_low`, so
//! allocations rarely stall in direct reclaim at the limit.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The default `wmark_scale_factor` (0.5% of the limit between the two watermarks).
pub const SCALE_FACTOR_DEFAULT: u32 = 50;

/// A group's memory-isolation settings (the agent config's `memory = { ... }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    /// Priority 0..=12 for priority OOM (higher is more important).
    #[serde(default)]
    pub priority: u8,
    /// Early reclaim threshold, percent of the limit; 0 (the default) disables early reclaim.
    #[serde(default)]
    pub wmark_ratio: u32,
    /// Distance between the watermarks, ten-thousandths of the limit (1..=1000).
    #[serde(default = "default_scale")]
    pub wmark_scale_factor: u32,
    /// A hard limit to set on the group (`"2G"`, or bytes); `None` keeps the group's own limit.
    #[serde(default, deserialize_with = "size_or_bytes")]
    pub limit: Option<u64>,
    /// The group is one unit (a container): a kill takes all its processes, and on cgroup v2 the
    /// kernel's own OOM killer is told so too (`memory.oom.group`).
    #[serde(default)]
    pub oom_group: bool,
    /// cgroup v2: kill by priority when the group's PSI `full` memory stall exceeds this share of a
    /// [`crate::hierarchy::v2::PRESSURE_WINDOW`], percent (1..=100, default 10).
    #[serde(default = "default_pressure")]
    pub oom_pressure: u32,
}

/// The default `oom_pressure`, percent.
pub const OOM_PRESSURE_DEFAULT: u32 = 10;

fn default_pressure() -> u32 {
    OOM_PRESSURE_DEFAULT
}

/// A size given as a string (`"2G"`) or a number of bytes.
fn size_or_bytes<'de, D: serde::Deserializer<'de>>(de: D) -> std::result::Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(de)? {
        Size::Bytes(b) => Ok(Some(b)),
        Size::Text(t) => crate::size::parse_size(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

fn default_scale() -> u32 {
    SCALE_FACTOR_DEFAULT
}

impl Default for MemorySettings {
    /// Priority 0, no early reclaim, the default scale factor, the group's own limit, processes
    /// killed one at a time, the default pressure threshold.
    fn default() -> Self {
        MemorySettings {
            priority: 0,
            wmark_ratio: 0,
            wmark_scale_factor: SCALE_FACTOR_DEFAULT,
            limit: None,
            oom_group: false,
            oom_pressure: OOM_PRESSURE_DEFAULT,
        }
    }
}

impl MemorySettings {
    /// Checks every value, naming the first one that is out of range.
    pub fn validate(&self) -> Result<()> {
        if self.priority > crate::priority::PRIORITY_MAX {
            return Err(Error::Setting { key: "priority", value: self.priority as u64, range: "0..=12" });
        }
        if self.wmark_ratio > 100 {
            return Err(Error::Setting { key: "wmark_ratio", value: self.wmark_ratio as u64, range: "0..=100" });
        }
        if !(1..=1000).contains(&self.wmark_scale_factor) {
            return Err(Error::Setting {
                key: "wmark_scale_factor",
                value: self.wmark_scale_factor as u64,
                range: "1..=1000",
            });
        }
        if !(1..=100).contains(&self.oom_pressure) {
            return Err(Error::Setting { key: "oom_pressure", value: self.oom_pressure as u64, range: "1..=100" });
        }
        Ok(())
    }

    /// The watermarks for a group limited to `limit` bytes; `None` when early reclaim is off.
    pub fn watermarks(&self, limit: u64) -> Option<Watermarks> {
        Watermarks::new(limit, self.wmark_ratio, self.wmark_scale_factor)
    }

    /// The watermarks of the group at `dir` under its `limit` (`None`: it has none); `None` when
    /// early reclaim is off, an error when it is on and the group has no limit.
    pub fn watermarks_under(&self, limit: Option<u64>, dir: &Path) -> Result<Option<Watermarks>> {
        match limit {
            Some(limit) => Ok(self.watermarks(limit)),
            None if self.wmark_ratio == 0 => Ok(None),
            None => Err(Error::NoLimit(dir.display().to_string())),
        }
    }
}

/// A group's two watermarks, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Watermarks {
    /// Usage above this starts background reclaim.
    pub high: u64,
    /// Background reclaim stops once usage is below this.
    pub low: u64,
}

impl Watermarks {
    /// The watermarks of `limit` at `ratio` percent and `scale_factor` ten-thousandths; `None` when
    /// `ratio` is 0 (disabled). A low watermark below zero is clamped to 0.
    pub fn new(limit: u64, ratio: u32, scale_factor: u32) -> Option<Watermarks> {
        if ratio == 0 {
            return None;
        }
        let high = (limit as u128 * ratio as u128 / 100) as u64;
        let gap = (limit as u128 * scale_factor as u128 / 10_000) as u64;
        Some(Watermarks { high, low: high.saturating_sub(gap) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_follow_the_anolis_formulas() {
        // 1 GiB limit, ratio 80, scale 50: high = 819.2 MiB, low = high − 5.12 MiB.
        let w = Watermarks::new(1 << 30, 80, 50).unwrap();
        assert_eq!(w.high, 858_993_459);
        assert_eq!(w.low, 858_993_459 - 5_368_709);
        assert!(Watermarks::new(1 << 30, 0, 50).is_none(), "ratio 0 disables");
        assert_eq!(Watermarks::new(100, 1, 1000).unwrap(), Watermarks { high: 1, low: 0 }, "clamped at 0");
    }

    #[test]
    fn early_reclaim_needs_a_limit() {
        let dir = Path::new("/sys/fs/cgroup/memory/web");
        let on = MemorySettings { wmark_ratio: 80, ..Default::default() };
        assert_eq!(on.watermarks_under(Some(1 << 30), dir).unwrap(), on.watermarks(1 << 30));
        let e = on.watermarks_under(None, dir).unwrap_err().to_string();
        assert!(e.contains("/sys/fs/cgroup/memory/web") && e.contains("needs a memory limit"), "{e}");
        assert_eq!(MemorySettings::default().watermarks_under(None, dir).unwrap(), None, "off: no limit needed");
    }

    #[test]
    fn settings_are_validated_naming_the_key() {
        let ok = MemorySettings { priority: 12, wmark_ratio: 100, wmark_scale_factor: 1000, ..Default::default() };
        assert!(ok.validate().is_ok());
        for (bad, key) in [
            (MemorySettings { priority: 13, ..ok }, "priority"),
            (MemorySettings { wmark_ratio: 101, ..ok }, "wmark_ratio"),
            (MemorySettings { wmark_scale_factor: 0, ..ok }, "wmark_scale_factor"),
            (MemorySettings { oom_pressure: 0, ..ok }, "oom_pressure"),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
        let parsed: MemorySettings = toml_like("priority = 3\nwmark_ratio = 80");
        let want = MemorySettings { priority: 3, wmark_ratio: 80, ..Default::default() };
        assert_eq!(parsed, want);
    }

    /// Deserialises from a tiny `key = number` text through serde's value deserializer.
    fn toml_like(text: &str) -> MemorySettings {
        use serde::de::value::MapDeserializer;
        let pairs = text.lines().map(|l| {
            let (k, v) = l.split_once(" = ").unwrap();
            (k.to_string(), v.parse::<u32>().unwrap())
        });
        let de: MapDeserializer<_, serde::de::value::Error> = MapDeserializer::new(pairs);
        MemorySettings::deserialize(de).unwrap()
    }
}
