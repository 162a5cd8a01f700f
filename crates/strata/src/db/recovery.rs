//! Recovery at open: the directory checks, the manifest, the newest layer
//! files checked against their descriptors (the next LSN follows theirs),
//! the replay of the logs of unflushed layers, the sweep of unlisted files,
//! and the first new log. Nothing is written before the directory is
//! locked, and a file is removed only when it is proven superseded
//! (`Superseded::check`): a file the manifest does not list that holds
//! writes no listed file holds fails the open with a `Corruption` naming
//! the manifest and the file.

use super::*;

impl Db {
    /// Opens the database in `path`, creating it if the directory is missing
    /// or empty (and `create_if_missing`). Replays the logs of layers that
    /// were not flushed; removes files the manifest does not list.
    pub(super) fn open_in(path: &Path, opts: Options) -> Result<Db> {
        opts.validate()?;
        let dir = path.to_owned();
        let storage: Arc<dyn Storage> = match &opts.storage {
            Some(storage) => Arc::clone(storage),
            None => Arc::new(OsStorage),
        };
        prepare_dir(&*storage, &dir, &opts)?;
        // A follower's directory holds nothing of its own to write to.
        let marker = dir.join(super::follow::FOLLOWER_NAME);
        if !opts.remote_follower && storage.entry_kind(&marker)?.is_some() {
            return Err(InvalidInput::RemoteRole {
                dir: dir.clone(),
                why: "it is a follower's directory: a follower of its store opens it (Options::remote_follower), a writer opens a directory of its own".into(),
            }
            .into());
        }
        let stats = IoStats::new();
        // Locked before any file of the database is read or written (a
        // restore from the remote store writes them).
        let (lock, claimed, following) = match &opts.remote {
            Some(remote) if opts.remote_follower => {
                let lock = storage.lock(&dir.join(LOCK_NAME))?;
                let following =
                    super::follow::follow(&*storage, &dir, Arc::clone(&remote.0), &stats)?;
                (lock, None, Some(following))
            }
            Some(remote) => {
                check_restorable(&*storage, &dir)?;
                let lock = storage.lock(&dir.join(LOCK_NAME))?;
                let claimed = super::remote::claim(&*storage, &dir, Arc::clone(&remote.0), &stats)?;
                check_is_database(&*storage, &dir, &opts)?;
                (lock, Some(claimed), None)
            }
            None => {
                check_is_database(&*storage, &dir, &opts)?;
                (storage.lock(&dir.join(LOCK_NAME))?, None, None)
            }
        };
        // With a remote store, the files only the store holds are files of
        // the directory too (`TieredStorage`).
        let objects = match (&claimed, &following) {
            (Some(c), _) => Some(&c.objects),
            (None, Some(f)) => Some(&f.objects),
            (None, None) => None,
        };
        let tiered = objects.map(|objects| {
            Arc::new(crate::remote::tiered::TieredStorage::new(
                Arc::clone(&storage),
                &dir,
                Arc::clone(objects),
            ))
        });
        let storage: Arc<dyn Storage> = match &tiered {
            Some(t) => Arc::clone(t) as Arc<dyn Storage>,
            None => storage,
        };
        let loaded = load(&*storage, &dir)?;
        let (log_opts, layer_io) = file_options(&storage, &dir, &opts, &stats);
        let (mut state, v1_deltas, torn_at) = match loaded {
            Some(l) => (l.state, l.v1_deltas, l.torn_at),
            None => (
                ManifestState {
                    next_file_id: 1,
                    ..ManifestState::default()
                },
                Vec::new(),
                None,
            ),
        };
        if following.is_some() {
            state.next_file_id = state.next_file_id.max(super::follow::FOLLOWER_FILE_IDS);
        }
        if let Some(claimed) = &claimed {
            super::remote::adopt_unindexed(&claimed.objects, &*storage, &dir, &state)?;
        }
        let remote = claimed.is_some() || following.is_some();
        let unlisted = unlisted_files(&*storage, &dir, &state, &v1_deltas, remote)?;
        describe_v1_layers(&mut state, &v1_deltas, &layer_io)?;
        let flushed_lsn = state.layers.iter().map(|l| l.lsn_max).max().unwrap_or(0);
        let layers: Vec<Arc<Layer>> = state
            .layers
            .iter()
            .map(|d| Arc::new(Layer::new(d.clone(), Arc::clone(&layer_io))))
            .collect();
        // The next LSN follows the newest layer's, as its descriptor says:
        // a layer whose descriptor says so is opened now (its reader kept),
        // so that a file that is not what its descriptor says fails the
        // open, naming the file, before a write can take an LSN it holds.
        // One: the newest may be a run of many files, which open lazily
        // (each is checked against its descriptor at its first read).
        if let Some(layer) = layers.iter().find(|l| l.desc.lsn_max == flushed_lsn) {
            layer.reader()?;
        }
        let replayed = replay_logs(
            &*storage,
            &dir,
            &state.logs,
            &log_opts,
            &layer_io,
            flushed_lsn,
        )?;
        state.logs.retain(|id| !replayed.empty.contains(id));

        // Every unlisted file is proven superseded, or the open fails.
        let bounds = Superseded {
            flushed_lsn,
            durable_lsn: replayed.last_lsn,
            manifest: dir.join(MANIFEST_NAME),
            torn_at,
        };
        for name in &unlisted {
            bounds.check(&*storage, &dir, name, &log_opts, &layer_io.opts, &stats)?;
        }
        for name in &unlisted {
            storage.remove_file(&dir.join(name))?;
        }

        // Every open starts a new manifest file holding the state found
        // (first: a directory with files but no manifest is not a
        // database). The new open log claims the newest replayed one as it
        // was found: from now on, its end is known, and damage before it
        // is corruption. Its header is durable before an edit lists it.
        let mut manifest = ManifestLog::create(Arc::clone(&storage), &dir, stats.clone(), state)?;
        let id = manifest.take_file_id();
        let log_memory = crate::layer::inmemory::LogMemoryBudget::new(opts.log_memory_bytes);
        let open = create_log(
            &*storage,
            &dir,
            &log_opts,
            &opts,
            &stats,
            &log_memory,
            id,
            replayed.newest,
        )?;
        let open = Arc::new(open.with_cache(layer_io.cache.clone()));
        manifest.apply(Edit::AddLog(id))?;
        let mut logs = replayed.frozen;
        logs.push(open);
        let listed = manifest
            .state()
            .value_files
            .iter()
            .map(|(&id, &bytes)| (id, bytes));
        let values = open_value_files(&storage, &dir, listed, &log_opts, &stats)?;
        let versions = VersionSet::recover(
            manifest,
            NewFiles {
                logs,
                layers,
                values,
            },
            Arc::clone(&layer_io),
            Arc::new(Poison::default()),
        )?;
        for id in &replayed.empty {
            let _ = storage.remove_file(&dir.join(log_name(*id)));
        }
        let last_lsn = replayed.last_lsn;
        let foreground_reads = Arc::clone(&layer_io.point_reads);
        let visible_lsn = Arc::new(AtomicU64::new(last_lsn));
        let inner = DbInner {
            dir,
            storage,
            opts: opts.clone(),
            log_opts,
            layer_io,
            stats,
            write: Mutex::new(WriteState {
                last_lsn,
                open: Arc::clone(&versions.current()?.open),
            }),
            versions,
            visible_lsn: Arc::clone(&visible_lsn),
            sync: Mutex::new(SyncState {
                synced_lsn: last_lsn,
                leader_active: false,
            }),
            sync_cv: Condvar::new(),
            flush_lock: Mutex::new(()),
            compact_lock: Mutex::new(()),
            flush: Worker::default(),
            compaction: Worker::default(),
            compactions: AtomicU64::new(0),
            compaction_bytes: Arc::default(),
            pacer: Arc::new(crate::pacer::Pacer::new(
                opts.compaction_bytes_per_sec,
                foreground_reads,
                visible_lsn,
            )),
            caller_horizon: AtomicU64::new(0),
            point_lookups: AtomicU64::new(0),
            flush_memory_peak: AtomicU64::new(0),
            flush_read_bytes: AtomicU64::new(0),
            log_memory,
            snapshots: Mutex::new(BTreeMap::new()),
            closed: AtomicBool::new(false),
            tiered,
            local_layer_bytes: AtomicU64::new(0),
            evicting: Mutex::new(0),
            following,
        };
        if let Some(claimed) = claimed {
            super::remote::start_uploader(&inner, claimed)?;
        }
        Db::start(Arc::new(inner), lock)
    }

    /// The database of `inner`, its background threads started.
    fn start(inner: Arc<DbInner>, lock: StorageLock) -> Result<Db> {
        let opts = &inner.opts;
        let dir = inner.dir.clone();
        // A follower writes nothing: no flush, no compaction.
        let background = opts.background_flush && inner.following.is_none();
        let flush_thread = if background {
            let bg = Arc::clone(&inner);
            Some(
                std::thread::Builder::new()
                    .name("strata-flush".into())
                    .spawn(move || bg.flush_loop())
                    .map_err(|e| Error::io(&dir, "spawn flush thread", e))?,
            )
        } else {
            None
        };
        let compact = background && opts.l0_compaction_trigger > 0;
        let mut db = Db {
            inner,
            flush_thread,
            compact_thread: None,
            follow_thread: None,
            _lock: lock,
        };
        // A follower refreshes on its own (a failure to spawn drops `db`).
        if let (Some(_), Some(interval)) =
            (&db.inner.following, db.inner.opts.remote_follow_interval)
        {
            let bg = Arc::clone(&db.inner);
            db.follow_thread = Some(
                std::thread::Builder::new()
                    .name("strata-follow".into())
                    .spawn(move || bg.follow_loop(interval))
                    .map_err(|e| Error::io(&dir, "spawn follower refresh thread", e))?,
            );
        }
        // Compaction runs beside the flush, so a flush never waits for it.
        // (A failure to spawn drops `db`, which stops the flush thread.)
        if compact {
            let bg = Arc::clone(&db.inner);
            db.compact_thread = Some(
                std::thread::Builder::new()
                    .name("strata-compact".into())
                    .spawn(move || bg.compaction_loop())
                    .map_err(|e| Error::io(&dir, "spawn compaction thread", e))?,
            );
        }
        db.inner.signal_flush();
        db.inner.signal_compaction();
        Ok(db)
    }
}

/// How logs and layer files open: the logs' file options, and the layers'
/// (with the block cache and the open readers' budget).
fn file_options(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    opts: &Options,
    stats: &IoStats,
) -> (FileOptions, Arc<LayerIo>) {
    let log_opts = FileOptions {
        mode: opts.io_mode,
        engine: opts.io_engine,
        fallback_to_buffered: opts.fallback_to_buffered,
        alignment_bytes: opts.alignment_bytes,
        class: FileClass::Log,
    };
    let layer_io = Arc::new(LayerIo {
        storage: Arc::clone(storage),
        dir: dir.to_owned(),
        opts: FileOptions {
            class: FileClass::Delta,
            ..log_opts.clone()
        },
        stats: stats.clone(),
        cache: BlockCache::new(opts.block_cache_bytes, opts.check_cached_blocks),
        point_reads: Arc::default(),
        readers: OpenReaders::new(opts.index_memory_bytes_max),
    });
    (log_opts, layer_io)
}

/// Own files in `dir` that the manifest does not list: garbage if proven
/// superseded (once the logs are replayed). A listed file that is missing
/// is an error now, not at its first read.
fn unlisted_files(
    storage: &dyn Storage,
    dir: &Path,
    state: &ManifestState,
    v1_deltas: &[u64],
    remote: bool,
) -> Result<Vec<String>> {
    let listed: std::collections::HashSet<String> = state
        .logs
        .iter()
        .map(|&id| log_name(id))
        .chain(state.layers.iter().map(|l| delta_name(l.id)))
        .chain(state.value_files.keys().map(|&id| log_name(id)))
        .chain(v1_deltas.iter().map(|&id| delta_name(id)))
        .collect();
    let mut present = std::collections::HashSet::new();
    let mut unlisted = Vec::new();
    for entry in storage.list_dir(dir)? {
        let name = entry.to_string_lossy().into_owned();
        if is_own_file(&name) && !listed.contains(&name) {
            unlisted.push(name.clone());
        }
        present.insert(name);
    }
    if let Some(missing) = listed.iter().find(|name| !present.contains(*name)) {
        // A directory a remote store wrote into (its generation record is
        // there) holds only part of its files when they are opened
        // without the store: not damage, a missing option.
        if !remote
            && storage
                .entry_kind(&dir.join(super::remote::GENERATION_NAME))?
                .is_some()
        {
            return Err(InvalidInput::RemoteNeeded {
                dir: dir.to_owned(),
                missing: missing.clone(),
            }
            .into());
        }
        return Err(crate::error::Corruption::new(
            dir.join(MANIFEST_NAME),
            0,
            format!("the manifest lists {missing}, which is missing"),
        )
        .into());
    }
    Ok(unlisted)
}

/// A version 1 manifest has no layer descriptors: those files are read
/// now (once: the manifest written at open records them).
fn describe_v1_layers(state: &mut ManifestState, v1_deltas: &[u64], io: &LayerIo) -> Result<()> {
    for &id in v1_deltas {
        let file = io
            .storage
            .open(&io.dir.join(delta_name(id)), &io.opts, &io.stats)?;
        let len = file.len()?;
        let reader = DeltaLayerReader::open(LayerFile {
            file,
            len,
            stats: io.stats.clone(),
        })?;
        state
            .layers
            .push(LayerDesc::from_summary(id, reader.summary()));
    }
    Ok(())
}

/// The logs of unflushed layers, replayed.
struct ReplayedLogs {
    /// Their layers, oldest first (frozen: the open one is a new log).
    frozen: Vec<Arc<InMemoryLayer>>,
    /// Logs that hold no record: unlisted by the manifest written at open,
    /// then removed.
    empty: Vec<u64>,
    /// The newest LSN the listed files hold.
    last_lsn: Lsn,
    /// The newest log as found: the new log's header claims it.
    newest: Option<PrevLog>,
}

/// Replays the listed `logs` (oldest first), each after the LSN of the
/// files before it (`flushed_lsn`: the newest layer file's).
fn replay_logs(
    storage: &dyn Storage,
    dir: &Path,
    logs: &[u64],
    log_opts: &FileOptions,
    layer_io: &LayerIo,
    flushed_lsn: Lsn,
) -> Result<ReplayedLogs> {
    let stats = &layer_io.stats;
    // Each log's header says where the log before it was sealed: read the
    // headers first, so each log is replayed knowing its claim.
    let mut files = Vec::with_capacity(logs.len());
    for &id in logs {
        let path = dir.join(log_name(id));
        let file = storage.open(&path, log_opts, stats)?;
        let len = file.len()?;
        let header_bytes = LOG_HEADER_BYTES.min(len as usize);
        let header = crate::io::read_verified(&*file, stats, 0, header_bytes as u64, || {
            decode_log_header(&path, &file.read_range(0, header_bytes)?)
        })?;
        files.push((id, path, file, header));
    }
    let mut out = ReplayedLogs {
        frozen: Vec::new(),
        empty: Vec::new(),
        last_lsn: flushed_lsn,
        newest: None,
    };
    for (i, (id, path, file, _)) in files.iter().enumerate() {
        let id = *id;
        let sealed = files
            .get(i + 1)
            .and_then(|(_, _, _, next)| next.prev)
            .filter(|p| p.file_id == id);
        let (log, bytes) = replay_log(&**file, stats, id, sealed)?;
        out.newest = Some(PrevLog {
            file_id: id,
            end: log.end_offset,
            last_lsn: log.last_lsn,
        });
        if log.records.is_empty() {
            out.empty.push(id);
            continue;
        }
        // What was replayed may have reached only the page cache before a
        // crash: make it durable before newer writes can be, so a power
        // loss later cannot leave a hole below them.
        file.sync_data()?;
        let layer = InMemoryLayer::from_replay(id, Arc::clone(file), &log, &bytes, stats)?
            .with_cache(layer_io.cache.clone());
        let (lsn_min, lsn_max) = layer.lsn_range();
        if lsn_min <= out.last_lsn {
            return Err(crate::error::Corruption::new(
                path,
                LOG_HEADER_BYTES as u64,
                format!(
                    "log starts at LSN {lsn_min}, not after the LSN {} of older layers",
                    out.last_lsn
                ),
            )
            .into());
        }
        out.last_lsn = lsn_max;
        out.frozen.push(Arc::new(layer));
    }
    Ok(out)
}

/// Recovery's reads come before any foreground read: requests of
/// `BACKGROUND_IO_IDLE_BYTES_MAX`.
fn recovery_steps() -> usize {
    crate::io::BACKGROUND_IO_IDLE_BYTES_MAX
}

/// What proves a file the manifest does not list superseded (see
/// [`Superseded::check`]).
struct Superseded {
    /// The newest LSN the listed layer files hold.
    flushed_lsn: Lsn,
    /// The newest LSN the listed files hold, logs included.
    durable_lsn: Lsn,
    manifest: PathBuf,
    /// Where the manifest's decoder dropped a torn append, if it did.
    torn_at: Option<u64>,
}

impl Superseded {
    /// `Ok` when `name`, a file of the database that the manifest does not
    /// list, is proven superseded, so open may remove it; else a
    /// `Corruption` naming the manifest and the file.
    ///
    /// The proof: every file strata writes is listed by the manifest edit
    /// that makes it part of the database, and that same edit unlists the
    /// files it replaces (a flush's log, a compaction's inputs). Recovery
    /// drops at most the last edit (a torn append, see manifest.rs), and
    /// every listed file is present (checked before). So an unlisted file
    /// is one of these, each proven by what it holds:
    /// - `MANIFEST.tmp`: a rollover whose rename did not happen;
    /// - a layer file that does not open (an output whose write did not
    ///   finish: its edit comes only after it is synced), or whose LSNs are
    ///   all held by listed files (its sources are listed: its edit was not
    ///   written, or was lost);
    /// - a log that holds no record (created, never listed or never
    ///   written), or only records at or below the newest LSN of the listed
    ///   layer files (flushed, not yet removed).
    ///
    /// A log with a record above that LSN, or a layer above every listed
    /// file, holds writes no listed file has: the manifest lost the edit
    /// that listed it (a decayed or lost page of its last append), and
    /// removing it would lose them for good.
    fn check(
        &self,
        storage: &dyn Storage,
        dir: &Path,
        name: &str,
        log_opts: &FileOptions,
        layer_opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<()> {
        if name == MANIFEST_TMP_NAME {
            return Ok(());
        }
        let lost = |why: String| -> Error {
            let at = self
                .torn_at
                .map(|at| format!(" (it dropped a damaged last record at offset {at})"))
                .unwrap_or_default();
            crate::error::Corruption::new(
                &self.manifest,
                self.torn_at.unwrap_or(0),
                format!(
                    "the manifest does not list {name}, {why}: an edit of the manifest was lost{at}; \
                     nothing was removed"
                ),
            )
            .into()
        };
        let path = dir.join(name);
        let id = name
            .get(..16)
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .ok_or_else(|| lost("whose name holds no file id".into()))?;
        if name.ends_with(".log") {
            let file = storage.open(&path, log_opts, stats)?;
            let bytes = read_whole(&*file, file.len()?, &recovery_steps)?;
            if bytes.iter().all(|&b| b == 0) {
                // Created, its header never durable.
                return Ok(());
            }
            let log = match replay(&path, &bytes, id, None) {
                Ok(log) => log,
                Err(e) if e.is_corruption() => {
                    return Err(lost(format!("which does not replay ({e})")))
                }
                Err(e) => return Err(e),
            };
            let first = log.records.first().map_or(0, |r| r.header.lsn);
            if log.records.is_empty() || log.last_lsn <= self.flushed_lsn {
                return Ok(());
            }
            return Err(lost(format!(
                "which holds records at LSNs {first}..={}, above LSN {}, the newest the listed layers hold",
                log.last_lsn, self.flushed_lsn
            )));
        }
        let file = storage.open(&path, layer_opts, stats)?;
        let len = file.len()?;
        let stats = stats.clone();
        match DeltaLayerReader::open(LayerFile { file, len, stats }) {
            // Not whole: its edit was never written.
            Err(e) if e.is_corruption() => Ok(()),
            Err(e) => Err(e),
            Ok(r) if r.summary().lsn_max <= self.durable_lsn => Ok(()),
            Ok(r) => Err(lost(format!(
                "a layer of LSNs {}..={}, above LSN {}, the newest the listed files hold",
                r.summary().lsn_min,
                r.summary().lsn_max,
                self.durable_lsn
            ))),
        }
    }
}

/// The first `len` bytes of `file` in aligned reads, without the copy a
/// `read_range` makes (logs are read whole by recovery and by the flush),
/// in requests of the size `steps` gives before each (`io::IoSteps`).
fn read_whole(file: &dyn StorageFile, len: u64, steps: &dyn Fn() -> usize) -> Result<AlignedBuf> {
    let len = usize::try_from(len).map_err(|_| InvalidInput::OptionOutOfRange {
        option: "log length",
        value: len,
        why: "larger than memory can address",
    })?;
    let mut buf = AlignedBuf::zeroed(len, file.alignment());
    // In steps: one request for the whole log (128 MiB by default) would
    // hold every foreground read behind it.
    let n = file.read_at_steps(buf.spare_capacity_full(), 0, steps)?;
    if n < len {
        return Err(crate::io::short_read(
            file.path(),
            format!("the file ends at {n}, expected {len}"),
        ));
    }
    buf.set_len(len);
    Ok(buf)
}

/// Replays the log in `file` (see [`replay`]) and returns it with its
/// bytes. A read can return other bytes than those stored; so when the
/// replay fails, or stops before the end of the file, the bytes from where
/// it stopped are read again (the file's cached copies of them forgotten
/// first, as `io::read_verified` does): if they differ, the first read was
/// wrong and the whole log is read and replayed again; the second result
/// stands. A replay that failed, or a tail that differed, counts a read
/// retry in `stats` (a tail read again to find it the same does not: a log
/// padded past its end is read so at every open).
pub(super) fn replay_log(
    file: &dyn StorageFile,
    stats: &IoStats,
    id: u64,
    sealed: Option<PrevLog>,
) -> Result<(ReplayedLog, AlignedBuf)> {
    let len = file.len()?;
    let bytes = read_whole(file, len, &recovery_steps)?;
    match replay(file.path(), &bytes, id, sealed) {
        Ok(log) if log.end_offset == len => return Ok((log, bytes)),
        Ok(log) => {
            let from = log.end_offset / LOG_SECTOR_BYTES * LOG_SECTOR_BYTES;
            file.forget_cached(from, len - from);
            let tail = file.read_range(from, (len - from) as usize)?;
            if tail[..] == bytes[from as usize..] {
                return Ok((log, bytes));
            }
            stats.record_read_retry(file.class());
        }
        Err(e) if e.is_corruption() => {
            stats.record_read_retry(file.class());
            file.forget_cached(0, len);
        }
        Err(e) => return Err(e),
    }
    let bytes = read_whole(file, len, &recovery_steps)?;
    let log = replay(file.path(), &bytes, id, sealed)?;
    Ok((log, bytes))
}

/// Checks that `dir` is a directory, creating it (and its missing
/// parents, durably) if it is missing and the options allow.
pub(super) fn prepare_dir(storage: &dyn Storage, dir: &Path, opts: &Options) -> Result<()> {
    match storage.entry_kind(dir)? {
        Some(EntryKind::File) => {
            return Err(Error::NotADatabase {
                path: dir.to_owned(),
                why: "it is not a directory".into(),
            })
        }
        Some(EntryKind::Dir) => {}
        None if opts.create_if_missing => {
            // Every directory created here is an entry in its parent: sync
            // each parent from the new directory up to the first one that
            // existed, or a power loss can take the database whole.
            let parent_of = |p: &Path| -> PathBuf {
                match p.parent() {
                    Some(q) if !q.as_os_str().is_empty() => q.to_owned(),
                    _ => PathBuf::from("."),
                }
            };
            let mut created = vec![dir.to_owned()];
            let mut top = parent_of(dir);
            while storage.entry_kind(&top)?.is_none() && top.parent().is_some() {
                created.push(top.clone());
                top = parent_of(&top);
            }
            storage.create_dir_all(dir)?;
            for d in &created {
                storage.sync_dir(&parent_of(d))?;
            }
        }
        None => {
            return Err(Error::io(
                dir,
                "open directory",
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
            ))
        }
    }
    Ok(())
}

/// Refuses a directory that is not a database, before anything is written
/// in it (not even the lock file): one without a manifest that is not empty,
/// or without a manifest when it may not be created.
/// A directory the remote store may restore a database into when it
/// holds no manifest: nothing in it but the lock, a temporary manifest,
/// the generation record and database files (what a restore that failed
/// part way leaves, which the next restore writes again).
fn check_restorable(storage: &dyn Storage, dir: &Path) -> Result<()> {
    let names = storage.list_dir(dir)?;
    if names.iter().any(|n| n.as_os_str() == MANIFEST_NAME) {
        return Ok(());
    }
    let foreign = names.iter().find(|name| {
        let name = name.to_string_lossy();
        name != LOCK_NAME && name != super::remote::GENERATION_NAME && !is_own_file(&name)
    });
    match foreign {
        Some(name) => Err(Error::NotADatabase {
            path: dir.to_owned(),
            why: format!(
                "it has no {MANIFEST_NAME} and holds {}, which is not a database file: not a directory to restore into",
                name.to_string_lossy()
            ),
        }),
        None => Ok(()),
    }
}

pub(super) fn check_is_database(storage: &dyn Storage, dir: &Path, opts: &Options) -> Result<()> {
    let names = storage.list_dir(dir)?;
    if names.iter().any(|n| n.as_os_str() == MANIFEST_NAME) {
        return Ok(());
    }
    // A MANIFEST.tmp without a MANIFEST is a creation that failed before
    // its rename: nothing was ever stored, so it is not foreign.
    let foreign = names.iter().any(|name| {
        name.as_os_str() != LOCK_NAME
            && name.as_os_str() != MANIFEST_TMP_NAME
            && name.as_os_str() != super::remote::GENERATION_NAME
    });
    if foreign {
        return Err(Error::NotADatabase {
            path: dir.to_owned(),
            why: format!("it has no {MANIFEST_NAME} and is not empty"),
        });
    }
    if !opts.create_if_missing {
        return Err(Error::NotADatabase {
            path: dir.to_owned(),
            why: format!("it has no {MANIFEST_NAME}"),
        });
    }
    Ok(())
}
