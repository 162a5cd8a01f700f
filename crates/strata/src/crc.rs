//! crc32c, the one checksum of strata's files: every crc the engine
//! computes or checks goes through here.
//!
//! Short runs (a log entry's header, key and value: the write path's one
//! pass over a put's bytes) are one serial chain of the crc32 instruction,
//! 8 bytes at a time from any address (unaligned loads cost nothing extra
//! on x86-64). The `crc32c` crate's function took more instructions than
//! the bytes on them: it walks to an 8-byte aligned address a byte at a
//! time, then splits the rest into three streams (measured with callgrind:
//! about 380 instructions a put for its crcs).
//!
//! Long runs (a data block, a value read back, a batch's payload) go to
//! the `crc-fast` crate, which folds with carry-less multiplies
//! (VPCLMULQDQ/AVX-512 where the CPU has them, chosen at run time) instead
//! of the crc32 instruction's chain. Measured on this project's machine
//! (AMD EPYC, in one run): 4 KiB in 113 ns against the `crc32c` crate's
//! 206 ns, and 715 ns against 933-1020 ns on a block not in the CPU's
//! caches, which is what a get checks: the block it just read and the
//! value it returns.
//!
//! [`crc32c_combine`] gives the crc32c of two runs laid end to end from
//! their own crcs and the second's length, without their bytes: a large
//! value's crc is computed once and serves both its entry's crc and its
//! record's. Written here rather than taken from `crc-fast`, whose combine
//! builds and squares 64×64 bit matrices on every call (measured: 9.8 µs
//! a call at 4 KiB, 15.4 µs at 1 MiB, where a pass over 1 MiB costs 19 µs);
//! this one is a few multiplications modulo the polynomial by powers of x
//! from a table (about 50 ns a call at any length).
//!
//! Invariant: [`crc32c_append`] returns exactly what
//! `crc32c::crc32c_append` returns for the same arguments (property tests
//! hold them equal on both paths), so no file's bytes depend on which one
//! ran. Without SSE 4.2 (checked once at run time, and on other
//! architectures) short runs go to `crc-fast` too. Thread-safe: pure
//! functions.

/// Runs at least this long go to `crc-fast`, whose folding is faster
/// than one serial chain over a long run (the same or faster from 256
/// bytes up, twice as fast at 4 KiB).
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
    // The register starts from the crc given, un-finalized (crc32c's
    // final xor is all ones), as `crc32c::crc32c_append` does.
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(bytes);
    digest.finalize() as u32
}

/// The crc32c of `bytes` (as `crc32c::crc32c`).
#[inline]
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    crc32c_append(0, bytes)
}

/// crc32c's polynomial, bit-reflected (the order crc32c's bits run in).
const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// `a` times `b` modulo the polynomial, both bit-reflected (x^0 is the top
/// bit).
const fn mul_mod_poly(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut product = 0;
    while m != 0 {
        if a & m != 0 {
            product ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 {
            (b >> 1) ^ POLY_REFLECTED
        } else {
            b >> 1
        };
    }
    product
}

/// x^(2^k) modulo the polynomial (bit-reflected), for k in 0..67: each
/// the square of the one before. Bit j of a length in bytes is x^(2^(j+3))
/// (8 bits a byte): every u64 length is covered.
const X_POW_2K: [u32; 67] = {
    let mut table = [0u32; 67];
    table[0] = 1 << 30; // x^1
    let mut k = 1;
    while k < 67 {
        table[k] = mul_mod_poly(table[k - 1], table[k - 1]);
        k += 1;
    }
    table
};

/// The crc32c of `a` then `b`, from `crc_a` (of `a`), `crc_b` (of `b`) and
/// `len_b` (b's length in bytes): the same as
/// `crc32c_append(crc_a, b)`, in time logarithmic in `len_b`.
pub(crate) fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    // crc_a shifted over len_b zero bytes (x^(8 len_b) mod P), then b's:
    // the pre- and post-conditioning of both crcs cancel in this sum.
    let mut shift = 1u32 << 31; // x^0
    let mut bits = len_b;
    let mut k = 3; // a byte is 2^3 bits
    while bits != 0 {
        if bits & 1 != 0 {
            shift = mul_mod_poly(X_POW_2K[k], shift);
        }
        bits >>= 1;
        k += 1;
    }
    mul_mod_poly(shift, crc_a) ^ crc_b
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

    proptest! {
        /// Long runs (the `crc-fast` path), any length past its folding
        /// widths, alignment and starting crc: the same crc as the crate's.
        #[test]
        fn long_runs_crc_as_the_crate_does(
            bytes in prop::collection::vec(any::<u8>(), SHORT_RUN_BYTES_MAX + 64..20_000),
            skip in 0usize..64,
            crc in any::<u32>(),
        ) {
            let bytes = &bytes[skip..];
            prop_assert_eq!(crc32c_append(crc, bytes), crc32c::crc32c_append(crc, bytes));
            prop_assert_eq!(crc32c(bytes), crc32c::crc32c(bytes));
        }
    }

    proptest! {
        /// Two runs' crcs and the second's length give the crc of both
        /// laid end to end, at any lengths (empty ones too).
        #[test]
        fn combined_crcs_are_the_crc_of_the_runs_end_to_end(
            a in prop::collection::vec(any::<u8>(), 0..600),
            b in prop::collection::vec(any::<u8>(), 0..20_000),
        ) {
            let whole = [&a[..], &b[..]].concat();
            let combined = crc32c_combine(crc32c(&a), crc32c(&b), b.len() as u64);
            prop_assert_eq!(combined, crc32c(&whole));
            prop_assert_eq!(combined, crc32c_append(crc32c(&a), &b));
        }
    }

    #[test]
    fn combine_over_long_runs_of_page_multiples() {
        // The lengths a large value has (multiples of 4 KiB, up to MiBs):
        // many set bits of the length, and the highest table entries used.
        let b: Vec<u8> = (0..(3 << 20) + 4096 * 7)
            .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        for len in [
            4096usize,
            8192,
            12288,
            1 << 20,
            (1 << 20) + 4096 * 5,
            b.len(),
        ] {
            let run = &b[..len];
            assert_eq!(
                crc32c_combine(0xDEAD_BEEF, crc32c(run), len as u64),
                crc32c_append(0xDEAD_BEEF, run),
                "len {len}"
            );
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
