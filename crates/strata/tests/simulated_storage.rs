//! A `Db` on the simulated storage (`strata::io::sim`): the engine works the
//! same through the storage seam when no file is real, and what it
//! acknowledged as synced survives a simulated power loss.

use std::sync::Arc;
use strata::io::sim::SimStorage;
use strata::io::{FileClass, OpKind};
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

/// Directly under the root, which always exists: creating `/a/db` syncs
/// `/a` but not `/`, so a power loss can take the whole database with `/a`.
const DIR: &str = "/db";

fn options(sim: &SimStorage) -> Options {
    Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        layer_size_bytes_max: strata::LAYER_BYTES_MIN,
        writer_buffer_bytes: 8192,
        delta_block_bytes: 1024,
        background_flush: false,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(20 + (i as usize * 37) % 900, i as u8);
    v
}

#[test]
fn a_db_on_the_simulated_storage_writes_flushes_reopens_and_reads() {
    let sim = SimStorage::new(1);
    let db = Db::open(DIR, options(&sim)).unwrap();
    for i in 0..400 {
        db.put(key(i), value(i), WriteOptions { sync: i % 50 == 0 })
            .unwrap();
    }
    db.sync().unwrap();
    db.flush().unwrap();
    let stats = db.stats();
    assert!(stats.delta_layers >= 1, "{stats:?}");
    assert!(stats.io.ops(FileClass::Log, OpKind::Sync) > 0);
    assert!(stats.io.bytes(FileClass::Delta, OpKind::Write) > 0);
    // Some in the log, some in delta layers.
    for i in 400..500 {
        db.put(key(i), value(i), WriteOptions::default()).unwrap();
    }
    db.delete(key(7), WriteOptions::default()).unwrap();
    let before = everything(&db);
    db.close().unwrap();
    assert!(sim.file_paths().iter().any(|p| p.ends_with("MANIFEST")));

    let db = Db::open(DIR, options(&sim)).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), None);
    for i in (0..500).filter(|&i| i != 7) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    let keys: Vec<Vec<u8>> = (0..500).step_by(13).map(key).collect();
    let got = db.multi_get(&keys).unwrap();
    for (k, v) in keys.iter().zip(got) {
        let i: u32 = std::str::from_utf8(&k[4..]).unwrap().parse().unwrap();
        assert_eq!(v, (i != 7).then(|| value(i)));
    }
    let after = everything(&db);
    assert_eq!(after, before);
}

#[test]
fn a_synced_write_survives_power_loss() {
    for seed in 0..32 {
        let sim = SimStorage::new(seed);
        let db = Db::open(DIR, options(&sim)).unwrap();
        let mut b = WriteBatch::new();
        b.put(b"synced-a", b"1");
        b.put(b"synced-b", value(2));
        let lsn = db.write(&b, WriteOptions { sync: true }).unwrap();
        // Later writes, not synced, may or may not be there.
        for i in 0..20 {
            db.put(key(i), value(i), WriteOptions::default()).unwrap();
        }
        let sim = sim.power_loss();
        drop(db); // its handles are dead: nothing it does reaches the storage
        let db = Db::open(DIR, options(&sim))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen after power loss: {e}"));
        assert!(db.last_lsn() >= lsn, "seed {seed}");
        assert_eq!(db.get(b"synced-a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get(b"synced-b").unwrap(), Some(value(2)), "seed {seed}");
        // Whatever else came back is whole: a batch of one, its value intact.
        for i in 0..20 {
            if let Some(v) = db.get(key(i)).unwrap() {
                assert_eq!(v, value(i), "seed {seed} key {i}");
            }
        }
    }
}

/// A database of `layers` L0 layers (one key each), closed.
fn database_of_layers(sim: &SimStorage, layers: u32) {
    let opts = Options {
        l0_compaction_trigger: 0,
        ..options(sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    for i in 0..layers {
        db.put(key(i), value(i), WriteOptions::default()).unwrap();
        db.flush().unwrap();
    }
    assert_eq!(db.stats().delta_layers, layers as usize);
    db.close().unwrap();
}

fn delta_files(sim: &SimStorage) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = sim
        .file_paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "delta"))
        .collect();
    files.sort();
    files
}

#[test]
fn open_reads_the_manifest_and_the_newest_layer_and_the_others_open_at_their_first_read() {
    let sim = SimStorage::new(5);
    database_of_layers(&sim, 300);
    let db = Db::open(DIR, options(&sim)).unwrap();
    let delta_reads = |db: &Db| db.stats().io.ops(FileClass::Delta, OpKind::Read);
    // The newest layer gives the next LSN: open checks it against its
    // descriptor (footer, header, then index, filter and key range).
    let at_open = delta_reads(&db);
    assert_eq!(at_open, 3, "open read another layer file");
    assert_eq!(db.stats().layer_readers_open, 1);
    assert_eq!(db.stats().delta_layers, 300);
    // A get opens only the layer whose key range holds the key.
    assert_eq!(db.get(key(123)).unwrap(), Some(value(123)));
    let after_one = delta_reads(&db) - at_open;
    assert!((1..=4).contains(&after_one), "{after_one} reads");
    assert_eq!(db.stats().layer_readers_open, 2);
    assert_eq!(db.get(key(123)).unwrap(), Some(value(123)));
    assert_eq!(
        delta_reads(&db) - at_open,
        after_one,
        "a second get hits the block cache"
    );
    assert_eq!(db.stats().block_cache_hits, 1);
    let all = everything(&db);
    assert_eq!(all.len(), 300);
}

#[test]
fn open_layer_readers_stay_within_the_index_memory_budget() {
    let sim = SimStorage::new(9);
    database_of_layers(&sim, 300);
    // What one layer's index and filter take (every layer holds one key of
    // the same length).
    // (Open opens the newest layer, which gives the next LSN.)
    let probe = Db::open(DIR, options(&sim)).unwrap();
    let at_open = probe.stats();
    assert_eq!(at_open.layer_readers_open, 1);
    assert_eq!(probe.get(key(0)).unwrap(), Some(value(0)));
    let one = probe.stats().index_memory_bytes - at_open.index_memory_bytes;
    assert!(one > 0);
    let in_memory = at_open.index_memory_bytes - one;
    probe.close().unwrap();

    let budget = 10 * one;
    let opts = Options {
        index_memory_bytes_max: budget as u64,
        block_cache_bytes: 0,
        ..options(&sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    for _round in 0..2 {
        for i in 0..300 {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i)));
            let s = db.stats();
            assert!(
                s.index_memory_bytes - in_memory <= budget && s.layer_readers_open <= 10,
                "{} bytes, {} open, after key {i}",
                s.index_memory_bytes - in_memory,
                s.layer_readers_open
            );
        }
    }
    // 600 opens, at most 10 open at the end.
    assert!(db.stats().layer_readers_closed >= 590, "{:?}", db.stats());
    assert_eq!(everything(&db).len(), 300);
    db.close().unwrap();

    // No budget: every reader stays open.
    let opts = Options {
        index_memory_bytes_max: 0,
        ..options(&sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    for i in 0..300 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)));
    }
    let s = db.stats();
    assert_eq!((s.layer_readers_open, s.layer_readers_closed), (300, 0));
    assert_eq!(s.index_memory_bytes - in_memory, 300 * one);
    db.close().unwrap();
}

#[test]
fn point_lookups_count_exactly_the_data_blocks_they_read() {
    let sim = SimStorage::new(8);
    database_of_layers(&sim, 50);
    let opts = Options {
        block_cache_bytes: 0,
        ..options(&sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    // Every layer file opened first: what is left to read is data blocks.
    assert_eq!(everything(&db).len(), 50);
    let delta_reads = |db: &Db| db.stats().io.ops(FileClass::Delta, OpKind::Read);
    let (reads0, stats0) = (delta_reads(&db), db.stats());
    for i in 0..50 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)));
    }
    // Outside every layer's key range: no read.
    assert_eq!(db.get(b"zzz").unwrap(), None);
    let keys: Vec<Vec<u8>> = (0..50).step_by(5).map(key).collect();
    let got = db.multi_get(&keys).unwrap();
    assert!(got.iter().all(|v| v.is_some()));
    let stats = db.stats();
    assert_eq!(stats.point_lookups - stats0.point_lookups, 50 + 1 + 10);
    assert_eq!(
        stats.point_lookup_reads - stats0.point_lookup_reads,
        50 + 10
    );
    assert_eq!(
        delta_reads(&db) - reads0,
        stats.point_lookup_reads - stats0.point_lookup_reads,
        "the counter and the device reads of the layer files agree"
    );
    // A scan reads, but is not a point lookup.
    assert_eq!(everything(&db).len(), 50);
    assert_eq!(db.stats().point_lookup_reads, stats.point_lookup_reads);
    db.close().unwrap();
}

#[test]
fn a_version_1_manifest_is_read_and_rewritten_in_the_current_format() {
    let sim = SimStorage::new(6);
    database_of_layers(&sim, 3);
    // The same state as an older build wrote it: ids only.
    let ids: Vec<u64> = delta_files(&sim)
        .iter()
        .map(|p| u64::from_str_radix(p.file_stem().unwrap().to_str().unwrap(), 16).unwrap())
        .collect();
    let next = ids.iter().max().unwrap() + 100;
    let mut payload = Vec::new();
    payload.extend_from_slice(&next.to_le_bytes());
    payload.extend_from_slice(&0u32.to_le_bytes());
    payload.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    for id in &ids {
        payload.extend_from_slice(&id.to_le_bytes());
    }
    let mut v1 = b"STRMANIF".to_vec();
    v1.extend_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v1.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    let crc = crc32c::crc32c(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    v1.extend_from_slice(&payload);
    let path = std::path::Path::new(DIR).join("MANIFEST");
    write_file(&sim, &path, &v1);
    for _ in 0..2 {
        let db = Db::open(DIR, options(&sim)).unwrap();
        for i in 0..3 {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i)));
        }
        db.close().unwrap();
        let now = sim.file_bytes(&path).unwrap();
        assert_eq!(u32::from_le_bytes(now[8..12].try_into().unwrap()), 5);
    }
}

fn write_file(sim: &SimStorage, path: &std::path::Path, bytes: &[u8]) {
    use strata::io::Storage;
    let opts = strata::io::FileOptions {
        mode: IoMode::Buffered,
        ..Default::default()
    };
    let file = sim
        .create(path, &opts, &strata::io::IoStats::new())
        .unwrap();
    file.write_all_at(bytes, 0).unwrap();
    file.sync_data().unwrap();
}

#[test]
fn a_listed_layer_file_missing_or_not_what_the_manifest_says_is_an_error_naming_it() {
    use strata::io::Storage;
    let sim = SimStorage::new(8);
    database_of_layers(&sim, 3);
    let files = delta_files(&sim);
    // Another layer's bytes under this layer's name: found at its first read.
    let other = sim.file_bytes(&files[2]).unwrap();
    write_file(&sim, &files[1], &other);
    let db = Db::open(DIR, options(&sim)).unwrap();
    assert_eq!(db.get(key(0)).unwrap(), Some(value(0)));
    let err = db.get(key(1)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let name = files[1].file_name().unwrap().to_str().unwrap();
    assert!(err.to_string().contains(name), "{err}");
    db.close().unwrap();
    // A listed file that is gone: open fails, naming it.
    sim.remove_file(&files[1]).unwrap();
    let err = Db::open(DIR, options(&sim)).err().expect("open must fail");
    assert!(err.to_string().contains(name), "{err}");
}

/// Layers of `n` keys each, written and flushed `layers` times (every key
/// updated each time), on a database without background threads.
fn layered(sim: &SimStorage, layers: u32, n: u32) -> Db {
    let opts = Options {
        l0_compaction_trigger: 0,
        target_file_bytes: strata::LAYER_BYTES_MIN,
        ..options(sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    for round in 0..layers {
        for i in 0..n {
            db.put(key(i), value(i + round), WriteOptions::default())
                .unwrap();
        }
        db.flush().unwrap();
    }
    db
}

#[test]
fn an_image_of_nothing_is_written_once_and_lets_gc_collect_every_deleted_key() {
    let sim = SimStorage::new(12);
    let db = layered(&sim, 2, 200);
    let written = db.last_lsn();
    for i in 0..200 {
        db.delete(key(i), WriteOptions::default()).unwrap();
    }
    // Every key deleted: the image at the end is empty. compact() makes it
    // once and returns (it used to append empty edits forever). A horizon
    // above 0 has it force the image; at 1 it collects nothing yet.
    db.set_horizon(1);
    db.compact().unwrap();
    let s = db.stats();
    assert_eq!((s.l0_layers, s.l1_runs), (0, 2), "{s:?}");
    assert_eq!(db.get(key(7)).unwrap(), None);
    assert_eq!(db.get_at(key(7), written).unwrap(), Some(value(8)));
    db.compact().unwrap();
    assert_eq!(
        db.stats().compactions,
        s.compactions,
        "a second compact() did work"
    );
    drop(db);
    // Reopened with no history kept: GC drops the run under the empty
    // image, and reads below it are refused, never answered empty.
    let db = Db::open(
        DIR,
        Options {
            history_lsns: Some(0),
            ..options(&sim)
        },
    )
    .unwrap();
    db.compact().unwrap();
    let s = db.stats();
    assert_eq!((s.l1_runs, s.l1_layers), (1, 1), "{s:?}");
    assert_eq!(files_with(&sim, "delta"), 1);
    assert_eq!(db.get(key(7)).unwrap(), None);
    assert!(db.scan::<&[u8], _>(..).unwrap().next().is_none());
    assert!(matches!(
        db.get_at(key(7), written),
        Err(strata::Error::BelowHorizon { .. })
    ));
}

/// Every live key and value, by a scan at the newest LSN.
fn everything(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    everything_at(db, db.last_lsn())
}

/// Every live key and value at `lsn`.
fn everything_at(db: &Db, lsn: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan_at::<&[u8], _>(.., lsn)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn files_with(sim: &SimStorage, ext: &str) -> usize {
    sim.file_paths()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .count()
}

#[test]
fn compaction_merges_l0_into_a_run_and_its_inputs_go_when_no_reader_holds_them() {
    let sim = SimStorage::new(9);
    let db = layered(&sim, 4, 300);
    let before = everything(&db);
    let lsn_mid = db.last_lsn() / 2;
    let mid = everything_at(&db, lsn_mid);
    // A scan started before the compaction holds the old layers.
    let mut held = db.scan::<&[u8], _>(..).unwrap();
    let first = held.next().unwrap().unwrap();
    db.compact().unwrap();
    let s = db.stats();
    // One job: the merge into an L1 run (no horizon: compact() forces no
    // image, which would only double the data beside the history).
    assert_eq!((s.l0_layers, s.l1_runs, s.compactions), (0, 1, 1), "{s:?}");
    assert!(s.l1_layers > 2, "runs of several files: {s:?}");
    assert!(
        files_with(&sim, "delta") > s.delta_layers,
        "inputs held by the scan"
    );
    let rest: Vec<_> = held.map(|r| r.unwrap()).collect();
    assert_eq!(
        std::iter::once(first).chain(rest).collect::<Vec<_>>(),
        before
    );
    assert_eq!(
        files_with(&sim, "delta"),
        s.delta_layers,
        "inputs gone with the scan"
    );
    // Every version is still there, now from L1.
    let after = everything(&db);
    assert_eq!(after, before);
    let at_mid = everything_at(&db, lsn_mid);
    assert_eq!(at_mid, mid);
    for i in (0..300).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i + 3)));
        assert_eq!(
            db.get_at(key(i), 300 + i as u64 + 1).unwrap(),
            Some(value(i + 1))
        );
    }
    // And after a reopen, from the manifest.
    db.close().unwrap();
    let db = Db::open(DIR, options(&sim)).unwrap();
    assert_eq!((db.stats().l1_runs, db.stats().l0_layers), (1, 0));
    let again = everything(&db);
    assert_eq!(again, before);
}

#[test]
fn a_writer_at_the_l0_stop_count_merges_the_backlog_in_steps_of_bounded_bytes() {
    let sim = SimStorage::new(12);
    let opts = Options {
        l0_compaction_trigger: 2,
        l0_slowdown_layers: 9,
        l0_stop_layers: 9,
        // No images, no tiers: the runs left are the steps' own.
        image_run_threshold: 0,
        ..options(&sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    // Nine L0 layers of about 50 KiB, each under the 64 KiB layer size.
    for layer in 0..9u32 {
        for j in 0..100 {
            let i = layer * 100 + j;
            db.put(key(i), value(i), WriteOptions::default()).unwrap();
        }
        db.flush().unwrap();
    }
    let s = db.stats();
    assert_eq!((s.l0_layers, s.compactions), (9, 0), "{s:?}");
    let layer_bytes = s.delta_bytes / 9;
    assert!(
        (32 << 10..=64 << 10).contains(&layer_bytes),
        "{layer_bytes} bytes per layer"
    );
    // The next write finds L0 at the stop count and compacts first: in
    // jobs of at most 2 × trigger × layer size (256 KiB) past the
    // trigger's two layers, not in one job of all nine.
    db.put(key(900), value(900), WriteOptions::default())
        .unwrap();
    // Layers of 32–64 KiB: four always fit a job, nine never do, so two
    // or three jobs (one job of all nine without the bound).
    let s = db.stats();
    assert!((2..=3).contains(&s.compactions), "{s:?}");
    assert_eq!(s.l1_runs as u64, s.compactions, "{s:?}");
    assert!(s.l0_layers < 2, "{s:?}");
    for i in (0..901).step_by(13) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)));
    }
}

#[test]
fn every_read_of_a_compaction_corrupted_in_turn_fails_it_and_changes_nothing() {
    use strata::io::sim::{CorruptionKind, ReadCorruption};
    // The reads one compaction makes.
    let reads = {
        let sim = SimStorage::new(10);
        let db = layered(&sim, 3, 200);
        let before = sim.reads();
        db.compact().unwrap();
        sim.reads() - before
    };
    assert!(reads > 6, "{reads}");
    for n in 1..=reads {
        for kind in [CorruptionKind::BitFlip, CorruptionKind::ZeroSector] {
            let sim = SimStorage::new(10);
            let db = layered(&sim, 3, 200);
            let l0 = db.stats().l0_layers;
            let want = everything(&db);
            sim.set_read_corruption(ReadCorruption {
                at_read: Some(sim.reads() + n),
                one_in_reads: None,
                kind: Some(kind),
            });
            let compacted = db.compact();
            sim.set_read_corruption(ReadCorruption::default());
            let s = db.stats();
            match &compacted {
                // A corrupted read that did not matter (a byte nobody
                // checks does not exist: every read of a compaction is
                // verified, so an `Ok` means the read was a retry or outside
                // what the job uses).
                Ok(()) => assert_eq!(s.l0_layers, 0),
                // The job that failed changed nothing: the merge (L0 as it
                // was, no run) or the image after it (the run alone).
                Err(e) => {
                    assert!(e.is_corruption(), "read {n} {kind:?}: {e}");
                    let state = (s.l0_layers, s.l1_runs);
                    assert!(state == (l0, 0) || state == (0, 1), "read {n}: {s:?}");
                    assert_eq!(
                        files_with(&sim, "delta"),
                        s.delta_layers,
                        "read {n}: outputs removed"
                    );
                }
            }
            let got = everything(&db);
            assert_eq!(got, want, "read {n} {kind:?}");
        }
    }
}

#[test]
fn the_block_cache_serves_repeated_gets_and_never_keeps_a_bad_block() {
    use strata::io::sim::{CorruptionKind, ReadCorruption};
    let sim = SimStorage::new(11);
    let db = layered(&sim, 2, 300);
    db.compact().unwrap();
    let keys: Vec<Vec<u8>> = (0..300).step_by(3).map(key).collect();
    let want: Vec<_> = (0..300).step_by(3).map(|i| Some(value(i + 1))).collect();
    // The first round reads blocks; the second finds them all cached.
    assert_eq!(db.multi_get(&keys).unwrap(), want);
    let before = sim.reads();
    assert_eq!(db.multi_get(&keys).unwrap(), want);
    for i in (0..300).step_by(3) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i + 1)));
    }
    assert_eq!(sim.reads(), before, "every block came from the cache");
    let s = db.stats();
    assert!(
        s.block_cache_hits >= 200 && s.block_cache_bytes > 0,
        "{s:?}"
    );
    db.close().unwrap();
    // A block that reads back corrupted is read again and is not cached:
    // the get answers right, and so do the next ones. The get opens the
    // layer (footer, index, bloom) and reads the block: each of those
    // reads fails in turn.
    for kind in [CorruptionKind::BitFlip, CorruptionKind::ZeroSector] {
        let mut read_again = 0;
        for n in 1..=4 {
            let db = Db::open(DIR, options(&sim)).unwrap();
            sim.set_read_corruption(ReadCorruption {
                at_read: Some(sim.reads() + n),
                one_in_reads: None,
                kind: Some(kind),
            });
            let first = db.get(key(10));
            sim.set_read_corruption(ReadCorruption::default());
            assert_eq!(first.unwrap(), Some(value(11)), "{kind:?} read {n}");
            read_again += db.stats().read_retries;
            assert_eq!(
                db.get(key(10)).unwrap(),
                Some(value(11)),
                "{kind:?} read {n}"
            );
            assert_eq!(
                db.get(key(10)).unwrap(),
                Some(value(11)),
                "{kind:?} read {n}"
            );
            db.close().unwrap();
        }
        assert!(read_again >= 1, "{kind:?}: no corrupted read found");
    }
}

/// With the log's bytes kept in memory (the default), gets of the open
/// layer copy values from there and read nothing of the log.
#[test]
fn gets_of_the_open_layer_read_the_logs_memory_not_the_file() {
    let sim = SimStorage::new(22);
    let opts = Options {
        layer_size_bytes_max: 1 << 20,
        ..options(&sim)
    };
    assert!(opts.log_memory_bytes > 0);
    let db = Db::open(DIR, opts).unwrap();
    for i in 0..400 {
        db.put(key(i), value(i), WriteOptions::default()).unwrap();
    }
    assert_eq!(db.stats().delta_layers, 0, "everything in the open layer");
    assert!(db.stats().log_memory_bytes > 0);
    let log_reads = |db: &Db| db.stats().io.ops(FileClass::Log, OpKind::Read);
    let before = log_reads(&db);
    for i in (0..400).step_by(13) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{i}");
    }
    assert_eq!(
        log_reads(&db),
        before,
        "a value of the open layer read from the log"
    );
    db.close().unwrap();
}

/// Without the log's bytes in memory, gets of the open layer read the log
/// through the block cache, a page once.
#[test]
fn gets_of_the_open_layer_read_each_log_page_once_and_never_keep_a_bad_one() {
    let sim = SimStorage::new(21);
    let opts = Options {
        layer_size_bytes_max: 1 << 20,
        log_memory_bytes: 0,
        ..options(&sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    // Far more than the writer's buffer: most values are in the file.
    for i in 0..400 {
        db.put(key(i), value(i), WriteOptions::default()).unwrap();
    }
    assert_eq!(db.stats().delta_layers, 0, "everything in the open layer");
    let log_reads = |db: &Db| db.stats().io.ops(FileClass::Log, OpKind::Read);
    let before = log_reads(&db);
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7)));
    let first = log_reads(&db);
    assert_eq!(first, before + 1, "one read of the log");
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7)));
    assert_eq!(log_reads(&db), first, "the second get hits the cache");
    assert!(db.stats().block_cache_hits >= 1);

    // A value whose page is not cached rots on disk: its get is an error
    // naming the log, and the bad page is not kept, so once the bytes are
    // right again the get is too.
    let log = sim
        .file_paths()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .unwrap();
    let bytes = sim.file_bytes(&log).unwrap();
    let wanted = value(123);
    let at = bytes
        .windows(wanted.len())
        .position(|w| w == wanted)
        .expect("the value is in the log file");
    let flip = |b: &mut [u8]| b[at + 3] ^= 0x10;
    assert!(sim.rot(&log, flip));
    let err = db.get(key(123)).unwrap_err();
    assert!(
        err.to_string().contains(&log.display().to_string()),
        "{err}"
    );
    assert!(
        db.get(key(123)).is_err(),
        "still bad: read again, not cached"
    );
    assert!(sim.rot(&log, flip));
    assert_eq!(db.get(key(123)).unwrap(), Some(value(123)));
    db.close().unwrap();
}

/// Images are written where runs pile up over the same keys, and again only
/// once the runs above an image hold as much as it does: runs of ascending
/// keys (an append-only load) never call for one, and a small hot range
/// updated over and over does not rewrite all the data: its runs merge into
/// tiers, and once they hold as much as the image files under them, those
/// files alone are imaged again.
#[test]
fn images_follow_the_runs_that_overlap_and_grow_geometrically_and_tiers_merge_between() {
    let sim = SimStorage::new(11);
    let opts = Options {
        l0_compaction_trigger: 0,
        image_run_threshold: 2,
        target_file_bytes: strata::LAYER_BYTES_MIN,
        ..options(&sim)
    };
    let db = Db::open(DIR, opts).unwrap();
    let mut model = std::collections::BTreeMap::new();
    let round = |db: &Db,
                 model: &mut std::collections::BTreeMap<_, _>,
                 keys: std::ops::Range<u32>,
                 salt: u32| {
        for i in keys {
            db.put(key(i), value(i + salt), WriteOptions::default())
                .unwrap();
            model.insert(key(i), value(i + salt));
        }
        db.flush().unwrap();
        // No horizon: compact() merges L0 into a run and makes an image
        // only where the policy calls for one.
        db.compact().unwrap();
        let s = db.stats();
        (s.l1_runs, s.image_runs)
    };
    // Append-only: six runs, each of its own keys; no image.
    for r in 0..6 {
        assert_eq!(
            round(&db, &mut model, r * 200..(r + 1) * 200, 0),
            (r as usize + 1, 0)
        );
    }
    // One run over all the keys: two deep everywhere, so an image.
    assert_eq!(round(&db, &mut model, 0..1200, 1), (8, 1));
    let image_bytes = db.stats().delta_bytes;
    // A hot range of 40 keys, updated again and again: the runs above the
    // image pile up there, but hold far less than the image. They merge by
    // like size into tiers, so a read passes a few of them, not one per
    // round; and once they hold as much as the image files of the hot
    // range, those are imaged again, not the rest.
    let compactions = db.stats().compactions;
    let mut states = vec![(db.last_lsn(), model.clone())];
    for salt in 2..12 {
        let (runs, images) = round(&db, &mut model, 100..140, salt);
        assert!(
            runs - images <= 8 + 4,
            "round {salt}: {runs} runs, {images} images, 7 L1 runs below the hot ones"
        );
        states.push((db.last_lsn(), model.clone()));
    }
    assert!(
        db.stats().compactions > compactions + 10,
        "tiers merged: {:?}",
        db.stats()
    );
    // The hot range was imaged again (more image runs), and the images and
    // runs of all ten rounds hold less than a third of the first image.
    let s = db.stats();
    let hot_images = s.image_runs;
    assert!(hot_images >= 2, "{s:?}");
    assert!(s.delta_bytes - image_bytes < image_bytes / 3, "{s:?}");
    // A merged run holds every version of the runs it replaced: every
    // round's state reads back at its LSN, and so does a hot key one LSN
    // before it (the round's last put is of key 139).
    for (lsn, state) in &states {
        let want: Vec<_> = state.clone().into_iter().collect();
        assert_eq!(everything_at(&db, *lsn), want, "at LSN {lsn}");
        assert_eq!(
            db.get_at(key(120), lsn - 1).unwrap().as_ref(),
            state.get(&key(120))
        );
    }
    assert_eq!(
        everything(&db),
        model.clone().into_iter().collect::<Vec<_>>()
    );
    // Runs above that hold as much as the image (a round of all the keys
    // holds about two thirds of it; with the hot runs, one or two rounds
    // do): a new image.
    let mut images = hot_images;
    for salt in 12..14 {
        if images == hot_images {
            images = round(&db, &mut model, 0..1200, salt).1;
        }
    }
    assert_eq!(images, hot_images + 1, "{:?}", db.stats());
    assert!(db.stats().delta_bytes > image_bytes);
    assert_eq!(everything(&db), model.into_iter().collect::<Vec<_>>());
}
