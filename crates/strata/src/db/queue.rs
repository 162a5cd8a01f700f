//! `ReadQueue`: gets submitted now and reaped as they complete, many in
//! flight on one thread, without a thread per read.
//!
//! What it owns: a [`ReadRing`] of the storage (io_uring with one
//! registered buffer per slot on the operating system's storage) and the
//! gets in flight, one per slot. A get walks the same layers as
//! `Db::get` (`Version::candidates`, newest first) as a small state
//! machine: the in-memory layers and cached blocks answer at submit or
//! when it moves on; a block not in the cache is one read in the ring
//! (checked, cached, then searched when it completes); a pointer's value
//! is one more read. A get holds its version, so the files it reads stay.
//!
//! Invariants: at most `depth` gets are outstanding (submitted and not
//! reaped, answered or not): a submit beyond is refused
//! (`InvalidInput::QueueFull`), so memory and reads in flight are bounded
//! by the caller's depth; every submitted get is reaped exactly once,
//! with its value, `None`, its own error (a read's error or a failed check
//! ends that get alone; bytes that fail their check are read once more,
//! as everywhere: `io::read_verified`), or `Error::Cancelled`; a get sees
//! its LSN's batches whole (the visible LSN at submit); dropping the
//! queue cancels what is in flight and waits for the kernel to let go of
//! its buffers.

use super::{check_horizon, check_key, DbInner};
use crate::error::{Error, InvalidInput, Result};
use crate::io::ReadRing;
use crate::layer::bloom::PointKey;
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::file::LayerFile;
use crate::types::{Lsn, ValueKind};
use crate::value::{ValueFile, ValuePointer};
use crate::version::{Candidate, Version};
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A get that completed: the tag it was submitted with and its answer.
#[derive(Debug)]
pub struct ReadCompletion {
    /// The caller's tag given at submit.
    pub tag: u64,
    /// The value (`None`: no live version at the get's LSN), or what ended
    /// the get (`Error::Cancelled` when it was cancelled).
    pub result: Result<Option<Vec<u8>>>,
}

/// What a get in flight waits for.
enum Wait {
    /// A data block of a layer file.
    Block {
        reader: Arc<DeltaLayerReader<LayerFile>>,
        block: usize,
    },
    /// A value in a value file.
    Value {
        file: Arc<ValueFile>,
        pointer: ValuePointer,
    },
}

/// A get in flight.
struct Get {
    tag: u64,
    key: Vec<u8>,
    hash: u64,
    lsn: Lsn,
    version: Arc<Version>,
    /// The next candidate layer to look at (`Version::candidates` order).
    at: usize,
    wait: Option<Wait>,
    cancelled: bool,
}

/// What [`ReadQueue::reap_with`] hands each completed get: its tag, and its
/// value (lent for the call), `None`, or what ended it.
pub type Reaped<'a> = dyn FnMut(u64, Result<Option<&[u8]>>) + 'a;

/// A completed read, checked as far as the ring's callback can.
enum Got {
    Block(crate::cache::Block),
    Value(Vec<u8>),
    /// The value went to the reap's callback: the get is over.
    Handed,
}

/// Where a get's walk stopped.
enum Step {
    Done(Result<Option<Vec<u8>>>),
    /// A read to make: the file, offset and length.
    Read(Arc<dyn crate::io::StorageFile>, u64, usize),
}

/// Gets in flight on one thread (see the module doc). Made by
/// [`super::Db::read_queue`].
pub struct ReadQueue {
    /// First, so it is dropped first: it waits for the kernel to let go
    /// of its buffers before anything else goes.
    ring: Box<dyn ReadRing>,
    inner: Arc<DbInner>,
    /// Slot i's get, while its read is in the ring.
    gets: Vec<Option<Get>>,
    free: Vec<usize>,
    /// Completed, not yet reaped.
    ready: VecDeque<ReadCompletion>,
    /// Reads pushed since the last submit.
    unsubmitted: bool,
    /// A reap's completed reads, kept between reaps (no allocation each).
    completed: Vec<(usize, Result<Got>)>,
}

impl ReadQueue {
    pub(super) fn new(inner: Arc<DbInner>, depth: usize) -> Result<ReadQueue> {
        let ring = inner.storage.read_ring(depth)?;
        Ok(ReadQueue {
            ring,
            inner,
            gets: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
            ready: VecDeque::new(),
            unsubmitted: false,
            completed: Vec::new(),
        })
    }

    /// Most gets outstanding at once (submitted and not reaped).
    pub fn depth(&self) -> usize {
        self.gets.len()
    }

    /// How its reads are made: "io_uring, registered buffers" (the
    /// operating system's storage), "io_uring" (the kernel refused to
    /// register the buffers), "sync" (each read made at submit: another
    /// storage, or io_uring unavailable).
    pub fn engine(&self) -> &'static str {
        self.ring.engine()
    }

    /// Gets submitted and not yet reaped.
    pub fn outstanding(&self) -> usize {
        self.gets.len() - self.free.len() + self.ready.len()
    }

    /// Submits a get of `key` at the latest LSN (the batches visible now).
    /// See [`Self::submit_at`].
    pub fn submit(&mut self, tag: u64, key: &[u8]) -> Result<()> {
        self.submit_at(tag, key, Lsn::MAX)
    }

    /// Submits a get of `key` at `lsn`, reaped later under `tag` (any
    /// value; tags need not be distinct). An answer found in memory or in
    /// the block cache is ready at once; otherwise the get's first read is
    /// queued, and handed to the kernel at the next [`Self::reap`] (or
    /// [`Self::commit`]). Errors here mean the get was not submitted:
    /// `InvalidInput::QueueFull` at `depth` outstanding gets, a bad key, a
    /// read below the horizon, a closed or failed ring.
    pub fn submit_at(&mut self, tag: u64, key: &[u8], lsn: Lsn) -> Result<()> {
        if self.outstanding() >= self.depth() {
            return Err(InvalidInput::QueueFull {
                depth: self.depth(),
            }
            .into());
        }
        check_key(key)?;
        let inner = &self.inner;
        let lsn = lsn.min(inner.visible_lsn.load(Ordering::Acquire));
        let version = inner.version()?;
        check_horizon(&version, lsn)?;
        inner.point_lookups.fetch_add(1, Ordering::Relaxed);
        let mut get = Get {
            tag,
            hash: PointKey::new(key).hash,
            key: key.to_vec(),
            lsn,
            version,
            at: 0,
            wait: None,
            cancelled: false,
        };
        let step = walk(&mut get);
        self.place(get, step);
        Ok(())
    }

    /// Hands the reads submitted so far to the kernel without waiting.
    pub fn commit(&mut self) -> Result<()> {
        if self.unsubmitted {
            self.ring.submit()?;
            self.unsubmitted = false;
        }
        Ok(())
    }

    /// Moves completed gets into `out`: at least `min` (at most the gets
    /// outstanding), waiting for reads to complete as needed, and at most
    /// `max` (others that are ready stay for the next reap). Returns how
    /// many it moved. An error here is the ring's (the kernel refused the
    /// queue); a get's own error comes in its completion.
    pub fn reap(&mut self, min: usize, max: usize, out: &mut Vec<ReadCompletion>) -> Result<usize> {
        self.reap_with(min, max, &mut |tag, result| {
            out.push(ReadCompletion {
                tag,
                result: result.map(|v| v.map(<[u8]>::to_vec)),
            });
        })
    }

    /// [`Self::reap`] with each completed get handed to `done` (its tag and
    /// its answer) instead of collected: a value read from the device is
    /// lent from where the read put it, checked, for the call alone, so a
    /// caller that copies it into its own buffer copies it once and
    /// allocates nothing. Same `min`, `max`, return and errors as `reap`.
    /// A panic in `done` goes on to the caller once the queue is whole
    /// again: the get it was handed is reaped, every other stays in the
    /// queue for the next reap.
    pub fn reap_with(&mut self, min: usize, max: usize, done: &mut Reaped<'_>) -> Result<usize> {
        let min = min.min(max).min(self.outstanding());
        // No commit first: a reap of the ring hands the reads pushed since
        // to the kernel in the same system call as its wait.
        let mut moved = 0;
        loop {
            while moved < max {
                let Some(c) = self.ready.pop_front() else {
                    break;
                };
                match c.result {
                    Ok(value) => done(c.tag, Ok(value.as_deref())),
                    Err(e) => done(c.tag, Err(e)),
                }
                moved += 1;
            }
            if moved == max || self.ring.in_flight() == 0 {
                break;
            }
            // Below `min`: wait for a read; else only take what is done.
            moved += self.poll(moved < min, max - moved, done)?;
            if moved >= min && self.ready.is_empty() {
                break;
            }
        }
        // The reads the completions led to go to the kernel now.
        self.commit()?;
        Ok(moved)
    }

    /// Cancels every get in flight submitted with `tag`: each is reaped
    /// with `Error::Cancelled` (a get already answered, waiting to be
    /// reaped, keeps its answer). Its read in the kernel is asked to stop.
    /// Returns how many it cancelled.
    pub fn cancel(&mut self, tag: u64) -> usize {
        self.cancel_where(|t| t == tag)
    }

    /// Cancels every get in flight (see [`Self::cancel`]).
    pub fn cancel_all(&mut self) -> usize {
        self.cancel_where(|_| true)
    }

    fn cancel_where(&mut self, which: impl Fn(u64) -> bool) -> usize {
        let mut n = 0;
        for (i, slot) in self.gets.iter_mut().enumerate() {
            if let Some(get) = slot.as_mut().filter(|g| !g.cancelled && which(g.tag)) {
                get.cancelled = true;
                self.ring.cancel(i);
                n += 1;
            }
        }
        self.unsubmitted = true;
        n
    }

    /// Reaps the ring once (waiting for a completion when `wait`) and
    /// moves each get on: done, or its next read pushed. A checked value
    /// goes straight to `done`, up to `budget` of them (the rest wait in
    /// `ready`, copied); returns how many went to `done`.
    fn poll(&mut self, wait: bool, budget: usize, done: &mut Reaped<'_>) -> Result<usize> {
        let mut completed = std::mem::take(&mut self.completed);
        let gets = &self.gets;
        let mut handed = 0;
        // A panic in `done` is held until every completion the ring gave
        // is placed: unwinding through the ring's reap would lose the
        // gets whose completions it had taken (their slots never freed).
        let mut panicked = None;
        // The ring's reap submits what was pushed (`ReadRing::reap`).
        self.unsubmitted = false;
        self.ring.reap(wait, &mut |slot, bytes| {
            let got = bytes.and_then(|b| match gets.get(slot).and_then(Option::as_ref) {
                Some(g) if g.cancelled => Err(Error::Cancelled),
                // A value's entry is checked where the read put it, then
                // lent to `done` (or copied out when over budget); bytes
                // that fail are read once more, alone, and that reading
                // stands.
                Some(Get {
                    wait: Some(Wait::Value { file, pointer }),
                    key,
                    tag,
                    ..
                }) => match file.check(b, key, pointer) {
                    Ok(value) if handed < budget && panicked.is_none() => {
                        let call = || done(*tag, Ok(Some(value)));
                        if let Err(payload) = catch_unwind(AssertUnwindSafe(call)) {
                            panicked.get_or_insert(payload);
                        }
                        handed += 1;
                        Ok(Got::Handed)
                    }
                    Ok(value) => Ok(Got::Value(value.to_vec())),
                    Err(e) if e.is_corruption() => file.read_again(key, pointer).map(Got::Value),
                    Err(e) => Err(e),
                },
                // A block is copied once, into what the cache keeps.
                _ => Ok(Got::Block(Arc::from(b))),
            });
            completed.push((slot, got));
        })?;
        for (slot, got) in completed.drain(..) {
            let Some(mut get) = self.gets.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            self.free.push(slot);
            let step = match (got, get.wait.take()) {
                (Ok(Got::Handed), _) => continue,
                _ if get.cancelled => Step::Done(Err(Error::Cancelled)),
                (Err(e), _) => Step::Done(Err(e)),
                (Ok(Got::Value(value)), _) => Step::Done(Ok(Some(value))),
                (Ok(Got::Block(bytes)), Some(Wait::Block { reader, block })) => {
                    match reader.get_in_read_block(block, bytes, &get.key, get.lsn) {
                        Err(e) => Step::Done(Err(e)),
                        Ok(Some((_, kind, v))) => resolve(&mut get, kind, v),
                        Ok(None) => {
                            get.at += 1;
                            walk(&mut get)
                        }
                    }
                }
                (Ok(Got::Block(_)), _) => Step::Done(Err(Error::Internal(
                    "a block read completed for a get that waited for none".into(),
                ))),
            };
            self.place(get, step);
        }
        self.completed = completed;
        if let Some(payload) = panicked {
            resume_unwind(payload);
        }
        Ok(handed)
    }

    /// Puts a get where its step says: ready, or its read pushed into a
    /// free slot.
    fn place(&mut self, get: Get, step: Step) {
        match step {
            Step::Done(result) => self.ready.push_back(ReadCompletion {
                tag: get.tag,
                result,
            }),
            Step::Read(file, offset, len) => {
                let Some(slot) = self.free.pop() else {
                    // Cannot happen: outstanding <= depth = slots.
                    return self.ready.push_back(ReadCompletion {
                        tag: get.tag,
                        result: Err(Error::Internal("a read queue ran out of slots".into())),
                    });
                };
                if matches!(get.wait, Some(Wait::Block { .. })) {
                    self.inner
                        .layer_io
                        .point_reads
                        .fetch_add(1, Ordering::Relaxed);
                }
                match self.ring.push(slot, &file, offset, len) {
                    Ok(()) => {
                        self.unsubmitted = true;
                        self.gets[slot] = Some(get);
                    }
                    Err(e) => {
                        self.free.push(slot);
                        self.ready.push_back(ReadCompletion {
                            tag: get.tag,
                            result: Err(e),
                        });
                    }
                }
            }
        }
    }
}

impl Drop for ReadQueue {
    /// The ring's own drop cancels its reads and waits for them; the gets
    /// (and the versions they hold) go after it.
    fn drop(&mut self) {
        self.cancel_all();
    }
}

/// Walks `get`'s candidate layers from `get.at`: the answer, or the read
/// to make next.
fn walk(get: &mut Get) -> Step {
    match walk_inner(get) {
        Ok(step) => step,
        Err(e) => Step::Done(Err(e)),
    }
}

fn walk_inner(get: &mut Get) -> Result<Step> {
    let point = PointKey {
        key: &get.key,
        hash: get.hash,
    };
    loop {
        let found = match get.version.candidates(&get.key, get.lsn).nth(get.at) {
            None => return Ok(Step::Done(Ok(None))),
            Some(Candidate::Memory(m)) => m.get(point, get.lsn)?,
            Some(Candidate::Disk(d)) if d.filter_rules_out(point) => None,
            Some(Candidate::Disk(d)) => {
                let reader = d.reader()?;
                match reader.point_read_plan(point, get.lsn) {
                    None => None,
                    Some((block, offset, len)) => match reader.cached_block(block) {
                        Some(bytes) => {
                            reader.get_in_cached_block(block, bytes, &get.key, get.lsn)?
                        }
                        None => {
                            let len = usize::try_from(len).map_err(|_| {
                                InvalidInput::OptionOutOfRange {
                                    option: "block length",
                                    value: len,
                                    why: "larger than memory can address",
                                }
                            })?;
                            let file = Arc::clone(&reader.file().file);
                            get.wait = Some(Wait::Block { reader, block });
                            return Ok(Step::Read(file, offset, len));
                        }
                    },
                }
            }
        };
        match found {
            Some((_, kind, value)) => return Ok(resolve(get, kind, value)),
            None => get.at += 1,
        }
    }
}

/// The answer of a found version: a value or a delete at once, a pointer
/// as the read of its value.
fn resolve(get: &mut Get, kind: ValueKind, value: Vec<u8>) -> Step {
    if kind == ValueKind::Pointer {
        let target = ValuePointer::decode(&value)
            .and_then(|p| Some((Arc::clone(get.version.values.get(&p.file_id)?), p)));
        if let Some((file, pointer)) = target {
            if let Some((_, offset, len)) = file.request(&get.key, &pointer) {
                let storage_file = Arc::clone(file.file());
                get.wait = Some(Wait::Value { file, pointer });
                return Step::Read(storage_file, offset, len);
            }
        }
        // Not a pointer, into no listed file, or past its end: the read
        // alone names what is wrong.
    }
    Step::Done(get.version.value(&get.key, kind, value))
}
