//! The io_uring engine: positional reads, writes and fdatasync submitted
//! through a per-thread ring (the `io-uring` crate).
//!
//! Each thread that does I/O gets its own ring, created on first use, so
//! threads never contend on a ring lock and a ring is only ever touched by its
//! owner. Each call submits its operations and waits for all of them before
//! returning, so buffers borrowed by a submission outlive it: the kernel never
//! sees a pointer whose owner has gone. A batch of reads is submitted at once
//! and waited for once (multi-key reads).

use io_uring::{opcode, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

/// Entries of each thread's ring; also the largest batch submitted at once.
pub(crate) const RING_ENTRIES_MAX: u32 = 64;

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

fn with_ring<T>(f: impl FnOnce(&mut IoUring) -> io::Result<T>) -> io::Result<T> {
    RING.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| io::Error::other("io_uring ring re-entered"))?;
        if slot.is_none() {
            *slot = Some(IoUring::new(RING_ENTRIES_MAX)?);
        }
        let ring = slot
            .as_mut()
            .ok_or_else(|| io::Error::other("io_uring ring missing"))?;
        f(ring)
    })
}

/// Checks that this thread can set up a ring (io_uring may be disabled).
pub(crate) fn probe() -> io::Result<()> {
    with_ring(|_| Ok(()))
}

/// Submits `entries` (at most RING_ENTRIES_MAX) and waits for all; returns
/// each operation's result in submission order.
fn submit_all(ring: &mut IoUring, entries: &[io_uring::squeue::Entry]) -> io::Result<Vec<i32>> {
    debug_assert!(entries.len() <= RING_ENTRIES_MAX as usize);
    for (i, entry) in entries.iter().enumerate() {
        let entry = entry.clone().user_data(i as u64);
        // SAFETY: the buffers the entries point to are borrowed by our caller
        // for the whole call, and we wait for every completion before returning.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    let mut results = vec![0i32; entries.len()];
    let mut done = 0;
    while done < entries.len() {
        match ring.submit_and_wait(entries.len() - done) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            if let Some(slot) = results.get_mut(i) {
                *slot = cqe.result();
                done += 1;
            }
        }
    }
    Ok(results)
}

fn check(result: i32) -> io::Result<usize> {
    if result < 0 {
        Err(io::Error::from_raw_os_error(-result))
    } else {
        Ok(result as usize)
    }
}

/// One pread; returns bytes read (0 at end of file).
pub(crate) fn pread(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let len = u32::try_from(buf.len()).map_err(|_| io::Error::other("io_uring read over 4 GiB"))?;
    let entry = opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), len)
        .offset(offset)
        .build();
    with_ring(|ring| check(submit_all(ring, &[entry])?[0]))
}

/// One pwrite; returns bytes written.
pub(crate) fn pwrite(fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize> {
    let len =
        u32::try_from(buf.len()).map_err(|_| io::Error::other("io_uring write over 4 GiB"))?;
    let entry = opcode::Write::new(types::Fd(fd), buf.as_ptr(), len)
        .offset(offset)
        .build();
    with_ring(|ring| check(submit_all(ring, &[entry])?[0]))
}

/// fdatasync through the ring.
pub(crate) fn fdatasync(fd: RawFd) -> io::Result<()> {
    let entry = opcode::Fsync::new(types::Fd(fd))
        .flags(types::FsyncFlags::DATASYNC)
        .build();
    with_ring(|ring| check(submit_all(ring, &[entry])?[0]).map(|_| ()))
}

/// Several preads, on any descriptors, submitted together and waited for
/// once. Returns bytes read by each, in order.
pub(crate) fn pread_many(reads: &mut [(RawFd, &mut [u8], u64)]) -> io::Result<Vec<usize>> {
    let mut out = Vec::with_capacity(reads.len());
    for chunk in reads.chunks_mut(RING_ENTRIES_MAX as usize) {
        let mut entries = Vec::with_capacity(chunk.len());
        for (fd, buf, offset) in chunk.iter_mut() {
            let len = u32::try_from(buf.len())
                .map_err(|_| io::Error::other("io_uring read over 4 GiB"))?;
            entries.push(
                opcode::Read::new(types::Fd(*fd), buf.as_mut_ptr(), len)
                    .offset(*offset)
                    .build(),
            );
        }
        let results = with_ring(|ring| submit_all(ring, &entries))?;
        for r in results {
            out.push(check(r)?);
        }
    }
    Ok(out)
}
