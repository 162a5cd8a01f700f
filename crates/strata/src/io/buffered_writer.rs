//! `BufferedWriter`: appends of any size turned into aligned writes, with
//! double (or deeper) buffering.
//!
//! The caller fills one buffer while a background flusher thread writes the
//! others. Who calls it: the open in-memory layer (its log file is the WAL) and
//! the layer writers. Invariants:
//! - every write that reaches the file starts at an aligned offset and has an
//!   aligned length (and, under O_DIRECT, an aligned address);
//! - `buf_start` is aligned; `current` holds the bytes for file offsets
//!   `buf_start .. buf_start + current.len()`; everything below `buf_start`
//!   has been handed to the file (written, or in flight);
//! - of its buffers (two, or as many as it was made with), all but the one
//!   being filled may be in flight, written by the flusher in the order
//!   they were handed off; a hand-off with no spare buffer left waits for
//!   the oldest;
//! - after any error the writer is failed: every later call returns an error,
//!   so no write after a failure is ever reported as written or durable.
//!
//! A background writer may hand each full buffer to the file in several
//! aligned requests whose size it asks before each (`set_write_steps`), so
//! a large buffer does not hold a foreground read behind one long write.
//!
//! Large writes bypass the copy for their aligned middle part when its memory
//! is aligned (always, for buffered writes). A caller that keeps the file's
//! bytes in aligned memory of its own hands them over as they are
//! (`write_shared`): they are written from there, with no copy into a
//! buffer (the open layer's log, written from its memory's chunks). `sync()` writes the partial tail
//! block padded with zeros, makes the file durable, and keeps the tail in the
//! buffer, so the next hand-off rewrites that block with its full content.
//! Not `Sync`: one owner appends; share it behind a lock.

use super::aligned_buf::{align_down, align_up, is_aligned, AlignedBuf};
use super::file::IoFile;
use super::mode::BlockFile;
use super::IoSteps;
use crate::error::{Error, InvalidInput, Result};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The largest buffer capacity a writer accepts.
pub const WRITER_CAPACITY_MAX_BYTES: usize = 1 << 30;
/// The most buffers a writer accepts ([`BufferedWriter::with_buffers`]).
pub const WRITER_BUFFERS_MAX: usize = 16;

/// What [`BufferedWriter::finish`] does with a tail that does not fill an
/// aligned block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Write whole aligned blocks only; the tail is not written.
    DropTail,
    /// Write the tail padded with zeros to the alignment; the file's length is
    /// the written length rounded up.
    ZeroPadToAlignment,
    /// Write the tail padded, then truncate the file to the exact length.
    PadThenTruncate,
}

/// Bytes a caller shares with the writer ([`BufferedWriter::write_shared`]):
/// they must not change while the writer holds them.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// What a job writes: one of the writer's buffers, or bytes shared with it.
#[derive(Clone)]
enum JobBytes {
    Own(Arc<AlignedBuf>),
    Shared(SharedBytes),
}

impl JobBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            JobBytes::Own(buf) => buf.as_slice(),
            JobBytes::Shared(bytes) => (**bytes).as_ref(),
        }
    }
}

struct Job {
    /// Shared with `in_flight`, so readers can copy from a buffer while the
    /// flusher writes it; nobody mutates it until it comes back.
    buf: JobBytes,
    offset: u64,
    /// The size of each request the buffer is written in (`None`: one).
    steps: Option<IoSteps>,
}

struct Flusher {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<(JobBytes, Result<()>)>,
    thread: JoinHandle<()>,
}

/// Appends to a file through aligned writes from two or more buffers.
pub struct BufferedWriter<F: BlockFile + ?Sized = IoFile> {
    file: Arc<F>,
    alignment: usize,
    /// The buffer being filled; its bytes belong at `buf_start..`.
    current: AlignedBuf,
    buf_start: u64,
    /// Buffers not in flight and not being filled.
    spare: Vec<AlignedBuf>,
    /// File ranges handed to the flusher and not yet confirmed, oldest first;
    /// empty when idle. At most one fewer than the buffers of the writer's
    /// own, and as many of shared bytes.
    in_flight: std::collections::VecDeque<(u64, JobBytes)>,
    /// The buffers it was made with.
    buffers: usize,
    /// The flusher thread; empty only after shutdown.
    flusher: Option<Flusher>,
    /// Why the writer refuses further calls; empty while healthy.
    failed: Option<String>,
    /// The size of each request a full buffer is written in, asked before
    /// each (a background writer's, see `io::IoSteps`); empty: one request
    /// per buffer.
    steps: Option<IoSteps>,
}

impl<F: BlockFile> BufferedWriter<F> {
    /// A writer appending at `start_offset` with two buffers of
    /// `capacity_bytes` (rounded up to the file's alignment). If `start_offset`
    /// is not aligned, the bytes of its block before it are read back from the
    /// file so the first write rewrites that block whole.
    pub fn new(file: F, capacity_bytes: usize, start_offset: u64) -> Result<Self> {
        Self::with_shared(Arc::new(file), capacity_bytes, start_offset)
    }
}

/// `F` may be unsized: the engine writes through `BufferedWriter<dyn
/// StorageFile>`, one dynamic call per aligned write.
impl<F: BlockFile + ?Sized> BufferedWriter<F> {
    /// Like [`Self::new`] with a file that readers share.
    pub fn with_shared(file: Arc<F>, capacity_bytes: usize, start_offset: u64) -> Result<Self> {
        Self::with_buffers(file, capacity_bytes, 2, start_offset)
    }

    /// [`Self::with_shared`] with `buffers` buffers (2 ..=
    /// [`WRITER_BUFFERS_MAX`]): up to `buffers - 1` of them in flight while
    /// the next fills, so that the appender does not wait for the flusher
    /// thread when that thread is late to run.
    pub fn with_buffers(
        file: Arc<F>,
        capacity_bytes: usize,
        buffers: usize,
        start_offset: u64,
    ) -> Result<Self> {
        if !(2..=WRITER_BUFFERS_MAX).contains(&buffers) {
            return Err(InvalidInput::OptionOutOfRange {
                option: "writer buffers",
                value: buffers as u64,
                why: "must be 2 ..= 16",
            }
            .into());
        }
        let alignment = file.alignment();
        if capacity_bytes == 0 || capacity_bytes > WRITER_CAPACITY_MAX_BYTES {
            return Err(InvalidInput::OptionOutOfRange {
                option: "writer capacity_bytes",
                value: capacity_bytes as u64,
                why: "must be 1 byte ..= 1 GiB",
            }
            .into());
        }
        let mut current = AlignedBuf::with_capacity(capacity_bytes, alignment);
        let spare = (1..buffers)
            .map(|_| AlignedBuf::with_capacity(capacity_bytes, alignment))
            .collect();
        let buf_start = align_down(start_offset, alignment);
        let head = (start_offset - buf_start) as usize;
        if head > 0 {
            let n = file.read_at(&mut current.spare_capacity_full()[..alignment], buf_start)?;
            if n < head {
                return Err(InvalidInput::OptionOutOfRange {
                    option: "writer start_offset",
                    value: start_offset,
                    why: "beyond the end of the file",
                }
                .into());
            }
            current.set_len(head);
        }
        let flusher = spawn_flusher(Arc::clone(&file))?;
        Ok(BufferedWriter {
            file,
            alignment,
            current,
            buf_start,
            spare,
            in_flight: std::collections::VecDeque::with_capacity(buffers),
            buffers,
            flusher: Some(flusher),
            failed: None,
            steps: None,
        })
    }

    /// Writes each full buffer in requests of the size `steps` gives before
    /// each one (rounded down to the alignment, at least one alignment),
    /// instead of one request per buffer: a background writer's large
    /// buffer in small requests while foreground reads need the device.
    pub fn set_write_steps(&mut self, steps: IoSteps) {
        self.steps = Some(steps);
    }

    /// The file, shared with the flusher.
    pub fn file(&self) -> &Arc<F> {
        &self.file
    }

    /// The alignment of every write.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The buffer capacity.
    pub fn capacity(&self) -> usize {
        self.current.capacity()
    }

    /// The offset the next byte goes to: the logical length of the file.
    pub fn end_offset(&self) -> u64 {
        self.buf_start + self.current.len() as u64
    }

    /// File offsets below this are in the file (written, not necessarily
    /// durable); bytes from here on are in flight or buffered.
    pub fn written_end(&self) -> u64 {
        self.in_flight
            .front()
            .map_or(self.buf_start, |(start, _)| *start)
    }

    /// The error of an earlier failure, after which the writer takes no
    /// more calls; `Ok` while it is healthy.
    pub fn check_ok(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::Poisoned(format!(
                "the writer of this file failed earlier: {why}"
            ))),
            None => Ok(()),
        }
    }

    fn guard<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            if self.failed.is_none() {
                self.failed = Some(e.to_string());
            }
        }
        result
    }

    /// Appends `data`.
    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        self.check_ok()?;
        let result = self.write_inner(data);
        self.guard(result)
    }

    fn write_inner(&mut self, mut data: &[u8]) -> Result<()> {
        let capacity = self.current.capacity();
        while !data.is_empty() {
            if data.len() >= capacity + self.alignment && self.try_bypass(&mut data)? {
                continue;
            }
            let n = self.current.extend_from_slice(data);
            data = &data[n..];
            if self.current.remaining() == 0 {
                self.hand_off_current()?;
            }
        }
        Ok(())
    }

    /// Writes the aligned middle of a large `data` straight from the caller's
    /// memory; returns false (nothing done) when its memory is not aligned for
    /// O_DIRECT.
    fn try_bypass(&mut self, data: &mut &[u8]) -> Result<bool> {
        let pos = self.end_offset();
        let head = (align_up(pos, self.alignment) - pos) as usize;
        let middle_len = align_down((data.len() - head) as u64, self.alignment) as usize;
        let middle = &data[head..head + middle_len];
        if middle_len < self.current.capacity()
            || (self.file.direct_writes() && !is_aligned(middle.as_ptr() as u64, self.alignment))
        {
            return Ok(false);
        }
        // The head completes the current buffer's last block: buf_start and
        // buf_start + capacity are aligned, so it fits.
        let taken = self.current.extend_from_slice(&data[..head]);
        assert_eq!(taken, head, "head must fit the current buffer");
        if !self.current.is_empty() {
            self.hand_off_current()?;
        }
        self.wait_in_flight()?;
        let at = self.buf_start;
        assert!(
            is_aligned(at, self.alignment),
            "bypass at unaligned offset {at}"
        );
        write_in_steps(&*self.file, middle, at, self.steps.as_deref())?;
        self.buf_start = at + middle_len as u64;
        *data = &data[head + middle_len..];
        Ok(true)
    }

    /// Hands the current buffer (whose length is aligned) to the flusher and
    /// continues in the other one. The full buffer is queued before waiting
    /// for a free one, so the flusher goes from one write to the next without
    /// waiting for this thread to wake up.
    fn hand_off_current(&mut self) -> Result<()> {
        let len = self.current.len();
        assert!(
            is_aligned(len as u64, self.alignment),
            "hand-off of unaligned length {len}"
        );
        let full = Arc::new(std::mem::replace(
            &mut self.current,
            AlignedBuf::empty(self.alignment),
        ));
        let offset = self.buf_start;
        self.buf_start += len as u64;
        self.send(offset, JobBytes::Own(full))?;
        // Shared bytes in flight give no buffer back: wait for one of ours.
        while self.spare.is_empty() && !self.in_flight.is_empty() {
            self.wait_one()?;
        }
        self.current = self
            .spare
            .pop()
            .ok_or_else(|| Error::Poisoned("flusher kept a buffer".into()))?;
        Ok(())
    }

    /// Queues `buf` for the flusher to write at `offset`, in flight from now.
    fn send(&mut self, offset: u64, buf: JobBytes) -> Result<()> {
        let flusher = self.flusher.as_ref().ok_or(Error::Closed)?;
        flusher
            .jobs
            .send(Job {
                buf: buf.clone(),
                offset,
                steps: self.steps.clone(),
            })
            .map_err(|_| Error::Poisoned("the flusher thread is gone".into()))?;
        self.in_flight.push_back((offset, buf));
        Ok(())
    }

    /// Hands `bytes` to the flusher to write as they are, with no copy into
    /// a buffer of the writer's: the file's bytes from the start of the
    /// block the writer is in (`end_offset` rounded down to the alignment),
    /// so they begin with the block's bytes that the writer holds, if any
    /// (the tail a `sync` or `write_out_tail` keeps), which they replace.
    /// Whole blocks, at an address aligned for the file's writes. The
    /// writer holds them until they are written (their owner keeps them
    /// unchanged meanwhile); it waits for the oldest job first when as many
    /// are in flight as it has buffers but one.
    pub fn write_shared(&mut self, bytes: SharedBytes) -> Result<()> {
        self.check_ok()?;
        let result = self.write_shared_inner(bytes);
        self.guard(result)
    }

    fn write_shared_inner(&mut self, bytes: SharedBytes) -> Result<()> {
        let slice = (*bytes).as_ref();
        let held = self.current.as_slice();
        let aligned_at =
            !self.file.direct_writes() || is_aligned(slice.as_ptr() as u64, self.alignment);
        if !is_aligned(slice.len() as u64, self.alignment)
            || !aligned_at
            || !slice.starts_with(held)
        {
            return Err(Error::Internal(format!(
                "shared write of {} bytes at {} (aligned: {aligned_at}) does not continue the writer's {} bytes held",
                slice.len(),
                self.buf_start,
                held.len()
            )));
        }
        let offset = self.buf_start;
        self.buf_start += slice.len() as u64;
        self.current.clear();
        self.send(offset, JobBytes::Shared(bytes))?;
        while self.in_flight.len() >= self.buffers {
            self.wait_one()?;
        }
        Ok(())
    }

    /// Waits for the oldest buffer in flight; its error, if it failed.
    fn wait_one(&mut self) -> Result<()> {
        // Our reference goes first, so the returned one is the last.
        if self.in_flight.pop_front().is_none() {
            return Ok(());
        }
        let flusher = self.flusher.as_ref().ok_or(Error::Closed)?;
        let (buf, result) = flusher
            .done
            .recv()
            .map_err(|_| Error::Poisoned("the flusher thread died".into()))?;
        match buf {
            JobBytes::Own(buf) => match Arc::try_unwrap(buf) {
                Ok(mut buf) => {
                    buf.clear();
                    self.spare.push(buf);
                }
                // Unreachable (readers copy under the owner's borrow), but a
                // new buffer is the safe answer, not a panic.
                Err(shared) => self
                    .spare
                    .push(AlignedBuf::with_capacity(shared.capacity(), self.alignment)),
            },
            // Given back to its owner.
            JobBytes::Shared(_) => {}
        }
        result
    }

    /// Waits until every buffer in flight is written.
    fn wait_in_flight(&mut self) -> Result<()> {
        while !self.in_flight.is_empty() {
            self.wait_one()?;
        }
        Ok(())
    }

    /// Makes everything written so far durable: waits for the buffer in
    /// flight, writes the buffered tail padded to the alignment, fdatasync.
    /// The tail stays buffered; the next hand-off rewrites its block.
    pub fn sync(&mut self) -> Result<()> {
        self.check_ok()?;
        let result = self.sync_inner();
        self.guard(result)
    }

    fn sync_inner(&mut self) -> Result<()> {
        self.write_out_tail_inner()?;
        self.file.sync_data()
    }

    /// Like [`Self::sync`] without the fdatasync: everything written so far is
    /// in the file (the tail block padded) when it returns, so a later
    /// fdatasync of the file, by any thread, makes it durable. This is how
    /// group commit syncs outside the writer's lock.
    pub fn write_out_tail(&mut self) -> Result<()> {
        self.check_ok()?;
        let result = self.write_out_tail_inner();
        self.guard(result)
    }

    fn write_out_tail_inner(&mut self) -> Result<()> {
        self.wait_in_flight()?;
        if !self.current.is_empty() {
            self.file
                .write_all_at(self.current.padded_slice(), self.buf_start)?;
        }
        // Whole blocks are now in the file: keep only the partial tail block.
        let whole = align_down(self.current.len() as u64, self.alignment) as usize;
        if whole > 0 {
            self.current.consume_front(whole);
            self.buf_start += whole as u64;
        }
        Ok(())
    }

    /// Reads `len` bytes at `offset` of what was written, wherever they are
    /// now: the file, a buffer in flight (copied while the flusher writes it,
    /// without waiting), or the current buffer.
    pub fn read_range(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.check_ok()?;
        let end = offset + len as u64;
        if end > self.end_offset() {
            return Err(InvalidInput::OptionOutOfRange {
                option: "read offset",
                value: end,
                why: "beyond what was written",
            }
            .into());
        }
        let mut out = Vec::with_capacity(len);
        let mut pos = offset;
        // Below the oldest buffer in flight: the file.
        let file_end = end.min(self.written_end());
        if pos < file_end {
            let start = align_down(pos, self.alignment);
            let stop = align_up(file_end, self.alignment);
            let mut block = AlignedBuf::zeroed((stop - start) as usize, self.alignment);
            let n = self.file.read_at(block.spare_capacity_full(), start)?;
            let want = (file_end - start) as usize;
            if n < want {
                return Err(Error::Poisoned(format!(
                    "file is shorter ({}) than what was written before it ({file_end})",
                    start + n as u64
                )));
            }
            out.extend_from_slice(&block.spare_capacity_full()[(pos - start) as usize..want]);
            pos = file_end;
        }
        // Buffers in flight: copied while the flusher writes them, no wait.
        for (start, buf) in &self.in_flight {
            let buf_end = start + buf.as_slice().len() as u64;
            if pos < end && pos >= *start && pos < buf_end {
                let stop = end.min(buf_end);
                out.extend_from_slice(
                    &buf.as_slice()[(pos - start) as usize..(stop - start) as usize],
                );
                pos = stop;
            }
        }
        // The buffer being filled.
        if pos < end {
            out.extend_from_slice(
                &self.current.as_slice()
                    [(pos - self.buf_start) as usize..(end - self.buf_start) as usize],
            );
        }
        debug_assert_eq!(out.len(), len);
        Ok(out)
    }

    /// Writes what is buffered as `mode` says, stops the flusher and returns
    /// the file. Does not fdatasync: call `sync_data` on the file for that.
    pub fn finish(mut self, mode: ShutdownMode) -> Result<Arc<F>> {
        self.check_ok()?;
        let result = self.finish_inner(mode);
        self.guard(result)?;
        self.stop_flusher();
        Ok(Arc::clone(&self.file))
    }

    fn finish_inner(&mut self, mode: ShutdownMode) -> Result<()> {
        self.wait_in_flight()?;
        let end = self.end_offset();
        match mode {
            ShutdownMode::DropTail => {
                let whole = align_down(self.current.len() as u64, self.alignment) as usize;
                if whole > 0 {
                    write_in_steps(
                        &*self.file,
                        &self.current.as_slice()[..whole],
                        self.buf_start,
                        self.steps.as_deref(),
                    )?;
                }
            }
            ShutdownMode::ZeroPadToAlignment | ShutdownMode::PadThenTruncate => {
                if !self.current.is_empty() {
                    write_in_steps(
                        &*self.file,
                        self.current.padded_slice(),
                        self.buf_start,
                        self.steps.as_deref(),
                    )?;
                }
                if mode == ShutdownMode::PadThenTruncate && !is_aligned(end, self.alignment) {
                    self.file.set_len(end)?;
                }
            }
        }
        Ok(())
    }

    fn stop_flusher(&mut self) {
        if let Some(flusher) = self.flusher.take() {
            drop(flusher.jobs);
            // The thread ends when the job channel closes; a panic in it has
            // already been reported as an error through the done channel.
            let _ = flusher.thread.join();
        }
    }
}

impl<F: BlockFile + ?Sized> Drop for BufferedWriter<F> {
    /// Dropping without `finish` writes nothing more (like a crash): it only
    /// waits for the buffer in flight and stops the flusher.
    fn drop(&mut self) {
        self.stop_flusher();
    }
}

/// Writes `bytes` (aligned) at `offset` in requests of `steps` bytes (one
/// request without), each aligned.
fn write_in_steps<F: BlockFile + ?Sized>(
    file: &F,
    bytes: &[u8],
    offset: u64,
    steps: Option<&(dyn Fn() -> usize + Send + Sync)>,
) -> Result<()> {
    let Some(steps) = steps else {
        return file.write_all_at(bytes, offset);
    };
    let alignment = file.alignment();
    let mut done = 0;
    while done < bytes.len() {
        let step = (align_down(steps() as u64, alignment) as usize).max(alignment);
        let end = (done + step).min(bytes.len());
        file.write_all_at(&bytes[done..end], offset + done as u64)?;
        done = end;
    }
    Ok(())
}

fn spawn_flusher<F: BlockFile + ?Sized>(file: Arc<F>) -> Result<Flusher> {
    let (jobs, job_rx) = mpsc::channel::<Job>();
    let (done_tx, done) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("strata-flusher".into())
        .spawn(move || {
            // After a failed write, nothing later is written: a later buffer
            // landing beyond the failed one would leave a hole of zeros that
            // a reader (or recovery) could take for data.
            let mut failed = false;
            for job in job_rx {
                let result = if failed {
                    Err(Error::io(
                        "<buffered writer>",
                        "write",
                        std::io::Error::other("not written: an earlier write of this file failed"),
                    ))
                } else {
                    write_in_steps(&*file, job.buf.as_slice(), job.offset, job.steps.as_deref())
                };
                failed |= result.is_err();
                if done_tx.send((job.buf, result)).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| Error::io("<flusher thread>", "spawn", e))?;
    Ok(Flusher { jobs, done, thread })
}
