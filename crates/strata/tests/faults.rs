//! Defects found by driving the engine through a failing or lying storage
//! (issue 9), one test each, on the simulated storage (`strata::io::sim`):
//! each claim failed on the code before its fix.
//!
//! - a synced write is never acknowledged when the freeze that was to make
//!   its log durable failed (group commit racing a failed freeze);
//! - a value read corrupted from an unflushed log is read again, never
//!   returned, and never copied into a delta layer by the flush;
//! - after a failed freeze no read returns bytes that were never written;
//! - a failed synced write says whether its batch may be applied;
//! - a damaged log is an error naming it, never a silent gap or a deleted
//!   log; a one-off error in a flush is retried; a snapshot does not keep
//!   the directory locked.

use std::panic::{RefUnwindSafe, UnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use strata::io::sim::{CorruptionKind, Fault, FaultError, ReadCorruption, SimStorage};
use strata::io::{
    BlockFile, EntryKind, FileClass, FileOptions, IoMode, IoStats, ReadRequest, Storage,
    StorageFile, StorageLock,
};
use strata::{Db, Error, Options, WriteOptions};

const DIR: &str = "/db";

fn options(storage: Arc<dyn Storage>) -> Options {
    Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        writer_buffer_bytes: 8192,
        delta_block_bytes: 1024,
        background_flush: false,
        storage: Some(storage),
        ..Options::default()
    }
}

/// The simulated files named `*.{ext}`, in name (= id) order.
fn files_with_ext(sim: &SimStorage, ext: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = sim
        .file_paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

fn value(i: u32, len: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(len, (i % 251) as u8 + 1);
    v
}

// ---- a storage whose log syncs can be held, then failed --------------------

/// Holds the next fdatasync of a log file until released, then fails it
/// with EIO: lets a test line up a group-commit leader behind a freeze that
/// is about to fail.
#[derive(Default)]
struct Gate {
    armed: AtomicBool,
    state: Mutex<(bool, bool)>, // (a sync is waiting, released)
    cv: Condvar,
}

impl Gate {
    fn wait_until_held(&self) {
        let mut st = self.state.lock().unwrap();
        while !st.0 {
            st = self.cv.wait(st).unwrap();
        }
    }

    fn release(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}

#[derive(Debug)]
struct Gated {
    inner: SimStorage,
    gate: Arc<GateRef>,
}

/// `Gate` behind a `Debug` the storage traits ask for.
struct GateRef(Gate);

impl std::fmt::Debug for GateRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

impl UnwindSafe for Gated {}
impl RefUnwindSafe for Gated {}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn StorageFile>,
    gate: Arc<GateRef>,
}

impl BlockFile for GatedFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> strata::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> strata::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn sync_data(&self) -> strata::Result<()> {
        let gate = &self.gate.0;
        if self.inner.class() == FileClass::Log && gate.armed.swap(false, Ordering::AcqRel) {
            let mut st = gate.state.lock().unwrap();
            st.0 = true;
            gate.cv.notify_all();
            while !st.1 {
                st = gate.cv.wait(st).unwrap();
            }
            return Err(Error::io(
                self.inner.path(),
                "fdatasync",
                std::io::Error::from_raw_os_error(libc_eio()),
            ));
        }
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> strata::Result<()> {
        self.inner.set_len(len)
    }
    fn alignment(&self) -> usize {
        self.inner.alignment()
    }
    fn direct_writes(&self) -> bool {
        self.inner.direct_writes()
    }
}

fn libc_eio() -> i32 {
    5
}

impl StorageFile for GatedFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn mode(&self) -> IoMode {
        self.inner.mode()
    }
    fn class(&self) -> FileClass {
        self.inner.class()
    }
    fn len(&self) -> strata::Result<u64> {
        self.inner.len()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn forget_cached(&self, offset: u64, len: u64) {
        self.inner.forget_cached(offset, len)
    }
}

impl Gated {
    fn wrap(&self, f: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(GatedFile {
            inner: f,
            gate: Arc::clone(&self.gate),
        })
    }
}

impl Storage for Gated {
    fn create(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> strata::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.create(path, opts, stats)?))
    }
    fn open(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> strata::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.open(path, opts, stats)?))
    }
    fn read_batch(&self, reqs: &[ReadRequest<'_>]) -> strata::Result<Vec<Vec<u8>>> {
        reqs.iter()
            .map(|&(file, offset, len)| file.read_range(offset, len))
            .collect()
    }
    fn entry_kind(&self, path: &Path) -> strata::Result<Option<EntryKind>> {
        self.inner.entry_kind(path)
    }
    fn list_dir(&self, dir: &Path) -> strata::Result<Vec<std::ffi::OsString>> {
        self.inner.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> strata::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn remove_file(&self, path: &Path) -> strata::Result<()> {
        self.inner.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> strata::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> strata::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> strata::Result<StorageLock> {
        self.inner.lock(path)
    }
}

#[test]
fn a_sync_racing_a_failed_freeze_is_not_acknowledged() {
    // Writer A freezes the open layer and its log fdatasync fails; leader B
    // of a group commit is already past the poison check and waits for the
    // write lock. Before the fix, B found the layer frozen, assumed the
    // freeze had made it durable and acknowledged the sync: a synced write
    // lost at the next power loss.
    for round in 0..3 {
        let sim = SimStorage::new(round);
        let gate = Arc::new(GateRef(Gate::default()));
        let storage = Arc::new(Gated {
            inner: sim.clone(),
            gate: Arc::clone(&gate),
        });
        let db = Arc::new(Db::open(DIR, options(storage)).unwrap());
        db.put(b"k", value(1, 300), WriteOptions { sync: false })
            .unwrap();
        gate.0.armed.store(true, Ordering::Release);
        let freezer = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || db.freeze())
        };
        gate.0.wait_until_held();
        let syncer = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || db.sync())
        };
        // Let the syncer get past its checks and queue on the write lock.
        std::thread::sleep(Duration::from_millis(200));
        gate.0.release();
        assert!(freezer.join().unwrap().is_err(), "the freeze failed");
        let synced = syncer.join().unwrap();
        assert!(
            synced.is_err(),
            "round {round}: sync acknowledged a log whose freeze failed"
        );
    }
}

// ---- values rotted in a log ---------------------------------------------------

fn wrong_value_seen(result: &strata::Result<Option<Vec<u8>>>, want: &[u8]) -> bool {
    matches!(result, Ok(Some(v)) if v != want) || matches!(result, Ok(None))
}

#[test]
fn a_value_read_corrupted_from_an_unflushed_log_is_read_again_never_returned() {
    for kind in [
        CorruptionKind::BitFlip,
        CorruptionKind::ZeroSector,
        CorruptionKind::Misdirected,
    ] {
        let mut read_again = 0;
        for seed in 1..=12 {
            let sim = SimStorage::new(seed);
            let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
            for i in 0..20 {
                db.put(format!("k{i}"), value(i, 600), WriteOptions { sync: true })
                    .unwrap();
            }
            db.close().unwrap();
            let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
            sim.set_read_corruption(ReadCorruption {
                at_read: Some(sim.reads() + 1),
                one_in_reads: None,
                kind: Some(kind),
            });
            let i = (seed as u32 * 7) % 20;
            let got = db.get(format!("k{i}"));
            assert!(
                !wrong_value_seen(&got, &value(i, 600)),
                "{kind:?} seed {seed}: get returned a wrong value: {:?}",
                got.as_ref().map(|v| v.as_ref().map(|v| v.len()))
            );
            // The rot was in one read only: the read made again is right.
            assert_eq!(got.unwrap(), Some(value(i, 600)), "{kind:?} seed {seed}");
            read_again += db.stats().read_retries;
            assert_eq!(db.get(format!("k{i}")).unwrap(), Some(value(i, 600)));
        }
        assert!(read_again > 0, "{kind:?}: no corrupted read was noticed");
    }
}

#[test]
fn the_flush_never_copies_a_rotted_log_into_a_delta_layer() {
    // The flush reads its log back (as it does a log that outgrew its
    // memory, or one replayed at open): no log is kept in memory.
    let options = |storage| Options {
        log_memory_bytes: 0,
        ..options(storage)
    };
    for seed in 1..=12 {
        let sim = SimStorage::new(seed);
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        for i in 0..10 {
            db.put(format!("k{i}"), value(i, 3000), WriteOptions { sync: true })
                .unwrap();
        }
        db.freeze().unwrap();
        // The flush reads the frozen log whole: that read comes back rotted.
        sim.set_read_corruption(ReadCorruption {
            at_read: Some(sim.reads() + 1),
            one_in_reads: None,
            kind: Some(CorruptionKind::BitFlip),
        });
        // The flush finds the damage, and reads the log again (a read that
        // came back wrong is not the log): it passes, with the right bytes.
        db.flush().unwrap();
        assert_eq!(db.stats().frozen_layers, 0);
        for i in 0..10 {
            assert_eq!(db.get(format!("k{i}")).unwrap(), Some(value(i, 3000)));
        }
        drop(db);
        // And the delta layer it wrote holds them (no log is left to read).
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        for i in 0..10 {
            assert_eq!(db.get(format!("k{i}")).unwrap(), Some(value(i, 3000)));
        }
        drop(db);
        // A log rotted on the disk fails every try: the flush refuses it,
        // and so does the next open.
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        for i in 0..10 {
            db.put(format!("r{i}"), value(i, 3000), WriteOptions { sync: true })
                .unwrap();
        }
        db.freeze().unwrap();
        let log = files_with_ext(&sim, "log").remove(0);
        assert!(sim.rot(&log, |b| b[700] ^= 0x40));
        let err = db.flush().unwrap_err();
        assert!(err.is_corruption(), "seed {seed}: {err}");
        drop(db);
        let err = Db::open(DIR, options(Arc::new(sim.clone()))).err().unwrap();
        assert!(err.is_corruption() && err.to_string().contains(&*log.to_string_lossy()));
    }
}

#[test]
fn a_one_off_io_error_in_a_flush_is_retried_not_fatal() {
    let total = {
        let sim = SimStorage::new(5);
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        for i in 0..20 {
            db.put(format!("k{i}"), value(i, 2000), WriteOptions::default())
                .unwrap();
        }
        db.freeze().unwrap();
        let before = sim.ops();
        db.flush().unwrap();
        (before, sim.ops())
    };
    // Every operation of the flush, failed once in turn.
    for n in total.0 + 1..=total.1 {
        let sim = SimStorage::new(5);
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        for i in 0..20 {
            db.put(format!("k{i}"), value(i, 2000), WriteOptions::default())
                .unwrap();
        }
        db.freeze().unwrap();
        assert_eq!(sim.ops(), total.0);
        sim.inject(Fault::once(n, FaultError::Eio));
        db.flush()
            .unwrap_or_else(|e| panic!("op {n}: a one-off error failed the flush: {e}"));
        db.put(b"after", b"x", WriteOptions { sync: true }).unwrap();
        for i in 0..20 {
            assert_eq!(db.get(format!("k{i}")).unwrap(), Some(value(i, 2000)));
        }
        drop(db);
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        assert_eq!(
            db.stats().delta_layers,
            1,
            "op {n}: one delta, no leftovers"
        );
        assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"x"[..]));
        let deltas = files_with_ext(&sim, "delta").len();
        assert_eq!(deltas, 1, "op {n}: a failed attempt left a delta file");
    }
}

#[test]
fn a_snapshot_does_not_keep_the_directory_locked() {
    let sim = SimStorage::new(3);
    let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
    db.put(b"k", b"v1", WriteOptions { sync: true }).unwrap();
    let snap = db.snapshot();
    assert!(Db::open(DIR, options(Arc::new(sim.clone()))).is_err());
    drop(db);
    let db = Db::open(DIR, options(Arc::new(sim.clone())))
        .expect("the directory is free once its Db is dropped");
    db.put(b"k", b"v2", WriteOptions { sync: true }).unwrap();
    assert_eq!(snap.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
}

// ---- failed freezes and failed synced writes ----------------------------------

#[test]
fn after_a_failed_freeze_no_read_returns_bytes_never_written() {
    // Fail each operation of a freeze in turn; afterwards every read is the
    // value written or an error.
    for k in 1..=8 {
        let sim = SimStorage::new(k);
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        for i in 0..40 {
            db.put(format!("k{i}"), value(i, 500), WriteOptions { sync: false })
                .unwrap();
        }
        sim.inject(Fault::once(sim.ops() + k, FaultError::Eio));
        let _ = db.freeze();
        for i in 0..40 {
            let got = db.get(format!("k{i}"));
            assert!(
                !wrong_value_seen(&got, &value(i, 500)),
                "fault at freeze op {k}: key {i} read wrong"
            );
        }
    }
}

#[test]
fn a_failed_synced_write_says_whether_it_may_be_applied() {
    // Fail each operation of a synced write in turn. The error is either
    // NotDurable (applied, maybe durable: after a power loss the batch is
    // there or not, whole) or the batch is absent.
    let ops_per_write = {
        let sim = SimStorage::new(0);
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        let before = sim.ops();
        db.put(b"x", value(0, 700), WriteOptions { sync: true })
            .unwrap();
        sim.ops() - before
    };
    assert!(ops_per_write >= 2);
    for k in 1..=ops_per_write {
        let sim = SimStorage::new(k);
        let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
        db.put(b"a", value(1, 700), WriteOptions { sync: true })
            .unwrap();
        sim.inject(Fault::once(sim.ops() + k, FaultError::Eio));
        let result = db.put(b"b", value(2, 700), WriteOptions { sync: true });
        let lsn = match result {
            Ok(_) => None,
            Err(Error::NotDurable { lsn, .. }) => Some(lsn),
            Err(e) => panic!("fault at op {k}: a synced write failed with {e}, not NotDurable"),
        };
        drop(db);
        let after = sim.power_loss();
        let db = Db::open(DIR, options(Arc::new(after))).unwrap();
        assert_eq!(db.get(b"a").unwrap(), Some(value(1, 700)), "op {k}");
        match (lsn, db.get(b"b").unwrap()) {
            (None, got) => assert_eq!(got, Some(value(2, 700)), "op {k}: acknowledged, lost"),
            (Some(lsn), Some(v)) => {
                assert_eq!(v, value(2, 700));
                assert!(db.last_lsn() >= lsn);
            }
            (Some(lsn), None) => assert!(db.last_lsn() < lsn, "op {k}"),
        }
    }
}

// ---- damaged logs: a torn tail is dropped, corruption is an error ----------

/// A database with two logs after a power loss: the older frozen after 15
/// synced writes (and claimed by the newer one's header), the newer with
/// the rest of `writes`, each synced.
fn two_logs_after_power_loss(seed: u64, writes: u32) -> (SimStorage, Vec<std::path::PathBuf>) {
    let sim = SimStorage::new(seed);
    let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
    for i in 0..writes {
        db.put(format!("k{i}"), value(i, 300), WriteOptions { sync: true })
            .unwrap();
        if i == 14 {
            db.freeze().unwrap();
        }
    }
    let after = sim.power_loss();
    drop(db);
    let logs = files_with_ext(&after, "log");
    assert_eq!(logs.len(), 2);
    (after, logs)
}

#[test]
fn a_log_cut_short_below_its_successors_claim_is_corruption_not_a_gap() {
    let (sim, logs) = two_logs_after_power_loss(1, 30);
    // The older log loses its last sectors (zeros, as a torn write would
    // leave them): but the newer log says it was sealed further on.
    let len = sim.file_bytes(&logs[0]).unwrap().len();
    sim.rot(&logs[0], |b| b[len - 1024..].fill(0));
    let err = Db::open(DIR, options(Arc::new(sim.clone()))).err().unwrap();
    assert!(
        err.is_corruption() && err.to_string().contains(&*logs[0].to_string_lossy()),
        "{err}"
    );
    assert!(
        sim.file_bytes(&logs[0]).is_some(),
        "the damaged log is kept"
    );
}

#[test]
fn a_log_whose_first_record_is_damaged_is_an_error_and_kept() {
    // The newest log holds one synced record, which no later record claims:
    // a flipped bit in it (header or payload) is not a torn write.
    for at in [64 + 5, 64 + 32 + 40, 64 + 300] {
        let (sim, logs) = two_logs_after_power_loss(2, 16);
        let newest = &logs[1];
        sim.rot(newest, |b| b[at] ^= 1);
        let err = Db::open(DIR, options(Arc::new(sim.clone()))).err();
        let err = err.unwrap_or_else(|| panic!("flip at {at}: opened"));
        assert!(err.is_corruption(), "flip at {at}: {err}");
        assert!(
            sim.file_bytes(newest).is_some(),
            "flip at {at}: the log was deleted"
        );
    }
}

#[test]
fn a_damaged_last_record_after_a_close_is_an_error_not_a_torn_tail() {
    let sim = SimStorage::new(4);
    let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
    for i in 0..5 {
        db.put(format!("k{i}"), value(i, 300), WriteOptions { sync: true })
            .unwrap();
    }
    db.close().unwrap();
    let log = files_with_ext(&sim, "log").pop().unwrap();
    let bytes = sim.file_bytes(&log).unwrap();
    // The last record's sector, zeroed: a torn write would look the same,
    // but the close sealed the log after its sync.
    let last = (0..bytes.len() - 32)
        .step_by(512)
        .rfind(|&at| bytes[at + 8..at + 16] == 5u64.to_le_bytes())
        .expect("the record of LSN 5 starts a sector");
    sim.rot(&log, |b| b[last..last + 512].fill(0));
    let err = Db::open(DIR, options(Arc::new(sim.clone()))).err().unwrap();
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn a_flush_that_fails_for_good_poisons_nothing_and_passes_once_the_fault_clears() {
    let sim = SimStorage::new(11);
    let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
    for i in 0..10 {
        db.put(format!("k{i}"), value(i, 3000), WriteOptions { sync: true })
            .unwrap();
    }
    db.freeze().unwrap();
    // The disk is full from here: every try of the flush fails.
    sim.inject(Fault::from_op(sim.ops() + 1, FaultError::Enospc));
    let err = db.flush().expect_err("a flush onto a full disk");
    assert!(!matches!(err, Error::Poisoned(_)), "{err}");
    // Space comes back: nothing was poisoned, writes and the flush go on.
    sim.clear_faults();
    db.put(b"after", b"x", WriteOptions { sync: true })
        .expect("a write after a failed flush");
    db.flush().expect("the flush once the disk has room");
    assert_eq!(db.stats().frozen_layers, 0);
    for i in 0..10 {
        assert_eq!(db.get(format!("k{i}")).unwrap(), Some(value(i, 3000)));
    }
    drop(db);
    let db = Db::open(DIR, options(Arc::new(sim.clone()))).unwrap();
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"x"[..]));
    for i in 0..10 {
        assert_eq!(db.get(format!("k{i}")).unwrap(), Some(value(i, 3000)));
    }
    assert_eq!(
        files_with_ext(&sim, "delta").len(),
        db.stats().delta_layers,
        "a failed try left a delta file behind"
    );
}

#[test]
fn a_background_flush_that_keeps_failing_refuses_writes_past_the_backlog() {
    let sim = SimStorage::new(12);
    // The flush reads its log back (no log is kept in memory), so a log
    // rotted on the disk fails it.
    let opts = Options {
        background_flush: true,
        frozen_layers_max: 1,
        log_memory_bytes: 0,
        ..options(Arc::new(sim.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    for i in 0..10 {
        db.put(format!("r{i}"), value(i, 3000), WriteOptions { sync: true })
            .unwrap();
    }
    // The log rots on the disk before it is frozen: its flush fails every try.
    let log = files_with_ext(&sim, "log").remove(0);
    assert!(sim.rot(&log, |b| b[700] ^= 0x40));
    db.freeze().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let error = loop {
        if let Some(e) = db.stats().flush_error {
            break e;
        }
        assert!(std::time::Instant::now() < deadline, "no flush error");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(error.contains(&*log.to_string_lossy()), "{error}");
    // Writes go on into the open layer while one frozen layer waits...
    db.put(b"s", b"1", WriteOptions { sync: true })
        .expect("a write within the backlog");
    // ...and past the backlog they are refused, not left waiting.
    db.freeze().unwrap();
    let err = db
        .put(b"t", b"2", WriteOptions { sync: true })
        .expect_err("a write past the backlog");
    assert!(
        matches!(err, Error::FlushBacklog { frozen: 2, .. }),
        "{err}"
    );
    // Nothing is poisoned: what was written reads back.
    assert_eq!(db.get(b"s").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"t").unwrap(), None);
    assert!(db.stats().flush_error.is_some());
}

#[test]
fn a_background_compaction_that_keeps_failing_poisons_nothing() {
    let sim = SimStorage::new(13);
    let opts = Options {
        background_flush: true,
        l0_compaction_trigger: 2,
        l0_slowdown_layers: 3,
        l0_stop_layers: 4,
        ..options(Arc::new(sim.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    for i in 0..10 {
        db.put(format!("a{i}"), value(i, 3000), WriteOptions::default())
            .unwrap();
    }
    db.flush().unwrap();
    // The first L0 layer rots on the disk: every merge of it fails.
    let delta = files_with_ext(&sim, "delta").remove(0);
    assert!(sim.rot(&delta, |b| b[100] ^= 0x40));
    for i in 0..10 {
        db.put(format!("b{i}"), value(i, 3000), WriteOptions::default())
            .unwrap();
    }
    db.flush().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let error = loop {
        if let Some(e) = db.stats().compaction_error {
            break e;
        }
        assert!(std::time::Instant::now() < deadline, "no compaction error");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(error.contains(&*delta.to_string_lossy()), "{error}");
    // Nothing changed and nothing is poisoned: writes and reads go on.
    assert_eq!(db.stats().l0_layers, 2);
    db.put(b"after", b"x", WriteOptions { sync: true })
        .expect("a write while compaction fails");
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(db.get("b3").unwrap(), Some(value(3, 3000)));
    assert_eq!(db.stats().compactions, 0);
    // L0 grows to its stop count (each flush adds a layer)...
    for layer in 0..2 {
        db.put(format!("c{layer}"), b"y", WriteOptions::default())
            .expect("a write below the stop count");
        db.flush().unwrap();
    }
    assert_eq!(db.stats().l0_layers, 4);
    // ...and there the next write is refused, not left waiting, and
    // changes nothing.
    let last = db.last_lsn();
    let err = db
        .put(b"refused", b"z", WriteOptions { sync: true })
        .expect_err("a write at the L0 stop count while compaction fails");
    assert!(
        matches!(err, Error::CompactionBacklog { l0: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&*delta.to_string_lossy()), "{err}");
    assert_eq!(db.last_lsn(), last);
    assert_eq!(db.get(b"refused").unwrap(), None);
    assert_eq!(db.get("c1").unwrap().as_deref(), Some(&b"y"[..]));
}
