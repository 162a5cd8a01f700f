//! redb adapter (feature `redb`): a copy-on-write B-tree with no log, so
//! each batch is one transaction committed with `Durability::None` (no
//! fsync), the closest match to "logged, not synced". `sync` and `flush`
//! commit an empty transaction with `Durability::Immediate`, which makes
//! every earlier non-durable commit durable.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use redb::{Database, Durability, ReadableDatabase, TableDefinition};

use super::{Engine, EngineConfig, EngineKind};
use crate::workload::Batch;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("lab");
const DB_FILE: &str = "lab.redb";

pub struct RedbEngine {
    dir: PathBuf,
    db: Database,
}

pub fn open(config: &EngineConfig, dir: &Path) -> Result<Box<dyn Engine>> {
    let path = dir.join(DB_FILE);
    let mut builder = Database::builder();
    if let Some(bytes) = config.cache_bytes {
        builder.set_cache_size(usize::try_from(bytes).context("redb cache size")?);
    }
    let db = builder
        .create(&path)
        .with_context(|| format!("redb open {}", path.display()))?;
    let txn = db.begin_write()?;
    txn.open_table(TABLE)?;
    txn.commit()?;
    Ok(Box::new(RedbEngine {
        dir: dir.to_path_buf(),
        db,
    }))
}

impl RedbEngine {
    fn commit_durable(&self) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        txn.commit()?;
        Ok(())
    }
}

impl Engine for RedbEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Redb
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, batch: &Batch<'_>) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        {
            let mut table = txn.open_table(TABLE)?;
            for (k, v) in batch {
                table.insert(*k, *v)?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.commit_durable()
    }

    fn flush(&self) -> Result<()> {
        self.commit_durable()
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        Ok(table.get(key)?.map(|v| v.value().to_vec()))
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<u64> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let mut n = 0u64;
        for item in table.range(start..end)? {
            if n as usize >= limit {
                break;
            }
            let (_k, _v) = item?;
            n += 1;
        }
        Ok(n)
    }

    // `compact` keeps the default: `Database::compact` needs `&mut self`
    // and the lab shares engines by reference, so redb's is not measured.

    fn close(self: Box<Self>) -> Result<()> {
        self.commit_durable()?;
        drop(self);
        Ok(())
    }
}
