//! The device every model shares: servers, the queue in front of them, and the speed factor.
//!
//! Design: a [`Device`] is one struct for every model. It owns what all devices do alike — hand an
//! arriving IO a free server or queue it, give a server that finishes the next queued IO or take it
//! back, scale service by the speed set by a scheduled change — and asks its [`DeviceModel`] only
//! what differs: how long an IO takes from a given moment ([`DeviceModel::serve`]), which queued IO
//! a freed server takes ([`DeviceModel::pick`], FIFO unless the model reorders, like a disk's
//! elevator), and whether IOs hold servers at all (a remote volume's pacer admits every IO on
//! arrival). The models (`linear`, `ssd`, `hdd`, `remote`) import this module and nothing else of
//! the device's; the engine only sees [`Device`].

use std::collections::VecDeque;
use std::fmt;

use ioshare_core::{Nanos, Op};

/// An IO as the device sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The engine's handle of the IO, returned in [`Started`].
    pub token: u32,
    /// Index of the issuing group (devices that detect sequential streams per group use it).
    pub group: u32,
    /// Read or write.
    pub op: Op,
    /// Byte offset.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

/// An IO a device started serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    /// The engine's handle of the IO.
    pub token: u32,
    /// Server serving it, handed back to [`Device::finish`]; [`NO_SLOT`] when IOs hold no server.
    pub slot: u32,
    /// When service starts (≥ the time it arrived).
    pub start: Nanos,
    /// When it completes.
    pub done: Nanos,
    /// Server time it occupies, ns (its share of the device's capacity).
    pub busy: Nanos,
}

/// Slot of an IO on a device whose IOs hold no server (see [`DeviceModel::holds_servers`]).
pub const NO_SLOT: u32 = u32::MAX;

/// How a model serves one IO: when it starts, when it completes, and the server time it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// When service starts (≥ the `now` it was asked at).
    pub start: Nanos,
    /// When it completes.
    pub done: Nanos,
    /// Server time it occupies, ns.
    pub busy: Nanos,
}

/// An IO waiting in front of the device's servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    /// The IO.
    pub req: Request,
    /// When it arrived.
    pub arrived: Nanos,
}

/// What differs between device models. Every method takes the current virtual time; none reads a
/// clock.
pub trait DeviceModel: fmt::Debug {
    /// Short description for reports (`linear ×4`, `hdd 7200 rpm`, ...).
    fn describe(&self) -> String;
    /// Number of parallel servers (the denominator of utilisation).
    fn servers(&self) -> u32;
    /// IOs the device accepts at once; the engine queues the rest in front of it.
    fn queue_depth(&self) -> u32;
    /// Whether an IO holds one of the [`servers`](DeviceModel::servers) from its start until it
    /// completes (the default). When not, every IO starts on arrival — at the time `serve` says —
    /// and no server is handed back.
    fn holds_servers(&self) -> bool {
        true
    }
    /// Serves `req` from `now` (its state — head, buffer, cursors — moves on); the device runs at
    /// `speed` times its nominal speed.
    fn serve(&mut self, now: Nanos, req: &Request, speed: f64) -> Service;
    /// Which of the queued IOs (oldest first, never empty) a server freed at `now` takes next.
    /// Default: the oldest.
    fn pick(&self, _now: Nanos, _queue: &VecDeque<Queued>) -> usize {
        0
    }
}

/// A simulated device: a [`DeviceModel`] behind the servers and queue every device shares.
#[derive(Debug)]
pub struct Device {
    model: Box<dyn DeviceModel>,
    servers: u32,
    queue_depth: u32,
    holds_servers: bool,
    /// Free servers, the lowest index last (taken first).
    free: Vec<u32>,
    queue: VecDeque<Queued>,
    speed: f64,
}

impl Device {
    /// The device of `model`, every server free, at its nominal speed.
    pub fn new(model: impl DeviceModel + 'static) -> Device {
        let servers = model.servers();
        let holds_servers = model.holds_servers();
        Device {
            servers,
            queue_depth: model.queue_depth(),
            holds_servers,
            free: if holds_servers { (0..servers).rev().collect() } else { Vec::new() },
            queue: VecDeque::new(),
            speed: 1.0,
            model: Box::new(model),
        }
    }

    /// Short description for reports.
    pub fn describe(&self) -> String {
        self.model.describe()
    }

    /// Number of parallel servers (the denominator of utilisation).
    pub fn servers(&self) -> u32 {
        self.servers
    }

    /// IOs the device accepts at once; the engine queues the rest in front of it.
    pub fn queue_depth(&self) -> u32 {
        self.queue_depth
    }

    /// An IO arrives; returns it if it starts at once (or at a known later time), `None` if queued.
    pub fn arrive(&mut self, now: Nanos, req: Request) -> Option<Started> {
        if !self.holds_servers {
            return Some(self.start(now, NO_SLOT, req));
        }
        match self.free.pop() {
            Some(slot) => Some(self.start(now, slot, req)),
            None => {
                self.queue.push_back(Queued { req, arrived: now });
                None
            }
        }
    }

    /// Server `slot` finished its IO at `now`; returns the queued IO it starts next, if any.
    pub fn finish(&mut self, now: Nanos, slot: u32) -> Option<Started> {
        if slot == NO_SLOT {
            return None;
        }
        if self.queue.is_empty() {
            self.free.push(slot);
            return None;
        }
        let next = self.model.pick(now, &self.queue);
        let Queued { req, .. } = self.queue.remove(next).expect("the model picks within the queue");
        Some(self.start(now, slot, req))
    }

    /// Multiplies the device's speed by `factor` from now on (0.5 = twice as slow).
    pub fn set_speed(&mut self, factor: f64) {
        self.speed *= factor;
    }

    fn start(&mut self, now: Nanos, slot: u32, req: Request) -> Started {
        let Service { start, done, busy } = self.model.serve(now, &req, self.speed);
        Started { token: req.token, slot, start, done, busy }
    }
}

/// Nanoseconds to transfer `len` bytes at `bytes_per_sec`.
pub(crate) fn transfer_ns(len: u32, bytes_per_sec: f64) -> f64 {
    len as f64 * 1e9 / bytes_per_sec
}

/// `ns` of nominal service at `speed`, rounded, at least 1 ns.
pub(crate) fn at_speed(ns: f64, speed: f64) -> Nanos {
    (ns / speed).round().max(1.0) as Nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every IO takes `len` ns at nominal speed; reorders by preferring the largest queued IO.
    #[derive(Debug)]
    struct Fixed {
        servers: u32,
        largest_first: bool,
        holds: bool,
    }

    impl DeviceModel for Fixed {
        fn describe(&self) -> String {
            "fixed".into()
        }
        fn servers(&self) -> u32 {
            self.servers
        }
        fn queue_depth(&self) -> u32 {
            8
        }
        fn holds_servers(&self) -> bool {
            self.holds
        }
        fn serve(&mut self, now: Nanos, req: &Request, speed: f64) -> Service {
            let busy = at_speed(req.len as f64, speed);
            Service { start: now, done: now + busy, busy }
        }
        fn pick(&self, _now: Nanos, queue: &VecDeque<Queued>) -> usize {
            if self.largest_first {
                (0..queue.len()).max_by_key(|&i| queue[i].req.len).expect("not empty")
            } else {
                0
            }
        }
    }

    fn req(token: u32, len: u32) -> Request {
        Request { token, group: 0, op: Op::Read, offset: 0, len }
    }

    #[test]
    fn servers_are_taken_lowest_first_then_ios_queue_in_order() {
        let mut d = Device::new(Fixed { servers: 2, largest_first: false, holds: true });
        let a = d.arrive(0, req(0, 100)).unwrap();
        let b = d.arrive(0, req(1, 100)).unwrap();
        assert_eq!((a.slot, b.slot), (0, 1));
        assert!(d.arrive(5, req(2, 10)).is_none() && d.arrive(6, req(3, 20)).is_none());
        // Server 1 frees first here: it takes the oldest queued IO, starting now.
        let c = d.finish(100, 1).unwrap();
        assert_eq!((c.token, c.slot, c.start, c.done), (2, 1, 100, 110));
        assert_eq!(d.finish(100, 0).unwrap().token, 3);
        assert!(d.finish(110, 1).is_none(), "queue empty: server 1 goes idle");
        assert_eq!(d.arrive(111, req(4, 1)).unwrap().slot, 1);
    }

    #[test]
    fn the_model_picks_which_queued_io_goes_next() {
        let mut d = Device::new(Fixed { servers: 1, largest_first: true, holds: true });
        d.arrive(0, req(0, 1)).unwrap();
        for (token, len) in [(1, 10), (2, 30), (3, 20)] {
            assert!(d.arrive(0, req(token, len)).is_none());
        }
        let order: Vec<u32> = (0..3).map(|_| d.finish(0, 0).unwrap().token).collect();
        assert_eq!(order, vec![2, 3, 1]);
    }

    #[test]
    fn without_servers_every_io_starts_on_arrival() {
        let mut d = Device::new(Fixed { servers: 1, largest_first: false, holds: false });
        for token in 0..4 {
            assert_eq!(d.arrive(0, req(token, 10)).unwrap().slot, NO_SLOT);
        }
        assert!(d.finish(10, NO_SLOT).is_none());
    }

    #[test]
    fn speed_changes_scale_later_service() {
        let mut d = Device::new(Fixed { servers: 1, largest_first: false, holds: true });
        assert_eq!(d.arrive(0, req(0, 100)).unwrap().busy, 100);
        d.set_speed(0.5);
        assert_eq!(d.finish(100, 0), None);
        assert_eq!(d.arrive(100, req(1, 100)).unwrap().busy, 200);
        d.set_speed(4.0);
        assert!(d.arrive(100, req(2, 100)).is_none(), "one server, busy");
        assert_eq!(d.finish(300, 0).unwrap().busy, 50);
    }
}
