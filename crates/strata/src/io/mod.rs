//! The I/O layer: every byte the engine reads or writes goes through here.
//!
//! It owns the choice of I/O mode (page cache or O_DIRECT) and engine
//! (pread/pwrite or io_uring), the alignment rules of direct I/O, the
//! double-buffered appending writer, and the counting of every operation.
//! Nothing above this layer opens a file by itself, so tests can put a
//! recording or failing file in its place (see [`BlockFile`]).

mod aligned_buf;
mod buffered_writer;
mod file;
mod stats;
mod uring;

pub use aligned_buf::{align_down, align_up, is_aligned, AlignedBuf};
pub use buffered_writer::{BufferedWriter, ShutdownMode, WRITER_CAPACITY_MAX_BYTES};
pub(crate) use file::short_read;
pub use file::{
    read_batch, sync_dir, BlockFile, FileOptions, IoEngine, IoFile, IoMode,
    ALIGNMENT_DEFAULT_BYTES, ALIGNMENT_MAX_BYTES,
};
pub use stats::{FileClass, IoStats, IoStatsSnapshot, OpKind};
