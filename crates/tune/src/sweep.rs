//! The sweep: check the options, open the target the way `ioshare profile` does (a temporary file
//! in a directory, `--loop`, `--destructive` for a device), take the cost model (measured by the
//! profile on the same target, or given), measure the uncontrolled baseline, then every grid point
//! not yet in the result, saving the result after each one (the checkpoint). A resumed sweep takes
//! device, settings, baseline and points from its file and refuses another device's, or one whose
//! points another IOCost ran ([`crate::runner`]: inline by default, the kernel's with `--kernel`).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ioshare_core::iocost::line::Ctrl;
use ioshare_core::{ModelConfig, QosConfig, QosParams, NSEC_PER_SEC};
use ioshare_engine::profile::{self, prepare, ProfileOptions};

use crate::data::{utc, ControlledBy, DeviceId, Settings, TuneResult, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::point::{Rig, Timing};
use crate::profile_cache::{CacheKey, ProfileCache, ProfileTaken};
use crate::runner::Control;

/// What `prepare` calls a loop device over a file (a resumed sweep of one makes one again).
const LOOP_KIND: &str = "loop device over a file";
/// Most a weight may be (IOCost's range).
pub const MAX_WEIGHT: u32 = 10_000;

/// What `ioshare tune` was asked.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// The vrate grid (dithered already when asked).
    pub grid: Grid,
    /// Weights: latency-sensitive tenant, antagonist.
    pub weights: (u32, u32),
    /// The tenant's p95 target, µs; `None`: the profile's rule at p95 (1.5 × the p95 of its
    /// read-latency run).
    pub lat_target_us: Option<u64>,
    /// A cost model to use instead of profiling (`io.cost.model` syntax).
    pub model_line: Option<String>,
    /// The short sweep.
    pub quick: bool,
    /// Where target, profile and merge rules come from (destructive, loop, temporary size).
    pub profile: ProfileOptions,
    /// The result file, rewritten after each point.
    pub out: PathBuf,
    /// Where the profile is cached per device ([`crate::profile_cache`]); `None`: measured and
    /// not kept.
    pub cache: Option<ProfileCache>,
}

impl TuneOptions {
    /// Checks everything that can be checked before anything is created.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidOptions(m));
        self.grid.validate().map_err(|why| Error::InvalidOptions(format!("--vrate: {why}")))?;
        let (a, b) = self.weights;
        if !(1..=MAX_WEIGHT).contains(&a) || !(1..=MAX_WEIGHT).contains(&b) {
            return bad(format!("--weights {a},{b}: each weight must be 1..={MAX_WEIGHT}"));
        }
        if self.lat_target_us == Some(0) {
            return bad("--lat-target 0 cannot be met: give a latency such as 2ms or 500us".into());
        }
        if let Some(line) = &self.model_line {
            line.parse::<ModelConfig>().map_err(|e| Error::InvalidOptions(format!("--model: {e}")))?;
            if self.lat_target_us.is_none() {
                return bad("--model skips the profile that suggests the latency target: give --lat-target too".into());
            }
        }
        self.profile.validate().map_err(Error::InvalidOptions)?;
        if self.profile.read_only {
            return bad("tune's antagonist writes: a read-only target cannot be tuned".into());
        }
        check_out(&self.out, false)
    }
}

/// Refuses an output file that exists (unless resuming it) or whose directory is missing.
fn check_out(out: &Path, resuming: bool) -> Result<()> {
    if !resuming && out.exists() {
        return Err(Error::InvalidOptions(format!(
            "'{}' exists: --resume {} continues that sweep, or give another --out",
            out.display(),
            out.display()
        )));
    }
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(Error::InvalidOptions(format!(
            "--out '{}': the directory '{}' does not exist",
            out.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// Sweeps `target` (new: `resumed` is `None`) or continues `resumed` (read from `opts.out`, swept
/// under the same controller), saving after every point, with the points run under `control`'s
/// IOCost ([`crate::runner::Inline`]: ioshare's); returns the result. `progress` gets a status line
/// before each run.
pub fn tune(
    control: &dyn Control,
    target: &Path,
    opts: &TuneOptions,
    resumed: Option<TuneResult>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<TuneResult> {
    let controlled_by = control.controlled_by();
    let cannot_resume =
        |why: String| Error::BadResult { path: opts.out.clone(), reason: format!("cannot resume here: {why}") };
    if let Some(why) = resumed.as_ref().and_then(|r| controlled_by.refuses(r.settings.controller)) {
        return Err(cannot_resume(why));
    }
    if resumed.is_none() {
        opts.validate()?;
    } else {
        check_out(&opts.out, true)?;
    }
    let quick = resumed.as_ref().map_or(opts.quick, |r| r.settings.quick);
    let mut profile_opts = opts.profile.clone();
    if let Some(r) = &resumed {
        // The same temporary size and loop device as before, and the device checked before anything
        // is created.
        profile_opts.temp_size = r.device.size;
        profile_opts.loop_device = r.device.kind == LOOP_KIND;
        let (model, kind) = (DeviceId::model_of(target), kind_of(target, &profile_opts));
        if (model.as_str(), kind) != (r.device.model.as_str(), r.device.kind.as_str()) {
            return Err(cannot_resume(format!(
                "it was measured on {} ({}), not on {model} ({kind})",
                r.device.model, r.device.kind
            )));
        }
    }
    let mut notes = prepare::repair(&profile_opts.state_dir)?;
    let mut prepared = prepare::prepare(target, &profile_opts, stop, progress)?;
    let device = identify(target, &prepared);
    if let Some(why) = resumed.as_ref().and_then(|r| r.device.mismatch(&device)) {
        return Err(cannot_resume(why));
    }
    let mut result = match resumed {
        Some(r) => r,
        None => {
            let (settings, more) = settings(target, &mut prepared, opts, controlled_by, &profile_opts, stop, progress)?;
            notes.extend(more);
            TuneResult {
                version: FORMAT_VERSION,
                measured_at: now(),
                device,
                settings,
                baseline: Default::default(),
                points: Vec::new(),
                notes: Vec::new(),
                from_trace: None,
            }
        }
    };
    let s = result.settings.clone();
    let runner = control.open(&prepared.dev, stop)?;
    let rig = Rig {
        runner: runner.as_ref(),
        model: s.model(),
        qos: s.qos(),
        weights: s.weights,
        lat_target_us: s.lat_target_us,
        timing: if quick { Timing::quick() } else { Timing::default_sweep() },
        submit_batch: prepared.submit_batch,
    };
    if result.baseline.mof_iops <= 0.0 {
        result.baseline = rig.baseline(progress)?;
        result.notes.append(&mut notes);
        result.notes.append(&mut prepared.notes);
        result.save(&opts.out)?;
    }
    let todo: Vec<f64> = s
        .grid
        .points()
        .into_iter()
        .filter(|v| !result.points.iter().any(|p| (p.vrate_pct - v).abs() < 0.005))
        .collect();
    let total = result.points.len() + todo.len();
    let started = Instant::now();
    for (i, &v) in todo.iter().enumerate() {
        let done = result.points.len();
        let left_s = eta(todo.len() - i, &rig.timing, started, i);
        let mut line = |what: &str| {
            progress(&format!("[point {}/{total} · vrate {v:.1}% · ~{} left] {what}", done + 1, clock(left_s)))
        };
        let point = rig.point(v, &result.baseline, &mut line)?;
        result.points.push(point);
        result.points.sort_by(|a, b| a.vrate_pct.total_cmp(&b.vrate_pct));
        result.save(&opts.out)?;
    }
    Ok(result)
}

/// Seconds left for `left` points: each as long as the `finished` ones took on average since
/// `started`, or as planned.
fn eta(left: usize, timing: &Timing, started: Instant, finished: usize) -> f64 {
    let per = if finished > 0 {
        started.elapsed().as_secs_f64() / finished as f64
    } else {
        timing.per_point() as f64 / NSEC_PER_SEC as f64 * 1.1
    };
    per * left as f64
}

/// `1m05s`.
fn clock(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
}

/// The settings of a new sweep: the model given or profiled on the prepared target, and the
/// latency target given or from the profile ([`judged_target`]); its points run under `controller`.
fn settings(
    target: &Path,
    prepared: &mut prepare::Prepared,
    opts: &TuneOptions,
    controller: ControlledBy,
    profile_opts: &ProfileOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<(Settings, Vec<String>)> {
    let mut notes = Vec::new();
    let (model, qos, lat_target_us) = match &opts.model_line {
        Some(line) => {
            let model = line.parse::<ModelConfig>().map_err(|e| Error::InvalidOptions(format!("--model: {e}")))?.params;
            let lat = opts.lat_target_us.expect("validated: --model comes with --lat-target");
            (
                model,
                QosParams {
                    enable: true,
                    rppm: 990_000,
                    rlat_us: lat,
                    wppm: 990_000,
                    wlat_us: lat,
                    ..QosParams::default()
                },
                lat,
            )
        }
        None => {
            let taken = profiled(target, prepared, opts, profile_opts, stop, progress, &mut notes)?;
            (taken.model, taken.qos, opts.lat_target_us.unwrap_or(taken.lat_target_us))
        }
    };
    let settings = Settings {
        grid: opts.grid,
        weights: opts.weights,
        lat_target_us,
        quick: opts.quick,
        model_line: ModelConfig { device: None, ctrl: Ctrl::User, params: model }.to_string(),
        qos_line: QosConfig { device: None, ctrl: Ctrl::User, params: qos }.to_string(),
        controller,
    };
    Ok((settings, notes))
}

/// What the sweep takes from the target's profile: from the cache when it holds this device's
/// ([`crate::profile_cache`]), else measured on the prepared target and cached.
fn profiled(
    target: &Path,
    prepared: &mut prepare::Prepared,
    opts: &TuneOptions,
    profile_opts: &ProfileOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
    notes: &mut Vec<String>,
) -> Result<ProfileTaken> {
    let key = CacheKey::of(target, prepared.kind, prepared.dev.size(), opts.quick);
    let cached = opts.cache.as_ref().zip(key.as_ref()).and_then(|(c, k)| c.lookup(k));
    if let Some(taken) = cached {
        notes.push(format!(
            "profile: the one measured on this device at {} (cached; --reprofile measures it again)",
            utc(taken.measured_at)
        ));
        return Ok(taken);
    }
    let p = profile::profile_prepared(target, prepared, profile_opts, stop, progress)?;
    notes.extend(p.notes.iter().map(|n| format!("profile: {n}")));
    notes.push(format!("profile suggested {}", p.qos_line));
    let taken = ProfileTaken { model: p.model, qos: p.qos, lat_target_us: judged_target(&p), measured_at: now() };
    if let Some((cache, key)) = opts.cache.as_ref().zip(key.as_ref()) {
        if let Err(e) = cache.store(key, &taken) {
            notes.push(format!(
                "profile: not cached in '{}' ({e}): the next sweep measures it again",
                cache.dir.display()
            ));
        }
    }
    Ok(taken)
}

/// Seconds since the epoch.
fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The sweep's read target from profile `p`: the profile's rule, [`profile::QOS_FACTOR`] × the
/// read-latency run's p95 — the percentile the sweep judges ([`crate::point`]) — where the profile's
/// own line takes the p50 on a disk that says it is rotational (a loop device does). On this host's
/// loop device the p50 of three profiles moved 3× (374–1161 µs) where their p95 moved 1.4×
/// (1697–2359 µs).
fn judged_target(p: &profile::Profile) -> u64 {
    let p95 = p.runs.iter().find(|r| r.name == profile::READ_LATENCY_RUN).map(|r| r.lat_us.p95);
    p95.map_or(p.qos.rlat_us, |l| ((l * profile::QOS_FACTOR).ceil() as u64).max(1))
}

/// The device a prepared target is: the disk the lines name, and the model behind it.
fn identify(target: &Path, prepared: &prepare::Prepared) -> DeviceId {
    DeviceId {
        name: prepared.disk.as_ref().map(|d| d.name.clone()),
        dev: prepared.disk.as_ref().map(|d| d.dev.to_string()),
        kind: prepared.kind.to_string(),
        model: DeviceId::model_of(target),
        size: prepared.dev.size(),
    }
}

/// What `prepare` will call the target, known before it runs.
fn kind_of(target: &Path, opts: &ProfileOptions) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if opts.loop_device {
        LOOP_KIND
    } else if fs::metadata(target).is_ok_and(|m| m.file_type().is_block_device()) {
        "block device"
    } else {
        "file"
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runner::Inline;

    /// A result without points, swept by `controller` (a fixture for the crate's unit tests).
    pub(crate) fn result(controller: ControlledBy) -> TuneResult {
        TuneResult {
            version: FORMAT_VERSION,
            measured_at: 0,
            device: DeviceId { name: None, dev: None, kind: "file".into(), model: "disk".into(), size: 1 << 30 },
            settings: Settings {
                grid: Grid::parse("25:200:25").unwrap(),
                weights: (100, 100),
                lat_target_us: 2000,
                quick: true,
                model_line: "ctrl=user model=linear rbps=100000000 rseqiops=3000 rrandiops=3000 wbps=100000000 \
                             wseqiops=3000 wrandiops=3000"
                    .into(),
                qos_line: "enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=2000".into(),
                controller,
            },
            baseline: Default::default(),
            points: Vec::new(),
            notes: Vec::new(),
            from_trace: None,
        }
    }

    #[test]
    fn points_of_another_controller_neither_resume_nor_merge() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("kernel.json");
        let opts = TuneOptions {
            grid: Grid::parse("25:200:25").unwrap(),
            weights: (100, 100),
            lat_target_us: Some(2000),
            model_line: None,
            quick: true,
            profile: ProfileOptions::quick(),
            out: out.clone(),
            cache: None,
        };
        let stop = AtomicBool::new(false);
        let err = tune(&Inline, dir.path(), &opts, Some(result(ControlledBy::Kernel)), &stop, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("ran under the kernel's IOCost"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "refused before anything was created");

        let merged = result(ControlledBy::Inline).merge(result(ControlledBy::Kernel), &out).unwrap_err();
        assert!(merged.to_string().contains("not ioshare's IOCost inline"), "{merged}");
        assert!(result(ControlledBy::Inline).merge(result(ControlledBy::Inline), &out).is_ok());
    }

    #[test]
    fn a_result_from_before_the_kernel_runner_was_swept_inline() {
        let mut v = serde_json::to_value(result(ControlledBy::Kernel)).unwrap();
        assert_eq!(v["settings"]["controller"], "kernel");
        v["settings"].as_object_mut().unwrap().remove("controller");
        let old: TuneResult = serde_json::from_value(v).unwrap();
        assert_eq!(old.settings.controller, ControlledBy::Inline);
    }
}
