//! crc32c of short runs of bytes: a log entry's header, key and value, the
//! write path's one pass over a put's bytes.
//!
//! The `crc32c` crate's function is built for long buffers: it walks to an
//! 8-byte aligned address a byte at a time, then splits the rest into three
//! streams. On a 100-byte put's entry, called for its head and for its key
//! and value, that took more instructions than the bytes (measured with
//! callgrind: about 380 instructions a put for its crcs). Here the bytes are
//! read 8 at a time from any address (unaligned loads cost nothing extra on
//! x86-64) in one serial chain, then 4, 2 and 1 at the end.
//!
//! Invariant: [`crc32c_append`] returns exactly what
//! `crc32c::crc32c_append` returns for the same arguments (a property test
//! holds them equal), so the log's bytes do not depend on which one ran.
//! Without SSE 4.2 (checked once at run time, and on other architectures)
//! it is the crate's function. Thread-safe: pure functions.

/// Runs at least this long go to the `crc32c` crate, whose three parallel
/// streams are faster than one serial chain over a long run (a batch's
/// payload).
const SHORT_RUN_BYTES_MAX: usize = 256;

/// The crc32c of `crc`'s bytes followed by `bytes` (as
/// `crc32c::crc32c_append`).
#[inline]
pub(crate) fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() < SHORT_RUN_BYTES_MAX && std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2, checked just above.
            return unsafe { x86_64::crc32c_append_short(crc, bytes) };
        }
    }
    crc32c::crc32c_append(crc, bytes)
}

#[cfg(target_arch = "x86_64")]
mod x86_64 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};

    /// One serial chain of crc32 instructions over `bytes`, 8 bytes at a
    /// time.
    ///
    /// # Safety
    /// The CPU must have SSE 4.2.
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn crc32c_append_short(crc: u32, bytes: &[u8]) -> u32 {
        let mut state = u64::from(!crc);
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let word: [u8; 8] = word.try_into().expect("chunks of 8 bytes");
            state = _mm_crc32_u64(state, u64::from_le_bytes(word));
        }
        let mut rest = words.remainder();
        let mut state = state as u32;
        if let Some((four, tail)) = rest.split_first_chunk::<4>() {
            state = _mm_crc32_u32(state, u32::from_le_bytes(*four));
            rest = tail;
        }
        if let Some((two, tail)) = rest.split_first_chunk::<2>() {
            state = _mm_crc32_u16(state, u16::from_le_bytes(*two));
            rest = tail;
        }
        if let Some(&one) = rest.first() {
            state = _mm_crc32_u8(state, one);
        }
        !state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every length up to past the short-run limit, at every alignment,
        /// from any starting crc: the same crc as the crate's.
        #[test]
        fn short_runs_crc_as_the_crate_does(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
            skip in 0usize..8,
            crc in any::<u32>(),
        ) {
            let bytes = &bytes[skip.min(bytes.len())..];
            prop_assert_eq!(crc32c_append(crc, bytes), crc32c::crc32c_append(crc, bytes));
            prop_assert_eq!(crc32c_append(0, bytes), crc32c::crc32c(bytes));
        }
    }

    #[test]
    fn every_length_and_alignment_matches_the_crate() {
        let bytes: Vec<u8> = (0..600u32).map(|i| (i * 7919 % 251) as u8).collect();
        for skip in 0..8 {
            for len in 0..SHORT_RUN_BYTES_MAX + 16 {
                let run = &bytes[skip..skip + len];
                assert_eq!(
                    crc32c_append(0x1234_5678, run),
                    crc32c::crc32c_append(0x1234_5678, run),
                    "skip {skip} len {len}"
                );
            }
        }
    }
}
