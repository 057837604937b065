//! Fuzz targets of every kernel and state-file format the host crate reads: `io.stat`, the v1
//! `blkio.*` statistics, `memory.events`, `memory.pressure` (PSI), `memory.max`/`memory.high`,
//! `memory.oom_control`, `memory.stat`, `/sys/block/*/stat`, mountinfo and `/proc/self/cgroup`,
//! `io.max`, `io.weight`, cgroup patterns, `queue/scheduler`, the agent's state file and
//! `/proc/PID/stat`; the parsers the crate keeps to itself are reached through [`ioshare_host::formats`].
//!
//! Property (see `ioshare_testkit::fuzz`): never a panic; a clear error naming the format, or a
//! correct value — for generated valid input exactly the value it encodes, and where there is a
//! printer, printing and parsing again gives the value back. `IOSHARE_FUZZ_CASES` sets the cases.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ioshare_core::iocost::line::DevNum;
use ioshare_testkit::fuzz::{self, bytes, is_clear, lines, lossy_text, mutated, text};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestRunner;

use ioshare_host::formats::{
    cgroup_dir, encode_state_line, find_mount, own_cgroup, parse_rwstat, parse_scheduler, read_state_file, stat_value,
    v1_mounts, CgroupMount, Header, MountedHierarchy, StatsSource,
};
use ioshare_host::memcg::v1::OomControl;
use ioshare_host::memcg::v2::{format_limit, parse_limit, MemoryEvents, Pressure};
use ioshare_host::{
    check_pattern, find_cgroups, glob_matches, parse_io_stat, BlkioStats, Change, DeviceStats, DiskStats, Entry, IoMax,
    IoWeight, ProcessStat, RwCounts,
};

/// Any text a parser of a whole file may meet: bytes, characters, or valid text mutated.
fn any_text(valid: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop_oneof![1 => lossy_text(128), 1 => text(64), 4 => mutated(valid)]
}

/// The error of a parse must be clear and name its format.
fn clear_error<T: std::fmt::Debug>(parsed: &ioshare_host::Result<T>, format: &str) -> Result<(), TestCaseError> {
    if let Err(e) = parsed {
        let msg = e.to_string();
        prop_assert!(is_clear(&msg) && msg.starts_with(&format!("invalid {format}")), "{:?}", msg);
    }
    Ok(())
}

fn dev() -> impl Strategy<Value = DevNum> {
    (0u32..4096, 0u32..1 << 20).prop_map(|(major, minor)| DevNum { major, minor })
}

/// Distinct devices, in a random order.
fn devs(max: usize) -> impl Strategy<Value = Vec<DevNum>> {
    prop::collection::btree_set((0u32..4096, 0u32..1 << 20), 0..=max)
        .prop_map(|s| s.into_iter().map(|(major, minor)| DevNum { major, minor }).collect::<Vec<_>>())
        .prop_shuffle()
}

/// A valid `io.stat` file (unknown keys included) and the counters it holds.
fn io_stat_file() -> impl Strategy<Value = (String, BlkioStats)> {
    devs(4)
        .prop_flat_map(|devs| {
            let n = devs.len();
            (Just(devs), prop::collection::vec((any::<[u64; 6]>(), any::<bool>()), n))
        })
        .prop_map(|(devs, counters)| {
            let mut text = String::new();
            let mut stats = BlkioStats::default();
            for (dev, ([rb, wb, ri, wi, db, di], iocost)) in devs.into_iter().zip(counters) {
                text += &format!("{dev} rbytes={rb} wbytes={wb} rios={ri} wios={wi} dbytes={db} dios={di}");
                if iocost {
                    text += " cost.vrate=100.00 cost.usage=5 cost.wait=0 cost.indebt=0 cost.indelay=0";
                }
                text.push('\n');
                let (ios, bytes) =
                    (RwCounts { read: ri, write: wi, discard: di }, RwCounts { read: rb, write: wb, discard: db });
                stats.devices.push(DeviceStats { dev, ios, bytes });
            }
            (text, stats)
        })
}

/// A valid v1 rwstat file (`7:0 Read 48` ... `Total 348`) and its counts per device.
fn rwstat_file() -> impl Strategy<Value = (String, Vec<(DevNum, RwCounts)>)> {
    devs(3)
        .prop_flat_map(|devs| {
            let n = devs.len();
            (Just(devs), prop::collection::vec(any::<[u64; 3]>(), n), any::<u64>())
        })
        .prop_map(|(devs, counts, total)| {
            let mut text = String::new();
            let mut expected = Vec::new();
            for (dev, [read, write, discard]) in devs.into_iter().zip(counts) {
                let (sync, sum) = (read.wrapping_add(write), read.wrapping_add(write).wrapping_add(discard));
                for (op, v) in [
                    ("Read", read),
                    ("Write", write),
                    ("Sync", sync),
                    ("Async", 0),
                    ("Discard", discard),
                    ("Total", sum),
                ] {
                    text += &format!("{dev} {op} {v}\n");
                }
                expected.push((dev, RwCounts { read, write, discard }));
            }
            text += &format!("Total {total}\n");
            (text, expected)
        })
}

/// `key value` lines of `keys`, each with any count; and the counts.
fn key_value_file(keys: &'static [&'static str]) -> impl Strategy<Value = (String, BTreeMap<&'static str, u64>)> {
    prop::collection::vec(any::<u64>(), keys.len()).prop_map(move |values| {
        let map: BTreeMap<&str, u64> = keys.iter().copied().zip(values).collect();
        let text = keys.iter().map(|k| format!("{k} {}\n", map[k])).collect();
        (text, map)
    })
}

const EVENT_KEYS: &[&str] = &["low", "high", "max", "oom", "oom_kill", "oom_group_kill"];
const OOM_KEYS: &[&str] = &["oom_kill_disable", "under_oom", "oom_kill"];
const STAT_KEYS: &[&str] =
    &["cache", "rss", "rss_huge", "mapped_file", "pgmajfault", "total_cache", "total_rss", "total_pgmajfault"];

/// A valid PSI file; its `some` and `full` (avg10 in hundredths of a percent, total µs).
fn pressure_file() -> impl Strategy<Value = (String, [(u32, u64); 2])> {
    (any::<[(u32, u64); 2]>(), any::<[u32; 4]>()).prop_map(|(lines, avgs)| {
        let lines = lines.map(|(avg, total)| (avg % 10_001, total));
        let pct = |c: u32| format!("{}.{:02}", c / 100, c % 100);
        let text = format!(
            "some avg10={} avg60={} avg300={} total={}\nfull avg10={} avg60={} avg300={} total={}\n",
            pct(lines[0].0),
            pct(avgs[0] % 10_001),
            pct(avgs[1] % 10_001),
            lines[0].1,
            pct(lines[1].0),
            pct(avgs[2] % 10_001),
            pct(avgs[3] % 10_001),
            lines[1].1
        );
        (text, lines)
    })
}

/// A valid `/sys/block/X/stat` (11 to 17 numbers, padded as the kernel prints them) and its numbers.
fn block_stat() -> impl Strategy<Value = (String, Vec<u64>)> {
    prop::collection::vec(any::<u64>(), 11..=17)
        .prop_map(|n| (n.iter().map(|v| format!("{v:>8}")).collect::<Vec<_>>().join(" ") + "\n", n))
}

/// `/proc/diskstats` lines: the same numbers after `MAJ MIN NAME` (which a stat-file parser refuses).
fn diskstats_line() -> impl Strategy<Value = String> {
    (dev(), "[a-z]{1,8}[0-9]{0,2}", block_stat())
        .prop_map(|(d, name, (numbers, _))| format!("{:>4} {:>7} {name} {numbers}", d.major, d.minor))
}

/// A mount point with any characters (no NUL), escaped as mountinfo escapes them; and unescaped.
fn mount_point() -> impl Strategy<Value = (String, String)> {
    prop::collection::vec(prop_oneof![4 => "[a-z0-9_.-]{1,6}", 1 => text(4)], 1..4).prop_map(|parts| {
        let point = format!("/{}", parts.join("/").replace('\0', ""));
        let escaped = point
            .chars()
            .map(|c| match c {
                ' ' | '\t' | '\n' | '\\' => format!("\\{:03o}", c as u32),
                c => c.to_string(),
            })
            .collect();
        (escaped, point)
    })
}

/// A mountinfo file with a v1 `blkio` hierarchy and a v2 one at the mount points given, among other
/// mounts; with the two mount points.
fn mountinfo() -> impl Strategy<Value = (String, PathBuf, PathBuf)> {
    (mount_point(), mount_point(), "(/|/[a-z]{1,8})", select(vec!["", " shared:7", " shared:7 master:1"])).prop_map(
        |((v1_esc, v1), (v2_esc, v2), root, optional)| {
            let text = format!(
                "25 30 0:22 / /sys rw,nosuid{optional} - sysfs sysfs rw\n\
                 34 25 0:29 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                 41 34 0:36 {root} {v1_esc} rw,relatime{optional} - cgroup cgroup rw,blkio\n\
                 42 34 0:37 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory,name=x\n\
                 48 34 0:42 / {v2_esc} rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
            );
            (text, PathBuf::from(v1), PathBuf::from(v2))
        },
    )
}

fn io_max() -> impl Strategy<Value = IoMax> {
    let limit = |max: u64| prop::option::of(1..=max);
    (dev(), limit(u64::MAX), limit(u64::MAX), limit(u32::MAX.into()), limit(u32::MAX.into()))
        .prop_map(|(dev, rbps, wbps, riops, wiops)| IoMax { dev, rbps, wbps, riops, wiops })
}

fn io_weight() -> impl Strategy<Value = IoWeight> {
    (1u32..=10_000, devs(4), prop::collection::vec(1u32..=10_000, 4))
        .prop_map(|(default, devs, w)| IoWeight { default, devices: devs.into_iter().zip(w).collect() })
}

/// A cgroup name: mostly what container managers create, some with any characters.
fn cgroup_name() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[a-z][a-z0-9_.-]{0,12}", 1 => "docker-[0-9a-f]{8}\\.scope", 1 => text(8)]
}

/// A glob that matches `name`: some characters become `?`, some runs `*`.
fn glob_of(name: String) -> impl Strategy<Value = (String, String)> {
    let n = name.chars().count();
    prop::collection::vec(0u8..6, n).prop_map(move |choice| {
        let mut pattern = String::new();
        for (c, pick) in name.chars().zip(choice) {
            match pick {
                0 => pattern.push('?'),
                1 if !pattern.ends_with('*') => pattern.push('*'),
                1 => {}
                _ => pattern.push(c),
            }
        }
        (pattern, name.clone())
    })
}

/// A valid state file's records: paths, keys and lines of any characters.
fn change() -> impl Strategy<Value = Change> {
    (
        prop_oneof![
            Just("/sys/fs/cgroup/blkio/a/blkio.throttle.read_iops_device".to_string()),
            "/[a-z/.]{1,20}",
            text(12)
        ],
        select(vec!["7:0", "7:3", "default", "memory"]).prop_map(str::to_string),
        text(12),
        text(12),
    )
        .prop_map(|(path, key, previous, new)| Change {
            path: PathBuf::from(path),
            key,
            previous,
            new,
            earlier: None,
        })
}

/// A state file — header, records, damaged lines (any bytes), maybe a record cut short at the end —
/// and the pid and merged changes it holds.
fn state_file() -> impl Strategy<Value = (Vec<u8>, u32, Vec<Change>)> {
    let item = prop_oneof![3 => change().prop_map(Ok), 1 => bytes(40).prop_map(Err)];
    (any::<u32>(), prop::collection::vec(item, 0..8), any::<Option<usize>>()).prop_map(|(pid, items, cut)| {
        let mut file = encode_state_line(&Header { pid }).into_bytes();
        let mut changes: Vec<Change> = Vec::new();
        for item in items {
            match item {
                Ok(c) => {
                    file.extend(encode_state_line(&c).bytes());
                    match changes.iter_mut().find(|x| x.path == c.path && x.key == c.key) {
                        Some(x) => x.earlier = Some(std::mem::replace(&mut x.new, c.new)),
                        None => changes.push(c),
                    }
                }
                Err(garbage) => {
                    file.extend(garbage.into_iter().filter(|b| *b != b'\n'));
                    file.push(b'\n');
                }
            }
        }
        if let Some(cut) = cut {
            // A record the crash cut short: never complete, so never counted.
            let record = encode_state_line(&Change {
                path: "/x/y".into(),
                key: "7:9".into(),
                previous: "a".into(),
                new: "b".into(),
                earlier: None,
            });
            file.extend(&record.as_bytes()[..cut % (record.len() - 1)]);
        }
        (file, pid, changes)
    })
}

/// A `/proc/PID/stat` line with any command name; its state and start time.
fn proc_stat() -> impl Strategy<Value = (String, char, u64)> {
    (any::<u32>(), text(15), select(vec!['R', 'S', 'D', 'T', 't', 'Z', 'X', 'I']), any::<[u32; 18]>(), any::<u64>())
        .prop_map(|(pid, comm, state, fields, start)| {
            let comm = comm.replace('\0', "");
            let middle: Vec<String> = fields.iter().map(u32::to_string).collect();
            (
                format!("{pid} ({comm}) {state} {} {start} 4096 10 18446744073709551615\n", middle[..18].join(" ")),
                state,
                start,
            )
        })
}

proptest! {
    #![proptest_config(fuzz::config())]

    #[test]
    fn io_stat(text in any_text(io_stat_file().prop_map(|(t, _)| t))) {
        let parsed = parse_io_stat(&text);
        clear_error(&parsed, "io.stat")?;
        if let Ok(stats) = parsed {
            for (i, d) in stats.devices.iter().enumerate() {
                prop_assert!(stats.devices[..i].iter().all(|x| x.dev != d.dev), "one entry per device");
            }
        }
    }

    #[test]
    fn valid_io_stat_gives_its_counters((text, stats) in io_stat_file()) {
        prop_assert_eq!(parse_io_stat(&text).unwrap(), stats);
    }

    #[test]
    fn blkio_stats(serviced in any_text(rwstat_file().prop_map(|(t, _)| t)), bytes in any_text(rwstat_file().prop_map(|(t, _)| t))) {
        let parsed = BlkioStats::from_files(StatsSource::Throttle, &serviced, &bytes);
        if let Err(e) = &parsed {
            let msg = e.to_string();
            prop_assert!(is_clear(&msg) && msg.starts_with("invalid blkio.throttle.io_serv"), "{:?}", msg);
        }
    }

    #[test]
    fn valid_blkio_stats_give_their_counts((text, expected) in rwstat_file()) {
        prop_assert_eq!(parse_rwstat("blkio.bfq.io_serviced", &text).unwrap(), expected);
    }

    #[test]
    fn memory_events(text in any_text(key_value_file(EVENT_KEYS).prop_map(|(t, _)| t))) {
        clear_error(&MemoryEvents::parse(&text), "memory.events")?;
    }

    #[test]
    fn valid_memory_events_give_their_counts((text, v) in key_value_file(EVENT_KEYS)) {
        let want = MemoryEvents { high: v["high"], max: v["max"], oom: v["oom"], oom_kill: v["oom_kill"] };
        prop_assert_eq!(MemoryEvents::parse(&text).unwrap(), want);
    }

    #[test]
    fn pressure(text in any_text(pressure_file().prop_map(|(t, _)| t))) {
        let parsed = Pressure::parse(&text);
        clear_error(&parsed, "memory.pressure")?;
        if let Ok(p) = parsed {
            for avg in [p.some.avg10, p.full.avg10] {
                prop_assert!((0.0..=100.0).contains(&avg), "a share of time in percent: {}", avg);
            }
        }
    }

    #[test]
    fn valid_pressure_gives_its_figures((text, [some, full]) in pressure_file()) {
        let p = Pressure::parse(&text).unwrap();
        prop_assert_eq!((p.some.avg10, p.some.total_us), (f64::from(some.0) / 100.0, some.1));
        prop_assert_eq!((p.full.avg10, p.full.total_us), (f64::from(full.0) / 100.0, full.1));
    }

    #[test]
    fn memory_limits(text in any_text(prop_oneof![Just("max\n".to_string()), any::<u64>().prop_map(|n| format!("{n}\n"))])) {
        let parsed = parse_limit("memory.max", &text);
        clear_error(&parsed, "memory.max")?;
        if let Ok(limit) = parsed {
            prop_assert_eq!(parse_limit("memory.max", &format_limit(limit)).unwrap(), limit);
        }
    }

    #[test]
    fn oom_control(text in any_text(key_value_file(OOM_KEYS).prop_map(|(t, _)| t))) {
        clear_error(&OomControl::parse(&text), "memory.oom_control")?;
    }

    #[test]
    fn valid_oom_control_gives_its_state((text, v) in key_value_file(OOM_KEYS)) {
        let want = OomControl { oom_kill_disable: v["oom_kill_disable"] != 0, under_oom: v["under_oom"] != 0, oom_kill: v["oom_kill"] };
        prop_assert_eq!(OomControl::parse(&text).unwrap(), want);
    }

    #[test]
    fn memory_stat(text in any_text(key_value_file(STAT_KEYS).prop_map(|(t, _)| t)), key in select(STAT_KEYS)) {
        stat_value(&text, key);
    }

    #[test]
    fn valid_memory_stat_gives_each_counter((text, v) in key_value_file(STAT_KEYS)) {
        for (key, value) in v {
            prop_assert_eq!(stat_value(&text, key), Some(value), "{}", key);
        }
        prop_assert_eq!(stat_value(&text, "swap"), None);
    }

    #[test]
    fn block_stats(text in any_text(prop_oneof![block_stat().prop_map(|(t, _)| t), diskstats_line()])) {
        clear_error(&DiskStats::parse(&text), "block stat")?;
    }

    #[test]
    fn valid_block_stats_give_their_counters((text, n) in block_stat()) {
        let s = DiskStats::parse(&text).unwrap();
        prop_assert_eq!((s.ios, s.sectors, s.ticks_ms), ([n[0], n[4]], [n[2], n[6]], [n[3], n[7]]));
        prop_assert_eq!((s.in_flight, s.io_ticks_ms, s.time_in_queue_ms), (n[8], n[9], n[10]));
    }

    #[test]
    fn diskstats_lines_are_refused(line in diskstats_line()) {
        clear_error(&DiskStats::parse(&line), "block stat")?;
        prop_assert!(DiskStats::parse(&line).is_err());
    }

    #[test]
    fn mount_tables(
        text in prop_oneof![
            3 => any_text(mountinfo().prop_map(|(t, _, _)| t)),
            1 => (mountinfo(), "\\\\[0-9]{3}").prop_map(|((t, _, _), esc)| t.replace("/sys/fs/cgroup/memory", &esc)),
        ],
        own in any_text(Just("7:blkio:/a/b\n0::/c\n".to_string())),
    ) {
        for hierarchy in [MountedHierarchy::V1("blkio"), MountedHierarchy::V1("memory"), MountedHierarchy::V1("x"), MountedHierarchy::V2] {
            if let Some(mount) = find_mount(&text, hierarchy) {
                let own = own_cgroup(&own, hierarchy).unwrap_or_default();
                prop_assert!(cgroup_dir(&mount, &own).starts_with(&mount.mount_point));
            }
        }
        v1_mounts(&text);
    }

    #[test]
    fn valid_mount_tables_give_their_mount_points((text, blkio, unified) in mountinfo()) {
        prop_assert_eq!(find_mount(&text, MountedHierarchy::V1("blkio")).map(|m| m.mount_point), Some(blkio.clone()));
        prop_assert_eq!(find_mount(&text, MountedHierarchy::V2).map(|m| m.mount_point), Some(unified));
        let v1: Vec<(String, PathBuf)> = v1_mounts(&text);
        prop_assert_eq!(&v1[0], &("blkio".to_string(), blkio));
        prop_assert_eq!(v1.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["blkio", "memory", "x"]);
    }

    #[test]
    fn own_cgroup_lines(path in text(20).prop_map(|p| p.replace(['\n', '\r'], "")), id in 1u32..20) {
        let text = format!("{id}:cpu,blkio:{path}\n0::/v2\n");
        prop_assert_eq!(own_cgroup(&text, MountedHierarchy::V1("blkio")), Some(path.clone()));
        let mount = CgroupMount { root: "/".into(), mount_point: "/sys/fs/cgroup/blkio".into() };
        prop_assert!(cgroup_dir(&mount, &path).starts_with("/sys/fs/cgroup/blkio"));
    }

    #[test]
    fn io_max_lines(line in any_text(io_max().prop_map(|m| m.to_string()))) {
        let parsed = line.parse::<IoMax>();
        clear_error(&parsed, "io.max")?;
        if let Ok(max) = parsed {
            prop_assert_eq!(max.to_string().parse::<IoMax>().unwrap(), max);
        }
        let file = IoMax::parse_file(&line);
        clear_error(&file, "io.max")?;
        if let Ok(lines) = file {
            prop_assert_eq!(IoMax::parse_file(&IoMax::format_file(&lines)).unwrap(), lines);
        }
    }

    #[test]
    fn io_weight_files(text in any_text(io_weight().prop_map(|w| w.to_string()))) {
        let parsed = text.parse::<IoWeight>();
        clear_error(&parsed, "io.weight")?;
        if let Ok(weight) = parsed {
            prop_assert_eq!(weight.to_string().parse::<IoWeight>().unwrap(), weight);
        }
    }

    #[test]
    fn valid_io_weight_files_give_their_weights(weight in io_weight()) {
        prop_assert_eq!(weight.to_string().parse::<IoWeight>().unwrap(), weight);
    }

    #[test]
    fn cgroup_patterns(pattern in any_text(prop::collection::vec(cgroup_name(), 1..4).prop_map(|p| p.join("/"))), name in cgroup_name()) {
        if let Err(e) = check_pattern(&pattern) {
            let msg = e.to_string();
            prop_assert!(is_clear(&msg) && msg.starts_with("invalid cgroup name"), "{:?}", msg);
        }
        glob_matches(&pattern, &name);
    }

    #[test]
    fn globs_match_the_names_they_were_made_from((pattern, name) in cgroup_name().prop_flat_map(glob_of)) {
        prop_assert!(glob_matches(&pattern, &name), "{:?} ~ {:?}", pattern, name);
        prop_assert!(glob_matches("*", &name));
        let literal = name.replace(['*', '?'], "");
        prop_assert_eq!(glob_matches(&literal, &name), literal == name);
    }

    #[test]
    fn schedulers(text in any_text(prop::collection::vec("[a-z-]{2,12}", 1..5).prop_map(|s| format!("[{}]\n", s.join("] ["))))) {
        let (current, available) = parse_scheduler(&text);
        if let Some(c) = current {
            prop_assert!(available.contains(&c));
        }
    }

    #[test]
    fn valid_scheduler_lines_name_the_current_one(names in prop::collection::vec("[a-z-]{2,12}", 1..5), pick in any::<usize>()) {
        let current = pick % names.len();
        let line: Vec<String> = names.iter().enumerate().map(|(i, n)| if i == current { format!("[{n}]") } else { n.clone() }).collect();
        let text = format!("{}\n", line.join(" "));
        let (got, available) = parse_scheduler(&text);
        prop_assert_eq!(got, Some(names[current].as_str()));
        prop_assert_eq!(available, names.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn state_files(text in any_text(state_file().prop_map(|(b, _, _)| String::from_utf8_lossy(&b).into_owned()))) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ioshare_host::STATE_FILE);
        std::fs::write(&path, &text).unwrap();
        if let Some(contents) = read_state_file(&path).unwrap() {
            prop_assert!(contents.unreadable.iter().all(|l| !l.contains('\n')), "one line each: {:?}", contents.unreadable);
        }
    }

    #[test]
    fn valid_state_files_give_every_whole_record((file, pid, changes) in state_file()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ioshare_host::STATE_FILE);
        std::fs::write(&path, &file).unwrap();
        let contents = read_state_file(&path).unwrap().unwrap();
        prop_assert_eq!((contents.pid, contents.changes), (Some(pid), changes));
    }

    #[test]
    fn entries_of_any_file(text in any_text(lines("[0-9]{1,3}:[0-9]{1,3} [a-z0-9= ]{0,20}", 4)), dev in dev()) {
        for entry in [Entry::Throttle(dev), Entry::IoMax(dev), Entry::IoWeightDevice(dev), Entry::IoWeightDefault, Entry::IoCost(dev)] {
            let line = entry.current(&text);
            prop_assert!(!line.contains('\n'), "one line: {:?}", line);
        }
        Entry::Memory.current(&text);
    }

    #[test]
    fn process_stats(text in any_text(proc_stat().prop_map(|(t, _, _)| t))) {
        clear_error(&ProcessStat::parse(&text), "/proc/PID/stat")?;
    }

    #[test]
    fn valid_process_stats_give_state_and_start((text, state, start) in proc_stat()) {
        let parsed = ProcessStat::parse(&text).unwrap();
        prop_assert_eq!((parsed.state, parsed.start_ticks), (state, start));
    }
}

/// `find_cgroups` on a tree with awkward names: every pattern that passes [`check_pattern`] finds
/// only directories below the root that the pattern matches, component by component.
#[test]
fn cgroup_patterns_find_only_what_they_match() {
    let root = tempfile::tempdir().unwrap();
    for dir in ["a/b", "a/c d", "a/é", "ab/b", "x*y/z", "q?/r", "docker-0123abcd.scope/inner", ".hidden"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    std::fs::write(root.path().join("a/file"), "").unwrap();
    let component = prop_oneof![
        4 => select(vec!["a", "b", "*", "?", "a*", "*b", "x*y", "q?", "c d", "é", "docker-*.scope", "inner", ".hidden", "file"])
            .prop_map(str::to_string),
        1 => text(3),
    ];
    let pattern = any_text(prop::collection::vec(component, 1..4).prop_map(|p| p.join("/")));
    let mut runner = TestRunner::new(fuzz::config());
    runner
        .run(&pattern, |pattern| {
            let found = find_cgroups(root.path(), &pattern);
            if check_pattern(&pattern).is_err() {
                return Ok(());
            }
            let parts: Vec<&str> = pattern.split('/').collect();
            for rel in &found {
                prop_assert!(root.path().join(rel).is_dir(), "{}", rel);
                let names: Vec<&str> = rel.split('/').collect();
                prop_assert_eq!(names.len(), parts.len());
                for (p, n) in parts.iter().zip(&names) {
                    prop_assert!(glob_matches(p, n), "{:?} ~ {:?}", p, n);
                }
            }
            Ok(())
        })
        .unwrap();
}

// Regressions: each input the targets above found, fixed.

/// Found by `mount_tables` (`/\777` as a mountinfo root): an octal escape beyond a byte overflowed
/// the decoding (a panic in debug builds); only `\000`..`\377` are escapes, anything else is text.
#[test]
fn an_octal_escape_beyond_a_byte_is_kept_as_text() {
    let line = "41 34 0:36 /\\777 /sys/fs/cgroup/b\\400k\\040x rw - cgroup cgroup rw,blkio\n";
    let mount = find_mount(line, MountedHierarchy::V1("blkio")).unwrap();
    assert_eq!(mount, CgroupMount { root: "/\\777".into(), mount_point: "/sys/fs/cgroup/b\\400k x".into() });
}

/// Found by the glob targets (`*` against `*{`): a `*` in the pattern was taken as a literal where
/// the name held a `*`, so `*` did not match every name; it is a wildcard everywhere now.
#[test]
fn a_star_matches_names_that_hold_a_star() {
    assert!(
        glob_matches("*", "*{")
            && glob_matches("a*", "a*b")
            && glob_matches("*b", "**b")
            && glob_matches("x*y*", "x*y*")
    );
    assert!(!glob_matches("a*", "b*"));
}

/// Found by `pressure` (`avg10=101`; NaN and infinities parse as floats too): a PSI average is a
/// share of time, so only 0..=100 is accepted.
#[test]
fn psi_averages_outside_0_to_100_are_refused() {
    for avg in ["101", "100.01", "-1", "NaN", "inf", "-inf", "1e309"] {
        let text = format!("some avg10={avg} avg60=0.00 avg300=0.00 total=0\n");
        let err = Pressure::parse(&text).unwrap_err().to_string();
        assert!(err.starts_with("invalid memory.pressure") && err.contains("0..=100"), "{avg}: {err}");
    }
    assert_eq!(Pressure::parse("full avg10=100.00 total=5\n").unwrap().full.avg10, 100.0);
}

/// Found by every target that quotes its input (`\0`, `\u{e}`, `\u{7f}`): errors carried the input's
/// control characters raw; they are escaped now, so an error is one printable line.
#[test]
fn errors_quote_control_characters_escaped() {
    let errors = [
        parse_io_stat("\0").unwrap_err(),
        "8:16 rbps=\u{1b}[2J".parse::<IoMax>().unwrap_err(),
        MemoryEvents::parse("oom\t\r1").unwrap_err(),
        check_pattern("/a\nb").unwrap_err(),
    ];
    for (e, quoted) in errors.iter().zip(["'\\u{0}'", "'rbps=\\u{1b}[2J'", "'oom\\t\\r1'", "'/a\\nb'"]) {
        let msg = e.to_string();
        assert!(is_clear(&msg) && msg.contains(quoted), "{msg}");
    }
}

/// Found by `valid_state_files_give_every_whole_record` (a damaged record of bytes that are not
/// UTF-8): the whole state file was refused, so nothing could be reverted; such a line is named as
/// unreadable and every whole record is kept.
#[test]
fn a_state_file_with_a_record_that_is_not_utf8_keeps_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ioshare_host::STATE_FILE);
    let record =
        Change { path: "/r/f".into(), key: "7:0".into(), previous: "7:0 0".into(), new: "7:0 5".into(), earlier: None };
    let mut file = encode_state_line(&Header { pid: 7 }).into_bytes();
    file.extend(b"\xff\xfe garbage\n");
    file.extend(encode_state_line(&record).bytes());
    std::fs::write(&path, file).unwrap();
    let contents = read_state_file(&path).unwrap().unwrap();
    assert_eq!((contents.pid, contents.changes.len(), contents.unreadable.len()), (Some(7), 1, 1));
    assert_eq!(contents.changes[0].new, "7:0 5");
}
