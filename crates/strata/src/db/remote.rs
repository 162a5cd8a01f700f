//! The database's side of its remote store (`Options::remote`): opening
//! from the store, claiming a generation, starting the uploader, and
//! `Db::sync_remote`.
//!
//! At open, under the directory lock, before the manifest is read (the
//! steps numbered as they are checked; the restore comes last):
//! 1. (after the claim, step 3) a directory without a manifest is
//!    restored from the claimed index: its manifest, written to
//!    `MANIFEST.tmp`, synced and renamed into place (a crash before leaves
//!    no manifest: the next open restores again). No object is
//!    downloaded: the database runs on a `TieredStorage`, where the files
//!    the index lists and the directory does not hold are read from the
//!    store, a ranged GET a read, each byte checked by its reader;
//! 2. a directory that held a database already must have been the last
//!    writer: `REMOTE_GENERATION` records the generation it last claimed
//!    the store with and the token of its last open; a newest index of
//!    another generation that does not carry that token (another
//!    writer's) fenced it (`Error::Fenced`: reopen from the store into an
//!    empty directory), and a store whose newest index holds a database
//!    while the directory records nothing holds another database;
//! 3. the database takes a new generation (a number no other writer has)
//!    under a new token, recorded (synced) before and after, and claims
//!    the store: it puts the next index, the newest with its generation
//!    (`index::claim`), which fences the writer before it. A directory
//!    without a database is restored from that claim.
//!
//! The uploader then gets every version from the one opened on
//! (`VersionSet::set_uploader`).

use super::{Db, DbInner};
use crate::error::{Corruption, Error, InvalidInput, Result};
use crate::io::{FileClass, FileOptions, IoMode, IoStats, Storage};
use crate::manifest::{MANIFEST_NAME, MANIFEST_TMP_NAME};
use crate::remote::generation;
use crate::remote::index::{self, latest, RemoteIndex};
use crate::remote::tiered::RemoteObjects;
use crate::remote::upload::{UploadStatus, UploadTarget, Uploader};
use crate::remote::RemoteStore;
use crate::types::Lsn;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The file that records which generation this directory writes as.
pub(super) const GENERATION_NAME: &str = "REMOTE_GENERATION";

/// How long `sync_remote` waits while uploads keep failing.
const SYNC_PATIENCE: Duration = Duration::from_secs(30);

/// What an open settled with the remote store.
pub(super) struct Claimed {
    pub store: Arc<dyn RemoteStore>,
    /// The index this writer claimed the store with (see `index::claim`).
    pub index: RemoteIndex,
    /// The store's files of the database: the index's objects, then every
    /// upload.
    pub objects: Arc<RemoteObjects>,
}

fn small_file_opts(class: FileClass) -> FileOptions {
    FileOptions {
        mode: IoMode::Buffered,
        class,
        ..FileOptions::default()
    }
}

/// Writes `bytes` to `path` whole and syncs it (not its directory).
pub(super) fn write_synced(
    storage: &dyn Storage,
    path: &Path,
    bytes: &[u8],
    stats: &IoStats,
) -> Result<()> {
    let f = storage.create(path, &small_file_opts(FileClass::Other), stats)?;
    f.write_all_at(bytes, 0)?;
    f.sync_data()
}

/// What `REMOTE_GENERATION` records: the token this directory writes into
/// the generation objects it takes, and the newest generation its state is
/// known to go with (the one it took, or the newest there was when it was
/// restored). Written (synced) before every step that could leave the
/// store ahead of it: a restore, an acquire.
struct Record {
    token: String,
    base: u64,
}

impl Record {
    fn read(storage: &dyn Storage, dir: &Path, stats: &IoStats) -> Result<Option<Record>> {
        let path = dir.join(GENERATION_NAME);
        if storage.entry_kind(&path)?.is_none() {
            return Ok(None);
        }
        let f = storage.open(&path, &small_file_opts(FileClass::Other), stats)?;
        let bytes = f.read_range(0, f.len()? as usize)?;
        let text = String::from_utf8_lossy(&bytes);
        let mut lines = text.lines();
        match (lines.next(), lines.next().and_then(|l| l.parse().ok())) {
            (Some(token), Some(base)) if !token.is_empty() => Ok(Some(Record {
                token: token.to_string(),
                base,
            })),
            _ => {
                Err(Corruption::new(&path, 0, format!("not a generation record: {text:?}")).into())
            }
        }
    }

    fn write(&self, storage: &dyn Storage, dir: &Path, stats: &IoStats) -> Result<()> {
        let text = format!("{}\n{}\n", self.token, self.base);
        write_synced(storage, &dir.join(GENERATION_NAME), text.as_bytes(), stats)?;
        storage.sync_dir(dir)
    }
}

/// A token no other open writes: the process, the time, the place.
fn new_token(dir: &Path) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write(dir.as_os_str().as_encoded_bytes());
    format!("strata-{:016x}-{}", h.finish(), std::process::id())
}

/// Steps 1–3 of the module comment, for a database at `dir` whose store
/// is `store`.
pub(super) fn claim(
    storage: &dyn Storage,
    dir: &Path,
    store: Arc<dyn RemoteStore>,
    stats: &IoStats,
) -> Result<Claimed> {
    let has_manifest = storage.entry_kind(&dir.join(MANIFEST_NAME))?.is_some();
    let record = Record::read(storage, dir, stats)?;
    if has_manifest {
        match (&record, latest(&*store)?) {
            // The newest index must be this directory's own: of the
            // generation it last claimed the store with, or of one its
            // last open took (its token) and stopped before recording.
            (Some(r), Some((_, newest))) => {
                let owner = store.get(&generation::generation_key(newest.generation)).ok();
                if newest.generation != r.base && owner.as_deref() != Some(r.token.as_bytes()) {
                    return Err(Error::Fenced {
                        store: store.url().to_string(),
                        generation: r.base,
                        newer: newest.generation,
                    });
                }
            }
            (None, Some((_, newest))) if !newest.manifest.is_empty() => {
                return Err(InvalidInput::RemoteUrl {
                    url: store.url().to_string(),
                    why: format!(
                        "it holds a database that {} did not come from (open an empty directory to restore it)",
                        dir.display()
                    ),
                }
                .into())
            }
            _ => {}
        }
    }
    // The token of the generation about to be taken, recorded first: a
    // stop after the claim leaves a directory that knows it for its own.
    let token = new_token(dir);
    let base = record.map_or(0, |r| r.base);
    Record {
        token: token.clone(),
        base,
    }
    .write(storage, dir, stats)?;
    let generation = generation::acquire(&*store, &token)?;
    let claimed = index::claim(&*store, generation)?;
    if !has_manifest {
        restore(storage, dir, &claimed, stats)?;
    }
    Record {
        token,
        base: generation,
    }
    .write(storage, dir, stats)?;
    let objects = RemoteObjects::new(Arc::clone(&store), &claimed.objects);
    Ok(Claimed {
        store,
        index: claimed,
        objects,
    })
}

/// Puts `index`'s manifest in place in `dir` (step 1: its files stay in
/// the store until they are read).
pub(super) fn restore(
    storage: &dyn Storage,
    dir: &Path,
    index: &RemoteIndex,
    stats: &IoStats,
) -> Result<()> {
    // A store that held no database: nothing to restore.
    if index.manifest.is_empty() {
        return Ok(());
    }
    let tmp = dir.join(MANIFEST_TMP_NAME);
    write_synced(storage, &tmp, &index.manifest, stats)?;
    storage.sync_dir(dir)?;
    storage.rename(&tmp, &dir.join(MANIFEST_NAME))?;
    storage.sync_dir(dir)
}

/// Starts the uploader of an opened database and hands it the current
/// version.
pub(super) fn start_uploader(inner: &DbInner, claimed: Claimed) -> Result<()> {
    let up = Uploader::start(
        UploadTarget {
            store: claimed.store,
            generation: claimed.index.generation,
            storage: Arc::clone(&inner.storage),
            dir: inner.dir.clone(),
            file_opts: FileOptions {
                class: FileClass::Other,
                ..inner.layer_io.opts.clone()
            },
            stats: inner.stats.clone(),
            objects: claimed.objects,
            read_steps: inner.pacer.steps(),
            deletion_delay: inner.opts.remote_deletion_delay,
        },
        claimed.index,
    )?;
    inner.versions.set_uploader(up)
}

/// Where the remote store stands, as `Stats::remote` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteStats {
    /// The store's URL.
    pub url: String,
    /// This writer's generation (a follower's: the generation of the
    /// writer whose index it shows).
    pub generation: u64,
    /// A read-only follower of the store (`Options::remote_follower`):
    /// `consistent_lsn` is the LSN of the index it shows, and nothing is
    /// uploaded.
    pub following: bool,
    /// Every write at or below this LSN is in the store, listed by its
    /// newest index.
    pub consistent_lsn: Lsn,
    /// Bytes of files not uploaded yet.
    pub backlog_bytes: u64,
    /// The last upload failure, while none has succeeded since (a
    /// follower's: its last refresh's failure, while none has succeeded
    /// since).
    pub error: Option<String>,
    /// A newer writer took the store: nothing more is uploaded.
    pub fenced: bool,
    /// Objects deleted from the store once no index of this writer listed
    /// them (replaced layers, uploads no index took).
    pub deleted_objects: u64,
    /// Objects no index lists any more, not yet deleted.
    pub unlisted_objects: u64,
    /// Ranged GETs of files only the store holds (reads of layers and
    /// value files not on the local disk), and their bytes.
    pub gets: u64,
    pub get_bytes: u64,
    /// Local copies of layer files evicted to stay within
    /// `Options::local_layer_bytes_max`, since open.
    pub evicted_layers: u64,
    /// Bytes of layer files on the local disk, at the last eviction round
    /// (0 without a budget).
    pub local_layer_bytes: u64,
    /// Layer and value files put into the store since open, their bytes,
    /// and the uploader's time on them (reading, checking, putting): the
    /// upload rate is `uploaded_bytes / upload_busy`.
    pub uploaded_files: u64,
    pub uploaded_bytes: u64,
    pub upload_busy: std::time::Duration,
}

impl DbInner {
    pub(super) fn remote_stats(&self) -> Option<RemoteStats> {
        let up = self.versions.uploader()?;
        let UploadStatus {
            generation,
            remote_lsn,
            backlog_bytes,
            error,
            fence,
            deleted_objects,
            unlisted_objects,
            gets,
            get_bytes,
            evicted_layers,
            uploaded_files,
            uploaded_bytes,
            upload_busy,
        } = up.status();
        Some(RemoteStats {
            url: self
                .opts
                .remote
                .as_ref()
                .map(|r| r.0.url().to_string())
                .unwrap_or_default(),
            generation,
            following: false,
            consistent_lsn: remote_lsn,
            backlog_bytes,
            error,
            fenced: fence.is_some(),
            deleted_objects,
            unlisted_objects,
            gets,
            get_bytes,
            evicted_layers,
            local_layer_bytes: self
                .local_layer_bytes
                .load(std::sync::atomic::Ordering::Relaxed),
            uploaded_files,
            uploaded_bytes,
            upload_busy,
        })
    }
}

impl DbInner {
    /// Keeps the layer files on the local disk within
    /// `Options::local_layer_bytes_max`: while they take more, evicts the
    /// least recently read of those the store holds. A layer not uploaded
    /// yet stays (the next round may evict it). Nothing without a budget.
    pub(super) fn evict_to_budget(&self) -> Result<()> {
        let (Some(budget), Some(tiered)) = (self.opts.local_layer_bytes_max, &self.tiered) else {
            return Ok(());
        };
        let _round = self.evicting.lock().unwrap_or_else(|p| p.into_inner());
        let version = self.version()?;
        let mut local = 0u64;
        let mut evictable = Vec::new();
        for layer in version.layers() {
            let path = layer.path();
            if tiered.is_local(&path)? {
                local += layer.desc.bytes;
                if tiered.in_store(&path) {
                    evictable.push(Arc::clone(layer));
                }
            }
        }
        evictable.sort_by_key(|l| l.last_read());
        for layer in evictable {
            if local <= budget {
                break;
            }
            layer.evict_local(|path| tiered.evict(path))?;
            local -= layer.desc.bytes;
        }
        self.local_layer_bytes
            .store(local, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

impl Db {
    /// Waits until the remote store holds every write made so far: the
    /// open layer is frozen and flushed, then the uploads of the version
    /// that holds it are waited for (its files, then its index). An error
    /// without a remote store, when this writer was fenced
    /// (`Error::Fenced`, naming the newer generation), or when the uploads
    /// keep failing for 30 s (the last failure).
    pub fn sync_remote(&self) -> Result<()> {
        self.sync_remote_within(SYNC_PATIENCE)
    }

    /// [`Db::sync_remote`], giving up after `patience` of failing uploads.
    pub fn sync_remote_within(&self, patience: Duration) -> Result<()> {
        self.inner.check_writer()?;
        let Some(up) = self.inner.versions.uploader() else {
            return Err(InvalidInput::RemoteUrl {
                url: String::new(),
                why: "the database was opened without a remote store (Options::remote)".into(),
            }
            .into());
        };
        self.flush()?;
        let version = self.inner.version()?;
        let lsn = version.layers().map(|l| l.desc.lsn_max).max().unwrap_or(0);
        up.wait_for(lsn, patience)?;
        self.inner.evict_to_budget()
    }
}
