//! Read-only inspection of a database's files, for `strata inspect` (as
//! RocksDB's `sst_dump` and `ldb manifest_dump`): what a manifest records,
//! record by record; what a layer file holds; and a verification that reads
//! every block of a layer file and checks every checksum, and the values
//! its pointers point at in value files.
//!
//! Nothing here writes, locks or repairs: it may run beside an open
//! database (the files it reads are immutable, or, for the manifest,
//! appended to). Every error is the engine's own: corruption names the file
//! and the offset.

use crate::codec::u32_at;
use crate::error::Result;
use crate::io::{
    EntryKind, FileClass, FileOptions, IoMode, IoStats, OsStorage, Storage, StorageFile,
};
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::file::LayerFile;
use crate::manifest::{self, Level, MANIFEST_NAME};
use crate::types::{Lsn, ValueKind};
use crate::value::{ValueFile, ValuePointer};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

/// A layer file as the manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerInfo {
    pub id: u64,
    /// The file's name in the database directory.
    pub file: String,
    /// "L0", "L1" or "image".
    pub level: &'static str,
    pub key_min: Vec<u8>,
    pub key_max: Vec<u8>,
    /// L0: its entries' LSNs; L1: its run's; image: the image's LSN.
    pub lsn_min: Lsn,
    pub lsn_max: Lsn,
    pub entries: u64,
    pub bytes: u64,
    /// An image's cover: the keys it answers for, from the first bound to
    /// the second.
    pub cover: Option<KeyBounds>,
    /// The value files its pointers point into: (file id, bytes of the
    /// entries pointed at).
    pub values: Vec<(u64, u64)>,
}

/// A value file (a log kept for the large values layers point into), as
/// the manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueFileInfo {
    pub id: u64,
    /// The file's name in the database directory.
    pub file: String,
    pub bytes: u64,
    /// Bytes the layers' pointers hold (an entry an image and a delta both
    /// point at counts twice); the rest of the file is garbage.
    pub live_bytes: u64,
}

/// One entry of a layer file, as `scan_layer_file` hands it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryValue<'a> {
    Put(&'a [u8]),
    Delete,
    /// The value lies in value file `file_id`, in the log entry at
    /// `offset`, whose crc32c is `crc`; with `out_of_line`, `offset` is the
    /// value's own, in its record's value run (log format 4).
    Pointer {
        file_id: u64,
        offset: u64,
        value_len: u32,
        crc: u32,
        out_of_line: bool,
    },
}

/// A key range as its two bounds.
pub type KeyBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What a manifest file says.
#[derive(Debug, Clone)]
pub struct ManifestInfo {
    /// 1 (ids only), 2 (the edit log), 3 (the edit log, with image
    /// covers and the GC cutoff), 4 (each record on a page of its own, a
    /// seal at close) or 5 (value files).
    pub format_version: u32,
    /// Reads below this LSN are refused: GC removed history below it.
    pub gc_lsn: Lsn,
    pub next_file_id: u64,
    /// Logs of in-memory layers not flushed, oldest first.
    pub logs: Vec<u64>,
    /// Layer files, as listed (L0 in LSN order).
    pub layers: Vec<LayerInfo>,
    /// Value files (format 5), by id.
    pub value_files: Vec<ValueFileInfo>,
    /// Every record: its offset and what it says.
    pub records: Vec<(u64, String)>,
    /// Where a torn last append was dropped, if one was.
    pub torn_at: Option<u64>,
}

/// What a layer file holds, from its footer and index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerFileInfo {
    pub bytes: u64,
    pub entries: u64,
    pub distinct_keys: u64,
    pub blocks: u64,
    pub key_min: Vec<u8>,
    pub key_max: Vec<u8>,
    pub lsn_min: Lsn,
    pub lsn_max: Lsn,
    /// Memory its block index and bloom filter take when open.
    pub index_and_bloom_bytes: usize,
}

/// `path` opened read-only through the storage seam (the operating
/// system's files, buffered), and its length.
fn open_file(path: &Path, class: FileClass) -> Result<(Arc<dyn StorageFile>, u64)> {
    let opts = FileOptions {
        mode: IoMode::Buffered,
        class,
        ..FileOptions::default()
    };
    let file = OsStorage.open(path, &opts, &IoStats::new())?;
    let len = file.len()?;
    Ok((file, len))
}

fn open_layer(path: &Path) -> Result<DeltaLayerReader<LayerFile>> {
    let (file, len) = open_file(path, FileClass::Delta)?;
    DeltaLayerReader::open(LayerFile {
        file,
        len,
        stats: IoStats::new(),
    })
}

/// The manifest file at `path` (a `MANIFEST`, or a database directory).
pub fn manifest(path: &Path) -> Result<ManifestInfo> {
    let path = if OsStorage.entry_kind(path)? == Some(EntryKind::Dir) {
        path.join(MANIFEST_NAME)
    } else {
        path.to_owned()
    };
    let (file, len) = open_file(&path, FileClass::Manifest)?;
    let bytes = file.read_range(0, usize::try_from(len).unwrap_or(usize::MAX))?;
    let loaded = manifest::decode(&path, &bytes)?;
    // Decoded: the file holds a whole header.
    let format_version = u32_at(&bytes, manifest::VERSION_OFFSET).unwrap_or(0);
    let layers = loaded
        .state
        .layers
        .iter()
        .map(|d| LayerInfo {
            id: d.id,
            file: manifest::delta_name(d.id),
            level: match d.level {
                Level::L0 => "L0",
                Level::L1 => "L1",
                Level::Image => "image",
            },
            key_min: d.key_min.clone(),
            key_max: d.key_max.clone(),
            lsn_min: d.lsn_min,
            lsn_max: d.lsn_max,
            entries: d.entries,
            bytes: d.bytes,
            cover: d.cover.clone().map(|c| (c.start, c.end)),
            values: d.values.clone(),
        })
        .chain(loaded.v1_deltas.iter().map(|&id| LayerInfo {
            id,
            file: manifest::delta_name(id),
            level: "L0",
            key_min: Vec::new(),
            key_max: Vec::new(),
            lsn_min: 0,
            lsn_max: 0,
            entries: 0,
            bytes: 0,
            cover: None,
            values: Vec::new(),
        }))
        .collect();
    let live = loaded.state.value_live_bytes();
    let value_files = loaded
        .state
        .value_files
        .iter()
        .map(|(&id, &bytes)| ValueFileInfo {
            id,
            file: manifest::log_name(id),
            bytes,
            live_bytes: live.get(&id).copied().unwrap_or(0),
        })
        .collect();
    Ok(ManifestInfo {
        format_version,
        gc_lsn: loaded.state.gc_lsn,
        next_file_id: loaded.state.next_file_id,
        logs: loaded.state.logs,
        layers,
        value_files,
        records: loaded.record_log,
        torn_at: loaded.torn_at,
    })
}

/// The layer file at `path`: its footer, checked, and its index.
pub fn layer_file(path: &Path) -> Result<LayerFileInfo> {
    let reader = open_layer(path)?;
    let s = reader.summary();
    Ok(LayerFileInfo {
        bytes: s.file_bytes,
        entries: s.entries,
        distinct_keys: s.distinct_keys,
        blocks: s.blocks,
        key_min: s.key_min.clone(),
        key_max: s.key_max.clone(),
        lsn_min: s.lsn_min,
        lsn_max: s.lsn_max,
        index_and_bloom_bytes: reader.index_memory_bytes(),
    })
}

/// Reads every block of the layer file at `path`, checking every checksum
/// and the order of its entries, and calls `each` with every entry (key,
/// LSN, what it holds). Returns the entries read; the first error names
/// the file and the offset.
pub fn scan_layer_file(
    path: &Path,
    each: impl FnMut(&[u8], Lsn, EntryValue<'_>) -> Result<()>,
) -> Result<u64> {
    scan_layer(open_layer(path)?, path, each)
}

/// Checks `bytes` as a whole layer file (`path` names it in errors): the
/// footer, index and filter, every block's checksum and the order and
/// count of its entries, as [`scan_layer_file`] does, on these very bytes.
/// The bytes are in `parts` of `part_bytes` each (the last shorter or
/// equal), as an upload reads and sends them.
pub(crate) fn verify_layer_bytes(
    path: &Path,
    parts: Vec<Arc<dyn AsRef<[u8]> + Send + Sync>>,
    part_bytes: usize,
) -> Result<u64> {
    verify_layer(
        path,
        crate::layer::file::LayerBytes {
            path: path.to_owned(),
            parts,
            part_bytes,
        },
    )
}

/// [`verify_layer_bytes`] of the bytes `file` reads (e.g. a layer's parts
/// as an upload reads them, `remote::layer_stream`).
/// Every block is read and checked and every entry stepped over and
/// checked, none copied out (an upload's check: its CPU is taken from the
/// server's on a small machine).
pub(crate) fn verify_layer<R: crate::layer::delta::ReadAt>(path: &Path, file: R) -> Result<u64> {
    let reader = Arc::new(DeltaLayerReader::open(file)?);
    let n = reader
        .range_owned(Bound::Unbounded, Bound::Unbounded)?
        .with_readahead(1 << 20)
        .check_rest()?;
    entries_counted(path, reader.summary().entries, n)
}

/// `Ok(n)` when the footer counts the `n` entries a scan found.
fn entries_counted(path: &Path, footer: u64, n: u64) -> Result<u64> {
    if n != footer {
        return Err(crate::error::Corruption::new(
            path,
            0,
            format!("the footer counts {footer} entries, the blocks hold {n}"),
        )
        .into());
    }
    Ok(n)
}

fn scan_layer<R: crate::layer::delta::ReadAt>(
    reader: DeltaLayerReader<R>,
    path: &Path,
    mut each: impl FnMut(&[u8], Lsn, EntryValue<'_>) -> Result<()>,
) -> Result<u64> {
    let reader = Arc::new(reader);
    let mut n = 0;
    for entry in reader
        .range_owned(Bound::Unbounded, Bound::Unbounded)?
        .with_readahead(1 << 20)
    {
        let (key, lsn, kind, value) = entry?;
        let entry = match kind {
            ValueKind::Put => EntryValue::Put(&value),
            ValueKind::Delete => EntryValue::Delete,
            ValueKind::Pointer => {
                // The reader checked its length: a pointer decodes.
                let p = ValuePointer::decode(&value).ok_or_else(|| {
                    crate::error::Corruption::new(path, 0, "a value pointer that does not decode")
                })?;
                EntryValue::Pointer {
                    file_id: p.file_id,
                    offset: p.offset,
                    value_len: p.value_len,
                    crc: p.crc,
                    out_of_line: p.out_of_line,
                }
            }
        };
        each(&key, lsn, entry)?;
        n += 1;
    }
    entries_counted(path, reader.summary().entries, n)
}

/// [`scan_layer_file`] of the layer file at `path` in the database
/// directory `dir`, which also reads and checks every value its pointers
/// point at (each entry's checksum, key and length, against the pointer)
/// in the value files `value_files` lists; returns the entries and the
/// values checked so.
pub fn verify_layer_values(
    dir: &Path,
    path: &Path,
    value_files: &[ValueFileInfo],
) -> Result<(u64, u64)> {
    let mut open: std::collections::BTreeMap<u64, ValueFile> = Default::default();
    let mut checked = 0;
    let entries = scan_layer_file(path, |key, _, entry| {
        let EntryValue::Pointer {
            file_id,
            offset,
            value_len,
            crc,
            out_of_line,
        } = entry
        else {
            return Ok(());
        };
        let Some(info) = value_files.iter().find(|v| v.id == file_id) else {
            return Err(crate::error::Corruption::new(
                dir.join(manifest::log_name(file_id)),
                offset,
                "a pointer into a value file the manifest does not list",
            )
            .into());
        };
        let file = match open.entry(file_id) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let (file, _) = open_file(&dir.join(&info.file), FileClass::Log)?;
                v.insert(ValueFile::new(
                    file_id,
                    info.bytes,
                    file,
                    IoStats::new(),
                    Arc::new(OsStorage),
                ))
            }
        };
        let p = ValuePointer {
            file_id,
            offset,
            value_len,
            crc,
            out_of_line,
        };
        file.read(key, &p)?;
        checked += 1;
        Ok(())
    })?;
    Ok((entries, checked))
}
