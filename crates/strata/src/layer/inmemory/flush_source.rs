//! What a flush copies out of a frozen layer: every version in (key, LSN)
//! order with its value read from the log and checked, in bounded memory.
//!
//! The log's bytes come from its copy in memory when the layer kept it whole
//! (`log_memory`: no read of the file; its records checked a piece ahead of
//! the entries handed on, so that keys in log order read each byte while it
//! is in the CPU's caches; memory that fails its check is dropped, and the
//! flush's next try reads the file), else from the file, read back. They are
//! taken in windows of the index's key order. A window takes the
//! next versions in key order whose entries (and their bookkeeping, a
//! `Slot` each) fit in the flush's memory (`Options::flush_memory_bytes`;
//! always at least one version), reads the log where those entries lie, in
//! offset order, in requests of the background I/O size (`io::IoSteps`),
//! copies each entry into its place, checks it against the index (its
//! crc32c, kind, key and lengths: `batch::check_entry`) and hands the
//! versions on in key order. Keys written in order put a window's entries
//! in one stretch of the log, in order, which is then read once in all,
//! and its entries are checked and handed on straight from the read
//! requests (no window buffer; an entry that two requests share is
//! assembled on its own); random keys scatter every window over the whole
//! log, which is read about (entry bytes / window) times: reads traded for
//! memory. An in-order entry that lies in a stretch whose records the log
//! check took whole from the same read request skips its own crc32c (its
//! record's covers it); its header and key are still matched. An
//! out-of-line value (log format 4, in its record's value run) is read
//! alone, its bytes only, and always checked against the entry crc32c the
//! index keeps for it (`batch::check_out_of_line`); a pointer to it names
//! the value itself.
//!
//! The log as a whole is checked as its bytes go past (`SealedCheck`: the
//! same rules as the replay before a flush always kept: every record intact
//! and in LSN order up to exactly the end the next log claims); a read
//! that skips a stretch leaves the check behind, and what it has not seen
//! when the windows are done is read for it alone. A rotted log is refused
//! whether or not the rot lies in a value the flush copies. Except for a
//! log the flush keeps as a value file (values of at least `large` bytes
//! are handed on as pointers into it, not read): it is never replayed, so
//! its records are not checked; each entry copied out of it is checked by
//! its own crc32c, and a value left in it when it is read.
//!
//! Invariants: no value is handed on before its entry passed its check; a
//! read whose bytes fail a check (an entry, or a record) is read again once
//! (its cached copies forgotten, `Stats::read_retries` counted) and the
//! second result stands; the record check has ended before `Ok` is
//! returned. Memory: the window (at most the budget, or one version's entry
//! if that is larger; none for keys in log order), two background read
//! requests (one read ahead on a helper thread, `io::ReadAhead`, for a log
//! read whole), and one record the check holds across two requests.

use super::{InMemoryLayer, Index, LogMemory, LogVersion, Pinned};
use crate::batch::{check_entry_with, check_out_of_line, ENTRY_HEADER_BYTES};
use crate::error::{Corruption, Error, Result};
use crate::io::{align_down, align_up, AlignedBuf, IoStats, ReadAhead, StorageFile};
use crate::log::replay::SealedCheck;
use crate::types::ValueKind;
use crate::value::ValuePointer;

/// Where one entry of a window lies: in the log, and in the window buffer.
#[derive(Clone, Copy)]
struct Slot {
    start: u64,
    len: u32,
    at: u32,
}

/// Bytes a window counts per version beside its entry.
const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// What a flush's read of its log took.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FlushRead {
    /// Most memory held at once: window, bookkeeping, read request, record.
    pub peak_memory_bytes: usize,
    /// Bytes of the log read from the file.
    pub bytes_read: u64,
    /// Windows the versions were copied in.
    pub windows: usize,
}

impl FlushRead {
    /// Counts a window that held `window_bytes` (its buffer or scratch, and
    /// its bookkeeping) beside `reader`'s request and `check`'s record.
    fn held(&mut self, window_bytes: usize, reader: &LogReader<'_>, check: &SealedCheck<'_>) {
        self.windows += 1;
        self.peak_memory_bytes = self
            .peak_memory_bytes
            .max(window_bytes + reader.request_bytes() + check.memory_bytes());
    }
}

/// The bytes of `v`'s entry in the log that a flush reads (header, key,
/// value; or the value alone, out of line), or 0 for a version whose value
/// is empty (a delete) or stays in the log (at least `large` bytes):
/// nothing to read.
fn entry_bytes(key: &[u8], v: LogVersion, large: usize) -> usize {
    if v.kind == ValueKind::Delete || v.len == 0 || v.len as usize >= large {
        0
    } else if v.out_of_line {
        v.len as usize
    } else {
        ENTRY_HEADER_BYTES + key.len() + v.len as usize
    }
}

/// Where the bytes [`entry_bytes`] counts start: the entry's header, or the
/// value itself when it is out of line.
fn entry_start(key: &[u8], v: LogVersion) -> Option<u64> {
    match v.out_of_line {
        true => Some(v.offset),
        false => v
            .offset
            .checked_sub((ENTRY_HEADER_BYTES + key.len()) as u64),
    }
}

/// The value in `bytes` (what [`entry_bytes`] counts of `key`'s version
/// `v`, read), once checked: an entry against the index (its crc32c only
/// when `crc`: see `check_entry_with`), an out-of-line value against the
/// entry crc32c the index keeps (always).
fn checked_value<'b>(
    layer: &InMemoryLayer,
    index: &Index,
    bytes: &'b [u8],
    key: &[u8],
    v: LogVersion,
    crc: bool,
) -> Result<Option<&'b [u8]>> {
    if let Some(kept) = layer.kept_crc(index, v)? {
        return Ok(check_out_of_line(bytes, key, kept).ok().map(|()| bytes));
    }
    Ok(check_entry_with(bytes, v.kind, key, crc).ok())
}

/// What a flush hands on for a version of at least `large` bytes: a
/// pointer to its entry in log `file_id`, with the crc32c the index kept.
fn pointer(
    index: &Index,
    file_id: u64,
    key: &[u8],
    v: LogVersion,
    large: usize,
) -> Result<Option<ValuePointer>> {
    if v.kind != ValueKind::Put || (v.len as usize) < large {
        return Ok(None);
    }
    match (index.crc_of(v.offset), entry_start(key, v)) {
        (Some(crc), Some(offset)) => Ok(Some(ValuePointer {
            file_id,
            offset,
            value_len: v.len,
            crc,
            out_of_line: v.out_of_line,
        })),
        _ => Err(Error::Internal(format!(
            "log {file_id}: no entry crc kept for the {}-byte value at {}",
            v.len, v.offset
        ))),
    }
}

/// The log read forwards in requests, feeding every byte it reads at the
/// record check's position to the check.
struct LogReader<'a> {
    file: &'a dyn StorageFile,
    stats: &'a IoStats,
    /// Logical end of the log.
    size: u64,
    steps: &'a dyn Fn() -> usize,
    buf: AlignedBuf,
    /// Offset of `buf`'s first byte in the log, and how many are valid.
    start: u64,
    len: usize,
    /// The stretch of `buf` whose records the check took whole from this
    /// reading of it (`start..end` in the log): an entry inside it is
    /// covered by its record's crc32c.
    checked: (u64, u64),
    bytes_read: u64,
    /// The next request, read ahead while this one's entries are worked
    /// on (`None` where the helper thread could not start).
    ahead: Option<ReadAhead>,
}

impl LogReader<'_> {
    /// Memory of the read requests: this one's and the one read ahead.
    fn request_bytes(&self) -> usize {
        self.buf.capacity() + self.ahead.as_ref().map_or(0, ReadAhead::spare_bytes)
    }

    fn holds(&self, pos: u64) -> bool {
        pos >= self.start && pos < self.start + self.len as u64
    }

    /// Reads the request that holds `pos`, from its aligned start; when the
    /// record check stands a little before `pos` (less than half a request:
    /// a short stretch no window needs), from there instead, so the check
    /// keeps up rather than reading its stretch again at the end.
    fn load(&mut self, pos: u64, check: &mut SealedCheck<'_>) -> Result<()> {
        let alignment = self.file.alignment();
        let step = align_down((self.steps)() as u64, alignment)
            .max(alignment as u64)
            .min(self.buf.capacity() as u64);
        let wanted = check.wanted();
        let from = if wanted < pos && pos - wanted < step / 2 {
            align_down(wanted, alignment)
        } else {
            align_down(pos, alignment)
        };
        let want = step.min(align_up(self.size, alignment) - from) as usize;
        let valid = (self.size - from).min(want as u64) as usize;
        self.read(from, want, valid)?;
        let at = check.wanted();
        if at < from || at >= from + valid as u64 {
            return Ok(());
        }
        // A record that fails is read again once (this request, its cached
        // copies forgotten) before the check's answer stands.
        let saved = check.clone();
        let fed = check.feed(&self.buf.as_slice()[(at - from) as usize..valid]);
        match fed {
            Err(e) if e.is_corruption() => {
                *check = saved;
                self.stats.record_read_retry(self.file.class());
                self.file.forget_cached(from, want as u64);
                self.read(from, want, valid)?;
                check.feed(&self.buf.as_slice()[(at - from) as usize..valid])?;
            }
            fed => fed?,
        }
        // The records that ended in this reading were checked on its bytes
        // from `at` on (a record begun in the previous reading was checked
        // on that reading's bytes before `at`).
        self.checked = (at, check.checked_end().max(at));
        Ok(())
    }

    /// `want` bytes (aligned) at `from` into the buffer, of which `valid`
    /// must be there (taken from the read ahead when that is what it
    /// read); then the next `want` bytes are read ahead.
    fn read(&mut self, from: u64, want: usize, valid: usize) -> Result<()> {
        self.len = 0;
        self.checked = (0, 0);
        let ahead = self
            .ahead
            .as_mut()
            .and_then(|a| a.take(from, want, &mut self.buf));
        let got = match ahead {
            Some(got) => got?,
            None => self.file.read_at_steps(
                &mut self.buf.spare_capacity_full()[..want],
                from,
                &|| want,
            )?,
        };
        self.bytes_read += got as u64;
        let end = align_up(self.size, self.file.alignment());
        let next = from + want as u64;
        if let Some(a) = self.ahead.as_mut().filter(|_| next < end) {
            a.start(next, want.min((end - next) as usize));
        }
        if got < valid {
            return Err(crate::io::short_read(
                self.file.path(),
                format!(
                    "the log is {} bytes long, its file ends at {}",
                    self.size,
                    from + got as u64
                ),
            ));
        }
        self.start = from;
        self.len = valid;
        Ok(())
    }

    /// The `len` bytes of the log at `pos`: in the read request that holds
    /// them (read if need be), or, when they cross into the next request,
    /// assembled in `scratch`; and whether the record check took them whole
    /// from the same reading (then its crc32c covers them).
    fn entry<'s>(
        &'s mut self,
        pos: u64,
        len: usize,
        check: &mut SealedCheck<'_>,
        scratch: &'s mut Vec<u8>,
    ) -> Result<(&'s [u8], bool)> {
        if !self.holds(pos) {
            self.load(pos, check)?;
        }
        let end = pos + len as u64;
        if end <= self.start + self.len as u64 {
            let from = (pos - self.start) as usize;
            let checked = pos >= self.checked.0 && end <= self.checked.1;
            return Ok((&self.buf.as_slice()[from..from + len], checked));
        }
        scratch.clear();
        scratch.resize(len, 0);
        self.copy(pos, scratch, check)?;
        Ok((scratch, false))
    }

    /// Copies the log's bytes at `pos` into `out`.
    fn copy(&mut self, mut pos: u64, out: &mut [u8], check: &mut SealedCheck<'_>) -> Result<()> {
        let mut done = 0;
        while done < out.len() {
            if !self.holds(pos) {
                self.load(pos, check)?;
            }
            let from = (pos - self.start) as usize;
            let n = (self.len - from).min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.buf.as_slice()[from..from + n]);
            done += n;
            pos += n as u64;
        }
        Ok(())
    }
}

impl InMemoryLayer {
    /// Bytes of the entries of the frozen layer's puts of at least `large`
    /// bytes (at least `POINTER_VALUE_BYTES_MIN`): what a flush would leave
    /// in the log for pointers to hold.
    pub(crate) fn large_entry_bytes(&self, large: usize) -> Result<u64> {
        let large = large.max(super::POINTER_VALUE_BYTES_MIN);
        let index = self
            .index
            .read()
            .map_err(|_| Error::Poisoned("index lock poisoned".into()))?;
        // No value of POINTER_VALUE_BYTES_MIN or more: none to look for.
        if index.crcs.is_empty() {
            return Ok(0);
        }
        Ok(index
            .map
            .iter()
            .flat_map(|(k, vs)| vs.as_slice().iter().map(move |v| (k.as_slice().len(), *v)))
            .filter(|(_, v)| v.kind == ValueKind::Put && v.len as usize >= large)
            .map(|(k, v)| (ENTRY_HEADER_BYTES + k) as u64 + u64::from(v.len))
            .sum())
    }

    /// Hands on `key`'s version `v` (an entry of `entry` bytes) after its
    /// copy failed its check: read again alone, through the read-again
    /// policy, its cached copies forgotten first; the second reading stands.
    fn hand_on_read_again(
        &self,
        index: &Index,
        key: &[u8],
        v: LogVersion,
        entry: usize,
        f: &mut impl FnMut(&[u8], LogVersion, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.stats.record_read_retry(self.file.class());
        let start = entry_start(key, v).unwrap_or(v.offset);
        self.file.forget_cached(start, entry as u64);
        let value = self.read_value(key, v, self.kept_crc(index, v)?)?;
        f(key, v, &value)
    }

    /// Every version of the frozen layer in (key, LSN) order with its value
    /// (empty for a delete), read from the log in windows of about
    /// `memory_bytes` (see the module documentation) in requests `steps`
    /// sizes, each checked before it is handed to `f`; the whole log is
    /// checked against the claim its successor makes of it
    /// ([`Self::sealed_claim`]) before this returns `Ok`. A put of at least
    /// `large` bytes (at least `POINTER_VALUE_BYTES_MIN`; `usize::MAX`:
    /// none) is not read: it is handed on as `ValueKind::Pointer` with the
    /// encoded `ValuePointer` to its entry in this log as its value; the
    /// log then stays as a value file and is not checked whole (see
    /// `SealedCheck::none`).
    ///
    /// A log read whole (none kept as a value file) is read one request
    /// ahead on a helper thread (`io::ReadAhead`), so the device reads the
    /// next request while this thread checks and hands on this one's
    /// entries. Measured (`examples/ingest_profile 128 100 seq yes
    /// defaults`, 32 MiB logs): a flush took 110–150 ms, 52–71 ms of it
    /// waiting for its reads, before.
    pub(crate) fn for_each_value(
        &self,
        memory_bytes: usize,
        steps: &dyn Fn() -> usize,
        large: usize,
        f: impl FnMut(&[u8], LogVersion, &[u8]) -> Result<()>,
    ) -> Result<FlushRead> {
        let large = large.max(super::POINTER_VALUE_BYTES_MIN);
        let mut f = f;
        if let Some(m) = self
            .memory
            .as_deref()
            .and_then(LogMemory::pin)
            .filter(|m| m.len() >= self.size_bytes())
        {
            let copied = self.copy_from_memory(&m, large, &mut f);
            // Bytes in memory that fail their check (a defect, or memory
            // that rotted) are released: the flush's next try reads the
            // file (some versions may have been handed on).
            if copied.as_ref().is_err_and(Error::is_corruption) {
                self.release_memory();
                self.stats.record_read_retry(self.file.class());
            }
            return copied;
        }
        if large != usize::MAX {
            return self.copy_out(memory_bytes, steps, large, f, None);
        }
        std::thread::scope(|scope| {
            let ahead =
                ReadAhead::spawn(scope, &*self.file, crate::io::BACKGROUND_IO_IDLE_BYTES_MAX);
            self.copy_out(memory_bytes, steps, large, f, ahead.ok())
        })
    }

    /// [`Self::for_each_value`] from `memory`, the log's bytes whole: the
    /// records checked first, all of them, on these bytes (the replay's
    /// rules: see `SealedCheck`), then every version handed on in key
    /// order straight from them (no window: any entry is at hand); an
    /// entry is covered by its record's crc32c and has its header and key
    /// matched with the index. A log kept as a value file is not checked
    /// whole (see above): each entry copied is checked by its own crc32c.
    /// A failed check is a corruption error and hands nothing on after it.
    fn copy_from_memory(
        &self,
        memory: &Pinned<'_>,
        large: usize,
        f: &mut impl FnMut(&[u8], LogVersion, &[u8]) -> Result<()>,
    ) -> Result<FlushRead> {
        let index = self
            .index
            .read()
            .map_err(|_| Error::Poisoned("index lock poisoned".into()))?;
        let size = self.size_bytes();
        let whole = large == usize::MAX;
        let check = if whole {
            SealedCheck::new(&self.path, self.file_id, self.sealed_claim())
        } else {
            SealedCheck::none(&self.path, self.file_id)
        };
        // The record check runs just ahead of the entries handed on, a
        // piece at a time, so that an entry is read while its piece is
        // still in the CPU's caches (keys in log order): checked whole
        // first, the log was one pass over cold memory and its values a
        // second. Random keys take the check ahead to the furthest entry
        // so far: the whole log, soon, as before.
        let mut ahead = CheckAhead {
            check,
            pieces: memory
                .chunks(size)
                .flat_map(|chunk| chunk.chunks(CHECK_PIECE_BYTES)),
            carry_peak: 0,
        };
        let mut scratch = Vec::new();
        for (key, vs) in index.map.iter() {
            let key = key.as_slice();
            for &v in vs.as_slice() {
                let entry = entry_bytes(key, v, large);
                if entry == 0 {
                    hand_on_unread(&index, self.file_id, key, v, large, f)?;
                    continue;
                }
                let (start, bytes) = entry_start(key, v)
                    .filter(|s| s + entry as u64 <= size)
                    .and_then(|start| Some((start, memory.slice(start, entry, &mut scratch)?)))
                    .ok_or_else(|| {
                        Corruption::new(&self.path, v.offset, "indexed value outside the log")
                    })?;
                // An entry whose records the check has taken whole is
                // covered by its record's crc32c; any other (a log kept as
                // a value file: no record check) is checked by its own.
                let covered = whole && ahead.checked_past(start + entry as u64)?;
                match checked_value(self, &index, bytes, key, v, !covered)? {
                    Some(value) => f(key, v, value)?,
                    None => {
                        return Err(Corruption::new(
                            &self.path,
                            v.offset,
                            "an entry kept in memory fails its check",
                        )
                        .into())
                    }
                }
            }
        }
        let carry_peak = ahead.finish()?;
        Ok(FlushRead {
            peak_memory_bytes: carry_peak + scratch.capacity(),
            bytes_read: 0,
            windows: 1,
        })
    }

    /// [`Self::for_each_value`] from the file, with `ahead` to read it
    /// ahead.
    fn copy_out(
        &self,
        memory_bytes: usize,
        steps: &dyn Fn() -> usize,
        large: usize,
        mut f: impl FnMut(&[u8], LogVersion, &[u8]) -> Result<()>,
        ahead: Option<ReadAhead>,
    ) -> Result<FlushRead> {
        let index = self
            .index
            .read()
            .map_err(|_| Error::Poisoned("index lock poisoned".into()))?;
        let file = &*self.file;
        let size = self.size_bytes();
        // A log kept as a value file is never replayed: its records are
        // not read for their check (the values left in it are not read at
        // all); every entry copied out of it is checked by its own crc32c.
        let mut check = if large == usize::MAX {
            SealedCheck::new(&self.path, self.file_id, self.sealed_claim())
        } else {
            SealedCheck::none(&self.path, self.file_id)
        };
        let mut reader = LogReader {
            file,
            stats: &self.stats,
            size,
            steps,
            buf: AlignedBuf::zeroed(crate::io::BACKGROUND_IO_IDLE_BYTES_MAX, file.alignment()),
            start: 0,
            len: 0,
            checked: (0, 0),
            bytes_read: 0,
            ahead,
        };
        let mut next = index
            .map
            .iter()
            .flat_map(|(k, vs)| vs.as_slice().iter().map(move |v| (k.as_slice(), *v)))
            .peekable();
        let mut window: Vec<u8> = Vec::new();
        // An entry of an in-order window that two read requests share.
        let mut scratch: Vec<u8> = Vec::new();
        let mut slots: Vec<Slot> = Vec::new();
        let mut read = FlushRead::default();
        while next.peek().is_some() {
            let first = next.clone();
            slots.clear();
            let (mut used, mut count, mut bytes) = (0usize, 0usize, 0usize);
            while let Some(&(key, v)) = next.peek() {
                let entry = entry_bytes(key, v, large);
                if count > 0 && used + entry + SLOT_BYTES > memory_bytes {
                    break;
                }
                if entry > 0 {
                    let start = entry_start(key, v).filter(|s| s + entry as u64 <= size);
                    let Some(start) = start else {
                        return Err(Corruption::new(
                            &self.path,
                            v.offset,
                            "indexed value outside the log",
                        )
                        .into());
                    };
                    slots.push(Slot {
                        start,
                        len: entry as u32,
                        at: bytes as u32,
                    });
                    bytes += entry;
                }
                used += entry + SLOT_BYTES;
                count += 1;
                next.next();
            }
            // Keys written in order lie in the log in key order: then the
            // entries are checked and handed on straight from the read
            // requests, without the window's copy (14% of a 100 B flush's
            // CPU, a fifth of an 8 KiB one's).
            if slots.windows(2).all(|w| w[0].start < w[1].start) {
                for (key, v) in first.take(count) {
                    let entry = entry_bytes(key, v, large);
                    if entry == 0 {
                        hand_on_unread(&index, self.file_id, key, v, large, &mut f)?;
                        continue;
                    }
                    let start = entry_start(key, v).unwrap_or(v.offset);
                    let (bytes, checked) = reader.entry(start, entry, &mut check, &mut scratch)?;
                    // An entry whose record the check took whole from the
                    // same bytes is covered by the record's crc32c (the
                    // entry's own was a tenth of a 100 B ingest's CPU);
                    // its header and key are matched with the index anyway.
                    match checked_value(self, &index, bytes, key, v, !checked)? {
                        Some(value) => f(key, v, value)?,
                        None => self.hand_on_read_again(&index, key, v, entry, &mut f)?,
                    }
                }
                read.held(
                    scratch.capacity() + slots.capacity() * SLOT_BYTES,
                    &reader,
                    &check,
                );
                continue;
            }
            // Every byte below `bytes` is written by a slot before it is
            // read: the window is only grown (zeroed by the allocator,
            // fresh pages: no memset, which was 12% of a 100 B flush's
            // CPU), never cleared.
            if window.len() < bytes {
                window = vec![0u8; bytes];
            }
            // In the log's order: each request is read once per window.
            slots.sort_unstable_by_key(|s| s.start);
            for s in &slots {
                let at = s.at as usize;
                reader.copy(s.start, &mut window[at..at + s.len as usize], &mut check)?;
            }
            read.held(
                window.capacity() + slots.capacity() * SLOT_BYTES,
                &reader,
                &check,
            );
            let mut at = 0;
            for (key, v) in first.take(count) {
                let entry = entry_bytes(key, v, large);
                if entry == 0 {
                    hand_on_unread(&index, self.file_id, key, v, large, &mut f)?;
                    continue;
                }
                let bytes = &window[at..at + entry];
                at += entry;
                match checked_value(self, &index, bytes, key, v, true)? {
                    Some(value) => f(key, v, value)?,
                    None => self.hand_on_read_again(&index, key, v, entry, &mut f)?,
                }
            }
        }
        // What the windows skipped, read for the record check alone.
        while !check.is_done() && check.wanted() < size {
            reader.load(check.wanted(), &mut check)?;
        }
        read.peak_memory_bytes = read
            .peak_memory_bytes
            .max(reader.request_bytes() + check.memory_bytes());
        read.bytes_read = reader.bytes_read + reader.ahead.as_ref().map_or(0, |a| a.dropped_bytes);
        check.finish()?;
        Ok(read)
    }
}

/// The pieces the record check takes from a log's memory at a time: well
/// within a core's L2 cache, so the entries handed on after a piece is
/// checked are read from the cache.
const CHECK_PIECE_BYTES: usize = 64 << 10;

/// The record check of a log read from its memory, fed in pieces as far as
/// the entries handed on need it.
struct CheckAhead<'c, I> {
    check: SealedCheck<'c>,
    pieces: I,
    /// Most bytes the check held for an unfinished record.
    carry_peak: usize,
}

impl<'b, I: Iterator<Item = &'b [u8]>> CheckAhead<'_, I> {
    /// Feeds the check until every record up to `end` is checked whole;
    /// false when the check ends or the bytes run out first (no record the
    /// check takes covers `end`: the entry is then checked by its own
    /// crc32c, and `finish` says what is wrong with the log, if anything).
    fn checked_past(&mut self, end: u64) -> Result<bool> {
        while self.check.checked_end() < end {
            let piece = match self.pieces.next() {
                Some(piece) if !self.check.is_done() => piece,
                _ => return Ok(false),
            };
            self.check.feed(piece)?;
            self.carry_peak = self.carry_peak.max(self.check.memory_bytes());
        }
        Ok(true)
    }

    /// Feeds the rest of the log and ends the check; the most bytes it held.
    fn finish(mut self) -> Result<usize> {
        self.checked_past(u64::MAX)?;
        self.check.finish()?;
        Ok(self.carry_peak)
    }
}

/// Hands on a version the flush does not read: a delete or an empty value
/// as it is, a large value as a pointer into the log.
fn hand_on_unread(
    index: &Index,
    file_id: u64,
    key: &[u8],
    v: LogVersion,
    large: usize,
    f: &mut impl FnMut(&[u8], LogVersion, &[u8]) -> Result<()>,
) -> Result<()> {
    match pointer(index, file_id, key, v, large)? {
        Some(p) => f(
            key,
            LogVersion {
                kind: ValueKind::Pointer,
                ..v
            },
            &p.encode(),
        ),
        None => f(key, v, &[]),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::LogMemoryBudget;
    use super::*;
    use crate::batch::WriteBatch;
    use crate::io::sim::SimStorage;
    use crate::io::{BufferedWriter, FileClass, FileOptions, IoMode, Storage};
    use crate::log::record::encode_log_header;
    use crate::types::Lsn;

    /// A frozen layer of 2,000 keys (100-byte values, batches of 4, keys
    /// out of order) whose log is kept in memory (`budget` bytes).
    pub(in crate::layer::inmemory) fn frozen(
        sim: &SimStorage,
        stats: &IoStats,
        budget: u64,
    ) -> InMemoryLayer {
        frozen_with(sim, stats, budget, |n| n.wrapping_mul(0x9e37_79b9))
    }

    /// [`frozen`] with the `n`th key put named by `key(n)`.
    fn frozen_with(
        sim: &SimStorage,
        stats: &IoStats,
        budget: u64,
        key: impl Fn(u32) -> u32,
    ) -> InMemoryLayer {
        let opts = FileOptions {
            mode: IoMode::Buffered,
            class: FileClass::Log,
            ..FileOptions::default()
        };
        let file = sim
            .create(std::path::Path::new("/1.log"), &opts, stats)
            .expect("create");
        let mut writer = BufferedWriter::with_shared(file, 1 << 16, 0).expect("writer");
        let header = encode_log_header(1, None);
        writer.write(&header).expect("header");
        let memory = LogMemory::new(&LogMemoryBudget::new(budget), &header);
        let layer = InMemoryLayer::new_open(1, writer, 1 << 30, 1 << 30, stats, memory);
        for b in 0..500u32 {
            let mut batch = WriteBatch::new();
            for i in 0..4 {
                let k = key(b * 4 + i);
                batch.put(format!("k{k:08x}"), vec![(k % 251) as u8; 100]);
            }
            layer.append(&batch, Lsn::from(b + 1)).expect("append");
        }
        layer.freeze().expect("freeze");
        layer
    }

    /// A version as the flush hands it on: key, LSN, value.
    type Version = (Vec<u8>, Lsn, Vec<u8>);

    fn copied(layer: &InMemoryLayer) -> Result<Vec<Version>> {
        let mut out = Vec::new();
        layer.for_each_value(1 << 20, &|| 1 << 20, usize::MAX, |k, v, value| {
            out.push((k.to_vec(), v.lsn, value.to_vec()));
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn memory_that_fails_its_check_is_dropped_and_the_next_try_reads_the_file() {
        let (sim, stats) = (SimStorage::new(8), IoStats::new());
        let reads = |stats: &IoStats| {
            stats
                .snapshot()
                .bytes(FileClass::Log, crate::io::OpKind::Read)
        };
        // The same layer without memory: what the file gives.
        let from_file = copied(&frozen(&sim, &stats, 0)).expect("from the file");
        assert_eq!(from_file.len(), 2000);
        assert!(reads(&stats) > 0);
        let (sim, stats) = (SimStorage::new(8), IoStats::new());
        let layer = frozen(&sim, &stats, 64 << 20);
        assert!(copied(&layer).expect("from memory") == from_file);
        assert_eq!(reads(&stats), 0, "a log held in memory was read");
        // Memory that rots (in a value, in the middle of the log): the
        // copy fails, the memory goes, and the next try reads the file.
        let middle = layer.size_bytes() / 2;
        // SAFETY: nothing else reads the layer meanwhile.
        unsafe { layer.memory.as_ref().expect("held").rot(middle) };
        let err = copied(&layer).expect_err("rotted memory");
        assert!(err.is_corruption(), "{err}");
        assert!(layer.memory.as_ref().expect("kept").is_released());
        assert_eq!(stats.snapshot().read_retries(FileClass::Log), 1);
        assert!(copied(&layer).expect("from the file") == from_file);
        assert!(reads(&stats) > 0);
    }

    /// Keys in log order: an entry's own crc32c is not computed when its
    /// record passed the check, which runs a piece ahead of the entries.
    /// Memory that rots anywhere (the first record's header, a value in
    /// the middle, the last byte) fails the copy, and no version handed on
    /// before the failure differs from the file's.
    #[test]
    fn keys_in_log_order_are_handed_on_only_once_their_records_passed() {
        let (sim, stats) = (SimStorage::new(8), IoStats::new());
        let from_file = copied(&frozen_with(&sim, &stats, 0, |n| n)).expect("from the file");
        assert_eq!(from_file.len(), 2000);
        let header = crate::log::record::LOG_HEADER_BYTES as u64;
        let ends = |layer: &InMemoryLayer| [header, layer.size_bytes() / 2, layer.size_bytes() - 1];
        for i in 0..3 {
            let (sim, stats) = (SimStorage::new(8), IoStats::new());
            let layer = frozen_with(&sim, &stats, 64 << 20, |n| n);
            if i == 0 {
                assert!(copied(&layer).expect("from memory") == from_file);
                assert_eq!(stats.snapshot().read_retries(FileClass::Log), 0);
            }
            let at = ends(&layer)[i];
            // SAFETY: nothing else reads the layer meanwhile.
            unsafe { layer.memory.as_ref().expect("held").rot(at) };
            let mut handed = Vec::new();
            let err = layer
                .for_each_value(1 << 20, &|| 1 << 20, usize::MAX, |k, v, value| {
                    handed.push((k.to_vec(), v.lsn, value.to_vec()));
                    Ok(())
                })
                .expect_err("rotted memory");
            assert!(err.is_corruption(), "byte {at}: {err}");
            assert!(handed.len() < from_file.len(), "byte {at}: all handed on");
            assert!(
                handed[..] == from_file[..handed.len()],
                "byte {at}: a rotted version went on"
            );
            assert!(copied(&layer).expect("from the file") == from_file);
        }
    }
}
