//! The discrete-event driver: calls a controller exactly as `ioshare_core::controller` prescribes.
//!
//! - A producer's arrival → `submit(now, io)`. `Issue` sends the IO to the device; a `delay` > 0
//!   holds back that producer (for swap-out IO: the producers of the charged group) for that long.
//!   `Queued` leaves it to the controller.
//! - After a `Queued` submit, every completion, tick and wake-up: `dispatch(now)` until `At(t)`
//!   (a wake-up event is scheduled at t) or `Idle`.
//! - Device completion → `complete(now, &io, Completion { released, started })`, `started` later
//!   than `released` when the IO waited for the device to accept it (its queue depth was reached).
//! - `tick(now)` when `next_tick()` is due; `next_tick` is re-read after every event (so also after
//!   every tick and configure).
//!
//! Everything is in virtual ns and ordered by (time, sequence), so a run depends only on the
//! simulation and its seed. The engine implements [`Simulation::run`]: the description does not
//! know its runner (no import back into `simulation`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use hdrhistogram::Histogram;
use ioshare_core::{Completion, Controller, Dispatch, GroupId, GroupSettings, Io, Nanos, Op, Submit};
use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::device::{Device, Request, Started, NO_SLOT};
use crate::error::SimError;
use crate::memory::{Pool, SwapCharge};
use crate::queue::{Ev, EventQueue};
use crate::report::{DevicePoint, DeviceReport, GroupPoint, GroupReport, Latency, MemoryReport, Report, SimStats};
use crate::simulation::{ChangeKind, ControllerSpec, Simulation};
use crate::workload::{seek_depth, Job, Load, DEFAULT_SIZE};

/// Where swap-out writes go on the device (far from the jobs' default regions).
const SWAP_AREA: u64 = 1 << 40;
/// Quantiles of the latency distribution kept in reports.
const QUANTILES: [f64; 12] = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A job's IO.
    Job,
    /// A swap-out write submitted to the controller.
    Swap,
    /// A swap-out write issued by the root, unseen by the controller.
    RootSwap,
}

/// One IO in flight.
#[derive(Clone, Copy, Debug)]
struct Rec {
    io: Io,
    kind: Kind,
    job: u32,
    slot: u32,
    submitted: Nanos,
    released: Nanos,
    started: Nanos,
    mem: u64,
}

/// A job while it runs.
struct JobRun {
    spec: Job,
    group: usize,
    rng: SmallRng,
    cursor: u64,
    base: u64,
    paused_until: Nanos,
    outstanding: u32,
    depth: u32,
    live: Vec<bool>,
    window: Vec<Nanos>,
}

/// A group's measurements.
struct GroupRun {
    id: GroupId,
    path: String,
    weight: u32,
    ios: u64,
    bytes: u64,
    busy: u128,
    hist: Histogram<u64>,
    dev_hist: Histogram<u64>,
    interval: Histogram<u64>,
    interval_dev: Histogram<u64>,
    interval_ios: u64,
    interval_bytes: u64,
    paused: u128,
    max_debt_us: u64,
    max_delay_us: u64,
    must_issue: u64,
    mem_stall: u128,
    dropped: u64,
    series: Vec<GroupPoint>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant figures is valid")
}

/// Non-empty buckets `[upper_bound_us, count]` of a histogram of ns, four buckets per doubling from 1 µs.
fn latency_buckets(h: &Histogram<u64>) -> Vec<[f64; 2]> {
    h.iter_log(1_000, 2f64.powf(0.25))
        .filter(|b| b.count_since_last_iteration() > 0)
        .map(|b| [b.value_iterated_to() as f64 / 1e3, b.count_since_last_iteration() as f64])
        .collect()
}

/// Summary in µs of a histogram of ns.
fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
    Latency {
        mean: h.mean() / 1e3,
        p50: us(0.5),
        p90: us(0.9),
        p95: us(0.95),
        p99: us(0.99),
        max: h.max() as f64 / 1e3,
    }
}

struct Engine<'a> {
    sc: &'a Simulation,
    now: Nanos,
    q: EventQueue,
    ctl: Box<dyn Controller>,
    dev: Device,
    jobs: Vec<JobRun>,
    groups: Vec<GroupRun>,
    recs: Vec<Rec>,
    free_recs: Vec<u32>,
    wake_at: Nanos,
    tick_at: Option<Nanos>,
    /// IOs inside the device, and released IOs waiting for it to accept them (its queue depth).
    in_device: u32,
    waiting: VecDeque<u32>,
    pool: Option<Pool>,
    /// Group whose pages reclaim evicts (the first leak job's), and its leak jobs.
    leaker: Option<usize>,
    busy_total: u128,
    interval_busy: u128,
    swap_busy: u128,
    swap_ios: u64,
    ios_total: u64,
    submitted: u64,
    events: u64,
    vrate: f64,
    vrate_at: Nanos,
    vrate_area: f64,
    dev_series: Vec<DevicePoint>,
    controller_events: BTreeMap<String, u64>,
}

/// Runs `sc` with `ctl`; `name` overrides the controller's name in the report.
pub(crate) fn run(sc: &Simulation, ctl: Box<dyn Controller>, name: Option<String>) -> Result<Report, SimError> {
    sc.validate()?;
    let wall = Instant::now();
    let mut e = Engine::new(sc, ctl)?;
    e.start();
    while let Some((at, ev)) = e.q.pop() {
        if at > sc.duration {
            break;
        }
        e.now = at;
        e.events += 1;
        e.handle(ev);
        e.sync_tick();
    }
    e.now = sc.duration;
    let wall = wall.elapsed().as_secs_f64();
    Ok(e.report(name, wall))
}

impl<'a> Engine<'a> {
    fn new(sc: &'a Simulation, mut ctl: Box<dyn Controller>) -> Result<Self, SimError> {
        let dev = sc.device.build(sc.seed)?;
        let mut groups = Vec::new();
        let mut jobs = Vec::new();
        let mut leaker = None;
        for (gi, g) in sc.groups.iter().enumerate() {
            let id = ctl.configure(0, &g.path, &g.settings())?;
            groups.push(GroupRun {
                id,
                path: g.path.trim_matches('/').to_string(),
                weight: g.weight,
                ios: 0,
                bytes: 0,
                busy: 0,
                hist: histogram(),
                dev_hist: histogram(),
                interval: histogram(),
                interval_dev: histogram(),
                interval_ios: 0,
                interval_bytes: 0,
                paused: 0,
                max_debt_us: 0,
                max_delay_us: 0,
                must_issue: 0,
                mem_stall: 0,
                dropped: 0,
                series: Vec::new(),
            });
            for job in &g.jobs {
                let index = jobs.len() as u64;
                if matches!(job.load, Load::Leak { .. }) && leaker.is_none() {
                    leaker = Some(gi);
                }
                let max_depth = match job.load {
                    Load::Seeking { max_depth, .. } => max_depth as usize,
                    _ => 0,
                };
                jobs.push(JobRun {
                    spec: job.clone(),
                    group: gi,
                    rng: SmallRng::seed_from_u64(sc.seed ^ (index + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    cursor: 0,
                    base: job.offset.unwrap_or(index * DEFAULT_SIZE),
                    paused_until: 0,
                    outstanding: 0,
                    depth: 1,
                    live: vec![false; max_depth],
                    window: Vec::new(),
                });
            }
        }
        let vrate = ctl.stats(0).device.vrate_pct;
        Ok(Engine {
            sc,
            now: 0,
            q: EventQueue::default(),
            ctl,
            dev,
            jobs,
            groups,
            recs: Vec::new(),
            free_recs: Vec::new(),
            wake_at: Nanos::MAX,
            tick_at: None,
            in_device: 0,
            waiting: VecDeque::new(),
            pool: sc.memory.as_ref().map(Pool::new),
            leaker,
            busy_total: 0,
            interval_busy: 0,
            swap_busy: 0,
            swap_ios: 0,
            ios_total: 0,
            submitted: 0,
            events: 0,
            vrate,
            vrate_at: sc.warmup,
            vrate_area: 0.0,
            dev_series: Vec::new(),
            controller_events: BTreeMap::new(),
        })
    }

    fn start(&mut self) {
        for (j, job) in self.jobs.iter_mut().enumerate() {
            let j = j as u32;
            match job.spec.load {
                Load::Closed { iodepth, .. } => {
                    (0..iodepth).for_each(|slot| self.q.push(0, Ev::Arrive { job: j, slot }))
                }
                Load::Seeking { period, .. } => {
                    job.live[0] = true;
                    self.q.push(0, Ev::Arrive { job: j, slot: 0 });
                    self.q.push(period, Ev::JobTimer { job: j });
                }
                Load::Open { .. } | Load::Leak { .. } => self.q.push(0, Ev::Arrive { job: j, slot: 0 }),
            }
        }
        for (i, c) in self.sc.changes.iter().enumerate() {
            self.q.push(c.at, Ev::Change { index: i as u32 });
        }
        self.q.push(self.sc.sample_interval, Ev::Sample);
        self.sync_tick();
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { job, slot } => self.arrive(job, slot),
            Ev::Done { token, slot } => self.done(token, slot),
            Ev::Wake => {
                if self.now >= self.wake_at {
                    self.wake_at = Nanos::MAX;
                }
                self.dispatch();
            }
            Ev::Tick => {
                if self.ctl.next_tick().is_some_and(|t| t <= self.now) {
                    self.tick_at = None;
                    self.ctl.tick(self.now);
                    self.after_tick();
                    self.dispatch();
                }
            }
            Ev::JobTimer { job } => self.seek_control(job),
            Ev::Change { index } => self.apply_change(index as usize),
            Ev::Sample => self.sample(),
        }
    }

    /// Schedules the planner when the controller's next tick moved.
    fn sync_tick(&mut self) {
        if let Some(t) = self.ctl.next_tick() {
            if self.tick_at != Some(t) {
                self.tick_at = Some(t);
                self.q.push(t.max(self.now), Ev::Tick);
            }
        }
    }

    fn dispatch(&mut self) {
        loop {
            match self.ctl.dispatch(self.now) {
                Dispatch::Io(io) => self.release(io),
                Dispatch::At(t) => {
                    let t = t.max(self.now + 1);
                    if t < self.wake_at {
                        self.wake_at = t;
                        self.q.push(t, Ev::Wake);
                    }
                    return;
                }
                Dispatch::Idle => return,
            }
        }
    }

    fn arrive(&mut self, j: u32, slot: u32) {
        let now = self.now;
        let job = &mut self.jobs[j as usize];
        if now < job.paused_until {
            self.q.push(job.paused_until, Ev::Arrive { job: j, slot });
            return;
        }
        match job.spec.load {
            Load::Seeking { .. } if slot >= job.depth => {
                job.live[slot as usize] = false;
                return;
            }
            Load::Open { max_outstanding, .. } => {
                let next = job.spec.next_arrival(now, &mut job.rng);
                self.q.push(next, Ev::Arrive { job: j, slot });
                if job.outstanding >= max_outstanding {
                    if now >= self.sc.warmup {
                        self.groups[job.group].dropped += 1;
                    }
                    return;
                }
            }
            _ => {}
        }
        self.produce(j, slot);
    }

    /// A producer that may go: takes its memory (or queues for it), then proceeds.
    fn produce(&mut self, j: u32, slot: u32) {
        let job = &self.jobs[j as usize];
        let need = match job.spec.load {
            Load::Leak { .. } => job.spec.bs as u64,
            _ => job.spec.mem_bytes,
        };
        if need > 0 {
            let pool = self.pool.as_mut().expect("validated: memory pool present");
            if !pool.allocate((j, slot, need, self.now)) {
                self.reclaim();
                return;
            }
        }
        self.proceed(j, slot, need);
    }

    /// Serves the producers waiting for memory that is now free, then reclaims for the rest.
    fn serve_memory(&mut self) {
        while let Some((j, slot, need, since)) = self.pool.as_mut().and_then(Pool::serve) {
            if self.now >= self.sc.warmup {
                self.groups[self.jobs[j as usize].group].mem_stall += (self.now - since) as u128;
            }
            self.proceed(j, slot, need);
        }
        self.reclaim();
    }

    /// A producer with its memory: a leak schedules its next growth, a job submits its IO.
    fn proceed(&mut self, j: u32, slot: u32, need: u64) {
        let now = self.now;
        let job = &mut self.jobs[j as usize];
        if let Load::Leak { rate } = job.spec.load {
            let next = now + (need as f64 * 1e9 / rate).round().max(1.0) as Nanos;
            self.q.push(next, Ev::Arrive { job: j, slot });
            return;
        }
        let (op, offset, must) = job.spec.draw(&mut job.rng, &mut job.cursor, job.base);
        let (group, len) = (job.group, job.spec.bs);
        job.outstanding += 1;
        if must && now >= self.sc.warmup {
            self.groups[group].must_issue += 1;
        }
        self.submit(Kind::Job, j, slot, group, op, offset, len, must, need);
    }

    /// Issues the swap-out writes (evicting the leaker's pages) the waiting producers need.
    fn reclaim(&mut self) {
        let Some(pool) = self.pool.as_ref() else { return };
        let leaker = self.leaker.expect("validated: a leak job exists");
        let (len, charge) = (pool.swap_bytes, pool.charge);
        let kind = if charge == SwapCharge::Root { Kind::RootSwap } else { Kind::Swap };
        while self.pool.as_mut().expect("memory pool present").needs_swap() {
            let offset = SWAP_AREA + (self.swap_ios % 1_000_000) * len as u64;
            self.swap_ios += 1;
            self.submit(kind, u32::MAX, 0, leaker, Op::Write, offset, len, charge == SwapCharge::Debt, 0);
        }
    }

    /// Creates the in-flight record and offers the IO to the controller (or, for root swap, to the
    /// device directly). Returns the token.
    #[allow(clippy::too_many_arguments)]
    fn submit(
        &mut self,
        kind: Kind,
        job: u32,
        slot: u32,
        group: usize,
        op: Op,
        offset: u64,
        len: u32,
        must: bool,
        mem: u64,
    ) -> u32 {
        let now = self.now;
        let token = self.free_recs.pop().unwrap_or_else(|| {
            self.recs.push(Rec {
                io: Io::new(0, GroupId(0), Op::Read, 0, 0),
                kind,
                job,
                slot,
                submitted: 0,
                released: 0,
                started: 0,
                mem: 0,
            });
            (self.recs.len() - 1) as u32
        });
        self.submitted += 1;
        let mut io = Io::new(token as u64, self.groups[group].id, op, offset, len);
        if must {
            io = io.must_issue();
        }
        self.recs[token as usize] = Rec { io, kind, job, slot, submitted: now, released: now, started: now, mem };
        if kind == Kind::RootSwap {
            self.release(io);
            return token;
        }
        match self.ctl.submit(now, io) {
            Submit::Issue { io, delay } => {
                if delay > 0 {
                    self.pause(kind, job, group, delay);
                }
                self.release(io);
            }
            Submit::Queued => self.dispatch(),
        }
        token
    }

    /// Holds back a producer after a controller delay: the submitting job, or for swap-out IO the
    /// charged group's jobs (the kernel delays the tasks of the cgroup the swap IO was charged to).
    fn pause(&mut self, kind: Kind, job: u32, group: usize, delay: Nanos) {
        let until = self.now + delay;
        let mut paused = 0;
        for (j, run) in self.jobs.iter_mut().enumerate() {
            let hit = if kind == Kind::Job { j == job as usize } else { run.group == group };
            if hit && run.paused_until < until {
                paused += until - run.paused_until.max(self.now);
                run.paused_until = until;
            }
        }
        if self.now >= self.sc.warmup {
            self.groups[group].paused += paused as u128;
        }
    }

    /// The controller released `io`: into the device if it has room, else in line in front of it.
    fn release(&mut self, io: Io) {
        let token = io.id as u32;
        let rec = &mut self.recs[token as usize];
        rec.io = io;
        rec.released = self.now;
        if self.in_device < self.dev.queue_depth() {
            self.admit(token);
        } else {
            self.waiting.push_back(token);
        }
    }

    /// The device accepts the IO (`started` for the controller); it is served when a server frees.
    fn admit(&mut self, token: u32) {
        self.in_device += 1;
        let rec = &mut self.recs[token as usize];
        rec.started = self.now;
        let io = rec.io;
        let group = self.jobs.get(rec.job as usize).map_or(self.leaker.unwrap_or(0), |j| j.group);
        let req = Request { token, group: group as u32, op: io.op, offset: io.offset, len: io.len };
        if let Some(st) = self.dev.arrive(self.now, req) {
            self.started(st);
        }
    }

    fn started(&mut self, st: Started) {
        let rec = &self.recs[st.token as usize];
        if st.start >= self.sc.warmup {
            let busy = st.busy as u128;
            self.busy_total += busy;
            self.interval_busy += busy;
            match rec.kind {
                Kind::Job => self.groups[self.jobs[rec.job as usize].group].busy += busy,
                Kind::Swap => {
                    self.swap_busy += busy;
                    self.groups[self.leaker.expect("swap implies a leaker")].busy += busy;
                }
                Kind::RootSwap => self.swap_busy += busy,
            }
        }
        self.q.push(st.done, Ev::Done { token: st.token, slot: st.slot });
    }

    fn done(&mut self, token: u32, slot: u32) {
        let now = self.now;
        let rec = self.recs[token as usize];
        if rec.kind != Kind::RootSwap {
            self.ctl.complete(now, &rec.io, Completion { released: rec.released, started: rec.started });
        }
        if slot != NO_SLOT {
            if let Some(st) = self.dev.finish(now, slot) {
                self.started(st);
            }
        }
        self.in_device -= 1;
        if let Some(next) = self.waiting.pop_front() {
            self.admit(next);
        }
        self.free_recs.push(token);
        self.ios_total += 1;
        let measured = now >= self.sc.warmup;
        match rec.kind {
            Kind::Job => {
                let job = &mut self.jobs[rec.job as usize];
                job.outstanding -= 1;
                let lat = now - rec.submitted;
                if let Load::Seeking { .. } = job.spec.load {
                    job.window.push(lat);
                }
                if rec.mem > 0 {
                    self.pool.as_mut().expect("memory pool present").release(rec.mem, false);
                }
                if measured {
                    let g = &mut self.groups[job.group];
                    g.ios += 1;
                    g.bytes += rec.io.len as u64;
                    g.interval_ios += 1;
                    g.interval_bytes += rec.io.len as u64;
                    g.hist.record(lat).expect("auto-resizing histogram");
                    let dev_lat = now - rec.released;
                    g.dev_hist.record(dev_lat).expect("auto-resizing histogram");
                    g.interval_dev.record(dev_lat).expect("auto-resizing histogram");
                    g.interval.record(lat).expect("auto-resizing histogram");
                }
            }
            Kind::Swap | Kind::RootSwap => {
                self.pool.as_mut().expect("memory pool present").release(rec.io.len as u64, true);
            }
        }
        self.dispatch();
        if rec.mem > 0 || rec.kind != Kind::Job {
            self.serve_memory();
        }
        match rec.kind {
            Kind::Job => {
                let think = match self.jobs[rec.job as usize].spec.load {
                    Load::Closed { think, .. } | Load::Seeking { think, .. } => Some(think),
                    _ => None,
                };
                match think {
                    Some(0) => self.arrive(rec.job, rec.slot),
                    Some(t) => self.q.push(now + t, Ev::Arrive { job: rec.job, slot: rec.slot }),
                    None => {}
                }
            }
            Kind::Swap | Kind::RootSwap => {}
        }
    }

    fn after_tick(&mut self) {
        let stats = self.ctl.stats(self.now);
        self.account_vrate(stats.device.vrate_pct);
        for g in &mut self.groups {
            if let Some(s) = stats.groups.get(g.id.index()) {
                g.max_debt_us = g.max_debt_us.max(s.debt_us);
                g.max_delay_us = g.max_delay_us.max(s.delay_us);
            }
        }
        for event in self.ctl.take_events() {
            *self.controller_events.entry(event.kind().to_string()).or_default() += 1;
        }
    }

    /// Integrates vrate over the measured time, then takes the new value.
    fn account_vrate(&mut self, new: f64) {
        if self.now > self.vrate_at {
            self.vrate_area += self.vrate * (self.now - self.vrate_at) as f64;
            self.vrate_at = self.now;
        }
        self.vrate = new;
    }

    fn seek_control(&mut self, j: u32) {
        let job = &mut self.jobs[j as usize];
        let Load::Seeking { target, pct, max_depth, period, .. } = job.spec.load else { return };
        let observed = if job.window.is_empty() {
            period
        } else {
            let k = ((job.window.len() as f64 * pct / 100.0) as usize).min(job.window.len() - 1);
            *job.window.select_nth_unstable(k).1
        };
        job.window.clear();
        job.depth = seek_depth(job.depth, observed, target, max_depth);
        let mut start = Vec::new();
        for slot in 0..job.depth as usize {
            if !job.live[slot] {
                job.live[slot] = true;
                start.push(slot as u32);
            }
        }
        for slot in start {
            self.q.push(self.now, Ev::Arrive { job: j, slot });
        }
        self.q.push(self.now + period, Ev::JobTimer { job: j });
    }

    fn apply_change(&mut self, index: usize) {
        match &self.sc.changes[index].kind {
            ChangeKind::DeviceSpeed(f) => self.dev.set_speed(*f),
            ChangeKind::Weight { group, weight } => {
                let g = self.groups.iter_mut().find(|g| g.path == group.trim_matches('/')).expect("validated group");
                g.weight = *weight;
                let spec = self.sc.groups.iter().find(|s| s.path == *group).expect("validated group");
                let settings = GroupSettings { weight: *weight, limits: spec.limits.clone() };
                self.ctl.configure(self.now, group, &settings).expect("validated weight");
                self.dispatch();
            }
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let dt = self.sc.sample_interval as f64 / 1e9;
        if now > self.sc.warmup {
            let t_s = now as f64 / 1e9;
            for g in &mut self.groups {
                g.series.push(GroupPoint {
                    t_s,
                    iops: g.interval_ios as f64 / dt,
                    bw_bytes: g.interval_bytes as f64 / dt,
                    lat_p50_us: g.interval.value_at_quantile(0.5) as f64 / 1e3,
                    lat_p99_us: g.interval.value_at_quantile(0.99) as f64 / 1e3,
                    dev_lat_p90_us: g.interval_dev.value_at_quantile(0.9) as f64 / 1e3,
                });
            }
            let device = self.ctl.stats(now).device;
            self.dev_series.push(DevicePoint {
                t_s,
                utilization: self.interval_busy as f64 / (self.dev.servers() as f64 * self.sc.sample_interval as f64),
                vrate_pct: device.vrate_pct,
                depth_limit: device.depth_limit,
            });
        }
        for g in &mut self.groups {
            g.interval.reset();
            g.interval_dev.reset();
            g.interval_ios = 0;
            g.interval_bytes = 0;
        }
        self.interval_busy = 0;
        self.q.push(now + self.sc.sample_interval, Ev::Sample);
    }

    fn report(mut self, name: Option<String>, wall: f64) -> Report {
        let stats = self.ctl.stats(self.now);
        self.account_vrate(stats.device.vrate_pct);
        let secs = (self.sc.duration - self.sc.warmup) as f64 / 1e9;
        let total = self.busy_total.max(1) as f64;
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let h = &g.hist;
                let us = |v: u64| v as f64 / 1e3;
                let lat_dist =
                    if h.is_empty() { Vec::new() } else { QUANTILES.map(|q| [q, us(h.value_at_quantile(q))]).to_vec() };
                GroupReport {
                    path: g.path.clone(),
                    weight: g.weight,
                    ios: g.ios,
                    iops: g.ios as f64 / secs,
                    bw_bytes: g.bytes as f64 / secs,
                    cost_share: g.busy as f64 / total,
                    lat_us: latency(h),
                    dev_lat_us: latency(&g.dev_hist),
                    lat_dist,
                    lat_hist: latency_buckets(h),
                    paused_us: g.paused as f64 / 1e3,
                    max_debt_us: g.max_debt_us,
                    max_delay_us: g.max_delay_us,
                    wait_us: stats.groups.get(g.id.index()).map_or(0, |s| s.wait_us),
                    hweight_active: stats.groups.get(g.id.index()).map_or(0.0, |s| s.hweight_active),
                    hweight_inuse: stats.groups.get(g.id.index()).map_or(0.0, |s| s.hweight_inuse),
                    must_issue_ios: g.must_issue,
                    mem_stall_us: g.mem_stall as f64 / 1e3,
                    dropped: g.dropped,
                    series: g.series.clone(),
                }
            })
            .collect();
        let measured = (self.sc.duration - self.sc.warmup) as f64;
        Report {
            scenario: self.sc.name.clone(),
            controller: name.unwrap_or_else(|| self.ctl.name().to_string()),
            seed: self.sc.seed,
            seconds: secs,
            groups,
            device: DeviceReport {
                model: self.dev.describe(),
                servers: self.dev.servers(),
                utilization: self.busy_total as f64 / (self.dev.servers() as f64 * measured),
                vrate_pct: stats.device.vrate_pct,
                vrate_pct_mean: self.vrate_area / measured,
                series: self.dev_series,
            },
            controller_events: self.controller_events,
            memory: self.pool.as_ref().map(|p| MemoryReport {
                charge: p.charge,
                swap_ios: self.swap_ios,
                swap_cost_share: self.swap_busy as f64 / total,
            }),
            sim: SimStats {
                ios: self.ios_total,
                submitted: self.submitted,
                in_flight: (self.recs.len() - self.free_recs.len()) as u64,
                events: self.events,
                wall_sec: Some(wall),
                ios_per_wall_sec: Some(self.ios_total as f64 / wall.max(1e-9)),
            },
            comparisons: Vec::new(),
        }
    }
}

impl Simulation {
    /// Runs the simulation with the controller it describes.
    pub fn run(&self) -> Result<Report, SimError> {
        let name = match &self.controller {
            ControllerSpec::Custom { name, .. } => Some(name.clone()),
            _ => None,
        };
        run(self, self.controller.build(), name)
    }

    /// Runs the simulation with a controller built by the caller (configured by the run).
    pub fn run_with(&self, controller: Box<dyn Controller>) -> Result<Report, SimError> {
        run(self, controller, None)
    }
}
