//! The userspace backend on real processes (root only): fio readers in blkio cgroups on a loop
//! device, the agent planning over them every 100 ms and writing blk-throttle limits.

mod common;

use std::time::{Duration, Instant};

use common::{first_parts, median, run_agent_during, wait_for, PeriodSample, Rig};
use ioshare_agent::backend::userspace::donor::DONATING_SLACK;
use ioshare_agent::report::cpu::CpuWatch;
use ioshare_agent::report::trace::{Summary, TraceWriter};
use ioshare_agent::{Agent, BackendChoice, Config};
use ioshare_host::{BlkioCgroup, ThrottleKnob};
use ioshare_testkit::{skip_unless_root, KillOnDrop};

/// Queue depth of each reader's job.
const DEPTH: u32 = 32;
/// A saturating reader: two fio jobs (threads) at [`DEPTH`] — one fio thread did at most 37k IOPS
/// here, less than the 2/3 of the device the high-weight tenant is entitled to.
const SATURATING: &[&str] = &["--numjobs=2"];
/// One fio job per reader: at the deeper queues below, its single thread is what it can issue.
const ONE_JOB: &[&str] = &[];

/// The tests of this file measure rates on the same host disk: they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the [`ONE_AT_A_TIME`] lock (a test that failed while holding it does not block the others).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `body` with an agent started on `config` in another thread; stops it (reverting) after. It
/// writes its period trace to `state/trace.jsonl`, kept as FILE with IOSHARE_AGENT_TEST_TRACE_TO=FILE
/// (read it with `ioshare agent trace FILE`).
fn with_agent<T>(config: &std::path::Path, state: &std::path::Path, body: impl FnOnce() -> T) -> T {
    let config = Config::load(config).unwrap();
    let (mut agent, _) = Agent::start(config, BackendChoice::Userspace, state).unwrap();
    let trace = state.join("trace.jsonl");
    agent.trace_to(TraceWriter::create(&trace).unwrap());
    let out = run_agent_during(agent, body);
    if let Some(to) = std::env::var_os("IOSHARE_AGENT_TEST_TRACE_TO") {
        std::fs::copy(&trace, to).unwrap();
    }
    out
}

/// With IOSHARE_AGENT_TEST_TRACE set, prints the agent's view of both groups (how shares settle).
fn trace(state: &std::path::Path) {
    if std::env::var_os("IOSHARE_AGENT_TEST_TRACE").is_none() {
        return;
    }
    let st = ioshare_agent::Status::read(state).unwrap();
    let d = &st.devices[0];
    let g = |i: usize| {
        let g = &d.groups[i];
        format!(
            "{} {:.3}/{:.3} use {:.3} riops {}",
            g.state, g.hweight_inuse, g.hweight_active, g.usage_share, g.limits[0]
        )
    };
    eprintln!(
        "{} vrate {:.1} busy {} lat {:.0} | hi {} | lo {}",
        st.periods,
        d.vrate_pct,
        d.busy_level,
        d.lat_us[0],
        g(0),
        g(1)
    );
}

/// Both groups as the agent saw them in one period: (hi, lo).
struct View {
    hweight_active: [f64; 2],
    hweight_inuse: [f64; 2],
    riops: [u64; 2],
    sample: PeriodSample,
}

/// Share of the 100 ms samples of a window in which a tenant's busiest thread must have been
/// CPU-bound (on or waiting for a CPU for `cpu::CPU_BOUND_AT` of the sample) for the tenant to count
/// as held by the machine: a tenant stalled for a fifth of the window loses about that much of its
/// rate, more than the ratio's tolerance.
const CPU_BOUND_SAMPLES: f64 = 0.2;

/// Each cgroup's IOPS over `window`, the agent's view of both groups read every period meanwhile,
/// and per cgroup the share of 100 ms samples in which its threads were CPU-bound.
fn rates_and_views(rig: &Rig, state: &std::path::Path, window: Duration) -> (Vec<f64>, Vec<View>, [f64; 2]) {
    let mut cpu = CpuWatch::default();
    let clock = Instant::now();
    let mut sample_cpu = |bound: &mut [u32; 2], samples: &mut u32| {
        let now = clock.elapsed().as_nanos() as u64;
        let used: Vec<_> = (0..2).map(|i| cpu.sample(&rig.rel(i), rig.cgroups[i].path(), now)).collect();
        if let (Some(hi), Some(lo)) = (used[0], used[1]) {
            *samples += 1;
            bound[0] += u32::from(hi.cpu_bound());
            bound[1] += u32::from(lo.cpu_bound());
        }
    };
    let (mut bound, mut samples) = ([0u32; 2], 0u32);
    sample_cpu(&mut bound, &mut samples);
    let (rates, views) = std::thread::scope(|s| {
        let rates = s.spawn(|| rig.rates(window).0);
        let (mut views, mut last_period) = (Vec::new(), None);
        let names = [rig.rel(0), rig.rel(1)];
        // Polled every 10 ms so that each view's IO counts are read soon after its period (100 ms)
        // ended; the CPU sampled every 100 ms.
        let mut polls = 0u32;
        while !rates.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
            polls += 1;
            if polls % 10 == 0 {
                sample_cpu(&mut bound, &mut samples);
            }
            let Ok(st) = ioshare_agent::Status::read(state) else { continue };
            // One view per period the agent planned (a stale status is not counted again).
            if last_period == Some(st.periods) {
                continue;
            }
            last_period = Some(st.periods);
            let group = |i: usize| st.devices[0].groups.iter().find(|g| g.cgroup == names[i]);
            if let (Some(hi), Some(lo)) = (group(0), group(1)) {
                views.push(View {
                    hweight_active: [hi.hweight_active, lo.hweight_active],
                    hweight_inuse: [hi.hweight_inuse, lo.hweight_inuse],
                    riops: [hi.limits[0], lo.limits[0]],
                    sample: PeriodSample {
                        at: Instant::now(),
                        ios: [rig.ios(0), rig.ios(1)],
                        first_limit: hi.limits[0],
                    },
                });
            }
        }
        (rates.join().unwrap(), views)
    });
    let share = |n: u32| f64::from(n) / f64::from(samples.max(1));
    (rates, views, [share(bound[0]), share(bound[1])])
}

#[test]
fn weights_split_two_readers_and_idle_share_is_donated() {
    weights_split_and_idle_share_is_donated("weights_split_two_readers_and_idle_share_is_donated", DEPTH, SATURATING);
}

/// The bench's own depth: a deeper queue lets the device, not a limit, hold a reader back whenever
/// the limits add up to more than the device does.
#[test]
fn weights_split_two_qd64_readers_and_idle_share_is_donated() {
    weights_split_and_idle_share_is_donated("weights_split_two_qd64_readers_and_idle_share_is_donated", 64, ONE_JOB);
}

#[test]
fn weights_split_two_qd128_readers_and_idle_share_is_donated() {
    weights_split_and_idle_share_is_donated("weights_split_two_qd128_readers_and_idle_share_is_donated", 128, ONE_JOB);
}

/// Two readers (each `saturating` jobs at `depth`) under weights 2:1, then the high-weight one at a
/// tenth of the device: the split, and its share donated to the other.
fn weights_split_and_idle_share_is_donated(name: &str, depth: u32, saturating: &[&str]) {
    if skip_unless_root(name) {
        return;
    }
    let _serial = one_at_a_time();
    let rig = Rig::new("split", &["hi", "lo"]);
    let before = rig.snapshot();
    let state = tempfile::tempdir().unwrap();

    // Uncontrolled: the high-weight reader alone (what it can do by itself), both readers
    // saturating, then the high-weight one at a tenth of the device.
    let hi = rig.fio(0, depth, saturating);
    std::thread::sleep(Duration::from_millis(500));
    let solo_hi = rig.rates(Duration::from_millis(1500)).0[0];
    let lo = rig.fio(1, depth, saturating);
    std::thread::sleep(Duration::from_millis(500));
    let (free, free_lat) = rig.rates(Duration::from_millis(2000));
    let free_total: f64 = free.iter().sum();
    let iops = free_total.round() as u64;
    let slow_rate = format!("--rate_iops={}", iops / 10);
    drop(hi);
    let slow = rig.fio(0, 4, &[&slow_rate]);
    std::thread::sleep(Duration::from_millis(500));
    let (free_slow, _) = rig.rates(Duration::from_millis(2000));
    drop(slow);

    // The model: this device's measured random-read rate (what `ioshare profile` would measure), and
    // no QoS line, as the precision matrix configures it: vrate then follows what the device delivers
    // when a tenant is held by the device rather than by its limit.
    let model = format!("ssd_dfl rrandiops={iops} rseqiops={iops}");
    let config = rig.config(state.path(), &model, None, &[200, 100], 100);

    let (split, views, slowed) = with_agent(&config, state.path(), || {
        let hi = rig.fio(0, depth, saturating);
        for _ in 0..25 {
            std::thread::sleep(Duration::from_millis(100));
            trace(state.path());
        }
        let (split, views, cpu_bound) = rates_and_views(&rig, state.path(), Duration::from_millis(3000));
        eprintln!("{}", ioshare_agent::Status::read(state.path()).unwrap());
        drop(hi);
        let _slow = rig.fio(0, 4, &[&slow_rate]);
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(100));
            // IOSHARE_AGENT_TEST_TRACE=1 shows how the shares settle after the change.
            if std::env::var_os("IOSHARE_AGENT_TEST_TRACE").is_some() {
                let st = ioshare_agent::Status::read(state.path()).unwrap();
                let g = &st.devices[0].groups;
                eprintln!(
                    "{} hi {} {:.3}/{:.3} use {:.3} | lo {} {:.3} use {:.3} lim {}",
                    st.periods,
                    g[0].state,
                    g[0].hweight_inuse,
                    g[0].hweight_active,
                    g[0].usage_share,
                    g[1].state,
                    g[1].hweight_inuse,
                    g[1].usage_share,
                    g[1].limits[0]
                );
            }
        }
        let (slowed, slowed_views, _) = rates_and_views(&rig, state.path(), Duration::from_millis(2000));
        eprintln!("{}", ioshare_agent::Status::read(state.path()).unwrap());
        (split, views, (slowed, slowed_views, cpu_bound))
    });
    let (slowed, slowed_views, cpu_bound) = slowed;
    // The agent's trace of the whole run: one record a period, and in the periods both tenants did IO
    // their targets are the weights' 2/3 and 1/3. ± 0.05: equal weights would give 1/2, and a period
    // in which a tenant (re)started reads its target from before it counted (0, or 1 for the other),
    // each moving a mean over ~60 periods by up to 0.017.
    let summary = Summary::read(&state.path().join("trace.jsonl")).unwrap();
    eprint!("{summary}");
    let traced = &summary.devices[0];
    assert!(traced.periods >= 50, "{} periods traced", traced.periods);
    let target = |name: &str| traced.groups.iter().find(|g| g.cgroup == name).map(|g| g.target).unwrap();
    let (hi_target, lo_target) = (target(&rig.rel(0)), target(&rig.rel(1)));
    assert!((hi_target - 2.0 / 3.0).abs() < 0.05 && (lo_target - 1.0 / 3.0).abs() < 0.05, "{hi_target} {lo_target}");
    drop(lo);
    let ratio = split[0] / split[1];
    let total = split[0] + split[1];
    let kept = slowed[1] / free_slow[1];
    eprintln!(
        "uncontrolled {:.0}+{:.0}={free_total:.0} IOPS at {free_lat:.0} µs (hi alone {solo_hi:.0}); agent 2:1 {:.0}+{:.0}={total:.0} IOPS, \
         ratio {ratio:.2}, total {:.0}% of uncontrolled; hi at a tenth: lo {:.0} IOPS with the agent, {:.0} without ({:.0}%)",
        free[0],
        free[1],
        split[0],
        split[1],
        100.0 * total / free_total,
        slowed[1],
        free_slow[1],
        100.0 * kept
    );
    // The agent's decisions. Which periods count as "both competing" depends on the real IO (a
    // tenant the busy machine slowed below its share looks like a donor), so they are judged on the
    // periods in which neither donated: there the planner's shares are the weights' 2:1, and the
    // read limits it wrote follow them — from below only: a limit is the group's share of the next
    // period plus the budget it left unused (up to half a period), and a limit within 4% of the one
    // in force is kept, so when the busy machine keeps the high-weight tenant below its share its
    // limit grows above 2× the other's (3× seen), while it can fall below 2× only by those 4% and
    // the low-weight tenant's own unused budget: the median is asserted at ≥ 1.5.
    // (The planner's own slack for calling a group donating: hweights are 16-bit fixed point.)
    let both: Vec<&View> =
        views.iter().filter(|v| (0..2).all(|i| v.hweight_inuse[i] + DONATING_SLACK >= v.hweight_active[i])).collect();
    let hw = median(both.iter().map(|v| v.hweight_inuse[0] / v.hweight_inuse[1]).collect());
    let lim = median(both.iter().map(|v| v.riops[0] as f64 / v.riops[1].max(1) as f64).collect());
    eprintln!(
        "agent's view: {} of {} periods with both competing; median hweight ratio {hw:.3}, read-limit ratio {lim:.2}",
        both.len(),
        views.len()
    );
    // 30 periods in the 3 s window at 100 ms, each counted once; a third of them allows for periods
    // the 100 ms reads skipped (two periods between reads) on a busy machine.
    assert!(views.len() >= 10, "the status was read every period: {}", views.len());
    assert!(both.len() >= 3, "both tenants competed in {} of {} periods", both.len(), views.len());
    // In those periods the shares are the hweights the agent built from the configured weights, so
    // this checks that the cgroups got their 200 and 100 (equal or swapped weights give 1 or 0.5);
    // 2% covers the fixed-point rounding and the donation slack above.
    assert!((hw / 2.0 - 1.0).abs() <= 0.02, "hweights follow the configured weights 2:1: {hw:.3}");
    assert!(lim >= 1.5, "read limits follow the hweights 2:1: {lim:.2}");
    // blk-throttle enforced them: the low-weight tenant stayed near its limits. Load only lowers a
    // rate; 30% over allows blk-throttle's slices: it starts a new slice whenever a limit is written,
    // and the slice accounting around that let a group through up to 17% over its mean limit here.
    let mean_limit = |i: usize| views.iter().map(|v| v.riops[i] as f64).sum::<f64>() / views.len() as f64;
    let (hi_limit, lo_limit) = (mean_limit(0), mean_limit(1));
    assert!(split[1] <= 1.3 * lo_limit, "lo did {:.0} IOPS under a mean limit of {lo_limit:.0}", split[1]);
    // The split on real IO is judged in every run in which neither tenant's threads were CPU-bound
    // (measured) — when other builds and QEMU guests take this machine's two cores, the fio threads
    // get equal slices of CPU and the high-weight one cannot issue what its larger limit allows; no
    // IO controller can give it its share then. Otherwise, what the high-weight tenant can use
    // decides what is judged: the loop driver serves each cgroup through its own worker, and when
    // the host disk is busy with other users one tenant alone may do less than its 2/3 of what both
    // did (its queue and its worker, not a limit, hold it).
    // - It can (alone it did at least 2/3 of what both did under the agent): ratio 2.0 ± 15%.
    // - It cannot: IOCost is work-conserving, so the other rightly takes the rest; then it must have
    //   got at least 85% of what it did alone (ioshare did not hold it), and the other no more than
    //   its share beside it (the ratio not above 2 + 15%).
    // Tolerance ± 15%: the acceptance is ± 10% over 15 s; this window is 3 s (30 periods), in which
    // one period of a stalled machine (the host disk or CPU taken by others) moves the ratio by a few
    // percent more; "alone" was measured 1.5 s long some seconds before, on the same shared disk.
    let bound_note =
        format!("CPU-bound in {:.0}% / {:.0}% of the 100 ms samples", cpu_bound[0] * 100.0, cpu_bound[1] * 100.0);
    if cpu_bound.iter().any(|&b| b >= CPU_BOUND_SAMPLES) {
        eprintln!("ratio {ratio:.2} not judged: a tenant was held by the CPU (hi, lo {bound_note})");
    } else if solo_hi >= total * 2.0 / 3.0 {
        eprintln!("ratio {ratio:.2} judged (hi alone {solo_hi:.0} IOPS; {bound_note}), hi's mean limit {hi_limit:.0}");
        assert!((ratio / 2.0 - 1.0).abs() <= 0.15, "ratio {ratio:.2} with both tenants able to use their shares");
    } else {
        eprintln!(
            "hi alone did {solo_hi:.0} IOPS, less than 2/3 of the {total:.0} both did under the agent: judged on \
             what it got, {:.0} IOPS ({:.0}% of alone), ratio {ratio:.2} ({bound_note})",
            split[0],
            100.0 * split[0] / solo_hi
        );
        assert!(split[0] >= 0.85 * solo_hi, "hi got {:.0} IOPS, below 85% of the {solo_hi:.0} it did alone", split[0]);
        assert!(ratio <= 2.0 * 1.15, "ratio {ratio:.2}: the low-weight tenant took more than its share");
    }
    // Donation: with the high-weight tenant at a tenth, it lends its share out (in-use share below
    // its 2/3) and the low-weight one holds more than its 1/3 — in the median period of the window
    // (a single period may see the donor's small, bursty rate reach its limit and take its share
    // back for that period). "A tenth" is of the uncontrolled rate measured earlier: when the busy
    // machine has since slowed the device (and latency lowered vrate), it is a larger part of what
    // the device gives now, and the donor keeps more (up to half its share seen, at a third of the
    // uncontrolled rate); so donating is asserted as keeping less than two thirds of its share, while
    // a tenant that does not donate keeps all of it. The low-weight tenant's rate compared with the
    // uncontrolled run of the same mix is printed, not asserted, for the same reason as the ratio.
    // Judged over the periods in which hi did at most a third of both tenants' IOs — at most half
    // its share of the device as the device then was: when the host's disk falls to a quarter of its
    // speed (seen once here: the device did 24% of the model, vrate followed it to 30%), hi's tenth
    // of the uncontrolled rate is 40% of what the device does, near its share, and whether it lends
    // any is no longer the question. At least 5 such periods (a quarter of the 2 s window), else not
    // judged: a median of fewer is one or two periods, which a donor's single burst decides.
    let samples: Vec<PeriodSample> = slowed_views.iter().map(|v| v.sample).collect();
    let clear: Vec<&View> = slowed_views
        .iter()
        .zip(first_parts(&samples))
        .filter(|(_, part)| part.is_some_and(|p| p <= 1.0 / 3.0))
        .map(|(v, _)| v)
        .collect();
    let hi_lends = median(clear.iter().map(|v| v.hweight_inuse[0] / v.hweight_active[0]).collect());
    let lo_holds = median(clear.iter().map(|v| v.hweight_inuse[1]).collect());
    eprintln!(
        "after the drop: hi keeps {:.0}% of its share, lo holds {:.0}% of the device (the medians of the {} of {} \
         periods hi did at most a third of the IOs)",
        hi_lends * 100.0,
        lo_holds * 100.0,
        clear.len(),
        slowed_views.len()
    );
    if clear.len() >= 5 {
        assert!(hi_lends < 0.67, "hi does not donate: keeps {hi_lends:.2} of its share");
        // A donor keeping under 2/3 of its 2/3 (< 0.44 of the device) leaves the other more than
        // 0.55; 0.5 allows for the two medians coming from different periods.
        assert!(lo_holds > 0.5, "lo did not receive: {lo_holds:.2}");
    } else {
        eprintln!("donation not judged: the device slowed until hi's tenth was more than a third of the IOs");
    }
    assert_eq!(rig.snapshot(), before, "stopping the agent restored every throttle file");
}

#[test]
fn a_cgroup_created_after_start_is_controlled_within_a_second() {
    if skip_unless_root("a_cgroup_created_after_start_is_controlled_within_a_second") {
        return;
    }
    let _serial = one_at_a_time();
    let rig = Rig::new("late", &["a"]);
    let state = tempfile::tempdir().unwrap();
    let model = "ssd_dfl rrandiops=20000 rseqiops=20000";
    let config = rig.config(state.path(), model, None, &[100], 100);
    // The rule names every child of the rig's parent, so the one created later matches too.
    let text = std::fs::read_to_string(&config).unwrap().replace(&rig.rel(0), &format!("{}/*", rig.parent()));
    std::fs::write(&config, text).unwrap();
    let limit_of = |cg: &std::path::Path| {
        let text = std::fs::read_to_string(cg.join(ThrottleKnob::ReadIops.file_name())).unwrap_or_default();
        let prefix = format!("{} ", rig.devnum());
        text.lines().find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().parse::<u64>().unwrap())).unwrap_or(0)
    };
    // Deadlines of the waits below, not expectations: fio's start and the agent's thread may each
    // wait seconds for a core on a machine loaded 10-30 deep.
    const LOADED: Duration = Duration::from_secs(10);
    let periods = || ioshare_agent::Status::read(state.path()).map_or(0, |s| s.periods);
    let took = with_agent(&config, state.path(), || {
        let _a = rig.fio(0, DEPTH, &[]);
        assert!(wait_for(LOADED, || rig.ios(0) > 0).is_some(), "fio in a never read");
        // Two periods planned with a's IO in them: the agent has seen it alone.
        let seen = periods() + 2;
        assert!(wait_for(LOADED, || periods() >= seen).is_some(), "the agent stopped planning");
        assert_eq!(limit_of(rig.cgroups[0].path()), 0, "a cgroup alone is not limited");
        let late = BlkioCgroup::create(&format!("{}/late", rig.parent())).unwrap();
        let mut cmd = std::process::Command::new("fio");
        cmd.args([
            "--name=r",
            "--rw=randread",
            "--bs=4k",
            "--ioengine=libaio",
            "--direct=1",
            "--time_based",
            "--thread",
        ])
        .args(["--runtime=60", "--iodepth=16", "--output=/dev/null"])
        .arg(format!("--filename={}", rig.dev.path().display()));
        let _b = KillOnDrop(late.spawn(cmd).unwrap());
        // Timed from its first IO (a cgroup without IO is not limited, and fio's start under load
        // is not the agent's doing): both cgroups now compete, so both get limits.
        let late_ios = || late.stats().ok().and_then(|s| s.device(rig.devnum()).map(|d| d.ios.read)).unwrap_or(0);
        assert!(wait_for(LOADED, || late_ios() > 0).is_some(), "fio in the late cgroup never read");
        let took = wait_for(LOADED, || limit_of(late.path()) > 0 && limit_of(rig.cgroups[0].path()) > 0);
        drop(_b);
        // The agent must see it vanish without error before the rig goes: its status drops it.
        late.remove().unwrap();
        let listed = || {
            ioshare_agent::Status::read(state.path())
                .is_ok_and(|s| s.devices.iter().any(|d| d.groups.iter().any(|g| g.cgroup.ends_with("/late"))))
        };
        assert!(wait_for(LOADED, || !listed()).is_some(), "the agent still lists the removed cgroup");
        took
    });
    eprintln!("a cgroup created after start got limits {took:?} after its first IO");
    let took = took.expect("the late cgroup never got a limit");
    // Acceptance: within 1 s (discovery every 200 ms, then one 100 ms period to see its IO).
    assert!(took < Duration::from_secs(1), "took {took:?}");
}
