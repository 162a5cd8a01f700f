//! `IoFile`: a file handle with an I/O mode (buffered or O_DIRECT) and an
//! engine (pread/pwrite or io_uring), positional reads and writes only.
//!
//! Owns the file descriptors, the file's direct-I/O alignment and the
//! counting of every operation into [`IoStats`]. Invariants: when a
//! descriptor is O_DIRECT, every transfer through it has an address, offset
//! and length that are multiples of `alignment` (checked: an unaligned call is
//! an `InvalidInput::Unaligned` error, never a kernel EINVAL); `alignment` is
//! a power of two and at least what the kernel reports. `IoFile` is `Send +
//! Sync`: positional calls need no shared cursor, so any thread may read while
//! another writes.

use super::aligned_buf::{align_down, align_up, is_aligned, AlignedBuf};
use super::mode::{
    BlockFile, FileOptions, IoEngine, IoMode, ALIGNMENT_DEFAULT_BYTES, ALIGNMENT_MAX_BYTES,
};
use super::stats::{FileClass, IoStats, OpKind};
use super::storage::{ReadRequest, StorageFile};
use super::uring;
use crate::error::{Error, InvalidInput, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A file opened through the io layer.
pub struct IoFile {
    path: PathBuf,
    /// Descriptor for reads (O_DIRECT when the mode reads direct) and, unless
    /// `write_fd` is set, for writes.
    fd: File,
    /// A second, buffered descriptor for writes in `IoMode::Direct`; empty in
    /// the other modes.
    write_fd: Option<File>,
    mode: IoMode,
    engine: IoEngine,
    alignment: usize,
    class: FileClass,
    stats: IoStats,
}

impl std::fmt::Debug for IoFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoFile")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("engine", &self.engine)
            .field("alignment", &self.alignment)
            .finish()
    }
}

impl IoFile {
    /// Creates (or truncates) `path` for reading and writing.
    pub fn create(path: impl AsRef<Path>, opts: &FileOptions, stats: &IoStats) -> Result<IoFile> {
        Self::open_with(path.as_ref(), opts, stats, true)
    }

    /// Opens an existing file for reading and writing.
    pub fn open(path: impl AsRef<Path>, opts: &FileOptions, stats: &IoStats) -> Result<IoFile> {
        Self::open_with(path.as_ref(), opts, stats, false)
    }

    fn open_with(path: &Path, opts: &FileOptions, stats: &IoStats, create: bool) -> Result<IoFile> {
        if opts.engine == IoEngine::IoUring {
            uring::probe().map_err(|e| Error::io(path, "set up io_uring", e))?;
        }
        // O_NOATIME: the first read of a freshly written file would update
        // its access time (relatime), which needs a journal handle, and on
        // ext4 that waits for a running journal commit: measured here, a
        // get's read of a new layer stalled 20 to 110 ms while a compaction
        // output's fdatasync committed. Only the file's owner may ask for
        // it (EPERM otherwise: opened again without).
        let open = |direct: bool, create: bool| -> std::io::Result<File> {
            let with = |noatime: bool| {
                let mut oo = OpenOptions::new();
                oo.read(true).write(true);
                if create {
                    oo.create(true).truncate(true);
                }
                let direct = if direct { libc::O_DIRECT } else { 0 };
                let noatime = if noatime { libc::O_NOATIME } else { 0 };
                oo.custom_flags(direct | noatime);
                oo.open(path)
            };
            match with(true) {
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => with(false),
                other => other,
            }
        };
        let mut mode = opts.mode;
        let fd = match open(mode.direct_reads(), create) {
            Ok(fd) => fd,
            Err(e) if mode.direct_reads() && e.raw_os_error() == Some(libc::EINVAL) => {
                if !opts.fallback_to_buffered {
                    return Err(Error::DirectIoUnsupported {
                        path: path.to_owned(),
                        source: e,
                    });
                }
                mode = IoMode::Buffered;
                open(false, create).map_err(|e| Error::io(path, "open", e))?
            }
            Err(e) => return Err(Error::io(path, if create { "create" } else { "open" }, e)),
        };
        let write_fd = if mode == IoMode::Direct {
            Some(open(false, false).map_err(|e| Error::io(path, "open for buffered writes", e))?)
        } else {
            None
        };
        let kernel_alignment = dio_alignment(&fd);
        let alignment = choose_alignment(kernel_alignment, opts.alignment_bytes)?;
        Ok(IoFile {
            path: path.to_owned(),
            fd,
            write_fd,
            mode,
            engine: opts.engine,
            alignment,
            class: opts.class,
            stats: stats.clone(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mode in effect (`Buffered` after a fallback).
    pub fn mode(&self) -> IoMode {
        self.mode
    }

    /// The engine.
    pub fn engine(&self) -> IoEngine {
        self.engine
    }

    /// The class operations are counted under.
    pub fn class(&self) -> FileClass {
        self.class
    }

    /// The statistics this file counts into.
    pub fn stats(&self) -> &IoStats {
        &self.stats
    }

    /// The descriptor reads go through (O_DIRECT when the mode reads
    /// direct): for a read ring's requests (`ring::UringRing`).
    pub(super) fn read_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    fn write_file(&self) -> &File {
        self.write_fd.as_ref().unwrap_or(&self.fd)
    }

    fn check_aligned(&self, addr: usize, len: usize, offset: u64) -> Result<()> {
        check_aligned(self.alignment, addr, len, offset)
    }

    /// Reads into `buf` at `offset` until it is full or the file ends; returns
    /// the bytes read. With O_DIRECT reads, `buf` and `offset` must be aligned.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if self.mode.direct_reads() {
            self.check_aligned(buf.as_ptr() as usize, buf.len(), offset)?;
        }
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let n = match self.engine {
                IoEngine::Sync => self.fd.read_at(&mut buf[done..], at),
                IoEngine::IoUring => uring::pread(self.fd.as_raw_fd(), &mut buf[done..], at),
            };
            match n {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, "read", e)),
            }
        }
        self.stats.record(self.class, OpKind::Read, done as u64);
        Ok(done)
    }

    /// Reads exactly `buf.len()` bytes at `offset`; end of file is an error.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        <Self as StorageFile>::read_exact_at(self, buf, offset)
    }

    /// Reads `len` bytes at any `offset`, whatever the mode: with O_DIRECT the
    /// read is widened to aligned bounds and the wanted part copied out.
    /// Reading past the end of the file is an error.
    pub fn read_range(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        <Self as StorageFile>::read_range(self, offset, len)
    }

    /// Several reads of any alignment from this file, submitted together
    /// where the engine allows it (see [`Storage::read_batch`](super::Storage::read_batch)).
    pub fn read_ranges(&self, ranges: &[(u64, usize)]) -> Result<Vec<Vec<u8>>> {
        let reqs: Vec<ReadRequest<'_>> = ranges
            .iter()
            .map(|&(o, l)| (self as &dyn StorageFile, o, l))
            .collect();
        read_batch(&reqs)
    }

    /// Writes all of `buf` at `offset`. With O_DIRECT writes, address,
    /// length and offset must be aligned.
    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.mode.direct_writes() {
            self.check_aligned(buf.as_ptr() as usize, buf.len(), offset)?;
        }
        let file = self.write_file();
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let n = match self.engine {
                IoEngine::Sync => file.write_at(&buf[done..], at),
                IoEngine::IoUring => uring::pwrite(file.as_raw_fd(), &buf[done..], at),
            };
            match n {
                Ok(0) => {
                    return Err(Error::io(
                        &self.path,
                        "write",
                        std::io::ErrorKind::WriteZero.into(),
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, "write", e)),
            }
        }
        self.stats
            .record(self.class, OpKind::Write, buf.len() as u64);
        Ok(())
    }

    /// fdatasync: written data and the metadata needed to read it are durable.
    pub fn sync_data(&self) -> Result<()> {
        let result = match self.engine {
            IoEngine::Sync => self.write_file().sync_data(),
            IoEngine::IoUring => uring::fdatasync(self.write_file().as_raw_fd()),
        };
        result.map_err(|e| Error::io(&self.path, "fdatasync", e))?;
        self.stats.record(self.class, OpKind::Sync, 0);
        Ok(())
    }

    /// Sets the length (ftruncate).
    pub fn set_len(&self, len: u64) -> Result<()> {
        self.fd
            .set_len(len)
            .map_err(|e| Error::io(&self.path, "set_len", e))
    }

    /// Reserves blocks for `offset..offset + len` (fallocate, keeping the size
    /// unchanged only if the range lies inside it).
    pub fn allocate(&self, offset: u64, len: u64) -> Result<()> {
        let (off, n) = (
            i64::try_from(offset).map_err(|_| InvalidInput::OptionOutOfRange {
                option: "fallocate offset",
                value: offset,
                why: "beyond i64",
            })?,
            i64::try_from(len).map_err(|_| InvalidInput::OptionOutOfRange {
                option: "fallocate length",
                value: len,
                why: "beyond i64",
            })?,
        );
        // SAFETY: plain syscall on a descriptor we own.
        let rc = unsafe { libc::fallocate(self.fd.as_raw_fd(), 0, off, n) };
        if rc != 0 {
            return Err(Error::io(
                &self.path,
                "fallocate",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// The file's current length.
    pub fn len(&self) -> Result<u64> {
        Ok(self
            .fd
            .metadata()
            .map_err(|e| Error::io(&self.path, "stat", e))?
            .len())
    }

    /// True when the file is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Drops the page cache's clean copies of `len` bytes at `offset` (0: to
    /// the end of the file) when reads go through it
    /// (`posix_fadvise(POSIX_FADV_DONTNEED)`), so that the next read comes
    /// from the device; O_DIRECT reads bypass the cache and need nothing.
    /// Advice: a failure changes nothing and is not reported.
    pub fn forget_cached(&self, offset: u64, len: u64) {
        if self.mode.direct_reads() {
            return;
        }
        let Ok(offset) = libc::off_t::try_from(offset) else {
            return;
        };
        // A length past off_t reaches the end of the file, as 0 does.
        let len = libc::off_t::try_from(len).unwrap_or(0);
        // SAFETY: advice on a descriptor we own; no memory is passed.
        let _ = unsafe {
            libc::posix_fadvise(self.fd.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED)
        };
    }
}

impl BlockFile for IoFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        IoFile::write_all_at(self, buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        IoFile::read_at(self, buf, offset)
    }
    fn sync_data(&self) -> Result<()> {
        IoFile::sync_data(self)
    }
    fn set_len(&self, len: u64) -> Result<()> {
        IoFile::set_len(self, len)
    }
    fn alignment(&self) -> usize {
        self.alignment
    }
    fn direct_writes(&self) -> bool {
        self.mode.direct_writes()
    }
}

impl StorageFile for IoFile {
    fn path(&self) -> &Path {
        &self.path
    }
    fn mode(&self) -> IoMode {
        self.mode
    }
    fn class(&self) -> FileClass {
        self.class
    }
    fn len(&self) -> Result<u64> {
        IoFile::len(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn forget_cached(&self, offset: u64, len: u64) {
        IoFile::forget_cached(self, offset, len)
    }
}

impl IoFile {
    /// The alignment of offsets and lengths (and addresses under O_DIRECT).
    pub fn alignment(&self) -> usize {
        self.alignment
    }
}

/// The alignment of a file whose device reports `device` (`None`: not
/// reported) when the options ask for `requested` (`None`: the device's,
/// or 4096 where it reports none). A request must be a power of two, at
/// least the device's, at most [`ALIGNMENT_MAX_BYTES`].
pub(super) fn choose_alignment(device: Option<usize>, requested: Option<usize>) -> Result<usize> {
    let alignment = match requested {
        None => device.unwrap_or(ALIGNMENT_DEFAULT_BYTES),
        Some(a) => {
            let floor = device.unwrap_or(1);
            if !a.is_power_of_two() || a < floor || a > ALIGNMENT_MAX_BYTES {
                return Err(InvalidInput::OptionOutOfRange {
                    option: "alignment_bytes",
                    value: a as u64,
                    why: "must be a power of two, at least the kernel's DIO alignment, at most 1 MiB",
                }
                .into());
            }
            a
        }
    };
    assert!(
        alignment.is_power_of_two(),
        "alignment {alignment} must be a power of two"
    );
    Ok(alignment)
}

/// Checks that a direct transfer's address, length and offset are multiples
/// of `alignment`: an `InvalidInput::Unaligned` error otherwise, so the
/// kernel (or a simulated device) never sees one.
pub(super) fn check_aligned(alignment: usize, addr: usize, len: usize, offset: u64) -> Result<()> {
    for (what, value) in [
        ("address", addr as u64),
        ("length", len as u64),
        ("offset", offset),
    ] {
        if !is_aligned(value, alignment) {
            return Err(InvalidInput::Unaligned {
                what,
                value,
                alignment,
            }
            .into());
        }
    }
    Ok(())
}

/// Reads of any alignment from any files: when every file is an `IoFile`
/// with io_uring and O_DIRECT reads, submitted together and waited for once
/// (one submission for a whole multi-key read); otherwise one after another.
/// Reading past the end of a file is an error.
pub(super) fn read_batch(reqs: &[ReadRequest<'_>]) -> Result<Vec<Vec<u8>>> {
    let mut out = vec![Vec::new(); reqs.len()];
    read_batch_each(reqs, &mut |i, bytes| {
        out[i] = bytes;
        Ok(())
    })?;
    Ok(out)
}

/// [`read_batch`], handing each read's bytes to `done(index, bytes)` as
/// the read completes (in completion order when submitted together), so the
/// caller works on the first while the others are in flight. An error from
/// `done` or from a read ends the batch (reads in flight are waited for).
pub(super) fn read_batch_each(
    reqs: &[ReadRequest<'_>],
    done: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
) -> Result<()> {
    fn io_file(f: &dyn StorageFile) -> Option<&IoFile> {
        f.as_any().downcast_ref::<IoFile>()
    }
    let batched = reqs.len() >= 2
        && reqs.iter().all(|&(f, _, _)| {
            io_file(f).is_some_and(|f| f.engine == IoEngine::IoUring && f.mode.direct_reads())
        });
    if !batched {
        for (i, &(f, off, len)) in reqs.iter().enumerate() {
            done(i, f.read_range(off, len)?)?;
        }
        return Ok(());
    }
    fn file_of(f: &dyn StorageFile) -> &IoFile {
        io_file(f).expect("every file of a batched read was checked to be an IoFile")
    }
    let mut bufs: Vec<(AlignedBuf, u64)> = reqs
        .iter()
        .map(|&(f, off, len)| {
            let f = file_of(f);
            let start = align_down(off, f.alignment);
            let end = align_up(off + len as u64, f.alignment);
            (
                AlignedBuf::zeroed((end - start) as usize, f.alignment),
                start,
            )
        })
        .collect();
    let starts: Vec<u64> = bufs.iter().map(|(_, start)| *start).collect();
    let mut reads: Vec<(std::os::fd::RawFd, &mut [u8], u64)> = bufs
        .iter_mut()
        .zip(reqs)
        .map(|((b, start), &(f, _, _))| {
            (file_of(f).fd.as_raw_fd(), b.spare_capacity_full(), *start)
        })
        .collect();
    // The first error (a read's or `done`'s): later completions are only
    // waited for.
    let mut failed: Option<Error> = None;
    // Short reads (end of file or a partial transfer), redone alone after
    // the batch (the ring is busy until then).
    let mut redo: Vec<usize> = Vec::new();
    let submitted = uring::pread_each(&mut reads, &mut |i, got, buf| {
        if failed.is_some() {
            return;
        }
        let (f, off, len) = reqs[i];
        let f = file_of(f);
        let head = (off - starts[i]) as usize;
        let result = match got {
            Ok(n) => {
                f.stats.record(f.class, OpKind::Read, n as u64);
                if n < head + len {
                    redo.push(i);
                    Ok(())
                } else {
                    done(i, buf[head..head + len].to_vec())
                }
            }
            Err(e) => Err(Error::io(f.path(), "read", e)),
        };
        if let Err(e) = result {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    submitted.map_err(|e| {
        let path = reqs
            .first()
            .map_or(Path::new("<batch>"), |&(f, _, _)| f.path());
        Error::io(path, "read", e)
    })?;
    for i in redo {
        let (f, off, len) = reqs[i];
        done(i, f.read_range(off, len)?)?;
    }
    Ok(())
}

/// The kernel's direct-I/O alignment for `file` (statx STATX_DIOALIGN): the
/// larger of the memory and the offset alignment; `None` when not reported.
fn dio_alignment(file: &File) -> Option<usize> {
    // SAFETY: statx fills the zeroed struct; the empty path with AT_EMPTY_PATH
    // refers to the descriptor itself.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    let a = stx.stx_dio_mem_align.max(stx.stx_dio_offset_align) as usize;
    (a > 0 && a.is_power_of_two()).then_some(a)
}
