//! The fuzzing surface: one entry point per on-disk decoder, for the
//! cargo-fuzz targets in `crates/strata/fuzz/` and the stable-toolchain
//! mutation test `tests/fuzz_decoders.rs`. Compiled only with the `fuzzing`
//! feature; not part of the API.
//!
//! Each target function feeds arbitrary bytes to the engine's own decoder,
//! with a dummy file path, and asserts the decoder's contract:
//!
//! - it returns `Ok` or a typed error: a [`Corruption`] that names the dummy
//!   file and an offset inside the bytes it was given, or the one other error
//!   the decoder documents (`UnsupportedVersion`, `NotADatabase` for the
//!   manifest); never a panic, an out-of-bounds slice or an overflow;
//! - it allocates in proportion to its input, never to a length field read
//!   from it (the drivers cap allocations: libFuzzer's `-malloc_limit_mb`,
//!   the stable test's capped global allocator), and it terminates;
//! - where it returns `Ok` and the engine has an encoder, encoding what it
//!   decoded gives back equivalent content: the same bytes where the format
//!   leaves the encoder no choice, the same decoded values otherwise.
//!
//! A panic from a target function is a finding: either an `assert!` here (a
//! property violation) or a panic in the decoder itself.
//!
//! Where the real caller hands a decoder parameters it derived from bytes it
//! has already verified (a data block's handle from the block index, the
//! block count and LSN range from the footer), the input starts with those
//! parameters as a fixed little-endian prefix, and the target applies the
//! same bounds that caller guarantees before it calls the decoder. Missing
//! prefix bytes read as zero, so every input means something.
//!
//! [`Target::seeds`] builds valid inputs with the engine's own writers, so a
//! fuzzer starts from real encodings; [`Target::fix_checksums`] recomputes the
//! checksums of a mutated input so that a mutation-only driver also reaches
//! the code behind them.

use std::ops::{Bound, RangeInclusive};
use std::path::Path;

use crate::batch::{decode_entries, EntryRef, WriteBatch};
use crate::codec::{put_u16, put_u32, put_u64, u16_at, u32_at, u64_at, write_u32_at};
use crate::error::{Corruption, Error, Result};
use crate::layer::bloom::{bloom_hash, BloomFilter, BloomLayout};
use crate::layer::delta::block_index::BlockHandle;
use crate::layer::delta::reader::{decode_block, decode_index, DeltaEntry, DeltaLayerReader};
use crate::layer::delta::writer::{encode_index_entry, DeltaLayerWriter};
use crate::layer::delta::{
    block_crc, u64_from_usize, value_block_crc, LayerSink, ReadAt, BLOCK_BYTES_MAX,
    BLOCK_BYTES_MIN, BLOCK_BYTES_TARGET_MAX, BLOCK_BYTES_TARGET_MIN, BLOCK_COUNT_MAX,
    BLOCK_CRC_OFFSET, BLOCK_HEADER_BYTES, DELTA_FORMAT_VERSION, FOOTER_BLOCK_COUNT_OFFSET,
    FOOTER_BLOOM_CRC_OFFSET, FOOTER_BLOOM_LEN_OFFSET, FOOTER_BLOOM_OFFSET_OFFSET, FOOTER_BYTES,
    FOOTER_CRC_OFFSET, FOOTER_INDEX_CRC_OFFSET, FOOTER_INDEX_LEN_OFFSET,
    FOOTER_INDEX_OFFSET_OFFSET, FOOTER_KEYS_CRC_OFFSET, FOOTER_KEYS_LEN_OFFSET,
    FOOTER_KEYS_OFFSET_OFFSET, FOOTER_LSN_MAX_OFFSET, FOOTER_LSN_MIN_OFFSET,
    HEADER_BLOCK_BYTES_TARGET_OFFSET, HEADER_BYTES, HEADER_CRC_OFFSET, INDEX_BLOCK_LEN_OFFSET,
    INDEX_BLOCK_OFFSET_OFFSET, INDEX_ENTRY_HEADER_BYTES, INDEX_FIRST_KEY_LEN_OFFSET,
    INDEX_FIRST_LSN_OFFSET, INDEX_VALUE_BLOCK_FLAG, INDEX_VALUE_BLOCK_TAIL_BYTES, VALUE_BYTES_MAX,
};
use crate::log::record::{
    decode_log_header, encode_log_header, pad_record, PrevLog, RecordHeader, LOG_HEADER_BYTES,
    LOG_HEADER_CRC_OFFSET, PAD_LSN, RECORD_HEADER_BYTES,
};
use crate::log::replay::replay;
use crate::manifest::{Edit, LayerDesc, Level, ManifestState, MANIFEST_FILES_MAX};
use crate::types::{ValueKind, KEY_BYTES_MAX};

/// The dummy path of a log file given to the log decoders.
const LOG_PATH: &str = "fuzz/0000000000000001.log";
/// The dummy path of a delta layer file given to the delta decoders.
const DELTA_PATH: &str = "fuzz/0000000000000002.delta";
/// The dummy path of a manifest given to the manifest decoder.
const MANIFEST_PATH: &str = "fuzz/MANIFEST";
/// Where the bloom target says its filter starts in the file, for error offsets.
const BLOOM_OFFSET: u64 = 4096;

/// One fuzz target: a decoder and the properties checked on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A log file: its header, then records replayed as at open.
    LogRecord,
    /// A write batch payload (`count u32` prefix, then the entries).
    Batch,
    /// A delta layer data block with its handle as a prefix.
    DeltaBlock,
    /// A delta layer block index with the footer's fields as a prefix.
    BlockIndex,
    /// A bloom filter encoding.
    Bloom,
    /// A whole delta layer file, opened from its footer and scanned.
    Footer,
    /// A manifest file.
    Manifest,
}

impl Target {
    /// Every target, in the order the scripts run them.
    pub const ALL: [Target; 7] = [
        Target::LogRecord,
        Target::Batch,
        Target::DeltaBlock,
        Target::BlockIndex,
        Target::Bloom,
        Target::Footer,
        Target::Manifest,
    ];

    /// The target's name: its cargo-fuzz binary and its corpus directory.
    pub fn name(self) -> &'static str {
        match self {
            Target::LogRecord => "log_record",
            Target::Batch => "batch",
            Target::DeltaBlock => "delta_block",
            Target::BlockIndex => "block_index",
            Target::Bloom => "bloom",
            Target::Footer => "footer",
            Target::Manifest => "manifest",
        }
    }

    /// The target called `name`.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Runs the target on `data`; panics on a finding.
    pub fn run(self, data: &[u8]) {
        match self {
            Target::LogRecord => log_record(data),
            Target::Batch => batch(data),
            Target::DeltaBlock => delta_block(data),
            Target::BlockIndex => block_index(data),
            Target::Bloom => bloom(data),
            Target::Footer => footer(data),
            Target::Manifest => manifest(data),
        }
    }

    /// Valid inputs, encoded by the engine's own writers, named for the corpus.
    pub fn seeds(self) -> Vec<(String, Vec<u8>)> {
        match self {
            Target::LogRecord => log_seeds(),
            Target::Batch => batch_seeds(),
            Target::DeltaBlock => delta_seeds(DeltaSeed::Blocks),
            Target::BlockIndex => delta_seeds(DeltaSeed::Index),
            Target::Bloom => bloom_seeds(),
            Target::Footer => delta_seeds(DeltaSeed::File),
            Target::Manifest => manifest_seeds(),
        }
    }

    /// Recomputes, in place, every checksum of `data` that the target's
    /// decoder verifies and that can be located in it, so that a mutated
    /// input reaches the checks behind the checksums.
    pub fn fix_checksums(self, data: &mut [u8]) {
        match self {
            Target::LogRecord => fix_log_checksums(data),
            Target::DeltaBlock => fix_block_checksum(data),
            Target::Footer => fix_delta_file_checksums(data),
            Target::Manifest => fix_manifest_checksums(data),
            // Their caller verified a checksum over them already.
            Target::Batch | Target::BlockIndex | Target::Bloom => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Targets.

/// A log file: [`decode_log_header`], then [`replay`] (record headers,
/// payload checksums, entries, LSN order, torn-tail detection). Where replay
/// succeeds, every record header re-encodes to its bytes and every payload
/// re-encodes, through a `WriteBatch`, to its bytes.
pub fn log_record(data: &[u8]) {
    let path = Path::new(LOG_PATH);
    let len = len_u64(data);
    // Replay checks the header's file id against the file's name: name the
    // file after the header, so the fuzzer reaches the records.
    let file_id = match decode_log_header(path, data) {
        Ok(header) => {
            let again = decode_log_header(path, &encode_log_header(header.file_id, header.prev));
            let again = again.expect("a re-encoded header decodes");
            assert_eq!(
                (again.file_id, again.prev),
                (header.file_id, header.prev),
                "log header round trip"
            );
            header.file_id
        }
        Err(e) => {
            check_error(&e, path, 0..=len, ErrorsAllowed::VERSION);
            0
        }
    };
    let log = match replay(path, data, file_id, None) {
        Ok(log) => log,
        Err(e) => return check_error(&e, path, 0..=len, ErrorsAllowed::VERSION),
    };
    let mut at = LOG_HEADER_BYTES;
    let mut lsn_last = 0;
    for record in &log.records {
        let header = record.header;
        // Pad records (LSN 0, no entries) may lie between listed records.
        let record_at = usize::try_from(record.payload_offset).expect("offset in the input")
            - RECORD_HEADER_BYTES;
        while at < record_at {
            let pad = RecordHeader::decode(data[at..at + RECORD_HEADER_BYTES].try_into().unwrap())
                .expect("replay skipped an intact pad record");
            assert_eq!((pad.lsn, pad.count), (PAD_LSN, 0), "skipped record at {at}");
            at += RECORD_HEADER_BYTES + pad.payload_len as usize;
        }
        assert_eq!(at, record_at, "records are back to back");
        let payload_at = at + RECORD_HEADER_BYTES;
        assert_eq!(
            header.encode()[..],
            data[at..payload_at],
            "record header at {at} does not re-encode to its bytes"
        );
        assert!(header.lsn > lsn_last, "record LSNs go back at {at}");
        lsn_last = header.lsn;
        let payload = &data[payload_at..payload_at + header.payload_len as usize];
        assert_eq!(crate::crc::crc32c(payload), header.payload_crc);
        let entries = decode_entries(payload, header.count).unwrap_or_else(|(o, what)| {
            panic!("replay kept a record whose entries fail at {o}: {what}")
        });
        check_batch_round_trip(&entries, payload, header.count);
        at = payload_at + payload.len();
    }
    assert!(log.end_offset >= u64_from_usize(at), "replay's end offset");
    assert_eq!(log.last_lsn, lsn_last, "replay's last LSN");
}

/// A write batch payload: `count u32 | entries`, through [`decode_entries`].
/// Where it decodes, a `WriteBatch` of the decoded entries has the same bytes.
pub fn batch(data: &[u8]) {
    let mut input = Input::new(data);
    let count = input.u32();
    let payload = input.rest();
    match decode_entries(payload, count) {
        Ok(entries) => check_batch_round_trip(&entries, payload, count),
        Err((offset, what)) => {
            assert!(
                offset <= payload.len(),
                "error offset {offset} is past the {}-byte payload ({what})",
                payload.len()
            );
            assert!(!what.is_empty());
        }
    }
}

/// A delta layer data block: `block offset u64 | first lsn u64 | first key
/// length u16 | first key | next lsn u64 | next key length u16 | next key |
/// block`: the block's handle and the next block's first entry (none when the
/// next key is empty: the last block), as the block index gives them, then the
/// block's bytes, through the reader's block parser and cursor. Where every
/// entry decodes, the entries ascend from the handle's first entry to below
/// the next block's, and a layer written from them reads back the same
/// entries.
pub fn delta_block(data: &[u8]) {
    let path = Path::new(DELTA_PATH);
    let mut input = Input::new(data);
    let offset = input.u64();
    let first_lsn = input.u64();
    let first_key_len = usize::from(input.u16());
    let first_key = input.bytes(first_key_len);
    let next_lsn = input.u64();
    let next_key_len = usize::from(input.u16());
    let next_key = input.bytes(next_key_len);
    let block = input.rest();
    let len = len_u64(block);
    // What `decode_index` guarantees of the handles it returns.
    let plausible_handles = (1..=KEY_BYTES_MAX).contains(&first_key.len())
        && next_key.len() <= KEY_BYTES_MAX
        && (next_key.is_empty() || (first_key, first_lsn) < (next_key, next_lsn))
        && (BLOCK_BYTES_MIN..=BLOCK_BYTES_MAX).contains(&block.len())
        && offset >= u64_from_usize(HEADER_BYTES)
        // The next block ends inside the file too.
        && offset
            .checked_add(len)
            .and_then(|end| end.checked_add(u64_from_usize(BLOCK_BYTES_MIN)))
            .is_some();
    if !plausible_handles {
        return;
    }
    let handle = BlockHandle {
        first_key,
        first_lsn,
        offset,
        len_bytes: len,
        value_block: None,
    };
    let next = (!next_key.is_empty()).then(|| BlockHandle {
        first_key: next_key,
        first_lsn: next_lsn,
        offset: offset + len,
        len_bytes: u64_from_usize(BLOCK_BYTES_MIN),
        value_block: None,
    });
    match decode_block(path, handle, next, block.to_vec()) {
        Ok(entries) => {
            let first = entries.first().expect("a decoded block has an entry");
            assert_eq!((&first.0[..], first.1), (first_key, first_lsn));
            check_entries(&entries);
            if let Some(next) = &next {
                let (key, lsn, ..) = entries.last().expect("not empty");
                assert!(
                    (&key[..], *lsn) < (next.first_key, next.first_lsn),
                    "the block's last entry does not sort below the next block's first"
                );
            }
            check_layer_round_trip(&entries, block.len());
        }
        Err(e) => check_error(&e, path, offset..=offset + len, ErrorsAllowed::NONE),
    }
}

/// A delta layer block index: `index offset u64 | block count u64 | lsn_min
/// u64 | lsn_max u64 | index`, through [`decode_index`], after the bounds the
/// footer check puts on those fields. Where it decodes, the handles chain from
/// the header to the index, ascend, and re-encode to the same bytes.
pub fn block_index(data: &[u8]) {
    let path = Path::new(DELTA_PATH);
    let mut input = Input::new(data);
    let index_offset = input.u64();
    let block_count = input.u64();
    let lsn_min = input.u64();
    let lsn_max = input.u64();
    let index = input.rest();
    let len = len_u64(index);
    // What the footer check in `DeltaLayerReader::open` guarantees.
    let entry_bytes_min = u64_from_usize(INDEX_ENTRY_HEADER_BYTES + 1);
    let footer_checked = lsn_min <= lsn_max
        && block_count <= BLOCK_COUNT_MAX
        && block_count
            .checked_mul(entry_bytes_min)
            .is_some_and(|b| b <= len)
        && index_offset >= u64_from_usize(HEADER_BYTES)
        && index_offset.checked_add(len).is_some();
    if !footer_checked {
        return;
    }
    match decode_index(
        index,
        path,
        index_offset,
        DELTA_FORMAT_VERSION,
        block_count,
        lsn_min,
        lsn_max,
    ) {
        Ok(handles) => {
            assert_eq!(handles.len() as u64, block_count);
            let mut next = u64_from_usize(HEADER_BYTES);
            let mut encoded = Vec::with_capacity(index.len());
            for (i, h) in handles.iter().enumerate() {
                assert_eq!(
                    h.offset,
                    next,
                    "block {i} does not follow block {}",
                    i.wrapping_sub(1)
                );
                assert!((1..=KEY_BYTES_MAX).contains(&h.first_key.len()));
                assert!((lsn_min..=lsn_max).contains(&h.first_lsn));
                let len_ok = u64_from_usize(BLOCK_BYTES_MIN)..=u64_from_usize(BLOCK_BYTES_MAX);
                assert!(
                    len_ok.contains(&h.len_bytes),
                    "block {i} length {}",
                    h.len_bytes
                );
                if i > 0 {
                    let prev = handles.get(i - 1).expect("the block before");
                    assert!((prev.first_key, prev.first_lsn) < (h.first_key, h.first_lsn));
                }
                next = h.offset + h.len_bytes;
                encode_index_entry(
                    &mut encoded,
                    h.offset,
                    h.len_bytes,
                    h.first_lsn,
                    h.first_key,
                    h.value_block,
                );
            }
            assert_eq!(next, index_offset, "blocks end where the index starts");
            assert_eq!(encoded, index, "the block index re-encodes to other bytes");
        }
        Err(e) => check_error(
            &e,
            path,
            index_offset..=index_offset + len,
            ErrorsAllowed::NONE,
        ),
    }
}

/// A bloom filter encoding through [`BloomFilter::decode`]. Where it decodes,
/// it re-encodes to the same bytes and answers probes without panicking.
pub fn bloom(data: &[u8]) {
    let path = Path::new(DELTA_PATH);
    let len = len_u64(data);
    for layout in [BloomLayout::Blocked, BloomLayout::Spread] {
        match BloomFilter::decode(data, layout, path, BLOOM_OFFSET) {
            Ok(filter) => {
                let mut encoded = Vec::with_capacity(data.len());
                filter.encode(&mut encoded);
                assert_eq!(encoded, data, "the bloom filter re-encodes to other bytes");
                // The bits are held in whole cache lines: at most 63 bytes more.
                assert!(
                    filter.memory_bytes() <= data.len() + 64 + std::mem::size_of::<BloomFilter>()
                );
                for key in [&b"a"[..], b"key-000", &[0xff; 64]] {
                    filter.may_contain(key);
                }
            }
            Err(e) => check_error(
                &e,
                path,
                BLOOM_OFFSET..=BLOOM_OFFSET + len,
                ErrorsAllowed::NONE,
            ),
        }
    }
}

/// A whole delta layer file, opened by [`DeltaLayerReader::open`] (which
/// starts at the footer, then checks the section chain, the header, the block
/// index, the bloom filter and the key range) and scanned. Where it opens and
/// scans, entries are strictly ascending across blocks, each point read finds
/// its own version (or nothing, where a forged filter rules it out), and a
/// layer written from the entries reads back the same entries.
pub fn footer(data: &[u8]) {
    let path = Path::new(DELTA_PATH);
    let len = len_u64(data);
    let reader = match DeltaLayerReader::open(MemFile { bytes: data, path }) {
        Ok(reader) => reader,
        Err(e) => return check_error(&e, path, 0..=len, ErrorsAllowed::VERSION),
    };
    let summary = reader.summary().clone();
    assert_eq!(summary.file_bytes, len);
    assert!(summary.lsn_min <= summary.lsn_max);
    assert!(summary.key_min <= summary.key_max);
    let entries = match scan(&reader) {
        Ok(entries) => entries,
        Err(e) => return check_error(&e, path, 0..=len, ErrorsAllowed::NONE),
    };
    check_entries(&entries);
    if let Some(first) = entries.first() {
        assert_eq!(first.0, summary.key_min, "key_min is not the first key");
    }
    for (key, lsn, kind, value) in &entries {
        match reader.get(key, *lsn) {
            Ok(None) => {}
            Ok(Some(found)) => assert_eq!(
                found,
                (*lsn, *kind, value.clone()),
                "a point read at ({key:?}, {lsn}) disagrees with the scan"
            ),
            Err(e) => panic!("a point read fails on a block the scan read: {e}"),
        }
    }
    // Open checked the header's target is in range.
    let target = u32_at(data, HEADER_BLOCK_BYTES_TARGET_OFFSET).expect("open read the header");
    check_layer_round_trip(&entries, target as usize);
}

/// A manifest through `manifest::decode`. Where it decodes, its state lists
/// each id once, below its next file id, and the state written as a new
/// manifest decodes to the same state.
pub fn manifest(data: &[u8]) {
    let path = Path::new(MANIFEST_PATH);
    let len = len_u64(data);
    let loaded = match crate::manifest::decode(path, data) {
        Ok(l) => l,
        Err(e) => return check_error(&e, path, 0..=len, ErrorsAllowed::VERSION_AND_NOT_A_DATABASE),
    };
    let s = &loaded.state;
    assert!(s.logs.len() + s.layers.len() + loaded.v1_deltas.len() <= MANIFEST_FILES_MAX);
    assert!(s
        .logs
        .iter()
        .chain(s.layers.iter().map(|l| &l.id))
        .chain(&loaded.v1_deltas)
        .all(|&id| id < s.next_file_id));
    assert!(loaded.torn_at.is_none_or(|at| at < len));
    if loaded.v1_deltas.is_empty() {
        let encoded = crate::manifest::encode_file(s);
        let again = crate::manifest::decode(path, &encoded).expect("a re-encoded manifest decodes");
        assert_eq!(&again.state, s, "manifest round trip");
    }
}

// ---------------------------------------------------------------------------
// Properties shared by the targets.

/// Which errors besides `Corruption` a decoder may return.
#[derive(Clone, Copy)]
struct ErrorsAllowed {
    unsupported_version: bool,
    not_a_database: bool,
}

impl ErrorsAllowed {
    const NONE: Self = ErrorsAllowed {
        unsupported_version: false,
        not_a_database: false,
    };
    const VERSION: Self = ErrorsAllowed {
        unsupported_version: true,
        not_a_database: false,
    };
    const VERSION_AND_NOT_A_DATABASE: Self = ErrorsAllowed {
        unsupported_version: true,
        not_a_database: true,
    };
}

/// An error is a typed one that names `path`, and a corruption's offset lies
/// in `offsets` (the bytes the decoder was given, as file offsets).
fn check_error(err: &Error, path: &Path, offsets: RangeInclusive<u64>, allowed: ErrorsAllowed) {
    let message = err.to_string();
    assert!(
        message.contains(&*path.to_string_lossy()),
        "the error does not name the file: {message}"
    );
    match err {
        Error::Corruption(Corruption {
            file, offset, what, ..
        }) => {
            assert_eq!(file, path);
            assert!(
                offsets.contains(offset),
                "corruption offset {offset} is outside {offsets:?}: {message}"
            );
            assert!(!what.is_empty());
        }
        Error::UnsupportedVersion {
            path: p,
            found,
            supported,
        } if allowed.unsupported_version => {
            assert_eq!(p, path);
            assert_ne!(
                found, supported,
                "a version this build reads is not unsupported"
            );
        }
        Error::NotADatabase { path: p, .. } if allowed.not_a_database => assert_eq!(p, path),
        other => panic!("unexpected error kind from a decoder: {other:?}"),
    }
}

/// Decoded batch entries are in range, and a `WriteBatch` of them is
/// `payload` byte for byte with `count` entries.
fn check_batch_round_trip(entries: &[EntryRef<'_>], payload: &[u8], count: u32) {
    assert_eq!(entries.len(), count as usize, "decoded entry count");
    let mut batch = WriteBatch::with_capacity(payload.len());
    for e in entries {
        assert!((1..=KEY_BYTES_MAX).contains(&e.key.len()));
        assert_eq!(
            payload.get(e.value_offset..e.value_offset + e.value.len()),
            Some(e.value)
        );
        match e.kind {
            ValueKind::Put => batch.put(e.key, e.value),
            ValueKind::Delete => {
                assert!(e.value.is_empty(), "a tombstone with a value");
                batch.delete(e.key)
            }
            ValueKind::Pointer => panic!("a log entry decoded as a value pointer"),
        }
    }
    assert_eq!(batch.invalid, None, "the batch refuses decoded entries");
    assert_eq!(batch.count, count);
    // A put of whole pages laid out inline (as logs before format 4 hold
    // them) re-encodes out of line: other bytes, the same entries.
    let older = entries.iter().any(|e| {
        !e.out_of_line
            && e.kind == ValueKind::Put
            && crate::batch::is_out_of_line_len(e.value.len())
    });
    if !older {
        assert_eq!(
            batch.payload(),
            payload,
            "the batch re-encodes to other bytes"
        );
    }
}

/// Delta entries are strictly ascending by (key, lsn) and within the limits.
fn check_entries(entries: &[DeltaEntry]) {
    for (i, (key, lsn, kind, value)) in entries.iter().enumerate() {
        assert!(
            (1..=KEY_BYTES_MAX).contains(&key.len()),
            "entry {i}: key length"
        );
        assert!(value.len() <= VALUE_BYTES_MAX, "entry {i}: value length");
        assert!(
            *kind != ValueKind::Delete || value.is_empty(),
            "entry {i}: tombstone with a value"
        );
        assert!(
            *kind != ValueKind::Pointer || value.len() == crate::value::POINTER_BYTES,
            "entry {i}: a pointer of {} bytes",
            value.len()
        );
        if i > 0 {
            let (prev_key, prev_lsn, ..) = &entries[i - 1];
            assert!(
                (prev_key, prev_lsn) < (key, lsn),
                "entry {i} ({key:?}, {lsn}) does not follow ({prev_key:?}, {prev_lsn})"
            );
        }
    }
}

/// A layer written from `entries` (with a block target of about
/// `block_bytes`) opens and scans back to `entries`.
fn check_layer_round_trip(entries: &[DeltaEntry], block_bytes: usize) {
    let block_bytes = block_bytes.clamp(BLOCK_BYTES_TARGET_MIN, BLOCK_BYTES_TARGET_MAX);
    let mut writer =
        DeltaLayerWriter::new(VecSink::default(), block_bytes).expect("the target is in range");
    for (key, lsn, kind, value) in entries {
        if let Err(e) = writer.add(key, *lsn, *kind, value) {
            panic!("the writer refuses a decoded entry ({key:?}, {lsn}): {e}");
        }
    }
    let (VecSink(bytes), summary) = writer.finish().expect("an in-memory sink does not fail");
    assert_eq!(summary.entries, len_u64(entries));
    let path = Path::new(DELTA_PATH);
    let reader = DeltaLayerReader::open(MemFile {
        bytes: &bytes,
        path,
    })
    .unwrap_or_else(|e| panic!("a re-encoded layer does not open: {e}"));
    let again = scan(&reader).unwrap_or_else(|e| panic!("a re-encoded layer does not scan: {e}"));
    assert!(
        again == entries,
        "a re-encoded layer reads back other entries"
    );
}

/// Every entry of a layer, in scan order.
fn scan<R: ReadAt>(reader: &DeltaLayerReader<R>) -> Result<Vec<DeltaEntry>> {
    reader.range(Bound::Unbounded, Bound::Unbounded)?.collect()
}

// ---------------------------------------------------------------------------
// In-memory files and inputs.

/// A layer file held in memory. The reader checks every range against the
/// file length before it reads, so a read outside the bytes is a finding.
struct MemFile<'a> {
    bytes: &'a [u8],
    path: &'a Path,
}

impl ReadAt for MemFile<'_> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?));
        match range.and_then(|r| self.bytes.get(r)) {
            Some(bytes) => Ok(bytes.to_vec()),
            None => panic!(
                "the reader reads {len} bytes at {offset}, outside the {}-byte file",
                self.bytes.len()
            ),
        }
    }
    fn file_len(&self) -> u64 {
        len_u64(self.bytes)
    }
    fn path(&self) -> &Path {
        self.path
    }
}

/// A layer sink that keeps the file in memory.
#[derive(Default)]
struct VecSink(Vec<u8>);

impl LayerSink for VecSink {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// Reads a fuzz input's fixed prefix; bytes past the end read as zero.
struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Input { rest: data }
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.rest.split_at(n.min(self.rest.len()));
        self.rest = rest;
        head
    }
    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let head = self.bytes(N);
        out[..head.len()].copy_from_slice(head);
        out
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }
}

/// A length as the `u64` of the formats.
fn len_u64<T>(items: &[T]) -> u64 {
    u64_from_usize(items.len())
}

// ---------------------------------------------------------------------------
// Seeds: valid encodings from the engine's writers.

fn log_seeds() -> Vec<(String, Vec<u8>)> {
    let header = encode_log_header(1, None).to_vec();
    let mut seeds = vec![("header-only".to_owned(), header.clone())];
    let mut log = header;
    let mut ends = Vec::new();
    for (lsn, batch) in sample_batches().into_iter().enumerate() {
        let lsn = 1 + 3 * lsn as u64;
        // Each record claims the log was durable up to the end of the one before.
        let synced_through = ends.last().copied().unwrap_or(0);
        let header = RecordHeader::for_payload(&batch.payload(), lsn, batch.count, synced_through);
        log.extend_from_slice(&header.encode());
        log.extend_from_slice(&batch.payload());
        ends.push(len_u64(&log));
        seeds.push((format!("records-{}", ends.len()), log.clone()));
    }
    let mut padded = log.clone();
    padded.resize(log.len().next_multiple_of(512) + 512, 0);
    seeds.push(("zero-padded-tail".to_owned(), padded));
    let mut torn = log.clone();
    torn.truncate(log.len() - 3);
    seeds.push(("torn-tail".to_owned(), torn));
    // As the engine writes since format 3: a pad record at every sync, a
    // sealing pad record at close, a header claiming the log before.
    let prev = PrevLog {
        file_id: 1,
        end: 4096,
        last_lsn: 7,
    };
    let mut synced = encode_log_header(2, Some(prev)).to_vec();
    let mut durable = 0;
    for (lsn, batch) in sample_batches().into_iter().enumerate() {
        let header =
            RecordHeader::for_payload(&batch.payload(), 8 + lsn as u64, batch.count, durable);
        synced.extend_from_slice(&header.encode());
        synced.extend_from_slice(&batch.payload());
        if let Some(pad) = pad_record(len_u64(&synced), durable, false) {
            synced.extend_from_slice(&pad.to_vec());
        }
        durable = len_u64(&synced);
    }
    synced.extend_from_slice(&pad_record(durable, durable, true).expect("a seal").to_vec());
    seeds.push(("synced-and-sealed".to_owned(), synced));
    seeds
}

fn sample_batches() -> Vec<WriteBatch> {
    let mut batches = Vec::new();
    let mut b = WriteBatch::new();
    b.put(b"a", b"1");
    batches.push(b);
    let mut b = WriteBatch::new();
    b.put(b"key-1", b"value one");
    b.delete(b"key-2");
    b.put(b"key-3", b"");
    b.put(vec![0xffu8; 40], vec![7u8; 100]);
    batches.push(b);
    batches.push(WriteBatch::new());
    let mut b = WriteBatch::new();
    for i in 0..12u32 {
        b.put(format!("k{i:04}"), i.to_le_bytes());
    }
    b.delete(b"k0003");
    batches.push(b);
    // Log format 4: values of whole pages in the record's value run.
    let mut b = WriteBatch::new();
    b.put(b"page-1", vec![0x11u8; 4096]);
    b.put(b"small", b"inline");
    b.put(b"page-2", vec![0x22u8; 8192]);
    batches.push(b);
    batches
}

fn batch_seeds() -> Vec<(String, Vec<u8>)> {
    sample_batches()
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let mut input = Vec::new();
            put_u32(&mut input, b.count);
            input.extend_from_slice(&b.payload());
            (format!("batch-{i}"), input)
        })
        .collect()
}

fn bloom_seeds() -> Vec<(String, Vec<u8>)> {
    [0u64, 1, 7, 40, 300]
        .into_iter()
        .map(|n| {
            let hashes: Vec<u64> = (0..n)
                .map(|i| bloom_hash(format!("key-{i}").as_bytes()))
                .collect();
            let mut out = Vec::new();
            BloomFilter::build(BloomLayout::Blocked, &hashes).encode(&mut out);
            (format!("keys-{n}"), out)
        })
        .collect()
}

fn manifest_seeds() -> Vec<(String, Vec<u8>)> {
    let desc = |id: u64, lsn: u64| LayerDesc {
        id,
        level: Level::L0,
        key_min: b"a".to_vec(),
        key_max: b"zz".to_vec(),
        lsn_min: lsn,
        lsn_max: lsn + 5,
        entries: 6,
        bytes: 8192,
        cover: None,
        values: Vec::new(),
    };
    let states = [
        ManifestState::default(),
        ManifestState {
            next_file_id: 1,
            ..ManifestState::default()
        },
        ManifestState {
            next_file_id: 9,
            logs: vec![7, 8],
            layers: vec![desc(1, 1), desc(3, 7), desc(4, 13)],
            ..ManifestState::default()
        },
        ManifestState {
            next_file_id: u64::MAX,
            logs: vec![u64::MAX - 1],
            layers: (0..20).map(|i| desc(i, 10 * i)).collect(),
            gc_lsn: 7,
            ..ManifestState::default()
        },
        // Layers pointing into value files (format 5).
        ManifestState {
            next_file_id: 30,
            logs: vec![29],
            layers: vec![
                LayerDesc {
                    values: vec![(20, 9000), (21, 100)],
                    ..desc(1, 1)
                },
                LayerDesc {
                    values: vec![(21, 5000)],
                    ..desc(3, 7)
                },
            ],
            value_files: [(20, 9100), (21, 8192)].into_iter().collect(),
            ..ManifestState::default()
        },
    ];
    let mut seeds: Vec<(String, Vec<u8>)> = states
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("manifest-{i}"), crate::manifest::encode_file(s)))
        .collect();
    // A snapshot and edits after it.
    let mut bytes = crate::manifest::encode_file(&states[2]);
    let edits = [
        Edit::AddLog(9),
        Edit::Flushed {
            log: 7,
            layer: desc(10, 20),
            value_file_bytes: 0,
        },
        Edit::Compacted {
            remove: vec![1, 3],
            add: vec![
                LayerDesc {
                    level: Level::L1,
                    key_max: b"m".to_vec(),
                    ..desc(11, 1)
                },
                LayerDesc {
                    level: Level::L1,
                    key_min: b"n".to_vec(),
                    ..desc(12, 1)
                },
                LayerDesc {
                    level: Level::Image,
                    lsn_max: 1,
                    cover: Some(crate::types::Cover {
                        start: std::ops::Bound::Excluded(b"0".to_vec()),
                        end: std::ops::Bound::Included(b"zz".to_vec()),
                    }),
                    ..desc(13, 1)
                },
            ],
            gc_lsn: 1,
        },
    ];
    for edit in &edits {
        let record = crate::manifest::encode_edit_record(bytes.len() as u64, edit);
        bytes.extend(record);
    }
    // Format 3 (records back to back, still read): the same edits.
    let mut v3 = crate::manifest::encode_file_in(&states[2], crate::manifest::FORMAT_V3);
    for edit in &edits {
        let record = crate::manifest::frame_record(
            v3.len() as u64,
            &crate::manifest::encode_edit_in(edit, crate::manifest::FORMAT_V3),
        );
        v3.extend(record);
    }
    seeds.push(("manifest-v3".into(), v3));
    seeds.push(("manifest-edits".into(), bytes.clone()));
    // Closed: the seal after the edits.
    bytes.extend(crate::manifest::encode_seal_record(bytes.len() as u64));
    seeds.push(("manifest-sealed".into(), bytes));
    // Format 2: two image files of one LSN, whose covers are derived.
    let v2 = ManifestState {
        next_file_id: 9,
        logs: vec![],
        layers: vec![
            LayerDesc {
                level: Level::Image,
                key_max: b"m".to_vec(),
                lsn_max: 1,
                ..desc(1, 1)
            },
            LayerDesc {
                level: Level::Image,
                key_min: b"n".to_vec(),
                lsn_max: 1,
                ..desc(2, 1)
            },
        ],
        ..ManifestState::default()
    };
    seeds.push((
        "manifest-v2".into(),
        crate::manifest::encode_file_in(&v2, crate::manifest::FORMAT_V2),
    ));
    seeds.push((
        "manifest-v1".into(),
        crate::manifest::encode_v1(9, &[7, 8], &[1, 3, 4]),
    ));
    seeds
}

/// Which part of the sample delta layers a seed is.
#[derive(Clone, Copy)]
enum DeltaSeed {
    File,
    Index,
    Blocks,
}

/// Small delta layer files: empty, one entry, many small blocks with shared
/// prefixes, versions straddling blocks and tombstones, a value larger
/// than its block target, and page-sized values in value blocks.
fn sample_layers() -> Vec<(&'static str, Vec<u8>)> {
    type Entries = Vec<DeltaEntry>;
    let mut layers: Vec<(&'static str, usize, Entries)> = Vec::new();
    layers.push(("empty", 4096, vec![]));
    layers.push((
        "one-entry",
        4096,
        vec![(b"k".to_vec(), 1, ValueKind::Put, b"v".to_vec())],
    ));
    let mut many = Entries::new();
    for i in 0..14u64 {
        let key = format!("key-{:03}", i * 7).into_bytes();
        for v in 0..(i % 3 + 1) {
            let lsn = 10 + i + v * 100;
            if (i + v) % 5 == 3 {
                many.push((key.clone(), lsn, ValueKind::Delete, vec![]));
            } else {
                many.push((
                    key.clone(),
                    lsn,
                    ValueKind::Put,
                    format!("v{i}.{v}").into_bytes(),
                ));
            }
        }
    }
    layers.push(("many-blocks", BLOCK_BYTES_TARGET_MIN, many));
    layers.push((
        "large-value",
        BLOCK_BYTES_TARGET_MIN,
        vec![
            (b"a".to_vec(), 5, ValueKind::Put, b"small".to_vec()),
            (b"b".to_vec(), 6, ValueKind::Put, vec![0xab; 200]),
            (b"b".to_vec(), 9, ValueKind::Delete, vec![]),
            (b"c".to_vec(), 2, ValueKind::Put, vec![]),
        ],
    ));
    // Pointers into value files (format version 5) beside values.
    let pointer = |file_id, offset| {
        crate::value::ValuePointer {
            file_id,
            offset,
            value_len: 8192,
            crc: 0x1234_5678,
            out_of_line: offset % 4096 == 0,
        }
        .encode()
        .to_vec()
    };
    layers.push((
        "pointers",
        4096,
        vec![
            (b"q1".to_vec(), 3, ValueKind::Pointer, pointer(7, 64)),
            (b"q2".to_vec(), 4, ValueKind::Put, b"small".to_vec()),
            (b"q2".to_vec(), 5, ValueKind::Pointer, pointer(7, 8300)),
            (b"q3".to_vec(), 6, ValueKind::Delete, vec![]),
            (b"q4".to_vec(), 7, ValueKind::Pointer, pointer(9, 64)),
        ],
    ));
    // Page-sized values: value blocks (format version 3), the block before
    // one padded to the page.
    layers.push((
        "page-values",
        4096,
        vec![
            (b"p1".to_vec(), 3, ValueKind::Put, vec![0x11; 4096]),
            (b"p2".to_vec(), 4, ValueKind::Put, vec![0x22; 4090]),
            (b"p3".to_vec(), 5, ValueKind::Put, b"small".to_vec()),
            (b"p4".to_vec(), 6, ValueKind::Put, vec![0x44; 8192]),
            (b"p4".to_vec(), 7, ValueKind::Delete, vec![]),
        ],
    ));
    layers
        .into_iter()
        .map(|(name, block_bytes, entries)| {
            let mut writer =
                DeltaLayerWriter::new(VecSink::default(), block_bytes).expect("target in range");
            for (key, lsn, kind, value) in &entries {
                writer
                    .add(key, *lsn, *kind, value)
                    .expect("sample entries are valid");
            }
            let (VecSink(bytes), _) = writer.finish().expect("in-memory sink");
            (name, bytes)
        })
        .collect()
}

fn delta_seeds(part: DeltaSeed) -> Vec<(String, Vec<u8>)> {
    let path = Path::new(DELTA_PATH);
    let mut seeds = Vec::new();
    for (name, file) in sample_layers() {
        let footer = &file[file.len() - FOOTER_BYTES..];
        let field = |at: usize| u64_at(footer, at).expect("footer field");
        let index_offset = field(FOOTER_INDEX_OFFSET_OFFSET);
        let index_len = field(FOOTER_INDEX_LEN_OFFSET);
        let block_count = field(FOOTER_BLOCK_COUNT_OFFSET);
        let (lsn_min, lsn_max) = (field(FOOTER_LSN_MIN_OFFSET), field(FOOTER_LSN_MAX_OFFSET));
        let index = &file[index_offset as usize..(index_offset + index_len) as usize];
        match part {
            DeltaSeed::File => seeds.push((name.to_owned(), file.clone())),
            DeltaSeed::Index => {
                let mut input = Vec::new();
                for field in [index_offset, block_count, lsn_min, lsn_max] {
                    put_u64(&mut input, field);
                }
                input.extend_from_slice(index);
                seeds.push((name.to_owned(), input));
            }
            DeltaSeed::Blocks => {
                let handles = decode_index(
                    index,
                    path,
                    index_offset,
                    DELTA_FORMAT_VERSION,
                    block_count,
                    lsn_min,
                    lsn_max,
                )
                .expect("a written index decodes");
                // The first, a middle and the last block of each layer.
                let picks = [0, handles.len() / 2, handles.len().saturating_sub(1)];
                for (i, h) in handles
                    .iter()
                    .enumerate()
                    // The block target parses blocks of entries.
                    .filter(|(i, h)| picks.contains(i) && h.value_block.is_none())
                {
                    let mut input = Vec::new();
                    put_u64(&mut input, h.offset);
                    put_u64(&mut input, h.first_lsn);
                    put_u16(&mut input, h.first_key.len() as u16);
                    input.extend_from_slice(h.first_key);
                    let (next_lsn, next_key) = match handles.get(i + 1) {
                        Some(next) => (next.first_lsn, next.first_key),
                        None => (0, &[][..]),
                    };
                    put_u64(&mut input, next_lsn);
                    put_u16(&mut input, next_key.len() as u16);
                    input.extend_from_slice(next_key);
                    input.extend_from_slice(
                        &file[h.offset as usize..(h.offset + h.len_bytes) as usize],
                    );
                    seeds.push((format!("{name}-block-{i}"), input));
                }
            }
        }
    }
    seeds
}

// ---------------------------------------------------------------------------
// Checksum repair for mutated inputs.

/// Writes `value` at `at` if it fits: a mutated input may be cut anywhere.
fn write_u32_if_fits(data: &mut [u8], at: usize, value: u32) {
    if u32_at(data, at).is_some() {
        write_u32_at(data, at, value);
    }
}

fn fix_log_checksums(data: &mut [u8]) {
    if data.len() < LOG_HEADER_BYTES {
        return;
    }
    let crc = crate::crc::crc32c(&data[..LOG_HEADER_CRC_OFFSET]);
    write_u32_if_fits(data, LOG_HEADER_CRC_OFFSET, crc);
    let mut at = LOG_HEADER_BYTES;
    while at + RECORD_HEADER_BYTES <= data.len() {
        let header_at = at;
        let header = &data[header_at..header_at + RECORD_HEADER_BYTES];
        if header.iter().all(|&b| b == 0) {
            return;
        }
        let len = u32_at(header, crate::log::record::PAYLOAD_LEN_OFFSET).unwrap_or(0) as usize;
        let payload_at = header_at + RECORD_HEADER_BYTES;
        if let Some(payload) = data.get(payload_at..payload_at + len) {
            let crc = crate::crc::crc32c(payload);
            write_u32_if_fits(
                data,
                header_at + crate::log::record::PAYLOAD_CRC_OFFSET,
                crc,
            );
        }
        let header = &data[header_at..header_at + RECORD_HEADER_BYTES];
        let crc = crate::crc::crc32c(&header[crate::log::record::PAYLOAD_LEN_OFFSET..]);
        write_u32_if_fits(data, header_at + crate::log::record::HEADER_CRC_OFFSET, crc);
        at = payload_at + len;
    }
}

fn fix_block_checksum(data: &mut [u8]) {
    let mut input = Input::new(data);
    let offset = input.u64();
    input.u64();
    let key_len = usize::from(input.u16());
    input.bytes(key_len);
    input.u64();
    let next_key_len = usize::from(input.u16());
    input.bytes(next_key_len);
    let block_at = data.len() - input.rest().len();
    let block = &mut data[block_at..];
    if block.len() >= BLOCK_HEADER_BYTES {
        let crc = block_crc(
            offset,
            &block[..BLOCK_CRC_OFFSET],
            &block[BLOCK_HEADER_BYTES..],
        );
        write_u32_if_fits(block, BLOCK_CRC_OFFSET, crc);
    }
}

fn fix_delta_file_checksums(data: &mut [u8]) {
    if data.len() >= HEADER_BYTES {
        let crc = crate::crc::crc32c(&data[..HEADER_CRC_OFFSET]);
        write_u32_if_fits(data, HEADER_CRC_OFFSET, crc);
    }
    if data.len() < HEADER_BYTES + FOOTER_BYTES {
        return;
    }
    let footer_at = data.len() - FOOTER_BYTES;
    let field = |data: &[u8], at: usize| u64_at(data, footer_at + at).unwrap_or(0);
    let section = |data: &[u8], offset_at: usize, len_at: usize| {
        let start = usize::try_from(field(data, offset_at)).ok()?;
        let len = usize::try_from(field(data, len_at)).ok()?;
        let end = start.checked_add(len).filter(|&end| end <= footer_at)?;
        Some(start..end)
    };
    // Data blocks, as the block index locates them.
    if let Some(index) = section(data, FOOTER_INDEX_OFFSET_OFFSET, FOOTER_INDEX_LEN_OFFSET) {
        let mut pos = index.start;
        while let (Some(offset), Some(len), Some(key_len)) = (
            u64_at(&data[..index.end], pos + INDEX_BLOCK_OFFSET_OFFSET),
            u64_at(&data[..index.end], pos + INDEX_BLOCK_LEN_OFFSET),
            u16_at(&data[..index.end], pos + INDEX_FIRST_KEY_LEN_OFFSET),
        ) {
            let block = usize::try_from(offset).ok().and_then(|start| {
                let end = start.checked_add(usize::try_from(len).ok()?)?;
                (end <= footer_at && end - start >= BLOCK_HEADER_BYTES).then_some(start..end)
            });
            let value_block = key_len & INDEX_VALUE_BLOCK_FLAG != 0;
            let key_at = pos + INDEX_ENTRY_HEADER_BYTES;
            let key_end = key_at + usize::from(key_len & !INDEX_VALUE_BLOCK_FLAG);
            match block {
                // A value block's crc32c is in its index entry, after the key.
                Some(block) if value_block => {
                    let lsn = u64_at(&data[..index.end], pos + INDEX_FIRST_LSN_OFFSET);
                    if let (Some(lsn), Some(key)) = (lsn, data.get(key_at..key_end)) {
                        let crc = value_block_crc(offset, lsn, key, &[&data[block]]);
                        if key_end + INDEX_VALUE_BLOCK_TAIL_BYTES <= index.end {
                            write_u32_if_fits(data, key_end + 4, crc);
                        }
                    }
                }
                Some(block) => {
                    let b = &data[block.clone()];
                    let crc = block_crc(offset, &b[..BLOCK_CRC_OFFSET], &b[BLOCK_HEADER_BYTES..]);
                    write_u32_if_fits(data, block.start + BLOCK_CRC_OFFSET, crc);
                }
                None => {}
            }
            pos = key_end;
            if value_block {
                pos += INDEX_VALUE_BLOCK_TAIL_BYTES;
            }
        }
    }
    for (offset_at, len_at, crc_at) in [
        (
            FOOTER_INDEX_OFFSET_OFFSET,
            FOOTER_INDEX_LEN_OFFSET,
            FOOTER_INDEX_CRC_OFFSET,
        ),
        (
            FOOTER_BLOOM_OFFSET_OFFSET,
            FOOTER_BLOOM_LEN_OFFSET,
            FOOTER_BLOOM_CRC_OFFSET,
        ),
        (
            FOOTER_KEYS_OFFSET_OFFSET,
            FOOTER_KEYS_LEN_OFFSET,
            FOOTER_KEYS_CRC_OFFSET,
        ),
    ] {
        if let Some(range) = section(data, offset_at, len_at) {
            let crc = crate::crc::crc32c(&data[range]);
            write_u32_if_fits(data, footer_at + crc_at, crc);
        }
    }
    let crc = crate::crc::crc32c(&data[footer_at..footer_at + FOOTER_CRC_OFFSET]);
    write_u32_if_fits(data, footer_at + FOOTER_CRC_OFFSET, crc);
}

fn fix_manifest_checksums(data: &mut [u8]) {
    use crate::manifest::{
        frame_record, next_record_at, HEADER_BYTES, HEADER_CRC_OFFSET, PAYLOAD_CRC_OFFSET,
        PAYLOAD_LEN_OFFSET, RECORD_HEADER_BYTES, VERSION_OFFSET,
    };
    if data.len() < HEADER_BYTES {
        return;
    }
    let crc = crate::crc::crc32c(&data[..HEADER_CRC_OFFSET]);
    write_u32_if_fits(data, HEADER_CRC_OFFSET, crc);
    if u32_at(data, VERSION_OFFSET) == Some(1) {
        let len = u32_at(data, PAYLOAD_LEN_OFFSET).unwrap_or(0) as usize;
        if let Some(payload) = data.get(HEADER_BYTES..HEADER_BYTES + len) {
            let crc = crate::crc::crc32c(payload);
            write_u32_if_fits(data, PAYLOAD_CRC_OFFSET, crc);
        }
        let crc = crate::crc::crc32c(&data[..HEADER_CRC_OFFSET]);
        write_u32_if_fits(data, HEADER_CRC_OFFSET, crc);
        return;
    }
    // Versions 2 to 4: every whole record's two checksums, in turn.
    let version = u32_at(data, VERSION_OFFSET).unwrap_or(0);
    let mut at = HEADER_BYTES;
    while let Some(len) = u32_at(data, at) {
        let start = at + RECORD_HEADER_BYTES;
        let Some(end) = start.checked_add(len as usize).filter(|&e| e <= data.len()) else {
            return;
        };
        let framed = frame_record(at as u64, &data[start..end]);
        data[at..start].copy_from_slice(&framed[..RECORD_HEADER_BYTES]);
        at = next_record_at(at, len as usize, version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_passes_its_target_and_survives_checksum_repair() {
        for target in Target::ALL {
            let seeds = target.seeds();
            assert!(!seeds.is_empty(), "{} has no seeds", target.name());
            for (name, seed) in seeds {
                target.run(&seed);
                let mut fixed = seed.clone();
                target.fix_checksums(&mut fixed);
                assert_eq!(
                    fixed,
                    seed,
                    "{}/{name}: repair changed a valid seed",
                    target.name()
                );
            }
        }
    }
}
