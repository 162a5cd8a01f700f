//! Options of a database and of a write, with their limits.
//!
//! Every limit is a named constant; `Options::validate` checks an options
//! value against them before anything is created, so a bad option is a typed
//! error and nothing is written.

use crate::error::{InvalidInput, Result};
use crate::io::{IoEngine, IoMode, Storage};
pub use crate::types::{BATCH_BYTES_MAX, KEY_BYTES_MAX, VALUE_BYTES_MAX_LIMIT};
use std::sync::Arc;

/// Default value size limit, bytes (`Options::value_size_bytes_max`).
pub const VALUE_BYTES_MAX_DEFAULT: usize = 16 << 20;
/// Smallest and largest in-memory layer size cap, bytes.
pub const LAYER_BYTES_MIN: u64 = 64 << 10;
pub const LAYER_BYTES_MAX: u64 = 4 << 30;
/// Default in-memory layer size cap, bytes.
pub const LAYER_BYTES_DEFAULT: u64 = 128 << 20;
/// Default capacity of each of the log writer's buffers, bytes.
pub const WRITER_BUFFER_BYTES_DEFAULT: usize = 1 << 20;
/// Default of `Options::frozen_layers_max`.
pub const FROZEN_LAYERS_MAX_DEFAULT: usize = 4;
/// Target size of a delta layer's data block, bytes.
pub const DELTA_BLOCK_BYTES_DEFAULT: usize = 4 << 10;
/// Defaults of the compaction options (see `Options`).
pub const L0_COMPACTION_TRIGGER_DEFAULT: usize = 4;
pub const L0_SLOWDOWN_LAYERS_DEFAULT: usize = 20;
pub const L0_STOP_LAYERS_DEFAULT: usize = 36;
pub const TARGET_FILE_BYTES_DEFAULT: u64 = 64 << 20;
pub const COMPACTION_MEMORY_BYTES_DEFAULT: usize = 32 << 20;
/// Each compaction input's read-ahead is at least this, bytes (and the
/// inputs of one job are capped so that their read-aheads fit
/// `compaction_memory_bytes`, which must hold two).
pub(crate) const COMPACTION_INPUT_READAHEAD_MIN_BYTES: usize = 64 << 10;
pub const IMAGE_RUN_THRESHOLD_DEFAULT: usize = 4;
/// Default of `Options::compaction_bytes_per_sec`: about a fifth of the
/// sequential write bandwidth of this project's disk (~300 MiB/s).
pub const COMPACTION_BYTES_PER_SEC_DEFAULT: u64 = 64 << 20;
/// Default of `Options::in_memory_index_bytes_max`. The open layer's index
/// is frozen at half of it, 16 MiB: about 260 Ki keys written in order (64
/// bytes each in the index's sorted run: a 33 MiB log of 100-byte values)
/// or 135 Ki keys in any other order (124 bytes each in its B-tree: a
/// 39 MiB log of 256-byte values); 8 KiB values reach
/// `layer_size_bytes_max` first. One frozen layer is flushed while the
/// next fills; writers wait when both halves are taken. Measured in the
/// lab's phases workload at defaults (`strata lab run phases --quick
/// --engines strata --phases-memory-mib 256 --phases-data-mib 1024
/// --phases-load-in-budget`: 1 GiB of 32-byte random keys and 256-byte
/// values, loaded inside a 256 MiB memory cgroup): it runs to the end at
/// this default and is OOM-killed in its third load at 64 MiB (the
/// B-trees, the allocator's free lists, a flush and a compaction at once);
/// `scripts/memory-budget.sh 256 1024 256` (the same load alone) peaks at
/// 161–175 MiB.
pub const IN_MEMORY_INDEX_BYTES_MAX_DEFAULT: u64 = 32 << 20;
/// Default of `Options::flush_memory_bytes`: a 128 MiB log of keys written
/// in order is read once; of random keys, about five times for 100-byte
/// values (entries and their bookkeeping take about 1.2 times the log).
pub const FLUSH_MEMORY_BYTES_DEFAULT: usize = 32 << 20;
/// Default `Options::log_memory_bytes`: two logs of 100-byte records at
/// the default `in_memory_index_bytes_max` (a log is frozen at 31 MiB
/// then), the open one and the one being flushed.
pub const LOG_MEMORY_BYTES_DEFAULT: u64 = 64 << 20;
/// Default of `Options::large_value_bytes`: one 4 KiB device block.
pub const LARGE_VALUE_BYTES_DEFAULT: usize = 4096;
/// Default of `Options::value_garbage_percent`.
pub const VALUE_GARBAGE_PERCENT_DEFAULT: u32 = 20;
/// Default of `Options::remote_deletion_delay`: a follower that
/// refreshes every few minutes never finds a file it reads gone, and the
/// store holds a replaced layer that much longer (a compaction's inputs,
/// at most, beside its outputs).
pub const REMOTE_DELETION_DELAY_DEFAULT: std::time::Duration = std::time::Duration::from_secs(300);
/// Default of `Options::remote_single_put_bytes_max`: a compaction's
/// output goes in one PUT. Its target (`target_file_bytes`) is 64 MiB of
/// entries, and a file may pass it by its index and filter and by the
/// versions of its last key (cut between keys): 80 MiB leaves that room.
/// Measured in the lab's remote experiment, full size (SeaweedFS on
/// loopback, 2 cores, 1 GiB in 64 MiB layers, idle machine, two runs of
/// 7 rounds each, A/B in turn): single PUTs 0.976× and 0.957× of the
/// server's raw PUT line (162 and 160 MiB/s), multipart uploads 0.925×
/// and 0.910× (151 and 154 MiB/s); the quick run's 3 files showed no
/// difference (0.92× against 0.91–0.93×).
pub const REMOTE_SINGLE_PUT_BYTES_DEFAULT: u64 = 80 << 20;
/// Default of `Options::remote_follow_interval`: a fifth of the writer's
/// default deletion delay.
pub const REMOTE_FOLLOW_INTERVAL_DEFAULT: std::time::Duration = std::time::Duration::from_secs(60);
/// Default of `Options::block_cache_bytes`.
pub const BLOCK_CACHE_BYTES_DEFAULT: u64 = 64 << 20;
/// Default of `Options::index_memory_bytes_max`: the indexes and filters of
/// about 18 GiB of layers of 16-byte keys and 1 KiB values (1.3–1.4% of the
/// layer files' bytes, measured by the `compaction_wa` example); smaller
/// entries take more (a filter costs 2 bytes per key).
pub const INDEX_MEMORY_BYTES_MAX_DEFAULT: u64 = 256 << 20;

/// How a database is opened.
///
/// Memory: every consumer has an option, and the defaults add up to about
/// 170 MiB at most — the in-memory layers' indexes
/// (`in_memory_index_bytes_max`, 32 MiB), the block cache
/// (`block_cache_bytes`, 64 MiB), a flush's window (`flush_memory_bytes`,
/// 32 MiB, and a 1 MiB read request), a compaction's read-ahead
/// (`compaction_memory_bytes`, 32 MiB), the writers' buffers (3 ×
/// `writer_buffer_bytes` for the log, 2 × 1 MiB for a flush or a merge),
/// and the layer files' indexes and filters, which grow with the data
/// (about 1.4% of it) up to `index_memory_bytes_max` (256 MiB). Measured
/// (`examples/memory_load`, 1 GiB of 32-byte keys and 256-byte values):
/// 161–175 MiB peak RSS at the defaults; 18 MiB for a 256 MiB load with
/// every option at its smallest useful value.
#[derive(Debug, Clone)]
pub struct Options {
    /// Page cache or O_DIRECT (`STRATA_IO_MODE` overrides it).
    pub io_mode: IoMode,
    /// pread/pwrite or io_uring (`STRATA_IO_ENGINE` overrides it).
    pub io_engine: IoEngine,
    /// Where the filesystem refuses O_DIRECT, use buffered I/O instead of failing.
    pub fallback_to_buffered: bool,
    /// Size at which the open in-memory layer (its log) is frozen.
    pub layer_size_bytes_max: u64,
    /// Capacity of each of the log writer's three buffers.
    pub writer_buffer_bytes: usize,
    /// Overrides the direct-I/O alignment the kernel reports (power of two).
    pub alignment_bytes: Option<usize>,
    /// Versions newer than `last LSN - history_lsns` stay readable with
    /// `get_at`/`scan_at`; older ones go once an image covers them (reads
    /// below the image then return `Error::BelowHorizon`). `None` keeps
    /// every version (unless `Db::set_horizon` says otherwise).
    pub history_lsns: Option<u64>,
    /// Largest value accepted, bytes.
    pub value_size_bytes_max: usize,
    /// Target data block size of delta layers, bytes.
    pub delta_block_bytes: usize,
    /// Flush frozen layers in a background thread (otherwise `flush()` does,
    /// or a writer when the backlog passes `frozen_layers_max`).
    pub background_flush: bool,
    /// Most frozen layers waiting for their flush before writers stall.
    pub frozen_layers_max: usize,
    /// L0 layers at which a background compaction merges the oldest ones
    /// into an L1 run; 0: only `Db::compact()` compacts (and writers never
    /// slow down or stall for L0).
    pub l0_compaction_trigger: usize,
    /// L0 layers at which each write sleeps 1 ms (compaction falls behind).
    pub l0_slowdown_layers: usize,
    /// L0 layers at which writers wait for a compaction (without a
    /// background thread, the writer compacts).
    pub l0_stop_layers: usize,
    /// Target size of an L1 layer file, bytes.
    pub target_file_bytes: u64,
    /// L1 runs above the newest image that overlap at some key at which an
    /// image run is written (the state at the newest run's end), once they
    /// also hold as many bytes as that image; until then, that many
    /// overlapping runs of like size merge into one (a tier). 0: only
    /// `Db::compact()` makes an image, and runs never merge.
    pub image_run_threshold: usize,
    /// Memory a compaction reads its inputs ahead with, bytes; it also caps
    /// the inputs of one compaction (64 KiB each).
    pub compaction_memory_bytes: usize,
    /// Pace of background compaction, bytes written per second, so that
    /// its I/O leaves the device to reads; 0: as fast as it goes. While
    /// writers are slowed by the L0 backlog, and in `Db::compact()`, it runs
    /// unpaced.
    pub compaction_bytes_per_sec: u64,
    /// Memory for the in-memory layers' indexes and filters (the open
    /// layer's and those of the frozen layers waiting for their flush),
    /// bytes: the open layer is frozen when its index takes half of it (or
    /// its log reaches `layer_size_bytes_max`), and writers wait while the
    /// frozen layers' and the open layer's together take more than all of
    /// it (so one frozen layer is flushed while the next fills).
    pub in_memory_index_bytes_max: u64,
    /// Memory a flush copies a frozen log's entries into, in key order,
    /// window by window, bytes (besides two background read requests of up
    /// to 1 MiB each, one of them read ahead): the log is read once per window its keys' order needs
    /// (once for keys written in order; for random keys, about its entries'
    /// bytes over this). `Stats::flush_memory_peak_bytes` shows the peak.
    pub flush_memory_bytes: usize,
    /// Memory the open and frozen layers keep their logs' bytes in as they
    /// are written, bytes, in 1 MiB chunks (allocated once, and kept for
    /// the next logs when a flushed log gives them back): a flush copies a
    /// log held whole from there instead of reading it back from the
    /// device (which then carries the log's bytes twice, not three times),
    /// and a get of a value the layer holds copies it from there without a
    /// lock the writer takes. A log that does not fit (the others hold the
    /// rest) is read back as before. 0: none. `Stats::log_memory_bytes`
    /// shows the chunks logs hold now (the spare ones are kept besides,
    /// within the same bytes).
    pub log_memory_bytes: u64,
    /// Values at least this long stay in the log they were written to:
    /// a flush writes a pointer to them into the delta layer, not the
    /// value, and the log stays as a *value file* while any layer points
    /// into it (written once; compaction and images move pointers). 0:
    /// every value is copied; else at least 512 bytes. The default, one
    /// 4 KiB device block: a value of a block or more is read with one
    /// read of its own either way (see docs/format.md, "Value files").
    pub large_value_bytes: usize,
    /// A value file whose bytes are more than this percentage garbage
    /// (entries no layer points at any more) has its live values moved by
    /// compaction into the layers that point at them, and goes: value
    /// files then take at most `100 / (100 - this)` times the bytes their
    /// live values do (1.25× at the default 20). A flush keeps a log as a
    /// value file only when at most this share of it is not large values.
    pub value_garbage_percent: u32,
    /// Memory for verified data blocks of layer files, bytes (reads are
    /// O_DIRECT: this is the only cache); 0: none.
    pub block_cache_bytes: u64,
    /// Check a cached block's checksum again each time a read uses it, as
    /// well as when it is read from the file: a guard against memory that
    /// flips bits, at the cost of a crc32c of the whole block (cold in the
    /// CPU's caches) on every read the cache serves — about 1 µs of a 4 KiB
    /// block, measured (fio 4 KiB random reads through the read queue).
    /// Off by default, as in the engines strata is compared with: a block
    /// enters the cache only after it passed its check against the file.
    pub check_cached_blocks: bool,
    /// Memory for the block indexes and bloom filters of open layer files,
    /// bytes: past it, the files read least recently are closed, and their
    /// next read opens them again (footer, index and filter: reads of their
    /// own). 0: no limit. `Stats::index_memory_bytes` and
    /// `Stats::layer_readers_closed` show how it fares.
    pub index_memory_bytes_max: u64,
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Where the database's files live: every operating-system call goes
    /// through it. Empty: the operating system's ([`crate::io::OsStorage`]);
    /// tests put a simulated storage here.
    pub storage: Option<Arc<dyn Storage>>,
    /// A remote store that holds the database beyond this directory
    /// (README, "The remote store"): every version's layer and value files
    /// are uploaded in the background, then an index that lists them;
    /// opening a directory that holds no database restores it from the
    /// store's newest index. Opening takes a new generation, which fences
    /// any older writer. `None`: local only.
    pub remote: Option<crate::remote::Remote>,
    /// With a remote store: the most bytes of layer files kept on the
    /// local disk. Past it, after a flush, a compaction or
    /// `Db::sync_remote`, the least recently read layers the store holds
    /// are evicted (their local files removed; their reads then go to the
    /// store, a ranged GET a block). Logs and value files are not counted
    /// and stay local. Room is kept for a flush's output and a
    /// compaction's next one (`layer_size_bytes_max + target_file_bytes`,
    /// and an eighth more: at least their sum, or the open fails); an
    /// output the disk has no room for is put into the store as soon as
    /// it is written, and its local file goes. What is not uploaded yet,
    /// or held open by a read, stays. `None`: every layer stays.
    pub local_layer_bytes_max: Option<u64>,
    /// With a remote store: open as a read-only follower of it instead of
    /// its writer. The directory (empty, or a follower's own) is a local
    /// workspace; the database is the store's newest index, read where it
    /// is (ranged GETs), and `Db::refresh_remote` moves to a newer one. No
    /// generation is taken (the writer is not fenced); writes, flushes and
    /// compactions return `Error::ReadOnly`.
    pub remote_follower: bool,
    /// With a remote store, as its writer: how long an object no index
    /// lists any more (a layer a compaction replaced) stays in the store,
    /// counted from when the index that dropped it is there. A follower
    /// (`remote_follower`) that refreshes at least this often never finds
    /// a file it reads gone; one left longer on an older index may: its
    /// read then fails with the store's "no such object" (never a wrong
    /// value), and a refresh answers it. Zero: deleted as soon as the
    /// database lets its file go.
    pub remote_deletion_delay: std::time::Duration,
    /// With a remote store, as its writer: a file of up to this many
    /// bytes is read whole, while the file before it is sent, and put in
    /// one PUT; a larger one is read and sent in 8 MiB parts, as a
    /// multipart upload, and so is the first file of a round of uploads
    /// when it is over 8 MiB (no file before it hides its read). The
    /// uploader holds two such files at most (see
    /// `REMOTE_SINGLE_PUT_BYTES_DEFAULT` for why one PUT). Zero: every
    /// file in parts.
    pub remote_single_put_bytes_max: u64,
    /// A follower (`remote_follower`) refreshes to the store's newest
    /// index this often on a thread of its own, as `Db::refresh_remote`
    /// does (a failure shows in `Stats::remote.error` until one
    /// succeeds). Keep it below the writer's `remote_deletion_delay`, so
    /// that no file the follower reads goes before it moves on. `None`:
    /// only `Db::refresh_remote` moves it. At least 10 ms.
    pub remote_follow_interval: Option<std::time::Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            io_mode: IoMode::DirectRw,
            io_engine: IoEngine::Sync,
            fallback_to_buffered: true,
            layer_size_bytes_max: LAYER_BYTES_DEFAULT,
            writer_buffer_bytes: WRITER_BUFFER_BYTES_DEFAULT,
            alignment_bytes: None,
            history_lsns: None,
            value_size_bytes_max: VALUE_BYTES_MAX_DEFAULT,
            delta_block_bytes: DELTA_BLOCK_BYTES_DEFAULT,
            background_flush: true,
            frozen_layers_max: FROZEN_LAYERS_MAX_DEFAULT,
            l0_compaction_trigger: L0_COMPACTION_TRIGGER_DEFAULT,
            l0_slowdown_layers: L0_SLOWDOWN_LAYERS_DEFAULT,
            l0_stop_layers: L0_STOP_LAYERS_DEFAULT,
            target_file_bytes: TARGET_FILE_BYTES_DEFAULT,
            compaction_memory_bytes: COMPACTION_MEMORY_BYTES_DEFAULT,
            compaction_bytes_per_sec: COMPACTION_BYTES_PER_SEC_DEFAULT,
            image_run_threshold: IMAGE_RUN_THRESHOLD_DEFAULT,
            in_memory_index_bytes_max: IN_MEMORY_INDEX_BYTES_MAX_DEFAULT,
            flush_memory_bytes: FLUSH_MEMORY_BYTES_DEFAULT,
            log_memory_bytes: LOG_MEMORY_BYTES_DEFAULT,
            large_value_bytes: LARGE_VALUE_BYTES_DEFAULT,
            value_garbage_percent: VALUE_GARBAGE_PERCENT_DEFAULT,
            block_cache_bytes: BLOCK_CACHE_BYTES_DEFAULT,
            check_cached_blocks: false,
            index_memory_bytes_max: INDEX_MEMORY_BYTES_MAX_DEFAULT,
            create_if_missing: true,
            storage: None,
            remote: None,
            local_layer_bytes_max: None,
            remote_follower: false,
            remote_deletion_delay: REMOTE_DELETION_DELAY_DEFAULT,
            remote_single_put_bytes_max: REMOTE_SINGLE_PUT_BYTES_DEFAULT,
            remote_follow_interval: Some(REMOTE_FOLLOW_INTERVAL_DEFAULT),
        }
    }
}

impl Options {
    /// Applies `STRATA_IO_MODE` / `STRATA_IO_ENGINE` where set.
    pub fn with_env_overrides(mut self) -> Result<Self> {
        if let Some(mode) = IoMode::from_env()? {
            self.io_mode = mode;
        }
        if let Some(engine) = IoEngine::from_env()? {
            self.io_engine = engine;
        }
        Ok(self)
    }

    /// Checks every option against its limits.
    pub fn validate(&self) -> Result<()> {
        let range = |option: &'static str, value: u64, lo: u64, hi: u64, why: &'static str| {
            if value < lo || value > hi {
                Err(InvalidInput::OptionOutOfRange { option, value, why })
            } else {
                Ok(())
            }
        };
        range(
            "layer_size_bytes_max",
            self.layer_size_bytes_max,
            LAYER_BYTES_MIN,
            LAYER_BYTES_MAX,
            "64 KiB ..= 4 GiB",
        )?;
        range(
            "writer_buffer_bytes",
            self.writer_buffer_bytes as u64,
            4096,
            256 << 20,
            "4 KiB ..= 256 MiB",
        )?;
        range(
            "value_size_bytes_max",
            self.value_size_bytes_max as u64,
            0,
            VALUE_BYTES_MAX_LIMIT as u64,
            "at most 64 MiB (the delta layer format limit)",
        )?;
        range(
            "delta_block_bytes",
            self.delta_block_bytes as u64,
            512,
            16 << 20,
            "512 B ..= 16 MiB",
        )?;
        range(
            "frozen_layers_max",
            self.frozen_layers_max as u64,
            1,
            1024,
            "1 ..= 1024",
        )?;
        range(
            "l0_compaction_trigger",
            self.l0_compaction_trigger as u64,
            0,
            1024,
            "0 (off) ..= 1024",
        )?;
        if self.l0_compaction_trigger > 0 {
            range(
                "l0_slowdown_layers",
                self.l0_slowdown_layers as u64,
                self.l0_compaction_trigger as u64,
                4096,
                "l0_compaction_trigger ..= 4096",
            )?;
            range(
                "l0_stop_layers",
                self.l0_stop_layers as u64,
                self.l0_slowdown_layers as u64,
                4096,
                "l0_slowdown_layers ..= 4096",
            )?;
        }
        range(
            "image_run_threshold",
            self.image_run_threshold as u64,
            0,
            1024,
            "0 (only when compacting by hand) ..= 1024",
        )?;
        range(
            "target_file_bytes",
            self.target_file_bytes,
            LAYER_BYTES_MIN,
            LAYER_BYTES_MAX,
            "64 KiB ..= 4 GiB",
        )?;
        range(
            "in_memory_index_bytes_max",
            self.in_memory_index_bytes_max,
            1 << 20,
            1 << 40,
            "1 MiB ..= 1 TiB",
        )?;
        range(
            "flush_memory_bytes",
            self.flush_memory_bytes as u64,
            64 << 10,
            1 << 30,
            "64 KiB ..= 1 GiB",
        )?;
        range(
            "compaction_memory_bytes",
            self.compaction_memory_bytes as u64,
            2 * COMPACTION_INPUT_READAHEAD_MIN_BYTES as u64,
            1 << 34,
            "128 KiB ..= 16 GiB",
        )?;
        if self.large_value_bytes != 0 {
            range(
                "large_value_bytes",
                self.large_value_bytes as u64,
                crate::layer::inmemory::POINTER_VALUE_BYTES_MIN as u64,
                VALUE_BYTES_MAX_LIMIT as u64,
                "0 (off) or 512 B ..= 64 MiB",
            )?;
        }
        range(
            "value_garbage_percent",
            u64::from(self.value_garbage_percent),
            1,
            90,
            "1 ..= 90",
        )?;
        if let Some(a) = self.alignment_bytes {
            if !a.is_power_of_two() {
                return Err(InvalidInput::OptionOutOfRange {
                    option: "alignment_bytes",
                    value: a as u64,
                    why: "must be a power of two",
                }
                .into());
            }
        }
        if let Some(budget) = self.local_layer_bytes_max {
            let outputs = self
                .layer_size_bytes_max
                .saturating_add(self.target_file_bytes);
            range(
                "local_layer_bytes_max",
                budget,
                outputs,
                u64::MAX,
                "at least layer_size_bytes_max + target_file_bytes: a flush's output and a \
                 compaction's are written whole beside the layers kept",
            )?;
        }
        if let Some(interval) = self.remote_follow_interval {
            let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
            range(
                "remote_follow_interval (ms)",
                ms,
                10,
                u64::MAX,
                "at least 10 ms (None: no background refresh)",
            )?;
        }
        if self.remote_follower && self.remote.is_none() {
            return Err(InvalidInput::RemoteUrl {
                url: String::new(),
                why: "Options::remote_follower follows a remote store: set Options::remote".into(),
            }
            .into());
        }
        Ok(())
    }
}

/// How a write is made.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Durable before `write` returns (fdatasync of the log, shared with
    /// concurrent writers: group commit).
    pub sync: bool,
}
