//! One read of a file in flight ahead of its reader, on a helper thread:
//! for a background job that reads a file forwards in large requests and
//! works on each one's bytes (a flush reading its log back), so that the
//! device reads the next request while the job's thread works on this one.
//!
//! What it owns: the helper thread's channel, the one request it may have
//! in flight (offset, length, buffer) and the spare buffer the next one
//! goes into. The helper lives inside a `std::thread::scope` the caller
//! opens ([`ReadAhead::spawn`]); it ends when its `ReadAhead` is dropped.
//!
//! Measured (`examples/ingest_profile 128 100 seq yes defaults`, 32 MiB
//! logs read back in 1 MiB O_DIRECT requests while the writer's log and
//! the flush's own layer were written): a flush spent 52–71 ms of its
//! 110–150 ms waiting on these reads, beside 50–65 ms of CPU.
//!
//! Invariants: a request's bytes are the storage's answer for that offset
//! and length (a read ahead that the reader does not ask for is dropped,
//! never handed over for another offset); its error is returned when the
//! reader asks for that request, not before; at most one request is in
//! flight, so memory is two buffers; nothing is read past what the caller
//! asked to be read ahead.

use std::sync::mpsc;

use super::{AlignedBuf, StorageFile};
use crate::error::{Error, Result};

/// A request to the helper: read `len` bytes at `offset` into the buffer.
struct Request {
    offset: u64,
    len: usize,
    buf: AlignedBuf,
}

/// The helper's answer: the buffer and what the read returned.
struct Done {
    offset: u64,
    len: usize,
    buf: AlignedBuf,
    got: Result<usize>,
}

/// Reads of one file, one of them in flight ahead on a helper thread.
pub(crate) struct ReadAhead {
    requests: mpsc::Sender<Request>,
    done: mpsc::Receiver<Done>,
    /// The request in flight, if any: (offset, len).
    pending: Option<(u64, usize)>,
    /// The buffer the next request goes into.
    spare: Option<AlignedBuf>,
    capacity: usize,
    /// Bytes read ahead that the reader did not ask for.
    pub(crate) dropped_bytes: u64,
}

impl ReadAhead {
    /// A helper in `scope` that reads `file`, and a spare buffer of
    /// `capacity` bytes for it.
    pub(crate) fn spawn<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        file: &'env dyn StorageFile,
        capacity: usize,
    ) -> Result<ReadAhead> {
        let (requests, work) = mpsc::channel::<Request>();
        let (answer, done) = mpsc::channel::<Done>();
        std::thread::Builder::new()
            .name("strata-readahead".into())
            .spawn_scoped(scope, move || {
                for Request {
                    offset,
                    len,
                    mut buf,
                } in work
                {
                    let got =
                        file.read_at_steps(&mut buf.spare_capacity_full()[..len], offset, &|| len);
                    if answer
                        .send(Done {
                            offset,
                            len,
                            buf,
                            got,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            })
            .map_err(|e| Error::Internal(format!("cannot start the read-ahead thread: {e}")))?;
        Ok(ReadAhead {
            requests,
            done,
            pending: None,
            spare: Some(AlignedBuf::zeroed(capacity, file.alignment())),
            capacity,
            dropped_bytes: 0,
        })
    }

    /// Starts reading `len` bytes at `offset` (at most the buffers'
    /// capacity), unless a request is already in flight.
    pub(crate) fn start(&mut self, offset: u64, len: usize) {
        if self.pending.is_some() {
            return;
        }
        let Some(buf) = self.spare.take() else {
            return;
        };
        let len = len.min(buf.capacity());
        match self.requests.send(Request { offset, len, buf }) {
            Ok(()) => self.pending = Some((offset, len)),
            // The helper is gone (it cannot be while `self` lives, but the
            // reader then reads for itself).
            Err(mpsc::SendError(r)) => self.spare = Some(r.buf),
        }
    }

    /// The request in flight, if it reads `len` bytes at `offset`: waits
    /// for it and swaps its buffer with `buf` (which becomes the spare);
    /// returns what its read returned. `None` when no request reads that
    /// (one reading anything else is waited for and dropped, its bytes
    /// counted in [`Self::dropped_bytes`]): the caller reads for itself.
    pub(crate) fn take(
        &mut self,
        offset: u64,
        len: usize,
        buf: &mut AlignedBuf,
    ) -> Option<Result<usize>> {
        self.pending.take()?;
        let done = self.done.recv().ok()?;
        if (done.offset, done.len) != (offset, len) {
            self.dropped_bytes += *done.got.as_ref().unwrap_or(&0) as u64;
            self.spare = Some(done.buf);
            return None;
        }
        let mut fresh = done.buf;
        std::mem::swap(&mut fresh, buf);
        self.spare = Some(fresh);
        Some(done.got)
    }

    /// Bytes of the spare buffer (the memory read-ahead adds).
    pub(crate) fn spare_bytes(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::{Fault, FaultError, SimStorage};
    use crate::io::{FileClass, FileOptions, IoFile, IoMode, IoStats, Storage};
    use std::path::Path;

    const MIB: usize = 1 << 20;

    /// `len` bytes that tell their offset.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i / 4096 + i % 251) as u8).collect()
    }

    /// A simulated log file of `len` bytes of [`pattern`], its storage
    /// seeded with `seed`.
    fn sim_file(seed: u64, len: usize) -> (SimStorage, std::sync::Arc<dyn StorageFile>) {
        let sim = SimStorage::new(seed);
        let opts = FileOptions {
            mode: IoMode::Buffered,
            class: FileClass::Log,
            ..FileOptions::default()
        };
        let file = sim
            .create(Path::new("/f"), &opts, &IoStats::new())
            .expect("create");
        file.write_all_at(&pattern(len), 0).expect("write");
        (sim, file)
    }

    /// Reads `file` forwards in `step`-byte requests through a read-ahead,
    /// as the flush does; the bytes, and the bytes read ahead and dropped.
    fn read_forwards(file: &dyn StorageFile, len: usize, step: usize) -> (Vec<u8>, u64) {
        std::thread::scope(|scope| {
            let mut ahead = ReadAhead::spawn(scope, file, step).expect("spawn");
            let mut buf = AlignedBuf::zeroed(step, file.alignment());
            let mut out = Vec::new();
            let mut at = 0;
            while at < len {
                let want = step.min(len - at);
                let got = match ahead.take(at as u64, want, &mut buf) {
                    Some(got) => got.expect("read ahead"),
                    None => file
                        .read_at_steps(&mut buf.spare_capacity_full()[..want], at as u64, &|| want)
                        .expect("read"),
                };
                assert_eq!(got, want);
                out.extend_from_slice(&buf.spare_capacity_full()[..want]);
                at += want;
                if at < len {
                    ahead.start(at as u64, step.min(len - at));
                }
            }
            (out, ahead.dropped_bytes)
        })
    }

    #[test]
    fn a_file_read_forwards_comes_back_whole_with_direct_io() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stats = IoStats::new();
        let opts = FileOptions {
            mode: IoMode::DirectRw,
            fallback_to_buffered: true,
            ..FileOptions::default()
        };
        let file = IoFile::create(dir.path().join("f"), &opts, &stats).expect("create");
        let bytes = pattern(5 * MIB + 8192);
        let mut page = AlignedBuf::zeroed(bytes.len(), file.alignment());
        page.as_mut_slice().copy_from_slice(&bytes);
        file.write_all_at(page.as_slice(), 0).expect("write");
        let (read, dropped) = read_forwards(&file, bytes.len(), MIB);
        assert!(read == bytes, "the bytes read ahead differ from the file's");
        assert_eq!(dropped, 0);
    }

    #[test]
    fn a_read_ahead_of_another_offset_is_dropped_and_counted() {
        let (_sim, file) = sim_file(3, 4 * MIB);
        std::thread::scope(|scope| {
            let mut ahead = ReadAhead::spawn(scope, &*file, MIB).expect("spawn");
            let mut buf = AlignedBuf::zeroed(MIB, file.alignment());
            ahead.start(MIB as u64, MIB);
            // Asked for elsewhere (or for another length): not handed over.
            assert!(ahead.take(2 * MIB as u64, MIB, &mut buf).is_none());
            assert_eq!(ahead.dropped_bytes, MIB as u64);
            ahead.start(MIB as u64, MIB);
            assert!(ahead.take(MIB as u64, 4096, &mut buf).is_none());
            // Nothing in flight: nothing to take.
            assert!(ahead.take(MIB as u64, MIB, &mut buf).is_none());
            ahead.start(3 * MIB as u64, MIB);
            let got = ahead
                .take(3 * MIB as u64, MIB, &mut buf)
                .expect("in flight");
            assert_eq!(got.expect("read"), MIB);
            assert!(buf.spare_capacity_full()[..MIB] == pattern(4 * MIB)[3 * MIB..]);
        });
    }

    #[test]
    fn a_failed_read_ahead_is_the_error_of_the_request_that_takes_it() {
        let (sim, file) = sim_file(4, 2 * MIB);
        std::thread::scope(|scope| {
            let mut ahead = ReadAhead::spawn(scope, &*file, MIB).expect("spawn");
            let mut buf = AlignedBuf::zeroed(MIB, file.alignment());
            sim.inject(Fault::once(sim.ops() + 1, FaultError::Eio));
            ahead.start(MIB as u64, MIB);
            let got = ahead.take(MIB as u64, MIB, &mut buf).expect("in flight");
            assert!(matches!(got, Err(Error::Io { .. })), "{got:?}");
            // The next one reads.
            ahead.start(0, MIB);
            let got = ahead.take(0, MIB, &mut buf).expect("in flight");
            assert_eq!(got.expect("read"), MIB);
        });
    }
}
