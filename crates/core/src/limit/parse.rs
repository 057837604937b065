//! Limits as text: the compact `knob=value,...` form of the command line, and TOML/JSON via serde.
//!
//! Keys are matched after lower-casing and turning `_` into `-`, so `iops_total` and `iops-total` are the
//! same key. Three families of names are accepted, so that users can paste what they already have:
//! - ours (QEMU's modern names): `iops-total`, `iops-read-max`, `bps-write-max-length`, `iops-size`,
//!   `tick-min-ms`, optionally prefixed by `throttling.` as on a QEMU `-drive` line;
//! - QEMU's legacy `-drive` names: `iops`, `iops_rd`, `bps_wr`, `iops_max`, `bps_rd_max_length`;
//! - librbd's options: `rbd_qos_iops_limit`, `rbd_qos_read_bps_burst`,
//!   `rbd_qos_write_iops_burst_seconds`, `rbd_qos_schedule_tick_min`.
//!
//! Setting one field twice (even under two names) is an error. Printing uses the canonical names, and
//! printing then parsing gives back the same [`Limits`].

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;
use crate::limit::knobs::{Knob, Limits, Scope, Unit};

const FORMAT: &str = "limits";

/// One settable field of [`Limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Avg(Knob),
    Max(Knob),
    MaxLength(Knob),
    IopsSize,
    TickMin,
}

impl Field {
    /// Resolves a key under any of the accepted names.
    fn parse(key: &str) -> Option<Field> {
        let key = key.trim().to_ascii_lowercase().replace('_', "-");
        let key = key.strip_prefix("throttling.").unwrap_or(&key);
        match key {
            "iops-size" => return Some(Field::IopsSize),
            "tick-min-ms" | "rbd-qos-schedule-tick-min" => return Some(Field::TickMin),
            _ => {}
        }
        match key.strip_prefix("rbd-qos-") {
            Some(rest) => Field::parse_librbd(rest),
            None => Field::parse_qemu(key),
        }
    }

    /// `[read-|write-]{iops|bps}-{limit|burst|burst-seconds}`.
    fn parse_librbd(rest: &str) -> Option<Field> {
        let (scope, rest) = match rest.split_once('-')? {
            ("read", rest) => (Scope::Read, rest),
            ("write", rest) => (Scope::Write, rest),
            _ => (Scope::Total, rest),
        };
        let (unit, part) = rest.split_once('-')?;
        let knob = Knob::new(parse_unit(unit)?, scope);
        match part {
            "limit" => Some(Field::Avg(knob)),
            "burst" => Some(Field::Max(knob)),
            "burst-seconds" => Some(Field::MaxLength(knob)),
            _ => None,
        }
    }

    /// `{iops|bps}[-total|-read|-write|-rd|-wr][-max[-length]]`.
    fn parse_qemu(key: &str) -> Option<Field> {
        let (unit, rest) = key.split_once('-').unwrap_or((key, ""));
        let unit = parse_unit(unit)?;
        let (scope, part) = match rest.split_once('-').unwrap_or((rest, "")) {
            ("total", part) => (Scope::Total, part),
            ("read" | "rd", part) => (Scope::Read, part),
            ("write" | "wr", part) => (Scope::Write, part),
            _ => (Scope::Total, rest),
        };
        let knob = Knob::new(unit, scope);
        match part {
            "" => Some(Field::Avg(knob)),
            "max" => Some(Field::Max(knob)),
            "max-length" => Some(Field::MaxLength(knob)),
            _ => None,
        }
    }

    /// Canonical name.
    fn name(self) -> String {
        match self {
            Field::Avg(k) => k.name().to_string(),
            Field::Max(k) => format!("{k}-max"),
            Field::MaxLength(k) => format!("{k}-max-length"),
            Field::IopsSize => "iops-size".to_string(),
            Field::TickMin => "tick-min-ms".to_string(),
        }
    }

    /// The value in `limits`, if set.
    fn get(self, limits: &Limits) -> Option<u64> {
        let nonzero = |v: u64| (v > 0).then_some(v);
        match self {
            Field::Avg(k) => nonzero(limits.knob(k).avg),
            Field::Max(k) => nonzero(limits.knob(k).max),
            Field::MaxLength(k) => limits.knob(k).max_length,
            Field::IopsSize => nonzero(limits.iops_size),
            Field::TickMin => limits.tick_min_ms,
        }
    }

    /// Stores `value` in `limits`.
    fn set(self, limits: &mut Limits, value: u64) {
        match self {
            Field::Avg(k) => limits.knobs[k.index()].avg = value,
            Field::Max(k) => limits.knobs[k.index()].max = value,
            Field::MaxLength(k) => limits.knobs[k.index()].max_length = Some(value),
            Field::IopsSize => limits.iops_size = value,
            Field::TickMin => limits.tick_min_ms = Some(value),
        }
    }

    /// Every field, in printing order.
    fn all() -> impl Iterator<Item = Field> {
        Knob::ALL
            .into_iter()
            .flat_map(|k| [Field::Avg(k), Field::Max(k), Field::MaxLength(k)])
            .chain([Field::IopsSize, Field::TickMin])
    }
}

fn parse_unit(s: &str) -> Option<Unit> {
    match s {
        "iops" => Some(Unit::Iops),
        "bps" => Some(Unit::Bps),
        _ => None,
    }
}

fn parse_error(input: &str, reason: impl Into<String>) -> Error {
    Error::Parse { format: FORMAT, input: input.to_string(), reason: reason.into() }
}

impl Limits {
    /// Builds limits from `(key, value)` pairs under any accepted name; the values are not validated
    /// here (see [`Limits::validate`]).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Result<Limits, Error> {
        let mut limits = Limits::default();
        let mut seen: Vec<(Field, &str)> = Vec::new();
        for (key, value) in pairs {
            let field = Field::parse(key).ok_or_else(|| {
                parse_error(
                    key,
                    "unknown knob: use iops-{total,read,write}, bps-{total,read,write}, each optionally \
                     with -max or -max-length, iops-size or tick-min-ms (QEMU and rbd_qos_* names work too)",
                )
            })?;
            if let Some((_, first)) = seen.iter().find(|(f, _)| *f == field) {
                let reason = format!("{} is set twice (as '{first}' and '{key}'): keep one", field.name());
                return Err(parse_error(key, reason));
            }
            seen.push((field, key));
            field.set(&mut limits, value);
        }
        Ok(limits)
    }
}

impl FromStr for Limits {
    type Err = Error;

    /// Parses `knob=value,knob=value,...` (`none` or an empty string for no limits).
    fn from_str(s: &str) -> Result<Self, Error> {
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(Limits::default());
        }
        let mut pairs = Vec::new();
        for item in s.split(',') {
            let (key, value) =
                item.split_once('=').ok_or_else(|| parse_error(item, "expected knob=value, like iops-total=5000"))?;
            let value = value
                .trim()
                .parse()
                .map_err(|_| parse_error(item, "expected a non-negative integer value, like iops-total=5000"))?;
            pairs.push((key, value));
        }
        Limits::from_pairs(pairs)
    }
}

impl fmt::Display for Limits {
    /// The compact form with canonical names, `none` when nothing is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for field in Field::all() {
            if let Some(value) = field.get(self) {
                write!(f, "{}{}={value}", if first { "" } else { "," }, field.name())?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

impl Serialize for Limits {
    /// A map of the set fields under their canonical names.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let map: BTreeMap<String, u64> = Field::all().filter_map(|f| Some((f.name(), f.get(self)?))).collect();
        map.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Limits {
    /// A map of knob names (any accepted alias) to integers.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, u64>::deserialize(deserializer)?;
        Limits::from_pairs(map.iter().map(|(k, v)| (k.as_str(), *v))).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::knobs::KnobLimit;

    #[test]
    fn every_alias_family_names_the_same_field() {
        let groups: &[(&[&str], Field)] = &[
            (
                &["iops-total", "iops_total", "iops", "throttling.iops-total", "rbd_qos_iops_limit"],
                Field::Avg(Knob::IopsTotal),
            ),
            (&["iops-total-max", "iops_max", "rbd_qos_iops_burst"], Field::Max(Knob::IopsTotal)),
            (
                &["iops-total-max-length", "iops_max_length", "rbd_qos_iops_burst_seconds"],
                Field::MaxLength(Knob::IopsTotal),
            ),
            (&["bps-read", "bps_rd", "rbd_qos_read_bps_limit", "BPS_READ"], Field::Avg(Knob::BpsRead)),
            (&["bps-write-max", "bps_wr_max", "rbd_qos_write_bps_burst"], Field::Max(Knob::BpsWrite)),
            (
                &["iops-read-max-length", "iops_rd_max_length", "rbd_qos_read_iops_burst_seconds"],
                Field::MaxLength(Knob::IopsRead),
            ),
            (&["iops-write", "iops_wr", "rbd_qos_write_iops_limit"], Field::Avg(Knob::IopsWrite)),
            (&["bps-total", "bps", "rbd_qos_bps_limit"], Field::Avg(Knob::BpsTotal)),
            (&["iops-size", "iops_size"], Field::IopsSize),
            (&["tick-min-ms", "rbd_qos_schedule_tick_min"], Field::TickMin),
        ];
        for (names, field) in groups {
            for name in *names {
                assert_eq!(Field::parse(name), Some(*field), "{name}");
            }
        }
        for bad in ["iops-total-burst", "rbd_qos_iops", "rbd_qos_iops_max", "io", "bps-total-max-len", "iopstotal"] {
            assert_eq!(Field::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn compact_form_parses_and_prints_back() {
        let limits: Limits =
            "iops-total=5000,rbd_qos_iops_burst=20000,iops_max_length=60,bps_rd=1048576,iops-size=4096"
                .parse()
                .unwrap();
        let expected = Limits { iops_size: 4096, ..Limits::none() }
            .with(Knob::IopsTotal, KnobLimit::burst(5000, 20_000, 60))
            .with(Knob::BpsRead, KnobLimit::avg(1 << 20));
        assert_eq!(limits, expected);
        let printed = limits.to_string();
        assert_eq!(
            printed,
            "iops-total=5000,iops-total-max=20000,iops-total-max-length=60,bps-read=1048576,iops-size=4096"
        );
        assert_eq!(printed.parse::<Limits>().unwrap(), limits);
        assert_eq!(Limits::none().to_string(), "none");
        assert_eq!("none".parse::<Limits>().unwrap(), Limits::none());
    }

    #[test]
    fn malformed_compact_form_is_rejected_with_the_offending_item() {
        let cases = [
            ("iops-total", "expected knob=value"),
            ("iops-total=fast", "non-negative integer"),
            ("iops-total=-5", "non-negative integer"),
            ("iops-totl=5", "unknown knob"),
            ("iops-total=5,rbd_qos_iops_limit=6", "iops-total is set twice (as 'iops-total' and 'rbd_qos_iops_limit')"),
        ];
        for (input, expected) in cases {
            let msg = input.parse::<Limits>().unwrap_err().to_string();
            assert!(msg.contains(expected), "{input}: expected '{expected}' in '{msg}'");
        }
    }

    #[test]
    fn toml_accepts_aliases_and_round_trips() {
        #[derive(Deserialize, Serialize)]
        struct Group {
            limits: Limits,
        }
        let text = "[limits]\nrbd_qos_iops_limit = 1000\nrbd_qos_iops_burst = 5000\nrbd_qos_iops_burst_seconds = 60\n\
                    tick-min-ms = 100\n";
        let group: Group = toml::from_str(text).unwrap();
        let expected =
            Limits { tick_min_ms: Some(100), ..Limits::none() }.with(Knob::IopsTotal, KnobLimit::burst(1000, 5000, 60));
        assert_eq!(group.limits, expected);
        let back: Group = toml::from_str(&toml::to_string(&group).unwrap()).unwrap();
        assert_eq!(back.limits, expected);
        let bad = toml::from_str::<Group>("[limits]\niops-totl = 5\n").err().unwrap().to_string();
        assert!(bad.contains("iops-totl") && bad.contains("unknown knob"), "{bad}");
        // Values that are not non-negative integers: TOML's error quotes the offending line.
        for line in ["bps-read = -5", "bps-read = 1.5", "bps-read = \"fast\""] {
            let bad = toml::from_str::<Group>(&format!("[limits]\n{line}\n")).err().unwrap().to_string();
            assert!(bad.contains(line), "{bad}");
        }
    }
}
