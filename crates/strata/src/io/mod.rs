//! The I/O layer: every byte the engine reads or writes, and every other
//! call it makes to the operating system, goes through here.
//!
//! # The storage seam
//!
//! [`Storage`] is the one trait through which the engine touches a disk. It
//! owns: creating and opening files by [`FileClass`] (in an [`IoMode`] and
//! an [`IoEngine`]), batched reads (one io_uring submission for a multi-key
//! read), the directory operations (stat, list, create, remove, rename,
//! fsync of a directory) and the directory lock. Its files are
//! [`StorageFile`]s: positioned reads and writes, fdatasync, set length,
//! length, forgetting cached copies of a range. It also owns the one policy
//! for a read whose bytes fail their check ([`read_verified`]: counted,
//! the cached copies forgotten, read once more, the second result stands),
//! which every reader of the engine goes through. Who calls it: `Db`
//! (open, recovery, the write path, flush, the lock), the in-memory layer
//! (its log), the delta layers (through `LayerFile`) and the manifest.
//! Nothing outside this module calls
//! `std::fs`, opens a `File` or calls `libc`; `Options::storage` picks the
//! storage (empty: [`OsStorage`]).
//!
//! Implementations:
//! - [`OsStorage`], the real one: [`IoFile`] (O_DIRECT or the page cache,
//!   pread/pwrite or io_uring, the statx alignment, the fallback where the
//!   filesystem refuses O_DIRECT) and the filesystem's directories, flock.
//! - `sim::SimStorage` (feature `sim`, and unit tests): files in memory,
//!   deterministic from a seed, with I/O errors at the Nth operation,
//!   ENOSPC, power loss that keeps, drops or tears unsynced writes per
//!   sector, and corruption on read.
//!
//! Invariants every storage keeps (the engine relies on them, the
//! simulator enforces them):
//! - direct transfers are aligned (address, length, offset a multiple of the
//!   file's `alignment()`, a power of two), or the call is an
//!   `InvalidInput::Unaligned` error and nothing moves;
//! - a write is durable once `sync_data` of its file returns, and not
//!   before; a created, renamed or removed name once `sync_dir` of its
//!   directory returns, and not before; a sector (512 bytes) is written
//!   whole or not at all (see docs/format.md);
//! - reads, writes and syncs are counted in the database's [`IoStats`] by
//!   file class, whatever the storage, so `Db::stats().io` reports them
//!   (and so are the reads made again after a failed check);
//! - a call is dispatched dynamically once, never per byte; the write and
//!   read paths make no copy or allocation for the seam.
//!
//! # The rest of the layer
//!
//! The choice of I/O mode and engine, the alignment rules of direct I/O
//! ([`AlignedBuf`]), the multi-buffered appending writer
//! ([`BufferedWriter`], generic over [`BlockFile`] so tests can put a
//! recording or failing file in its place), and the counting of every
//! operation ([`IoStats`]).

use std::sync::Arc;

mod aligned_buf;
mod buffered_writer;
mod file;
mod mode;
mod os;
pub(crate) mod priority;
mod read_ahead;
mod ring;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod stats;
mod storage;
mod uring;

pub use aligned_buf::{align_down, align_up, is_aligned, AlignedBuf};
pub use buffered_writer::{
    BufferedWriter, SharedBytes, ShutdownMode, WRITER_BUFFERS_MAX, WRITER_CAPACITY_MAX_BYTES,
};
pub use file::IoFile;
pub use mode::{
    BlockFile, FileOptions, IoEngine, IoMode, ALIGNMENT_DEFAULT_BYTES, ALIGNMENT_MAX_BYTES,
};
pub use os::OsStorage;
pub(crate) use read_ahead::ReadAhead;
pub use ring::UringRing;
pub use stats::{FileClass, IoStats, IoStatsSnapshot, OpKind};
pub(crate) use storage::read_aligned_steps;
pub(crate) use storage::{again_on_corruption, is_not_found, read_range_with, short_read};
pub use storage::{
    read_verified, EntryKind, ReadRequest, ReadRing, RingDone, Storage, StorageFile, StorageLock,
    SyncRing, RING_SLOTS_MAX,
};

/// Largest single read or write of background work (a flush reading its
/// log and writing its layer, a compaction's read-ahead and outputs,
/// recovery reading a log, any large `read_range`): the device serves a
/// request whole, so a foreground read queued behind one waits for all of
/// it. Measured on this project's disk (`point_read` bench, get and raw
/// 4 KiB pread p99 while a merge runs at the default pace): 2.3–3.6 ms
/// with 256 KiB requests, 1.6–1.9 ms with 128 KiB, 0.6–1.2 ms with 64 KiB;
/// a flush that read its 8 MiB log in one request held reads for 15 ms.
/// Ingest was level within the noise at 64 KiB and 256 KiB.
pub const BACKGROUND_IO_BYTES_MAX: usize = 64 << 10;

/// Largest single read or write of background work while no foreground
/// read waits for the device (a flush or a merge beside writes only, as in
/// a bulk load): the 64 KiB requests of `BACKGROUND_IO_BYTES_MAX` cost a
/// flush half its speed when nothing needs the device in between. Measured
/// (`strata lab run ingest --quick`, DirectRw, one run): 8 KiB Sequential
/// delta=Yes 174 MiB/s with 64 KiB requests, 337 MiB/s with 1 MiB; 100 B
/// Sequential delta=Yes 100 and 136 MiB/s.
pub const BACKGROUND_IO_IDLE_BYTES_MAX: usize = 1 << 20;
const _: () = assert!(BACKGROUND_IO_IDLE_BYTES_MAX.is_multiple_of(BACKGROUND_IO_BYTES_MAX));

/// The size of a background job's next request, asked before each one:
/// `BACKGROUND_IO_BYTES_MAX` while foreground reads need the device, else
/// `BACKGROUND_IO_IDLE_BYTES_MAX` (see `background_step_bytes`). A
/// multiple of every alignment up to 64 KiB.
pub type IoSteps = Arc<dyn Fn() -> usize + Send + Sync>;

/// A background request's size: small while foreground reads need the
/// device (a get queued behind a request waits for all of it), large when
/// none does.
pub(crate) fn background_step_bytes(foreground_reading: bool) -> usize {
    if foreground_reading {
        BACKGROUND_IO_BYTES_MAX
    } else {
        BACKGROUND_IO_IDLE_BYTES_MAX
    }
}

/// The buffer of a background writer (a flush's or a compaction's output)
/// on `file`: the configured `writer_buffer_bytes`, at most
/// `BACKGROUND_IO_IDLE_BYTES_MAX` (or the file's alignment, if larger); the
/// writer hands each buffer to the file in requests its `IoSteps` size.
pub(crate) fn background_writer_bytes(file: &dyn StorageFile, writer_buffer_bytes: usize) -> usize {
    writer_buffer_bytes.min(BACKGROUND_IO_IDLE_BYTES_MAX.max(file.alignment()))
}
