//! A read that returns other bytes than those stored (issue 27, "the storage
//! lies") is read again, once, by every reader, through the storage's one
//! policy (`io::read_verified`): a single corrupted read answers right and
//! counts one retry (`Stats::read_retries`, and the simulated storage sees
//! one range forgotten); a persistent rot is a corruption error naming the
//! file and the offset, after one retry.
//!
//! On the simulated storage, reads through the page cache (`Buffered`), so
//! that a corrupted read returns exactly the bytes the reader asked for.

use std::path::PathBuf;
use std::sync::Arc;

use strata::io::sim::{CorruptionKind, ReadCorruption, SimStorage};
use strata::io::{FileClass, IoMode};
use strata::{Db, Error, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";
const KINDS: [CorruptionKind; 3] = [
    CorruptionKind::BitFlip,
    CorruptionKind::ZeroSector,
    CorruptionKind::Misdirected,
];
/// Keys of the older layer file; the newer one holds as many after them.
const KEYS_PER_LAYER: u32 = 100;

fn options(sim: &SimStorage) -> Options {
    Options {
        io_mode: IoMode::Buffered,
        fallback_to_buffered: false,
        writer_buffer_bytes: 8192,
        delta_block_bytes: 1024,
        block_cache_bytes: 0,
        background_flush: false,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-")
        .repeat(1 + (i % 7) as usize)
        .into_bytes()
}

/// A database whose keys `0..n`, each put with a sync, are in one frozen
/// layer (not flushed: its values are read from its log, or from the log's
/// memory within `log_memory_bytes`).
fn frozen(sim: &SimStorage, log_memory_bytes: u64, n: u32) -> Db {
    let db = Db::open(
        DIR,
        Options {
            log_memory_bytes,
            ..options(sim)
        },
    )
    .unwrap();
    for i in 0..n {
        db.put(key(i), value(i), WriteOptions { sync: true })
            .unwrap();
    }
    db.freeze().unwrap();
    db
}

/// A closed database of two layer files with disjoint keys (the older
/// holds keys `0..KEYS_PER_LAYER`), with several data blocks each.
fn two_layers(seed: u64) -> SimStorage {
    let sim = SimStorage::new(seed);
    let db = Db::open(DIR, options(&sim)).unwrap();
    for layer in 0..2 {
        let mut b = WriteBatch::new();
        for i in layer * KEYS_PER_LAYER..(layer + 1) * KEYS_PER_LAYER {
            b.put(key(i), value(i));
        }
        db.write(&b, WriteOptions { sync: true }).unwrap();
        db.flush().unwrap();
    }
    db.close().unwrap();
    sim
}

/// The files named `*.{extension}`, oldest (lowest id) first.
fn files(sim: &SimStorage, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<_> = sim
        .file_paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

/// The layer files, oldest (lowest id) first.
fn layer_files(sim: &SimStorage) -> Vec<PathBuf> {
    files(sim, "delta")
}

/// The log files, oldest first.
fn logs(sim: &SimStorage) -> Vec<PathBuf> {
    files(sim, "log")
}

/// Corrupts the read after the `n - 1` next ones, as `kind`.
fn corrupt_read(sim: &SimStorage, n: u64, kind: CorruptionKind) {
    sim.set_read_corruption(ReadCorruption {
        at_read: Some(sim.reads() + n),
        one_in_reads: None,
        kind: Some(kind),
    });
}

/// Retries counted by the database and ranges forgotten by the storage.
fn retries(db: &Db, sim: &SimStorage) -> (u64, u64) {
    (db.stats().read_retries, sim.forgotten_ranges())
}

#[test]
fn a_data_block_read_corrupted_once_answers_right_and_counts_one_retry() {
    let sim = two_layers(1);
    let db = Db::open(DIR, options(&sim)).unwrap();
    // Opens the older layer file: from here on, a get reads one data block.
    assert_eq!(db.get(key(0)).unwrap(), Some(value(0)));
    for (n, kind) in KINDS.into_iter().enumerate() {
        let before = retries(&db, &sim);
        let corrupted = sim.corrupted_reads();
        corrupt_read(&sim, 1, kind);
        let i = 10 + 30 * n as u32;
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{kind:?}");
        assert_eq!(sim.corrupted_reads(), corrupted + 1, "{kind:?}");
        assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1), "{kind:?}");
    }
    assert_eq!(db.stats().io.read_retries(FileClass::Delta), 3);
}

#[test]
fn a_batched_or_read_ahead_block_corrupted_once_is_read_again_alone() {
    let sim = two_layers(2);
    let db = Db::open(DIR, options(&sim)).unwrap();
    let all = |db: &Db| -> Vec<(Vec<u8>, Vec<u8>)> {
        db.scan::<&[u8], _>(..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let expected: Vec<(Vec<u8>, Vec<u8>)> = (0..2 * KEYS_PER_LAYER)
        .map(|i| (key(i), value(i)))
        .collect();
    // Every layer open; then each kind of corruption in a multi_get's
    // batch, and in a scan's read-ahead.
    assert_eq!(all(&db), expected);
    let keys: Vec<Vec<u8>> = (0..2 * KEYS_PER_LAYER).step_by(37).map(key).collect();
    for kind in KINDS {
        let before = retries(&db, &sim);
        corrupt_read(&sim, 1, kind);
        let got = db.multi_get(&keys).unwrap();
        let want: Vec<Option<Vec<u8>>> = (0..2 * KEYS_PER_LAYER)
            .step_by(37)
            .map(|i| Some(value(i)))
            .collect();
        assert_eq!(got, want, "{kind:?}");
        assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1), "{kind:?}");

        // A read-ahead holds several blocks, each checked (and read again
        // alone) on its own: a zeroed sector may straddle two of them, a
        // misdirected read fails them all.
        let before = retries(&db, &sim);
        corrupt_read(&sim, 1, kind);
        assert_eq!(all(&db), expected, "{kind:?}");
        let (db_retries, forgotten) = retries(&db, &sim);
        assert!(db_retries > before.0, "{kind:?}");
        assert_eq!(forgotten - before.1, db_retries - before.0, "{kind:?}");
        if kind == CorruptionKind::BitFlip {
            assert_eq!(db_retries, before.0 + 1);
        }
    }
}

#[test]
fn a_layer_footer_header_or_index_read_corrupted_once_answers_right() {
    for kind in KINDS {
        // A layer file opens with three reads: the footer, the header, then
        // the block index, bloom filter and key range together.
        for n in 1..=3 {
            let sim = two_layers(3);
            let db = Db::open(DIR, options(&sim)).unwrap();
            let before = retries(&db, &sim);
            corrupt_read(&sim, n, kind);
            assert_eq!(
                db.get(key(5)).unwrap(),
                Some(value(5)),
                "{kind:?}, read {n}"
            );
            assert_eq!(sim.corrupted_reads(), 1, "{kind:?}, read {n}");
            assert_eq!(
                retries(&db, &sim),
                (before.0 + 1, before.1 + 1),
                "{kind:?}, read {n}"
            );
            assert_eq!(db.stats().io.read_retries(FileClass::Delta), 1);
        }
    }
}

#[test]
fn an_in_memory_layers_value_read_corrupted_once_answers_right() {
    let sim = SimStorage::new(4);
    // Without the log's memory, its values are read from the file.
    let db = frozen(&sim, 0, 20);
    for (n, kind) in KINDS.into_iter().enumerate() {
        let before = retries(&db, &sim);
        corrupt_read(&sim, 1, kind);
        let i = 3 + 5 * n as u32;
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{kind:?}");
        assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1), "{kind:?}");
    }
    assert_eq!(db.stats().io.read_retries(FileClass::Log), 3);
}

#[test]
fn an_in_memory_layers_value_held_in_the_logs_memory_is_not_read_from_a_rotted_file() {
    let sim = SimStorage::new(9);
    let db = frozen(&sim, Options::default().log_memory_bytes, 20);
    // Every log byte rotted on the device: the values are answered from
    // the log's memory, and the file is not read.
    for log in logs(&sim) {
        sim.rot(&log, |b| b.iter_mut().for_each(|x| *x ^= 0x5a));
    }
    let reads = sim.reads();
    for i in 0..20 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{i}");
    }
    assert_eq!(sim.reads(), reads);
    assert_eq!(db.stats().io.read_retries(FileClass::Log), 0);
}

#[test]
fn a_value_files_read_corrupted_once_answers_right_alone_or_in_a_batch() {
    let sim = SimStorage::new(5);
    let big = |i: u32| {
        let mut v = value(i);
        v.resize(8192, i as u8);
        v
    };
    let db = Db::open(DIR, options(&sim)).unwrap();
    for i in 0..20 {
        db.put(key(i), big(i), WriteOptions::default()).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().value_files, 1);
    // Every block of the layer read once (no cache): a get then reads its
    // pointer's block and the value.
    let keys: Vec<Vec<u8>> = (0..20).map(key).collect();
    assert_eq!(db.multi_get(&keys).unwrap().len(), 20);
    for (n, kind) in KINDS.into_iter().enumerate() {
        let i = 2 + 5 * n as u32;
        // The second read of a get is the value's.
        let before = retries(&db, &sim);
        corrupt_read(&sim, 2, kind);
        assert_eq!(db.get(key(i)).unwrap(), Some(big(i)), "{kind:?}");
        assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1), "{kind:?}");
        // In a multi_get, the values are read after the blocks, as a
        // batch: its last read is a value's.
        let batch = [key(i), key(i + 1)];
        let reads = sim.reads();
        db.multi_get(&batch).unwrap();
        let last = sim.reads() - reads;
        let before = retries(&db, &sim);
        corrupt_read(&sim, last, kind);
        let got = db.multi_get(&batch).unwrap();
        assert_eq!(got, vec![Some(big(i)), Some(big(i + 1))], "{kind:?}");
        assert_eq!(sim.corrupted_reads(), 2 * n as u64 + 2, "{kind:?}");
        assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1), "{kind:?}");
    }
    assert_eq!(db.stats().io.read_retries(FileClass::Log), 6);
}

#[test]
fn a_manifest_read_corrupted_once_opens_right_after_one_retry() {
    // What a clean open asks the storage to forget (a log's tail, read
    // again to compare).
    let clean = {
        let sim = two_layers(5);
        drop(Db::open(DIR, options(&sim)).unwrap());
        sim.forgotten_ranges()
    };
    for kind in KINDS {
        let sim = two_layers(5);
        // The manifest is the first file open reads.
        corrupt_read(&sim, 1, kind);
        let db = Db::open(DIR, options(&sim)).unwrap();
        assert_eq!(sim.corrupted_reads(), 1, "{kind:?}");
        // Read again once; not in the database's statistics, which start
        // after the manifest is read. (A zeroed sector may fall in the
        // zero padding after a record, format 4: nothing to read again.)
        let again = sim.forgotten_ranges() - clean;
        let padding = kind == CorruptionKind::ZeroSector && again == 0;
        assert!(again == 1 || padding, "{kind:?}: read again {again} times");
        assert_eq!(db.stats().read_retries, 0, "{kind:?}");
        for i in (0..2 * KEYS_PER_LAYER).step_by(11) {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{kind:?}");
        }
        assert_eq!(db.stats().delta_layers, 2);
    }
}

/// The corruption error of `result`, or a panic.
fn corruption<T: std::fmt::Debug>(result: Result<T, Error>) -> strata::Corruption {
    match result {
        Err(Error::Corruption(c)) => c,
        other => panic!("not a corruption error: {other:?}"),
    }
}

#[test]
fn a_data_block_that_rotted_is_an_error_naming_the_file_and_offset_after_one_retry() {
    let sim = two_layers(6);
    let older = layer_files(&sim)[0].clone();
    // The first data block starts after the 24-byte header.
    assert!(sim.rot(&older, |b| b[40] ^= 0x10));
    let db = Db::open(DIR, options(&sim)).unwrap();
    let before = retries(&db, &sim);
    let c = corruption(db.get(key(0)));
    assert_eq!((c.file.as_path(), c.offset), (older.as_path(), 24), "{c}");
    assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1));
    // Keys of the other blocks still answer.
    assert_eq!(
        db.get(key(KEYS_PER_LAYER - 1)).unwrap(),
        Some(value(KEYS_PER_LAYER - 1))
    );
}

#[test]
fn a_footer_that_rotted_is_an_error_naming_the_file_and_offset_after_one_retry() {
    let sim = two_layers(7);
    let older = layer_files(&sim)[0].clone();
    let len = sim.file_bytes(&older).unwrap().len();
    // In the footer's magic: its crc32c fails (the footer is 124 bytes).
    assert!(sim.rot(&older, |b| b[len - 10] ^= 0x01));
    let db = Db::open(DIR, options(&sim)).unwrap();
    let before = retries(&db, &sim);
    let c = corruption(db.get(key(0)));
    assert_eq!(
        (c.file.as_path(), c.offset),
        (older.as_path(), len as u64 - 124),
        "{c}"
    );
    assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1));
}

#[test]
fn a_value_that_rotted_in_a_log_is_an_error_naming_the_log_after_one_retry() {
    let sim = SimStorage::new(8);
    // Without the log's memory, its values are read from the file.
    let db = frozen(&sim, 0, 2);
    let log = logs(&sim)
        .into_iter()
        .find(|p| {
            let b = sim.file_bytes(p).unwrap();
            b.windows(value(1).len()).any(|w| w == value(1))
        })
        .expect("the log holding the value");
    let bytes = sim.file_bytes(&log).unwrap();
    let at = bytes
        .windows(value(1).len())
        .position(|w| w == value(1))
        .unwrap();
    assert!(sim.rot(&log, |b| b[at + 2] ^= 0x04));
    let before = retries(&db, &sim);
    let c = corruption(db.get(key(1)));
    assert_eq!(c.file, log, "{c}");
    // The entry's checksum, 7 bytes into its 11-byte header; the header
    // and the key come before the value.
    let entry = at - 11 - key(1).len();
    assert_eq!(c.offset, (entry + 7) as u64, "{c}");
    assert_eq!(retries(&db, &sim), (before.0 + 1, before.1 + 1));
}
