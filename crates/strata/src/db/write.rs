//! The write path: LSN assignment, appends to the open layer's log, group
//! commit, freezing the open layer and creating the next log.

use super::*;
use crate::layer::inmemory::{LogMemory, LogMemoryBudget};

/// Buffers of the log writer, each `Options::writer_buffer_bytes`: two may
/// be in flight while the third fills, so that a writer whose flusher
/// thread is late to run (two busy cores, a reader beside the writer and
/// the flush) goes on appending instead of waiting for it. With two, a
/// writer beside a reader of the newest keys slept in the wait for the
/// flusher 32 times, 75 ms in all, of a 0.7 s ingest (`perf record -e
/// sched:sched_switch --call-graph dwarf` of `examples/ingest_profile 128
/// 100 seq yes defaults 16 reader`). Three against two, runs of each in
/// turn: that ingest, 12 pairs, median 1.07×, ahead in 10; 8 KiB values
/// (`512 8192 seq yes defaults`), 7 pairs, median 1.04×; without the
/// reader and on random keys, level. Four measured no better than three.
/// A killed process may lose what the buffers hold (README).
const LOG_WRITER_BUFFERS: usize = 3;

/// Creates log `id` with its header durable, and returns its open layer
/// (its reads not yet cached: see `InMemoryLayer::with_cache`). `prev`:
/// the log before it, already durable and sealed, whose end the header
/// claims. The log is not listed: the edit that lists it comes after (a
/// log the manifest does not list holds nothing the database relies on).
/// `memory`: where the layer keeps its log's bytes (header first).
#[allow(clippy::too_many_arguments)] // called at open, before `DbInner` exists
pub(super) fn create_log(
    storage: &dyn Storage,
    dir: &Path,
    log_opts: &FileOptions,
    opts: &Options,
    stats: &IoStats,
    memory: &Arc<LogMemoryBudget>,
    id: u64,
    prev: Option<PrevLog>,
) -> Result<InMemoryLayer> {
    let path = dir.join(log_name(id));
    let file = storage.create(&path, log_opts, stats)?;
    let mut writer =
        BufferedWriter::with_buffers(file, opts.writer_buffer_bytes, LOG_WRITER_BUFFERS, 0)?;
    let header = encode_log_header(id, prev);
    writer.write(&header)?;
    writer.sync()?;
    storage.sync_dir(dir)?;
    Ok(InMemoryLayer::new_open(
        id,
        writer,
        opts.layer_size_bytes_max,
        opts.in_memory_index_bytes_max / 2,
        stats,
        LogMemory::new(memory, &header),
    ))
}

impl DbInner {
    pub(super) fn write(
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
        self.check_writer()?;
        // Before anything is written: a writer waits out the flush backlog,
        // or is refused (`Error::FlushBacklog`, nothing written) while the
        // flush fails; likewise at the L0 stop count while compaction fails
        // (`Error::CompactionBacklog`).
        self.wait_for_flush_backlog()?;
        self.check_l0_backlog()?;
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
            if let Err(e) = ws.open.append(batch, lsn) {
                self.poison(&e);
                return Err(e);
            }
            ws.last_lsn = lsn;
            self.visible_lsn.store(lsn, Ordering::Release);
            // From here the batch is applied: an error may no longer say
            // "not written". A failed freeze poisons the database; for an
            // unsynced write that is the same as a crash before the next
            // sync, so only a synced write reports it (as NotDurable).
            if ws.open.size_bytes() >= self.opts.layer_size_bytes_max
                || ws.open.index_memory_bytes() as u64 >= self.opts.in_memory_index_bytes_max / 2
            {
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
        // The batch is applied (and durable if asked): the backlog this
        // write may have grown is waited out here too, so it stays within
        // its limit between writes; a failure is the next call's (which is
        // refused before it writes), not this write's. Likewise for L0.
        let _ = self.wait_for_flush_backlog();
        let _ = self.wait_for_l0_backlog();
        Ok(lsn)
    }

    /// Group commit: one thread (the leader) writes the log's tail out and
    /// syncs it for everyone waiting; the others wait for it.
    pub(super) fn group_sync(&self, lsn: Lsn) -> Result<()> {
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
    pub(super) fn sync_open_log(&self) -> Result<Lsn> {
        let (target, open) = {
            let ws = lock(&self.write)?;
            (ws.last_lsn, Arc::clone(&ws.open))
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
    pub(super) fn seal_open_log(&self) -> Result<()> {
        let open = Arc::clone(&lock(&self.write)?.open);
        if open.is_empty() {
            return Ok(());
        }
        let result = open.sync_log(true).map(|_| ());
        if let Err(e) = &result {
            self.poison(e);
        }
        result
    }

    pub(super) fn note_synced(&self, lsn: Lsn) {
        if let Ok(mut st) = self.sync.lock() {
            st.synced_lsn = st.synced_lsn.max(lsn);
        }
        self.sync_cv.notify_all();
    }

    /// Freezes the open layer; the caller holds the write lock.
    pub(super) fn freeze_locked(&self, ws: &mut WriteState) -> Result<()> {
        self.check_writer()?;
        let open = Arc::clone(&ws.open);
        if open.is_empty() {
            return Ok(());
        }
        let result = (|| {
            open.freeze()?;
            self.note_synced(ws.last_lsn);
            let id = self.versions.take_file_id()?;
            let next = self.create_log(id, Some(open.sealed_claim()))?;
            self.versions
                .log_and_apply(Edit::AddLog(id), NewFiles::log(Arc::clone(&next)))?;
            ws.open = next;
            Ok(())
        })();
        if let Err(e) = &result {
            self.poison(e);
        }
        result?;
        self.signal_flush();
        Ok(())
    }

    /// Creates log `id` (see [`create_log`]).
    pub(super) fn create_log(&self, id: u64, prev: Option<PrevLog>) -> Result<Arc<InMemoryLayer>> {
        let layer = create_log(
            &*self.storage,
            &self.dir,
            &self.log_opts,
            &self.opts,
            &self.stats,
            &self.log_memory,
            id,
            prev,
        )?;
        Ok(Arc::new(layer.with_cache(self.layer_io.cache.clone())))
    }
}
