//! Large values written once: a flush leaves values of at least
//! `large_value_bytes` in their log, which stays as a value file while a
//! layer points into it; compaction moves pointers, relocates the live
//! values of value files mostly garbage, and the emptied files go. On real
//! files (a temp dir on the project's disk: O_DIRECT).

use std::collections::BTreeMap;
use std::path::Path;
use strata::inspect::EntryValue;
use strata::io::{FileClass, OpKind};
use strata::{Db, Options, WriteBatch, WriteOptions};

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
    // Each round writes two keys of three (a third of each round's values
    // are the newest when a later round skips their key): the older value
    // files end up partly live, the live values of those mostly garbage
    // are moved.
    for r in 0..rounds {
        for i in (0..keys).filter(|i| (i + r) % 3 != 0) {
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
    // The older value files were mostly garbage: their live values moved.
    let s = db.stats();
    eprintln!(
        "relocated {} live {} files {}",
        s.value_relocated_bytes, s.value_live_bytes, s.value_file_bytes
    );
    assert!(s.value_relocated_bytes > 0, "{s:?}");
    assert!(
        s.value_file_bytes * 100 <= s.value_live_bytes * 125,
        "{s:?}"
    );
    let live = u64::from(keys) * len as u64;
    // Logs and layer files (the manifest is a bounded log of edits, 4 KiB
    // each, rolled over past 1 MiB).
    let data = dir_bytes(&dir) - std::fs::metadata(dir.join("MANIFEST")).unwrap().len();
    eprintln!(
        "space: {data} bytes of logs and layers for {live} live; logs before {before:?}, after {:?}",
        logs(&dir)
    );
    assert!(
        data as f64 <= 1.3 * live as f64,
        "{data} bytes of logs and layers for {live} live (logs before: {before:?}, after: {:?})",
        logs(&dir)
    );
    // The older value files were partly live: those mostly garbage had
    // their live values moved, and every value file left is at most 1.25×
    // its live bytes.
    let s = db.stats();
    assert!(s.value_relocated_bytes > 0, "{s:?}");
    assert!(
        s.value_file_bytes * 100 <= s.value_live_bytes * 125,
        "{s:?}"
    );
    drop(db);
    let db = Db::open(&dir, opts()).unwrap();
    check(&db, &model);
}

/// A database of 8 KiB values flushed into one value file, closed; the
/// value file's path.
fn one_value_file(dir: &Path) -> (BTreeMap<Vec<u8>, Vec<u8>>, std::path::PathBuf) {
    let mut model = BTreeMap::new();
    let db = Db::open(dir, opts()).unwrap();
    for i in 0..16u32 {
        let v = value(i, 0, 8192);
        db.put(key(i), &v, WriteOptions::default()).unwrap();
        model.insert(key(i), v);
    }
    db.flush().unwrap();
    assert_eq!(db.stats().value_files, 1);
    db.close().unwrap();
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    // The oldest log is the value file (the newer is the open one).
    (model, logs.remove(0))
}

#[test]
fn a_damaged_value_is_an_error_naming_the_file_and_offset_never_a_wrong_value() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    let (model, file) = one_value_file(&dir);
    // One bit of key 5's value (out of line, wherever its record's pad put
    // it: found by its bytes).
    let mut bytes = std::fs::read(&file).unwrap();
    let at = find(&bytes, &model[&key(5)]) + 100;
    bytes[at] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    let db = Db::open(&dir, opts()).unwrap();
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => assert_eq!(got.as_ref(), Some(v), "{k:?}"),
            Err(e) => {
                let text = e.to_string();
                assert!(e.is_corruption(), "{text}");
                assert!(text.contains(&file.display().to_string()), "{text}");
                assert_eq!(k, &key(5), "{text}");
            }
        }
    }
    assert!(db.get(key(5)).is_err(), "the damaged value is refused");
    assert!(db.stats().read_retries > 0, "read once more first");
}

#[test]
fn a_missing_or_short_value_file_fails_the_open_naming_it() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    let (_, file) = one_value_file(&dir);
    let bytes = std::fs::read(&file).unwrap();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = Db::open(&dir, opts()).err().expect("a short value file");
    assert!(
        err.is_corruption() && err.to_string().contains(&name),
        "{err}"
    );
    std::fs::remove_file(&file).unwrap();
    let err = Db::open(&dir, opts()).err().expect("a missing value file");
    assert!(
        err.is_corruption() && err.to_string().contains(&name),
        "{err}"
    );
    // Put back whole, it opens and nothing was removed meanwhile.
    std::fs::write(&file, &bytes).unwrap();
    let db = Db::open(&dir, opts()).unwrap();
    assert_eq!(db.get(key(3)).unwrap(), Some(value(3, 0, 8192)));
}

/// Where `needle` first occurs in `hay` (a test's way to find a value in a
/// file whatever pads the writer put before it).
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("the value is in the file")
}

/// The pointers of every layer file in `dir`: `(key, offset, out of line)`.
fn pointers(dir: &Path) -> Vec<(Vec<u8>, u64, bool)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "delta") {
            strata::inspect::scan_layer_file(&path, |k, _, entry| {
                if let EntryValue::Pointer {
                    offset,
                    out_of_line,
                    ..
                } = entry
                {
                    out.push((k.to_vec(), offset, out_of_line));
                }
                Ok(())
            })
            .unwrap();
        }
    }
    out
}

/// Log format 4: 4 KiB values written in batches go out of line, into
/// their record's value run, which a pad starts on a page: after the flush
/// a pointer names the value itself, on a page, and a get of one from a
/// cold start reads one 4 KiB page of its value file, not two. A lone 4
/// KiB put (no pad: it would double its record) and values of other
/// lengths read back too, from the open layer, after the flush and after
/// a reopen.
#[test]
fn page_sized_values_written_in_batches_are_read_one_page_each() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    let mut model = BTreeMap::new();
    let batched = 32 * 16;
    {
        let db = Db::open(&dir, opts()).unwrap();
        for b in 0..32u32 {
            let mut batch = WriteBatch::new();
            for i in b * 16..(b + 1) * 16 {
                let v = value(i, 0, 4096);
                batch.put(key(i), &v);
                model.insert(key(i), v);
            }
            // A small value, a 1000-byte one (inline, its crc kept too)
            // and a 12 KiB one in the same record.
            batch.put(key(10_000 + b), b"small");
            model.insert(key(10_000 + b), b"small".to_vec());
            let v = value(50_000 + b, 0, 1000);
            batch.put(key(50_000 + b), &v);
            model.insert(key(50_000 + b), v);
            let v = value(20_000 + b, 0, 3 * 4096);
            batch.put(key(20_000 + b), &v);
            model.insert(key(20_000 + b), v);
            db.write(&batch, WriteOptions::default()).unwrap();
            // A lone 4 KiB put and a 5000-byte one between batches.
            for (i, len) in [(30_000 + b, 4096), (40_000 + b, 5000)] {
                let v = value(i, 0, len);
                db.put(key(i), &v, WriteOptions::default()).unwrap();
                model.insert(key(i), v);
            }
        }
        check(&db, &model);
        db.flush().unwrap();
        check(&db, &model);
        db.close().unwrap();
    }
    let found = pointers(&dir);
    let batched_pointers: Vec<_> = found
        .iter()
        .filter(|(k, _, _)| (0..batched).any(|i| key(i) == *k))
        .collect();
    assert_eq!(batched_pointers.len(), batched as usize);
    for (k, offset, out_of_line) in &batched_pointers {
        assert!(out_of_line, "{k:?}");
        assert_eq!(offset % 4096, 0, "{k:?} at {offset}");
    }
    // The 5000-byte values stay in their entries.
    assert!(found
        .iter()
        .filter(|(k, _, _)| (40_000..40_032).any(|i| key(i) == *k))
        .all(|(_, _, out)| !out));
    let db = Db::open(&dir, opts()).unwrap();
    let before = db.stats().io;
    for i in (0..batched).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap().as_ref(), model.get(&key(i)));
    }
    let gets = (0..batched).step_by(7).count() as u64;
    let io = db.stats().io.since(&before);
    assert_eq!(io.ops(FileClass::Log, OpKind::Read), gets, "{io:?}");
    assert_eq!(
        io.bytes(FileClass::Log, OpKind::Read),
        4096 * gets,
        "{io:?}"
    );
    check(&db, &model);
}

/// An out-of-line value of the open layer whose bytes rot on disk after
/// they were written out: its get is a corruption naming the log and the
/// value's offset (read once more first), never the wrong bytes; the
/// values beside it read back.
#[test]
fn a_damaged_out_of_line_value_of_the_open_log_is_an_error_naming_it() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, opts()).unwrap();
    let mut model = BTreeMap::new();
    for b in 0..8u32 {
        let mut batch = WriteBatch::new();
        for i in b * 16..(b + 1) * 16 {
            let v = value(i, 0, 4096);
            batch.put(key(i), &v);
            model.insert(key(i), v);
        }
        db.write(&batch, WriteOptions { sync: true }).unwrap();
    }
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    let at = find(&bytes, &model[&key(20)]);
    assert_eq!(at % 4096, 0, "the value run starts on a page");
    bytes[at + 7] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    let err = db.get(key(20)).unwrap_err();
    let text = err.to_string();
    assert!(err.is_corruption(), "{text}");
    assert!(text.contains(&log.display().to_string()), "{text}");
    assert!(text.contains(&format!("offset {at}")), "{text}");
    assert!(db.stats().read_retries > 0, "read once more first");
    for (k, v) in &model {
        if k != &key(20) {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{k:?}");
        }
    }
}
