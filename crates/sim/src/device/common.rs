//! What every device shares: the IO as a device sees it, the IO it started, the [`Device`] trait,
//! the server pool of the devices with interchangeable servers, and the transfer-time helper.

use std::collections::VecDeque;

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
    /// Server serving it, handed back to [`Device::finish`]; [`NO_SLOT`] for devices without servers.
    pub slot: u32,
    /// When service starts (≥ the time it arrived).
    pub start: Nanos,
    /// When it completes.
    pub done: Nanos,
    /// Server time it occupies, ns (its share of the device's capacity).
    pub busy: Nanos,
}

/// Slot of an IO on a device that has no servers to free ([`remote::Remote`]).
pub const NO_SLOT: u32 = u32::MAX;

/// A simulated device. Every method takes the current virtual time; none reads a clock.
pub trait Device {
    /// Short description for reports (`linear ×4`, `hdd 7200 rpm`, ...).
    fn describe(&self) -> String;
    /// Number of parallel servers (the denominator of utilisation).
    fn servers(&self) -> u32;
    /// IOs the device accepts at once; the engine queues the rest in front of it.
    fn queue_depth(&self) -> u32;
    /// An IO arrives; returns it if it starts at once (or at a known later time), `None` if queued.
    fn arrive(&mut self, now: Nanos, req: Request) -> Option<Started>;
    /// Server `slot` finished its IO at `now`; returns the queued IO it starts next, if any.
    fn finish(&mut self, now: Nanos, slot: u32) -> Option<Started>;
    /// Multiplies the device's speed by `factor` from now on (0.5 = twice as slow).
    fn set_speed(&mut self, factor: f64);
}

/// Identical servers with one FIFO in front: an arriving IO takes a free server or queues; a server
/// that finishes takes the next queued IO or becomes free. The devices whose servers are
/// interchangeable (linear, SSD channels) share it.
#[derive(Debug)]
pub(crate) struct ServerPool {
    free: Vec<u32>,
    queue: VecDeque<Request>,
}

impl ServerPool {
    /// `servers` free servers and an empty queue.
    pub(crate) fn new(servers: u32) -> Self {
        ServerPool { free: (0..servers).rev().collect(), queue: VecDeque::new() }
    }

    /// The server `req` starts on now, or `None` when it queues.
    pub(crate) fn arrive(&mut self, req: Request) -> Option<(u32, Request)> {
        match self.free.pop() {
            Some(slot) => Some((slot, req)),
            None => {
                self.queue.push_back(req);
                None
            }
        }
    }

    /// The next queued IO server `slot` starts now, or `None` when the server goes idle.
    pub(crate) fn finish(&mut self, slot: u32) -> Option<(u32, Request)> {
        match self.queue.pop_front() {
            Some(req) => Some((slot, req)),
            None => {
                self.free.push(slot);
                None
            }
        }
    }
}

/// Nanoseconds to transfer `len` bytes at `bytes_per_sec`.
pub(crate) fn transfer_ns(len: u32, bytes_per_sec: f64) -> f64 {
    len as f64 * 1e9 / bytes_per_sec
}
