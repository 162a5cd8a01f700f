//! Damage to the manifest, from outside the process, as a user's disk would
//! do it (issue 27): a sector that decays to zeros or a lost write of one,
//! after writes that were acknowledged as synced. An open either refuses
//! with a `Corruption` naming the manifest (and every file stays as it
//! was), or succeeds with every synced write there. Never an open that
//! succeeds without them, never a log deleted that holds them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use strata::{Db, Error, IoMode, Options, WriteOptions};

const SECTOR: usize = 512;

fn options() -> Options {
    Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        background_flush: false,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:04}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}").into_bytes()
}

/// Every file of the database and its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "LOCK")
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for (p, bytes) in files(from) {
        std::fs::write(to.join(p.file_name().unwrap()), bytes).unwrap();
    }
}

/// Opens `dir` after damage: a refusal must be a corruption error naming
/// the manifest or a file of the database, and leave every file as it was;
/// an open that succeeds must find every key of `synced` (and `last_lsn`).
/// Returns whether the open refused.
fn open_after_damage(dir: &Path, synced: &[u32], last_lsn: u64) -> Result<bool, String> {
    let before = files(dir);
    match Db::open(dir, options()) {
        Err(e) => {
            let msg = e.to_string();
            if !(e.is_corruption() || matches!(e, Error::NotADatabase { .. })) {
                return Err(format!("refused, but not as corruption: {msg}"));
            }
            if !msg.contains(&dir.display().to_string()) {
                return Err(format!("the error names no file of the database: {msg}"));
            }
            let after = files(dir);
            if after != before {
                return Err(format!("a refused open changed the files: {msg}"));
            }
            Ok(true)
        }
        Ok(db) => {
            if db.last_lsn() < last_lsn {
                return Err(format!("last LSN {} < {last_lsn}", db.last_lsn()));
            }
            for &i in synced {
                match db.get(key(i)) {
                    Ok(Some(v)) if v == value(i) => {}
                    other => return Err(format!("synced key {i}: {other:?}")),
                }
            }
            Ok(false)
        }
    }
}

/// Issue 27's first shape: a database with layers, closed; reopened, five
/// synced puts, closed; the manifest's last sector zeroed.
fn first_shape(dir: &Path) -> (Vec<u32>, u64) {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..25 {
        db.put(key(i), value(i), WriteOptions { sync: true })
            .unwrap();
        if i % 5 == 4 {
            db.flush().unwrap();
        }
    }
    db.close().unwrap();
    let db = Db::open(dir, options()).unwrap();
    for i in 25..30 {
        db.put(key(i), value(i), WriteOptions { sync: true })
            .unwrap();
    }
    assert_eq!(db.last_lsn(), 30);
    db.close().unwrap();
    ((0..30).collect(), 30)
}

/// Issue 27's second shape: thirty rounds of a synced put and a freeze,
/// the flush off, then a close.
fn second_shape(dir: &Path) -> (Vec<u32>, u64) {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..30 {
        db.put(key(i), value(i), WriteOptions { sync: true })
            .unwrap();
        db.freeze().unwrap();
    }
    db.close().unwrap();
    ((0..30).collect(), 30)
}

fn zero(path: &Path, from: usize, to: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let to = to.min(bytes.len());
    bytes[from..to].fill(0);
    std::fs::write(path, bytes).unwrap();
}

/// Where the record that lists the newest log starts in the manifest.
fn last_add_log(dir: &Path) -> usize {
    let m = strata::inspect::manifest(dir).unwrap();
    let (at, _) = m
        .records
        .iter()
        .rev()
        .find(|(_, what)| what.starts_with("add log"))
        .expect("an add-log record");
    *at as usize
}

#[test]
fn a_lost_write_of_the_edit_that_lists_the_newest_log_loses_no_synced_write() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = base.path().join("db");
    let (synced, last) = first_shape(&dir);
    // The bytes its append wrote in its sector read back as zeros (the
    // sector as it was before the append: a lost write).
    let at = last_add_log(&dir);
    zero(&dir.join("MANIFEST"), at, (at + 1).next_multiple_of(SECTOR));
    open_after_damage(&dir, &synced, last).unwrap();
}

#[test]
fn zeroing_the_manifests_last_sector_after_thirty_freezes_loses_no_synced_write() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pristine = base.path().join("pristine");
    let (synced, last) = second_shape(&pristine);
    let len = std::fs::metadata(pristine.join("MANIFEST")).unwrap().len() as usize;
    for (from, to) in [((len - 1) / SECTOR * SECTOR, len), (512, 712)] {
        let dir = base.path().join(format!("{from}"));
        copy_dir(&pristine, &dir);
        zero(&dir.join("MANIFEST"), from, to);
        open_after_damage(&dir, &synced, last)
            .map_err(|e| format!("bytes {from}..{to} zeroed: {e}"))
            .unwrap();
    }
}

/// Each shape, with each sector of the manifest zeroed in turn, and with the
/// manifest as a crash leaves it (the seal a close appends cut off) and the
/// sector that holds the last edit zeroed: the edit that lists the newest
/// log is dropped as a torn append, and where that log holds synced
/// records the open finds them and refuses rather than delete it.
#[test]
fn any_zeroed_manifest_sector_refuses_or_keeps_every_synced_write() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut refused = 0;
    let mut trials = 0;
    for (name, shape) in [
        ("first", first_shape as fn(&Path) -> (Vec<u32>, u64)),
        ("second", second_shape),
    ] {
        let pristine = base.path().join(name);
        let (synced, last) = shape(&pristine);
        let len = std::fs::metadata(pristine.join("MANIFEST")).unwrap().len() as usize;
        for sector in (0..len).step_by(SECTOR) {
            let dir = base.path().join(format!("{name}-{sector}"));
            copy_dir(&pristine, &dir);
            zero(&dir.join("MANIFEST"), sector, sector + SECTOR);
            trials += 1;
            refused += usize::from(
                open_after_damage(&dir, &synced, last)
                    .map_err(|e| format!("{name} shape, sector {sector}: {e}"))
                    .unwrap(),
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
        // A crash after the last edit: no seal. Its first sector zeroed.
        let dir = base.path().join(format!("{name}-crash"));
        copy_dir(&pristine, &dir);
        let manifest = dir.join("MANIFEST");
        let unsealed = len - 4096;
        std::fs::write(&manifest, &std::fs::read(&manifest).unwrap()[..unsealed]).unwrap();
        let last_edit = unsealed - 4096;
        zero(&manifest, last_edit, last_edit + SECTOR);
        let was_refused = open_after_damage(&dir, &synced, last)
            .map_err(|e| format!("{name} shape, crash, last edit zeroed: {e}"))
            .unwrap();
        // The first shape's newest log holds the five synced writes: the
        // open must refuse. The second's is empty (a freeze made it): its
        // edit lost, nothing is.
        assert_eq!(was_refused, name == "first", "{name} shape");
        if was_refused {
            let err = Db::open(&dir, options()).err().unwrap().to_string();
            assert!(
                err.contains("MANIFEST") && err.contains(".log") && err.contains("does not list"),
                "{err}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!("{trials} zeroed manifest sectors, {refused} refused as corruption");
    assert!(refused > 0);
}
