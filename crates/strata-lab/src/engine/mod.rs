//! The `Engine` trait every measured engine implements, and the registry of
//! adapters (strata and the peers).
//!
//! Adapters map the lab's vocabulary onto each engine as faithfully as its API
//! allows, at the same durability at the same point for every engine (LAB.md:
//! like for like):
//! - `write` is one atomic batch with the engine's log on and no sync;
//! - `freeze` ends "write delta = No": every write durable in the engine's
//!   log (strata freezes its open layer, which fdatasyncs its log; the peers
//!   sync their WAL/journal, or commit durably where they have no log);
//! - `flush` ends "write delta = Yes": the in-memory data written out as a
//!   table/layer and synced (a durable commit for the B-trees).
//!
//! [`describe_options`] records each engine's settings and its durability
//! at each point, for the results and the report. Engines are shared by
//! reference across threads (one writer, any number of readers), hence
//! `Send + Sync`.

use std::path::Path;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::workload::Batch;

#[cfg(feature = "fjall")]
mod fjall_engine;
#[cfg(feature = "lmdb")]
mod lmdb_engine;
#[cfg(feature = "redb")]
mod redb_engine;
#[cfg(feature = "rocksdb")]
mod rocksdb_engine;
mod strata_engine;

/// The engines the lab knows, compiled in or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Strata,
    Rocksdb,
    Fjall,
    Redb,
    Lmdb,
}

impl EngineKind {
    pub const ALL: [EngineKind; 5] = [
        EngineKind::Strata,
        EngineKind::Rocksdb,
        EngineKind::Fjall,
        EngineKind::Redb,
        EngineKind::Lmdb,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Strata => "strata",
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Fjall => "fjall",
            EngineKind::Redb => "redb",
            EngineKind::Lmdb => "lmdb",
        }
    }

    pub fn parse(name: &str) -> Result<EngineKind> {
        match EngineKind::ALL.iter().find(|k| k.name() == name.trim()) {
            Some(kind) => Ok(*kind),
            None => bail!("unknown engine {name:?}; known: strata, rocksdb, fjall, redb, lmdb"),
        }
    }

    /// Whether this binary was built with the engine's adapter.
    pub fn is_compiled(self) -> bool {
        match self {
            EngineKind::Strata => true,
            EngineKind::Rocksdb => cfg!(feature = "rocksdb"),
            EngineKind::Fjall => cfg!(feature = "fjall"),
            EngineKind::Redb => cfg!(feature = "redb"),
            EngineKind::Lmdb => cfg!(feature = "lmdb"),
        }
    }

    /// The cargo feature that compiles this adapter in.
    pub fn feature(self) -> &'static str {
        match self {
            EngineKind::Strata => "",
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Fjall => "fjall",
            EngineKind::Redb => "redb",
            EngineKind::Lmdb => "lmdb",
        }
    }

    /// The io modes this engine can be asked for. Engines without a direct
    /// I/O switch run once, in their native mode.
    pub fn io_modes(self) -> &'static [LabIoMode] {
        match self {
            EngineKind::Strata | EngineKind::Rocksdb => {
                &[LabIoMode::Buffered, LabIoMode::Direct, LabIoMode::DirectRw]
            }
            _ => &[LabIoMode::Native],
        }
    }

    /// The mode a single-configuration experiment (bulk) uses.
    pub fn default_io_mode(self) -> LabIoMode {
        match self {
            EngineKind::Strata => LabIoMode::DirectRw,
            EngineKind::Rocksdb => LabIoMode::Buffered,
            _ => LabIoMode::Native,
        }
    }
}

/// The io mode an engine runs in: strata's three modes (RocksDB maps them to
/// `use_direct_reads` / `use_direct_io_for_flush_and_compaction`), or the
/// engine's only way for engines without a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LabIoMode {
    Buffered,
    Direct,
    DirectRw,
    Native,
}

impl LabIoMode {
    pub fn name(self) -> &'static str {
        match self {
            LabIoMode::Buffered => "Buffered",
            LabIoMode::Direct => "Direct",
            LabIoMode::DirectRw => "DirectRw",
            LabIoMode::Native => "native",
        }
    }

    pub fn parse(name: &str) -> Result<LabIoMode> {
        Ok(match name {
            "Buffered" => LabIoMode::Buffered,
            "Direct" => LabIoMode::Direct,
            "DirectRw" => LabIoMode::DirectRw,
            "native" => LabIoMode::Native,
            other => bail!("unknown io mode {other:?}"),
        })
    }
}

/// How to open an engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineConfig {
    pub kind: EngineKind,
    pub io_mode: LabIoMode,
    /// The engine's own block or page cache, bytes, where it has one
    /// (RocksDB's block cache, fjall's cache, redb's cache); `None`: the
    /// engine's default. LMDB and strata keep no cache of their own.
    #[serde(default)]
    pub cache_bytes: Option<u64>,
}

impl EngineConfig {
    /// `kind` in `io_mode` with its default cache.
    pub fn new(kind: EngineKind, io_mode: LabIoMode) -> EngineConfig {
        EngineConfig {
            kind,
            io_mode,
            cache_bytes: None,
        }
    }
}

/// Bytes an engine says it wrote, by its own accounting (not every engine
/// keeps one).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct EngineWriteStats {
    /// Log / WAL / journal bytes.
    pub log_bytes: u64,
    /// Bytes of tables / layers written by flushes.
    pub flush_bytes: u64,
    /// Bytes written by compaction.
    pub compaction_bytes: u64,
}

impl EngineWriteStats {
    pub fn total_bytes(&self) -> u64 {
        self.log_bytes + self.flush_bytes + self.compaction_bytes
    }
}

/// One storage engine under measurement.
pub trait Engine: Send + Sync {
    fn kind(&self) -> EngineKind;
    /// The directory the engine was opened in (it owns all of it).
    fn dir(&self) -> &Path;
    /// Bytes the engine's files occupy on disk (allocated blocks).
    fn bytes_on_disk(&self) -> Result<u64> {
        Ok(crate::sys::dir_size(self.dir())?.0)
    }
    /// Applies one batch atomically, logged, not synced.
    fn write(&self, batch: &Batch<'_>) -> Result<()>;
    /// Makes every write so far durable.
    fn sync(&self) -> Result<()>;
    /// Ends "write delta = No": every write so far durable in the engine's
    /// log (strata also closes its open in-memory layer).
    fn freeze(&self) -> Result<()> {
        self.sync()
    }
    /// Ends "write delta = Yes": in-memory data written out as a table /
    /// layer (or committed durably for B-trees), synced, waited for.
    fn flush(&self) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Visits `[start, end)` in key order; returns the entries seen, stopping
    /// after `limit`.
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<u64>;
    /// Runs a full compaction and waits; `false` if the engine has none.
    fn compact(&self) -> Result<bool> {
        Ok(false)
    }
    /// The engine's own write accounting, if it keeps one.
    fn write_stats(&self) -> Option<EngineWriteStats> {
        None
    }
    /// The engine's own point-lookup accounting, if it keeps one: (keys
    /// looked up, data blocks read from its files for them) since open.
    fn point_lookup_stats(&self) -> Option<(u64, u64)> {
        None
    }
    /// How strata served its gets since open (strata only): its cache hit
    /// ratio ([`crate::get_reads`]).
    fn get_reads(&self) -> Option<crate::get_reads::GetReads> {
        None
    }
    /// The shape of the engine's tree and its own memory, if it reports
    /// them (what a phase leaves behind: a backlog, an index outgrowing
    /// the memory budget).
    fn shape(&self) -> Option<EngineShape> {
        None
    }
    fn close(self: Box<Self>) -> Result<()>;
}

/// What an engine reports of its tree and memory at a point in time.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct EngineShape {
    /// Layers (tables) waiting for a compaction at the top of the tree,
    /// and in-memory layers waiting for their flush.
    pub l0_layers: u64,
    pub frozen_layers: u64,
    /// Sorted runs below L0.
    pub runs: u64,
    /// Memory of the engine's indexes and filters, and of its block cache.
    pub index_memory_bytes: u64,
    pub block_cache_bytes: u64,
    /// Compactions done since open.
    pub compactions: u64,
}

/// The options each adapter opens its engine with, for the results JSON.
pub fn describe_options(kind: EngineKind) -> serde_json::Value {
    match kind {
        EngineKind::Strata => {
            let o = strata::Options::default();
            serde_json::json!({
                "io_mode": "per row",
                "io_engine": format!("{:?}", o.io_engine),
                "fallback_to_buffered": false,
                "layer_size_bytes_max": o.layer_size_bytes_max,
                "writer_buffer_bytes": o.writer_buffer_bytes,
                "delta_block_bytes": o.delta_block_bytes,
                "background_flush": o.background_flush,
                "write": "WriteBatch, sync=false",
                "durability": "WAL = the open layer's log (O_DIRECT, buffered in user space), no sync per batch; delta=No ends with the layer frozen and its log fdatasynced; delta=Yes with the L0 delta layer written, fdatasynced and in the synced manifest",
            })
        }
        EngineKind::Rocksdb => serde_json::json!({
            "io_mode": "Buffered; Direct = use_direct_reads; DirectRw = + use_direct_io_for_flush_and_compaction",
            "compression": "none",
            "increase_parallelism": 2,
            "write": "WriteBatch, WAL on, sync=false",
            "durability": "WAL on (written to the OS per batch), no sync per batch; delta=No ends with FlushWAL(sync=true); delta=Yes with a memtable flush (SST and MANIFEST synced)",
            "other": "defaults (64 MiB memtable)",
        }),
        EngineKind::Fjall => serde_json::json!({
            "compression": "none",
            "worker_threads": 2,
            "write": "batch commit, journal not synced",
            "durability": "journal on, no sync per batch; delta=No ends with persist(SyncData); delta=Yes with the memtable rotated and its table written, then persist(SyncData)",
        }),
        EngineKind::Redb => serde_json::json!({
            "write": "one transaction per batch, Durability::None",
            "sync": "empty Durability::Immediate commit",
            "durability": "no log: each batch a Durability::None commit (pages in the page cache); delta=No and delta=Yes both end with a Durability::Immediate commit (the B-tree fsynced)",
        }),
        EngineKind::Lmdb => serde_json::json!({
            "flags": "NO_SYNC | NO_READ_AHEAD",
            "map_size_bytes": 64u64 << 30,
            "write": "one write transaction per batch",
            "sync": "force_sync",
            "durability": "no log: MDB_NOSYNC commits (pages in the page cache); delta=No and delta=Yes both end with mdb_env_sync(force) (the B-tree fsynced)",
        }),
    }
}

/// Opens (creating if needed) an engine in `dir`.
pub fn open(config: &EngineConfig, dir: &Path) -> Result<Box<dyn Engine>> {
    std::fs::create_dir_all(dir)?;
    if !config.kind.io_modes().contains(&config.io_mode) {
        bail!(
            "{} cannot run in io mode {}",
            config.kind.name(),
            config.io_mode.name()
        );
    }
    match config.kind {
        EngineKind::Strata => strata_engine::open(config, dir),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => rocksdb_engine::open(config, dir),
        #[cfg(feature = "fjall")]
        EngineKind::Fjall => fjall_engine::open(config, dir),
        #[cfg(feature = "redb")]
        EngineKind::Redb => redb_engine::open(config, dir),
        #[cfg(feature = "lmdb")]
        EngineKind::Lmdb => lmdb_engine::open(config, dir),
        #[allow(unreachable_patterns)]
        kind => bail!(
            "engine {} is not compiled in: build with `--features {}`",
            kind.name(),
            kind.feature()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{for_each_batch, KeyLayout, ValueSource};

    /// strata and every compiled peer pass the same small round trip.
    fn round_trip(kind: EngineKind, io_mode: LabIoMode) {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let config = EngineConfig::new(kind, io_mode);
        let engine =
            open(&config, tmp.path()).unwrap_or_else(|err| panic!("{}: {err:#}", kind.name()));
        let values = ValueSource::new(100);
        for_each_batch(KeyLayout::Sequential, &values, 1000, |_, b| engine.write(b)).unwrap();
        engine.sync().unwrap();
        engine.flush().unwrap();
        let key = KeyLayout::Sequential.key(500);
        assert_eq!(
            engine.get(&key).unwrap().as_deref(),
            Some(values.value(500))
        );
        assert_eq!(engine.get(&KeyLayout::Sequential.key(5000)).unwrap(), None);
        let start = KeyLayout::Sequential.key(100);
        let end = KeyLayout::Sequential.key(200);
        assert_eq!(engine.scan(&start, &end, usize::MAX).unwrap(), 100);
        assert_eq!(engine.scan(&start, &end, 10).unwrap(), 10);
        engine.compact().unwrap();
        assert!(engine.bytes_on_disk().unwrap() > 0);
        engine.close().unwrap();
        // Reopen: everything is still there.
        let engine = open(&config, tmp.path()).unwrap();
        assert_eq!(
            engine.get(&key).unwrap().as_deref(),
            Some(values.value(500))
        );
        engine.close().unwrap();
    }

    /// strata's own accounting splits the layer bytes: compaction's writes
    /// count as compaction's (as RocksDB's `CompactWriteBytes`), not twice.
    #[test]
    fn strata_reports_compaction_writes_apart_from_the_flushes() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let config = EngineConfig::new(EngineKind::Strata, LabIoMode::DirectRw);
        let engine = open(&config, tmp.path()).unwrap();
        let values = ValueSource::new(100);
        for _ in 0..2 {
            for_each_batch(KeyLayout::Sequential, &values, 1000, |_, b| engine.write(b)).unwrap();
            engine.flush().unwrap();
        }
        let flushed = engine.write_stats().unwrap();
        assert_eq!(flushed.compaction_bytes, 0, "{flushed:?}");
        assert!(flushed.flush_bytes > 0, "{flushed:?}");
        assert!(engine.compact().unwrap());
        let compacted = engine.write_stats().unwrap();
        assert!(compacted.compaction_bytes > 0, "{compacted:?}");
        // The flushes' share grew by the manifest's edit and the padding
        // of the outputs' last blocks, not by what compaction wrote.
        let flush_growth = compacted.flush_bytes - flushed.flush_bytes;
        assert!(
            flush_growth < compacted.compaction_bytes / 2,
            "{flushed:?} then {compacted:?}"
        );
        assert_eq!(compacted.log_bytes, flushed.log_bytes);
        engine.close().unwrap();
    }

    #[test]
    fn every_compiled_engine_round_trips() {
        for kind in EngineKind::ALL {
            if kind.is_compiled() {
                for mode in kind.io_modes() {
                    round_trip(kind, *mode);
                }
            }
        }
    }
}
