//! `Stats`: what `Db::stats` reports, and how it is gathered from the
//! engine's state (the current version, the counters the write path,
//! flushes, compactions and the io layer keep).
//!
//! Called by `Db::stats` only. `Stats` serializes itself (its document is
//! written down on the type). Invariants: gathering takes no lock longer
//! than a copy (the version's `Arc`, the signals' errors), so it may be
//! called at any time from any thread; counters are read one by one
//! (relaxed), so a `Stats` is consistent per field, not across fields.

use super::DbInner;
use crate::io::{IoMode, IoStatsSnapshot};
use crate::types::Lsn;
use serde::Serialize;
use std::sync::atomic::Ordering;

/// What `Db::stats` reports: sizes now, and counters since this open.
///
/// # Its document
///
/// `Stats` serializes (serde) as one object: the document that
/// `strata db DIR stats --json` and the C API's `strata_stats_json` print
/// (`serde_json::to_value(&stats)`). Its keys are a promise: snake_case,
/// stable (keys are added, never renamed or dropped), every size in raw
/// bytes and every count as an integer, an absent error as `null`. The
/// keys are the fields below, under their own names:
///
/// ```text
/// last_lsn                                       integer
/// io_mode                                        "buffered" | "direct" | "direct-rw"
/// open_layer_bytes, frozen_layers                integer
/// delta_layers, delta_bytes                      integer
/// l0_layers, l1_runs, l1_layers, image_runs      integer
/// compactions                                    integer
/// compaction_write_bytes, compaction_read_bytes  integer
/// compaction_error, flush_error                  string or null
/// index_memory_bytes                             integer
/// layer_readers_open, layer_readers_closed       integer
/// block_cache_bytes, block_cache_hits,
///   block_cache_misses                           integer
/// point_lookups, point_lookup_reads              integer
/// read_retries                                   integer
/// flush_memory_peak_bytes, flush_read_bytes      integer
/// log_memory_bytes                               integer
/// value_files, value_file_bytes, value_live_bytes integer
/// value_relocated_bytes                          integer
/// io.<class>.<kind>.ops, io.<class>.<kind>.bytes integer
/// io.<class>.read.retries                        integer
/// ```
///
/// `<class>` is every [`FileClass`](crate::io::FileClass) by name (`log`,
/// `delta`, `image`, `manifest`, `other`) and `<kind>` every
/// [`OpKind`](crate::io::OpKind) by name (`read`, `write`, `sync`), zeros
/// included, so that a key never disappears; syncs move no bytes.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// The newest LSN written.
    pub last_lsn: Lsn,
    /// The io mode in effect (Buffered after a fallback).
    pub io_mode: IoMode,
    /// Bytes of the open in-memory layer's log.
    pub open_layer_bytes: u64,
    /// Frozen in-memory layers waiting for their flush.
    pub frozen_layers: usize,
    /// Delta layer files, L0 and L1.
    pub delta_layers: usize,
    /// Bytes of the delta layer files.
    pub delta_bytes: u64,
    /// L0 delta layers (flushed, not yet compacted).
    pub l0_layers: usize,
    /// L1 runs (one per compaction, image runs included) and their layer
    /// files.
    pub l1_runs: usize,
    pub l1_layers: usize,
    /// Of the runs, the image runs (one version per key at one LSN, over
    /// the key ranges of their files' covers).
    pub image_runs: usize,
    /// Compactions done since open.
    pub compactions: u64,
    /// Bytes of the layer files compaction jobs wrote since open (L1 runs
    /// and images; not the flushes' L0 layers): each output's length,
    /// counted once it is synced, whether its job then succeeded or not
    /// (the device may see a little more: a direct write pads the last
    /// block). What RocksDB's `COMPACT_WRITE_BYTES` ticker counts.
    pub compaction_write_bytes: u64,
    /// Bytes of the data blocks compaction jobs read from their input
    /// layer files since open (not the reads that open an input file, nor
    /// the read-back that checks each output, nor reads made again).
    pub compaction_read_bytes: u64,
    /// The last background compaction's error, until one succeeds.
    pub compaction_error: Option<String>,
    /// The last background flush's error, until one succeeds.
    pub flush_error: Option<String>,
    /// Memory of in-memory indexes, delta block indexes and bloom filters.
    pub index_memory_bytes: usize,
    /// Layer files whose reader (index and bloom filter) is open, and
    /// readers closed since open to keep their memory within
    /// `Options::index_memory_bytes_max`.
    pub layer_readers_open: usize,
    pub layer_readers_closed: u64,
    /// Bytes of blocks in the block cache, and its hits and misses since
    /// open (point reads of layer files).
    pub block_cache_bytes: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Keys looked up by `get` and `multi_get` (and their `_at` and
    /// snapshot forms) since open, and the data blocks those lookups read
    /// from layer files: `point_lookup_reads / point_lookups` is the
    /// engine's own device reads per get. Not counted: a layer file's
    /// first open (its index and bloom filter, read once), scans, and
    /// background jobs.
    pub point_lookups: u64,
    pub point_lookup_reads: u64,
    /// Reads made again, since open, because what a read returned failed
    /// its check (a checksum, the structure): each such read is read once
    /// more, and the second result stands (`io::read_verified`). Nonzero
    /// means the storage returned other bytes than it stored at least once;
    /// by file class in `io.read_retries(class)`. Not counted: the
    /// manifest's read at open, before the statistics start.
    pub read_retries: u64,
    /// The most memory a flush's copy of a frozen log held at once since
    /// open (its window of entries, two read requests, one record: at most
    /// `Options::flush_memory_bytes` plus about 2 MiB, or one entry larger
    /// than that), and the log bytes flushes read (a log of random keys is
    /// read once per window, see `Options::flush_memory_bytes`).
    pub flush_memory_peak_bytes: u64,
    pub flush_read_bytes: u64,
    /// Bytes the open and frozen layers keep their logs' bytes in for
    /// their flush (at most `Options::log_memory_bytes`).
    pub log_memory_bytes: u64,
    /// Value files (logs kept for the large values layers point into:
    /// `Options::large_value_bytes`), their bytes, and the bytes of them
    /// that pointers still hold (each file's at most its bytes; the rest
    /// is garbage, which compaction moves the live values out of past
    /// `Options::value_garbage_percent`).
    pub value_files: usize,
    pub value_file_bytes: u64,
    pub value_live_bytes: u64,
    /// Bytes of values compaction moved out of value files since open.
    pub value_relocated_bytes: u64,
    /// Operations and bytes by kind and file class, since open.
    pub io: IoStatsSnapshot,
    /// The remote store's uploads (`None`: the database has none).
    pub remote: Option<super::RemoteStats>,
}

impl DbInner {
    pub(super) fn stats(&self) -> Stats {
        let version = self.version().ok();
        let mut stats = Stats {
            last_lsn: self.visible_lsn.load(Ordering::Acquire),
            io_mode: self.opts.io_mode,
            open_layer_bytes: 0,
            frozen_layers: 0,
            delta_layers: 0,
            delta_bytes: 0,
            l0_layers: 0,
            l1_runs: 0,
            l1_layers: 0,
            image_runs: 0,
            compactions: self.compactions.load(Ordering::Relaxed),
            compaction_write_bytes: self.compaction_bytes.written.load(Ordering::Relaxed),
            compaction_read_bytes: self.compaction_bytes.read.load(Ordering::Relaxed),
            compaction_error: self.compaction.error(),
            flush_error: self.flush.error(),
            index_memory_bytes: 0,
            layer_readers_open: 0,
            layer_readers_closed: self.layer_io.readers.closed(),
            block_cache_bytes: 0,
            block_cache_hits: 0,
            block_cache_misses: 0,
            point_lookups: self.point_lookups.load(Ordering::Relaxed),
            point_lookup_reads: self.layer_io.point_reads.load(Ordering::Relaxed),
            read_retries: 0,
            flush_memory_peak_bytes: self.flush_memory_peak.load(Ordering::Relaxed),
            flush_read_bytes: self.flush_read_bytes.load(Ordering::Relaxed),
            log_memory_bytes: self.log_memory.used_bytes(),
            value_files: 0,
            value_file_bytes: 0,
            value_live_bytes: 0,
            value_relocated_bytes: self.compaction_bytes.relocated.load(Ordering::Relaxed),
            io: self.stats.snapshot(),
            remote: self.remote_stats().or_else(|| self.follower_stats()),
        };
        stats.read_retries = stats.io.read_retries_total();
        if let Some(cache) = &self.layer_io.cache {
            (
                stats.block_cache_bytes,
                stats.block_cache_hits,
                stats.block_cache_misses,
            ) = cache.stats();
        }
        if let Some(v) = version {
            stats.open_layer_bytes = v.open.size_bytes();
            stats.io_mode = v.open.file().mode();
            stats.frozen_layers = v.frozen.len();
            stats.delta_layers = v.layers().count();
            stats.delta_bytes = v.layers().map(|d| d.desc.bytes).sum();
            stats.l0_layers = v.l0.len();
            stats.value_files = v.values.len();
            stats.value_file_bytes = v.values.values().map(|f| f.bytes).sum();
            stats.value_live_bytes = v
                .value_live_bytes()
                .iter()
                .map(|(id, &live)| v.values.get(id).map_or(0, |f| live.min(f.bytes)))
                .sum();
            stats.l1_runs = v.runs.len();
            stats.image_runs = v.runs.iter().filter(|r| r.image).count();
            stats.l1_layers = v.runs.iter().map(|r| r.layers.len()).sum();
            stats.layer_readers_open = v.layers().filter(|d| d.open_reader().is_some()).count();
            stats.index_memory_bytes = std::iter::once(&v.open)
                .chain(&v.frozen)
                .map(|l| l.index_memory_bytes())
                .sum::<usize>()
                + self.layer_io.readers.bytes();
        }
        stats
    }
}
