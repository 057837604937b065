//! What a pod can ask for, one [`Key`] per setting, and how asks from several places combine.
//!
//! A [`Request`] holds the settings one place asks for (the agent config's QoS default, a namespace's
//! annotations, a block-IO class, the pod's own annotations), each value with its [`Origin`]. Requests
//! are overlaid lowest first; the top one's values win key by key, and [`Request::settings`] fills
//! what nobody asked for with the defaults. Every value is parsed and checked by [`Request::set`], for
//! annotations and for the agent config alike, with the parsers the agent config uses: ioshare-core's
//! limit syntax and weight range, ioshare-memory's ranges.

use std::fmt;

use ioshare_core::{Limits, WEIGHT_DEFAULT, WEIGHT_MAX, WEIGHT_MIN};
use ioshare_memory::{MemorySettings, PRIORITY_MAX};
use serde::Serialize;

use crate::cgroup::QosClass;

/// One setting, named as in the agent config (`memory = { priority, wmark_ratio, ... }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// IO weight, 1..=10000 (`weight`).
    Weight,
    /// Fixed caps in ioshare's limit syntax (`limits`, e.g. `iops-read=5000,bps-write=10485760`).
    Limits,
    /// Priority-OOM priority, 0..=12 (`memory.priority`).
    MemoryPriority,
    /// Early-reclaim threshold, percent of the limit (`memory.wmark_ratio`).
    WmarkRatio,
    /// Distance between the watermarks, ten-thousandths of the limit (`memory.wmark_scale_factor`).
    WmarkScaleFactor,
}

impl Key {
    /// Every key.
    pub const ALL: [Key; 5] = [Key::Weight, Key::Limits, Key::MemoryPriority, Key::WmarkRatio, Key::WmarkScaleFactor];

    /// The key's name in annotations (after the domain) and in the agent config.
    pub fn name(self) -> &'static str {
        match self {
            Key::Weight => "weight",
            Key::Limits => "limits",
            Key::MemoryPriority => "memory.priority",
            Key::WmarkRatio => "memory.wmark_ratio",
            Key::WmarkScaleFactor => "memory.wmark_scale_factor",
        }
    }

    /// The key named `name`.
    pub fn from_name(name: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Origin {
    /// The agent config's default for a QoS class (`[kubernetes.qos.burstable]`).
    QosDefault(QosClass),
    /// A block-IO class of the agent config, chosen by the annotation named.
    BlockioClass {
        /// The class.
        class: String,
        /// The annotation that chose it.
        annotation: String,
    },
    /// A namespace's annotation.
    Namespace {
        /// The annotation key.
        key: String,
    },
    /// The pod's own annotation.
    Pod {
        /// The annotation key.
        key: String,
    },
}

impl Origin {
    /// Whether the value was set by the admin (the agent config's QoS default) rather than asked for
    /// by a tenant: the limits a tenant may not raise.
    pub fn is_admin(&self) -> bool {
        matches!(self, Origin::QosDefault(_))
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::QosDefault(q) => write!(f, "the agent config's {q} default"),
            Origin::BlockioClass { class, annotation } => write!(f, "block-IO class '{class}' ({annotation})"),
            Origin::Namespace { key } => write!(f, "namespace annotation {key}"),
            Origin::Pod { key } => write!(f, "annotation {key}"),
        }
    }
}

/// A value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Its origin.
    pub origin: Origin,
}

/// What one place asks for: any subset of the keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// IO weight.
    pub weight: Option<Sourced<u32>>,
    /// Fixed caps.
    pub limits: Option<Sourced<Limits>>,
    /// Memory priority.
    pub priority: Option<Sourced<u8>>,
    /// Early-reclaim threshold, percent.
    pub wmark_ratio: Option<Sourced<u32>>,
    /// Watermark distance, ten-thousandths.
    pub wmark_scale_factor: Option<Sourced<u32>>,
}

impl Request {
    /// Parses `text` as the value of `key` and sets it; the error says what is wrong in one line.
    pub fn set(&mut self, key: Key, text: &str, origin: Origin) -> Result<(), String> {
        let text = text.trim();
        match key {
            Key::Weight => {
                let value = parse_number(text)
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|v| (WEIGHT_MIN..=WEIGHT_MAX).contains(v))
                    .ok_or_else(|| {
                        format!("'{text}' is not a weight: use a whole number {WEIGHT_MIN}..={WEIGHT_MAX}")
                    })?;
                self.weight = Some(Sourced { value, origin });
            }
            Key::Limits => {
                let value: Limits = text.parse().map_err(|e: ioshare_core::Error| e.to_string())?;
                value.validate().map_err(|e| format!("'{text}': {e}"))?;
                self.limits = Some(Sourced { value, origin });
            }
            Key::MemoryPriority => {
                let value =
                    parse_number(text).and_then(|v| u8::try_from(v).ok()).filter(|v| *v <= PRIORITY_MAX).ok_or_else(
                        || format!("'{text}' is not a memory priority: use a whole number 0..={PRIORITY_MAX}"),
                    )?;
                self.priority = Some(Sourced { value, origin });
            }
            Key::WmarkRatio | Key::WmarkScaleFactor => {
                let value = parse_number(text)
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| format!("'{text}' is not a whole number"))?;
                let (probe, slot) = match key {
                    Key::WmarkRatio => {
                        (MemorySettings { wmark_ratio: value, ..Default::default() }, &mut self.wmark_ratio)
                    }
                    _ => (
                        MemorySettings { wmark_scale_factor: value, ..Default::default() },
                        &mut self.wmark_scale_factor,
                    ),
                };
                probe.validate().map_err(|e| e.to_string())?;
                *slot = Some(Sourced { value, origin });
            }
        }
        Ok(())
    }

    /// The same values, each with `origin` as its origin.
    pub fn with_origin(&self, origin: &Origin) -> Request {
        fn re<T: Clone>(slot: &Option<Sourced<T>>, origin: &Origin) -> Option<Sourced<T>> {
            slot.as_ref().map(|s| Sourced { value: s.value.clone(), origin: origin.clone() })
        }
        Request {
            weight: re(&self.weight, origin),
            limits: re(&self.limits, origin),
            priority: re(&self.priority, origin),
            wmark_ratio: re(&self.wmark_ratio, origin),
            wmark_scale_factor: re(&self.wmark_scale_factor, origin),
        }
    }

    /// Whether nothing is asked for.
    pub fn is_empty(&self) -> bool {
        *self == Request::default()
    }

    /// This request with `top`'s values in place of its own, key by key.
    pub fn overlaid(mut self, top: &Request) -> Request {
        fn over<T: Clone>(slot: &mut Option<T>, top: &Option<T>) {
            if top.is_some() {
                slot.clone_from(top);
            }
        }
        over(&mut self.weight, &top.weight);
        over(&mut self.limits, &top.limits);
        over(&mut self.priority, &top.priority);
        over(&mut self.wmark_ratio, &top.wmark_ratio);
        over(&mut self.wmark_scale_factor, &top.wmark_scale_factor);
        self
    }

    /// The settings asked for, the defaults where nothing is: weight 100, no limits, and no memory
    /// isolation unless one of the memory keys is set.
    pub fn settings(&self) -> Settings {
        let memory =
            (self.priority.is_some() || self.wmark_ratio.is_some() || self.wmark_scale_factor.is_some()).then(|| {
                let d = MemorySettings::default();
                MemorySettings {
                    priority: self.priority.as_ref().map_or(d.priority, |p| p.value),
                    wmark_ratio: self.wmark_ratio.as_ref().map_or(d.wmark_ratio, |r| r.value),
                    wmark_scale_factor: self.wmark_scale_factor.as_ref().map_or(d.wmark_scale_factor, |s| s.value),
                    ..d
                }
            });
        Settings {
            weight: self.weight.as_ref().map_or(WEIGHT_DEFAULT, |w| w.value),
            limits: self.limits.as_ref().map(|l| l.value.clone()).unwrap_or_default(),
            memory,
        }
    }
}

/// A whole number in decimal; `None` for anything else (signs, fractions, words).
fn parse_number(text: &str) -> Option<u64> {
    text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok()).flatten()
}

/// What the agent applies to one cgroup: the same three things as a `[[groups]]` rule of its config.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// IO weight among the cgroup's siblings.
    pub weight: u32,
    /// Fixed caps.
    pub limits: Limits,
    /// Memory isolation, if asked for.
    pub memory: Option<MemorySettings>,
}

impl Default for Settings {
    /// Weight 100, no limits, no memory isolation.
    fn default() -> Self {
        Request::default().settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::limit::{Knob, KnobLimit};

    fn pod(key: &str) -> Origin {
        Origin::Pod { key: key.to_string() }
    }

    #[test]
    fn key_names_round_trip() {
        for k in Key::ALL {
            assert_eq!(Key::from_name(k.name()), Some(k));
        }
        for bad in ["Weight", "memory", "priority", "memory.priority ", "wmark_ratio"] {
            assert_eq!(Key::from_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn good_values_are_taken() {
        let mut r = Request::default();
        r.set(Key::Weight, " 300 ", pod("w")).unwrap();
        r.set(Key::Limits, "iops-read=5000,bps_wr=1048576", pod("l")).unwrap();
        r.set(Key::MemoryPriority, "12", pod("p")).unwrap();
        r.set(Key::WmarkRatio, "80", pod("r")).unwrap();
        let s = r.settings();
        assert_eq!(s.weight, 300);
        assert_eq!(s.limits.knob(Knob::IopsRead), &KnobLimit::avg(5000));
        assert_eq!(s.limits.knob(Knob::BpsWrite), &KnobLimit::avg(1 << 20));
        let m = s.memory.unwrap();
        assert_eq!((m.priority, m.wmark_ratio, m.wmark_scale_factor), (12, 80, 50));
        assert_eq!(r.weight.unwrap().origin, pod("w"));
        // Bounds are inclusive.
        for (key, v) in [
            (Key::Weight, "1"),
            (Key::Weight, "10000"),
            (Key::MemoryPriority, "0"),
            (Key::WmarkRatio, "0"),
            (Key::WmarkRatio, "100"),
            (Key::WmarkScaleFactor, "1"),
            (Key::WmarkScaleFactor, "1000"),
            (Key::Limits, "none"),
            (Key::Limits, ""),
        ] {
            Request::default().set(key, v, pod("k")).unwrap_or_else(|e| panic!("{key} = {v}: {e}"));
        }
    }

    #[test]
    fn bad_values_are_refused_in_one_line_naming_the_rule() {
        let cases = [
            (Key::Weight, "0", "'0' is not a weight: use a whole number 1..=10000"),
            (Key::Weight, "10001", "1..=10000"),
            (Key::Weight, "-5", "1..=10000"),
            (Key::Weight, "+5", "1..=10000"),
            (Key::Weight, "1.5", "1..=10000"),
            (Key::Weight, "heavy", "'heavy' is not a weight"),
            (Key::Weight, "", "'' is not a weight"),
            (Key::Weight, "99999999999999999999999", "is not a weight"),
            (Key::Limits, "iops-read", "expected knob=value"),
            (Key::Limits, "iops-raed=5", "unknown knob"),
            (Key::Limits, "iops-read=-1", "non-negative integer"),
            (Key::Limits, "iops-read-max=10", "iops-read-max requires iops-read"),
            (Key::Limits, "iops-read=10,iops-read-max=5", "cannot be lower"),
            (Key::MemoryPriority, "13", "'13' is not a memory priority: use a whole number 0..=12"),
            (Key::MemoryPriority, "300", "0..=12"),
            (Key::MemoryPriority, "high", "0..=12"),
            (Key::WmarkRatio, "101", "wmark_ratio"),
            (Key::WmarkRatio, "x", "'x' is not a whole number"),
            (Key::WmarkScaleFactor, "0", "wmark_scale_factor"),
            (Key::WmarkScaleFactor, "1001", "wmark_scale_factor"),
        ];
        for (key, value, expect) in cases {
            let mut r = Request::default();
            let e = r.set(key, value, pod("k")).unwrap_err();
            assert!(e.contains(expect), "{key} = {value:?}: expected '{expect}' in '{e}'");
            assert!(!e.contains('\n'), "{e}");
            assert!(r.is_empty(), "{key} = {value:?}: nothing set after an error");
        }
    }

    #[test]
    fn overlays_replace_key_by_key_and_defaults_fill_the_rest() {
        let mut low = Request::default();
        low.set(Key::Weight, "50", Origin::QosDefault(QosClass::Burstable)).unwrap();
        low.set(Key::Limits, "iops-total=100", Origin::QosDefault(QosClass::Burstable)).unwrap();
        low.set(Key::MemoryPriority, "3", Origin::QosDefault(QosClass::Burstable)).unwrap();
        let mut top = Request::default();
        top.set(Key::Weight, "400", pod("w")).unwrap();
        top.set(Key::WmarkScaleFactor, "20", pod("s")).unwrap();
        let r = low.overlaid(&top);
        assert_eq!(r.weight.as_ref().unwrap().origin, pod("w"));
        assert!(r.limits.as_ref().unwrap().origin.is_admin());
        let s = r.settings();
        assert_eq!(s.weight, 400);
        assert_eq!(s.limits.knob(Knob::IopsTotal).avg, 100);
        let m = s.memory.unwrap();
        assert_eq!((m.priority, m.wmark_ratio, m.wmark_scale_factor), (3, 0, 20));
        let none = Settings::default();
        assert_eq!((none.weight, none.limits.is_limited(), none.memory), (100, false, None));
    }
}
