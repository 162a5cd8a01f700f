//! Bloom filter over the distinct keys of a layer file, and its on-disk
//! encoding.
//!
//! Owned by the layer writers (which build it at `finish`) and the layer
//! readers (which keep it in memory so that a `get` of an absent key costs no
//! device access). The filter answers "maybe present" or "certainly absent":
//! it has no false negatives.
//!
//! Two layouts, chosen by the layer's format version (the encoding is the
//! same; see `docs/format.md`):
//!
//! - **Blocked** (format version 4, what this build writes): the bit array is
//!   cut into 512-bit blocks, one cache line each, and all of a key's
//!   [`BLOOM_HASH_COUNT`] probes fall in one block. A lookup touches one
//!   cache line, where the spread layout touched one per probe: a get probes
//!   the filter of every layer it passes (each L0 layer, each run), and the
//!   spread layout's misses cost microseconds per get. Blocking raises the
//!   false-positive rate at a given density, so it takes
//!   [`BLOOM_BITS_PER_KEY`] = 16 bits per key: about 0.08 % (a get that
//!   probes eight layers reads a block it did not need once in 150).
//! - **Spread** (format versions 2 and 3, read only): probe `i` may set any
//!   bit of the array; 10 bits and 7 probes per key, about 0.8 %.
//!
//! Hashing: one pass of MurmurHash64A over the key gives `h1`; a murmur3
//! `fmix64` finalizer of `h1` gives `h2`.
//! - Blocked: the block is `fast_range(h1, block_count)`; probe `i` tests
//!   bit `g_i >> 55` of the block, where `g_0 = h2` and `g_{i+1} = g_i ·
//!   BLOOM_PROBE_MULTIPLIER`.
//! - Spread: probe `i` tests bit `fast_range(h1 + i * (h2 | 1), bit_count)`
//!   (Kirsch–Mitzenmacher double hashing).
//!
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

use crate::codec::{put_u32, put_u64, u32_at, u64_at};
use crate::error::{Corruption, Result};

/// How a filter places a key's probes (by the layer's format version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BloomLayout {
    /// Format versions 2 and 3: each probe anywhere in the array.
    Spread,
    /// Format version 4: every probe of a key within one 512-bit block.
    Blocked,
}

impl BloomLayout {
    /// The layout of a delta layer of format `version`.
    pub(crate) fn of_format_version(version: u32) -> BloomLayout {
        if version >= 4 {
            BloomLayout::Blocked
        } else {
            BloomLayout::Spread
        }
    }
}

/// Bits of filter per distinct key (blocked layout).
pub(crate) const BLOOM_BITS_PER_KEY: u64 = 16;
/// Probes per key (blocked layout): the optimum for 16 bits per key in
/// 512-bit blocks.
pub(crate) const BLOOM_HASH_COUNT: u32 = 10;
/// Bits of one block of the blocked layout: a 64-byte cache line.
pub(crate) const BLOOM_BLOCK_BITS: u64 = 512;
/// Steps the blocked layout's probe hash from one probe to the next (odd:
/// 2^64 / golden ratio).
const BLOOM_PROBE_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;
/// Bits per key and probes of the spread layout (older files; written only
/// by tests that make them).
pub(crate) const BLOOM_SPREAD_BITS_PER_KEY: u64 = 10;
pub(crate) const BLOOM_SPREAD_HASH_COUNT: u32 = 7;
/// Smallest spread filter written, so that tiny layers still filter something.
pub(crate) const BLOOM_BITS_MIN: u64 = 64;
/// Largest probe count a reader accepts.
pub(crate) const BLOOM_HASH_COUNT_MAX: u32 = 30;
/// The expected false-positive rate of the blocked layout at
/// [`BLOOM_BITS_PER_KEY`] and [`BLOOM_HASH_COUNT`]: the mean over the
/// Poisson number `n` of keys in a block (mean 512 / 16 = 32) of
/// `(1 - (1 - 1/512)^(k n))^k`, `k = 10`.
#[cfg_attr(not(test), allow(dead_code))] // used by tests
pub(crate) const BLOOM_FALSE_POSITIVE_RATE_TARGET: f64 = 0.00082;
/// The spread layout's: `(1 - e^(-k/b))^k` with `k = 7`, `b = 10`.
#[cfg_attr(not(test), allow(dead_code))] // used by tests
pub(crate) const BLOOM_SPREAD_FALSE_POSITIVE_RATE_TARGET: f64 = 0.0082;

pub(crate) const BLOOM_HASH_COUNT_OFFSET: usize = 0;
pub(crate) const BLOOM_BIT_COUNT_OFFSET: usize = BLOOM_HASH_COUNT_OFFSET + 4;
pub(crate) const BLOOM_BITS_OFFSET: usize = BLOOM_BIT_COUNT_OFFSET + 8;
/// Bytes of the encoding before the bit array.
pub(crate) const BLOOM_HEADER_BYTES: usize = BLOOM_BITS_OFFSET;

const _: () = assert!(BLOOM_HASH_COUNT >= 1 && BLOOM_HASH_COUNT <= BLOOM_HASH_COUNT_MAX);
const _: () =
    assert!(BLOOM_SPREAD_HASH_COUNT >= 1 && BLOOM_SPREAD_HASH_COUNT <= BLOOM_HASH_COUNT_MAX);
const _: () = assert!(BLOOM_BITS_MIN & 7 == 0);
const _: () = assert!(BLOOM_BLOCK_BITS == 8 * LINE_BYTES as u64);

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

const LINE_BYTES: usize = 64;

/// 64 bytes on a cache line of their own: a block of the blocked layout is
/// one `Line`, so its probes touch one cache line.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct Line([u8; LINE_BYTES]);

/// An immutable bloom filter.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct BloomFilter {
    /// The bit array, `byte_len` bytes of it in use (the rest of the last
    /// line is zero); bits at and above `bit_count` are zero.
    lines: Vec<Line>,
    /// `ceil(bit_count / 8)`.
    byte_len: usize,
    /// At least 1; blocked: a positive multiple of [`BLOOM_BLOCK_BITS`].
    bit_count: u64,
    /// In `1..=BLOOM_HASH_COUNT_MAX`.
    hash_count: u32,
    layout: BloomLayout,
}

impl std::fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilter")
            .field("layout", &self.layout)
            .field("bit_count", &self.bit_count)
            .field("hash_count", &self.hash_count)
            .finish()
    }
}

impl BloomFilter {
    /// Builds a filter in `layout` over the given key hashes (from
    /// [`bloom_hash`]), one per distinct key. This build writes the blocked
    /// layout; the spread one only for tests that make older files.
    pub(crate) fn build(layout: BloomLayout, key_hashes: &[u64]) -> Self {
        let keys = key_hashes.len() as u64;
        let (bit_count, hash_count) = match layout {
            BloomLayout::Blocked => (
                keys.saturating_mul(BLOOM_BITS_PER_KEY)
                    .max(1)
                    .next_multiple_of(BLOOM_BLOCK_BITS),
                BLOOM_HASH_COUNT,
            ),
            BloomLayout::Spread => (
                keys.saturating_mul(BLOOM_SPREAD_BITS_PER_KEY)
                    .max(BLOOM_BITS_MIN)
                    .next_multiple_of(8),
                BLOOM_SPREAD_HASH_COUNT,
            ),
        };
        // A layer's distinct keys fit in memory as hashes, so its filter does too.
        let byte_len = usize::try_from(bit_count / 8).unwrap_or(usize::MAX);
        let mut filter = BloomFilter {
            lines: vec![Line([0; LINE_BYTES]); byte_len.div_ceil(LINE_BYTES)],
            byte_len,
            bit_count,
            hash_count,
            layout,
        };
        let blocks = filter.blocks();
        for &h in key_hashes {
            match layout {
                BloomLayout::Blocked => {
                    let line = &mut filter.lines[fast_range(h, blocks) as usize];
                    blocked_probes(h, hash_count, |bit| line.0[bit / 8] |= 1 << (bit % 8));
                }
                BloomLayout::Spread => {
                    let lines = &mut filter.lines;
                    spread_probes(h, hash_count, bit_count, |bit| {
                        lines[bit / 8 / LINE_BYTES].0[bit / 8 % LINE_BYTES] |= 1 << (bit % 8)
                    });
                }
            }
        }
        filter
    }

    /// Blocks of the blocked layout.
    fn blocks(&self) -> u64 {
        self.bit_count / BLOOM_BLOCK_BITS
    }

    /// Whether bit `bit` of the array is set (false past its end).
    fn bit(&self, bit: usize) -> bool {
        self.lines
            .get(bit / 8 / LINE_BYTES)
            .is_some_and(|line| line.0[bit / 8 % LINE_BYTES] & (1 << (bit % 8)) != 0)
    }

    /// False when `key` is certainly not in the set; true when it may be.
    #[cfg_attr(not(any(test, feature = "fuzzing")), allow(dead_code))] // tests, fuzzing
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(bloom_hash(key))
    }

    /// [`Self::may_contain`] for a precomputed [`bloom_hash`].
    pub(crate) fn may_contain_hash(&self, h1: u64) -> bool {
        match self.layout {
            BloomLayout::Blocked => {
                let Some(line) = self.lines.get(fast_range(h1, self.blocks()) as usize) else {
                    return true;
                };
                let mut all = true;
                blocked_probes(h1, self.hash_count, |bit| {
                    all &= line.0[bit / 8] & (1 << (bit % 8)) != 0
                });
                all
            }
            BloomLayout::Spread => {
                let mut all = true;
                spread_probes(h1, self.hash_count, self.bit_count, |bit| {
                    all &= self.bit(bit)
                });
                all
            }
        }
    }

    /// Bytes of memory the filter holds.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.lines.capacity() * LINE_BYTES + std::mem::size_of::<Self>()
    }

    /// Bytes [`Self::encode`] appends.
    pub(crate) fn encoded_bytes(&self) -> usize {
        BLOOM_HEADER_BYTES + self.byte_len
    }

    /// Appends the encoding to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        put_u32(out, self.hash_count);
        put_u64(out, self.bit_count);
        let bits_start = out.len();
        for line in &self.lines {
            out.extend_from_slice(&line.0);
        }
        out.truncate(bits_start + self.byte_len);
        debug_assert_eq!(out.len() - start, self.encoded_bytes());
    }

    /// Decodes a filter in `layout` from exactly the bytes [`Self::encode`]
    /// wrote, found at byte `offset` of `file`. The caller has verified the
    /// bytes' checksum; this checks the fields against the limits.
    pub(crate) fn decode(
        bytes: &[u8],
        layout: BloomLayout,
        file: &Path,
        offset: u64,
    ) -> Result<Self> {
        let corrupt = |at: usize, what: String| Corruption::new(file, offset + at as u64, what);
        // The bit count is the header's last field: both read, the
        // header is whole.
        let (Some(hash_count), Some(bit_count)) = (
            u32_at(bytes, BLOOM_HASH_COUNT_OFFSET),
            u64_at(bytes, BLOOM_BIT_COUNT_OFFSET),
        ) else {
            return Err(corrupt(
                0,
                format!(
                    "bloom filter is {} bytes, shorter than its header",
                    bytes.len()
                ),
            )
            .into());
        };
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
        if layout == BloomLayout::Blocked && bit_count % BLOOM_BLOCK_BITS != 0 {
            return Err(corrupt(
                BLOOM_BIT_COUNT_OFFSET,
                format!(
                    "blocked bloom filter bit count {bit_count} is not a multiple of {BLOOM_BLOCK_BITS}"
                ),
            )
            .into());
        }
        let mut lines = vec![Line([0; LINE_BYTES]); bits.len().div_ceil(LINE_BYTES)];
        for (line, chunk) in lines.iter_mut().zip(bits.chunks(LINE_BYTES)) {
            line.0[..chunk.len()].copy_from_slice(chunk);
        }
        Ok(BloomFilter {
            lines,
            byte_len: bits.len(),
            bit_count,
            hash_count,
            layout,
        })
    }
}

/// A key and its [`bloom_hash`], computed once per point read and handed to
/// every layer the read passes (each would otherwise hash the key again).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PointKey<'a> {
    pub key: &'a [u8],
    pub hash: u64,
}

impl<'a> PointKey<'a> {
    pub(crate) fn new(key: &'a [u8]) -> Self {
        PointKey {
            key,
            hash: bloom_hash(key),
        }
    }
}

impl BloomFilter {
    /// Asks the CPU to load the cache line a lookup of `h1` will test, so
    /// that a read passing several layers waits for their filters' misses
    /// together, not one after another. Only a hint: it never faults and
    /// changes nothing.
    pub(crate) fn prefetch_hash(&self, h1: u64) {
        if self.layout == BloomLayout::Blocked {
            if let Some(line) = self.lines.get(fast_range(h1, self.blocks()) as usize) {
                crate::prefetch::read(line);
            }
        }
    }
}

/// The filter of an in-memory layer: the blocked layout, built as keys are
/// appended, so that a get of a key the layer does not hold skips its
/// B-tree (whose cold nodes cost a microsecond per lookup). The bits live
/// beside the index, under the same lock.
///
/// It cannot know how many keys are coming, so it is a list of segments:
/// the first sized for the caller's estimate, each next one for twice the
/// keys of all before it. A key is set in the newest segment only and looked
/// up in all of them (a handful even when the estimate was far too low).
#[derive(Debug, Default)]
pub(crate) struct GrowingFilter {
    segments: Vec<Segment>,
}

#[derive(Debug)]
struct Segment {
    lines: Vec<Line>,
    keys: usize,
    keys_max: usize,
}

impl Segment {
    fn new(keys_max: usize) -> Segment {
        let bits = (keys_max as u64).saturating_mul(BLOOM_BITS_PER_KEY);
        let blocks = bits.div_ceil(BLOOM_BLOCK_BITS).max(1);
        Segment {
            lines: vec![Line([0; LINE_BYTES]); usize::try_from(blocks).unwrap_or(usize::MAX)],
            keys: 0,
            keys_max,
        }
    }

    fn line(&self, h1: u64) -> usize {
        fast_range(h1, self.lines.len() as u64) as usize
    }
}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Line")
    }
}

impl GrowingFilter {
    /// A filter whose first segment holds `keys` keys at the blocked
    /// layout's false-positive rate.
    pub(crate) fn with_capacity(keys: usize) -> GrowingFilter {
        GrowingFilter {
            segments: vec![Segment::new(keys.max(64))],
        }
    }

    /// Starts loading the line an [`Self::insert`] of `h1` would set, so
    /// that the inserts of a batch overlap their cache misses instead of
    /// taking them one after another (a hint: nothing changes).
    pub(crate) fn prefetch_insert(&self, h1: u64) {
        if let Some(segment) = self.segments.last() {
            if let Some(line) = segment.lines.get(segment.line(h1)) {
                crate::prefetch::read(line);
            }
        }
    }

    /// Adds a key (its [`bloom_hash`]) that was not in the set.
    pub(crate) fn insert(&mut self, h1: u64) {
        let full = self.segments.last().is_none_or(|s| s.keys >= s.keys_max);
        if full {
            let held: usize = self.segments.iter().map(|s| s.keys_max).sum();
            self.segments
                .push(Segment::new(held.max(64).saturating_mul(2)));
        }
        let segment = self
            .segments
            .last_mut()
            .expect("a segment was just ensured");
        let at = segment.line(h1);
        let line = &mut segment.lines[at];
        blocked_probes(h1, BLOOM_HASH_COUNT, |bit| {
            line.0[bit / 8] |= 1 << (bit % 8)
        });
        segment.keys += 1;
    }

    /// False when the key of hash `h1` was certainly never inserted.
    pub(crate) fn may_contain_hash(&self, h1: u64) -> bool {
        self.segments.iter().any(|s| {
            let line = &s.lines[s.line(h1)];
            let mut all = true;
            blocked_probes(h1, BLOOM_HASH_COUNT, |bit| {
                all &= line.0[bit / 8] & (1 << (bit % 8)) != 0
            });
            all
        })
    }

    /// Bytes of memory the filter holds.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|s| s.lines.capacity() * LINE_BYTES)
            .sum()
    }
}

/// The blocked layout's probes of `h1`: `hash_count` bits within a block.
fn blocked_probes(h1: u64, hash_count: u32, mut f: impl FnMut(usize)) {
    let mut g = fmix64(h1);
    for _ in 0..hash_count {
        f((g >> 55) as usize); // < 512
        g = g.wrapping_mul(BLOOM_PROBE_MULTIPLIER);
    }
}

/// The spread layout's probes of `h1` over `bit_count` bits.
fn spread_probes(h1: u64, hash_count: u32, bit_count: u64, mut f: impl FnMut(usize)) {
    let h2 = fmix64(h1) | 1;
    let mut g = h1;
    for _ in 0..hash_count {
        // bit < bit_count <= 8 * (bytes held), so it fits in usize.
        f(fast_range(g, bit_count) as usize);
        g = g.wrapping_add(h2);
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

    const LAYOUTS: [BloomLayout; 2] = [BloomLayout::Blocked, BloomLayout::Spread];

    #[test]
    fn bloom_has_no_false_negatives() {
        for layout in LAYOUTS {
            for n in [0u64, 1, 7, 100, 5000] {
                let keys: Vec<Vec<u8>> = (0..n).map(|i| key(i, b'a')).collect();
                let hashes: Vec<u64> = keys.iter().map(|k| bloom_hash(k)).collect();
                let filter = BloomFilter::build(layout, &hashes);
                for k in &keys {
                    assert!(
                        filter.may_contain(k),
                        "{layout:?}: false negative for {k:?} with n = {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn bloom_false_positive_rate_is_near_target() {
        for (layout, target, n, probes) in [
            (
                BloomLayout::Blocked,
                BLOOM_FALSE_POSITIVE_RATE_TARGET,
                100_000u64,
                2_000_000u64,
            ),
            (
                BloomLayout::Spread,
                BLOOM_SPREAD_FALSE_POSITIVE_RATE_TARGET,
                20_000,
                200_000,
            ),
        ] {
            let hashes: Vec<u64> = (0..n).map(|i| bloom_hash(&key(i, b'a'))).collect();
            let filter = BloomFilter::build(layout, &hashes);
            let false_positives = (0..probes)
                .filter(|&i| filter.may_contain(&key(i, b'b')))
                .count();
            let rate = false_positives as f64 / probes as f64;
            assert!(
                rate > target / 2.0 && rate < target * 1.5,
                "{layout:?}: false-positive rate {rate} is not near the target {target}"
            );
        }
    }

    #[test]
    fn a_growing_filter_has_no_false_negatives_and_keeps_its_rate() {
        // Within its estimate: one segment, the blocked layout's rate.
        let mut filter = GrowingFilter::with_capacity(50_000);
        for i in 0..50_000 {
            filter.insert(bloom_hash(&key(i, b'a')));
        }
        assert_eq!(filter.segments.len(), 1);
        let probes = 1_000_000u64;
        let false_positives = (0..probes)
            .filter(|&i| filter.may_contain_hash(bloom_hash(&key(i, b'b'))))
            .count();
        let rate = false_positives as f64 / probes as f64;
        let target = BLOOM_FALSE_POSITIVE_RATE_TARGET;
        assert!(
            rate > target / 2.0 && rate < target * 1.5,
            "false-positive rate {rate} is not near the target {target}"
        );
        // Far past it: segments are added (each twice what came before, so
        // a handful), and every key inserted is still found.
        let mut filter = GrowingFilter::with_capacity(100);
        for i in 0..100_000 {
            filter.insert(bloom_hash(&key(i, b'a')));
        }
        assert!(
            (5..=12).contains(&filter.segments.len()),
            "{} segments",
            filter.segments.len()
        );
        for i in 0..100_000 {
            assert!(
                filter.may_contain_hash(bloom_hash(&key(i, b'a'))),
                "key {i}"
            );
        }
        let false_positives = (0..100_000u64)
            .filter(|&i| filter.may_contain_hash(bloom_hash(&key(i, b'b'))))
            .count();
        // At most one segment's rate per segment.
        assert!(
            (false_positives as f64) < 100_000.0 * target * filter.segments.len() as f64 * 1.5,
            "{false_positives} false positives in 100,000"
        );
        assert!(filter.memory_bytes() >= 100_000 * BLOOM_BITS_PER_KEY as usize / 8);
    }

    #[test]
    fn a_blocked_lookup_reads_one_cache_line() {
        let hashes: Vec<u64> = (0..1000).map(|i| bloom_hash(&key(i, b'a'))).collect();
        let filter = BloomFilter::build(BloomLayout::Blocked, &hashes);
        assert_eq!(std::mem::align_of::<Line>(), 64);
        assert_eq!(filter.bit_count % BLOOM_BLOCK_BITS, 0);
        // Every key's bits lie in the block its hash picks.
        for &h in &hashes {
            let block = fast_range(h, filter.blocks()) as usize;
            let mut alone = filter.clone();
            for (i, line) in alone.lines.iter_mut().enumerate() {
                if i != block {
                    line.0 = [0; LINE_BYTES];
                }
            }
            assert!(alone.may_contain_hash(h));
        }
    }

    #[test]
    fn bloom_encoding_round_trips() {
        for layout in LAYOUTS {
            for n in [0u64, 1, 300, 1001] {
                let hashes: Vec<u64> = (0..n).map(|i| bloom_hash(&key(i, b'x'))).collect();
                let filter = BloomFilter::build(layout, &hashes);
                let mut out = vec![];
                filter.encode(&mut out);
                assert_eq!(out.len(), filter.encoded_bytes());
                let decoded =
                    BloomFilter::decode(&out, layout, Path::new("f"), 0).expect("decodes");
                assert_eq!(decoded, filter, "{layout:?}, {n} keys");
            }
        }
    }

    #[test]
    fn bloom_decode_rejects_bad_fields_without_panicking() {
        for layout in LAYOUTS {
            let filter = BloomFilter::build(layout, &[1, 2, 3]);
            let mut good = vec![];
            filter.encode(&mut good);
            let decode =
                |bytes: &[u8], offset| BloomFilter::decode(bytes, layout, Path::new("f"), offset);
            for cut in 0..good.len() {
                assert!(decode(&good[..cut], 0).is_err(), "{layout:?}: cut at {cut}");
            }
            let mut zero_hashes = good.clone();
            zero_hashes[0..4].copy_from_slice(&0u32.to_le_bytes());
            assert!(decode(&zero_hashes, 0).is_err());
            let mut huge_bits = good.clone();
            huge_bits[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
            let err = decode(&huge_bits, 100).expect_err("rejects");
            assert!(err.to_string().contains("offset 104"), "{err}");
        }
        // A blocked filter's bit count is whole blocks.
        let mut ragged = vec![];
        BloomFilter::build(BloomLayout::Spread, &[1, 2, 3]).encode(&mut ragged);
        let err = BloomFilter::decode(&ragged, BloomLayout::Blocked, Path::new("f"), 0)
            .expect_err("not whole blocks");
        assert!(err.to_string().contains("multiple of 512"), "{err}");
    }

    #[test]
    fn murmur64a_depends_on_key_and_seed() {
        assert_eq!(murmur64a(b"", 0), 0);
        assert_ne!(murmur64a(b"a", 0), murmur64a(b"b", 0));
        assert_ne!(murmur64a(b"abcdefgh", 0), murmur64a(b"abcdefgh", 1));
    }
}
