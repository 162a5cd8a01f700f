//! The in-memory layer: a log file (the write-ahead log) plus an in-memory
//! index `key → [(lsn, offset, len, kind)]`. Values are not kept in memory:
//! the index points into the log (at the value: in its entry, or, out of
//! line, in its record's value run, which `append` starts on a page when
//! that costs at most `ALIGNMENT_PAD_SHARE`), read back from the log's
//! memory, the log writer or the file, and each value is checked against its entry's
//! crc32c when read (a read that fails is read again once, through the storage's policy,
//! `io::read_verified`). Beside the index, a bloom filter of its keys (`GrowingFilter`)
//! lets a get of a key the layer does not hold skip the index, whose cold
//! memory costs about a microsecond per lookup. The index (`key_index`)
//! keeps keys that come in order in a packed sorted run and the rest in a
//! B-tree. A copy of every byte written to the log is kept in memory, within
//! the database's `log_memory` budget (`log_memory`), for the flush and for
//! gets of the layer's values, which copy them from there without a lock;
//! while it holds the whole log, the log writer (`log_writer`) writes the
//! file from its chunks, so an appended byte is copied once.
//!
//! Lifecycle: open (the database's one writable layer, appended to by the
//! write path under the database's write lock) → frozen (read-only; its
//! writer is finished and the log is complete in the file) → flushed to a
//! delta layer by the flush thread, then dropped and its log deleted.
//!
//! Invariants: versions of a key are kept in ascending LSN order with no
//! duplicate LSN (within a batch the last write of a key wins); every key of
//! the index is in the filter (set under the same lock, before the key is
//! visible); every version's bytes lie below the writer's end offset, and
//! in the log's memory (while it is kept) before the version is indexed;
//! `written_end` only grows and bytes below it are in the file and never
//! change (so whole log pages below it may be cached). Thread safety: the
//! index is behind an `RwLock` (readers share it, the single appender takes
//! it briefly); the writer behind a `Mutex`, which a get takes only for a
//! value that the log's memory does not hold. A reader takes either by
//! trying it for a while before it blocks (`waiting_briefly`), so that the
//! appender's unlocks seldom have a sleeping reader to wake; the appender
//! takes them the same way, so that it does not sleep behind a reader's
//! brief hold.

mod flush_source;
mod key_index;
mod log_memory;
mod log_writer;

use crate::batch::{
    check_entry, check_out_of_line, Entries, EntryRef, WriteBatch, ENTRY_HEADER_BYTES,
};
use crate::cache::{Block, BlockCache};
use crate::error::{Error, Result};
use crate::io::{align_down, align_up, read_verified, BufferedWriter, IoStats, StorageFile};
use crate::layer::bloom::{bloom_hash, GrowingFilter, PointKey};
use crate::log::record::{alignment_pad, pad_record, PrevLog, RecordHeader, RECORD_HEADER_BYTES};
use crate::log::replay::ReplayedLog;
use crate::types::{Item, Lsn, ValueKind};
use key_index::{IndexKey, KeyIndex, INLINE_KEY_BYTES, RUN_KEY_BYTES};
pub(crate) use log_memory::{LogMemory, LogMemoryBudget, Pinned};
use log_writer::LogWriter;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Where one version's value lies in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogVersion {
    pub lsn: Lsn,
    /// Where the value starts (in its entry, or in its record's value run).
    pub offset: u64,
    pub len: u32,
    pub kind: ValueKind,
    /// The value is out of line (`batch::ENTRY_OUT_OF_LINE`): it is read
    /// alone and checked against the entry crc32c the index keeps.
    pub out_of_line: bool,
}

/// The most an open layer pads its log to start a record's value run on a
/// page (`log::record::alignment_pad`): an eighth of the run. A batch of
/// 4 KiB values then starts every value on a page (a read of one is one
/// page, not two: 17 % more reads a second at depth 16, 7 % at depth 1,
/// measured with fio on this project's disk) when it holds enough of them
/// to pay for the pad; a lone 4 KiB put is laid out without one (its run
/// starts wherever its entry ends), as it would double the log's bytes.
const ALIGNMENT_PAD_SHARE: u64 = 8;

/// The keys of a batch whose filter lines an append asks for ahead of their
/// inserts, a group at a time (a batch of the ingest benchmarks holds 16).
const FILTER_PREFETCH_KEYS_MAX: usize = 64;

/// Values at least this long have their entry's crc32c kept beside the
/// index (`Index::crcs`), so that a flush can point at them in the log
/// (`value::ValuePointer` carries it) without reading them back: 16 bytes
/// per value of at least 512, under 3 % of the values' bytes. The smallest
/// `Options::large_value_bytes` allowed.
pub(crate) const POINTER_VALUE_BYTES_MIN: usize = 512;

/// The index and the filter of its keys, kept together under one lock.
struct Index {
    map: KeyIndex,
    filter: GrowingFilter,
    /// `(value offset, entry crc32c)` of every entry whose value is at
    /// least `POINTER_VALUE_BYTES_MIN` long, in offset order (a record's
    /// out-of-line values, in its value run, after its inline ones).
    crcs: Vec<(u64, u32)>,
}

impl Index {
    fn with_capacity(keys: usize) -> RwLock<Index> {
        RwLock::new(Index {
            map: KeyIndex::default(),
            filter: GrowingFilter::with_capacity(keys),
            crcs: Vec::new(),
        })
    }

    /// The entry crc32c kept for the value at `offset`.
    fn crc_of(&self, offset: u64) -> Option<u32> {
        let i = self.crcs.partition_point(|&(o, _)| o < offset);
        self.crcs
            .get(i)
            .filter(|(o, _)| *o == offset)
            .map(|&(_, c)| c)
    }
}

/// The unit in which log bytes are kept in the block cache.
const LOG_PAGE_BYTES: usize = 4096;

/// Log bytes per key that an open layer's filter is first sized for: a
/// 128 MiB layer's filter starts at 512 Ki keys (1 MiB) and grows if the
/// entries are smaller (or at as many keys as the index may take before
/// the layer is frozen, if fewer: 260 Ki by default, at 64 bytes a key).
const FILTER_LOG_BYTES_PER_KEY: u64 = 256;

pub(crate) struct InMemoryLayer {
    pub file_id: u64,
    pub path: PathBuf,
    file: Arc<dyn StorageFile>,
    index: RwLock<Index>,
    /// The appending writer while the layer is open; empty once frozen.
    writer: Mutex<Option<LogWriter>>,
    /// The log's bytes in memory (see `log_memory`), for the flush and for
    /// gets of the layer's values: every byte written to the log, from
    /// offset 0, until released (the budget had no room, a write failed,
    /// a check of its bytes failed, or the layer is flushed); none for a
    /// replayed log. Appended to under `writer` (which writes the file from
    /// it, `log_writer`); read without a lock. Declared after `writer`, so
    /// dropped after it.
    memory: Option<Arc<LogMemory>>,
    /// Bytes below this offset are in the file.
    written_end: AtomicU64,
    /// End of the log (logical length).
    end_offset: AtomicU64,
    /// The log offset up to which the log is durable.
    durable_end: AtomicU64,
    lsn_min: AtomicU64,
    lsn_max: AtomicU64,
    index_bytes: AtomicUsize,
    /// Bytes of the index's filter.
    filter_bytes: AtomicUsize,
    /// Where pages of the log that reads fetched are kept (see
    /// [`Self::read_log_range`]).
    cache: Option<Arc<BlockCache>>,
    /// Where a value read again after a failed check is counted (the
    /// statistics the log was opened with).
    stats: IoStats,
}

/// Takes a lock of the open layer that its single appender and its readers
/// share, trying it for a while before blocking in `lock`: `tries` says
/// how ([`READER_TRIES`], [`APPENDER_TRIES`]).
///
/// Why try at all: a reader asleep on the lock makes the appender's unlock
/// a system call to wake it, on every batch. With a reader of the newest
/// keys beside a 100-byte sequential ingest (`examples/ingest_profile 32
/// 100 seq yes defaults 16 reader`), the futex wakes took 6.7 % of the
/// writer's time against 2.3 % without the reader. Readers trying first,
/// with the write path holding its open layer (`db::WriteState::open`),
/// made that ingest 1.06 to 1.08× as fast (medians of 16 runs in pairs;
/// without the reader, 1.01×). An appender that blocked at once slept on
/// the futex behind a reader that holds the lock for well under a
/// microsecond, and waited for a wake-up: trying first made the same
/// ingest at 128 MiB with the reader 1.04 to 1.11× as fast (4 runs in
/// turn each way; the writer's voluntary context switches 178-246 against
/// 310-335).
///
/// `try_lock` is the lock's own try (`Mutex::try_lock`, `RwLock::try_read`),
/// which a writer waiting for an `RwLock` already refuses, so the tries
/// never keep the appender out once it blocks; while the appender itself
/// is still trying, a reader may come in before it, for as long as the
/// tries last (bounded: then the appender blocks in `write`, and the
/// readers wait).
fn waiting_briefly<G>(
    tries: Tries,
    mut try_lock: impl FnMut() -> std::sync::TryLockResult<G>,
    lock: impl FnOnce() -> std::sync::LockResult<G>,
) -> std::sync::LockResult<G> {
    use std::sync::TryLockError;
    for i in 0..tries.spins + tries.yields {
        match try_lock() {
            Ok(guard) => return Ok(guard),
            Err(TryLockError::Poisoned(p)) => return Err(p),
            Err(TryLockError::WouldBlock) if i < tries.spins => std::hint::spin_loop(),
            Err(TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    lock()
}

/// How [`waiting_briefly`] tries a lock before it blocks: `spins` tries
/// with a pause between them (about 47 ns each here), then `yields` tries
/// with the core given away between them.
#[derive(Clone, Copy, Debug)]
struct Tries {
    spins: u32,
    yields: u32,
}

/// A reader's tries: about 3 µs of spins, then 32 with its core given
/// away (to the appender, when it shares the core), then it blocks.
const READER_TRIES: Tries = Tries {
    spins: 64,
    yields: 32,
};

/// The appender's tries: about 25 µs of spins, then it blocks; it never
/// gives its core away to try again. A yield hands the core to whatever
/// else is runnable there (the reader that holds the lock, the flush) for
/// the rest of a scheduler slice: beside a reader of the newest keys, the
/// writer lost 43 ms of a 0.5 s ingest in 44 yields, about 1 ms each
/// (`perf record -e sched:sched_switch` of `examples/ingest_profile 128
/// 100 seq yes defaults 16 reader`), where a blocked appender is woken as
/// the lock is let go. That ingest, 19 runs of each build in turn: median
/// 1.05× the 64 spins and 32 yields of a reader, ahead in 14 of the 19
/// pairs; without the reader, level.
const APPENDER_TRIES: Tries = Tries {
    spins: 512,
    yields: 0,
};

impl InMemoryLayer {
    /// An open layer appending to `writer`'s log (whose header is written),
    /// which is frozen at about `layer_bytes_max` of log or `index_bytes_max`
    /// of index; `stats` are the log's; `memory`, if any, holds the log's
    /// bytes so far (its header).
    pub(crate) fn new_open(
        file_id: u64,
        writer: BufferedWriter<dyn StorageFile>,
        layer_bytes_max: u64,
        index_bytes_max: u64,
        stats: &IoStats,
        memory: Option<LogMemory>,
    ) -> Self {
        let memory = memory.map(Arc::new);
        let writer = LogWriter::new(writer, memory.clone());
        let end = writer.end_offset();
        let keys = (layer_bytes_max / FILTER_LOG_BYTES_PER_KEY)
            .min(index_bytes_max / RUN_KEY_BYTES as u64);
        InMemoryLayer {
            file_id,
            path: writer.file().path().to_owned(),
            file: Arc::clone(writer.file()),
            index: Index::with_capacity(usize::try_from(keys).unwrap_or(usize::MAX)),
            written_end: AtomicU64::new(writer.written_end()),
            end_offset: AtomicU64::new(end),
            durable_end: AtomicU64::new(end),
            writer: Mutex::new(Some(writer)),
            memory: memory.filter(|m| m.len() == end),
            lsn_min: AtomicU64::new(u64::MAX),
            lsn_max: AtomicU64::new(0),
            index_bytes: AtomicUsize::new(0),
            filter_bytes: AtomicUsize::new(0),
            cache: None,
            stats: stats.clone(),
        }
    }

    /// A frozen layer rebuilt from a replayed log whose bytes are `bytes`;
    /// `stats` are the log's.
    pub(crate) fn from_replay(
        file_id: u64,
        file: Arc<dyn StorageFile>,
        log: &ReplayedLog,
        bytes: &[u8],
        stats: &IoStats,
    ) -> Result<Self> {
        let layer = InMemoryLayer {
            file_id,
            path: file.path().to_owned(),
            file,
            index: Index::with_capacity(log.records.iter().map(|r| r.header.count as usize).sum()),
            writer: Mutex::new(None),
            memory: None,
            written_end: AtomicU64::new(log.end_offset),
            end_offset: AtomicU64::new(log.end_offset),
            durable_end: AtomicU64::new(log.end_offset),
            lsn_min: AtomicU64::new(u64::MAX),
            lsn_max: AtomicU64::new(0),
            index_bytes: AtomicUsize::new(0),
            filter_bytes: AtomicUsize::new(0),
            cache: None,
            stats: stats.clone(),
        };
        for rec in &log.records {
            let start = rec.payload_offset as usize;
            let payload = &bytes[start..start + rec.header.payload_len as usize];
            let entries = Entries::new(payload, rec.header.count, false);
            layer.index_entries(entries, rec.header.lsn, rec.payload_offset)?;
        }
        Ok(layer)
    }

    /// Indexes `batch`, appended at `lsn` with its payload at `payload_offset`.
    fn index_batch(&self, batch: &WriteBatch, lsn: Lsn, payload_offset: u64) -> Result<()> {
        let entries = Entries::with_run(&batch.data, &batch.values, batch.count, false);
        self.index_entries(entries, lsn, payload_offset)
    }

    /// Indexes the entries of a record at `lsn` whose payload is at
    /// `payload_offset`, decoded without their crcs (see below).
    fn index_entries(&self, mut entries: Entries<'_>, lsn: Lsn, payload_offset: u64) -> Result<()> {
        // The payload is a batch that never left memory, or a record the
        // replay checked whole (entries' crc32c included): its structure is
        // decoded as it is indexed, in one walk without an allocation; its
        // crcs are not computed again. A malformed entry part way would
        // leave the entries before it indexed: it cannot happen (`add`
        // built the batch; the replay decoded the record whole first), and
        // both callers fail for good on it (the write path poisons the
        // database, the open fails).
        let corrupt = |(offset, what): (usize, &'static str)| {
            crate::error::Corruption::new(&self.path, payload_offset + offset as u64, what)
        };
        let mut index = waiting_briefly(
            APPENDER_TRIES,
            || self.index.try_write(),
            || self.index.write(),
        )
        .map_err(|_| Error::Poisoned("index lock poisoned".into()))?;
        let mut added = 0usize;
        // The crcs of the record's out-of-line values (no allocation for a
        // record without any).
        let mut run_crcs: Vec<(u64, u32)> = Vec::new();
        // The filter line of each key is a cache miss (the filter is larger
        // than the caches, and hashes scatter): ask for the lines of a group
        // of keys before their inserts, so the misses overlap (measured:
        // GrowingFilter::insert was 16% of a 100 B Sequential ingest's CPU,
        // one miss after another).
        let mut group = [(0u64, None::<EntryRef<'_>>); FILTER_PREFETCH_KEYS_MAX];
        loop {
            let mut n = 0;
            for slot in group.iter_mut() {
                let Some(e) = entries.next() else { break };
                let e = e.map_err(corrupt)?;
                let hash = bloom_hash(e.key);
                index.filter.prefetch_insert(hash);
                *slot = (hash, Some(e));
                n += 1;
            }
            if n == 0 {
                break;
            }
            for &(hash, e) in &group[..n] {
                let e = e.expect("the group's first n slots are filled");
                let v = LogVersion {
                    lsn,
                    offset: payload_offset + e.value_offset as u64,
                    len: e.value.len() as u32,
                    kind: e.kind,
                    out_of_line: e.out_of_line,
                };
                if e.out_of_line {
                    run_crcs.push((v.offset, e.crc));
                    added += std::mem::size_of::<(u64, u32)>();
                } else if e.value.len() >= POINTER_VALUE_BYTES_MIN {
                    index.crcs.push((v.offset, e.crc));
                    added += std::mem::size_of::<(u64, u32)>();
                }
                let inserted = index.map.insert(IndexKey::new(e.key), v);
                if inserted.new_key {
                    index.filter.insert(hash);
                }
                added += inserted.memory_bytes;
            }
        }
        // The value run follows every entry of its record: its crcs go
        // after the record's inline ones, so `crcs` stays in offset order.
        index.crcs.extend_from_slice(&run_crcs);
        self.filter_bytes
            .store(index.filter.memory_bytes(), Ordering::Relaxed);
        drop(index);
        self.index_bytes.fetch_add(added, Ordering::Relaxed);
        self.lsn_min.fetch_min(lsn, Ordering::Relaxed);
        self.lsn_max.fetch_max(lsn, Ordering::Relaxed);
        Ok(())
    }

    /// Appends `batch` at `lsn` as one log record and indexes its entries.
    /// Called only by the write path, under the database's write lock.
    pub(crate) fn append(&self, batch: &WriteBatch, lsn: Lsn) -> Result<()> {
        let mut guard = waiting_briefly(
            APPENDER_TRIES,
            || self.writer.try_lock(),
            || self.writer.lock(),
        )
        .map_err(|_| Error::Poisoned("writer lock poisoned".into()))?;
        let writer = guard
            .as_mut()
            .ok_or_else(|| Error::Poisoned("append to a frozen layer".into()))?;
        // The log's LSN order is the write path's: a batch at or below the
        // last one would make replay and the index disagree about it.
        let last = self.lsn_max.load(Ordering::Acquire);
        if lsn <= last {
            return Err(Error::Internal(format!(
                "append at LSN {lsn} to log {} after LSN {last}",
                self.file_id
            )));
        }
        let memory = self.memory.as_deref();
        let durable = self.durable_end.load(Ordering::Acquire);
        debug_assert_eq!(batch.values_crc, crate::crc::crc32c(&batch.values));
        let run = (batch.values.len(), batch.values_crc);
        let header = RecordHeader::for_parts(&batch.data, run, lsn, batch.count, durable);
        if !batch.values.is_empty() {
            let run_at = (RECORD_HEADER_BYTES + batch.data.len()) as u64;
            let share = batch.values.len() as u64 / ALIGNMENT_PAD_SHARE;
            if let Some(pad) = alignment_pad(writer.end_offset(), run_at, share, durable) {
                writer.write(&[&pad.header, pad.payload])?;
            }
        }
        let record_offset = writer.end_offset();
        writer.write(&[&header.encode(), &batch.data, &batch.values])?;
        if let Some(m) = memory.filter(|m| {
            !batch.values.is_empty() && !m.is_released() && m.mostly_values(batch.values.len())
        }) {
            m.release();
        }
        self.written_end
            .store(writer.written_end(), Ordering::Release);
        self.end_offset
            .store(writer.end_offset(), Ordering::Release);
        drop(guard);
        self.index_batch(batch, lsn, record_offset + RECORD_HEADER_BYTES as u64)
    }

    /// Ends the log on a sector boundary with a pad record (a log format
    /// rule: the records after a sync start on a sector no durable byte
    /// shares, see `log::replay`), then writes the buffered tail out
    /// (padded) so an fdatasync of the file makes everything appended so far
    /// durable; returns the end offset it covers and the file to sync. The
    /// caller syncs outside the lock. With `seal`, the pad record is written
    /// even on a boundary: it claims the whole log durable (written after
    /// the sync that made it so, at close).
    fn write_out_for_sync(&self, seal: bool) -> Result<Option<(u64, Arc<dyn StorageFile>)>> {
        let mut guard = self
            .writer
            .lock()
            .map_err(|_| Error::Poisoned("writer lock poisoned".into()))?;
        let Some(writer) = guard.as_mut() else {
            return Ok(None);
        };
        let durable = self.durable_end.load(Ordering::Acquire);
        if let Some(pad) = pad_record(writer.end_offset(), durable, seal) {
            writer.write(&[&pad.header, pad.payload])?;
            self.end_offset
                .store(writer.end_offset(), Ordering::Release);
        }
        writer.write_out_tail()?;
        self.written_end
            .store(writer.written_end(), Ordering::Release);
        Ok(Some((writer.end_offset(), Arc::clone(writer.file()))))
    }

    /// Group commit's and close's sync of the open log: writes it out
    /// ([`Self::write_out_for_sync`]), fdatasyncs it and records it durable.
    /// `false` when the layer was frozen meanwhile (its freeze synced it, if
    /// the freeze succeeded: see [`Self::is_durable`]).
    pub(crate) fn sync_log(&self, seal: bool) -> Result<bool> {
        let Some((end, file)) = self.write_out_for_sync(seal)? else {
            return Ok(false);
        };
        file.sync_data()?;
        self.mark_durable(end);
        Ok(true)
    }

    /// What the next log's header claims of this one once it is frozen
    /// (where its records end, its last LSN); the flush checks the same.
    pub(crate) fn sealed_claim(&self) -> PrevLog {
        PrevLog {
            file_id: self.file_id,
            end: self.size_bytes(),
            last_lsn: self.lsn_range().1,
        }
    }

    /// True when everything appended to the log is durable: once frozen,
    /// only if its freeze succeeded.
    pub(crate) fn is_durable(&self) -> bool {
        self.durable_end.load(Ordering::Acquire) >= self.end_offset.load(Ordering::Acquire)
    }

    /// Records that the log is durable up to `end`.
    pub(crate) fn mark_durable(&self, end: u64) {
        self.durable_end.fetch_max(end, Ordering::AcqRel);
    }

    /// Freezes the layer: writes everything out and makes it durable. After
    /// this, reads go to the log's memory or the file.
    pub(crate) fn freeze(&self) -> Result<()> {
        let mut guard = self
            .writer
            .lock()
            .map_err(|_| Error::Poisoned("writer lock poisoned".into()))?;
        let Some(writer) = guard.take() else {
            return Ok(());
        };
        let end = writer.end_offset();
        let file = writer.finish()?;
        file.sync_data()?;
        self.written_end.store(end, Ordering::Release);
        self.mark_durable(end);
        Ok(())
    }

    /// Gives the log's bytes in memory back to the budget (once flushed,
    /// or when they fail a check).
    pub(crate) fn release_memory(&self) {
        if let Some(m) = &self.memory {
            m.release();
        }
    }

    /// Whether the layer is frozen (takes no more writes).
    pub(crate) fn is_frozen(&self) -> bool {
        self.writer.lock().map_or(true, |w| w.is_none())
    }

    /// How many distinct keys the layer holds.
    pub(crate) fn key_count(&self) -> Result<usize> {
        let index = self
            .index
            .read()
            .map_err(|_| Error::Poisoned("index lock poisoned".into()))?;
        Ok(index.map.len())
    }

    /// Logical bytes of the log.
    pub(crate) fn size_bytes(&self) -> u64 {
        self.end_offset.load(Ordering::Acquire)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lsn_max.load(Ordering::Acquire) == 0
    }

    pub(crate) fn lsn_range(&self) -> (Lsn, Lsn) {
        (
            self.lsn_min.load(Ordering::Acquire),
            self.lsn_max.load(Ordering::Acquire),
        )
    }

    /// Bytes of the index and its filter.
    pub(crate) fn index_memory_bytes(&self) -> usize {
        self.index_bytes.load(Ordering::Relaxed) + self.filter_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn file(&self) -> &Arc<dyn StorageFile> {
        &self.file
    }

    /// The value of `key`'s version `v`, read with its entry and checked
    /// (entry crc, kind, lengths and key) before it is returned: bytes read
    /// back from a log are never trusted. An entry that fails is read again
    /// once (its cached pages dropped first), through the storage's policy
    /// for bytes that fail their check; the second result stands. `kept`
    /// is [`Self::kept_crc`] of `v`, taken under the index lock the caller
    /// found `v` under (an out-of-line value is checked against it).
    fn read_value(&self, key: &[u8], v: LogVersion, kept: Option<u32>) -> Result<Vec<u8>> {
        if v.kind == ValueKind::Delete || v.len == 0 {
            return Ok(Vec::new());
        }
        if v.out_of_line {
            let crc = kept.ok_or_else(|| self.no_crc(v))?;
            return self.read_out_of_line(key, v, crc);
        }
        let head = (ENTRY_HEADER_BYTES + key.len()) as u64;
        let start = v.offset.checked_sub(head).ok_or_else(|| {
            crate::error::Corruption::new(&self.path, v.offset, "indexed value before its entry")
        })?;
        let len = head + u64::from(v.len);
        read_verified(&*self.file, &self.stats, start, len, || {
            self.read_entry(key, v.kind, start, len, head)
        })
    }

    /// The entry crc32c `index` keeps for `v`'s value when it is out of
    /// line (what [`Self::read_value`] checks it against); `None` for a
    /// value in its entry, which carries its own.
    fn kept_crc(&self, index: &Index, v: LogVersion) -> Result<Option<u32>> {
        if !v.out_of_line {
            return Ok(None);
        }
        index
            .crc_of(v.offset)
            .map(Some)
            .ok_or_else(|| self.no_crc(v))
    }

    /// A value of at least `POINTER_VALUE_BYTES_MIN` without the crc32c the
    /// index keeps for every such value: a defect, not a damaged file.
    fn no_crc(&self, v: LogVersion) -> Error {
        Error::Internal(format!(
            "log {}: no entry crc kept for the {}-byte value at {}",
            self.file_id, v.len, v.offset
        ))
    }

    /// The out-of-line value of `key`'s version `v`: its bytes alone (a 4
    /// KiB value on a page is one page), checked against its entry's
    /// crc32c `crc` with its header and key rebuilt
    /// (`batch::check_out_of_line`); read again once if that fails.
    fn read_out_of_line(&self, key: &[u8], v: LogVersion, crc: u32) -> Result<Vec<u8>> {
        let len = u64::from(v.len);
        read_verified(&*self.file, &self.stats, v.offset, len, || {
            let value = self.read_log_range(v.offset, v.len as usize)?;
            match check_out_of_line(&value, key, crc) {
                Ok(()) => Ok(value),
                Err((_, what, sums)) => {
                    self.forget_pages(v.offset, len);
                    Err(crate::error::Corruption::of_check(&self.path, v.offset, what, sums).into())
                }
            }
        })
    }

    /// One reading of the entry of [`Self::read_value`] (`len` bytes from
    /// `start`, its value after `head` bytes), checked; its cached pages are
    /// dropped when the check fails.
    fn read_entry(
        &self,
        key: &[u8],
        kind: ValueKind,
        start: u64,
        len: u64,
        head: u64,
    ) -> Result<Vec<u8>> {
        let mut entry = self.read_log_range(start, len as usize)?;
        let checked = check_entry(&entry, kind, key).map(|_| ());
        if checked.is_err() {
            self.forget_pages(start, entry.len() as u64);
        }
        match checked {
            // The value is the entry's tail: drop the head in place rather
            // than copy the value into a second allocation.
            Ok(()) => {
                entry.drain(..head as usize);
                Ok(entry)
            }
            Err((at, what, sums)) => {
                Err(
                    crate::error::Corruption::of_check(&self.path, start + at as u64, what, sums)
                        .into(),
                )
            }
        }
    }

    /// Reads of the log's values go through `cache` (see
    /// [`Self::read_log_range`]).
    pub(crate) fn with_cache(mut self, cache: Option<Arc<BlockCache>>) -> Self {
        self.cache = cache;
        self
    }

    /// `len` bytes of the log at `offset`: from the log's memory while it
    /// holds them (no lock, no device read), else from the file, or, for
    /// bytes not yet written out, from the writer's buffers.
    ///
    /// With a block cache, whole pages of the log below `written_end` go
    /// through it (key: the log's file id and the page's offset; ids are
    /// unique across logs and layer files): a log is append-only, so a
    /// byte below `written_end` never changes, and a page all below it is
    /// final. A get of a key the open layer holds then reads the device once
    /// per page, not once per get. The caller checks what it assembles (the
    /// entry's checksum) on every use, and drops the pages when that fails.
    fn read_log_range(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if let Some(bytes) = self
            .memory
            .as_deref()
            .and_then(LogMemory::pin)
            .and_then(|m| m.to_vec(offset, len))
        {
            return Ok(bytes);
        }
        let end = offset + len as u64;
        let written = self.written_end.load(Ordering::Acquire);
        if let Some(cache) = &self.cache {
            let first = align_down(offset, LOG_PAGE_BYTES);
            let last = align_up(end, LOG_PAGE_BYTES);
            if last <= written {
                return self.read_pages(cache, offset, len, first..last);
            }
        }
        if end <= written {
            return self.file.read_range(offset, len);
        }
        let mut guard = waiting_briefly(
            READER_TRIES,
            || self.writer.try_lock(),
            || self.writer.lock(),
        )
        .map_err(|_| Error::Poisoned("writer lock poisoned".into()))?;
        match guard.as_mut() {
            Some(writer) => writer.read_range(offset, len),
            // Frozen meanwhile: everything is in the file now, unless the
            // freeze failed (then `written_end` stayed below the value, and
            // the file may hold zeros where the value should be).
            None if end <= self.written_end.load(Ordering::Acquire) => {
                self.file.read_range(offset, len)
            }
            None => Err(Error::Poisoned(format!(
                "{}: bytes {}..{end} of the log were never written (its freeze failed)",
                self.path.display(),
                offset
            ))),
        }
    }

    /// [`Self::read_log_range`] through the cache: `pages` (whole log pages,
    /// all below `written_end`) cover `offset..offset + len`. All cached:
    /// copied out of them; else read in one request and the pages missing
    /// kept.
    fn read_pages(
        &self,
        cache: &BlockCache,
        offset: u64,
        len: usize,
        pages: std::ops::Range<u64>,
    ) -> Result<Vec<u8>> {
        let starts = || pages.clone().step_by(LOG_PAGE_BYTES);
        let cached: Vec<Option<Block>> = starts().map(|p| cache.get(self.file_id, p)).collect();
        let head = (offset - pages.start) as usize;
        if cached.iter().all(Option::is_some) {
            // Page i holds bytes i·P..(i+1)·P of the span; the wanted ones
            // are head..head + len.
            let mut out = Vec::with_capacity(len);
            for (i, page) in cached.iter().flatten().enumerate() {
                let base = i * LOG_PAGE_BYTES;
                let from = head.max(base) - base;
                let to = (head + len).min(base + LOG_PAGE_BYTES) - base;
                out.extend_from_slice(&page[from..to]);
            }
            return Ok(out);
        }
        let bytes = self
            .file
            .read_range(pages.start, (pages.end - pages.start) as usize)?;
        for (i, (p, was)) in starts().zip(&cached).enumerate() {
            if was.is_none() {
                let page = &bytes[i * LOG_PAGE_BYTES..(i + 1) * LOG_PAGE_BYTES];
                cache.insert(self.file_id, p, Block::from(page));
            }
        }
        Ok(bytes[head..head + len].to_vec())
    }

    /// Drops every cached page of the log (flushed: its pages would only
    /// take cache space until evicted).
    pub(crate) fn forget_cached_pages(&self) {
        self.forget_pages(0, self.size_bytes());
    }

    /// Drops the cached log pages under `offset..offset + len`, and the
    /// log's memory (their bytes failed a check, and may have come from
    /// either: the next read goes to the file again).
    fn forget_pages(&self, offset: u64, len: u64) {
        self.release_memory();
        if let Some(cache) = &self.cache {
            let first = align_down(offset, LOG_PAGE_BYTES);
            let last = align_up(offset + len, LOG_PAGE_BYTES);
            for p in (first..last).step_by(LOG_PAGE_BYTES) {
                cache.remove(self.file_id, p);
            }
        }
    }

    /// The newest version of `key` with lsn <= `lsn`: `Some((lsn, kind, value))`.
    pub(crate) fn get(
        &self,
        point: PointKey<'_>,
        lsn: Lsn,
    ) -> Result<Option<(Lsn, ValueKind, Vec<u8>)>> {
        let key = point.key;
        let found = {
            let index =
                waiting_briefly(READER_TRIES, || self.index.try_read(), || self.index.read())
                    .map_err(|_| Error::Poisoned("index lock poisoned".into()))?;
            // An empty layer (the open one of a database only read) costs
            // no probe of its filter, a line of memory far from any cache.
            if index.map.is_empty() || !index.filter.may_contain_hash(point.hash) {
                return Ok(None);
            }
            // A short key is looked up as an index key (on the stack): the
            // search compares words, not slices behind pointers.
            let versions = if key.len() <= INLINE_KEY_BYTES {
                index.map.get(&IndexKey::new(key))
            } else {
                index.map.get(key)
            };
            match versions.and_then(|vs| vs.at(lsn)) {
                Some(v) => (v, self.kept_crc(&index, v)?),
                None => return Ok(None),
            }
        };
        let (v, kept) = found;
        Ok(Some((v.lsn, v.kind, self.read_value(key, v, kept)?)))
    }

    /// For each key in the range, its newest version with lsn <= `lsn`, with
    /// the value read, in key order.
    pub(crate) fn range_at(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        lsn: Lsn,
    ) -> Result<Vec<Item>> {
        let picked: Vec<(Vec<u8>, LogVersion, Option<u32>)> = {
            let index = self
                .index
                .read()
                .map_err(|_| Error::Poisoned("index lock poisoned".into()))?;
            index
                .map
                .range(start, end)
                .filter_map(|(k, vs)| vs.at(lsn).map(|v| (k, v)))
                .map(|(k, v)| Ok((k.as_slice().to_vec(), v, self.kept_crc(&index, v)?)))
                .collect::<Result<_>>()?
        };
        picked
            .into_iter()
            .map(|(k, v, kept)| {
                let value = self.read_value(&k, v, kept)?;
                Ok((k, v.kind, value))
            })
            .collect()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::{waiting_briefly, APPENDER_TRIES, READER_TRIES};
    use std::sync::{Arc, Mutex, RwLock};
    use std::time::{Duration, Instant};

    /// Gets copy values from the log's memory while it holds them, with
    /// no read of the file; when the memory rots, the get's check fails,
    /// the memory is released, and the read again from the file gives the
    /// right value.
    #[test]
    fn gets_read_the_logs_memory_and_the_file_once_it_rots() {
        use super::flush_source::tests::frozen;
        use crate::io::sim::SimStorage;
        use crate::io::{FileClass, IoStats, OpKind};
        use crate::layer::bloom::PointKey;
        let value_of = |b: u32, i: u32| {
            let k = (b * 4 + i).wrapping_mul(0x9e37_79b9);
            (format!("k{k:08x}"), vec![(k % 251) as u8; 100])
        };
        let reads = |stats: &IoStats| stats.snapshot().bytes(FileClass::Log, OpKind::Read);
        for budget in [64 << 20, 0] {
            let (sim, stats) = (SimStorage::new(8), IoStats::new());
            let layer = frozen(&sim, &stats, budget);
            for b in (0..500).step_by(7) {
                let (key, value) = value_of(b, b % 4);
                let got = layer
                    .get(PointKey::new(key.as_bytes()), u64::MAX)
                    .expect("get");
                assert_eq!(got.map(|(_, _, v)| v), Some(value), "{key}");
            }
            assert_eq!(reads(&stats) == 0, budget > 0, "budget {budget}");
        }
        let (sim, stats) = (SimStorage::new(8), IoStats::new());
        let layer = frozen(&sim, &stats, 64 << 20);
        let (key, value) = value_of(250, 1);
        let at = layer
            .index
            .read()
            .expect("index")
            .map
            .get(key.as_bytes())
            .expect("indexed")
            .as_slice()[0]
            .offset;
        // SAFETY: nothing else reads the layer meanwhile.
        unsafe { layer.memory.as_ref().expect("held").rot(at + 3) };
        let got = layer
            .get(PointKey::new(key.as_bytes()), u64::MAX)
            .expect("read again");
        assert_eq!(got.map(|(_, _, v)| v), Some(value));
        assert!(layer.memory.as_ref().expect("kept").is_released());
        assert_eq!(stats.snapshot().read_retries(FileClass::Log), 1);
        assert!(reads(&stats) > 0);
    }

    /// A lock held past the tries is waited for (the blocking lock takes
    /// over), and the waiter gets what the holder left: a reader's tries
    /// and the appender's.
    #[test]
    fn a_lock_held_past_the_tries_is_waited_for() {
        for tries in [READER_TRIES, APPENDER_TRIES] {
            held_past_the_tries(tries);
        }
    }

    fn held_past_the_tries(tries: super::Tries) {
        let lock = Arc::new(Mutex::new(0u32));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                let mut g = lock.lock().unwrap();
                held_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(200));
                *g = 7;
            })
        };
        held_rx.recv().unwrap();
        let started = Instant::now();
        let g = waiting_briefly(tries, || lock.try_lock(), || lock.lock()).unwrap();
        assert_eq!(*g, 7, "{tries:?}: read before the holder let go");
        assert!(started.elapsed() >= Duration::from_millis(100));
        drop(g);
        holder.join().unwrap();
    }

    /// A poisoned lock is an error at once, from the tries or the wait.
    #[test]
    fn a_poisoned_lock_is_an_error() {
        let lock = Arc::new(RwLock::new(0u32));
        let l = Arc::clone(&lock);
        let _ = std::thread::spawn(move || {
            let _g = l.write().unwrap();
            panic!("poisons the lock");
        })
        .join();
        for tries in [READER_TRIES, APPENDER_TRIES] {
            assert!(waiting_briefly(tries, || lock.try_read(), || lock.read()).is_err());
            assert!(waiting_briefly(tries, || lock.try_write(), || lock.write()).is_err());
        }
    }
}
