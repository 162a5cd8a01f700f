//! What `Db::stats` says about layer files (on the simulated storage, no
//! background threads, compaction only when asked): compaction's bytes
//! apart from the flushes', an image layer's I/O under the image class
//! whether compaction writes it or a read opens it, and the keys of the
//! document `Stats` serializes to.

use std::sync::Arc;
use strata::io::sim::SimStorage;
use strata::io::{FileClass, IoStatsSnapshot, OpKind};
use strata::{Db, IoMode, Options, WriteOptions};

const DIR: &str = "/db";

fn options(sim: &SimStorage) -> Options {
    Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        writer_buffer_bytes: 8192,
        delta_block_bytes: 1024,
        background_flush: false,
        // Compaction only in `Db::compact`.
        l0_compaction_trigger: 0,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    v.resize(40 + (i as usize * 37) % 200, round as u8);
    v
}

/// Puts every key of `0..keys` in `round`'s version, then flushes.
fn round(db: &Db, keys: u32, round: u32) {
    for i in 0..keys {
        db.put(key(i), value(i, round), WriteOptions::default())
            .unwrap();
    }
    db.flush().unwrap();
}

/// Operations and bytes of every kind on files of `class`.
fn all_io(io: &IoStatsSnapshot, class: FileClass) -> Vec<(u64, u64)> {
    OpKind::ALL
        .iter()
        .map(|&kind| (io.ops(class, kind), io.bytes(class, kind)))
        .collect()
}

#[test]
fn flushes_alone_leave_the_compaction_counters_at_zero() {
    let sim = SimStorage::new(29);
    let db = Db::open(DIR, options(&sim)).unwrap();
    round(&db, 300, 0);
    round(&db, 300, 1);
    let s = db.stats();
    assert_eq!((s.l0_layers, s.compactions), (2, 0), "{s:?}");
    assert!(s.io.bytes(FileClass::Delta, OpKind::Write) >= s.delta_bytes);
    assert_eq!(s.compaction_write_bytes, 0, "{s:?}");
    assert_eq!(s.compaction_read_bytes, 0, "{s:?}");
    assert!(
        all_io(&s.io, FileClass::Image).iter().all(|&c| c == (0, 0)),
        "{s:?}"
    );
    db.close().unwrap();
}

#[test]
fn a_forced_compaction_counts_the_bytes_it_wrote_and_read() {
    let sim = SimStorage::new(29);
    let db = Db::open(DIR, options(&sim)).unwrap();
    round(&db, 300, 0);
    round(&db, 300, 1);
    let flushed = db.stats();
    db.compact().unwrap();
    let s = db.stats();
    assert_eq!((s.l0_layers, s.l1_runs, s.image_runs), (0, 1, 0), "{s:?}");
    // The run's files, all that is left, are what the job wrote.
    assert_eq!(s.compaction_write_bytes, s.delta_bytes, "{s:?}");
    // It read its inputs' data blocks (not their indexes, filters and
    // footers), through the io layer.
    assert!(s.compaction_read_bytes > 0, "{s:?}");
    assert!(s.compaction_read_bytes < flushed.delta_bytes, "{s:?}");
    assert!(
        s.compaction_read_bytes
            <= s.io
                .since(&flushed.io)
                .bytes(FileClass::Delta, OpKind::Read),
        "{s:?}"
    );
    db.close().unwrap();
}

#[test]
fn image_layer_files_are_written_and_read_under_the_image_class() {
    let sim = SimStorage::new(29);
    let db = Db::open(DIR, options(&sim)).unwrap();
    round(&db, 300, 0);
    round(&db, 300, 1);
    // No horizon: the L0 layers merge into an L1 run, no image.
    db.compact().unwrap();
    let before = db.stats();
    assert_eq!((before.l1_runs, before.image_runs), (1, 0), "{before:?}");
    assert!(
        all_io(&before.io, FileClass::Image)
            .iter()
            .all(|&c| c == (0, 0)),
        "no image yet: {before:?}"
    );

    // With every LSN below the horizon, the forced compaction writes one
    // image of the L0 layer and the run, and drops them.
    round(&db, 300, 2);
    db.set_horizon(db.last_lsn());
    db.compact().unwrap();
    let after = db.stats();
    assert_eq!((after.l1_runs, after.image_runs), (1, 1), "{after:?}");
    let io = after.io.since(&before.io);
    // The image's files are the only layer files left, and all the job
    // wrote; their writes may be padded to the alignment, never shorter.
    assert_eq!(
        after.compaction_write_bytes - before.compaction_write_bytes,
        after.delta_bytes,
        "{after:?}"
    );
    assert!(
        io.bytes(FileClass::Image, OpKind::Write) >= after.delta_bytes,
        "{after:?}"
    );
    assert!(io.ops(FileClass::Image, OpKind::Sync) > 0, "{after:?}");
    // Each output is read back whole and checked before it is listed.
    assert!(io.ops(FileClass::Image, OpKind::Read) > 0, "{after:?}");
    db.close().unwrap();

    // Reopened, reads find the image alone: no delta layer is read.
    let db = Db::open(DIR, options(&sim)).unwrap();
    for i in [0, 150, 299] {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 2)));
    }
    let s = db.stats();
    assert!(s.io.ops(FileClass::Image, OpKind::Read) > 0, "{s:?}");
    assert_eq!(s.io.ops(FileClass::Delta, OpKind::Read), 0, "{s:?}");
    db.close().unwrap();
}

#[test]
fn stats_serialize_to_the_documented_keys() {
    let sim = SimStorage::new(29);
    let db = Db::open(DIR, options(&sim)).unwrap();
    round(&db, 10, 0);
    let value = serde_json::to_value(db.stats()).unwrap();
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "block_cache_bytes",
            "block_cache_hits",
            "block_cache_misses",
            "compaction_error",
            "compaction_read_bytes",
            "compaction_write_bytes",
            "compactions",
            "delta_bytes",
            "delta_layers",
            "flush_error",
            "flush_memory_peak_bytes",
            "flush_read_bytes",
            "frozen_layers",
            "image_runs",
            "index_memory_bytes",
            "io",
            "io_mode",
            "l0_layers",
            "l1_layers",
            "l1_runs",
            "last_lsn",
            "layer_readers_closed",
            "layer_readers_open",
            "log_memory_bytes",
            "open_layer_bytes",
            "point_lookup_reads",
            "point_lookups",
            "read_retries",
            "remote",
            "value_file_bytes",
            "value_files",
            "value_live_bytes",
            "value_relocated_bytes",
        ]
    );
    assert_eq!(value["io_mode"], "direct-rw");
    assert!(value["compaction_error"].is_null());
    assert!(value["remote"].is_null(), "no remote store");
    assert_eq!(value["last_lsn"], 10);
    assert_eq!(value["io"]["image"]["read"]["retries"], 0);
    db.close().unwrap();
}
