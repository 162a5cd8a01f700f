//! Compaction: the oldest L0 layers merged into one L1 run; image runs; GC.
//!
//! What it owns: the policies, pure functions from descriptors to a plan
//! (tested without I/O), and the jobs that carry a plan out.
//!
//! - **L0 → L1** (`plan`, `merge_into_run`), below.
//! - **Images, per key range** (`image_plan`, `write_image`): where
//!   `image_run_threshold` L1 runs above the newest image overlap in a key
//!   range (runs of ascending keys never do) and hold at least as many
//!   bytes as the image files they sit on (`IMAGE_REWRITE_SHARE`: so the
//!   images written sum to about twice the data, not to its square), the
//!   state of that range at the newest run's end is written out, one
//!   version per key, tombstones dropped, as image files whose *covers*
//!   (`manifest::Cover`) partition the range. Updates all over the keys
//!   image the whole key space; updates that pile up over a hot range image
//!   that range again, and the rest keeps its image. A read of a key at or
//!   above the LSN of an image covering it stops there: it visits the L0
//!   layers, the runs above the image and one image file, whatever the
//!   history below; a scan skips, in older layers, the keys newer images
//!   cover. A forced compaction (`Db::compact`)
//!   whose L0 layers are all below the horizon writes the image straight
//!   from them and the runs, and drops them all in the same edit: merging
//!   them into an L1 run first would write every byte once more, only for
//!   GC to remove that run.
//! - **Tiers** (`tier_plan`): until the runs above the newest image hold
//!   as much as it, they are merged by like size into fewer, larger runs
//!   (as RocksDB's universal compaction does), so that a read passes a few
//!   runs, not one per compaction since the image.
//! - **Relocation** (`Relocate`, `rewrite_layers`): pointers into value
//!   files are copied as they are by every job, except into the files
//!   more than `value_garbage_percent` garbage, whose values every job
//!   writes in their place; and when nothing else is due, the L1 and image
//!   layers pointing into such files are written again (same run, same
//!   LSNs and covers), so that the files lose their last pointer and go.
//! - **GC** (`gc_plan`): every layer file whose keys (an image's cover)
//!   the images at or below the horizon newer than it cover together is
//!   removed (no rewrite): reads below the newest such image's LSN are then
//!   refused with `Error::BelowHorizon`, a cutoff the manifest records in
//!   the edit that removes the files. The horizon is the caller's
//!   (`history_lsns` behind the last LSN, `Db::set_horizon`), never above a
//!   live snapshot.
//!
//! A plan always takes the *oldest* L0 layers, a prefix in LSN order: the run
//! it makes holds every version of exactly their LSN range, below every L0
//! layer that stays, so reads stay newest first. As in Neon's pageserver, a
//! run is not merged with older runs (that would rewrite all of L1 on every
//! compaction); each run partitions the key space into L1 layers of about
//! `target_file_bytes`, cut between keys, so a key's versions of one run
//! are in one file and a point read visits one file per run.
//!
//! The job streams: each input is read in order with a bounded read-ahead
//! (`compaction_memory_bytes` shared by the inputs), and one output is
//! written at a time (its block index and bloom hashes are bounded by the
//! target size). Every output is written, fdatasync'ed, then read back
//! whole and checked against what was written (a checksum of its entries)
//! before the directory is synced and the job returns it; on any failure
//! the outputs are removed and nothing changed. The caller records the
//! change in the manifest, and only then lets the inputs go.

use crate::codec::{write_u32_at, write_u64_at};
use crate::error::{Corruption, Error, Result};
use crate::io::{BufferedWriter, ShutdownMode};
use crate::keyspace::{as_ref, Edge, Span, Union, START};
use crate::layer::delta::reader::{DeltaLayerReader, DeltaRangeIterOwned};
use crate::layer::delta::writer::DeltaLayerWriter;
use crate::layer::file::LayerFile;
use crate::manifest::{delta_name, LayerDesc, Level};
use crate::read::{DeltaSource, Scan, Source};
use crate::table_cache::{Layer, LayerIo};
use crate::types::{Cover, Lsn, ValueKind};
use crate::value::{ValueFiles, ValuePointer, ValueRefs};
use crate::version::Version;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::options::COMPACTION_INPUT_READAHEAD_MIN_BYTES as INPUT_READAHEAD_MIN_BYTES;
/// And at most this (see `BACKGROUND_IO_BYTES_MAX`).
const INPUT_READAHEAD_MAX_BYTES: usize = crate::io::BACKGROUND_IO_BYTES_MAX;

/// What the policy needs from the options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// L0 layers at which a compaction starts; 0: never on its own.
    pub trigger: usize,
    /// Most L0 layers one job merges.
    pub max_inputs: usize,
    /// Bytes of L0 layers past which a job on its own takes no more than
    /// `trigger` layers; 0: no bound. A backlog is then merged in steps of
    /// about this size, and L0 shrinks as each step finishes: a job that
    /// took every layer present would grow with the backlog, and relieve
    /// writers stalled on it (or survive a crash) only once the whole of it
    /// is merged.
    pub max_input_bytes: u64,
}

/// What to compact: the ids of the oldest L0 layers, in LSN order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub inputs: Vec<u64>,
}

/// The next compaction for these L0 layers (oldest first), if any: with
/// `force`, every L0 layer (up to `max_inputs`); otherwise only from
/// `trigger` on, and past `trigger` layers only while they fit
/// `max_input_bytes`.
pub(crate) fn plan(l0: &[&LayerDesc], policy: &Policy, force: bool) -> Option<Plan> {
    let due = if force {
        !l0.is_empty()
    } else {
        policy.trigger > 0 && l0.len() >= policy.trigger
    };
    let mut bytes = 0u64;
    let fits = |(i, d): &(usize, &&LayerDesc)| {
        bytes = bytes.saturating_add(d.bytes);
        force
            || *i < policy.trigger
            || policy.max_input_bytes == 0
            || bytes <= policy.max_input_bytes
    };
    due.then(|| Plan {
        inputs: l0
            .iter()
            .take(policy.max_inputs.max(1))
            .enumerate()
            .take_while(fits)
            .map(|(_, d)| d.id)
            .collect(),
    })
}

/// A job's written layers: each output's descriptor, and its reader (on
/// the local file, or on the store's copy when the file went there during
/// the job, see [`OutputRoom`]).
pub(crate) type Outputs = Vec<(LayerDesc, DeltaLayerReader<LayerFile>)>;

/// Where a job's outputs may go before the job ends (`db::remote`): with a
/// local byte budget, an output the disk has no room for is put into the
/// remote store as soon as it is written and checked, and its local file
/// goes, so that a job larger than the budget never holds more of its
/// outputs on the disk than the budget leaves.
pub(crate) trait OutputRoom {
    /// Output `path` (`bytes` long) is written, synced and checked. True
    /// when the store holds it now and its local file must go: the job
    /// calls [`OutputRoom::let_go`], then moves its reader to the store's
    /// copy.
    fn written(&self, path: &Path, bytes: u64) -> Result<bool>;
    /// Removes the local file of an output [`OutputRoom::written`] put
    /// into the store.
    fn let_go(&self, path: &Path, bytes: u64) -> Result<()>;
}

/// How a job writes its outputs.
pub(crate) struct JobOptions<'a> {
    pub target_file_bytes: u64,
    pub memory_bytes: usize,
    pub writer_buffer_bytes: usize,
    pub block_bytes: usize,
    /// Paces the outputs' bytes; `None`: unpaced.
    pub pacer: Option<Arc<crate::pacer::Pacer>>,
    /// Where the job counts the bytes it writes and reads.
    pub bytes: Arc<JobBytes>,
    /// The value files whose live values the job moves into its outputs.
    pub relocate: Relocate,
    /// Where outputs go when the local disk has no room for them; `None`:
    /// every output stays local.
    pub room: Option<&'a dyn OutputRoom>,
}

/// The value files a job empties: a pointer into one of them is replaced,
/// in the job's output, by the value it points at (read and checked), so
/// that the file's garbage can go (the relocation job in `db::compact`
/// writes the run layers that point into them again).
#[derive(Clone, Default)]
pub(crate) struct Relocate {
    pub files: ValueFiles,
}

impl Relocate {
    /// The version's value files more than `garbage_percent` of whose
    /// bytes no layer points at any more.
    pub(crate) fn of(version: &Version, garbage_percent: u32) -> Relocate {
        let live = version.value_live_bytes();
        let files = version
            .values
            .iter()
            .filter(|(id, f)| {
                let live = u128::from(live.get(id).copied().unwrap_or(0));
                live * 100 < u128::from(100 - garbage_percent) * u128::from(f.bytes)
            })
            .map(|(&id, f)| (id, Arc::clone(f)))
            .collect();
        Relocate { files }
    }

    /// The entry to write for `(key, kind, value)`: a pointer into a file
    /// being emptied becomes the value it points at.
    fn apply(
        &self,
        key: &[u8],
        kind: ValueKind,
        value: Vec<u8>,
        bytes: &JobBytes,
    ) -> Result<(ValueKind, Vec<u8>)> {
        if kind != ValueKind::Pointer || self.files.is_empty() {
            return Ok((kind, value));
        }
        match ValuePointer::decode(&value) {
            Some(p) if self.files.contains_key(&p.file_id) => {
                let value = self.files[&p.file_id].read(key, &p)?;
                bytes
                    .relocated
                    .fetch_add(value.len() as u64, std::sync::atomic::Ordering::Relaxed);
                Ok((ValueKind::Put, value))
            }
            _ => Ok((kind, value)),
        }
    }

    /// Whether `desc`'s layer points into a file being emptied.
    pub(crate) fn touches(&self, desc: &LayerDesc) -> bool {
        desc.values
            .iter()
            .any(|(id, _)| self.files.contains_key(id))
    }
}

/// The layer-file bytes compaction jobs wrote and read since open
/// (`Stats::compaction_write_bytes`, `Stats::compaction_read_bytes`),
/// shared by every job of a database. Relaxed counters: each is exact on
/// its own, the two are not a snapshot together.
#[derive(Debug, Default)]
pub(crate) struct JobBytes {
    /// Bytes of the layer files jobs wrote (L1 runs and images): each
    /// output's length, counted once it is written out and synced, whether
    /// its job then succeeds or not.
    pub written: AtomicU64,
    /// Bytes of the data blocks jobs read from their input layer files
    /// (not the reads that open an input, nor the read-back that checks
    /// an output).
    pub read: Arc<AtomicU64>,
    /// Bytes of values jobs moved out of value files into their outputs
    /// (relocation), counted as each is read and checked.
    pub relocated: AtomicU64,
}

/// One entry of the merge, ordered by (key, lsn).
type Entry = (Vec<u8>, Lsn, ValueKind, Vec<u8>);

/// The k-way merge of the inputs' entries, ascending by (key, lsn). The
/// inputs cover disjoint LSN ranges, so no (key, lsn) comes twice.
struct Merge {
    inputs: Vec<DeltaRangeIterOwned<LayerFile>>,
    heap: BinaryHeap<Reverse<(Vec<u8>, Lsn, usize)>>,
    heads: Vec<Option<(ValueKind, Vec<u8>)>>,
}

impl Merge {
    fn new(inputs: Vec<DeltaRangeIterOwned<LayerFile>>) -> Result<Merge> {
        let mut m = Merge {
            heads: (0..inputs.len()).map(|_| None).collect(),
            inputs,
            heap: BinaryHeap::new(),
        };
        for i in 0..m.inputs.len() {
            m.pull(i)?;
        }
        Ok(m)
    }

    fn pull(&mut self, i: usize) -> Result<()> {
        if let Some(entry) = self.inputs[i].next() {
            let (key, lsn, kind, value) = entry?;
            self.heads[i] = Some((kind, value));
            self.heap.push(Reverse((key, lsn, i)));
        }
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Entry>> {
        let Some(Reverse((key, lsn, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let (kind, value) = self.heads[i].take().expect("a head for each heap entry");
        self.pull(i)?;
        Ok(Some((key, lsn, kind, value)))
    }
}

/// A running checksum of entries, to compare what was written with what
/// reads back.
fn entry_crc(crc: u32, key: &[u8], lsn: Lsn, kind: ValueKind, value: &[u8]) -> u32 {
    let mut head = [0u8; 13];
    write_u32_at(&mut head, 0, key.len() as u32);
    write_u64_at(&mut head, 4, lsn);
    head[12] = kind as u8;
    let crc = crate::crc::crc32c_append(crc, &head);
    let crc = crate::crc::crc32c_append(crc, key);
    crate::crc::crc32c_append(crc, value)
}

/// A compaction output file being written.
struct OutputFile {
    id: u64,
    writer: DeltaLayerWriter<BufferedWriter<dyn crate::io::StorageFile>>,
    bytes: u64,
    entries: u64,
    crc: u32,
    /// The value files its pointers point into.
    refs: ValueRefs,
}

/// Merges `inputs` (the oldest L0 layers, oldest first; or the layers of
/// adjacent L1 runs) into the layers of one L1 run, written, synced and
/// verified. `take_id` gives each output's file id; `cancelled` is asked
/// now and then (an abandoned job removes its outputs and returns
/// `Error::Closed`).
pub(crate) fn merge_into_run(
    inputs: &[Arc<Layer>],
    io: &Arc<LayerIo>,
    opts: &JobOptions,
    mut take_id: impl FnMut() -> Result<u64>,
    cancelled: &dyn Fn() -> bool,
) -> Result<Outputs> {
    removing_outputs_on_failure(io, |written| {
        merge_inner(inputs, io, opts, &mut take_id, cancelled, written)
    })
}

/// Runs a job that records in `written` the id of every file it creates;
/// if the job fails, those files are removed (a failed job changes nothing).
fn removing_outputs_on_failure<T>(
    io: &LayerIo,
    job: impl FnOnce(&mut Vec<u64>) -> Result<T>,
) -> Result<T> {
    let mut written: Vec<u64> = Vec::new();
    let result = job(&mut written);
    if result.is_err() {
        for id in written {
            let _ = io.storage.remove_file(&io.dir.join(delta_name(id)));
        }
    }
    result
}

/// Every entry of each layer in order, each read ahead by an equal share of
/// `compaction_memory_bytes` (within the per-input bounds).
fn whole_layers(
    layers: &[&Arc<Layer>],
    opts: &JobOptions,
) -> Result<Vec<DeltaRangeIterOwned<LayerFile>>> {
    layers_in(layers, opts, &Cover::everything())
}

/// The entries of each layer within `cover`, in order, read ahead as in
/// [`whole_layers`].
fn layers_in(
    layers: &[&Arc<Layer>],
    opts: &JobOptions,
    cover: &Cover,
) -> Result<Vec<DeltaRangeIterOwned<LayerFile>>> {
    let readahead = (opts.memory_bytes / layers.len().max(1))
        .clamp(INPUT_READAHEAD_MIN_BYTES, INPUT_READAHEAD_MAX_BYTES);
    let (start, end) = (as_ref(&cover.start), as_ref(&cover.end));
    layers
        .iter()
        .map(|l| {
            Ok(l.reader()?
                .range_owned(start, end)?
                .with_readahead(readahead)
                .count_reads(Arc::clone(&opts.bytes.read)))
        })
        .collect()
}

fn merge_inner(
    inputs: &[Arc<Layer>],
    io: &Arc<LayerIo>,
    opts: &JobOptions,
    take_id: &mut dyn FnMut() -> Result<u64>,
    cancelled: &dyn Fn() -> bool,
    written: &mut Vec<u64>,
) -> Result<Outputs> {
    let live: Vec<&Arc<Layer>> = inputs.iter().filter(|l| l.desc.entries > 0).collect();
    let (Some(lsn_min), Some(lsn_max)) = (
        live.iter().map(|l| l.desc.lsn_min).min(),
        live.iter().map(|l| l.desc.lsn_max).max(),
    ) else {
        return Ok(Vec::new());
    };
    let mut merge = Merge::new(whole_layers(&live, opts)?)?;
    let spec = RunSpec {
        level: Level::L1,
        lsn_min,
        lsn_max,
        cover: None,
    };
    write_run(
        &mut || merge.next(),
        &spec,
        io,
        opts,
        take_id,
        cancelled,
        written,
    )
}

/// What the layers of a run being written cover.
struct RunSpec {
    level: Level,
    lsn_min: Lsn,
    lsn_max: Lsn,
    /// An image's: the keys its files answer for together. The first file's
    /// cover starts where this does, each next one at its first key, and
    /// the last ends where this does.
    cover: Option<Cover>,
}

/// Writes the entries `next` gives (ascending by key, then LSN) as the
/// layer files of one run: cut between keys at the target size, each
/// synced, then read back whole and checked against what was written (and
/// then, without room on the local disk, put into the store: see
/// [`OutputRoom`]); then the directory is synced. `written` collects the ids of files created, so
/// the caller can remove them if this fails.
fn write_run(
    next: &mut dyn FnMut() -> Result<Option<Entry>>,
    spec: &RunSpec,
    io: &Arc<LayerIo>,
    opts: &JobOptions,
    take_id: &mut dyn FnMut() -> Result<u64>,
    cancelled: &dyn Fn() -> bool,
    written: &mut Vec<u64>,
) -> Result<Outputs> {
    let mut outputs = Outputs::new();
    let mut current: Option<OutputFile> = None;
    let mut last_key: Vec<u8> = Vec::new();
    let mut n: u64 = 0;
    let mut unpaced: u64 = 0;
    while let Some((key, lsn, kind, value)) = next()? {
        n += 1;
        if n.is_multiple_of(4096) && cancelled() {
            return Err(Error::Closed);
        }
        unpaced += (key.len() + value.len()) as u64;
        if unpaced >= crate::pacer::PACE_EVERY_BYTES {
            if let Some(pacer) = &opts.pacer {
                pacer.pace(unpaced);
            }
            unpaced = 0;
        }
        // Cut between keys, never inside one key's versions.
        let cut =
            matches!(&current, Some(o) if o.bytes >= opts.target_file_bytes && key != last_key);
        if cut {
            let open = current.take().expect("an output to cut");
            outputs.push(finish_output(open, spec, io, opts)?);
        }
        let out = match &mut current {
            Some(o) => o,
            None => current.insert(create_output(io, spec, opts, take_id, written)?),
        };
        let (kind, value) = opts.relocate.apply(&key, kind, value, &opts.bytes)?;
        out.writer.add(&key, lsn, kind, &value)?;
        out.refs.add_entry(&key, kind, &value);
        out.bytes += (key.len() + value.len() + 16) as u64;
        out.entries += 1;
        out.crc = entry_crc(out.crc, &key, lsn, kind, &value);
        last_key = key;
    }
    // An image of nothing (every key deleted) is still an image: one empty
    // file says that reads at or above its LSN find nothing older, so GC can
    // collect the history under it and the image policy is satisfied.
    if current.is_none() && outputs.is_empty() && spec.level == Level::Image {
        current = Some(create_output(io, spec, opts, take_id, written)?);
    }
    if let Some(open) = current.take() {
        outputs.push(finish_output(open, spec, io, opts)?);
    }
    if let Some(cover) = &spec.cover {
        let firsts: Vec<Vec<u8>> = outputs.iter().map(|(d, _)| d.key_min.clone()).collect();
        let last = outputs.len().saturating_sub(1);
        for (i, (desc, _)) in outputs.iter_mut().enumerate() {
            desc.cover = Some(Cover {
                start: if i == 0 {
                    cover.start.clone()
                } else {
                    Bound::Included(firsts[i].clone())
                },
                end: if i == last {
                    cover.end.clone()
                } else {
                    Bound::Excluded(firsts[i + 1].clone())
                },
            });
        }
    }
    io.storage.sync_dir(&io.dir)?;
    Ok(outputs)
}

/// Seals an output, then reads it back whole: what reached the device is
/// what was written (a block that rotted between write and read fails
/// here, and the inputs stay). Then `opts.room` may send it to the store.
fn finish_output(
    open: OutputFile,
    spec: &RunSpec,
    io: &Arc<LayerIo>,
    opts: &JobOptions,
) -> Result<(LayerDesc, DeltaLayerReader<LayerFile>)> {
    let (id, len, crc, refs) = seal_output(open, &opts.bytes)?;
    let path = io.dir.join(delta_name(id));
    let file = io
        .storage
        .open(&path, &io.file_options(spec.level), &io.stats)?;
    let reader = Arc::new(DeltaLayerReader::open(LayerFile {
        file,
        len,
        stats: io.stats.clone(),
    })?);
    let (mut back, mut entries, mut unchecked) = (0u32, 0u64, 0u64);
    for entry in reader
        .range_owned(Bound::Unbounded, Bound::Unbounded)?
        .with_readahead(INPUT_READAHEAD_MAX_BYTES)
    {
        let (key, lsn, kind, value) = entry?;
        back = entry_crc(back, &key, lsn, kind, &value);
        entries += 1;
        // The I/O class follows the foreground here too (the read-back is
        // not paced: it writes nothing).
        unchecked += (key.len() + value.len()) as u64;
        if unchecked >= crate::pacer::PACE_EVERY_BYTES {
            unchecked = 0;
            if let Some(pacer) = &opts.pacer {
                pacer.yield_to_reads();
                pacer.follow_foreground();
            }
        }
    }
    if back != crc || entries != reader.summary().entries {
        return Err(Corruption::new(
            &path,
            0,
            "a compaction output reads back other entries than were written",
        )
        .into());
    }
    let reader = Arc::into_inner(reader).expect("the only holder of the reader");
    let mut desc = LayerDesc::from_summary(id, reader.summary());
    desc.level = spec.level;
    desc.values = refs.to_vec();
    (desc.lsn_min, desc.lsn_max) = (spec.lsn_min, spec.lsn_max);
    let mut reader = reader;
    if let Some(room) = opts.room {
        if room.written(&path, len)? {
            room.let_go(&path, len)?;
            // The reader, its index and filter kept, reads the store's
            // copy from now on; its local descriptor closes here (the
            // blocks of the file it kept open go with it).
            reader.file_mut().file =
                io.storage
                    .open(&path, &io.file_options(spec.level), &io.stats)?;
        }
    }
    Ok((desc, reader))
}

/// Writes each of `layers` again (L1 layers or images, not L0: L0's order
/// is the manifest's) as the same run's layers, with the pointers into the
/// files `opts.relocate` empties replaced by their values: same level, LSN
/// range and cover (cut at the target size, an image's cover split at the
/// cuts). On failure, nothing it wrote is left.
pub(crate) fn rewrite_layers(
    layers: &[Arc<Layer>],
    io: &Arc<LayerIo>,
    opts: &JobOptions,
    mut take_id: impl FnMut() -> Result<u64>,
    cancelled: &dyn Fn() -> bool,
) -> Result<Outputs> {
    removing_outputs_on_failure(io, |written| {
        let mut outputs = Vec::new();
        for layer in layers {
            if layer.desc.level == Level::L0 {
                return Err(Error::Internal(format!(
                    "a rewrite of L0 layer {}",
                    layer.desc.id
                )));
            }
            let mut input = whole_layers(&[layer], opts)?.remove(0);
            let spec = RunSpec {
                level: layer.desc.level,
                lsn_min: layer.desc.lsn_min,
                lsn_max: layer.desc.lsn_max,
                cover: layer.desc.cover.clone(),
            };
            outputs.extend(write_run(
                &mut || input.next().transpose(),
                &spec,
                io,
                opts,
                &mut take_id,
                cancelled,
                written,
            )?);
        }
        Ok(outputs)
    })
}

/// Writes the image at `lsn` of the keys of `covers` (disjoint, in key
/// order), from `version`'s runs and the oldest L0 layers `l0` (none, or a
/// prefix whose last layer ends at `lsn`; with none, `lsn` is the newest
/// run's end: never above an L0 layer): every key's newest version at or
/// below it, tombstones dropped, each entry at `lsn`, as the layer files of
/// an image run whose covers together are `covers` (a cover with no key
/// left is one empty file).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_image(
    version: &Arc<Version>,
    l0: &[Arc<Layer>],
    lsn: Lsn,
    covers: &[Cover],
    io: &Arc<LayerIo>,
    opts: &JobOptions,
    mut take_id: impl FnMut() -> Result<u64>,
    cancelled: &dyn Fn() -> bool,
) -> Result<Outputs> {
    removing_outputs_on_failure(io, |written| {
        let mut outputs = Vec::new();
        for cover in covers {
            let span = Span::of_cover(cover);
            // Newest first: the L0 layers given, then the runs (each with
            // the covers of the newer images that hide part of it).
            let mut layers: Vec<(&Arc<Layer>, Vec<Cover>)> = l0
                .iter()
                .rev()
                .filter(|l| l.keys().meets(&span))
                .map(|l| (l, Vec::new()))
                .collect();
            layers.extend(version.run_layers(span, lsn));
            let (inputs, masks): (Vec<&Arc<Layer>>, Vec<Vec<Cover>>) = layers.into_iter().unzip();
            let sources = layers_in(&inputs, opts, cover)?
                .into_iter()
                .zip(masks)
                .map(|(iter, masks)| Source::Delta(Box::new(DeltaSource::new(iter, lsn, masks))))
                .collect();
            let mut scan = Scan::new(sources, Arc::clone(version)).raw();
            let spec = RunSpec {
                level: Level::Image,
                lsn_min: lsn,
                lsn_max: lsn,
                cover: Some(cover.clone()),
            };
            let mut next = || -> Result<Option<Entry>> {
                scan.next_item()
                    .transpose()
                    .map(|e| e.map(|(k, kind, v)| (k, lsn, kind, v)))
            };
            outputs.extend(write_run(
                &mut next,
                &spec,
                io,
                opts,
                &mut take_id,
                cancelled,
                written,
            )?);
        }
        Ok(outputs)
    })
}

/// What the tier policy sees of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunView<'a> {
    pub image: bool,
    /// An image whose files' covers hold the whole key space.
    pub whole: bool,
    /// An L1 run whose keys images at or above its end cover whole: no read
    /// at or above their LSNs reaches it.
    pub hidden: bool,
    pub lsn_max: Lsn,
    /// Bytes of its files, and how many there are.
    pub bytes: u64,
    pub files: usize,
    /// Its smallest and largest key; `None` for an image of nothing.
    pub keys: Option<(&'a [u8], &'a [u8])>,
}

/// An image is written again only once the runs above it hold at least
/// this share of its bytes. Without it, an image every `threshold` runs
/// rewrites all the data each time: as the data grows by about the same
/// bytes per run, the image writes grow with the square of the data
/// (about 25 bytes written per byte ingested at 100 GiB with runs of
/// 512 MiB). With it, the images written up to any size sum to about
/// twice the data: each image at least doubles the bytes since the last.
pub(crate) const IMAGE_REWRITE_SHARE: f64 = 1.0;

/// Runs are merged into one (a tier) when the next older run holds at most
/// this many times the bytes of the newer ones together: universal
/// compaction's size ratio of 100%.
const TIER_SIZE_RATIO: u64 = 2;

/// The most runs that overlap at any one key: how many a read of the
/// most covered key passes, and so the depth the image threshold limits
/// (runs of ascending keys, each over its own range, never pile up).
fn overlap_depth(runs: &[&RunView<'_>]) -> usize {
    // Each run's range opens before and closes after the keys it holds
    // (ends inclusive: at one key an opening sorts before a closing).
    let mut edges: Vec<(&[u8], bool)> = runs
        .iter()
        .filter_map(|r| r.keys)
        .flat_map(|(min, max)| [(min, false), (max, true)])
        .collect();
    edges.sort();
    let (mut open, mut deepest) = (0usize, 0usize);
    for (_, closes) in edges {
        if closes {
            open = open.saturating_sub(1);
        } else {
            open += 1;
            deepest = deepest.max(open);
        }
    }
    deepest
}

/// The L1 runs above the newest image of the whole key space, newest
/// first, as indexes into `runs` (newest first): every run before that
/// image in `runs` but the images of part of the key space, and the L1 run
/// that ends at the image's LSN (the image covers it).
fn above_newest_whole_image(runs: &[RunView<'_>]) -> Vec<usize> {
    let image = runs.iter().find(|r| r.whole);
    (0..runs.len())
        .take_while(|&i| !runs[i].whole)
        .filter(|&i| !runs[i].image && image.is_none_or(|im| runs[i].lsn_max > im.lsn_max))
        .collect()
}

/// What the image and GC policies see of a run's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileView<'a> {
    pub id: u64,
    pub image: bool,
    /// Its run's newest LSN (an image's LSN).
    pub lsn_max: Lsn,
    pub bytes: u64,
    /// The keys it answers for: an image's cover, an L1 layer's keys.
    pub span: Span<'a>,
    /// Its share of its run's reach: an L1 layer's span up to the next
    /// layer's first key (the gap between two files of a run is no gap in
    /// the run: its keys were between theirs), an image's cover.
    pub reach: Span<'a>,
}

/// `version`'s runs, as the tier policy sees them.
pub(crate) fn run_views(version: &Version) -> Vec<RunView<'_>> {
    let images: Vec<&crate::version::Run> = version.runs.iter().filter(|r| r.image).collect();
    version
        .runs
        .iter()
        .map(|r| {
            let hidden = !r.image && {
                let mut union = Union::default();
                for image in images.iter().filter(|i| i.lsn_max >= r.lsn_max) {
                    for l in &image.layers {
                        union.add(l.span());
                    }
                }
                r.layers.iter().all(|l| union.holds(&l.span()))
            };
            RunView {
                image: r.image,
                whole: r.image && r.covers_all(),
                hidden,
                lsn_max: r.lsn_max,
                bytes: r.layers.iter().map(|l| l.desc.bytes).sum(),
                files: r.layers.len(),
                keys: r.key_range(),
            }
        })
        .collect()
}

/// The files of `version`'s runs, as the policies see them.
pub(crate) fn file_views(version: &Version) -> Vec<FileView<'_>> {
    let mut out = Vec::new();
    for run in &version.runs {
        for (i, l) in run.layers.iter().enumerate() {
            let span = l.span();
            let reach = match run.layers.get(i + 1) {
                Some(next) if !run.image => Span {
                    from: span.from,
                    to: next.span().from,
                },
                _ => span,
            };
            out.push(FileView {
                id: l.desc.id,
                image: run.image,
                lsn_max: l.desc.lsn_max,
                bytes: l.desc.bytes,
                span,
                reach,
            });
        }
    }
    out
}

/// A stretch of the key space that the same files reach whole.
struct Stretch<'a> {
    span: Span<'a>,
    /// No file reaches it.
    free: bool,
    /// The newest image file that reaches it.
    image: Option<usize>,
    /// The L1 files above that image (all, without one) that reach it: as
    /// many as a read of a key here passes.
    above: Vec<usize>,
}

/// The key space cut where a file's reach starts or ends, each stretch
/// with the files that reach it (a sweep over the files' edges).
fn stretches<'a>(files: &[FileView<'a>]) -> Vec<Stretch<'a>> {
    let mut edges: Vec<Edge<'a>> = files
        .iter()
        .flat_map(|f| [f.reach.from, f.reach.to])
        .chain([START, Edge::End])
        .collect();
    edges.sort_unstable();
    edges.dedup();
    let mut by_from: Vec<usize> = (0..files.len())
        .filter(|&i| !files[i].reach.is_empty())
        .collect();
    by_from.sort_by_key(|&i| files[i].reach.from);
    let (mut active, mut next) = (Vec::new(), 0);
    let mut out = Vec::with_capacity(edges.len());
    for w in edges.windows(2) {
        // Every reach starts and ends at an edge: one that is active here
        // holds the whole stretch.
        active.retain(|&i: &usize| files[i].reach.to > w[0]);
        while next < by_from.len() && files[by_from[next]].reach.from <= w[0] {
            active.push(by_from[next]);
            next += 1;
        }
        let image = active
            .iter()
            .copied()
            .filter(|&i| files[i].image)
            .max_by_key(|&i| files[i].lsn_max);
        let image_lsn = image.map(|i| files[i].lsn_max);
        let above = active
            .iter()
            .copied()
            .filter(|&i| !files[i].image && image_lsn.is_none_or(|l| files[i].lsn_max > l))
            .collect();
        out.push(Stretch {
            span: Span {
                from: w[0],
                to: w[1],
            },
            free: active.is_empty(),
            image,
            above,
        });
    }
    out
}

/// The image to make, if any, of these runs' files: its LSN (the newest
/// run's end) and the covers to write. A cover is a stretch of the key
/// space where L1 runs sit above the newest image, or no file reaches at
/// all, widened to the whole covers of the image files those runs sit on
/// (so that the old files end up covered whole, and GC can take them);
/// it is written when the runs are `threshold` deep somewhere in it and
/// hold at least `IMAGE_REWRITE_SHARE` of the bytes of the image files
/// they sit on (forced: wherever any L1 run sits above an image). So
/// where updates pile up over a key range, that range is imaged again, and
/// the rest of the key space keeps the image it has. A threshold of 0
/// never makes one on its own.
pub(crate) fn image_plan(
    files: &[FileView<'_>],
    threshold: usize,
    force: bool,
) -> Option<(Lsn, Vec<Cover>)> {
    let deep = if force { 1 } else { threshold };
    let lsn = files.iter().map(|f| f.lsn_max).max()?;
    if deep == 0 {
        return None;
    }
    let stretches = stretches(files);
    // Stretches with runs above their image, or with no file at all (an
    // image of them costs nothing); then every stretch whose newest image
    // is the newest image of one of those.
    let runs_above = |s: &Stretch<'_>| s.free || !s.above.is_empty();
    let mut under: Vec<usize> = stretches
        .iter()
        .filter(|s| runs_above(s))
        .filter_map(|s| s.image)
        .collect();
    under.sort_unstable();
    under.dedup();
    let inside: Vec<bool> = stretches
        .iter()
        .map(|s| runs_above(s) || s.image.is_some_and(|i| under.binary_search(&i).is_ok()))
        .collect();
    let mut covers = Vec::new();
    let mut at = 0;
    while at < stretches.len() {
        // A group: the stretches inside from `at` on.
        let len = inside[at..].iter().take_while(|&&i| i).count();
        let group = &stretches[at..at + len.max(1)];
        at += len.max(1);
        if len == 0 || group.iter().all(|s| s.above.len() < deep) {
            continue;
        }
        let mut above: Vec<usize> = group.iter().flat_map(|s| s.above.clone()).collect();
        let mut images: Vec<usize> = group.iter().filter_map(|s| s.image).collect();
        for v in [&mut above, &mut images] {
            v.sort_unstable();
            v.dedup();
        }
        let bytes = |v: &[usize]| v.iter().map(|&i| files[i].bytes).sum::<u64>();
        if force || bytes(&above) as f64 >= bytes(&images) as f64 * IMAGE_REWRITE_SHARE {
            let span = Span {
                from: group[0].span.from,
                to: group[group.len() - 1].span.to,
            };
            covers.push(span.to_cover());
        }
    }
    (!covers.is_empty()).then_some((lsn, covers))
}

/// Which of the newest L1 runs to merge into one L1 run, if any (indexes
/// into `runs`, newest first): those above the newest image of the whole
/// key space, taken from the newest while the next older one holds at most
/// `TIER_SIZE_RATIO` times the bytes of those taken and is not hidden
/// under newer images, once `threshold` of them overlap at some key, and
/// no more than `max_files` files in all.
///
/// Between two images, the runs above the last would otherwise pile up
/// with the data (an image waits until they hold as much as it). Merged
/// by like size, as in universal compaction, they stay a few tiers deep
/// (about `threshold` per tier), and each byte is merged once per tier,
/// about log(data ÷ run size) times in all. The merged run holds every
/// version of the runs it replaces (the LSN ranges of L1 runs are
/// adjacent): reads at every LSN see what they saw. An image of part of
/// the key space between them (a hot range imaged again) does not stop a
/// tier: the runs that reach past it would pile up under it until the
/// rest of the keys is imaged too, and a read of those keys would pass
/// them all. A run that images cover whole does: no read at their LSNs
/// passes it, and merging it again would only rewrite history.
pub(crate) fn tier_plan(
    runs: &[RunView<'_>],
    threshold: usize,
    max_files: usize,
) -> Option<Vec<usize>> {
    let (mut taken, mut bytes, mut files) = (Vec::new(), 0u64, 0usize);
    for i in above_newest_whole_image(runs) {
        let r = &runs[i];
        let fits = taken.is_empty() || r.bytes <= bytes.saturating_mul(TIER_SIZE_RATIO);
        if !fits || r.hidden || files + r.files > max_files {
            break;
        }
        (bytes, files) = (bytes + r.bytes, files + r.files);
        taken.push(i);
    }
    let tier: Vec<&RunView<'_>> = taken.iter().map(|&i| &runs[i]).collect();
    (threshold > 1 && taken.len() >= threshold && overlap_depth(&tier) >= threshold)
        .then_some(taken)
}

/// What GC removes below `horizon`, if anything: the ids of the files that
/// images at or below it cover whole, each image newer than the file (or,
/// for an L1 file, at its run's end: the image made at it), and the LSN
/// reads are refused below from then on (the newest image at or below the
/// horizon). A file is removed when the union of those images' covers
/// holds its span: no read at or above that LSN ever reaches it.
pub(crate) fn gc_plan(files: &[FileView<'_>], horizon: Lsn) -> Option<(Vec<u64>, Lsn)> {
    let mut images: Vec<&FileView<'_>> = files
        .iter()
        .filter(|f| f.image && f.lsn_max <= horizon)
        .collect();
    images.sort_by_key(|f| Reverse(f.lsn_max));
    let newest = images.first()?.lsn_max;
    // Newest first, an image before the L1 files of its LSN: the union
    // grows by the images newer than each file (for an L1 file, at its LSN
    // too) as the walk reaches it.
    let mut order: Vec<&FileView<'_>> = files.iter().filter(|f| f.lsn_max <= newest).collect();
    order.sort_by_key(|f| (Reverse(f.lsn_max), !f.image));
    let (mut union, mut added, mut gone) = (Union::default(), 0, Vec::new());
    for f in order {
        while let Some(i) = images
            .get(added)
            .filter(|i| i.lsn_max > f.lsn_max || (!f.image && i.lsn_max == f.lsn_max))
        {
            union.add(i.span);
            added += 1;
        }
        if union.holds(&f.span) {
            gone.push(f.id);
        }
    }
    (!gone.is_empty()).then_some((gone, newest))
}

/// Creates the next output file of a run (its I/O counted under the class
/// of the run's level); `written` records its id first, so a failure after
/// this removes it.
fn create_output(
    io: &Arc<LayerIo>,
    spec: &RunSpec,
    opts: &JobOptions,
    take_id: &mut dyn FnMut() -> Result<u64>,
    written: &mut Vec<u64>,
) -> Result<OutputFile> {
    let id = take_id()?;
    written.push(id);
    let path = io.dir.join(delta_name(id));
    let file = io
        .storage
        .create(&path, &io.file_options(spec.level), &io.stats)?;
    let buffer = crate::io::background_writer_bytes(&*file, opts.writer_buffer_bytes);
    let mut sink = BufferedWriter::with_shared(file, buffer, 0)?;
    // Without a pacer (tests), requests of BACKGROUND_IO_BYTES_MAX.
    sink.set_write_steps(match &opts.pacer {
        Some(pacer) => pacer.steps(),
        None => Arc::new(|| crate::io::BACKGROUND_IO_BYTES_MAX),
    });
    let mut writer = DeltaLayerWriter::new(sink, opts.block_bytes)?;
    writer.limit_value_block_padding(crate::layer::delta::BLOCK_PAD_BYTES_MAX);
    Ok(OutputFile {
        id,
        writer,
        bytes: 0,
        entries: 0,
        crc: 0,
        refs: ValueRefs::default(),
    })
}

/// Finishes an output: the file written out to its exact length and made
/// durable, its length counted in `bytes`. Returns (id, length, entry
/// checksum, the value files its pointers point into).
fn seal_output(open: OutputFile, bytes: &JobBytes) -> Result<(u64, u64, u32, ValueRefs)> {
    let (sink, summary) = open.writer.finish()?;
    debug_assert_eq!(summary.entries, open.entries);
    let file = sink.finish(ShutdownMode::PadThenTruncate)?;
    file.sync_data()?;
    bytes
        .written
        .fetch_add(summary.file_bytes, std::sync::atomic::Ordering::Relaxed);
    Ok((open.id, summary.file_bytes, open.crc, open.refs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(id: u64) -> LayerDesc {
        LayerDesc {
            id,
            level: Level::L0,
            key_min: b"a".to_vec(),
            key_max: b"z".to_vec(),
            lsn_min: id * 10,
            lsn_max: id * 10 + 9,
            entries: 10,
            bytes: 4096,
            cover: None,
            values: Vec::new(),
        }
    }

    #[test]
    fn the_policy_takes_the_oldest_l0_layers_from_the_trigger_on() {
        let descs: Vec<LayerDesc> = (1..=6).map(desc).collect();
        let l0: Vec<&LayerDesc> = descs.iter().collect();
        let policy = Policy {
            trigger: 4,
            max_inputs: 5,
            max_input_bytes: 0,
        };
        assert_eq!(plan(&l0[..3], &policy, false), None);
        assert_eq!(plan(&l0[..4], &policy, false).unwrap().inputs, [1, 2, 3, 4]);
        // Never more than max_inputs, always a prefix.
        assert_eq!(plan(&l0, &policy, false).unwrap().inputs, [1, 2, 3, 4, 5]);
        // Forced: any L0 layer; none: nothing.
        assert_eq!(plan(&l0[..1], &policy, true).unwrap().inputs, [1]);
        assert_eq!(plan(&[], &policy, true), None);
        // Trigger 0: only when forced.
        let off = Policy {
            trigger: 0,
            ..policy
        };
        assert_eq!(plan(&l0, &off, false), None);
        assert_eq!(plan(&l0[..2], &off, true).unwrap().inputs, [1, 2]);
    }

    #[test]
    fn a_backlog_of_l0_layers_is_merged_in_steps_of_bounded_bytes() {
        // Layers of 4096 bytes; trigger 2, at most 3 layers' bytes a job.
        let descs: Vec<LayerDesc> = (1..=8).map(desc).collect();
        let l0: Vec<&LayerDesc> = descs.iter().collect();
        let policy = Policy {
            trigger: 2,
            max_inputs: 100,
            max_input_bytes: 3 * 4096,
        };
        assert_eq!(plan(&l0, &policy, false).unwrap().inputs, [1, 2, 3]);
        assert_eq!(plan(&l0[3..], &policy, false).unwrap().inputs, [4, 5, 6]);
        assert_eq!(plan(&l0[6..], &policy, false).unwrap().inputs, [7, 8]);
        // The trigger's layers are taken whatever their bytes.
        let big = Policy {
            max_input_bytes: 1,
            ..policy
        };
        assert_eq!(plan(&l0, &big, false).unwrap().inputs, [1, 2]);
        // Forced (`Db::compact`): every layer, up to max_inputs.
        assert_eq!(plan(&l0, &policy, true).unwrap().inputs.len(), 8);
        // 0: no bound.
        let unbounded = Policy {
            max_input_bytes: 0,
            ..policy
        };
        assert_eq!(plan(&l0, &unbounded, false).unwrap().inputs.len(), 8);
    }

    /// Runs of one file each over the whole key range "a"..="z": (image,
    /// newest LSN, bytes).
    fn sized(spec: &[(bool, Lsn, u64)]) -> Vec<RunView<'static>> {
        spec.iter()
            .map(|&(image, lsn_max, bytes)| RunView {
                image,
                whole: image,
                hidden: false,
                lsn_max,
                bytes,
                files: 1,
                keys: Some((b"a", b"z")),
            })
            .collect()
    }

    /// A run file of one file: (image, LSN, bytes, first key, last key).
    /// An L1 file holds its keys; an image covers from its first key up to
    /// its last, excluded ("" for the start or end of the key space).
    fn file(id: u64, spec: (bool, Lsn, u64, &'static str, &'static str)) -> FileView<'static> {
        let (image, lsn_max, bytes, first, last) = spec;
        let span = if image {
            Span {
                from: match first {
                    "" => START,
                    k => Edge::Key(k.as_bytes(), crate::keyspace::Side::Before),
                },
                to: match last {
                    "" => Edge::End,
                    k => Edge::Key(k.as_bytes(), crate::keyspace::Side::Before),
                },
            }
        } else {
            Span::of_keys(first.as_bytes(), last.as_bytes())
        };
        FileView {
            id,
            image,
            lsn_max,
            bytes,
            span,
            reach: span,
        }
    }

    /// Files numbered from 1 in the order given.
    fn files(spec: &[(bool, Lsn, u64, &'static str, &'static str)]) -> Vec<FileView<'static>> {
        (1..).zip(spec).map(|(id, &f)| file(id, f)).collect()
    }

    fn cover(from: &str, to: &str) -> Cover {
        file(0, (true, 0, 0, leak(from), leak(to))).span.to_cover()
    }

    fn leak(s: &str) -> &'static str {
        Box::leak(s.to_owned().into_boxed_str())
    }

    #[test]
    fn an_image_is_made_at_the_newest_run_once_enough_runs_sit_above_the_last() {
        let f = files(&[
            (false, 90, 100, "a", "z"),
            (false, 70, 100, "a", "z"),
            (true, 50, 100, "", ""),
            (false, 50, 100, "a", "z"),
            (false, 30, 100, "a", "z"),
        ]);
        let all = Some((90, vec![Cover::everything()]));
        assert_eq!(image_plan(&f, 3, false), None);
        // The image the runs sit on covers everything: so does the new one.
        assert_eq!(image_plan(&f, 2, false), all);
        assert_eq!(image_plan(&f, 0, false), None);
        assert_eq!(image_plan(&f, 0, true), all);
        // Nothing above the newest image: nothing to make, even forced (the
        // run it was made at is not above it).
        assert_eq!(image_plan(&f[2..], 1, true), None);
        assert_eq!(image_plan(&[], 1, true), None);
        // Without an image, the runs' keys and the free space around them.
        assert_eq!(
            image_plan(&f[3..], 2, false),
            Some((50, vec![Cover::everything()]))
        );
    }

    #[test]
    fn runs_of_their_own_keys_never_call_for_an_image() {
        // Ascending keys: each run over a range of its own, however many.
        let keys: Vec<(&'static str, &'static str)> = (0..10u8)
            .map(|i| (leak(&format!("a{i}0")), leak(&format!("a{i}9"))))
            .collect();
        let spec: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(i, &(min, max))| (false, 100 - i as Lsn, 100, min, max))
            .collect();
        let mut f = files(&spec);
        assert_eq!(image_plan(&f, 2, false), None);
        // Forced, it makes one all the same.
        assert_eq!(
            image_plan(&f, 2, true),
            Some((100, vec![Cover::everything()]))
        );
        // Runs that meet at one key are two deep there (ends inclusive).
        f[1] = file(2, (false, 99, 100, keys[0].1, keys[1].1));
        assert_eq!(
            image_plan(&f, 2, false),
            Some((100, vec![Cover::everything()]))
        );
        assert_eq!(image_plan(&f, 3, false), None);
        // Runs of random keys, each over all of them, pile up.
        let all = files(&[
            (false, 90, 100, "a", "z"),
            (false, 80, 100, "a", "z"),
            (false, 70, 100, "a", "z"),
        ]);
        assert_eq!(image_plan(&all, 3, false).map(|p| p.0), Some(90));
        assert_eq!(image_plan(&all, 4, false), None);
    }

    #[test]
    fn an_image_is_rewritten_only_once_the_runs_above_hold_as_much_as_it() {
        // Three runs of 100 bytes above an image of 400: not yet, however
        // deep; a fourth makes the 400 (the share is 1).
        let mut f = files(&[
            (false, 90, 100, "a", "z"),
            (false, 80, 100, "a", "z"),
            (false, 70, 100, "a", "z"),
            (true, 50, 400, "", ""),
            (false, 50, 100, "a", "z"),
        ]);
        assert_eq!(image_plan(&f, 2, false), None);
        f[0].bytes = 200;
        assert_eq!(image_plan(&f, 2, false).map(|p| p.0), Some(90));
        // Forced, the bytes do not matter.
        f[0].bytes = 1;
        assert_eq!(image_plan(&f, 2, true).map(|p| p.0), Some(90));
        // Without an image yet, the depth alone decides.
        assert_eq!(image_plan(&f[..3], 3, false).map(|p| p.0), Some(90));
    }

    #[test]
    fn where_updates_pile_up_over_a_key_range_only_that_range_is_imaged() {
        // An image of two files (before "m", from "m" on), and three runs
        // of updates to "n".."p" above it.
        let mut f = files(&[
            (false, 90, 100, "n", "p"),
            (false, 80, 100, "n", "p"),
            (false, 70, 100, "n", "p"),
            (true, 50, 1000, "", "m"),
            (true, 50, 1000, "m", ""),
        ]);
        // The image file under them holds more than they do: not yet.
        assert_eq!(image_plan(&f, 3, false), None);
        // Once they hold as much: the cover of that file, not the other.
        f[4].bytes = 300;
        assert_eq!(image_plan(&f, 3, false), Some((90, vec![cover("m", "")])));
        // Runs over two ranges, under the first and the last of three
        // image files: two covers when both are deep enough, one when only
        // one is; the middle file stays.
        let mut g = files(&[
            (false, 90, 100, "n", "p"),
            (false, 85, 100, "b", "c"),
            (false, 80, 100, "n", "p"),
            (false, 75, 100, "b", "c"),
            (true, 50, 100, "", "f"),
            (true, 50, 100, "f", "m"),
            (true, 50, 100, "m", ""),
        ]);
        let before_f = g[4].span.to_cover();
        assert_eq!(
            image_plan(&g, 2, false),
            Some((90, vec![before_f, cover("m", "")]))
        );
        g[3].span = Span::of_keys(b"x", b"y");
        g[3].reach = g[3].span;
        assert_eq!(image_plan(&g, 2, false), Some((90, vec![cover("m", "")])));
    }

    #[test]
    fn runs_of_like_size_above_the_image_merge_into_tiers() {
        // Four equal runs above an image: all four.
        let r = sized(&[
            (false, 9, 10),
            (false, 8, 10),
            (false, 7, 10),
            (false, 6, 10),
            (true, 5, 99),
            (false, 5, 10),
        ]);
        assert_eq!(tier_plan(&r, 4, 100), Some(vec![0, 1, 2, 3]));
        assert_eq!(tier_plan(&r, 5, 100), None, "not deep enough");
        assert_eq!(tier_plan(&r, 0, 100), None, "threshold 0: never");
        // A run more than twice the newer ones together stops the tier
        // (30 <= 2 × 30 joins, 200 > 2 × 60 does not).
        let r = sized(&[
            (false, 9, 10),
            (false, 8, 10),
            (false, 7, 10),
            (false, 6, 30),
            (false, 5, 200),
        ]);
        assert_eq!(tier_plan(&r, 4, 100), Some(vec![0, 1, 2, 3]));
        let r = sized(&[
            (false, 9, 10),
            (false, 8, 10),
            (false, 7, 100),
            (false, 6, 10),
        ]);
        assert_eq!(
            tier_plan(&r, 3, 100),
            None,
            "the third is too big: two is no tier"
        );
        // Never more files than allowed.
        let mut r = sized(&[
            (false, 9, 10),
            (false, 8, 10),
            (false, 7, 10),
            (false, 6, 10),
        ]);
        r[3].files = 50;
        assert_eq!(tier_plan(&r, 3, 52), Some(vec![0, 1, 2]));
        assert_eq!(tier_plan(&r, 4, 52), None);
        // Runs over keys of their own do not pile up: no merge.
        let keys: Vec<[u8; 2]> = (0..8u8).map(|i| [b'a', i]).collect();
        let own: Vec<RunView<'_>> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| RunView {
                image: false,
                whole: false,
                hidden: false,
                lsn_max: 100 - i as Lsn,
                bytes: 10,
                files: 1,
                keys: Some((&k[..], &k[..])),
            })
            .collect();
        assert_eq!(tier_plan(&own, 2, 100), None);
        // Nothing above the image: nothing to merge.
        let r = sized(&[(false, 5, 10), (true, 5, 10), (false, 4, 10)]);
        assert_eq!(tier_plan(&r, 1, 100), None);
        assert_eq!(tier_plan(&r, 2, 100), None);
        // An image of part of the key space between runs does not stop a
        // tier: the runs on either side of it merge.
        let mut r = sized(&[
            (false, 9, 10),
            (true, 8, 10),
            (false, 8, 10),
            (false, 7, 10),
            (true, 5, 99),
        ]);
        r[1].whole = false;
        assert_eq!(tier_plan(&r, 3, 100), Some(vec![0, 2, 3]));
        // Unless the run under it is hidden (the image covers its keys).
        r[2].hidden = true;
        assert_eq!(tier_plan(&r, 2, 100), None);
    }

    #[test]
    fn gc_removes_the_files_that_newer_images_at_or_below_the_horizon_cover_whole() {
        let f = files(&[
            (false, 90, 100, "n", "p"), // 1
            (true, 90, 100, "m", ""),   // 2: an image of "m" on
            (false, 80, 100, "n", "p"), // 3
            (false, 70, 100, "a", "z"), // 4
            (true, 50, 100, "", "m"),   // 5: before "m"
            (true, 50, 100, "m", ""),   // 6: from "m" on
            (false, 50, 100, "a", "l"), // 7
            (false, 50, 100, "m", "z"), // 8
            (false, 30, 100, "a", "z"), // 9
        ]);
        let ids = |h| {
            gc_plan(&f, h).map(|(mut ids, lsn)| {
                ids.sort_unstable();
                (ids, lsn)
            })
        };
        assert_eq!(ids(10), None);
        assert_eq!(ids(49), None);
        // The image at 50 covers its own run (7, 8) and what is older (9).
        assert_eq!(ids(60), Some((vec![7, 8, 9], 50)));
        // The image at 90 covers from "m" on: the runs of "n".."p" at or
        // below it (1, 3) and the older image of that part (6), not the
        // run over "a".."z" (4, half outside it), nor the image before "m".
        assert_eq!(ids(95), Some((vec![1, 3, 6, 7, 8, 9], 90)));
        assert_eq!(ids(u64::MAX), ids(95));
        // The L1 run an image was made at goes with what is older.
        assert_eq!(gc_plan(&f[..2], u64::MAX), Some((vec![1], 90)));
        // Images alone, none over another: nothing to do.
        assert_eq!(gc_plan(&f[4..6], u64::MAX), None);
    }
}
