//! `OsStorage`: the [`Storage`] of the operating system — files are
//! [`IoFile`]s (modes, engines, statx alignment, statistics, the fallback
//! where O_DIRECT is refused), directories are the filesystem's, the lock is
//! flock.
//!
//! The default storage of a database (`Options::storage` empty). Stateless:
//! every call goes straight to the kernel, so it is `Copy` and any number of
//! databases share it.

use super::file::{read_batch_each, IoFile};
use super::mode::FileOptions;
use super::ring::UringRing;
use super::stats::IoStats;
use super::storage::{
    EntryKind, ReadRequest, ReadRing, Storage, StorageFile, StorageLock, SyncRing,
};
use crate::error::{Error, Result};
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

/// The operating system's files and directories.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsStorage;

impl Storage for OsStorage {
    fn create(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(IoFile::create(path, opts, stats)?))
    }

    fn open(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(IoFile::open(path, opts, stats)?))
    }

    fn read_batch_each(
        &self,
        reqs: &[ReadRequest<'_>],
        done: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        read_batch_each(reqs, done)
    }

    /// io_uring with registered buffers, whatever the engine of the
    /// database's synchronous calls (reads in flight need a ring); where
    /// the kernel refuses a ring (io_uring disabled), each read is made
    /// when it is pushed.
    fn read_ring(&self, slots: usize) -> Result<Box<dyn ReadRing>> {
        match UringRing::new(slots) {
            Ok(ring) => Ok(Box::new(ring)),
            Err(Error::InvalidInput(e)) => Err(e.into()),
            Err(_) => Ok(Box::new(SyncRing::new(slots)?)),
        }
    }

    fn entry_kind(&self, path: &Path) -> Result<Option<EntryKind>> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Ok(Some(EntryKind::Dir)),
            Ok(_) => Ok(Some(EntryKind::File)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path, "stat", e)),
        }
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<OsString>> {
        std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir, "list directory", e))?
            .map(|entry| {
                entry
                    .map(|e| e.file_name())
                    .map_err(|e| Error::io(dir, "list directory", e))
            })
            .collect()
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, "remove", e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(to, "rename", e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let f = File::open(dir).map_err(|e| Error::io(dir, "open directory", e))?;
        f.sync_all()
            .map_err(|e| Error::io(dir, "fsync directory", e))
    }

    fn lock(&self, path: &Path) -> Result<StorageLock> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, "open lock file", e))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(Error::io(
                path,
                "lock (is another process using this database?)",
                std::io::Error::last_os_error(),
            ));
        }
        // The lock lives as long as the descriptor.
        Ok(StorageLock::new(f))
    }
}
