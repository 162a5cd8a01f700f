//! The delta layer file: every version of the keys of a key range × LSN range,
//! sorted by (key, lsn), as written by a flush of a frozen in-memory layer (L0)
//! or by compaction (L1).
//!
//! This module owns the on-disk format (the constants below, documented byte
//! for byte in `docs/format.md`, section "Delta layer file"); [`writer`] builds
//! a file and [`reader`] opens, verifies and queries one.
//!
//! File layout, in order, with no gaps (a reader checks that every section
//! starts where the previous one ends, so no byte escapes a checksum):
//!
//! ```text
//! header (HEADER_BYTES) | data block 0 | … | data block n-1 | block index | bloom filter | key range | footer
//! ```
//!
//! Invariants the writer establishes and the reader checks:
//! - entries are in strictly ascending (key, lsn) order, across blocks too;
//! - every key is `1..=KEY_BYTES_MAX` bytes, every value `0..=VALUE_BYTES_MAX`,
//!   a `Delete` has an empty value;
//! - a data block holds at least one entry; it exceeds the writer's target
//!   size only when it holds a single entry larger than the target, or
//!   spans two aligned pages;
//! - (version 3) with an aligned target, a put whose value alone needs fewer
//!   pages than its entry in a block is a *value block*: the value from a
//!   page boundary, zero-padded to the next, its key, LSN, length and
//!   crc32c in the block index, so a 4 KiB value is one 4 KiB read; the
//!   block before it is padded to that boundary;
//! - with a target that is a multiple of `BLOCK_ALIGN_BYTES` (the default
//!   4 KiB), a block of small entries never crosses a page boundary, and
//!   ends on one (padded with zeros) unless the boundary is more than
//!   `BLOCK_PAD_BYTES_MAX` away; a block of mid-size entries (~1 KiB) that
//!   would waste more than an eighth of its page spans two instead, and is
//!   not padded: the next starts where it ends, and also spans at most two
//!   pages (the page it starts in and the next);
//! - (version 6) entry 0, `RESTART_INTERVAL`, 2 × `RESTART_INTERVAL`, … of
//!   a block shares no key bytes with the one before, and the block's
//!   payload ends with the offsets of those restart points (all but the
//!   first) and their count;
//! - every byte is covered by a crc32c: the header and the footer by their own,
//!   each data block by its own (seeded with the block's file offset, so a
//!   block read from the wrong place fails), the block index, the bloom filter
//!   and the key range by checksums kept in the footer.
//!
//! All integers are fixed-width little-endian; file offsets and section
//! lengths are `u64`, lengths inside a block are `u16`/`u32` bounded by the
//! `_MAX` constants.

pub(crate) mod block_index;
pub(crate) mod reader;
pub(crate) mod writer;

#[cfg(test)]
mod tests;

use std::path::Path;

use crate::error::{Corruption, Result};
use crate::types::{Lsn, ValueKind, KEY_BYTES_MAX};

/// Where a layer writer's bytes go: appended in order. The engine implements
/// it over its direct-I/O `BufferedWriter`.
pub(crate) trait LayerSink {
    fn append(&mut self, bytes: &[u8]) -> Result<()>;
}

/// Positional reads of a finished layer file. The engine implements it over
/// its io layer (which handles O_DIRECT alignment itself).
///
/// `read_at` returns exactly `len` bytes or an error; `file_len` is the exact
/// length the writer produced (not padded to the direct-I/O alignment).
/// `read_verified` is the storage's policy for bytes that fail their check
/// (`io::read_verified`): the reader runs every read and its checks through
/// it.
pub(crate) trait ReadAt {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// [`Self::read_at`] into a shared buffer, as the block cache keeps
    /// it: `frame` (memory the cache gives back, see
    /// `BlockCache::frame`) where the file can read into it.
    fn read_shared(
        &self,
        offset: u64,
        len: usize,
        frame: Option<std::sync::Arc<[u8]>>,
    ) -> Result<std::sync::Arc<[u8]>> {
        let _ = frame;
        self.read_at(offset, len).map(Into::into)
    }
    fn file_len(&self) -> u64;
    fn path(&self) -> &Path;
    /// Runs `attempt` (reads of the `len` bytes at `offset`, 0: to the end,
    /// and their checks) and, after a corruption error, once more; the
    /// second result stands. By default with nothing to forget or count
    /// between the two (`io::again_on_corruption`); a storage file's
    /// (`LayerFile`) is `io::read_verified`.
    fn read_verified<T>(
        &self,
        offset: u64,
        len: u64,
        attempt: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let _ = (offset, len);
        crate::io::again_on_corruption(attempt, || {})
    }
}

impl<T: ReadAt + ?Sized> ReadAt for std::sync::Arc<T> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        (**self).read_at(offset, len)
    }
    fn read_shared(
        &self,
        offset: u64,
        len: usize,
        frame: Option<std::sync::Arc<[u8]>>,
    ) -> Result<std::sync::Arc<[u8]>> {
        (**self).read_shared(offset, len, frame)
    }
    fn read_verified<U>(
        &self,
        offset: u64,
        len: u64,
        attempt: impl FnMut() -> Result<U>,
    ) -> Result<U> {
        (**self).read_verified(offset, len, attempt)
    }
    fn file_len(&self) -> u64 {
        (**self).file_len()
    }
    fn path(&self) -> &Path {
        (**self).path()
    }
}

/// What a delta layer holds, from the writer's `finish` or the reader's footer.
///
/// For a layer without entries, `key_min` and `key_max` are empty and the LSNs
/// are 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeltaLayerSummary {
    /// The smallest key in the layer.
    pub(crate) key_min: Vec<u8>,
    /// The largest key in the layer (inclusive).
    pub(crate) key_max: Vec<u8>,
    /// The smallest LSN of any entry.
    pub(crate) lsn_min: Lsn,
    /// The largest LSN of any entry (inclusive).
    pub(crate) lsn_max: Lsn,
    /// Entries (versions, tombstones included).
    pub(crate) entries: u64,
    /// Distinct keys.
    pub(crate) distinct_keys: u64,
    /// Data blocks.
    pub(crate) blocks: u64,
    /// Exact length of the file in bytes.
    pub(crate) file_bytes: u64,
}

// ---------------------------------------------------------------------------
// Limits.

/// The format version this build writes and the newest it reads.
/// Version 2 pads data blocks to the page (see `BLOCK_ALIGN_BYTES`);
/// version 3 adds value blocks (see `INDEX_VALUE_BLOCK_FLAG`); version 4
/// blocks the bloom filter (every probe of a key in one cache line, see
/// `bloom::BloomLayout`); version 5 adds entries of kind 3, a pointer to a
/// value in a value file (`value::ValuePointer`, `POINTER_BYTES` long);
/// version 6 ends every data block with its restart points
/// (`RESTART_INTERVAL`). Versions 2 to 5 read as they are.
pub(crate) const DELTA_FORMAT_VERSION: u32 = 6;
/// The first format version whose data blocks end with restart points.
pub(crate) const RESTARTS_FORMAT_VERSION: u32 = 6;
/// The oldest format version a reader opens.
pub(crate) const DELTA_FORMAT_VERSION_MIN: u32 = 2;
/// Largest value the format holds (the engine's `Options` limit must not exceed it).
pub(crate) const VALUE_BYTES_MAX: usize = crate::types::VALUE_BYTES_MAX_LIMIT;
/// Smallest data-block target size a writer accepts (tests use it to get many blocks).
pub(crate) const BLOCK_BYTES_TARGET_MIN: usize = 64;
/// Largest data-block target size a writer accepts.
pub(crate) const BLOCK_BYTES_TARGET_MAX: usize = 16 << 20;
/// The page data blocks are aligned to when the block target is a multiple
/// of it: a block is closed before it would cross the next page boundary and
/// padded with zeros to that boundary, so that a point read of a block is
/// one aligned page read (an unaligned 4 KiB block spans two pages: an 8 KiB
/// device read, about 5 µs more on this project's disk).
pub(crate) const BLOCK_ALIGN_BYTES: usize = 4096;
/// Most zero bytes after a block's payload: a block is padded only when the
/// page boundary is this close, so padding costs at most a quarter page.
pub(crate) const BLOCK_PAD_BYTES_MAX: usize = BLOCK_ALIGN_BYTES / 4;
/// Most data blocks in one file.
pub(crate) const BLOCK_COUNT_MAX: u64 = u32::MAX as u64;
/// Largest footer any version may write; the reader refuses to read more.
pub(crate) const FOOTER_BYTES_MAX: usize = 4096;

// ---------------------------------------------------------------------------
// Header: the first HEADER_BYTES of the file.

pub(crate) const HEADER_MAGIC: [u8; 8] = *b"STRDELTA";
pub(crate) const HEADER_MAGIC_OFFSET: usize = 0;
pub(crate) const HEADER_VERSION_OFFSET: usize = HEADER_MAGIC_OFFSET + 8;
pub(crate) const HEADER_FLAGS_OFFSET: usize = HEADER_VERSION_OFFSET + 4;
pub(crate) const HEADER_BLOCK_BYTES_TARGET_OFFSET: usize = HEADER_FLAGS_OFFSET + 4;
/// crc32c of header bytes `0..HEADER_CRC_OFFSET`.
pub(crate) const HEADER_CRC_OFFSET: usize = HEADER_BLOCK_BYTES_TARGET_OFFSET + 4;
pub(crate) const HEADER_BYTES: usize = HEADER_CRC_OFFSET + 4;

// ---------------------------------------------------------------------------
// Data block: a block header, then `entry_count` entries and (format version
// 6) the restart array (the payload), then up to BLOCK_PAD_BYTES_MAX zero
// bytes (format version 2). The block's length in the index includes the
// padding, and so does its crc.

pub(crate) const BLOCK_PAYLOAD_LEN_OFFSET: usize = 0;
pub(crate) const BLOCK_ENTRY_COUNT_OFFSET: usize = BLOCK_PAYLOAD_LEN_OFFSET + 4;
/// crc32c of (the block's file offset as u64 LE ‖ block bytes `0..BLOCK_CRC_OFFSET` ‖ payload ‖ padding).
pub(crate) const BLOCK_CRC_OFFSET: usize = BLOCK_ENTRY_COUNT_OFFSET + 4;
pub(crate) const BLOCK_HEADER_BYTES: usize = BLOCK_CRC_OFFSET + 4;

// Entry, inside a block payload: header, key suffix, value. The key is the
// first `shared` bytes of the previous entry's key followed by the suffix; the
// first entry of a block has `shared` = 0.
pub(crate) const ENTRY_SHARED_LEN_OFFSET: usize = 0;
pub(crate) const ENTRY_SUFFIX_LEN_OFFSET: usize = ENTRY_SHARED_LEN_OFFSET + 2;
pub(crate) const ENTRY_LSN_OFFSET: usize = ENTRY_SUFFIX_LEN_OFFSET + 2;
pub(crate) const ENTRY_KIND_OFFSET: usize = ENTRY_LSN_OFFSET + 8;
pub(crate) const ENTRY_VALUE_LEN_OFFSET: usize = ENTRY_KIND_OFFSET + 1;
pub(crate) const ENTRY_HEADER_BYTES: usize = ENTRY_VALUE_LEN_OFFSET + 4;

// Restart points (format version 6): entry number 0, RESTART_INTERVAL,
// 2 × RESTART_INTERVAL, … of a block has `shared` = 0, and the payload ends
// with the block offsets (from the block's first byte, u32) of every restart
// point but the first (which is the first entry), then their count (u32). A
// point search binary-searches the restart points' keys and walks at most
// RESTART_INTERVAL entries from one; a walk over every entry checks that each
// restart point is where the array says.

/// Entries from one restart point to the next: the most a point search
/// walks. 16 (RocksDB's default): a block of ~50 small pointer entries has
/// 4, so a search decodes about 2 restart keys and 8 entries instead of
/// about 25, for 4 bytes a restart and 16 keys in 1 not prefix-compressed.
pub(crate) const RESTART_INTERVAL: u32 = 16;
/// Size of one restart offset in a block's restart array.
pub(crate) const RESTART_OFFSET_BYTES: usize = 4;
/// Size of the restart count that ends a block's payload.
pub(crate) const RESTART_COUNT_BYTES: usize = 4;

/// Bytes of the restart array at the end of a version-6 block of `entries`
/// entries: an offset for every restart point after the first, and the
/// count.
pub(crate) const fn restart_array_bytes(entries: u32) -> usize {
    restarts_after_first(entries) as usize * RESTART_OFFSET_BYTES + RESTART_COUNT_BYTES
}

/// Restart points after the first in a block of `entries` entries.
pub(crate) const fn restarts_after_first(entries: u32) -> u32 {
    entries.saturating_sub(1) / RESTART_INTERVAL
}

/// Largest encoded entry.
pub(crate) const ENTRY_BYTES_MAX: usize = ENTRY_HEADER_BYTES + KEY_BYTES_MAX + VALUE_BYTES_MAX;
/// Largest block payload: a full target, or one entry of the largest size,
/// with its restart array.
pub(crate) const BLOCK_PAYLOAD_BYTES_MAX: usize = if ENTRY_BYTES_MAX > BLOCK_BYTES_TARGET_MAX {
    ENTRY_BYTES_MAX + RESTART_COUNT_BYTES
} else {
    BLOCK_BYTES_TARGET_MAX + RESTART_COUNT_BYTES
};
/// Most zero bytes after the payload of a block that a value block follows:
/// it is padded to the page boundary, wherever that is, so the value block
/// starts on one.
pub(crate) const BLOCK_PAD_BEFORE_VALUE_BLOCK_MAX: usize = BLOCK_ALIGN_BYTES - 1;
/// Largest block, header and padding included.
pub(crate) const BLOCK_BYTES_MAX: usize =
    BLOCK_HEADER_BYTES + BLOCK_PAYLOAD_BYTES_MAX + BLOCK_PAD_BEFORE_VALUE_BLOCK_MAX;
/// Smallest block: a header and one entry with a one-byte key and an empty value.
pub(crate) const BLOCK_BYTES_MIN: usize = BLOCK_HEADER_BYTES + ENTRY_HEADER_BYTES + 1;
/// Most entries in one block (every entry takes at least its header).
pub(crate) const BLOCK_ENTRIES_MAX: usize = BLOCK_PAYLOAD_BYTES_MAX / ENTRY_HEADER_BYTES;

// ---------------------------------------------------------------------------
// Block index: one entry per data block, in block order.

pub(crate) const INDEX_BLOCK_OFFSET_OFFSET: usize = 0;
pub(crate) const INDEX_BLOCK_LEN_OFFSET: usize = INDEX_BLOCK_OFFSET_OFFSET + 8;
pub(crate) const INDEX_FIRST_LSN_OFFSET: usize = INDEX_BLOCK_LEN_OFFSET + 8;
pub(crate) const INDEX_FIRST_KEY_LEN_OFFSET: usize = INDEX_FIRST_LSN_OFFSET + 8;
/// Bytes of an index entry before its first key.
pub(crate) const INDEX_ENTRY_HEADER_BYTES: usize = INDEX_FIRST_KEY_LEN_OFFSET + 2;
/// Set in an index entry's first-key length (version 3) for a **value
/// block**: one put's value alone, from a page boundary, zero-padded to the
/// next one, so that a 4 KiB value is one aligned 4 KiB read. Its key is the
/// entry's first key, its LSN the first LSN; after the key come
/// `value length u32 | crc32c u32` (`INDEX_VALUE_BLOCK_TAIL_BYTES`), the crc
/// over the block's offset, LSN, key and bytes ([`value_block_crc`]).
pub(crate) const INDEX_VALUE_BLOCK_FLAG: u16 = 0x8000;
pub(crate) const INDEX_VALUE_BLOCK_TAIL_BYTES: usize = 8;
const _: () = assert!(KEY_BYTES_MAX < INDEX_VALUE_BLOCK_FLAG as usize);

// ---------------------------------------------------------------------------
// Key range section: key_min and key_max.

pub(crate) const KEYS_MIN_LEN_OFFSET: usize = 0;
pub(crate) const KEYS_MAX_LEN_OFFSET: usize = KEYS_MIN_LEN_OFFSET + 2;
/// Bytes before key_min; key_max follows key_min.
pub(crate) const KEYS_HEADER_BYTES: usize = KEYS_MAX_LEN_OFFSET + 2;

// ---------------------------------------------------------------------------
// Footer: the last FOOTER_BYTES of the file. Its last FOOTER_TAIL_BYTES
// (length, version, magic, crc) keep their layout in every future version, so
// that any reader can verify the footer and then refuse a newer version.

pub(crate) const FOOTER_MAGIC: [u8; 8] = *b"STRDLEND";
pub(crate) const FOOTER_ENTRY_COUNT_OFFSET: usize = 0;
pub(crate) const FOOTER_DISTINCT_KEYS_OFFSET: usize = FOOTER_ENTRY_COUNT_OFFSET + 8;
pub(crate) const FOOTER_BLOCK_COUNT_OFFSET: usize = FOOTER_DISTINCT_KEYS_OFFSET + 8;
pub(crate) const FOOTER_LSN_MIN_OFFSET: usize = FOOTER_BLOCK_COUNT_OFFSET + 8;
pub(crate) const FOOTER_LSN_MAX_OFFSET: usize = FOOTER_LSN_MIN_OFFSET + 8;
pub(crate) const FOOTER_INDEX_OFFSET_OFFSET: usize = FOOTER_LSN_MAX_OFFSET + 8;
pub(crate) const FOOTER_INDEX_LEN_OFFSET: usize = FOOTER_INDEX_OFFSET_OFFSET + 8;
pub(crate) const FOOTER_BLOOM_OFFSET_OFFSET: usize = FOOTER_INDEX_LEN_OFFSET + 8;
pub(crate) const FOOTER_BLOOM_LEN_OFFSET: usize = FOOTER_BLOOM_OFFSET_OFFSET + 8;
pub(crate) const FOOTER_KEYS_OFFSET_OFFSET: usize = FOOTER_BLOOM_LEN_OFFSET + 8;
pub(crate) const FOOTER_KEYS_LEN_OFFSET: usize = FOOTER_KEYS_OFFSET_OFFSET + 8;
pub(crate) const FOOTER_INDEX_CRC_OFFSET: usize = FOOTER_KEYS_LEN_OFFSET + 8;
pub(crate) const FOOTER_BLOOM_CRC_OFFSET: usize = FOOTER_INDEX_CRC_OFFSET + 4;
pub(crate) const FOOTER_KEYS_CRC_OFFSET: usize = FOOTER_BLOOM_CRC_OFFSET + 4;
pub(crate) const FOOTER_FLAGS_OFFSET: usize = FOOTER_KEYS_CRC_OFFSET + 4;
/// Start of the version-independent tail.
pub(crate) const FOOTER_LEN_OFFSET: usize = FOOTER_FLAGS_OFFSET + 4;
pub(crate) const FOOTER_VERSION_OFFSET: usize = FOOTER_LEN_OFFSET + 4;
pub(crate) const FOOTER_MAGIC_OFFSET: usize = FOOTER_VERSION_OFFSET + 4;
/// crc32c of footer bytes `0..FOOTER_CRC_OFFSET`.
pub(crate) const FOOTER_CRC_OFFSET: usize = FOOTER_MAGIC_OFFSET + 8;
pub(crate) const FOOTER_BYTES: usize = FOOTER_CRC_OFFSET + 4;
/// The version-independent tail: footer length, version, magic, crc.
pub(crate) const FOOTER_TAIL_BYTES: usize = FOOTER_BYTES - FOOTER_LEN_OFFSET;

/// Shortest file a reader looks into: a header and a footer tail.
pub(crate) const FILE_BYTES_MIN: usize = HEADER_BYTES + FOOTER_TAIL_BYTES;

const _: () = assert!(HEADER_BYTES == 24);
const _: () = assert!(BLOCK_HEADER_BYTES == 12);
const _: () = assert!(ENTRY_HEADER_BYTES == 17);
const _: () = assert!(INDEX_ENTRY_HEADER_BYTES == 26);
const _: () = assert!(FOOTER_BYTES == 124 && FOOTER_TAIL_BYTES == 20);
const _: () = assert!(FOOTER_BYTES <= FOOTER_BYTES_MAX);
const _: () = assert!(
    KEY_BYTES_MAX <= u16::MAX as usize,
    "key lengths are u16 on disk"
);
const _: () = assert!(
    BLOCK_PAYLOAD_BYTES_MAX <= u32::MAX as usize,
    "payload lengths are u32 on disk"
);
const _: () = assert!(
    BLOCK_ENTRIES_MAX <= u32::MAX as usize,
    "entry counts are u32 on disk"
);
const _: () = assert!(
    VALUE_BYTES_MAX <= u32::MAX as usize,
    "value lengths are u32 on disk"
);
const _: () = assert!(BLOCK_BYTES_TARGET_MIN > ENTRY_HEADER_BYTES);
const _: () = assert!(
    BLOCK_BYTES_TARGET_MAX <= u32::MAX as usize,
    "the target is u32 in the header"
);

// ---------------------------------------------------------------------------
// Little helpers shared by the writer and the reader.

/// The one checked conversion from an on-disk `u64` length or offset to `usize`.
pub(crate) fn usize_from_u64(value: u64, file: &Path, offset: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| {
        Corruption::new(
            file,
            offset,
            format!("{what} {value} does not fit in memory"),
        )
        .into()
    })
}

/// `usize` to the on-disk `u64`: lossless on every supported target.
pub(crate) fn u64_from_usize(value: usize) -> u64 {
    const _: () = assert!(usize::BITS <= u64::BITS);
    value as u64
}

/// The crc32c of a value block's bytes (value and padding), kept in its
/// index entry: seeded with the block's file offset, the LSN and the key,
/// so that a value read from the wrong place, or under another key's index
/// entry, fails its check.
pub(crate) fn value_block_crc(block_offset: u64, lsn: Lsn, key: &[u8], bytes: &[&[u8]]) -> u32 {
    let crc = crate::crc::crc32c(&block_offset.to_le_bytes());
    let crc = crate::crc::crc32c_append(crc, &lsn.to_le_bytes());
    let crc = crate::crc::crc32c_append(crc, key);
    bytes
        .iter()
        .fold(crc, |crc, part| crate::crc::crc32c_append(crc, part))
}

/// The crc32c of a data block: seeded with its file offset so that a block
/// read from (or written to) the wrong offset fails its check.
pub(crate) fn block_crc(block_offset: u64, header_prefix: &[u8], payload: &[u8]) -> u32 {
    let crc = crate::crc::crc32c(&block_offset.to_le_bytes());
    let crc = crate::crc::crc32c_append(crc, header_prefix);
    crate::crc::crc32c_append(crc, payload)
}
