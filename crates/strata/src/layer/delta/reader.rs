//! Opens, verifies and queries a delta layer file.
//!
//! `open` reads and verifies the footer, the header, the block index, the
//! bloom filter and the key range, and keeps the index and the filter in
//! memory (`index_memory_bytes` reports what they cost); after that, a `get`
//! costs no device access when the filter rules the key out and exactly one
//! data-block read otherwise, and a range scan reads its blocks lazily, one at
//! a time.
//!
//! Every check failure is a [`Corruption`] naming the file and the byte offset
//! of the field, block or section that failed; a length or offset read from
//! disk is checked to lie inside the file before anything is allocated for it.
//! A data block is verified (crc32c, seeded with its offset) before any of its
//! bytes is interpreted, and its entries are checked again as they are decoded
//! (lengths, kinds, ascending order, first entry equal to the index's, every
//! entry below the next block's first) and against what the footer says of
//! them where they are used: every entry's LSN within the footer's
//! `lsn_min..=lsn_max`, and its key at most the layer's key_max (compared in
//! the last block only: the others lie below its first key, which open
//! checks). A point read binary-searches the block's restart points
//! (format version 6) and walks from the last one at or before its key
//! over at most `RESTART_INTERVAL` entries with the checks a walk needs
//! (lengths within the block, ascending order, the restart point sorting
//! above the first entry) and makes the rest (kind, value length, LSN,
//! the next block's bound) of the entry it returns. A walk over every
//! entry checks each restart point against the restart array. A scan of the whole layer (unbounded both ways, as
//! compaction and images read their inputs) checks at its end that it saw
//! as many entries and distinct keys as the footer counts.
//!
//! A check that fails is not the answer yet: every read and its checks go
//! through the file's policy for bytes that fail their check
//! (`ReadAt::read_verified`; a layer file's is `io::read_verified`, which
//! counts the retry and has the storage forget its cached copies). An open
//! reads and checks everything again, once; a data block that fails (read
//! alone, read with others in a batch or a scan's read-ahead, or found in
//! the block cache) is dropped from the cache and read again alone. The
//! second result stands.
//!
//! Thread-safety: the reader is immutable after `open`; it is `Send + Sync`
//! when its [`ReadAt`] is, and any number of threads may `get` and scan at once.

use std::cmp::Ordering;
use std::ops::{Bound, Deref, Range};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use super::block_index::{BlockHandle, BlockIndex};
use super::{
    block_crc, u64_from_usize, usize_from_u64, DeltaLayerSummary, Lsn, ReadAt, ValueKind,
    BLOCK_BYTES_MAX, BLOCK_BYTES_MIN, BLOCK_BYTES_TARGET_MAX, BLOCK_BYTES_TARGET_MIN,
    BLOCK_COUNT_MAX, BLOCK_CRC_OFFSET, BLOCK_ENTRY_COUNT_OFFSET, BLOCK_HEADER_BYTES,
    BLOCK_PAD_BYTES_MAX, BLOCK_PAYLOAD_LEN_OFFSET, DELTA_FORMAT_VERSION, ENTRY_HEADER_BYTES,
    ENTRY_KIND_OFFSET, ENTRY_LSN_OFFSET, ENTRY_SHARED_LEN_OFFSET, ENTRY_SUFFIX_LEN_OFFSET,
    ENTRY_VALUE_LEN_OFFSET, FILE_BYTES_MIN, FOOTER_BLOCK_COUNT_OFFSET, FOOTER_BLOOM_CRC_OFFSET,
    FOOTER_BLOOM_LEN_OFFSET, FOOTER_BLOOM_OFFSET_OFFSET, FOOTER_BYTES, FOOTER_BYTES_MAX,
    FOOTER_CRC_OFFSET, FOOTER_DISTINCT_KEYS_OFFSET, FOOTER_ENTRY_COUNT_OFFSET, FOOTER_FLAGS_OFFSET,
    FOOTER_INDEX_CRC_OFFSET, FOOTER_INDEX_LEN_OFFSET, FOOTER_INDEX_OFFSET_OFFSET,
    FOOTER_KEYS_CRC_OFFSET, FOOTER_KEYS_LEN_OFFSET, FOOTER_KEYS_OFFSET_OFFSET, FOOTER_LEN_OFFSET,
    FOOTER_LSN_MAX_OFFSET, FOOTER_LSN_MIN_OFFSET, FOOTER_MAGIC, FOOTER_MAGIC_OFFSET,
    FOOTER_TAIL_BYTES, FOOTER_VERSION_OFFSET, HEADER_BLOCK_BYTES_TARGET_OFFSET, HEADER_BYTES,
    HEADER_CRC_OFFSET, HEADER_FLAGS_OFFSET, HEADER_MAGIC, HEADER_MAGIC_OFFSET,
    HEADER_VERSION_OFFSET, INDEX_BLOCK_LEN_OFFSET, INDEX_BLOCK_OFFSET_OFFSET,
    INDEX_ENTRY_HEADER_BYTES, INDEX_FIRST_KEY_LEN_OFFSET, INDEX_FIRST_LSN_OFFSET,
    KEYS_HEADER_BYTES, KEYS_MAX_LEN_OFFSET, KEYS_MIN_LEN_OFFSET, KEY_BYTES_MAX, VALUE_BYTES_MAX,
};
use super::{
    restarts_after_first, RESTARTS_FORMAT_VERSION, RESTART_COUNT_BYTES, RESTART_INTERVAL,
    RESTART_OFFSET_BYTES,
};
use super::{
    value_block_crc, BLOCK_ALIGN_BYTES, BLOCK_PAD_BEFORE_VALUE_BLOCK_MAX, DELTA_FORMAT_VERSION_MIN,
    INDEX_VALUE_BLOCK_FLAG, INDEX_VALUE_BLOCK_TAIL_BYTES,
};
use crate::cache::{Block, BlockCache};
use crate::codec::{u16_at, u32_at, u64_at};
use crate::error::{Corruption, Error, Result};
use crate::layer::bloom::{BloomFilter, BloomLayout, PointKey};

/// One entry of a range scan: key, lsn, kind, value.
pub(crate) type DeltaEntry = (Vec<u8>, Lsn, ValueKind, Vec<u8>);

/// An open delta layer file. See the module documentation.
#[derive(Debug)]
pub(crate) struct DeltaLayerReader<R: ReadAt> {
    file: R,
    /// The file's path, shared with the block cursors (for their errors).
    path: Arc<Path>,
    summary: DeltaLayerSummary,
    /// The data blocks, ascending by (first key, first LSN), contiguous;
    /// shared with the block cursors (to check entries against).
    index: Arc<BlockIndex>,
    /// Where a point read's search starts (see [`PrefixIndex`]).
    prefixes: PrefixIndex,
    bloom: BloomFilter,
    /// The block cache point reads go through, and this file's id in it.
    cache: Option<(Arc<BlockCache>, u64)>,
    /// Counts the data blocks `get` reads from the file (cache misses).
    point_reads: Option<Arc<AtomicU64>>,
}

/// The error for bytes of `file` at `offset` that fail a check. Cold, as
/// every error constructor on a read's path: the compiler moves the
/// branches that build an error out of the code a read runs, so a get
/// after a device wait finds fewer cold lines of code on its way.
#[cold]
fn corrupt(file: &Path, offset: u64, what: impl Into<String>) -> Error {
    Corruption::new(file, offset, what).into()
}

fn check_crc(file: &Path, offset: u64, what: &str, expected: u32, found: u32) -> Result<()> {
    if expected != found {
        return Err(Corruption::checksum(
            file,
            offset,
            format!("{what} checksum mismatch"),
            expected,
            found,
        )
        .into());
    }
    Ok(())
}

/// Reads exactly `len` bytes at `offset`, checking the range lies inside the file first.
fn read_checked<R: ReadAt>(file: &R, offset: u64, len: u64, what: &str) -> Result<Vec<u8>> {
    read_checked_with(file, offset, len, what, R::read_at)
}

/// [`read_checked`] through `read` (e.g. into a shared block).
fn read_checked_with<R: ReadAt, B: AsRef<[u8]>>(
    file: &R,
    offset: u64,
    len: u64,
    what: &str,
    read: impl FnOnce(&R, u64, usize) -> Result<B>,
) -> Result<B> {
    let path = file.path();
    let end = offset.checked_add(len);
    if !matches!(end, Some(end) if end <= file.file_len()) {
        return Err(corrupt(
            path,
            offset,
            format!(
                "{what} of {len} bytes at offset {offset} extends past the end of the {}-byte file",
                file.file_len()
            ),
        ));
    }
    let len_usize = usize_from_u64(len, path, offset, what)?;
    let bytes = read(file, offset, len_usize)?;
    if bytes.as_ref().len() != len_usize {
        return Err(corrupt(
            path,
            offset,
            format!(
                "short read of {what}: asked {len} bytes, got {}",
                bytes.as_ref().len()
            ),
        ));
    }
    Ok(bytes)
}

/// A delta layer's footer, read and checked (see `read_footer`).
#[derive(Clone, Copy)]
struct Footer {
    /// Where it starts in the file.
    offset: u64,
    version: u32,
    entries: u64,
    distinct_keys: u64,
    block_count: u64,
    lsn_min: Lsn,
    lsn_max: Lsn,
    index_offset: u64,
    index_len: u64,
    bloom_offset: u64,
    bloom_len: u64,
    keys_offset: u64,
    keys_len: u64,
    index_crc: u32,
    bloom_crc: u32,
    keys_crc: u32,
}

impl Footer {
    /// The file offset of the footer's field at `at`.
    fn field(&self, at: usize) -> u64 {
        self.offset + u64_from_usize(at)
    }

    /// Checks that the sections lie back to back, from past the header to
    /// the footer, and that the counts are possible.
    fn check(&self, path: &Path) -> Result<()> {
        let Footer {
            offset: footer_offset,
            entries,
            distinct_keys,
            block_count,
            lsn_min,
            lsn_max,
            index_offset,
            index_len,
            bloom_offset,
            bloom_len,
            keys_offset,
            keys_len,
            ..
        } = *self;
        let field = |at: usize| self.field(at);
        // The sections follow each other without gaps, ending at the footer.
        for (start, len, next, at, what) in [
            (
                index_offset,
                index_len,
                bloom_offset,
                FOOTER_INDEX_OFFSET_OFFSET,
                "block index",
            ),
            (
                bloom_offset,
                bloom_len,
                keys_offset,
                FOOTER_BLOOM_OFFSET_OFFSET,
                "bloom filter",
            ),
            (
                keys_offset,
                keys_len,
                footer_offset,
                FOOTER_KEYS_OFFSET_OFFSET,
                "key range",
            ),
        ] {
            if start.checked_add(len) != Some(next) {
                return Err(corrupt(
                    path,
                    field(at),
                    format!("{what} at {start} of {len} bytes does not end where the next section starts ({next})"),
                ));
            }
        }
        if index_offset < u64_from_usize(HEADER_BYTES) {
            return Err(corrupt(
                path,
                field(FOOTER_INDEX_OFFSET_OFFSET),
                "block index overlaps the header",
            ));
        }
        let counts_consistent = lsn_min <= lsn_max
            && block_count <= BLOCK_COUNT_MAX
            && block_count <= entries
            && distinct_keys <= entries
            && (entries == 0) == (block_count == 0)
            && (entries == 0) == (distinct_keys == 0)
            // Every index entry takes at least its header and a one-byte key.
            && block_count.checked_mul(u64_from_usize(INDEX_ENTRY_HEADER_BYTES + 1)).is_some_and(|b| b <= index_len);
        if !counts_consistent {
            return Err(corrupt(
                path,
                field(FOOTER_ENTRY_COUNT_OFFSET),
                format!(
                    "inconsistent counts: {entries} entries, {distinct_keys} distinct keys, {block_count} blocks, \
                     {index_len} index bytes, LSNs {lsn_min}..={lsn_max}"
                ),
            ));
        }
        Ok(())
    }
}

/// What `open` reads and keeps of a layer file.
struct Opened {
    summary: DeltaLayerSummary,
    index: BlockIndex,
    bloom: BloomFilter,
}

impl<R: ReadAt> DeltaLayerReader<R> {
    /// Reads and verifies the footer, the header, the block index, the bloom
    /// filter and the key range; keeps the index and the filter in memory.
    /// A check that fails reads them all again, once (`ReadAt::
    /// read_verified` over the whole file: an open is rare).
    pub(crate) fn open(file: R) -> Result<Self> {
        let Opened {
            summary,
            index,
            bloom,
        } = file.read_verified(0, file.file_len(), || Self::read_opened(&file))?;
        Ok(DeltaLayerReader {
            path: Arc::from(file.path()),
            file,
            prefixes: PrefixIndex::new(&index, &summary.key_min, &summary.key_max),
            summary,
            index: Arc::new(index),
            bloom,
            cache: None,
            point_reads: None,
        })
    }

    /// One reading of what `open` keeps, checked.
    fn read_opened(file: &R) -> Result<Opened> {
        let footer = Self::read_footer(file)?;
        Self::check_header(file, footer.version)?;
        Self::read_sections(file, &footer)
    }

    /// Reads the block index, the bloom filter and the key range (one read:
    /// they lie back to back before the footer), checks each against its
    /// crc32c and the footer, and decodes them.
    fn read_sections(file: &R, footer: &Footer) -> Result<Opened> {
        let path = file.path();
        let file_len = file.file_len();
        let Footer {
            offset: footer_offset,
            version,
            entries,
            distinct_keys,
            block_count,
            lsn_min,
            lsn_max,
            index_offset,
            index_len,
            bloom_offset,
            bloom_len,
            keys_offset,
            ..
        } = *footer;
        let field = |at: usize| footer.field(at);
        // Block index, bloom filter and key range: contiguous, read at once.
        let meta = read_checked(
            file,
            index_offset,
            footer_offset - index_offset,
            "block index, bloom filter and key range",
        )?;
        // `Footer::check` makes these lengths sum to meta.len().
        let index_len_usize = usize_from_u64(
            index_len,
            path,
            field(FOOTER_INDEX_LEN_OFFSET),
            "index length",
        )?;
        let bloom_len_usize = usize_from_u64(
            bloom_len,
            path,
            field(FOOTER_BLOOM_LEN_OFFSET),
            "bloom length",
        )?;
        let split = meta
            .split_at_checked(index_len_usize)
            .and_then(|(index, rest)| {
                rest.split_at_checked(bloom_len_usize)
                    .map(|(bloom, keys)| (index, bloom, keys))
            });
        let Some((index_bytes, bloom_bytes, keys)) = split else {
            return Err(corrupt(
                path,
                index_offset,
                "section lengths exceed the sections",
            ));
        };
        // Block index.
        check_crc(
            path,
            index_offset,
            "block index",
            footer.index_crc,
            crate::crc::crc32c(index_bytes),
        )?;
        let mut index = decode_index(
            index_bytes,
            path,
            index_offset,
            version,
            block_count,
            lsn_min,
            lsn_max,
        )?;

        // Bloom filter.
        check_crc(
            path,
            bloom_offset,
            "bloom filter",
            footer.bloom_crc,
            crate::crc::crc32c(bloom_bytes),
        )?;
        let bloom = BloomFilter::decode(
            bloom_bytes,
            BloomLayout::of_format_version(version),
            path,
            bloom_offset,
        )?;

        // Key range.
        check_crc(
            path,
            keys_offset,
            "key range",
            footer.keys_crc,
            crate::crc::crc32c(keys),
        )?;
        let (key_min, key_max) = decode_keys(keys, path, keys_offset)?;
        let keys_consistent = match (index.get(0), index.last()) {
            (Some(first), Some(last)) => {
                !key_min.is_empty() && first.first_key == key_min && last.first_key <= &key_max[..]
            }
            _ => key_min.is_empty() && key_max.is_empty(),
        };
        if !keys_consistent {
            return Err(corrupt(
                path,
                keys_offset,
                "key range disagrees with the block index",
            ));
        }
        index.set_key_max(&key_max);

        let summary = DeltaLayerSummary {
            key_min,
            key_max,
            lsn_min,
            lsn_max,
            entries,
            distinct_keys,
            blocks: block_count,
            file_bytes: file_len,
        };
        Ok(Opened {
            summary,
            index,
            bloom,
        })
    }

    /// Reads and checks the footer: its length, crc32c, magic and
    /// version, and that its fields agree (sections back to back, counts
    /// possible).
    /// Where the block index starts, from the footer alone (read and
    /// checked): the bytes from there to the end and the header are all
    /// that [`Self::open`] reads.
    pub(crate) fn sections_offset(file: &R) -> Result<u64> {
        Ok(Self::read_footer(file)?.index_offset)
    }

    fn read_footer(file: &R) -> Result<Footer> {
        let path = file.path();
        let file_len = file.file_len();
        if file_len < u64_from_usize(FILE_BYTES_MIN) {
            return Err(corrupt(
                path,
                0,
                format!(
                    "file is {file_len} bytes; a delta layer is at least {FILE_BYTES_MIN} bytes"
                ),
            ));
        }

        // Footer: one read of the last FOOTER_BYTES, which hold the footer of
        // this version; the version-independent tail says how long it is.
        let last_len = file_len.min(u64_from_usize(FOOTER_BYTES));
        let last = read_checked(file, file_len - last_len, last_len, "footer")?;
        let tail_at = last.len() - FOOTER_TAIL_BYTES;
        let tail_offset = file_len - u64_from_usize(FOOTER_TAIL_BYTES);
        let footer_len = u32_at(&last, tail_at).unwrap_or(0);
        if (footer_len as usize) < FOOTER_TAIL_BYTES
            || footer_len as usize > FOOTER_BYTES_MAX
            || u64::from(footer_len) > file_len - u64_from_usize(HEADER_BYTES)
        {
            return Err(corrupt(
                path,
                tail_offset,
                format!("footer length {footer_len} is impossible"),
            ));
        }
        let footer_offset = file_len - u64::from(footer_len);
        let footer = match last.len().checked_sub(footer_len as usize) {
            Some(start) => last[start..].to_vec(),
            // A longer footer (a newer version's): read it to verify it.
            None => read_checked(file, footer_offset, u64::from(footer_len), "footer")?,
        };
        let crc_at = footer.len() - 4;
        let stored = u32_at(&footer, crc_at).unwrap_or(0);
        check_crc(
            path,
            footer_offset,
            "footer",
            stored,
            crate::crc::crc32c(&footer[..crc_at]),
        )?;
        let tail = &footer[footer.len() - FOOTER_TAIL_BYTES..];
        let field = |at: usize| footer_offset + u64_from_usize(at);
        if tail[FOOTER_MAGIC_OFFSET - FOOTER_LEN_OFFSET..FOOTER_CRC_OFFSET - FOOTER_LEN_OFFSET]
            != FOOTER_MAGIC
        {
            return Err(corrupt(
                path,
                field(FOOTER_MAGIC_OFFSET),
                "footer magic is not a delta layer's",
            ));
        }
        let version = u32_at(tail, FOOTER_VERSION_OFFSET - FOOTER_LEN_OFFSET).unwrap_or(0);
        if version > DELTA_FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: DELTA_FORMAT_VERSION,
            });
        }
        if version < DELTA_FORMAT_VERSION_MIN {
            return Err(corrupt(
                path,
                field(FOOTER_VERSION_OFFSET),
                format!("format version {version} is invalid"),
            ));
        }
        if footer.len() != FOOTER_BYTES {
            return Err(corrupt(
                path,
                field(0),
                format!(
                    "footer is {} bytes, version 1 has {FOOTER_BYTES}",
                    footer.len()
                ),
            ));
        }
        let f64_ = |at: usize| u64_at(&footer, at).unwrap_or(0);
        let f32_ = |at: usize| u32_at(&footer, at).unwrap_or(0);
        let entries = f64_(FOOTER_ENTRY_COUNT_OFFSET);
        let distinct_keys = f64_(FOOTER_DISTINCT_KEYS_OFFSET);
        let block_count = f64_(FOOTER_BLOCK_COUNT_OFFSET);
        let lsn_min = f64_(FOOTER_LSN_MIN_OFFSET);
        let lsn_max = f64_(FOOTER_LSN_MAX_OFFSET);
        let index_offset = f64_(FOOTER_INDEX_OFFSET_OFFSET);
        let index_len = f64_(FOOTER_INDEX_LEN_OFFSET);
        let bloom_offset = f64_(FOOTER_BLOOM_OFFSET_OFFSET);
        let bloom_len = f64_(FOOTER_BLOOM_LEN_OFFSET);
        let keys_offset = f64_(FOOTER_KEYS_OFFSET_OFFSET);
        let keys_len = f64_(FOOTER_KEYS_LEN_OFFSET);
        let flags = f32_(FOOTER_FLAGS_OFFSET);
        if flags != 0 {
            return Err(corrupt(
                path,
                field(FOOTER_FLAGS_OFFSET),
                format!("unknown footer flags {flags:#x}"),
            ));
        }
        let footer = Footer {
            offset: footer_offset,
            version,
            entries,
            distinct_keys,
            block_count,
            lsn_min,
            lsn_max,
            index_offset,
            index_len,
            bloom_offset,
            bloom_len,
            keys_offset,
            keys_len,
            index_crc: f32_(FOOTER_INDEX_CRC_OFFSET),
            bloom_crc: f32_(FOOTER_BLOOM_CRC_OFFSET),
            keys_crc: f32_(FOOTER_KEYS_CRC_OFFSET),
        };
        footer.check(path)?;
        Ok(footer)
    }

    /// Reads and checks the header: crc32c, magic, the footer's version,
    /// no flags, a block size target in range.
    fn check_header(file: &R, version: u32) -> Result<()> {
        let path = file.path();
        let header = read_checked(file, 0, u64_from_usize(HEADER_BYTES), "header")?;
        let stored = u32_at(&header, HEADER_CRC_OFFSET).unwrap_or(0);
        check_crc(
            path,
            0,
            "header",
            stored,
            crate::crc::crc32c(&header[..HEADER_CRC_OFFSET]),
        )?;
        if header[HEADER_MAGIC_OFFSET..HEADER_MAGIC_OFFSET + 8] != HEADER_MAGIC {
            return Err(corrupt(path, 0, "header magic is not a delta layer's"));
        }
        let header_version = u32_at(&header, HEADER_VERSION_OFFSET).unwrap_or(0);
        if header_version != version {
            return Err(corrupt(
                path,
                u64_from_usize(HEADER_VERSION_OFFSET),
                format!("header version {header_version} differs from footer version {version}"),
            ));
        }
        let header_flags = u32_at(&header, HEADER_FLAGS_OFFSET).unwrap_or(0);
        if header_flags != 0 {
            return Err(corrupt(
                path,
                u64_from_usize(HEADER_FLAGS_OFFSET),
                format!("unknown header flags {header_flags:#x}"),
            ));
        }
        let block_bytes_target =
            u32_at(&header, HEADER_BLOCK_BYTES_TARGET_OFFSET).unwrap_or(0) as usize;
        if !(BLOCK_BYTES_TARGET_MIN..=BLOCK_BYTES_TARGET_MAX).contains(&block_bytes_target) {
            return Err(corrupt(
                path,
                u64_from_usize(HEADER_BLOCK_BYTES_TARGET_OFFSET),
                format!("block size target {block_bytes_target} is out of range"),
            ));
        }

        Ok(())
    }

    /// Point reads of this file (`get`, `get_in_block`) go through `cache`,
    /// where the file is `file_id`.
    pub(crate) fn set_cache(&mut self, cache: Option<Arc<BlockCache>>, file_id: u64) {
        self.cache = cache.map(|c| (c, file_id));
    }

    /// Each data block `get` reads from the file adds one to `reads`.
    pub(crate) fn count_point_reads(&mut self, reads: Arc<AtomicU64>) {
        self.point_reads = Some(reads);
    }

    /// A point read's block from the cache (see [`Self::point_read_plan`]).
    pub(crate) fn cached_block(&self, block: usize) -> Option<Block> {
        let (cache, id) = self.cache.as_ref()?;
        let handle = self.index.get(block)?;
        cache.get(*id, handle.offset)
    }

    /// What the layer holds.
    pub(crate) fn summary(&self) -> &DeltaLayerSummary {
        &self.summary
    }

    /// The file the reader reads.
    pub(crate) fn file(&self) -> &R {
        &self.file
    }

    /// The file, to put another copy of the same bytes in its place (a
    /// layer's local file evicted: the store's copy from then on).
    pub(crate) fn file_mut(&mut self) -> &mut R {
        &mut self.file
    }

    /// Memory held by the block index and the bloom filter.
    pub(crate) fn index_memory_bytes(&self) -> usize {
        self.index.memory_bytes() + self.prefixes.memory_bytes() + self.bloom.memory_bytes()
    }

    /// The newest version of `key` with lsn <= `lsn`, or `None`.
    ///
    /// Bloom-filtered; reads at most one data block, even when the key's
    /// versions straddle blocks: the block to read is the last one whose first
    /// (key, lsn) is <= (`key`, `lsn`), and it holds the last entry <= that.
    #[cfg_attr(not(test), allow(dead_code))] // used by tests
    pub(crate) fn get(&self, key: &[u8], lsn: Lsn) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        self.get_point(PointKey::new(key), lsn)
    }

    /// [`Self::get`] of a key whose filter hash is computed.
    pub(crate) fn get_point(
        &self,
        point: PointKey<'_>,
        lsn: Lsn,
    ) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        let key = point.key;
        let Some(block) = self.locate(point, lsn) else {
            return Ok(None);
        };
        let bytes = match self.cached_block(block) {
            Some(cached) => BlockBytes::Cached(cached),
            None => BlockBytes::Unread,
        };
        Self::search_block(self.verified_block(block, bytes, true)?, key, lsn)
    }

    /// Data block number `block`, verified, through the file's policy for
    /// bytes that fail their check (`ReadAt::read_verified`): `bytes`, when
    /// given and they pass, else the block read from the file alone (once
    /// more, if that fails too). Bytes that fail are dropped from the block
    /// cache. A cached block's checksum is checked again only with
    /// `Options::check_cached_blocks`; its header always is (what keeps the
    /// cursor within it). A `point` read counts its reads from the file
    /// (`count_point_reads`) and caches what came from the file.
    fn verified_block(&self, block: usize, bytes: BlockBytes, point: bool) -> Result<BlockCursor> {
        let handle = self.block_handle(block)?;
        // The block's first entry is checked against the index's first
        // key: its line loads while the block is read.
        crate::prefetch::read(handle.first_key.as_ptr());
        let mut bytes = Some(bytes);
        let mut from_file = false;
        let cursor = self
            .file
            .read_verified(handle.offset, handle.len_bytes, || {
                // A cached block passed its check when it was read; it is
                // checked again only where the cache says so.
                let given = match bytes.take() {
                    Some(BlockBytes::Cached(b)) => Some((b, !self.checks_cached_blocks())),
                    Some(BlockBytes::Read(b)) => {
                        from_file = true;
                        Some((b, false))
                    }
                    Some(BlockBytes::Unread) | None => None,
                };
                if let Some((b, verified)) = given {
                    let parsed = parse_block(&self.path, &self.index, block, b, verified);
                    if parsed.is_err() {
                        self.uncache_block(handle);
                    }
                    return parsed;
                }
                from_file = true;
                if point {
                    if let Some(reads) = &self.point_reads {
                        reads.fetch_add(1, AtomicOrdering::Relaxed);
                    }
                }
                // A point read's block goes into the cache: it is read into
                // an evicted block's memory where the cache has one.
                let frame = match &self.cache {
                    Some((cache, _)) if point => usize::try_from(handle.len_bytes)
                        .ok()
                        .and_then(|len| cache.frame(len)),
                    _ => None,
                };
                let bytes = read_checked_with(
                    &self.file,
                    handle.offset,
                    handle.len_bytes,
                    "data block",
                    |file, offset, len| file.read_shared(offset, len, frame),
                )?;
                parse_block(&self.path, &self.index, block, bytes, false)
            })?;
        if point && from_file {
            self.cache_block(handle, &cursor);
        }
        Ok(cursor)
    }

    /// Whether a block from the cache is checked again before it is used
    /// (`Options::check_cached_blocks`).
    fn checks_cached_blocks(&self) -> bool {
        self.cache.as_ref().is_some_and(|(c, _)| c.checks_on_use())
    }

    /// Keeps a verified block in the cache, if there is one.
    fn cache_block(&self, handle: BlockHandle<'_>, cursor: &BlockCursor) {
        if let Some((cache, id)) = &self.cache {
            cache.insert(*id, handle.offset, Arc::clone(&cursor.bytes));
        }
    }

    /// Drops a block from the cache, if it is there.
    fn uncache_block(&self, handle: BlockHandle<'_>) {
        if let Some((cache, id)) = &self.cache {
            cache.remove(*id, handle.offset);
        }
    }

    /// The number of the block that would hold the newest version of `key`
    /// at or below `lsn`, or `None` when the key range or the bloom filter
    /// rules it out.
    fn locate(&self, point: PointKey<'_>, lsn: Lsn) -> Option<usize> {
        let key = point.key;
        if key.is_empty()
            || key.len() > KEY_BYTES_MAX
            || self.index.is_empty()
            || key < self.summary.key_min.as_slice()
            || key > self.summary.key_max.as_slice()
            || !self.bloom.may_contain_hash(point.hash)
        {
            return None;
        }
        let (lo, hi) = self.prefixes.blocks_tied_with(key);
        let after = self
            .index
            .partition_point(lo..hi, |first, first_lsn| (first, first_lsn) <= (key, lsn));
        // None: (key, lsn) sorts before the first entry.
        after.checked_sub(1)
    }

    /// For a batched point read: `(block number, offset, length)` of the
    /// block to read for `key` at `lsn`, or `None` when the layer cannot hold
    /// it. Read those bytes (any way, e.g. together with other reads) and
    /// hand them to [`Self::get_in_block`].
    pub(crate) fn point_read_plan(
        &self,
        point: PointKey<'_>,
        lsn: Lsn,
    ) -> Option<(usize, u64, u64)> {
        let block = self.locate(point, lsn)?;
        let handle = self.index.get(block)?;
        // As in `verified_block`: the first key's line loads during the read.
        crate::prefetch::read(handle.first_key.as_ptr());
        Some((block, handle.offset, handle.len_bytes))
    }

    /// Starts loading the filter line a point read of `point` will test
    /// (see [`BloomFilter::prefetch_hash`]).
    pub(crate) fn prefetch_filter(&self, point: PointKey<'_>) {
        self.bloom.prefetch_hash(point.hash);
    }

    /// Whether the bloom filter says the layer cannot hold `point`'s key
    /// (the test [`Self::locate`] makes, alone).
    pub(crate) fn filter_rules_out(&self, point: PointKey<'_>) -> bool {
        !self.bloom.may_contain_hash(point.hash)
    }

    /// Finishes a batched point read: verifies the block's bytes (read at the
    /// plan's offset and length; when they fail, the block is read again
    /// alone) and finds the newest version of `key` at or below `lsn` in it.
    pub(crate) fn get_in_block(
        &self,
        block: usize,
        bytes: Vec<u8>,
        key: &[u8],
        lsn: Lsn,
    ) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        self.get_in(block, BlockBytes::Read(Block::from(bytes)), key, lsn)
    }

    /// The newest version of `key` at or below `lsn` in data block `block`,
    /// from `bytes` once they pass their check (else the block read alone).
    fn get_in(
        &self,
        block: usize,
        bytes: BlockBytes,
        key: &[u8],
        lsn: Lsn,
    ) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        Self::search_block(self.verified_block(block, bytes, true)?, key, lsn)
    }

    /// [`Self::get_in_block`] for bytes already in the shared buffer the
    /// block cache keeps (a read queue's read, copied once out of its
    /// ring's buffer).
    pub(crate) fn get_in_read_block(
        &self,
        block: usize,
        bytes: Block,
        key: &[u8],
        lsn: Lsn,
    ) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        self.get_in(block, BlockBytes::Read(bytes), key, lsn)
    }

    /// The index entry of block number `block` (from a plan of this reader).
    fn block_handle(&self, block: usize) -> Result<BlockHandle<'_>> {
        self.index.get(block).ok_or_else(|| {
            corrupt(
                self.file.path(),
                0,
                format!("block number {block} is not in the index"),
            )
        })
    }

    /// [`Self::get_in_block`] for a block from [`Self::cached_block`]
    /// (checked as [`Self::verified_block`] checks a cached block, not
    /// cached again; when it fails, dropped from the cache and read from
    /// the file).
    pub(crate) fn get_in_cached_block(
        &self,
        block: usize,
        bytes: Block,
        key: &[u8],
        lsn: Lsn,
    ) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        self.get_in(block, BlockBytes::Cached(bytes), key, lsn)
    }

    /// The newest version of `key` at or below `lsn` in a block.
    fn search_block(
        mut block: BlockCursor,
        key: &[u8],
        lsn: Lsn,
    ) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        // Entries before the key are walked over with the checks a walk
        // needs (`BlockCursor::advance`); a version it returns is checked
        // in full first.
        block.seek_restart(key, lsn)?;
        let mut found: Option<(Lsn, ValueKind, Range<usize>)> = None;
        while let Some(raw) = block.advance()? {
            match block.key().cmp(key) {
                Ordering::Less => {}
                Ordering::Equal if raw.lsn <= lsn => {
                    let entry = block.check_meta(raw)?;
                    found = Some((entry.lsn, entry.kind, entry.value))
                }
                Ordering::Equal | Ordering::Greater => break,
            }
        }
        Ok(found.map(|(lsn, kind, value)| (lsn, kind, block.bytes[value].to_vec())))
    }

    /// All entries (every version) with key in the range, ascending by (key,
    /// lsn), reading blocks lazily.
    #[cfg_attr(not(test), allow(dead_code))] // used by tests
    pub(crate) fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<DeltaRangeIter<'_, R>> {
        Ok(DeltaRangeIter {
            scan: BlockScan::new(self, start, end),
        })
    }

    /// [`Self::range`] for a reader held in an `Arc`: the scan keeps the reader alive.
    pub(crate) fn range_owned(
        self: &Arc<Self>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<DeltaRangeIterOwned<R>> {
        Ok(DeltaRangeIterOwned {
            scan: BlockScan::new(Arc::clone(self), start, end),
        })
    }
}

/// A data block's bytes as [`DeltaLayerReader::verified_block`] is handed
/// them, before they are verified.
enum BlockBytes {
    /// None yet: read the block from the file.
    Unread,
    /// From the block cache.
    Cached(Block),
    /// Read from the file together with other blocks (a batch of point
    /// reads, a scan's read-ahead).
    Read(Block),
}

/// A dense search structure over the blocks' first keys, for point reads:
/// a binary search over the keys themselves (of varying lengths, each found
/// through its end) misses the CPU cache at every step. This one maps a
/// key's 8-byte prefix straight to a bucket of about
/// `BLOCKS_PER_BUCKET` blocks (one line of a table of `u32`s), searches
/// those blocks' prefixes (a line or two), and leaves whole-key
/// comparisons to the blocks whose prefixes tie.
///
/// Invariants: bucket `b` holds the blocks whose first prefix `q` has
/// `bucket(q) == b`, from `starts[b]` to `starts[b + 1]`; `bucket` never
/// decreases as `q` grows, so every block before `starts[b]` starts below
/// any prefix of bucket `b`, every block from `starts[b + 1]` above it. A
/// layer whose keys crowd into few buckets still reads right (a bucket
/// is searched by halves), only slower.
#[derive(Debug)]
struct PrefixIndex {
    /// Bytes every key of the layer shares (those of key_min and key_max):
    /// prefixes start after them.
    skip: usize,
    /// `key_prefix` of each block's first key (after `skip`), in block order.
    prefixes: Vec<u64>,
    /// The first block's prefix: bucket 0 starts there.
    base: u64,
    /// A prefix's bucket is `(prefix - base) >> shift`.
    shift: u32,
    /// `starts[b]`: the first block of bucket `b`; one more entry than
    /// buckets, the last the number of blocks.
    starts: Vec<u32>,
}

/// Blocks per bucket of [`PrefixIndex`] when the prefixes spread evenly.
const BLOCKS_PER_BUCKET: usize = 8;
const _: () = assert!(BLOCK_COUNT_MAX <= u32::MAX as u64);

impl PrefixIndex {
    fn new(index: &BlockIndex, key_min: &[u8], key_max: &[u8]) -> Self {
        let skip = key_min
            .iter()
            .zip(key_max)
            .take_while(|(a, b)| a == b)
            .count();
        let prefixes: Vec<u64> = index
            .iter()
            .map(|h| key_prefix(h.first_key.get(skip..).unwrap_or_default()))
            .collect();
        Self::of_prefixes(skip, prefixes)
    }

    /// The index of blocks whose first keys have `prefixes` (ascending)
    /// after `skip` shared bytes.
    fn of_prefixes(skip: usize, prefixes: Vec<u64>) -> Self {
        let base = prefixes.first().copied().unwrap_or(0);
        let last = prefixes.last().copied().unwrap_or(0);
        // The fewest shifted bits that leave at most `wanted` buckets.
        let wanted = (prefixes.len() / BLOCKS_PER_BUCKET).max(1) as u64;
        let mut shift = 0;
        while shift < 64 && ((last - base) >> shift) >= wanted {
            shift += 1;
        }
        let buckets = Self::bucket_of(last, base, shift) + 1;
        // Block numbers fit a u32: a reader refuses a layer of more than
        // BLOCK_COUNT_MAX blocks (asserted to be u32::MAX below).
        let number = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        let mut starts = Vec::with_capacity(buckets + 1);
        let mut i = 0;
        for b in 0..buckets {
            while i < prefixes.len() && Self::bucket_of(prefixes[i], base, shift) < b {
                i += 1;
            }
            starts.push(number(i));
        }
        starts.push(number(prefixes.len()));
        PrefixIndex {
            skip,
            prefixes,
            base,
            shift,
            starts,
        }
    }

    fn bucket_of(prefix: u64, base: u64, shift: u32) -> usize {
        (prefix - base).checked_shr(shift).unwrap_or(0) as usize
    }

    fn memory_bytes(&self) -> usize {
        self.prefixes.capacity() * std::mem::size_of::<u64>()
            + self.starts.capacity() * std::mem::size_of::<u32>()
    }

    /// `(lo, hi)`: the blocks before `lo` start below `key`, those from `hi`
    /// above it; between them, the prefixes tie and whole keys decide.
    /// `key` lies within the layer's key range.
    fn blocks_tied_with(&self, key: &[u8]) -> (usize, usize) {
        let p = key_prefix(key.get(self.skip..).unwrap_or_default());
        let n = self.prefixes.len();
        let lo = if p <= self.base {
            0
        } else {
            let b = Self::bucket_of(p, self.base, self.shift);
            // `b` may be `usize::MAX` (no shift, `p` far above the last
            // block's prefix): no `b + 1`.
            match self.starts.get(b..).and_then(|s| s.get(..2)) {
                Some(&[start, end]) => {
                    let (start, end) = (start as usize, end as usize);
                    start + self.prefixes[start..end].partition_point(|&q| q < p)
                }
                // Above the last bucket: every block starts below.
                _ => n,
            }
        };
        // Ties are few unless keys share more than the skipped bytes: gallop.
        let mut bound = 1;
        while lo + bound <= n && self.prefixes[lo + bound - 1] == p {
            bound *= 2;
        }
        let from = lo + bound / 2;
        let to = (lo + bound).min(n);
        (
            lo,
            from + self.prefixes[from..to].partition_point(|&q| q == p),
        )
    }
}

#[cfg(test)]
mod prefix_index_tests {
    use super::PrefixIndex;
    use proptest::prelude::*;

    /// A prefix far above the last block's, when the buckets are not
    /// shifted (one block, or all blocks of one prefix), has a bucket number
    /// of `usize::MAX`: every block starts below it. (Found by the proptest
    /// below in CI, as an overflow of the bucket's end.)
    #[test]
    fn a_prefix_far_above_the_last_is_above_every_block() {
        for prefixes in [vec![0], vec![0, 0, 0], vec![5]] {
            let n = prefixes.len();
            let index = PrefixIndex::of_prefixes(0, prefixes);
            assert_eq!(index.shift, 0);
            assert_eq!(index.blocks_tied_with(&u64::MAX.to_be_bytes()), (n, n));
        }
    }

    proptest! {
        /// Whatever the spread of the prefixes (even, crowded into a few
        /// values, one huge gap), the buckets find what a search over all
        /// of them finds.
        #[test]
        fn buckets_find_what_a_whole_search_finds(
            mut prefixes in prop::collection::vec(
                prop_oneof![any::<u64>(), 0..64u64, (0..4u64).prop_map(|x| x << 62), Just(u64::MAX)],
                1..600,
            ),
            probes in prop::collection::vec(any::<u64>(), 50),
        ) {
            prefixes.sort_unstable();
            let index = PrefixIndex::of_prefixes(0, prefixes.clone());
            let wanted = probes
                .iter()
                .copied()
                .chain(prefixes.iter().copied())
                .chain(prefixes.iter().map(|p| p.wrapping_add(1)))
                .chain(prefixes.iter().map(|p| p.wrapping_sub(1)));
            for p in wanted {
                let lo = prefixes.partition_point(|&q| q < p);
                let hi = prefixes.partition_point(|&q| q <= p);
                prop_assert_eq!(index.blocks_tied_with(&p.to_be_bytes()), (lo, hi), "prefix {}", p);
            }
        }
    }
}

/// The first 8 bytes of `key`, zero-padded, big-endian: for keys `a` and
/// `b`, `key_prefix(a) < key_prefix(b)` implies `a < b` (at the first byte
/// where the padded prefixes differ, either both keys have bytes there, or
/// the shorter key has ended and is a prefix of the other). Keys that share
/// their first `skip` bytes keep that order after them.
fn key_prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

/// Verifies a data block's checksum and header and opens a cursor on it.
/// `bytes` should be the `len_bytes` bytes at the `offset` of block number
/// `block` of `index` (from [`decode_index`]); other lengths are refused.
/// `verified`: the bytes passed their checksum and padding checks already
/// (a block from the cache), so only the header is checked (lengths,
/// counts and offsets: what keeps the cursor within the block).
fn parse_block(
    path: &Arc<Path>,
    index: &Arc<BlockIndex>,
    block: usize,
    bytes: Block,
    verified: bool,
) -> Result<BlockCursor> {
    let Some(handle) = index.get(block) else {
        return Err(corrupt(
            path,
            0,
            format!("block number {block} is not in the index"),
        ));
    };
    if bytes.len() as u64 != handle.len_bytes {
        return Err(corrupt(
            path,
            handle.offset,
            format!(
                "short read of data block: asked {} bytes, got {}",
                handle.len_bytes,
                bytes.len()
            ),
        ));
    }
    if let Some((value_len, crc)) = handle.value_block {
        let value = (value_len as usize, crc);
        return parse_value_block(path, index, block, handle, value, bytes, verified);
    }
    let payload_len = u32_at(&bytes, BLOCK_PAYLOAD_LEN_OFFSET).unwrap_or(0) as usize;
    let entry_count = u32_at(&bytes, BLOCK_ENTRY_COUNT_OFFSET).unwrap_or(0);
    if !verified {
        let stored = u32_at(&bytes, BLOCK_CRC_OFFSET).unwrap_or(0);
        // The index (verified) says the block is at least BLOCK_BYTES_MIN long.
        let found = block_crc(
            handle.offset,
            &bytes[..BLOCK_CRC_OFFSET],
            &bytes[BLOCK_HEADER_BYTES..],
        );
        check_crc(path, handle.offset, "data block", stored, found)?;
    }
    // The payload, then at most BLOCK_PAD_BYTES_MAX zero bytes of padding
    // (up to the page boundary before a value block).
    let pad_max = match index.get(block + 1) {
        Some(n) if n.value_block.is_some() => BLOCK_PAD_BEFORE_VALUE_BLOCK_MAX,
        _ => BLOCK_PAD_BYTES_MAX,
    };
    let end = BLOCK_HEADER_BYTES.saturating_add(payload_len);
    if end > bytes.len() || bytes.len() - end > pad_max {
        return Err(corrupt(
            path,
            handle.offset,
            format!(
                "block payload length {payload_len} disagrees with the index's block length {}",
                bytes.len()
            ),
        ));
    }
    if let Some(at) = (!verified)
        .then(|| bytes[end..].iter().position(|&b| b != 0))
        .flatten()
    {
        return Err(corrupt(
            path,
            handle.offset + u64_from_usize(end + at),
            "nonzero byte in a data block's padding",
        ));
    }
    // Version 6: the payload ends with the restart array (its offsets are
    // checked where they are used: by a search that jumps to one, and
    // against each restart point a walk passes).
    let (entries_end, restarts) = if index.restarts() {
        let count_at = end
            .checked_sub(RESTART_COUNT_BYTES)
            .filter(|&at| at >= BLOCK_HEADER_BYTES);
        let count = count_at.and_then(|at| u32_at(&bytes, at));
        let expected = restarts_after_first(entry_count);
        let array_bytes = expected as usize * RESTART_OFFSET_BYTES;
        match (count_at, count) {
            (Some(at), Some(count))
                if count == expected
                    && entry_count > 0
                    && at - BLOCK_HEADER_BYTES >= array_bytes =>
            {
                (at - array_bytes, at - array_bytes..at)
            }
            _ => {
                return Err(corrupt(
                    path,
                    handle.offset,
                    format!(
                        "restart count {} disagrees with the block's {entry_count} entries",
                        count.map_or("missing".to_string(), |c| c.to_string())
                    ),
                ))
            }
        }
    } else {
        (end, end..end)
    };
    if entry_count == 0
        || entry_count as usize > (entries_end - BLOCK_HEADER_BYTES) / ENTRY_HEADER_BYTES
    {
        return Err(corrupt(
            path,
            handle.offset,
            format!("block entry count {entry_count} is impossible"),
        ));
    }
    Ok(BlockCursor {
        bytes,
        end: entries_end,
        restarts,
        entry_count,
        path: Arc::clone(path),
        block_offset: handle.offset,
        pos: BLOCK_HEADER_BYTES,
        remaining: entry_count,
        key: Vec::new(),
        lsn: 0,
        index: Arc::clone(index),
        block,
        first_pending: true,
        value_block: false,
        continues_key: false,
    })
}

/// [`parse_block`] for a value block of `(value_len, stored crc)`: its
/// bytes checked against the crc32c of the index entry (seeded with the
/// offset, LSN and key) and its padding against zeros, unless `verified`
/// already; the cursor gives the one put. Its order against the blocks
/// around it is the index's, checked by [`decode_index`].
fn parse_value_block(
    path: &Arc<Path>,
    index: &Arc<BlockIndex>,
    block: usize,
    handle: BlockHandle<'_>,
    (value_len, stored): (usize, u32),
    bytes: Block,
    verified: bool,
) -> Result<BlockCursor> {
    if !verified {
        let found = value_block_crc(handle.offset, handle.first_lsn, handle.first_key, &[&bytes]);
        check_crc(path, handle.offset, "value block", stored, found)?;
    }
    // The index said value_len <= len_bytes = bytes.len().
    if let Some(at) = (!verified)
        .then(|| bytes.get(value_len..))
        .flatten()
        .and_then(|p| p.iter().position(|&b| b != 0))
    {
        return Err(corrupt(
            path,
            handle.offset + u64_from_usize(value_len + at),
            "nonzero byte in a value block's padding",
        ));
    }
    Ok(BlockCursor {
        end: value_len.min(bytes.len()),
        restarts: 0..0,
        entry_count: 1,
        bytes,
        path: Arc::clone(path),
        block_offset: handle.offset,
        pos: 0,
        remaining: 1,
        key: handle.first_key.to_vec(),
        lsn: handle.first_lsn,
        index: Arc::clone(index),
        block,
        first_pending: false,
        value_block: true,
        continues_key: false,
    })
}

/// Every entry of a data block, through [`parse_block`] and the block cursor
/// the reader uses: the fuzz targets' view of the block decoder. `next`
/// (the following block, `None` for the last) starts where `handle` ends.
#[cfg(feature = "fuzzing")]
pub(crate) fn decode_block(
    path: &Path,
    handle: BlockHandle<'_>,
    next: Option<BlockHandle<'_>>,
    bytes: Vec<u8>,
) -> Result<Vec<DeltaEntry>> {
    // No bounds beyond the blocks' own: every LSN, every key.
    let mut index = BlockIndex::with_capacity(2, handle.first_key.len(), 0, Lsn::MAX);
    index.set_restarts(true);
    index.push(handle);
    if let Some(next) = next {
        index.push(next);
    }
    index.set_key_max(&[u8::MAX; KEY_BYTES_MAX]);
    let mut block = parse_block(
        &Arc::from(path),
        &Arc::new(index),
        0,
        Block::from(bytes),
        false,
    )?;
    let mut entries = Vec::new();
    while let Some(entry) = block.next_entry()? {
        let value = block.bytes[entry.value].to_vec();
        entries.push((block.key.clone(), entry.lsn, entry.kind, value));
    }
    Ok(entries)
}

/// Decodes and checks the block index. The caller (the footer check) has
/// bounded `block_count` by the index length and `BLOCK_COUNT_MAX`.
pub(crate) fn decode_index(
    bytes: &[u8],
    path: &Path,
    index_offset: u64,
    version: u32,
    block_count: u64,
    lsn_min: Lsn,
    lsn_max: Lsn,
) -> Result<BlockIndex> {
    // The footer check bounded block_count by index_len, which lies inside the file.
    let count = usize_from_u64(block_count, path, index_offset, "block count")?;
    let key_bytes = bytes
        .len()
        .saturating_sub(count.saturating_mul(INDEX_ENTRY_HEADER_BYTES));
    let mut index = BlockIndex::with_capacity(count, key_bytes, lsn_min, lsn_max);
    index.set_restarts(version >= RESTARTS_FORMAT_VERSION);
    let mut pos = 0usize;
    let mut next_block_offset = u64_from_usize(HEADER_BYTES);
    for block_index in 0..count {
        let at = index_offset + u64_from_usize(pos);
        let bad =
            |what: String| corrupt(path, at, format!("block index entry {block_index}: {what}"));
        let offset = u64_at(bytes, pos + INDEX_BLOCK_OFFSET_OFFSET)
            .ok_or_else(|| bad("truncated".into()))?;
        let len_bytes =
            u64_at(bytes, pos + INDEX_BLOCK_LEN_OFFSET).ok_or_else(|| bad("truncated".into()))?;
        let first_lsn =
            u64_at(bytes, pos + INDEX_FIRST_LSN_OFFSET).ok_or_else(|| bad("truncated".into()))?;
        let key_len_field = u16_at(bytes, pos + INDEX_FIRST_KEY_LEN_OFFSET)
            .ok_or_else(|| bad("truncated".into()))?;
        // Version 2 has no value blocks: the flag is then part of an
        // impossible key length.
        let is_value_block = version >= 3 && key_len_field & INDEX_VALUE_BLOCK_FLAG != 0;
        let key_len = if is_value_block {
            key_len_field & !INDEX_VALUE_BLOCK_FLAG
        } else {
            key_len_field
        } as usize;
        let key_start = pos + INDEX_ENTRY_HEADER_BYTES;
        let first_key = bytes
            .get(key_start..key_start + key_len)
            .ok_or_else(|| bad("key truncated".into()))?;
        let mut entry_end = key_start + key_len;
        let value_block = if is_value_block {
            let value_len =
                u32_at(bytes, entry_end).ok_or_else(|| bad("value block truncated".into()))?;
            let crc =
                u32_at(bytes, entry_end + 4).ok_or_else(|| bad("value block truncated".into()))?;
            entry_end += INDEX_VALUE_BLOCK_TAIL_BYTES;
            let page = u64_from_usize(BLOCK_ALIGN_BYTES);
            if value_len == 0
                || value_len as usize > VALUE_BYTES_MAX
                || len_bytes != u64::from(value_len).next_multiple_of(page)
                || !offset.is_multiple_of(page)
            {
                return Err(bad(format!(
                    "value block of {value_len} bytes at {offset}, {len_bytes} bytes long, is impossible"
                )));
            }
            Some((value_len, crc))
        } else {
            None
        };
        if offset != next_block_offset {
            return Err(bad(format!(
                "block offset {offset}, expected {next_block_offset}"
            )));
        }
        if !(u64_from_usize(BLOCK_BYTES_MIN)..=u64_from_usize(BLOCK_BYTES_MAX)).contains(&len_bytes)
        {
            return Err(bad(format!("block length {len_bytes} is out of range")));
        }
        if first_key.is_empty() || first_key.len() > KEY_BYTES_MAX {
            return Err(bad(format!("first key length {key_len} is out of range")));
        }
        if !(lsn_min..=lsn_max).contains(&first_lsn) {
            return Err(bad(format!(
                "first LSN {first_lsn} is outside the layer's {lsn_min}..={lsn_max}"
            )));
        }
        if let Some(prev) = index.last() {
            if (prev.first_key, prev.first_lsn) >= (first_key, first_lsn) {
                return Err(bad("first keys are not ascending".into()));
            }
        }
        if !index.key_fits(first_key.len()) {
            return Err(bad("the first keys exceed 4 GiB together".into()));
        }
        next_block_offset = offset
            .checked_add(len_bytes)
            .ok_or_else(|| bad("block end overflows".into()))?;
        index.push(BlockHandle {
            first_key,
            first_lsn,
            offset,
            len_bytes,
            value_block,
        });
        pos = entry_end;
    }
    if pos != bytes.len() {
        return Err(corrupt(
            path,
            index_offset + u64_from_usize(pos),
            "trailing bytes after the last index entry",
        ));
    }
    if next_block_offset != index_offset {
        return Err(corrupt(
            path,
            index_offset,
            format!("data blocks end at {next_block_offset}, but the block index starts at {index_offset}"),
        ));
    }
    index.shrink_to_fit();
    Ok(index)
}

/// Decodes the key range section: (key_min, key_max).
fn decode_keys(bytes: &[u8], path: &Path, offset: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    let bad = |what: &str| corrupt(path, offset, format!("key range: {what}"));
    let min_len = u16_at(bytes, KEYS_MIN_LEN_OFFSET).ok_or_else(|| bad("truncated"))? as usize;
    let max_len = u16_at(bytes, KEYS_MAX_LEN_OFFSET).ok_or_else(|| bad("truncated"))? as usize;
    if min_len > KEY_BYTES_MAX
        || max_len > KEY_BYTES_MAX
        || KEYS_HEADER_BYTES + min_len + max_len != bytes.len()
    {
        return Err(bad("key lengths disagree with the section length"));
    }
    let key_min = bytes[KEYS_HEADER_BYTES..KEYS_HEADER_BYTES + min_len].to_vec();
    let key_max = bytes[KEYS_HEADER_BYTES + min_len..].to_vec();
    if key_min > key_max {
        return Err(bad("key_min is greater than key_max"));
    }
    Ok((key_min, key_max))
}

/// The fixed part of a decoded entry; its key is [`BlockCursor::key`].
struct EntryMeta {
    lsn: Lsn,
    kind: ValueKind,
    /// The value's bytes in [`BlockCursor::bytes`].
    value: Range<usize>,
    /// Its key differs from the previous entry's (for the block's first
    /// entry: unless `BlockCursor::continues_key`).
    new_key: bool,
}

/// Walks the entries of one verified data block, checking each.
struct BlockCursor {
    /// The whole block, header (and padding) included; shared with the cache.
    bytes: Block,
    /// The end of the entries in `bytes` (the restart array, then the
    /// padding follow).
    end: usize,
    /// Where the block's restart array is in `bytes` (format version 6;
    /// empty before, and for a block of fewer than `RESTART_INTERVAL + 1`
    /// entries).
    restarts: Range<usize>,
    /// The block's entry count.
    entry_count: u32,
    path: Arc<Path>,
    block_offset: u64,
    /// Position of the next entry in `bytes`.
    pos: usize,
    /// Entries not yet decoded.
    remaining: u32,
    /// Key and LSN of the last decoded entry.
    key: Vec<u8>,
    lsn: Lsn,
    /// The index of the block's layer, and the block's number in it: the
    /// first entry must be the index's (first key, first LSN), and every
    /// entry sorts below the next block's, so entries ascend across blocks
    /// too.
    index: Arc<BlockIndex>,
    block: usize,
    /// Until the first entry is checked against the index.
    first_pending: bool,
    /// A value block: one put, `key` at `lsn`, whose value is `bytes[..end]`.
    value_block: bool,
    /// The block before this one ends with the key this one starts with (a
    /// scan that counts distinct keys sets it).
    continues_key: bool,
}

impl BlockCursor {
    fn key(&self) -> &[u8] {
        &self.key
    }

    /// The block offset of restart point `number` (1 or more) from the
    /// restart array, if the block has it.
    fn restart_offset(&self, number: u32) -> Option<usize> {
        let at = self.restarts.start + (number as usize).checked_sub(1)? * RESTART_OFFSET_BYTES;
        if at >= self.restarts.end {
            return None;
        }
        u32_at(&self.bytes, at).map(|o| o as usize)
    }

    /// The (key, LSN) of the entry at restart point `number` (1 or more),
    /// checked as far as reading them needs: within the entries, `shared`
    /// 0, a key length in range.
    fn restart_key(&self, number: u32) -> Result<(&[u8], Lsn)> {
        let pos = self.restart_offset(number).unwrap_or(0);
        let at = self.block_offset + u64_from_usize(pos);
        let bad = |what: &str| {
            corrupt(
                &self.path,
                at,
                format!("data block restart point {number}: {what}"),
            )
        };
        if pos < BLOCK_HEADER_BYTES || pos + ENTRY_HEADER_BYTES > self.end {
            return Err(bad("its offset is outside the block's entries"));
        }
        let header = &self.bytes[pos..pos + ENTRY_HEADER_BYTES];
        let shared = u16_at(header, ENTRY_SHARED_LEN_OFFSET).unwrap_or(0);
        let key_len = u16_at(header, ENTRY_SUFFIX_LEN_OFFSET).unwrap_or(0) as usize;
        let lsn = u64_at(header, ENTRY_LSN_OFFSET).unwrap_or(0);
        let key_start = pos + ENTRY_HEADER_BYTES;
        if shared != 0 || key_len == 0 || key_len > KEY_BYTES_MAX || key_start + key_len > self.end
        {
            return Err(bad("its entry is not a whole key"));
        }
        Ok((&self.bytes[key_start..key_start + key_len], lsn))
    }

    /// Moves a cursor that has not stepped yet to the last restart point
    /// whose (key, LSN) is at most (`key`, `lsn`), by binary search over
    /// the restart array, so that [`Self::advance`] walks at most
    /// `RESTART_INTERVAL` entries to the newest version of `key` at or
    /// below `lsn`. Stays at the first entry when no later restart point
    /// is at most the key, or the block has none. A restart point it
    /// starts from must sort above the block's first entry (the index's).
    fn seek_restart(&mut self, key: &[u8], lsn: Lsn) -> Result<()> {
        if self.restarts.is_empty() || !self.first_pending {
            return Ok(());
        }
        let points = 1 + (self.restarts.len() / RESTART_OFFSET_BYTES) as u32;
        // Restart `lo` is at most the key (0: assumed), `hi` above it.
        let (mut lo, mut hi) = (0u32, points);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.restart_key(mid)? <= (key, lsn) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return Ok(());
        }
        let start = self.restart_key(lo)?;
        if self
            .index
            .first_entry(self.block)
            .is_none_or(|first| start <= first)
        {
            let at = self.block_offset + u64_from_usize(self.restart_offset(lo).unwrap_or(0));
            return Err(corrupt(
                &self.path,
                at,
                format!(
                    "data block restart point {lo} does not sort above the block's first entry"
                ),
            ));
        }
        // From here the walk is the block's from entry lo × RESTART_INTERVAL:
        // no key before it (a restart point shares none), its order then
        // checked entry by entry.
        self.pos = self.restart_offset(lo).unwrap_or(0);
        self.remaining = self.entry_count - lo * RESTART_INTERVAL;
        self.key.clear();
        self.lsn = 0;
        self.first_pending = false;
        Ok(())
    }

    /// The next entry, every check made (see [`Self::advance`] and
    /// [`Self::check_meta`]).
    fn next_entry(&mut self) -> Result<Option<EntryMeta>> {
        match self.advance()? {
            Some(raw) => self.check_meta(raw).map(Some),
            None => Ok(None),
        }
    }

    /// Steps to the next entry and checks what a walk over it needs: its
    /// header and key within the block, its key's length, its (key, LSN)
    /// above the entry before it, and the block's first entry against the
    /// index. What is checked only of an entry handed on
    /// ([`Self::check_meta`]): its kind, its value's length, its LSN within
    /// the layer's and its (key, LSN) below the next block's first. A point
    /// search ([`DeltaLayerReader::search_block`]) passes over the entries
    /// before its key with this alone (a pointer block's get walked about
    /// 50 entries at about 270 instructions each, measured with callgrind,
    /// most of a get's CPU), and checks in full the one it returns.
    #[inline]
    fn advance(&mut self) -> Result<Option<RawEntry>> {
        if self.value_block {
            if self.remaining == 0 {
                return Ok(None);
            }
            self.remaining = 0;
            // Its LSN and key are the index's: inside the layer's bounds.
            return Ok(Some(RawEntry {
                at: self.block_offset,
                lsn: self.lsn,
                kind_byte: ValueKind::Put as u8,
                value: 0..self.end,
                new_key: !self.continues_key,
                value_block: true,
            }));
        }
        let at = self.block_offset + u64_from_usize(self.pos);
        if self.remaining == 0 {
            if self.pos != self.end {
                return Err(corrupt(
                    &self.path,
                    at,
                    "trailing bytes after the block's last entry",
                ));
            }
            return Ok(None);
        }
        let bad = |what: String| corrupt(&self.path, at, format!("data block entry: {what}"));
        let header = self
            .bytes
            .get(self.pos..self.pos + ENTRY_HEADER_BYTES)
            .ok_or_else(|| bad("header past the end of the block".into()))?;
        let shared = u16_at(header, ENTRY_SHARED_LEN_OFFSET).unwrap_or(0) as usize;
        let suffix_len = u16_at(header, ENTRY_SUFFIX_LEN_OFFSET).unwrap_or(0) as usize;
        let lsn = u64_at(header, ENTRY_LSN_OFFSET).unwrap_or(0);
        let kind_byte = header[ENTRY_KIND_OFFSET];
        let value_len = u32_at(header, ENTRY_VALUE_LEN_OFFSET).unwrap_or(0) as usize;
        let first = self.first_pending;
        if shared > self.key.len() || (first && shared != 0) {
            return Err(bad(format!(
                "shared prefix {shared} longer than the previous key"
            )));
        }
        let number = self.entry_count - self.remaining;
        if number > 0 && number.is_multiple_of(RESTART_INTERVAL) && self.index.restarts() {
            let listed = self.restart_offset(number / RESTART_INTERVAL);
            if shared != 0 || listed != Some(self.pos) {
                return Err(bad(format!(
                    "entry {number} is a restart point, yet shares {shared} bytes or is not where the restart array says"
                )));
            }
        }
        let key_len = shared + suffix_len;
        if key_len == 0 || key_len > KEY_BYTES_MAX {
            return Err(bad(format!("key length {key_len} out of range")));
        }
        if value_len > VALUE_BYTES_MAX {
            return Err(bad(format!("value length {value_len} is invalid")));
        }
        let suffix_start = self.pos + ENTRY_HEADER_BYTES;
        let value_start = suffix_start + suffix_len;
        let end = value_start + value_len;
        if end > self.end {
            return Err(bad("runs past the end of the block".into()));
        }
        let suffix = &self.bytes[suffix_start..value_start];
        let mut new_key = !self.continues_key;
        if !first {
            let key_order = suffix.cmp(&self.key[shared..]);
            if key_order.then(lsn.cmp(&self.lsn)) != Ordering::Greater {
                return Err(bad("entries are not in ascending (key, lsn) order".into()));
            }
            new_key = key_order != Ordering::Equal;
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(suffix);
        self.lsn = lsn;
        if first {
            self.first_pending = false;
            if self.index.first_entry(self.block) != Some((&self.key[..], lsn)) {
                return Err(bad("first entry differs from the block index".into()));
            }
        }
        self.pos = end;
        self.remaining -= 1;
        Ok(Some(RawEntry {
            at,
            lsn,
            kind_byte,
            value: value_start..end,
            new_key,
            value_block: false,
        }))
    }

    /// The rest of the checks of the entry [`Self::advance`] just stepped
    /// to (the cursor's key and LSN are its own): its kind and value length,
    /// its LSN within the layer's, and that it sorts below the next block's
    /// first entry (or, in the last block, that its key is within the
    /// layer's `key_max`).
    fn check_meta(&self, raw: RawEntry) -> Result<EntryMeta> {
        let RawEntry {
            at,
            lsn,
            kind_byte,
            value,
            new_key,
            value_block,
        } = raw;
        if value_block {
            return Ok(EntryMeta {
                lsn,
                kind: ValueKind::Put,
                value,
                new_key,
            });
        }
        let bad = |what: String| corrupt(&self.path, at, format!("data block entry: {what}"));
        let kind = ValueKind::from_u8(kind_byte)
            .ok_or_else(|| bad(format!("unknown kind {kind_byte}")))?;
        let value_len = value.len();
        if (kind == ValueKind::Delete && value_len != 0)
            || (kind == ValueKind::Pointer && value_len != crate::value::POINTER_BYTES)
        {
            return Err(bad(format!(
                "value length {value_len} is invalid for {kind:?}"
            )));
        }
        let (lsn_min, lsn_max) = self.index.lsns();
        if lsn < lsn_min || lsn > lsn_max {
            return Err(bad(format!(
                "LSN {lsn} is outside the layer's {lsn_min}..={lsn_max}"
            )));
        }
        match self.index.first_entry(self.block + 1) {
            Some(next) => {
                if (&self.key[..], lsn) >= next {
                    return Err(bad(
                        "entry does not sort below the next block's first entry".into(),
                    ));
                }
            }
            // The last block: nothing after it bounds its keys but the
            // layer's key_max (the keys of the others lie below the last
            // block's first key, which open checked against key_max).
            None => {
                if self.key.as_slice() > self.index.key_max() {
                    return Err(bad("key is above the layer's key_max".into()));
                }
            }
        }
        Ok(EntryMeta {
            lsn,
            kind,
            value,
            new_key,
        })
    }
}

/// An entry [`BlockCursor::advance`] stepped to, before
/// [`BlockCursor::check_meta`].
struct RawEntry {
    /// Its offset in the file (for errors).
    at: u64,
    lsn: Lsn,
    kind_byte: u8,
    value: Range<usize>,
    new_key: bool,
    value_block: bool,
}

/// The scan state shared by the borrowing and the owning range iterators.
/// A scan's first read-ahead (see `BlockScan::window_bytes`).
const READAHEAD_FIRST_BYTES: usize = 16 << 10;

struct BlockScan<P> {
    reader: P,
    /// The next block to read.
    next_block: usize,
    block: Option<BlockCursor>,
    /// Raw bytes of the blocks from `next_block` on, read ahead together
    /// (not yet verified: each is parsed when its turn comes).
    ahead: std::collections::VecDeque<Block>,
    /// Most bytes of blocks to read in one read; 0: one block per read.
    readahead_bytes: usize,
    /// The next read's size: from `READAHEAD_FIRST_BYTES`, doubling up to
    /// `readahead_bytes`, so a short scan reads little.
    window_bytes: usize,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Set at the end of the range or after an error.
    done: bool,
    /// A scan of the whole layer (unbounded on both sides, as compaction's
    /// and images' reads are): at its end, the entries and the distinct
    /// keys it saw must be the footer's counts.
    whole: Option<Seen>,
    /// Where the bytes of the data blocks it reads from the file are added
    /// (a compaction's input bytes); `None`: not counted.
    read_bytes: Option<Arc<AtomicU64>>,
}

/// What a scan of a whole layer has seen so far.
#[derive(Default)]
struct Seen {
    entries: u64,
    keys: u64,
    /// The next block starts with the key the last one ended with.
    key_continues: bool,
}

impl<R: ReadAt, P: Deref<Target = DeltaLayerReader<R>>> BlockScan<P> {
    fn new(reader: P, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Self {
        let index = &reader.index;
        let all = 0..index.len();
        // The first block that can hold an entry in range: the versions of the
        // start key may begin in the block before the one whose first key it is.
        let next_block = match start {
            Bound::Unbounded => 0,
            Bound::Included(s) => index.partition_point(all, |k, _| k < s).saturating_sub(1),
            Bound::Excluded(s) => index.partition_point(all, |k, _| k <= s).saturating_sub(1),
        };
        let empty = match (start, end) {
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e) | Bound::Included(e)) => {
                s >= e
            }
            _ => false,
        };
        let start = start.map(<[u8]>::to_vec);
        let end = end.map(<[u8]>::to_vec);
        // A range that misses the layer's key range reads nothing.
        let summary = &reader.summary;
        let misses = index.is_empty()
            || !before_end(&end, &summary.key_min)
            || !after_start(&start, &summary.key_max);
        BlockScan {
            next_block,
            block: None,
            ahead: std::collections::VecDeque::new(),
            readahead_bytes: 0,
            window_bytes: READAHEAD_FIRST_BYTES,
            whole: matches!((&start, &end), (Bound::Unbounded, Bound::Unbounded))
                .then(Seen::default),
            read_bytes: None,
            start,
            end,
            done: empty || misses,
            reader,
        }
    }

    /// The end of a whole-layer scan: what it saw against the footer.
    fn check_counts(&self) -> Result<()> {
        let (Some(seen), summary) = (&self.whole, &self.reader.summary) else {
            return Ok(());
        };
        if (seen.entries, seen.keys) != (summary.entries, summary.distinct_keys) {
            let footer = summary.file_bytes - u64_from_usize(FOOTER_BYTES);
            return Err(corrupt(
                &self.reader.path,
                footer + u64_from_usize(FOOTER_ENTRY_COUNT_OFFSET),
                format!(
                    "the footer counts {} entries of {} keys, the layer holds {} of {}",
                    summary.entries, summary.distinct_keys, seen.entries, seen.keys
                ),
            ));
        }
        Ok(())
    }

    fn next_item(&mut self) -> Result<Option<DeltaEntry>> {
        self.next_with(|block, entry| {
            let value = block.bytes[entry.value.clone()].to_vec();
            (block.key.clone(), entry.lsn, entry.kind, value)
        })
    }

    /// The next entry in range, as `take` makes it of the block it is in
    /// (every entry checked as it is stepped over, whatever `take` keeps).
    fn next_with<T>(
        &mut self,
        take: impl FnOnce(&BlockCursor, &EntryMeta) -> T,
    ) -> Result<Option<T>> {
        loop {
            let block = match &mut self.block {
                Some(block) => block,
                None => {
                    let Some(handle) = self.reader.index.get(self.next_block) else {
                        self.check_counts()?;
                        return Ok(None);
                    };
                    if !before_end(&self.end, handle.first_key) {
                        return Ok(None);
                    }
                    let len_bytes = handle.len_bytes;
                    if self.ahead.is_empty() && self.readahead_bytes > 0 {
                        self.read_ahead()?;
                    }
                    // A block read ahead that fails its check is read
                    // again alone.
                    let (bytes, read_now) = match self.ahead.pop_front() {
                        Some(bytes) => (BlockBytes::Read(bytes), 0),
                        None => (BlockBytes::Unread, len_bytes),
                    };
                    let mut block = self.reader.verified_block(self.next_block, bytes, false)?;
                    self.count_read(read_now);
                    block.continues_key = self.whole.as_ref().is_some_and(|s| s.key_continues);
                    self.next_block += 1;
                    self.block.insert(block)
                }
            };
            let Some(entry) = block.next_entry()? else {
                if let Some(seen) = &mut self.whole {
                    seen.key_continues = self
                        .reader
                        .index
                        .first_entry(self.next_block)
                        .is_some_and(|(first, _)| first == block.key());
                }
                self.block = None;
                continue;
            };
            if let Some(seen) = &mut self.whole {
                seen.entries += 1;
                seen.keys += u64::from(entry.new_key);
            }
            let key = block.key();
            if !before_end(&self.end, key) {
                return Ok(None);
            }
            if after_start(&self.start, key) {
                return Ok(Some(take(block, &entry)));
            }
        }
    }

    /// Reads the blocks from `next_block` on, up to `readahead_bytes` (at
    /// least one block), in one read, into `ahead`. Blocks are contiguous.
    fn read_ahead(&mut self) -> Result<()> {
        let index = &self.reader.index;
        let Some(first) = index.get(self.next_block) else {
            return Ok(());
        };
        let mut end = self.next_block + 1;
        let mut bytes = first.len_bytes;
        while let Some(h) = index.get(end) {
            let window = self.window_bytes.min(self.readahead_bytes) as u64;
            if bytes + h.len_bytes > window || !before_end(&self.end, h.first_key) {
                break;
            }
            bytes += h.len_bytes;
            end += 1;
        }
        self.window_bytes = self.window_bytes.saturating_mul(2);
        let all = read_checked(&self.reader.file, first.offset, bytes, "data blocks")?;
        self.count_read(bytes);
        let mut at = 0usize;
        for h in (self.next_block..end).filter_map(|i| index.get(i)) {
            let len = h.len_bytes as usize;
            self.ahead.push_back(Block::from(&all[at..at + len]));
            at += len;
        }
        Ok(())
    }

    /// Adds `bytes` read from the file to `read_bytes`, if counted.
    fn count_read(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        if let Some(counter) = &self.read_bytes {
            counter.fetch_add(bytes, AtomicOrdering::Relaxed);
        }
    }

    fn next(&mut self) -> Option<Result<DeltaEntry>> {
        if self.done {
            return None;
        }
        let item = self.next_item().transpose();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
            self.block = None;
        }
        item
    }
}

fn after_start(start: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match start {
        Bound::Unbounded => true,
        Bound::Included(s) => key >= s.as_slice(),
        Bound::Excluded(s) => key > s.as_slice(),
    }
}

fn before_end(end: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match end {
        Bound::Unbounded => true,
        Bound::Included(e) => key <= e.as_slice(),
        Bound::Excluded(e) => key < e.as_slice(),
    }
}

/// A range scan borrowing its reader. Yields `(key, lsn, kind, value)`
/// ascending by (key, lsn); after an error it yields nothing more.
#[cfg_attr(not(test), allow(dead_code))] // used by tests
pub(crate) struct DeltaRangeIter<'a, R: ReadAt> {
    scan: BlockScan<&'a DeltaLayerReader<R>>,
}

impl<R: ReadAt> Iterator for DeltaRangeIter<'_, R> {
    type Item = Result<DeltaEntry>;
    fn next(&mut self) -> Option<Self::Item> {
        self.scan.next()
    }
}

/// A range scan holding its reader in an `Arc`, for scans that outlive a borrow.
pub(crate) struct DeltaRangeIterOwned<R: ReadAt> {
    scan: BlockScan<Arc<DeltaLayerReader<R>>>,
}

impl<R: ReadAt> DeltaRangeIterOwned<R> {
    /// Steps over every entry left in range, each checked as a scan checks
    /// it (and, for a whole-layer scan, the footer's counts at the end),
    /// copying none out: returns how many there were.
    pub(crate) fn check_rest(mut self) -> Result<u64> {
        let mut n = 0;
        while !self.scan.done {
            match self.scan.next_with(|_, _| ()) {
                Ok(Some(())) => n += 1,
                Ok(None) => self.scan.done = true,
                Err(e) => {
                    self.scan.done = true;
                    return Err(e);
                }
            }
        }
        Ok(n)
    }

    /// Reads up to `bytes` of consecutive blocks at a time (sequential
    /// scans, compaction), instead of one block per read.
    pub(crate) fn with_readahead(mut self, bytes: usize) -> Self {
        self.scan.readahead_bytes = bytes;
        self
    }

    /// Adds the bytes of the data blocks it reads from the file to
    /// `counter` (not blocks read again after a failed check: those are
    /// the io layer's read retries).
    pub(crate) fn count_reads(mut self, counter: Arc<AtomicU64>) -> Self {
        self.scan.read_bytes = Some(counter);
        self
    }
}

impl<R: ReadAt> Iterator for DeltaRangeIterOwned<R> {
    type Item = Result<DeltaEntry>;
    fn next(&mut self) -> Option<Self::Item> {
        self.scan.next()
    }
}
