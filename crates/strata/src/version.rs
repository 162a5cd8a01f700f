//! The version: an immutable picture of the live layers that reads see.
//!
//! What it owns: the open in-memory layer, the frozen in-memory layers
//! waiting for their flush (oldest first), and the layer files on disk with
//! what they cover (L0 delta layers, oldest first). A reader takes an
//! `Arc<Version>` and keeps it for the whole read, so it never sees a change
//! in part, and the layers it reads stay alive under it (an unlinked file
//! stays readable through its descriptor).
//!
//! Every transition (freeze, flush) builds a new `Version` from the old one
//! and checks its invariants before it is installed ([`Version::check`]):
//! the layers, from the oldest L0 layer through the frozen layers to the open
//! one, cover disjoint LSN ranges in increasing order. A breach is a bug,
//! reported as `Error::Poisoned`, never installed.
//!
//! Below the L0 layers, the runs (newest first): an L1 run's files have
//! disjoint key ranges; an image run's files have disjoint covers (the
//! key spans they answer for, which may leave parts of the key space to
//! older runs). A breach of either is refused as above.
//!
//! Two searches answer reads. [`Version::candidates`], for get and
//! multi_get: the layers that can hold a key at an LSN, newest first,
//! ending at the newest image whose cover holds the key; the first version
//! at or below the LSN found in that order is the answer.
//! [`Version::run_layers`], for scans and images: the run layers that meet
//! a key range, each with the covers of the newer images that hide part of
//! it (a key an image answers for is the image's, whatever older layers
//! hold). Reads below `gc_lsn`, where GC removed history, are refused
//! before either runs.

use crate::cache::BlockCache;
use crate::error::{Corruption, Error, Result};
use crate::io::{FileOptions, IoStats, Storage};
use crate::keyspace::{Span, Union};
use crate::layer::bloom::PointKey;
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::file::LayerFile;
use crate::layer::inmemory::InMemoryLayer;
use crate::manifest::{delta_name, LayerDesc, Level};
use crate::types::Cover;
use crate::types::Lsn;
use std::cmp::Reverse;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

/// Where layer files live and how they are opened.
pub(crate) struct LayerIo {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) dir: PathBuf,
    pub(crate) opts: FileOptions,
    pub(crate) stats: IoStats,
    /// The block cache every layer's point reads go through.
    pub(crate) cache: Option<Arc<BlockCache>>,
    /// Data blocks read from layer files for point lookups (get and
    /// multi_get; not the reads that open a file, not scans, not
    /// background jobs): `Stats::point_lookup_reads`.
    pub(crate) point_reads: Arc<AtomicU64>,
    /// The open readers and the memory of their indexes and filters.
    pub(crate) readers: OpenReaders,
}

impl LayerIo {
    /// A reader's point reads go through the cache and are counted.
    fn attach(&self, reader: &mut DeltaLayerReader<LayerFile>, file_id: u64) {
        reader.set_cache(self.cache.clone(), file_id);
        reader.count_point_reads(Arc::clone(&self.point_reads));
    }
}

/// The layer files whose readers are open, and the memory their block
/// indexes and bloom filters hold, kept within `Options::
/// index_memory_bytes_max`: past it, the readers of the least recently
/// read layers are closed (their next read opens the file again: footer,
/// index and filter, read and checked). A reader a scan or a compaction
/// still holds stays alive until it lets go; the budget counts it no more.
pub(crate) struct OpenReaders {
    /// 0: no budget.
    budget: usize,
    bytes: AtomicUsize,
    /// Ticks once per reader opened: a layer notes it at each read, so the
    /// readers closed first are those not read since the most opens (a
    /// load and, when it moved, a store per read: no shared
    /// read-modify-write on the read path).
    clock: AtomicU64,
    /// Readers closed to stay within the budget, since open.
    closed: AtomicU64,
    /// With a budget: layers that opened a reader since their last close
    /// (some may have gone since), and the length at the last pruning.
    layers: Mutex<(Vec<Weak<Layer>>, usize)>,
}

impl OpenReaders {
    pub(crate) fn new(budget_bytes: u64) -> Self {
        OpenReaders {
            budget: usize::try_from(budget_bytes).unwrap_or(usize::MAX),
            bytes: AtomicUsize::new(0),
            clock: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            layers: Mutex::new((Vec::new(), 0)),
        }
    }

    /// Bytes of the open readers' indexes and filters.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Readers closed to stay within the budget, since open.
    pub(crate) fn closed(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }

    /// `layer` opened a reader (counted): closes the least recently read
    /// other readers while the total is over the budget.
    fn opened(&self, layer: &Arc<Layer>) {
        self.clock.fetch_add(1, Ordering::Relaxed);
        if self.budget == 0 {
            return;
        }
        let Ok(mut guard) = self.layers.lock() else {
            return;
        };
        let (layers, pruned_len) = &mut *guard;
        layers.push(Arc::downgrade(layer));
        if self.bytes() <= self.budget {
            // Layers gone or closed since are dropped from the list now and
            // then, so that it stays about as long as the open readers.
            if layers.len() >= 2 * (*pruned_len).max(64) {
                layers.retain(|w| w.upgrade().is_some_and(|l| l.open_reader().is_some()));
                *pruned_len = layers.len();
            }
            return;
        }
        let mut open: Vec<(u64, Arc<Layer>)> = layers
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|l| !Arc::ptr_eq(l, layer) && l.open_reader().is_some())
            .map(|l| (l.last_read.load(Ordering::Relaxed), l))
            .collect();
        open.sort_by_key(|(at, _)| *at);
        for (_, l) in &open {
            if self.bytes() <= self.budget {
                break;
            }
            if l.close_reader() {
                self.closed.fetch_add(1, Ordering::Relaxed);
            }
        }
        layers.retain(|w| w.upgrade().is_some_and(|l| l.open_reader().is_some()));
        *pruned_len = layers.len();
    }
}

/// A layer file on disk: what it covers (from the manifest), and its reader,
/// opened on first use (and again after `OpenReaders` closed it).
pub(crate) struct Layer {
    pub(crate) desc: LayerDesc,
    io: Arc<LayerIo>,
    reader: RwLock<Option<Arc<DeltaLayerReader<LayerFile>>>>,
    /// The index and filter bytes of `reader`, as counted in `OpenReaders`.
    reader_bytes: AtomicUsize,
    /// `OpenReaders::clock` at the last read.
    last_read: AtomicU64,
    /// Held while the reader opens, so that it opens once.
    opening: Mutex<()>,
    /// Set once a durable manifest edit has removed the layer: its file is
    /// deleted when the last version (or scan) holding it lets it go.
    obsolete: AtomicBool,
}

impl Drop for Layer {
    fn drop(&mut self) {
        let bytes = *self.reader_bytes.get_mut();
        self.io.readers.bytes.fetch_sub(bytes, Ordering::Relaxed);
        if *self.obsolete.get_mut() {
            // A failure leaves an unlisted file: garbage the next open removes.
            let _ = self.io.storage.remove_file(&self.path());
        }
    }
}

impl Layer {
    /// A layer whose file opens when it is first read.
    pub(crate) fn new(desc: LayerDesc, io: Arc<LayerIo>) -> Layer {
        Layer {
            desc,
            io,
            reader: RwLock::new(None),
            reader_bytes: AtomicUsize::new(0),
            last_read: AtomicU64::new(0),
            opening: Mutex::new(()),
            obsolete: AtomicBool::new(false),
        }
    }

    /// A layer whose file is open already (a flush's or a compaction's
    /// output).
    pub(crate) fn with_reader(
        desc: LayerDesc,
        io: Arc<LayerIo>,
        mut reader: DeltaLayerReader<LayerFile>,
    ) -> Arc<Layer> {
        io.attach(&mut reader, desc.id);
        let layer = Arc::new(Layer::new(desc, io));
        layer.install(Arc::new(reader));
        layer
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.io.dir.join(delta_name(self.desc.id))
    }

    /// Starts loading the filter line a point read of `point` will test,
    /// if the reader is open (see [`BloomFilter::prefetch_hash`]).
    ///
    /// [`BloomFilter::prefetch_hash`]: crate::layer::bloom::BloomFilter::prefetch_hash
    pub(crate) fn prefetch_filter(&self, point: PointKey<'_>) {
        if let Ok(reader) = self.reader.read() {
            if let Some(reader) = &*reader {
                reader.prefetch_filter(point);
            }
        }
    }

    /// The reader, opening the file first if it is not open: its footer,
    /// index and bloom filter are read and checked, and the file must be
    /// what the manifest says it is. A failed open is not kept: the next
    /// read tries again.
    pub(crate) fn reader(self: &Arc<Self>) -> Result<Arc<DeltaLayerReader<LayerFile>>> {
        let now = self.io.readers.clock.load(Ordering::Relaxed);
        if self.last_read.load(Ordering::Relaxed) != now {
            self.last_read.store(now, Ordering::Relaxed);
        }
        if let Some(r) = self.open_reader() {
            return Ok(r);
        }
        let _opening = self
            .opening
            .lock()
            .map_err(|_| Error::Poisoned("a thread panicked opening a layer".into()))?;
        if let Some(r) = self.open_reader() {
            return Ok(r);
        }
        let path = self.path();
        let file = self.io.storage.open(&path, &self.io.opts, &self.io.stats)?;
        let len = file.len()?;
        if len != self.desc.bytes {
            return Err(Corruption::new(
                &path,
                len.min(self.desc.bytes),
                format!(
                    "the file has {len} bytes, the manifest says {}",
                    self.desc.bytes
                ),
            )
            .into());
        }
        let mut reader = DeltaLayerReader::open(LayerFile {
            file,
            len,
            stats: self.io.stats.clone(),
        })?;
        self.io.attach(&mut reader, self.desc.id);
        if let Some(why) = self.desc.mismatch(reader.summary()) {
            return Err(Corruption::new(&path, 0, why).into());
        }
        let reader = Arc::new(reader);
        self.install(Arc::clone(&reader));
        Ok(reader)
    }

    /// Makes `reader` the layer's and counts its memory.
    /// (The slot's lock covers the reader, `reader_bytes` and their share
    /// of `OpenReaders::bytes`, so the three agree.)
    fn install(self: &Arc<Self>, reader: Arc<DeltaLayerReader<LayerFile>>) {
        let bytes = reader.index_memory_bytes();
        if let Ok(mut slot) = self.reader.write() {
            *slot = Some(reader);
            self.reader_bytes.store(bytes, Ordering::Relaxed);
            self.io.readers.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        self.io.readers.opened(self);
    }

    /// Closes the reader (those still held live on); whether it was open.
    fn close_reader(&self) -> bool {
        let Ok(mut slot) = self.reader.write() else {
            return false;
        };
        let bytes = self.reader_bytes.swap(0, Ordering::Relaxed);
        self.io.readers.bytes.fetch_sub(bytes, Ordering::Relaxed);
        slot.take().is_some()
    }

    /// Deletes the file once nothing holds the layer (see `obsolete`).
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// The reader if the file is open.
    pub(crate) fn open_reader(&self) -> Option<Arc<DeltaLayerReader<LayerFile>>> {
        self.reader.read().ok()?.clone()
    }

    /// Whether the layer holds no entry.
    fn is_empty(&self) -> bool {
        self.desc.entries == 0
    }

    /// The LSNs of its entries, inclusive.
    pub(crate) fn lsn_range(&self) -> (Lsn, Lsn) {
        (self.desc.lsn_min, self.desc.lsn_max)
    }

    /// The keys it holds: `key_min..=key_max` (none if it is empty).
    pub(crate) fn keys(&self) -> Span<'_> {
        if self.is_empty() {
            Span::NONE
        } else {
            Span::of_keys(&self.desc.key_min, &self.desc.key_max)
        }
    }

    /// Whether `key` is within its keys.
    fn holds_key(&self, key: &[u8]) -> bool {
        !self.is_empty()
            && self.desc.key_min.as_slice() <= key
            && key <= self.desc.key_max.as_slice()
    }

    /// The keys it answers for: an image's cover, another layer's keys.
    pub(crate) fn span(&self) -> Span<'_> {
        match &self.desc.cover {
            Some(cover) => Span::of_cover(cover),
            None => self.keys(),
        }
    }
}

/// A layer a search visits.
pub(crate) enum Candidate<'a> {
    Memory(&'a Arc<InMemoryLayer>),
    Disk(&'a Arc<Layer>),
}

/// A run: layers with disjoint spans, sorted by key. An L1 run holds
/// every version of one LSN range (the L0 layers one compaction merged);
/// an image run holds one version per key at one LSN (`lsn_min` =
/// `lsn_max`), for the keys its files' covers hold.
#[derive(Clone)]
pub(crate) struct Run {
    pub(crate) image: bool,
    pub(crate) lsn_min: Lsn,
    pub(crate) lsn_max: Lsn,
    pub(crate) layers: Vec<Arc<Layer>>,
}

impl Run {
    /// Its smallest and largest key; `None` if it holds none (an image of
    /// nothing).
    pub(crate) fn key_range(&self) -> Option<(&[u8], &[u8])> {
        let first = self.layers.iter().find(|l| !l.is_empty())?;
        let last = self.layers.iter().rev().find(|l| !l.is_empty())?;
        Some((&first.desc.key_min, &last.desc.key_max))
    }

    /// Whether its files' spans hold the whole key space (an image that
    /// answers for every key).
    pub(crate) fn covers_all(&self) -> bool {
        let mut union = Union::default();
        for l in &self.layers {
            union.add(l.span());
        }
        union.holds(&Span::ALL)
    }

    /// The layer whose span holds `key`, if one does. (An L1 run's by
    /// plain key comparisons: this is on every get's path.)
    fn layer_for(&self, key: &[u8]) -> Option<&Arc<Layer>> {
        if !self.image {
            let i = self
                .layers
                .partition_point(|l| l.desc.key_max.as_slice() < key);
            return self
                .layers
                .get(i)
                .filter(|l| l.desc.key_min.as_slice() <= key);
        }
        let at = crate::keyspace::Edge::Key(key, crate::keyspace::Side::Before);
        let i = self.layers.partition_point(|l| l.span().to <= at);
        self.layers.get(i).filter(|l| l.span().contains(key))
    }
}

/// The live layers, replaced whole on every change.
#[derive(Clone)]
pub(crate) struct Version {
    pub(crate) open: Arc<InMemoryLayer>,
    /// Frozen in-memory layers, oldest first.
    pub(crate) frozen: Vec<Arc<InMemoryLayer>>,
    /// L0 delta layers, oldest first.
    pub(crate) l0: Vec<Arc<Layer>>,
    /// L1 and image runs, newest first (by their newest LSN; an L1 run
    /// before an image at the same LSN); all below the L0 layers.
    pub(crate) runs: Vec<Run>,
    /// Reads below this LSN are refused: GC removed history below it
    /// (the manifest's record of it).
    pub(crate) gc_lsn: Lsn,
}

impl Version {
    /// A version of these layers (L0 in the order given, L1 grouped into
    /// runs by LSN range), if they keep the invariants.
    pub(crate) fn new(
        open: Arc<InMemoryLayer>,
        frozen: Vec<Arc<InMemoryLayer>>,
        layers: Vec<Arc<Layer>>,
    ) -> Result<Version> {
        let (l0, l1): (Vec<_>, Vec<_>) =
            layers.into_iter().partition(|l| l.desc.level == Level::L0);
        let mut runs: Vec<Run> = Vec::new();
        let mut l1 = l1;
        let order = |l: &Arc<Layer>| {
            (
                Reverse(l.desc.lsn_max),
                l.desc.level == Level::Image,
                Reverse(l.desc.lsn_min),
            )
        };
        l1.sort_by(|a, b| (order(a), a.span().from).cmp(&(order(b), b.span().from)));
        for layer in l1 {
            let image = layer.desc.level == Level::Image;
            match runs.last_mut() {
                Some(run)
                    if (run.image, run.lsn_min, run.lsn_max)
                        == (image, layer.desc.lsn_min, layer.desc.lsn_max) =>
                {
                    run.layers.push(layer)
                }
                _ => runs.push(Run {
                    image,
                    lsn_min: layer.desc.lsn_min,
                    lsn_max: layer.desc.lsn_max,
                    layers: vec![layer],
                }),
            }
        }
        let v = Version {
            open,
            frozen,
            l0,
            runs,
            gc_lsn: 0,
        };
        v.check()?;
        Ok(v)
    }

    /// The open layer frozen, `next` open in its place.
    pub(crate) fn with_frozen(&self, next: Arc<InMemoryLayer>) -> Result<Version> {
        let mut v = self.clone();
        v.frozen.push(std::mem::replace(&mut v.open, next));
        v.check()?;
        Ok(v)
    }

    /// The oldest frozen layer, `flushed`, replaced by its L0 layer file.
    pub(crate) fn with_flushed(
        &self,
        flushed: &Arc<InMemoryLayer>,
        layer: Arc<Layer>,
    ) -> Result<Version> {
        match self.frozen.first() {
            Some(oldest) if Arc::ptr_eq(oldest, flushed) => {}
            _ => return Err(invariant("a flush that is not of the oldest frozen layer")),
        }
        let mut v = self.clone();
        v.frozen.remove(0);
        v.l0.push(layer);
        v.check()?;
        Ok(v)
    }

    /// The layers `remove` (by id; all must be listed) replaced by `add`,
    /// reads refused below `gc_lsn` (or the cutoff before, if higher).
    pub(crate) fn with_compacted(
        &self,
        remove: &[u64],
        add: Vec<Arc<Layer>>,
        gc_lsn: Lsn,
    ) -> Result<Version> {
        let mut layers: Vec<Arc<Layer>> = self.layers().cloned().collect();
        let before = layers.len();
        layers.retain(|l| !remove.contains(&l.desc.id));
        if before - layers.len() != remove.len() {
            return Err(invariant(&format!(
                "a compaction of layers {remove:?}, not all live"
            )));
        }
        layers.extend(add);
        let mut v = Version::new(Arc::clone(&self.open), self.frozen.clone(), layers)?;
        v.gc_lsn = self.gc_lsn.max(gc_lsn);
        Ok(v)
    }

    /// Checks the invariants (see the module's doc).
    pub(crate) fn check(&self) -> Result<()> {
        let runs = self
            .runs
            .iter()
            .rev()
            .filter(|r| !r.image)
            .map(|r| ((r.lsn_min, r.lsn_max), r.layers[0].desc.id));
        let disk = self
            .l0
            .iter()
            .filter(|l| !l.is_empty())
            .map(|l| (l.lsn_range(), l.desc.id));
        let memory = self
            .frozen
            .iter()
            .chain(std::iter::once(&self.open))
            .filter(|l| !l.is_empty())
            .map(|l| (l.lsn_range(), l.file_id));
        let mut prev: Option<(Lsn, u64)> = None;
        for ((min, max), id) in runs.chain(disk).chain(memory) {
            // The open layer's range grows while this runs: its minimum is
            // u64::MAX until its first write, never below its real value.
            if min > max && min != Lsn::MAX {
                return Err(invariant(&format!("layer {id} has LSNs {min}..={max}")));
            }
            if let Some((prev_max, prev_id)) = prev {
                if min <= prev_max {
                    return Err(invariant(&format!(
                        "layer {id} starts at LSN {min}, not above layer {prev_id}'s {prev_max}"
                    )));
                }
            }
            prev = Some((max, id));
        }
        for run in &self.runs {
            for pair in run.layers.windows(2) {
                if pair[0].span().to > pair[1].span().from {
                    return Err(invariant(&format!(
                        "layers {} and {} of one run overlap in keys",
                        pair[0].desc.id, pair[1].desc.id
                    )));
                }
            }
            for l in &run.layers {
                // An image may hold no key (all in its cover were deleted);
                // an L1 layer holds some.
                let whole = match (&l.desc.cover, run.image) {
                    (Some(_), true) => l.span().holds(&l.keys()),
                    (None, false) => !l.is_empty(),
                    _ => false,
                };
                if !whole {
                    return Err(invariant(&format!(
                        "layer {} ({:?}, cover {:?}) is not what its run needs",
                        l.desc.id, l.desc.level, l.desc.cover
                    )));
                }
            }
        }
        // An image is never above the L0 layers (it is made from runs).
        if let (Some(image), Some(l0)) = (
            self.runs.iter().find(|r| r.image),
            self.l0.iter().find(|l| !l.is_empty()),
        ) {
            if image.lsn_max >= l0.desc.lsn_min {
                return Err(invariant(&format!(
                    "an image at LSN {} is not below L0 layer {} at {}",
                    image.lsn_max, l0.desc.id, l0.desc.lsn_min
                )));
            }
        }
        Ok(())
    }

    /// The in-memory and L0 layers a read at `lsn` visits, newest first:
    /// every in-memory layer, and the L0 layers that hold an LSN at or
    /// below `lsn` and a key the read wants (`wanted`).
    pub(crate) fn upper<'a>(
        &'a self,
        lsn: Lsn,
        wanted: impl Fn(&Layer) -> bool + 'a,
    ) -> impl Iterator<Item = Candidate<'a>> + 'a {
        let memory = std::iter::once(&self.open)
            .chain(self.frozen.iter().rev())
            .map(Candidate::Memory);
        let l0 = self
            .l0
            .iter()
            .rev()
            .filter(move |l| l.lsn_range().0 <= lsn && wanted(l))
            .map(Candidate::Disk);
        memory.chain(l0)
    }

    /// The layers that can hold `key` at `lsn`, newest first: those of
    /// [`Self::upper`], then in each run that holds an LSN at or below
    /// `lsn` the layer whose span holds `key`, up to and including the
    /// first image layer that does (it answers for the key: nothing older
    /// is needed).
    pub(crate) fn candidates<'a>(
        &'a self,
        key: &'a [u8],
        lsn: Lsn,
    ) -> impl Iterator<Item = Candidate<'a>> + 'a {
        let mut done = false;
        let runs = self
            .runs
            .iter()
            .filter(move |r| r.lsn_min <= lsn)
            .filter_map(move |r| Some((r.image, r.layer_for(key)?)))
            .take_while(move |&(image, _)| {
                let visit = !done;
                done |= image;
                visit
            })
            .map(|(_, l)| Candidate::Disk(l));
        // L0 layers by plain key comparisons: this is on every get's path.
        self.upper(lsn, move |l| l.holds_key(key)).chain(runs)
    }

    /// The run layers a read at `lsn` of the keys in `span` visits, newest
    /// first, each with the covers of the newer images that meet it: a
    /// key in one of those is the image's, and the layer's versions of it
    /// are not to be read (older layers may still hold a key the image
    /// says was deleted, or GC may have taken the newer history of it). A
    /// layer whose part of `span` newer images cover whole is left out,
    /// and so are the runs past an image that covers the rest of `span`.
    pub(crate) fn run_layers<'a>(
        &'a self,
        span: Span<'a>,
        lsn: Lsn,
    ) -> Vec<(&'a Arc<Layer>, Vec<Cover>)> {
        let mut imaged = Union::default();
        let mut out = Vec::new();
        for run in self.runs.iter().filter(|r| r.lsn_min <= lsn) {
            if imaged.holds(&span) {
                break;
            }
            for layer in &run.layers {
                let wanted = layer.span().intersect(&span);
                if wanted.is_empty() || imaged.holds(&wanted) {
                    continue;
                }
                if !layer.is_empty() {
                    out.push((layer, imaged.covers_meeting(&wanted)));
                }
            }
            // An image's files have disjoint covers: they do not hide one
            // another, only what is older.
            if run.image {
                for layer in &run.layers {
                    imaged.add(layer.span());
                }
            }
        }
        out
    }

    /// The oldest LSN reads may ask for (see `gc_lsn`).
    /// Bytes of the frozen layers' indexes and filters.
    pub(crate) fn frozen_index_bytes(&self) -> usize {
        self.frozen.iter().map(|l| l.index_memory_bytes()).sum()
    }

    pub(crate) fn horizon(&self) -> Lsn {
        self.gc_lsn
    }

    /// Every layer file: L0 oldest first, then the runs newest first.
    pub(crate) fn layers(&self) -> impl Iterator<Item = &Arc<Layer>> {
        self.l0
            .iter()
            .chain(self.runs.iter().flat_map(|r| &r.layers))
    }
}

fn invariant(what: &str) -> Error {
    Error::Poisoned(format!("version invariant broken: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::io::sim::SimStorage;
    use crate::io::{
        BufferedWriter, FileClass, FileOptions, IoEngine, IoMode, IoStats, ShutdownMode, Storage,
    };
    use crate::layer::delta::writer::DeltaLayerWriter;
    use crate::log::record::encode_log_header;
    use crate::types::ValueKind;
    use std::ops::Bound;
    use std::path::PathBuf;

    struct Fixture {
        storage: SimStorage,
        stats: IoStats,
        io: Arc<LayerIo>,
    }

    fn opts(class: FileClass) -> FileOptions {
        FileOptions {
            mode: IoMode::Buffered,
            engine: IoEngine::Sync,
            class,
            fallback_to_buffered: false,
            alignment_bytes: None,
        }
    }

    impl Fixture {
        fn new() -> Fixture {
            let storage = SimStorage::new(7);
            storage.create_dir_all(&PathBuf::from("/db")).unwrap();
            let stats = IoStats::new();
            let io = Arc::new(LayerIo {
                storage: Arc::new(storage.clone()),
                dir: PathBuf::from("/db"),
                opts: opts(FileClass::Delta),
                stats: stats.clone(),
                cache: None,
                point_reads: Arc::default(),
                readers: OpenReaders::new(0),
            });
            Fixture { storage, stats, io }
        }

        /// An L0 layer file holding a Put of each (key, lsn).
        fn disk(&self, id: u64, entries: &[(&str, Lsn)]) -> Arc<Layer> {
            self.run_file(id, Level::L0, (0, 0), entries, None)
        }

        /// A layer file of `level` holding a Put of each (key, lsn): its
        /// LSNs `lsns` (an L1 or image layer's; an L0 layer's are its
        /// entries'), and an image's `cover` (keys from its `.0`, to its
        /// `.1`; "" for no bound).
        fn run_file(
            &self,
            id: u64,
            level: Level,
            lsns: (Lsn, Lsn),
            entries: &[(&str, Lsn)],
            cover: Option<(&str, &str)>,
        ) -> Arc<Layer> {
            let path = PathBuf::from("/db").join(delta_name(id));
            let file = self
                .storage
                .create(&path, &opts(FileClass::Delta), &self.stats)
                .unwrap();
            let sink = BufferedWriter::with_shared(file, 1 << 16, 0).unwrap();
            let mut w = DeltaLayerWriter::new(sink, 4096).unwrap();
            let mut sorted = entries.to_vec();
            sorted.sort();
            for (k, lsn) in sorted {
                w.add(k.as_bytes(), lsn, ValueKind::Put, b"v").unwrap();
            }
            let (sink, summary) = w.finish().unwrap();
            let file = sink.finish(ShutdownMode::PadThenTruncate).unwrap();
            let reader = DeltaLayerReader::open(LayerFile {
                file,
                len: summary.file_bytes,
                stats: self.stats.clone(),
            })
            .unwrap();
            let mut desc = LayerDesc::from_summary(id, reader.summary());
            if level != Level::L0 {
                (desc.level, desc.lsn_min, desc.lsn_max) = (level, lsns.0, lsns.1);
            }
            let bound = |k: &str, b: fn(Vec<u8>) -> Bound<Vec<u8>>| match k {
                "" => Bound::Unbounded,
                k => b(k.as_bytes().to_vec()),
            };
            desc.cover = cover.map(|(start, end)| Cover {
                start: bound(start, Bound::Included),
                end: bound(end, Bound::Excluded),
            });
            Layer::with_reader(desc, Arc::clone(&self.io), reader)
        }

        /// An in-memory layer with one batch per (key, lsn).
        fn memory(&self, id: u64, writes: &[(&str, Lsn)]) -> Arc<InMemoryLayer> {
            let path = PathBuf::from(format!("/db/{id}.log"));
            let file = self
                .storage
                .create(&path, &opts(FileClass::Log), &self.stats)
                .unwrap();
            let mut writer = BufferedWriter::with_shared(file, 1 << 16, 0).unwrap();
            writer.write(&encode_log_header(id, None)).unwrap();
            let layer = InMemoryLayer::new_open(id, writer, 1 << 20, 1 << 20, &self.stats);
            for (k, lsn) in writes {
                let mut b = WriteBatch::new();
                b.put(k, b"v");
                layer.append(&b, *lsn).unwrap();
            }
            Arc::new(layer)
        }
    }

    fn id(c: Candidate<'_>) -> u64 {
        match c {
            Candidate::Memory(m) => m.file_id,
            Candidate::Disk(d) => d.desc.id,
        }
    }

    /// The layers a point read of `key` visits.
    fn ids(v: &Version, key: &[u8], lsn: Lsn) -> Vec<u64> {
        v.candidates(key, lsn).map(id).collect()
    }

    /// The layers a scan of `s..e` visits.
    fn range_ids(v: &Version, s: Bound<&[u8]>, e: Bound<&[u8]>, lsn: Lsn) -> Vec<u64> {
        let span = Span::of_range(s, e);
        v.upper(lsn, move |l| l.keys().meets(&span))
            .map(id)
            .chain(v.run_layers(span, lsn).into_iter().map(|(l, _)| l.desc.id))
            .collect()
    }

    #[test]
    fn layers_out_of_lsn_order_are_refused() {
        let f = Fixture::new();
        let (a, b) = (f.disk(1, &[("a", 1), ("b", 5)]), f.disk(2, &[("c", 5)]));
        let open = f.memory(3, &[]);
        // Overlapping LSNs between two L0 layers.
        let err = Version::new(Arc::clone(&open), vec![], vec![a.clone(), b.clone()]);
        assert!(
            matches!(err, Err(Error::Poisoned(ref m)) if m.contains("layer 2 starts at LSN 5"))
        );
        // L0 older than it says.
        let (c, d) = (f.disk(4, &[("a", 10)]), f.disk(5, &[("a", 9)]));
        assert!(Version::new(Arc::clone(&open), vec![], vec![c.clone(), d.clone()]).is_err());
        assert!(Version::new(Arc::clone(&open), vec![], vec![d, c.clone()]).is_ok());
        // A frozen layer below L0.
        let frozen = f.memory(6, &[("x", 3)]);
        assert!(Version::new(Arc::clone(&open), vec![frozen], vec![c.clone()]).is_err());
        // The open layer below a frozen one.
        let (frozen, low_open) = (f.memory(7, &[("x", 20)]), f.memory(8, &[("y", 19)]));
        assert!(Version::new(low_open, vec![frozen], vec![c]).is_err());
    }

    #[test]
    fn transitions_keep_the_order_and_refuse_a_flush_out_of_turn() {
        let f = Fixture::new();
        let v = Version::new(f.memory(1, &[("a", 1)]), vec![], vec![]).unwrap();
        let v = v.with_frozen(f.memory(2, &[("a", 2)])).unwrap();
        let v = v.with_frozen(f.memory(3, &[])).unwrap();
        assert_eq!(v.frozen.len(), 2);
        // Only the oldest frozen layer may be flushed.
        let second = Arc::clone(&v.frozen[1]);
        assert!(v.with_flushed(&second, f.disk(4, &[("a", 2)])).is_err());
        let first = Arc::clone(&v.frozen[0]);
        let v = v.with_flushed(&first, f.disk(5, &[("a", 1)])).unwrap();
        assert_eq!((v.frozen.len(), v.l0.len()), (1, 1));
        // A flushed layer whose LSNs are not the frozen layer's is refused.
        let second = Arc::clone(&v.frozen[0]);
        assert!(v.with_flushed(&second, f.disk(6, &[("a", 1)])).is_err());
    }

    #[test]
    fn candidates_are_newest_first_and_filtered_by_key_range_and_lsn() {
        let f = Fixture::new();
        let l0 = vec![
            f.disk(1, &[("b", 1), ("d", 2)]),
            f.disk(2, &[("a", 3), ("c", 4)]),
            f.disk(3, &[("e", 5), ("f", 6)]),
        ];
        let v = Version::new(f.memory(5, &[("z", 8)]), vec![f.memory(4, &[("z", 7)])], l0).unwrap();
        // Memory layers always, newest first; files by key range and LSN.
        assert_eq!(ids(&v, b"c", 10), [5, 4, 2, 1]);
        assert_eq!(ids(&v, b"e", 10), [5, 4, 3]);
        assert_eq!(ids(&v, b"c", 2), [5, 4, 1]);
        assert_eq!(ids(&v, b"0", 10), [5, 4]);
        let range = |s, e| range_ids(&v, s, e, 10);
        assert_eq!(range(Bound::Excluded(b"d"), Bound::Unbounded), [5, 4, 3]);
        assert_eq!(
            range(Bound::Included(b"c"), Bound::Excluded(b"e")),
            [5, 4, 2, 1]
        );
        assert_eq!(
            range(Bound::Included(b"d"), Bound::Excluded(b"e")),
            [5, 4, 1]
        );
        assert_eq!(range(Bound::Unbounded, Bound::Excluded(b"b")), [5, 4, 2]);
    }

    #[test]
    fn an_image_answers_for_its_cover_and_leaves_the_rest_to_older_runs() {
        let f = Fixture::new();
        let (l1, img) = (Level::L1, Level::Image);
        // Oldest first: an L1 run over a..z (two files), an image at 20 of
        // "m" on, an L1 run at 21..30 over c..p, an image at 40 of ..."d".
        let layers = vec![
            f.run_file(1, l1, (1, 10), &[("a", 1), ("f", 2)], None),
            f.run_file(2, l1, (1, 10), &[("n", 3), ("z", 4)], None),
            f.run_file(3, img, (20, 20), &[("n", 20)], Some(("m", ""))),
            f.run_file(4, l1, (21, 30), &[("c", 21), ("p", 22)], None),
            f.run_file(5, img, (40, 40), &[], Some(("", "d"))),
        ];
        let v = Version::new(f.memory(9, &[]), vec![], layers).unwrap();
        assert_eq!(v.runs.len(), 4);
        // A point read stops at the first image whose cover holds the key.
        assert_eq!(ids(&v, b"a", 50), [9, 5]);
        assert_eq!(ids(&v, b"f", 50), [9, 4, 1]);
        assert_eq!(ids(&v, b"p", 50), [9, 4, 3]);
        assert_eq!(ids(&v, b"z", 50), [9, 3]);
        // Below an image's LSN, it is not there.
        assert_eq!(ids(&v, b"a", 39), [9, 1]);
        assert_eq!(ids(&v, b"z", 19), [9, 2]);
        // A scan: each run layer with the newer images' covers that meet
        // it; a layer whose part of the range they cover whole is left out.
        let span = Span::ALL;
        let masks: Vec<(u64, Vec<Cover>)> = v
            .run_layers(span, 50)
            .into_iter()
            .map(|(l, m)| (l.desc.id, m))
            .collect();
        let cover = |s: Bound<&str>, e: Bound<&str>| Cover {
            start: s.map(|k| k.as_bytes().to_vec()),
            end: e.map(|k| k.as_bytes().to_vec()),
        };
        let upto_d = cover(Bound::Unbounded, Bound::Excluded("d"));
        // (File 2, n..z, is all inside the image at 20: left out.)
        assert_eq!(
            masks,
            [(4, vec![upto_d.clone()]), (3, vec![]), (1, vec![upto_d])]
        );
        let from = |k: &'static [u8]| range_ids(&v, Bound::Included(k), Bound::Unbounded, 50);
        assert_eq!(from(b"e"), [9, 4, 3, 1]);
        assert_eq!(from(b"g"), [9, 4, 3]);
        // Below the image at 20, file 2 is read, with nothing masked.
        let at_19: Vec<(u64, Vec<Cover>)> = v
            .run_layers(Span::of_range(Bound::Included(b"m"), Bound::Unbounded), 19)
            .into_iter()
            .map(|(l, m)| (l.desc.id, m))
            .collect();
        assert_eq!(at_19, [(2, vec![])]);
        // Covers of one image run that overlap are refused.
        let clash = vec![
            f.run_file(6, img, (60, 60), &[("b", 60)], Some(("", "c"))),
            f.run_file(7, img, (60, 60), &[("c", 60)], Some(("bb", ""))),
        ];
        assert!(Version::new(f.memory(10, &[]), vec![], clash).is_err());
        // As are keys outside an image's cover.
        let outside = vec![f.run_file(8, img, (60, 60), &[("q", 60)], Some(("", "q")))];
        assert!(Version::new(f.memory(11, &[]), vec![], outside).is_err());
    }
}
