//! Large values written once: a flush leaves values of at least
//! `large_value_bytes` in their log, which stays as a value file while a
//! layer points into it; compaction moves pointers, relocates the live
//! values of value files mostly garbage, and the emptied files go. On real
//! files (a temp dir on the project's disk: O_DIRECT).

use std::collections::BTreeMap;
use std::path::Path;
use strata::{Db, Options, WriteOptions};

fn opts() -> Options {
    Options {
        background_flush: false,
        l0_compaction_trigger: 0,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// A value of `len` bytes that says which key and round it is.
fn value(i: u32, round: u32, len: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    let seed = (i as u8) ^ (round as u8).rotate_left(3);
    v.extend((0..len).map(|j| seed.wrapping_add(j as u8)));
    v.truncate(len);
    v
}

/// Bytes of the database's `.log` files, and how many there are.
fn logs(dir: &Path) -> (u64, usize) {
    let mut bytes = 0;
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().ends_with(".log") {
            bytes += e.metadata().unwrap().len();
            n += 1;
        }
    }
    (bytes, n)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{k:?}");
    }
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> = db
        .scan::<Vec<u8>, _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(&scanned, model);
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let got = db.multi_get(&keys).unwrap();
    for (k, g) in keys.iter().zip(got) {
        assert_eq!(g.as_ref(), model.get(*k));
    }
}

#[test]
fn large_values_stay_in_their_log_and_read_back_after_flush_and_reopen() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    let mut model = BTreeMap::new();
    {
        let db = Db::open(&dir, opts()).unwrap();
        for i in 0..200u32 {
            // Mixed: every fourth value small, the rest 8 KiB.
            let len = if i % 4 == 0 { 100 } else { 8192 };
            let v = value(i, 0, len);
            db.put(key(i), &v, WriteOptions::default()).unwrap();
            model.insert(key(i), v);
        }
        db.flush().unwrap();
        let s = db.stats();
        // The layer holds pointers, not the values: far smaller than them.
        assert!(s.delta_bytes < 150 * 8192 / 10, "{}", s.delta_bytes);
        // The log stays as a value file.
        assert_eq!(logs(&dir).1, 2, "the value file and the open log");
        check(&db, &model);
        db.close().unwrap();
    }
    let db = Db::open(&dir, opts()).unwrap();
    check(&db, &model);
    // An older version stays readable at its LSN.
    let lsn = db.last_lsn();
    db.put(key(1), value(1, 1, 8192), WriteOptions::default())
        .unwrap();
    db.flush().unwrap();
    assert_eq!(db.get_at(key(1), lsn).unwrap(), Some(value(1, 0, 8192)));
    assert_eq!(db.get(key(1)).unwrap(), Some(value(1, 1, 8192)));
}

#[test]
fn updates_then_a_compaction_at_horizon_zero_leave_space_near_the_live_data() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(
        &dir,
        Options {
            layer_size_bytes_max: 1 << 20,
            target_file_bytes: 256 << 10,
            ..opts()
        },
    )
    .unwrap();
    let (keys, rounds, len) = (64u32, 12u32, 8192usize);
    let mut model = BTreeMap::new();
    for r in 0..rounds {
        for i in 0..keys {
            let v = value(i, r, len);
            db.put(key(i), &v, WriteOptions::default()).unwrap();
            model.insert(key(i), v);
        }
        db.flush().unwrap();
    }
    let before = logs(&dir);
    assert!(before.1 > 3, "value files kept: {before:?}");
    db.set_horizon(db.last_lsn());
    db.compact().unwrap();
    check(&db, &model);
    let live = u64::from(keys) * len as u64;
    let total = dir_bytes(&dir);
    eprintln!(
        "space: {total} bytes on disk, {live} live; logs before {before:?}, after {:?}",
        logs(&dir)
    );
    // The open log, the manifest and the layers' own bytes beside the values.
    assert!(
        total as f64 <= 1.3 * live as f64 + (64 << 10) as f64,
        "{total} bytes on disk for {live} live (logs before: {before:?}, after: {:?})",
        logs(&dir)
    );
    drop(db);
    let db = Db::open(&dir, opts()).unwrap();
    check(&db, &model);
}
