//! `LayerFile`: a finished layer file read through the io layer, and the
//! io layer's buffered writer as a layer file's sink.
//!
//! A layer file's reads and their checks go through the storage's policy
//! for bytes that fail their check (`io::read_verified`): counted into the
//! database's `IoStats`, the file's cached copies forgotten, read once more.

use crate::error::Result;
use crate::io::{read_verified, BufferedWriter, IoStats, StorageFile};
use crate::layer::delta::{LayerSink, ReadAt};
use std::path::Path;
use std::sync::Arc;

/// A finished layer file read through the io layer: exact length, any
/// offset (the io layer widens O_DIRECT reads to the alignment).
pub(crate) struct LayerFile {
    pub(crate) file: Arc<dyn StorageFile>,
    pub(crate) len: u64,
    /// Where a read made again after a failed check is counted (the
    /// statistics the file was opened with).
    pub(crate) stats: IoStats,
}

impl ReadAt for LayerFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.file.read_range(offset, len)
    }
    fn read_shared(&self, offset: u64, len: usize, frame: Option<Arc<[u8]>>) -> Result<Arc<[u8]>> {
        self.file.read_range_shared(offset, len, frame)
    }
    fn file_len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        self.file.path()
    }
    fn read_verified<T>(
        &self,
        offset: u64,
        len: u64,
        attempt: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        read_verified(&*self.file, &self.stats, offset, len, attempt)
    }
}

impl LayerSink for BufferedWriter<dyn StorageFile> {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.write(bytes)
    }
}

/// A whole layer file's bytes in memory (what an upload is about to send),
/// read as a layer: every check the reader makes applies to these bytes,
/// not to another reading of the file. The bytes are in parts (as the
/// upload sends them) of `part_bytes` each, the last one shorter or equal.
pub(crate) struct LayerBytes {
    pub(crate) path: std::path::PathBuf,
    pub(crate) parts: Vec<Arc<dyn AsRef<[u8]> + Send + Sync>>,
    pub(crate) part_bytes: usize,
}

impl LayerBytes {
    fn len(&self) -> u64 {
        self.parts.iter().map(|p| (**p).as_ref().len() as u64).sum()
    }
}

/// The `len` bytes at `offset` of bytes held in parts of `part_bytes`
/// each (`part(i)`: part i, the last shorter or equal), copied out; `None`
/// when a part they lie in is missing or too short.
pub(crate) fn read_from_parts<'a>(
    part: impl Fn(usize) -> Option<&'a [u8]>,
    part_bytes: usize,
    offset: u64,
    len: usize,
) -> Option<Vec<u8>> {
    let part_bytes = part_bytes.max(1) as u64;
    let mut out = Vec::with_capacity(len);
    let mut at = offset;
    while out.len() < len {
        let i = usize::try_from(at / part_bytes).ok()?;
        let part = part(i)?;
        let from = (at % part_bytes) as usize;
        let take = (len - out.len()).min(part.len().saturating_sub(from));
        if take == 0 {
            return None;
        }
        out.extend_from_slice(&part[from..from + take]);
        at += take as u64;
    }
    Some(out)
}

impl ReadAt for LayerBytes {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let part = |i: usize| self.parts.get(i).map(|p| (**p).as_ref());
        read_from_parts(part, self.part_bytes, offset, len).ok_or_else(|| {
            crate::error::Corruption::new(
                &self.path,
                offset,
                format!("a read of {len} bytes past the end of {} bytes", self.len()),
            )
            .into()
        })
    }
    fn file_len(&self) -> u64 {
        self.len()
    }
    fn path(&self) -> &Path {
        &self.path
    }
}
