//! The version set: where an edit becomes durable and visible.
//!
//! What it owns: the manifest log (the file, and the state its edits add up
//! to), the current [`Version`] (with the value files its layers point
//! into), the next file id, and the database's poison state. Every change to what the database holds is one
//! [`Edit`] through [`VersionSet::log_and_apply`]: a freeze (`AddLog`: a
//! new log opens, the open layer is frozen), a flush (`Flushed`: the oldest
//! frozen log replaced by its L0 layer), a compaction or GC (`Compacted`:
//! layers replaced, the horizon raised). The first version comes from the
//! same rule ([`VersionSet::recover`]), from the state the manifest's
//! edits replayed to at open (`manifest::decode`, through
//! `ManifestState::apply`: the one state machine of edits).
//!
//! One edit, under the manifest lock, in this order:
//! 1. the edit is checked against the state (a flush is of the oldest
//!    frozen log, file ids are new, removed layers are listed) and made
//!    durable: appended and synced, or a new manifest written whole. A
//!    failure here changes nothing in memory; what it means is the caller's
//!    policy (a flush or a compaction is retried, a freeze poisons);
//! 2. the next version is built from the state after the edit: every log
//!    and layer the state lists is an object of the current version or one
//!    the edit brought, with the descriptor the state holds; nothing else;
//!    and it is checked (`Version::check`);
//! 3. it is installed; the layers and value files it no longer holds are
//!    marked obsolete (each file is deleted when its last reader lets go)
//!    and the logs it no longer holds are deleted (a flushed log its layer
//!    points into is not among them: it is a value file now).
//!
//! A failure in step 2, or an edit step 1 or the manifest refuses as not
//! fitting, is a bug (`Error::Internal`): the set poisons the database (one
//! place, one policy): every later edit is refused, and so are writes
//! (`Error::Poisoned`, naming the first); reads go on.
//!
//! Invariants: the installed version is the one built from the durable
//! state; a file is deleted only after a durable edit removed it; file ids
//! are taken here only, and never reused while the database is open.
//! Locks: the database's write lock (if held) → `manifest` → `current`
//! (brief). Readers take `current` only.

use super::Version;
use crate::error::{Error, Result};
use crate::layer::inmemory::InMemoryLayer;
use crate::manifest::{
    delta_name, encode_file, log_name, Edit, LayerDesc, ManifestLog, ManifestState,
};
use crate::remote::upload::{SnapFile, Snapshot, Uploader};
use crate::table_cache::{Layer, LayerIo};
use crate::value::{ValueFile, ValueFiles};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

/// The database's poison state: once set, writes and edits are refused
/// (the engine cannot know what reached the disk, or the manifest says
/// what the engine cannot show). The first reason stands.
#[derive(Default)]
pub(crate) struct Poison(Mutex<Option<String>>);

impl Poison {
    /// `Err(Error::Poisoned)` once poisoned.
    pub(crate) fn check(&self) -> Result<()> {
        match self.0.lock() {
            Ok(why) => match why.as_ref() {
                Some(why) => Err(Error::Poisoned(why.clone())),
                None => Ok(()),
            },
            Err(_) => Err(Error::Poisoned("a thread panicked poisoning".into())),
        }
    }

    /// Poisons with `e` as the reason (if none was set before).
    pub(crate) fn set(&self, e: &Error) {
        if let Ok(mut p) = self.0.lock() {
            p.get_or_insert_with(|| e.to_string());
        }
    }
}

/// The files an edit brings, open: logs it adds (one for `AddLog`; at
/// recovery, every listed log), layer files it adds, and (at recovery) the
/// value files. A flush's value file is the log it flushed, which the
/// version holds already.
#[derive(Default)]
pub(crate) struct NewFiles {
    pub(crate) logs: Vec<Arc<InMemoryLayer>>,
    pub(crate) layers: Vec<Arc<Layer>>,
    pub(crate) values: Vec<Arc<ValueFile>>,
}

impl NewFiles {
    pub(crate) fn log(log: Arc<InMemoryLayer>) -> NewFiles {
        NewFiles {
            logs: vec![log],
            ..NewFiles::default()
        }
    }

    pub(crate) fn layers(layers: Vec<Arc<Layer>>) -> NewFiles {
        NewFiles {
            layers,
            ..NewFiles::default()
        }
    }
}

/// A version built from a state, and what the version before it held that
/// it does not.
struct Built {
    version: Version,
    gone_logs: Vec<Arc<InMemoryLayer>>,
    gone_layers: Vec<Arc<Layer>>,
    gone_values: Vec<Arc<ValueFile>>,
}

/// The version of `state`: its logs (the last one open), layers and value
/// files, each the object `prev` holds under its id or one `new` brings (a
/// value file new to the state is the log `prev` held under its id, kept:
/// opened for reads through `io`). Refused: a listed file with no object,
/// an object of a file the state does not list, a layer whose descriptor
/// is not the state's, a version that breaks an invariant.
fn build(
    state: &ManifestState,
    prev: Option<&Version>,
    new: NewFiles,
    io: &LayerIo,
) -> Result<Built> {
    let mut logs: HashMap<u64, Arc<InMemoryLayer>> = HashMap::new();
    let mut layers: HashMap<u64, Arc<Layer>> = HashMap::new();
    if let Some(prev) = prev {
        for log in prev.frozen.iter().chain(std::iter::once(&prev.open)) {
            logs.insert(log.file_id, Arc::clone(log));
        }
        for layer in prev.layers() {
            layers.insert(layer.desc.id, Arc::clone(layer));
        }
    }
    let mut values: ValueFiles = prev.map(|p| p.values.clone()).unwrap_or_default();
    for v in new.values {
        if values.insert(v.id, v).is_some() {
            return Err(invariant("an edit brings a value file the version holds"));
        }
    }
    // The ids of the files the edit brings: each must be new, and listed.
    let mut brought = HashSet::new();
    for log in new.logs {
        brought.insert(log.file_id);
        if logs.insert(log.file_id, log).is_some() {
            return Err(invariant("an edit brings a log the version holds"));
        }
    }
    for layer in new.layers {
        brought.insert(layer.desc.id);
        if layers.insert(layer.desc.id, layer).is_some() {
            return Err(invariant("an edit brings a layer the version holds"));
        }
    }
    let mut listed_logs = Vec::with_capacity(state.logs.len());
    for id in &state.logs {
        let log = logs
            .remove(id)
            .ok_or_else(|| invariant(&format!("log {id} is listed, not open")))?;
        listed_logs.push(log);
    }
    let open = listed_logs
        .pop()
        .ok_or_else(|| invariant("no log is listed: there is no open layer"))?;
    let mut listed_layers = Vec::with_capacity(state.layers.len());
    for desc in &state.layers {
        let layer = layers
            .remove(&desc.id)
            .ok_or_else(|| invariant(&format!("layer {} is listed, not open", desc.id)))?;
        if layer.desc != *desc {
            return Err(invariant(&format!(
                "layer {} is {:?}, the manifest says {desc:?}",
                desc.id, layer.desc
            )));
        }
        listed_layers.push(layer);
    }
    let mut listed_values = ValueFiles::new();
    for (&id, &bytes) in &state.value_files {
        let file = match values.remove(&id) {
            Some(v) => v,
            // A flushed log kept for its values: its file, as the log had it.
            None => match logs.remove(&id) {
                Some(log) => Arc::new(ValueFile::new(
                    id,
                    bytes,
                    Arc::clone(log.file()),
                    io.stats.clone(),
                    Arc::clone(&io.storage),
                )),
                None => return Err(invariant(&format!("value file {id} is listed, not open"))),
            },
        };
        if file.bytes != bytes {
            return Err(invariant(&format!(
                "value file {id} is {} bytes, the manifest says {bytes}",
                file.bytes
            )));
        }
        listed_values.insert(id, file);
    }
    // What is left is what the previous version held and the state no
    // longer lists; nothing the edit brought may be among it.
    let gone_values: Vec<_> = values.into_values().collect();
    let gone_logs: Vec<_> = logs.into_values().collect();
    let gone_layers: Vec<_> = layers.into_values().collect();
    let unlisted = gone_logs
        .iter()
        .map(|l| l.file_id)
        .chain(gone_layers.iter().map(|l| l.desc.id))
        .find(|id| brought.contains(id));
    if let Some(id) = unlisted {
        return Err(invariant(&format!(
            "an edit brings file {id}, which the manifest does not list"
        )));
    }
    let mut version = Version::new(open, listed_logs, listed_layers)?;
    version.gc_lsn = state.gc_lsn;
    version.values = listed_values;
    Ok(Built {
        version,
        gone_logs,
        gone_layers,
        gone_values,
    })
}

/// Checks that `edit` fits the version before it is written: the
/// manifest's own check (`ManifestState::apply`) knows files, not which log
/// is open or frozen.
fn check_edit(edit: &Edit, current: &Version) -> Result<()> {
    match edit {
        Edit::Flushed {
            log,
            layer,
            value_file_bytes,
        } => {
            let oldest = current.frozen.first().map(|l| l.file_id);
            if oldest != Some(*log) {
                return Err(invariant(&format!(
                    "a flush of log {log}, not of the oldest frozen log {oldest:?}"
                )));
            }
            let frozen = &current.frozen[0];
            let (min, max) = frozen.lsn_range();
            if layer.entries > 0 && (layer.lsn_min < min || layer.lsn_max > max) {
                return Err(invariant(&format!(
                    "log {log} holds LSNs {min}..={max}, its layer {} holds {}..={}",
                    layer.id, layer.lsn_min, layer.lsn_max
                )));
            }
            if *value_file_bytes > 0 && *value_file_bytes != frozen.size_bytes() {
                return Err(invariant(&format!(
                    "log {log} is {} bytes, kept as a value file of {value_file_bytes}",
                    frozen.size_bytes()
                )));
            }
        }
        Edit::AddLog(id) => {
            if !current.open.is_frozen() {
                return Err(invariant(&format!(
                    "log {id} added while the open layer {} takes writes",
                    current.open.file_id
                )));
            }
        }
        Edit::Compacted { remove, add, .. } => check_compacted(remove, add, current)?,
    }
    Ok(())
}

/// A compaction replaces live layers, and what it adds holds no LSN and no
/// key outside what it replaces (a merge's and a GC image's outputs come
/// from their inputs; an image with no inputs is checked by
/// `Version::check`: below the L0 layers, within its cover).
fn check_compacted(remove: &[u64], add: &[LayerDesc], current: &Version) -> Result<()> {
    let ids: HashSet<u64> = remove.iter().copied().collect();
    let removed: Vec<&LayerDesc> = current
        .layers()
        .map(|l| &l.desc)
        .filter(|d| ids.contains(&d.id))
        .collect();
    if removed.len() != remove.len() || ids.len() != remove.len() {
        return Err(invariant(&format!(
            "a compaction of layers {remove:?}, not all live"
        )));
    }
    let held = removed.iter().filter(|d| d.entries > 0);
    let Some(lsn_min) = held.clone().map(|d| d.lsn_min).min() else {
        return Ok(());
    };
    let lsn_max = held.clone().map(|d| d.lsn_max).max().unwrap_or(lsn_min);
    let key_min = held.clone().map(|d| &d.key_min).min();
    let key_max = held.map(|d| &d.key_max).max();
    for d in add.iter().filter(|d| d.entries > 0) {
        if d.lsn_min < lsn_min
            || d.lsn_max > lsn_max
            || Some(&d.key_min) < key_min
            || Some(&d.key_max) > key_max
        {
            return Err(invariant(&format!(
                "compaction output {} (LSNs {}..={}) holds more than its inputs {remove:?} \
                 (LSNs {lsn_min}..={lsn_max})",
                d.id, d.lsn_min, d.lsn_max
            )));
        }
    }
    Ok(())
}

fn invariant(what: &str) -> Error {
    Error::Internal(format!("version set: {what}"))
}

/// The manifest, the current version and the poison state (see the
/// module's doc).
pub(crate) struct VersionSet {
    /// Held through a whole edit: edits are made durable and installed
    /// one at a time, in one order.
    manifest: Mutex<ManifestLog>,
    current: RwLock<Arc<Version>>,
    /// The current version's frozen-layer count, their index and filter
    /// bytes, and its L0 count, kept with it at each install: the write
    /// path's backlog checks read these, not the version (no lock, no
    /// `Arc` clone per write).
    frozen_layers: AtomicUsize,
    frozen_index_bytes: AtomicUsize,
    l0_layers: AtomicUsize,
    layer_io: Arc<LayerIo>,
    poison: Arc<Poison>,
    /// The remote store's uploader, when the database has one: handed a
    /// snapshot of every version installed, in the order of the edits.
    uploader: OnceLock<Uploader>,
}

impl VersionSet {
    /// The set of a database just opened: `manifest` was written whole with
    /// the state recovery found (its logs, the new open one last; its
    /// layers); `files` are those logs, open, and those layers.
    pub(crate) fn recover(
        manifest: ManifestLog,
        files: NewFiles,
        layer_io: Arc<LayerIo>,
        poison: Arc<Poison>,
    ) -> Result<VersionSet> {
        let built = build(manifest.state(), None, files, &layer_io)?;
        debug_assert!(built.gone_logs.is_empty() && built.gone_layers.is_empty());
        let set = VersionSet {
            manifest: Mutex::new(manifest),
            current: RwLock::new(Arc::new(built.version.clone())),
            frozen_layers: AtomicUsize::new(0),
            frozen_index_bytes: AtomicUsize::new(0),
            l0_layers: AtomicUsize::new(0),
            layer_io,
            poison,
            uploader: OnceLock::new(),
        };
        set.note_counts(&built.version);
        Ok(set)
    }

    /// The version reads see now.
    pub(crate) fn current(&self) -> Result<Arc<Version>> {
        Ok(Arc::clone(&*self.current.read().map_err(|_| {
            Error::Poisoned("version lock poisoned".into())
        })?))
    }

    /// The database's poison state.
    pub(crate) fn poison(&self) -> &Arc<Poison> {
        &self.poison
    }

    /// Frozen in-memory layers of the current version.
    pub(crate) fn frozen_layers(&self) -> usize {
        self.frozen_layers.load(Ordering::Acquire)
    }

    /// Bytes of the current version's frozen layers' indexes and filters.
    pub(crate) fn frozen_index_bytes(&self) -> usize {
        self.frozen_index_bytes.load(Ordering::Acquire)
    }

    /// L0 layers of the current version.
    pub(crate) fn l0_layers(&self) -> usize {
        self.l0_layers.load(Ordering::Acquire)
    }

    fn manifest(&self) -> Result<MutexGuard<'_, ManifestLog>> {
        self.manifest
            .lock()
            .map_err(|_| Error::Poisoned("a thread panicked holding the manifest".into()))
    }

    /// A new file id. Not recorded until an edit lists the file: an id
    /// taken by a job that fails may be taken again after a reopen, when
    /// its file is garbage and gone.
    pub(crate) fn take_file_id(&self) -> Result<u64> {
        Ok(self.manifest()?.take_file_id())
    }

    /// Makes `edit` durable, then visible: the version built from the state
    /// after it, of the current version's files and `new`, is installed
    /// (see the module's doc). Returns the layers the new version no longer
    /// holds (marked obsolete: each file goes when its last reader lets
    /// go).
    pub(crate) fn log_and_apply(&self, edit: Edit, new: NewFiles) -> Result<Vec<Arc<Layer>>> {
        self.poison.check()?;
        let mut manifest = self.manifest()?;
        let current = self.current()?;
        if let Err(e) = check_edit(&edit, &current) {
            self.poison.set(&e);
            return Err(e);
        }
        // After a failed append the edit may be on disk: its new files stay,
        // unlisted in memory, for the next open to sort out.
        // A manifest that refuses the edit (a file listed twice, a removed
        // layer not listed) found a bug: poisoned like one found below.
        if let Err(e) = manifest.apply(edit) {
            if matches!(e, Error::Internal(_) | Error::Poisoned(_)) {
                self.poison.set(&e);
            }
            return Err(e);
        }
        let built = match build(manifest.state(), Some(&current), new, &self.layer_io) {
            Ok(built) => built,
            Err(e) => {
                self.poison.set(&e);
                return Err(e);
            }
        };
        drop(current);
        if let Some(up) = self.uploader.get() {
            up.submit(remote_snapshot(manifest.state(), &built.version));
        }
        self.install(built.version)?;
        drop(manifest);
        self.retire(&built.gone_layers, &built.gone_values, &built.gone_logs);
        Ok(built.gone_layers)
    }

    /// Lets go of what the version just installed no longer holds: layers
    /// and value files marked obsolete (each deleted when its last reader
    /// lets go), logs deleted.
    fn retire(
        &self,
        layers: &[Arc<Layer>],
        values: &[Arc<ValueFile>],
        logs: &[Arc<InMemoryLayer>],
    ) {
        for layer in layers {
            layer.mark_obsolete();
        }
        for value in values {
            value.mark_obsolete();
        }
        for log in logs {
            // A failure leaves an unlisted log: garbage the next open
            // removes once it proves it superseded.
            let _ = self.layer_io.storage.remove_file(log.path());
        }
    }

    /// A follower's move to a newer index of its store (`Db::refresh_remote`):
    /// the version of `index`'s layers, value files and horizon, with this
    /// set's logs kept (a follower's open log holds nothing), each file the
    /// object the current version holds under its id or one `new` brings.
    /// Built and checked first, then written whole as the manifest, then
    /// installed: a failure leaves the current version, and poisons nothing
    /// (an index that does not fit is the store's, not a bug here).
    pub(crate) fn follow(&self, index: &ManifestState, new: NewFiles) -> Result<()> {
        self.poison.check()?;
        let mut manifest = self.manifest()?;
        let current = self.current()?;
        let now = manifest.state();
        let next = ManifestState {
            next_file_id: now.next_file_id,
            logs: now.logs.clone(),
            layers: index.layers.clone(),
            gc_lsn: index.gc_lsn.max(now.gc_lsn),
            value_files: index.value_files.clone(),
        };
        let built = build(&next, Some(&current), new, &self.layer_io)?;
        drop(current);
        manifest.replace(next)?;
        self.install(built.version)?;
        drop(manifest);
        self.retire(&built.gone_layers, &built.gone_values, &built.gone_logs);
        Ok(())
    }

    fn install(&self, version: Version) -> Result<()> {
        let mut current = self
            .current
            .write()
            .map_err(|_| Error::Poisoned("version lock poisoned".into()))?;
        self.note_counts(&version);
        *current = Arc::new(version);
        Ok(())
    }

    fn note_counts(&self, version: &Version) {
        self.frozen_layers
            .store(version.frozen.len(), Ordering::Release);
        self.frozen_index_bytes
            .store(version.frozen_index_bytes(), Ordering::Release);
        self.l0_layers.store(version.l0.len(), Ordering::Release);
    }

    /// Makes `up` the uploader of every version from the current one on.
    pub(crate) fn set_uploader(&self, up: Uploader) -> Result<()> {
        let manifest = self.manifest()?;
        let current = self.current()?;
        up.submit(remote_snapshot(manifest.state(), &current));
        self.uploader
            .set(up)
            .map_err(|_| Error::Internal("a second uploader".into()))
    }

    /// The uploader, if the database has a remote store.
    pub(crate) fn uploader(&self) -> Option<&Uploader> {
        self.uploader.get()
    }

    /// At close, after the last edit: seals the manifest (see
    /// `ManifestLog::seal`).
    pub(crate) fn seal(&self) -> Result<()> {
        self.manifest()?.seal()
    }
}

/// What the remote store is to hold of `version` (whose state is
/// `state`): its layer and value files, held so that they stay until
/// uploaded; the LSN every write at or below which they hold (flushes go in
/// LSN order); and the manifest that opens them, without the logs (what is
/// not flushed is not uploaded).
fn remote_snapshot(state: &ManifestState, version: &Version) -> Snapshot {
    let mut files: Vec<SnapFile> = version
        .layers()
        .map(|l| SnapFile {
            name: delta_name(l.desc.id),
            bytes: l.desc.bytes,
            _hold: Arc::clone(l) as Arc<dyn std::any::Any + Send + Sync>,
        })
        .collect();
    files.extend(version.values.iter().map(|(&id, v)| SnapFile {
        name: log_name(id),
        bytes: v.bytes,
        _hold: Arc::clone(v) as Arc<dyn std::any::Any + Send + Sync>,
    }));
    let flushed = ManifestState {
        logs: Vec::new(),
        ..state.clone()
    };
    Snapshot {
        lsn: state.layers.iter().map(|l| l.lsn_max).max().unwrap_or(0),
        gc_lsn: state.gc_lsn,
        files,
        manifest: encode_file(&flushed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{IoStats, Storage};
    use crate::version::tests::Fixture;
    use std::path::Path;

    /// The state of `logs` (the last open) and `layers`.
    fn state(logs: &[u64], layers: &[&Arc<Layer>]) -> ManifestState {
        ManifestState {
            next_file_id: 100,
            logs: logs.to_vec(),
            layers: layers.iter().map(|l| l.desc.clone()).collect(),
            ..ManifestState::default()
        }
    }

    fn ids(v: &Version) -> (Vec<u64>, u64, Vec<u64>) {
        (
            v.frozen.iter().map(|l| l.file_id).collect(),
            v.open.file_id,
            v.layers().map(|l| l.desc.id).collect(),
        )
    }

    fn build_io(
        io: &LayerIo,
        s: &ManifestState,
        prev: Option<&Version>,
        new: NewFiles,
    ) -> Result<Built> {
        build(s, prev, new, io)
    }

    fn refused(r: Result<Built>, why: &str) {
        match r {
            Err(Error::Internal(m)) => assert!(m.contains(why), "{m}"),
            Err(e) => panic!("{e}"),
            Ok(b) => panic!("built {:?}", ids(&b.version)),
        }
    }

    #[test]
    fn versions_follow_the_state_edit_by_edit() {
        let f = Fixture::new();
        let (m1, m2) = (f.memory(1, &[("a", 1)]), f.memory(2, &[("a", 2)]));
        let mut s = state(&[1], &[]);
        let v = build_io(&f.io, &s, None, NewFiles::log(Arc::clone(&m1)))
            .unwrap()
            .version;
        assert_eq!(ids(&v), (vec![], 1, vec![]));
        // A freeze: the open layer frozen, the new log open.
        m1.freeze().unwrap();
        check_edit(&Edit::AddLog(2), &v).unwrap();
        s.apply(&Edit::AddLog(2)).unwrap();
        let v = build_io(&f.io, &s, Some(&v), NewFiles::log(Arc::clone(&m2)))
            .unwrap()
            .version;
        assert_eq!(ids(&v), (vec![1], 2, vec![]));
        m2.freeze().unwrap();
        s.apply(&Edit::AddLog(3)).unwrap();
        let v = build_io(&f.io, &s, Some(&v), NewFiles::log(f.memory(3, &[])))
            .unwrap()
            .version;
        // Only the oldest frozen log may be flushed, into a layer of its LSNs.
        let (d1, d2) = (f.disk(4, &[("a", 1)]), f.disk(5, &[("a", 2)]));
        let flushed = |log, d: &Arc<Layer>| Edit::Flushed {
            log,
            layer: d.desc.clone(),
            value_file_bytes: 0,
        };
        assert!(check_edit(&flushed(2, &d2), &v).is_err());
        assert!(check_edit(&flushed(1, &d2), &v).is_err());
        check_edit(&flushed(1, &d1), &v).unwrap();
        s.apply(&flushed(1, &d1)).unwrap();
        let built = build_io(&f.io, &s, Some(&v), NewFiles::layers(vec![Arc::clone(&d1)])).unwrap();
        assert_eq!(ids(&built.version), (vec![2], 3, vec![4]));
        let gone: Vec<u64> = built.gone_logs.iter().map(|l| l.file_id).collect();
        assert_eq!((gone, built.gone_layers.len()), (vec![1], 0));
        // A compaction: layer 4 replaced; GC's horizon kept.
        let v = built.version;
        let l1 = f.run_file(6, crate::manifest::Level::L1, (1, 1), &[("a", 1)], None);
        let edit = Edit::Compacted {
            remove: vec![4],
            add: vec![l1.desc.clone()],
            gc_lsn: 1,
        };
        s.apply(&edit).unwrap();
        let built = build_io(&f.io, &s, Some(&v), NewFiles::layers(vec![Arc::clone(&l1)])).unwrap();
        assert_eq!(ids(&built.version), (vec![2], 3, vec![6]));
        assert_eq!(built.version.gc_lsn, 1);
        assert_eq!(built.gone_layers[0].desc.id, 4);
    }

    #[test]
    fn a_version_of_other_files_than_the_state_lists_is_refused() {
        let f = Fixture::new();
        let (m1, d1, d2) = (
            f.memory(1, &[]),
            f.disk(2, &[("a", 1)]),
            f.disk(3, &[("b", 2)]),
        );
        let files = |layers: Vec<Arc<Layer>>| NewFiles {
            logs: vec![Arc::clone(&m1)],
            layers,
            ..NewFiles::default()
        };
        // A listed layer with no object, an object not listed.
        refused(
            build_io(
                &f.io,
                &state(&[1], &[&d1, &d2]),
                None,
                files(vec![Arc::clone(&d1)]),
            ),
            "layer 3 is listed, not open",
        );
        refused(
            build_io(
                &f.io,
                &state(&[1], &[&d1]),
                None,
                files(vec![Arc::clone(&d1), Arc::clone(&d2)]),
            ),
            "brings file 3, which the manifest does not list",
        );
        // A listed log with no object; no open log.
        refused(
            build_io(&f.io, &state(&[1, 7], &[]), None, files(vec![])),
            "log 7 is listed",
        );
        refused(
            build_io(&f.io, &state(&[], &[]), None, NewFiles::default()),
            "no log",
        );
        // A layer whose descriptor is not the manifest's.
        let mut s = state(&[1], &[&d1]);
        s.layers[0].entries += 1;
        refused(
            build_io(&f.io, &s, None, files(vec![d1])),
            "the manifest says",
        );
        // A new log the version holds already.
        let v = build_io(&f.io, &state(&[1], &[]), None, files(vec![]))
            .unwrap()
            .version;
        refused(
            build_io(
                &f.io,
                &state(&[1], &[]),
                Some(&v),
                NewFiles::log(Arc::clone(&m1)),
            ),
            "brings a log the version holds",
        );
    }

    #[test]
    fn a_compaction_of_layers_not_live_or_with_more_than_its_inputs_is_refused() {
        let f = Fixture::new();
        let (d1, d2) = (f.disk(1, &[("b", 1), ("d", 2)]), f.disk(2, &[("c", 3)]));
        let s = state(&[9], &[&d1, &d2]);
        let files = NewFiles {
            logs: vec![f.memory(9, &[])],
            layers: vec![Arc::clone(&d1), Arc::clone(&d2)],
            ..NewFiles::default()
        };
        let v = build_io(&f.io, &s, None, files).unwrap().version;
        let l1 = |id, lsns, keys: &[(&str, crate::types::Lsn)]| {
            f.run_file(id, crate::manifest::Level::L1, lsns, keys, None)
                .desc
                .clone()
        };
        let compacted = |remove: Vec<u64>, add| Edit::Compacted {
            remove,
            add,
            gc_lsn: 0,
        };
        let ok = l1(3, (1, 3), &[("b", 1), ("c", 3), ("d", 2)]);
        check_edit(&compacted(vec![1, 2], vec![ok.clone()]), &v).unwrap();
        assert!(check_edit(&compacted(vec![1, 7], vec![ok.clone()]), &v).is_err());
        assert!(check_edit(&compacted(vec![1, 1], vec![ok]), &v).is_err());
        let new_key = l1(4, (1, 3), &[("b", 1), ("e", 3)]);
        assert!(check_edit(&compacted(vec![1, 2], vec![new_key]), &v).is_err());
        let new_lsn = l1(5, (1, 4), &[("b", 1), ("c", 3)]);
        assert!(check_edit(&compacted(vec![1, 2], vec![new_lsn]), &v).is_err());
    }

    /// A set over a manifest in the fixture's storage, of `logs` (open).
    fn set_of(f: &Fixture, logs: Vec<Arc<InMemoryLayer>>) -> VersionSet {
        let s = state(&logs.iter().map(|l| l.file_id).collect::<Vec<_>>(), &[]);
        let storage: Arc<dyn crate::io::Storage> = Arc::new(f.storage.clone());
        let manifest = ManifestLog::create(storage, Path::new("/db"), IoStats::new(), s).unwrap();
        let files = NewFiles {
            logs,
            ..NewFiles::default()
        };
        VersionSet::recover(manifest, files, Arc::clone(&f.io), Arc::default()).unwrap()
    }

    #[test]
    fn an_edit_the_version_cannot_show_poisons_and_later_edits_are_refused() {
        let f = Fixture::new();
        let m1 = f.memory(1, &[("a", 1)]);
        let set = set_of(&f, vec![Arc::clone(&m1)]);
        m1.freeze().unwrap();
        // Durable, but the version cannot show it: a layer listed that the
        // edit did not bring.
        let d = f.disk(5, &[("a", 1)]);
        let next = set.take_file_id().unwrap();
        let err = set.log_and_apply(Edit::AddLog(next), NewFiles::layers(vec![d]));
        assert!(matches!(err, Err(Error::Internal(_))));
        assert!(set.poison().check().is_err());
        let again = set.log_and_apply(Edit::AddLog(next + 1), NewFiles::log(f.memory(9, &[])));
        assert!(matches!(again, Err(Error::Poisoned(_))));
        // The version reads see is the last one installed.
        assert_eq!(ids(&set.current().unwrap()), (vec![], 1, vec![]));
    }

    #[test]
    fn a_flush_installs_its_layer_and_deletes_the_log_after_the_edit() {
        let f = Fixture::new();
        let m1 = f.memory(1, &[("a", 1)]);
        let set = set_of(&f, vec![Arc::clone(&m1)]);
        m1.freeze().unwrap();
        let id = set.take_file_id().unwrap();
        let m2 = f.memory(id, &[]);
        set.log_and_apply(Edit::AddLog(id), NewFiles::log(m2))
            .unwrap();
        assert_eq!(set.frozen_layers(), 1);
        let d = f.disk(set.take_file_id().unwrap(), &[("a", 1)]);
        let edit = Edit::Flushed {
            log: 1,
            layer: d.desc.clone(),
            value_file_bytes: 0,
        };
        let log = m1.path().to_owned();
        assert!(f.storage.entry_kind(&log).unwrap().is_some());
        set.log_and_apply(edit, NewFiles::layers(vec![d])).unwrap();
        assert_eq!((set.frozen_layers(), set.l0_layers()), (0, 1));
        assert!(f.storage.entry_kind(&log).unwrap().is_none());
        // What the manifest holds is what the version shows.
        let state = set.manifest().unwrap().state().clone();
        assert_eq!(state.logs, vec![id]);
        assert_eq!(state.layers.len(), 1);
    }
}
