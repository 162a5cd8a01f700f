//! `Db`: the engine's API, and what every part of it shares: the version
//! that reads see, the poison state, and the reads (get, multi_get, scan at
//! an LSN) over the version. The parts live beside it:
//! [`write`] (LSN assignment, group commit, freeze), [`flush`] (frozen
//! layers to L0 delta layers), [`recovery`] (open) and [`stats`] (what
//! `Db::stats` reports).
//!
//! Where an edit becomes durable and visible: `version::set` (every
//! freeze, flush, compaction and GC is one `VersionSet::log_and_apply`).
//!
//! Locks, always taken in this order: `write` (one writer at a time: LSN
//! order = log order) → the version set's (its manifest, then briefly its
//! current version). `sync` (group commit state) is never held while taking
//! another lock. `flush_lock` serializes flushes (background thread and
//! `flush()`), `compact_lock` compactions; each takes the version set's
//! locks for its edit.
//!
//! Invariants: LSNs are strictly increasing; `visible_lsn` is the highest LSN
//! whose whole batch is indexed (reads at "latest" use it, so a batch is seen
//! whole or not at all); the layers of a `Version` cover disjoint LSN ranges,
//! newest last (`Version::check`); a log is deleted only after the delta
//! layer holding its data is durable and listed in a durable manifest; after
//! any write or sync error of the log the database is poisoned and refuses
//! writes (it cannot know what reached the disk), reads still work. A failed
//! flush or compaction poisons nothing: its inputs stay, it is retried
//! (`background`: one loop, one policy), and only writers that would grow the flush backlog past
//! its limit, or that find L0 at its stop count, are refused meanwhile
//! (`Error::FlushBacklog`, `Error::CompactionBacklog`).

use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::error::{Error, InvalidInput, Result};
use crate::io::{
    AlignedBuf, BufferedWriter, EntryKind, FileClass, FileOptions, IoStats, OsStorage, ReadRequest,
    ShutdownMode, Storage, StorageFile, StorageLock,
};
use crate::keyspace::{as_ref, Span};
use crate::layer::bloom::PointKey;
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::delta::writer::DeltaLayerWriter;
use crate::layer::file::LayerFile;
use crate::layer::inmemory::InMemoryLayer;
use crate::log::record::{
    decode_log_header, encode_log_header, PrevLog, LOG_HEADER_BYTES, LOG_SECTOR_BYTES,
};
use crate::log::replay::{replay, ReplayedLog};
use crate::manifest::{
    delta_name, is_own_file, load, log_name, Edit, LayerDesc, ManifestLog, ManifestState,
    MANIFEST_NAME, MANIFEST_TMP_NAME,
};
use crate::options::{Options, WriteOptions};
use crate::read::{DeltaSource, Scan, Source};
use crate::table_cache::{Layer, LayerIo, OpenReaders};
use crate::types::{Lsn, ValueKind};
use crate::value::ValuePointer;
use crate::version::set::{NewFiles, Poison, VersionSet};
use crate::version::{Candidate, Version};
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

mod background;
mod compact;
mod flush;
mod follow;
mod queue;
mod recovery;
mod remote;
mod stats;
mod write;

use background::Worker;
pub use queue::{ReadCompletion, ReadQueue, Reaped};
pub use remote::RemoteStats;
pub use stats::Stats;
use write::create_log;

const LOCK_NAME: &str = "LOCK";
/// Most bytes a scan reads ahead in a layer file at once (it starts small
/// and doubles up to this).
const SCAN_READAHEAD_BYTES: usize = 1 << 20;

/// What the write path holds under the database's write lock.
struct WriteState {
    last_lsn: Lsn,
    /// The open layer, the same as the current version's (replaced only
    /// under this lock, by `freeze_locked`): a write appends to it without
    /// taking the version lock or the version's count, lines that every
    /// read moves too (with a reader beside it, the writer spent 25 to 35 %
    /// more CPU per put, on lock words the two cores passed back and forth
    /// and on waking the reader; see `inmemory::waiting_briefly`).
    /// A follower takes no writes; its field is the layer it opened with.
    open: Arc<InMemoryLayer>,
}

#[derive(Default)]
struct SyncState {
    synced_lsn: Lsn,
    leader_active: bool,
}

struct DbInner {
    dir: PathBuf,
    /// Every operating-system call goes through it.
    storage: Arc<dyn Storage>,
    opts: Options,
    log_opts: FileOptions,
    /// Where layer files live and how they open.
    layer_io: Arc<LayerIo>,
    stats: IoStats,
    write: Mutex<WriteState>,
    /// The manifest, the version reads see, and the poison state: every
    /// edit goes through it (`VersionSet::log_and_apply`).
    versions: VersionSet,
    /// Shared with the pacer: it moves with every write.
    visible_lsn: Arc<AtomicU64>,
    sync: Mutex<SyncState>,
    sync_cv: Condvar,
    /// One flush at a time, one compaction at a time.
    flush_lock: Mutex<()>,
    compact_lock: Mutex<()>,
    /// The background flush and compaction (`background`: one loop, one
    /// error policy).
    flush: Worker,
    compaction: Worker,
    compactions: AtomicU64,
    /// Bytes compaction jobs wrote and read (`Stats::compaction_write_bytes`).
    compaction_bytes: Arc<crate::compaction::JobBytes>,
    /// Paces background compaction (`Options::compaction_bytes_per_sec`).
    pacer: Arc<crate::pacer::Pacer>,
    /// The horizon the caller set (`Db::set_horizon`); only rises.
    caller_horizon: AtomicU64,
    /// Keys asked of get and multi_get (`Stats::point_lookups`).
    point_lookups: AtomicU64,
    /// The most memory one flush's read of its log held (see `Stats`).
    flush_memory_peak: AtomicU64,
    /// Log bytes flushes read since open.
    flush_read_bytes: AtomicU64,
    /// Where the layers keep their logs' bytes (`Options::log_memory_bytes`).
    log_memory: Arc<crate::layer::inmemory::LogMemoryBudget>,
    snapshots: Mutex<BTreeMap<Lsn, usize>>,
    closed: AtomicBool,
    /// With a remote store: the storage that reads the files only the
    /// store holds, and evicts local copies (`Options::local_layer_bytes_max`).
    tiered: Option<Arc<crate::remote::tiered::TieredStorage>>,
    /// Bytes of layer files on the local disk at the last eviction round.
    local_layer_bytes: AtomicU64,
    /// Bytes of the running compaction's outputs on the local disk
    /// (`OutputRoom`), counted by eviction rounds beside the version's
    /// layers. Held through a round, so that rounds (after a flush, a
    /// compaction, a `sync_remote`, an output written: on their own
    /// threads) take turns: two at once would both remove the same file.
    /// Not the count's lock, so that `stats()` never waits for a round.
    evicting: Mutex<u64>,
    /// A read-only follower's store and the index it shows
    /// (`Options::remote_follower`); `None` for a writer.
    following: Option<follow::Following>,
}

/// An open database. `Send + Sync`: share it (e.g. in an `Arc`) between
/// threads; writes are serialized inside, reads run in parallel.
pub struct Db {
    inner: Arc<DbInner>,
    flush_thread: Option<JoinHandle<()>>,
    compact_thread: Option<JoinHandle<()>>,
    /// A follower's background refresh (`Options::remote_follow_interval`).
    follow_thread: Option<JoinHandle<()>>,
    /// The directory lock, held while the database is open: by the `Db`,
    /// not by what outlives it (a `Snapshot` keeps the engine's state, not
    /// the directory), and released after the close.
    _lock: StorageLock,
}

/// A point-in-time view: reads through it see the database at its LSN, and
/// the versions it needs stay readable while it lives.
pub struct Snapshot {
    inner: Arc<DbInner>,
    lsn: Lsn,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::Poisoned("a thread panicked holding an engine lock".into()))
}

/// Reads below what the version still holds are refused, never answered
/// from what is left.
fn check_horizon(version: &Version, lsn: Lsn) -> Result<()> {
    match version.horizon() {
        horizon if lsn < horizon => Err(Error::BelowHorizon { lsn, horizon }),
        _ => Ok(()),
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    Ok(crate::types::check_key(key)?)
}

impl Db {
    /// Opens the database in `path`, creating it if the directory is missing
    /// or empty (and `create_if_missing`). Replays the logs of layers that
    /// were not flushed; removes files the manifest does not list.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Db::open_in(path.as_ref(), opts)
    }
    /// Writes `batch` atomically at the next LSN and returns it. With
    /// `sync`, the batch (and every earlier one) is durable when this returns.
    pub fn write(&self, batch: &WriteBatch, opts: WriteOptions) -> Result<Lsn> {
        self.inner.write(batch, None, opts)
    }

    /// Writes `batch` at the caller's `lsn`, which must be greater than every
    /// LSN written before (for callers replaying their own WAL).
    pub fn write_at_lsn(&self, batch: &WriteBatch, lsn: Lsn, opts: WriteOptions) -> Result<Lsn> {
        self.inner.write(batch, Some(lsn), opts)
    }

    /// Puts one key (a batch of one).
    pub fn put(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: WriteOptions,
    ) -> Result<Lsn> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(&b, opts)
    }

    /// Deletes one key (a tombstone).
    pub fn delete(&self, key: impl AsRef<[u8]>, opts: WriteOptions) -> Result<Lsn> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(&b, opts)
    }

    /// The newest value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner
            .get_at(key.as_ref(), self.inner.visible_lsn.load(Ordering::Acquire))
    }

    /// The value of `key` visible at `lsn`.
    pub fn get_at(&self, key: impl AsRef<[u8]>, lsn: Lsn) -> Result<Option<Vec<u8>>> {
        self.inner.get_at(key.as_ref(), lsn)
    }

    /// The newest values of several keys. Their block reads are submitted
    /// together (one io_uring submission per round with `IoEngine::IoUring`)
    /// and waited for once.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner
            .multi_get_at(keys, self.inner.visible_lsn.load(Ordering::Acquire))
    }

    /// The values of several keys visible at `lsn` (see [`Db::multi_get`]).
    pub fn multi_get_at<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        lsn: Lsn,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get_at(keys, lsn)
    }

    /// [`Db::multi_get`] that hands over each key's value as soon as it is
    /// known, as `found(index into keys, value)`: first the keys the
    /// in-memory layers and the block cache answer, then each key as its
    /// block read completes (with `IoEngine::IoUring`, in completion order
    /// while the other reads are in flight), and last the large values
    /// (`Options::large_value_bytes`), read from their value files together
    /// in one batch. Each key is handed over once.
    /// After an error, the keys already handed over were answered right;
    /// the rest were not answered.
    pub fn multi_get_each<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        mut found: impl FnMut(usize, Option<Vec<u8>>),
    ) -> Result<()> {
        self.inner.multi_get_each_at(
            keys,
            self.inner.visible_lsn.load(Ordering::Acquire),
            &mut |i, value| {
                found(i, value);
                Ok(())
            },
        )
    }

    /// The live keys in `range` with their newest values, in key order.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<Scan> {
        self.inner.scan_at(
            bounds(&range),
            self.inner.visible_lsn.load(Ordering::Acquire),
        )
    }

    /// The live keys in `range` as they were at `lsn`, in key order.
    pub fn scan_at<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R, lsn: Lsn) -> Result<Scan> {
        self.inner.scan_at(bounds(&range), lsn)
    }

    /// A snapshot at the newest LSN.
    pub fn snapshot(&self) -> Snapshot {
        let lsn = self.inner.visible_lsn.load(Ordering::Acquire);
        if let Ok(mut snaps) = self.inner.snapshots.lock() {
            *snaps.entry(lsn).or_default() += 1;
        }
        Snapshot {
            inner: Arc::clone(&self.inner),
            lsn,
        }
    }

    /// The newest LSN whose batch is visible.
    pub fn last_lsn(&self) -> Lsn {
        self.inner.visible_lsn.load(Ordering::Acquire)
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        let lsn = self.inner.visible_lsn.load(Ordering::Acquire);
        self.inner.group_sync(lsn)
    }

    /// Freezes the open in-memory layer (if it holds anything); a new one
    /// takes the writes. The frozen layer is durable when this returns.
    pub fn freeze(&self) -> Result<()> {
        let mut ws = lock(&self.inner.write)?;
        self.inner.check_poisoned()?;
        self.inner.freeze_locked(&mut ws)
    }

    /// Freezes the open layer and writes every frozen layer out as an L0
    /// delta layer, durable and in the manifest, before returning.
    pub fn flush(&self) -> Result<()> {
        self.freeze()?;
        self.inner.flush_pending(false)
    }

    /// Flushes, then compacts every L0 layer into L1 runs, before
    /// returning (whatever the trigger). With a horizon (`history_lsns`, or
    /// [`Db::set_horizon`]), it then writes an image at the newest run's
    /// end of every key range where runs sit above the image there, and
    /// lets GC remove the history the images cover below the horizon.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        while self.inner.compact_once(true)? {}
        Ok(())
    }

    /// Lets history below `lsn` go: once images at or below it exist,
    /// compaction removes the layers they cover, and reads below the
    /// newest of them return `Error::BelowHorizon`. Only rises; capped at the last LSN; a
    /// live snapshot holds it back. (With `Options::history_lsns`, the
    /// horizon also follows the last LSN.)
    pub fn set_horizon(&self, lsn: Lsn) {
        let lsn = lsn.min(self.inner.visible_lsn.load(Ordering::Acquire));
        self.inner.caller_horizon.fetch_max(lsn, Ordering::AcqRel);
        self.inner.signal_compaction();
    }

    /// The oldest LSN reads may ask for now (0 until GC has removed
    /// history).
    pub fn horizon(&self) -> Lsn {
        self.inner.version().map_or(0, |v| v.horizon())
    }

    /// Counters and sizes.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// A queue of up to `depth` gets in flight at once (1..=4096), on this
    /// thread: submit gets, reap them as their reads complete (one block
    /// read per get not in memory or the cache, submitted together on
    /// io_uring with registered buffers). It keeps the database's state
    /// alive, like a [`Snapshot`]. See [`ReadQueue`].
    pub fn read_queue(&self, depth: usize) -> Result<ReadQueue> {
        ReadQueue::new(Arc::clone(&self.inner), depth)
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Makes everything durable, stops the background thread and closes.
    /// Frozen layers not yet flushed stay as logs and are replayed at open.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.flush.shut_down();
        self.inner.compaction.shut_down();
        self.inner.pacer.stop();
        self.inner.stop_following();
        if let Some(t) = self.flush_thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.follow_thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.compact_thread.take() {
            let _ = t.join();
        }
        if self.inner.check_poisoned().is_err() {
            return self.inner.check_poisoned();
        }
        let lsn = self.inner.visible_lsn.load(Ordering::Acquire);
        self.inner.group_sync(lsn)?;
        self.inner.seal_open_log()?;
        // Last: no edit follows the manifest's seal.
        self.inner.versions.seal()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl Snapshot {
    /// The LSN the snapshot reads at.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// The value of `key` at the snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.get_at(key.as_ref(), self.lsn)
    }

    /// The live keys in `range` at the snapshot.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<Scan> {
        self.inner.scan_at(bounds(&range), self.lsn)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Ok(mut snaps) = self.inner.snapshots.lock() {
            if let Some(n) = snaps.get_mut(&self.lsn) {
                *n -= 1;
                if *n == 0 {
                    snaps.remove(&self.lsn);
                }
            }
        }
    }
}

fn bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(range: &R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let conv = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (conv(range.start_bound()), conv(range.end_bound()))
}

impl DbInner {
    fn check_poisoned(&self) -> Result<()> {
        self.versions.poison().check()
    }

    /// Poisons the database (see `version::set::Poison`) and wakes the
    /// writers waiting for a sync, so that they see it.
    fn poison(&self, e: &Error) {
        self.versions.poison().set(e);
        self.sync_cv.notify_all();
    }

    /// The version reads see now.
    fn version(&self) -> Result<Arc<Version>> {
        self.versions.current()
    }

    fn get_at(&self, key: &[u8], lsn: Lsn) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        self.point_lookups.fetch_add(1, Ordering::Relaxed);
        // A batch being written above the visible LSN is never seen in part.
        let lsn = lsn.min(self.visible_lsn.load(Ordering::Acquire));
        let version = self.version()?;
        check_horizon(&version, lsn)?;
        let point = PointKey::new(key);
        // The filter lines of every layer file this read may pass start
        // loading now, together, instead of one cache miss per layer in
        // turn while the walk below tests them.
        for layer in version.candidates(key, lsn) {
            if let Candidate::Disk(d) = layer {
                d.prefetch_filter(point);
            }
        }
        for layer in version.candidates(key, lsn) {
            let found = match layer {
                Candidate::Memory(m) => m.get(point, lsn)?,
                Candidate::Disk(d) if d.filter_rules_out(point) => continue,
                Candidate::Disk(d) => d.reader()?.get_point(point, lsn)?,
            };
            if let Some((_, kind, value)) = found {
                return version.value(key, kind, value);
            }
        }
        Ok(None)
    }

    fn multi_get_at<K: AsRef<[u8]>>(&self, keys: &[K], lsn: Lsn) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = vec![None; keys.len()];
        self.multi_get_each_at(keys, lsn, &mut |i, value| {
            out[i] = value;
            Ok(())
        })?;
        Ok(out)
    }

    /// The multi-key read: hands each key's value to `found(index, value)`
    /// as soon as it is known: keys the in-memory layers or the block cache
    /// answer first, then each key as its block read completes, and last
    /// the keys whose versions point into value files, their values read
    /// as one batch.
    fn multi_get_each_at<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        lsn: Lsn,
        found: &mut dyn FnMut(usize, Option<Vec<u8>>) -> Result<()>,
    ) -> Result<()> {
        let lsn = lsn.min(self.visible_lsn.load(Ordering::Acquire));
        let version = self.version()?;
        check_horizon(&version, lsn)?;
        for key in keys {
            check_key(key.as_ref())?;
        }
        self.point_lookups
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        let candidates: Vec<Vec<Candidate<'_>>> = keys
            .iter()
            .map(|k| version.candidates(k.as_ref(), lsn).collect())
            .collect();
        // Each key walks its candidates newest first, from `next[i]`;
        // `None` once its value was handed over. In-memory layers and cached
        // blocks answer at once; each round reads, for every key still
        // open, the block of the next layer file that may hold it, all in
        // one batch, and answers each key as its read completes (a bloom
        // false positive sends the key on to the next round).
        let mut next: Vec<Option<usize>> = vec![Some(0); keys.len()];
        let points: Vec<PointKey<'_>> = keys.iter().map(|k| PointKey::new(k.as_ref())).collect();
        // Keys answered by a pointer: their values are read last, all in
        // one batch (and never from inside a batch, whose io_uring ring a
        // read would enter again).
        let mut pointed: Vec<(usize, Vec<u8>)> = Vec::new();
        loop {
            let mut plans = Vec::new();
            for (i, &point) in points.iter().enumerate() {
                while let Some(at) = next[i] {
                    let answer = match candidates[i].get(at) {
                        None => Some(None),
                        Some(Candidate::Memory(m)) => match m.get(point, lsn)? {
                            Some((_, kind, v)) => Some(version.value(point.key, kind, v)?),
                            None => None,
                        },
                        Some(Candidate::Disk(d)) if d.filter_rules_out(point) => None,
                        Some(Candidate::Disk(d)) => {
                            let reader = d.reader()?;
                            match reader.point_read_plan(point, lsn) {
                                // A cached block answers now, without a read
                                // (looked up once: a lookup counts a hit).
                                Some((block, offset, len)) => match reader.cached_block(block) {
                                    Some(bytes) => match reader
                                        .get_in_cached_block(block, bytes, point.key, lsn)?
                                    {
                                        Some((_, ValueKind::Pointer, v)) => {
                                            next[i] = None;
                                            pointed.push((i, v));
                                            break;
                                        }
                                        Some((_, kind, v)) => {
                                            Some(version.value(point.key, kind, v)?)
                                        }
                                        None => None,
                                    },
                                    None => {
                                        plans.push((i, Arc::clone(&reader), block, offset, len));
                                        break;
                                    }
                                },
                                None => None,
                            }
                        }
                    };
                    match answer {
                        Some(value) => {
                            next[i] = None;
                            found(i, value)?;
                        }
                        None => next[i] = Some(at + 1),
                    }
                }
            }
            if plans.is_empty() {
                return self.read_pointed(&version, keys, pointed, found);
            }
            let reqs = plans
                .iter()
                .map(|(_, d, _, offset, len)| {
                    let len =
                        usize::try_from(*len).map_err(|_| InvalidInput::OptionOutOfRange {
                            option: "block length",
                            value: *len,
                            why: "larger than memory can address",
                        })?;
                    Ok((&*d.file().file, *offset, len))
                })
                .collect::<Result<Vec<ReadRequest<'_>>>>()?;
            self.layer_io
                .point_reads
                .fetch_add(reqs.len() as u64, Ordering::Relaxed);
            self.storage.read_batch_each(&reqs, &mut |p, bytes| {
                let (i, d, block, _, _) = &plans[p];
                match d.get_in_block(*block, bytes, keys[*i].as_ref(), lsn)? {
                    Some((_, ValueKind::Pointer, v)) => {
                        next[*i] = None;
                        pointed.push((*i, v));
                        Ok(())
                    }
                    Some((_, kind, v)) => {
                        next[*i] = None;
                        let key = keys[*i].as_ref();
                        found(*i, version.value(key, kind, v)?)
                    }
                    None => {
                        next[*i] = next[*i].map(|at| at + 1);
                        Ok(())
                    }
                }
            })?;
        }
    }

    /// The values `pointed` (key index, pointer) point at, read in one
    /// batch (one io_uring submission with `IoEngine::IoUring`), each
    /// checked against its pointer and handed to `found` as its read
    /// completes; one that fails its check is read again alone after the
    /// batch, and that reading stands.
    fn read_pointed<K: AsRef<[u8]>>(
        &self,
        version: &Version,
        keys: &[K],
        pointed: Vec<(usize, Vec<u8>)>,
        found: &mut dyn FnMut(usize, Option<Vec<u8>>) -> Result<()>,
    ) -> Result<()> {
        let mut batch = Vec::with_capacity(pointed.len());
        for (i, v) in pointed {
            let key = keys[i].as_ref();
            let file = ValuePointer::decode(&v)
                .and_then(|p| Some((version.values.get(&p.file_id)?, p)))
                .filter(|(f, p)| f.request(key, p).is_some());
            match file {
                Some((f, p)) => batch.push((i, Arc::clone(f), p)),
                // Not a pointer, into no listed file or past its end: the
                // read alone names what is wrong.
                None => found(i, version.value(key, ValueKind::Pointer, v)?)?,
            }
        }
        // One value: read alone, checked in the read's bounce buffer and
        // copied out once (a batch of one would copy it twice: 1 MiB
        // values read at half the speed).
        if let [(i, f, p)] = batch.as_slice() {
            return found(*i, Some(f.read(keys[*i].as_ref(), p)?));
        }
        let reqs: Vec<ReadRequest<'_>> = batch
            .iter()
            .filter_map(|(i, f, p)| f.request(keys[*i].as_ref(), p))
            .collect();
        let mut again = Vec::new();
        self.storage.read_batch_each(&reqs, &mut |r, mut bytes| {
            let (i, f, p) = &batch[r];
            let key = keys[*i].as_ref();
            match f.check(&bytes, key, p) {
                Ok(value) => {
                    // The value is the bytes' tail (all of them, out of
                    // line): moved to the front in place, not copied into
                    // a second allocation.
                    let head = bytes.len() - value.len();
                    bytes.drain(..head);
                    found(*i, Some(bytes))
                }
                Err(e) if e.is_corruption() => {
                    again.push(r);
                    Ok(())
                }
                Err(e) => Err(e),
            }
        })?;
        for r in again {
            let (i, f, p) = &batch[r];
            found(*i, Some(f.read_again(keys[*i].as_ref(), p)?))?;
        }
        Ok(())
    }

    fn scan_at(&self, (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>), lsn: Lsn) -> Result<Scan> {
        let lsn = lsn.min(self.visible_lsn.load(Ordering::Acquire));
        let version = self.version()?;
        check_horizon(&version, lsn)?;
        let (s, e) = (as_ref(&start), as_ref(&end));
        let span = Span::of_range(s, e);
        let mut sources = Vec::new();
        let disk = |d: &Arc<Layer>, masks| -> Result<Source> {
            let iter = d
                .reader()?
                .range_owned(s, e)?
                .with_readahead(SCAN_READAHEAD_BYTES);
            Ok(Source::Delta(Box::new(DeltaSource::new(iter, lsn, masks))))
        };
        for layer in version.upper(lsn, move |l| l.keys().meets(&span)) {
            sources.push(match layer {
                Candidate::Memory(m) => Source::Memory(m.range_at(s, e, lsn)?.into_iter()),
                Candidate::Disk(d) => disk(d, Vec::new())?,
            });
        }
        for (layer, masks) in version.run_layers(span, lsn) {
            sources.push(disk(layer, masks)?);
        }
        Ok(Scan::new(sources, Arc::clone(&version)))
    }
}

/// The value files `files` names (id, bytes), opened for reads; one
/// shorter than its listed bytes is corruption naming it.
fn open_value_files(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    files: impl Iterator<Item = (u64, u64)>,
    log_opts: &FileOptions,
    stats: &IoStats,
) -> Result<Vec<Arc<crate::value::ValueFile>>> {
    let mut out = Vec::new();
    for (id, bytes) in files {
        let path = dir.join(log_name(id));
        let file = storage.open(&path, log_opts, stats)?;
        let len = file.len()?;
        if len < bytes {
            return Err(crate::error::Corruption::new(
                &path,
                len,
                format!("the value file ends at {len}, the manifest says it holds {bytes} bytes"),
            )
            .into());
        }
        out.push(Arc::new(crate::value::ValueFile::new(
            id,
            bytes,
            file,
            stats.clone(),
            Arc::clone(storage),
        )));
    }
    Ok(out)
}
