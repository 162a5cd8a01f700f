//! Bad input gets a typed error and nothing is written; directories that are
//! not strata databases, or from a newer format, give a clear error.

use std::sync::Arc;
use strata::io::{FileClass, OpKind};
use strata::{Db, Error, InvalidInput, IoMode, Options, WriteBatch, WriteOptions, KEY_BYTES_MAX};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn opts() -> Options {
    Options {
        value_size_bytes_max: 1000,
        ..Options::default()
    }
}

fn invalid(e: Error) -> InvalidInput {
    match e {
        Error::InvalidInput(i) => i,
        other => panic!("expected InvalidInput, got {other}"),
    }
}

#[test]
fn bad_keys_values_and_lsns_are_typed_errors_and_write_nothing() {
    let d = dir();
    let path = d.path().join("db");
    let db = Db::open(&path, opts()).unwrap();
    db.put(b"ok", b"1", WriteOptions::default()).unwrap();

    let mut b = WriteBatch::new();
    b.put(b"fine", b"x");
    b.put(b"", b"x");
    assert!(matches!(
        invalid(db.write(&b, WriteOptions::default()).unwrap_err()),
        InvalidInput::KeyEmpty { .. }
    ));

    let mut b = WriteBatch::new();
    b.put(vec![7u8; KEY_BYTES_MAX + 1], b"x");
    assert!(matches!(
        invalid(db.write(&b, WriteOptions::default()).unwrap_err()),
        InvalidInput::KeyTooLong { .. }
    ));

    let mut b = WriteBatch::new();
    b.put(vec![7u8; KEY_BYTES_MAX], b"x");
    b.put(b"big", vec![0u8; 1001]);
    assert_eq!(
        invalid(db.write(&b, WriteOptions::default()).unwrap_err()),
        InvalidInput::ValueTooLarge {
            len: 1001,
            max: 1000
        }
    );

    let mut b = WriteBatch::new();
    b.put(b"explicit", b"x");
    assert_eq!(
        invalid(db.write_at_lsn(&b, 1, WriteOptions::default()).unwrap_err()),
        InvalidInput::LsnNotIncreasing { lsn: 1, last: 1 }
    );
    assert_eq!(
        db.write_at_lsn(&b, 100, WriteOptions::default()).unwrap(),
        100
    );
    assert!(db.write_at_lsn(&b, 100, WriteOptions::default()).is_err());
    assert_eq!(
        db.put(b"after", b"y", WriteOptions::default()).unwrap(),
        101
    );

    assert!(matches!(
        invalid(db.get(b"").unwrap_err()),
        InvalidInput::KeyEmpty { .. }
    ));
    // Nothing of the rejected batches was written, now or after a reopen.
    db.close().unwrap();
    let db = Db::open(&path, opts()).unwrap();
    assert_eq!(db.last_lsn(), 101);
    assert_eq!(db.get(b"fine").unwrap(), None);
    assert_eq!(db.get(b"big").unwrap(), None);
    assert_eq!(db.get(vec![7u8; KEY_BYTES_MAX]).unwrap(), None);
    assert_eq!(db.get(b"explicit").unwrap(), Some(b"x".to_vec()));
    assert_eq!(db.get_at(b"explicit", 99).unwrap(), None);
}

#[test]
fn unknown_option_values_and_out_of_range_options_are_typed_errors() {
    assert!(matches!(
        "sideways".parse::<IoMode>(),
        Err(InvalidInput::UnknownOptionValue { .. })
    ));
    assert!(matches!(
        "fast".parse::<strata::IoEngine>(),
        Err(InvalidInput::UnknownOptionValue { .. })
    ));
    let d = dir();
    for bad in [
        Options {
            layer_size_bytes_max: 10,
            ..Options::default()
        },
        Options {
            value_size_bytes_max: 1 << 40,
            ..Options::default()
        },
        Options {
            writer_buffer_bytes: 0,
            ..Options::default()
        },
        Options {
            alignment_bytes: Some(3000),
            ..Options::default()
        },
    ] {
        let err = Db::open(d.path().join("db"), bad)
            .err()
            .expect("bad option refused");
        assert!(
            matches!(
                err,
                Error::InvalidInput(InvalidInput::OptionOutOfRange { .. })
            ),
            "{err}"
        );
    }
    assert!(
        !d.path().join("db").exists(),
        "nothing was created for a bad option"
    );
}

#[test]
fn a_directory_that_is_not_a_database_is_refused() {
    let d = dir();
    std::fs::write(d.path().join("notes.txt"), b"hello").unwrap();
    let err = Db::open(d.path(), Options::default())
        .err()
        .expect("refused");
    assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
    assert!(err.to_string().contains("not a strata database"), "{err}");
    assert_eq!(std::fs::read(d.path().join("notes.txt")).unwrap(), b"hello");
    assert!(
        !d.path().join("LOCK").exists(),
        "nothing is written into a directory that is not a database"
    );

    std::fs::write(d.path().join("MANIFEST"), b"not a manifest at all, really").unwrap();
    let err = Db::open(d.path(), Options::default())
        .err()
        .expect("refused");
    assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
}

#[test]
fn a_database_from_a_newer_format_version_is_refused() {
    let d = dir();
    let path = d.path().join("db");
    Db::open(&path, Options::default())
        .unwrap()
        .close()
        .unwrap();
    let manifest = path.join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&manifest, bytes).unwrap();
    let err = Db::open(&path, Options::default()).err().expect("refused");
    assert!(
        matches!(err, Error::UnsupportedVersion { found: 99, .. }),
        "{err}"
    );
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let d = dir();
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    let err = Db::open(d.path().join("db"), Options::default())
        .err()
        .expect("locked");
    assert!(err.to_string().contains("another process"), "{err}");
    drop(db);
    Db::open(d.path().join("db"), Options::default()).unwrap();
}

#[test]
fn concurrent_synced_writers_share_syncs_and_all_land() {
    let d = dir();
    let db = Arc::new(Db::open(d.path().join("db"), Options::default()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..200 {
                    db.put(
                        format!("t{t}-{i}"),
                        format!("{i}"),
                        WriteOptions { sync: true },
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = db.stats();
    let syncs = stats
        .io
        .ops(strata::io::FileClass::Log, strata::io::OpKind::Sync);
    assert_eq!(stats.last_lsn, 800);
    assert!(
        syncs < 800,
        "group commit shares syncs: {syncs} syncs for 800 synced writes"
    );
    for t in 0..4 {
        for i in 0..200 {
            assert_eq!(
                db.get(format!("t{t}-{i}")).unwrap(),
                Some(format!("{i}").into_bytes())
            );
        }
    }
}

#[test]
fn snapshots_and_get_at_see_history_across_flushes() {
    let d = dir();
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    let l1 = db.put(b"k", b"v1", WriteOptions::default()).unwrap();
    let snap = db.snapshot();
    db.flush().unwrap();
    let l2 = db.put(b"k", b"v2", WriteOptions::default()).unwrap();
    let l3 = db.delete(b"k", WriteOptions::default()).unwrap();
    assert_eq!(snap.lsn(), l1);
    assert_eq!(snap.get(b"k").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(db.get_at(b"k", l2).unwrap(), Some(b"v2".to_vec()));
    assert_eq!(db.get_at(b"k", l3).unwrap(), None);
    assert_eq!(db.get(b"k").unwrap(), None);
    assert_eq!(snap.scan::<&[u8], _>(..).unwrap().count(), 1);
    let s = db.stats();
    assert_eq!(s.delta_layers, 1);
    assert!(s.index_memory_bytes > 0);
}

#[test]
fn writers_stall_on_the_flush_and_l0_backlogs_so_they_stay_bounded() {
    for background_flush in [false, true] {
        let d = dir();
        let opts = Options {
            layer_size_bytes_max: strata::LAYER_BYTES_MIN,
            frozen_layers_max: 2,
            l0_compaction_trigger: 2,
            l0_slowdown_layers: 4,
            l0_stop_layers: 6,
            target_file_bytes: 1 << 20,
            background_flush,
            ..Options::default()
        };
        let db = Db::open(d.path().join("db"), opts).unwrap();
        let value = vec![3u8; 4000];
        for i in 0..2000u32 {
            db.put(i.to_be_bytes(), &value, WriteOptions::default())
                .unwrap();
            let s = db.stats();
            assert!(s.frozen_layers <= 2, "flush backlog bounded: {s:?}");
            // Writers wait below l0_stop_layers; the flush thread may add
            // the frozen layers it holds meanwhile.
            assert!(s.l0_layers < 6 + 2, "L0 bounded: {s:?}");
        }
        let s = db.stats();
        assert!(s.compactions > 0 && s.l1_layers > 0, "{s:?}");
        assert!(
            s.io.bytes(strata::io::FileClass::Delta, strata::io::OpKind::Write)
                >= 3 * 2000 * 4000 / 2,
            "flushed and compacted: {s:?}"
        );
        assert_eq!(db.get(1999u32.to_be_bytes()).unwrap(), Some(value.clone()));
    }
}

#[test]
fn the_last_lsn_is_the_end_of_the_lsn_space_not_a_wrap() {
    let d = dir();
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"k", b"v");
    db.write_at_lsn(&b, u64::MAX, WriteOptions::default())
        .unwrap();
    assert_eq!(
        invalid(db.write(&b, WriteOptions::default()).unwrap_err()),
        InvalidInput::LsnExhausted
    );
    assert_eq!(db.get_at(b"k", u64::MAX).unwrap(), Some(b"v".to_vec()));
}

/// After an update-heavy run, one compaction with no history kept leaves
/// the live data and little else: an image, the layers under it collected,
/// their files deleted. (The lab's space aim: at most 1.3× the live data.)
#[test]
fn compaction_with_no_history_leaves_about_the_live_data_on_disk() {
    let d = dir();
    let path = d.path().join("db");
    let opts = Options {
        history_lsns: Some(0),
        layer_size_bytes_max: 1 << 20,
        target_file_bytes: 1 << 20,
        // No background compaction: one in flight when compact() starts
        // would count its writes in what compact() is measured to write.
        l0_compaction_trigger: 0,
        ..Options::default()
    };
    let db = Db::open(&path, opts.clone()).unwrap();
    let (keys, rounds, value_len) = (5_000u32, 6u32, 200usize);
    for round in 0..rounds {
        let mut b = WriteBatch::new();
        for i in 0..keys {
            b.put(format!("key-{i:08}"), vec![round as u8; value_len]);
            if b.len() == 500 {
                db.write(&b, WriteOptions::default()).unwrap();
                b = WriteBatch::new();
            }
        }
        // Some keys go away for good.
        b.delete(format!("key-{:08}", round));
        db.write(&b, WriteOptions::default()).unwrap();
    }
    let live: u64 = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.map(|(k, v)| (k.len() + v.len()) as u64).unwrap())
        .sum();
    db.flush().unwrap();
    let layer_writes = |db: &Db| {
        let io = db.stats().io;
        io.bytes(FileClass::Delta, OpKind::Write) + io.bytes(FileClass::Image, OpKind::Write)
    };
    let before = layer_writes(&db);
    db.compact().unwrap();
    let compaction_writes = layer_writes(&db) - before;
    let s = db.stats();
    assert_eq!(
        (s.l0_layers, s.l1_runs),
        (0, 1),
        "only the image is left: {s:?}"
    );
    let files: Vec<u64> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "delta"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    let on_disk: u64 = files.iter().sum();
    assert_eq!(on_disk, s.delta_bytes, "no file left behind");
    // With every L0 layer below the horizon, the image is written straight
    // from them: the compaction writes the image and nothing else (not an
    // L1 run first, to be rewritten into the image and collected). Direct
    // I/O writes each file's last page whole.
    assert!(
        compaction_writes < on_disk + 4096 * files.len() as u64,
        "compaction wrote {compaction_writes} bytes for an image of {on_disk}"
    );
    assert!(
        on_disk as f64 <= 1.3 * live as f64,
        "{on_disk} bytes of layers for {live} bytes of live data"
    );
    assert!(db.horizon() > 0);
    assert!(matches!(
        db.get_at("key-00000100", 1),
        Err(Error::BelowHorizon { .. })
    ));
    assert_eq!(db.get("key-00000100").unwrap(), Some(vec![5u8; value_len]));
    // Deleted in the last round, after its put.
    assert!(db.get("key-00000005").unwrap().is_none());
    drop(db);
    // Reopened from the manifest alone, the same.
    let db = Db::open(&path, opts).unwrap();
    assert_eq!(db.get("key-00000100").unwrap(), Some(vec![5u8; value_len]));
    assert!(db.horizon() > 0);
    println!("space: {on_disk} bytes on disk for {live} bytes of live data");
}

#[test]
fn empty_and_reversed_scan_ranges_are_empty_in_every_layer() {
    use std::ops::Bound::{Excluded, Included};
    let d = dir();
    let db = Db::open(d.path().join("db"), opts()).unwrap();
    let scan = |db: &Db, (start, end): (std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>)| {
        db.scan((start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec)))
            .unwrap()
            .map(|item| item.unwrap().0)
            .collect::<Vec<_>>()
    };
    let (k, z): (&[u8], &[u8]) = (b"k", b"z");
    for key in [b"a", b"k", b"z"] {
        db.put(key, b"v", WriteOptions::default()).unwrap();
    }
    // The open layer, then a frozen one, then a delta layer.
    for step in 0..3 {
        match step {
            1 => db.freeze().unwrap(),
            2 => db.flush().unwrap(),
            _ => {}
        }
        assert!(
            scan(&db, (Excluded(k), Excluded(k))).is_empty(),
            "step {step}"
        );
        assert!(
            scan(&db, (Included(k), Excluded(k))).is_empty(),
            "step {step}"
        );
        assert!(
            scan(&db, (Excluded(k), Included(k))).is_empty(),
            "step {step}"
        );
        assert!(
            scan(&db, (Included(z), Included(k))).is_empty(),
            "step {step}"
        );
        assert_eq!(
            scan(&db, (Included(k), Included(k))),
            vec![k.to_vec()],
            "step {step}"
        );
        assert_eq!(
            scan(&db, (Excluded(k), Included(z))),
            vec![z.to_vec()],
            "step {step}"
        );
    }
}
