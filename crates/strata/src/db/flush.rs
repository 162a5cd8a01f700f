//! Flush: frozen in-memory layers written out as L0 delta layers, oldest
//! first, by the background thread or inline (values of at least
//! `large_value_bytes` left in the log, which stays as a value file, when
//! they are most of it); the flush backlog's write stall; the retry policy
//! of a failed flush.
//!
//! Error policy (the same as compaction's, see `background`): a failed
//! flush changed nothing the database relies on (the log stays listed until
//! a manifest edit says otherwise; a delta file not yet listed is garbage
//! the next open removes), so it never poisons the database. One layer's
//! flush is tried `FLUSH_ATTEMPTS` times at once (a one-off error or a read
//! that came back wrong passes); after that the background thread keeps the
//! error for `stats()` and tries again after a backoff, for as long as it
//! fails, and `Db::flush` returns the error. Writes go on into the open
//! layer; a writer that finds the backlog at `frozen_layers_max` while the
//! background flush fails is refused with `Error::FlushBacklog` (nothing
//! written) rather than kept waiting (without a background thread, it
//! flushes inline, and a failure refuses it the same way).

use super::*;

/// Tries of one layer's flush before its error is returned (and the
/// background thread backs off): the second at once, the third after
/// `FLUSH_RETRY_DELAY`.
const FLUSH_ATTEMPTS: u32 = 3;
const FLUSH_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(10);

impl DbInner {
    pub(super) fn signal_flush(&self) {
        self.flush.signal();
    }

    /// The background flush thread (see `background::Worker::run`).
    pub(super) fn flush_loop(&self) {
        self.flush.run(
            || self.check_poisoned().is_err(),
            || self.flush_pending(true).map(|()| false),
        );
    }

    pub(super) fn shutting_down(&self) -> bool {
        self.flush.is_shut_down()
    }

    /// Flushes frozen layers, oldest first, until none is left (or, for the
    /// background thread, until the database closes: the rest stay as logs
    /// and are replayed at the next open). Wakes writers stalled on the
    /// backlog after each layer.
    pub(super) fn flush_pending(&self, stop_at_shutdown: bool) -> Result<()> {
        let _guard = lock(&self.flush_lock)?;
        loop {
            self.check_poisoned()?;
            if stop_at_shutdown && self.shutting_down() {
                return Ok(());
            }
            let Some(layer) = self.version()?.frozen.first().cloned() else {
                return Ok(());
            };
            // A failed flush changed nothing the database relies on (see
            // the module documentation), so it is tried again: a one-off
            // I/O error or a read that came back wrong passes.
            let mut attempt = 1;
            while let Err(e) = self.flush_one(&layer) {
                let transient = matches!(e, Error::Io { .. } | Error::Corruption(_));
                if !transient || attempt == FLUSH_ATTEMPTS {
                    return Err(e);
                }
                std::thread::sleep(FLUSH_RETRY_DELAY * (attempt - 1));
                attempt += 1;
            }
            layer.forget_cached_pages();
            layer.release_memory();
            // A flush passed (here or in `Db::flush`): the error is history.
            self.flush.clear_error();
            self.flush.notify();
        }
    }

    /// Write stall, before a write: while more than `frozen_layers_max`
    /// frozen layers wait for their flush, or the frozen layers' indexes
    /// and the open layer's together take more than
    /// `in_memory_index_bytes_max` (the open layer is frozen at half of
    /// it: one frozen layer's flush runs while the next fills), a writer
    /// waits (or, without a background thread, flushes them itself), so
    /// memory and unflushed logs stay bounded; while the flush fails, it
    /// is refused.
    pub(super) fn wait_for_flush_backlog(&self) -> Result<()> {
        let backlog = || self.versions.frozen_layers();
        let max = self.opts.in_memory_index_bytes_max;
        let over = || {
            let frozen = self.versions.frozen_index_bytes() as u64;
            // The open layer's share is looked up only when the frozen
            // layers' may leave it too little (it never takes more than
            // half).
            backlog() > self.opts.frozen_layers_max
                || (frozen > max / 2 && frozen.saturating_add(self.open_index_bytes()) > max)
        };
        if !over() {
            return Ok(());
        }
        if !self.opts.background_flush {
            // The flush's error refuses this write, which wrote nothing.
            return self.flush_pending(false).map_err(|e| match e {
                Error::Poisoned(_) => e,
                e => Error::FlushBacklog {
                    frozen: backlog(),
                    error: e.to_string(),
                },
            });
        }
        let mut s = self.flush.lock()?;
        while over() && !s.shutdown {
            self.check_poisoned()?;
            if let Some(error) = &s.error {
                return Err(Error::FlushBacklog {
                    frozen: backlog(),
                    error: error.clone(),
                });
            }
            s.pending = true;
            self.flush.notify();
            s = self.flush.wait(s, std::time::Duration::from_millis(50))?;
        }
        Ok(())
    }

    /// Bytes of the open layer's index and filter.
    fn open_index_bytes(&self) -> u64 {
        self.version()
            .map_or(0, |v| v.open.index_memory_bytes() as u64)
    }

    /// The size from which `layer`'s flush leaves values in its log
    /// (`usize::MAX`: none): `Options::large_value_bytes`, when the values
    /// that large make up all but `value_garbage_percent` of the log (so a
    /// value file starts below the share of garbage that would have
    /// compaction move its values out again).
    fn large_values_of(&self, layer: &InMemoryLayer) -> Result<usize> {
        let large = self.opts.large_value_bytes;
        if large == 0 {
            return Ok(usize::MAX);
        }
        let bytes = u128::from(layer.large_entry_bytes(large)?);
        let keep = u128::from(100 - self.opts.value_garbage_percent);
        Ok(
            if bytes > 0 && bytes * 100 >= keep * u128::from(layer.size_bytes()) {
                large
            } else {
                usize::MAX
            },
        )
    }

    /// Writes a frozen layer out as an L0 delta layer, lists it in the
    /// manifest instead of the log, and deletes the log (or keeps it as a
    /// value file, when the layer points into it).
    pub(super) fn flush_one(&self, layer: &Arc<InMemoryLayer>) -> Result<()> {
        // Every entry the flush copies is checked before the writer sees
        // it, and the log's records as a whole before the layer is listed
        // (`InMemoryLayer::for_each_value`): a byte that rotted in the log
        // since it was written must not be sealed into a delta layer under
        // fresh, valid checksums. Bytes that fail are read once more, as
        // every reader's are (`io::read_verified`).
        let steps = self.pacer.steps();
        // Within a local budget: room for this layer (waiting for uploads
        // if writes outran them).
        self.make_room()?;
        let large = self.large_values_of(layer)?;
        let mut refs = crate::value::ValueRefs::default();
        let id = self.versions.take_file_id()?;
        let path = self.dir.join(delta_name(id));
        let written = (|| -> Result<DeltaLayerReader<LayerFile>> {
            let file = self
                .storage
                .create(&path, &self.layer_io.opts, &self.stats)?;
            let buffer = crate::io::background_writer_bytes(&*file, self.opts.writer_buffer_bytes);
            let mut sink = BufferedWriter::with_shared(file, buffer, 0)?;
            sink.set_write_steps(Arc::clone(&steps));
            let mut writer = DeltaLayerWriter::new(sink, self.opts.delta_block_bytes)?;
            writer.reserve_keys(layer.key_count()?);
            let read = layer.for_each_value(
                self.opts.flush_memory_bytes,
                &*steps,
                large,
                |key, v, value| {
                    refs.add_entry(key, v.kind, value);
                    writer.add(key, v.lsn, v.kind, value)
                },
            )?;
            self.flush_memory_peak
                .fetch_max(read.peak_memory_bytes as u64, Ordering::Relaxed);
            self.flush_read_bytes
                .fetch_add(read.bytes_read, Ordering::Relaxed);
            let (sink, summary) = writer.finish()?;
            let file = sink.finish(ShutdownMode::PadThenTruncate)?;
            file.sync_data()?;
            self.storage.sync_dir(&self.dir)?;
            let reader = DeltaLayerReader::open(LayerFile {
                file,
                len: summary.file_bytes,
                stats: self.stats.clone(),
            })?;
            Ok(reader)
        })();
        // Not listed anywhere yet: a failed attempt leaves no file behind.
        let reader = written.inspect_err(|_| {
            let _ = self.storage.remove_file(&path);
        })?;
        let mut desc = LayerDesc::from_summary(id, reader.summary());
        desc.values = refs.to_vec();
        // A log its layer points into stays, as a value file.
        let value_file_bytes = if desc.values.is_empty() {
            0
        } else {
            layer.size_bytes()
        };
        let edit = Edit::Flushed {
            log: layer.file_id,
            layer: desc.clone(),
            value_file_bytes,
        };
        let delta = Layer::with_reader(desc, Arc::clone(&self.layer_io), reader);
        // Durable, then visible; the log goes once the edit no longer lists
        // it (a log that fails to go is garbage the next open removes).
        self.versions
            .log_and_apply(edit, NewFiles::layers(vec![delta]))?;
        // A job running in the idle I/O class while L0 piles up would let
        // the L0 layers' indexes and filters, and every read's layer
        // count, grow: it hurries from here while writes go on.
        self.pacer.raise(self.l0_urgency(self.versions.l0_layers()));
        self.signal_compaction();
        // The flush is done; a local copy that fails to go is tried again
        // at the next round.
        let _ = self.evict_to_budget();
        Ok(())
    }
}
