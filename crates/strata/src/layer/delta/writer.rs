//! Builds a delta layer file from entries given in ascending (key, lsn) order.
//!
//! Called by the flush of a frozen in-memory layer (L0) and by compaction. The
//! writer streams: it holds one data block, the encoded block index and one
//! 8-byte hash per distinct key (for the bloom filter) in memory, and appends
//! each finished block to its [`LayerSink`] in one call.
//!
//! Invariants: entries are strictly ascending by (key, lsn) — an entry that is
//! not is refused with an error and nothing is written for it; a block is
//! closed before it would exceed the target size (with a page-multiple
//! target: before it would cross the page boundary, then padded to it, or,
//! where that would waste more than an eighth of the page, at the end of
//! the next page, unpadded, the next block then running to the end of the
//! page after the one it starts in: `take_next_page`, `finish_block`), and
//! an entry larger than the target gets a block of its own (closed by the
//! next `add` or `finish`, which know whether a value block follows it). With a page-multiple target, a
//! put whose value alone takes fewer pages than its entry would is written
//! as a value block (`value_block_saves_a_page`): the block before it is
//! padded to the page boundary, so the value starts on one (except as the
//! file's first entry, after the 24-byte header: that one is an entry).
//! From format version 6, every `RESTART_INTERVAL`-th entry of a block is
//! a restart point (its key whole, not prefix-compressed) and the block's
//! payload ends with the restart array; a block's size counts it.
//! After the sink fails, the writer refuses every further call (the file
//! is incomplete and must be discarded).
//!
//! Thread-safety: a writer is used by one thread at a time (`Send` when the
//! sink is).

use std::cmp::Ordering;

use super::value_block_crc;
use super::{
    block_crc, u64_from_usize, DeltaLayerSummary, LayerSink, Lsn, ValueKind, BLOCK_ALIGN_BYTES,
    BLOCK_BYTES_TARGET_MAX, BLOCK_BYTES_TARGET_MIN, BLOCK_COUNT_MAX, BLOCK_CRC_OFFSET,
    BLOCK_ENTRY_COUNT_OFFSET, BLOCK_HEADER_BYTES, BLOCK_PAD_BYTES_MAX, BLOCK_PAYLOAD_LEN_OFFSET,
    DELTA_FORMAT_VERSION, ENTRY_HEADER_BYTES, ENTRY_KIND_OFFSET, ENTRY_LSN_OFFSET,
    ENTRY_SHARED_LEN_OFFSET, ENTRY_SUFFIX_LEN_OFFSET, ENTRY_VALUE_LEN_OFFSET, FOOTER_BYTES,
    FOOTER_CRC_OFFSET, FOOTER_MAGIC, HEADER_BYTES, HEADER_CRC_OFFSET, HEADER_MAGIC,
    INDEX_VALUE_BLOCK_FLAG, RESTARTS_FORMAT_VERSION, RESTART_INTERVAL, VALUE_BYTES_MAX,
};
use super::{restart_array_bytes, restarts_after_first};
use crate::codec::{put_u16, put_u32, put_u64, write_u32_at};
use crate::error::{Error, InvalidInput, Result};
use crate::layer::bloom::{bloom_hash, BloomFilter, BloomLayout};

/// Writes one delta layer file. See the module documentation.
pub(crate) struct DeltaLayerWriter<S: LayerSink> {
    sink: S,
    /// In `BLOCK_BYTES_TARGET_MIN..=BLOCK_BYTES_TARGET_MAX`.
    block_bytes_target: usize,
    /// Bytes appended to the sink so far: the file offset of the next block.
    offset: u64,
    /// The open block: `BLOCK_HEADER_BYTES` reserved for its header, then the payload.
    block: Vec<u8>,
    /// Entries in the open block.
    block_entries: u32,
    /// Block offsets of the open block's restart points after its first
    /// (format version 6, see `RESTART_INTERVAL`).
    restarts: Vec<u32>,
    /// The format version written has restart points.
    restarts_on: bool,
    /// Set when the open (aligned) block takes the page after its first
    /// too (see `take_next_page`), or starts off a page boundary after an
    /// unpadded two-page block (see `finish_block`).
    block_two_pages: bool,
    /// Set when the open block holds an entry larger than the target: no
    /// other entry joins it.
    block_full: bool,
    /// First key and LSN of the open block; meaningful when `block_entries > 0`.
    block_first_key: Vec<u8>,
    block_first_lsn: Lsn,
    /// The encoded block index of the blocks written so far.
    index: Vec<u8>,
    block_count: u64,
    /// The last entry added; meaningful when `entries > 0`.
    last_key: Vec<u8>,
    last_lsn: Lsn,
    key_min: Vec<u8>,
    lsn_min: Lsn,
    lsn_max: Lsn,
    entries: u64,
    /// One `bloom_hash` per distinct key.
    key_hashes: Vec<u64>,
    /// Set when the sink failed: the file is incomplete.
    failed: bool,
    /// The format version written: `DELTA_FORMAT_VERSION`, or an older one
    /// (its bloom filter layout) for tests that make older files.
    format_version: u32,
    /// Most zero bytes a value block may need before it (the open block
    /// padded to the page); a value that would need more is an entry.
    value_block_pad_max: usize,
}

impl<S: LayerSink> DeltaLayerWriter<S> {
    /// Starts a file on `sink` (appends its header) with data blocks of about
    /// `block_size_bytes`.
    pub(crate) fn new(sink: S, block_size_bytes: usize) -> Result<Self> {
        Self::with_format_version(sink, block_size_bytes, DELTA_FORMAT_VERSION)
    }

    /// [`Self::new`] writing format `version` (3 or 4: the bloom filter's
    /// layout; what else a version changes, tests patch in themselves).
    pub(crate) fn with_format_version(
        mut sink: S,
        block_size_bytes: usize,
        format_version: u32,
    ) -> Result<Self> {
        if !(BLOCK_BYTES_TARGET_MIN..=BLOCK_BYTES_TARGET_MAX).contains(&block_size_bytes) {
            return Err(InvalidInput::OptionOutOfRange {
                option: "block_size_bytes",
                value: u64_from_usize(block_size_bytes),
                why: "the delta layer block size is BLOCK_BYTES_TARGET_MIN..=BLOCK_BYTES_TARGET_MAX (64 B..=16 MiB)",
            }
            .into());
        }
        let mut header = Vec::with_capacity(HEADER_BYTES);
        header.extend_from_slice(&HEADER_MAGIC);
        put_u32(&mut header, format_version);
        put_u32(&mut header, 0); // flags
        put_u32(&mut header, block_size_bytes as u32); // <= BLOCK_BYTES_TARGET_MAX
        debug_assert_eq!(header.len(), HEADER_CRC_OFFSET);
        let crc = crate::crc::crc32c(&header);
        put_u32(&mut header, crc);
        debug_assert_eq!(header.len(), HEADER_BYTES);
        sink.append(&header)?;

        let mut block = Vec::with_capacity(BLOCK_HEADER_BYTES + block_size_bytes);
        block.resize(BLOCK_HEADER_BYTES, 0);
        Ok(DeltaLayerWriter {
            sink,
            block_bytes_target: block_size_bytes,
            offset: u64_from_usize(HEADER_BYTES),
            block,
            block_entries: 0,
            restarts: Vec::new(),
            restarts_on: format_version >= RESTARTS_FORMAT_VERSION,
            block_two_pages: false,
            block_full: false,
            block_first_key: Vec::new(),
            block_first_lsn: 0,
            index: Vec::new(),
            block_count: 0,
            last_key: Vec::new(),
            last_lsn: 0,
            key_min: Vec::new(),
            lsn_min: Lsn::MAX,
            lsn_max: 0,
            entries: 0,
            key_hashes: Vec::new(),
            failed: false,
            format_version,
            value_block_pad_max: super::BLOCK_PAD_BEFORE_VALUE_BLOCK_MAX,
        })
    }

    /// Makes room for the filter's hashes of `keys` distinct keys at once
    /// (a hint: the writer takes any number). A flush knows its layer's
    /// keys: the hashes' vector, 8 bytes a key, otherwise grows by copies,
    /// each into fresh pages that fault one by one (the flush thread's
    /// page faults were two thirds of a 100-byte ingest's after the log
    /// writer's buffers were kept; a quarter of them in these copies).
    pub(crate) fn reserve_keys(&mut self, keys: usize) {
        let more = keys.saturating_sub(self.key_hashes.len());
        self.key_hashes.reserve_exact(more);
        let spare = self.key_hashes.spare_capacity_mut();
        crate::prefetch::populate_pages(spare.as_ptr().cast(), std::mem::size_of_val(spare));
    }

    /// Adds an entry. Entries must come in ascending (key, lsn) order,
    /// strictly: a duplicate (key, lsn) or an out-of-order entry is an error,
    /// and the writer stays usable.
    pub(crate) fn add(
        &mut self,
        key: &[u8],
        lsn: Lsn,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<()> {
        self.check_not_failed()?;
        crate::types::check_key(key)?;
        if value.len() > VALUE_BYTES_MAX {
            return Err(InvalidInput::ValueTooLarge {
                len: value.len(),
                max: VALUE_BYTES_MAX,
            }
            .into());
        }
        if kind == ValueKind::Delete && !value.is_empty() {
            return Err(InvalidInput::ValueTooLarge {
                len: value.len(),
                max: 0,
            }
            .into());
        }
        if kind == ValueKind::Pointer && value.len() != crate::value::POINTER_BYTES {
            return Err(Error::Internal(format!(
                "a value pointer of {} bytes added to a delta layer",
                value.len()
            )));
        }
        let new_key = if self.entries == 0 {
            true
        } else {
            match key.cmp(&self.last_key) {
                Ordering::Greater => true,
                Ordering::Equal if lsn > self.last_lsn => false,
                // The engine hands the writer keys ascending, each key's
                // versions by LSN: anything else is a bug upstream, refused
                // before it is sealed into a file.
                Ordering::Equal => {
                    return Err(Error::Internal(format!(
                        "delta layer entry {}: LSN {lsn} of a key not above its LSN {} before",
                        self.entries, self.last_lsn
                    )));
                }
                Ordering::Less => {
                    return Err(Error::Internal(format!(
                        "delta layer entry {}: a key below the key before it",
                        self.entries
                    )))
                }
            }
        };

        let entry_full_bytes = ENTRY_HEADER_BYTES + key.len() + value.len();
        if self.value_block_saves_a_page(key.len(), kind, value.len())
            && self.pad_before_value_block() <= self.value_block_pad_max
        {
            // The open block ends on the page boundary: the value starts there.
            self.finish_block(true, None)?;
            if self
                .offset
                .is_multiple_of(u64_from_usize(BLOCK_ALIGN_BYTES))
            {
                self.push_value_block(key, lsn, value)?;
            } else {
                // The file's first entry, right after the header.
                self.push_entry(key, lsn, kind, value);
                self.block_full = true;
            }
        } else if entry_full_bytes > self.block_bytes_target {
            // Too large to share a block: it gets one of its own.
            self.finish_block(false, None)?;
            self.push_entry(key, lsn, kind, value);
            self.block_full = true;
        } else {
            let mut shared = self.shared_prefix_bytes(key);
            let entry_bytes = entry_full_bytes - shared;
            if self.block_full {
                self.finish_block(false, None)?;
                shared = 0;
            } else if self.block_entries > 0
                && self.block.len() + entry_bytes + self.restart_array_bytes(self.block_entries + 1)
                    > self.block_bytes_limit()
            {
                if self.take_next_page(entry_bytes) {
                    self.block_two_pages = true;
                } else {
                    self.finish_block(false, Some(entry_bytes))?;
                    shared = 0;
                }
            }
            self.push_entry_sharing(key, shared, lsn, kind, value);
        }

        if self.entries == 0 {
            self.key_min.extend_from_slice(key);
        }
        if new_key {
            self.key_hashes.push(bloom_hash(key));
        }
        // `last_key` is the key just pushed (`push_entry`, `push_value_block`).
        debug_assert_eq!(self.last_key, key);
        self.last_lsn = lsn;
        self.lsn_min = self.lsn_min.min(lsn);
        self.lsn_max = self.lsn_max.max(lsn);
        self.entries += 1;
        Ok(())
    }

    /// Writes the last block, the block index, the bloom filter, the key range
    /// and the footer; returns the sink and what the file holds.
    pub(crate) fn finish(mut self) -> Result<(S, DeltaLayerSummary)> {
        self.check_not_failed()?;
        self.finish_block(false, None)?;

        let index_offset = self.offset;
        let index = std::mem::take(&mut self.index);
        let index_crc = crate::crc::crc32c(&index);
        self.append(&index)?;

        let bloom_offset = self.offset;
        let mut bloom = Vec::new();
        BloomFilter::build(
            BloomLayout::of_format_version(self.format_version),
            &self.key_hashes,
        )
        .encode(&mut bloom);
        let bloom_crc = crate::crc::crc32c(&bloom);
        self.append(&bloom)?;

        let keys_offset = self.offset;
        let (key_max, lsn_min) = if self.entries == 0 {
            (Vec::new(), 0)
        } else {
            (std::mem::take(&mut self.last_key), self.lsn_min)
        };
        let mut keys = Vec::with_capacity(4 + self.key_min.len() + key_max.len());
        put_u16(&mut keys, self.key_min.len() as u16); // <= KEY_BYTES_MAX
        put_u16(&mut keys, key_max.len() as u16);
        keys.extend_from_slice(&self.key_min);
        keys.extend_from_slice(&key_max);
        let keys_crc = crate::crc::crc32c(&keys);
        self.append(&keys)?;

        let mut footer = Vec::with_capacity(FOOTER_BYTES);
        for field in [
            self.entries,
            u64_from_usize(self.key_hashes.len()),
            self.block_count,
            lsn_min,
            self.lsn_max,
            index_offset,
            u64_from_usize(index.len()),
            bloom_offset,
            u64_from_usize(bloom.len()),
            keys_offset,
            u64_from_usize(keys.len()),
        ] {
            put_u64(&mut footer, field);
        }
        for field in [
            index_crc,
            bloom_crc,
            keys_crc,
            0, /* flags */
            FOOTER_BYTES as u32,
            self.format_version,
        ] {
            put_u32(&mut footer, field);
        }
        footer.extend_from_slice(&FOOTER_MAGIC);
        debug_assert_eq!(footer.len(), FOOTER_CRC_OFFSET);
        let crc = crate::crc::crc32c(&footer);
        put_u32(&mut footer, crc);
        debug_assert_eq!(footer.len(), FOOTER_BYTES);
        self.append(&footer)?;

        let summary = DeltaLayerSummary {
            key_min: std::mem::take(&mut self.key_min),
            key_max,
            lsn_min,
            lsn_max: self.lsn_max,
            entries: self.entries,
            distinct_keys: u64_from_usize(self.key_hashes.len()),
            blocks: self.block_count,
            file_bytes: self.offset,
        };
        Ok((self.sink, summary))
    }

    fn check_not_failed(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Poisoned(
                "the delta layer writer's sink failed earlier; the file is incomplete".into(),
            ));
        }
        Ok(())
    }

    /// Bytes `key` shares with the previous entry of the open block (none
    /// at a restart point).
    fn shared_prefix_bytes(&self, key: &[u8]) -> usize {
        if self.at_restart() {
            return 0;
        }
        common_prefix_len(key, &self.last_key)
    }

    /// Whether the next entry of the open block is a restart point: the
    /// block's first, or (format version 6) every `RESTART_INTERVAL`-th.
    fn at_restart(&self) -> bool {
        self.block_entries == 0
            || (self.restarts_on && self.block_entries.is_multiple_of(RESTART_INTERVAL))
    }

    /// Bytes of the restart array of a block of `entries` entries: none
    /// before format version 6.
    fn restart_array_bytes(&self, entries: u32) -> usize {
        if self.restarts_on {
            restart_array_bytes(entries)
        } else {
            0
        }
    }

    fn push_entry(&mut self, key: &[u8], lsn: Lsn, kind: ValueKind, value: &[u8]) {
        let shared = self.shared_prefix_bytes(key);
        self.push_entry_sharing(key, shared, lsn, kind, value);
    }

    /// [`Self::push_entry`] with the bytes it shares with the previous
    /// entry of the open block (`shared_prefix_bytes`) already counted.
    fn push_entry_sharing(
        &mut self,
        key: &[u8],
        shared: usize,
        lsn: Lsn,
        kind: ValueKind,
        value: &[u8],
    ) {
        debug_assert_eq!(shared, self.shared_prefix_bytes(key));
        if self.block_entries > 0 && self.at_restart() {
            // Blocks are far below 4 GiB (BLOCK_BYTES_MAX).
            self.restarts.push(self.block.len() as u32);
        }
        if self.block_entries == 0 {
            self.block_first_key.clear();
            self.block_first_key.extend_from_slice(key);
            self.block_first_lsn = lsn;
        }
        let suffix = &key[shared..];
        // Lengths were checked against KEY_BYTES_MAX (u16) and VALUE_BYTES_MAX (u32) by `add`.
        // The header is laid out on the stack and appended in one copy (a
        // field at a time cost a capacity check each: a flush of 100-byte
        // puts spent a sixth of its instructions in this function).
        let mut header = [0u8; ENTRY_HEADER_BYTES];
        header[ENTRY_SHARED_LEN_OFFSET..][..2].copy_from_slice(&(shared as u16).to_le_bytes());
        header[ENTRY_SUFFIX_LEN_OFFSET..][..2]
            .copy_from_slice(&(suffix.len() as u16).to_le_bytes());
        header[ENTRY_LSN_OFFSET..][..8].copy_from_slice(&lsn.to_le_bytes());
        header[ENTRY_KIND_OFFSET] = kind as u8;
        header[ENTRY_VALUE_LEN_OFFSET..][..4].copy_from_slice(&(value.len() as u32).to_le_bytes());
        self.block
            .reserve(ENTRY_HEADER_BYTES + suffix.len() + value.len());
        self.block.extend_from_slice(&header);
        self.block.extend_from_slice(suffix);
        self.block.extend_from_slice(value);
        self.block_entries += 1;
        // `last_key` is the previous entry's key while pushing; `add` updates it
        // after, but an own-block entry is finished before that: keep the two in step.
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
    }

    /// Refuses a block past `BLOCK_COUNT_MAX`.
    fn check_block_count(&self) -> Result<()> {
        if self.block_count >= BLOCK_COUNT_MAX {
            return Err(InvalidInput::OptionOutOfRange {
                option: "delta layer size",
                value: self.block_count,
                why: "a delta layer holds at most BLOCK_COUNT_MAX data blocks; flush or compact into smaller layers",
            }
            .into());
        }
        Ok(())
    }

    /// Whether a put of this size is written as a value block: blocks are
    /// aligned, the value alone takes fewer pages than its entry in a block
    /// of its own (a 4 KiB value: one page, not two), and its padding is at
    /// most `BLOCK_PAD_BYTES_MAX` (a small value under a long key stays an
    /// entry).
    /// Zero bytes the open block would be padded with for a value block to
    /// follow it.
    fn pad_before_value_block(&self) -> usize {
        let end = if self.block_entries == 0 {
            self.offset
        } else {
            self.offset
                + u64_from_usize(self.block.len() + self.restart_array_bytes(self.block_entries))
        };
        (end.next_multiple_of(u64_from_usize(BLOCK_ALIGN_BYTES)) - end) as usize
    }

    /// Value blocks only where the block before needs at most `bytes` of
    /// padding (`BLOCK_PAD_BYTES_MAX`: what any block may take), not up to
    /// a page: a compaction's outputs, where values moved out of value
    /// files lie between pointers, would otherwise pad half a page a
    /// value on average (a third more bytes at 8 KiB values).
    pub(crate) fn limit_value_block_padding(&mut self, bytes: usize) {
        self.value_block_pad_max = bytes;
    }

    fn value_block_saves_a_page(&self, key_len: usize, kind: ValueKind, value_len: usize) -> bool {
        let pages = |bytes: usize| bytes.div_ceil(BLOCK_ALIGN_BYTES);
        self.aligned()
            && kind == ValueKind::Put
            && value_len > 0
            && value_len.next_multiple_of(BLOCK_ALIGN_BYTES) - value_len <= BLOCK_PAD_BYTES_MAX
            && pages(value_len)
                < pages(
                    BLOCK_HEADER_BYTES
                        + ENTRY_HEADER_BYTES
                        + key_len
                        + value_len
                        + self.restart_array_bytes(1),
                )
    }

    /// Appends `value` as a value block at the (page-aligned) offset and
    /// records it, with its key, LSN, length and crc32c, in the index.
    fn push_value_block(&mut self, key: &[u8], lsn: Lsn, value: &[u8]) -> Result<()> {
        /// The padding of value blocks.
        static ZEROS: [u8; BLOCK_ALIGN_BYTES] = [0; BLOCK_ALIGN_BYTES];
        debug_assert!(self.block_entries == 0);
        self.check_block_count()?;
        let block_offset = self.offset;
        let padding = &ZEROS[..value.len().next_multiple_of(BLOCK_ALIGN_BYTES) - value.len()];
        let crc = value_block_crc(block_offset, lsn, key, &[value, padding]);
        self.append(value)?;
        self.append(padding)?;
        encode_index_entry(
            &mut self.index,
            block_offset,
            u64_from_usize(value.len() + padding.len()),
            lsn,
            key,
            // At most VALUE_BYTES_MAX (checked by `add`), so a u32.
            Some((value.len() as u32, crc)),
        );
        self.block_count += 1;
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        Ok(())
    }

    /// Closes the open block (if it holds entries): fills its header, appends
    /// it, records it in the index. With `before_value_block`, an aligned
    /// block is padded to the page boundary however far it is (a value
    /// block follows and must start there). `next_entry_bytes`: the size
    /// of the entry that did not fit, which opens the next block.
    fn finish_block(
        &mut self,
        before_value_block: bool,
        next_entry_bytes: Option<usize>,
    ) -> Result<()> {
        self.block_full = false;
        if self.block_entries == 0 {
            return Ok(());
        }
        self.check_block_count()?;
        if self.restarts_on {
            debug_assert_eq!(
                self.restarts.len(),
                restarts_after_first(self.block_entries) as usize
            );
            for &restart in &self.restarts {
                put_u32(&mut self.block, restart);
            }
            put_u32(&mut self.block, self.restarts.len() as u32);
            self.restarts.clear();
        }
        let payload_len = self.block.len() - BLOCK_HEADER_BYTES;
        debug_assert!(payload_len <= super::BLOCK_PAYLOAD_BYTES_MAX);
        let end = self.offset + u64_from_usize(self.block.len());
        let pad = (end.next_multiple_of(u64_from_usize(BLOCK_ALIGN_BYTES)) - end) as usize;
        // A two-page block of entries that fill two pages better than one
        // is not padded: the next block starts where it ends and may reach
        // the end of the page after its first, so it too is one read of
        // two pages, and no byte is wasted (1 KiB entries: 7 to 10% of
        // the file was padding).
        let carry_two_pages = self.block_two_pages
            && pad > 0
            && !before_value_block
            && next_entry_bytes.is_some_and(|e| self.two_pages_suit(e));
        if self.aligned() && !carry_two_pages && (pad <= BLOCK_PAD_BYTES_MAX || before_value_block)
        {
            self.block.resize(self.block.len() + pad, 0);
        }
        self.block_two_pages = carry_two_pages;
        write_u32_at(
            &mut self.block,
            BLOCK_PAYLOAD_LEN_OFFSET,
            payload_len as u32,
        );
        write_u32_at(
            &mut self.block,
            BLOCK_ENTRY_COUNT_OFFSET,
            self.block_entries,
        );
        let crc = block_crc(
            self.offset,
            &self.block[..BLOCK_CRC_OFFSET],
            &self.block[BLOCK_HEADER_BYTES..],
        );
        write_u32_at(&mut self.block, BLOCK_CRC_OFFSET, crc);

        let block_offset = self.offset;
        let block_len = u64_from_usize(self.block.len());
        let block = std::mem::take(&mut self.block);
        let appended = self.append(&block);
        self.block = block;
        appended?;

        encode_index_entry(
            &mut self.index,
            block_offset,
            block_len,
            self.block_first_lsn,
            &self.block_first_key,
            None,
        );
        self.block_count += 1;

        self.block.truncate(BLOCK_HEADER_BYTES);
        self.block_entries = 0;
        Ok(())
    }

    /// Most bytes (header included) the open block may take: up to the page
    /// boundary that ends it when blocks are aligned (the first block starts
    /// after the file header), else the target plus the header.
    fn block_bytes_limit(&self) -> usize {
        if !self.aligned() {
            return BLOCK_HEADER_BYTES + self.block_bytes_target;
        }
        let into_page = (self.offset % u64_from_usize(BLOCK_ALIGN_BYTES)) as usize;
        let limit = self.block_bytes_target - into_page;
        if self.block_two_pages {
            limit + BLOCK_ALIGN_BYTES
        } else {
            limit
        }
    }

    /// Whether the open aligned block, full for an entry of `entry_bytes`,
    /// should take one more page rather than be padded to the end of this
    /// one. Padding wastes the rest of the page: a quarter of it for 1 KiB
    /// entries (3 in a page), and a block not padded leaves the next one
    /// unaligned. So the block goes on into the next page when the rest of
    /// this one is more than an eighth of it, and entries of this size
    /// would leave a smaller share of two pages unused (7 of 1 KiB: a
    /// tenth), a share that is not padded either (`finish_block`): its
    /// reads are then 8 KiB, and the file holds no padding. Entries that
    /// fill a page well (below ~500 B, or 3 KiB) keep one block per page.
    fn take_next_page(&self, entry_bytes: usize) -> bool {
        if !self.aligned() || self.block_two_pages {
            return false;
        }
        let limit = self.block_bytes_limit();
        let used = self.block.len() + self.restart_array_bytes(self.block_entries + 1);
        two_pages_fill_better(limit.saturating_sub(used), entry_bytes)
    }

    /// Whether a block of entries of `entry_bytes`, started on a page
    /// boundary, would take two pages (`take_next_page`).
    fn two_pages_suit(&self, entry_bytes: usize) -> bool {
        let one_page = self.block_bytes_target - BLOCK_HEADER_BYTES;
        self.aligned() && two_pages_fill_better(one_page % entry_bytes.max(1), entry_bytes)
    }

    /// True when blocks are padded to page boundaries (the target is a
    /// multiple of the page).
    fn aligned(&self) -> bool {
        self.block_bytes_target.is_multiple_of(BLOCK_ALIGN_BYTES)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        if let Err(e) = self.sink.append(bytes) {
            self.failed = true;
            return Err(e);
        }
        self.offset += u64_from_usize(bytes.len());
        Ok(())
    }
}

/// Whether a block that has `rest` bytes of its page left, too few for an
/// entry of `entry_bytes`, should take the next page too: the rest is more
/// than an eighth of the page, and entries of this size would leave less
/// of two pages unused (at most `BLOCK_PAD_BYTES_MAX`).
fn two_pages_fill_better(rest: usize, entry_bytes: usize) -> bool {
    if rest * 8 <= BLOCK_ALIGN_BYTES {
        return false;
    }
    let rest_of_two = (rest + BLOCK_ALIGN_BYTES) % entry_bytes.max(1);
    rest_of_two < 2 * rest && rest_of_two <= BLOCK_PAD_BYTES_MAX
}

/// The number of bytes `a` and `b` start with in common, compared eight at
/// a time (a byte at a time was a fifth of the delta writer's `add`).
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let word = |s: &[u8]| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
        let differ = word(a) ^ word(b);
        if differ != 0 {
            // Little-endian: the lowest set bit is in the first byte that differs.
            return i + (differ.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Appends the block index entry of a block at `block_offset` of `block_len`
/// bytes whose first entry is (`first_key`, `first_lsn`); for a value
/// block, `value_block` is its value's (length, crc32c).
pub(crate) fn encode_index_entry(
    index: &mut Vec<u8>,
    block_offset: u64,
    block_len: u64,
    first_lsn: Lsn,
    first_key: &[u8],
    value_block: Option<(u32, u32)>,
) {
    debug_assert!(!first_key.is_empty() && first_key.len() <= super::KEY_BYTES_MAX);
    put_u64(index, block_offset);
    put_u64(index, block_len);
    put_u64(index, first_lsn);
    let flag = if value_block.is_some() {
        INDEX_VALUE_BLOCK_FLAG
    } else {
        0
    };
    put_u16(index, first_key.len() as u16 | flag); // <= KEY_BYTES_MAX
    index.extend_from_slice(first_key);
    if let Some((value_len, crc)) = value_block {
        put_u32(index, value_len);
        put_u32(index, crc);
    }
}

#[cfg(test)]
mod tests {
    use super::common_prefix_len;

    #[test]
    fn common_prefix_len_is_the_bytewise_one() {
        let naive = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let base: Vec<u8> = (0..40u8).collect();
        for len_a in 0..=base.len() {
            for differ_at in 0..=len_a {
                let a = &base[..len_a];
                let mut b = base.clone();
                if differ_at < b.len() {
                    b[differ_at] ^= 0x80;
                }
                for len_b in [0, differ_at, len_a, b.len()] {
                    let b = &b[..len_b.min(b.len())];
                    assert_eq!(
                        common_prefix_len(a, b),
                        naive(a, b),
                        "{len_a} {differ_at} {len_b}"
                    );
                    assert_eq!(common_prefix_len(b, a), naive(b, a));
                }
            }
        }
    }
}
