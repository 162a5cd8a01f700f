//! `UringRing`: the operating system's [`ReadRing`] (reads in flight, one
//! per slot, handed back as they complete; the trait and the synchronous
//! `SyncRing` of every other storage are the seam's, in `storage`).
//!
//! What it owns: its own io_uring, one buffer per slot registered with the
//! kernel (fixed buffers: mapped once, not at every read) and the reads in
//! flight. A read larger than a slot's buffer goes into a buffer of its
//! own; a file that is not an `IoFile` is read at once, synchronously.
//!
//! Invariants: a slot has at most one read in flight; every pushed read is
//! handed back exactly once (its bytes, or its error: a cancelled read is
//! handed back with whatever the kernel says, ECANCELED included); a read
//! is handed back only whole (a short transfer is read again at once, and
//! the end of the file is an error naming it); the kernel never holds a
//! pointer into memory that is gone: a ring that is dropped cancels what is
//! in flight and waits for it, and one whose requests cannot be finished
//! aborts the process rather than free their buffers (as `uring` does).
//! Every read is counted in the file's `IoStats`.

use super::aligned_buf::{align_down, align_up, AlignedBuf};
use super::file::IoFile;
use super::mode::BlockFile;
use super::stats::OpKind;
use super::storage::{check_slot, check_slots, hand_made, ReadRing, RingDone, StorageFile};
use crate::error::{Error, Result};
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::sync::Arc;

/// Bytes of each slot's registered buffer: a data block (4 KiB by
/// default, widened to the alignment) and a value entry of up to about
/// 12 KiB fit; a larger read goes into a buffer of the slot's own. Small,
/// because they are pinned: a queue of the most slots holds 64 MiB.
const SLOT_BYTES: usize = 16 << 10;

/// A slot's own buffer larger than this is let go after its read (a queue
/// reading 1 MiB values would otherwise keep 1 MiB per slot).
const OWN_KEPT_BYTES_MAX: usize = 256 << 10;

/// The buffers' alignment: any file alignment up to a page.
const SLOT_ALIGNMENT: usize = 4096;

/// One slot of a [`UringRing`]: the read in it, if any.
struct Slot {
    /// The file read (held so its descriptor stays open while the kernel
    /// reads it).
    file: Option<Arc<dyn StorageFile>>,
    /// Where the read starts (aligned), where the wanted bytes start in
    /// the buffer, and how many are wanted.
    start: u64,
    head: usize,
    len: usize,
    /// A read too large for the registered buffer goes here.
    own: AlignedBuf,
    in_own: bool,
    /// The result of a read made synchronously (a file the ring cannot
    /// read), handed back at the next reap.
    made: Option<Result<Vec<u8>>>,
}

/// What became of a read the kernel completed.
enum Completed {
    /// Whole, in its slot's buffer at `head..head + len`.
    InBuffer,
    /// Short, and read again synchronously.
    Made(Result<Vec<u8>>),
    Failed(Error),
}

/// User data of a cancel request (its completion is not a read's).
const CANCEL_TAG: u64 = 1 << 63;

/// Times a failing submit is retried before the ring is given up on.
const SUBMIT_RETRIES_MAX: u32 = 1000;

/// An io_uring of its own with one registered buffer per slot.
pub struct UringRing {
    ring: IoUring,
    /// `slots.len()` × `SLOT_BYTES`, slot i's buffer at i × `SLOT_BYTES`;
    /// registered as buffer i when `registered`.
    buffers: AlignedBuf,
    registered: bool,
    slots: Vec<Slot>,
    /// Reads in the kernel (pushed and not completed).
    kernel: usize,
    /// Reads made synchronously, waiting for the next reap.
    made: VecDeque<usize>,
    /// Cancel requests whose completion has not come.
    cancels: usize,
    /// Completions taken from the ring, kept between reaps.
    cqes: Vec<(u64, i32)>,
}

// SAFETY: the raw pointers the ring's queued entries hold point into
// `buffers` and the slots' own buffers, which move with the ring; the ring
// is used by one thread at a time (`&mut self`).
unsafe impl Send for UringRing {}

impl UringRing {
    /// A ring of `slots` reads in flight, its buffers registered with the
    /// kernel when it allows (else plain reads into the same buffers).
    pub fn new(slots: usize) -> Result<UringRing> {
        let slots = check_slots(slots)?;
        let entries = (slots as u32).next_power_of_two().clamp(8, 4096);
        let ring = IoUring::builder()
            .setup_cqsize(2 * entries)
            .build(entries)
            .map_err(|e| Error::io("<io_uring>", "set up a read ring", e))?;
        let mut buffers = AlignedBuf::with_capacity(slots * SLOT_BYTES, SLOT_ALIGNMENT);
        let iovecs: Vec<libc::iovec> = {
            let base = buffers.spare_capacity_full().as_mut_ptr();
            (0..slots)
                .map(|i| libc::iovec {
                    // SAFETY: i * SLOT_BYTES < capacity.
                    iov_base: unsafe { base.add(i * SLOT_BYTES) }.cast(),
                    iov_len: SLOT_BYTES,
                })
                .collect()
        };
        // SAFETY: the iovecs point into `buffers`, which lives as long as
        // the ring (dropped after it: see Drop) and never moves its bytes.
        let registered = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        Ok(UringRing {
            ring,
            buffers,
            registered,
            slots: (0..slots)
                .map(|_| Slot {
                    file: None,
                    start: 0,
                    head: 0,
                    len: 0,
                    own: AlignedBuf::empty(SLOT_ALIGNMENT),
                    in_own: false,
                    made: None,
                })
                .collect(),
            kernel: 0,
            made: VecDeque::new(),
            cancels: 0,
            cqes: Vec::new(),
        })
    }

    /// Pushes `entry`, making room by submitting when the queue is full.
    fn push_entry(&mut self, entry: &io_uring::squeue::Entry) -> Result<()> {
        loop {
            // SAFETY: every entry points into a buffer the ring owns, kept
            // until its completion arrives (Drop waits for every one).
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.submit()?;
        }
    }

    /// Takes one completion: its slot and what became of its read, or
    /// `None` for a cancel request's completion.
    fn complete(&mut self, user_data: u64, result: i32) -> Option<(usize, Completed)> {
        if user_data & CANCEL_TAG != 0 {
            self.cancels -= 1;
            return None;
        }
        let i = user_data as usize;
        let slot = self.slots.get_mut(i)?;
        let file = slot.file.as_ref()?;
        self.kernel -= 1;
        if result < 0 {
            let e = std::io::Error::from_raw_os_error(-result);
            return Some((i, Completed::Failed(Error::io(file.path(), "read", e))));
        }
        let n = result as usize;
        if let Some(f) = file.as_any().downcast_ref::<IoFile>() {
            f.stats().record(f.class(), OpKind::Read, n as u64);
        }
        if n < slot.head + slot.len {
            // The end of the file, or a partial transfer: read again alone
            // (which names the end of the file, if that is what it is).
            let offset = slot.start + slot.head as u64;
            return Some((i, Completed::Made(file.read_range(offset, slot.len))));
        }
        Some((i, Completed::InBuffer))
    }

    /// The ring's completions so far (into a buffer kept between reaps).
    fn take_completions(&mut self) -> Vec<(u64, i32)> {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        cqes
    }

    /// The bytes of slot `i`'s completed read at `head..head + len`.
    fn bytes(&mut self, i: usize, head: usize, len: usize) -> &[u8] {
        let slot = &mut self.slots[i];
        if slot.in_own {
            &slot.own.spare_capacity_full()[head..head + len]
        } else {
            let at = i * SLOT_BYTES + head;
            &self.buffers.spare_capacity_full()[at..at + len]
        }
    }

    /// Submits and waits for `want` completions, retrying what fails; a
    /// ring that keeps failing while reads point into its buffers aborts.
    fn enter(&mut self, want: usize) -> Result<()> {
        let mut failures = 0u32;
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    // The completion queue is full: the caller reaps.
                    return Ok(());
                }
                Err(e) => {
                    failures += 1;
                    if failures > SUBMIT_RETRIES_MAX {
                        if self.kernel > 0 {
                            eprintln!("strata: io_uring cannot complete reads that point into live buffers ({e}); aborting");
                            std::process::abort();
                        }
                        return Err(Error::io("<io_uring>", "submit reads", e));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    }
}

impl ReadRing for UringRing {
    fn slots(&self) -> usize {
        self.slots.len()
    }

    fn push(
        &mut self,
        i: usize,
        file: &Arc<dyn StorageFile>,
        offset: u64,
        len: usize,
    ) -> Result<()> {
        check_slot(i, self.slots.len())?;
        if self.slots[i].file.is_some() {
            return Err(Error::Internal(format!("read ring slot {i} is busy")));
        }
        let Some(io) = file.as_any().downcast_ref::<IoFile>() else {
            // Not a file of the operating system's storage: read now.
            let slot = &mut self.slots[i];
            slot.made = Some(file.read_range(offset, len));
            slot.file = Some(Arc::clone(file));
            self.made.push_back(i);
            return Ok(());
        };
        let alignment = BlockFile::alignment(io);
        let start = align_down(offset, alignment);
        let end = align_up(offset + len as u64, alignment);
        let span = (end - start) as usize;
        let span32 = u32::try_from(span).map_err(|_| {
            Error::io(
                file.path(),
                "read",
                std::io::Error::other("read over 4 GiB"),
            )
        })?;
        let fd = types::Fd(io.read_fd());
        let slot = &mut self.slots[i];
        slot.start = start;
        slot.head = (offset - start) as usize;
        slot.len = len;
        slot.in_own = span > SLOT_BYTES || alignment > SLOT_ALIGNMENT;
        let entry = if slot.in_own {
            if slot.own.capacity() < span || slot.own.alignment() < alignment {
                slot.own = AlignedBuf::with_capacity(span, alignment.max(SLOT_ALIGNMENT));
            }
            let ptr = slot.own.spare_capacity_full().as_mut_ptr();
            opcode::Read::new(fd, ptr, span32).offset(start).build()
        } else {
            // SAFETY: slot i's buffer is i * SLOT_BYTES .. + SLOT_BYTES.
            let ptr = unsafe {
                self.buffers
                    .spare_capacity_full()
                    .as_mut_ptr()
                    .add(i * SLOT_BYTES)
            };
            if self.registered {
                opcode::ReadFixed::new(fd, ptr, span32, i as u16)
                    .offset(start)
                    .build()
            } else {
                opcode::Read::new(fd, ptr, span32).offset(start).build()
            }
        };
        slot.file = Some(Arc::clone(file));
        self.push_entry(&entry.user_data(i as u64))?;
        self.kernel += 1;
        Ok(())
    }

    fn submit(&mut self) -> Result<()> {
        self.enter(0)
    }

    fn reap(&mut self, wait: bool, done: &mut RingDone<'_>) -> Result<()> {
        while let Some(i) = self.made.pop_front() {
            let slot = &mut self.slots[i];
            let result = slot.made.take().unwrap_or_else(|| {
                Err(Error::Internal(
                    "read ring: a made read lost its result".into(),
                ))
            });
            slot.file = None;
            hand_made(done, i, result);
        }
        let want = usize::from(wait && self.kernel > 0);
        if want > 0 || !self.ring.submission().is_empty() {
            self.enter(want)?;
        }
        let cqes = self.take_completions();
        for &(user_data, result) in &cqes {
            let Some((i, completed)) = self.complete(user_data, result) else {
                continue;
            };
            match completed {
                Completed::Failed(e) => done(i, Err(e)),
                Completed::Made(r) => hand_made(done, i, r),
                Completed::InBuffer => {
                    let (head, len) = (self.slots[i].head, self.slots[i].len);
                    done(i, Ok(self.bytes(i, head, len)))
                }
            }
            let slot = &mut self.slots[i];
            slot.file = None;
            if slot.own.capacity() > OWN_KEPT_BYTES_MAX {
                slot.own = AlignedBuf::empty(SLOT_ALIGNMENT);
            }
        }
        self.cqes = cqes;
        Ok(())
    }

    fn cancel(&mut self, i: usize) {
        let in_kernel =
            self.slots.get(i).is_some_and(|s| s.file.is_some()) && !self.made.contains(&i);
        if in_kernel {
            let entry = opcode::AsyncCancel::new(i as u64)
                .build()
                .user_data(CANCEL_TAG | i as u64);
            if self.push_entry(&entry).is_ok() {
                self.cancels += 1;
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.kernel + self.made.len()
    }

    fn engine(&self) -> &'static str {
        if self.registered {
            "io_uring, registered buffers"
        } else {
            "io_uring"
        }
    }
}

impl Drop for UringRing {
    /// Cancels every read in the kernel and waits until each has
    /// completed: only then may the buffers go.
    fn drop(&mut self) {
        let busy: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].file.is_some() && !self.made.contains(&i))
            .collect();
        for i in busy {
            self.cancel(i);
        }
        while self.kernel > 0 || self.cancels > 0 {
            if self.enter(1).is_err() {
                eprintln!(
                    "strata: io_uring cannot finish reads into buffers being freed; aborting"
                );
                std::process::abort();
            }
            for (user_data, result) in self.take_completions() {
                if let Some((i, _)) = self.complete(user_data, result) {
                    self.slots[i].file = None;
                }
            }
        }
    }
}
