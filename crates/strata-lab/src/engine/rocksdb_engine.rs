//! RocksDB adapter (the `rocksdb` crate, feature `rocksdb`).
//!
//! Default options plus: WAL on, no sync per write (LAB.md §1), no
//! compression (the lab's values are incompressible anyway), statistics on
//! for its own write accounting. Io modes map to `use_direct_reads` (Direct)
//! and additionally `use_direct_io_for_flush_and_compaction` (DirectRw); the
//! WAL itself is always buffered in RocksDB.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rocksdb::statistics::Ticker;
use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, Direction, IteratorMode, Options, WriteBatch,
    WriteOptions, DB,
};

use super::{Engine, EngineConfig, EngineKind, EngineWriteStats, LabIoMode};
use crate::workload::Batch;

pub struct RocksEngine {
    dir: PathBuf,
    db: DB,
    opts: Options,
}

pub fn open(config: &EngineConfig, dir: &Path) -> Result<Box<dyn Engine>> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_compression_type(DBCompressionType::None);
    opts.increase_parallelism(2);
    opts.enable_statistics();
    if let Some(bytes) = config.cache_bytes {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(
            usize::try_from(bytes).context("rocksdb block cache size")?,
        ));
        opts.set_block_based_table_factory(&table);
    }
    match config.io_mode {
        LabIoMode::Buffered | LabIoMode::Native => {}
        LabIoMode::Direct => opts.set_use_direct_reads(true),
        LabIoMode::DirectRw => {
            opts.set_use_direct_reads(true);
            opts.set_use_direct_io_for_flush_and_compaction(true);
        }
    }
    let db = DB::open(&opts, dir).with_context(|| format!("rocksdb open {}", dir.display()))?;
    Ok(Box::new(RocksEngine {
        dir: dir.to_path_buf(),
        db,
        opts,
    }))
}

impl Engine for RocksEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Rocksdb
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, batch: &Batch<'_>) -> Result<()> {
        let mut wb = WriteBatch::default();
        for (k, v) in batch {
            wb.put(k, v);
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(false);
        wo.disable_wal(false);
        self.db.write_opt(wb, &wo)?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.db.flush_wal(true)?;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_pinned(key)?.map(|v| v.to_vec()))
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<u64> {
        let mut n = 0u64;
        for item in self
            .db
            .iterator(IteratorMode::From(start, Direction::Forward))
        {
            let (k, _v) = item?;
            if &*k >= end || n as usize >= limit {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    fn compact(&self) -> Result<bool> {
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(true)
    }

    fn write_stats(&self) -> Option<EngineWriteStats> {
        Some(EngineWriteStats {
            log_bytes: self.opts.get_ticker_count(Ticker::WalFileBytes),
            flush_bytes: self.opts.get_ticker_count(Ticker::FlushWriteBytes),
            compaction_bytes: self.opts.get_ticker_count(Ticker::CompactWriteBytes),
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}
