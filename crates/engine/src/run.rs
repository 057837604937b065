//! The event loop: tenants' jobs produce IOs, the controller decides when each may enter the ring,
//! the ring serves them, completions feed the controller and the metrics.
//!
//! One thread, one ring. Each job owns `iodepth` slots (an IO id, a buffer window); a free slot
//! produces an IO when its think time has passed, the job's rate cap allows, and the tenant is not
//! paused by a controller delay. The IO goes to [`Controller::submit`]; released IOs
//! (`Submit::Issue`, `Dispatch::Io`) are queued on the ring and submitted in one `io_uring_enter`
//! per loop turn, which also waits — for a completion, or at most until the earliest of the
//! planner's tick, the controller's next release, a producer's wake-up, the next sample, and the
//! end of the run. Time is the monotonic clock in ns since the run started.
//!
//! Latency is measured from the moment the job produced the IO (before the controller), so time an
//! IO waits in the controller counts, as an application would see it. The window over which totals
//! are taken starts after the warm-up; the per-interval series covers the whole run.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ioshare_core::{
    Completion, Controller, Dispatch, GroupId, GroupSettings, Io, Nanos, Submit, NSEC_PER_MSEC, NSEC_PER_SEC,
    NSEC_PER_USEC,
};

use crate::error::{Error, Result};
use crate::job::{IoGen, TenantSpec};
use crate::metrics::TenantMetrics;
use crate::report::{ControllerSample, CpuReport, DeviceReport, GroupSample, RunReport};
use crate::ring::{completion_error, Ring};
use crate::target::Target;

/// How long a run lasts and how it is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Total length, ns.
    pub duration: Nanos,
    /// Leading part excluded from the totals, ns (controllers settle, queues fill).
    pub warmup: Nanos,
    /// Length of one time-series interval, ns.
    pub sample_every: Nanos,
    /// Most IOs on the device at once (a block device's tag count); released IOs beyond it wait in
    /// arrival order for a slot, and that wait is what `Completion::started` reports. 0 = unlimited.
    pub device_depth: u32,
    /// IOs submitted together (one `io_uring_enter`); see [`SUBMIT_BATCH`]. 1 submits each IO
    /// alone, which io_uring does without a plug, so the block layer cannot merge neighbouring IOs
    /// of one submission (what IOCost charges per IO is then what the device serves per request).
    pub submit_batch: u32,
    /// Time zero of the run's clock (its samples' times), when something else must line up with them;
    /// `None`: when the engine starts issuing.
    pub epoch: Option<Instant>,
}

impl RunOptions {
    /// `duration` ns with a warm-up of a tenth of it (at most 1 s) and 1 s samples (a fifth of the
    /// run for runs shorter than 5 s, so that short runs still show a time series).
    pub fn new(duration: Nanos) -> Self {
        RunOptions {
            duration,
            warmup: (duration / 10).min(NSEC_PER_SEC),
            sample_every: (duration / 5).clamp(10 * NSEC_PER_MSEC, NSEC_PER_SEC),
            device_depth: 0,
            submit_batch: SUBMIT_BATCH,
            epoch: None,
        }
    }
}

/// After the run ends, how long IOs the controller still holds may take to drain before they are
/// dropped (they never reached the kernel, so dropping them is safe).
const DRAIN_LIMIT: Nanos = NSEC_PER_SEC;
/// With nothing in flight, wake-ups nearer than this are waited for by spinning, ns (covers the
/// bench's 100 µs think time).
const SPIN: Nanos = 150 * NSEC_PER_USEC;
/// IOs submitted together by default. io_uring plugs a batch of more than two: the block layer sees none of its IOs until it
/// has prepared all of them, so the first waits for the last. Submitting every few IOs, as they are
/// produced, measured 10-20% more IOPS than one submission per loop turn (device latency 0.29 ms
/// instead of 0.38 at the same queue depth on this virtual disk), level with fio.
pub const SUBMIT_BATCH: u32 = 4;

#[derive(Clone, Copy, Debug)]
struct Slot {
    job: u32,
    io: Io,
    created: Nanos,
    released: Nanos,
    started: Nanos,
}

#[derive(Debug)]
struct JobState {
    tenant: usize,
    group: GroupId,
    gen: IoGen,
    block_size: u32,
    think: Nanos,
    interval: Nanos,
    next_issue: Nanos,
    catch_up: Nanos,
    end: Nanos,
    /// Free slots with the time each may issue again, in completion order.
    ready: VecDeque<(Nanos, u32)>,
}

#[derive(Debug)]
struct TenantState {
    paused_until: Nanos,
    metrics: TenantMetrics,
}

/// The device side: ring, slots, in-flight accounting.
struct Device {
    ring: Ring,
    slots: Vec<Slot>,
    /// IOs queued on the ring since the last submission.
    pending: u32,
    /// Most IOs on the ring at once (0 = unlimited).
    depth: u32,
    /// IOs queued before they are submitted.
    batch: u32,
    /// Released IOs waiting for a device slot, in release order.
    waiting: VecDeque<u32>,
    inflight: u32,
    last_change: Nanos,
    busy_ns: u64,
    inflight_ns: u128,
}

impl Device {
    /// Takes a released IO: onto the ring if a device slot is free, else into the slot queue.
    #[inline]
    fn issue(&mut self, io: Io, now: Nanos) -> Result<()> {
        let slot = &mut self.slots[io.id as usize];
        slot.io = io;
        slot.released = now;
        if self.depth == 0 || self.inflight + self.pending < self.depth {
            self.start(io.id as u32, now)
        } else {
            self.waiting.push_back(io.id as u32);
            Ok(())
        }
    }

    /// Queues slot `slot`'s IO on the ring; it starts on the device now. Every `batch` IOs are
    /// submitted at once rather than at the end of the loop turn.
    #[inline]
    fn start(&mut self, slot: u32, now: Nanos) -> Result<()> {
        let s = &mut self.slots[slot as usize];
        s.started = now;
        let io = s.io;
        self.ring.push(slot, io.op, io.offset, io.len);
        self.pending += 1;
        if self.pending >= self.batch {
            self.flush(now)?;
        }
        Ok(())
    }

    /// Submits the IOs queued on the ring; they count as in flight from now.
    fn flush(&mut self, now: Nanos) -> Result<()> {
        self.account(now);
        self.inflight += self.pending;
        self.pending = 0;
        self.ring.submit()
    }

    /// Moves IOs waiting for a device slot onto the ring while slots are free.
    fn refill(&mut self, now: Nanos) -> Result<()> {
        while self.inflight + self.pending < self.depth {
            match self.waiting.pop_front() {
                Some(slot) => self.start(slot, now)?,
                None => break,
            }
        }
        Ok(())
    }

    fn account(&mut self, now: Nanos) {
        let dt = now.saturating_sub(self.last_change);
        if self.inflight > 0 {
            self.busy_ns += dt;
            self.inflight_ns += dt as u128 * self.inflight as u128;
        }
        self.last_change = now;
    }
}

/// Runs `tenants` on `target` under `ctl` until `opts.duration` passes or `stop` is set; returns what
/// was measured (with `interrupted` set when stopped early). Every IO submitted to the kernel is
/// reaped before returning, on every path.
pub fn run<C: Controller + ?Sized>(
    target: &Target,
    tenants: &[TenantSpec],
    ctl: &mut C,
    opts: &RunOptions,
    stop: &AtomicBool,
) -> Result<RunReport> {
    let mut jobs = Vec::new();
    let mut max_bs = 0;
    for (t, spec) in tenants.iter().enumerate() {
        let group = ctl
            .configure(0, &spec.group, &GroupSettings { weight: spec.weight, limits: spec.limits.clone() })
            .map_err(|source| Error::Controller { tenant: spec.name.clone(), source })?;
        if spec.jobs.is_empty() {
            return Err(Error::InvalidJob {
                tenant: spec.name.clone(),
                reason: "a tenant needs at least one job".into(),
            });
        }
        for job in &spec.jobs {
            job.validate(&spec.name, target.size())?;
            if job.writes() && !target.writable() {
                return Err(Error::InvalidJob {
                    tenant: spec.name.clone(),
                    reason: format!("it writes, but '{}' was opened read-only", target.path().display()),
                });
            }
            max_bs = max_bs.max(job.block_size);
            jobs.push(JobState {
                tenant: t,
                group,
                gen: IoGen::new(job, target.size(), (t as u64) << 32 | jobs.len() as u64),
                block_size: job.block_size,
                think: job.think_time,
                interval: job.rate_iops.map_or(0, |r| (NSEC_PER_SEC / r).max(1)),
                next_issue: 0,
                catch_up: job.catch_up,
                end: job.runtime.map_or(opts.duration, |r| r.min(opts.duration)),
                ready: VecDeque::with_capacity(job.iodepth as usize),
            });
        }
    }
    let mut slots = Vec::new();
    for (j, spec) in tenants.iter().flat_map(|t| &t.jobs).enumerate() {
        for _ in 0..spec.iodepth {
            jobs[j].ready.push_back((0, slots.len() as u32));
            let io = Io::new(slots.len() as u64, jobs[j].group, ioshare_core::Op::Read, 0, 0);
            slots.push(Slot { job: j as u32, io, created: 0, released: 0, started: 0 });
        }
    }
    let nslots = slots.len() as u32;
    let ring = Ring::new(target.fd(), nslots, max_bs as usize)?;
    let dev = Device {
        ring,
        slots,
        pending: 0,
        depth: opts.device_depth,
        batch: opts.submit_batch.max(1),
        waiting: VecDeque::with_capacity(nslots as usize),
        inflight: 0,
        last_change: 0,
        busy_ns: 0,
        inflight_ns: 0,
    };
    let tenants_state =
        tenants.iter().map(|_| TenantState { paused_until: 0, metrics: TenantMetrics::default() }).collect();
    let mut engine = Engine {
        dev,
        jobs,
        tenants: tenants_state,
        ctl,
        held: 0,
        sampled_inflight_ns: 0,
        clock: opts.epoch.unwrap_or_else(Instant::now),
    };
    let outcome = engine.event_loop(opts, stop, target);
    let (window, busy, inflight_ns, cpu, interrupted, ctl_series) = match outcome {
        Ok(v) => v,
        Err(e) => {
            if engine.dev.inflight > 0 {
                // Only after a failed io_uring_enter: the kernel may still write into the buffers,
                // so ring and buffers are kept alive for the rest of the process, never freed early.
                std::mem::forget(engine);
            }
            return Err(e);
        }
    };
    // The loop returns normally only once nothing is in flight; buffers are freed next.
    assert_eq!(engine.dev.inflight, 0, "every submitted IO is reaped");
    let secs = window.max(1) as f64 / NSEC_PER_SEC as f64;
    let tenant_reports: Vec<_> = tenants
        .iter()
        .zip(&engine.tenants)
        .map(|(spec, st)| st.metrics.report(&spec.name, &spec.group, spec.weight, window))
        .collect();
    let ios: u64 = engine.tenants.iter().map(|t| t.metrics.ios()).sum();
    let bytes: u64 = engine.tenants.iter().map(|t| t.metrics.bytes()).sum();
    Ok(RunReport {
        controller: engine.ctl.name().to_string(),
        window_s: secs,
        interrupted,
        tenants: tenant_reports,
        device: DeviceReport {
            iops: ios as f64 / secs,
            bw_bytes: bytes as f64 / secs,
            busy_pct: busy as f64 * 100.0 / window.max(1) as f64,
            avg_inflight: inflight_ns as f64 / window.max(1) as f64,
        },
        cpu: CpuReport { user_s: cpu.0, sys_s: cpu.1, ns_per_io: (cpu.0 + cpu.1) * 1e9 / ios.max(1) as f64 },
        controller_series: ctl_series,
    })
}

/// Window length, busy ns, in-flight integral, (user, sys) CPU s, interrupted, controller samples.
type LoopOutcome = (Nanos, u64, u128, (f64, f64), bool, Vec<ControllerSample>);

struct Engine<'c, C: Controller + ?Sized> {
    dev: Device,
    jobs: Vec<JobState>,
    tenants: Vec<TenantState>,
    ctl: &'c mut C,
    /// IOs the controller holds.
    held: u64,
    /// The device's in-flight integral at the last sample.
    sampled_inflight_ns: u128,
    clock: Instant,
}

impl<C: Controller + ?Sized> Engine<'_, C> {
    #[inline]
    fn now(&self) -> Nanos {
        self.clock.elapsed().as_nanos() as Nanos
    }

    fn event_loop(&mut self, opts: &RunOptions, stop: &AtomicBool, target: &Target) -> Result<LoopOutcome> {
        let end = opts.duration;
        let mut stopping_at: Option<Nanos> = None;
        let mut interrupted = false;
        let mut error: Option<Error> = None;
        // The sample grid starts at the clock's zero (the epoch, which may lie before this run started).
        let mut last_sample = self.now();
        let mut next_sample = (last_sample / opts.sample_every.max(1) + 1) * opts.sample_every;
        let mut window_start: Option<(Nanos, u64, u128, (f64, f64))> = None;
        let mut window_end: Option<(Nanos, u64, u128, (f64, f64))> = None;
        let mut ctl_series = Vec::with_capacity(((end / opts.sample_every.max(1)) as usize + 2).min(4096));
        loop {
            let now = self.now();
            if window_start.is_none() && now >= opts.warmup {
                self.dev.account(now);
                window_start = Some((now, self.dev.busy_ns, self.dev.inflight_ns, thread_cpu()));
            }
            if stopping_at.is_none() && (now >= end || stop.load(Ordering::Relaxed) || error.is_some()) {
                interrupted = now < end && error.is_none();
                stopping_at = Some(now);
                self.dev.account(now);
                window_end = Some((now, self.dev.busy_ns, self.dev.inflight_ns, thread_cpu()));
            }
            if let Some(t) = self.ctl.next_tick() {
                if t <= now {
                    self.ctl.tick(now);
                }
            }
            let mut wake = if stopping_at.is_none() { self.produce(now)? } else { None };
            loop {
                match self.ctl.dispatch(now) {
                    Dispatch::Io(io) => {
                        self.held -= 1;
                        self.dev.issue(io, now)?;
                    }
                    Dispatch::At(t) => {
                        wake = earliest(wake, t);
                        break;
                    }
                    Dispatch::Idle => break,
                }
            }
            if now >= next_sample && stopping_at.is_none() {
                self.sample(now, now - last_sample, &mut ctl_series);
                last_sample = now;
                next_sample += opts.sample_every;
            }
            if let Some(s) = stopping_at {
                let drained = self.held == 0 || now >= s + DRAIN_LIMIT;
                if drained && self.dev.inflight == 0 && self.dev.pending == 0 && self.dev.waiting.is_empty() {
                    break;
                }
                wake = earliest(wake, s + DRAIN_LIMIT);
            } else {
                wake = earliest(wake, next_sample.min(end));
            }
            if let Some(t) = self.ctl.next_tick() {
                wake = earliest(wake, t);
            }
            self.enter(wake)?;
            let now = self.now();
            let in_window = window_start.is_some() && stopping_at.is_none();
            self.reap(now, in_window, &mut error, target)?;
        }
        if let Some(e) = error {
            return Err(e);
        }
        let start = window_start.unwrap_or((0, 0, 0, (0.0, 0.0)));
        let stopped = window_end.expect("set when stopping");
        let window = stopped.0.saturating_sub(start.0);
        let cpu = ((stopped.3 .0 - start.3 .0).max(0.0), (stopped.3 .1 - start.3 .1).max(0.0));
        Ok((window, stopped.1 - start.1, stopped.2 - start.2, cpu, interrupted, ctl_series))
    }

    /// Lets every job fill its free slots; returns the earliest time a job wants to run again.
    fn produce(&mut self, now: Nanos) -> Result<Option<Nanos>> {
        let mut wake = None;
        for job in self.jobs.iter_mut() {
            if now >= job.end {
                continue;
            }
            let tenant = &mut self.tenants[job.tenant];
            while let Some(&(ready, slot)) = job.ready.front() {
                if tenant.paused_until > now {
                    wake = earliest(wake, tenant.paused_until);
                    break;
                }
                if ready > now {
                    wake = earliest(wake, ready);
                    break;
                }
                if job.interval > 0 {
                    if job.next_issue > now {
                        wake = earliest(wake, job.next_issue);
                        break;
                    }
                    job.next_issue = job.next_issue.max(now.saturating_sub(job.catch_up)) + job.interval;
                }
                job.ready.pop_front();
                let (op, offset, must) = job.gen.next_io();
                let mut io = Io::new(slot as u64, job.group, op, offset, job.block_size);
                io.flags.must_issue = must;
                self.dev.slots[slot as usize].created = now;
                match self.ctl.submit(now, io) {
                    Submit::Issue { io, delay } => {
                        self.dev.issue(io, now)?;
                        if delay > 0 {
                            tenant.paused_until = now + delay;
                        }
                    }
                    Submit::Queued => self.held += 1,
                }
            }
        }
        Ok(wake)
    }

    /// Submits the queued IOs, then waits for a completion or the `wake` time. A wake-up less than
    /// [`SPIN`] away with nothing in flight is waited for by spinning on the clock: on a virtual
    /// machine a sleeping vCPU can take 100+ µs to wake, which would stretch short think times and
    /// controller release times. With IO in flight the thread sleeps in the kernel (polling the ring
    /// instead took CPU the completions needed: fewer IOPS, measured against fio).
    fn enter(&mut self, wake: Option<Nanos>) -> Result<()> {
        let now = self.now();
        self.dev.account(now);
        self.dev.inflight += self.dev.pending;
        self.dev.pending = 0;
        if self.dev.inflight > 0 {
            return self.dev.ring.submit_and_wait(wake.map(|w| w.saturating_sub(now)));
        }
        match wake {
            None => self.dev.ring.submit(),
            Some(w) if w <= now + SPIN => {
                self.dev.ring.submit()?;
                while self.now() < w {
                    std::hint::spin_loop();
                }
                Ok(())
            }
            Some(w) => self.dev.ring.submit_and_wait(Some(w - now)),
        }
    }

    fn reap(&mut self, now: Nanos, in_window: bool, error: &mut Option<Error>, target: &Target) -> Result<()> {
        self.dev.account(now);
        let Engine { dev, jobs, tenants, ctl, .. } = self;
        let Device { ring, slots, inflight, .. } = dev;
        ring.reap(|slot, res| {
            *inflight -= 1;
            let s = slots[slot as usize];
            if let Some(e) = completion_error(res, s.io.len) {
                error.get_or_insert(Error::Device {
                    path: target.path().to_path_buf(),
                    offset: s.io.offset,
                    source: e,
                });
            }
            ctl.complete(now, &s.io, Completion { released: s.released, started: s.started });
            let job = &mut jobs[s.job as usize];
            tenants[job.tenant].metrics.record(s.io.op, s.io.len, now - s.created, in_window);
            job.ready.push_back((now + job.think, slot));
        });
        dev.refill(now)
    }

    fn sample(&mut self, now: Nanos, len: Nanos, series: &mut Vec<ControllerSample>) {
        for t in &mut self.tenants {
            t.metrics.close_interval(now, len);
        }
        let stats = self.ctl.stats(now);
        self.dev.account(now);
        let inflight = (self.dev.inflight_ns - self.sampled_inflight_ns) as f64 / len.max(1) as f64;
        self.sampled_inflight_ns = self.dev.inflight_ns;
        series.push(ControllerSample {
            t_s: now as f64 / NSEC_PER_SEC as f64,
            inflight,
            vrate_pct: stats.device.vrate_pct,
            busy_level: stats.device.busy_level,
            missed_ppm: stats.device.missed_ppm,
            rq_wait_pct: stats.device.rq_wait_pct,
            depth_limit: stats.device.depth_limit,
            groups: stats
                .groups
                .into_iter()
                .map(|g| GroupSample {
                    path: g.path,
                    hweight_active: g.hweight_active,
                    hweight_inuse: g.hweight_inuse,
                    debt_us: g.debt_us,
                    delay_us: g.delay_us,
                    queued: g.queued,
                    vbudget_us: g.vbudget_us,
                })
                .collect(),
        });
    }
}

fn earliest(a: Option<Nanos>, b: Nanos) -> Option<Nanos> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// This thread's (user, system) CPU time in seconds.
fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let s = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}
