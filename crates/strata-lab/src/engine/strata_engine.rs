//! strata adapter: `Db` with the io mode the experiment asks for (never a
//! silent fallback to buffered I/O: a filesystem that refuses O_DIRECT is an
//! error), the experiment's cache size as its block cache (else the
//! engine's default), no history kept (as the peers keep none: compaction
//! collects what an image covers), default options otherwise. `freeze` and `flush` are the engine's
//! own; write accounting comes from `Db::stats()`: the io counters by file
//! class, and the bytes compaction wrote (`compaction_write_bytes`, as
//! RocksDB's `CompactWriteBytes`), which the flushes' share leaves out.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use strata::io::{FileClass, OpKind};
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

use super::{Engine, EngineConfig, EngineKind, EngineShape, EngineWriteStats, LabIoMode};
use crate::workload::Batch;

pub struct StrataEngine {
    dir: PathBuf,
    db: Db,
}

pub fn open(config: &EngineConfig, dir: &Path) -> Result<Box<dyn Engine>> {
    let io_mode = match config.io_mode {
        LabIoMode::Buffered => IoMode::Buffered,
        LabIoMode::Direct => IoMode::Direct,
        LabIoMode::DirectRw | LabIoMode::Native => IoMode::DirectRw,
    };
    let opts = Options {
        io_mode,
        fallback_to_buffered: false,
        block_cache_bytes: config
            .cache_bytes
            .unwrap_or(strata::BLOCK_CACHE_BYTES_DEFAULT),
        // Like the peers, which keep no history: compaction may collect
        // every version an image covers.
        history_lsns: Some(0),
        ..Options::default()
    }
    // STRATA_IO_MODE / STRATA_IO_ENGINE override the lab's choice, as
    // they do the CLI's (the engine's `Db::open` takes its options as
    // given).
    .with_env_overrides()?;
    let db = Db::open(dir, opts).with_context(|| format!("strata open {}", dir.display()))?;
    Ok(Box::new(StrataEngine {
        dir: dir.to_path_buf(),
        db,
    }))
}

impl Engine for StrataEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Strata
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, batch: &Batch<'_>) -> Result<()> {
        let mut wb = WriteBatch::new();
        for (k, v) in batch {
            wb.put(k, v);
        }
        self.db.write(&wb, WriteOptions { sync: false })?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.db.sync()?;
        Ok(())
    }

    fn freeze(&self) -> Result<()> {
        self.db.freeze()?;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<u64> {
        let mut n = 0u64;
        for item in self.db.scan(start..end)? {
            if n as usize >= limit {
                break;
            }
            let (_k, _v) = item?;
            n += 1;
        }
        Ok(n)
    }

    fn compact(&self) -> Result<bool> {
        self.db.compact()?;
        Ok(true)
    }

    fn write_stats(&self) -> Option<EngineWriteStats> {
        let stats = self.db.stats();
        let written = |class| stats.io.bytes(class, OpKind::Write);
        // Layer files are the flushes' (L0) and compaction's (L1 runs,
        // images): the flushes' are what compaction did not write. The
        // engine counts compaction's outputs by their lengths, the io
        // layer by what reached the device (a direct write pads each
        // file's last block): that little stays with the flushes, and the
        // total is the device's.
        let layer_bytes = written(FileClass::Delta) + written(FileClass::Image);
        Some(EngineWriteStats {
            log_bytes: written(FileClass::Log),
            flush_bytes: layer_bytes.saturating_sub(stats.compaction_write_bytes)
                + written(FileClass::Manifest),
            compaction_bytes: stats.compaction_write_bytes,
        })
    }

    fn point_lookup_stats(&self) -> Option<(u64, u64)> {
        let stats = self.db.stats();
        Some((stats.point_lookups, stats.point_lookup_reads))
    }

    fn get_reads(&self) -> Option<crate::get_reads::GetReads> {
        Some(crate::get_reads::GetReads::of_stats(&self.db.stats()))
    }

    fn shape(&self) -> Option<EngineShape> {
        let stats = self.db.stats();
        let n = |v: usize| v as u64;
        Some(EngineShape {
            l0_layers: n(stats.l0_layers),
            frozen_layers: n(stats.frozen_layers),
            runs: n(stats.l1_runs),
            index_memory_bytes: n(stats.index_memory_bytes),
            block_cache_bytes: stats.block_cache_bytes,
            compactions: stats.compactions,
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.close()?;
        Ok(())
    }
}
