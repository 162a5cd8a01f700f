//! fjall adapter (feature `fjall`): one keyspace, journal not synced per
//! batch, compression off. `flush` rotates the memtable and waits for the
//! table to be written; there is no direct I/O switch.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{Engine, EngineConfig, EngineKind};
use crate::workload::Batch;

pub struct FjallEngine {
    dir: PathBuf,
    db: Database,
    keyspace: Keyspace,
}

pub fn open(config: &EngineConfig, dir: &Path) -> Result<Box<dyn Engine>> {
    let mut builder = Database::builder(dir).worker_threads(2);
    if let Some(bytes) = config.cache_bytes {
        builder = builder.cache_size(bytes);
    }
    let db = builder
        .open()
        .with_context(|| format!("fjall open {}", dir.display()))?;
    let keyspace = db.keyspace("lab", || {
        KeyspaceCreateOptions::default().data_block_compression_policy(
            fjall::config::CompressionPolicy::all(fjall::CompressionType::None),
        )
    })?;
    Ok(Box::new(FjallEngine {
        dir: dir.to_path_buf(),
        db,
        keyspace,
    }))
}

impl Engine for FjallEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Fjall
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, batch: &Batch<'_>) -> Result<()> {
        let mut wb = self.db.batch();
        for (k, v) in batch {
            wb.insert(&self.keyspace, *k, *v);
        }
        wb.commit()?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncData)?;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.keyspace.rotate_memtable_and_wait()?;
        self.db.persist(PersistMode::SyncData)?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.keyspace.get(key)?.map(|v| v.to_vec()))
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<u64> {
        let mut n = 0u64;
        for guard in self.keyspace.range(start..end) {
            if n as usize >= limit {
                break;
            }
            let (_k, _v) = guard.into_inner()?;
            n += 1;
        }
        Ok(n)
    }

    fn compact(&self) -> Result<bool> {
        self.keyspace.major_compact()?;
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncData)?;
        drop(self);
        Ok(())
    }
}
