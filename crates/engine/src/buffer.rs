//! Page-aligned memory for O_DIRECT IO, filled with incompressible bytes.

use std::alloc::{self, Layout};

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// Alignment of IO buffers: one page satisfies every device's O_DIRECT rule.
pub const ALIGN: usize = 4096;

/// A zero-initialised, page-aligned heap buffer, freed on drop.
#[derive(Debug)]
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer owns its memory exclusively; moving it between threads is fine.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` bytes (rounded up to the alignment), filled with pseudo-random bytes so that
    /// written data neither compresses nor deduplicates.
    pub fn random(len: usize, seed: u64) -> Self {
        let len = len.max(ALIGN).next_multiple_of(ALIGN);
        let layout = Layout::from_size_align(len, ALIGN).expect("buffer layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            alloc::handle_alloc_error(layout);
        }
        let mut buf = AlignedBuf { ptr, layout };
        SmallRng::seed_from_u64(seed).fill_bytes(buf.as_mut_slice());
        buf
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Always false: buffers hold at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Start of the buffer.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes and initialised (zeroed at allocation).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len()) }
    }

    /// The bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `random` with this layout.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_page_aligned_rounded_and_not_zero() {
        let mut b = AlignedBuf::random(5000, 1);
        assert_eq!(b.len(), 8192);
        assert_eq!(b.as_mut_ptr() as usize % ALIGN, 0);
        assert!(b.as_slice().iter().filter(|x| **x == 0).count() < 200);
    }
}
