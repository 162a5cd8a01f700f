//! A database with a remote store (`Options::remote`): its layers and value
//! files uploaded with an index that lists them, restored into an empty
//! directory when the local one is lost, older writers fenced, and nothing
//! the store acknowledged lost under failing calls or a process that stops
//! at any step of an upload. On the directory store (`DirRemote`), with
//! `FaultyRemote` in front for the faults; `tests/remote.rs` holds the S3
//! store to the same contract against a real server.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use strata::remote::{
    DirRemote, FaultyRemote, ObjectInfo, Payload, PutMode, Remote, RemoteFault, RemoteStore,
};
use strata::{Db, Error, Options, WriteBatch, WriteOptions};

/// A writer of `store` whose replaced objects go as soon as its database
/// lets their files go (`remote_deletion_delay` zero), so that tests see
/// the store hold exactly what its newest index lists.
fn options(store: Arc<dyn RemoteStore>) -> Options {
    Options {
        remote: Some(Remote(store)),
        layer_size_bytes_max: 1 << 20,
        background_flush: false,
        remote_deletion_delay: Duration::ZERO,
        ..Options::default()
    }
}

fn key(round: u32, i: u32) -> Vec<u8> {
    format!("r{round:02}-k{i:06}").into_bytes()
}

/// Values of 100 bytes and, every 7th key, of 5000 (kept in value files).
fn value(round: u32, i: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(7) { 5000 } else { 100 };
    let mut v = format!("round {round} key {i} ").into_bytes();
    v.resize(len, (round * 31 + i) as u8);
    v
}

fn write_round(db: &Db, round: u32, n: u32) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(key(round, i), value(round, i));
        }
        db.write(&b, WriteOptions::default()).unwrap();
    }
}

fn check_round(db: &Db, round: u32, n: u32) {
    for i in 0..n {
        let got = db.get(key(round, i)).unwrap();
        assert!(
            got.as_deref() == Some(&value(round, i)[..]),
            "round {round} key {i}: {}",
            got.map_or("missing".into(), |v| format!(
                "a wrong value of {} bytes",
                v.len()
            ))
        );
    }
}

/// A get through a failing store: true when it returned the key's value,
/// false when it failed with the store's one-line error; anything else (a
/// wrong value, none, another error) fails the test.
fn get_right_or_failed_cleanly(db: &Db, round: u32, i: u32) -> bool {
    match db.get(key(round, i)) {
        Ok(v) => {
            assert_eq!(
                v.as_deref(),
                Some(&value(round, i)[..]),
                "round {round} key {i}"
            );
            true
        }
        Err(e) => {
            let text = e.to_string();
            assert!(
                matches!(e, Error::Remote { .. }) && !text.contains('\n'),
                "round {round} key {i}: {text}"
            );
            false
        }
    }
}

/// A database on the local disk alone (no store), flushed only when told.
fn local_db(dir: &Path) -> Db {
    Db::open(
        dir,
        Options {
            background_flush: false,
            ..Options::default()
        },
    )
    .unwrap()
}

fn dir_store(root: &Path) -> Arc<dyn RemoteStore> {
    Arc::new(DirRemote::open(root).unwrap())
}

#[test]
fn a_database_comes_back_from_its_store_when_the_disk_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let local = tmp.path().join("local");
    {
        let db = Db::open(&local, options(Arc::clone(&store))).unwrap();
        write_round(&db, 0, 3000);
        db.sync_remote().unwrap();
        write_round(&db, 1, 2000);
        db.sync_remote().unwrap();
        let remote = db.stats().remote.unwrap();
        assert_eq!(remote.generation, 1);
        assert_eq!(remote.consistent_lsn, db.stats().last_lsn);
        assert_eq!(remote.backlog_bytes, 0);
        assert!(remote.error.is_none() && !remote.fenced);
        // Written, not synced to the store: may be lost with the disk.
        write_round(&db, 2, 10);
    }
    std::fs::remove_dir_all(&local).unwrap();
    let restored = tmp.path().join("restored");
    let db = Db::open(&restored, options(Arc::clone(&store))).unwrap();
    check_round(&db, 0, 3000);
    check_round(&db, 1, 2000);
    assert_eq!(db.stats().remote.unwrap().generation, 2);
    // It goes on writing, and comes back again.
    write_round(&db, 3, 500);
    db.sync_remote().unwrap();
    drop(db);
    std::fs::remove_dir_all(&restored).unwrap();
    let db = Db::open(tmp.path().join("again"), options(store)).unwrap();
    check_round(&db, 0, 3000);
    check_round(&db, 1, 2000);
    check_round(&db, 3, 500);
}

#[test]
fn a_second_writer_fences_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let first = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    write_round(&first, 0, 1000);
    first.sync_remote().unwrap();
    let second = Db::open(tmp.path().join("b"), options(Arc::clone(&store))).unwrap();
    check_round(&second, 0, 1000);
    write_round(&second, 1, 1000);
    second.sync_remote().unwrap();
    // The first writes on locally, and cannot make the store hold it.
    write_round(&first, 2, 100);
    // A typed error, every time it is asked.
    for _ in 0..2 {
        match first.sync_remote() {
            Err(Error::Fenced {
                generation: 1,
                newer: 2,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(first.stats().remote.unwrap().fenced);
    drop(first);
    // Its directory cannot be opened as the writer any more.
    match Db::open(tmp.path().join("a"), options(Arc::clone(&store))) {
        Err(Error::Fenced {
            generation: 1,
            newer: 2,
            ..
        }) => {}
        other => panic!("{:?}", other.map(|_| "opened")),
    }
    drop(second);
    let db = Db::open(tmp.path().join("c"), options(store)).unwrap();
    check_round(&db, 0, 1000);
    check_round(&db, 1, 1000);
    assert_eq!(db.get(key(2, 0)).unwrap(), None);
}

/// An open that took a generation and stopped before recording it leaves
/// a directory that still opens as the writer; a generation another
/// writer took fences it.
#[test]
fn a_generation_this_directory_took_is_its_own() {
    use strata::remote::generation::generation_key;
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let dir = tmp.path().join("a");
    let db = Db::open(&dir, options(Arc::clone(&store))).unwrap();
    write_round(&db, 0, 100);
    db.sync_remote().unwrap();
    drop(db);
    // What an open stopped between its acquire and its record leaves.
    let record = std::fs::read_to_string(dir.join("REMOTE_GENERATION")).unwrap();
    let token = record.lines().next().unwrap().to_string();
    store
        .put(
            &generation_key(2),
            token.into_bytes().into(),
            PutMode::Create,
        )
        .unwrap();
    let db = Db::open(&dir, options(Arc::clone(&store))).unwrap();
    assert_eq!(db.stats().remote.unwrap().generation, 3);
    check_round(&db, 0, 100);
    drop(db);
    // A generation another open took and never claimed the store with
    // fences no one; another writer's claim does.
    store
        .put(
            &generation_key(4),
            b"someone else".to_vec().into(),
            PutMode::Create,
        )
        .unwrap();
    let db = Db::open(&dir, options(Arc::clone(&store))).unwrap();
    assert_eq!(db.stats().remote.unwrap().generation, 5);
    drop(db);
    let other = Db::open(tmp.path().join("other"), options(Arc::clone(&store))).unwrap();
    check_round(&other, 0, 100);
    drop(other);
    match Db::open(&dir, options(store)) {
        Err(Error::Fenced {
            generation: 5,
            newer: 6,
            ..
        }) => {}
        other => panic!("{:?}", other.map(|_| "opened")),
    }
}

#[test]
fn a_store_that_holds_another_database_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    write_round(&db, 0, 10);
    db.sync_remote().unwrap();
    drop(db);
    let local = Db::open(tmp.path().join("local-only"), Options::default()).unwrap();
    drop(local);
    let e = Db::open(tmp.path().join("local-only"), options(store))
        .err()
        .expect("opened");
    assert!(e.to_string().contains("did not come from"), "{e}");
}

#[test]
fn uploads_go_through_failing_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = dir_store(&tmp.path().join("bucket"));
    let faulty = Arc::new(FaultyRemote::new(Arc::clone(&inner), 42));
    faulty.random(
        3,
        &[
            RemoteFault::Before,
            RemoteFault::After,
            RemoteFault::Duplicate,
        ],
    );
    // Opening retries nothing: a fault there fails the open, nothing lost.
    let db = (0..20)
        .find_map(|_| Db::open(tmp.path().join("a"), options(Arc::clone(&faulty) as _)).ok())
        .expect("no open in 20 tries got through 1-in-3 faults");
    for round in 0..3 {
        write_round(&db, round, 800);
        db.sync_remote().unwrap();
    }
    assert!(faulty.injected() > 0);
    drop(db);
    let db = Db::open(tmp.path().join("b"), options(inner)).unwrap();
    for round in 0..3 {
        check_round(&db, round, 800);
    }
}

/// The same failing calls within the smallest local budget, where every
/// store call of the database's life can fail: the uploads, the puts of a
/// compaction's outputs as soon as they are written, the evictions that
/// follow, and the reads of evicted layers (a get's, a compaction's). A
/// call that fails fails alone and cleanly (a get's error is one line,
/// never a wrong value); what `sync_remote` acknowledged is in the store;
/// the local disk stays within its budget; and both the directory and a
/// fresh one opened on the store read every acknowledged write.
#[test]
fn a_database_over_its_budget_goes_through_failing_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = dir_store(&tmp.path().join("bucket"));
    let budget = 128 << 10;
    let opts = |store: Arc<dyn RemoteStore>| Options {
        layer_size_bytes_max: 64 << 10,
        target_file_bytes: 64 << 10,
        local_layer_bytes_max: Some(budget),
        block_cache_bytes: 0,
        ..options(store)
    };
    let faulty = Arc::new(FaultyRemote::new(Arc::clone(&inner), 29));
    faulty.random(
        4,
        &[
            RemoteFault::Before,
            RemoteFault::After,
            RemoteFault::Duplicate,
        ],
    );
    let dir = tmp.path().join("a");
    let db = (0..20)
        .find_map(|_| Db::open(&dir, opts(Arc::clone(&faulty) as _)).ok())
        .expect("no open in 20 tries got through 1-in-4 faults");
    let rounds = 4;
    let (mut right, mut failed) = (0u32, 0u32);
    for round in 0..rounds {
        write_round(&db, round, 600);
        // A compaction reads its evicted inputs from the failing store: it
        // may fail, and is tried again (nothing it wrote is listed).
        if round % 2 == 1 {
            // (One failed GET of its inputs fails a try: about one try in
            // ten gets through here.)
            let compacted = (0..500).find_map(|_| db.compact().ok());
            assert!(compacted.is_some(), "no compaction in 500 tries");
        }
        db.sync_remote().unwrap();
        assert!(
            local_layer_bytes(&dir) <= budget,
            "round {round}: {} local layer bytes over the budget {budget}",
            local_layer_bytes(&dir)
        );
        for r in 0..=round {
            for i in (0..600).step_by(7) {
                if get_right_or_failed_cleanly(&db, r, i) {
                    right += 1;
                } else {
                    failed += 1;
                }
            }
        }
    }
    assert!(faulty.injected() > 0);
    assert!(right > 0 && failed > 0, "{right} right, {failed} failed");
    let remote = db.stats().remote.unwrap();
    assert!(remote.evicted_layers > 0 && remote.gets > 0, "{remote:?}");
    drop(db);
    // Without faults: the directory and a fresh one read every write.
    for dir in [dir, tmp.path().join("b")] {
        let db = Db::open(&dir, opts(Arc::clone(&inner))).unwrap();
        for round in 0..rounds {
            check_round(&db, round, 600);
        }
    }
}

/// The process stops at each call of the store in turn (open, uploads of
/// files and indexes): what a `sync_remote` acknowledged before the stop is
/// in the store, and a database restored from it reads every such write,
/// never a wrong value, and never misses an object its index lists; the
/// stopped directory reopens too. Also with the smallest local budget,
/// where the compaction puts each output into the store as soon as it is
/// written, before any index lists it, and evicts it.
#[test]
fn a_stop_at_any_step_loses_nothing_acknowledged() {
    /// The workload: open, three rounds each synced to the store, the last
    /// after a compaction (its uploads replace the layers before, which
    /// are then deleted). Returns the rounds acknowledged.
    fn run(dir: &Path, opts: Options) -> Vec<u32> {
        let mut acked = Vec::new();
        let budget = opts.local_layer_bytes_max;
        if let Ok(db) = Db::open(dir, opts) {
            for round in 0..3 {
                write_round(&db, round, 300);
                if round == 2 {
                    // Only within a budget does the job read the store
                    // (its inputs evicted), and fail when it stops.
                    let compacted = db.compact();
                    assert!(compacted.is_ok() || budget.is_some(), "{compacted:?}");
                }
                if db.sync_remote_within(Duration::from_millis(300)).is_ok() {
                    acked.push(round);
                }
            }
        }
        acked
    }
    for budget in [None, Some(128 << 10)] {
        let opts = |store: Arc<dyn RemoteStore>| match budget {
            None => options(store),
            Some(budget) => Options {
                layer_size_bytes_max: 64 << 10,
                target_file_bytes: 64 << 10,
                local_layer_bytes_max: Some(budget),
                ..options(store)
            },
        };
        let calls = {
            let tmp = tempfile::tempdir().unwrap();
            let faulty = Arc::new(FaultyRemote::new(dir_store(&tmp.path().join("bucket")), 0));
            assert_eq!(
                run(&tmp.path().join("a"), opts(Arc::clone(&faulty) as _)),
                vec![0, 1, 2]
            );
            faulty.ops()
        };
        let mut stops = 0;
        for stop_at in 1..=calls {
            let tmp = tempfile::tempdir().unwrap();
            let inner = dir_store(&tmp.path().join("bucket"));
            let faulty = Arc::new(FaultyRemote::new(Arc::clone(&inner), stop_at));
            faulty.fail_at(stop_at, RemoteFault::Stop);
            let acked = run(&tmp.path().join("a"), opts(Arc::clone(&faulty) as _));
            if faulty.injected() > 0 {
                stops += 1;
            }
            // The stopped directory reopens on the store too (within the
            // budget its manifest may list outputs only the store holds,
            // which no index lists yet).
            let db = Db::open(tmp.path().join("a"), opts(Arc::clone(&inner)))
                .unwrap_or_else(|e| panic!("budget {budget:?}, stop at {stop_at}: {e}"));
            for &round in &acked {
                check_round(&db, round, 300);
            }
            drop(db);
            let db = Db::open(tmp.path().join("b"), opts(inner)).unwrap();
            for &round in &acked {
                check_round(&db, round, 300);
            }
            for round in 0..3 {
                for i in 0..300 {
                    if let Some(v) = db.get(key(round, i)).unwrap() {
                        assert_eq!(
                            v,
                            value(round, i),
                            "budget {budget:?}, stop at {stop_at}: round {round} key {i}"
                        );
                    }
                }
            }
        }
        // The calls vary a little from run to run (snapshots not yet begun
        // are replaced by newer ones): most runs reach their stop.
        assert!(
            stops * 4 >= calls * 3,
            "budget {budget:?}: {stops} of {calls} runs reached their stop"
        );
    }
}

/// `inspect_store`: the newest index and what it lists, orphans, and a
/// verify pass that names a damaged object.
#[test]
fn inspect_reports_the_index_orphans_and_damage() {
    use strata::remote::inspect::inspect_store;
    let tmp = tempfile::tempdir().unwrap();
    let bucket = tmp.path().join("bucket");
    let store = dir_store(&bucket);
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    write_round(&db, 0, 2000);
    db.sync_remote().unwrap();
    let lsn = db.stats().last_lsn;
    drop(db);
    store
        .put(
            "layers/stray.delta-g00000000000000000009",
            vec![0; 10].into(),
            PutMode::Create,
        )
        .unwrap();
    let r = inspect_store(&*store, true).unwrap();
    assert_eq!(r.generations.len(), 1);
    let newest = r.newest.as_ref().unwrap();
    assert_eq!((newest.generation, newest.lsn), (1, lsn));
    assert!(newest.layers >= 1 && newest.value_files >= 1, "{newest:?}");
    assert_eq!(newest.objects.len(), newest.layers + newest.value_files);
    assert_eq!(r.verified, newest.objects.len());
    assert!(r.missing.is_empty());
    let orphans: Vec<&str> = r.orphans.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(orphans, ["layers/stray.delta-g00000000000000000009"]);
    // A flipped byte in a listed object: named by the verify pass.
    let victim = &newest.objects[0].key;
    let path = bucket.join(victim);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let e = inspect_store(&*store, true).unwrap_err();
    assert!(
        e.is_corruption() && e.to_string().contains(victim.as_str()),
        "{e}"
    );
    assert!(inspect_store(&*store, false).is_ok());
    // A database opened from the store reads its files there when they are
    // read: a get that reads the damaged bytes fails naming the file, and
    // no get answers a wrong value.
    let name = newest.objects[0].name.clone();
    let db = Db::open(tmp.path().join("b"), options(store)).unwrap();
    let mut failed = 0;
    for i in 0..2000 {
        match db.get(key(0, i)) {
            Ok(v) => assert_eq!(v.as_deref(), Some(&value(0, i)[..]), "key {i}"),
            Err(e) => {
                assert!(e.is_corruption() && e.to_string().contains(&name), "{e}");
                failed += 1;
            }
        }
    }
    assert!(failed > 0, "no get read the damaged bytes of {name}");
}

/// A layer file the disk returns damaged is never uploaded: the upload
/// fails with the corruption, and the store holds nothing of it.
#[test]
fn a_damaged_layer_file_is_not_uploaded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    {
        let db = local_db(&dir);
        write_round(&db, 0, 500);
        db.flush().unwrap();
        write_round(&db, 1, 500);
        db.flush().unwrap();
    }
    // The older layer (the lower id): a flipped bit in its first block.
    let mut layers: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "delta"))
        .collect();
    layers.sort();
    let victim = layers[0].clone();
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[64] ^= 0x04;
    std::fs::write(&victim, bytes).unwrap();

    let store = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(&dir, options(Arc::clone(&store))).unwrap();
    let e = db
        .sync_remote_within(Duration::from_millis(500))
        .unwrap_err();
    let name = victim.file_name().unwrap().to_str().unwrap().to_string();
    assert!(e.to_string().contains(&name), "{e}");
    let status = db.stats().remote.unwrap();
    assert!(
        status
            .error
            .as_deref()
            .is_some_and(|e| e.contains("corruption")),
        "{status:?}"
    );
    drop(db);
    let uploaded: Vec<String> = store
        .list("layers/")
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert!(uploaded.iter().all(|k| !k.contains(&name)), "{uploaded:?}");
    // The only index is the open's claim of the empty store: it lists nothing.
    let report = strata::remote::inspect::inspect_store(&*store, false).unwrap();
    assert_eq!(report.indexes.len(), 1);
    assert!(
        report.newest.unwrap().objects.is_empty(),
        "an index listed a damaged file"
    );
}

/// A layer of many 8 MiB parts is checked while its parts go
/// (`remote::layer_stream`), and one read whole for a single put is
/// checked whole before it goes: either way, one the disk returns damaged
/// in the middle is refused before the store holds it; once the disk
/// returns it whole, it uploads, the object is the file byte for byte,
/// and a directory restored from the store reads every value.
#[test]
fn a_layer_of_many_parts_is_checked_as_it_is_sent() {
    // Zero: every file in parts; the default: this one read whole.
    for single_put in [0, Options::default().remote_single_put_bytes_max] {
        layer_of_many_parts_checked(single_put);
    }
}

/// A store that records which put each object went through.
struct RecordingStore {
    inner: Arc<dyn RemoteStore>,
    puts: std::sync::Mutex<Vec<(String, &'static str)>>,
}

impl RemoteStore for RecordingStore {
    fn url(&self) -> &str {
        self.inner.url()
    }
    fn put(&self, key: &str, bytes: Payload, mode: PutMode) -> strata::Result<()> {
        self.inner.put(key, bytes, mode)
    }
    fn put_parts(
        &self,
        key: &str,
        parts: &mut dyn Iterator<Item = strata::Result<Payload>>,
    ) -> strata::Result<()> {
        self.puts.lock().unwrap().push((key.to_string(), "parts"));
        self.inner.put_parts(key, parts)
    }
    fn put_whole(&self, key: &str, parts: Vec<Payload>) -> strata::Result<()> {
        self.puts.lock().unwrap().push((key.to_string(), "whole"));
        self.inner.put_whole(key, parts)
    }
    fn get(&self, key: &str) -> strata::Result<Vec<u8>> {
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> strata::Result<Vec<u8>> {
        self.inner.get_range(key, range)
    }
    fn list(&self, prefix: &str) -> strata::Result<Vec<ObjectInfo>> {
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> strata::Result<()> {
        self.inner.delete(key)
    }
}

/// The uploader's choice of put, file by file (L0 goes oldest first): the
/// first file of a round of uploads goes in parts when it is more than one
/// (nothing is sent before it to hide its read behind); every other file
/// up to `remote_single_put_bytes_max` is read whole for one PUT; with the
/// limit at zero, every file goes in parts. Every object is its file.
#[test]
fn the_first_large_file_goes_in_parts_and_the_rest_whole() {
    let big = |db: &Db, tag: &str| {
        for chunk in 0..13u32 {
            let mut b = WriteBatch::new();
            for i in 0..1000u32 {
                b.put(
                    format!("{tag}-{chunk:03}-{i:05}"),
                    vec![(i % 251) as u8; 1000],
                );
            }
            db.write(&b, WriteOptions::default()).unwrap();
        }
        db.flush().unwrap();
    };
    let small = |db: &Db, tag: &str| {
        db.put(tag, b"1", WriteOptions::default()).unwrap();
        db.flush().unwrap();
    };
    type Layout<'a> = &'a [(&'a str, bool)];
    // (layer: large?) oldest first, and the put each should go through.
    let default = Options::default().remote_single_put_bytes_max;
    let cases: [(Layout, u64, [&str; 3]); 3] = [
        (
            &[("a", true), ("b", false), ("c", true)],
            default,
            ["parts", "whole", "whole"],
        ),
        (
            &[("a", false), ("b", true), ("c", true)],
            default,
            ["whole", "whole", "whole"],
        ),
        (
            &[("a", true), ("b", false), ("c", true)],
            0,
            ["parts", "parts", "parts"],
        ),
    ];
    for (layout, limit, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a");
        let mut names = Vec::new();
        {
            let db = local_db(&dir);
            for &(tag, large) in layout {
                let before: Vec<String> = local_data_files(&dir);
                if large {
                    big(&db, tag);
                } else {
                    small(&db, tag);
                }
                let new: Vec<String> = local_data_files(&dir)
                    .into_iter()
                    .filter(|f| f.ends_with(".delta") && !before.contains(f))
                    .collect();
                assert_eq!(new.len(), 1, "{new:?}");
                let size = std::fs::metadata(dir.join(&new[0])).unwrap().len();
                assert_eq!(size > 8 << 20, large, "{} is {size} bytes", new[0]);
                names.push(new[0].clone());
            }
        }
        let recording = Arc::new(RecordingStore {
            inner: dir_store(&tmp.path().join("bucket")),
            puts: Default::default(),
        });
        let opts = Options {
            remote_single_put_bytes_max: limit,
            ..options(Arc::clone(&recording) as _)
        };
        Db::open(&dir, opts.clone()).unwrap().sync_remote().unwrap();
        let puts = recording.puts.lock().unwrap().clone();
        let got: Vec<&str> = names
            .iter()
            .map(|name| {
                let mut how = puts.iter().filter(|(k, _)| k.contains(name.as_str()));
                let (_, how_one) = how
                    .next()
                    .unwrap_or_else(|| panic!("{name} not put: {puts:?}"));
                assert!(how.next().is_none(), "{name} put twice: {puts:?}");
                *how_one
            })
            .collect();
        assert_eq!(got, want, "limit {limit}, layout {layout:?}");
        for name in &names {
            let key = puts
                .iter()
                .find(|(k, _)| k.contains(name.as_str()))
                .unwrap();
            assert!(
                recording.get(&key.0).unwrap() == std::fs::read(dir.join(name)).unwrap(),
                "{name}: the object differs from the file"
            );
        }
    }
}

fn layer_of_many_parts_checked(single_put_bytes_max: u64) {
    let options = |store| Options {
        remote_single_put_bytes_max: single_put_bytes_max,
        ..options(store)
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let n = 36_000u32;
    let big_key = |i: u32| format!("big-{i:08}").into_bytes();
    let big_value = |i: u32| {
        let mut v = format!("value {i} ").into_bytes();
        v.resize(1000, (i % 253) as u8);
        v
    };
    {
        let db = local_db(&dir);
        // A small layer first (L0 goes oldest first): the large one is not
        // the first of the uploads, which goes in parts whatever the limit.
        db.put(b"a-small-layer", b"1", WriteOptions::default())
            .unwrap();
        db.flush().unwrap();
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let mut b = WriteBatch::new();
            for &i in chunk {
                b.put(big_key(i), big_value(i));
            }
            db.write(&b, WriteOptions::default()).unwrap();
        }
        db.flush().unwrap();
    }
    let layer = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "delta"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let whole = std::fs::read(&layer).unwrap();
    assert!(whole.len() > 4 * (8 << 20), "{} bytes", whole.len());
    let name = layer.file_name().unwrap().to_str().unwrap().to_string();

    let store = dir_store(&tmp.path().join("bucket"));
    let mut bad = whole.clone();
    bad[whole.len() / 2] ^= 0x20;
    std::fs::write(&layer, &bad).unwrap();
    {
        let db = Db::open(&dir, options(Arc::clone(&store))).unwrap();
        let e = db
            .sync_remote_within(Duration::from_millis(500))
            .unwrap_err();
        assert!(e.to_string().contains(&name), "{e}");
    }
    let listed = data_objects(&*store);
    assert!(listed.iter().all(|k| !k.contains(&name)), "{listed:?}");

    std::fs::write(&layer, &whole).unwrap();
    {
        let db = Db::open(&dir, options(Arc::clone(&store))).unwrap();
        db.sync_remote().unwrap();
    }
    let object = data_objects(&*store)
        .into_iter()
        .find(|k| k.contains(&name))
        .expect("the layer is in the store");
    assert!(
        store.get(&object).unwrap() == whole,
        "the object differs from the file"
    );

    let restored = tmp.path().join("b");
    let db = Db::open(&restored, options(Arc::clone(&store))).unwrap();
    for i in (0..n).step_by(7) {
        assert_eq!(db.get(big_key(i)).unwrap(), Some(big_value(i)), "key {i}");
    }
}

/// A writer syncing round after round while a second one opens from the
/// store (its calls slowed, so that its puts are in flight when the claim
/// lands): every round the first was told is in the store is in the
/// second's database, and after the claim the first is told nothing more.
#[test]
fn a_claim_keeps_every_write_the_writer_before_was_told_is_stored() {
    for attempt in 0..4u64 {
        let tmp = tempfile::tempdir().unwrap();
        let store = dir_store(&tmp.path().join("bucket"));
        let slow = Arc::new(FaultyRemote::new(Arc::clone(&store), attempt));
        slow.set_latency(Some(Duration::from_millis(3)));
        let first = Db::open(tmp.path().join("a"), options(Arc::clone(&slow) as _)).unwrap();
        write_round(&first, 0, 50);
        first.sync_remote().unwrap();
        let (acked, second) = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut acked = vec![0];
                for round in 1..60 {
                    write_round(&first, round, 50);
                    match first.sync_remote_within(Duration::from_secs(2)) {
                        Ok(()) => acked.push(round),
                        Err(_) => break,
                    }
                }
                acked
            });
            std::thread::sleep(Duration::from_millis(40 + 30 * attempt));
            let second = Db::open(tmp.path().join("b"), options(Arc::clone(&store))).unwrap();
            (writer.join().unwrap(), second)
        });
        assert!(
            acked.len() < 60,
            "attempt {attempt}: the first writer was never fenced"
        );
        for &round in &acked {
            check_round(&second, round, 50);
        }
        assert!(first.stats().remote.unwrap().fenced);
    }
}

/// The layer and value objects in `store`, by key.
fn data_objects(store: &dyn RemoteStore) -> Vec<String> {
    let mut keys: Vec<String> = ["layers/", "values/"]
        .iter()
        .flat_map(|p| store.list(p).unwrap())
        .map(|o| o.key)
        .collect();
    keys.sort();
    keys
}

/// Waits (up to 20 s) until the writer has no object left to delete.
fn wait_for_deletions(db: &Db) {
    let started = std::time::Instant::now();
    while db.stats().remote.unwrap().unlisted_objects > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            db.stats().remote
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Layers a compaction replaced leave the store once an index that no
/// longer lists them is in it: the store then holds exactly what its
/// newest index lists, and a restore from it has every write.
#[test]
fn replaced_layers_leave_the_store_once_an_index_drops_them() {
    use strata::remote::inspect::inspect_store;
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    for round in 0..4 {
        write_round(&db, round, 1500);
        db.flush().unwrap();
        db.sync_remote().unwrap();
    }
    let before = data_objects(&*store);
    db.compact().unwrap();
    db.sync_remote().unwrap();
    wait_for_deletions(&db);
    let stats = db.stats().remote.unwrap();
    assert!(stats.deleted_objects > 0, "{stats:?}");
    let after = data_objects(&*store);
    let r = inspect_store(&*store, true).unwrap();
    let newest = r.newest.as_ref().unwrap();
    let mut listed: Vec<String> = newest.objects.iter().map(|o| o.key.clone()).collect();
    listed.sort();
    assert_eq!(after, listed, "the store holds what its newest index lists");
    assert!(r.orphans.is_empty() && r.missing.is_empty(), "{r:?}");
    assert!(
        before.iter().any(|k| !after.contains(k)),
        "the compaction replaced no object: {before:?}"
    );
    drop(db);
    let restored = Db::open(tmp.path().join("b"), options(store)).unwrap();
    for round in 0..4 {
        check_round(&restored, round, 1500);
    }
}

/// A writer's uploads that no index took (it stopped, or was fenced) are
/// deleted by the next writer, which claimed past them; objects of a
/// newer generation than the deleting writer's are never touched.
#[test]
fn the_next_writer_deletes_older_uploads_no_index_took() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    write_round(&db, 0, 1000);
    db.sync_remote().unwrap();
    drop(db);
    // Generation 1's upload that no index took, and a stray of a
    // generation no writer here has.
    let older = "layers/00000000000000099999.delta-g00000000000000000001";
    let newer = "values/00000000000000099998.log-g00000000000000000099";
    for key in [older, newer] {
        store
            .put(key, vec![7; 100].into(), PutMode::Create)
            .unwrap();
    }
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    assert_eq!(db.stats().remote.unwrap().generation, 2);
    write_round(&db, 1, 1000);
    db.sync_remote().unwrap();
    wait_for_deletions(&db);
    let objects = data_objects(&*store);
    assert!(!objects.iter().any(|k| k == older), "{objects:?}");
    assert!(objects.iter().any(|k| k == newer), "{objects:?}");
    drop(db);
    let restored = Db::open(tmp.path().join("b"), options(store)).unwrap();
    check_round(&restored, 0, 1000);
    check_round(&restored, 1, 1000);
}

/// The database's data files in `dir` (layers and logs).
fn local_data_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".delta") || n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

/// A database opened from its store into an empty directory downloads no
/// file: its layers and value files are read from the store when a read
/// needs them, a ranged GET a block (or a value), and it writes, compacts
/// (reading its inputs from the store) and uploads on from there.
#[test]
fn a_database_opened_from_its_store_reads_its_files_there() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    for round in 0..3 {
        write_round(&db, round, 2000);
        db.flush().unwrap();
    }
    db.sync_remote().unwrap();
    drop(db);

    let b = tmp.path().join("b");
    let db = Db::open(&b, options(Arc::clone(&store))).unwrap();
    // Only the new open log is local.
    let local = local_data_files(&b);
    assert_eq!(local.len(), 1, "{local:?}");
    let at_open = db.stats().remote.unwrap().gets;
    for round in 0..3 {
        check_round(&db, round, 2000);
    }
    let gets = db.stats().remote.unwrap().gets - at_open;
    // A block a get (fewer: the block cache keeps blocks), one more for
    // a value in a value file (every 7th), and each layer's open.
    let bound = 3 * (2000 + 2000 / 7 + 1) + 16 * db.stats().delta_layers as u64;
    assert!(gets > 0 && gets <= bound, "{gets} GETs for 6000 gets");
    assert_eq!(local_data_files(&b).len(), 1, "a read downloaded a file");

    // Writes, a compaction of layers only the store holds, uploads.
    write_round(&db, 3, 2000);
    db.compact().unwrap();
    db.sync_remote().unwrap();
    for round in 0..4 {
        check_round(&db, round, 2000);
    }
    wait_for_deletions(&db);
    drop(db);
    let db = Db::open(tmp.path().join("c"), options(store)).unwrap();
    for round in 0..4 {
        check_round(&db, round, 2000);
    }
}

/// Bytes of the layer files in `dir`.
fn local_layer_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".delta"))
        // A file removed since the listing holds nothing.
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The most bytes of layer files in `dir` while `work` runs, sampled every
/// millisecond.
fn peak_local_layer_bytes(dir: &Path, work: impl FnOnce()) -> u64 {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(local_layer_bytes(dir));
                std::thread::sleep(Duration::from_millis(1));
            }
            peak
        });
        work();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        sampler.join().unwrap()
    })
}

/// A database ten times its local budget of layer bytes: the least
/// recently read layers the store holds are evicted, the local disk stays
/// within the budget, every read is right (from the store where it must),
/// and it reopens (its evicted layers still files of the database) and
/// comes back from the store alone.
#[test]
fn a_database_ten_times_its_local_budget_serves_every_read() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let budget = 192 << 10;
    let opts = || Options {
        layer_size_bytes_max: 64 << 10,
        target_file_bytes: 64 << 10,
        local_layer_bytes_max: Some(budget),
        ..options(Arc::clone(&store))
    };
    let a = tmp.path().join("a");
    let db = Db::open(&a, opts()).unwrap();
    let rounds = 20;
    for round in 0..rounds {
        write_round(&db, round, 1000);
        db.sync_remote().unwrap();
        assert!(
            local_layer_bytes(&a) <= budget,
            "round {round}: {}",
            local_layer_bytes(&a)
        );
    }
    let stats = db.stats();
    let total: u64 = stats.delta_bytes;
    assert!(total >= 10 * budget, "{total} bytes of layers");
    let remote = stats.remote.unwrap();
    assert!(remote.evicted_layers > 0, "{remote:?}");
    assert!(remote.local_layer_bytes <= budget, "{remote:?}");
    let gets_before = remote.gets;
    for round in 0..rounds {
        check_round(&db, round, 1000);
    }
    assert!(
        db.stats().remote.unwrap().gets > gets_before,
        "no read went to the store"
    );
    assert!(local_layer_bytes(&a) <= budget);
    drop(db);
    // Reopened: the evicted layers are still the database's.
    let db = Db::open(&a, opts()).unwrap();
    for round in 0..rounds {
        check_round(&db, round, 1000);
    }
    drop(db);
    let db = Db::open(tmp.path().join("b"), opts()).unwrap();
    for round in 0..rounds {
        check_round(&db, round, 1000);
    }
}

/// A compaction whose outputs together are many times the local budget
/// (every L0 layer merged into one run by `Db::compact`) puts each output
/// into the store once the disk has no room for it, and lets its local
/// file go: the layer files on the disk, sampled every millisecond through
/// the job, never take more than the budget; every read is right after,
/// and from the store alone. (Before, the outputs were written side by
/// side and went only after the job: the disk held all of them.)
#[test]
fn a_compaction_larger_than_the_local_budget_never_fills_the_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let budget = 384 << 10;
    let opts = || Options {
        layer_size_bytes_max: 64 << 10,
        target_file_bytes: 64 << 10,
        local_layer_bytes_max: Some(budget),
        l0_compaction_trigger: 0,
        ..options(Arc::clone(&store))
    };
    let a = tmp.path().join("a");
    let db = Db::open(&a, opts()).unwrap();
    let rounds = 16;
    for round in 0..rounds {
        write_round(&db, round, 1000);
        db.sync_remote().unwrap();
    }
    let before = db.stats();
    assert!(
        before.delta_bytes >= 4 * budget,
        "{} bytes of layers",
        before.delta_bytes
    );
    let peak = peak_local_layer_bytes(&a, || db.compact().unwrap());
    let after = db.stats();
    assert!(after.compactions > before.compactions);
    assert!(
        peak <= budget,
        "{peak} bytes of layer files on the disk during the compaction"
    );
    let remote = after.remote.unwrap();
    assert!(
        remote.uploaded_files > before.remote.unwrap().uploaded_files,
        "no output went to the store during the job: {remote:?}"
    );
    for round in 0..rounds {
        check_round(&db, round, 1000);
    }
    db.sync_remote().unwrap();
    assert!(local_layer_bytes(&a) <= budget);
    drop(db);
    let db = Db::open(tmp.path().join("b"), opts()).unwrap();
    for round in 0..rounds {
        check_round(&db, round, 1000);
    }
}

/// An evicted layer keeps its reader (block index and filter, read when
/// the layer was written) on the store's copy: a get that reaches it costs
/// the one ranged GET of its block, not the GETs of a footer, an index and
/// a filter first. (Eviction closed the reader before: 4 GETs.)
#[test]
fn a_get_of_an_evicted_layer_costs_one_get() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(
        tmp.path().join("a"),
        Options {
            layer_size_bytes_max: 64 << 10,
            target_file_bytes: 64 << 10,
            // The smallest budget: every layer the store holds goes.
            local_layer_bytes_max: Some(128 << 10),
            l0_compaction_trigger: 0,
            ..options(Arc::clone(&store))
        },
    )
    .unwrap();
    write_round(&db, 0, 300);
    db.sync_remote().unwrap();
    let remote = db.stats().remote.unwrap();
    assert_eq!(remote.local_layer_bytes, 0, "{remote:?}");
    assert!(remote.evicted_layers >= 1, "{remote:?}");
    let before = remote.gets;
    assert_eq!(db.get(key(0, 1)).unwrap().unwrap(), value(0, 1));
    assert_eq!(db.stats().remote.unwrap().gets - before, 1);
}

/// Writes that outrun a slow store (every call 20 ms late) wait for its
/// uploads rather than fill the disk with layers not uploaded yet: the
/// layer files on the disk, sampled every millisecond while a writer goes
/// on with no `sync_remote`, never take more than the budget; every write
/// is read back after.
#[test]
fn writes_that_outrun_the_uploads_wait_for_them_within_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let faulty = Arc::new(FaultyRemote::new(dir_store(&tmp.path().join("bucket")), 1));
    faulty.set_latency(Some(Duration::from_millis(20)));
    let budget = 256 << 10;
    let a = tmp.path().join("a");
    let db = Db::open(
        &a,
        Options {
            layer_size_bytes_max: 64 << 10,
            target_file_bytes: 64 << 10,
            local_layer_bytes_max: Some(budget),
            background_flush: true,
            ..options(Arc::clone(&faulty) as _)
        },
    )
    .unwrap();
    let rounds = 16;
    let peak = peak_local_layer_bytes(&a, || {
        for round in 0..rounds {
            write_round(&db, round, 1000);
        }
        db.flush().unwrap();
    });
    let stats = db.stats();
    assert!(
        stats.delta_bytes >= 4 * budget,
        "{} bytes of layers",
        stats.delta_bytes
    );
    assert!(
        peak <= budget,
        "{peak} bytes of layer files on the disk while writing"
    );
    db.sync_remote().unwrap();
    for round in 0..rounds {
        check_round(&db, round, 1000);
    }
}

/// Eviction rounds run after flushes, compactions and `sync_remote`, on
/// their own threads: several at once take turns (two at once both
/// removed the same file, and one failed with "No such file"): every
/// `sync_remote` of writers with a background flush and compaction beside
/// them succeeds, every read is right, and the disk is within the budget
/// once a sync has nothing beside it.
#[test]
fn eviction_rounds_on_many_threads_take_turns() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let budget = 256 << 10;
    let dir = tmp.path().join("a");
    let db = Db::open(
        &dir,
        Options {
            layer_size_bytes_max: 64 << 10,
            target_file_bytes: 64 << 10,
            local_layer_bytes_max: Some(budget),
            background_flush: true,
            ..options(Arc::clone(&store))
        },
    )
    .unwrap();
    let threads = 4;
    let rounds = 6;
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = &db;
            s.spawn(move || {
                for r in 0..rounds {
                    write_round(db, t * rounds + r, 300);
                    db.sync_remote().unwrap();
                }
            });
        }
    });
    db.sync_remote().unwrap();
    for round in 0..threads * rounds {
        check_round(&db, round, 300);
    }
    let remote = db.stats().remote.unwrap();
    assert!(remote.evicted_layers > 0, "{remote:?}");
    drop(db);
    // Reopened with no flush or compaction of its own beside (which may
    // leave a layer not yet uploaded: it stays until it is), a sync
    // brings the disk within the budget.
    let db = Db::open(
        &dir,
        Options {
            layer_size_bytes_max: 64 << 10,
            target_file_bytes: 64 << 10,
            local_layer_bytes_max: Some(budget),
            l0_compaction_trigger: 0,
            ..options(Arc::clone(&store))
        },
    )
    .unwrap();
    db.sync_remote().unwrap();
    let remote = db.stats().remote.unwrap();
    assert!(remote.local_layer_bytes <= budget, "{remote:?}");
    for round in 0..threads * rounds {
        check_round(&db, round, 300);
    }
}

/// Reads of files only the store holds through a store that fails one call
/// in three (before the call, or after it with the answer lost): each get
/// answers right or fails with the store's one-line error, never a wrong
/// value, and once the store answers again every get is right.
#[test]
fn reads_from_a_failing_store_fail_cleanly_and_recover() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&inner))).unwrap();
    for round in 0..3 {
        write_round(&db, round, 1000);
        db.flush().unwrap();
    }
    db.sync_remote().unwrap();
    drop(db);
    let faulty = Arc::new(FaultyRemote::new(Arc::clone(&inner), 7));
    let opts = Options {
        block_cache_bytes: 0,
        ..options(Arc::clone(&faulty) as _)
    };
    let db = Db::open(tmp.path().join("b"), opts).unwrap();
    faulty.random(3, &[RemoteFault::Before, RemoteFault::After]);
    let (mut right, mut failed) = (0, 0);
    for round in 0..3 {
        for i in 0..1000 {
            if get_right_or_failed_cleanly(&db, round, i) {
                right += 1;
            } else {
                failed += 1;
            }
        }
    }
    assert!(right > 0 && failed > 0, "{right} right, {failed} failed");
    faulty.random(1, &[]);
    for round in 0..3 {
        check_round(&db, round, 1000);
    }
}

/// A directory restored from its store holds none of its layer files:
/// opened without the store it refuses, saying it needs it (not that it is
/// damaged); with the store it opens. The directory that wrote them, every
/// file local, opens without the store.
#[test]
fn a_restored_directory_opened_without_its_store_says_it_needs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let db = Db::open(tmp.path().join("a"), options(Arc::clone(&store))).unwrap();
    write_round(&db, 0, 500);
    db.sync_remote().unwrap();
    drop(db);
    drop(Db::open(tmp.path().join("b"), options(Arc::clone(&store))).unwrap());
    let local = Options {
        background_flush: false,
        ..Options::default()
    };
    match Db::open(tmp.path().join("b"), local.clone()) {
        Err(e @ Error::InvalidInput(strata::InvalidInput::RemoteNeeded { .. })) => {
            let text = e.to_string();
            assert!(
                text.contains("opened with a remote store") && !text.contains('\n'),
                "{text}"
            );
        }
        other => panic!("{:?}", other.map(|_| "opened")),
    }
    let db = Db::open(tmp.path().join("b"), options(Arc::clone(&store))).unwrap();
    check_round(&db, 0, 500);
    drop(db);
    let db = Db::open(tmp.path().join("a"), local).unwrap();
    check_round(&db, 0, 500);
}

/// A follower that moves only when `refresh_remote` says (no background
/// refresh), so that tests see exactly which index it shows.
fn follower_options(store: Arc<dyn RemoteStore>) -> Options {
    Options {
        remote_follower: true,
        remote_follow_interval: None,
        ..options(store)
    }
}

/// A follower left to itself moves to the writer's newer indexes on its
/// own (`remote_follow_interval`), keeps a failure in its stats until a
/// refresh succeeds, and closes at once however long its interval.
#[test]
fn a_follower_refreshes_on_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    // The follower's calls of the store, failing when told to.
    let faulty = Arc::new(FaultyRemote::new(Arc::clone(&store), 7));
    let writer = Db::open(tmp.path().join("w"), options(Arc::clone(&store))).unwrap();
    write_round(&writer, 0, 500);
    writer.sync_remote().unwrap();
    let follower = Db::open(
        tmp.path().join("f"),
        Options {
            remote_follow_interval: Some(Duration::from_millis(20)),
            ..follower_options(faulty.clone())
        },
    )
    .unwrap();
    check_round(&follower, 0, 500);
    // Waits (up to 20 s) until `done`.
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let started = std::time::Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let shows_the_writers = || {
        let lsn = writer.last_lsn();
        until("never moved on", &|| follower.last_lsn() >= lsn);
    };
    for round in 1..3 {
        write_round(&writer, round, 500);
        writer.sync_remote().unwrap();
        shows_the_writers();
        check_round(&follower, round, 500);
    }
    // Every call of the store fails: the refreshes fail, the stats say
    // why, the follower stays where it was.
    faulty.random(1, &[RemoteFault::Before]);
    let shown = follower.last_lsn();
    let error = || follower.stats().remote.unwrap().error;
    until("no failure shown", &|| error().is_some());
    assert!(follower.refresh_remote().is_err());
    assert_eq!(follower.last_lsn(), shown);
    faulty.random(1, &[]);
    write_round(&writer, 3, 500);
    writer.sync_remote().unwrap();
    shows_the_writers();
    check_round(&follower, 3, 500);
    until("the failure stays", &|| error().is_none());
    drop(follower);
    // With an hour's interval no background refresh runs here: a called
    // refresh's failure shows, and its success clears it.
    let follower = Db::open(
        tmp.path().join("f"),
        Options {
            remote_follow_interval: Some(Duration::from_secs(3600)),
            ..follower_options(faulty.clone())
        },
    )
    .unwrap();
    check_round(&follower, 3, 500);
    let error = || follower.stats().remote.unwrap().error;
    assert_eq!(error(), None);
    faulty.random(1, &[RemoteFault::Before]);
    assert!(follower.refresh_remote().is_err());
    assert!(error().is_some(), "a called refresh's failure shows");
    faulty.random(1, &[]);
    follower.refresh_remote().unwrap();
    assert_eq!(error(), None, "a called refresh's success clears it");
    // A long interval does not hold the close up.
    let started = std::time::Instant::now();
    follower.close().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    // An interval below 10 ms is refused.
    let e = Db::open(
        tmp.path().join("f"),
        Options {
            remote_follow_interval: Some(Duration::from_millis(1)),
            ..follower_options(Arc::clone(&store))
        },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("remote_follow_interval"), "{e}");
}

/// A writer's replaced objects stay in the store for its deletion delay:
/// a follower left on the index before a compaction with GC reads every
/// value right for that long (its files are still there), and the
/// objects go after it.
#[test]
fn replaced_objects_stay_for_the_deletion_delay_so_a_follower_on_an_older_index_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let delay = Duration::from_secs(3);
    let writer = Db::open(
        tmp.path().join("w"),
        Options {
            remote_deletion_delay: delay,
            ..options(Arc::clone(&store))
        },
    )
    .unwrap();
    assert_eq!(
        Options::default().remote_deletion_delay,
        strata::REMOTE_DELETION_DELAY_DEFAULT
    );
    for round in 0..3 {
        write_round(&writer, round, 1500);
        writer.flush().unwrap();
    }
    writer.sync_remote().unwrap();
    let follower = Db::open(tmp.path().join("f"), follower_options(Arc::clone(&store))).unwrap();
    let before = data_objects(&*store);
    // The clock starts before the index that drops the old layers is in
    // the store: while it reads under the delay, nothing is deleted yet.
    let started = std::time::Instant::now();
    writer.set_horizon(writer.last_lsn());
    writer.compact().unwrap();
    writer.sync_remote().unwrap();
    let stats = writer.stats().remote.unwrap();
    assert!(stats.unlisted_objects > 0, "{stats:?}");
    let mut read_within = 0;
    for round in 0..3 {
        for i in (0..1500).step_by(7) {
            let within = started.elapsed() < delay;
            match follower.get(key(round, i)) {
                Ok(v) => assert_eq!(v, Some(value(round, i))),
                // Past the delay an unrefreshed follower may find a file
                // gone; within it, never.
                Err(Error::Remote { .. }) if !within => {}
                Err(e) => panic!("round {round} key {i}: {e}"),
            }
            read_within += u32::from(within);
        }
    }
    if started.elapsed() < delay {
        let stats = writer.stats().remote.unwrap();
        assert_eq!(stats.deleted_objects, 0, "{stats:?}");
        assert!(before.iter().all(|k| data_objects(&*store).contains(k)));
    }
    assert!(read_within > 0, "the machine took the whole delay to read");
    // After the delay they go: the store then holds what its newest index
    // lists.
    wait_for_deletions(&writer);
    assert!(started.elapsed() >= delay);
    assert!(writer.stats().remote.unwrap().deleted_objects > 0);
    assert!(before.iter().any(|k| !data_objects(&*store).contains(k)));
    follower.refresh_remote().unwrap();
    for round in 0..3 {
        check_round(&follower, round, 1500);
    }
}

fn is_read_only<T>(r: strata::Result<T>) -> bool {
    matches!(r, Err(Error::ReadOnly { .. }))
}

/// A read-only follower opens from the store alone, beside its writer
/// (which it does not fence), refuses every write, shows one index at a
/// time and moves to a newer one when refreshed, through deletions, a
/// compaction with GC and a new writer; a snapshot keeps what it saw.
#[test]
fn a_follower_reads_the_store_and_follows_newer_indexes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let writer = Db::open(tmp.path().join("w"), options(Arc::clone(&store))).unwrap();
    write_round(&writer, 0, 3000);
    writer.sync_remote().unwrap();
    let f_dir = tmp.path().join("f");
    let follower = Db::open(&f_dir, follower_options(Arc::clone(&store))).unwrap();
    check_round(&follower, 0, 3000);
    let remote = follower.stats().remote.unwrap();
    assert!(remote.following && remote.generation == 1, "{remote:?}");
    assert_eq!(
        remote.consistent_lsn,
        writer.stats().remote.unwrap().consistent_lsn
    );
    assert_eq!(follower.last_lsn(), remote.consistent_lsn);
    assert!(is_read_only(follower.put(
        b"k",
        b"v",
        WriteOptions::default()
    )));
    assert!(is_read_only(follower.delete(b"k", WriteOptions::default())));
    assert!(is_read_only(follower.flush()));
    assert!(is_read_only(follower.compact()));
    assert!(is_read_only(follower.sync_remote()));
    // Its directory holds its own empty log, no data.
    assert_eq!(local_data_files(&f_dir).len(), 1);

    // The writer goes on (not fenced): new keys, deletions.
    write_round(&writer, 1, 2000);
    for i in 0..100 {
        writer.delete(key(0, i), WriteOptions::default()).unwrap();
    }
    writer.sync_remote().unwrap();
    assert!(!writer.stats().remote.unwrap().fenced);
    assert_eq!(
        follower.get(key(1, 0)).unwrap(),
        None,
        "shown before a refresh"
    );
    let before = follower.snapshot();
    let lsn = follower.refresh_remote().unwrap();
    assert_eq!(lsn, writer.stats().remote.unwrap().consistent_lsn);
    assert_eq!(follower.last_lsn(), lsn);
    check_round(&follower, 1, 2000);
    for i in 0..100 {
        assert_eq!(follower.get(key(0, i)).unwrap(), None, "key {i} deleted");
        assert_eq!(
            before.get(key(0, i)).unwrap(),
            Some(value(0, i)),
            "snapshot"
        );
    }
    assert_eq!(follower.refresh_remote().unwrap(), lsn, "nothing newer");
    drop(before);

    // A compaction with GC: the layers the follower read are replaced
    // and their objects deleted; refreshed, it reads the new ones.
    writer.set_horizon(writer.last_lsn());
    writer.compact().unwrap();
    writer.sync_remote().unwrap();
    wait_for_deletions(&writer);
    assert!(writer.stats().remote.unwrap().deleted_objects > 0);
    // Not refreshed: a read finds its value or the object gone, never a
    // wrong value.
    for i in (100..3000).step_by(97) {
        match follower.get(key(0, i)) {
            Ok(v) => assert_eq!(v, Some(value(0, i))),
            Err(Error::Remote { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    follower.refresh_remote().unwrap();
    assert!(follower.horizon() > 0, "the GC cutoff follows the index");
    check_round(&follower, 1, 2000);
    for i in 100..3000 {
        assert_eq!(follower.get(key(0, i)).unwrap(), Some(value(0, i)));
    }
    drop(writer);

    // A new writer elsewhere (a new generation), followed on; and the
    // follower's directory opens again on the newest index.
    let writer = Db::open(tmp.path().join("w2"), options(Arc::clone(&store))).unwrap();
    write_round(&writer, 2, 1000);
    writer.sync_remote().unwrap();
    follower.refresh_remote().unwrap();
    assert_eq!(follower.stats().remote.unwrap().generation, 2);
    check_round(&follower, 2, 1000);
    drop(follower);
    write_round(&writer, 3, 500);
    writer.sync_remote().unwrap();
    let follower = Db::open(&f_dir, follower_options(Arc::clone(&store))).unwrap();
    check_round(&follower, 1, 2000);
    check_round(&follower, 3, 500);
    assert_eq!(
        local_data_files(&f_dir).len(),
        1,
        "its last open's log went"
    );
    assert_eq!(
        follower.last_lsn(),
        writer.stats().remote.unwrap().consistent_lsn
    );
}

/// A follower opens an empty directory or its own, never a writer's; a
/// follower's directory is not a writer's, nor a database without its
/// store; a store without a database has nothing to follow.
#[test]
fn a_follower_and_a_writer_keep_to_their_own_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let store = dir_store(&tmp.path().join("bucket"));
    let role = |r: strata::Result<Db>| match r {
        Err(e @ Error::InvalidInput(strata::InvalidInput::RemoteRole { .. })) => e.to_string(),
        other => panic!("{:?}", other.map(|_| "opened")),
    };
    match Db::open(tmp.path().join("f"), follower_options(Arc::clone(&store))) {
        Err(e @ Error::InvalidInput(strata::InvalidInput::RemoteUrl { .. })) => {
            assert!(e.to_string().contains("no database to follow"), "{e}")
        }
        other => panic!("{:?}", other.map(|_| "opened")),
    }
    let writer = Db::open(tmp.path().join("w"), options(Arc::clone(&store))).unwrap();
    write_round(&writer, 0, 500);
    writer.sync_remote().unwrap();
    drop(writer);
    let text = role(Db::open(
        tmp.path().join("w"),
        follower_options(Arc::clone(&store)),
    ));
    assert!(text.contains("a writer's directory"), "{text}");
    let local = local_db(&tmp.path().join("l"));
    drop(local);
    let text = role(Db::open(
        tmp.path().join("l"),
        follower_options(Arc::clone(&store)),
    ));
    assert!(text.contains("not a follower's"), "{text}");
    drop(Db::open(tmp.path().join("f"), follower_options(Arc::clone(&store))).unwrap());
    let text = role(Db::open(tmp.path().join("f"), options(Arc::clone(&store))));
    assert!(text.contains("a follower's directory"), "{text}");
    match Db::open(
        tmp.path().join("f"),
        Options {
            background_flush: false,
            ..Options::default()
        },
    ) {
        Err(e @ Error::InvalidInput(strata::InvalidInput::RemoteRole { .. })) => {
            assert!(e.to_string().contains("a follower's directory"), "{e}")
        }
        other => panic!("{:?}", other.map(|_| "opened")),
    }
    let no_store = Options {
        remote_follower: true,
        ..Options::default()
    };
    assert!(Db::open(tmp.path().join("x"), no_store).is_err());
    // The writer's directory is still the writer's.
    let writer = Db::open(tmp.path().join("w"), options(store)).unwrap();
    check_round(&writer, 0, 500);
}

/// A follower on a store failing one call in three: a refresh that fails
/// leaves the version it had (its LSN and every read as before), one that
/// passes shows the writer's newest index, a read is right or the store's
/// one-line error, never a wrong value; with the faults gone, every read
/// is right.
#[test]
fn a_follower_refreshes_through_a_failing_store() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = dir_store(&tmp.path().join("bucket"));
    let writer = Db::open(tmp.path().join("w"), options(Arc::clone(&inner))).unwrap();
    write_round(&writer, 0, 500);
    writer.sync_remote().unwrap();
    let faulty = Arc::new(FaultyRemote::new(Arc::clone(&inner), 11));
    let follower = Db::open(
        tmp.path().join("f"),
        Options {
            block_cache_bytes: 0,
            ..follower_options(Arc::clone(&faulty) as _)
        },
    )
    .unwrap();
    faulty.random(3, &[RemoteFault::Before, RemoteFault::After]);
    let (mut refreshes_failed, mut reads_failed) = (0, 0);
    for round in 1..6 {
        write_round(&writer, round, 500);
        if round == 3 {
            writer.compact().unwrap();
        }
        writer.sync_remote().unwrap();
        let target = writer.stats().remote.unwrap().consistent_lsn;
        loop {
            let before = follower.last_lsn();
            match follower.refresh_remote() {
                Ok(lsn) => {
                    assert_eq!(lsn, target);
                    break;
                }
                Err(e) => {
                    assert!(!e.to_string().contains('\n'), "{e}");
                    assert_eq!(follower.last_lsn(), before, "a failed refresh moved");
                    refreshes_failed += 1;
                }
            }
        }
        for r in 0..=round {
            for i in (0..500).step_by(7) {
                match follower.get(key(r, i)) {
                    Ok(v) => assert_eq!(v, Some(value(r, i)), "round {r} key {i}"),
                    Err(e @ Error::Remote { .. }) => {
                        assert!(!e.to_string().contains('\n'), "{e}");
                        reads_failed += 1;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    assert!(
        refreshes_failed > 0 && reads_failed > 0,
        "{refreshes_failed} refreshes and {reads_failed} reads failed"
    );
    faulty.random(1, &[]);
    for round in 0..6 {
        check_round(&follower, round, 500);
    }
}
