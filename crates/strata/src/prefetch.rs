//! Cache-line prefetch hints: a read starts loading the lines it will use
//! after a wait (a device read, a lock) or after other misses, so that
//! the misses overlap instead of coming one after another.
//!
//! A prefetch never faults and changes nothing the program can see: any
//! address may be given, even one past what it points into (the helpers
//! take raw pointers for that reason, and never dereference them). On
//! targets without a prefetch instruction they do nothing.

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
