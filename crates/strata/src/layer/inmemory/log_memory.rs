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
//! are taken as a log grows and given back when it is released; the
//! budget keeps them for the next logs (allocated once, never more than
//! the budget), as a fresh chunk costs its appender 256 page faults: with
//! them, 7 to 9 % of the writer's CPU on a 100-byte ingest
//! (`examples/ingest_profile 128 100 seq yes defaults`, 6 runs each in
//! turn: writer CPU 0.208–0.223 s kept against 0.227–0.236 s freed; 8 runs
//! beside a reader of the newest keys, 0.235–0.264 s against 0.260–0.276 s,
//! the ingest a median 321 against 304 MiB/s).
//!
//! The same bytes serve gets of the layer's values (`InMemoryLayer::
//! read_log_range`): a reader copies them without a lock the appender
//! takes. Before, a get of a value not yet written out took the log
//! writer's mutex to copy it from the writer's buffers, and a reader
//! preempted while it held that mutex stopped the appender until it ran
//! again (beside a reader of the newest keys, a 100-byte ingest's writer
//! blocked 15 times per 128 MiB, about 2 ms each).
//!
//! The same bytes are the log's file's source: while the memory holds the
//! log, the log's writer (`log_writer`) hands its chunks to the device as
//! they are ([`LogMemory::share`]), so each appended byte is copied once,
//! into its chunk. The chunks are aligned to a page for that (O_DIRECT).
//!
//! Invariants: a `LogMemory` holds exactly the bytes written to its log at
//! offsets `0..len()`, in the order the writer wrote them; once it cannot
//! take an append (the budget is spent, the write failed) it is
//! released, and no reader pins it again; bytes below `len` never change;
//! a chunk is given back only when released, with no pin on it (a
//! reader's, a share's, the appender's: see [`LogMemory::pin`],
//! [`LogMemory::hold_for_appender`]) and no append under way; the chunks
//! of all logs and the spare ones together never pass the budget; a chunk
//! given back leaves the count of used ones.
//!
//! Why hand-written (raw chunk pointers, a reader count) and not a lock or
//! an epoch crate: readers must never hold anything the appender waits
//! for, and the appender pays for them with nothing but its own stores
//! (the reader count lives on its own cache line, which the appender never
//! touches).

use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of one chunk.
#[cfg(not(miri))]
pub(crate) const CHUNK_BYTES: usize = 1 << 20;
/// Bytes of one chunk under Miri, whose tests of this module copy a few
/// chunks byte by byte (run: `cargo +nightly miri test -p strata --lib
/// log_memory`).
#[cfg(miri)]
pub(crate) const CHUNK_BYTES: usize = 1 << 10;

/// The alignment of every chunk's address: a page, so that the log's
/// writes may go to the device from the chunks (O_DIRECT).
pub(crate) const CHUNK_ALIGN: usize = 4096;

/// The layout of a chunk.
fn chunk_layout() -> Layout {
    // A constant size and a power of two alignment: always a layout.
    Layout::from_size_align(CHUNK_BYTES, CHUNK_ALIGN).unwrap_or_else(|_| unreachable!())
}

/// The most chunks one log keeps (64 GiB): the length of its chunk table,
/// allocated whole when the log starts (8 bytes a chunk), when the budget
/// allows as many.
const LOG_CHUNKS_MAX: usize = 1 << 16;

/// The memory that open and frozen layers keep their logs' bytes in.
#[derive(Debug)]
pub(crate) struct LogMemoryBudget {
    /// Chunks at most, held by logs and spare together.
    chunks_max: usize,
    /// Chunks held by logs.
    used: AtomicUsize,
    /// Chunks a log gave back, for the next ones (see the module
    /// documentation): addresses of allocations of `take`.
    spare: Mutex<Vec<usize>>,
}

impl LogMemoryBudget {
    /// A budget of `bytes` (rounded down to whole chunks; 0: none).
    pub(crate) fn new(bytes: u64) -> Arc<LogMemoryBudget> {
        Arc::new(LogMemoryBudget {
            chunks_max: usize::try_from(bytes / CHUNK_BYTES as u64).unwrap_or(usize::MAX),
            used: AtomicUsize::new(0),
            spare: Mutex::new(Vec::new()),
        })
    }

    /// Bytes of the chunks logs hold now.
    pub(crate) fn used_bytes(&self) -> u64 {
        self.used.load(Ordering::Relaxed) as u64 * CHUNK_BYTES as u64
    }

    /// The spare chunks (a poisoned lock is taken as it is: the vector of
    /// addresses stays whole whatever panicked).
    fn spare(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A chunk (a spare one, else a new one), if the budget has room for
    /// one more. Its bytes are whatever a log left in it.
    fn take(&self) -> Option<*mut u8> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.chunks_max).then_some(n + 1)
            })
            .ok()?;
        if let Some(chunk) = self.spare().pop() {
            return Some(chunk as *mut u8);
        }
        // Zeroed by the allocator (fresh pages): no pass over it. Its pages
        // mapped at once: the appender's first writes to a fresh chunk
        // were 256 page faults.
        // SAFETY: the layout's size is not zero.
        let chunk = unsafe { std::alloc::alloc_zeroed(chunk_layout()) };
        if chunk.is_null() {
            std::alloc::handle_alloc_error(chunk_layout());
        }
        crate::prefetch::populate_pages(chunk, CHUNK_BYTES);
        Some(chunk)
    }

    /// `chunk`, of `take`, given back (kept spare).
    fn put_back(&self, chunk: *mut u8) {
        self.spare().push(chunk as usize);
        self.used.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for LogMemoryBudget {
    fn drop(&mut self) {
        for chunk in self.spare().drain(..) {
            // SAFETY: an allocation of `take`, given back once, which no
            // log holds (every log holds the budget until it drops).
            unsafe { free_chunk(chunk as *mut u8) };
        }
    }
}

/// Frees a chunk of [`LogMemoryBudget::take`].
///
/// # Safety
/// `chunk` came from `take`, is freed once, and nothing reads it after.
unsafe fn free_chunk(chunk: *mut u8) {
    std::alloc::dealloc(chunk, chunk_layout());
}

/// [`LogMemory::state`]: appended to and read.
const OPEN: u8 = 0;
/// [`LogMemory::state`]: read no more; its chunks are freed as soon as no
/// reader pins them and no append is under way.
const RELEASED: u8 = 1;

/// A value on a cache line of its own.
#[repr(align(128))]
struct Line<T>(T);

/// The bytes of one log from offset 0, in chunks of the budget: one
/// appender at a time (the layer's writer, under its lock; an append that
/// finds another under way is refused), any number of readers beside it.
pub(crate) struct LogMemory {
    budget: Arc<LogMemoryBudget>,
    /// Chunk `i` holds the log's bytes from `i · CHUNK_BYTES`: set once by
    /// an append, null before and once freed.
    chunks: Box<[AtomicPtr<u8>]>,
    /// Bytes held: stored by an append after it copied them in (Release),
    /// so a reader that loads it (Acquire) sees every byte below it.
    len: Line<AtomicU64>,
    /// Bytes of out-of-line values among them (see [`Self::mostly_values`]).
    values: AtomicU64,
    /// An append or a free of the chunks is under way (whoever sets it
    /// owns the chunk table until it clears it).
    busy: AtomicBool,
    /// [`OPEN`] or [`RELEASED`], beside the readers that pin the chunks.
    pins: Line<(AtomicU8, AtomicUsize)>,
    /// The appender holds a pin ([`Self::hold_for_appender`]).
    appending: AtomicBool,
}

/// Bytes of one chunk shared with the log's file writer, with a pin of
/// their own ([`LogMemory::share`]).
pub(crate) struct SharedChunk {
    memory: Arc<LogMemory>,
    bytes: *const u8,
    len: usize,
}

// SAFETY: the bytes never change (they lie below the memory's `len`) and
// the pin keeps them allocated until the drop, on whichever thread.
unsafe impl Send for SharedChunk {}
// SAFETY: as above; shared readers only read them.
unsafe impl Sync for SharedChunk {}

impl AsRef<[u8]> for SharedChunk {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: see `LogMemory::share`: below `len`, pinned.
        unsafe { std::slice::from_raw_parts(self.bytes, self.len) }
    }
}

impl Drop for SharedChunk {
    fn drop(&mut self) {
        self.memory.unpin();
    }
}

/// The held bytes, pinned: no chunk is freed while one is alive.
pub(crate) struct Pinned<'a> {
    memory: &'a LogMemory,
    len: u64,
}

impl LogMemory {
    /// The memory of a log whose first bytes (its header) are `head`;
    /// `None` when the budget has no room.
    pub(crate) fn new(budget: &Arc<LogMemoryBudget>, head: &[u8]) -> Option<LogMemory> {
        let chunks = (0..budget.chunks_max.min(LOG_CHUNKS_MAX))
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        let memory = LogMemory {
            budget: Arc::clone(budget),
            chunks,
            len: Line(AtomicU64::new(0)),
            values: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            pins: Line((AtomicU8::new(OPEN), AtomicUsize::new(0))),
            appending: AtomicBool::new(false),
        };
        memory.append(head).then_some(memory)
    }

    /// Counts `n` more bytes of out-of-line values (values of whole pages,
    /// appended already); true once they are more than half the bytes
    /// held. Such a log is most likely kept as a value file, whose flush
    /// reads only its small entries: holding its values is waste (a log
    /// of 8 KiB values outgrew the budget and was copied for nothing).
    pub(crate) fn mostly_values(&self, n: usize) -> bool {
        let values = self.values.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        values * 2 > self.len.0.load(Ordering::Relaxed)
    }

    /// Bytes held (the log's offsets `0..len`).
    pub(crate) fn len(&self) -> u64 {
        self.len.0.load(Ordering::Acquire)
    }

    /// Whether it was released (is read no more).
    pub(crate) fn is_released(&self) -> bool {
        self.pins.0 .0.load(Ordering::SeqCst) == RELEASED
    }

    /// Appends `bytes`, the log's next ones; `false` when it cannot (the
    /// budget has no room for them, it was released, another append is
    /// under way): it is then released, as it no longer holds the log.
    pub(crate) fn append(&self, bytes: &[u8]) -> bool {
        self.append_parts(&[bytes])
    }

    /// [`Self::append`] of `parts`, one after the other.
    pub(crate) fn append_parts(&self, parts: &[&[u8]]) -> bool {
        if self.is_released() {
            return false;
        }
        if self.busy.swap(true, Ordering::SeqCst) {
            self.release();
            return false;
        }
        let done = !self.is_released() && parts.iter().all(|p| self.append_owned(p));
        self.busy.store(false, Ordering::SeqCst);
        if !done {
            self.pins.0 .0.store(RELEASED, Ordering::SeqCst);
        }
        // Released now, or by a reader while we appended (its free found
        // the table ours): free what no pin holds.
        if self.is_released() {
            self.try_free();
        }
        done
    }

    /// [`Self::append`] with the chunk table owned (`busy` set by us).
    fn append_owned(&self, mut bytes: &[u8]) -> bool {
        let mut len = self.len.0.load(Ordering::Relaxed);
        while !bytes.is_empty() {
            let i = (len / CHUNK_BYTES as u64) as usize;
            let at = (len % CHUNK_BYTES as u64) as usize;
            let Some(slot) = self.chunks.get(i) else {
                return false;
            };
            let mut chunk = slot.load(Ordering::Relaxed);
            if chunk.is_null() {
                match self.budget.take() {
                    Some(c) => {
                        slot.store(c, Ordering::Release);
                        chunk = c;
                    }
                    None => return false,
                }
            }
            let n = (CHUNK_BYTES - at).min(bytes.len());
            // SAFETY: `at + n <= CHUNK_BYTES` lies in the chunk; bytes at
            // and above `len` are read by no one (readers stay below the
            // `len` they loaded, which is at most ours), and we own the
            // table (`busy`), so no other append writes them either.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), chunk.add(at), n) };
            bytes = &bytes[n..];
            len += n as u64;
            self.len.0.store(len, Ordering::Release);
        }
        true
    }

    /// Stops reads of it, and frees its chunks now if none is pinned and
    /// no append is under way, else as soon as that is so (the last pin to
    /// go, or the drop).
    pub(crate) fn release(&self) {
        self.pins.0 .0.store(RELEASED, Ordering::SeqCst);
        self.try_free();
    }

    /// Frees the chunks if released and unpinned, unless another holds the
    /// table (`busy`): that one checks again once it lets the table go.
    ///
    /// Every step is SeqCst, with `pin`'s count then state: a reader either
    /// counted itself before the release, and is seen here, or sees the
    /// release and reads nothing; and a pin that goes while we hold the
    /// table (its own free refused) is seen by our check after we let go.
    fn try_free(&self) {
        let releasable = || {
            self.is_released()
                && self.pins.0 .1.load(Ordering::SeqCst) == 0
                && self
                    .chunks
                    .first()
                    .is_some_and(|c| !c.load(Ordering::Acquire).is_null())
        };
        while releasable() {
            if self.busy.swap(true, Ordering::SeqCst) {
                return;
            }
            if releasable() {
                for slot in self.chunks.iter() {
                    let chunk = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
                    if !chunk.is_null() {
                        // Swapped out once, and no pin can read it (see
                        // above): the next log may write it.
                        self.budget.put_back(chunk);
                    }
                }
            }
            self.busy.store(false, Ordering::SeqCst);
        }
    }

    /// Takes the appender's pin, which keeps every chunk while the log's
    /// file is written from them, whether the memory is released meanwhile
    /// or not (a reader's release must not free bytes not yet in the file);
    /// `false` when released already or held already. Held until
    /// [`Self::end_appending`]. The appender's calls (this one,
    /// [`Self::share`], [`Self::appended`], `end_appending`) come from one
    /// thread at a time (the log writer's owner).
    pub(crate) fn hold_for_appender(&self) -> bool {
        self.pins.0 .1.fetch_add(1, Ordering::SeqCst);
        if self.is_released() || self.appending.swap(true, Ordering::SeqCst) {
            self.unpin();
            return false;
        }
        true
    }

    /// Lets the appender's pin go (if held): the chunks are freed once the
    /// memory is released and no other pin holds them.
    pub(crate) fn end_appending(&self) {
        if self.appending.swap(false, Ordering::SeqCst) {
            self.unpin();
        }
    }

    /// The bytes held now, pinned while the appender's pin is held, released
    /// or not; `None` without it.
    pub(crate) fn appended(&self) -> Option<Pinned<'_>> {
        self.pins.0 .1.fetch_add(1, Ordering::SeqCst);
        if !self.appending.load(Ordering::SeqCst) {
            self.unpin();
            return None;
        }
        Some(Pinned {
            memory: self,
            len: self.len(),
        })
    }

    /// The log's bytes `from..to`, below `len` and in one chunk, with a pin
    /// of their own, for the log's writer to write to the file from; taken
    /// while the appender's pin is held (released or not). `None` when it
    /// is not held, or the bytes are not all held in one chunk.
    pub(crate) fn share(self: &Arc<Self>, from: u64, to: u64) -> Option<SharedChunk> {
        let pinned = self.appended()?;
        let (i, at) = (
            (from / CHUNK_BYTES as u64) as usize,
            (from % CHUNK_BYTES as u64) as usize,
        );
        let n = usize::try_from(to.checked_sub(from)?).ok()?;
        if to > pinned.len() || at + n > CHUNK_BYTES || n == 0 {
            return None;
        }
        let bytes = pinned.chunk_bytes(i, at, n).as_ptr();
        // The pin passes to the share (its drop unpins).
        std::mem::forget(pinned);
        Some(SharedChunk {
            memory: Arc::clone(self),
            bytes,
            len: n,
        })
    }

    /// The bytes held now, pinned; `None` once released.
    pub(crate) fn pin(&self) -> Option<Pinned<'_>> {
        self.pins.0 .1.fetch_add(1, Ordering::SeqCst);
        if self.is_released() {
            self.unpin();
            return None;
        }
        Some(Pinned {
            memory: self,
            len: self.len(),
        })
    }

    fn unpin(&self) {
        self.pins.0 .1.fetch_sub(1, Ordering::SeqCst);
        if self.is_released() {
            self.try_free();
        }
    }

    /// Flips bit 0 of the byte at `at` (a test's rot of memory).
    ///
    /// # Safety
    /// Nothing reads or appends to the memory meanwhile.
    #[cfg(test)]
    pub(crate) unsafe fn rot(&self, at: u64) {
        let chunk = self.chunks[(at / CHUNK_BYTES as u64) as usize].load(Ordering::Acquire);
        assert!(!chunk.is_null() && at < self.len());
        *chunk.add((at % CHUNK_BYTES as u64) as usize) ^= 1;
    }
}

impl Pinned<'_> {
    /// Bytes held when pinned (the log's offsets `0..len`).
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The `n` bytes at `from` of chunk `i`; within the pinned `len`.
    fn chunk_bytes(&self, i: usize, at: usize, n: usize) -> &[u8] {
        debug_assert!(at + n <= CHUNK_BYTES && (i * CHUNK_BYTES + at + n) as u64 <= self.len);
        let chunk = self.memory.chunks[i].load(Ordering::Acquire);
        // SAFETY: the bytes lie below the `len` loaded when pinned, so
        // their chunk was stored before it (Release/Acquire) and they
        // never change; the pin keeps the chunk from being freed.
        unsafe { std::slice::from_raw_parts(chunk.add(at), n) }
    }

    /// The held bytes below `end`, chunk by chunk, in order.
    pub(crate) fn chunks(&self, end: u64) -> impl Iterator<Item = &[u8]> {
        let end = end.min(self.len);
        let count = end.div_ceil(CHUNK_BYTES as u64) as usize;
        (0..count).map(move |i| {
            let from = i as u64 * CHUNK_BYTES as u64;
            self.chunk_bytes(i, 0, (end - from).min(CHUNK_BYTES as u64) as usize)
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
            return Some(self.chunk_bytes((from / CHUNK_BYTES as u64) as usize, at, len));
        }
        scratch.clear();
        scratch.resize(len, 0);
        self.read(from, scratch).then_some(&scratch[..])
    }

    /// The `len` bytes at `from`, copied; `None` when not all held.
    pub(crate) fn to_vec(&self, from: u64, len: usize) -> Option<Vec<u8>> {
        let mut out = vec![0u8; len];
        self.read(from, &mut out).then_some(out)
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
            let at = (pos % CHUNK_BYTES as u64) as usize;
            let n = (CHUNK_BYTES - at).min(out.len() - done);
            out[done..done + n].copy_from_slice(self.chunk_bytes(
                (pos / CHUNK_BYTES as u64) as usize,
                at,
                n,
            ));
            done += n;
            pos += n as u64;
        }
        true
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.memory.unpin();
    }
}

impl Drop for LogMemory {
    fn drop(&mut self) {
        for slot in self.chunks.iter_mut() {
            let chunk = std::mem::replace(slot.get_mut(), std::ptr::null_mut());
            if !chunk.is_null() {
                // Nothing else can reach it now.
                self.budget.put_back(chunk);
            }
        }
    }
}

impl std::fmt::Debug for LogMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogMemory")
            .field("len", &self.len())
            .finish()
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
        // Sizes scale with the chunk (4 KiB of head at 1 MiB chunks).
        let head = bytes(CHUNK_BYTES / 256, 1);
        let m = LogMemory::new(&budget, &head).expect("room");
        let mut log = head.clone();
        for (i, n) in [
            100,
            CHUNK_BYTES,
            7,
            2 * CHUNK_BYTES + 13,
            0,
            CHUNK_BYTES / 200,
        ]
        .iter()
        .enumerate()
        {
            let b = bytes(*n, i as u8);
            assert!(m.append(&b));
            log.extend_from_slice(&b);
        }
        assert_eq!(m.len(), log.len() as u64);
        assert_eq!(budget.used_bytes(), 4 * CHUNK_BYTES as u64);
        let pinned = m.pin().expect("held");
        for (from, len) in [
            (0, log.len()),
            (CHUNK_BYTES - 3, 10),
            (CHUNK_BYTES / 256 - 1, CHUNK_BYTES * 2),
            (log.len() - 1, 1),
        ] {
            let mut out = vec![0u8; len];
            assert!(pinned.read(from as u64, &mut out), "{from}+{len}");
            assert!(out == log[from..from + len], "{from}+{len}");
            let mut scratch = Vec::new();
            let slice = pinned.slice(from as u64, len, &mut scratch).expect("held");
            assert!(slice == &log[from..from + len], "{from}+{len}");
        }
        let whole: Vec<u8> = pinned.chunks(u64::MAX).flatten().copied().collect();
        assert!(whole == log);
        assert_eq!(pinned.chunks(CHUNK_BYTES as u64).count(), 1);
        // Not held: nothing copied.
        let mut out = vec![9u8; 2];
        assert!(!pinned.read(log.len() as u64 - 1, &mut out));
        assert!(!pinned.read(u64::MAX, &mut out));
        assert!(pinned
            .slice(log.len() as u64 - 1, 2, &mut Vec::new())
            .is_none());
        assert_eq!(out, [9, 9]);
        drop(pinned);
        drop(m);
        assert_eq!(budget.used_bytes(), 0);
    }

    #[test]
    fn the_budget_refuses_past_its_maximum_until_chunks_come_back() {
        let budget = LogMemoryBudget::new(3 * CHUNK_BYTES as u64 + 5);
        let a = LogMemory::new(&budget, &bytes(10, 0)).expect("room");
        assert!(a.append(&bytes(2 * CHUNK_BYTES, 1)));
        assert_eq!(budget.used_bytes(), 3 * CHUNK_BYTES as u64);
        // A fourth chunk is refused, for this log and for a new one; the
        // log that could not take it is released, its chunks given back.
        assert!(LogMemory::new(&budget, &bytes(10, 0)).is_none());
        assert!(!a.append(&bytes(CHUNK_BYTES, 2)));
        assert!(a.is_released() && a.pin().is_none());
        assert_eq!(budget.used_bytes(), 0);
        assert!(!a.append(b"more"), "a released memory takes no more");
        drop(a);
        assert_eq!(budget.used_bytes(), 0);
        let b = LogMemory::new(&budget, &bytes(10, 3)).expect("room again");
        assert_eq!(budget.used_bytes(), CHUNK_BYTES as u64);
        let mut out = [0u8; 10];
        assert!(b.pin().expect("held").read(0, &mut out));
        assert!(out[..] == bytes(10, 3)[..]);
        // No budget: no memory.
        assert!(LogMemory::new(&LogMemoryBudget::new(0), b"h").is_none());
    }

    #[test]
    fn a_released_memory_is_freed_when_its_last_pin_goes() {
        let budget = LogMemoryBudget::new(4 * CHUNK_BYTES as u64);
        let m = LogMemory::new(&budget, &bytes(CHUNK_BYTES + 1, 4)).expect("room");
        let (p1, p2) = (m.pin().expect("held"), m.pin().expect("held"));
        m.release();
        assert!(m.pin().is_none(), "released: no new pin");
        assert_eq!(budget.used_bytes(), 2 * CHUNK_BYTES as u64, "pinned: kept");
        // What the pins hold is still the log's bytes.
        let mut out = vec![0u8; 2];
        assert!(p2.read(CHUNK_BYTES as u64 - 1, &mut out));
        assert!(out[..] == bytes(CHUNK_BYTES + 1, 4)[CHUNK_BYTES - 1..]);
        drop(p1);
        assert_eq!(budget.used_bytes(), 2 * CHUNK_BYTES as u64);
        drop(p2);
        assert_eq!(budget.used_bytes(), 0, "the last pin frees");
        m.release();
        drop(m);
        assert_eq!(budget.used_bytes(), 0);
    }

    /// Readers beside the appender see, at every `len` they load, exactly
    /// the bytes appended below it; one of them releases the memory half
    /// way, and the appends after are refused, the chunks freed once the
    /// last reader lets go.
    #[test]
    fn readers_beside_the_appender_see_exactly_the_bytes_appended() {
        let budget = LogMemoryBudget::new(64 * CHUNK_BYTES as u64);
        let m = LogMemory::new(&budget, &[]).expect("room");
        // The byte at offset i is a function of i: a reader checks any.
        let byte = |i: u64| (i.wrapping_mul(0x9e37_79b9) >> 13) as u8;
        let total = 9 * CHUNK_BYTES as u64 + 77;
        let release_at = 6 * CHUNK_BYTES as u64;
        let appended = std::thread::scope(|s| {
            for r in 0..2u64 {
                let m = &m;
                s.spawn(move || {
                    let mut seen = 0u64;
                    let mut out = vec![0u8; 4096];
                    while let Some(p) = m.pin() {
                        let len = p.len();
                        assert!(len >= seen, "len went back");
                        seen = len;
                        // The last bytes below len, and some far below.
                        for from in [len.saturating_sub(4096), (len / 3) & !7] {
                            let n = (len - from).min(4096) as usize;
                            assert!(p.read(from, &mut out[..n]));
                            for (j, b) in out[..n].iter().enumerate() {
                                assert_eq!(*b, byte(from + j as u64), "at {}", from + j as u64);
                            }
                        }
                        if r == 0 && len >= release_at {
                            drop(p);
                            m.release();
                            break;
                        }
                    }
                });
            }
            let mut pos = 0u64;
            let mut step = 1u64;
            while pos < total {
                let n = step.min(total - pos);
                let chunk: Vec<u8> = (pos..pos + n).map(byte).collect();
                if !m.append(&chunk) {
                    break;
                }
                pos += n;
                step = step * 7 % 70_001 + 1;
            }
            pos
        });
        assert!(appended >= release_at, "released before {appended}");
        assert!(m.is_released());
        assert!(!m.append(b"x"));
        assert_eq!(budget.used_bytes(), 0, "freed once every reader let go");
    }

    /// The appender's pin keeps every chunk through a release, by a reader
    /// on another thread in the middle of the appends: readers' pins are
    /// refused once it is released, the appender's views and shares are
    /// not, and hold the log's bytes; the chunks go back once the appender
    /// lets go and the last share drops.
    #[test]
    fn the_appenders_pin_keeps_every_chunk_through_a_release() {
        let budget = LogMemoryBudget::new(8 * CHUNK_BYTES as u64);
        let head = bytes(CHUNK_BYTES / 4, 1);
        let m = Arc::new(LogMemory::new(&budget, &head).expect("room"));
        assert!(m.hold_for_appender());
        assert!(!m.hold_for_appender(), "one appender");
        let mut log = head.clone();
        let mut shares = Vec::new();
        std::thread::scope(|s| {
            let reader = {
                let m = Arc::clone(&m);
                s.spawn(move || {
                    while m.pin().is_some_and(|p| p.len() < 2 * CHUNK_BYTES as u64) {
                        std::thread::yield_now();
                    }
                    m.release();
                })
            };
            let mut i = 0u8;
            while log.len() < 4 * CHUNK_BYTES {
                let b = bytes(CHUNK_BYTES / 3 + 5, i);
                if !m.append(&b) {
                    break;
                }
                log.extend_from_slice(&b);
                i += 1;
                if let Some(share) = m.share(0, CHUNK_BYTES as u64) {
                    shares.push(share);
                }
            }
            reader.join().expect("reader");
        });
        // Released, by the reader or by the budget once spent meanwhile.
        assert!(m.is_released() && m.pin().is_none());
        assert!(!m.append(b"more"), "released: no more appends");
        assert!(m.len() >= log.len() as u64);
        let view = m.appended().expect("the appender's view");
        let mut out = vec![0u8; log.len()];
        assert!(view.read(0, &mut out) && out == log, "every byte kept");
        drop(view);
        assert!(
            m.share(CHUNK_BYTES as u64 - 1, CHUNK_BYTES as u64 + 1)
                .is_none(),
            "two chunks"
        );
        assert!(m.share(0, m.len() + 1).is_none(), "beyond the end");
        let last = m
            .share(CHUNK_BYTES as u64, 2 * CHUNK_BYTES as u64)
            .expect("held");
        assert!(last.as_ref() == &log[CHUNK_BYTES..2 * CHUNK_BYTES]);
        let held = budget.used_bytes();
        assert!(held >= 2 * CHUNK_BYTES as u64);
        m.end_appending();
        assert!(m.appended().is_none() && m.share(0, 1).is_none());
        assert_eq!(budget.used_bytes(), held, "shares still pin the chunks");
        for share in &shares {
            assert!(share.as_ref() == &log[..CHUNK_BYTES]);
        }
        drop(shares);
        drop(last);
        assert_eq!(budget.used_bytes(), 0, "the last share gave them back");
    }
}
