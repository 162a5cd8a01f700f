//! A layer file's bytes as the uploader reads them, checked as a whole
//! layer on a helper thread while its parts are sent, so that an upload
//! holds a few parts of a layer rather than all of them.
//!
//! What it owns: the parts read so far that the check has not passed, the
//! check's result once it has one. The uploader reads the header's part
//! and the tail first (the footer, block index, filter and key range: what
//! opening a layer reads), then every other part in order, handing each
//! here as it hands it to the store; the check opens the layer on these
//! bytes and scans every block, waiting for a part it needs.
//!
//! Invariants: the bytes checked are the bytes sent (one reading of the
//! file: a part is read once and shared); a part before the tail is let go
//! once the scan reads past it, the tail stays to the end; at most
//! [`PARTS_AHEAD_MAX`] parts before the tail wait for the scan (the
//! uploader waits for room), unless the check has ended or waits itself
//! for a part (one read of the scan, at most 1 MiB, may span more); a
//! closed stream (the upload stopped) makes every wait end.

use crate::error::{Corruption, Error, Result};
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::delta::{ReadAt, FOOTER_BYTES_MAX};
use crate::layer::file::read_from_parts;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// One part's bytes, shared with the store's put.
pub(crate) type Part = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Parts before the tail that may wait for the scan.
pub(crate) const PARTS_AHEAD_MAX: usize = 3;

/// A layer file's parts between the uploader and the check.
pub(crate) struct LayerStream {
    path: PathBuf,
    len: u64,
    part_bytes: usize,
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    parts: BTreeMap<usize, Part>,
    /// Parts from this one on are the tail's: never let go.
    tail_first: usize,
    /// The check's result, once it has one.
    checked: Option<Result<u64>>,
    /// The upload stopped: nothing more comes.
    closed: bool,
    /// The check waits for a part not handed over yet (a read may span
    /// more parts than may wait: the uploader then does not wait for room).
    starved: bool,
}

impl LayerStream {
    /// The stream of the `len` bytes of the layer file at `path`, in
    /// parts of `part_bytes` (the last shorter or equal).
    pub(crate) fn new(path: &Path, len: u64, part_bytes: usize) -> LayerStream {
        LayerStream {
            path: path.to_owned(),
            len,
            part_bytes: part_bytes.max(1),
            state: Mutex::new(State {
                parts: BTreeMap::new(),
                tail_first: usize::MAX,
                checked: None,
                closed: false,
                starved: false,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(guard).unwrap_or_else(|p| p.into_inner())
    }

    /// The number of the part that holds byte `offset`.
    fn part_of(&self, offset: u64) -> usize {
        usize::try_from(offset / self.part_bytes as u64).unwrap_or(usize::MAX)
    }

    /// Parts from `first` on are the tail (read first, kept to the end).
    fn set_tail(&self, first: usize) {
        self.lock().tail_first = first;
        self.changed.notify_all();
    }

    /// Reads ahead, through `read` (a part's number → its bytes), what
    /// opening the layer reads: the header's part, the footer's, and those
    /// of the block index, filter and key range before it (the footer says
    /// where they start); hands them over and marks the tail, so that the
    /// check can start (its reads wait for the tail). Returns them by
    /// number, for their turn to be sent; a part handed over before (the
    /// first, sent while the tail is read) is not read again.
    pub(crate) fn start(
        &self,
        read: &mut dyn FnMut(usize) -> Result<Part>,
    ) -> Result<BTreeMap<usize, Part>> {
        let mut pre = BTreeMap::new();
        let mut ahead = |i: usize, pre: &mut BTreeMap<usize, Part>| -> Result<()> {
            if self.lock().parts.contains_key(&i) {
                return Ok(());
            }
            if let std::collections::btree_map::Entry::Vacant(slot) = pre.entry(i) {
                let part = read(i)?;
                self.give(i, Arc::clone(&part), false)?;
                slot.insert(part);
            }
            Ok(())
        };
        let footer_first = self.part_of(self.len.saturating_sub(FOOTER_BYTES_MAX as u64));
        let last = self.part_of(self.len.saturating_sub(1));
        for i in std::iter::once(0).chain(footer_first..=last) {
            ahead(i, &mut pre)?;
        }
        let index = DeltaLayerReader::sections_offset(&self.peek())?;
        let tail_first = self.part_of(index).min(footer_first);
        for i in tail_first..footer_first {
            ahead(i, &mut pre)?;
        }
        self.set_tail(tail_first);
        Ok(pre)
    }

    /// Hands part `i` over. With `wait`, first waits while
    /// [`PARTS_AHEAD_MAX`] parts before the tail wait for the scan; a
    /// check that ended with an error is returned instead.
    pub(crate) fn give(&self, i: usize, part: Part, wait: bool) -> Result<()> {
        let mut s = self.lock();
        loop {
            if matches!(s.checked, Some(Err(_))) {
                // The upload stops with the check's error (taken: no one
                // asks again).
                return s.checked.take().map_or(Ok(()), |r| r.map(|_| ()));
            }
            let ahead = s.parts.range(..s.tail_first).count();
            if !wait || ahead < PARTS_AHEAD_MAX || s.checked.is_some() || s.closed || s.starved {
                break;
            }
            s = self.wait(s);
        }
        s.parts.insert(i, part);
        self.changed.notify_all();
        Ok(())
    }

    /// Nothing more comes (the upload stopped, or ended): waits end.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// A guard that closes the stream when dropped, however the upload
    /// ends.
    pub(crate) fn closing(&self) -> Closing<'_> {
        Closing(self)
    }

    /// The check's end: its result.
    pub(crate) fn finish(&self, result: Result<u64>) {
        self.lock().checked = Some(result);
        self.changed.notify_all();
    }

    /// Waits for the check's result (taken: asked once, after every part
    /// was handed over).
    pub(crate) fn checked(&self) -> Result<u64> {
        let mut s = self.lock();
        loop {
            if let Some(result) = s.checked.take() {
                return result;
            }
            if s.closed {
                return Err(Error::Closed);
            }
            s = self.wait(s);
        }
    }

    /// A view for the check: its reads wait for the parts they need.
    pub(crate) fn reader(&self) -> StreamReader<'_> {
        StreamReader {
            stream: self,
            wait: true,
        }
    }

    /// A view that does not wait: a read of a part not handed over yet is
    /// an error (for the look at the footer before the check starts).
    fn peek(&self) -> StreamReader<'_> {
        StreamReader {
            stream: self,
            wait: false,
        }
    }

    fn read(&self, offset: u64, len: usize, wait: bool) -> Result<Vec<u8>> {
        let end = offset.checked_add(len as u64).filter(|&e| e <= self.len);
        let Some(end) = end else {
            return Err(Corruption::new(
                &self.path,
                offset,
                format!("a read of {len} bytes past the end of {} bytes", self.len),
            )
            .into());
        };
        let (first, last) = (self.part_of(offset), self.part_of(end.saturating_sub(1)));
        let mut s = self.lock();
        // The check reads once `start` has marked the tail: which parts it
        // may let go depends on it.
        while wait && s.tail_first == usize::MAX && !s.closed {
            s = self.wait(s);
        }
        let tail_first = s.tail_first;
        if wait && first < tail_first {
            // The scan reads the data blocks in order: a read that starts
            // before the tail has passed every part before its own (the
            // open's reads, of the header and the tail, pass none).
            let passed: Vec<usize> = s.parts.range(..first).map(|(&i, _)| i).collect();
            if !passed.is_empty() {
                for i in passed {
                    s.parts.remove(&i);
                }
                self.changed.notify_all();
            }
        }
        loop {
            if (first..=last).all(|i| s.parts.contains_key(&i)) {
                break;
            }
            if !wait || s.closed {
                s.starved = false;
                return Err(Error::Closed);
            }
            s.starved = true;
            self.changed.notify_all();
            s = self.wait(s);
        }
        s.starved = false;
        let part = |i: usize| s.parts.get(&i).map(|p| (**p).as_ref());
        read_from_parts(part, self.part_bytes, offset, len).ok_or_else(|| {
            Corruption::new(&self.path, offset, "a part shorter than its place").into()
        })
    }
}

/// Closes its stream when dropped ([`LayerStream::closing`]).
pub(crate) struct Closing<'a>(&'a LayerStream);

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// [`LayerStream`]'s bytes as a file a layer reader reads.
pub(crate) struct StreamReader<'a> {
    stream: &'a LayerStream,
    wait: bool,
}

impl ReadAt for StreamReader<'_> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.stream.read(offset, len, self.wait)
    }
    fn file_len(&self) -> u64 {
        self.stream.len
    }
    fn path(&self) -> &Path {
        &self.stream.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options, WriteBatch, WriteOptions};

    /// A flushed layer file's path and bytes (about 1 MiB).
    fn layer() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        let db = Db::open(
            &dir,
            Options {
                background_flush: false,
                ..Options::default()
            },
        )
        .unwrap();
        let mut b = WriteBatch::new();
        for i in 0..3000u32 {
            b.put(format!("key-{i:06}"), vec![(i % 251) as u8; 300]);
        }
        db.write(&b, WriteOptions::default()).unwrap();
        db.flush().unwrap();
        drop(db);
        let path = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "delta"))
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        (tmp, path, bytes)
    }

    /// Streams `bytes` in parts of `part_bytes` to a check on a thread of
    /// its own, as the uploader does: the check's result, and the most
    /// parts before the tail the stream held at once.
    fn stream(path: &Path, bytes: &[u8], part_bytes: usize) -> (Result<u64>, usize) {
        let stream = LayerStream::new(path, bytes.len() as u64, part_bytes);
        let part = |i: usize| -> Part {
            let at = i * part_bytes;
            Arc::new(bytes[at..(at + part_bytes).min(bytes.len())].to_vec())
        };
        let parts = bytes.len().div_ceil(part_bytes);
        std::thread::scope(|scope| {
            let _closing = stream.closing();
            // The check waits for the tail; the first part goes before it
            // is read.
            scope.spawn(|| stream.finish(crate::inspect::verify_layer(path, stream.reader())));
            if let Err(e) = stream.give(0, part(0), true) {
                return (Err(e), 0);
            }
            let pre = match stream.start(&mut |i| Ok(part(i))) {
                Ok(pre) => pre,
                Err(e) => return (Err(e), 0),
            };
            let mut most = 0;
            for i in 1..parts {
                if !pre.contains_key(&i) {
                    if let Err(e) = stream.give(i, part(i), true) {
                        return (Err(e), most);
                    }
                }
                let s = stream.lock();
                most = most.max(s.parts.range(..s.tail_first).count());
            }
            (stream.checked(), most)
        })
    }

    #[test]
    fn a_layer_streamed_in_many_parts_is_checked_holding_a_few() {
        let (_tmp, path, bytes) = layer();
        assert!(bytes.len() > 512 << 10, "{} bytes", bytes.len());
        for part_bytes in [4096, 64 << 10, 300_000] {
            let (checked, most) = stream(&path, &bytes, part_bytes);
            assert_eq!(checked.unwrap(), 3000, "parts of {part_bytes}");
            // A few, and those one read of the scan (1 MiB) spans.
            let bound = PARTS_AHEAD_MAX + (1usize << 20).div_ceil(part_bytes) + 1;
            assert!(most <= bound, "{most} parts held (parts of {part_bytes})");
        }
    }

    #[test]
    fn a_flipped_byte_in_any_part_fails_the_check_naming_the_file() {
        let (_tmp, path, bytes) = layer();
        let part_bytes = 64 << 10;
        // In the header's part, in the middle, in the last data part, in
        // the tail: each refused, and no side waits forever.
        for at in [
            100,
            bytes.len() / 2,
            bytes.len() - (200 << 10),
            bytes.len() - 10,
        ] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let (checked, _) = stream(&path, &bad, part_bytes);
            let e = checked.expect_err(&format!("a flip at {at} passed"));
            assert!(
                matches!(e, Error::Corruption(_)) && e.to_string().contains(path.to_str().unwrap()),
                "flip at {at}: {e}"
            );
        }
    }
}
