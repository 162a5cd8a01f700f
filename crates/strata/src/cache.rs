//! The block cache: verified data blocks of layer files, and pages of
//! in-memory layers' logs, kept in memory by (file id, offset), weighted by
//! their bytes, within `Options::block_cache_bytes`.
//!
//! strata reads layer files with O_DIRECT, so this is the only cache a
//! block read can hit. Only blocks that passed their checksum are inserted,
//! and a cached block is checked again when it is used (a crc32c of 4 KiB
//! costs far less than the device read it saves); one that fails is dropped
//! and read from the file (the layer reader's read-again policy). A log page has no
//! checksum of its own: what is read out of it (an entry) is checked on
//! every use, and a page that fails is dropped. Keys stay unique for the
//! life of the cache: within one open, file ids only grow; an id a crashed
//! job used may come back after a reopen, but by then the cache is new.
//!
//! Built on `quick_cache` (S3-FIFO eviction: a scan's one-off blocks do not
//! push out the blocks gets keep coming back to).

use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes counted per entry beyond its block (key, pointer, bookkeeping).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

#[derive(Clone)]
struct BlockWeight;

impl Weighter<(u64, u64), Block> for BlockWeight {
    fn weight(&self, _key: &(u64, u64), block: &Block) -> u64 {
        block.len() as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// A verified block, shared by the cache and the reads using it (no copy).
pub(crate) type Block = Arc<[u8]>;

/// Verified blocks by (file id, offset).
pub(crate) struct BlockCache {
    blocks: Cache<(u64, u64), Block, BlockWeight>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (bytes, hits, misses) = self.stats();
        write!(
            f,
            "BlockCache {{ bytes: {bytes}, hits: {hits}, misses: {misses} }}"
        )
    }
}

impl BlockCache {
    /// A cache of `bytes`; `None` for 0 (no cache).
    pub(crate) fn new(bytes: u64) -> Option<Arc<BlockCache>> {
        (bytes > 0).then(|| {
            let items = (bytes / (4096 + ENTRY_OVERHEAD_BYTES)).max(16) as usize;
            Arc::new(BlockCache {
                blocks: Cache::with_weighter(items, bytes, BlockWeight),
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
            })
        })
    }

    /// The block of `file` at `offset`, if cached (counted as a hit or miss).
    pub(crate) fn get(&self, file: u64, offset: u64) -> Option<Block> {
        let found = self.blocks.get(&(file, offset));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches a block that passed its checksum.
    pub(crate) fn insert(&self, file: u64, offset: u64, block: Block) {
        self.blocks.insert((file, offset), block);
    }

    /// Drops the block of `file` at `offset`, if cached.
    pub(crate) fn remove(&self, file: u64, offset: u64) {
        self.blocks.remove(&(file, offset));
    }

    /// (bytes held, hits, misses).
    pub(crate) fn stats(&self) -> (u64, u64, u64) {
        (
            self.blocks.weight(),
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_kept_within_the_budget_and_counted() {
        assert!(BlockCache::new(0).is_none());
        let cache = BlockCache::new(64 << 10).unwrap();
        assert!(cache.get(1, 0).is_none());
        cache.insert(1, 0, Block::from(vec![7; 4096]));
        assert_eq!(cache.get(1, 0).as_deref(), Some(&[7u8; 4096][..]));
        assert!(cache.get(2, 0).is_none(), "another file's block");
        for i in 0..100 {
            cache.insert(3, i * 4096, Block::from(vec![i as u8; 4096]));
        }
        let (bytes, hits, misses) = cache.stats();
        assert!(bytes <= 64 << 10, "{bytes}");
        assert_eq!((hits, misses), (1, 2));
    }
}
