//! Cache-line prefetch hints: a read starts loading the lines it will use
//! after a wait (a device read, a lock) or after other misses, so that
//! the misses overlap instead of coming one after another.
//!
//! A prefetch never faults and changes nothing the program can see: any
//! address may be given, even one past what it points into (the helpers
//! take raw pointers for that reason, and never dereference them). On
//! targets without a prefetch instruction they do nothing.
//!
//! [`populate_pages`] is the same kind of hint one level down: it maps the
//! pages of a fresh allocation before their first write.

/// Starts loading the line holding `p`, to be read.
#[inline]
pub(crate) fn read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Starts loading every line of `bytes`, to be written.
#[inline]
pub(crate) fn write_all(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: as in `read`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(
                line.as_ptr().cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Maps the whole pages inside `len` bytes at `start` (memory of the
/// caller's own allocation) in one call instead of a page fault each on
/// its first write. A hint: an error, e.g. from a kernel before 5.14, is
/// ignored; MADV_POPULATE_WRITE maps pages, it never changes a byte. Worth
/// it here: a page fault cost about 8 µs on this project's machine (a
/// virtual machine whose free pages go back to its host).
pub(crate) fn populate_pages(start: *const u8, len: usize) {
    const PAGE_BYTES: usize = 4096;
    let start = start as usize;
    let (from, to) = (
        start.next_multiple_of(PAGE_BYTES),
        (start + len) / PAGE_BYTES * PAGE_BYTES,
    );
    // Miri runs no system call: a hint it can skip.
    if from < to && !cfg!(miri) {
        // SAFETY: the range lies inside the caller's allocation (pages
        // wholly within it); MADV_POPULATE_WRITE leaves its bytes as they are.
        unsafe {
            libc::madvise(
                from as *mut libc::c_void,
                to - from,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }
}
