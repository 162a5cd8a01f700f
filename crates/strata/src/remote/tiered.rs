//! The database's files wherever they are: on the local disk, or only in
//! the remote store (DESIGN.md, "Remote storage": the bucket is the
//! durable home, the disk a cache).
//!
//! [`TieredStorage`] is the storage a database with a remote store runs
//! on: the local storage for everything, except that a layer or value file
//! the directory does not hold and the store does ([`RemoteObjects`]: the
//! objects of the index the writer claimed, and every one it uploaded
//! since) is still a file of the directory: it is listed, it exists, and
//! it opens as a [`RemoteFile`], whose reads are ranged GETs of its
//! object. So a database opened from its bucket into an empty directory
//! downloads no layer at open: each layer's footer, block index and filter
//! are read when it is first opened (a few GETs), and then a get that
//! reaches the layer costs one ranged GET of the block it needs (no
//! local copy is kept; the block cache keeps blocks as it does for local
//! files). Every byte read from a remote file is checked by the reader, as
//! a local file's are.
//!
//! Invariants: a local file wins over the object of the same name; a
//! remote file is read-only; a name leaves [`RemoteObjects`] when the
//! database removes the file (`remove_file`: the last holder of a layer
//! that an edit removed let it go), and the uploader deletes an object
//! no index lists only once its name has left (see `upload`): a reader
//! of an old version never finds its object gone.

use super::index::IndexedObject;
use super::RemoteStore;
use crate::error::{Error, Result};
use crate::io::ReadRing;
use crate::io::{
    BlockFile, EntryKind, FileClass, FileOptions, IoMode, IoStats, ReadRequest, Storage,
    StorageFile, StorageLock,
};
use std::any::Any;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The objects of the store that are files of the database, by file name,
/// and the reads made of them.
pub(crate) struct RemoteObjects {
    store: Arc<dyn RemoteStore>,
    objects: Mutex<HashMap<String, IndexedObject>>,
    gets: AtomicU64,
    get_bytes: AtomicU64,
    /// Local copies removed to stay within the local budget.
    evicted: AtomicU64,
}

// The C API catches panics around calls into a database; after one, the
// objects are what the last call left, as after an error (as `Remote`).
impl std::panic::UnwindSafe for RemoteObjects {}
impl std::panic::RefUnwindSafe for RemoteObjects {}

impl RemoteObjects {
    /// The objects `listed` (a claimed index's) of `store`.
    pub(crate) fn new(store: Arc<dyn RemoteStore>, listed: &[IndexedObject]) -> Arc<Self> {
        Arc::new(RemoteObjects {
            store,
            objects: Mutex::new(listed.iter().map(|o| (o.name.clone(), o.clone())).collect()),
            gets: AtomicU64::new(0),
            get_bytes: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, IndexedObject>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn store(&self) -> &Arc<dyn RemoteStore> {
        &self.store
    }

    /// Records an object just uploaded.
    pub(crate) fn insert(&self, object: IndexedObject) {
        self.lock().insert(object.name.clone(), object);
    }

    /// Whether the database still has the file `name` (locally or not).
    pub(crate) fn holds(&self, name: &str) -> bool {
        self.lock().contains_key(name)
    }

    pub(crate) fn get(&self, name: &str) -> Option<IndexedObject> {
        self.lock().get(name).cloned()
    }

    /// Ranged GETs made of remote files, their bytes, and the local
    /// copies evicted.
    pub(crate) fn reads(&self) -> (u64, u64, u64) {
        (
            self.gets.load(Ordering::Relaxed),
            self.get_bytes.load(Ordering::Relaxed),
            self.evicted.load(Ordering::Relaxed),
        )
    }
}

/// The storage of a database with a remote store (see the module comment).
pub(crate) struct TieredStorage {
    local: Arc<dyn Storage>,
    dir: PathBuf,
    objects: Arc<RemoteObjects>,
}

impl std::fmt::Debug for TieredStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TieredStorage({:?} + {})",
            self.local,
            self.objects.store.url()
        )
    }
}

impl TieredStorage {
    pub(crate) fn new(local: Arc<dyn Storage>, dir: &Path, objects: Arc<RemoteObjects>) -> Self {
        TieredStorage {
            local,
            dir: dir.to_owned(),
            objects,
        }
    }

    /// The name of `path` when it is a file of the database's directory.
    fn name_in_dir<'p>(&self, path: &'p Path) -> Option<&'p str> {
        if path.parent() != Some(self.dir.as_path()) {
            return None;
        }
        path.file_name().and_then(|n| n.to_str())
    }

    /// Whether the store holds `path`'s file (uploaded, or listed by the
    /// claimed index): a local copy of it is one [`Self::evict`] may remove.
    pub(crate) fn in_store(&self, path: &Path) -> bool {
        self.name_in_dir(path)
            .is_some_and(|n| self.objects.holds(n))
    }

    /// Whether `path` is on the local disk.
    pub(crate) fn is_local(&self, path: &Path) -> Result<bool> {
        Ok(self.local.entry_kind(path)?.is_some())
    }

    /// Removes the local copy of a file the store holds (its name stays a
    /// file of the database, read from the store from now on).
    pub(crate) fn evict(&self, path: &Path) -> Result<()> {
        self.local.remove_file(path)?;
        self.objects.evicted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The object `path` names when it is a file of the database's
    /// directory that only the store holds.
    fn remote_only(&self, path: &Path) -> Result<Option<IndexedObject>> {
        let Some(object) = self.name_in_dir(path).and_then(|n| self.objects.get(n)) else {
            return Ok(None);
        };
        Ok(match self.local.entry_kind(path)? {
            Some(_) => None,
            None => Some(object),
        })
    }
}

impl Storage for TieredStorage {
    fn create(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>> {
        self.local.create(path, opts, stats)
    }

    fn open(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>> {
        match self.remote_only(path)? {
            Some(object) => Ok(Arc::new(RemoteFile {
                path: path.to_owned(),
                object,
                class: opts.class,
                objects: Arc::clone(&self.objects),
            })),
            None => self.local.open(path, opts, stats),
        }
    }

    fn read_batch_each(
        &self,
        reqs: &[ReadRequest<'_>],
        done: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        // The local storage batches its own files and reads any other one
        // by itself.
        self.local.read_batch_each(reqs, done)
    }

    fn read_ring(&self, slots: usize) -> Result<Box<dyn ReadRing>> {
        self.local.read_ring(slots)
    }

    fn entry_kind(&self, path: &Path) -> Result<Option<EntryKind>> {
        match self.local.entry_kind(path)? {
            Some(kind) => Ok(Some(kind)),
            None => Ok(self.remote_only(path)?.map(|_| EntryKind::File)),
        }
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<OsString>> {
        let mut names = self.local.list_dir(dir)?;
        if dir == self.dir {
            let local: std::collections::HashSet<OsString> = names.iter().cloned().collect();
            let remote: Vec<OsString> = self
                .objects
                .lock()
                .keys()
                .map(OsString::from)
                .filter(|n| !local.contains(n))
                .collect();
            names.extend(remote);
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.local.create_dir_all(dir)
    }

    /// Removes the local file, if there is one, and lets the object go:
    /// the uploader may delete it once no index lists it.
    fn remove_file(&self, path: &Path) -> Result<()> {
        let name = self.name_in_dir(path);
        let held = name.is_some_and(|n| self.objects.lock().remove(n).is_some());
        match self.local.remove_file(path) {
            // Only the store held it (evicted, or never downloaded).
            Err(e) if held && crate::io::is_not_found(&e) => Ok(()),
            removed => removed,
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.local.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.local.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> Result<StorageLock> {
        self.local.lock(path)
    }
}

impl std::fmt::Debug for RemoteObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteObjects({})", self.store.url())
    }
}

/// A file of the database that only the store holds: read-only, each read
/// one ranged GET of its object.
#[derive(Debug)]
pub(crate) struct RemoteFile {
    path: PathBuf,
    object: IndexedObject,
    class: FileClass,
    objects: Arc<RemoteObjects>,
}

impl RemoteFile {
    fn read_only(&self, op: &'static str) -> Error {
        Error::io(
            &self.path,
            op,
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "a file only the remote store holds ({}) is read-only",
                    self.object.key
                ),
            ),
        )
    }
}

impl BlockFile for RemoteFile {
    fn write_all_at(&self, _buf: &[u8], _offset: u64) -> Result<()> {
        Err(self.read_only("write"))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let len = self.object.bytes;
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(len - offset);
        let bytes = self
            .objects
            .store
            .get_range(&self.object.key, offset..offset + n)?;
        self.objects.gets.fetch_add(1, Ordering::Relaxed);
        self.objects
            .get_bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if bytes.len() as u64 != n {
            return Err(crate::io::short_read(
                &self.path,
                format!(
                    "asked {n} bytes of {} at {offset}, got {}",
                    self.object.key,
                    bytes.len()
                ),
            ));
        }
        buf[..bytes.len()].copy_from_slice(&bytes);
        Ok(bytes.len())
    }

    fn sync_data(&self) -> Result<()> {
        Ok(())
    }

    fn set_len(&self, _len: u64) -> Result<()> {
        Err(self.read_only("set_len"))
    }

    fn alignment(&self) -> usize {
        1
    }

    fn direct_writes(&self) -> bool {
        false
    }
}

impl StorageFile for RemoteFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn mode(&self) -> IoMode {
        IoMode::Buffered
    }

    fn class(&self) -> FileClass {
        self.class
    }

    fn len(&self) -> Result<u64> {
        Ok(self.object.bytes)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
