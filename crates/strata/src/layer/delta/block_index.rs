//! A delta layer's block index as it is kept in memory: where each data
//! block is, and the (key, LSN) it starts with; and the bounds every entry
//! of the layer lies in (the footer's LSN range, the key range's key_max),
//! which the block cursors that share the index check each entry against.
//!
//! The indexes of every live layer stay in memory (within
//! `Options::index_memory_bytes_max`), so a get costs one device read; at
//! small blocks they are the engine's largest use of memory, and past the
//! budget a read must open a layer's index again. So the index is kept in
//! columns: one allocation holds every first key, end to end, and the fixed
//! fields are arrays. A block costs its key and 20 bytes (a key end, an LSN
//! and an offset), plus 12 for a value block; a handle per block with a
//! key allocation of its own cost about 104 bytes beside the key.
//!
//! Invariants (`decode_index` checks them on what it reads before it pushes
//! a block; nothing else builds an index but the fuzz targets): blocks are
//! contiguous, so a block's length is where the next starts less where it
//! starts; (first key, first LSN) ascend; every first key is
//! `1..=KEY_BYTES_MAX` bytes, and all of them together fit a `u32`; every
//! first LSN lies in the bounds' LSN range, and (checked at open) the last
//! first key is at most the bounds' key_max.

use super::Lsn;
use std::ops::Range;

/// One block as the index gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockHandle<'a> {
    pub(crate) first_key: &'a [u8],
    pub(crate) first_lsn: Lsn,
    pub(crate) offset: u64,
    pub(crate) len_bytes: u64,
    /// A value block's value length and crc32c (`INDEX_VALUE_BLOCK_FLAG`);
    /// `None` for a block of entries.
    pub(crate) value_block: Option<(u32, u32)>,
}

/// The block index of one layer file. See the module documentation.
#[derive(Debug)]
pub(crate) struct BlockIndex {
    /// Every block's first key, end to end.
    keys: Vec<u8>,
    /// Where block `i`'s first key ends in `keys` (it starts where block
    /// `i - 1`'s ends).
    key_ends: Vec<u32>,
    first_lsns: Vec<Lsn>,
    /// Block `i` is `offsets[i]..offsets[i + 1]`: one more than the blocks
    /// (none while empty).
    offsets: Vec<u64>,
    /// The value blocks: (block number, value length, crc32c), ascending.
    value_blocks: Vec<(u32, u32, u32)>,
    /// The layer's LSNs, inclusive (the footer's `lsn_min`, `lsn_max`).
    lsn_min: Lsn,
    lsn_max: Lsn,
    /// The layer's largest key (the key range section's); empty until
    /// `set_key_max`, and for a layer without entries.
    key_max: Vec<u8>,
    /// The layer's data blocks end with restart points (format version 6).
    restarts: bool,
}

impl BlockIndex {
    /// An empty index with room for `blocks` blocks whose first keys take
    /// about `key_bytes` together, of a layer whose entries' LSNs are
    /// `lsn_min..=lsn_max`.
    pub(crate) fn with_capacity(
        blocks: usize,
        key_bytes: usize,
        lsn_min: Lsn,
        lsn_max: Lsn,
    ) -> Self {
        BlockIndex {
            keys: Vec::with_capacity(key_bytes),
            key_ends: Vec::with_capacity(blocks),
            first_lsns: Vec::with_capacity(blocks),
            offsets: Vec::with_capacity(blocks + 1),
            value_blocks: Vec::new(),
            lsn_min,
            lsn_max,
            key_max: Vec::new(),
            restarts: false,
        }
    }

    /// Sets the layer's largest key (from its key range section, read after
    /// the index).
    pub(crate) fn set_key_max(&mut self, key_max: &[u8]) {
        debug_assert!(self.last().is_none_or(|l| l.first_key <= key_max));
        self.key_max = key_max.to_vec();
    }

    /// Says whether the layer's data blocks end with restart points (its
    /// format version is `RESTARTS_FORMAT_VERSION` or later).
    pub(crate) fn set_restarts(&mut self, restarts: bool) {
        self.restarts = restarts;
    }

    /// Whether the layer's data blocks end with restart points.
    pub(crate) fn restarts(&self) -> bool {
        self.restarts
    }

    /// The LSNs of the layer's entries, inclusive.
    pub(crate) fn lsns(&self) -> (Lsn, Lsn) {
        (self.lsn_min, self.lsn_max)
    }

    /// The layer's largest key (see `set_key_max`).
    pub(crate) fn key_max(&self) -> &[u8] {
        &self.key_max
    }

    /// Whether a first key of `len` more bytes still fits the key arena.
    pub(crate) fn key_fits(&self, len: usize) -> bool {
        u32::try_from(self.keys.len() + len).is_ok()
    }

    /// Appends the block after the last (see the invariants: the caller has
    /// checked them).
    pub(crate) fn push(&mut self, h: BlockHandle<'_>) {
        debug_assert!(self.key_fits(h.first_key.len()));
        debug_assert!(self.offsets.last().is_none_or(|&end| end == h.offset));
        debug_assert!(self
            .last()
            .is_none_or(|l| (l.first_key, l.first_lsn) < (h.first_key, h.first_lsn)));
        debug_assert!((self.lsn_min..=self.lsn_max).contains(&h.first_lsn));
        if let Some((value_len, crc)) = h.value_block {
            self.value_blocks.push((self.len() as u32, value_len, crc));
        }
        self.keys.extend_from_slice(h.first_key);
        self.key_ends.push(self.keys.len() as u32);
        self.first_lsns.push(h.first_lsn);
        if self.offsets.is_empty() {
            self.offsets.push(h.offset);
        }
        self.offsets.push(h.offset + h.len_bytes);
    }

    /// Gives back the room reserved and not used.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.keys.shrink_to_fit();
        self.key_ends.shrink_to_fit();
        self.first_lsns.shrink_to_fit();
        self.offsets.shrink_to_fit();
        self.value_blocks.shrink_to_fit();
        self.key_max.shrink_to_fit();
    }

    pub(crate) fn len(&self) -> usize {
        self.key_ends.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.key_ends.is_empty()
    }

    /// Block `i`'s first key (`i` < `len()`).
    pub(crate) fn first_key(&self, i: usize) -> &[u8] {
        let start = match i {
            0 => 0,
            _ => self.key_ends[i - 1] as usize,
        };
        &self.keys[start..self.key_ends[i] as usize]
    }

    /// Block `i`'s (first key, first LSN), or `None` past the last.
    pub(crate) fn first_entry(&self, i: usize) -> Option<(&[u8], Lsn)> {
        (i < self.len()).then(|| (self.first_key(i), self.first_lsns[i]))
    }

    /// Block `i`, or `None` past the last.
    pub(crate) fn get(&self, i: usize) -> Option<BlockHandle<'_>> {
        if i >= self.len() {
            return None;
        }
        let value_block = match self.value_blocks.binary_search_by_key(&i, |v| v.0 as usize) {
            Ok(at) => Some((self.value_blocks[at].1, self.value_blocks[at].2)),
            Err(_) => None,
        };
        Some(BlockHandle {
            first_key: self.first_key(i),
            first_lsn: self.first_lsns[i],
            offset: self.offsets[i],
            len_bytes: self.offsets[i + 1] - self.offsets[i],
            value_block,
        })
    }

    /// The last block, if any.
    pub(crate) fn last(&self) -> Option<BlockHandle<'_>> {
        self.get(self.len().checked_sub(1)?)
    }

    /// Every block in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = BlockHandle<'_>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// The first block of `blocks` whose (first key, first LSN) does not
    /// satisfy `pred`, given that those that do come first (as
    /// `slice::partition_point`).
    pub(crate) fn partition_point(
        &self,
        blocks: Range<usize>,
        mut pred: impl FnMut(&[u8], Lsn) -> bool,
    ) -> usize {
        let (mut lo, mut hi) = (blocks.start, blocks.end.min(self.len()));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.first_key(mid), self.first_lsns[mid]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The bytes the index holds.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.keys.capacity()
            + self.key_ends.capacity() * std::mem::size_of::<u32>()
            + self.first_lsns.capacity() * std::mem::size_of::<Lsn>()
            + self.offsets.capacity() * std::mem::size_of::<u64>()
            + self.value_blocks.capacity() * std::mem::size_of::<(u32, u32, u32)>()
            + self.key_max.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(key: &[u8], lsn: Lsn, offset: u64, len: u64, value: bool) -> BlockHandle<'_> {
        BlockHandle {
            first_key: key,
            first_lsn: lsn,
            offset,
            len_bytes: len,
            value_block: value.then_some((len as u32 - 1, 7)),
        }
    }

    #[test]
    fn blocks_read_back_as_pushed_and_search_by_key_and_lsn() {
        let keys: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"a".to_vec(),
            b"bb".to_vec(),
            b"c".repeat(300),
        ];
        let pushed = [
            handle(&keys[0], 3, 64, 4032, false),
            handle(&keys[1], 9, 4096, 4096, true),
            handle(&keys[2], 1, 8192, 5000, false),
            handle(&keys[3], 2, 13192, 100, true),
        ];
        let mut index = BlockIndex::with_capacity(1, 1, 0, 100);
        assert!(index.is_empty() && index.get(0).is_none() && index.last().is_none());
        for h in pushed {
            index.push(h);
        }
        index.shrink_to_fit();
        assert_eq!(index.len(), 4);
        assert_eq!(index.iter().collect::<Vec<_>>(), pushed);
        assert_eq!(index.last(), Some(pushed[3]));
        assert_eq!(index.get(4), None);
        assert_eq!(index.first_entry(2), Some((&b"bb"[..], 1)));
        assert_eq!(index.first_entry(4), None);
        // (key, lsn) order: the last block starting at or below a point.
        let at = |key: &[u8], lsn: Lsn| index.partition_point(0..4, |k, l| (k, l) <= (key, lsn));
        assert_eq!(at(b"a", 2), 0);
        assert_eq!(at(b"a", 3), 1);
        assert_eq!(at(b"a", 100), 2);
        assert_eq!(at(b"b", 0), 2);
        assert_eq!(at(b"zz", 0), 4);
        assert_eq!(index.partition_point(1..3, |k, _| k < b"bb".as_slice()), 2);
        // A key, a u32, an LSN and an offset per block, the value blocks'
        // three u32s, one more offset.
        assert_eq!(
            index.memory_bytes(),
            (1 + 1 + 2 + 300) + 4 * (4 + 8 + 8) + 8 + 2 * 12
        );
    }
}
