//! `Db`: the engine. Owns the write path (LSN assignment, the open in-memory
//! layer, group commit, freezing), the layer set that reads see, the flush of
//! frozen layers to L0 delta layers, recovery at open, and the manifest.
//!
//! Locks, always taken in this order: `write` (one writer at a time: LSN
//! order = log order) → `layers` (brief: swap or clone the layer set) →
//! `manifest`. `sync` (group commit state) is never held while taking
//! another lock. `flush_lock` serializes flushes (background thread and
//! `flush()`); a flush takes `layers` and `manifest` briefly.
//!
//! Invariants: LSNs are strictly increasing; `visible_lsn` is the highest LSN
//! whose whole batch is indexed (reads at "latest" use it, so a batch is
//! seen whole or not at all); layers in a `LayerSet` cover disjoint LSN
//! ranges, newest last; a log is deleted only after the delta layer holding
//! its data is durable and listed in a durable manifest; after any write or
//! sync error the database is poisoned and refuses writes (it cannot know
//! what reached the disk), reads still work.

use crate::batch::WriteBatch;
use crate::error::{Error, InvalidInput, Result};
use crate::io::{
    AlignedBuf, BufferedWriter, EntryKind, FileClass, FileOptions, IoMode, IoStats,
    IoStatsSnapshot, OsStorage, ReadRequest, ShutdownMode, Storage, StorageFile, StorageLock,
};
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::delta::writer::DeltaLayerWriter;
use crate::layer::delta::{LayerSink, Lsn, ReadAt, ValueKind};
use crate::layer::inmemory::InMemoryLayer;
use crate::log::record::{
    decode_log_header, encode_log_header, PrevLog, LOG_HEADER_BYTES, LOG_SECTOR_BYTES,
};
use crate::log::replay::{replay, ReplayedLog};
use crate::manifest::{
    delta_name, is_own_file, log_name, Manifest, MANIFEST_NAME, MANIFEST_TMP_NAME,
};
use crate::options::{Options, WriteOptions};
use crate::read::{DeltaSource, Scan, Source};
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;

const LOCK_NAME: &str = "LOCK";
/// Tries of one layer's flush before its error poisons the database: the
/// second at once, the third after `FLUSH_RETRY_DELAY`.
const FLUSH_ATTEMPTS: u32 = 3;
const FLUSH_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(10);

/// A finished layer file read through the io layer: exact length, any
/// offset (the io layer widens O_DIRECT reads to the alignment).
pub(crate) struct LayerFile {
    file: Arc<dyn StorageFile>,
    len: u64,
}

impl ReadAt for LayerFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.file.read_range(offset, len)
    }
    fn file_len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        self.file.path()
    }
}

impl LayerSink for BufferedWriter<dyn StorageFile> {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.write(bytes)
    }
}

struct DeltaLayer {
    reader: Arc<DeltaLayerReader<LayerFile>>,
}

/// The layers reads see, replaced whole (copy on write).
#[derive(Clone)]
struct LayerSet {
    open: Arc<InMemoryLayer>,
    /// Frozen in-memory layers, oldest first.
    frozen: Vec<Arc<InMemoryLayer>>,
    /// Delta layers, oldest first.
    deltas: Vec<Arc<DeltaLayer>>,
}

struct WriteState {
    last_lsn: Lsn,
}

#[derive(Default)]
struct SyncState {
    synced_lsn: Lsn,
    leader_active: bool,
}

#[derive(Default)]
struct FlushSignal {
    pending: bool,
    shutdown: bool,
}

struct DbInner {
    dir: PathBuf,
    /// Every operating-system call goes through it.
    storage: Arc<dyn Storage>,
    opts: Options,
    log_opts: FileOptions,
    delta_opts: FileOptions,
    stats: IoStats,
    write: Mutex<WriteState>,
    layers: RwLock<Arc<LayerSet>>,
    visible_lsn: AtomicU64,
    sync: Mutex<SyncState>,
    sync_cv: Condvar,
    manifest: Mutex<Manifest>,
    flush_lock: Mutex<()>,
    flush_signal: Mutex<FlushSignal>,
    flush_cv: Condvar,
    poisoned: Mutex<Option<String>>,
    snapshots: Mutex<BTreeMap<Lsn, usize>>,
    closed: AtomicBool,
}

/// An open database. `Send + Sync`: share it (e.g. in an `Arc`) between
/// threads; writes are serialized inside, reads run in parallel.
pub struct Db {
    inner: Arc<DbInner>,
    flush_thread: Option<JoinHandle<()>>,
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

/// What `Db::stats` reports.
#[derive(Debug, Clone)]
pub struct Stats {
    /// The newest LSN written.
    pub last_lsn: Lsn,
    /// The io mode in effect (Buffered after a fallback).
    pub io_mode: IoMode,
    /// Bytes of the open in-memory layer's log.
    pub open_layer_bytes: u64,
    /// Frozen in-memory layers waiting for their flush.
    pub frozen_layers: usize,
    /// L0 delta layers.
    pub delta_layers: usize,
    /// Bytes of the delta layer files.
    pub delta_bytes: u64,
    /// Memory of in-memory indexes, delta block indexes and bloom filters.
    pub index_memory_bytes: usize,
    /// Operations and bytes by kind and file class, since open.
    pub io: IoStatsSnapshot,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::Poisoned("a thread panicked holding an engine lock".into()))
}

fn check_key(key: &[u8]) -> Result<()> {
    Ok(crate::options::check_key(key)?)
}

impl Db {
    /// Opens the database in `path`, creating it if the directory is missing
    /// or empty (and `create_if_missing`). Replays the logs of layers that
    /// were not flushed; removes files the manifest does not list.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let opts = opts.with_env_overrides()?;
        opts.validate()?;
        let dir = path.as_ref().to_owned();
        let storage: Arc<dyn Storage> = match &opts.storage {
            Some(storage) => Arc::clone(storage),
            None => Arc::new(OsStorage),
        };
        prepare_dir(&*storage, &dir, &opts)?;
        check_is_database(&*storage, &dir, &opts)?;
        // Locked before any file of the database is read or written.
        let lock = storage.lock(&dir.join(LOCK_NAME))?;
        let manifest = load_or_create_manifest(&*storage, &dir)?;
        let stats = IoStats::new();
        let base = FileOptions {
            mode: opts.io_mode,
            engine: opts.io_engine,
            fallback_to_buffered: opts.fallback_to_buffered,
            alignment_bytes: opts.alignment_bytes,
            class: FileClass::Log,
        };
        let log_opts = base.clone();
        let delta_opts = FileOptions {
            class: FileClass::Delta,
            ..base
        };

        // Garbage: own files the manifest does not list.
        let listed: std::collections::HashSet<String> = manifest
            .logs
            .iter()
            .map(|&id| log_name(id))
            .chain(manifest.deltas.iter().map(|&id| delta_name(id)))
            .collect();
        for entry in storage.list_dir(&dir)? {
            let name = entry.to_string_lossy().into_owned();
            if is_own_file(&name) && !listed.contains(&name) {
                storage.remove_file(&dir.join(&entry))?;
            }
        }

        let mut last_lsn = 0;
        let mut deltas = Vec::with_capacity(manifest.deltas.len());
        for &id in &manifest.deltas {
            let path = dir.join(delta_name(id));
            let file = storage.open(&path, &delta_opts, &stats)?;
            let len = file.len()?;
            let reader = DeltaLayerReader::open(LayerFile { file, len })?;
            last_lsn = last_lsn.max(reader.summary().lsn_max);
            deltas.push(Arc::new(DeltaLayer {
                reader: Arc::new(reader),
            }));
        }
        let mut frozen = Vec::new();
        let mut manifest = manifest;
        let mut empty_logs = Vec::new();
        // Each log's header says where the log before it was sealed: read
        // the headers first, so each log is replayed knowing its claim.
        let mut files = Vec::with_capacity(manifest.logs.len());
        for &id in &manifest.logs {
            let path = dir.join(log_name(id));
            let file = storage.open(&path, &log_opts, &stats)?;
            let len = file.len()?;
            let header = file.read_range(0, LOG_HEADER_BYTES.min(len as usize))?;
            let header = decode_log_header(&path, &header)?;
            files.push((id, path, file, header));
        }
        let mut newest: Option<PrevLog> = None;
        for (i, (id, path, file, _)) in files.iter().enumerate() {
            let id = *id;
            let sealed = files
                .get(i + 1)
                .and_then(|(_, _, _, next)| next.prev)
                .filter(|p| p.file_id == id);
            let (log, bytes) = replay_log(&**file, id, sealed)?;
            newest = Some(PrevLog {
                file_id: id,
                end: log.end_offset,
                last_lsn: log.last_lsn,
            });
            if log.records.is_empty() {
                empty_logs.push(id);
                continue;
            }
            // What was replayed may have reached only the page cache before a
            // crash: make it durable before newer writes can be, so a power
            // loss later cannot leave a hole below them.
            file.sync_data()?;
            let layer = InMemoryLayer::from_replay(id, Arc::clone(file), &log, &bytes)?;
            let (lsn_min, lsn_max) = layer.lsn_range();
            if lsn_min <= last_lsn {
                return Err(crate::error::Corruption::new(
                    path,
                    LOG_HEADER_BYTES as u64,
                    format!(
                        "log starts at LSN {lsn_min}, not after the LSN {last_lsn} of older layers"
                    ),
                )
                .into());
            }
            last_lsn = lsn_max;
            frozen.push(Arc::new(layer));
        }
        drop(files);
        manifest.logs.retain(|id| !empty_logs.contains(id));

        // The new log claims the newest replayed one as it was found: from
        // now on, its end is known, and damage before it is corruption.
        let open = create_log(
            &*storage,
            &dir,
            &log_opts,
            opts.writer_buffer_bytes,
            &stats,
            &mut manifest,
            newest,
        )?;
        let inner = DbInner {
            dir: dir.clone(),
            storage: Arc::clone(&storage),
            opts: opts.clone(),
            log_opts,
            delta_opts,
            stats,
            write: Mutex::new(WriteState { last_lsn }),
            layers: RwLock::new(Arc::new(LayerSet {
                open,
                frozen,
                deltas,
            })),
            visible_lsn: AtomicU64::new(last_lsn),
            sync: Mutex::new(SyncState {
                synced_lsn: last_lsn,
                leader_active: false,
            }),
            sync_cv: Condvar::new(),
            manifest: Mutex::new(manifest),
            flush_lock: Mutex::new(()),
            flush_signal: Mutex::new(FlushSignal::default()),
            flush_cv: Condvar::new(),
            poisoned: Mutex::new(None),
            snapshots: Mutex::new(BTreeMap::new()),
            closed: AtomicBool::new(false),
        };
        for id in empty_logs {
            let _ = storage.remove_file(&dir.join(log_name(id)));
        }
        let inner = Arc::new(inner);
        let flush_thread = if opts.background_flush {
            let bg = Arc::clone(&inner);
            Some(
                std::thread::Builder::new()
                    .name("strata-flush".into())
                    .spawn(move || bg.flush_loop())
                    .map_err(|e| Error::io(&dir, "spawn flush thread", e))?,
            )
        } else {
            None
        };
        let db = Db {
            inner,
            flush_thread,
            _lock: lock,
        };
        db.inner.signal_flush();
        Ok(db)
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

    /// Counters and sizes.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
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
        if let Ok(mut s) = self.inner.flush_signal.lock() {
            s.shutdown = true;
        }
        self.inner.flush_cv.notify_all();
        if let Some(t) = self.flush_thread.take() {
            let _ = t.join();
        }
        if self.inner.check_poisoned().is_err() {
            return self.inner.check_poisoned();
        }
        let lsn = self.inner.visible_lsn.load(Ordering::Acquire);
        self.inner.group_sync(lsn)?;
        self.inner.seal_open_log()
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

/// Creates a new log with its header durable, lists it in the manifest
/// (stored durably before the log takes a record), and returns its open
/// layer. `prev`: the log before it, already durable and sealed, whose end
/// the header claims.
fn create_log(
    storage: &dyn Storage,
    dir: &Path,
    log_opts: &FileOptions,
    writer_buffer_bytes: usize,
    stats: &IoStats,
    m: &mut Manifest,
    prev: Option<PrevLog>,
) -> Result<Arc<InMemoryLayer>> {
    let id = m.next_file_id;
    let path = dir.join(log_name(id));
    let file = storage.create(&path, log_opts, stats)?;
    let mut writer = BufferedWriter::with_shared(file, writer_buffer_bytes, 0)?;
    writer.write(&encode_log_header(id, prev))?;
    writer.sync()?;
    storage.sync_dir(dir)?;
    let mut next = m.clone();
    next.next_file_id = id + 1;
    next.logs.push(id);
    next.store(storage, dir, stats)?;
    *m = next;
    Ok(Arc::new(InMemoryLayer::new_open(id, writer)))
}

/// The first `len` bytes of `file` in one aligned read, without the copy a
/// `read_range` makes (logs are read whole by recovery and by the flush).
fn read_whole(file: &dyn StorageFile, len: u64) -> Result<AlignedBuf> {
    let len = usize::try_from(len).map_err(|_| InvalidInput::OptionOutOfRange {
        option: "log length",
        value: len,
        why: "larger than memory can address",
    })?;
    let mut buf = AlignedBuf::zeroed(len, file.alignment());
    let n = file.read_at(buf.spare_capacity_full(), 0)?;
    if n < len {
        return Err(crate::io::short_read(
            file.path(),
            format!("the file ends at {n}, expected {len}"),
        ));
    }
    buf.set_len(len);
    Ok(buf)
}

/// Replays the log in `file` (see [`replay`]) and returns it with its
/// bytes. A read can return other bytes than those stored; so when the
/// replay fails, or stops before the end of the file, the bytes from where
/// it stopped are read again: if they differ, the first read was wrong and
/// the whole log is read and replayed again; the second result stands.
fn replay_log(
    file: &dyn StorageFile,
    id: u64,
    sealed: Option<PrevLog>,
) -> Result<(ReplayedLog, AlignedBuf)> {
    let len = file.len()?;
    let bytes = read_whole(file, len)?;
    match replay(file.path(), &bytes, id, sealed) {
        Ok(log) if log.end_offset == len => return Ok((log, bytes)),
        Ok(log) => {
            let from = log.end_offset / LOG_SECTOR_BYTES * LOG_SECTOR_BYTES;
            let tail = file.read_range(from, (len - from) as usize)?;
            if tail[..] == bytes[from as usize..] {
                return Ok((log, bytes));
            }
        }
        Err(e) if e.is_corruption() => {}
        Err(e) => return Err(e),
    }
    let bytes = read_whole(file, len)?;
    let log = replay(file.path(), &bytes, id, sealed)?;
    Ok((log, bytes))
}

/// Checks that `dir` is a directory, creating it (and its missing
/// parents, durably) if it is missing and the options allow.
fn prepare_dir(storage: &dyn Storage, dir: &Path, opts: &Options) -> Result<()> {
    match storage.entry_kind(dir)? {
        Some(EntryKind::File) => {
            return Err(Error::NotADatabase {
                path: dir.to_owned(),
                why: "it is not a directory".into(),
            })
        }
        Some(EntryKind::Dir) => {}
        None if opts.create_if_missing => {
            // Every directory created here is an entry in its parent: sync
            // each parent from the new directory up to the first one that
            // existed, or a power loss can take the database whole.
            let parent_of = |p: &Path| -> PathBuf {
                match p.parent() {
                    Some(q) if !q.as_os_str().is_empty() => q.to_owned(),
                    _ => PathBuf::from("."),
                }
            };
            let mut created = vec![dir.to_owned()];
            let mut top = parent_of(dir);
            while storage.entry_kind(&top)?.is_none() && top.parent().is_some() {
                created.push(top.clone());
                top = parent_of(&top);
            }
            storage.create_dir_all(dir)?;
            for d in &created {
                storage.sync_dir(&parent_of(d))?;
            }
        }
        None => {
            return Err(Error::io(
                dir,
                "open directory",
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
            ))
        }
    }
    Ok(())
}

/// Refuses a directory that is not a database, before anything is written
/// in it (not even the lock file): one without a manifest that is not empty,
/// or without a manifest when it may not be created.
fn check_is_database(storage: &dyn Storage, dir: &Path, opts: &Options) -> Result<()> {
    let names = storage.list_dir(dir)?;
    if names.iter().any(|n| n.as_os_str() == MANIFEST_NAME) {
        return Ok(());
    }
    // A MANIFEST.tmp without a MANIFEST is a creation that failed before
    // its rename: nothing was ever stored, so it is not foreign.
    let foreign = names
        .iter()
        .any(|name| name.as_os_str() != LOCK_NAME && name.as_os_str() != MANIFEST_TMP_NAME);
    if foreign {
        return Err(Error::NotADatabase {
            path: dir.to_owned(),
            why: format!("it has no {MANIFEST_NAME} and is not empty"),
        });
    }
    if !opts.create_if_missing {
        return Err(Error::NotADatabase {
            path: dir.to_owned(),
            why: format!("it has no {MANIFEST_NAME}"),
        });
    }
    Ok(())
}

/// Loads the manifest of `dir` (locked by the caller, and checked by
/// [`check_is_database`]), or creates the first one.
fn load_or_create_manifest(storage: &dyn Storage, dir: &Path) -> Result<Manifest> {
    if let Some(m) = Manifest::load(storage, dir)? {
        return Ok(m);
    }
    let m = Manifest {
        next_file_id: 1,
        logs: Vec::new(),
        deltas: Vec::new(),
    };
    m.store(storage, dir, &IoStats::new())?;
    Ok(m)
}

impl DbInner {
    fn check_poisoned(&self) -> Result<()> {
        match lock(&self.poisoned)?.as_ref() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    fn poison(&self, e: &Error) {
        if let Ok(mut p) = self.poisoned.lock() {
            p.get_or_insert_with(|| e.to_string());
        }
        self.sync_cv.notify_all();
    }

    fn layer_set(&self) -> Result<Arc<LayerSet>> {
        Ok(Arc::clone(&*self.layers.read().map_err(|_| {
            Error::Poisoned("layers lock poisoned".into())
        })?))
    }

    fn update_layers(&self, f: impl FnOnce(&mut LayerSet)) -> Result<()> {
        let mut guard = self
            .layers
            .write()
            .map_err(|_| Error::Poisoned("layers lock poisoned".into()))?;
        let mut set = (**guard).clone();
        f(&mut set);
        *guard = Arc::new(set);
        Ok(())
    }

    fn write(
        &self,
        batch: &WriteBatch,
        explicit_lsn: Option<Lsn>,
        opts: WriteOptions,
    ) -> Result<Lsn> {
        if let Some(invalid) = &batch.invalid {
            return Err(invalid.clone().into());
        }
        if batch.value_len_max > self.opts.value_size_bytes_max {
            return Err(InvalidInput::ValueTooLarge {
                len: batch.value_len_max,
                max: self.opts.value_size_bytes_max,
            }
            .into());
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let lsn = {
            let mut ws = lock(&self.write)?;
            self.check_poisoned()?;
            let lsn = match explicit_lsn {
                Some(lsn) if lsn <= ws.last_lsn => {
                    return Err(InvalidInput::LsnNotIncreasing {
                        lsn,
                        last: ws.last_lsn,
                    }
                    .into())
                }
                Some(lsn) => lsn,
                None => ws
                    .last_lsn
                    .checked_add(1)
                    .ok_or(InvalidInput::LsnExhausted)?,
            };
            let open = Arc::clone(&self.layer_set()?.open);
            if let Err(e) = open.append(batch, lsn) {
                self.poison(&e);
                return Err(e);
            }
            ws.last_lsn = lsn;
            self.visible_lsn.store(lsn, Ordering::Release);
            // From here the batch is applied: an error may no longer say
            // "not written". A failed freeze poisons the database; for an
            // unsynced write that is the same as a crash before the next
            // sync, so only a synced write reports it (as NotDurable).
            if open.size_bytes() >= self.opts.layer_size_bytes_max {
                if let Err(e) = self.freeze_locked(&mut ws) {
                    if opts.sync {
                        return Err(Error::NotDurable {
                            lsn,
                            source: Box::new(e),
                        });
                    }
                }
            }
            lsn
        };
        if opts.sync {
            self.group_sync(lsn).map_err(|e| Error::NotDurable {
                lsn,
                source: Box::new(e),
            })?;
        }
        // The batch is applied (and durable if asked): a failure while
        // waiting out the flush backlog poisons the database and is reported
        // by the next call, not as a failure of this write.
        let _ = self.wait_for_flush_backlog();
        Ok(lsn)
    }

    /// Group commit: one thread (the leader) writes the log's tail out and
    /// syncs it for everyone waiting; the others wait for it.
    fn group_sync(&self, lsn: Lsn) -> Result<()> {
        let mut st = lock(&self.sync)?;
        loop {
            if st.synced_lsn >= lsn {
                return Ok(());
            }
            self.check_poisoned()?;
            if st.leader_active {
                st = self
                    .sync_cv
                    .wait(st)
                    .map_err(|_| Error::Poisoned("sync lock poisoned".into()))?;
                continue;
            }
            st.leader_active = true;
            drop(st);
            let result = self.sync_open_log();
            st = lock(&self.sync)?;
            st.leader_active = false;
            match result {
                Ok(target) => st.synced_lsn = st.synced_lsn.max(target),
                Err(e) => {
                    drop(st);
                    self.poison(&e);
                    return Err(e);
                }
            }
            self.sync_cv.notify_all();
        }
    }

    /// Makes the open log durable; returns the LSN it covers.
    fn sync_open_log(&self) -> Result<Lsn> {
        let (target, open) = {
            let ws = lock(&self.write)?;
            (ws.last_lsn, Arc::clone(&self.layer_set()?.open))
        };
        if !open.sync_log(false)? && !open.is_durable() {
            return Err(Error::Poisoned(format!(
                "{}: frozen without being made durable (its freeze failed)",
                open.path().display()
            )));
        }
        Ok(target)
    }

    /// At close, after the last sync: a pad record that claims the whole
    /// log durable, synced, so that damage to the log's last records is
    /// found as corruption at the next open, not taken for a torn tail.
    fn seal_open_log(&self) -> Result<()> {
        let open = Arc::clone(&self.layer_set()?.open);
        if open.is_empty() {
            return Ok(());
        }
        let result = open.sync_log(true).map(|_| ());
        if let Err(e) = &result {
            self.poison(e);
        }
        result
    }

    fn note_synced(&self, lsn: Lsn) {
        if let Ok(mut st) = self.sync.lock() {
            st.synced_lsn = st.synced_lsn.max(lsn);
        }
        self.sync_cv.notify_all();
    }

    /// Freezes the open layer; the caller holds the write lock.
    fn freeze_locked(&self, ws: &mut WriteState) -> Result<()> {
        let open = Arc::clone(&self.layer_set()?.open);
        if open.is_empty() {
            return Ok(());
        }
        let result = (|| {
            open.freeze()?;
            self.note_synced(ws.last_lsn);
            let next = self.create_log(Some(open.sealed_claim()))?;
            self.update_layers(|set| {
                set.frozen.push(Arc::clone(&set.open));
                set.open = next;
            })
        })();
        if let Err(e) = &result {
            self.poison(e);
        }
        result?;
        self.signal_flush();
        Ok(())
    }

    /// Creates a new log (see [`create_log`]).
    fn create_log(&self, prev: Option<PrevLog>) -> Result<Arc<InMemoryLayer>> {
        let mut m = lock(&self.manifest)?;
        create_log(
            &*self.storage,
            &self.dir,
            &self.log_opts,
            self.opts.writer_buffer_bytes,
            &self.stats,
            &mut m,
            prev,
        )
    }

    fn signal_flush(&self) {
        if let Ok(mut s) = self.flush_signal.lock() {
            s.pending = true;
        }
        self.flush_cv.notify_all();
    }

    fn flush_loop(&self) {
        loop {
            {
                let Ok(mut s) = self.flush_signal.lock() else {
                    return;
                };
                while !s.pending && !s.shutdown {
                    s = match self.flush_cv.wait(s) {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                }
                if s.shutdown {
                    return;
                }
                s.pending = false;
            }
            if let Err(e) = self.flush_pending(true) {
                self.poison(&e);
                self.flush_cv.notify_all();
                return;
            }
        }
    }

    fn shutting_down(&self) -> bool {
        self.flush_signal.lock().map_or(true, |s| s.shutdown)
    }

    /// Flushes frozen layers, oldest first, until none is left (or, for the
    /// background thread, until the database closes: the rest stay as logs
    /// and are replayed at the next open). Wakes writers stalled on the
    /// backlog after each layer.
    fn flush_pending(&self, stop_at_shutdown: bool) -> Result<()> {
        let _guard = lock(&self.flush_lock)?;
        loop {
            self.check_poisoned()?;
            if stop_at_shutdown && self.shutting_down() {
                return Ok(());
            }
            let Some(layer) = self.layer_set()?.frozen.first().cloned() else {
                return Ok(());
            };
            // A failed flush changed nothing the database relies on (the
            // log stays listed until the manifest says otherwise, and a
            // partial delta file is garbage), so it is tried again: a
            // one-off I/O error or a read that came back wrong passes.
            let mut attempt = 1;
            while let Err(e) = self.flush_one(&layer) {
                let transient = matches!(e, Error::Io { .. } | Error::Corruption(_));
                if !transient || attempt == FLUSH_ATTEMPTS {
                    self.poison(&e);
                    return Err(e);
                }
                std::thread::sleep(FLUSH_RETRY_DELAY * (attempt - 1));
                attempt += 1;
            }
            self.flush_cv.notify_all();
        }
    }

    /// Write stall: while more than `frozen_layers_max` frozen layers wait
    /// for their flush, a writer waits (or, without a background thread,
    /// flushes them itself), so memory and unflushed logs stay bounded.
    fn wait_for_flush_backlog(&self) -> Result<()> {
        let backlog = || self.layer_set().map(|set| set.frozen.len());
        if backlog()? <= self.opts.frozen_layers_max {
            return Ok(());
        }
        if !self.opts.background_flush {
            return self.flush_pending(false);
        }
        let mut s = lock(&self.flush_signal)?;
        while backlog()? > self.opts.frozen_layers_max && !s.shutdown {
            self.check_poisoned()?;
            s.pending = true;
            self.flush_cv.notify_all();
            s = self
                .flush_cv
                .wait_timeout(s, std::time::Duration::from_millis(50))
                .map_err(|_| Error::Poisoned("flush signal lock poisoned".into()))?
                .0;
        }
        Ok(())
    }

    /// Writes a frozen layer out as an L0 delta layer, lists it in the
    /// manifest instead of the log, and deletes the log.
    fn flush_one(&self, layer: &Arc<InMemoryLayer>) -> Result<()> {
        let bytes = read_whole(&**layer.file(), layer.size_bytes())?;
        // Every record the flush copies is checked first (record and entry
        // checksums, LSN order): a byte that rotted in the log since it was
        // written must not be sealed into a delta layer under fresh,
        // valid checksums.
        replay(
            layer.path(),
            &bytes,
            layer.file_id,
            Some(layer.sealed_claim()),
        )?;
        let id = {
            let mut m = lock(&self.manifest)?;
            let id = m.next_file_id;
            m.next_file_id += 1;
            id
        };
        let path = self.dir.join(delta_name(id));
        let written = (|| -> Result<DeltaLayerReader<LayerFile>> {
            let file = self.storage.create(&path, &self.delta_opts, &self.stats)?;
            let sink = BufferedWriter::with_shared(file, self.opts.writer_buffer_bytes, 0)?;
            let mut writer = DeltaLayerWriter::new(sink, self.opts.delta_block_bytes)?;
            layer.for_each_version(|key, v| {
                let start = v.offset as usize;
                let value = bytes.get(start..start + v.len as usize).ok_or_else(|| {
                    crate::error::Corruption::new(
                        layer.path(),
                        v.offset,
                        "indexed value past the end of the log",
                    )
                })?;
                writer.add(
                    key,
                    v.lsn,
                    v.kind,
                    if v.kind == ValueKind::Delete {
                        &[]
                    } else {
                        value
                    },
                )
            })?;
            let (sink, summary) = writer.finish()?;
            let file = sink.finish(ShutdownMode::PadThenTruncate)?;
            file.sync_data()?;
            self.storage.sync_dir(&self.dir)?;
            let reader = DeltaLayerReader::open(LayerFile {
                file,
                len: summary.file_bytes,
            })?;
            Ok(reader)
        })();
        // Not listed anywhere yet: a failed attempt leaves no file behind.
        let reader = written.inspect_err(|_| {
            let _ = self.storage.remove_file(&path);
        })?;
        {
            let mut m = lock(&self.manifest)?;
            let mut next = m.clone();
            next.deltas.push(id);
            next.logs.retain(|&l| l != layer.file_id);
            next.store(&*self.storage, &self.dir, &self.stats)?;
            *m = next;
        }
        let delta = Arc::new(DeltaLayer {
            reader: Arc::new(reader),
        });
        self.update_layers(|set| {
            set.frozen.retain(|f| !Arc::ptr_eq(f, layer));
            set.deltas.push(delta);
        })?;
        // The flush is done: a log the manifest no longer lists is garbage
        // that the next open removes if this fails.
        let _ = self.storage.remove_file(layer.path());
        Ok(())
    }

    fn get_at(&self, key: &[u8], lsn: Lsn) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        // A batch being written above the visible LSN is never seen in part.
        let lsn = lsn.min(self.visible_lsn.load(Ordering::Acquire));
        let set = self.layer_set()?;
        let found = |kind: ValueKind, value: Vec<u8>| match kind {
            ValueKind::Put => Some(value),
            ValueKind::Delete => None,
        };
        for layer in std::iter::once(&set.open).chain(set.frozen.iter().rev()) {
            if let Some((_, kind, value)) = layer.get(key, lsn)? {
                return Ok(found(kind, value));
            }
        }
        for delta in set.deltas.iter().rev() {
            if delta.reader.summary().lsn_min > lsn {
                continue;
            }
            if let Some((_, kind, value)) = delta.reader.get(key, lsn)? {
                return Ok(found(kind, value));
            }
        }
        Ok(None)
    }

    fn multi_get_at<K: AsRef<[u8]>>(&self, keys: &[K], lsn: Lsn) -> Result<Vec<Option<Vec<u8>>>> {
        let lsn = lsn.min(self.visible_lsn.load(Ordering::Acquire));
        let set = self.layer_set()?;
        let value = |kind: ValueKind, value: Vec<u8>| (kind == ValueKind::Put).then_some(value);
        let mut out: Vec<Option<Option<Vec<u8>>>> = vec![None; keys.len()];
        for (i, key) in keys.iter().enumerate() {
            check_key(key.as_ref())?;
            for layer in std::iter::once(&set.open).chain(set.frozen.iter().rev()) {
                if let Some((_, kind, v)) = layer.get(key.as_ref(), lsn)? {
                    out[i] = Some(value(kind, v));
                    break;
                }
            }
        }
        // Deltas, newest first; each round reads, for every key still open,
        // the block of the next delta that may hold it (a bloom false
        // positive sends the key on to an older delta in the next round).
        let deltas: Vec<&Arc<DeltaLayer>> = set
            .deltas
            .iter()
            .rev()
            .filter(|d| d.reader.summary().lsn_min <= lsn)
            .collect();
        let mut next_delta = vec![0usize; keys.len()];
        loop {
            let mut plans = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                while out[i].is_none() {
                    let Some(delta) = deltas.get(next_delta[i]) else {
                        out[i] = Some(None);
                        break;
                    };
                    if let Some((block, offset, len)) =
                        delta.reader.point_read_plan(key.as_ref(), lsn)
                    {
                        plans.push((i, next_delta[i], block, offset, len));
                        break;
                    }
                    next_delta[i] += 1;
                }
            }
            if plans.is_empty() {
                break;
            }
            let reqs = plans
                .iter()
                .map(|&(_, d, _, offset, len)| {
                    let len = usize::try_from(len).map_err(|_| InvalidInput::OptionOutOfRange {
                        option: "block length",
                        value: len,
                        why: "larger than memory can address",
                    })?;
                    Ok((&*deltas[d].reader.file().file, offset, len))
                })
                .collect::<Result<Vec<ReadRequest<'_>>>>()?;
            let blocks = self.storage.read_batch(&reqs)?;
            for ((i, d, block, _, _), bytes) in plans.into_iter().zip(blocks) {
                match deltas[d]
                    .reader
                    .get_in_block(block, bytes, keys[i].as_ref(), lsn)?
                {
                    Some((_, kind, v)) => out[i] = Some(value(kind, v)),
                    None => next_delta[i] += 1,
                }
            }
        }
        Ok(out.into_iter().map(|v| v.flatten()).collect())
    }

    fn scan_at(&self, (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>), lsn: Lsn) -> Result<Scan> {
        let lsn = lsn.min(self.visible_lsn.load(Ordering::Acquire));
        let set = self.layer_set()?;
        fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
            match b {
                Bound::Included(k) => Bound::Included(k.as_slice()),
                Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        let (s, e) = (as_ref(&start), as_ref(&end));
        let mut sources = Vec::new();
        for layer in std::iter::once(&set.open).chain(set.frozen.iter().rev()) {
            sources.push(Source::Memory(layer.range_at(s, e, lsn)?.into_iter()));
        }
        for delta in set.deltas.iter().rev() {
            if delta.reader.summary().lsn_min > lsn {
                continue;
            }
            sources.push(Source::Delta(Box::new(DeltaSource {
                iter: delta.reader.range_owned(s, e)?,
                lsn,
                pending: None,
            })));
        }
        Ok(Scan::new(sources))
    }

    fn stats(&self) -> Stats {
        let set = self.layer_set().ok();
        let (mut open_bytes, mut frozen, mut deltas, mut delta_bytes, mut index, mut mode) =
            (0, 0, 0, 0, 0, self.opts.io_mode);
        if let Some(set) = set {
            open_bytes = set.open.size_bytes();
            mode = set.open.file().mode();
            frozen = set.frozen.len();
            deltas = set.deltas.len();
            delta_bytes = set
                .deltas
                .iter()
                .map(|d| d.reader.summary().file_bytes)
                .sum();
            index = std::iter::once(&set.open)
                .chain(&set.frozen)
                .map(|l| l.index_memory_bytes())
                .sum::<usize>()
                + set
                    .deltas
                    .iter()
                    .map(|d| d.reader.index_memory_bytes())
                    .sum::<usize>();
        }
        Stats {
            last_lsn: self.visible_lsn.load(Ordering::Acquire),
            io_mode: mode,
            open_layer_bytes: open_bytes,
            frozen_layers: frozen,
            delta_layers: deltas,
            delta_bytes,
            index_memory_bytes: index,
            io: self.stats.snapshot(),
        }
    }
}
