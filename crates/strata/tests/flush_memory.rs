//! The flush in bounded memory and the in-memory layers' memory bound
//! (issue 28), on the simulated storage: a flush copies a frozen log in
//! windows of `flush_memory_bytes` (the keys' order picks which bytes each
//! window reads) and every value reaches the delta layer right; its peak
//! stays within the window and two read requests; the whole log is still
//! checked, so rot in bytes no window copies (a record header, a pad
//! record) is refused; a read that lies once is read again; and writers
//! wait for the flush once the frozen layers' indexes pass their half of
//! `in_memory_index_bytes_max`.

use std::sync::Arc;

use strata::io::sim::{CorruptionKind, ReadCorruption, SimStorage};
use strata::io::IoMode;
use strata::{Db, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";

/// Options whose flushes read their logs back from the file (no log is
/// kept in memory: `log_memory_bytes` 0), as a log that outgrows its
/// memory is read, in windows of `flush_memory_bytes`.
fn options(sim: &SimStorage, flush_memory_bytes: usize) -> Options {
    Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        writer_buffer_bytes: 16 << 10,
        background_flush: false,
        l0_compaction_trigger: 0,
        flush_memory_bytes,
        log_memory_bytes: 0,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    }
}

/// Key `i` in a scattered order (so that key order is not log order).
fn key(i: u32) -> Vec<u8> {
    format!("k{:08x}", i.wrapping_mul(0x9e37_79b9)).into_bytes()
}

/// Key `i` in the order written (key order is log order: the flush hands
/// entries on straight from its read requests).
fn key_in_order(i: u32) -> Vec<u8> {
    format!("k{i:08}").into_bytes()
}

type KeyOf = fn(u32) -> Vec<u8>;

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("v{i}-{round}-").into_bytes();
    v.resize(100 + (i as usize * 37) % 900, (i % 251) as u8);
    v
}

/// Writes `n` keys twice (two versions each) and a delete of every tenth,
/// in batches of 7, with a sync every so often (pad records), then
/// freezes; returns the database and the log bytes written.
fn frozen_layer(sim: &SimStorage, flush_memory_bytes: usize, n: u32, key: KeyOf) -> Db {
    frozen_layer_with(options(sim, flush_memory_bytes), n, key)
}

/// [`frozen_layer`] with `opts`.
fn frozen_layer_with(opts: Options, n: u32, key: KeyOf) -> Db {
    let db = Db::open(DIR, opts).unwrap();
    for round in 0..2 {
        for start in (0..n).step_by(7) {
            let mut b = WriteBatch::new();
            for i in start..(start + 7).min(n) {
                b.put(key(i), value(i, round));
            }
            let sync = start % 70 == 0;
            db.write(&b, WriteOptions { sync }).unwrap();
        }
    }
    for i in (0..n).step_by(10) {
        db.delete(key(i), WriteOptions::default()).unwrap();
    }
    db.freeze().unwrap();
    db
}

fn check_all(db: &Db, n: u32, key: KeyOf) {
    for i in 0..n {
        let want = (i % 10 != 0).then(|| value(i, 1));
        assert_eq!(db.get(key(i)).unwrap(), want, "key {i}");
    }
}

/// Flushes `db` while the `nth` read from now returns `kind` of corrupted
/// bytes (once); the flush must pass.
fn flush_with_one_lie(sim: &SimStorage, db: &Db, kind: CorruptionKind, nth: u64) {
    sim.set_read_corruption(ReadCorruption {
        at_read: Some(sim.reads() + nth),
        one_in_reads: None,
        kind: Some(kind),
    });
    db.flush()
        .unwrap_or_else(|e| panic!("{kind:?} read {nth}: {e}"));
    sim.set_read_corruption(ReadCorruption::default());
}

#[test]
fn a_flush_in_windows_writes_every_version_and_stays_in_its_window() {
    const N: u32 = 3000;
    for (order, key) in [("scattered", key as KeyOf), ("in order", key_in_order)] {
        let mut layers = Vec::new();
        for window in [64 << 10, 256 << 10, 64 << 20] {
            let sim = SimStorage::new(7);
            let db = frozen_layer(&sim, window, N, key);
            db.flush().unwrap();
            let s = db.stats();
            assert_eq!((s.frozen_layers, s.delta_layers), (0, 1));
            // The window and two read requests (1 MiB each: one worked on,
            // one read ahead), and a record in between.
            assert!(
                s.flush_memory_peak_bytes <= (window as u64 + (2 << 20) + (64 << 10)).max(3 << 20),
                "window {window}: peak {}",
                s.flush_memory_peak_bytes
            );
            assert!(s.flush_memory_peak_bytes > 0);
            check_all(&db, N, key);
            // The versions below the newest are there too, at their LSNs.
            let first_round = u64::from(N.div_ceil(7));
            for i in (0..N).step_by(13) {
                assert_eq!(db.get_at(key(i), first_round).unwrap(), Some(value(i, 0)));
            }
            layers.push((window, s.flush_read_bytes, s.delta_bytes));
            drop(db);
            let db = Db::open(DIR, options(&sim, window)).unwrap();
            check_all(&db, N, key);
        }
        // Scattered keys: small windows read the log once per window, the
        // large one once. The layer written is the same size in each.
        let (_, read_small, bytes_small) = layers[0];
        let (_, read_large, bytes_large) = layers[2];
        assert_eq!(bytes_small, bytes_large, "{order}");
        if order == "scattered" {
            assert!(read_small > 4 * read_large, "{read_small} vs {read_large}");
        }
    }
}

#[test]
fn keys_written_in_order_are_handed_on_from_the_read_requests() {
    // One version per key, written in key order: every window's entries
    // lie in one stretch of the log, in order, and go to the delta writer
    // from the read requests (no window buffer: the peak is two requests,
    // the bookkeeping and an entry that crosses two requests).
    const N: u32 = 6000;
    for window in [64 << 10, 64 << 20] {
        let sim = SimStorage::new(9);
        let db = Db::open(DIR, options(&sim, window)).unwrap();
        for start in (0..N).step_by(7) {
            let mut b = WriteBatch::new();
            for i in start..(start + 7).min(N) {
                b.put(key_in_order(i), value(i, 0));
            }
            db.write(
                &b,
                WriteOptions {
                    sync: start % 700 == 0,
                },
            )
            .unwrap();
        }
        db.freeze().unwrap();
        db.flush().unwrap();
        let s = db.stats();
        let log_bytes =
            s.io.bytes(strata::io::FileClass::Log, strata::io::OpKind::Write);
        assert!(
            s.flush_memory_peak_bytes < (2 << 20) + (256 << 10),
            "window {window}: peak {}",
            s.flush_memory_peak_bytes
        );
        // Each stretch read once (and a request's worth more at most per
        // window boundary).
        assert!(
            s.flush_read_bytes <= log_bytes + (log_bytes / window as u64 + 2) * (1 << 20),
            "window {window}: read {} of a {log_bytes}-byte log",
            s.flush_read_bytes
        );
        for i in (0..N).step_by(7) {
            assert_eq!(db.get(key_in_order(i)).unwrap(), Some(value(i, 0)), "{i}");
        }
        drop(db);
        let db = Db::open(DIR, options(&sim, window)).unwrap();
        for i in 0..N {
            assert_eq!(db.get(key_in_order(i)).unwrap(), Some(value(i, 0)), "{i}");
        }
    }
}

#[test]
fn rot_in_bytes_no_window_copies_is_still_refused() {
    const N: u32 = 400;
    for window in [64 << 10, 64 << 20] {
        let sim = SimStorage::new(3);
        let db = frozen_layer(&sim, window, N, key);
        let log = sim
            .file_paths()
            .into_iter()
            .find(|p| p.extension().is_some_and(|e| e == "log"))
            .unwrap();
        // The first record's header: no value of it is copied from there.
        assert!(sim.rot(&log, |b| b[64 + 9] ^= 0x10));
        let err = db.flush().unwrap_err();
        assert!(err.is_corruption(), "window {window}: {err}");
        assert!(err.to_string().contains(&*log.to_string_lossy()), "{err}");
        assert_eq!(db.stats().delta_layers, 0, "window {window}");
        // Nothing was lost: the frozen layer still answers.
        assert!(db.stats().frozen_layers > 0);
    }
}

#[test]
fn a_flush_read_that_lies_once_is_read_again() {
    // A log of about 3 MiB: several read requests in each window.
    const N: u32 = 3000;
    for (kind, key) in [
        (CorruptionKind::BitFlip, key as KeyOf),
        (CorruptionKind::ZeroSector, key),
        (CorruptionKind::BitFlip, key_in_order),
        (CorruptionKind::ZeroSector, key_in_order),
    ] {
        for nth in [1, 2, 7] {
            let sim = SimStorage::new(11);
            let db = frozen_layer(&sim, 64 << 10, N, key);
            flush_with_one_lie(&sim, &db, kind, nth);
            assert_eq!(sim.corrupted_reads(), 1, "{kind:?} read {nth}");
            check_all(&db, N, key);
            drop(db);
            let db = Db::open(DIR, options(&sim, 64 << 10)).unwrap();
            check_all(&db, N, key);
        }
    }
}

/// The log file of the frozen layer (the lowest-numbered one).
fn first_log(sim: &SimStorage) -> std::path::PathBuf {
    let mut logs: Vec<_> = sim
        .file_paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.remove(0)
}

#[test]
fn a_log_held_in_memory_is_flushed_without_reading_it_back() {
    // About 3 MiB of log, held whole in memory: the flush copies it from
    // there. Rot in the file after the freeze never reaches the delta
    // layer (the flush does not read the file; the log then goes).
    const N: u32 = 3000;
    for key in [key as KeyOf, key_in_order] {
        let sim = SimStorage::new(5);
        let opts = Options {
            log_memory_bytes: 16 << 20,
            ..options(&sim, 64 << 10)
        };
        let db = frozen_layer_with(opts.clone(), N, key);
        let held = db.stats().log_memory_bytes;
        assert!(held >= 3 << 20, "{held}");
        let log = first_log(&sim);
        assert!(sim.rot(&log, |b| {
            let mid = b.len() / 2;
            b[64 + 9] ^= 0x10;
            b[mid] ^= 0x01;
        }));
        let log_reads = |db: &Db| {
            db.stats()
                .io
                .bytes(strata::io::FileClass::Log, strata::io::OpKind::Read)
        };
        let before = log_reads(&db);
        db.flush().unwrap();
        let s = db.stats();
        assert_eq!((s.frozen_layers, s.delta_layers), (0, 1));
        assert_eq!(s.flush_read_bytes, 0);
        assert_eq!(log_reads(&db), before, "the flush read the log");
        // Only the open layer's log is held now (its header's chunk).
        assert_eq!(s.log_memory_bytes, 1 << 20);
        assert!(sim.file_bytes(&log).is_none(), "the flushed log is gone");
        check_all(&db, N, key);
        drop(db);
        let db = Db::open(DIR, opts).unwrap();
        check_all(&db, N, key);
    }
}

#[test]
fn a_log_of_page_sized_values_is_not_kept_in_memory() {
    // Values of whole pages go out of line, and such a log stays as a
    // value file: its flush reads only the small entries, so its bytes
    // are not kept (the new open log's header chunk is all that is).
    let sim = SimStorage::new(8);
    let opts = Options {
        log_memory_bytes: 16 << 20,
        ..options(&sim, 64 << 20)
    };
    let db = Db::open(DIR, opts).unwrap();
    assert_eq!(db.stats().log_memory_bytes, 1 << 20);
    for i in 0..64u32 {
        let mut b = WriteBatch::new();
        b.put(key(i), vec![i as u8; 8192]);
        db.write(&b, WriteOptions::default()).unwrap();
    }
    assert_eq!(db.stats().log_memory_bytes, 0);
    db.freeze().unwrap();
    db.flush().unwrap();
    for i in 0..64u32 {
        assert_eq!(db.get(key(i)).unwrap(), Some(vec![i as u8; 8192]), "{i}");
    }
}

#[test]
fn a_log_that_outgrows_its_memory_is_read_back() {
    // The budget holds 2 MiB; the log takes about 3: its memory goes when
    // it no longer fits, and the flush reads the log from the file.
    const N: u32 = 3000;
    let sim = SimStorage::new(6);
    let opts = Options {
        log_memory_bytes: 2 << 20,
        ..options(&sim, 64 << 20)
    };
    let db = frozen_layer_with(opts.clone(), N, key);
    // The frozen log holds none; the new open one its header's chunk.
    assert_eq!(db.stats().log_memory_bytes, 1 << 20);
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(s.delta_layers, 1);
    assert!(s.flush_read_bytes >= 3 << 20, "{}", s.flush_read_bytes);
    check_all(&db, N, key);
    drop(db);
    let db = Db::open(DIR, opts).unwrap();
    check_all(&db, N, key);
}

/// Keys of three stretches written `a` (first part), `b`, `a` (second
/// part): in key order the flush reads the log's head, its tail, then goes
/// back to `b`, whose first entries the record check has passed already,
/// on an earlier reading of their bytes.
fn stretch_key(i: u32) -> Vec<u8> {
    const A_HEAD: u32 = 300;
    const B: u32 = 3000;
    if i < A_HEAD {
        format!("a{i:08}").into_bytes()
    } else if i < A_HEAD + B {
        format!("b{i:08}").into_bytes()
    } else {
        format!("a{i:08}").into_bytes()
    }
}

#[test]
fn an_entry_read_again_after_the_record_check_passed_it_is_checked_alone() {
    // A flush hands an in-order entry on with only its header and key
    // matched when the record check took its record whole from the same
    // reading (the record's crc32c covers it); `b`'s first entries are
    // read again after the check passed them, so a lie in that reading
    // must be caught by their own crc32c. Every read of the flush lies in
    // turn, once: the flush passes and every value is right.
    const N: u32 = 3600;
    let write = |sim: &SimStorage| {
        let db = Db::open(DIR, options(sim, 64 << 10)).unwrap();
        for start in (0..N).step_by(7) {
            let mut b = WriteBatch::new();
            for i in start..(start + 7).min(N) {
                b.put(stretch_key(i), value(i, 0));
            }
            db.write(&b, WriteOptions::default()).unwrap();
        }
        db.freeze().unwrap();
        db
    };
    let sim = SimStorage::new(21);
    let db = write(&sim);
    let before = sim.reads();
    db.flush().unwrap();
    let reads = sim.reads() - before;
    assert!(reads >= 4, "{reads} reads");
    for kind in [CorruptionKind::BitFlip, CorruptionKind::ZeroSector] {
        for nth in 1..=reads {
            let sim = SimStorage::new(21 + nth);
            let db = write(&sim);
            flush_with_one_lie(&sim, &db, kind, nth);
            for i in 0..N {
                assert_eq!(
                    db.get(stretch_key(i)).unwrap(),
                    Some(value(i, 0)),
                    "{kind:?} read {nth}: key {i}"
                );
            }
        }
    }
}

#[test]
fn writers_wait_for_the_flush_at_the_in_memory_index_bound() {
    let sim = SimStorage::new(5);
    let opts = Options {
        in_memory_index_bytes_max: 1 << 20,
        // Flushed inline by the writer that finds the backlog over.
        background_flush: false,
        ..options(&sim, 1 << 20)
    };
    let db = Db::open(DIR, opts).unwrap();
    // 40,000 puts of one-byte values: 2 MiB of log, far below
    // `layer_size_bytes_max`, but about 5 MiB of index (124 bytes a key).
    let mut frozen_most = 0;
    for i in 0..40_000u32 {
        db.put(key(i), b"v", WriteOptions::default()).unwrap();
        if i % 50 == 0 {
            frozen_most = frozen_most.max(db.stats().frozen_layers);
        }
    }
    let s = db.stats();
    // Frozen at half the bound (512 KiB of index, about 4,200 keys); once
    // the frozen layer's index and the open one's pass the whole bound, the
    // writer flushes first: never more than the bound's two halves frozen.
    assert!((8..=12).contains(&s.delta_layers), "{s:?}");
    assert!(frozen_most <= 2, "{frozen_most} frozen layers at once");
    for i in (0..40_000u32).step_by(97) {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(&b"v"[..]));
    }
}
