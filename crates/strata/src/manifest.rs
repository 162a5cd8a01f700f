//! The manifest: the durable record of what the database holds (the logs of
//! in-memory layers not yet flushed, the layer files with what each covers
//! and the bytes it points at in value files, the value files, the next
//! file id), kept as a log of edits.
//!
//! `MANIFEST` is a header, a snapshot record of the whole state, then one
//! record per edit, each appended and fdatasync'ed before anything acts on
//! it. A new file (a *rollover*: `MANIFEST.tmp` written, fdatasync, renamed
//! over `MANIFEST`, fsync of the directory) starts with a snapshot of the
//! state; one is written at every open, when the file outgrows
//! `ROLLOVER_BYTES_MIN` and four times its snapshot, and after any failed
//! append or sync, so an edit never follows bytes whose fate is unknown.
//!
//! Open reads the manifest, not the layer files: they open when first read
//! (one newest layer at open, whose `lsn_max` picks the next LSN), and a
//! layer's file is checked against its descriptor then. Recovery
//! (db/recovery.rs) removes a file the manifest does not list only when it
//! proves the file superseded.
//!
//! Where the log ends (formats 4 and 5): each record starts on a page boundary
//! (`RECORD_ALIGN_BYTES`), so a page or sector that is lost or decays holds
//! bytes of one record only. A record that runs past the end of the file,
//! or fails its checks and holds a zeroed 512-byte sector, with no whole
//! record after it, is a torn append and is dropped. That is the only
//! record that can be dropped: a bad record before a whole one is
//! corruption, and a close appends a seal after the last edit, so after a
//! clean close nothing can be. The window (the last edit of a database
//! that crashed, decayed before the next edit or close) is closed by
//! recovery's check of the files against the state; see docs/format.md.
//! Any other bad record is corruption, named by file and offset. Older
//! formats are read and rewritten as version 5 at open: version 1 (one
//! whole-file payload, delta ids only), version 2 (an image's files
//! partition the whole key space; no GC cutoff recorded: both are derived,
//! see `upgrade_v2`), version 3 (records back to back, the old torn rule:
//! a zeroed sector may hold several edits) and version 4 (no value
//! files).

use crate::codec::{
    put_u16, put_u32, put_u64, u32_at, write_u32_at, write_u64_at, Decoder, Truncated,
};
use crate::error::{Corruption, Error, Result};
use crate::io::{is_not_found, FileClass, FileOptions, IoMode, IoStats, Storage, StorageFile};
use crate::layer::delta::DeltaLayerSummary;
use crate::types::{Cover, Lsn, KEY_BYTES_MAX};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) const MANIFEST_NAME: &str = "MANIFEST";
pub(crate) const MANIFEST_TMP_NAME: &str = "MANIFEST.tmp";
const MAGIC: [u8; 8] = *b"STRMANIF";
pub(crate) const MANIFEST_FORMAT_VERSION: u32 = 5;
/// Format 4: as 5 without value files (no layer lists value bytes).
pub(crate) const FORMAT_V4: u32 = 4;
/// Records back to back, without end marks (still read).
pub(crate) const FORMAT_V3: u32 = 3;
/// The format before covers and the GC cutoff (still read).
pub(crate) const FORMAT_V2: u32 = 2;
pub(crate) const HEADER_BYTES: usize = 24;
pub(crate) const VERSION_OFFSET: usize = 8;
pub(crate) const PAYLOAD_LEN_OFFSET: usize = VERSION_OFFSET + 4;
pub(crate) const PAYLOAD_CRC_OFFSET: usize = PAYLOAD_LEN_OFFSET + 4;
pub(crate) const HEADER_CRC_OFFSET: usize = PAYLOAD_CRC_OFFSET + 4;
const _: () = assert!(HEADER_CRC_OFFSET + 4 == HEADER_BYTES);
/// Most files a manifest may list.
pub(crate) const MANIFEST_FILES_MAX: usize = 1 << 20;
/// A record's header: `len u32 | data crc u32 | header crc u32`.
pub(crate) const RECORD_HEADER_BYTES: usize = 12;
/// Longest record (a snapshot of `MANIFEST_FILES_MAX` layers with long keys
/// would be longer; such a state is refused when it is written).
pub(crate) const RECORD_BYTES_MAX: usize = 1 << 28;
/// A file shorter than this is never rolled over for its size.
const ROLLOVER_BYTES_MIN: u64 = 1 << 20;
/// The unit a torn write loses whole (a device sector).
const TORN_SECTOR_BYTES: usize = 512;
/// Format 4: every record starts on a multiple of this (the snapshot right
/// after the header), its end mark followed by zeros up to the next one. A
/// page: the unit the page cache writes back, so a lost or decayed page
/// (or sector) holds bytes of one record only, and an append never
/// rewrites a byte an earlier append made durable.
pub(crate) const RECORD_ALIGN_BYTES: usize = 4096;
/// Format 4: the bytes after each record's data, so the record's last
/// sector never reads as zeros when it was written.
pub(crate) const RECORD_END_MAGIC: [u8; 4] = *b"MEND";
const _: () = assert!(RECORD_ALIGN_BYTES.is_multiple_of(TORN_SECTOR_BYTES));
const _: () =
    assert!(HEADER_BYTES + RECORD_HEADER_BYTES + RECORD_END_MAGIC.len() < RECORD_ALIGN_BYTES);

const RECORD_SNAPSHOT: u8 = 1;
const RECORD_ADD_LOG: u8 = 2;
const RECORD_FLUSHED: u8 = 3;
const RECORD_COMPACTED: u8 = 4;
/// Format 4: written at close after every edit; nothing follows it.
const RECORD_SEAL: u8 = 5;

pub(crate) fn log_name(id: u64) -> String {
    format!("{id:016x}.log")
}

pub(crate) fn delta_name(id: u64) -> String {
    format!("{id:016x}.delta")
}

/// The id of a file named by `log_name` or `delta_name`, or of the temporary
/// manifest, so open can tell the database's own files from others.
pub(crate) fn is_own_file(name: &str) -> bool {
    if name == MANIFEST_TMP_NAME {
        return true;
    }
    let (stem, ext) = match name.rsplit_once('.') {
        Some(parts) => parts,
        None => return false,
    };
    (ext == "log" || ext == "delta")
        && stem.len() == 16
        && stem.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A layer file's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// A flushed in-memory layer: every key of one log's LSN range.
    L0 = 0,
    /// A compaction's output: one key range of a run, a set of L1 layers
    /// with disjoint key ranges that together hold the versions of one LSN
    /// range (the L0 layers the compaction merged).
    L1 = 1,
    /// An image: one version per key (the newest at or below the image's
    /// LSN, no tombstones), every entry at that LSN, for the keys of its
    /// [`Cover`]: a key of the cover that the file does not hold had no
    /// value at that LSN. The image layers of one LSN have disjoint covers.
    Image = 2,
}

/// What a layer file covers, as the manifest records it: enough to search
/// the layers without opening them, and to check a file when it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LayerDesc {
    pub id: u64,
    pub level: Level,
    /// The smallest and largest key (inclusive); empty for an empty layer.
    pub key_min: Vec<u8>,
    pub key_max: Vec<u8>,
    /// L0: the LSNs of its entries (inclusive; 0 for an empty layer). L1:
    /// its run's LSN range, which holds those of its entries. Image: both
    /// are the image's LSN.
    pub lsn_min: Lsn,
    pub lsn_max: Lsn,
    /// Entries (versions, tombstones included).
    pub entries: u64,
    /// Exact length of the file.
    pub bytes: u64,
    /// An image's cover (`None` for a delta layer).
    pub cover: Option<Cover>,
    /// The value files its pointers point into: `(file id, bytes of the
    /// entries pointed at)`, by id; empty for a layer with no pointer
    /// (format 5).
    pub values: Vec<(u64, u64)>,
}

impl LayerDesc {
    /// The descriptor of the L0 file `id` that `summary` describes.
    pub(crate) fn from_summary(id: u64, summary: &DeltaLayerSummary) -> LayerDesc {
        LayerDesc {
            id,
            level: Level::L0,
            key_min: summary.key_min.clone(),
            key_max: summary.key_max.clone(),
            lsn_min: summary.lsn_min,
            lsn_max: summary.lsn_max,
            entries: summary.entries,
            bytes: summary.file_bytes,
            cover: None,
            values: Vec::new(),
        }
    }

    /// What differs between the descriptor and the file's own summary.
    pub(crate) fn mismatch(&self, summary: &DeltaLayerSummary) -> Option<String> {
        let mut own = LayerDesc::from_summary(self.id, summary);
        own.level = self.level;
        // The cover is the manifest's alone; the file's keys lie within it
        // (checked when the descriptor is decoded).
        own.cover = self.cover.clone();
        // So are the value files its pointers hold (summed as it was written).
        own.values = self.values.clone();
        // An L1 layer's entries lie within its run's LSN range.
        if self.level == Level::L1 && self.lsn_min <= own.lsn_min && own.lsn_max <= self.lsn_max {
            (own.lsn_min, own.lsn_max) = (self.lsn_min, self.lsn_max);
        }
        // An empty image (every key deleted) holds no LSN of its own.
        if self.level == Level::Image && own.entries == 0 {
            (own.lsn_min, own.lsn_max) = (self.lsn_min, self.lsn_max);
        }
        (own != *self).then(|| format!("the manifest says {self:?}, the file says {own:?}"))
    }
}

/// One change to the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Edit {
    /// A new log (of the new open layer).
    AddLog(u64),
    /// A log flushed: the layer file now holds its data. With
    /// `value_file_bytes` > 0 the layer points into the log for its large
    /// values, and the log stays as a value file of that many bytes (the
    /// layer's `values` name it and no other file); with 0 it goes.
    Flushed {
        log: u64,
        layer: LayerDesc,
        value_file_bytes: u64,
    },
    /// A compaction: the layers `add` replace the layers `remove`; reads
    /// below `gc_lsn` are refused from now on (0: no change; GC removed
    /// history below it).
    Compacted {
        remove: Vec<u64>,
        add: Vec<LayerDesc>,
        gc_lsn: Lsn,
    },
}

/// The live bytes of value files `files` (and of any other a layer points
/// into): what `layers`' descriptors say their pointers hold, by id; 0 for
/// a file none points into. The state's and a version's alike.
pub(crate) fn value_live_bytes<'a>(
    files: impl Iterator<Item = u64>,
    layers: impl IntoIterator<Item = &'a LayerDesc>,
) -> std::collections::BTreeMap<u64, u64> {
    let mut live: std::collections::BTreeMap<u64, u64> = files.map(|id| (id, 0)).collect();
    for d in layers {
        for &(id, bytes) in &d.values {
            *live.entry(id).or_default() += bytes;
        }
    }
    live
}

/// What the manifest says the database holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ManifestState {
    pub next_file_id: u64,
    /// Logs of in-memory layers not yet flushed, oldest first.
    pub logs: Vec<u64>,
    /// Layer files, in the order they were added (L0: LSN order).
    pub layers: Vec<LayerDesc>,
    /// Reads below this LSN are refused: GC removed history below it. Only
    /// rises.
    pub gc_lsn: Lsn,
    /// Value files (flushed logs that layers point into) and their bytes,
    /// by id. One leaves in the edit that leaves no layer pointing into it.
    pub value_files: std::collections::BTreeMap<u64, u64>,
}

impl ManifestState {
    fn is_listed(&self, id: u64) -> bool {
        self.logs.contains(&id)
            || self.layers.iter().any(|l| l.id == id)
            || self.value_files.contains_key(&id)
    }

    /// Files listed: logs, layers and value files.
    fn files(&self) -> usize {
        self.logs.len() + self.layers.len() + self.value_files.len()
    }

    /// The bytes of each value file that the layers' pointers hold (an
    /// entry two layers point at counts twice: an image and the deltas it
    /// sums up, until GC removes the deltas).
    pub(crate) fn value_live_bytes(&self) -> std::collections::BTreeMap<u64, u64> {
        value_live_bytes(self.value_files.keys().copied(), &self.layers)
    }

    /// Every layer's value files are listed; a value file no layer points
    /// into is dropped.
    fn settle_value_files(&mut self) -> std::result::Result<(), String> {
        let live = self.value_live_bytes();
        if let Some(id) = live.keys().find(|id| !self.value_files.contains_key(id)) {
            return Err(format!(
                "a layer points into value file {id}, which is not listed"
            ));
        }
        self.value_files
            .retain(|id, _| live.get(id).is_some_and(|&b| b > 0));
        Ok(())
    }

    /// Applies `edit`; an edit that does not fit the state is an error
    /// (what), and the state is unchanged.
    pub(crate) fn apply(&mut self, edit: &Edit) -> std::result::Result<(), String> {
        let take_id = |s: &mut ManifestState, id: u64| {
            if s.is_listed(id) {
                return Err(format!("file {id} is already listed"));
            }
            // An id leaves room for a next one: u64::MAX would make the
            // next file id collide with a listed file.
            let next = id
                .checked_add(1)
                .ok_or_else(|| format!("file id {id} leaves no next file id"))?;
            s.next_file_id = s.next_file_id.max(next);
            Ok(())
        };
        if self.files() >= MANIFEST_FILES_MAX {
            return Err(format!("more than {MANIFEST_FILES_MAX} files"));
        }
        match edit {
            Edit::AddLog(id) => {
                take_id(self, *id)?;
                self.logs.push(*id);
            }
            Edit::Flushed {
                log,
                layer,
                value_file_bytes,
            } => {
                let Some(at) = self.logs.iter().position(|l| l == log) else {
                    return Err(format!("flushed log {log} is not listed"));
                };
                let kept = match layer.values.as_slice() {
                    [] => false,
                    [(id, bytes)] if id == log && *bytes <= *value_file_bytes => true,
                    _ => {
                        return Err(format!(
                            "the layer of log {log} points into {:?}, not into the log \
                             ({value_file_bytes} bytes)",
                            layer.values
                        ))
                    }
                };
                if kept != (*value_file_bytes > 0) {
                    return Err(format!(
                        "log {log} kept as a value file of {value_file_bytes} bytes, \
                         its layer points into {:?}",
                        layer.values
                    ));
                }
                take_id(self, layer.id)?;
                self.logs.remove(at);
                if kept {
                    self.value_files.insert(*log, *value_file_bytes);
                }
                self.layers.push(layer.clone());
            }
            Edit::Compacted {
                remove,
                add,
                gc_lsn,
            } => {
                self.gc_lsn = self.gc_lsn.max(*gc_lsn);
                for id in remove {
                    let Some(at) = self.layers.iter().position(|l| l.id == *id) else {
                        return Err(format!("compacted layer {id} is not listed"));
                    };
                    self.layers.remove(at);
                }
                for layer in add {
                    take_id(self, layer.id)?;
                    self.layers.push(layer.clone());
                }
                self.settle_value_files()?;
                if self.files() > MANIFEST_FILES_MAX {
                    return Err(format!("more than {MANIFEST_FILES_MAX} files"));
                }
            }
        }
        Ok(())
    }

    /// Every id is below the next file id and listed once.
    fn check(&self) -> std::result::Result<(), String> {
        let ids = || {
            self.logs
                .iter()
                .copied()
                .chain(self.layers.iter().map(|l| l.id))
                .chain(self.value_files.keys().copied())
        };
        if ids().count() > MANIFEST_FILES_MAX {
            return Err(format!("more than {MANIFEST_FILES_MAX} files"));
        }
        if ids().any(|id| id >= self.next_file_id) {
            return Err("a file id at or above the next file id".into());
        }
        let mut sorted: Vec<u64> = ids().collect();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err("a file listed twice".into());
        }
        let live = self.value_live_bytes();
        if let Some(id) = live.keys().find(|id| !self.value_files.contains_key(id)) {
            return Err(format!(
                "a layer points into value file {id}, which is not listed"
            ));
        }
        if live.values().any(|&b| b == 0) {
            return Err("a value file no layer points into".into());
        }
        Ok(())
    }
}

/// A manifest as read at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loaded {
    pub state: ManifestState,
    /// Format version 1 lists delta layers by id only: open reads their
    /// descriptors from the files (and `state.layers` is empty).
    pub v1_deltas: Vec<u64>,
    /// Records read (the snapshot included).
    pub records: usize,
    /// Where a torn append was dropped, if one was.
    pub torn_at: Option<u64>,
    /// The file ends with a seal (format 4: it was closed, and nothing
    /// was dropped).
    pub sealed: bool,
    /// Each record read: its offset and what it says (for `strata inspect`).
    pub record_log: Vec<(u64, String)>,
}

// ---------------------------------------------------------------------------
// Encoding.

/// A record's data being encoded, in a format version (the current one,
/// or 2 for tests of reading it).
struct RecordEncoder {
    bytes: Vec<u8>,
    version: u32,
}

impl RecordEncoder {
    fn new(version: u32) -> Self {
        RecordEncoder {
            bytes: Vec::new(),
            version,
        }
    }
    fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    fn u32(&mut self, v: u32) {
        put_u32(&mut self.bytes, v);
    }
    fn u64(&mut self, v: u64) {
        put_u64(&mut self.bytes, v);
    }
    fn key(&mut self, k: &[u8]) {
        put_u16(&mut self.bytes, k.len() as u16); // <= KEY_BYTES_MAX
        self.bytes.extend_from_slice(k);
    }
    fn desc(&mut self, d: &LayerDesc) {
        self.u64(d.id);
        self.u8(d.level as u8);
        self.u64(d.lsn_min);
        self.u64(d.lsn_max);
        self.u64(d.entries);
        self.u64(d.bytes);
        self.key(&d.key_min);
        self.key(&d.key_max);
        if d.level == Level::Image && self.version != FORMAT_V2 {
            let cover = d.cover.clone().unwrap_or_else(Cover::everything);
            self.bound(&cover.start);
            self.bound(&cover.end);
        }
        if self.version >= MANIFEST_FORMAT_VERSION {
            self.pairs(&d.values);
        }
    }
    /// `count u32 | (id u64, bytes u64)…` (format 5).
    fn pairs(&mut self, pairs: &[(u64, u64)]) {
        self.u32(pairs.len() as u32);
        for &(id, bytes) in pairs {
            self.u64(id);
            self.u64(bytes);
        }
    }
    fn bound(&mut self, b: &Bound<Vec<u8>>) {
        match b {
            Bound::Unbounded => self.u8(BOUND_UNBOUNDED),
            Bound::Included(k) => {
                self.u8(BOUND_INCLUDED);
                self.key(k);
            }
            Bound::Excluded(k) => {
                self.u8(BOUND_EXCLUDED);
                self.key(k);
            }
        }
    }
}

/// How a cover's bound is encoded: a tag, then the key if it has one.
const BOUND_UNBOUNDED: u8 = 0;
const BOUND_INCLUDED: u8 = 1;
const BOUND_EXCLUDED: u8 = 2;

fn header(version: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES);
    out.extend_from_slice(&MAGIC);
    put_u32(&mut out, version);
    out.extend_from_slice(&[0; 8]);
    let crc = crate::crc::crc32c(&out);
    put_u32(&mut out, crc);
    out
}

/// The checksum of a record's data, seeded with its offset (a record read
/// from another offset does not pass).
fn data_crc(offset: u64, data: &[u8]) -> u32 {
    crate::crc::crc32c_append(crate::crc::crc32c(&offset.to_le_bytes()), data)
}

fn header_crc(offset: u64, len: u32, data_crc: u32) -> u32 {
    let mut b = [0u8; 16];
    write_u64_at(&mut b, 0, offset);
    write_u32_at(&mut b, 8, len);
    write_u32_at(&mut b, 12, data_crc);
    crate::crc::crc32c(&b)
}

/// A record with its header, for the file offset `offset`, as formats 2
/// and 3 frame it (no end mark, no padding).
pub(crate) fn frame_record(offset: u64, data: &[u8]) -> Vec<u8> {
    let len = data.len() as u32;
    let dcrc = data_crc(offset, data);
    let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + data.len());
    put_u32(&mut out, len);
    put_u32(&mut out, dcrc);
    put_u32(&mut out, header_crc(offset, len, dcrc));
    out.extend_from_slice(data);
    out
}

/// A record framed for format `version` at `offset`: in format 4, its end
/// mark and the zeros up to the next record boundary follow it.
pub(crate) fn frame_record_in(offset: u64, data: &[u8], version: u32) -> Vec<u8> {
    let mut out = frame_record(offset, data);
    if version >= FORMAT_V4 {
        out.extend_from_slice(&RECORD_END_MAGIC);
        let end = offset as usize + out.len();
        out.resize(
            out.len() + (end.next_multiple_of(RECORD_ALIGN_BYTES) - end),
            0,
        );
    }
    out
}

/// Where the record after one at `at` with `len` bytes of data starts, in
/// format `version`.
pub(crate) fn next_record_at(at: usize, len: usize, version: u32) -> usize {
    let end = at + RECORD_HEADER_BYTES + len;
    if version >= FORMAT_V4 {
        (end + RECORD_END_MAGIC.len()).next_multiple_of(RECORD_ALIGN_BYTES)
    } else {
        end
    }
}

fn encode_snapshot(s: &ManifestState, version: u32) -> Vec<u8> {
    let mut o = RecordEncoder::new(version);
    o.u8(RECORD_SNAPSHOT);
    o.u64(s.next_file_id);
    o.u32(s.logs.len() as u32);
    o.u32(s.layers.len() as u32);
    for &id in &s.logs {
        o.u64(id);
    }
    for d in &s.layers {
        o.desc(d);
    }
    if o.version != FORMAT_V2 {
        o.u64(s.gc_lsn);
    }
    if o.version >= MANIFEST_FORMAT_VERSION {
        let files: Vec<(u64, u64)> = s.value_files.iter().map(|(&i, &b)| (i, b)).collect();
        o.pairs(&files);
    }
    o.bytes
}

pub(crate) fn encode_edit(e: &Edit) -> Vec<u8> {
    encode_edit_in(e, MANIFEST_FORMAT_VERSION)
}

/// `e`'s record data in format `version` (older ones: for tests of reading
/// them; they hold no value files).
pub(crate) fn encode_edit_in(e: &Edit, version: u32) -> Vec<u8> {
    let mut o = RecordEncoder::new(version);
    match e {
        Edit::AddLog(id) => {
            o.u8(RECORD_ADD_LOG);
            o.u64(*id);
        }
        Edit::Flushed {
            log,
            layer,
            value_file_bytes,
        } => {
            o.u8(RECORD_FLUSHED);
            o.u64(*log);
            o.desc(layer);
            if o.version >= MANIFEST_FORMAT_VERSION {
                o.u64(*value_file_bytes);
            }
        }
        Edit::Compacted {
            remove,
            add,
            gc_lsn,
        } => {
            o.u8(RECORD_COMPACTED);
            o.u32(remove.len() as u32);
            o.u32(add.len() as u32);
            for &id in remove {
                o.u64(id);
            }
            for d in add {
                o.desc(d);
            }
            o.u64(*gc_lsn);
        }
    }
    o.bytes
}

/// A whole manifest file holding `state`: the header and a snapshot.
pub(crate) fn encode_file(state: &ManifestState) -> Vec<u8> {
    encode_file_in(state, MANIFEST_FORMAT_VERSION)
}

/// A whole manifest file holding `state` in format `version` (3, or 2 as
/// older builds wrote it: for tests).
pub(crate) fn encode_file_in(state: &ManifestState, version: u32) -> Vec<u8> {
    let mut out = header(version);
    let snapshot = encode_snapshot(state, version);
    out.extend_from_slice(&frame_record_in(HEADER_BYTES as u64, &snapshot, version));
    out
}

/// `edit` framed as the record at `offset` (a record boundary).
pub(crate) fn encode_edit_record(offset: u64, edit: &Edit) -> Vec<u8> {
    debug_assert!(offset.is_multiple_of(RECORD_ALIGN_BYTES as u64));
    frame_record_in(offset, &encode_edit(edit), MANIFEST_FORMAT_VERSION)
}

/// The seal framed as the record at `offset` (a record boundary).
pub(crate) fn encode_seal_record(offset: u64) -> Vec<u8> {
    debug_assert!(offset.is_multiple_of(RECORD_ALIGN_BYTES as u64));
    frame_record_in(offset, &[RECORD_SEAL], MANIFEST_FORMAT_VERSION)
}

// ---------------------------------------------------------------------------
// Decoding.

/// A record's data being decoded, in the file's format version.
struct RecordDecoder<'a> {
    fields: Decoder<'a>,
    /// The file's format version.
    version: u32,
}

/// What a field that runs past the record's data says.
fn ends_inside_a_field(_: Truncated) -> String {
    "record ends inside a field".to_string()
}

impl RecordDecoder<'_> {
    fn u8(&mut self) -> std::result::Result<u8, String> {
        self.fields.u8().map_err(ends_inside_a_field)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        self.fields.u32().map_err(ends_inside_a_field)
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        self.fields.u64().map_err(ends_inside_a_field)
    }
    fn key(&mut self) -> std::result::Result<Vec<u8>, String> {
        let n = usize::from(self.fields.u16().map_err(ends_inside_a_field)?);
        if n > KEY_BYTES_MAX {
            return Err(format!("a key of {n} bytes"));
        }
        let key = self.fields.bytes(n).map_err(ends_inside_a_field)?;
        Ok(key.to_vec())
    }
    fn desc(&mut self) -> std::result::Result<LayerDesc, String> {
        let d = LayerDesc {
            id: self.u64()?,
            level: match self.u8()? {
                0 => Level::L0,
                1 => Level::L1,
                2 => Level::Image,
                l => return Err(format!("layer level {l}")),
            },
            lsn_min: self.u64()?,
            lsn_max: self.u64()?,
            entries: self.u64()?,
            bytes: self.u64()?,
            key_min: self.key()?,
            key_max: self.key()?,
            cover: None,
            values: Vec::new(),
        };
        if d.lsn_min > d.lsn_max || d.key_min > d.key_max {
            return Err(format!("layer {} has its ranges upside down", d.id));
        }
        let mut d = d;
        if d.level == Level::Image && self.version != FORMAT_V2 {
            d.cover = Some(Cover {
                start: self.bound()?,
                end: self.bound()?,
            });
            check_cover(&d)?;
        }
        d.values = self.pairs()?;
        if d.values.windows(2).any(|w| w[0].0 >= w[1].0) || d.values.iter().any(|v| v.1 == 0) {
            return Err(format!("layer {} lists its value files out of order", d.id));
        }
        Ok(d)
    }
    /// `count u32 | (id u64, bytes u64)…` (format 5; nothing before).
    fn pairs(&mut self) -> std::result::Result<Vec<(u64, u64)>, String> {
        if self.version < MANIFEST_FORMAT_VERSION {
            return Ok(Vec::new());
        }
        let n = self.u32()? as usize;
        if n > MANIFEST_FILES_MAX {
            return Err(format!("{n} value files"));
        }
        // Bounded by the record's bytes, not by the count read from it.
        let mut out = Vec::new();
        for _ in 0..n {
            out.push((self.u64()?, self.u64()?));
        }
        Ok(out)
    }
    fn bound(&mut self) -> std::result::Result<Bound<Vec<u8>>, String> {
        Ok(match self.u8()? {
            BOUND_UNBOUNDED => Bound::Unbounded,
            BOUND_INCLUDED => Bound::Included(self.key()?),
            BOUND_EXCLUDED => Bound::Excluded(self.key()?),
            t => return Err(format!("a cover bound of type {t}")),
        })
    }
    /// The GC cutoff that ends a snapshot or a compaction (format 3 on).
    fn gc_lsn(&mut self) -> std::result::Result<Lsn, String> {
        if self.version == FORMAT_V2 {
            Ok(0)
        } else {
            self.u64()
        }
    }
    fn end(&self) -> std::result::Result<(), String> {
        match self.fields.remaining() {
            0 => Ok(()),
            n => Err(format!("{n} bytes after the record's fields")),
        }
    }
}

enum Record {
    Snapshot(ManifestState),
    Edit(Edit),
    /// Written at close: every record before it was durable.
    Seal,
}

impl Record {
    fn describe(&self) -> String {
        let ids = |layers: &[LayerDesc]| -> Vec<u64> { layers.iter().map(|l| l.id).collect() };
        match self {
            Record::Snapshot(s) => format!(
                "snapshot: next file id {}, logs {:?}, layers {:?}, value files {:?}",
                s.next_file_id,
                s.logs,
                ids(&s.layers),
                s.value_files.keys().collect::<Vec<_>>()
            ),
            Record::Seal => "seal (closed)".to_string(),
            Record::Edit(Edit::AddLog(id)) => format!("add log {id}"),
            Record::Edit(Edit::Flushed {
                log,
                layer,
                value_file_bytes,
            }) => {
                let kept = if *value_file_bytes > 0 {
                    format!(", kept as a value file of {value_file_bytes} bytes")
                } else {
                    String::new()
                };
                format!("flushed log {log} into layer {}{kept}", layer.id)
            }
            Record::Edit(Edit::Compacted {
                remove,
                add,
                gc_lsn,
            }) => {
                let gc = if *gc_lsn > 0 {
                    format!(", reads from LSN {gc_lsn}")
                } else {
                    String::new()
                };
                format!("compacted: removed {remove:?}, added {:?}{gc}", ids(add))
            }
        }
    }
}

fn decode_record(data: &[u8], version: u32) -> std::result::Result<Record, String> {
    let mut r = RecordDecoder {
        fields: Decoder::new(data),
        version,
    };
    let record = match r.u8()? {
        RECORD_SNAPSHOT => {
            let next_file_id = r.u64()?;
            let logs = r.u32()? as usize;
            let layers = r.u32()? as usize;
            if logs.saturating_add(layers) > MANIFEST_FILES_MAX {
                return Err(format!("{logs} logs and {layers} layers"));
            }
            // Bounded by the record's bytes, not by a count read from it.
            let logs = (0..logs)
                .map(|_| r.u64())
                .collect::<std::result::Result<_, _>>()?;
            let mut descs = Vec::new();
            for _ in 0..layers {
                descs.push(r.desc()?);
            }
            let gc_lsn = r.gc_lsn()?;
            let value_files = r.pairs()?;
            if value_files.windows(2).any(|w| w[0].0 >= w[1].0) {
                return Err("value files out of order".into());
            }
            let s = ManifestState {
                next_file_id,
                logs,
                layers: descs,
                gc_lsn,
                value_files: value_files.into_iter().collect(),
            };
            s.check()?;
            Record::Snapshot(s)
        }
        RECORD_ADD_LOG => Record::Edit(Edit::AddLog(r.u64()?)),
        RECORD_FLUSHED => Record::Edit(Edit::Flushed {
            log: r.u64()?,
            layer: r.desc()?,
            value_file_bytes: if version >= MANIFEST_FORMAT_VERSION {
                r.u64()?
            } else {
                0
            },
        }),
        RECORD_COMPACTED => {
            let (remove, add) = (r.u32()? as usize, r.u32()? as usize);
            if remove.saturating_add(add) > MANIFEST_FILES_MAX {
                return Err(format!("{remove} layers removed and {add} added"));
            }
            let remove = (0..remove)
                .map(|_| r.u64())
                .collect::<std::result::Result<_, _>>()?;
            let mut descs = Vec::new();
            for _ in 0..add {
                descs.push(r.desc()?);
            }
            Record::Edit(Edit::Compacted {
                remove,
                add: descs,
                gc_lsn: r.gc_lsn()?,
            })
        }
        RECORD_SEAL if version >= FORMAT_V4 => Record::Seal,
        t => return Err(format!("unknown record type {t}")),
    };
    r.end()?;
    Ok(record)
}

/// Whether any sector-aligned piece of `bytes[from..to]` is all zeros: a
/// write lost in a crash leaves zeros, a flipped bit does not.
fn has_zero_sector(bytes: &[u8], from: usize, to: usize) -> bool {
    let mut s = from;
    while s < to {
        let e = ((s / TORN_SECTOR_BYTES + 1) * TORN_SECTOR_BYTES).min(to);
        if bytes[s..e].iter().all(|&b| b == 0) {
            return true;
        }
        s = e;
    }
    false
}

/// Whether a whole, valid record starts anywhere after `at` (its header
/// checksum covers its offset, so one found is one that was written
/// there). In format 4 records start only on record boundaries.
fn record_after(bytes: &[u8], at: usize, version: u32) -> bool {
    let is_record = |o: usize| {
        let (Some(len), Some(dcrc), Some(hcrc)) =
            (u32_at(bytes, o), u32_at(bytes, o + 4), u32_at(bytes, o + 8))
        else {
            return false;
        };
        let data = (o + RECORD_HEADER_BYTES)
            .checked_add(len as usize)
            .and_then(|end| bytes.get(o + RECORD_HEADER_BYTES..end));
        hcrc == header_crc(o as u64, len, dcrc)
            && data.is_some_and(|d| data_crc(o as u64, d) == dcrc)
    };
    let last = bytes.len().saturating_sub(RECORD_HEADER_BYTES - 1);
    if version >= FORMAT_V4 {
        let first = (at + 1).next_multiple_of(RECORD_ALIGN_BYTES);
        (first..last).step_by(RECORD_ALIGN_BYTES).any(is_record)
    } else {
        (at + 1..last).any(is_record)
    }
}

/// Decodes a manifest file.
pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Loaded> {
    let not_db = |why: &str| Error::NotADatabase {
        path: path.to_owned(),
        why: why.to_owned(),
    };
    if bytes.len() < HEADER_BYTES {
        if bytes.len() >= 8 && bytes[..8] == MAGIC {
            return Err(Corruption::new(path, 0, "manifest shorter than its header").into());
        }
        return Err(not_db("the manifest is too short to be one"));
    }
    if bytes[..8] != MAGIC {
        return Err(not_db("the manifest has no strata magic"));
    }
    // The file holds a whole header (HEADER_BYTES): both fields are in it.
    let stored = u32_at(bytes, HEADER_CRC_OFFSET).unwrap_or(0);
    let actual = crate::crc::crc32c(&bytes[..HEADER_CRC_OFFSET]);
    if stored != actual {
        return Err(Corruption::checksum(path, 0, "manifest header", stored, actual).into());
    }
    match u32_at(bytes, VERSION_OFFSET).unwrap_or(0) {
        0 => Err(Corruption::new(path, VERSION_OFFSET as u64, "manifest version 0").into()),
        1 => decode_v1(path, bytes),
        v @ (FORMAT_V2 | FORMAT_V3 | FORMAT_V4 | MANIFEST_FORMAT_VERSION) => {
            decode_log(path, bytes, v)
        }
        version => Err(Error::UnsupportedVersion {
            path: path.to_owned(),
            found: version,
            supported: MANIFEST_FORMAT_VERSION,
        }),
    }
}

/// How a record at some offset reads.
enum Framed<'a> {
    /// Whole and checked: its data, and where the next record starts.
    Whole(&'a [u8], usize),
    /// Bad in a way a crash can leave the last append (see `torn_is_possible`).
    Torn,
    /// Bad in a way no crash leaves a record.
    Corrupt(Error),
}

/// Reads the record at `at` of a format `version` file (2, 3 or 4).
fn frame_at<'a>(path: &Path, bytes: &'a [u8], at: usize, version: u32) -> Framed<'a> {
    let corrupt = |what: String| Framed::Corrupt(Corruption::new(path, at as u64, what).into());
    let aligned = version >= FORMAT_V4;
    let rest = &bytes[at..];
    // A header cut short by the end of the file (RECORD_HEADER_BYTES).
    let mut header = Decoder::new(rest);
    let (Ok(len), Ok(dcrc), Ok(hcrc)) = (header.u32(), header.u32(), header.u32()) else {
        return Framed::Torn;
    };
    let expected = header_crc(at as u64, len, dcrc);
    if hcrc != expected {
        // Format 4: the header lies in one sector, which a crash leaves
        // whole or zero; before, a record could span sectors anywhere.
        let lost = if aligned {
            rest[..RECORD_HEADER_BYTES].iter().all(|&b| b == 0)
        } else {
            has_zero_sector(bytes, at, bytes.len())
        };
        if lost {
            return Framed::Torn;
        }
        return Framed::Corrupt(
            Corruption::checksum(path, at as u64, "manifest record header", hcrc, expected).into(),
        );
    }
    let len = len as usize;
    if len > RECORD_BYTES_MAX {
        return corrupt(format!("a manifest record of {len} bytes"));
    }
    let end = at + RECORD_HEADER_BYTES + len;
    let mark_end = end + if aligned { RECORD_END_MAGIC.len() } else { 0 };
    if mark_end > bytes.len() {
        return Framed::Torn;
    }
    let data = &bytes[at + RECORD_HEADER_BYTES..end];
    let actual = data_crc(at as u64, data);
    if actual != dcrc {
        if has_zero_sector(bytes, at, mark_end) {
            return Framed::Torn;
        }
        return Framed::Corrupt(
            Corruption::checksum(path, at as u64, "manifest record", dcrc, actual).into(),
        );
    }
    if !aligned {
        return Framed::Whole(data, end);
    }
    if bytes[end..mark_end] != RECORD_END_MAGIC {
        if has_zero_sector(bytes, at, mark_end) {
            return Framed::Torn;
        }
        return Framed::Corrupt(
            Corruption::new(path, end as u64, "manifest record end mark").into(),
        );
    }
    let next = next_record_at(at, len, version);
    let pad = &bytes[mark_end..next.min(bytes.len())];
    if let Some(i) = pad.iter().position(|&b| b != 0) {
        return Framed::Corrupt(
            Corruption::new(
                path,
                (mark_end + i) as u64,
                "nonzero byte in the padding after a manifest record",
            )
            .into(),
        );
    }
    Framed::Whole(data, next)
}

/// Formats 2, 3 and 4: a header, a snapshot record, edit records (and in
/// format 4, a seal at the end of a file that was closed).
fn decode_log(path: &Path, bytes: &[u8], version: u32) -> Result<Loaded> {
    let corrupt = |at: usize, what: String| Error::from(Corruption::new(path, at as u64, what));
    if bytes[PAYLOAD_LEN_OFFSET..HEADER_CRC_OFFSET] != [0; 8] {
        return Err(corrupt(
            PAYLOAD_LEN_OFFSET,
            "manifest header fields not zero".into(),
        ));
    }
    let mut state: Option<ManifestState> = None;
    let mut records = 0;
    let mut record_log = Vec::new();
    let mut at = HEADER_BYTES;
    let mut torn_at = None;
    let mut sealed = false;
    while at < bytes.len() {
        // The end of the log: zeros, or a torn append; either way with no
        // whole record after it (an edit is appended only after the one
        // before it is durable, so a bad record before a whole one was
        // durable once: corruption).
        let zeros = bytes[at..].iter().all(|&b| b == 0);
        let (data, next) = match frame_at(path, bytes, at, version) {
            _ if zeros && record_after(bytes, at, version) => {
                return Err(corrupt(at, "zeroed bytes before a manifest record".into()))
            }
            _ if zeros => {
                torn_at = Some(at as u64);
                break;
            }
            Framed::Whole(data, next) => (data, next),
            Framed::Torn if record_after(bytes, at, version) => {
                return Err(corrupt(
                    at,
                    "a damaged manifest record before a whole one".into(),
                ))
            }
            Framed::Torn => {
                torn_at = Some(at as u64);
                break;
            }
            Framed::Corrupt(e) => return Err(e),
        };
        if sealed {
            return Err(corrupt(at, "a manifest record after the seal".into()));
        }
        let record = decode_record(data, version).map_err(|e| corrupt(at, e))?;
        record_log.push((at as u64, record.describe()));
        match (record, &mut state) {
            (Record::Snapshot(s), None) => state = Some(s),
            (Record::Snapshot(_), Some(_)) => {
                return Err(corrupt(at, "a second snapshot record".into()))
            }
            (Record::Edit(_) | Record::Seal, None) => {
                return Err(corrupt(at, "a record before the snapshot record".into()))
            }
            (Record::Edit(e), Some(s)) => s.apply(&e).map_err(|why| corrupt(at, why))?,
            (Record::Seal, Some(_)) => sealed = true,
        }
        records += 1;
        at = next;
    }
    let mut state = state.ok_or_else(|| {
        corrupt(
            HEADER_BYTES,
            "the manifest has no whole snapshot record".into(),
        )
    })?;
    if version == FORMAT_V2 {
        upgrade_v2(&mut state).map_err(|why| corrupt(HEADER_BYTES, why))?;
    }
    Ok(Loaded {
        state,
        v1_deltas: Vec::new(),
        records,
        torn_at,
        sealed,
        record_log,
    })
}

/// An image's cover holds some key, and all of the image's.
fn check_cover(d: &LayerDesc) -> std::result::Result<(), String> {
    let Some(cover) = &d.cover else {
        return Err(format!("image layer {} has no cover", d.id));
    };
    let holds = |k: &[u8]| cover.contains(k);
    if cover.is_empty() || (d.entries > 0 && !(holds(&d.key_min) && holds(&d.key_max))) {
        return Err(format!(
            "image layer {} holds keys outside its cover {cover:?}",
            d.id
        ));
    }
    Ok(())
}

/// A format 2 state in format 3's terms. Format 2 had whole images: the
/// files of one image LSN partition the key space, each from its first key
/// to the next file's (the first from the start of the key space, the last
/// to its end). Reads were refused below the oldest image once no L1 run
/// reached below it (GC removed what was there). Image files of one LSN
/// whose keys overlap are an error.
fn upgrade_v2(state: &mut ManifestState) -> std::result::Result<(), String> {
    let mut images: Vec<&mut LayerDesc> = state
        .layers
        .iter_mut()
        .filter(|d| d.level == Level::Image)
        .collect();
    images.sort_by(|a, b| (a.lsn_max, &a.key_min).cmp(&(b.lsn_max, &b.key_min)));
    for i in 0..images.len() {
        let lsn = images[i].lsn_max;
        let first = i == 0 || images[i - 1].lsn_max != lsn;
        let next = images.get(i + 1).filter(|n| n.lsn_max == lsn);
        let end = next.map_or(Bound::Unbounded, |n| Bound::Excluded(n.key_min.clone()));
        let start = if first {
            Bound::Unbounded
        } else {
            Bound::Included(images[i].key_min.clone())
        };
        images[i].cover = Some(Cover { start, end });
        check_cover(images[i])?;
    }
    let oldest_image = images.first().map(|d| d.lsn_max);
    state.gc_lsn = oldest_image
        .filter(|&lsn| {
            !state
                .layers
                .iter()
                .any(|d| d.level == Level::L1 && d.lsn_min <= lsn)
        })
        .unwrap_or(0);
    Ok(())
}

/// Format version 1: `payload_len u32 | payload_crc u32` in the header, then
/// `next_file_id u64 | log_count u32 | delta_count u32 | ids…`.
fn decode_v1(path: &Path, bytes: &[u8]) -> Result<Loaded> {
    // `decode` checked that the file holds a whole header.
    let len = u32_at(bytes, PAYLOAD_LEN_OFFSET).unwrap_or(0) as usize;
    let payload = bytes.get(HEADER_BYTES..HEADER_BYTES + len).ok_or_else(|| {
        Corruption::new(
            path,
            HEADER_BYTES as u64,
            "manifest payload past the end of the file",
        )
    })?;
    if bytes.len() != HEADER_BYTES + len {
        return Err(Corruption::new(
            path,
            (HEADER_BYTES + len) as u64,
            format!(
                "{} bytes after the manifest's payload",
                bytes.len() - HEADER_BYTES - len
            ),
        )
        .into());
    }
    let stored = u32_at(bytes, PAYLOAD_CRC_OFFSET).unwrap_or(0);
    let actual = crate::crc::crc32c(payload);
    if stored != actual {
        return Err(Corruption::checksum(
            path,
            HEADER_BYTES as u64,
            "manifest payload",
            stored,
            actual,
        )
        .into());
    }
    let bad = |what: &str| Corruption::new(path, HEADER_BYTES as u64, what);
    let mut fields = Decoder::new(payload);
    let (Ok(next_file_id), Ok(logs_n), Ok(deltas_n)) = (fields.u64(), fields.u32(), fields.u32())
    else {
        return Err(bad("manifest payload too short").into());
    };
    let (logs_n, deltas_n) = (logs_n as usize, deltas_n as usize);
    if logs_n + deltas_n > MANIFEST_FILES_MAX || fields.remaining() != 8 * (logs_n + deltas_n) {
        return Err(bad("manifest file counts do not match its length").into());
    }
    let ids = (0..logs_n + deltas_n)
        .map(|_| fields.u64())
        .collect::<std::result::Result<Vec<u64>, _>>()
        .map_err(|_| bad("manifest file counts do not match its length"))?;
    if ids.iter().any(|&id| id >= next_file_id) {
        return Err(bad("manifest lists a file id at or above its next file id").into());
    }
    Ok(Loaded {
        state: ManifestState {
            next_file_id,
            logs: ids[..logs_n].to_vec(),
            layers: Vec::new(),
            gc_lsn: 0,
            value_files: Default::default(),
        },
        v1_deltas: ids[logs_n..].to_vec(),
        records: 1,
        torn_at: None,
        sealed: false,
        record_log: vec![(
            HEADER_BYTES as u64,
            format!(
                "version 1 payload: next file id {next_file_id}, logs {:?}, delta layers {:?}",
                &ids[..logs_n],
                &ids[logs_n..]
            ),
        )],
    })
}

/// A format version 1 manifest (as older builds wrote it), for tests.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn encode_v1(next_file_id: u64, logs: &[u64], deltas: &[u64]) -> Vec<u8> {
    let mut payload = Vec::new();
    put_u64(&mut payload, next_file_id);
    put_u32(&mut payload, logs.len() as u32);
    put_u32(&mut payload, deltas.len() as u32);
    for &id in logs.iter().chain(deltas) {
        put_u64(&mut payload, id);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    put_u32(&mut out, 1);
    put_u32(&mut out, payload.len() as u32);
    put_u32(&mut out, crate::crc::crc32c(&payload));
    let crc = crate::crc::crc32c(&out);
    put_u32(&mut out, crc);
    out.extend_from_slice(&payload);
    out
}

// ---------------------------------------------------------------------------
// The file.

/// The manifest is small and read once: through the page cache.
fn manifest_file_options() -> FileOptions {
    FileOptions {
        mode: IoMode::Buffered,
        class: FileClass::Manifest,
        ..FileOptions::default()
    }
}

/// Reads the manifest of `dir`; `Ok(None)` when there is none. A read can
/// return other bytes than those stored: a manifest that does not decode
/// (a checksum, the structure, the magic), or decodes to a torn tail, is
/// read and decoded again through the storage's policy for bytes that fail
/// their check (`io::read_verified`: its cached pages forgotten first), and
/// the second result stands.
pub(crate) fn load(storage: &dyn Storage, dir: &Path) -> Result<Option<Loaded>> {
    let path = dir.join(MANIFEST_NAME);
    // Not counted, nor its retry: the database's statistics start after open.
    let stats = IoStats::new();
    let file = match storage.open(&path, &manifest_file_options(), &stats) {
        Ok(file) => file,
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut attempts = 0;
    crate::io::read_verified(&*file, &stats, 0, 0, || {
        attempts += 1;
        let len = usize::try_from(file.len()?)
            .map_err(|_| Corruption::new(&path, 0, "manifest larger than memory"))?;
        let first = attempts == 1;
        // A first reading with a torn tail or without the magic may be a
        // read that returned other bytes: read again like one that fails a
        // checksum (a file named MANIFEST that is not one stays refused).
        match decode(&path, &file.read_range(0, len)?) {
            Ok(loaded) => match loaded.torn_at {
                Some(at) if first => Err(Corruption::new(&path, at, "torn tail").into()),
                _ => Ok(Some(loaded)),
            },
            Err(Error::NotADatabase { why, .. }) if first => {
                Err(Corruption::new(&path, 0, why).into())
            }
            Err(e) => Err(e),
        }
    })
}

/// The manifest being written: its state and the file edits append to.
pub(crate) struct ManifestLog {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    stats: IoStats,
    /// `None` after a failed append or sync: the next edit rolls over.
    file: Option<Arc<dyn StorageFile>>,
    end: u64,
    snapshot_bytes: u64,
    /// `ROLLOVER_BYTES_MIN`, smaller in tests.
    rollover_bytes_min: u64,
    state: ManifestState,
}

impl ManifestLog {
    /// Writes a new manifest holding `state` (a rollover) and returns it.
    pub(crate) fn create(
        storage: Arc<dyn Storage>,
        dir: &Path,
        stats: IoStats,
        state: ManifestState,
    ) -> Result<ManifestLog> {
        let mut m = ManifestLog {
            storage,
            dir: dir.to_owned(),
            stats,
            file: None,
            end: 0,
            snapshot_bytes: 0,
            rollover_bytes_min: ROLLOVER_BYTES_MIN,
            state: ManifestState::default(),
        };
        m.rollover(state)?;
        Ok(m)
    }

    /// The state the durable edits add up to.
    pub(crate) fn state(&self) -> &ManifestState {
        &self.state
    }

    /// A new file id. Not recorded until an edit lists the file: an id
    /// taken by a job that fails may be taken again after a reopen, when
    /// its file is garbage and gone.
    pub(crate) fn take_file_id(&mut self) -> u64 {
        let id = self.state.next_file_id;
        self.state.next_file_id += 1;
        id
    }

    /// Records `edit` durably; when it returns `Ok`, the edit holds.
    pub(crate) fn apply(&mut self, edit: Edit) -> Result<()> {
        let path = self.dir.join(MANIFEST_NAME);
        let mut next = self.state.clone();
        next.apply(&edit)
            .map_err(|why| Error::Internal(format!("{}: edit {edit:?}: {why}", path.display())))?;
        // Costly (every id sorted): debug builds and tests only. A rollover
        // checks it always.
        debug_assert_eq!(next.check(), Ok(()), "manifest state after {edit:?}");
        let limit = self.rollover_bytes_min.max(4 * self.snapshot_bytes);
        match &self.file {
            Some(file) if self.end < limit => {
                debug_assert!(self.end.is_multiple_of(RECORD_ALIGN_BYTES as u64));
                let record = encode_edit_record(self.end, &edit);
                let written = file
                    .write_all_at(&record, self.end)
                    .and_then(|()| file.sync_data());
                if let Err(e) = written {
                    self.file = None;
                    return Err(e);
                }
                self.end += record.len() as u64;
                self.state = next;
                Ok(())
            }
            _ => self.rollover(next),
        }
    }

    /// At close, after the last edit: appends the seal and syncs it, so
    /// that damage to the last edit is found as corruption at the next
    /// open, not taken for a torn append. A later edit (none is expected)
    /// starts a new file.
    pub(crate) fn seal(&mut self) -> Result<()> {
        let Some(file) = self.file.take() else {
            // After a failed append, or sealed already: the next open
            // writes a new file from the state this one holds.
            return Ok(());
        };
        let record = encode_seal_record(self.end);
        file.write_all_at(&record, self.end)?;
        file.sync_data()?;
        self.end += record.len() as u64;
        Ok(())
    }

    /// Writes `state` whole as the manifest (a follower's move to a newer
    /// index: `VersionSet::follow`); when it returns `Ok`, the state holds.
    pub(crate) fn replace(&mut self, state: ManifestState) -> Result<()> {
        self.rollover(state)
    }

    /// Replaces the manifest with a new file holding `state`.
    fn rollover(&mut self, state: ManifestState) -> Result<()> {
        state
            .check()
            .map_err(|why| Error::Internal(format!("manifest state: {why}")))?;
        self.file = None;
        let bytes = encode_file(&state);
        if bytes.len() - HEADER_BYTES - RECORD_HEADER_BYTES > RECORD_BYTES_MAX {
            return Err(Error::Poisoned(format!(
                "a manifest snapshot of {} bytes is over the limit of {RECORD_BYTES_MAX}",
                bytes.len()
            )));
        }
        let tmp = self.dir.join(MANIFEST_TMP_NAME);
        let file = self
            .storage
            .create(&tmp, &manifest_file_options(), &self.stats)?;
        file.write_all_at(&bytes, 0)?;
        file.sync_data()?;
        self.storage.rename(&tmp, &self.dir.join(MANIFEST_NAME))?;
        self.storage.sync_dir(&self.dir)?;
        self.file = Some(file);
        self.end = bytes.len() as u64;
        self.snapshot_bytes = self.end;
        self.state = state;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(id: u64, lsn: Lsn) -> LayerDesc {
        LayerDesc {
            id,
            level: Level::L0,
            key_min: b"a".to_vec(),
            key_max: b"k".to_vec(),
            lsn_min: lsn,
            lsn_max: lsn + 9,
            entries: 10,
            bytes: 4096,
            cover: None,
            values: Vec::new(),
        }
    }

    /// A file of a snapshot and `edits`, and the state it holds.
    fn file(edits: &[Edit]) -> (Vec<u8>, ManifestState) {
        let mut state = ManifestState {
            next_file_id: 4,
            logs: vec![2, 3],
            layers: vec![desc(1, 1)],
            ..ManifestState::default()
        };
        let mut bytes = encode_file(&state);
        for e in edits {
            bytes.extend(encode_edit_record(bytes.len() as u64, e));
            state.apply(e).unwrap();
        }
        (bytes, state)
    }

    fn edits() -> Vec<Edit> {
        vec![
            Edit::AddLog(5),
            // Log 2 kept as a value file its layer points into, then the
            // L1 layer its pointers move to.
            Edit::Flushed {
                log: 2,
                layer: LayerDesc {
                    values: vec![(2, 4000)],
                    ..desc(6, 11)
                },
                value_file_bytes: 5000,
            },
            Edit::Compacted {
                remove: vec![1, 6],
                add: vec![
                    LayerDesc {
                        level: Level::L1,
                        key_max: b"c".to_vec(),
                        values: vec![(2, 3000)],
                        ..desc(8, 1)
                    },
                    LayerDesc {
                        level: Level::L1,
                        key_min: b"d".to_vec(),
                        ..desc(9, 1)
                    },
                    image(10, 30, Bound::Excluded(b"0".to_vec()), Bound::Unbounded),
                ],
                gc_lsn: 30,
            },
        ]
    }

    /// An image at `lsn` of the keys "a".."k", covering `start..end`.
    fn image(id: u64, lsn: Lsn, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> LayerDesc {
        LayerDesc {
            level: Level::Image,
            lsn_min: lsn,
            lsn_max: lsn,
            cover: Some(Cover { start, end }),
            ..desc(id, lsn)
        }
    }

    #[test]
    fn round_trip() {
        let (bytes, state) = file(&edits());
        let p = Path::new("MANIFEST");
        let loaded = decode(p, &bytes).unwrap();
        assert_eq!(loaded.state, state);
        assert_eq!((loaded.records, loaded.torn_at), (4, None));
        assert_eq!(state.logs, [3, 5]);
        assert_eq!(
            state.layers.iter().map(|l| l.id).collect::<Vec<_>>(),
            [8, 9, 10]
        );
        assert_eq!((state.next_file_id, state.gc_lsn), (11, 30));
        assert_eq!(decode(p, &encode_file(&state)).unwrap().state, state);
        // An image's keys outside its cover are corruption.
        let mut wrong = state.clone();
        wrong.layers[2].cover.as_mut().unwrap().start = Bound::Included(b"b".to_vec());
        let err = decode(p, &encode_file(&wrong)).unwrap_err().to_string();
        assert!(err.contains("outside its cover"), "{err}");
    }

    #[test]
    fn version_2_images_cover_the_whole_key_space_and_gc_is_derived() {
        let p = Path::new("MANIFEST");
        let unbounded = || Bound::Unbounded;
        let v2 = |layers: Vec<LayerDesc>| {
            let state = ManifestState {
                next_file_id: 100,
                logs: vec![],
                layers,
                ..ManifestState::default()
            };
            decode(p, &encode_file_in(&state, FORMAT_V2)).unwrap().state
        };
        // Two image files at 40 (keys a..k, then m..t), one at 20, and an
        // L1 run above them all.
        let s = v2(vec![
            LayerDesc {
                key_min: b"m".to_vec(),
                key_max: b"t".to_vec(),
                ..image(1, 40, unbounded(), unbounded())
            },
            image(2, 40, unbounded(), unbounded()),
            image(3, 20, unbounded(), unbounded()),
            LayerDesc {
                level: Level::L1,
                ..desc(4, 41)
            },
        ]);
        let cover = |id: u64| s.layers.iter().find(|l| l.id == id).unwrap().cover.clone();
        let c = |start, end| Some(Cover { start, end });
        assert_eq!(cover(2), c(unbounded(), Bound::Excluded(b"m".to_vec())));
        assert_eq!(cover(1), c(Bound::Included(b"m".to_vec()), unbounded()));
        assert_eq!(cover(3), c(unbounded(), unbounded()));
        assert_eq!(cover(4), None);
        // Nothing older than the oldest image: reads start there.
        assert_eq!(s.gc_lsn, 20);
        // An L1 run below it: history is still there.
        let s = v2(vec![
            image(3, 20, unbounded(), unbounded()),
            LayerDesc {
                level: Level::L1,
                ..desc(4, 5)
            },
        ]);
        assert_eq!(s.gc_lsn, 0);
        // Written again in format 3, it reads back the same.
        assert_eq!(decode(p, &encode_file(&s)).unwrap().state, s);
    }

    #[test]
    fn a_flipped_bit_anywhere_is_an_error_naming_the_manifest() {
        let (bytes, _) = file(&edits());
        let p = Path::new("MANIFEST");
        for i in 0..bytes.len() {
            for bit in [0x01, 0x80] {
                let mut bad = bytes.clone();
                bad[i] ^= bit;
                match decode(p, &bad) {
                    Err(e) => assert!(
                        matches!(e, Error::Corruption(_) | Error::NotADatabase { .. })
                            || (i < HEADER_BYTES && matches!(e, Error::UnsupportedVersion { .. })),
                        "flip at {i}: {e}"
                    ),
                    Ok(l) => panic!("flip at {i} decoded: {l:?}"),
                }
            }
        }
    }

    #[test]
    fn a_torn_last_record_is_dropped_and_damage_before_it_is_corruption() {
        // The last edit spans sectors (a layer with long keys).
        let mut edits = edits();
        let long = Edit::Flushed {
            log: 3,
            layer: LayerDesc {
                key_min: vec![b'a'; 900],
                key_max: vec![b'z'; 900],
                ..desc(19, 40)
            },
            value_file_bytes: 0,
        };
        edits.push(long);
        let (bytes, all) = file(&edits);
        let (before, state) = file(&edits[..3]);
        let p = Path::new("MANIFEST");
        let len = u32::from_le_bytes(bytes[before.len()..][..4].try_into().unwrap()) as usize;
        let mark_end = before.len() + RECORD_HEADER_BYTES + len + RECORD_END_MAGIC.len();
        assert_eq!(bytes.len(), mark_end.next_multiple_of(RECORD_ALIGN_BYTES));
        // The last append cut anywhere: torn until its end mark is there.
        for cut in before.len()..bytes.len() {
            let loaded = decode(p, &bytes[..cut]).unwrap();
            if cut < mark_end {
                assert_eq!(loaded.state, state, "cut at {cut}");
                assert_eq!(
                    loaded.torn_at,
                    (cut > before.len()).then_some(before.len() as u64)
                );
            } else {
                assert_eq!((loaded.state, loaded.torn_at), (all.clone(), None));
            }
        }
        // Or its sectors lost (zeros): any one of those it spans, or all.
        for lost in (before.len()..mark_end).step_by(TORN_SECTOR_BYTES) {
            for to in [lost + TORN_SECTOR_BYTES, bytes.len()] {
                let mut zeroed = bytes.clone();
                zeroed[lost..to].fill(0);
                let loaded = decode(p, &zeroed).unwrap();
                assert_eq!(loaded.state, state, "zeroed from {lost} to {to}");
                assert_eq!(loaded.torn_at, Some(before.len() as u64));
            }
        }
        // Its padding zeroed: nothing lost.
        let mut zeroed = bytes.clone();
        zeroed[mark_end.next_multiple_of(TORN_SECTOR_BYTES)..].fill(0);
        assert_eq!(decode(p, &zeroed).unwrap().state, all);
        // A flipped bit in a sector that holds data is corruption, torn
        // or not.
        for at in (before.len()..mark_end).step_by(97) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(decode(p, &flipped).unwrap_err().is_corruption(), "{at}");
        }
        // A zeroed record before the last one is not a torn tail.
        let (one, _) = file(&edits[..1]);
        let mut holed = bytes.clone();
        holed[one.len()..one.len() + TORN_SECTOR_BYTES].fill(0);
        assert!(decode(p, &holed).unwrap_err().is_corruption());
        // Bytes after the last record that are not zero are corruption.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[7; 40]);
        assert!(decode(p, &longer).unwrap_err().is_corruption());
    }

    /// Issue 27's second shape: one zeroed sector held ten synced edits,
    /// all dropped as a torn tail. Now each edit has its own page, and a
    /// zeroed one before a whole one is corruption.
    #[test]
    fn a_zeroed_sector_drops_at_most_the_last_edit() {
        let p = Path::new("MANIFEST");
        let edits: Vec<Edit> = (10..40).map(Edit::AddLog).collect();
        let (bytes, all) = file(&edits);
        for sector in (0..bytes.len()).step_by(TORN_SECTOR_BYTES) {
            let mut zeroed = bytes.clone();
            zeroed[sector..sector + TORN_SECTOR_BYTES].fill(0);
            match decode(p, &zeroed) {
                Err(e) => assert!(
                    e.is_corruption() || matches!(e, Error::NotADatabase { .. }),
                    "{e}"
                ),
                Ok(l) if l.torn_at.is_some() => {
                    // Only the last edit, and only its first sector holds it.
                    let last = bytes.len() - RECORD_ALIGN_BYTES;
                    assert_eq!((sector, l.torn_at), (last, Some(last as u64)));
                    assert_eq!(l.state.logs.len(), all.logs.len() - 1);
                }
                Ok(l) => assert_eq!(l.state, all, "sector {sector}: padding"),
            }
        }
    }

    #[test]
    fn after_a_seal_nothing_is_dropped_and_nothing_follows() {
        let p = Path::new("MANIFEST");
        let (mut bytes, all) = file(&edits());
        let last = bytes.len() - RECORD_ALIGN_BYTES;
        bytes.extend(encode_seal_record(bytes.len() as u64));
        let loaded = decode(p, &bytes).unwrap();
        assert_eq!((&loaded.state, loaded.sealed), (&all, true));
        // The last edit's sectors lost: the seal after it says it was durable.
        let mut zeroed = bytes.clone();
        zeroed[last..last + TORN_SECTOR_BYTES].fill(0);
        assert!(decode(p, &zeroed).unwrap_err().is_corruption());
        // The seal lost: nothing else is.
        let mut zeroed = bytes.clone();
        let seal = bytes.len() - RECORD_ALIGN_BYTES;
        zeroed[seal..].fill(0);
        let loaded = decode(p, &zeroed).unwrap();
        assert_eq!((&loaded.state, loaded.sealed), (&all, false));
        // A record after the seal.
        let mut after = bytes.clone();
        after.extend(encode_edit_record(after.len() as u64, &Edit::AddLog(50)));
        assert!(decode(p, &after).unwrap_err().is_corruption());
    }

    #[test]
    fn version_3_records_back_to_back_are_read_with_their_torn_rule() {
        let p = Path::new("MANIFEST");
        let (_, start) = file(&[]);
        let mut bytes = encode_file_in(&start, FORMAT_V3);
        let mut state = start.clone();
        let mut before = (bytes.clone(), state.clone());
        // Format 3 holds no value files.
        let edits = edits().into_iter().map(|e| match e {
            Edit::Flushed { log, layer, .. } => Edit::Flushed {
                log,
                layer: LayerDesc {
                    values: Vec::new(),
                    ..layer
                },
                value_file_bytes: 0,
            },
            Edit::Compacted {
                remove,
                add,
                gc_lsn,
            } => Edit::Compacted {
                remove,
                add: add
                    .into_iter()
                    .map(|d| LayerDesc {
                        values: Vec::new(),
                        ..d
                    })
                    .collect(),
                gc_lsn,
            },
            e => e,
        });
        for e in edits {
            before = (bytes.clone(), state.clone());
            bytes.extend(frame_record(
                bytes.len() as u64,
                &encode_edit_in(&e, FORMAT_V3),
            ));
            state.apply(&e).unwrap();
        }
        assert_eq!(decode(p, &bytes).unwrap().state, state);
        let cut = before.0.len() + 5;
        let loaded = decode(p, &bytes[..cut]).unwrap();
        assert_eq!(
            (loaded.state, loaded.torn_at),
            (before.1, Some(before.0.len() as u64))
        );
        let mut holed = bytes.clone();
        holed[encode_file_in(&start, FORMAT_V3).len()..][..20].fill(0);
        assert!(decode(p, &holed).unwrap_err().is_corruption());
    }

    #[test]
    fn edits_that_do_not_fit_the_state_are_refused() {
        let mut s = file(&[]).1;
        assert!(s.apply(&Edit::AddLog(3)).is_err(), "listed twice");
        let flushed = |log, id| Edit::Flushed {
            log,
            layer: desc(id, 1),
            value_file_bytes: 0,
        };
        assert!(s.apply(&flushed(9, 10)).is_err(), "log not listed");
        assert!(s.apply(&flushed(2, 1)).is_err(), "layer id listed");
        let before = s.clone();
        s.apply(&flushed(2, 10)).unwrap();
        assert_eq!(s.next_file_id, 11);
        assert_ne!(s, before);
    }

    #[test]
    fn version_1_is_read() {
        let bytes = encode_v1(9, &[8], &[1, 3]);
        let loaded = decode(Path::new("MANIFEST"), &bytes).unwrap();
        assert_eq!(loaded.state.logs, [8]);
        assert_eq!(loaded.v1_deltas, [1, 3]);
        assert_eq!(loaded.state.next_file_id, 9);
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(decode(Path::new("MANIFEST"), &bad)
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn the_log_keeps_every_acknowledged_edit_across_failures_and_power_loss() {
        use crate::io::sim::{Fault, FaultError, SimStorage};
        let dir = Path::new("/db");
        let edit = |i: u64| {
            if i.is_multiple_of(2) {
                Edit::AddLog(100 + i)
            } else {
                Edit::Flushed {
                    log: 100 + i - 1,
                    layer: desc(200 + i, 10 * i),
                    value_file_bytes: 0,
                }
            }
        };
        let run = |fault: Option<Fault>, rollover_bytes_min: u64| {
            let sim = SimStorage::new(3);
            sim.create_dir_all(dir).unwrap();
            sim.sync_dir(Path::new("/")).unwrap();
            let (_, start) = file(&[]);
            let mut m =
                ManifestLog::create(Arc::new(sim.clone()), dir, IoStats::new(), start.clone())
                    .unwrap();
            m.rollover_bytes_min = rollover_bytes_min;
            if let Some(f) = fault {
                sim.inject(Fault {
                    at_op: sim.ops() + f.at_op,
                    ..f
                });
            }
            let mut acked = start;
            let mut in_flight = None;
            for i in 0..40 {
                let mut next = acked.clone();
                next.apply(&edit(i)).unwrap();
                if m.apply(edit(i)).is_err() && m.apply(edit(i)).is_err() {
                    in_flight = Some(next);
                    break;
                }
                acked = next;
                assert_eq!(m.state(), &acked);
            }
            sim.clear_faults();
            let found = load(&sim.power_loss(), dir).unwrap().unwrap().state;
            (acked, in_flight, found)
        };
        // 0: a rollover at every fourth edit or so.
        for rollover in [ROLLOVER_BYTES_MIN, 0] {
            let (acked, _, found) = run(None, rollover);
            assert_eq!(found, acked);
            assert_eq!(found.layers.len(), 21);
            for op in 1..120 {
                let (acked, in_flight, found) =
                    run(Some(Fault::once(op, FaultError::Eio)), rollover);
                assert_eq!(found, acked, "failed op {op}");
                assert!(in_flight.is_none());
                let (acked, in_flight, found) =
                    run(Some(Fault::from_op(op, FaultError::Eio)), rollover);
                assert!(
                    found == acked || Some(&found) == in_flight.as_ref(),
                    "power cut at op {op}: found {found:?}, acknowledged {acked:?}"
                );
            }
        }
    }

    #[test]
    fn own_file_names() {
        assert!(is_own_file(&log_name(5)));
        assert!(is_own_file(&delta_name(u64::MAX)));
        assert!(!is_own_file("notes.txt"));
        assert!(!is_own_file("MANIFEST"));
    }
}
