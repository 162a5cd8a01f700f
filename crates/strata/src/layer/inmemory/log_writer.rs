//! The open layer's log writer: appends a record's parts to the log's file
//! and to the log's memory (`log_memory`), and while the memory holds the
//! whole log, writes the file from the memory's chunks as they are, so
//! that each appended byte is copied once (into its chunk) and not twice
//! (into a chunk and into a buffer of the file's writer).
//!
//! Why: with 100-byte values beside a reader of the newest keys the ingest
//! is bound by the two cores (`examples/ingest_profile 128 100 seq yes
//! defaults 16 reader`: writer, reader and flush threads 775 ms of a 396 ms
//! run's 792), and the two copies were 21 % of the writer's CPU, most of it
//! stores to memory not in the cache.
//!
//! What it owns: the log's [`BufferedWriter`] (its flusher thread, its
//! buffers) and, while it writes from memory, the appender's pin of the
//! memory ([`LogMemory::hold_for_appender`]), which keeps every chunk, so a
//! release of the memory (by a reader whose check failed, or by the budget)
//! frees nothing the file does not hold yet.
//!
//! Invariants, while it writes from memory (`from_memory`): the memory
//! holds the log's bytes `0..end_offset()`; the writer's `end_offset()`
//! is at most that, and the writer holds less than a block of bytes
//! (the tail a sync keeps), so the bytes from the writer's block on are
//! the memory's only; whole chunks are handed to the writer as they fill,
//! and at a sync every whole block, then the partial tail block is copied
//! into the writer, which writes it padded as it always does. The file
//! gets the same bytes either way. Once the memory no longer takes an
//! append (released, or the budget spent), the bytes the writer does not
//! have are copied to it from the memory, the pin goes, and the writer's
//! own buffers take every later byte.

use super::log_memory::{LogMemory, CHUNK_ALIGN, CHUNK_BYTES};
use crate::error::{Error, Result};
use crate::io::{align_down, BufferedWriter, ShutdownMode, StorageFile};
use std::sync::Arc;

/// The log's bytes `from..end`, copied from `memory` under the appender's
/// pin: the ones the writer does not have yet.
fn missing_bytes(memory: &LogMemory, from: u64, end: u64) -> Result<Vec<u8>> {
    end.checked_sub(from)
        .and_then(|n| usize::try_from(n).ok())
        .and_then(|n| memory.appended()?.to_vec(from, n))
        .ok_or_else(|| Error::Internal(format!("log bytes {from}..{end} not held")))
}

/// The appender's pin of a log's memory, let go when dropped.
struct Appending(Arc<LogMemory>);

impl Drop for Appending {
    fn drop(&mut self) {
        self.0.end_appending();
    }
}

pub(crate) struct LogWriter {
    writer: BufferedWriter<dyn StorageFile>,
    /// The log's memory while it takes appends.
    memory: Option<Arc<LogMemory>>,
    /// While the file is written from the memory's chunks: the appender's
    /// pin of the memory.
    from_memory: Option<Appending>,
}

impl LogWriter {
    /// The writer of a log whose bytes so far `writer` wrote (its header,
    /// synced) and `memory`, if any, holds: written from the memory when it
    /// holds them all and its chunks suit the file's alignment.
    pub(crate) fn new(
        writer: BufferedWriter<dyn StorageFile>,
        memory: Option<Arc<LogMemory>>,
    ) -> LogWriter {
        let end = writer.end_offset();
        // A memory that does not hold exactly the log's bytes must not be
        // read: released, so that the layer's readers go to the file.
        let memory = memory.filter(|m| {
            let whole = m.len() == end;
            if !whole {
                m.release();
            }
            whole
        });
        let alignment = writer.alignment();
        let from_memory = memory
            .as_ref()
            .filter(|m| {
                CHUNK_ALIGN.is_multiple_of(alignment)
                    && CHUNK_BYTES.is_multiple_of(alignment)
                    // It holds less than a block: a sync's tail.
                    && writer.written_end() >= align_down(end, alignment)
                    && m.hold_for_appender()
            })
            .map(|m| Appending(Arc::clone(m)));
        LogWriter {
            writer,
            memory,
            from_memory,
        }
    }

    /// The file, shared with the flusher.
    pub(crate) fn file(&self) -> &Arc<dyn StorageFile> {
        self.writer.file()
    }

    /// The offset the next byte goes to: the log's length.
    pub(crate) fn end_offset(&self) -> u64 {
        match &self.from_memory {
            Some(Appending(m)) => m.len(),
            None => self.writer.end_offset(),
        }
    }

    /// Log offsets below this are in the file (written, not necessarily
    /// durable).
    pub(crate) fn written_end(&self) -> u64 {
        self.writer.written_end()
    }

    /// Appends `parts`, one after the other, to the file and to the memory;
    /// the memory is released when it has no room for them or the write
    /// fails (it must hold exactly the log's bytes).
    pub(crate) fn write(&mut self, parts: &[&[u8]]) -> Result<()> {
        // Failed once, failed from then on, whether this append would reach
        // the writer now or not.
        let ok = self.writer.check_ok();
        self.released_on_error(ok)?;
        if let Some(Appending(m)) = &self.from_memory {
            let before = m.len();
            // Released by the append itself when it cannot take them.
            if m.append_parts(parts) {
                return self.hand_off(false);
            }
            self.stop_from_memory(before)?;
        }
        for bytes in parts {
            if let Err(e) = self.writer.write(bytes) {
                self.release_memory();
                return Err(e);
            }
        }
        if let Some(m) = &self.memory {
            if !m.append_parts(parts) {
                self.memory = None;
            }
        }
        Ok(())
    }

    /// Hands the writer each whole chunk that it does not have yet, and
    /// with `blocks`, every whole block after them too.
    fn hand_off(&mut self, blocks: bool) -> Result<()> {
        let Some(Appending(m)) = &self.from_memory else {
            return Ok(());
        };
        let alignment = self.writer.alignment();
        let end = m.len();
        loop {
            let from = align_down(self.writer.end_offset(), alignment);
            let chunk_end = (from / CHUNK_BYTES as u64 + 1) * CHUNK_BYTES as u64;
            let to = match end >= chunk_end {
                true => chunk_end,
                false if blocks => align_down(end, alignment),
                false => return Ok(()),
            };
            if to <= from {
                return Ok(());
            }
            let shared = m.share(from, to).ok_or_else(|| {
                Error::Internal(format!("log bytes {from}..{to} not held in one chunk"))
            });
            let result = shared.and_then(|s| self.writer.write_shared(Arc::new(s)));
            if let Err(e) = result {
                self.release_memory();
                return Err(e);
            }
        }
    }

    /// Gives the writer the bytes it does not have (`..end` of the memory,
    /// copied), so that it goes on with its own buffers, and lets the
    /// appender's pin go. `end`: where the memory's bytes stop being the
    /// log's (an append it refused may have left some of its bytes).
    fn stop_from_memory(&mut self, end: u64) -> Result<()> {
        let Some(appending) = self.from_memory.take() else {
            return Ok(());
        };
        self.memory = None;
        let missing = missing_bytes(&appending.0, self.writer.end_offset(), end);
        missing.and_then(|bytes| self.writer.write(&bytes))
    }

    /// `result`, with the memory released if it is an error.
    fn released_on_error<T>(&mut self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            self.release_memory();
        }
        result
    }

    /// Releases the memory: it does not hold the log's bytes (a write
    /// failed).
    fn release_memory(&mut self) {
        if let Some(m) = self.memory.take() {
            m.release();
        }
        self.from_memory = None;
    }

    /// Writes everything appended out to the file (the partial tail block
    /// padded), so that an fdatasync of the file makes it durable.
    pub(crate) fn write_out_tail(&mut self) -> Result<()> {
        self.hand_off_tail()?;
        let written = self.writer.write_out_tail();
        self.released_on_error(written)
    }

    /// Hands the writer every whole block it does not have and copies the
    /// partial tail block into it (less than a block).
    fn hand_off_tail(&mut self) -> Result<()> {
        self.hand_off(true)?;
        let Some(Appending(m)) = &self.from_memory else {
            return Ok(());
        };
        let (from, end) = (self.writer.end_offset(), m.len());
        if from == end {
            return Ok(());
        }
        let tail = missing_bytes(m, from, end);
        if let Err(e) = tail.and_then(|t| self.writer.write(&t)) {
            self.release_memory();
            return Err(e);
        }
        Ok(())
    }

    /// `len` bytes of the log at `offset`, from the memory while the file is
    /// written from it (wherever the file's writes are), else wherever the
    /// writer has them.
    pub(crate) fn read_range(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        match &self.from_memory {
            Some(Appending(m)) => {
                m.appended()
                    .and_then(|p| p.to_vec(offset, len))
                    .ok_or_else(|| {
                        Error::Internal(format!("log bytes {offset}+{len} beyond the log's end"))
                    })
            }
            None => self.writer.read_range(offset, len),
        }
    }

    /// Writes everything out (the tail padded to the alignment), stops the
    /// flusher and returns the file; no fdatasync.
    pub(crate) fn finish(mut self) -> Result<Arc<dyn StorageFile>> {
        self.hand_off_tail()?;
        let LogWriter { writer, memory, .. } = self;
        let finished = writer.finish(ShutdownMode::ZeroPadToAlignment);
        if let (Err(_), Some(m)) = (&finished, memory) {
            m.release();
        }
        finished
    }
}

#[cfg(test)]
mod tests {
    use super::super::log_memory::LogMemoryBudget;
    use super::*;
    use crate::io::sim::{Fault, FaultError, SimStorage};
    use crate::io::{FileClass, FileOptions, IoMode, IoStats, OsStorage, Storage};
    use std::path::Path;

    /// How a test log's memory goes.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Memory {
        /// None: the writer's own buffers write the file (the reference).
        None,
        /// Room for the whole log: written from memory throughout.
        Whole,
        /// Room for 3 chunks: the budget is spent half way.
        Spent,
        /// Released by a "reader" half way.
        Released,
    }

    /// The deterministic parts of a test log, after its header: sizes from
    /// a byte to past two chunks, and whether a sync follows each.
    fn parts() -> Vec<(Vec<u8>, bool)> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..400)
            .map(|i| {
                let r = next();
                let n = match r % 16 {
                    0 => 1,
                    1 => (r >> 8) as usize % (2 * CHUNK_BYTES + 9000),
                    _ => (r >> 8) as usize % 30_000,
                };
                let bytes = (0..n).map(|j| (j as u64 ^ r) as u8).collect();
                (bytes, i % 5 == 0)
            })
            .collect()
    }

    /// Writes the test log to `path` of `storage` with `memory`; returns
    /// the log's bytes and whether it ended written from memory.
    fn write_log(storage: &dyn Storage, path: &Path, memory: Memory) -> (Vec<u8>, bool) {
        let opts = FileOptions {
            mode: IoMode::DirectRw,
            class: FileClass::Log,
            ..FileOptions::default()
        };
        let file = storage
            .create(path, &opts, &IoStats::new())
            .expect("create");
        let mut writer = BufferedWriter::with_buffers(file, 1 << 16, 3, 0).expect("writer");
        let header = crate::log::record::encode_log_header(1, None);
        writer.write(&header).expect("header");
        writer.sync().expect("sync");
        let budget = LogMemoryBudget::new(match memory {
            Memory::None => 0,
            Memory::Spent => 3 * CHUNK_BYTES as u64,
            Memory::Whole | Memory::Released => 1 << 30,
        });
        let kept = LogMemory::new(&budget, &header).map(Arc::new);
        let mut log = LogWriter::new(writer, kept.clone());
        assert_eq!(log.from_memory.is_some(), memory != Memory::None);
        let mut all = header.to_vec();
        let parts = parts();
        for (i, (bytes, sync)) in parts.iter().enumerate() {
            if memory == Memory::Released && i == parts.len() / 2 {
                kept.as_ref().expect("kept").release();
            }
            let (a, b) = bytes.split_at(bytes.len() / 3);
            log.write(&[a, b]).expect("write");
            all.extend_from_slice(bytes);
            assert_eq!(log.end_offset(), all.len() as u64);
            if *sync {
                log.write_out_tail().expect("write out");
                // All in the file: the tail block is kept for the next write.
                let alignment = log.writer.alignment();
                assert_eq!(log.written_end(), align_down(all.len() as u64, alignment));
            }
            // Any bytes of the log read back as written, from wherever.
            let from = (i as u64 * 7919) % all.len() as u64;
            let len = (all.len() as u64 - from).min(5000) as usize;
            let got = log.read_range(from, len).expect("read");
            assert!(
                got[..] == all[from as usize..][..len],
                "read at {from} after part {i}"
            );
        }
        let from_memory = log.from_memory.is_some();
        let file = log.finish().expect("finish");
        file.sync_data().expect("sync");
        drop(file);
        if let Some(m) = &kept {
            m.release();
        }
        drop(kept);
        assert_eq!(budget.used_bytes(), 0, "{memory:?}: every chunk given back");
        (all, from_memory)
    }

    /// The file holds the same bytes whether the writer copied them into
    /// its buffers or wrote them from the log's memory, whole or until the
    /// memory stopped (its budget spent, or released by a reader), through
    /// O_DIRECT on a real file and through the simulated storage, which
    /// refuses a direct write unaligned in address, length or offset.
    #[test]
    fn the_file_is_the_same_written_from_memory_or_from_buffers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sim = SimStorage::new(3);
        for (name, storage) in [
            ("os", &OsStorage as &dyn Storage),
            ("sim", &sim as &dyn Storage),
        ] {
            storage.create_dir_all(dir.path()).expect("dir");
            let mut files = Vec::new();
            for memory in [Memory::None, Memory::Whole, Memory::Spent, Memory::Released] {
                let path = dir.path().join(format!("{memory:?}.log"));
                let (log, from_memory) = write_log(storage, &path, memory);
                assert_eq!(from_memory, memory == Memory::Whole, "{name} {memory:?}");
                let bytes = match name {
                    "os" => std::fs::read(&path).expect("read"),
                    _ => sim.file_bytes(&path).expect("sim file"),
                };
                // Padded to the file's alignment: 512 bytes or a page.
                let pad = bytes.len().checked_sub(log.len());
                assert!(
                    bytes.len().is_multiple_of(512) && pad.is_some_and(|p| p < 4096),
                    "{name} {memory:?}: {} bytes of a {}-byte log",
                    bytes.len(),
                    log.len()
                );
                assert!(
                    bytes[..log.len()] == log[..],
                    "{name} {memory:?}: the log's bytes"
                );
                assert!(
                    bytes[log.len()..].iter().all(|&b| b == 0),
                    "{name} {memory:?}: pad"
                );
                files.push(bytes);
            }
            assert!(files.windows(2).all(|w| w[0] == w[1]), "{name}");
        }
    }

    /// A memory that does not hold exactly the bytes the writer wrote is
    /// released (readers must not take it for the log), and the file is
    /// written from the writer's own buffers.
    #[test]
    fn a_memory_that_is_not_the_log_is_released() {
        let sim = SimStorage::new(5);
        let opts = FileOptions {
            mode: IoMode::DirectRw,
            class: FileClass::Log,
            ..FileOptions::default()
        };
        let path = Path::new("/2.log");
        let file = sim.create(path, &opts, &IoStats::new()).expect("create");
        let mut writer = BufferedWriter::with_buffers(file, 1 << 16, 3, 0).expect("writer");
        let header = crate::log::record::encode_log_header(1, None);
        writer.write(&header).expect("header");
        let budget = LogMemoryBudget::new(1 << 30);
        let mut other = header.to_vec();
        other.push(0);
        let kept = Arc::new(LogMemory::new(&budget, &other).expect("room"));
        let mut log = LogWriter::new(writer, Some(Arc::clone(&kept)));
        assert!(kept.is_released() && log.from_memory.is_none());
        log.write(&[b"after"]).expect("write");
        assert_eq!(log.end_offset(), header.len() as u64 + 5);
        assert!(log.read_range(0, header.len()).expect("read") == header[..]);
    }

    /// A write of the file that fails while it is written from memory
    /// fails a later call (the write, or the sync that waits for it), and
    /// every call after; the memory is released, and nothing of the log
    /// before the failure is lost from the file.
    #[test]
    fn a_failed_write_from_memory_fails_every_later_call() {
        for at in [1u64, 2, 3, 5, 8, 13] {
            let sim = SimStorage::new(at);
            let opts = FileOptions {
                mode: IoMode::DirectRw,
                class: FileClass::Log,
                ..FileOptions::default()
            };
            let path = Path::new("/1.log");
            let file = sim.create(path, &opts, &IoStats::new()).expect("create");
            let mut writer = BufferedWriter::with_buffers(file, 1 << 16, 3, 0).expect("writer");
            let header = crate::log::record::encode_log_header(1, None);
            writer.write(&header).expect("header");
            writer.sync().expect("sync");
            let budget = LogMemoryBudget::new(1 << 30);
            let kept = LogMemory::new(&budget, &header).map(Arc::new);
            let mut log = LogWriter::new(writer, kept.clone());
            sim.inject(Fault::once(sim.ops() + at, FaultError::Eio));
            let mut failed = None;
            let mut synced = header.len();
            let mut all = header.to_vec();
            for (i, (bytes, sync)) in parts().iter().enumerate() {
                let result =
                    log.write(&[bytes])
                        .and_then(|()| if *sync { log.write_out_tail() } else { Ok(()) });
                match (result, failed) {
                    (Err(_), None) => failed = Some(i),
                    (Ok(()), None) => {
                        all.extend_from_slice(bytes);
                        if *sync {
                            synced = all.len();
                        }
                    }
                    (result, Some(_)) => assert!(result.is_err(), "at {at}: part {i} after"),
                }
            }
            assert!(failed.is_some(), "at {at}: the fault hit a write");
            assert!(log.write_out_tail().is_err() && log.finish().is_err());
            let m = kept.expect("kept");
            assert!(m.is_released(), "at {at}");
            let bytes = sim.file_bytes(path).expect("file");
            assert!(
                bytes[..synced] == all[..synced],
                "at {at}: written before the fault"
            );
        }
    }
}
