//! The table cache: the layer files of the live versions, each with its
//! reader opened on first use, and the budget on what open readers hold.
//!
//! What it owns: [`Layer`] (a layer file on disk: its descriptor from the
//! manifest, its reader when open, whether a durable edit removed it),
//! [`LayerIo`] (where layer files live and how they open: storage,
//! directory, file options, block cache) and [`OpenReaders`] (the memory of
//! the open readers' block indexes and bloom filters, kept within
//! `Options::index_memory_bytes_max` by closing the least recently read).
//!
//! Invariants: a reader is installed only after the file was checked
//! against its descriptor (its length, and the summary its footer holds);
//! a failed open is not kept; `OpenReaders::bytes` is the sum of the
//! installed readers' index and filter bytes; a layer's file is deleted
//! only when it is marked obsolete (after the durable manifest edit that
//! removed it: see `version::set`) and the last holder lets it go (an
//! unlinked file stays readable through its descriptor).

use crate::cache::BlockCache;
use crate::error::{Corruption, Error, Result};
use crate::io::{FileClass, FileOptions, IoStats, Storage};
use crate::keyspace::Span;
use crate::layer::bloom::PointKey;
use crate::layer::delta::reader::DeltaLayerReader;
use crate::layer::file::LayerFile;
use crate::manifest::{delta_name, LayerDesc, Level};
use crate::types::Lsn;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

/// Where layer files live and how they are opened.
pub(crate) struct LayerIo {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) dir: PathBuf,
    /// How delta layer files open (see [`LayerIo::file_options`]).
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
    /// How a layer file of `level` opens: `opts`, its operations counted
    /// as `FileClass::Image` for an image layer, as `FileClass::Delta` for
    /// the others.
    pub(crate) fn file_options(&self, level: Level) -> FileOptions {
        let class = match level {
            Level::L0 | Level::L1 => FileClass::Delta,
            Level::Image => FileClass::Image,
        };
        FileOptions {
            class,
            ..self.opts.clone()
        }
    }

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

    /// Whether the open reader's bloom filter says the layer cannot hold
    /// `point`'s key; `false` when the reader is not open (the caller then
    /// opens it through [`Self::reader`]). Counts as a read of the layer,
    /// as [`Self::reader`] does, so that a layer its filter keeps answering
    /// for stays open.
    ///
    /// A get tests the filter of every layer it passes (each L0 layer,
    /// each run), and most say no: this answers from the lock and the
    /// filter line (which [`Self::prefetch_filter`] started loading),
    /// without taking a count on the reader or touching its index and key
    /// range, each a line of memory colder than the filter's.
    pub(crate) fn filter_rules_out(&self, point: PointKey<'_>) -> bool {
        self.touch();
        self.reader
            .read()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.filter_rules_out(point)))
            .unwrap_or(false)
    }

    /// Records a read of the layer now (`OpenReaders::clock`).
    fn touch(&self) {
        let now = self.io.readers.clock.load(Ordering::Relaxed);
        if self.last_read.load(Ordering::Relaxed) != now {
            self.last_read.store(now, Ordering::Relaxed);
        }
    }

    /// The reader, opening the file first if it is not open: its footer,
    /// index and bloom filter are read and checked, and the file must be
    /// what the manifest says it is. A failed open is not kept: the next
    /// read tries again.
    pub(crate) fn reader(self: &Arc<Self>) -> Result<Arc<DeltaLayerReader<LayerFile>>> {
        self.touch();
        if let Some(r) = self.open_reader() {
            return Ok(r);
        }
        self.open()
    }

    /// [`Self::reader`] when the reader is not open: opens it (once, if
    /// several threads ask at the same time). Out of line and cold: a
    /// get's way through [`Self::reader`] stays a few lines of code.
    #[cold]
    #[inline(never)]
    fn open(self: &Arc<Self>) -> Result<Arc<DeltaLayerReader<LayerFile>>> {
        let _opening = self
            .opening
            .lock()
            .map_err(|_| Error::Poisoned("a thread panicked opening a layer".into()))?;
        if let Some(r) = self.open_reader() {
            return Ok(r);
        }
        let path = self.path();
        let opts = self.io.file_options(self.desc.level);
        let file = self.io.storage.open(&path, &opts, &self.io.stats)?;
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
        self.close_in(&mut slot)
    }

    /// [`Layer::close_reader`], under the slot's lock the caller holds.
    fn close_in(&self, slot: &mut Option<Arc<DeltaLayerReader<LayerFile>>>) -> bool {
        let bytes = self.reader_bytes.swap(0, Ordering::Relaxed);
        self.io.readers.bytes.fetch_sub(bytes, Ordering::Relaxed);
        slot.take().is_some()
    }

    /// Lets `remove` take the local file away (the store holds it: reads go
    /// there from now on). A reader no read holds stays open, its block
    /// index and filter kept, on the store's copy of the file (opened with
    /// no I/O): its next get costs the one ranged GET of its block, not the
    /// GETs of a footer, an index and a filter again. One a read holds is
    /// closed (that read goes on through its descriptor, and the disk's
    /// bytes are freed when it lets go). Reads of the layer wait meanwhile
    /// (the slot's lock), so that none sees the local file after it went.
    pub(crate) fn evict_local(
        &self,
        remove: impl FnOnce(&std::path::Path) -> Result<()>,
    ) -> Result<()> {
        let _opening = self
            .opening
            .lock()
            .map_err(|_| Error::Poisoned("a thread panicked opening a layer".into()))?;
        let path = self.path();
        let mut slot = self
            .reader
            .write()
            .map_err(|_| Error::Poisoned("a thread panicked reading a layer".into()))?;
        remove(&path)?;
        let moved = match slot.as_mut().and_then(Arc::get_mut) {
            Some(reader) => {
                let opts = self.io.file_options(self.desc.level);
                match self.io.storage.open(&path, &opts, &self.io.stats) {
                    Ok(file) => {
                        reader.file_mut().file = file;
                        true
                    }
                    Err(_) => false,
                }
            }
            None => false,
        };
        if !moved {
            self.close_in(&mut slot);
        }
        Ok(())
    }

    /// Whether a read holds the layer's open reader (a get for a moment, a
    /// compaction's input or a scan for longer).
    pub(crate) fn reader_held(&self) -> bool {
        self.open_reader()
            .is_some_and(|r| Arc::strong_count(&r) > 2)
    }

    /// `OpenReaders::clock` at the layer's last read.
    pub(crate) fn last_read(&self) -> u64 {
        self.last_read.load(Ordering::Relaxed)
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
    pub(crate) fn is_empty(&self) -> bool {
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
    pub(crate) fn holds_key(&self, key: &[u8]) -> bool {
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
