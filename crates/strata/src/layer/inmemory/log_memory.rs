//! The bytes of an open layer's log, kept in memory as they are appended,
//! so that its flush copies them from memory instead of reading the log
//! back from the device.
//!
//! Why: a flush of small records read its whole log back. With 100-byte
//! values the device then carried the log's bytes three times (written,
//! read back, written again as the delta layer), and it was the bound:
//! `examples/ingest_profile 128 100 seq yes defaults` kept the disk busy
//! 648 ms of a 704 ms run (177 MiB read, 330 MiB written) while the two
//! cores were 40% busy.
//!
//! What it owns: the log's bytes from offset 0 (the log header included)
//! in chunks of `CHUNK_BYTES`, and the database-wide [`LogMemoryBudget`]
//! the chunks are counted against (`Options::log_memory_bytes`). Chunks
//! are allocated as a log grows and freed with it: keeping freed chunks
//! for the next log (no page faults on them) measured no faster (the same
//! ingest, three runs each: 254–291 MiB/s kept, 244–286 freed).
//!
//! Invariants: a `LogMemory` holds exactly the bytes written to its log
//! at offsets `0..len()`, in the order the writer wrote them (the layer
//! drops it the moment an append cannot be mirrored: the budget is spent
//! or the write failed); the chunks of all logs never pass the budget; a
//! chunk leaves the budget when its `LogMemory` is dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of one chunk.
pub(crate) const CHUNK_BYTES: usize = 1 << 20;

/// The memory that open and frozen layers keep their logs' bytes in.
#[derive(Debug)]
pub(crate) struct LogMemoryBudget {
    /// Chunks at most.
    chunks_max: usize,
    /// Chunks held by logs.
    used: AtomicUsize,
}

impl LogMemoryBudget {
    /// A budget of `bytes` (rounded down to whole chunks; 0: none).
    pub(crate) fn new(bytes: u64) -> Arc<LogMemoryBudget> {
        Arc::new(LogMemoryBudget {
            chunks_max: usize::try_from(bytes / CHUNK_BYTES as u64).unwrap_or(usize::MAX),
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes of the chunks logs hold now.
    pub(crate) fn used_bytes(&self) -> u64 {
        self.used.load(Ordering::Relaxed) as u64 * CHUNK_BYTES as u64
    }

    /// A new chunk, if the budget has room for one more.
    fn take(&self) -> Option<Box<[u8]>> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.chunks_max).then_some(n + 1)
            })
            .ok()?;
        // Zeroed by the allocator (fresh pages): no pass over it.
        Some(vec![0u8; CHUNK_BYTES].into_boxed_slice())
    }

    /// `chunks` freed.
    fn give_back(&self, chunks: usize) {
        self.used.fetch_sub(chunks, Ordering::AcqRel);
    }
}

/// The bytes of one log from offset 0, in chunks of the budget.
pub(crate) struct LogMemory {
    budget: Arc<LogMemoryBudget>,
    chunks: Vec<Box<[u8]>>,
    len: u64,
    /// Bytes of out-of-line values among them (see [`Self::mostly_values`]).
    values: u64,
}

impl LogMemory {
    /// The memory of a log whose first bytes (its header) are `head`;
    /// `None` when the budget has no room.
    pub(crate) fn new(budget: &Arc<LogMemoryBudget>, head: &[u8]) -> Option<LogMemory> {
        let mut memory = LogMemory {
            budget: Arc::clone(budget),
            chunks: Vec::new(),
            len: 0,
            values: 0,
        };
        memory.append(head).then_some(memory)
    }

    /// Counts `n` more bytes of out-of-line values (values of whole pages,
    /// appended already); true once they are more than half the bytes
    /// held. Such a log is most likely kept as a value file, whose flush
    /// reads only its small entries: holding its values is waste (a log
    /// of 8 KiB values outgrew the budget and was copied for nothing).
    pub(crate) fn mostly_values(&mut self, n: usize) -> bool {
        self.values += n as u64;
        self.values * 2 > self.len
    }

    /// Bytes held (the log's offsets `0..len`).
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `bytes`, the log's next ones; `false` when the budget has
    /// no room for them (the memory is then incomplete: drop it).
    pub(crate) fn append(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            let at = (self.len % CHUNK_BYTES as u64) as usize;
            if at == 0 && self.chunks.len() as u64 * CHUNK_BYTES as u64 == self.len {
                match self.budget.take() {
                    Some(chunk) => self.chunks.push(chunk),
                    None => return false,
                }
            }
            let Some(chunk) = self.chunks.last_mut() else {
                return false;
            };
            let n = (CHUNK_BYTES - at).min(bytes.len());
            chunk[at..at + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            self.len += n as u64;
        }
        true
    }

    /// The held bytes below `end`, chunk by chunk, in order.
    pub(crate) fn chunks(&self, end: u64) -> impl Iterator<Item = &[u8]> {
        let end = end.min(self.len);
        self.chunks.iter().enumerate().map_while(move |(i, c)| {
            let from = i as u64 * CHUNK_BYTES as u64;
            (from < end).then(|| &c[..(end - from).min(CHUNK_BYTES as u64) as usize])
        })
    }

    /// The `len` bytes at `from`: in their chunk, or assembled in
    /// `scratch` when they cross into the next; `None` when not all held.
    pub(crate) fn slice<'a>(
        &'a self,
        from: u64,
        len: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Option<&'a [u8]> {
        let at = (from % CHUNK_BYTES as u64) as usize;
        if from.checked_add(len as u64)? > self.len {
            return None;
        }
        if at + len <= CHUNK_BYTES {
            return Some(&self.chunks[(from / CHUNK_BYTES as u64) as usize][at..at + len]);
        }
        scratch.clear();
        scratch.resize(len, 0);
        self.read(from, scratch).then_some(&scratch[..])
    }

    /// Copies the log's bytes at `from` into `out`; `false` (nothing
    /// copied) when they are not all held.
    pub(crate) fn read(&self, from: u64, out: &mut [u8]) -> bool {
        let Some(end) = from.checked_add(out.len() as u64) else {
            return false;
        };
        if end > self.len {
            return false;
        }
        let mut pos = from;
        let mut done = 0;
        while done < out.len() {
            let chunk = &self.chunks[(pos / CHUNK_BYTES as u64) as usize];
            let at = (pos % CHUNK_BYTES as u64) as usize;
            let n = (CHUNK_BYTES - at).min(out.len() - done);
            out[done..done + n].copy_from_slice(&chunk[at..at + n]);
            done += n;
            pos += n as u64;
        }
        true
    }
}

#[cfg(test)]
impl LogMemory {
    /// Flips bit 0 of the byte at `at` (a test's rot of memory).
    pub(crate) fn rot(&mut self, at: u64) {
        self.chunks[(at / CHUNK_BYTES as u64) as usize][(at % CHUNK_BYTES as u64) as usize] ^= 1;
    }
}

impl Drop for LogMemory {
    fn drop(&mut self) {
        self.budget.give_back(self.chunks.len());
    }
}

impl std::fmt::Debug for LogMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogMemory").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn appended_bytes_read_back_across_chunks() {
        let budget = LogMemoryBudget::new(8 * CHUNK_BYTES as u64);
        let head = bytes(4096, 1);
        let mut m = LogMemory::new(&budget, &head).expect("room");
        let mut log = head.clone();
        for (i, n) in [100, CHUNK_BYTES, 7, 2 * CHUNK_BYTES + 13, 0, 5000]
            .iter()
            .enumerate()
        {
            let b = bytes(*n, i as u8);
            assert!(m.append(&b));
            log.extend_from_slice(&b);
        }
        assert_eq!(m.len(), log.len() as u64);
        assert_eq!(budget.used_bytes(), 4 * CHUNK_BYTES as u64);
        for (from, len) in [
            (0, log.len()),
            (CHUNK_BYTES - 3, 10),
            (4095, CHUNK_BYTES * 2),
            (log.len() - 1, 1),
        ] {
            let mut out = vec![0u8; len];
            assert!(m.read(from as u64, &mut out), "{from}+{len}");
            assert!(out == log[from..from + len], "{from}+{len}");
        }
        // Not held: nothing copied.
        let mut out = vec![9u8; 2];
        assert!(!m.read(log.len() as u64 - 1, &mut out));
        assert!(!m.read(u64::MAX, &mut out));
        assert_eq!(out, [9, 9]);
        drop(m);
        assert_eq!(budget.used_bytes(), 0);
    }

    #[test]
    fn the_budget_refuses_past_its_maximum_until_chunks_come_back() {
        let budget = LogMemoryBudget::new(3 * CHUNK_BYTES as u64 + 5);
        let mut a = LogMemory::new(&budget, &bytes(10, 0)).expect("room");
        assert!(a.append(&bytes(2 * CHUNK_BYTES, 1)));
        assert_eq!(budget.used_bytes(), 3 * CHUNK_BYTES as u64);
        // A fourth chunk is refused, for this log and for a new one.
        assert!(!a.append(&bytes(CHUNK_BYTES, 2)));
        assert!(LogMemory::new(&budget, &bytes(10, 0)).is_none());
        assert_eq!(budget.used_bytes(), 3 * CHUNK_BYTES as u64);
        drop(a);
        assert_eq!(budget.used_bytes(), 0);
        let b = LogMemory::new(&budget, &bytes(10, 3)).expect("room again");
        assert_eq!(budget.used_bytes(), CHUNK_BYTES as u64);
        let mut out = [0u8; 10];
        assert!(b.read(0, &mut out));
        assert!(out[..] == bytes(10, 3)[..]);
        // No budget: no memory.
        assert!(LogMemory::new(&LogMemoryBudget::new(0), b"h").is_none());
    }
}
