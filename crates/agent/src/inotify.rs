//! An inotify instance that says when it could not watch everything: the discovery's tree watch
//! ([`crate::daemon::tree_watch`]) and the userspace backend's limit files
//! ([`crate::backend::userspace::throttle_writes`]) are told of changes by the kernel through it.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An inotify instance (non-blocking).
#[derive(Debug)]
pub struct Inotify {
    fd: OwnedFd,
    mask: u32,
    /// A watch could not be added for lack of room: events do not cover everything.
    full: bool,
}

impl Inotify {
    /// A new instance whose watches report the events of `mask`, or why there is none.
    pub fn new(mask: u32) -> std::io::Result<Inotify> {
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by inotify_init1 and is owned by nobody else.
        Ok(Inotify { fd: unsafe { OwnedFd::from_raw_fd(fd) }, mask, full: false })
    }

    /// Watches `path`; `None` when it cannot (it is gone, or the user's watch limit is reached:
    /// then [`full`](Inotify::full), said once in the log).
    pub fn add(&mut self, path: &Path) -> Option<i32> {
        let c = CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: `c` is a valid NUL-terminated path; the watch belongs to our instance.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), self.mask) };
        if wd >= 0 {
            return Some(wd);
        }
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSPC) && !self.full {
            self.full = true;
            tracing::warn!(
                "inotify: no room for more watches (fs.inotify.max_user_watches): cgroups are looked at on a \
                 schedule instead"
            );
        }
        None
    }

    /// Stops watch `wd` (one whose path went is gone already: harmless).
    pub fn remove(&mut self, wd: i32) {
        // SAFETY: removes a watch of our own instance; an unknown one fails harmlessly.
        unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
    }

    /// Whether the watch limit was reached (events do not cover everything).
    pub fn full(&self) -> bool {
        self.full
    }

    /// Reads every event waiting: `each(wd, mask, name)` (the name of the file or directory in the
    /// watched directory the event is about; empty for the directory itself). An overflow of the
    /// queue is `wd` -1 with `IN_Q_OVERFLOW`.
    pub fn read(&mut self, mut each: impl FnMut(i32, u32, &[u8])) {
        const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: reads into a buffer of the given length from our own descriptor.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return; // EAGAIN: nothing more waiting
            }
            let mut at = 0;
            while at + HEAD <= n as usize {
                let word = |i: usize| u32::from_ne_bytes(buf[at + i..at + i + 4].try_into().expect("4 bytes"));
                let (wd, mask, len) = (word(0) as i32, word(4), word(12) as usize);
                let name = &buf[at + HEAD..(at + HEAD + len).min(n as usize)];
                each(wd, mask, name.split(|&b| b == 0).next().unwrap_or_default());
                at += HEAD + len;
            }
        }
    }
}
