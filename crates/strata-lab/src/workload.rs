//! Workload generators shared by the experiments: keys, values, batches.
//!
//! Keys are 16-byte big-endian integers (LAB.md §1): `i` for Sequential,
//! murmur3's 64-bit finalizer of `i` for Random, and that hash masked for
//! RandomReuse (few distinct keys, many versions). Values are slices of one
//! pseudo-random pool so that no engine gains from compressing them.
//! Everything here is deterministic, so every engine sees the same stream.

use serde::{Deserialize, Serialize};

/// Key width of every lab workload (LAB.md §1).
pub const KEY_LEN_BYTES: usize = 16;
/// Puts per write batch (LAB.md §1).
pub const BATCH_PUTS: usize = 16;
/// Size of the pseudo-random pool values are cut from.
const VALUE_POOL_BYTES: usize = 1 << 20;

/// murmur3's 64-bit finalizer: a bijection that scatters sequential ints.
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// How the i-th put chooses its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyLayout {
    Sequential,
    Random,
    /// `fmix64(i) & mask`: at most `mask + 1` distinct keys.
    RandomReuse(u64),
}

impl KeyLayout {
    pub fn key_int(self, i: u64) -> u64 {
        match self {
            KeyLayout::Sequential => i,
            KeyLayout::Random => fmix64(i),
            KeyLayout::RandomReuse(mask) => fmix64(i) & mask,
        }
    }

    /// The 16-byte big-endian key of put `i`.
    pub fn key(self, i: u64) -> [u8; KEY_LEN_BYTES] {
        key_bytes(self.key_int(i))
    }

    pub fn label(self) -> String {
        match self {
            KeyLayout::Sequential => "Sequential".to_string(),
            KeyLayout::Random => "Random".to_string(),
            KeyLayout::RandomReuse(mask) => format!("RandomReuse({mask:#x})"),
        }
    }
}

/// A u64 as a 16-byte big-endian key (upper 8 bytes zero).
pub fn key_bytes(n: u64) -> [u8; KEY_LEN_BYTES] {
    let mut key = [0u8; KEY_LEN_BYTES];
    key[8..].copy_from_slice(&n.to_be_bytes());
    key
}

/// Incompressible values of one size, cut from a fixed pseudo-random pool.
pub struct ValueSource {
    pool: Vec<u8>,
    value_len_bytes: usize,
}

impl ValueSource {
    pub fn new(value_len_bytes: usize) -> Self {
        let len = VALUE_POOL_BYTES + value_len_bytes;
        let mut pool = Vec::with_capacity(len);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        while pool.len() < len {
            state = fmix64(state.wrapping_add(0x9e37_79b9_7f4a_7c15));
            pool.extend_from_slice(&state.to_le_bytes());
        }
        pool.truncate(len);
        ValueSource {
            pool,
            value_len_bytes,
        }
    }

    pub fn value_len_bytes(&self) -> usize {
        self.value_len_bytes
    }

    /// The value of put `i`: a window of the pool that moves with `i`.
    pub fn value(&self, i: u64) -> &[u8] {
        let start = (fmix64(i) as usize) % VALUE_POOL_BYTES;
        &self.pool[start..start + self.value_len_bytes]
    }
}

/// A batch of puts, borrowed from the generators; adapters turn it into
/// their engine's native batch.
pub type Batch<'a> = [(&'a [u8], &'a [u8])];

/// Runs `f` on batches of [`BATCH_PUTS`] puts covering puts `0..puts`.
/// `f` also receives the index of the first put of its batch.
pub fn for_each_batch(
    layout: KeyLayout,
    values: &ValueSource,
    puts: u64,
    mut f: impl FnMut(u64, &Batch<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut keys = [[0u8; KEY_LEN_BYTES]; BATCH_PUTS];
    let mut first = 0u64;
    while first < puts {
        let n = (puts - first).min(BATCH_PUTS as u64) as usize;
        for (j, key) in keys.iter_mut().enumerate().take(n) {
            *key = layout.key(first + j as u64);
        }
        let batch: [(&[u8], &[u8]); BATCH_PUTS] =
            std::array::from_fn(|j| (&keys[j][..], values.value(first + j as u64)));
        f(first, &batch[..n])?;
        first += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmix64_is_a_bijection_on_a_sample() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000u64 {
            assert!(seen.insert(fmix64(i)));
        }
    }

    #[test]
    fn keys_are_big_endian_and_ordered_for_sequential() {
        let a = KeyLayout::Sequential.key(255);
        let b = KeyLayout::Sequential.key(256);
        assert!(a < b);
        assert_eq!(a[15], 255);
    }

    #[test]
    fn random_reuse_stays_within_mask() {
        for i in 0..1000 {
            assert!(KeyLayout::RandomReuse(0x3ff).key_int(i) <= 0x3ff);
        }
    }

    #[test]
    fn batches_cover_every_put_once() {
        let values = ValueSource::new(100);
        let mut count = 0u64;
        for_each_batch(KeyLayout::Sequential, &values, 100, |first, batch| {
            assert_eq!(first, count);
            assert!(batch.len() <= BATCH_PUTS);
            count += batch.len() as u64;
            Ok(())
        })
        .unwrap();
        assert_eq!(count, 100);
    }
}
