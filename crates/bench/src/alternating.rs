//! A controller switched on and off in turns within one run, so that its cost on the IO path is
//! judged against no control a few milliseconds away ([`crate::windows`]) rather than against a
//! separate run seconds away, which on a shared disk differs by more than the cost being judged.
//!
//! Windows of [`ALTERNATE_WINDOW`] on the run's clock alternate, off first. Off, every IO is issued at
//! once, as with no control, and marked [`BYPASSED`] in its charge (a field that belongs to the
//! controller, and no controller charges `u64::MAX`), so that its completion skips the controller.
//! IOs the controller still holds when an on window ends leave through its `dispatch` as usual and
//! complete into it; its planner runs throughout, so during an off window its groups go idle and come
//! back when the next on window starts, as tenants that pause for 100 ms would. The CPU time of the
//! thread running the engine is read at the first call in each window, for the controller's CPU per
//! IO against no control's.

use ioshare_core::{
    Completion, Controller, Dispatch, Event, GroupId, GroupSettings, Io, Nanos, Stats, Submit, NSEC_PER_MSEC,
};

use crate::windows::{ThreadCpuClock, Window};

/// The charge of an IO issued while the controller is off.
pub const BYPASSED: u64 = u64::MAX;
/// How long the controller is on, then off, in the bench. Short: on this machine's disk, one QD32
/// reader's IOPS dip to a fifth for 50-150 ms several times a run, so windows much shorter than a dip
/// pair an on window with off neighbours that saw the same weather. Measured over the overhead
/// scenario's 7 rounds of 0.71 s: the median's ~95% interval was ±1-2% at 10 ms windows (224 of them),
/// ±2-4% at 20 ms, ±3-8% at 50-100 ms. The cost of short windows: a stateful controller starts from
/// idle every 20 ms (IOCost's groups activate again, its busy level restarts at 0 and vrate keeps
/// what it had), so IOCost is judged in a harder pattern than one steady reader.
pub const ALTERNATE_WINDOW: Nanos = 10 * NSEC_PER_MSEC;
/// The engine's sample interval in an alternating run: four samples per window.
pub const ALTERNATE_SAMPLE: Nanos = ALTERNATE_WINDOW / 4;

/// A controller on in odd windows and bypassed in even ones.
pub struct Alternating {
    inner: Box<dyn Controller>,
    window: Nanos,
    /// The CPU clock of the thread that made it (the engine runs the controller on its caller's thread).
    clock: Option<ThreadCpuClock>,
    /// CPU time at the first call of each window so far (index: window).
    cpu_at: Vec<Option<u64>>,
}

impl Alternating {
    /// `inner` in turns with no control, windows of `window` ns; make it on the thread that runs
    /// the engine.
    pub fn new(inner: Box<dyn Controller>, window: Nanos) -> Self {
        Alternating { inner, window, clock: ThreadCpuClock::of_this_thread(), cpu_at: Vec::with_capacity(1024) }
    }

    /// Whether the controller decides at `now`, after noting a new window's CPU time.
    fn on(&mut self, now: Nanos) -> bool {
        let k = (now / self.window) as usize;
        if k >= self.cpu_at.len() {
            let cpu = self.clock.and_then(ThreadCpuClock::now_ns);
            self.cpu_at.resize(k + 1, cpu);
        }
        k % 2 == 1
    }

    /// The windows the run has finished (each with the CPU time spent in it where both ends were
    /// read), in seconds on the run's clock.
    pub fn windows(&self) -> Vec<Window> {
        let secs = |k: usize| (k as Nanos * self.window) as f64 / 1e9;
        self.cpu_at
            .windows(2)
            .enumerate()
            .map(|(k, ends)| Window {
                from: secs(k),
                to: secs(k + 1),
                on: k % 2 == 1,
                cpu_ns: ends[0].zip(ends[1]).map(|(from, to)| to.saturating_sub(from)),
            })
            .collect()
    }
}

impl Controller for Alternating {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn configure(&mut self, now: Nanos, path: &str, settings: &GroupSettings) -> ioshare_core::Result<GroupId> {
        self.inner.configure(now, path, settings)
    }

    fn group(&self, path: &str) -> ioshare_core::Result<GroupId> {
        self.inner.group(path)
    }

    fn remove(&mut self, now: Nanos, path: &str) -> ioshare_core::Result<GroupId> {
        self.inner.remove(now, path)
    }

    fn submit(&mut self, now: Nanos, mut io: Io) -> Submit {
        if self.on(now) {
            return self.inner.submit(now, io);
        }
        io.charge = BYPASSED;
        Submit::Issue { io, delay: 0 }
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.inner.dispatch(now)
    }

    fn complete(&mut self, now: Nanos, io: &Io, timing: Completion) {
        self.on(now);
        if io.charge != BYPASSED {
            self.inner.complete(now, io, timing);
        }
    }

    fn next_tick(&self) -> Option<Nanos> {
        self.inner.next_tick()
    }

    fn tick(&mut self, now: Nanos) {
        self.inner.tick(now);
    }

    fn stats(&self, now: Nanos) -> Stats {
        self.inner.stats(now)
    }

    fn take_events(&mut self) -> Vec<Event> {
        self.inner.take_events()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioshare_core::{IoCost, LinearModel, ModelParams, Op, QosParams};

    const MS: Nanos = 1_000_000;

    /// Submits and completes one IO at `now`; whether the inner controller saw it.
    fn step(ctl: &mut Alternating, g: GroupId, now: Nanos) -> bool {
        let before = ctl.stats(now).groups[g.index()].issued;
        let Submit::Issue { io, .. } = ctl.submit(now, Io::new(now, g, Op::Read, 0, 4096)) else {
            panic!("an idle controller issues a lone IO")
        };
        ctl.complete(now + 100_000, &io, Completion { released: now, started: now });
        ctl.stats(now).groups[g.index()].issued > before
    }

    #[test]
    fn the_controller_decides_in_odd_windows_and_is_bypassed_in_even_ones() {
        let inner = IoCost::new(LinearModel::new(ModelParams::SSD_FAST), QosParams::default());
        let mut ctl = Alternating::new(Box::new(inner), 100 * MS);
        let g = ctl.configure(0, "a", &GroupSettings::default()).unwrap();
        let seen: Vec<bool> = [10, 99, 101, 199, 200, 350, 420].iter().map(|&ms| step(&mut ctl, g, ms * MS)).collect();
        assert_eq!(seen, [false, false, true, true, false, true, false]);
        // Windows 0-3 are finished (the call at 420 ms opened window 4), off first; CPU read at both ends.
        let w = ctl.windows();
        let spans: Vec<_> = w.iter().map(|w| (w.from, w.to, w.on)).collect();
        assert_eq!(spans, [(0.0, 0.1, false), (0.1, 0.2, true), (0.2, 0.3, false), (0.3, 0.4, true)]);
        assert!(w.iter().all(|w| w.cpu_ns.is_some()), "{w:?}");
    }

    #[test]
    fn an_io_issued_while_off_completes_past_the_controller_even_in_an_on_window() {
        let inner = IoCost::new(LinearModel::new(ModelParams::SSD_FAST), QosParams::default());
        let mut ctl = Alternating::new(Box::new(inner), 100 * MS);
        let g = ctl.configure(0, "a", &GroupSettings::default()).unwrap();
        let Submit::Issue { io, .. } = ctl.submit(50 * MS, Io::new(1, g, Op::Read, 0, 4096)) else { panic!() };
        assert_eq!(io.charge, BYPASSED);
        // Completing it at 150 ms (on) must not reach IOCost, which never issued it: its count of IOs
        // in flight would go below zero, and the group could not be removed.
        ctl.complete(150 * MS, &io, Completion { released: 50 * MS, started: 50 * MS });
        assert!(ctl.remove(160 * MS, "a").is_ok());
    }
}
