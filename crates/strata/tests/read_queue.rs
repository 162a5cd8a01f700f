//! The read queue (`Db::read_queue`): gets submitted now and reaped as they
//! complete. Every get answers what `Db::get` answers, from every kind of
//! layer and value; the depth bounds what is outstanding; cancelled gets
//! come back cancelled (or answered, if they were done), never lost; a
//! read's error or a failed check ends its get alone. On real files (a
//! temp dir on the project's disk: O_DIRECT and io_uring with registered
//! buffers), and on the simulated storage with faults.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use strata::io::sim::{CorruptionKind, Fault, FaultError, ReadCorruption, SimStorage};
use strata::io::IoMode;
use strata::{
    Db, Error, InvalidInput, Options, ReadCompletion, ReadQueue, WriteBatch, WriteOptions,
};

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// A value of `len` bytes that says which key and round it is.
fn value(i: u32, round: u32, len: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    v.extend((0..len).map(|j| (i as u8) ^ (round as u8).wrapping_add(j as u8)));
    v.truncate(len.max(12));
    v
}

fn opts() -> Options {
    Options {
        background_flush: false,
        l0_compaction_trigger: 0,
        // Small blocks: many distinct block reads.
        delta_block_bytes: 1024,
        ..Options::default()
    }
}

/// Without a block cache: every block a get needs is a read in the ring.
fn uncached() -> Options {
    Options {
        block_cache_bytes: 0,
        ..opts()
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Reaps everything outstanding; the completions by tag (each tag once).
fn reap_all(q: &mut ReadQueue) -> HashMap<u64, strata::Result<Option<Vec<u8>>>> {
    let mut out = Vec::new();
    while q.outstanding() > 0 {
        let n = q.reap(1, usize::MAX, &mut out).unwrap();
        assert!(n >= 1, "reap(min 1) moved nothing");
    }
    let mut by_tag = HashMap::new();
    for ReadCompletion { tag, result } in out {
        assert!(
            by_tag.insert(tag, result).is_none(),
            "tag {tag} reaped twice"
        );
    }
    by_tag
}

/// A database whose keys live in every kind of place: an L1 run and an
/// image, L0 layers, a frozen layer, the open layer; small values, large
/// values (pointers into value files), deletes, and keys never written.
/// Returns the model (key index → value, None: deleted).
fn layered(db: &Db) -> BTreeMap<u32, Option<Vec<u8>>> {
    let mut model = BTreeMap::new();
    let write = |range: std::ops::Range<u32>, round: u32, model: &mut BTreeMap<_, _>| {
        let mut b = WriteBatch::new();
        for i in range {
            let len = if i % 5 == 0 { 6000 } else { 100 };
            if (i + round).is_multiple_of(11) {
                b.delete(key(i));
                model.insert(i, None);
            } else {
                let v = value(i, round, len);
                b.put(key(i), &v);
                model.insert(i, Some(v));
            }
        }
        db.write(&b, WriteOptions::default()).unwrap();
    };
    write(0..600, 0, &mut model);
    db.flush().unwrap();
    db.compact().unwrap(); // an L1 run
    write(100..300, 1, &mut model);
    db.flush().unwrap();
    write(250..400, 2, &mut model);
    db.flush().unwrap(); // two L0 layers
    write(380..450, 3, &mut model);
    db.freeze().unwrap(); // a frozen layer
    write(440..470, 4, &mut model); // the open layer
    model
}

fn check_all(db: &Db, q: &mut ReadQueue, model: &BTreeMap<u32, Option<Vec<u8>>>, upto: u32) {
    let mut submitted = 0;
    let mut got = HashMap::new();
    for i in 0..upto {
        if q.outstanding() == q.depth() {
            got.extend(reap_all(q));
        }
        q.submit(u64::from(i), &key(i)).unwrap();
        submitted += 1;
    }
    got.extend(reap_all(q));
    assert_eq!(got.len(), submitted);
    for i in 0..upto {
        let want = model.get(&i).cloned().flatten();
        let answer = got.remove(&u64::from(i)).unwrap().unwrap();
        assert_eq!(answer, want, "key {i}");
        assert_eq!(answer, db.get(key(i)).unwrap(), "key {i} against get");
    }
}

#[test]
fn every_get_answers_what_get_answers_from_every_layer() {
    let dir = tmp();
    let db = Db::open(dir.path(), opts()).unwrap();
    let model = layered(&db);
    for depth in [1, 7, 64] {
        let mut q = db.read_queue(depth).unwrap();
        assert_eq!(q.engine(), "io_uring, registered buffers");
        check_all(&db, &mut q, &model, 700);
    }
    // Without a block cache every block is a read in the ring.
    drop(db);
    let db = Db::open(dir.path(), uncached()).unwrap();
    let reads = db.stats().point_lookup_reads;
    let mut q = db.read_queue(32).unwrap();
    check_all(&db, &mut q, &model, 700);
    assert!(db.stats().point_lookup_reads > reads);
}

#[test]
fn a_get_at_an_lsn_sees_that_lsn() {
    let dir = tmp();
    let db = Db::open(dir.path(), opts()).unwrap();
    let first = db.put(key(1), b"one", WriteOptions::default()).unwrap();
    db.flush().unwrap();
    db.put(key(1), b"two", WriteOptions::default()).unwrap();
    db.flush().unwrap();
    let mut q = db.read_queue(4).unwrap();
    q.submit_at(1, &key(1), first).unwrap();
    q.submit(2, &key(1)).unwrap();
    q.submit_at(3, &key(1), first - 1).unwrap();
    let got = reap_all(&mut q);
    assert_eq!(got[&1].as_ref().unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(got[&2].as_ref().unwrap().as_deref(), Some(&b"two"[..]));
    assert_eq!(got[&3].as_ref().unwrap().as_deref(), None);
}

#[test]
fn the_depth_bounds_what_is_outstanding_and_bad_input_is_refused() {
    let dir = tmp();
    let db = Db::open(dir.path(), opts()).unwrap();
    let model = layered(&db);
    assert!(matches!(
        db.read_queue(0),
        Err(Error::InvalidInput(InvalidInput::OptionOutOfRange { .. }))
    ));
    assert!(db.read_queue(4097).is_err());
    let mut q = db.read_queue(3).unwrap();
    for i in 0..3 {
        q.submit(i, &key(i as u32)).unwrap();
    }
    assert!(matches!(
        q.submit(9, &key(9)),
        Err(Error::InvalidInput(InvalidInput::QueueFull { depth: 3 }))
    ));
    assert!(matches!(
        q.submit(9, b""),
        Err(Error::InvalidInput(InvalidInput::QueueFull { .. }))
    ));
    let mut out = Vec::new();
    // At most `max`, at least `min`.
    assert_eq!(q.reap(1, 1, &mut out).unwrap(), 1);
    assert!(matches!(
        q.submit(9, b""),
        Err(Error::InvalidInput(InvalidInput::KeyEmpty { .. }))
    ));
    assert!(matches!(
        q.submit(9, &vec![b'k'; 5000]),
        Err(Error::InvalidInput(InvalidInput::KeyTooLong { .. }))
    ));
    // Asking for more than is outstanding waits for what there is.
    assert_eq!(q.reap(10, 10, &mut out).unwrap(), 2);
    assert_eq!(q.outstanding(), 0);
    assert_eq!(q.reap(1, 10, &mut out).unwrap(), 0);
    for c in out {
        assert_eq!(c.result.unwrap(), model[&(c.tag as u32)], "key {}", c.tag);
    }
}

#[test]
fn cancelled_gets_come_back_cancelled_or_answered_and_the_queue_goes_on() {
    let dir = tmp();
    let db = Db::open(dir.path(), uncached()).unwrap();
    let model = layered(&db);
    let mut q = db.read_queue(64).unwrap();
    for round in 0..5u32 {
        for i in 0..64u32 {
            q.submit(u64::from(i), &key(i * 7 + round)).unwrap();
        }
        q.commit().unwrap();
        let cancelled = if round % 2 == 0 {
            q.cancel_all()
        } else {
            q.cancel(3) + q.cancel(5)
        };
        let got = reap_all(&mut q);
        assert_eq!(got.len(), 64);
        let mut seen_cancelled = 0;
        for (tag, result) in got {
            let i = tag as u32 * 7 + round;
            match result {
                Err(Error::Cancelled) => seen_cancelled += 1,
                Ok(v) => assert_eq!(v, model.get(&i).cloned().flatten(), "key {i}"),
                Err(e) => panic!("key {i}: {e}"),
            }
        }
        assert_eq!(seen_cancelled, cancelled);
        if round == 0 {
            assert!(cancelled > 0, "every read had completed before the cancel");
        }
    }
    // A queue dropped with reads in flight waits for them.
    for i in 0..64u32 {
        q.submit(u64::from(i), &key(i * 3)).unwrap();
    }
    q.commit().unwrap();
    drop(q);
    let mut q = db.read_queue(8).unwrap();
    check_all(&db, &mut q, &model, 100);
}

/// The layer files of `dir`, oldest first.
fn layer_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "delta"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_damaged_or_truncated_file_fails_its_gets_alone_naming_the_file() {
    let dir = tmp();
    let options = Options {
        block_cache_bytes: 0,
        large_value_bytes: 0,
        ..opts()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    // Two layer files with disjoint keys.
    for layer in 0..2u32 {
        let mut b = WriteBatch::new();
        for i in layer * 300..(layer + 1) * 300 {
            b.put(key(i), value(i, 0, 100));
        }
        db.write(&b, WriteOptions::default()).unwrap();
        db.flush().unwrap();
    }
    drop(db);
    let files = layer_files(dir.path());
    assert_eq!(files.len(), 2);
    // Rot in the middle of the older file's data: its block fails its
    // check twice (the second reading stands).
    let damaged = &files[0];
    let mut bytes = std::fs::read(damaged).unwrap();
    for b in &mut bytes[2000..2100] {
        *b ^= 0x5a;
    }
    std::fs::write(damaged, &bytes).unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    let mut q = db.read_queue(16).unwrap();
    let mut failed = 0;
    for i in 0..600u32 {
        if q.outstanding() == q.depth() {
            for (tag, result) in reap_all(&mut q) {
                failed += usize::from(check_damaged(tag as u32, result, damaged));
            }
        }
        q.submit(u64::from(i), &key(i)).unwrap();
    }
    for (tag, result) in reap_all(&mut q) {
        failed += usize::from(check_damaged(tag as u32, result, damaged));
    }
    assert!(failed > 0, "no get read the damaged block");
    assert!(db.stats().read_retries > 0);

    // The newer file cut short under the open database: the gets of its
    // last blocks fail (the end of the file), the others answer.
    let cut = &files[1];
    let len = std::fs::metadata(cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(cut)
        .unwrap()
        .set_len(len / 3 / 4096 * 4096)
        .unwrap();
    let (mut errors, mut answered) = (0, 0);
    let mut tally = |got: HashMap<u64, strata::Result<Option<Vec<u8>>>>| {
        for (tag, result) in got {
            match result {
                Ok(v) => {
                    assert_eq!(v, Some(value(tag as u32, 0, 100)));
                    answered += 1;
                }
                Err(e) => {
                    assert!(e.to_string().contains(&cut.display().to_string()), "{e}");
                    errors += 1;
                }
            }
        }
    };
    for i in 300..600u32 {
        if q.outstanding() == q.depth() {
            tally(reap_all(&mut q));
        }
        q.submit(u64::from(i), &key(i)).unwrap();
    }
    tally(reap_all(&mut q));
    assert!(
        errors > 0 && answered > 0,
        "{errors} errors, {answered} answered"
    );
}

/// A get of the database with a damaged older file: its own value, or a
/// corruption error naming the damaged file. True when it failed.
fn check_damaged(
    i: u32,
    result: strata::Result<Option<Vec<u8>>>,
    damaged: &std::path::Path,
) -> bool {
    match result {
        Ok(v) => {
            assert_eq!(v, Some(value(i, 0, 100)), "key {i}");
            false
        }
        Err(e) => {
            assert!(e.is_corruption(), "key {i}: {e}");
            assert!(
                e.to_string().contains(&damaged.display().to_string()),
                "{e}"
            );
            assert!(i < 300, "key {i} is not in the damaged file");
            true
        }
    }
}

/// The simulated storage: a read corrupted once answers right after one
/// retry; a read that fails ends its own get alone; nothing answers wrong.
#[test]
fn on_a_failing_storage_a_get_fails_alone_and_never_answers_wrong() {
    let sim = SimStorage::new(7);
    let options = Options {
        io_mode: IoMode::Buffered,
        fallback_to_buffered: false,
        block_cache_bytes: 0,
        storage: Some(Arc::new(sim.clone())),
        ..opts()
    };
    let db = Db::open("/db", options).unwrap();
    let model = layered(&db);
    let mut q = db.read_queue(16).unwrap();
    assert_eq!(q.engine(), "sync");
    let mut failed = 0;
    for n in 1..40u64 {
        let kind = [
            CorruptionKind::BitFlip,
            CorruptionKind::ZeroSector,
            CorruptionKind::Misdirected,
        ][n as usize % 3];
        sim.set_read_corruption(ReadCorruption {
            at_read: Some(sim.reads() + n % 7 + 1),
            one_in_reads: None,
            kind: Some(kind),
        });
        sim.inject(Fault::once(sim.ops() + n % 5 + 1, FaultError::Eio));
        let start = (n as u32 * 37) % 400;
        for i in start..start + 16 {
            q.submit(u64::from(i), &key(i)).unwrap();
        }
        let mut errors = 0;
        for (tag, result) in reap_all(&mut q) {
            match result {
                Ok(v) => assert_eq!(v, model.get(&(tag as u32)).cloned().flatten(), "key {tag}"),
                Err(Error::Io { .. }) => errors += 1,
                Err(e) => panic!("key {tag}: {e}"),
            }
        }
        assert!(errors <= 1, "one injected error failed {errors} gets");
        failed += errors;
        sim.clear_faults();
    }
    assert!(failed > 0, "no injected error reached a get");
    assert!(db.stats().read_retries > 0);
}

/// A database without a block cache holding keys `0..n`, each with a
/// value of 6,000 bytes (in a value file: a get of one is a read in the
/// ring), flushed.
fn large_values(n: u32) -> (tempfile::TempDir, Db) {
    let dir = tmp();
    let db = Db::open(dir.path(), uncached()).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..n {
        b.put(key(i), value(i, 0, 6000));
    }
    db.write(&b, WriteOptions::default()).unwrap();
    db.flush().unwrap();
    (dir, db)
}

/// `reap_with` lends each value (read from a value file into the ring's
/// buffer, checked there) to its callback once; with a small `max` the
/// values read beyond it wait, copied, for the next reap; every get is
/// handed exactly once with what `get` answers.
#[test]
fn reap_with_lends_each_value_once_and_keeps_what_is_over_max() {
    let (_dir, db) = large_values(200);
    let mut q = db.read_queue(32).unwrap();
    let mut got: HashMap<u64, Option<Vec<u8>>> = HashMap::new();
    let mut next = 0u32;
    // Keys past 200 were never written: `None`, answered at submit or by
    // the block read alone.
    while next < 260 || q.outstanding() > 0 {
        while next < 260 && q.outstanding() < q.depth() {
            q.submit(u64::from(next), &key(next)).unwrap();
            next += 1;
        }
        let max = 1 + (next as usize % 3);
        let mut handed = 0;
        let moved = q
            .reap_with(1, max, &mut |tag, result| {
                handed += 1;
                let value = result.unwrap().map(<[u8]>::to_vec);
                assert!(got.insert(tag, value).is_none(), "tag {tag} handed twice");
            })
            .unwrap();
        assert_eq!(moved, handed);
        assert!((1..=max).contains(&moved), "moved {moved}, max {max}");
    }
    assert_eq!(got.len(), 260);
    for i in 0..260u32 {
        let want = (i < 200).then(|| value(i, 0, 6000));
        assert_eq!(got[&u64::from(i)], want, "key {i}");
    }
}

/// A callback of `reap_with` that panics: the panic reaches the caller,
/// the get it was handed counts as reaped, and every other get is still in
/// the queue, each reaped once with its value (none lost in a slot).
#[test]
fn a_panic_in_reap_with_loses_no_other_get() {
    let (_dir, db) = large_values(32);
    let mut q = db.read_queue(32).unwrap();
    for i in 0..32u32 {
        q.submit(u64::from(i), &key(i)).unwrap();
    }
    let mut got: HashMap<u64, Option<Vec<u8>>> = HashMap::new();
    let mut calls = 0;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        while q.outstanding() > 0 {
            q.reap_with(1, 32, &mut |tag, result| {
                calls += 1;
                if calls == 3 {
                    panic!("the caller's callback panics");
                }
                got.insert(tag, result.unwrap().map(<[u8]>::to_vec));
            })
            .unwrap();
        }
    }));
    assert!(unwound.is_err(), "the panic reached the caller");
    assert_eq!(got.len(), 2);
    for (tag, result) in reap_all(&mut q) {
        assert!(
            got.insert(tag, result.unwrap()).is_none(),
            "tag {tag} twice"
        );
    }
    assert_eq!(got.len(), 31, "every get but the one that panicked");
    for (tag, v) in got {
        assert_eq!(v, Some(value(tag as u32, 0, 6000)), "key {tag}");
    }
}
