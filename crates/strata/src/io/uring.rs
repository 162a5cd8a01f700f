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

/// Tags each submission's user data, so a completion is only ever matched
/// to the call that submitted it.
static GENERATION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// Times `submit_all` retries a failing submit before it gives up on a ring
/// that still holds our requests.
const SUBMIT_RETRIES_MAX: u32 = 1000;

/// Submits `entries` (at most RING_ENTRIES_MAX) and waits for all; returns
/// each operation's result in submission order.
///
/// Memory safety rests on one rule: no request that points into a caller's
/// buffer is still in the kernel when this returns. So whatever fails after
/// a request was pushed, the call keeps reaping until every pushed request
/// has completed; if the ring cannot be made to finish them, the process
/// aborts rather than let the kernel write into freed memory.
fn submit_all(ring: &mut IoUring, entries: &[io_uring::squeue::Entry]) -> io::Result<Vec<i32>> {
    let mut results: Vec<Option<i32>> = vec![None; entries.len()];
    submit_each(ring, entries, &mut |i, r| results[i] = Some(r))?;
    Ok(results
        .into_iter()
        .map(|r| r.unwrap_or(-libc::EIO))
        .collect())
}

/// [`submit_all`], handing each operation's result to `done(index, result)`
/// as it completes (in completion order), while the others are still in
/// flight. `done` must not use this thread's ring.
fn submit_each(
    ring: &mut IoUring,
    entries: &[io_uring::squeue::Entry],
    done_with: &mut dyn FnMut(usize, i32),
) -> io::Result<()> {
    debug_assert!(entries.len() <= RING_ENTRIES_MAX as usize);
    let generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as u64;
    let mut pushed = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        let entry = entry.clone().user_data((generation << 32) | i as u64);
        // SAFETY: the buffers the entries point to are borrowed by our caller
        // for the whole call, and we wait for every pushed entry below.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            break;
        }
        pushed += 1;
    }
    let mut completed = vec![false; pushed];
    let mut done = 0usize;
    let mut failures = 0u32;
    let mut first_error: Option<io::Error> = None;
    while done < pushed {
        match ring.submit_and_wait(pushed - done) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                failures += 1;
                if failures > SUBMIT_RETRIES_MAX {
                    eprintln!("strata: io_uring cannot complete requests that point into live buffers ({e}); aborting");
                    std::process::abort();
                }
                first_error.get_or_insert(e);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        for cqe in ring.completion() {
            if cqe.user_data() >> 32 != generation & 0xffff_ffff {
                continue; // not ours (cannot happen once every call drains its own)
            }
            let i = (cqe.user_data() & 0xffff_ffff) as usize;
            if let Some(seen @ false) = completed.get_mut(i) {
                *seen = true;
                done += 1;
                if first_error.is_none() {
                    done_with(i, cqe.result());
                }
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    if pushed < entries.len() {
        return Err(io::Error::other("io_uring submission queue full"));
    }
    Ok(())
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

/// What [`pread_each`] hands each completed read to: its index, bytes read
/// or the error, and its buffer.
pub(crate) type ReadDone<'a> = dyn FnMut(usize, io::Result<usize>, &[u8]) + 'a;

/// Several preads, on any descriptors, submitted together (up to
/// RING_ENTRIES_MAX at a time); hands each one's result (bytes read, or
/// the error) and its buffer to `done(index, result, buffer)` as it
/// completes, while the others are in flight. `done` must not do I/O
/// through this thread's ring.
pub(crate) fn pread_each(
    reads: &mut [(RawFd, &mut [u8], u64)],
    done: &mut ReadDone<'_>,
) -> io::Result<()> {
    let chunk_len = RING_ENTRIES_MAX as usize;
    for (c, chunk) in reads.chunks_mut(chunk_len).enumerate() {
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
        // The kernel is done with buffer i when its completion arrives:
        // only then is it borrowed again, shared, for `done`.
        with_ring(|ring| {
            submit_each(ring, &entries, &mut |i, r| {
                done(c * chunk_len + i, check(r), &chunk[i].1[..])
            })
        })?;
    }
    Ok(())
}
