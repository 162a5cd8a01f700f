//! Model-based test: random sequences of put / delete / batch / get / get_at /
//! scan / scan_at / flush / freeze / compact / close-and-reopen, checked against an
//! in-memory oracle (key → LSN → value or tombstone), in every io mode and on
//! the simulated storage, with tiny limits so layers freeze and flush all the
//! time, and large and small values mixed (large ones left in value files,
//! relocated and dropped by compaction and GC).

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;
use strata::io::sim::SimStorage;
use strata::io::Storage;
use strata::{Db, IoEngine, IoMode, Lsn, Options, WriteBatch, WriteOptions};

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize),
    Delete(u16),
    Batch(Vec<(u16, Option<usize>)>),
    Get(u16),
    GetAt(u16, u8),
    MultiGetAt(Vec<u16>, u8),
    /// Gets through a read queue of depth 1 + the second u8 % 8, at an LSN.
    QueueGetAt(Vec<u16>, u8, u8),
    Scan(u16, u16),
    ScanAt(u16, u16, u8),
    Freeze,
    Flush,
    Compact,
    Reopen,
    TakeSnapshot,
    ReadSnapshot(u16),
    DropSnapshot,
}

/// The keys reads ask for.
const ALL_KEYS: std::ops::Range<u16> = 0..120;

fn key(k: u16) -> Vec<u8> {
    // A few long keys among short ones; all distinct.
    if k.is_multiple_of(37) {
        let mut v = vec![b'L'; 3000];
        v.extend_from_slice(format!("{k:05}").as_bytes());
        v
    } else {
        format!("k{k:05}").into_bytes()
    }
}

fn value(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i * 7)) as u8)
        .collect()
}

fn value_len() -> impl Strategy<Value = usize> {
    // Whole pages too: out of line in the log (format 4).
    prop_oneof![8 => 0usize..200, 1 => 1000usize..3000, 1 => 9000usize..20_000, 1 => (1usize..3).prop_map(|p| p * 4096)]
}

fn op() -> impl Strategy<Value = Op> {
    op_over(0..120)
}

/// Operations on the keys `k` (reads of keys outside it too).
fn op_over(k: std::ops::Range<u16>) -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (k.clone(), value_len()).prop_map(|(k, l)| Op::Put(k, l)),
        6 => k.clone().prop_map(Op::Delete),
        8 => prop::collection::vec((k.clone(), prop::option::weighted(0.8, value_len())), 1..12).prop_map(Op::Batch),
        20 => ALL_KEYS.prop_map(Op::Get),
        10 => (ALL_KEYS, any::<u8>()).prop_map(|(k, p)| Op::GetAt(k, p)),
        4 => (prop::collection::vec(ALL_KEYS, 1..40), any::<u8>()).prop_map(|(ks, p)| Op::MultiGetAt(ks, p)),
        4 => (prop::collection::vec(ALL_KEYS, 1..40), any::<u8>(), any::<u8>()).prop_map(|(ks, p, d)| Op::QueueGetAt(ks, p, d)),
        3 => (ALL_KEYS, ALL_KEYS).prop_map(|(a, b)| Op::Scan(a, b)),
        2 => (ALL_KEYS, ALL_KEYS, any::<u8>()).prop_map(|(a, b, p)| Op::ScanAt(a, b, p)),
        1 => Just(Op::Freeze),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::TakeSnapshot),
        3 => ALL_KEYS.prop_map(Op::ReadSnapshot),
        1 => Just(Op::DropSnapshot),
    ]
}

/// A key's versions: (LSN, value or tombstone), ascending.
type History = Vec<(Lsn, Option<Vec<u8>>)>;

#[derive(Default)]
struct Oracle {
    versions: BTreeMap<Vec<u8>, History>,
    last_lsn: Lsn,
}

impl Oracle {
    fn apply(&mut self, lsn: Lsn, entries: &[(Vec<u8>, Option<Vec<u8>>)]) {
        for (k, v) in entries {
            let vs = self.versions.entry(k.clone()).or_default();
            match vs.last_mut() {
                Some(last) if last.0 == lsn => last.1 = v.clone(),
                _ => vs.push((lsn, v.clone())),
            }
        }
        self.last_lsn = lsn;
    }

    fn get_at(&self, k: &[u8], lsn: Lsn) -> Option<Vec<u8>> {
        let vs = self.versions.get(k)?;
        vs.iter()
            .rev()
            .find(|(l, _)| *l <= lsn)
            .and_then(|(_, v)| v.clone())
    }

    fn scan_at(&self, lo: &[u8], hi: &[u8], lsn: Lsn) -> Vec<(Vec<u8>, Vec<u8>)> {
        if lo > hi {
            return Vec::new();
        }
        self.versions
            .range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)))
            .filter_map(|(k, _)| self.get_at(k, lsn).map(|v| (k.clone(), v)))
            .collect()
    }
}

fn options(
    mode: IoMode,
    engine: IoEngine,
    storage: &Option<Arc<dyn Storage>>,
    history: Option<u64>,
) -> Options {
    Options {
        history_lsns: history,
        image_run_threshold: 2,
        io_mode: mode,
        io_engine: engine,
        fallback_to_buffered: false,
        layer_size_bytes_max: strata::LAYER_BYTES_MIN,
        writer_buffer_bytes: 8192,
        delta_block_bytes: 1024,
        // Compaction in the background all the time, into runs of several
        // small files.
        l0_compaction_trigger: 2,
        l0_slowdown_layers: 3,
        l0_stop_layers: 4,
        target_file_bytes: strata::LAYER_BYTES_MIN,
        // With an odd history window, a budget of one byte: every layer
        // file that opens closes all the others (reads, scans, compaction
        // and GC then run on readers opened again and again).
        index_memory_bytes_max: match history {
            Some(h) if h % 2 == 1 => 1,
            _ => strata::INDEX_MEMORY_BYTES_MAX_DEFAULT,
        },
        // Values of 1000 bytes and more stay in their logs (value files)
        // whenever they are most of a log, and a value file a third
        // garbage has its values moved: pointers, relocation and the
        // files' deletion all the time.
        large_value_bytes: 1000,
        value_garbage_percent: 33,
        storage: storage.clone(),
        ..Options::default()
    }
}

fn run(ops: &[Op], mode: IoMode, engine: IoEngine) {
    run_on(ops, mode, engine, None, None)
}

/// Reads refused below the horizon, over the run (`STRATA_MODEL_VERBOSE`).
static BELOW_HORIZON: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What a read at `lsn` may return: the oracle's answer, or, below the
/// engine's horizon, `BelowHorizon` — and the horizon never passes what
/// `history` allows (the last LSN minus it; nothing without it).
fn check_read<T: PartialEq + std::fmt::Debug>(
    got: strata::Result<T>,
    want: T,
    lsn: Lsn,
    allowed: Lsn,
    ctx: &str,
) {
    match got {
        Ok(v) => assert_eq!(v, want, "{ctx} at {lsn}"),
        Err(strata::Error::BelowHorizon { lsn: l, horizon }) => {
            BELOW_HORIZON.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            assert_eq!(l, lsn, "{ctx}");
            assert!(lsn < horizon, "{ctx}: {lsn} is not below {horizon}");
            assert!(
                horizon <= allowed,
                "{ctx}: horizon {horizon} above {allowed}"
            );
        }
        Err(e) => panic!("{ctx} at {lsn}: {e}"),
    }
}

/// An LSN in 0..=`last`, `p` of the way along.
fn pick_lsn(p: u8, last: Lsn) -> Lsn {
    (last * p as u64) / 255
}

/// The LSN a multi-key read asks for: the latest often, else one picked
/// as `pick_lsn` does.
fn batch_read_lsn(p: u8, last: Lsn) -> Lsn {
    if p > 200 {
        last
    } else {
        pick_lsn(p, last)
    }
}

/// The values of `keys` at `lsn` through a read queue of `depth`, in key
/// order; the first error (a submit's or a get's) if any.
fn queue_get_at(
    db: &Db,
    keys: &[Vec<u8>],
    lsn: Lsn,
    depth: usize,
) -> strata::Result<Vec<Option<Vec<u8>>>> {
    let mut q = db.read_queue(depth)?;
    let mut got: Vec<Option<strata::Result<Option<Vec<u8>>>>> = keys.iter().map(|_| None).collect();
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if q.outstanding() == depth {
            q.reap(1, depth, &mut out)?;
        }
        q.submit_at(i as u64, k, lsn)?;
    }
    while q.outstanding() > 0 {
        q.reap(1, depth, &mut out)?;
    }
    for c in out {
        let slot = &mut got[c.tag as usize];
        assert!(slot.is_none(), "get {} reaped twice", c.tag);
        *slot = Some(c.result);
    }
    got.into_iter()
        .map(|r| r.expect("every get reaped"))
        .collect()
}

/// Runs `ops` on `storage` (empty: the operating system's, in a temp dir),
/// keeping `history` LSNs of history (empty: all).
fn run_on(
    ops: &[Op],
    mode: IoMode,
    engine: IoEngine,
    storage: Option<Arc<dyn Storage>>,
    history: Option<u64>,
) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = match storage {
        Some(_) => PathBuf::from("/db"),
        None => dir.path().join("db"),
    };
    let options = |mode, engine| options(mode, engine, &storage, history);
    let allowed = |last: Lsn| history.map_or(0, |h| last.saturating_sub(h));
    let mut snapshot: Option<(strata::Snapshot, Lsn)> = None;
    let mut db = Db::open(&path, options(mode, engine)).unwrap();
    let mut oracle = Oracle::default();
    let mut extra_l1_files = 0;
    for (i, op) in ops.iter().enumerate() {
        let ctx = || format!("op {i} {op:?} mode {mode} engine {engine}");
        match op {
            Op::Put(k, len) => {
                let v = value(i, *len);
                let lsn = db
                    .put(key(*k), &v, WriteOptions { sync: i % 50 == 0 })
                    .unwrap();
                assert_eq!(lsn, oracle.last_lsn + 1, "{}", ctx());
                oracle.apply(lsn, &[(key(*k), Some(v))]);
            }
            Op::Delete(k) => {
                let lsn = db.delete(key(*k), WriteOptions::default()).unwrap();
                oracle.apply(lsn, &[(key(*k), None)]);
            }
            Op::Batch(entries) => {
                let mut b = WriteBatch::new();
                let mut model = Vec::new();
                for (j, (k, v)) in entries.iter().enumerate() {
                    match v {
                        Some(len) => {
                            let v = value(i * 100 + j, *len);
                            b.put(key(*k), &v);
                            model.push((key(*k), Some(v)));
                        }
                        None => {
                            b.delete(key(*k));
                            model.push((key(*k), None));
                        }
                    }
                }
                let lsn = db.write(&b, WriteOptions::default()).unwrap();
                oracle.apply(lsn, &model);
            }
            Op::Get(k) => {
                assert_eq!(
                    db.get(key(*k)).unwrap(),
                    oracle.get_at(&key(*k), oracle.last_lsn),
                    "{}",
                    ctx()
                );
            }
            Op::GetAt(k, p) => {
                let lsn = pick_lsn(*p, oracle.last_lsn);
                check_read(
                    db.get_at(key(*k), lsn),
                    oracle.get_at(&key(*k), lsn),
                    lsn,
                    allowed(oracle.last_lsn),
                    &ctx(),
                );
            }
            Op::MultiGetAt(ks, p) => {
                let lsn = batch_read_lsn(*p, oracle.last_lsn);
                let keys: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
                let expected: Vec<_> = keys.iter().map(|k| oracle.get_at(k, lsn)).collect();
                check_read(
                    db.multi_get_at(&keys, lsn),
                    expected,
                    lsn,
                    allowed(oracle.last_lsn),
                    &ctx(),
                );
            }
            Op::QueueGetAt(ks, p, d) => {
                let lsn = batch_read_lsn(*p, oracle.last_lsn);
                let keys: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
                let expected: Vec<_> = keys.iter().map(|k| oracle.get_at(k, lsn)).collect();
                check_read(
                    queue_get_at(&db, &keys, lsn, 1 + usize::from(*d % 8)),
                    expected,
                    lsn,
                    allowed(oracle.last_lsn),
                    &ctx(),
                );
            }
            Op::Scan(a, b) => {
                let (lo, hi) = (key(*a), key(*b));
                let got: Vec<_> = db
                    .scan(lo.clone()..hi.clone())
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                assert_eq!(got, oracle.scan_at(&lo, &hi, oracle.last_lsn), "{}", ctx());
            }
            Op::ScanAt(a, b, p) => {
                let lsn = pick_lsn(*p, oracle.last_lsn);
                let (lo, hi) = (key(*a), key(*b));
                let got = db
                    .scan_at(lo.clone()..hi.clone(), lsn)
                    .map(|scan| scan.map(|r| r.unwrap()).collect::<Vec<_>>());
                check_read(
                    got,
                    oracle.scan_at(&lo, &hi, lsn),
                    lsn,
                    allowed(oracle.last_lsn),
                    &ctx(),
                );
            }
            Op::Freeze => db.freeze().unwrap(),
            Op::Flush => {
                db.flush().unwrap();
                assert_eq!(db.stats().frozen_layers, 0);
            }
            Op::Compact => {
                db.compact().unwrap();
                let s = db.stats();
                assert_eq!((s.frozen_layers, s.l0_layers), (0, 0), "{}", ctx());
                if oracle.last_lsn > 0 {
                    assert!(s.l1_layers > 0, "{}: {s:?}", ctx());
                }
                extra_l1_files = extra_l1_files.max(s.l1_layers - s.l1_runs);
            }
            Op::TakeSnapshot => {
                let snap = db.snapshot();
                let lsn = snap.lsn();
                assert_eq!(lsn, oracle.last_lsn);
                snapshot = Some((snap, lsn));
            }
            // A snapshot's reads never fail: GC waits for it.
            Op::ReadSnapshot(k) => {
                if let Some((snap, lsn)) = &snapshot {
                    assert_eq!(
                        snap.get(key(*k)).unwrap(),
                        oracle.get_at(&key(*k), *lsn),
                        "{} at snapshot {lsn}",
                        ctx()
                    );
                }
            }
            Op::DropSnapshot => snapshot = None,
            Op::Reopen => {
                snapshot = None;
                db.close().unwrap();
                db = Db::open(&path, options(mode, engine)).unwrap();
                assert_eq!(db.last_lsn(), oracle.last_lsn, "{}", ctx());
            }
        }
    }
    if std::env::var_os("STRATA_MODEL_VERBOSE").is_some() {
        eprintln!(
            "most L1 layers beyond one per run after a compact: {extra_l1_files}; \
             reads refused below the horizon so far: {}",
            BELOW_HORIZON.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
    // Everything, at every LSN, once more after a final reopen.
    drop(snapshot);
    db.close().unwrap();
    let db = Db::open(&path, options(mode, engine)).unwrap();
    for lsn in [0, oracle.last_lsn / 3, oracle.last_lsn / 2, oracle.last_lsn] {
        let all = db
            .scan_at::<&[u8], _>(.., lsn)
            .map(|scan| scan.map(|r| r.unwrap()).collect::<Vec<_>>());
        let expected: Vec<_> = oracle
            .versions
            .keys()
            .filter_map(|k| oracle.get_at(k, lsn).map(|v| (k.clone(), v)))
            .collect();
        check_read(all, expected, lsn, allowed(oracle.last_lsn), "full scan");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, max_shrink_iters: 200, .. ProptestConfig::default() })]

    #[test]
    fn engine_matches_oracle_direct_rw(ops in prop::collection::vec(op(), 1000..2500)) {
        run(&ops, IoMode::DirectRw, IoEngine::Sync);
    }

    #[test]
    fn engine_matches_oracle_direct(ops in prop::collection::vec(op(), 1000..2500)) {
        run(&ops, IoMode::Direct, IoEngine::IoUring);
    }

    #[test]
    fn engine_matches_oracle_buffered(ops in prop::collection::vec(op(), 1000..2500)) {
        run(&ops, IoMode::Buffered, IoEngine::Sync);
    }

    #[test]
    fn engine_matches_oracle_direct_rw_io_uring(ops in prop::collection::vec(op(), 1000..2500)) {
        run(&ops, IoMode::DirectRw, IoEngine::IoUring);
    }

    #[test]
    fn engine_matches_oracle_on_the_simulated_storage(
        ops in prop::collection::vec(op(), 1000..2500),
        seed in any::<u64>(),
    ) {
        run_on(&ops, IoMode::DirectRw, IoEngine::Sync, Some(Arc::new(SimStorage::new(seed))), None);
    }

    /// With a history window: images and GC remove what is below it, and
    /// reads below the engine's horizon are refused, never wrong.
    #[test]
    fn engine_matches_oracle_with_a_history_window(
        ops in prop::collection::vec(op(), 1000..2500),
        seed in any::<u64>(),
        // 0 as often as the rest: a forced compaction then writes the
        // image straight from L0 (every layer below the horizon).
        history in prop_oneof![Just(0u64), 1u64..300],
    ) {
        run_on(&ops, IoMode::DirectRw, IoEngine::Sync, Some(Arc::new(SimStorage::new(seed))), Some(history));
    }

    /// Updates to a hot range after a load of every key: images of that
    /// range alone over older images of the rest, and GC of the files they
    /// cover; reads at every LSN in the window, of every key.
    #[test]
    fn engine_matches_oracle_with_updates_to_a_hot_range(
        load in prop::collection::vec(op(), 300..600),
        hot in prop::collection::vec(prop_oneof![
            // Compactions more often than in the load: images of the hot
            // range get made, one over another.
            20 => op_over(50..62),
            1 => Just(Op::Compact),
        ], 1000..2000),
        seed in any::<u64>(),
        history in prop_oneof![Just(0u64), 1u64..300, Just(u64::MAX)],
    ) {
        let ops: Vec<Op> = load.into_iter().chain(hot).collect();
        let history = (history != u64::MAX).then_some(history);
        run_on(&ops, IoMode::DirectRw, IoEngine::Sync, Some(Arc::new(SimStorage::new(seed))), history);
    }
}
