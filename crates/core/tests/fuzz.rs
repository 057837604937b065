//! Fuzz targets of the core's text formats: `io.cost.model` and `io.cost.qos` lines, `MAJ:MIN`, and
//! the limit syntax (compact `knob=value,...` and TOML). Property (see `ioshare_testkit::fuzz`): never
//! a panic; a clear error naming the format, or a value that prints and parses back to itself — and
//! for generated valid input, exactly the value it encodes. `IOSHARE_FUZZ_CASES` sets the cases.

use ioshare_core::iocost::line::{Ctrl, DevNum};
use ioshare_core::iocost::qos::{MAX_PERIOD_US, MIN_PERIOD_US, VRATE_MAX_PPM, VRATE_MIN_PPM};
use ioshare_core::limit::{Knob, KnobLimit, Scope, Unit};
use ioshare_core::{Limits, LinearModel, ModelConfig, ModelParams, QosConfig, QosParams};
use ioshare_testkit::fuzz::{self, is_clear, lossy_text, mutated, text, token};
use proptest::prelude::*;
use proptest::sample::select;

/// Any text a parser of one line may meet: bytes, characters, or a valid line mutated.
fn any_line(valid: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop_oneof![1 => lossy_text(64), 1 => text(48), 4 => mutated(valid)]
}

fn dev() -> impl Strategy<Value = DevNum> {
    (any::<u32>(), any::<u32>()).prop_map(|(major, minor)| DevNum { major, minor })
}

fn ctrl() -> impl Strategy<Value = Ctrl> {
    prop_oneof![Just(Ctrl::Auto), Just(Ctrl::User)]
}

fn model_params() -> impl Strategy<Value = ModelParams> {
    any::<[u64; 6]>().prop_map(|[rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops]| ModelParams {
        rbps,
        rseqiops,
        rrandiops,
        wbps,
        wseqiops,
        wrandiops,
    })
}

fn model_config() -> impl Strategy<Value = ModelConfig> {
    (prop::option::of(dev()), ctrl(), model_params()).prop_map(|(device, ctrl, params)| ModelConfig {
        device,
        ctrl,
        params,
    })
}

/// A percentile or vrate bound in ppm as the kernel's two-decimal form can hold it.
fn ppm(range: std::ops::RangeInclusive<u32>) -> impl Strategy<Value = u32> {
    range.prop_map(|centi| centi * 100)
}

fn qos_config() -> impl Strategy<Value = QosConfig> {
    let bounds = (ppm(VRATE_MIN_PPM / 100..=VRATE_MAX_PPM / 100), ppm(VRATE_MIN_PPM / 100..=VRATE_MAX_PPM / 100))
        .prop_map(|(a, b)| (a.min(b), a.max(b)));
    (prop::option::of(dev()), ctrl(), any::<bool>(), ppm(0..=10_000), ppm(0..=10_000), any::<[u64; 2]>(), bounds)
        .prop_map(|(device, ctrl, enable, rppm, wppm, [rlat_us, wlat_us], (min_ppm, max_ppm))| QosConfig {
            device,
            ctrl,
            params: QosParams { enable, rppm, rlat_us, wppm, wlat_us, min_ppm, max_ppm },
        })
}

/// What must hold of any model line's parse.
fn check_model(line: &str) -> Result<(), TestCaseError> {
    match line.parse::<ModelConfig>() {
        Ok(cfg) => {
            prop_assert_eq!(cfg.to_string().parse::<ModelConfig>(), Ok(cfg), "printed back: {}", cfg);
            LinearModel::new(cfg.params);
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(is_clear(&msg) && msg.starts_with("invalid io.cost.model"), "{:?}", msg);
        }
    }
    Ok(())
}

/// What must hold of any QoS line's parse: the period it gives is within the kernel's bounds.
fn check_qos(line: &str) -> Result<(), TestCaseError> {
    match line.parse::<QosConfig>() {
        Ok(cfg) => {
            prop_assert_eq!(cfg.to_string().parse::<QosConfig>(), Ok(cfg), "printed back: {}", cfg);
            prop_assert!((MIN_PERIOD_US..=MAX_PERIOD_US).contains(&cfg.params.period_us()));
            prop_assert!(cfg.params.min_ppm <= cfg.params.max_ppm);
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(is_clear(&msg) && msg.starts_with("invalid io.cost.qos"), "{:?}", msg);
        }
    }
    Ok(())
}

/// What must hold of any compact limits' parse: printing gives it back; validation answers.
fn check_limits(text: &str) -> Result<(), TestCaseError> {
    match text.parse::<Limits>() {
        Ok(limits) => {
            prop_assert_eq!(limits.to_string().parse::<Limits>(), Ok(limits.clone()), "printed back: {}", limits);
            if let Err(e) = limits.validate() {
                prop_assert!(is_clear(&e.to_string()), "{:?}", e.to_string());
            }
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(is_clear(&msg) && msg.starts_with("invalid limits"), "{:?}", msg);
        }
    }
    Ok(())
}

/// One settable field of [`Limits`] under one of its accepted names, and how it sets a value.
#[derive(Clone, Debug)]
struct Named {
    name: String,
    field: (usize, Part),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Part {
    Avg,
    Max,
    MaxLength,
    IopsSize,
    TickMin,
}

impl Named {
    fn set(&self, limits: &mut Limits, value: u64) {
        let (k, part) = self.field;
        match part {
            Part::Avg => limits.knobs[k].avg = value,
            Part::Max => limits.knobs[k].max = value,
            Part::MaxLength => limits.knobs[k].max_length = Some(value),
            Part::IopsSize => limits.iops_size = value,
            Part::TickMin => limits.tick_min_ms = Some(value),
        }
    }
}

/// Every name of every field: ours, QEMU's legacy ones, librbd's.
fn every_name() -> Vec<Named> {
    let mut out = Vec::new();
    for knob in Knob::ALL {
        let unit = if knob.unit() == Unit::Iops { "iops" } else { "bps" };
        let (qemu, rbd) = match knob.scope() {
            Scope::Total => (unit.to_string(), format!("rbd_qos_{unit}")),
            Scope::Read => (format!("{unit}_rd"), format!("rbd_qos_read_{unit}")),
            Scope::Write => (format!("{unit}_wr"), format!("rbd_qos_write_{unit}")),
        };
        let k = knob.index();
        for (part, ours, legacy, librbd) in [
            (Part::Avg, knob.name().to_string(), qemu.clone(), format!("{rbd}_limit")),
            (Part::Max, format!("{knob}-max"), format!("{qemu}_max"), format!("{rbd}_burst")),
            (
                Part::MaxLength,
                format!("{knob}-max-length"),
                format!("{qemu}_max_length"),
                format!("{rbd}_burst_seconds"),
            ),
        ] {
            for name in [ours.clone(), format!("throttling.{ours}"), legacy, librbd, ours.to_uppercase()] {
                out.push(Named { name, field: (k, part) });
            }
        }
    }
    for name in ["iops-size", "iops_size", "IOPS-SIZE"] {
        out.push(Named { name: name.into(), field: (0, Part::IopsSize) });
    }
    for name in ["tick-min-ms", "rbd_qos_schedule_tick_min", "tick_min_ms"] {
        out.push(Named { name: name.into(), field: (0, Part::TickMin) });
    }
    out
}

/// Valid compact limits: distinct fields under any of their names, any values, spaces around
/// keys and values; with the value they encode.
fn valid_limits() -> impl Strategy<Value = (String, Limits)> {
    let field = (select(every_name()), any::<u64>(), select(vec!["", " ", "  "]));
    prop::collection::vec(field, 0..8).prop_map(|fields| {
        let (mut items, mut limits, mut seen) = (Vec::new(), Limits::default(), Vec::new());
        for (named, value, pad) in fields {
            if seen.contains(&named.field) {
                continue;
            }
            seen.push(named.field);
            named.set(&mut limits, value);
            items.push(format!("{pad}{}{pad}={pad}{value}", named.name));
        }
        let text = if items.is_empty() { "none".to_string() } else { items.join(",") };
        (text, limits)
    })
}

proptest! {
    #![proptest_config(fuzz::config())]

    #[test]
    fn model_lines(line in any_line(model_config().prop_map(|c| c.to_string()))) {
        check_model(&line)?;
    }

    #[test]
    fn model_lines_from_presets(
        line in any_line((select(vec!["hdd", "ssd_qd1", "ssd_dfl", "ssd_fast"]), select(vec!["", " rbps=1", " wrandiops=7 ctrl=auto"]))
            .prop_map(|(p, extra)| format!("{p}{extra}"))),
    ) {
        check_model(&line)?;
    }

    #[test]
    fn valid_model_lines_give_their_value(cfg in model_config()) {
        prop_assert_eq!(cfg.to_string().parse::<ModelConfig>(), Ok(cfg));
    }

    #[test]
    fn qos_lines(line in any_line(qos_config().prop_map(|c| c.to_string()))) {
        check_qos(&line)?;
    }

    #[test]
    fn valid_qos_lines_give_their_value(cfg in qos_config()) {
        prop_assert_eq!(cfg.to_string().parse::<QosConfig>(), Ok(cfg));
        check_qos(&cfg.to_string())?;
    }

    #[test]
    fn device_numbers(word in any_line(dev().prop_map(|d| d.to_string()))) {
        if let Ok(dev) = word.parse::<DevNum>() {
            prop_assert_eq!(dev.to_string().parse::<DevNum>(), Ok(dev));
        }
    }

    #[test]
    fn compact_limits(text in any_line(valid_limits().prop_map(|(t, _)| t))) {
        check_limits(&text)?;
    }

    #[test]
    fn valid_compact_limits_give_their_value((text, limits) in valid_limits()) {
        prop_assert_eq!(text.parse::<Limits>(), Ok(limits.clone()));
        prop_assert_eq!(limits.to_string().parse::<Limits>(), Ok(limits));
    }

    #[test]
    fn limits_in_toml(body in any_line(valid_limits().prop_map(|(t, _)| {
        t.split(',').filter(|i| *i != "none").map(|i| i.replacen('=', " = ", 1)).collect::<Vec<_>>().join("\n")
    }))) {
        #[derive(serde::Deserialize)]
        struct Group {
            #[allow(dead_code)]
            limits: Limits,
        }
        if let Err(e) = toml::from_str::<Group>(&format!("[limits]\n{body}\n")) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn limits_values_anywhere(key in select(every_name()), value in token()) {
        check_limits(&format!("{}={value}", key.name))?;
    }
}

// Regressions: each input the targets above found, fixed.

/// Found by `qos_lines` (`rlat=9223372036854775808`): the planning period, latency target ×
/// multiplier, overflowed (a panic in debug builds, a wrapped period in release); it saturates now.
#[test]
fn a_huge_latency_target_gives_the_longest_period() {
    for line in ["rlat=18446744073709551615", "rpct=50 rlat=18446744073709551615", "wlat=9223372036854775808"] {
        let cfg: QosConfig = line.parse().unwrap();
        assert_eq!(cfg.params.period_us(), MAX_PERIOD_US, "{line}");
    }
}

/// Found by `model_lines` (`\0`) and `compact_limits` (`\u{e}`): errors quoted the input's control
/// characters raw (a NUL, a newline, a terminal escape); they are escaped now, the message one line.
#[test]
fn errors_quote_control_characters_escaped() {
    for (input, quoted) in [
        ("\0".parse::<ModelConfig>().map(drop), "'\\u{0}'"),
        ("rlat=\u{1b}[31m".parse::<QosConfig>().map(drop), "'rlat=\\u{1b}[31m'"),
        ("iops-total=1\nbps-read=2".parse::<Limits>().map(drop), "'iops-total=1\\nbps-read=2'"),
    ] {
        let msg = input.unwrap_err().to_string();
        assert!(is_clear(&msg) && msg.contains(quoted), "{msg}");
    }
}

/// Names of every family set the same field (a check of the target's own name list).
#[test]
fn knob_limit_is_what_the_names_set() {
    let limits: Limits = "rbd_qos_read_iops_burst_seconds=3,IOPS_RD=10,iops-read-max=20".parse().unwrap();
    assert_eq!(*limits.knob(Knob::IopsRead), KnobLimit::burst(10, 20, 3));
}
