//! The loop driver's ioctl ABI (`include/uapi/linux/loop.h`), which the `libc` crate does not carry.
//!
//! Only what [`crate::LoopDevice`] uses: ask `/dev/loop-control` for a free device, configure it in one
//! call (`LOOP_CONFIGURE`, Linux 5.8+: backing fd, flags and block size at once, so a device is never
//! seen half set up), detach it, and remove a device node we made.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `LOOP_CLR_FD`: detach the backing file (deferred to the last close when other openers remain).
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
/// `LOOP_CONFIGURE`: attach and configure in one call.
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
/// `LOOP_CTL_REMOVE`: remove an unused loop device.
const LOOP_CTL_REMOVE: libc::c_ulong = 0x4C81;
/// `LOOP_CTL_GET_FREE`: index of a free loop device, created if none is free.
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;

/// Detach automatically when the last opener closes the device (so a killed process leaks nothing).
pub(crate) const LO_FLAGS_AUTOCLEAR: u32 = 4;
/// Serve the device with direct IO on the backing file (no second page cache).
pub(crate) const LO_FLAGS_DIRECT_IO: u32 = 16;

/// Length of `lo_file_name` and `lo_crypt_name`.
const LO_NAME_SIZE: usize = 64;
/// Length of `lo_encrypt_key`.
const LO_KEY_SIZE: usize = 32;

/// `struct loop_info64`.
#[repr(C)]
pub(crate) struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    /// `LO_FLAGS_*`.
    pub(crate) lo_flags: u32,
    /// Shown by `losetup -a`; truncated to 63 bytes and NUL-terminated.
    pub(crate) lo_file_name: [u8; LO_NAME_SIZE],
    lo_crypt_name: [u8; LO_NAME_SIZE],
    lo_encrypt_key: [u8; LO_KEY_SIZE],
    lo_init: [u64; 2],
}

/// `struct loop_config`.
#[repr(C)]
pub(crate) struct LoopConfig {
    /// The backing file's descriptor.
    pub(crate) fd: u32,
    /// Logical block size (0: the kernel's choice, the backing device's for direct IO).
    pub(crate) block_size: u32,
    /// Flags and file name.
    pub(crate) info: LoopInfo64,
    reserved: [u64; 8],
}

const _: () = assert!(std::mem::size_of::<LoopInfo64>() == 232);
const _: () = assert!(std::mem::size_of::<LoopConfig>() == 304);

impl LoopConfig {
    /// A configuration for backing file `fd` with `flags`, labelled `name`.
    pub(crate) fn new(fd: BorrowedFd<'_>, flags: u32, name: &[u8]) -> Self {
        let mut file_name = [0u8; LO_NAME_SIZE];
        let n = name.len().min(LO_NAME_SIZE - 1);
        file_name[..n].copy_from_slice(&name[..n]);
        LoopConfig {
            fd: fd.as_raw_fd() as u32,
            block_size: 0,
            info: LoopInfo64 {
                lo_device: 0,
                lo_inode: 0,
                lo_rdevice: 0,
                lo_offset: 0,
                lo_sizelimit: 0,
                lo_number: 0,
                lo_encrypt_type: 0,
                lo_encrypt_key_size: 0,
                lo_flags: flags,
                lo_file_name: file_name,
                lo_crypt_name: [0; LO_NAME_SIZE],
                lo_encrypt_key: [0; LO_KEY_SIZE],
                lo_init: [0; 2],
            },
            reserved: [0; 8],
        }
    }
}

/// Turns an ioctl return value into a result.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `LOOP_CTL_GET_FREE` on `/dev/loop-control`: the index of a free loop device.
pub(crate) fn get_free(control: BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: LOOP_CTL_GET_FREE takes no argument; the fd is open for the call's duration.
    check(unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) }).map(|n| n as u32)
}

/// `LOOP_CTL_REMOVE` on `/dev/loop-control`: remove loop device `index` (fails while it is in use).
pub(crate) fn remove(control: BorrowedFd<'_>, index: u32) -> io::Result<()> {
    // SAFETY: LOOP_CTL_REMOVE takes the index by value; the fd is open for the call's duration.
    check(unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_REMOVE, index as libc::c_ulong) }).map(drop)
}

/// `LOOP_CONFIGURE` on an open loop device.
pub(crate) fn configure(device: BorrowedFd<'_>, config: &LoopConfig) -> io::Result<()> {
    // SAFETY: the kernel reads a `struct loop_config`, which `LoopConfig` mirrors (sizes asserted above);
    // the reference outlives the call.
    check(unsafe { libc::ioctl(device.as_raw_fd(), LOOP_CONFIGURE, config as *const LoopConfig) }).map(drop)
}

/// `LOOP_CLR_FD` on an open loop device.
pub(crate) fn clear(device: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: LOOP_CLR_FD takes no argument; the fd is open for the call's duration.
    check(unsafe { libc::ioctl(device.as_raw_fd(), LOOP_CLR_FD) }).map(drop)
}
