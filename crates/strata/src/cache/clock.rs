//! The block cache's table: one shard of blocks by (file id, offset), kept
//! within a byte budget by CLOCK (second-chance) eviction.
//!
//! Why not a general cache crate: a get that hits costs the cold cache
//! lines it touches, and a get runs right after a device read, when the
//! CPU's caches hold little of the engine. `quick_cache` (which this
//! replaced) touches five lines for a hit: the shard's lock, the hash
//! table's control bytes, its bucket, the entry it names, and the block's
//! count; measured 1.1 to 1.5 µs for a hit and 0.25 to 0.36 µs for a miss
//! on a full 64 MiB cache. Here a slot of the table holds the key, the
//! block and its reference bit together, so a hit touches the lock, one
//! slot (two where a probe crosses a line) and the block's count.
//!
//! Invariants (each shard, under its lock): the table is open addressing
//! with linear probing, its length a power of two, at most half full; a
//! key is at most once in it; no empty slot lies between a key's home
//! slot and the slot holding it (deletion shifts the run after it back);
//! `bytes` is the sum of the weights of the blocks held.

use super::Block;
use std::sync::Arc;

/// One slot of the table: empty when `block` is `None`.
#[derive(Default)]
struct Slot {
    file: u64,
    offset: u64,
    block: Option<Block>,
    /// Set by a hit, cleared by the clock hand passing: a block passed
    /// twice without a hit between is evicted.
    referenced: bool,
}

/// One shard: a table within `capacity` bytes.
pub(super) struct Shard {
    slots: Vec<Slot>,
    /// Slots holding a block.
    len: usize,
    /// Sum of the weights of the blocks held.
    bytes: u64,
    capacity: u64,
    /// Where the clock hand stands.
    hand: usize,
}

/// The weight of a block: its bytes and what its slot costs.
pub(super) fn weight(block: &Block) -> u64 {
    block.len() as u64 + super::ENTRY_OVERHEAD_BYTES
}

/// The hash of a key (splitmix64's finalizer over file and offset): its
/// low bits pick a slot, its high bits a shard.
pub(super) fn hash(file: u64, offset: u64) -> u64 {
    let mut h = (file ^ offset.rotate_left(32)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// Slots a shard starts with.
const SLOTS_MIN: usize = 16;
/// A shard this close to its budget evicts on the next insert of a
/// block (of up to this many bytes): `Shard::ready_victim` applies.
const FULL_MARGIN_BYTES: u64 = 64 << 10;

impl Shard {
    pub(super) fn new(capacity: u64) -> Shard {
        Shard {
            slots: std::iter::repeat_with(Slot::default)
                .take(SLOTS_MIN)
                .collect(),
            len: 0,
            bytes: 0,
            capacity,
            hand: 0,
        }
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding the key, or the empty slot ending its probe.
    fn find(&self, h: u64, file: u64, offset: u64) -> (usize, bool) {
        let mask = self.mask();
        let mut i = h as usize & mask;
        loop {
            let s = &self.slots[i];
            match &s.block {
                None => return (i, false),
                Some(_) if s.file == file && s.offset == offset => return (i, true),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The block of the key, marked as used.
    pub(super) fn get(&mut self, h: u64, file: u64, offset: u64) -> Option<Block> {
        let (i, found) = self.find(h, file, offset);
        if !found {
            self.ready_victim();
            return None;
        }
        let s = &mut self.slots[i];
        s.referenced = true;
        s.block.clone()
    }

    /// Keeps `block` under the key (replacing the one there), evicting
    /// blocks until the shard is within its budget; the blocks it let go
    /// are handed to `evicted` (to be dropped or reused once the lock is
    /// let go). A block heavier than the whole budget is not kept.
    pub(super) fn insert(
        &mut self,
        h: u64,
        file: u64,
        offset: u64,
        block: Block,
        evicted: &mut Vec<Block>,
    ) {
        let w = weight(&block);
        if w > self.capacity {
            evicted.extend(self.remove(h, file, offset));
            evicted.push(block);
            return;
        }
        let (i, found) = self.find(h, file, offset);
        if found {
            let s = &mut self.slots[i];
            let old = s.block.replace(block).expect("a found slot holds a block");
            self.bytes = self.bytes - weight(&old) + w;
            evicted.push(old);
        } else {
            self.slots[i] = Slot {
                file,
                offset,
                block: Some(block),
                referenced: false,
            };
            self.len += 1;
            self.bytes += w;
        }
        // The new block is not a candidate in its own insert.
        while self.bytes > self.capacity && self.len > 1 {
            self.evict_one(file, offset, evicted);
        }
        if self.len * 2 > self.slots.len() {
            self.grow();
        }
    }

    /// After a miss, which the block's read and insert follow: when the
    /// shard is about full, moves the hand to the block the insert will
    /// evict and starts loading the line of its count, which the insert
    /// reads to tell whether the block can be reused (`Arc::get_mut`).
    /// That line is the cache's least used, so it is cold; this way it
    /// loads during the device read.
    fn ready_victim(&mut self) {
        if self.len == 0 || self.bytes + FULL_MARGIN_BYTES < self.capacity {
            return;
        }
        let i = self.hand_to_victim(None);
        if let Some(block) = &self.slots[i].block {
            // A hint only: an `Arc`'s counts lie just before its bytes.
            crate::prefetch::read(Arc::as_ptr(block).cast::<u8>().wrapping_sub(16));
        }
    }

    /// Evicts the next block passed twice without a hit, not the key just
    /// inserted.
    fn evict_one(&mut self, file: u64, offset: u64, evicted: &mut Vec<Block>) {
        let i = self.hand_to_victim(Some((file, offset)));
        // The run after `i` moves back one slot: the hand looks at `i`
        // again.
        evicted.push(self.take(i));
    }

    /// Moves the hand to the next block passed twice without a hit (other
    /// than `spared`'s), clearing the hit bits it passes; returns its slot.
    /// The shard holds a block other than `spared`'s.
    fn hand_to_victim(&mut self, spared: Option<(u64, u64)>) -> usize {
        let mask = self.mask();
        loop {
            let i = self.hand;
            let s = &mut self.slots[i];
            if s.block.is_some() && spared != Some((s.file, s.offset)) {
                if !s.referenced {
                    return i;
                }
                s.referenced = false;
            }
            self.hand = (i + 1) & mask;
        }
    }

    /// Drops the block of the key, if held; hands it back.
    pub(super) fn remove(&mut self, h: u64, file: u64, offset: u64) -> Option<Block> {
        let (i, found) = self.find(h, file, offset);
        found.then(|| self.take(i))
    }

    /// Empties slot `i` (holding a block) and shifts back the run after
    /// it, so that no probe meets a gap before its key.
    fn take(&mut self, i: usize) -> Block {
        let mask = self.mask();
        let slot = std::mem::take(&mut self.slots[i]);
        let block = slot.block.expect("a taken slot holds a block");
        self.len -= 1;
        self.bytes -= weight(&block);
        let mut gap = i;
        let mut j = (i + 1) & mask;
        while self.slots[j].block.is_some() {
            let home = hash(self.slots[j].file, self.slots[j].offset) as usize & mask;
            // The slot at j may move to the gap when its home is not in
            // (gap, j] (cyclically): its probe passes the gap.
            let passes_gap = if gap <= j {
                home <= gap || home > j
            } else {
                home <= gap && home > j
            };
            if passes_gap {
                self.slots[gap] = std::mem::take(&mut self.slots[j]);
                gap = j;
            }
            j = (j + 1) & mask;
        }
        block
    }

    /// Doubles the table, every key at its new home. Out of line: rare,
    /// and an insert's code stays small.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let n = old.len() * 2;
        self.slots = std::iter::repeat_with(Slot::default).take(n).collect();
        let mask = n - 1;
        for slot in old.into_iter().filter(|s| s.block.is_some()) {
            let mut i = hash(slot.file, slot.offset) as usize & mask;
            while self.slots[i].block.is_some() {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
        self.hand &= mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn block(byte: u8, len: usize) -> Block {
        Block::from(vec![byte; len])
    }

    /// A block that names its key and its insert (`id`).
    fn tagged(file: u64, offset: u64, id: u32, len: usize) -> Block {
        let mut bytes = vec![0u8; len];
        bytes[..8].copy_from_slice(&file.to_le_bytes());
        bytes[8..16].copy_from_slice(&offset.to_le_bytes());
        bytes[16..20].copy_from_slice(&id.to_le_bytes());
        Block::from(bytes)
    }

    fn tag(b: &Block) -> ((u64, u64), u32) {
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap());
        let id = u32::from_le_bytes(b[16..20].try_into().unwrap());
        ((u(0..8), u(8..16)), id)
    }

    /// The shard holds exactly the model's blocks, each found by its key,
    /// and its bookkeeping adds up.
    fn check(shard: &mut Shard, model: &HashMap<(u64, u64), u32>) {
        let mut bytes = 0;
        for s in shard.slots.iter().filter_map(|s| s.block.as_ref()) {
            bytes += weight(s);
        }
        assert_eq!((shard.len, shard.bytes), (model.len(), bytes));
        assert!(shard.bytes <= shard.capacity || shard.len <= 1);
        assert!(shard.len * 2 <= shard.slots.len());
        for (&(file, offset), &id) in model {
            let found = shard.get(hash(file, offset), file, offset);
            assert_eq!(found.map(|b| tag(&b)), Some(((file, offset), id)));
        }
    }

    #[test]
    fn random_inserts_removes_and_gets_keep_the_table_sound() {
        // Keys in a small space so that inserts replace and removes hit;
        // the budget forces evictions; sizes vary. The model follows what
        // the shard hands back, so a key the table loses is caught.
        let mut shard = Shard::new(40 * 1024);
        let mut model: HashMap<(u64, u64), u32> = HashMap::new();
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut evicted = Vec::new();
        let (mut evictions, mut removed, mut hits) = (0, 0, 0);
        for step in 0..50_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (file, offset) = (x % 5, (x >> 8) % 64 * 4096);
            let h = hash(file, offset);
            match x >> 60 {
                0..=9 => {
                    let len = [100, 1000, 4096, 9000][(x >> 20) as usize % 4];
                    shard.insert(
                        h,
                        file,
                        offset,
                        tagged(file, offset, step, len),
                        &mut evicted,
                    );
                    model.insert((file, offset), step);
                }
                10..=12 => {
                    let got = shard.remove(h, file, offset);
                    let had = model.remove(&(file, offset));
                    removed += usize::from(had.is_some());
                    assert_eq!(got.map(|b| tag(&b).1), had, "remove of a held key");
                }
                _ => {
                    let got = shard.get(h, file, offset);
                    assert_eq!(got.map(|b| tag(&b).1).as_ref(), model.get(&(file, offset)));
                    hits += usize::from(model.contains_key(&(file, offset)));
                }
            }
            for b in evicted.drain(..) {
                let (key, id) = tag(&b);
                if model.get(&key) == Some(&id) {
                    model.remove(&key);
                    evictions += 1;
                }
            }
            if step % 100 == 0 {
                check(&mut shard, &model);
            }
        }
        check(&mut shard, &model);
        // Each path ran many times.
        assert!(
            evictions > 1000 && removed > 100 && hits > 100,
            "{evictions} {removed} {hits}"
        );
    }

    /// A shard with room for 4 blocks of 1000 bytes, full: keys (1, 0..4),
    /// each block filled with its key's number.
    fn four_blocks_shard() -> (Shard, Vec<Block>) {
        let mut shard = Shard::new(4 * weight(&block(0, 1000)));
        let mut evicted = Vec::new();
        for k in 0..4u64 {
            shard.insert(hash(1, k), 1, k, block(k as u8, 1000), &mut evicted);
        }
        (shard, evicted)
    }

    #[test]
    fn a_miss_on_a_full_shard_readies_the_block_its_insert_evicts() {
        // Block 0 is hit, so it stays.
        let (mut shard, mut evicted) = four_blocks_shard();
        assert!(shard.get(hash(1, 0), 1, 0).is_some());
        for k in 4..20u64 {
            assert!(shard.get(hash(1, k), 1, k).is_none());
            let s = &shard.slots[shard.hand];
            assert!(!s.referenced, "the hand stands at a block not hit");
            let readied = s.block.as_ref().expect("the hand stands at a block")[0];
            assert_ne!(readied, 0, "the hit block is readied");
            shard.insert(hash(1, k), 1, k, block(k as u8, 1000), &mut evicted);
            assert_eq!(evicted.len(), 1);
            assert_eq!(evicted.pop().unwrap()[0], readied);
            assert!(shard.get(hash(1, 0), 1, 0).is_some(), "the hit block stays");
        }
    }

    #[test]
    fn blocks_hit_since_the_hand_passed_stay_and_the_others_go() {
        let (mut shard, mut evicted) = four_blocks_shard();
        assert!(evicted.is_empty());
        // Block 2 is used again and again; every other block once.
        for k in 4..40u64 {
            assert!(
                shard.get(hash(1, 2), 1, 2).is_some(),
                "the hot block at {k}"
            );
            shard.insert(hash(1, k), 1, k, block(k as u8, 1000), &mut evicted);
            assert_eq!(shard.len, 4);
        }
        assert_eq!(evicted.len(), 36);
        assert!(
            evicted.iter().all(|b| b[0] != 2),
            "the hot block was evicted"
        );
        // A block heavier than the budget is handed back, not kept.
        evicted.clear();
        shard.insert(hash(2, 0), 2, 0, block(9, 5000), &mut evicted);
        assert_eq!((evicted.len(), shard.len), (1, 4));
        assert!(shard.get(hash(2, 0), 2, 0).is_none());
    }
}
