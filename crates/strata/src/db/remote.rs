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
//! (`VersionSet::set_uploader`). A layer the manifest lists that neither
//! the directory nor the claimed index holds (a compaction output put
//! into the store during its job, evicted, its index never put) is found
//! in the store and adopted (`adopt_unindexed`).
//!
//! The local budget (`Options::local_layer_bytes_max`): the layer files on
//! the disk (the version's that are local, and the running compaction's
//! outputs not yet in it) plus room for a flush's output and a
//! compaction's next one stay within it wherever the store lets them:
//! eviction rounds (after a flush, a compaction, a `sync_remote`, an
//! output written) take the least recently read layers the store holds
//! and no read holds open; a compaction output the disk has no room for
//! goes to the store at once (`OutputRoom`); a flush or a compaction that
//! finds the room taken by layers not uploaded yet waits for the uploads
//! (`make_room`). Past the budget only: layers not uploaded while the
//! store fails, and layers reads hold open.

use super::{Db, DbInner};
use crate::compaction::OutputRoom;
use crate::error::{Corruption, Error, InvalidInput, Result};
use crate::io::{FileClass, FileOptions, IoMode, IoStats, Storage};
use crate::manifest::{MANIFEST_NAME, MANIFEST_TMP_NAME};
use crate::remote::generation;
use crate::remote::index::{self, latest, RemoteIndex};
use crate::remote::tiered::{RemoteObjects, TieredStorage};
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

/// How long a write waits, while uploads fail, for the uploads that would
/// let it make room on the local disk, before it goes on anyway
/// (`DbInner::make_room`).
const ROOM_UPLOAD_PATIENCE: Duration = Duration::from_secs(10);

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

/// A writer's layers that the manifest lists and neither the directory
/// nor the claimed index holds: a compaction output put into the store
/// during its job (`OutputRoom`) and evicted, whose version's index never
/// reached the store (the process stopped, or closed, first). Each is
/// found among the store's objects under its name (its newest generation:
/// this writer's claim fenced every other), read whole, checked against the
/// length the manifest lists, and taken as one of the database's objects
/// (its crc32c the bytes read): the next index lists it, and no sweep of
/// older generations deletes it. One that is not there stays missing (the
/// open fails, naming it).
pub(super) fn adopt_unindexed(
    objects: &RemoteObjects,
    storage: &dyn Storage,
    dir: &Path,
    state: &crate::manifest::ManifestState,
) -> Result<()> {
    let mut missing = Vec::new();
    for layer in &state.layers {
        let name = crate::manifest::delta_name(layer.id);
        if storage.entry_kind(&dir.join(&name))?.is_none() {
            missing.push((name, layer.bytes));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let store = objects.store();
    let listed = store.list("layers/")?;
    for (name, bytes) in missing {
        let prefix = format!("layers/{name}-g");
        let Some(key) = listed
            .iter()
            .filter(|o| o.key.starts_with(&prefix))
            .filter_map(|o| Some((generation::parse_object_generation(&o.key)?, &o.key)))
            .max()
            .map(|(_, key)| key.clone())
        else {
            continue;
        };
        let body = store.get(&key)?;
        if body.len() as u64 != bytes {
            return Err(Corruption::new(
                format!("{}/{key}", store.url()),
                0,
                format!(
                    "{} bytes where the manifest lists {bytes} for {name}",
                    body.len()
                ),
            )
            .into());
        }
        objects.insert(crate::remote::index::IndexedObject {
            name,
            key,
            bytes,
            crc: crate::crc::crc32c(&body),
        });
    }
    Ok(())
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
            single_put_bytes_max: inner.opts.remote_single_put_bytes_max,
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
    /// Room an eviction round leaves free on the local disk beside what it
    /// keeps: a flush's output and a compaction's next output, each
    /// written whole before it can go (an eighth more for their indexes,
    /// filters and padding past the sizes they are cut at).
    fn write_headroom(&self) -> u64 {
        let outputs = self
            .opts
            .layer_size_bytes_max
            .saturating_add(self.opts.target_file_bytes);
        outputs.saturating_add(outputs / 8)
    }

    /// Keeps the layer files on the local disk within
    /// `Options::local_layer_bytes_max`, room for the writes in flight
    /// included (see [`DbInner::evict_round`]). Nothing without a budget.
    pub(super) fn evict_to_budget(&self) -> Result<()> {
        let (Some(budget), Some(tiered)) = (self.opts.local_layer_bytes_max, &self.tiered) else {
            return Ok(());
        };
        let outputs = self.evicting.lock().unwrap_or_else(|p| p.into_inner());
        self.evict_round(budget, tiered, *outputs).map(|_| ())
    }

    /// One eviction round, under `evicting` (rounds take turns: two at once
    /// would both remove the same file), with `outputs` bytes of the
    /// running compaction's outputs on the disk: while the version's local
    /// layers, those outputs and the write headroom take more than
    /// `budget`, evicts the least recently read layer the store holds and
    /// no reader holds open (a compaction's inputs, a scan's layers: their
    /// open descriptors would keep the blocks on the disk). A layer not
    /// uploaded yet stays (a later round may evict it). Returns the bytes
    /// left on the disk (the version's local layers and `outputs`).
    fn evict_round(&self, budget: u64, tiered: &TieredStorage, outputs: u64) -> Result<u64> {
        let version = self.version()?;
        let mut local = outputs;
        let mut evictable = Vec::new();
        for layer in version.layers() {
            let path = layer.path();
            if tiered.is_local(&path)? {
                local += layer.desc.bytes;
                if tiered.in_store(&path) && !layer.reader_held() {
                    evictable.push(Arc::clone(layer));
                }
            }
        }
        evictable.sort_by_key(|l| l.last_read());
        let keep = budget.saturating_sub(self.write_headroom());
        for layer in evictable {
            if local <= keep {
                break;
            }
            layer.evict_local(|path| tiered.evict(path))?;
            local -= layer.desc.bytes;
        }
        self.local_layer_bytes
            .store(local, std::sync::atomic::Ordering::Relaxed);
        Ok(local)
    }

    /// Room on the local disk for a write about to begin (a flush's
    /// output, a compaction's: a compaction's inputs too, whose open
    /// descriptors keep them on the disk through the job, evicted or not).
    /// A round; and if the layers it could not evict (not uploaded yet)
    /// leave less than the write headroom, a wait for the uploads of the
    /// version so far, then a round again: writes that outrun the uploads
    /// wait for them here rather than fill the disk. While the store fails
    /// (the uploader's last attempt failed, or a wait sees failures for
    /// `ROOM_UPLOAD_PATIENCE`), or once this writer is fenced, nothing
    /// waits: the layers not uploaded stay on the disk past the budget,
    /// and writes go on.
    pub(super) fn make_room(&self) -> Result<()> {
        let (Some(budget), Some(tiered), Some(up)) = (
            self.opts.local_layer_bytes_max,
            &self.tiered,
            self.versions.uploader(),
        ) else {
            return Ok(());
        };
        let outputs = self.evicting.lock().unwrap_or_else(|p| p.into_inner());
        let local = self.evict_round(budget, tiered, *outputs)?;
        if local.saturating_add(self.write_headroom()) <= budget {
            return Ok(());
        }
        drop(outputs);
        if up.status().error.is_some() {
            return Ok(());
        }
        let lsn = self.version()?.layers().map(|l| l.desc.lsn_max).max();
        if up.wait_for(lsn.unwrap_or(0), ROOM_UPLOAD_PATIENCE).is_ok() {
            self.evict_to_budget()?;
        }
        Ok(())
    }

    /// Where a compaction's outputs go when the disk has no room for them
    /// (see `OutputRoom`): with a budget, this database.
    pub(super) fn output_room(&self) -> Option<&dyn OutputRoom> {
        let remote = self.tiered.is_some() && self.versions.uploader().is_some();
        (remote && self.opts.local_layer_bytes_max.is_some()).then_some(self as &dyn OutputRoom)
    }

    /// A compaction ended: its outputs are the version's now, or removed,
    /// and no longer counted apart.
    pub(super) fn job_ended(&self) {
        *self.evicting.lock().unwrap_or_else(|p| p.into_inner()) = 0;
    }
}

/// A compaction's outputs within the local budget: each one written is
/// counted on the disk, a round makes room for the next; if the disk
/// still has none (the layers kept are not uploaded yet, or held open),
/// the output is put into the store now and its local file goes, so that
/// a job larger than the budget (a merge of runs, an image of the whole
/// database) never fills the disk. If that put fails, the output stays
/// (the job goes on); a fenced or closing writer's job fails.
impl OutputRoom for DbInner {
    fn written(&self, path: &Path, bytes: u64) -> Result<bool> {
        let (Some(budget), Some(tiered), Some(up)) = (
            self.opts.local_layer_bytes_max,
            &self.tiered,
            self.versions.uploader(),
        ) else {
            return Ok(false);
        };
        {
            let mut outputs = self.evicting.lock().unwrap_or_else(|p| p.into_inner());
            *outputs += bytes;
            let local = self.evict_round(budget, tiered, *outputs)?;
            if local.saturating_add(self.write_headroom()) <= budget {
                return Ok(false);
            }
        }
        // Not under the round's lock: the upload takes a while, and a
        // flush's round need not wait for it.
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            Error::Internal(format!("an output without a file name: {}", path.display()))
        })?;
        match up.upload_now(name, bytes) {
            Ok(()) => Ok(true),
            Err(e @ (Error::Fenced { .. } | Error::Closed)) => Err(e),
            // The store fails: the output stays on the disk (past the
            // budget, as layers not uploaded do) and the job goes on.
            Err(_) => Ok(false),
        }
    }

    fn let_go(&self, path: &Path, bytes: u64) -> Result<()> {
        let Some(tiered) = &self.tiered else {
            return Ok(());
        };
        let mut outputs = self.evicting.lock().unwrap_or_else(|p| p.into_inner());
        tiered.evict(path)?;
        *outputs = outputs.saturating_sub(bytes);
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
