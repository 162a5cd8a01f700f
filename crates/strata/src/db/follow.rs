//! The database as a read-only follower of its remote store
//! (`Options::remote_follower`): another process's database, read from the
//! store's newest index, moved to a newer index by `Db::refresh_remote`.
//!
//! At open, under the directory lock: the directory must be empty or a
//! follower's own (`REMOTE_FOLLOWER` marks it, written and synced before
//! anything else; a writer's directory, or one holding a database that is
//! not a follower's, is refused: `InvalidInput::RemoteRole`). The newest
//! index's manifest is put in place, and the database opens on it as a
//! writer's restored directory does, on a `TieredStorage`: every file it
//! lists is read from the store, a ranged GET a read, each byte checked by
//! its reader. No generation is taken, so the writer is not fenced, and
//! nothing is ever put into or deleted from the store.
//!
//! Invariants: a follower writes nothing but its directory's own files
//! (the manifest, one empty open log, the marker); its files take ids from
//! `FOLLOWER_FILE_IDS`, far above any id a writer reaches, so none takes
//! a name the store's files have; every write, freeze, flush and
//! compaction is refused (`Error::ReadOnly`, from `DbInner::check_writer`)
//! and no background flush or compaction runs; the version shows one
//! index whole (its layers, value files and horizon) and `last_lsn` is
//! that index's LSN; a refresh installs a newer index's version in one
//! step (`VersionSet::follow`), and reads already running, or a snapshot,
//! keep the version they started on.
//!
//! A background thread refreshes every `Options::remote_follow_interval`
//! (unless `None`), as `Db::refresh_remote` does; a refresh's failure,
//! either way, shows in `Stats::remote.error` until one succeeds. The
//! writer deletes the objects its newest index no longer lists (after a
//! compaction or GC) `Options::remote_deletion_delay` after that index is
//! in the store (default 5 minutes, the refresh's default 1): a follower
//! that refreshes at least that often never finds a file gone; one left
//! longer on an old index may (`Error::Remote`, no such object), and a
//! refresh answers it.

use super::remote::{restore, write_synced, GENERATION_NAME};
use super::{Db, DbInner, LOCK_NAME};
use crate::error::{Corruption, Error, InvalidInput, Result};
use crate::io::{IoStats, Storage};
use crate::manifest::{self, is_own_file, log_name, MANIFEST_NAME, MANIFEST_TMP_NAME};
use crate::remote::index::latest;
use crate::remote::tiered::RemoteObjects;
use crate::remote::RemoteStore;
use crate::table_cache::Layer;
use crate::types::Lsn;
use crate::version::set::NewFiles;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The file that marks a directory as a follower's; it holds the store's
/// URL.
pub(super) const FOLLOWER_NAME: &str = "REMOTE_FOLLOWER";

/// A follower's own files (its empty logs) take ids from here: a writer's
/// ids count up from 1 and never come near, so no file of the follower
/// takes a name of the store's files.
pub(super) const FOLLOWER_FILE_IDS: u64 = 1 << 62;

/// What a follower keeps of its store.
pub(super) struct Following {
    pub store: Arc<dyn RemoteStore>,
    /// The files of the database that the store holds: the followed
    /// index's objects.
    pub objects: Arc<RemoteObjects>,
    /// The number of the index the version shows; held by a refresh (one
    /// at a time).
    seq: Mutex<u64>,
    /// The generation of the writer that put that index.
    generation: AtomicU64,
    /// The background refresh: set when the database closes (then
    /// `wake` is signalled); and the last refresh's failure (background
    /// or called), while none succeeded since.
    stop: Mutex<bool>,
    wake: Condvar,
    error: Mutex<Option<String>>,
}

/// A follower's open, in `dir` (locked by the caller), of `store`: the
/// directory checked and marked, the newest index's manifest put in place.
pub(super) fn follow(
    storage: &dyn Storage,
    dir: &Path,
    store: Arc<dyn RemoteStore>,
    stats: &IoStats,
) -> Result<Following> {
    let names = storage.list_dir(dir)?;
    let has = |name: &str| names.iter().any(|n| n.as_os_str() == name);
    let role = |why: String| -> Error {
        InvalidInput::RemoteRole {
            dir: dir.to_owned(),
            why,
        }
        .into()
    };
    if has(GENERATION_NAME) {
        return Err(role(format!(
            "it is a writer's directory ({GENERATION_NAME}): a follower opens an empty directory, or one it followed in before"
        )));
    }
    if has(MANIFEST_NAME) && !has(FOLLOWER_NAME) {
        return Err(role(
            "it holds a database that is not a follower's: a follower opens an empty directory, or one it followed in before".into(),
        ));
    }
    if let Some(name) = names.iter().map(|n| n.to_string_lossy()).find(|n| {
        !is_own_file(n) && ![LOCK_NAME, FOLLOWER_NAME, MANIFEST_NAME].contains(&n.as_ref())
    }) {
        return Err(Error::NotADatabase {
            path: dir.to_owned(),
            why: format!("it holds {name}, which is not a follower's file"),
        });
    }
    let Some((key, index)) = latest(&*store)? else {
        return Err(InvalidInput::RemoteUrl {
            url: store.url().to_string(),
            why: "it holds no database to follow (no index)".into(),
        }
        .into());
    };
    if index.manifest.is_empty() {
        return Err(InvalidInput::RemoteUrl {
            url: store.url().to_string(),
            why: format!("its newest index {key} holds no database yet: nothing to follow"),
        }
        .into());
    }
    write_synced(
        storage,
        &dir.join(FOLLOWER_NAME),
        store.url().as_bytes(),
        stats,
    )?;
    storage.sync_dir(dir)?;
    // The follower's own logs of its last open: they never held a write
    // (every write is refused), so nothing is lost with them.
    for name in &names {
        let name = name.to_string_lossy();
        if name == MANIFEST_TMP_NAME || follower_log(&name) {
            storage.remove_file(&dir.join(name.as_ref()))?;
        }
    }
    restore(storage, dir, &index, stats)?;
    let objects = RemoteObjects::new(Arc::clone(&store), &index.objects);
    Ok(Following {
        store,
        objects,
        seq: Mutex::new(index.seq),
        generation: AtomicU64::new(index.generation),
        stop: Mutex::new(false),
        wake: Condvar::new(),
        error: Mutex::new(None),
    })
}

/// Whether `name` is a log of a follower's own (its id at or above
/// `FOLLOWER_FILE_IDS`).
fn follower_log(name: &str) -> bool {
    name.strip_suffix(".log")
        .and_then(|stem| u64::from_str_radix(stem, 16).ok())
        .is_some_and(|id| id >= FOLLOWER_FILE_IDS && log_name(id) == name)
}

impl DbInner {
    /// `Error::ReadOnly` when the database is a follower.
    pub(super) fn check_writer(&self) -> Result<()> {
        match &self.following {
            Some(f) => Err(Error::ReadOnly {
                dir: self.dir.clone(),
                store: f.store.url().to_string(),
            }),
            None => Ok(()),
        }
    }

    /// A follower's `Stats::remote`: the store, the generation of the
    /// writer it follows, and the LSN its version shows.
    pub(super) fn follower_stats(&self) -> Option<super::RemoteStats> {
        let f = self.following.as_ref()?;
        let (gets, get_bytes, _) = f.objects.reads();
        Some(super::RemoteStats {
            url: f.store.url().to_string(),
            generation: f.generation.load(Ordering::Acquire),
            consistent_lsn: self.visible_lsn.load(Ordering::Acquire),
            following: true,
            error: f.error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            gets,
            get_bytes,
            ..super::RemoteStats::default()
        })
    }
}

impl Db {
    /// A follower's move to the store's newest index, if it is newer than
    /// the one its version shows: reads from now on see that index's
    /// database (snapshots taken before keep theirs). Returns the LSN the
    /// database shows. An error on a database that is not a follower
    /// (`Options::remote_follower`); after any error the version is the
    /// one before. (A follower also refreshes on its own, every
    /// `Options::remote_follow_interval`.)
    pub fn refresh_remote(&self) -> Result<Lsn> {
        self.inner.refresh_remote()
    }
}

impl DbInner {
    /// The background refresh of a follower: every `interval` until the
    /// database closes (`stop_following`), a refresh; its failure is kept
    /// for `Stats::remote.error` until one succeeds.
    pub(super) fn follow_loop(&self, interval: Duration) {
        let Some(f) = &self.following else { return };
        loop {
            {
                let stop = f.stop.lock().unwrap_or_else(|p| p.into_inner());
                let (stop, _) = f
                    .wake
                    .wait_timeout_while(stop, interval, |stop| !*stop)
                    .unwrap_or_else(|p| p.into_inner());
                if *stop {
                    return;
                }
            }
            // Its failure is kept for the stats (`refresh_remote`).
            let _ = self.refresh_remote();
        }
    }

    /// Ends the background refresh (its thread returns at once, or when
    /// the refresh it is in ends).
    pub(super) fn stop_following(&self) {
        if let Some(f) = &self.following {
            *f.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
            f.wake.notify_all();
        }
    }

    /// `Db::refresh_remote`, called or in the background: its outcome is
    /// the follower's `Stats::remote.error` (a failure, until one
    /// succeeds).
    fn refresh_remote(&self) -> Result<Lsn> {
        let Some(f) = &self.following else {
            return Err(InvalidInput::RemoteUrl {
                url: String::new(),
                why: "refresh_remote moves a follower (Options::remote_follower) to a newer index"
                    .into(),
            }
            .into());
        };
        let done = self.refresh_from(f);
        *f.error.lock().unwrap_or_else(|p| p.into_inner()) =
            done.as_ref().err().map(|e| e.to_string());
        done
    }

    fn refresh_from(&self, f: &Following) -> Result<Lsn> {
        let mut seq = f.seq.lock().unwrap_or_else(|p| p.into_inner());
        let Some((key, index)) = latest(&*f.store)? else {
            return Err(Corruption::new(
                f.store.url(),
                0,
                "the store holds no index any more: the database followed is gone",
            )
            .into());
        };
        if index.seq <= *seq {
            return Ok(self.visible_lsn.load(Ordering::Acquire));
        }
        let source = format!("{}/{key}", f.store.url());
        let loaded = manifest::decode(Path::new(&source), &index.manifest)?;
        if !loaded.v1_deltas.is_empty() || !loaded.state.logs.is_empty() {
            return Err(Corruption::new(
                &source,
                0,
                "an index's manifest lists logs or layers of format 1",
            )
            .into());
        }
        // A name the followed version has must be the same object in the
        // newer index: objects are immutable, and ids are never reused.
        for o in &index.objects {
            if let Some(had) = f.objects.get(&o.name) {
                if had != *o {
                    return Err(Corruption::new(
                        &source,
                        0,
                        format!(
                            "it lists {} as {}, the index followed before as {}",
                            o.name, o.key, had.key
                        ),
                    )
                    .into());
                }
            }
        }
        for o in &index.objects {
            f.objects.insert(o.clone());
        }
        let current = self.version()?;
        let held: std::collections::HashSet<u64> = current.layers().map(|l| l.desc.id).collect();
        let layers = loaded
            .state
            .layers
            .iter()
            .filter(|d| !held.contains(&d.id))
            .map(|d| Arc::new(Layer::new(d.clone(), Arc::clone(&self.layer_io))))
            .collect();
        // The value files the followed version does not hold yet.
        let brought = loaded
            .state
            .value_files
            .iter()
            .map(|(&id, &bytes)| (id, bytes))
            .filter(|(id, _)| !current.values.contains_key(id));
        let values = super::open_value_files(
            &self.storage,
            &self.dir,
            brought,
            &self.log_opts,
            &self.stats,
        )?;
        drop(current);
        self.versions.follow(
            &loaded.state,
            NewFiles {
                layers,
                values,
                logs: Vec::new(),
            },
        )?;
        // The version first, then the LSN that shows it.
        let lsn = index.lsn.max(self.visible_lsn.load(Ordering::Acquire));
        super::lock(&self.write)?.last_lsn = lsn;
        {
            let mut sync = super::lock(&self.sync)?;
            sync.synced_lsn = sync.synced_lsn.max(lsn);
        }
        self.visible_lsn.store(lsn, Ordering::Release);
        *seq = index.seq;
        f.generation.store(index.generation, Ordering::Release);
        Ok(lsn)
    }
}
