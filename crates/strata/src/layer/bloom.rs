//! Bloom filter over the distinct keys of a layer file, and its on-disk
//! encoding.
//!
//! Owned by the layer writers (which build it at `finish`) and the layer
//! readers (which keep it in memory so that a `get` of an absent key costs no
//! device access). The filter answers "maybe present" or "certainly absent":
//! it has no false negatives, and with [`BLOOM_BITS_PER_KEY`] = 10 its false
//! positive rate is about 0.8 %.
//!
//! Hashing: one pass of MurmurHash64A over the key gives `h1`; a murmur3
//! `fmix64` finalizer of `h1` gives `h2`; probe `i` (of `k` probes) sets bit
//! `fast_range(h1 + i * h2, bit_count)` (Kirsch–Mitzenmacher double hashing).
//! The hash is part of the file format: changing it needs a new format version.
//!
//! Encoding (all little-endian, see `docs/format.md`):
//!
//! | offset | size | field        |
//! |-------:|-----:|--------------|
//! | 0      | 4    | `hash_count` |
//! | 4      | 8    | `bit_count`  |
//! | 12     | n    | bits, `n = ceil(bit_count / 8)`, bit `b` is `bits[b / 8] >> (b % 8) & 1` |
//!
//! The encoding carries no checksum of its own: the file that embeds it covers
//! it (the delta layer footer holds its crc32c). Decoding checks every field
//! against the limits below before allocating.
//!
//! Thread-safety: a built filter is immutable and `Send + Sync`.

use std::path::Path;

use crate::error::{Corruption, Result};

/// Bits of filter per distinct key.
pub(crate) const BLOOM_BITS_PER_KEY: u64 = 10;
/// Probes per key: `round(BLOOM_BITS_PER_KEY * ln 2)`, the optimum for that density.
pub(crate) const BLOOM_HASH_COUNT: u32 = 7;
/// Smallest filter written, so that tiny layers still filter something.
pub(crate) const BLOOM_BITS_MIN: u64 = 64;
/// Largest probe count a reader accepts.
pub(crate) const BLOOM_HASH_COUNT_MAX: u32 = 30;
/// The expected false-positive rate at [`BLOOM_BITS_PER_KEY`] and [`BLOOM_HASH_COUNT`]:
/// `(1 - e^(-k/b))^k` with `k = 7`, `b = 10`.
#[cfg_attr(not(test), allow(dead_code))] // used by tests
pub(crate) const BLOOM_FALSE_POSITIVE_RATE_TARGET: f64 = 0.0082;

pub(crate) const BLOOM_HASH_COUNT_OFFSET: usize = 0;
pub(crate) const BLOOM_BIT_COUNT_OFFSET: usize = BLOOM_HASH_COUNT_OFFSET + 4;
pub(crate) const BLOOM_BITS_OFFSET: usize = BLOOM_BIT_COUNT_OFFSET + 8;
/// Bytes of the encoding before the bit array.
pub(crate) const BLOOM_HEADER_BYTES: usize = BLOOM_BITS_OFFSET;

const _: () = assert!(BLOOM_HASH_COUNT >= 1 && BLOOM_HASH_COUNT <= BLOOM_HASH_COUNT_MAX);
const _: () = assert!(BLOOM_BITS_MIN & 7 == 0);

/// The key hash the filter is built from. Writers collect it per distinct key.
pub(crate) fn bloom_hash(key: &[u8]) -> u64 {
    murmur64a(key, 0x5354_5241_5441_424c) // "STRATABL"
}

/// MurmurHash64A (Austin Appleby, public domain).
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let chunks = key.chunks_exact(8);
    let tail = chunks.remainder();
    for chunk in chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let mut k = u64::from_le_bytes(word);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// murmur3's 64-bit finalizer: a bijection that mixes every input bit into
/// every output bit.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Maps `x` uniformly onto `0..n` without a division (Lemire's fast range).
fn fast_range(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// An immutable bloom filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BloomFilter {
    /// `ceil(bit_count / 8)` bytes; bits at and above `bit_count` are zero.
    bits: Vec<u8>,
    /// At least 1 (at least [`BLOOM_BITS_MIN`] when built here).
    bit_count: u64,
    /// In `1..=BLOOM_HASH_COUNT_MAX`.
    hash_count: u32,
}

impl BloomFilter {
    /// Builds a filter over the given key hashes (from [`bloom_hash`]), one per
    /// distinct key.
    pub(crate) fn build(key_hashes: &[u64]) -> Self {
        let bit_count = (key_hashes.len() as u64)
            .saturating_mul(BLOOM_BITS_PER_KEY)
            .max(BLOOM_BITS_MIN)
            .next_multiple_of(8);
        // A layer's distinct keys fit in memory as hashes, so its filter does too.
        let byte_count = usize::try_from(bit_count / 8).unwrap_or(usize::MAX);
        let mut filter = BloomFilter {
            bits: vec![0u8; byte_count],
            bit_count,
            hash_count: BLOOM_HASH_COUNT,
        };
        for &h in key_hashes {
            filter.for_each_probe(h, |bits, bit| bits[bit / 8] |= 1 << (bit % 8));
        }
        filter
    }

    fn for_each_probe(&mut self, h1: u64, mut f: impl FnMut(&mut [u8], usize)) {
        let h2 = fmix64(h1) | 1;
        let mut g = h1;
        for _ in 0..self.hash_count {
            // bit < bit_count = 8 * bits.len(), so it fits in usize.
            let bit = fast_range(g, self.bit_count) as usize;
            f(&mut self.bits, bit);
            g = g.wrapping_add(h2);
        }
    }

    /// False when `key` is certainly not in the set; true when it may be.
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(bloom_hash(key))
    }

    /// [`Self::may_contain`] for a precomputed [`bloom_hash`].
    pub(crate) fn may_contain_hash(&self, h1: u64) -> bool {
        let h2 = fmix64(h1) | 1;
        let mut g = h1;
        for _ in 0..self.hash_count {
            let bit = fast_range(g, self.bit_count);
            let byte = self.bits.get((bit / 8) as usize).copied().unwrap_or(0);
            if byte & (1 << (bit % 8)) == 0 {
                return false;
            }
            g = g.wrapping_add(h2);
        }
        true
    }

    /// Bytes of memory the filter holds.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.bits.capacity() + std::mem::size_of::<Self>()
    }

    /// Bytes [`Self::encode`] appends.
    pub(crate) fn encoded_bytes(&self) -> usize {
        BLOOM_HEADER_BYTES + self.bits.len()
    }

    /// Appends the encoding to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.hash_count.to_le_bytes());
        out.extend_from_slice(&self.bit_count.to_le_bytes());
        out.extend_from_slice(&self.bits);
        debug_assert_eq!(out.len() - start, self.encoded_bytes());
    }

    /// Decodes a filter from exactly the bytes [`Self::encode`] wrote, found at
    /// byte `offset` of `file`. The caller has verified the bytes' checksum;
    /// this checks the fields against the limits.
    pub(crate) fn decode(bytes: &[u8], file: &Path, offset: u64) -> Result<Self> {
        let corrupt = |at: usize, what: String| Corruption::new(file, offset + at as u64, what);
        if bytes.len() < BLOOM_HEADER_BYTES {
            return Err(corrupt(
                0,
                format!(
                    "bloom filter is {} bytes, shorter than its header",
                    bytes.len()
                ),
            )
            .into());
        }
        let mut word4 = [0u8; 4];
        word4.copy_from_slice(&bytes[BLOOM_HASH_COUNT_OFFSET..BLOOM_HASH_COUNT_OFFSET + 4]);
        let hash_count = u32::from_le_bytes(word4);
        let mut word8 = [0u8; 8];
        word8.copy_from_slice(&bytes[BLOOM_BIT_COUNT_OFFSET..BLOOM_BIT_COUNT_OFFSET + 8]);
        let bit_count = u64::from_le_bytes(word8);
        if hash_count == 0 || hash_count > BLOOM_HASH_COUNT_MAX {
            return Err(corrupt(
                BLOOM_HASH_COUNT_OFFSET,
                format!(
                    "bloom filter hash count {hash_count} is outside 1..={BLOOM_HASH_COUNT_MAX}"
                ),
            )
            .into());
        }
        let bits = &bytes[BLOOM_BITS_OFFSET..];
        if bit_count == 0 || bit_count.div_ceil(8) != bits.len() as u64 {
            return Err(corrupt(
                BLOOM_BIT_COUNT_OFFSET,
                format!(
                    "bloom filter bit count {bit_count} does not match its {} bytes of bits",
                    bits.len()
                ),
            )
            .into());
        }
        Ok(BloomFilter {
            bits: bits.to_vec(),
            bit_count,
            hash_count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64, salt: u8) -> Vec<u8> {
        let mut k = format!("key-{i:08}").into_bytes();
        k.push(salt);
        k
    }

    #[test]
    fn bloom_has_no_false_negatives() {
        for n in [0u64, 1, 7, 100, 5000] {
            let keys: Vec<Vec<u8>> = (0..n).map(|i| key(i, b'a')).collect();
            let hashes: Vec<u64> = keys.iter().map(|k| bloom_hash(k)).collect();
            let filter = BloomFilter::build(&hashes);
            for k in &keys {
                assert!(
                    filter.may_contain(k),
                    "false negative for {k:?} with n = {n}"
                );
            }
        }
    }

    #[test]
    fn bloom_false_positive_rate_is_near_target() {
        let n = 20_000u64;
        let hashes: Vec<u64> = (0..n).map(|i| bloom_hash(&key(i, b'a'))).collect();
        let filter = BloomFilter::build(&hashes);
        let probes = 200_000u64;
        let false_positives = (0..probes)
            .filter(|&i| filter.may_contain(&key(i, b'b')))
            .count();
        let rate = false_positives as f64 / probes as f64;
        assert!(
            rate > BLOOM_FALSE_POSITIVE_RATE_TARGET / 2.0
                && rate < BLOOM_FALSE_POSITIVE_RATE_TARGET * 1.5,
            "false-positive rate {rate} is not near the target {BLOOM_FALSE_POSITIVE_RATE_TARGET}"
        );
    }

    #[test]
    fn bloom_encoding_round_trips() {
        let hashes: Vec<u64> = (0..300).map(|i| bloom_hash(&key(i, b'x'))).collect();
        let filter = BloomFilter::build(&hashes);
        let mut out = vec![];
        filter.encode(&mut out);
        assert_eq!(out.len(), filter.encoded_bytes());
        let decoded = BloomFilter::decode(&out, Path::new("f"), 0).expect("decodes");
        assert_eq!(decoded, filter);
    }

    #[test]
    fn bloom_decode_rejects_bad_fields_without_panicking() {
        let filter = BloomFilter::build(&[1, 2, 3]);
        let mut good = vec![];
        filter.encode(&mut good);
        for cut in 0..good.len() {
            assert!(
                BloomFilter::decode(&good[..cut], Path::new("f"), 0).is_err(),
                "cut at {cut}"
            );
        }
        let mut zero_hashes = good.clone();
        zero_hashes[0..4].copy_from_slice(&0u32.to_le_bytes());
        assert!(BloomFilter::decode(&zero_hashes, Path::new("f"), 0).is_err());
        let mut huge_bits = good.clone();
        huge_bits[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = BloomFilter::decode(&huge_bits, Path::new("f"), 100).expect_err("rejects");
        assert!(err.to_string().contains("offset 104"), "{err}");
    }

    #[test]
    fn murmur64a_depends_on_key_and_seed() {
        assert_eq!(murmur64a(b"", 0), 0);
        assert_ne!(murmur64a(b"a", 0), murmur64a(b"b", 0));
        assert_ne!(murmur64a(b"abcdefgh", 0), murmur64a(b"abcdefgh", 1));
    }
}
