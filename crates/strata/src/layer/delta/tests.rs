//! Tests of the delta layer writer and reader: a `BTreeMap` model, order and
//! limit checks, and corruption of a real file byte by byte.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use proptest::prelude::*;

use super::reader::{DeltaEntry, DeltaLayerReader, DeltaRangeIterOwned};
use super::writer::DeltaLayerWriter;
use super::*;
use crate::codec::{u16_at, u32_at, u64_at};
use crate::error::{Error, InvalidInput};
use crate::layer::bloom::PointKey;

// ---------------------------------------------------------------------------
// Sinks and files.

impl LayerSink for Vec<u8> {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

/// An in-memory layer file that counts its reads.
#[derive(Debug)]
struct MemFile {
    bytes: Vec<u8>,
    path: PathBuf,
    reads: AtomicUsize,
}

impl MemFile {
    fn new(bytes: Vec<u8>) -> Self {
        MemFile {
            bytes,
            path: PathBuf::from("mem/layer.delta"),
            reads: AtomicUsize::new(0),
        }
    }
    fn reads(&self) -> usize {
        self.reads.load(AtomicOrdering::Relaxed)
    }
}

impl ReadAt for MemFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.reads.fetch_add(1, AtomicOrdering::Relaxed);
        let start = usize::try_from(offset).expect("test offsets fit");
        let bytes = self.bytes.get(start..start + len).ok_or_else(|| {
            Error::io(
                &self.path,
                "read",
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )
        })?;
        Ok(bytes.to_vec())
    }
    fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

struct FileSink {
    file: std::fs::File,
    path: PathBuf,
}

impl LayerSink for FileSink {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        self.file
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, "write", e))
    }
}

#[derive(Debug)]
struct FileReader {
    file: std::fs::File,
    path: PathBuf,
    len: u64,
}

impl FileReader {
    fn open(path: &Path) -> Self {
        let file = std::fs::File::open(path).expect("open layer file");
        let len = file.metadata().expect("stat").len();
        FileReader {
            file,
            path: path.to_path_buf(),
            len,
        }
    }
}

impl ReadAt for FileReader {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(&self.path, "read", e))?;
        Ok(buf)
    }
    fn file_len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

// ---------------------------------------------------------------------------
// The model.

type Model = BTreeMap<(Vec<u8>, Lsn), (ValueKind, Vec<u8>)>;

fn model_get(model: &Model, key: &[u8], lsn: Lsn) -> Option<(Lsn, ValueKind, Vec<u8>)> {
    let ((k, l), (kind, value)) = model.range(..=(key.to_vec(), lsn)).next_back()?;
    (k.as_slice() == key).then(|| (*l, *kind, value.clone()))
}

fn model_range(model: &Model, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Vec<DeltaEntry> {
    let after_start = |k: &[u8]| match start {
        Bound::Unbounded => true,
        Bound::Included(s) => k >= s,
        Bound::Excluded(s) => k > s,
    };
    let before_end = |k: &[u8]| match end {
        Bound::Unbounded => true,
        Bound::Included(e) => k <= e,
        Bound::Excluded(e) => k < e,
    };
    model
        .iter()
        .filter(|((k, _), _)| after_start(k) && before_end(k))
        .map(|((k, l), (kind, v))| (k.clone(), *l, *kind, v.clone()))
        .collect()
}

fn write_layer<S: LayerSink>(sink: S, model: &Model, block_bytes: usize) -> (S, DeltaLayerSummary) {
    let mut writer = DeltaLayerWriter::new(sink, block_bytes).expect("writer");
    for ((key, lsn), (kind, value)) in model {
        writer.add(key, *lsn, *kind, value).expect("add");
    }
    writer.finish().expect("finish")
}

fn build(model: &Model, block_bytes: usize) -> (Vec<u8>, DeltaLayerSummary) {
    write_layer(Vec::new(), model, block_bytes)
}

/// [`build`] in format version 3 (the spread bloom filter), the base of the
/// older files the tests make.
fn build_v3(model: &Model, block_bytes: usize) -> Vec<u8> {
    build_version(model, block_bytes, 3)
}

/// [`build`] in format `version`.
fn build_version(model: &Model, block_bytes: usize, version: u32) -> Vec<u8> {
    let mut writer =
        DeltaLayerWriter::with_format_version(Vec::new(), block_bytes, version).expect("writer");
    for ((key, lsn), (kind, value)) in model {
        writer.add(key, *lsn, *kind, value).expect("add");
    }
    writer.finish().expect("finish").0
}

/// Every version of `model` read back at its own LSN, and a scan of all.
fn assert_reads_as_model<R: ReadAt>(reader: &DeltaLayerReader<R>, model: &Model) {
    for (key, lsn) in model.keys() {
        assert_eq!(
            reader.get(key, *lsn).expect("get"),
            model_get(model, key, *lsn)
        );
    }
    assert_eq!(
        collect_range(reader, Bound::Unbounded, Bound::Unbounded),
        model_range(model, Bound::Unbounded, Bound::Unbounded)
    );
}

fn open_mem(bytes: Vec<u8>) -> DeltaLayerReader<MemFile> {
    DeltaLayerReader::open(MemFile::new(bytes)).expect("open")
}

fn collect_range<R: ReadAt>(
    reader: &DeltaLayerReader<R>,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
) -> Vec<DeltaEntry> {
    reader
        .range(start, end)
        .expect("range")
        .collect::<Result<Vec<_>>>()
        .expect("scan")
}

fn put(model: &mut Model, key: &[u8], lsn: Lsn, value: &[u8]) {
    model.insert((key.to_vec(), lsn), (ValueKind::Put, value.to_vec()));
}

/// A small layer with many blocks, shared prefixes, several versions per key,
/// tombstones, an empty value and a value larger than a block.
fn small_model() -> Model {
    let mut model = Model::new();
    for i in 0..24u64 {
        let key = format!("key-{:03}", i * 7).into_bytes();
        for v in 0..(i % 4 + 1) {
            let lsn = 10 + i + v * 100;
            if (i + v) % 5 == 3 {
                model.insert((key.clone(), lsn), (ValueKind::Delete, Vec::new()));
            } else {
                let value = format!("value {i} v{v}")
                    .repeat((i % 3) as usize)
                    .into_bytes();
                model.insert((key.clone(), lsn), (ValueKind::Put, value));
            }
        }
    }
    put(&mut model, b"key-050-big", 7, &[0xab; 300]);
    model
}

const SMALL_BLOCK_BYTES: usize = 128;

// ---------------------------------------------------------------------------
// Round trips.

#[test]
fn reader_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<DeltaLayerReader<MemFile>>();
    assert_send_sync::<DeltaRangeIterOwned<MemFile>>();
}

#[test]
fn small_layer_round_trips_and_summaries_agree() {
    let model = small_model();
    let (bytes, written) = build(&model, SMALL_BLOCK_BYTES);
    assert_eq!(written.file_bytes, bytes.len() as u64);
    assert!(
        written.blocks > 10,
        "the test wants many blocks, got {}",
        written.blocks
    );
    let reader = open_mem(bytes);
    assert_eq!(
        reader.file().reads(),
        3,
        "open reads the footer, the header and the metadata sections once each"
    );
    assert_eq!(reader.summary(), &written);
    assert_eq!(written.entries, model.len() as u64);
    assert_eq!(
        written.key_min,
        model
            .keys()
            .next()
            .map(|(k, _)| k.clone())
            .unwrap_or_default()
    );
    assert_eq!(
        written.key_max,
        model
            .keys()
            .next_back()
            .map(|(k, _)| k.clone())
            .unwrap_or_default()
    );
    for (key, lsn) in model.keys() {
        for at in [lsn - 1, *lsn, lsn + 1, lsn + 99, Lsn::MAX] {
            assert_eq!(
                reader.get(key, at).expect("get"),
                model_get(&model, key, at),
                "{key:?} at {at}"
            );
        }
    }
    assert_eq!(
        collect_range(&reader, Bound::Unbounded, Bound::Unbounded),
        model_range(&model, Bound::Unbounded, Bound::Unbounded)
    );
    assert!(reader.index_memory_bytes() > 0);
}

#[test]
fn get_reads_one_block_when_versions_straddle_blocks() {
    let mut model = Model::new();
    put(&mut model, b"a", 1, b"before");
    for lsn in 1..=200u64 {
        put(
            &mut model,
            b"straddler",
            lsn * 2,
            format!("v{lsn}").as_bytes(),
        );
    }
    put(&mut model, b"z", 1, b"after");
    let (bytes, summary) = build(&model, 64);
    assert!(summary.blocks > 20);
    let reader = open_mem(bytes);
    for lsn in 0..=402u64 {
        let before = reader.file().reads();
        let got = reader.get(b"straddler", lsn).expect("get");
        assert_eq!(got, model_get(&model, b"straddler", lsn), "at {lsn}");
        assert!(
            reader.file().reads() - before <= 1,
            "get at {lsn} read {} blocks",
            reader.file().reads() - before
        );
    }
    let scanned = collect_range(
        &reader,
        Bound::Included(b"straddler"),
        Bound::Included(b"straddler"),
    );
    assert_eq!(scanned.len(), 200);
}

#[test]
fn get_of_absent_keys_rarely_reads() {
    let mut model = Model::new();
    for i in 0..2000u32 {
        put(&mut model, format!("present-{i:05}").as_bytes(), 5, b"v");
    }
    let (bytes, _) = build(&model, 4096);
    let reader = open_mem(bytes);
    let before = reader.file().reads();
    for i in 0..2000u32 {
        assert_eq!(
            reader
                .get(format!("present-{i:05}x").as_bytes(), 10)
                .expect("get"),
            None
        );
    }
    let reads = reader.file().reads() - before;
    assert!(
        reads < 60,
        "{reads} block reads for 2000 absent keys: the bloom filter is not filtering"
    );
}

/// Room reserved for the filter's hashes is a hint: the same entries make
/// the same file whether the writer was told fewer keys, the exact count,
/// or many more (a large reservation maps its pages at once).
#[test]
fn reserving_keys_leaves_the_file_as_it_was() {
    let model = small_model();
    let (plain, _) = build(&model, SMALL_BLOCK_BYTES);
    let keys = model
        .keys()
        .map(|(k, _)| k)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    for reserve in [0, 3, keys, keys * 10, 1 << 20] {
        let mut writer = DeltaLayerWriter::new(Vec::new(), SMALL_BLOCK_BYTES).expect("writer");
        writer.reserve_keys(reserve);
        for ((key, lsn), (kind, value)) in &model {
            writer.add(key, *lsn, *kind, value).expect("add");
        }
        let (bytes, summary) = writer.finish().expect("finish");
        assert_eq!(summary.distinct_keys, keys as u64);
        assert!(bytes == plain, "reserving {reserve} keys changed the file");
    }
}

#[test]
fn empty_layer_round_trips() {
    let (bytes, summary) = build(&Model::new(), 4096);
    assert_eq!(summary.entries, 0);
    let reader = open_mem(bytes);
    assert_eq!(reader.summary(), &summary);
    assert_eq!(reader.get(b"k", 5).expect("get"), None);
    assert!(collect_range(&reader, Bound::Unbounded, Bound::Unbounded).is_empty());
}

#[test]
fn largest_key_and_a_value_larger_than_a_block_round_trip() {
    let mut model = Model::new();
    let long_a = vec![b'a'; KEY_BYTES_MAX];
    let mut long_b = vec![b'a'; KEY_BYTES_MAX - 1];
    long_b.push(b'b');
    put(&mut model, &long_a, 1, &vec![7u8; 100_000]);
    put(&mut model, &long_a, 2, b"");
    put(&mut model, &long_b, 1, b"small");
    model.insert((long_b.clone(), 3), (ValueKind::Delete, Vec::new()));
    let (bytes, summary) = build(&model, 16 << 10);
    assert_eq!(
        summary.blocks, 2,
        "the 100 kB value gets a block of its own, the other three share one"
    );
    assert_reads_as_model(&open_mem(bytes), &model);
}

#[test]
fn range_owned_outlives_the_callers_arc() {
    let model = small_model();
    let (bytes, _) = build(&model, SMALL_BLOCK_BYTES);
    let reader = Arc::new(open_mem(bytes));
    let scan = reader
        .range_owned(Bound::Included(b"key-030"), Bound::Excluded(b"key-100"))
        .expect("range");
    drop(reader);
    let got = scan.collect::<Result<Vec<_>>>().expect("scan");
    assert_eq!(
        got,
        model_range(
            &model,
            Bound::Included(b"key-030"),
            Bound::Excluded(b"key-100")
        )
    );
    assert!(!got.is_empty());
}

#[test]
fn a_scan_reading_ahead_reads_the_same_entries_in_fewer_reads() {
    let model = small_model();
    let (bytes, summary) = build(&model, SMALL_BLOCK_BYTES);
    assert!(summary.blocks > 8, "{summary:?}");
    type Range<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);
    let bounds: [Range<'_>; 3] = [
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Included(b"key-030"), Bound::Excluded(b"key-100")),
        (Bound::Excluded(b"key-049"), Bound::Included(b"key-050")),
    ];
    for (start, end) in bounds {
        let plain = Arc::new(open_mem(bytes.clone()));
        let before = plain.file().reads();
        let one_by_one: Vec<_> = plain
            .range_owned(start, end)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        let plain_reads = plain.file().reads() - before;
        let ahead = Arc::new(open_mem(bytes.clone()));
        let before = ahead.file().reads();
        let read_ahead: Vec<_> = ahead
            .range_owned(start, end)
            .unwrap()
            .with_readahead(1 << 20)
            .map(|e| e.unwrap())
            .collect();
        let ahead_reads = ahead.file().reads() - before;
        assert_eq!(read_ahead, one_by_one);
        assert_eq!(read_ahead, model_range(&model, start, end));
        assert!(ahead_reads <= plain_reads, "{ahead_reads} > {plain_reads}");
        if one_by_one.len() > 20 {
            assert!(
                ahead_reads * 2 < plain_reads,
                "{ahead_reads} vs {plain_reads}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Writer input checks.

#[test]
fn out_of_order_and_duplicate_entries_are_errors_and_the_writer_stays_usable() {
    let mut writer = DeltaLayerWriter::new(Vec::new(), 4096).expect("writer");
    writer.add(b"b", 5, ValueKind::Put, b"1").expect("first");
    let duplicate = writer
        .add(b"b", 5, ValueKind::Put, b"2")
        .expect_err("duplicate (key, lsn)");
    assert!(
        matches!(
            duplicate,
            Error::Internal(ref m) if m.contains("LSN 5 of a key not above its LSN 5")
        ),
        "{duplicate}"
    );
    let older = writer
        .add(b"b", 4, ValueKind::Put, b"2")
        .expect_err("older lsn");
    assert!(
        matches!(
            older,
            Error::Internal(ref m) if m.contains("LSN 4 of a key not above its LSN 5")
        ),
        "{older}"
    );
    let smaller_key = writer
        .add(b"a", 9, ValueKind::Put, b"2")
        .expect_err("smaller key");
    assert!(matches!(smaller_key, Error::Internal(_)), "{smaller_key}");
    writer
        .add(b"b", 6, ValueKind::Delete, b"")
        .expect("newer version");
    writer
        .add(b"c", 1, ValueKind::Put, b"3")
        .expect("next key, lower lsn");
    let (bytes, summary) = writer.finish().expect("finish");
    assert_eq!(summary.entries, 3);
    assert_eq!((summary.lsn_min, summary.lsn_max), (1, 6));
    let reader = open_mem(bytes);
    assert_eq!(
        reader.get(b"b", 5).expect("get"),
        Some((5, ValueKind::Put, b"1".to_vec()))
    );
    assert_eq!(
        reader.get(b"b", 9).expect("get"),
        Some((6, ValueKind::Delete, Vec::new()))
    );
    assert_eq!(reader.get(b"c", 0).expect("get"), None);
}

#[test]
fn limits_are_enforced_on_add_and_new() {
    assert!(DeltaLayerWriter::new(Vec::new(), BLOCK_BYTES_TARGET_MIN - 1).is_err());
    assert!(DeltaLayerWriter::new(Vec::new(), BLOCK_BYTES_TARGET_MAX + 1).is_err());
    let mut writer = DeltaLayerWriter::new(Vec::new(), BLOCK_BYTES_TARGET_MIN).expect("writer");
    assert!(matches!(
        writer.add(b"", 1, ValueKind::Put, b""),
        Err(Error::InvalidInput(InvalidInput::KeyEmpty { .. }))
    ));
    let too_long = vec![b'k'; KEY_BYTES_MAX + 1];
    assert!(matches!(
        writer.add(&too_long, 1, ValueKind::Put, b""),
        Err(Error::InvalidInput(InvalidInput::KeyTooLong { .. }))
    ));
    assert!(matches!(
        writer.add(b"k", 1, ValueKind::Delete, b"x"),
        Err(Error::InvalidInput(InvalidInput::ValueTooLarge {
            max: 0,
            ..
        }))
    ));
    let too_large = vec![0u8; VALUE_BYTES_MAX + 1];
    assert!(matches!(
        writer.add(b"k", 1, ValueKind::Put, &too_large),
        Err(Error::InvalidInput(InvalidInput::ValueTooLarge { .. }))
    ));
    writer
        .add(b"k", 1, ValueKind::Put, b"ok")
        .expect("valid after invalid");
    assert_eq!(writer.finish().expect("finish").1.entries, 1);
}

struct FailingSink {
    appends_left: usize,
}

impl LayerSink for FailingSink {
    fn append(&mut self, _bytes: &[u8]) -> Result<()> {
        if self.appends_left == 0 {
            return Err(Error::io(
                "failing",
                "write",
                std::io::Error::other("injected"),
            ));
        }
        self.appends_left -= 1;
        Ok(())
    }
}

#[test]
fn a_failed_sink_poisons_the_writer() {
    let mut writer =
        DeltaLayerWriter::new(FailingSink { appends_left: 1 }, 64).expect("header fits");
    writer
        .add(b"a", 1, ValueKind::Put, &[0; 40])
        .expect("buffered");
    let err = writer
        .add(b"b", 1, ValueKind::Put, &[0; 40])
        .expect_err("block write fails");
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(matches!(
        writer.add(b"c", 1, ValueKind::Put, b""),
        Err(Error::Poisoned(_))
    ));
    assert!(matches!(writer.finish(), Err(Error::Poisoned(_))));
}

// ---------------------------------------------------------------------------
// Versions and hostile lengths.

/// Rewrites a footer field and the footer's crc, as a newer or a hostile writer would.
fn patch_footer(bytes: &mut [u8], field_offset: usize, value: &[u8]) {
    let footer_start = bytes.len() - FOOTER_BYTES;
    bytes[footer_start + field_offset..footer_start + field_offset + value.len()]
        .copy_from_slice(value);
    let crc = crate::crc::crc32c(&bytes[footer_start..footer_start + FOOTER_CRC_OFFSET]);
    bytes[footer_start + FOOTER_CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn a_newer_format_version_is_unsupported_not_corrupt() {
    let (mut bytes, _) = build(&small_model(), SMALL_BLOCK_BYTES);
    patch_footer(
        &mut bytes,
        FOOTER_VERSION_OFFSET,
        &(DELTA_FORMAT_VERSION + 1).to_le_bytes(),
    );
    let err = DeltaLayerReader::open(MemFile::new(bytes)).expect_err("newer version");
    assert!(
        matches!(
            err,
            Error::UnsupportedVersion {
                found,
                supported: DELTA_FORMAT_VERSION,
                ..
            } if found == DELTA_FORMAT_VERSION + 1
        ),
        "{err}"
    );
}

#[test]
fn hostile_lengths_are_rejected_before_allocating() {
    let (good, _) = build(&small_model(), SMALL_BLOCK_BYTES);
    for (field, value) in [
        (FOOTER_INDEX_LEN_OFFSET, u64::MAX / 2),
        (FOOTER_INDEX_OFFSET_OFFSET, u64::MAX - 3),
        (FOOTER_BLOCK_COUNT_OFFSET, 1 << 40),
        (FOOTER_BLOOM_LEN_OFFSET, 1 << 40),
        (FOOTER_KEYS_LEN_OFFSET, u64::MAX),
    ] {
        let mut bytes = good.clone();
        patch_footer(&mut bytes, field, &value.to_le_bytes());
        let err = DeltaLayerReader::open(MemFile::new(bytes)).expect_err("hostile length");
        assert!(err.is_corruption(), "field {field}: {err}");
    }
    let mut bytes = good.clone();
    patch_footer(&mut bytes, FOOTER_LEN_OFFSET, &u32::MAX.to_le_bytes());
    assert!(DeltaLayerReader::open(MemFile::new(bytes))
        .expect_err("footer length")
        .is_corruption());
}

#[test]
fn every_truncation_is_an_error() {
    let (good, _) = build(&small_model(), SMALL_BLOCK_BYTES);
    for len in 0..good.len() {
        let err =
            DeltaLayerReader::open(MemFile::new(good[..len].to_vec())).expect_err("truncated");
        assert!(err.is_corruption(), "truncated to {len}: {err}");
    }
}

#[test]
fn a_truncated_real_file_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("truncated.delta");
    let file = std::fs::File::create(&path).expect("create");
    let (sink, summary) = write_layer(
        FileSink {
            file,
            path: path.clone(),
        },
        &small_model(),
        SMALL_BLOCK_BYTES,
    );
    sink.file.set_len(summary.file_bytes - 1).expect("truncate");
    let err = DeltaLayerReader::open(FileReader::open(&path)).expect_err("truncated");
    assert!(err.is_corruption(), "{err}");
}

// ---------------------------------------------------------------------------
// Corruption, byte by byte, of a real file.

/// Runs every query against a reader of a possibly corrupted file. Returns
/// whether any query reported the corruption; panics on a wrong answer.
fn queries_detect_corruption(
    path: &Path,
    model: &Model,
    summary: &DeltaLayerSummary,
    flipped_at: u64,
    what: &str,
) -> bool {
    let check_err = |err: Error| {
        match &err {
            Error::Corruption(c) => {
                assert_eq!(c.file, path, "{what}: {err}");
                // The error names the start of the header, footer, section or
                // block that holds the bad byte, or a field before it.
                assert!(
                    c.offset < summary.file_bytes && c.offset <= flipped_at,
                    "{what}: the error names offset {} : {err}",
                    c.offset
                );
            }
            _ => panic!("{what}: not a corruption error: {err}"),
        }
        true
    };
    let reader = match DeltaLayerReader::open(FileReader::open(path)) {
        Ok(reader) => reader,
        Err(err) => return check_err(err),
    };
    assert_eq!(reader.summary(), summary, "{what}: wrong summary");
    let mut detected = false;
    let mut probe_keys: Vec<Vec<u8>> = model.keys().map(|(k, _)| k.clone()).collect();
    probe_keys.dedup();
    probe_keys.push(b"key-0".to_vec());
    probe_keys.push(b"absent".to_vec());
    for key in &probe_keys {
        for lsn in [0, 15, 30, 120, 250, Lsn::MAX] {
            match reader.get(key, lsn) {
                Ok(got) => assert_eq!(
                    got,
                    model_get(model, key, lsn),
                    "{what}: wrong get({key:?}, {lsn})"
                ),
                Err(err) => detected |= check_err(err),
            }
        }
    }
    let expected = model_range(model, Bound::Unbounded, Bound::Unbounded);
    let mut scanned = 0;
    for item in reader
        .range(Bound::Unbounded, Bound::Unbounded)
        .expect("range")
    {
        match item {
            Ok(entry) => {
                assert_eq!(
                    Some(&entry),
                    expected.get(scanned),
                    "{what}: wrong scan entry {scanned}"
                );
                scanned += 1;
            }
            Err(err) => {
                detected |= check_err(err);
                break;
            }
        }
    }
    if !detected {
        assert_eq!(
            scanned,
            expected.len(),
            "{what}: scan ended early without an error"
        );
    }
    // The same scan reading blocks ahead, several at a time.
    let reader = Arc::new(reader);
    let mut ahead_ok = 0;
    for item in reader
        .range_owned(Bound::Unbounded, Bound::Unbounded)
        .expect("range")
        .with_readahead(1024)
    {
        match item {
            Ok(entry) => {
                assert_eq!(Some(&entry), expected.get(ahead_ok), "{what}: read ahead");
                ahead_ok += 1;
            }
            Err(err) => {
                detected |= check_err(err);
                break;
            }
        }
    }
    assert!(
        detected || ahead_ok == expected.len(),
        "{what}: read ahead ended early"
    );
    detected
}

#[test]
fn every_flipped_byte_of_a_real_file_is_detected_and_never_answers_wrong() {
    let model = small_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("layer.delta");
    let file = std::fs::File::create(&path).expect("create");
    let (sink, summary) = write_layer(
        FileSink {
            file,
            path: path.clone(),
        },
        &model,
        SMALL_BLOCK_BYTES,
    );
    drop(sink);
    let good = std::fs::read(&path).expect("read back");
    assert!(!queries_detect_corruption(
        &path,
        &model,
        &summary,
        u64::MAX,
        "intact file"
    ));

    let patcher = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open for patching");
    for (pos, &byte) in good.iter().enumerate() {
        for flip in [1u8 << (pos % 8), 0xff] {
            patcher
                .write_all_at(&[byte ^ flip], pos as u64)
                .expect("flip");
            let what = format!("byte {pos} ^ {flip:#04x}");
            // The format has no padding: every byte is under a checksum, so every flip must be caught.
            assert!(
                queries_detect_corruption(&path, &model, &summary, pos as u64, &what),
                "{what}: went unnoticed"
            );
        }
        patcher.write_all_at(&[byte], pos as u64).expect("restore");
    }
}

// ---------------------------------------------------------------------------
// Model-based property test.

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::collection::vec(prop::sample::select(b"abc".to_vec()), 1..8),
        1 => prop::collection::vec(any::<u8>(), 1..64),
        1 => (prop::sample::select(b"abc".to_vec()), prop::sample::select(vec![KEY_BYTES_MAX - 1, KEY_BYTES_MAX]))
            .prop_map(|(b, n)| vec![b; n]),
    ]
}

fn value_strategy() -> impl Strategy<Value = (ValueKind, Vec<u8>)> {
    prop_oneof![
        2 => Just((ValueKind::Delete, Vec::new())),
        2 => Just((ValueKind::Put, Vec::new())),
        6 => prop::collection::vec(any::<u8>(), 1..48).prop_map(|v| (ValueKind::Put, v)),
        1 => prop::collection::vec(any::<u8>(), 200..1500).prop_map(|v| (ValueKind::Put, v)),
        // Around a page: value blocks where blocks are aligned.
        1 => prop::collection::vec(any::<u8>(), 3990..8300).prop_map(|v| (ValueKind::Put, v)),
    ]
}

fn model_strategy() -> impl Strategy<Value = Model> {
    prop::collection::btree_map(
        key_strategy(),
        prop::collection::btree_map(0..64u64, value_strategy(), 1..8),
        0..40,
    )
    .prop_map(|keys| {
        keys.into_iter()
            .flat_map(|(key, versions)| {
                versions
                    .into_iter()
                    .map(move |(lsn, kv)| ((key.clone(), lsn), kv))
            })
            .collect()
    })
}

fn bound_strategy() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        3 => key_strategy().prop_map(Bound::Included),
        3 => key_strategy().prop_map(Bound::Excluded),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_layers_match_the_btreemap_model(
        model in model_strategy(),
        block_bytes in prop::sample::select(vec![64usize, 100, 256, 4096]),
        probes in prop::collection::vec((key_strategy(), 0..70u64), 0..40),
        ranges in prop::collection::vec((bound_strategy(), bound_strategy()), 1..8),
    ) {
        let (bytes, written) = build(&model, block_bytes);
        let reader = open_mem(bytes);
        prop_assert_eq!(reader.summary(), &written);
        prop_assert_eq!(written.entries, model.len() as u64);

        let mut queries: Vec<(Vec<u8>, Lsn)> = probes;
        for (key, lsn) in model.keys() {
            queries.extend([(key.clone(), lsn.saturating_sub(1)), (key.clone(), *lsn), (key.clone(), lsn + 1)]);
        }
        for (key, lsn) in &queries {
            let before = reader.file().reads();
            let got = reader.get(key, *lsn).expect("get");
            prop_assert_eq!(got, model_get(&model, key, *lsn), "get({:?}, {})", key, lsn);
            prop_assert!(reader.file().reads() - before <= 1, "get read more than one block");
        }
        for (start, end) in &ranges {
            let start = start.as_ref().map(Vec::as_slice);
            let end = end.as_ref().map(Vec::as_slice);
            prop_assert_eq!(collect_range(&reader, start, end), model_range(&model, start, end));
        }
    }
}

/// (offset, length) of every data block, read from the file with the format constants.
fn block_extents(bytes: &[u8]) -> Vec<(usize, usize)> {
    let footer = &bytes[bytes.len() - FOOTER_BYTES..];
    let index_offset = u64_at(footer, FOOTER_INDEX_OFFSET_OFFSET).expect("field") as usize;
    let block_count = u64_at(footer, FOOTER_BLOCK_COUNT_OFFSET).expect("field");
    let mut pos = index_offset;
    let mut blocks = vec![];
    for _ in 0..block_count {
        let offset = u64_at(bytes, pos + INDEX_BLOCK_OFFSET_OFFSET).expect("offset") as usize;
        let len = u64_at(bytes, pos + INDEX_BLOCK_LEN_OFFSET).expect("len") as usize;
        let key_len = u16_at(bytes, pos + INDEX_FIRST_KEY_LEN_OFFSET).expect("key len");
        blocks.push((offset, len));
        pos += INDEX_ENTRY_HEADER_BYTES + usize::from(key_len & !INDEX_VALUE_BLOCK_FLAG);
        if key_len & INDEX_VALUE_BLOCK_FLAG != 0 {
            pos += INDEX_VALUE_BLOCK_TAIL_BYTES;
        }
    }
    blocks
}

#[test]
fn point_reads_find_every_version_among_thousands_of_blocks_with_tied_prefixes() {
    // One-entry blocks. Keys share 6 bytes (skipped), then runs of keys tie
    // on the next 8 and differ after them, then short keys that are
    // prefixes of others: the buckets, the gallop over ties and the
    // whole-key comparisons all decide some reads.
    let mut model = Model::new();
    for group in 0..40u32 {
        for i in 0..(1 + group * 7 % 150) {
            let key = format!("shared{group:04}tied{i:05}");
            put(&mut model, key.as_bytes(), 10 + u64::from(i % 3), b"v");
            put(&mut model, key.as_bytes(), 20 + u64::from(i % 5), b"w");
        }
        put(
            &mut model,
            format!("shared{group:02}").as_bytes(),
            1,
            b"short",
        );
    }
    let (bytes, summary) = build(&model, BLOCK_BYTES_TARGET_MIN);
    assert!(summary.blocks > 2000, "{} blocks", summary.blocks);
    let reader = open_mem(bytes);
    let keys: std::collections::BTreeSet<&Vec<u8>> = model.keys().map(|(k, _)| k).collect();
    for key in keys {
        for lsn in [0, 1, 10, 11, 12, 20, 22, 24, 100] {
            assert_eq!(
                reader.get(key, lsn).expect("get"),
                model_get(&model, key, lsn),
                "{} at {lsn}",
                String::from_utf8_lossy(key)
            );
        }
        let mut absent = key.clone();
        absent.push(0);
        assert_eq!(reader.get(&absent, 100).expect("get"), None);
    }
}

#[test]
fn page_aligned_blocks_stay_in_their_page_and_their_padding_is_checked() {
    // Small entries and a few larger than a block, at the default 4 KiB target.
    let mut model = Model::new();
    for i in 0..400u32 {
        let len = if i % 97 == 5 {
            5000
        } else {
            200 + (i as usize * 37) % 150
        };
        put(
            &mut model,
            format!("key-{i:05}").as_bytes(),
            1,
            &vec![i as u8; len],
        );
    }
    let (good, _) = build(&model, BLOCK_ALIGN_BYTES);
    let blocks = block_extents(&good);
    let (mut padded, mut small) = (0, 0);
    for &(offset, len) in &blocks {
        let payload = u32_at(&good, offset + BLOCK_PAYLOAD_LEN_OFFSET).expect("payload") as usize;
        padded += len - BLOCK_HEADER_BYTES - payload;
        if payload <= BLOCK_ALIGN_BYTES {
            small += 1;
            assert_eq!(
                offset / BLOCK_ALIGN_BYTES,
                (offset + len - 1) / BLOCK_ALIGN_BYTES,
                "block at {offset} of {len} bytes crosses a page boundary"
            );
        }
    }
    assert!(
        small > 20 && padded > 0,
        "{small} small blocks, {padded} bytes of padding"
    );
    let space = padded as f64 / good.len() as f64;
    assert!(
        space < 0.1,
        "padding takes {:.1}% of the file",
        space * 100.0
    );
    let reader = open_mem(good.clone());
    for (key, _) in model.keys() {
        assert_eq!(reader.get(key, 1).expect("get"), model_get(&model, key, 1));
    }
    assert_eq!(
        collect_range(&reader, Bound::Unbounded, Bound::Unbounded).len(),
        model.len()
    );

    // A padded block, its last byte set: the crc catches it; with the crc
    // recomputed (a writer that filled its padding), the zero check does.
    let (offset, len) = *blocks
        .iter()
        .find(|&&(o, l)| l - BLOCK_HEADER_BYTES > u32_at(&good, o).expect("payload") as usize)
        .expect("a padded block");
    let key = {
        let mut pos = offset + BLOCK_HEADER_BYTES;
        let suffix = u16_at(&good, pos + ENTRY_SUFFIX_LEN_OFFSET).expect("suffix") as usize;
        pos += ENTRY_HEADER_BYTES;
        good[pos..pos + suffix].to_vec()
    };
    let mut bad = good.clone();
    bad[offset + len - 1] = 1;
    assert!(matches!(
        open_mem(bad.clone()).get(&key, 1),
        Err(Error::Corruption(_))
    ));
    let crc = block_crc(
        offset as u64,
        &bad[offset..offset + BLOCK_CRC_OFFSET],
        &bad[offset + BLOCK_HEADER_BYTES..offset + len],
    );
    bad[offset + BLOCK_CRC_OFFSET..offset + BLOCK_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
    match open_mem(bad).get(&key, 1) {
        Err(Error::Corruption(c)) => assert_eq!(c.offset, (offset + len - 1) as u64, "{c}"),
        other => panic!("a filled padding byte went unnoticed: {other:?}"),
    }
}

#[test]
fn a_valid_block_at_the_wrong_offset_is_detected() {
    // Equal-sized entries give equal-sized blocks that can be swapped.
    let mut model = Model::new();
    for i in 0..40u32 {
        put(&mut model, format!("k{i:03}").as_bytes(), 1, b"0123456789");
    }
    let (good, _) = build(&model, 96);
    let blocks = block_extents(&good);
    let (a, b) = (blocks[1], blocks[2]);
    assert_eq!(a.1, b.1, "the test needs two blocks of one size");
    let mut swapped = good.clone();
    swapped[a.0..a.0 + a.1].copy_from_slice(&good[b.0..b.0 + b.1]);
    swapped[b.0..b.0 + b.1].copy_from_slice(&good[a.0..a.0 + a.1]);
    let reader = open_mem(swapped);
    let err = reader.get(b"k004", 1).expect_err("misdirected block");
    match err {
        Error::Corruption(c) => {
            assert!(
                c.expected.is_some() && c.found.is_some(),
                "a checksum error: {c}"
            );
            assert!(c.offset == a.0 as u64 || c.offset == b.0 as u64, "{c}");
        }
        other => panic!("not a corruption: {other}"),
    }
}

#[test]
fn an_entry_that_sorts_after_the_next_blocks_first_is_corruption() {
    // Found by the `footer` fuzz target: a block whose last entry was raised
    // past the next block's first (checksum recomputed) passed every check,
    // so a scan returned entries out of order and a point read of the raised
    // version answered the older one from the next block.
    let mut model = Model::new();
    put(&mut model, b"a", 1, b"");
    put(&mut model, b"b", 5, b"");
    put(&mut model, b"b", 9, &[7; 80]); // larger than the target: a block of its own
    let (mut bytes, _) = build(&model, BLOCK_BYTES_TARGET_MIN);
    let blocks = block_extents(&bytes);
    assert_eq!(blocks.len(), 2, "the test needs [a@1, b@5] [b@9]");
    // Raise b@5, the last entry of block 0, to b@10.
    let (offset, len) = blocks[0];
    // The block ends with its restart array: a count of 0 alone.
    let last_lsn_at =
        offset + len - RESTART_COUNT_BYTES - ENTRY_HEADER_BYTES - 1 + ENTRY_LSN_OFFSET;
    assert_eq!(u64_at(&bytes, last_lsn_at), Some(5));
    bytes[last_lsn_at..last_lsn_at + 8].copy_from_slice(&10u64.to_le_bytes());
    let block = &bytes[offset..offset + len];
    let crc = block_crc(
        offset as u64,
        &block[..BLOCK_CRC_OFFSET],
        &block[BLOCK_HEADER_BYTES..],
    );
    bytes[offset + BLOCK_CRC_OFFSET..offset + BLOCK_HEADER_BYTES]
        .copy_from_slice(&crc.to_le_bytes());

    let reader = open_mem(bytes);
    let scanned: Result<Vec<DeltaEntry>> = reader
        .range(Bound::Unbounded, Bound::Unbounded)
        .expect("range")
        .collect();
    match scanned {
        Err(Error::Corruption(c)) => {
            assert_eq!(c.file, Path::new("mem/layer.delta"));
            assert!((offset..offset + len).contains(&(c.offset as usize)), "{c}");
        }
        other => panic!("a scan past the raised entry must fail: {other:?}"),
    }
    // A point read checks in full the entry it returns, and walks over the
    // others with the checks a walk needs: the raised entry is never an
    // answer (no get is routed to it), and a@1 before it still is.
    assert!(reader
        .get(b"b", 10)
        .is_ok_and(|v| v.is_none_or(|(lsn, ..)| lsn == 9)));
    assert_eq!(reader.get(b"a", 1).expect("a@1").map(|(l, ..)| l), Some(1));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_corruption_of_random_layers_never_answers_wrong(
        model in model_strategy(),
        block_bytes in prop::sample::select(vec![64usize, 256, 4096]),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 1..12),
    ) {
        let (good, _) = build(&model, block_bytes);
        for (index, xor) in flips {
            let pos = index.index(good.len());
            let mut bytes = good.clone();
            bytes[pos] ^= xor;
            let reader = match DeltaLayerReader::open(MemFile::new(bytes)) {
                Ok(reader) => reader,
                Err(err) => {
                    prop_assert!(err.is_corruption(), "byte {}: {}", pos, err);
                    continue;
                }
            };
            let mut detected = false;
            for (key, lsn) in model.keys() {
                match reader.get(key, *lsn) {
                    Ok(got) => prop_assert_eq!(got, model_get(&model, key, *lsn)),
                    Err(err) => {
                        prop_assert!(err.is_corruption(), "byte {}: {}", pos, err);
                        detected = true;
                    }
                }
            }
            let mut scanned = vec![];
            for item in reader.range(Bound::Unbounded, Bound::Unbounded).expect("range") {
                match item {
                    Ok(entry) => scanned.push(entry),
                    Err(err) => {
                        prop_assert!(err.is_corruption(), "byte {}: {}", pos, err);
                        detected = true;
                        break;
                    }
                }
            }
            let expected = model_range(&model, Bound::Unbounded, Bound::Unbounded);
            prop_assert_eq!(&scanned[..], &expected[..scanned.len()]);
            prop_assert!(detected, "flip of byte {} went unnoticed", pos);
        }
    }
}

// ---------------------------------------------------------------------------
// docs/format.md agrees with the code.

const FORMAT_DOC: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/format.md"));

#[test]
fn format_doc_tables_match_the_constants() {
    use crate::layer::bloom::{
        BLOOM_BITS_OFFSET, BLOOM_BIT_COUNT_OFFSET, BLOOM_HASH_COUNT_MAX, BLOOM_HASH_COUNT_OFFSET,
    };
    let section = FORMAT_DOC
        .split("## Delta layer file")
        .nth(1)
        .expect("the delta layer section");
    let cells =
        |line: &str| -> Vec<String> { line.split('|').map(|c| c.trim().to_string()).collect() };
    let offsets: &[(&str, usize)] = &[
        ("HEADER_MAGIC_OFFSET", HEADER_MAGIC_OFFSET),
        ("HEADER_VERSION_OFFSET", HEADER_VERSION_OFFSET),
        ("HEADER_FLAGS_OFFSET", HEADER_FLAGS_OFFSET),
        (
            "HEADER_BLOCK_BYTES_TARGET_OFFSET",
            HEADER_BLOCK_BYTES_TARGET_OFFSET,
        ),
        ("HEADER_CRC_OFFSET", HEADER_CRC_OFFSET),
        ("HEADER_BYTES", HEADER_BYTES),
        ("BLOCK_PAYLOAD_LEN_OFFSET", BLOCK_PAYLOAD_LEN_OFFSET),
        ("BLOCK_ENTRY_COUNT_OFFSET", BLOCK_ENTRY_COUNT_OFFSET),
        ("BLOCK_CRC_OFFSET", BLOCK_CRC_OFFSET),
        ("BLOCK_HEADER_BYTES", BLOCK_HEADER_BYTES),
        ("ENTRY_SHARED_LEN_OFFSET", ENTRY_SHARED_LEN_OFFSET),
        ("ENTRY_SUFFIX_LEN_OFFSET", ENTRY_SUFFIX_LEN_OFFSET),
        ("ENTRY_LSN_OFFSET", ENTRY_LSN_OFFSET),
        ("ENTRY_KIND_OFFSET", ENTRY_KIND_OFFSET),
        ("ENTRY_VALUE_LEN_OFFSET", ENTRY_VALUE_LEN_OFFSET),
        ("ENTRY_HEADER_BYTES", ENTRY_HEADER_BYTES),
        ("INDEX_BLOCK_OFFSET_OFFSET", INDEX_BLOCK_OFFSET_OFFSET),
        ("INDEX_BLOCK_LEN_OFFSET", INDEX_BLOCK_LEN_OFFSET),
        ("INDEX_FIRST_LSN_OFFSET", INDEX_FIRST_LSN_OFFSET),
        ("INDEX_FIRST_KEY_LEN_OFFSET", INDEX_FIRST_KEY_LEN_OFFSET),
        ("INDEX_ENTRY_HEADER_BYTES", INDEX_ENTRY_HEADER_BYTES),
        ("BLOOM_HASH_COUNT_OFFSET", BLOOM_HASH_COUNT_OFFSET),
        ("BLOOM_BIT_COUNT_OFFSET", BLOOM_BIT_COUNT_OFFSET),
        ("BLOOM_BITS_OFFSET", BLOOM_BITS_OFFSET),
        ("KEYS_MIN_LEN_OFFSET", KEYS_MIN_LEN_OFFSET),
        ("KEYS_MAX_LEN_OFFSET", KEYS_MAX_LEN_OFFSET),
        ("KEYS_HEADER_BYTES", KEYS_HEADER_BYTES),
        ("FOOTER_ENTRY_COUNT_OFFSET", FOOTER_ENTRY_COUNT_OFFSET),
        ("FOOTER_DISTINCT_KEYS_OFFSET", FOOTER_DISTINCT_KEYS_OFFSET),
        ("FOOTER_BLOCK_COUNT_OFFSET", FOOTER_BLOCK_COUNT_OFFSET),
        ("FOOTER_LSN_MIN_OFFSET", FOOTER_LSN_MIN_OFFSET),
        ("FOOTER_LSN_MAX_OFFSET", FOOTER_LSN_MAX_OFFSET),
        ("FOOTER_INDEX_OFFSET_OFFSET", FOOTER_INDEX_OFFSET_OFFSET),
        ("FOOTER_INDEX_LEN_OFFSET", FOOTER_INDEX_LEN_OFFSET),
        ("FOOTER_BLOOM_OFFSET_OFFSET", FOOTER_BLOOM_OFFSET_OFFSET),
        ("FOOTER_BLOOM_LEN_OFFSET", FOOTER_BLOOM_LEN_OFFSET),
        ("FOOTER_KEYS_OFFSET_OFFSET", FOOTER_KEYS_OFFSET_OFFSET),
        ("FOOTER_KEYS_LEN_OFFSET", FOOTER_KEYS_LEN_OFFSET),
        ("FOOTER_INDEX_CRC_OFFSET", FOOTER_INDEX_CRC_OFFSET),
        ("FOOTER_BLOOM_CRC_OFFSET", FOOTER_BLOOM_CRC_OFFSET),
        ("FOOTER_KEYS_CRC_OFFSET", FOOTER_KEYS_CRC_OFFSET),
        ("FOOTER_FLAGS_OFFSET", FOOTER_FLAGS_OFFSET),
        ("FOOTER_LEN_OFFSET", FOOTER_LEN_OFFSET),
        ("FOOTER_VERSION_OFFSET", FOOTER_VERSION_OFFSET),
        ("FOOTER_MAGIC_OFFSET", FOOTER_MAGIC_OFFSET),
        ("FOOTER_CRC_OFFSET", FOOTER_CRC_OFFSET),
        ("FOOTER_BYTES", FOOTER_BYTES),
    ];
    for (name, value) in offsets {
        let needle = format!("`{name}`");
        // Byte-table rows: the first cell is the offset.
        let rows: Vec<Vec<String>> = section
            .lines()
            .filter(|l| l.starts_with('|') && l.contains(&needle))
            .map(cells)
            .filter(|c| c.get(1).is_some_and(|o| o.parse::<usize>().is_ok()))
            .collect();
        assert!(
            !rows.is_empty(),
            "docs/format.md has no byte-table row for {name}"
        );
        for row in rows {
            assert_eq!(
                row[1],
                value.to_string(),
                "docs/format.md gives {name} the wrong offset"
            );
        }
    }
    // Limits table: the first cell is the constant, the second its value.
    let limits: &[(&str, usize)] = &[
        ("KEY_BYTES_MAX", KEY_BYTES_MAX),
        ("BLOCK_BYTES_TARGET_MIN", BLOCK_BYTES_TARGET_MIN),
        ("BLOCK_BYTES_MIN", BLOCK_BYTES_MIN),
        ("FOOTER_BYTES_MAX", FOOTER_BYTES_MAX),
        ("BLOOM_HASH_COUNT_MAX", BLOOM_HASH_COUNT_MAX as usize),
        ("BLOCK_PAD_BYTES_MAX", BLOCK_PAD_BYTES_MAX),
        (
            "BLOCK_PAD_BEFORE_VALUE_BLOCK_MAX",
            BLOCK_PAD_BEFORE_VALUE_BLOCK_MAX,
        ),
    ];
    for (name, value) in limits {
        let needle = format!("`{name}`");
        let row = section
            .lines()
            .map(cells)
            .find(|c| c.get(1) == Some(&needle))
            .unwrap_or_else(|| panic!("docs/format.md has no limits row for {name}"));
        assert_eq!(
            row[2],
            value.to_string(),
            "docs/format.md gives {name} the wrong value"
        );
    }
    assert_eq!(VALUE_BYTES_MAX, 64 << 20, "the limits table says 64 MiB");
    assert_eq!(
        BLOCK_BYTES_TARGET_MAX,
        16 << 20,
        "the limits table says 16 MiB"
    );
    for magic in [HEADER_MAGIC, FOOTER_MAGIC] {
        let magic = format!("`{}`", String::from_utf8_lossy(&magic));
        assert!(
            section.contains(&magic),
            "docs/format.md does not give the magic {magic}"
        );
    }
}

#[test]
fn mid_size_entries_take_two_pages_rather_than_waste_a_quarter_of_one() {
    // (value bytes, pages a block spans, most padding as a share of the
    // file). 1 KiB entries fill 3/4 of a page: their blocks span two pages
    // each and are not padded, the next starting where one ends; 3 KiB
    // ones fill a page well enough; 240 B ones fill it.
    for (value_len, pages, waste_max) in [
        (1024, 2, 0.001),
        (1100, 2, 0.001),
        (3050, 1, 0.26),
        (240, 1, 0.1),
    ] {
        let mut model = Model::new();
        for i in 0..200u32 {
            put(
                &mut model,
                format!("key-{i:05}").as_bytes(),
                1,
                &vec![i as u8; value_len],
            );
        }
        let (file, _) = build(&model, BLOCK_ALIGN_BYTES);
        let blocks = block_extents(&file);
        let mut padded = 0;
        let mut unaligned = 0;
        for &(offset, len) in &blocks[..blocks.len() - 1] {
            let payload =
                u32_at(&file, offset + BLOCK_PAYLOAD_LEN_OFFSET).expect("payload") as usize;
            padded += len - BLOCK_HEADER_BYTES - payload;
            let end = offset + len;
            let spans = end.div_ceil(BLOCK_ALIGN_BYTES) - offset / BLOCK_ALIGN_BYTES;
            if pages == 1 {
                // Every block but the last ends on a page boundary (the
                // first starts after the file header).
                assert_eq!(
                    end % BLOCK_ALIGN_BYTES,
                    0,
                    "{value_len} B: block at {offset} ends at {end}"
                );
                assert_eq!(spans, 1, "{value_len} B: block at {offset} of {len} bytes");
            } else {
                // One read of at most two pages, wherever the block starts.
                assert!(
                    spans <= 2,
                    "{value_len} B: block at {offset} of {len} bytes spans {spans} pages"
                );
                unaligned += usize::from(end % BLOCK_ALIGN_BYTES != 0);
            }
        }
        if pages == 2 {
            assert!(
                unaligned * 2 > blocks.len(),
                "{value_len} B: only {unaligned} of {} blocks end off a page boundary",
                blocks.len()
            );
        }
        let waste = padded as f64 / file.len() as f64;
        assert!(
            waste < waste_max,
            "{value_len} B: padding takes {:.1}% of the file",
            waste * 100.0
        );
        let reader = open_mem(file);
        for (key, _) in model.keys() {
            assert_eq!(reader.get(key, 1).expect("get"), model_get(&model, key, 1));
        }
    }
}

/// `bytes` as format version `version`: header and footer fields and
/// their checksums rewritten.
fn as_version(mut bytes: Vec<u8>, version: u32) -> Vec<u8> {
    bytes[HEADER_VERSION_OFFSET..HEADER_VERSION_OFFSET + 4].copy_from_slice(&version.to_le_bytes());
    let crc = crate::crc::crc32c(&bytes[..HEADER_CRC_OFFSET]);
    bytes[HEADER_CRC_OFFSET..HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
    patch_footer(&mut bytes, FOOTER_VERSION_OFFSET, &version.to_le_bytes());
    bytes
}

/// Keys of 4 KiB values (the fio engine's blocks) among small entries, a
/// tombstone, several versions, and values of 4090 and 8192 bytes.
fn value_block_model() -> Model {
    let mut model = Model::new();
    for i in 0..60u32 {
        let key = format!("key-{i:05}");
        let len = match i % 10 {
            7 => 4090,
            8 => 8192,
            _ => 4096,
        };
        put(
            &mut model,
            key.as_bytes(),
            5,
            &vec![1 + (i % 250) as u8; len],
        );
        if i % 4 == 0 {
            put(&mut model, key.as_bytes(), 9, &vec![2; 4096]);
            put(
                &mut model,
                format!("{key}-small").as_bytes(),
                3,
                b"a small one",
            );
        }
        if i % 6 == 0 {
            model.insert((key.into_bytes(), 12), (ValueKind::Delete, Vec::new()));
        }
    }
    model
}

#[test]
fn a_4_kib_value_is_one_aligned_4_kib_read() {
    let model = value_block_model();
    let (file, _) = build(&model, BLOCK_ALIGN_BYTES);
    let reader = open_mem(file.clone());
    let first_key = model.keys().next().expect("a key").0.clone();
    let mut value_blocks = 0;
    for ((key, lsn), (kind, value)) in &model {
        let before = reader.file().reads();
        assert_eq!(
            reader.get(key, *lsn).expect("get"),
            Some((*lsn, *kind, value.clone()))
        );
        assert_eq!(reader.file().reads() - before, 1, "one read per get");
        if *kind == ValueKind::Put && value.len() >= 4096 && *key != first_key {
            // Its own block: the value's pages, from a page boundary.
            let (_, offset, len) = reader
                .point_read_plan(PointKey::new(key), *lsn)
                .expect("a block");
            assert_eq!(offset % BLOCK_ALIGN_BYTES as u64, 0, "{key:?}");
            assert_eq!(len, value.len().next_multiple_of(BLOCK_ALIGN_BYTES) as u64);
            value_blocks += 1;
        }
        // The versions around it answer too.
        assert_eq!(
            reader.get(key, lsn - 1).expect("get"),
            model_get(&model, key, lsn - 1)
        );
    }
    assert!(value_blocks >= 60, "{value_blocks} value blocks");
    assert_eq!(
        collect_range(&reader, Bound::Unbounded, Bound::Unbounded),
        model_range(&model, Bound::Unbounded, Bound::Unbounded)
    );
    // What the pages hold is the values: the file is barely larger.
    let data: usize = model.values().map(|(_, v)| v.len()).sum();
    let pages: usize = model
        .values()
        .map(|(_, v)| v.len().next_multiple_of(BLOCK_ALIGN_BYTES))
        .sum();
    assert!(
        file.len() < pages + (32 << 10),
        "{} B for {data} B",
        file.len()
    );
    // The same layer without value blocks is what format version 2 reads;
    // with them, version 2 is refused as corrupt (an impossible key length).
    let file = build_v3(&model, BLOCK_ALIGN_BYTES);
    let err = DeltaLayerReader::open(MemFile::new(as_version(file, 2))).expect_err("v2");
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn layers_of_versions_2_and_3_still_read_beside_version_4() {
    let model = small_model();
    let v3 = build_v3(&model, BLOCK_ALIGN_BYTES);
    let (v4, _) = build(&model, BLOCK_ALIGN_BYTES);
    for (version, file) in [(4, v4), (3, v3.clone()), (2, as_version(v3.clone(), 2))] {
        let mut reader = open_mem(file);
        let reads = Arc::new(AtomicU64::new(0));
        reader.count_point_reads(Arc::clone(&reads));
        for (key, lsn) in model.keys() {
            assert_eq!(
                reader.get(key, *lsn).expect("get"),
                model_get(&model, key, *lsn),
                "version {version}"
            );
        }
        // The spread filter still rules out keys within the key range.
        let before = reads.load(AtomicOrdering::Relaxed);
        for i in 0..1000 {
            let key = format!("key-050-{i}");
            assert_eq!(reader.get(key.as_bytes(), Lsn::MAX).expect("get"), None);
        }
        let false_positives = reads.load(AtomicOrdering::Relaxed) - before;
        assert!(
            false_positives < 40,
            "version {version}: {false_positives} reads for 1000 absent keys"
        );
    }
    let err = DeltaLayerReader::open(MemFile::new(as_version(v3, 1))).expect_err("v1");
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn a_flipped_byte_of_a_value_block_is_corruption_at_its_offset() {
    let model = value_block_model();
    let (good, _) = build(&model, BLOCK_ALIGN_BYTES);
    let reader = open_mem(good.clone());
    // A 4090-byte value: a byte of the value, and one of its padding.
    let (key, lsn) = model
        .iter()
        .find(|(_, (_, v))| v.len() == 4090)
        .map(|(k, _)| k.clone())
        .expect("a 4090-byte value");
    let (_, offset, len) = reader
        .point_read_plan(PointKey::new(&key), lsn)
        .expect("a block");
    assert_eq!(len, 4096);
    for at in [offset as usize + 17, offset as usize + 4093] {
        let mut bytes = good.clone();
        bytes[at] ^= 0x40;
        let reader = open_mem(bytes);
        let err = reader.get(&key, lsn).expect_err("a flipped byte");
        assert!(err.is_corruption(), "{err}");
        assert!(
            err.to_string().contains(&format!("offset {offset}")),
            "{err}"
        );
        let scanned: Result<Vec<_>> = reader
            .range(Bound::Unbounded, Bound::Unbounded)
            .expect("range")
            .collect();
        assert!(scanned.expect_err("a scan").is_corruption());
    }
}

// ---------------------------------------------------------------------------
// Reads that fail their check are read again.

/// A layer file in memory whose reads numbered in `corrupt` (from 1) return
/// a flipped bit: a storage that lies now and then.
#[derive(Debug)]
struct LyingFile {
    file: MemFile,
    corrupt: Vec<usize>,
}

impl ReadAt for LyingFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut bytes = self.file.read_at(offset, len)?;
        if self.corrupt.contains(&self.file.reads()) {
            bytes[len / 2] ^= 0x20;
        }
        Ok(bytes)
    }
    fn file_len(&self) -> u64 {
        self.file.file_len()
    }
    fn path(&self) -> &Path {
        self.file.path()
    }
}

/// A reader of the small model through a cache (file id 7) that checks
/// cached blocks again on each use when `check_on_use`, with the first
/// block read and cached by a get of the model's first key: the reader,
/// the cache, that key, its LSN, the get's answer and the cached block.
#[allow(clippy::type_complexity)]
fn reader_with_block_0_cached(
    check_on_use: bool,
) -> (
    DeltaLayerReader<MemFile>,
    Arc<crate::cache::BlockCache>,
    Vec<u8>,
    Lsn,
    Option<(Lsn, ValueKind, Vec<u8>)>,
    crate::cache::Block,
) {
    let model = small_model();
    let (bytes, _) = build(&model, SMALL_BLOCK_BYTES);
    let mut reader = open_mem(bytes);
    let cache = crate::cache::BlockCache::new(1 << 20, check_on_use).expect("a cache");
    reader.set_cache(Some(Arc::clone(&cache)), 7);
    let ((key, lsn), _) = model.iter().next().expect("an entry");
    let want = model_get(&model, key, *lsn);
    assert_eq!(reader.get(key, *lsn).expect("get"), want);
    let good = reader.cached_block(0).expect("cached");
    (reader, cache, key.clone(), *lsn, want, good)
}

#[test]
fn a_cached_block_that_fails_its_check_is_dropped_and_read_from_the_file() {
    // Checked again on each use (`Options::check_cached_blocks`).
    let (reader, cache, key, lsn, want, good) = reader_with_block_0_cached(true);
    let (key, lsn) = (&key, &lsn);
    let offset = u64_from_usize(HEADER_BYTES);
    // Memory flips a bit of the cached copy.
    let mut bad = good.to_vec();
    bad[good.len() / 2] ^= 0x01;
    cache.insert(7, offset, crate::cache::Block::from(bad));
    let reads = reader.file().reads();
    assert_eq!(reader.get(key, *lsn).expect("get"), want);
    assert_eq!(reader.file().reads(), reads + 1, "read from the file again");
    assert_eq!(
        cache.get(7, offset).as_deref(),
        Some(&good[..]),
        "cached again"
    );
    // The batched read's form of a cached block does the same.
    let mut bad = good.to_vec();
    bad[3] ^= 0x80;
    let bad = crate::cache::Block::from(bad);
    let got = reader
        .get_in_cached_block(0, bad, key, *lsn)
        .expect("get in a cached block");
    assert_eq!(got, want);
    assert_eq!(reader.file().reads(), reads + 2);
}

#[test]
fn a_cached_block_is_used_without_a_read_and_its_header_is_still_checked() {
    // Trusted as it was checked when read (the default).
    let (reader, cache, key, lsn, want, good) = reader_with_block_0_cached(false);
    let (key, lsn) = (&key, &lsn);
    let offset = u64_from_usize(HEADER_BYTES);
    // Served by the cache.
    let reads = reader.file().reads();
    assert_eq!(reader.get(key, *lsn).expect("get"), want);
    assert_eq!(reader.file().reads(), reads, "served by the cache");
    // A header that would take the cursor out of the block is caught even
    // so: the block is dropped and read from the file.
    let mut bad = good.to_vec();
    bad[BLOCK_ENTRY_COUNT_OFFSET..BLOCK_ENTRY_COUNT_OFFSET + 4]
        .copy_from_slice(&u32::MAX.to_le_bytes());
    cache.insert(7, offset, crate::cache::Block::from(bad));
    assert_eq!(reader.get(key, *lsn).expect("get"), want);
    assert_eq!(reader.file().reads(), reads + 1, "read from the file again");
    assert_eq!(
        cache.get(7, offset).as_deref(),
        Some(&good[..]),
        "cached again"
    );
}

#[test]
fn an_open_or_a_block_read_that_lies_once_is_read_again_and_answers_right() {
    let model = small_model();
    let (bytes, summary) = build(&model, SMALL_BLOCK_BYTES);
    let expected = model_range(&model, Bound::Unbounded, Bound::Unbounded);
    // Reads 1..=3 open the file (footer, header, the rest); a lie in any of
    // them fails that read's check, and the file is opened again (three
    // more reads).
    for lie in 1..=3 {
        let file = LyingFile {
            file: MemFile::new(bytes.clone()),
            corrupt: vec![lie],
        };
        let reader = DeltaLayerReader::open(file).expect("open after one lie");
        assert_eq!(reader.summary(), &summary);
        assert_eq!(reader.file().file.reads(), lie + 3, "read {lie} lied");
    }
    // A lie in a point read, or in a scan's block: the block is read again.
    let file = LyingFile {
        file: MemFile::new(bytes.clone()),
        corrupt: vec![4, 7],
    };
    let reader = DeltaLayerReader::open(file).expect("open");
    let ((key, lsn), _) = model.iter().nth(5).expect("an entry");
    assert_eq!(
        reader.get(key, *lsn).expect("get"),
        model_get(&model, key, *lsn)
    );
    assert_eq!(reader.file().file.reads(), 5);
    assert_eq!(
        collect_range(&reader, Bound::Unbounded, Bound::Unbounded),
        expected
    );
    // Twice in a row: the second result stands.
    let file = LyingFile {
        file: MemFile::new(bytes),
        corrupt: vec![4, 5],
    };
    let reader = DeltaLayerReader::open(file).expect("open");
    let err = reader.get(key, *lsn).expect_err("lied twice");
    assert!(err.is_corruption(), "{err}");
}

// ---------------------------------------------------------------------------
// What the footer says of the entries is checked where it is used.

/// Rewrites the key range section's key_max (as long as the old one), its
/// crc in the footer and the footer's crc.
fn patch_key_max(bytes: &mut [u8], key_max: &[u8]) {
    let footer = bytes.len() - FOOTER_BYTES;
    let field = |at: usize| u64_at(&bytes[footer..], at).expect("field") as usize;
    let (keys_offset, keys_len) = (
        field(FOOTER_KEYS_OFFSET_OFFSET),
        field(FOOTER_KEYS_LEN_OFFSET),
    );
    let keys = &mut bytes[keys_offset..keys_offset + keys_len];
    let min_len = u16_at(keys, KEYS_MIN_LEN_OFFSET).expect("key_min length") as usize;
    let max_len = u16_at(keys, KEYS_MAX_LEN_OFFSET).expect("key_max length") as usize;
    assert_eq!(max_len, key_max.len(), "the same length keeps the layout");
    keys[KEYS_HEADER_BYTES + min_len..].copy_from_slice(key_max);
    let crc = crate::crc::crc32c(keys);
    patch_footer(bytes, FOOTER_KEYS_CRC_OFFSET, &crc.to_le_bytes());
}

/// The corruption `result` holds: of the test file, at an entry of its
/// data blocks.
fn entry_corruption<T: std::fmt::Debug>(result: Result<T>, index_offset: u64) -> String {
    match result {
        Err(Error::Corruption(c)) => {
            assert_eq!(c.file, Path::new("mem/layer.delta"));
            assert!(
                (u64_from_usize(HEADER_BYTES + BLOCK_HEADER_BYTES)..index_offset)
                    .contains(&c.offset),
                "{c}"
            );
            c.what
        }
        other => panic!("not a corruption: {other:?}"),
    }
}

#[test]
fn an_entry_outside_the_footers_lsn_range_is_refused_on_read() {
    // One block; its first entry (the index's) is (a, 10).
    let mut model = Model::new();
    put(&mut model, b"a", 10, b"x");
    put(&mut model, b"a", 100, b"y");
    put(&mut model, b"b", 5, b"z");
    put(&mut model, b"c", 20, b"w");
    let (good, summary) = build(&model, 4096);
    assert_eq!(
        (summary.lsn_min, summary.lsn_max, summary.blocks),
        (5, 100, 1)
    );
    let index_offset = |bytes: &[u8]| {
        u64_at(
            &bytes[bytes.len() - FOOTER_BYTES..],
            FOOTER_INDEX_OFFSET_OFFSET,
        )
        .expect("field")
    };
    // A footer whose lsn_max is below (a, 100), or lsn_min above (b, 5),
    // but which holds the index's first LSN: it opens, and the entry
    // outside it is refused wherever it is read.
    for (field, lsn, key) in [
        (FOOTER_LSN_MAX_OFFSET, 50u64, b"a"),
        (FOOTER_LSN_MIN_OFFSET, 8, b"b"),
    ] {
        let mut bytes = good.clone();
        patch_footer(&mut bytes, field, &lsn.to_le_bytes());
        let at = index_offset(&bytes);
        let reader = open_mem(bytes);
        let what = entry_corruption(reader.get(key, Lsn::MAX), at);
        assert!(what.contains("outside the layer's"), "{what}");
        let scan: Result<Vec<DeltaEntry>> = reader
            .range(Bound::Unbounded, Bound::Unbounded)
            .expect("range")
            .collect();
        entry_corruption(scan, at);
    }
}

#[test]
fn a_key_above_the_layers_key_max_is_refused_on_read() {
    let mut model = Model::new();
    for key in [b"k1", b"k2", b"k3"] {
        put(&mut model, key, 7, b"v");
    }
    let (good, _) = build(&model, 4096);
    let mut bytes = good.clone();
    // key_max "k2": the last block's first key ("k1") is within it, so the
    // file opens; "k3" is not.
    patch_key_max(&mut bytes, b"k2");
    let at = u64_at(
        &bytes[bytes.len() - FOOTER_BYTES..],
        FOOTER_INDEX_OFFSET_OFFSET,
    )
    .expect("field");
    let reader = open_mem(bytes);
    assert_eq!(reader.summary().key_max, b"k2");
    // A scan reaches "k3" and refuses it; a get of "k3" is ruled out by
    // key_max, and a get of "k2" stops before it (a point read checks in
    // full only the entry it returns).
    assert_eq!(reader.get(b"k3", Lsn::MAX).expect("get k3"), None);
    assert_eq!(
        reader
            .get(b"k2", Lsn::MAX)
            .expect("get k2")
            .map(|(l, ..)| l),
        Some(7)
    );
    let scan: Result<Vec<DeltaEntry>> = reader
        .range(Bound::Unbounded, Bound::Unbounded)
        .expect("range")
        .collect();
    entry_corruption(scan, at);
    // The reads the block's keys allow still answer.
    assert_eq!(
        reader.get(b"k1", 7).expect("get k1").map(|(l, ..)| l),
        Some(7)
    );
}

#[test]
fn a_whole_layer_scan_refuses_footer_counts_that_disagree() {
    let model = small_model();
    let (good, summary) = build(&model, SMALL_BLOCK_BYTES);
    let footer = summary.file_bytes - u64_from_usize(FOOTER_BYTES);
    let expected = model_range(&model, Bound::Unbounded, Bound::Unbounded);
    for (field, value) in [
        (FOOTER_ENTRY_COUNT_OFFSET, summary.entries + 1),
        (FOOTER_ENTRY_COUNT_OFFSET, summary.entries - 1),
        (FOOTER_DISTINCT_KEYS_OFFSET, summary.distinct_keys - 1),
        (FOOTER_DISTINCT_KEYS_OFFSET, summary.distinct_keys + 1),
    ] {
        let mut bytes = good.clone();
        patch_footer(&mut bytes, field, &value.to_le_bytes());
        let reader = Arc::new(open_mem(bytes));
        // Every entry comes out; the end of the scan is the error.
        let mut scan = reader
            .range(Bound::Unbounded, Bound::Unbounded)
            .expect("range");
        for want in &expected {
            assert_eq!(scan.next().expect("an entry").expect("entry"), *want);
        }
        match scan.next() {
            Some(Err(Error::Corruption(c))) => {
                assert_eq!(c.offset, footer, "{c}");
                assert!(c.what.contains("the footer counts"), "{c}");
            }
            other => panic!("field {field}: not a corruption: {other:?}"),
        }
        assert!(scan.next().is_none(), "nothing after the error");
        // As compaction reads it: whole, read ahead.
        let owned: Result<Vec<DeltaEntry>> = reader
            .range_owned(Bound::Unbounded, Bound::Unbounded)
            .expect("range")
            .with_readahead(1 << 20)
            .collect();
        assert!(owned.expect_err("counts").is_corruption());
        // A bounded scan does not count.
        let first = expected[0].0.as_slice();
        let bounded: Vec<DeltaEntry> =
            collect_range(&reader, Bound::Included(first), Bound::Unbounded);
        assert_eq!(bounded, expected);
    }
}

// ---------------------------------------------------------------------------
// Restart points (format version 6).

/// 300 keys of four versions each under a shared prefix, in 4 KiB blocks
/// of about 80 entries: every block has restart points.
fn restart_model() -> Model {
    let mut model = Model::new();
    for i in 0..300u64 {
        let key = format!("tenant-7/rel-3/page-{i:06}").into_bytes();
        for v in 0..4u64 {
            let lsn = 1 + v * 10 + i % 7;
            if (i + v) % 9 == 4 {
                model.insert((key.clone(), lsn), (ValueKind::Delete, Vec::new()));
            } else {
                put(&mut model, &key, lsn, &(i * 4 + v).to_le_bytes());
            }
        }
    }
    model
}

/// The restart count and the restart offsets of a version-6 block.
fn restarts_of(block: &[u8]) -> (u32, Vec<u32>) {
    let payload_len = u32_at(block, BLOCK_PAYLOAD_LEN_OFFSET).expect("payload") as usize;
    let count_at = BLOCK_HEADER_BYTES + payload_len - RESTART_COUNT_BYTES;
    let count = u32_at(block, count_at).expect("count");
    let offsets = (0..count as usize)
        .map(|i| {
            let at = count_at - (count as usize - i) * RESTART_OFFSET_BYTES;
            u32_at(block, at).expect("offset")
        })
        .collect();
    (count, offsets)
}

/// Writes `bytes` back over block `offset..offset + len` with its crc32c
/// recomputed (a block as a buggy writer would leave it, not a flipped bit).
fn reseal_block(bytes: &mut [u8], offset: usize, len: usize) {
    let block = &bytes[offset..offset + len];
    let crc = block_crc(
        offset as u64,
        &block[..BLOCK_CRC_OFFSET],
        &block[BLOCK_HEADER_BYTES..],
    );
    bytes[offset + BLOCK_CRC_OFFSET..offset + BLOCK_HEADER_BYTES]
        .copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn point_reads_from_restart_points_find_every_version() {
    let model = restart_model();
    for block_bytes in [4096usize, 16 << 10] {
        let (bytes, _) = build(&model, block_bytes);
        let blocks = block_extents(&bytes);
        for &(offset, len) in &blocks[..blocks.len() - 1] {
            let entries = u32_at(&bytes, offset + BLOCK_ENTRY_COUNT_OFFSET).expect("count");
            let (count, offsets) = restarts_of(&bytes[offset..offset + len]);
            assert!(entries > 2 * RESTART_INTERVAL, "{entries} entries a block");
            assert_eq!(count, (entries - 1) / RESTART_INTERVAL);
            // Each restart point's key is whole: it shares nothing.
            for o in offsets {
                let at = offset + o as usize;
                assert_eq!(u16_at(&bytes, at + ENTRY_SHARED_LEN_OFFSET), Some(0));
            }
        }
        let reader = open_mem(bytes);
        for (key, lsn) in model.keys() {
            for probe in [lsn - 1, *lsn, lsn + 1, Lsn::MAX] {
                assert_eq!(
                    reader.get(key, probe).expect("get"),
                    model_get(&model, key, probe),
                    "get({}, {probe}) in {block_bytes}-byte blocks",
                    String::from_utf8_lossy(key)
                );
            }
        }
        for absent in [
            &b"tenant-7/rel-3/page-000100x"[..],
            b"tenant-7/rel-3/page-0001",
            b"tenant-7/rel-3/page-000299z",
        ] {
            assert_eq!(reader.get(absent, Lsn::MAX).expect("get"), None);
        }
        assert_eq!(
            collect_range(&reader, Bound::Unbounded, Bound::Unbounded),
            model_range(&model, Bound::Unbounded, Bound::Unbounded)
        );
    }
}

#[test]
fn a_file_of_format_version_5_without_restart_points_reads_as_it_is() {
    let model = restart_model();
    assert_reads_as_model(&open_mem(build_version(&model, 4096, 5)), &model);
}

#[test]
fn a_restart_point_out_of_place_is_corruption_naming_its_block() {
    let model = restart_model();
    let (good, _) = build(&model, 4096);
    let (offset, len) = block_extents(&good)[1];
    let (count, offsets) = restarts_of(&good[offset..offset + len]);
    assert!(count >= 2, "the test needs a block of 3 restart points");
    // Every key of the block, to find the ones whose search a bad restart
    // point misleads.
    let keys: Vec<(Vec<u8>, Lsn)> = open_mem(good.clone())
        .range(Bound::Unbounded, Bound::Unbounded)
        .expect("range")
        .map(|e| e.map(|(k, l, _, _)| (k, l)))
        .collect::<Result<_>>()
        .expect("scan");
    let payload_len = u32_at(&good, offset + BLOCK_PAYLOAD_LEN_OFFSET).expect("len") as usize;
    let count_at = offset + BLOCK_HEADER_BYTES + payload_len - RESTART_COUNT_BYTES;
    let first_slot = count_at - count as usize * RESTART_OFFSET_BYTES;
    let entry_after = |o: u32| {
        // The entry after the one at block offset `o`: it shares bytes.
        let at = offset + o as usize;
        let suffix = u16_at(&good, at + ENTRY_SUFFIX_LEN_OFFSET).expect("suffix") as usize;
        let value = u32_at(&good, at + ENTRY_VALUE_LEN_OFFSET).expect("value") as usize;
        o + (ENTRY_HEADER_BYTES + suffix + value) as u32
    };
    type Patch<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
    let cases: Vec<(&str, Patch)> = vec![
        (
            "a restart offset on an entry that shares its key",
            Box::new(|b: &mut Vec<u8>| {
                let o = entry_after(offsets[0]);
                b[first_slot..first_slot + 4].copy_from_slice(&o.to_le_bytes());
            }),
        ),
        (
            "two restart offsets swapped",
            Box::new(|b: &mut Vec<u8>| {
                b[first_slot..first_slot + 4].copy_from_slice(&offsets[1].to_le_bytes());
                b[first_slot + 4..first_slot + 8].copy_from_slice(&offsets[0].to_le_bytes());
            }),
        ),
        (
            "a restart offset past the entries",
            Box::new(|b: &mut Vec<u8>| {
                let o = (first_slot - offset) as u32;
                b[first_slot..first_slot + 4].copy_from_slice(&o.to_le_bytes());
            }),
        ),
        (
            "a restart count that disagrees with the entries",
            Box::new(|b: &mut Vec<u8>| {
                b[count_at..count_at + 4].copy_from_slice(&(count - 1).to_le_bytes());
            }),
        ),
    ];
    for (what, patch) in cases {
        let mut bad = good.clone();
        patch(&mut bad);
        reseal_block(&mut bad, offset, len);
        let reader = open_mem(bad);
        // No get answers wrong; those that reach the bad restart point fail
        // naming the block's bytes.
        let mut failed = 0;
        for (key, lsn) in &keys {
            match reader.get(key, *lsn) {
                Ok(got) => assert_eq!(got, model_get(&model, key, *lsn), "{what}"),
                Err(Error::Corruption(c)) => {
                    assert!(
                        (offset as u64..(offset + len) as u64).contains(&c.offset),
                        "{what}: {c}"
                    );
                    failed += 1;
                }
                Err(other) => panic!("{what}: {other}"),
            }
        }
        assert!(failed > 0, "{what}: no get noticed");
        // A walk over every entry notices too.
        let scan: Result<Vec<_>> = reader
            .range(Bound::Unbounded, Bound::Unbounded)
            .expect("range")
            .collect();
        assert!(
            matches!(scan, Err(Error::Corruption(_))),
            "{what}: the scan passed"
        );
    }
}
