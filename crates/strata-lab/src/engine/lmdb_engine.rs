//! LMDB adapter through heed (feature `lmdb`): one write transaction per
//! batch, opened with `NO_SYNC` (commits reach the OS, not the disk) and
//! `NO_READ_AHEAD` (random reads of a map larger than memory), `NO_SYNC` the
//! closest match to "logged, not synced". `sync` and `flush` force a sync.
//! LMDB has no compaction and no direct I/O switch.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};

use super::{Engine, EngineConfig, EngineKind};
use crate::workload::Batch;

/// LMDB reserves its map up front (address space, not disk).
const MAP_SIZE_BYTES: usize = 64 << 30;

pub struct LmdbEngine {
    dir: PathBuf,
    env: Env,
    db: Database<Bytes, Bytes>,
}

pub fn open(_config: &EngineConfig, dir: &Path) -> Result<Box<dyn Engine>> {
    let mut options = EnvOpenOptions::new();
    options.map_size(MAP_SIZE_BYTES).max_dbs(1);
    // SAFETY: NO_SYNC only weakens durability after an OS crash (the lab
    // syncs explicitly where it measures durability); the directory is
    // private to this process, opened once.
    let env = unsafe {
        // NO_READ_AHEAD: LMDB reads through its map, and a page fault reads
        // around it by the device's readahead (8 MiB here): a database
        // larger than its memory budget thrashed (phases: 750 MB/s read).
        options.flags(EnvFlags::NO_SYNC | EnvFlags::NO_READ_AHEAD);
        options.open(dir)
    }
    .with_context(|| format!("lmdb open {}", dir.display()))?;
    let mut txn = env.write_txn()?;
    let db: Database<Bytes, Bytes> = env.create_database(&mut txn, Some("lab"))?;
    txn.commit()?;
    Ok(Box::new(LmdbEngine {
        dir: dir.to_path_buf(),
        env,
        db,
    }))
}

impl Engine for LmdbEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Lmdb
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, batch: &Batch<'_>) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        for (k, v) in batch {
            self.db.put(&mut txn, k, v)?;
        }
        txn.commit()?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.env.force_sync()?;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.env.force_sync()?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = self.env.read_txn()?;
        Ok(self.db.get(&txn, key)?.map(|v| v.to_vec()))
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<u64> {
        let txn = self.env.read_txn()?;
        let mut n = 0u64;
        let range = (
            std::ops::Bound::Included(start),
            std::ops::Bound::Excluded(end),
        );
        for item in self.db.range(&txn, &range)? {
            if n as usize >= limit {
                break;
            }
            let (_k, _v) = item?;
            n += 1;
        }
        Ok(n)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.env.force_sync()?;
        let env = self.env.clone();
        drop(self);
        env.prepare_for_closing().wait();
        Ok(())
    }
}
