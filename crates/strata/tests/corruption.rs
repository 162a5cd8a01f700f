//! Corruption: bytes flipped in a delta layer, in a log before its tail, and
//! in the manifest give a clear error naming the file, never a panic and
//! never a wrong value.

use std::path::{Path, PathBuf};
use strata::{Db, Error, IoMode, Options, WriteBatch, WriteOptions};

fn options() -> Options {
    Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        delta_block_bytes: 2048,
        ..Options::default()
    }
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-")
        .repeat(1 + (i % 9) as usize)
        .into_bytes()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A database with `n` keys written in synced batches; flushed if asked.
fn make_db(dir: &Path, n: u32, flush: bool) {
    let db = Db::open(dir, options()).unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(10) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(key(i), value(i));
        }
        db.write(&b, WriteOptions { sync: true }).unwrap();
    }
    if flush {
        db.flush().unwrap();
    }
    db.close().unwrap();
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// The log that holds the records `make_db` wrote (the others are empty).
fn log_with_records(dir: &Path) -> PathBuf {
    files_with_ext(dir, "log")
        .into_iter()
        .find(|p| std::fs::metadata(p).unwrap().len() > 10_000)
        .expect("a log with records")
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

/// Reads every key; returns the first error, panicking on a wrong value.
fn read_all(db: &Db, n: u32) -> Result<(), Error> {
    for i in 0..n {
        match db.get(key(i))? {
            Some(v) => assert_eq!(v, value(i), "wrong value for key {i}"),
            None => panic!("key {i} missing without an error"),
        }
    }
    for item in db.scan::<&[u8], _>(..)? {
        let (k, v) = item?;
        let i: u32 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
        assert_eq!(v, value(i), "wrong value in scan for key {i}");
    }
    Ok(())
}

#[test]
fn flipped_byte_in_a_delta_layer_is_an_error_naming_the_file() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pristine = base.path().join("pristine");
    let n = 400;
    make_db(&pristine, n, true);
    let delta = files_with_ext(&pristine, "delta");
    assert_eq!(delta.len(), 1, "one delta layer after the flush");
    let len = std::fs::metadata(&delta[0]).unwrap().len();
    let mut detected = 0;
    let step = (len / 60).max(1);
    for offset in (0..len).step_by(step as usize) {
        let dir = base.path().join(format!("flip{offset}"));
        std::fs::create_dir(&dir).unwrap();
        for e in std::fs::read_dir(&pristine).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        let target = dir.join(delta[0].file_name().unwrap());
        flip(&target, offset);
        let result = Db::open(&dir, options()).and_then(|db| read_all(&db, n));
        match result {
            Ok(()) => {}
            Err(e) => {
                detected += 1;
                let msg = e.to_string();
                assert!(
                    e.is_corruption() || matches!(e, Error::UnsupportedVersion { .. }),
                    "offset {offset}: {msg}"
                );
                assert!(
                    msg.contains(&target.display().to_string()),
                    "error names the file: {msg}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // Every byte of a delta layer is checksummed and every data block is read above.
    assert!(detected >= 55, "only {detected} of ~60 flips detected");
}

#[test]
fn flipped_byte_in_the_log_before_its_tail_is_an_error_naming_file_and_offset() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = base.path().join("db");
    make_db(&dir, 300, false);
    let log = &log_with_records(&dir);
    // Inside the payload of an early record: later synced records say the log was durable past it.
    flip(log, 64 + 32 + 40);
    let err = Db::open(&dir, options()).err().expect("open must fail");
    let msg = err.to_string();
    assert!(err.is_corruption(), "{msg}");
    assert!(
        msg.contains(&log.display().to_string()) && msg.contains("offset 64"),
        "{msg}"
    );
}

#[test]
fn torn_tail_of_the_log_is_not_an_error() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = base.path().join("db");
    make_db(&dir, 300, false);
    let log = &log_with_records(&dir);
    // Cut the last record in half: a crash in the middle of its write.
    // Each synced batch starts a sector (the sync before it ended the log
    // there with a pad record): find batch 30's, by the LSN in its header.
    let bytes = std::fs::read(log).unwrap();
    let last = (0..bytes.len() - 32)
        .step_by(512)
        .find(|&at| bytes[at + 8..at + 16] == 30u64.to_le_bytes())
        .expect("the record of LSN 30 starts a sector");
    std::fs::write(log, &bytes[..last + 100]).unwrap();
    let db = Db::open(&dir, options()).unwrap();
    assert_eq!(
        db.last_lsn(),
        29,
        "the torn last batch (LSN 30) is gone, the rest is there"
    );
    for i in 0..290 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)));
    }
    assert_eq!(db.get(key(295)).unwrap(), None);
}

#[test]
fn flipped_byte_in_the_manifest_is_an_error_naming_it() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = base.path().join("db");
    make_db(&dir, 50, true);
    let manifest = dir.join("MANIFEST");
    let len = std::fs::metadata(&manifest).unwrap().len();
    for offset in 0..len {
        let saved = std::fs::read(&manifest).unwrap();
        flip(&manifest, offset);
        let err = Db::open(&dir, options())
            .err()
            .unwrap_or_else(|| panic!("flip at {offset} undetected"));
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                Error::Corruption(_)
                    | Error::NotADatabase { .. }
                    | Error::UnsupportedVersion { .. }
            ),
            "offset {offset}: {msg}"
        );
        assert!(msg.contains("MANIFEST"), "{msg}");
        std::fs::write(&manifest, saved).unwrap();
    }
    // Restored: opens and reads.
    let db = Db::open(&dir, options()).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7)));
}

#[test]
fn a_newest_layer_whose_footer_disagrees_with_its_descriptor_fails_the_open() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = base.path().join("db");
    make_db(&dir, 100, true);
    // The layer holds LSNs 1..=10; the manifest's descriptor says so, and
    // the next LSN (11) follows from it. A footer that claims LSNs up to
    // 1000 (checksum intact, its entries still within) is not that file.
    let delta = files_with_ext(&dir, "delta");
    let newest = delta.last().expect("a layer file");
    let mut bytes = std::fs::read(newest).unwrap();
    let footer = bytes.len() - 124;
    assert_eq!(
        bytes[footer + 32..footer + 40],
        10u64.to_le_bytes(),
        "lsn_max"
    );
    bytes[footer + 32..footer + 40].copy_from_slice(&1000u64.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[footer..footer + 120]);
    bytes[footer + 120..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(newest, bytes).unwrap();
    let err = Db::open(&dir, options()).err().expect("the open must fail");
    match &err {
        Error::Corruption(c) => assert_eq!(&c.file, newest, "{err}"),
        _ => panic!("not a corruption: {err}"),
    }
}
