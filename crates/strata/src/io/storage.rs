//! The storage seam: the one trait through which the engine reaches the
//! operating system, the file trait its files implement, and the one policy
//! for a read whose bytes fail their check ([`read_verified`]).
//!
//! [`Storage`] owns every call the engine makes that touches a disk: create
//! or open a file by class, batched reads, rings of reads in flight
//! ([`ReadRing`]), the directory operations (stat, list, create, remove,
//! rename, fsync) and the directory lock. A file it
//! returns, a [`StorageFile`], owns the calls on one file: positioned reads
//! and writes, fdatasync, set length, length, forgetting cached copies of a
//! range. `Db`, the layers, the manifest
//! and recovery hold an `Arc<dyn Storage>` and `Arc<dyn StorageFile>`s and
//! nothing else; [`super::OsStorage`] is the operating system's
//! implementation (`IoFile` and its modes, engines, alignment and
//! statistics), `sim::SimStorage` a simulated one for tests.
//!
//! The dispatch is dynamic per call, never per byte: a call moves a caller's
//! buffer whole, so a seam call costs one indirect call next to a system
//! call. Every implementation keeps the same contract:
//! - a file's `alignment()` is a power of two; when its mode reads (writes)
//!   directly, a read (write) whose address, length or offset is not a
//!   multiple of it is an `InvalidInput::Unaligned` error, never a partial
//!   transfer;
//! - a write is durable only after `sync_data` of its file returns; a new
//!   name (create, rename, remove) only after `sync_dir` of its directory;
//! - every read, write and sync is counted into the `IoStats` given at open,
//!   under the file's class;
//! - errors name the path and the operation; a missing file or directory is
//!   an `Error::Io` whose source has `ErrorKind::NotFound`.
//!
//! A read may return other bytes than those stored (docs/format.md, "What
//! the formats assume of the storage"); every reader checks what it reads
//! (checksums, then the structure), and every reader whose check fails
//! reads once more through [`read_verified`]: the failure is counted
//! (`IoStats::record_read_retry`), the file is asked to forget cached copies
//! of the range ([`StorageFile::forget_cached`]) so that the second read
//! comes from the device, and the second result stands, whatever it is.

use super::aligned_buf::{align_down, align_up, is_aligned, AlignedBuf};
use super::mode::{BlockFile, FileOptions, IoMode};
use super::stats::{FileClass, IoStats};
use crate::error::{Error, InvalidInput, Result};
use std::any::Any;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

/// One read of a batch: the file, the offset, the length (any alignment).
pub type ReadRequest<'a> = (&'a dyn StorageFile, u64, usize);

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
}

/// A file opened through a [`Storage`]. Positional calls only, so any thread
/// may read while another writes (`Send + Sync`).
pub trait StorageFile: BlockFile + std::fmt::Debug {
    /// The path it was opened at.
    fn path(&self) -> &Path;
    /// The mode in effect (`Buffered` after a fallback).
    fn mode(&self) -> IoMode;
    /// The class its operations are counted under.
    fn class(&self) -> FileClass;
    /// The file's current length (a stat).
    fn len(&self) -> Result<u64>;
    /// This file as `Any`, so a storage can recognize its own files in a
    /// batch (see [`Storage::read_batch`]).
    fn as_any(&self) -> &dyn Any;

    /// Forgets cached copies of `len` bytes at `offset` (0: to the end of
    /// the file), so that the next read of them comes from the device: the
    /// step before a read made again because the bytes read failed their
    /// check ([`read_verified`]). Advice only: nothing is lost, and a
    /// failure is not reported (the next read is checked all the same). By
    /// default nothing: a file whose reads bypass any cache (O_DIRECT) has
    /// nothing to forget.
    fn forget_cached(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }

    /// True when the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Reads exactly `buf.len()` bytes at `offset`; end of file is an error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let n = self.read_at(buf, offset)?;
        if n < buf.len() {
            return Err(short_read(
                self.path(),
                format!(
                    "wanted {} bytes at offset {offset}, the file ends after {n}",
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    /// Like `read_at`, in requests of at most `BACKGROUND_IO_BYTES_MAX` (or
    /// the alignment, if larger; both are powers of two): the device serves
    /// a request whole, and a foreground read queued behind a large one
    /// waits for all of it.
    fn read_at_in_steps(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.read_at_steps(buf, offset, &|| super::BACKGROUND_IO_BYTES_MAX)
    }

    /// Like `read_at`, in requests whose size `steps` gives before each
    /// (rounded down to the alignment, at least one alignment): a
    /// background job's whole-file reads (see `io::IoSteps`).
    fn read_at_steps(
        &self,
        buf: &mut [u8],
        offset: u64,
        steps: &dyn Fn() -> usize,
    ) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let step = align_down(steps() as u64, self.alignment()).max(self.alignment() as u64);
            let want = (buf.len() - done).min(step as usize);
            let got = self.read_at(&mut buf[done..done + want], offset + done as u64)?;
            done += got;
            if got < want {
                break;
            }
        }
        Ok(done)
    }

    /// Reads `len` bytes at any `offset`, whatever the mode: with direct
    /// reads the read is widened to aligned bounds and the wanted part copied
    /// out, in steps (`read_at_in_steps`). Reading past the end of the file
    /// is an error.
    fn read_range(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if !self.mode().direct_reads() {
            // Read straight into the buffer returned: no copy.
            let mut out = vec![0u8; len];
            self.read_exact_at(&mut out, offset)?;
            return Ok(out);
        }
        read_range_with(self, offset, len, false, <[u8]>::to_vec)
    }

    /// [`Self::read_range`] into a shared buffer (one copy out of the
    /// bounce buffer): what a block cache keeps. The buffer is `frame`
    /// when it is given, `len` bytes long and held by nothing else (no
    /// allocation), else a new one.
    fn read_range_shared(
        &self,
        offset: u64,
        len: usize,
        frame: Option<Arc<[u8]>>,
    ) -> Result<Arc<[u8]>> {
        read_range_with(self, offset, len, false, |b| match frame {
            Some(mut frame) => match Arc::get_mut(&mut frame) {
                Some(bytes) if bytes.len() == b.len() => {
                    bytes.copy_from_slice(b);
                    frame
                }
                _ => Arc::from(b),
            },
            None => Arc::from(b),
        })
    }
}

/// `StorageFile::read_range`, handing the bytes read to `out` (which copies
/// them where they are to live). A large read is made in requests of at
/// most `BACKGROUND_IO_BYTES_MAX` (`StorageFile::read_at_in_steps`), unless
/// `whole`: a value read from a value file is a get's own value, read with
/// one read of its bytes (bounce up to `BOUNCE_WHOLE_BYTES_MAX`), checked in
/// the bounce buffer before its value alone is copied out.
pub(crate) fn read_range_with<F: StorageFile + ?Sized, T>(
    file: &F,
    offset: u64,
    len: usize,
    whole: bool,
    out: impl FnOnce(&[u8]) -> T,
) -> Result<T> {
    let requests = if whole {
        Requests::Whole
    } else {
        Requests::Steps(&|| super::BACKGROUND_IO_BYTES_MAX)
    };
    read_range_in(file, offset, len, requests, out)
}

/// How a direct read too large for the bounce buffer is made.
#[derive(Clone, Copy)]
enum Requests<'a> {
    /// One request (a get's value).
    Whole,
    /// Requests of the sizes it gives (`StorageFile::read_at_steps`).
    Steps(&'a dyn Fn() -> usize),
}

/// [`read_range_with`], large reads made as `requests` says.
fn read_range_in<F: StorageFile + ?Sized, T>(
    file: &F,
    offset: u64,
    len: usize,
    requests: Requests<'_>,
    out: impl FnOnce(&[u8]) -> T,
) -> Result<T> {
    let whole = matches!(requests, Requests::Whole);
    if !file.mode().direct_reads() {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset)?;
        return Ok(out(&buf));
    }
    let alignment = file.alignment();
    let start = align_down(offset, alignment);
    let end = align_up(offset + len as u64, alignment);
    let span = (end - start) as usize;
    let head = (offset - start) as usize;
    let check = |n: usize| {
        if n < head + len {
            return Err(short_read(
                file.path(),
                format!(
                    "wanted {len} bytes at offset {offset}, the file ends at {}",
                    start + n as u64
                ),
            ));
        }
        Ok(())
    };
    // A point read goes through this thread's bounce buffer: no
    // allocation, no zeroing and no fresh page to fault in per read. The
    // bounce is only ever read into, so its bytes past the length need not
    // stay zero (as they must in a buffer that is written out): they are
    // not cleared after each read.
    let mut out = Some(out);
    let bounce_max = if whole {
        BOUNCE_WHOLE_BYTES_MAX
    } else {
        BOUNCE_BYTES_MAX
    };
    let bounced = BOUNCE.with(|cell| {
        let mut buf = match cell.try_borrow_mut() {
            Ok(buf) if span <= bounce_max && alignment <= BOUNCE_ALIGNMENT => buf,
            _ => return None, // too large, or a read inside a read
        };
        if buf.capacity() < span {
            *buf = AlignedBuf::with_capacity(span.next_power_of_two(), BOUNCE_ALIGNMENT);
        }
        let area = &mut buf.spare_capacity_full()[..span];
        let read = file.read_at(area, start);
        let out = out.take().expect("taken once");
        Some(read.and_then(|n| {
            check(n)?;
            Ok(out(&area[head..head + len]))
        }))
    });
    if let Some(result) = bounced {
        return result;
    }
    let mut buf = AlignedBuf::zeroed(span, alignment);
    let area = &mut buf.spare_capacity_full()[..span];
    let n = match requests {
        Requests::Whole => file.read_at(area, start)?,
        Requests::Steps(steps) => file.read_at_steps(area, start, steps)?,
    };
    check(n)?;
    let out = out.take().expect("not taken by the bounce");
    Ok(out(&buf.spare_capacity_full()[head..head + len]))
}

/// The `len` bytes of `file` at the aligned `offset`, read into `buf`
/// (its bytes replaced, no copy out; a buffer too small or aligned too
/// loosely for the read is replaced by a fresh one), in requests whose
/// size `steps` gives before each (`StorageFile::read_at_steps`): a
/// background job's read of a whole file (the uploader's), in large
/// requests while no foreground read needs the device.
pub(crate) fn read_aligned_steps<F: StorageFile + ?Sized>(
    file: &F,
    offset: u64,
    len: usize,
    steps: &dyn Fn() -> usize,
    buf: &mut AlignedBuf,
) -> Result<()> {
    let alignment = file.alignment();
    let direct = file.mode().direct_reads();
    if direct && !is_aligned(offset, alignment) {
        return Err(Error::Internal(format!(
            "a read at offset {offset} of {}, which is not aligned to {alignment}",
            file.path().display()
        )));
    }
    let span = align_up(len as u64, alignment) as usize;
    if buf.capacity() < span || buf.alignment() < alignment {
        *buf = AlignedBuf::with_capacity(span, alignment);
    }
    buf.set_len(span);
    let n = if direct {
        file.read_at_steps(buf.as_mut_slice(), offset, steps)?
    } else {
        file.read_exact_at(&mut buf.as_mut_slice()[..len], offset)?;
        len
    };
    if n < len {
        return Err(short_read(
            file.path(),
            format!(
                "wanted {len} bytes at offset {offset}, the file ends at {}",
                offset + n as u64
            ),
        ));
    }
    buf.truncate(len);
    Ok(())
}

/// Largest read (widened to the alignment) that goes through the bounce
/// buffer of `StorageFile::read_range`; larger ones allocate their own,
/// and are made in steps. A thread's buffer grows to the power of two
/// above the largest read it made.
const BOUNCE_BYTES_MAX: usize = 256 << 10;
/// The same for a value's read in one request (`read_range_with`, `whole`):
/// a 1 MiB value read into a buffer of its own spent a third of its time
/// allocating and faulting the buffer in.
const BOUNCE_WHOLE_BYTES_MAX: usize = 4 << 20;
/// The bounce buffer's alignment: any file alignment up to a page.
const BOUNCE_ALIGNMENT: usize = 4096;

thread_local! {
    /// Each thread's buffer for direct reads of any alignment.
    static BOUNCE: std::cell::RefCell<AlignedBuf> =
        std::cell::RefCell::new(AlignedBuf::empty(BOUNCE_ALIGNMENT));
}

/// Every operating-system call the engine makes. `Send + Sync`: one storage
/// serves every thread of a database (and may serve several databases).
/// Unwind-safe, so `Options`, which holds one, stays unwind-safe (the C API
/// catches panics around it).
pub trait Storage:
    Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe + std::fmt::Debug + 'static
{
    /// Creates (or truncates) `path` for reading and writing, in the mode,
    /// engine and class of `opts`, counting into `stats`.
    fn create(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>>;

    /// Opens the existing file `path` for reading and writing.
    fn open(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>>;

    /// Several reads of any alignment from files of this storage, submitted
    /// together where the storage can (one io_uring submission for a
    /// multi-key read); the bytes of each, in order. Reading past the end of
    /// a file is an error. Built on [`Storage::read_batch_each`].
    fn read_batch(&self, reqs: &[ReadRequest<'_>]) -> Result<Vec<Vec<u8>>> {
        let mut out = vec![Vec::new(); reqs.len()];
        self.read_batch_each(reqs, &mut |i, bytes| {
            out[i] = bytes;
            Ok(())
        })?;
        Ok(out)
    }

    /// [`Storage::read_batch`], handing each read's bytes to
    /// `done(index, bytes)` as the read completes (in completion order where
    /// the reads are submitted together), so the caller can work on one
    /// while the others are in flight. The first error, a read's or
    /// `done`'s, ends the batch. By default one read after another.
    fn read_batch_each(
        &self,
        reqs: &[ReadRequest<'_>],
        done: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        for (i, &(file, offset, len)) in reqs.iter().enumerate() {
            done(i, file.read_range(offset, len)?)?;
        }
        Ok(())
    }

    /// A ring of `slots` reads in flight over this storage's files, for
    /// reads submitted now and reaped as they complete (`Db::read_queue`).
    /// By default each read is made when it is pushed ([`SyncRing`]).
    fn read_ring(&self, slots: usize) -> Result<Box<dyn ReadRing>> {
        Ok(Box::new(SyncRing::new(slots)?))
    }

    /// What `path` names; `None` when nothing does (a stat).
    fn entry_kind(&self, path: &Path) -> Result<Option<EntryKind>>;

    /// The names of the entries of the directory `dir`.
    fn list_dir(&self, dir: &Path) -> Result<Vec<OsString>>;

    /// Creates `dir` and its missing parents (not durable until `sync_dir`
    /// of each parent).
    fn create_dir_all(&self, dir: &Path) -> Result<()>;

    /// Removes the file `path` (its name; open files stay readable).
    fn remove_file(&self, path: &Path) -> Result<()>;

    /// Renames `from` to `to`, replacing `to` atomically.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;

    /// Makes the entries of directory `dir` durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> Result<()>;

    /// Takes an exclusive lock on the file `path` (created if missing),
    /// held until the returned guard is dropped; fails at once if another
    /// holder has it.
    fn lock(&self, path: &Path) -> Result<StorageLock>;
}

/// Most slots of one ring (reads in flight at once).
pub const RING_SLOTS_MAX: usize = 4096;

/// A completed read as a ring hands it back: its slot and its bytes (only
/// the bytes asked for), or the error that ended it.
pub type RingDone<'a> = dyn FnMut(usize, Result<&[u8]>) + 'a;

/// Reads of storage files in flight, each into a slot of its own, handed
/// back as each completes (in completion order), without a thread per
/// read: what a read queue (`Db::read_queue`) drives. Every pushed read is
/// handed back exactly once, whole (bytes asked for) or with its error; a
/// read's faults are the storage's, as for any read. Implementations:
/// [`SyncRing`] (each read made at push; the default) and
/// [`super::UringRing`] (io_uring with registered buffers).
pub trait ReadRing: Send {
    /// The number of slots (reads in flight at most).
    fn slots(&self) -> usize;

    /// Queues a read of `len` bytes at `offset` (any alignment) of `file`
    /// into `slot` (< `slots()`, with no read in flight). The kernel sees
    /// it at the next [`Self::submit`] or [`Self::reap`].
    fn push(
        &mut self,
        slot: usize,
        file: &Arc<dyn StorageFile>,
        offset: u64,
        len: usize,
    ) -> Result<()>;

    /// Hands the reads queued so far to the kernel.
    fn submit(&mut self) -> Result<()>;

    /// Hands the reads queued and not yet submitted to the kernel (in the
    /// same call as the wait: one system call), then every completed read
    /// to `done(slot, bytes or error)`; with `wait`, first waits until at
    /// least one has completed (when any is in flight). An error of the
    /// ring itself (not of a read) is returned.
    fn reap(&mut self, wait: bool, done: &mut RingDone<'_>) -> Result<()>;

    /// Asks the kernel to stop the read in `slot` early; it is handed back
    /// all the same (perhaps with ECANCELED, perhaps whole). Advice only.
    fn cancel(&mut self, slot: usize);

    /// Reads pushed and not yet handed back.
    fn in_flight(&self) -> usize;

    /// How reads are made, for people: "io_uring, registered buffers",
    /// "io_uring", "sync".
    fn engine(&self) -> &'static str;
}

pub(super) fn check_slot(slot: usize, slots: usize) -> Result<()> {
    if slot >= slots {
        return Err(Error::Internal(format!(
            "read ring slot {slot} out of {slots}"
        )));
    }
    Ok(())
}

/// The number of slots asked for, checked.
pub(super) fn check_slots(slots: usize) -> Result<usize> {
    if slots == 0 || slots > RING_SLOTS_MAX {
        return Err(InvalidInput::OptionOutOfRange {
            option: "reads in flight",
            value: slots as u64,
            why: "must be 1..=4096",
        }
        .into());
    }
    Ok(slots)
}

/// Each read made when it is pushed; results handed back at the next reap.
pub struct SyncRing {
    slots: usize,
    done: VecDeque<(usize, Result<Vec<u8>>)>,
}

impl SyncRing {
    pub fn new(slots: usize) -> Result<SyncRing> {
        Ok(SyncRing {
            slots: check_slots(slots)?,
            done: VecDeque::new(),
        })
    }
}

impl ReadRing for SyncRing {
    fn slots(&self) -> usize {
        self.slots
    }

    fn push(
        &mut self,
        slot: usize,
        file: &Arc<dyn StorageFile>,
        offset: u64,
        len: usize,
    ) -> Result<()> {
        check_slot(slot, self.slots)?;
        self.done.push_back((slot, file.read_range(offset, len)));
        Ok(())
    }

    fn submit(&mut self) -> Result<()> {
        Ok(())
    }

    fn reap(&mut self, _wait: bool, done: &mut RingDone<'_>) -> Result<()> {
        while let Some((slot, result)) = self.done.pop_front() {
            hand_made(done, slot, result)
        }
        Ok(())
    }

    fn cancel(&mut self, _slot: usize) {}

    fn in_flight(&self) -> usize {
        self.done.len()
    }

    fn engine(&self) -> &'static str {
        "sync"
    }
}

/// Hands a read made earlier (its bytes, or its error) to `done`.
pub(super) fn hand_made(done: &mut RingDone<'_>, slot: usize, result: Result<Vec<u8>>) {
    match result {
        Ok(bytes) => done(slot, Ok(&bytes)),
        Err(e) => done(slot, Err(e)),
    }
}

/// A lock taken by [`Storage::lock`], released when dropped.
pub struct StorageLock {
    _held: Box<dyn Send + Sync>,
}

impl StorageLock {
    /// A lock that lasts as long as `held` (whose drop releases it).
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        StorageLock {
            _held: Box::new(held),
        }
    }
}

impl std::fmt::Debug for StorageLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StorageLock")
    }
}

/// The one policy for a read whose bytes fail their check, for every reader
/// of the engine (layer files, the logs' values, the manifest): runs
/// `attempt` (a read of the `len` bytes at `offset` of `file`, 0: to its
/// end, and the checks of what it read); when it fails with a corruption
/// error, counts a read retry of the file's class in `stats`, asks `file`
/// to forget cached copies of the range and runs `attempt` once more. The
/// second result stands: a second corruption error is the answer (it names
/// the file and the offset). Other errors are returned at once. Costs
/// nothing but the error check when the first attempt passes.
pub fn read_verified<T>(
    file: &dyn StorageFile,
    stats: &IoStats,
    offset: u64,
    len: u64,
    attempt: impl FnMut() -> Result<T>,
) -> Result<T> {
    again_on_corruption(attempt, || {
        stats.record_read_retry(file.class());
        file.forget_cached(offset, len);
    })
}

/// The order of [`read_verified`], for a source that is not a storage file
/// (bytes in memory, a file read outside the seam): `attempt`, and after a
/// corruption error `before_again` and `attempt` once more; the second
/// result stands.
pub(crate) fn again_on_corruption<T>(
    mut attempt: impl FnMut() -> Result<T>,
    before_again: impl FnOnce(),
) -> Result<T> {
    match attempt() {
        Err(e) if e.is_corruption() => {
            before_again();
            attempt()
        }
        done => done,
    }
}

/// The error for a read that found the file shorter than it needed.
#[cold]
pub(crate) fn short_read(path: &Path, what: String) -> Error {
    Error::io(
        path,
        "read",
        std::io::Error::new(std::io::ErrorKind::UnexpectedEof, what),
    )
}

/// True when `e` says a file or directory does not exist.
pub(crate) fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Corruption;
    use crate::io::sim::SimStorage;
    use std::cell::Cell;

    fn file(sim: &SimStorage, stats: &IoStats) -> Arc<dyn StorageFile> {
        let opts = FileOptions {
            mode: IoMode::Buffered,
            class: FileClass::Delta,
            ..FileOptions::default()
        };
        let f = sim.create(Path::new("/f"), &opts, stats).expect("create");
        f.write_all_at(b"bytes", 0).expect("write");
        f
    }

    /// An attempt that fails with `errors` in turn, then passes.
    fn attempt<'a>(
        errors: &'a [fn() -> Error],
        calls: &'a Cell<usize>,
    ) -> impl FnMut() -> Result<usize> + 'a {
        move || {
            let n = calls.get();
            calls.set(n + 1);
            match errors.get(n) {
                Some(e) => Err(e()),
                None => Ok(n),
            }
        }
    }

    fn corruption() -> Error {
        Corruption::new("/f", 3, "bad").into()
    }

    fn eio() -> Error {
        Error::io("/f", "read", std::io::Error::from_raw_os_error(libc::EIO))
    }

    #[test]
    fn a_check_that_fails_once_is_counted_forgotten_and_read_again() {
        let (sim, stats) = (SimStorage::new(1), IoStats::new());
        let f = file(&sim, &stats);
        let calls = Cell::new(0);
        let got = read_verified(&*f, &stats, 0, 5, attempt(&[corruption], &calls));
        assert_eq!(got.expect("the second attempt stands"), 1);
        assert_eq!(calls.get(), 2);
        assert_eq!(stats.snapshot().read_retries(FileClass::Delta), 1);
        assert_eq!(sim.forgotten_ranges(), 1);
    }

    #[test]
    fn the_second_result_stands_and_other_errors_are_not_read_again() {
        let (sim, stats) = (SimStorage::new(2), IoStats::new());
        let f = file(&sim, &stats);
        let calls = Cell::new(0);
        let twice: [fn() -> Error; 2] = [corruption, corruption];
        let err = read_verified(&*f, &stats, 0, 5, attempt(&twice, &calls));
        assert!(err.expect_err("twice").is_corruption());
        assert_eq!((calls.get(), stats.snapshot().read_retries_total()), (2, 1));
        let calls = Cell::new(0);
        let err = read_verified(&*f, &stats, 0, 5, attempt(&[eio], &calls));
        assert!(matches!(err, Err(Error::Io { .. })));
        assert_eq!((calls.get(), stats.snapshot().read_retries_total()), (1, 1));
        let calls = Cell::new(0);
        assert_eq!(
            read_verified(&*f, &stats, 0, 5, attempt(&[], &calls)).ok(),
            Some(0)
        );
        assert_eq!(calls.get(), 1);
        assert_eq!(sim.forgotten_ranges(), 1);
    }

    #[test]
    fn forgetting_cached_bytes_is_advice_in_every_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let stats = IoStats::new();
        for mode in IoMode::ALL {
            let opts = FileOptions {
                mode,
                fallback_to_buffered: true,
                ..FileOptions::default()
            };
            let f = crate::io::IoFile::create(&path, &opts, &stats).expect("create");
            let page = crate::io::AlignedBuf::zeroed(f.alignment(), f.alignment());
            f.write_all_at(&page, 0).expect("write");
            f.sync_data().expect("sync");
            let before = f.read_range(0, 100).expect("read");
            f.forget_cached(0, 0);
            f.forget_cached(0, u64::MAX);
            f.forget_cached(u64::MAX, 1);
            assert_eq!(f.read_range(0, 100).expect("read"), before, "{mode}");
        }
    }
}
