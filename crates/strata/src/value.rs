//! Values that stay where they were written: the pointer a layer file holds
//! for a large value, and the value file it points into.
//!
//! A put whose value is at least `Options::large_value_bytes` long is
//! written once, into the log, as every put is. When the log's layer is
//! flushed, the delta layer gets the key, the LSN and a [`ValuePointer`]
//! (entry kind `ValueKind::Pointer`) instead of the value, and the log
//! stays on disk as a *value file*, listed in the manifest's state with its
//! length; compaction and images move pointers, not bytes. A value file is
//! the log as it was sealed: same name, same bytes, never written again.
//!
//! What it owns: the pointer's encoding (format in `docs/format.md`,
//! "Value pointer"), and [`ValueFile`], a value file open for reads, whose
//! file is deleted once a durable edit unlisted it and its last holder let
//! it go (as a layer file's, `table_cache::Layer`).
//!
//! Invariants: a pointer names the log entry of its value (file, offset of
//! the entry, value length) and carries the entry's crc32c as the write
//! path computed it in memory, so a read checks the bytes it gets against
//! the pointer, not only against themselves: the entry's own crc32c, its
//! kind, lengths and key, and that crc32c equals the pointer's. A pointer
//! to an out-of-line value (log format 4: a value of whole pages, in its
//! record's value run) names the value itself, which is read alone (a 4
//! KiB value on a page: one page) and checked against the pointer's
//! crc32c with the entry's header and key rebuilt from what the reader
//! knows (`batch::check_out_of_line`). A value
//! that fails is read once more (`io::read_verified`); a second failure is
//! a `Corruption` naming the value file and the entry's offset. A pointer
//! into a file the version does not hold, or past its end, is corruption
//! naming the file, never a wrong value.

use crate::batch::{check_entry, check_out_of_line, ENTRY_CRC_OFFSET, ENTRY_HEADER_BYTES};
use crate::codec::{put_u32, put_u64, u32_at, Decoder};
use crate::error::{Corruption, Result};
use crate::io::{read_range_with, read_verified, IoStats, Storage, StorageFile};
use crate::types::ValueKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bytes of an encoded pointer: `file id u64 | entry offset u64 | value
/// length u32 | entry crc32c u32`.
pub(crate) const POINTER_BYTES: usize = 24;

/// The bit of a pointer's offset field that says the value is out of line:
/// the offset is the value's, not its entry's (no file is 2^63 bytes long).
const POINTER_OUT_OF_LINE: u64 = 1 << 63;

/// Where a large value lies: the log entry that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValuePointer {
    /// The value file (the log's file id).
    pub file_id: u64,
    /// Offset of the entry (its header) in the file; of the value itself
    /// when it is out of line.
    pub offset: u64,
    /// Length of the value.
    pub value_len: u32,
    /// The entry's crc32c, as written.
    pub crc: u32,
    /// The value lies out of line, in its record's value run.
    pub out_of_line: bool,
}

impl ValuePointer {
    pub(crate) fn encode(&self) -> [u8; POINTER_BYTES] {
        let mut out = Vec::with_capacity(POINTER_BYTES);
        put_u64(&mut out, self.file_id);
        let flag = if self.out_of_line {
            POINTER_OUT_OF_LINE
        } else {
            0
        };
        put_u64(&mut out, self.offset | flag);
        put_u32(&mut out, self.value_len);
        put_u32(&mut out, self.crc);
        out.try_into().expect("pointer length")
    }

    /// The pointer in `bytes` (an entry's value), or `None` when they are
    /// not one.
    pub(crate) fn decode(bytes: &[u8]) -> Option<ValuePointer> {
        if bytes.len() != POINTER_BYTES {
            return None;
        }
        let mut d = Decoder::new(bytes);
        let file_id = d.u64().ok()?;
        let offset = d.u64().ok()?;
        Some(ValuePointer {
            file_id,
            offset: offset & !POINTER_OUT_OF_LINE,
            value_len: d.u32().ok()?,
            crc: d.u32().ok()?,
            out_of_line: offset & POINTER_OUT_OF_LINE != 0,
        })
    }

    /// Bytes a read of the value takes from `offset`: its entry (header,
    /// key, value), or the value alone when it is out of line.
    pub(crate) fn read_bytes(&self, key_len: usize) -> u64 {
        match self.out_of_line {
            true => u64::from(self.value_len),
            false => self.entry_bytes(key_len),
        }
    }

    /// Bytes of the entry it points at, for a key of `key_len` bytes: what
    /// it holds of its value file (its share of the file's live bytes).
    pub(crate) fn entry_bytes(&self, key_len: usize) -> u64 {
        (ENTRY_HEADER_BYTES + key_len) as u64 + u64::from(self.value_len)
    }
}

/// The bytes of value files that a layer's pointers hold, by file id (a
/// layer descriptor's `values`, summed as its entries are written).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ValueRefs(pub BTreeMap<u64, u64>);

impl ValueRefs {
    /// Counts one pointer of `key`.
    pub(crate) fn add(&mut self, key: &[u8], p: &ValuePointer) {
        *self.0.entry(p.file_id).or_default() += p.entry_bytes(key.len());
    }

    /// Counts the entry of `key` if it is a pointer (`kind`, `value`).
    pub(crate) fn add_entry(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) {
        if kind == ValueKind::Pointer {
            if let Some(p) = ValuePointer::decode(value) {
                self.add(key, &p);
            }
        }
    }

    /// As the descriptor lists them: `(file id, bytes)`, by id.
    pub(crate) fn to_vec(&self) -> Vec<(u64, u64)> {
        self.0.iter().map(|(&id, &b)| (id, b)).collect()
    }
}

/// A value file open for reads.
pub(crate) struct ValueFile {
    pub id: u64,
    /// Bytes of the file (the sealed log's length).
    pub bytes: u64,
    file: Arc<dyn StorageFile>,
    stats: IoStats,
    storage: Arc<dyn Storage>,
    /// Set once a durable edit unlisted it: the file is deleted when the
    /// last holder lets go.
    obsolete: AtomicBool,
}

impl Drop for ValueFile {
    fn drop(&mut self) {
        if *self.obsolete.get_mut() {
            // A failure leaves an unlisted log: the next open proves it
            // superseded (its records are all flushed) and removes it.
            let _ = self.storage.remove_file(self.file.path());
        }
    }
}

impl ValueFile {
    /// The value file of `file` (a sealed log of `bytes` bytes, opened
    /// for reads), deleted through `storage` once obsolete.
    pub(crate) fn new(
        id: u64,
        bytes: u64,
        file: Arc<dyn StorageFile>,
        stats: IoStats,
        storage: Arc<dyn Storage>,
    ) -> ValueFile {
        ValueFile {
            id,
            bytes,
            file,
            stats,
            storage,
            obsolete: AtomicBool::new(false),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }

    /// The file its values are read from.
    pub(crate) fn file(&self) -> &Arc<dyn StorageFile> {
        &self.file
    }

    /// Deletes the file once nothing holds it.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// The value `p` points at under `key`, read (header, key and value in
    /// one read) and checked against the pointer before it is returned.
    pub(crate) fn read(&self, key: &[u8], p: &ValuePointer) -> Result<Vec<u8>> {
        let len = p.read_bytes(key.len());
        read_verified(&*self.file, &self.stats, p.offset, len, || {
            self.read_once(key, p, len)
        })
    }

    fn read_once(&self, key: &[u8], p: &ValuePointer, len: u64) -> Result<Vec<u8>> {
        if p.offset.checked_add(len).is_none_or(|end| end > self.bytes) {
            return Err(Corruption::new(
                self.path(),
                p.offset,
                format!(
                    "a pointer to {len} bytes past the end of the value file ({} bytes)",
                    self.bytes
                ),
            )
            .into());
        }
        // One read of the entry's bytes, checked where the read put it (the
        // thread's bounce buffer, for a direct read); the value alone is
        // copied out.
        read_range_with(&*self.file, p.offset, len as usize, true, |entry| {
            self.check(entry, key, p).map(<[u8]>::to_vec)
        })?
    }

    /// The read of `p`'s entry under `key` to batch with others: the file,
    /// offset and length; `None` for a pointer past the file's end (its
    /// read alone, [`Self::read`], says so).
    pub(crate) fn request(
        &self,
        key: &[u8],
        p: &ValuePointer,
    ) -> Option<crate::io::ReadRequest<'_>> {
        let len = p.read_bytes(key.len());
        let end = p.offset.checked_add(len)?;
        (end <= self.bytes).then_some((&*self.file as &dyn StorageFile, p.offset, len as usize))
    }

    /// The value `p` points at, read alone after a batched read of it
    /// failed its check: counted as a read made again, the cached copies
    /// forgotten first; this reading stands.
    pub(crate) fn read_again(&self, key: &[u8], p: &ValuePointer) -> Result<Vec<u8>> {
        let len = p.read_bytes(key.len());
        self.stats.record_read_retry(self.file.class());
        self.file.forget_cached(p.offset, len);
        self.read_once(key, p, len)
    }

    /// The value in `entry` (the bytes `p` points at, read), once it is
    /// checked against the pointer.
    pub(crate) fn check<'e>(
        &self,
        entry: &'e [u8],
        key: &[u8],
        p: &ValuePointer,
    ) -> Result<&'e [u8]> {
        if p.out_of_line {
            if entry.len() != p.value_len as usize {
                return Err(Corruption::new(self.path(), p.offset, "short read of a value").into());
            }
            return match check_out_of_line(entry, key, p.crc) {
                Ok(()) => Ok(entry),
                Err((_, what, sums)) => {
                    Err(Corruption::of_check(self.path(), p.offset, what, sums).into())
                }
            };
        }
        let value = check_entry(entry, ValueKind::Put, key).map_err(|(at, what, sums)| {
            Corruption::of_check(self.path(), p.offset + at as u64, what, sums)
        })?;
        let stored = u32_at(entry, ENTRY_CRC_OFFSET).unwrap_or(0);
        if stored != p.crc {
            return Err(Corruption::checksum(
                self.path(),
                p.offset + ENTRY_CRC_OFFSET as u64,
                "value entry is not the one its pointer names",
                p.crc,
                stored,
            )
            .into());
        }
        Ok(value)
    }
}

/// The value files of a version, by id.
pub(crate) type ValueFiles = BTreeMap<u64, Arc<ValueFile>>;

/// The value `p` points at under `key`, from the version's value files
/// `files`; a pointer into a file they do not hold is corruption naming it.
pub(crate) fn read_pointed(
    files: &ValueFiles,
    dir: &Path,
    key: &[u8],
    value: &[u8],
) -> Result<Vec<u8>> {
    let p = ValuePointer::decode(value).ok_or_else(|| {
        Corruption::new(
            dir,
            0,
            format!(
                "a value pointer of {} bytes, not {POINTER_BYTES}",
                value.len()
            ),
        )
    })?;
    match files.get(&p.file_id) {
        Some(f) => f.read(key, &p),
        None => Err(Corruption::new(
            value_file_path(dir, p.file_id),
            p.offset,
            "a pointer into a value file the database does not list",
        )
        .into()),
    }
}

/// Where value file `id` lives in `dir` (the log's own name).
pub(crate) fn value_file_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(crate::manifest::log_name(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::io::sim::SimStorage;
    use crate::io::FileOptions;

    /// A value file holding two versions of one key with values of one
    /// length, back to back from offset 0, and the pointers to them.
    fn two_versions() -> (ValueFile, [ValuePointer; 2]) {
        let storage = SimStorage::new(7);
        storage.create_dir_all(Path::new("/db")).unwrap();
        let path = Path::new("/db/0000000000000005.log");
        let file = storage
            .create(
                path,
                &FileOptions {
                    mode: crate::io::IoMode::Buffered,
                    ..FileOptions::default()
                },
                &IoStats::new(),
            )
            .unwrap();
        let mut b = WriteBatch::new();
        b.put(b"key", vec![1u8; 1000]);
        b.put(b"key", vec![2u8; 1000]);
        let entry = (ENTRY_HEADER_BYTES + 3 + 1000) as u64;
        assert_eq!(b.data.len() as u64, 2 * entry);
        let mut bytes = b.data.clone();
        bytes.resize(4096, 0);
        file.write_all_at(&bytes, 0).unwrap();
        let crc = |at: usize| u32_at(&b.data, at + ENTRY_CRC_OFFSET).unwrap();
        let p = |i: u64| ValuePointer {
            file_id: 5,
            offset: i * entry,
            value_len: 1000,
            crc: crc((i * entry) as usize),
            out_of_line: false,
        };
        let pointers = [p(0), p(1)];
        let file = ValueFile::new(5, 2 * entry, file, IoStats::new(), Arc::new(storage));
        (file, pointers)
    }

    #[test]
    fn a_value_is_read_only_from_the_entry_its_pointer_names() {
        let (file, [p0, p1]) = two_versions();
        assert_eq!(file.read(b"key", &p0).unwrap(), vec![1u8; 1000]);
        assert_eq!(file.read(b"key", &p1).unwrap(), vec![2u8; 1000]);
        // The other version of the same key, of the same length, intact:
        // its own checks pass, the pointer's crc32c does not.
        let misdirected = ValuePointer {
            offset: p1.offset,
            ..p0
        };
        let err = file.read(b"key", &misdirected).unwrap_err();
        let text = err.to_string();
        assert!(err.is_corruption(), "{text}");
        assert!(
            text.contains("0000000000000005.log") && text.contains("not the one its pointer names"),
            "{text}"
        );
        // Another key, a length past the file, an offset inside a value.
        assert!(file.read(b"kez", &p0).unwrap_err().is_corruption());
        let long = ValuePointer {
            value_len: 5000,
            ..p1
        };
        assert!(file
            .read(b"key", &long)
            .unwrap_err()
            .to_string()
            .contains("past the end"));
        let inside = ValuePointer { offset: 100, ..p0 };
        assert!(file.read(b"key", &inside).unwrap_err().is_corruption());
    }

    #[test]
    fn a_pointer_round_trips_and_other_lengths_are_not_one() {
        let p = ValuePointer {
            file_id: 7,
            offset: 4096 + 11,
            value_len: 8192,
            crc: 0xdead_beef,
            out_of_line: false,
        };
        assert_eq!(ValuePointer::decode(&p.encode()), Some(p));
        let out = ValuePointer {
            out_of_line: true,
            ..p
        };
        assert_eq!(ValuePointer::decode(&out.encode()), Some(out));
        assert_eq!(
            (out.read_bytes(16), p.read_bytes(16)),
            (8192, 11 + 16 + 8192)
        );
        assert_eq!(ValuePointer::decode(&p.encode()[..23]), None);
        assert_eq!(p.entry_bytes(16), 11 + 16 + 8192);
        let mut refs = ValueRefs::default();
        refs.add_entry(b"k", ValueKind::Pointer, &p.encode());
        refs.add_entry(b"k", ValueKind::Put, &p.encode());
        assert_eq!(refs.to_vec(), vec![(7, 11 + 1 + 8192)]);
    }
}
