//! Fuzz targets of the agent's own files: the configuration (TOML, and every value in it — model and
//! QoS lines, patterns, weights, limits, memory settings and sizes) and the status file. Property
//! (see `ioshare_testkit::fuzz`): never a panic; a clear error (`FILE:LINE: key: what`, one
//! printable line), or a configuration whose every value is in range — for generated valid input
//! exactly the configuration it encodes. `IOSHARE_FUZZ_CASES` sets the cases.

use std::path::Path;
use std::time::Duration;

use ioshare_agent::desired::config::{DeviceConfig, GroupConfig};
use ioshare_agent::report::status::{DeviceLine, GroupLine};
use ioshare_agent::{Config, Status};
use ioshare_core::iocost::qos::{MAX_PERIOD_US, MIN_PERIOD_US};
use ioshare_core::{Limits, ModelConfig, ModelParams, QosConfig, QosParams, WEIGHT_MAX, WEIGHT_MIN};
use ioshare_host::DiskId;
use ioshare_memory::MemorySettings;
use ioshare_testkit::fuzz::{self, bytes, is_clear, lossy_text, mutated, text};
use proptest::prelude::*;
use proptest::sample::select;

/// A whole block device every Linux host has: the first entry of /sys/block, as `MAJ:MIN`.
fn some_device() -> &'static str {
    static DEVICE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DEVICE.get_or_init(|| {
        let entry = std::fs::read_dir("/sys/block").unwrap().flatten().next().expect("a block device");
        std::fs::read_to_string(entry.path().join("dev")).unwrap().trim().to_string()
    })
}

/// A model value and the parameters it stands for.
fn model() -> impl Strategy<Value = (String, ModelParams)> {
    let preset = select(vec!["hdd", "ssd_qd1", "ssd_dfl", "ssd_fast"])
        .prop_map(|p| (p.to_string(), ModelParams::preset(p).unwrap()));
    let line =
        (any::<[u64; 6]>(), any::<bool>()).prop_map(|([rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops], dev)| {
            let params = ModelParams { rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops };
            let device = dev.then(|| some_device().parse().unwrap());
            (ModelConfig { device, ctrl: ioshare_core::iocost::line::Ctrl::User, params }.to_string(), params)
        });
    let override_ = any::<u64>()
        .prop_map(|n| (format!("ssd_dfl rrandiops={n}"), ModelParams { rrandiops: n, ..ModelParams::SSD_DFL }));
    prop_oneof![preset, line, override_]
}

/// A QoS value and its parameters.
fn qos() -> impl Strategy<Value = (String, QosParams)> {
    (0u32..=10_000, any::<u64>(), 100u32..=1_000_000, 100u32..=1_000_000).prop_map(|(rpct, rlat, a, b)| {
        let params = QosParams {
            rppm: rpct * 100,
            rlat_us: rlat,
            min_ppm: a.min(b) * 100,
            max_ppm: a.max(b) * 100,
            ..QosParams::default()
        };
        (QosConfig { params, ..QosConfig::default() }.to_string(), params)
    })
}

/// Valid limits, as text, with their value.
fn limits() -> impl Strategy<Value = (String, Limits)> {
    select(vec![
        "none",
        "iops-read=5000",
        "bps-total=1048576,bps-total-max=2097152",
        "rbd_qos_iops_limit=100,iops-size=4096",
        "tick-min-ms=100,iops-write=7",
    ])
    .prop_map(|t| (t.to_string(), t.parse().unwrap()))
}

/// Valid memory settings, as an inline table, with their value.
fn memory() -> impl Strategy<Value = (String, MemorySettings)> {
    (0u8..=12, 0u32..=100, 1u32..=1000, prop::option::of((1u64..1 << 20, select(vec![("", 0), ("K", 10), ("M", 20), ("G", 30)]), any::<bool>())), any::<bool>(), 1u32..=100)
        .prop_map(|(priority, wmark_ratio, wmark_scale_factor, limit, oom_group, oom_pressure)| {
            let (limit_text, limit) = match limit {
                None => (String::new(), None),
                Some((n, _, true)) => (format!(", limit = {n}"), Some(n)),
                Some((n, (suffix, shift), false)) => (format!(", limit = \"{n}{suffix}\""), Some(n << shift)),
            };
            let text = format!(
                "{{ priority = {priority}, wmark_ratio = {wmark_ratio}, wmark_scale_factor = {wmark_scale_factor}{limit_text}, oom_group = {oom_group}, oom_pressure = {oom_pressure} }}"
            );
            (text, MemorySettings { priority, wmark_ratio, wmark_scale_factor, limit, oom_group, oom_pressure })
        })
}

/// One group rule, as TOML, with its value.
fn group() -> impl Strategy<Value = (String, GroupConfig)> {
    (
        "[a-z]{1,8}(/[a-z*?]{1,6})?/?",
        prop::option::of(WEIGHT_MIN..=WEIGHT_MAX),
        prop::option::of(limits()),
        prop::option::of(memory()),
    )
        .prop_map(|(pattern, weight, limits, memory)| {
            let mut text = format!("[[groups]]\ncgroup = \"{pattern}\"\n");
            if let Some(w) = weight {
                text += &format!("weight = {w}\n");
            }
            if let Some((l, _)) = &limits {
                text += &format!("limits = \"{l}\"\n");
            }
            if let Some((m, _)) = &memory {
                text += &format!("memory = {m}\n");
            }
            let group = GroupConfig {
                cgroup: pattern.trim_end_matches('/').to_string(),
                weight: weight.unwrap_or(ioshare_core::WEIGHT_DEFAULT),
                limits: limits.map(|(_, l)| l).unwrap_or_default(),
                memory: memory.map(|(_, m)| m),
            };
            (text, group)
        })
}

/// A valid configuration and what it holds.
fn config() -> impl Strategy<Value = (String, Config)> {
    (prop::option::of(20u64..=10_000), model(), prop::option::of(qos()), prop::collection::vec(group(), 1..4)).prop_map(
        |(period, (model_text, model), qos, groups)| {
            let mut text = period.map_or(String::new(), |p| format!("period_ms = {p}\n"));
            text += &format!("[[devices]]\npath = \"{}\"\nmodel = \"{model_text}\"\n", some_device());
            if let Some((q, _)) = &qos {
                text += &format!("qos = \"{q}\"\n");
            }
            let mut rules: Vec<GroupConfig> = Vec::new();
            for (t, g) in groups {
                if rules.iter().all(|r| r.cgroup != g.cgroup) {
                    text += &t;
                    rules.push(g);
                }
            }
            let device = DeviceConfig {
                device: DiskId::resolve(some_device()).unwrap(),
                model,
                qos: qos.map(|(_, q)| q),
                tuned: None,
            };
            let period = Duration::from_millis(period.unwrap_or(ioshare_agent::desired::config::PERIOD_DEFAULT_MS));
            (
                text,
                Config {
                    period,
                    devices: vec![device],
                    groups: rules,
                    memory_dry_run: false,
                    metrics: None,
                    kubernetes: None,
                },
            )
        },
    )
}

/// What must hold of any configuration's parse.
fn check_config(text: &str) -> Result<(), TestCaseError> {
    match Config::parse(text, Path::new("agent.toml")) {
        Ok(c) => {
            prop_assert!((20..=10_000).contains(&c.period.as_millis()));
            prop_assert!(!c.devices.is_empty() && !c.groups.is_empty());
            for d in &c.devices {
                if let Some(q) = d.qos {
                    prop_assert!((MIN_PERIOD_US..=MAX_PERIOD_US).contains(&q.period_us()));
                }
            }
            for (i, g) in c.groups.iter().enumerate() {
                prop_assert!((WEIGHT_MIN..=WEIGHT_MAX).contains(&g.weight));
                prop_assert!(g.limits.validate().is_ok());
                prop_assert!(g.memory.is_none_or(|m| m.validate().is_ok()));
                prop_assert!(ioshare_host::check_pattern(&g.cgroup).is_ok());
                prop_assert!(c.groups[..i].iter().all(|x| x.cgroup != g.cgroup));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(is_clear(&msg) && msg.starts_with("agent.toml:"), "{:?}", msg);
        }
    }
    Ok(())
}

/// A status as the agent writes it: any figures, any names.
fn status() -> impl Strategy<Value = Status> {
    // Binary fractions: JSON carries them exactly.
    let share = (0u32..4096).prop_map(|n| f64::from(n) / 1024.0);
    let group = (
        "[a-z/]{1,20}",
        1u32..=10_000,
        share.clone(),
        share.clone(),
        share.clone(),
        any::<[u64; 4]>(),
        select(vec!["idle", "limited", "kernel"]),
    )
        .prop_map(|(cgroup, weight, hweight_active, hweight_inuse, usage_share, limits, state)| GroupLine {
            cgroup,
            weight,
            hweight_active,
            hweight_inuse,
            usage_share,
            limits,
            state: state.into(),
            debt_us: 0,
            note: String::new(),
            iocost: None,
        });
    let device = (text(8), any::<i32>(), share.clone(), any::<[u64; 2]>(), prop::collection::vec(group, 0..4))
        .prop_map(|(device, busy_level, vrate, target_us, groups)| DeviceLine {
            device,
            dev: "7:3".into(),
            vrate_pct: vrate * 100.0,
            busy_level,
            lat_us: [vrate * 1000.0, 0.0],
            target_us,
            missed_ppm: [0, 0],
            model: None,
            groups,
            iocost: None,
            note: String::new(),
        });
    (any::<u32>(), any::<u64>(), 0u32..1 << 30, prop::collection::vec(device, 0..3)).prop_map(
        |(pid, periods, t, devices)| Status {
            pid,
            pid_start_ticks: Some(u64::from(t) * 7),
            period_ms: u64::from(t % 10_000),
            backend: "userspace".into(),
            root: "/sys/fs/cgroup/blkio".into(),
            periods,
            updated_unix: f64::from(t) + 0.25,
            devices,
            memory: Vec::new(),
            shares: None,
            kubernetes: None,
            overwritten: 0,
            drift: Vec::new(),
        },
    )
}

proptest! {
    #![proptest_config(fuzz::config())]

    #[test]
    fn configurations(text in prop_oneof![1 => lossy_text(200), 1 => text(100), 6 => mutated(config().prop_map(|(t, _)| t))]) {
        check_config(&text)?;
    }

    #[test]
    fn valid_configurations_give_what_they_say((text, config) in config()) {
        let parsed = Config::parse(&text, Path::new("agent.toml"));
        prop_assert_eq!(parsed.as_ref().ok(), Some(&config), "{:?}\n{}", parsed.as_ref().err().map(ToString::to_string), text);
    }

    #[test]
    fn status_files(file in prop_oneof![1 => bytes(200), 3 => mutated(status().prop_map(|s| serde_json::to_string_pretty(&s).unwrap())).prop_map(String::into_bytes)]) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ioshare_agent::report::status::STATUS_FILE), &file).unwrap();
        match Status::read(dir.path()) {
            Ok(status) => {
                let _ = status.to_string();
            }
            Err(e) => prop_assert!(is_clear(&e.to_string()), "{:?}", e.to_string()),
        }
    }

    #[test]
    fn status_files_read_back_what_was_written(status in status()) {
        let dir = tempfile::tempdir().unwrap();
        status.write(dir.path()).unwrap();
        prop_assert_eq!(Status::read(dir.path()).unwrap(), status);
    }
}

// Regressions: each input the targets above found, fixed.

/// Found by `configurations` (`\u{e}=`): the error quoted the key and the TOML parser's message
/// with their control characters raw; they are escaped now, so the error is one printable line.
#[test]
fn a_config_error_quotes_control_characters_escaped() {
    for (text, quoted) in
        [("\u{e}=", "agent.toml:1: \\u{e}: "), ("period_ms = 100\n\u{7}bell = 1\n", "agent.toml:2: \\u{7}bell: ")]
    {
        let msg = Config::parse(text, Path::new("agent.toml")).unwrap_err().to_string();
        assert!(is_clear(&msg) && msg.starts_with(quoted), "{msg}");
    }
}
