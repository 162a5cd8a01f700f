//! The phases experiment (LAB.md §3, after nearcore's low-level storage
//! benchmark): latency as the data grows past memory, per engine.
//!
//! Each iteration first loads new keys in batches (a share of the data
//! target, so that a run of a few iterations reaches several times the
//! memory budget), writes the memtables out, then runs
//! four timed phases of `ops` operations each — append (new keys), update
//! (random existing keys), mixed (50% reads, 25% appends, 25% updates,
//! interleaved at random) and read (random existing keys) — one operation
//! per engine call, with a durable commit (`Engine::sync`) every
//! [`COMMIT_OPS`] operations and at the end of each phase. Keys are 32
//! pseudo-random bytes (like hashes): key `i` is regenerated from the seed
//! and `i`, so the workload keeps only a counter of the keys inserted.
//!
//! Every engine runs in a child process (the `strata` binary re-executed
//! with the hidden `lab phases-child` subcommand) inside a memory cgroup
//! of the same budget, page cache included ([`crate::cgroup`]); where no
//! cgroup can be made, the child drops the page cache before each
//! read-bearing phase (mixed, read) instead, and the rows say which. The
//! child measures each phase itself (an HDR histogram per phase, /proc/self/io,
//! the cgroup's device reads, the engine's own read counters) and prints
//! one JSON line per phase, so a child that dies (out of memory, out of
//! disk) leaves the rows it finished. ENOSPC ends a child's run cleanly.
//! Beside each get of a read phase the child also reads the device's 4 KiB
//! latency on a probe file, as the device line is read (one read right
//! after each get, [`PairedProbe`]): each read row has its latency against
//! the device line (minutes older) and against the device as the gets met
//! it (`p50_x_probe_4k`).
//!
//! Invariants: every read asks for a key that was inserted and checks that
//! it is there with a value of the right length (a miss is an error, never
//! a sample); every engine sees the same key and operation stream (same
//! seed); figures per phase come from that phase alone (counters are
//! differences taken around it).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::aims::{Bound as AimBound, CaseFigure, Claim, Reference};
use crate::cgroup::{self, BudgetMethod, ChildCgroups};
use crate::engine::{self, Engine, EngineConfig, EngineKind, EngineShape};
use crate::get_reads::{self, GetReads};
use crate::progress::Progress;
use crate::randread::{self, latency_histogram};
use crate::results::{DeviceLine, MetricSpec, Row};
use crate::sys::proc_io;
use crate::workload::{fmix64, ValueSource};

/// The hidden subcommand (after the binary name) that runs [`child_main`].
pub const CHILD_SUBCOMMAND: [&str; 2] = ["lab", "phases-child"];
/// Prefix of the protocol lines the child prints on stdout.
const LINE_PREFIX: &str = "STRATA-LAB-PHASES ";
/// Operations between two durable commits (LAB.md §3).
pub const COMMIT_OPS: u64 = 1000;
/// Key width: 32 random bytes, like a hash.
pub const KEY_LEN_BYTES: usize = 32;
/// Puts per batch of the load step (one commit per batch).
const LOAD_BATCH_PUTS: usize = 1000;
/// Operations between two progress lines of the child.
const CHILD_PROGRESS_OPS: u64 = 5000;
/// The unit "device reads" are counted in when the cgroup cannot count
/// the device's requests: /proc/<pid>/io read_bytes ÷ this.
pub const FALLBACK_READ_BYTES: u64 = 4096;
/// The engines' own caches get the budget ÷ this.
const ENGINE_CACHE_SHARE: u64 = 4;

/// The four phases, in the order each iteration runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Append,
    Update,
    Mixed,
    Read,
}

impl Phase {
    pub const ALL: [Phase; 4] = [Phase::Append, Phase::Update, Phase::Mixed, Phase::Read];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Append => "append",
            Phase::Update => "update",
            Phase::Mixed => "mixed",
            Phase::Read => "read",
        }
    }

    /// Whether the phase reads (and so starts from a dropped page cache
    /// when the budget is not a cgroup).
    pub fn reads(self) -> bool {
        matches!(self, Phase::Mixed | Phase::Read)
    }

    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Overrides of [`PhasesParams`] from the command line; `None`: the
/// quick or full default.
#[derive(Clone, Debug, Default)]
pub struct PhasesOptions {
    pub ops: Option<u64>,
    pub value_len_bytes: Option<usize>,
    pub iterations: Option<u32>,
    pub memory_budget_bytes: Option<u64>,
    pub data_target_bytes: Option<u64>,
    pub load_in_budget: Option<bool>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct PhasesParams {
    /// Operations per phase.
    pub ops: u64,
    pub value_len_bytes: usize,
    /// The run ends after this many iterations, or at the data target.
    pub iterations_max: u32,
    /// Memory of the engine's process, page cache included.
    pub memory_budget_bytes: u64,
    /// The run ends once this many key + value bytes were inserted.
    pub data_target_bytes: u64,
    /// Key + value bytes loaded in batches before each iteration's phases
    /// (0: the data grows through the phases' appends alone).
    pub load_bytes_per_iteration: u64,
    /// The load runs inside the memory budget too (full mode); otherwise
    /// the limit is lifted for it and set back after (quick mode: a
    /// B-tree's random inserts past memory would take minutes of CI).
    #[serde(default)]
    pub load_in_budget: bool,
    pub seed: u64,
}

impl PhasesParams {
    pub fn new(quick: bool) -> PhasesParams {
        // Both sizes grow the data by a load step before each iteration's
        // phases, so that the last iterations read data several times the
        // budget: nearcore's 1,000 iterations of 1,000,000 operations, whose
        // appends alone grow the data, do not fit this disk or a session.
        let (budget, iterations, ops) = if quick {
            // strata's open layer (128 MiB) is written out before the
            // phases, so 128 MiB holds every engine's own memory; data 4×
            // the budget, so that at the last iteration LMDB's page cache
            // (most of the budget) serves under 1/8 of its gets (at 3×,
            // 13%: its reads were not like for like at any iteration);
            // about four minutes for the five engines here.
            (128 << 20, 4, 10_000)
        } else {
            (1 << 30, 8, 200_000)
        };
        let target = 4 * budget;
        PhasesParams {
            ops,
            value_len_bytes: 256,
            iterations_max: iterations,
            memory_budget_bytes: budget,
            data_target_bytes: target,
            load_bytes_per_iteration: target / u64::from(iterations),
            load_in_budget: !quick,
            seed: 0x5eed_0010,
        }
    }

    /// The defaults for `quick` with `o`'s overrides; a load step that
    /// stays the data target ÷ the iterations.
    pub fn with_options(quick: bool, o: &PhasesOptions) -> Result<PhasesParams> {
        let mut p = PhasesParams::new(quick);
        if let Some(v) = o.ops {
            p.ops = v;
        }
        if let Some(v) = o.value_len_bytes {
            if v == 0 {
                bail!("--phases-value-bytes must be at least 1");
            }
            p.value_len_bytes = v;
        }
        if let Some(v) = o.iterations {
            if v == 0 {
                bail!("--phases-iterations must be at least 1");
            }
            p.iterations_max = v;
        }
        if let Some(v) = o.memory_budget_bytes {
            if v < 16 << 20 {
                bail!("--phases-memory-mib must be at least 16");
            }
            p.memory_budget_bytes = v;
        }
        if let Some(v) = o.data_target_bytes {
            p.data_target_bytes = v;
        }
        if let Some(v) = o.load_in_budget {
            p.load_in_budget = v;
        }
        p.load_bytes_per_iteration = p.data_target_bytes / u64::from(p.iterations_max);
        Ok(p)
    }

    /// The cache of every engine that keeps one of its own (strata,
    /// RocksDB, fjall, redb): a quarter of the budget, fjall's advice, so
    /// that the engines' defaults (redb's is 1 GiB) cannot outgrow the
    /// budget and each leaves the same room to the page cache; and at most
    /// 1 / [`get_reads::DATA_PER_CACHE_MIN`] of one load step, so that the
    /// data of the first read phase is already 8× that cache (LAB.md; a
    /// quarter of quick mode's budget, 32 MiB, was a quarter of its first
    /// 131 MiB, and a fifth of strata's gets there were cache hits).
    /// Without a load step (the data grows through the appends alone) the
    /// quarter alone.
    pub fn engine_cache_bytes(&self) -> u64 {
        let share = self.memory_budget_bytes / ENGINE_CACHE_SHARE;
        match self.load_bytes_per_iteration / get_reads::DATA_PER_CACHE_MIN {
            0 => share,
            eighth => share.min(eighth),
        }
    }

    pub fn entry_bytes(&self) -> u64 {
        (KEY_LEN_BYTES + self.value_len_bytes) as u64
    }

    /// Keys the load step adds per iteration.
    pub fn load_keys_per_iteration(&self) -> u64 {
        self.load_bytes_per_iteration / self.entry_bytes()
    }

    pub fn options(&self) -> Vec<(&'static str, serde_json::Value)> {
        vec![
            ("ops_per_phase", self.ops.into()),
            ("value_len_bytes", (self.value_len_bytes as u64).into()),
            ("key_len_bytes", (KEY_LEN_BYTES as u64).into()),
            ("iterations_max", self.iterations_max.into()),
            ("memory_budget_bytes", self.memory_budget_bytes.into()),
            ("data_target_bytes", self.data_target_bytes.into()),
            ("load_bytes_per_iteration", self.load_bytes_per_iteration.into()),
            (
                "load",
                if self.load_in_budget {
                    "before each iteration's phases, batches of 1,000 puts with a commit each, inside the memory budget, then a flush (memtables written out); not timed per operation"
                } else {
                    "before each iteration's phases, batches of 1,000 puts with a commit each, outside the memory budget (the limit is lifted), then a flush (memtables written out), then the limit set back, which evicts the page cache down to the budget; not timed per operation"
                }
                .into(),
            ),
            ("commit_every_ops", COMMIT_OPS.into()),
            ("engine_cache_bytes", self.engine_cache_bytes().into()),
            ("seed", self.seed.into()),
            (
                "mixed",
                "50% reads, 25% appends, 25% updates, interleaved at random".into(),
            ),
        ]
    }
}

/// Key `i` of the stream seeded with `seed`: 32 pseudo-random bytes.
pub fn key(seed: u64, i: u64) -> [u8; KEY_LEN_BYTES] {
    let mut k = [0u8; KEY_LEN_BYTES];
    for (j, word) in k.chunks_mut(8).enumerate() {
        word.copy_from_slice(&fmix64(seed ^ fmix64((i << 2) | j as u64)).to_le_bytes());
    }
    k
}

/// The workload's state: the keys inserted so far (`0..inserted`) and the
/// generator that picks operations and keys.
#[derive(Clone, Debug)]
pub struct Workload {
    seed: u64,
    inserted: u64,
    draws: u64,
}

impl Workload {
    pub fn new(seed: u64) -> Workload {
        Workload {
            seed,
            inserted: 0,
            draws: 0,
        }
    }

    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    fn draw(&mut self) -> u64 {
        self.draws += 1;
        fmix64(
            self.seed
                .wrapping_add(self.draws.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        )
    }

    /// A key that exists: `0..inserted`, uniform.
    fn existing(&mut self) -> u64 {
        assert!(self.inserted > 0, "no key to pick");
        self.draw() % self.inserted
    }
}

/// What one phase measured, before the counters around it are added.
pub struct PhaseTimings {
    /// Latency of each operation (ns), the commits excluded.
    pub latency: Histogram<u64>,
    /// Latency of each durable commit (ns).
    pub commit: Histogram<u64>,
    pub gets: u64,
    /// The phase's time, the probe's reads excluded.
    pub elapsed: Duration,
    /// The device probe's reads beside the gets (a read phase with a
    /// probe): their latencies, or why the probe stopped.
    pub probe: Option<std::result::Result<Histogram<u64>, String>>,
    /// Reads the probe made (each one 4 KiB device read the phase's
    /// counters saw and must not count as the engine's).
    pub probe_reads: u64,
    /// Where the gets' time went; `None` in a phase without gets.
    pub get_split: Option<TimeSplit>,
    /// Where the probe reads' time went; `None` without a probe.
    pub probe_split: Option<TimeSplit>,
}

/// Where the time of one kind of operation went: the CPU time of the
/// thread that ran it ([`crate::sys::thread_cpu_ns`]), and the rest of its
/// latency, off the CPU (waiting on the device, a lock or the scheduler).
/// A get and the probe read beside it split alike, so their difference
/// says whether a get's time over the device is work or waiting.
pub struct TimeSplit {
    pub cpu: Histogram<u64>,
    pub off_cpu: Histogram<u64>,
}

impl TimeSplit {
    fn new() -> TimeSplit {
        TimeSplit {
            cpu: latency_histogram(),
            off_cpu: latency_histogram(),
        }
    }

    /// One operation of latency `wall_ns` that took `cpu_ns` of its
    /// thread's CPU (the clocks' resolutions may put the CPU above the
    /// latency: the wait is then 0).
    fn record(&mut self, wall_ns: u64, cpu_ns: u64) -> Result<()> {
        self.cpu
            .record(cpu_ns.max(1))
            .context("record a CPU time")?;
        self.off_cpu
            .record(wall_ns.saturating_sub(cpu_ns).max(1))
            .context("record a wait")?;
        Ok(())
    }

    fn p50s(&self) -> SplitP50s {
        SplitP50s {
            cpu_ns: self.cpu.value_at_quantile(0.5),
            off_cpu_ns: self.off_cpu.value_at_quantile(0.5),
        }
    }
}

/// The p50s of a [`TimeSplit`] (ns): on the CPU, off it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitP50s {
    pub cpu_ns: u64,
    pub off_cpu_ns: u64,
}

/// The device read beside each get of a read phase: one 4 KiB O_DIRECT
/// random read of the probe file (io_uring, a registered buffer, as the
/// device line is read) right after each get, so that a get and its
/// probe read meet the device alike (its load from outside this machine
/// moves both; a probe a second later does not see what the phase saw).
pub struct PairedProbe {
    reader: randread::Reader,
    reads: u64,
}

impl PairedProbe {
    /// Opens the probe file `path` (a filled file of [`PROBE_FILE_BYTES`]).
    pub fn open(path: &Path) -> Result<PairedProbe> {
        let reader =
            randread::Reader::open(path, randread::Method::IoUringDirectFixed, PROBE_READ_BYTES)
                .with_context(|| format!("the device probe on {}", path.display()))?;
        Ok(PairedProbe { reader, reads: 0 })
    }

    /// One read at an offset of its own; its latency (ns).
    fn read(&mut self) -> Result<u64> {
        self.reads += 1;
        let slots = PROBE_FILE_BYTES / PROBE_READ_BYTES as u64;
        let offset = (fmix64(PROBE_SEED ^ self.reads) % slots) * PROBE_READ_BYTES as u64;
        self.reader.read(offset)
    }
}

/// Runs `ops` operations of `phase` on `engine`; `on_progress` is called
/// every [`CHILD_PROGRESS_OPS`] operations. With a `probe`, a read phase
/// reads the device once right after each get ([`PairedProbe`]), untimed
/// in the get's latency and the phase's time.
pub fn run_phase(
    engine: &dyn Engine,
    phase: Phase,
    ops: u64,
    w: &mut Workload,
    values: &ValueSource,
    mut probe: Option<&mut PairedProbe>,
    mut on_progress: impl FnMut(u64) -> Result<()>,
) -> Result<PhaseTimings> {
    let mut latency = latency_histogram();
    let mut commit = latency_histogram();
    let mut gets = 0u64;
    let mut probe_hist = (phase == Phase::Read && probe.is_some()).then(|| Ok(latency_histogram()));
    let mut probe_reads = 0u64;
    let mut probe_time = Duration::ZERO;
    let mut get_split = TimeSplit::new();
    let mut probe_split = probe_hist.is_some().then(TimeSplit::new);
    let started = Instant::now();
    for op in 0..ops {
        let kind = match phase {
            Phase::Mixed => match w.draw() % 4 {
                0 | 1 => Phase::Read,
                2 => Phase::Append,
                _ => Phase::Update,
            },
            other => other,
        };
        let (ns, read) = match kind {
            Phase::Append | Phase::Update => {
                let i = if kind == Phase::Append {
                    w.inserted
                } else {
                    w.existing()
                };
                let k = key(w.seed, i);
                let value = values.value(w.draw());
                let t = Instant::now();
                engine.write(&[(&k[..], value)])?;
                let ns = t.elapsed().as_nanos() as u64;
                if kind == Phase::Append {
                    w.inserted += 1;
                }
                (ns, false)
            }
            Phase::Read | Phase::Mixed => {
                let i = w.existing();
                let k = key(w.seed, i);
                // The thread's CPU clock is read outside the latency's
                // window (each read is a system call).
                let cpu = crate::sys::thread_cpu_ns()?;
                let t = Instant::now();
                let got = engine.get(&k)?;
                let ns = t.elapsed().as_nanos() as u64;
                get_split.record(ns, crate::sys::thread_cpu_ns()?.saturating_sub(cpu))?;
                match got {
                    Some(v) if v.len() == values.value_len_bytes() => {}
                    Some(v) => bail!(
                        "key #{i} read back {} bytes, not {}",
                        v.len(),
                        values.value_len_bytes()
                    ),
                    None => bail!("key #{i} is missing after it was inserted"),
                }
                (ns, true)
            }
        };
        latency.record(ns.max(1)).context("record a latency")?;
        gets += u64::from(read);
        if let (Some(Ok(h)), Some(p)) = (probe_hist.as_mut(), probe.as_deref_mut()) {
            let t = Instant::now();
            probe_reads += 1;
            // A probe that fails leaves the row without its figure and
            // says why; the phase goes on.
            let cpu = crate::sys::thread_cpu_ns()?;
            match p.read() {
                Ok(ns) => {
                    h.record(ns).context("record a probe latency")?;
                    if let Some(split) = probe_split.as_mut() {
                        split.record(ns, crate::sys::thread_cpu_ns()?.saturating_sub(cpu))?;
                    }
                }
                Err(e) => {
                    // The split goes with the figure it explains.
                    probe_hist = Some(Err(format!("{e:#}")));
                    probe_split = None;
                }
            }
            probe_time += t.elapsed();
        }
        if (op + 1) % COMMIT_OPS == 0 || op + 1 == ops {
            let t = Instant::now();
            engine.sync()?;
            commit
                .record((t.elapsed().as_nanos() as u64).max(1))
                .context("record a commit latency")?;
        }
        if (op + 1) % CHILD_PROGRESS_OPS == 0 {
            on_progress(CHILD_PROGRESS_OPS)?;
        }
    }
    Ok(PhaseTimings {
        latency,
        commit,
        gets,
        elapsed: started.elapsed().saturating_sub(probe_time),
        probe: probe_hist,
        probe_reads,
        get_split: (gets > 0).then_some(get_split),
        probe_split: probe_split.filter(|s| !s.cpu.is_empty()),
    })
}

/// Inserts `keys` new keys in batches of [`LOAD_BATCH_PUTS`], one durable
/// commit per batch.
pub fn load(engine: &dyn Engine, keys: u64, w: &mut Workload, values: &ValueSource) -> Result<()> {
    let mut done = 0u64;
    let mut key_buf: Vec<[u8; KEY_LEN_BYTES]> = Vec::with_capacity(LOAD_BATCH_PUTS);
    while done < keys {
        let n = (keys - done).min(LOAD_BATCH_PUTS as u64);
        key_buf.clear();
        let first = w.inserted;
        for j in 0..n {
            key_buf.push(key(w.seed, first + j));
        }
        let batch: Vec<(&[u8], &[u8])> = key_buf
            .iter()
            .enumerate()
            .map(|(j, k)| (&k[..], values.value(first + j as u64)))
            .collect();
        engine.write(&batch)?;
        engine.sync()?;
        w.inserted += n;
        done += n;
    }
    Ok(())
}

/// One phase of one iteration, as the child reports it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PhaseRecord {
    /// From 1.
    pub iteration: u32,
    pub phase: Phase,
    pub ops: u64,
    pub gets: u64,
    pub elapsed_s: f64,
    pub latency_mean_ns: f64,
    pub latency_p50_ns: u64,
    pub latency_p99_ns: u64,
    pub latency_p999_ns: u64,
    pub commits: u64,
    pub commit_mean_ns: f64,
    pub commit_p99_ns: u64,
    /// Keys inserted after the phase.
    pub keys: u64,
    /// Key + value bytes inserted after the phase.
    pub data_bytes: u64,
    pub bytes_on_disk: u64,
    /// /proc/self/io `read_bytes` during the phase (bytes the process
    /// caused to be read from storage).
    pub proc_read_bytes: u64,
    /// /proc/self/io `syscr` during the phase.
    pub read_syscalls: u64,
    /// The cgroup's device read requests and bytes during the phase.
    pub device_reads: Option<u64>,
    pub device_read_bytes: Option<u64>,
    /// The engine's own count of point lookups and of the data blocks it
    /// read from its files for them (strata's `Stats`; not the reads of
    /// its background jobs).
    pub engine_lookups: Option<u64>,
    pub engine_lookup_reads: Option<u64>,
    /// strata's gets during the phase: its cache hit ratio
    /// ([`crate::get_reads`]); `None` for the peers.
    #[serde(default)]
    pub strata_gets: Option<GetReads>,
    /// The engine's tree and memory at the phase's end, where it reports
    /// them, and the child's resident set then.
    #[serde(default)]
    pub engine_shape: Option<EngineShape>,
    #[serde(default)]
    pub rss_bytes: Option<u64>,
    /// Load step before this iteration's phases (on the append row).
    pub load_s: Option<f64>,
    /// The device's 4 KiB random-read p50 (ns), measured beside this phase
    /// (a read phase) by the same process on the probe file
    /// (`GoAhead::device_probe`), one read right after each get
    /// ([`PairedProbe`]): the device as the gets met it, where the device
    /// line is minutes older.
    #[serde(default)]
    pub device_4k_probe_ns: Option<u64>,
    /// Why that probe failed, where it did: the row has no
    /// `p50_x_probe_4k`, and the run's notes say why.
    #[serde(default)]
    pub device_4k_probe_error: Option<String>,
    /// Where a get's time went ([`TimeSplit`]); `None` in a phase without
    /// gets.
    #[serde(default)]
    pub get_split: Option<SplitP50s>,
    /// The same of the probe reads beside the gets; `None` without them.
    #[serde(default)]
    pub probe_split: Option<SplitP50s>,
}

/// The percentiles, mean and count of a latency histogram (ns).
pub fn percentiles(h: &Histogram<u64>) -> (f64, u64, u64, u64) {
    let s = randread::summarize(h);
    (s.mean_ns, s.p50_ns, s.p99_ns, s.p999_ns)
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildArgs {
    pub config: EngineConfig,
    pub dir: PathBuf,
    pub params: PhasesParams,
}

/// What the parent tells the child once the cgroup is set up.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GoAhead {
    pub method: BudgetMethod,
    /// Where the child's device reads are counted: (`v1`|`v2`, cgroup dir).
    pub io_counter: Option<(String, PathBuf)>,
    /// The cgroup's limit file, lifted for the load step and set back to
    /// the budget before the phases; `None` when the budget is no cgroup.
    pub memory_limit_file: Option<PathBuf>,
    /// A filled file of [`PROBE_FILE_BYTES`] the child reads the device's
    /// 4 KiB latency on beside each get of a read phase
    /// ([`PhaseRecord::device_4k_probe_ns`]); `None`: no probe.
    #[serde(default)]
    pub device_probe: Option<PathBuf>,
}

/// Whether `err` is the disk being full.
pub fn is_enospc(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
    }) || {
        let text = format!("{err:#}");
        text.contains("No space left on device") || text.contains("os error 28")
    }
}

/// Counters read around a phase.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    proc_read_bytes: u64,
    read_syscalls: u64,
    device: Option<cgroup::BlkioReads>,
    engine: Option<(u64, u64)>,
    gets: Option<GetReads>,
}

impl Counters {
    /// Takes `reads` reads of `bytes` each made since `before` that were
    /// not the engine's out of the process's and the device's figures
    /// (never below `before`'s).
    fn forget_reads(&mut self, before: &Counters, reads: u64, bytes: u64) {
        let less = |now: u64, then: u64, n: u64| now.saturating_sub(n).max(then);
        self.proc_read_bytes = less(self.proc_read_bytes, before.proc_read_bytes, reads * bytes);
        if let (Some(d), Some(b)) = (self.device.as_mut(), before.device) {
            d.ios = less(d.ios, b.ios, reads);
            d.bytes = less(d.bytes, b.bytes, reads * bytes);
        }
    }
}

fn counters(engine: &dyn Engine, io_counter: Option<&(String, PathBuf)>) -> Result<Counters> {
    let io = proc_io(None)?;
    Ok(Counters {
        proc_read_bytes: io.read_bytes,
        read_syscalls: io.read_syscalls,
        device: match io_counter {
            Some((kind, dir)) => Some(cgroup::read_io_counter(kind, dir)?),
            None => None,
        },
        engine: engine.point_lookup_stats(),
        gets: engine.get_reads(),
    })
}

/// Runs the iterations on an open engine, handing each phase's record to
/// `emit`; returns why the run ended. Used by the child and by tests.
pub fn run_iterations(
    engine: &dyn Engine,
    params: &PhasesParams,
    go: &GoAhead,
    mut emit: impl FnMut(Line) -> Result<()>,
) -> Result<String> {
    let values = ValueSource::new(params.value_len_bytes);
    let mut w = Workload::new(params.seed);
    // Opened once: a probe that cannot open (no io_uring here) leaves the
    // read rows without the figure and says why, not the run without rows.
    let mut probe = go
        .device_probe
        .as_deref()
        .map(|path| PairedProbe::open(path).map_err(|e| format!("{e:#}")));
    for iteration in 1..=params.iterations_max {
        let t = Instant::now();
        if params.load_keys_per_iteration() > 0 {
            // The load is preparation, not measured per operation: it runs
            // inside the budget (full mode), or without the limit (quick
            // mode: a B-tree's random inserts past memory would take
            // minutes), and the phases start inside it again.
            let lifted = go
                .memory_limit_file
                .as_ref()
                .filter(|_| !params.load_in_budget);
            if let Some(file) = lifted {
                cgroup::set_memory_limit(file, None)?;
            }
            load(engine, params.load_keys_per_iteration(), &mut w, &values)?;
            // Every engine starts its phases from data on disk: strata's
            // and the LSMs' memtables written out, and their memory
            // released, so that the budget can be set back.
            engine.flush()?;
            // The heap the load freed goes back to the OS (glibc keeps it
            // otherwise, and it would count against the budget).
            #[cfg(target_env = "gnu")]
            // SAFETY: plain libc call, no pointers.
            unsafe {
                libc::malloc_trim(0);
            }
            if let Some(file) = lifted {
                restore_memory_limit(file, params.memory_budget_bytes)?;
            } else if let Some(file) = &go.memory_limit_file {
                cgroup::reset_peaks(file);
            }
        }
        let mut load_s = (params.load_keys_per_iteration() > 0).then(|| t.elapsed().as_secs_f64());
        emit(Line::Progress(params.load_keys_per_iteration()))?;
        for phase in Phase::ALL {
            if w.inserted() == 0 && phase != Phase::Append {
                // Nothing to update or read yet (ops = 0 and no load).
                continue;
            }
            if phase.reads() && go.method.drops_cache() {
                cgroup::drop_page_cache(go.method, engine.dir())?;
            }
            let before = counters(engine, go.io_counter.as_ref())?;
            let paired = probe.as_mut().and_then(|p| p.as_mut().ok());
            let timings = run_phase(engine, phase, params.ops, &mut w, &values, paired, |n| {
                emit(Line::Progress(n))
            })?;
            let mut after = counters(engine, go.io_counter.as_ref())?;
            // The probe's reads are not the phase's: each one 4 KiB read
            // of the device, counted by the process and the cgroup alike.
            after.forget_reads(&before, timings.probe_reads, PROBE_READ_BYTES as u64);
            let probe_p50 = match (&probe, timings.probe.as_ref()) {
                (Some(Err(e)), _) if phase == Phase::Read => Some(Err(e.clone())),
                (_, Some(Ok(h))) => Some(Ok(randread::summarize(h).p50_ns)),
                (_, Some(Err(e))) => Some(Err(e.clone())),
                _ => None,
            };
            let (mean, p50, p99, p999) = percentiles(&timings.latency);
            let record = PhaseRecord {
                iteration,
                phase,
                ops: params.ops,
                gets: timings.gets,
                elapsed_s: timings.elapsed.as_secs_f64(),
                latency_mean_ns: mean,
                latency_p50_ns: p50,
                latency_p99_ns: p99,
                latency_p999_ns: p999,
                commits: timings.commit.len(),
                commit_mean_ns: timings.commit.mean(),
                commit_p99_ns: timings.commit.value_at_quantile(0.99),
                keys: w.inserted(),
                data_bytes: w.inserted() * params.entry_bytes(),
                bytes_on_disk: engine.bytes_on_disk()?,
                proc_read_bytes: after.proc_read_bytes - before.proc_read_bytes,
                read_syscalls: after.read_syscalls - before.read_syscalls,
                device_reads: after.device.zip(before.device).map(|(a, b)| a.ios - b.ios),
                device_read_bytes: after
                    .device
                    .zip(before.device)
                    .map(|(a, b)| a.bytes - b.bytes),
                engine_lookups: after.engine.zip(before.engine).map(|(a, b)| a.0 - b.0),
                engine_lookup_reads: after.engine.zip(before.engine).map(|(a, b)| a.1 - b.1),
                strata_gets: after.gets.zip(before.gets).map(|(a, b)| a.since(&b)),
                engine_shape: engine.shape(),
                rss_bytes: Some(crate::sys::rss_bytes(None)?),
                load_s: load_s.take(),
                device_4k_probe_ns: probe_p50.clone().and_then(Result::ok),
                device_4k_probe_error: probe_p50.and_then(Result::err),
                get_split: timings.get_split.as_ref().map(TimeSplit::p50s),
                probe_split: timings.probe_split.as_ref().map(TimeSplit::p50s),
            };
            emit(Line::Record(Box::new(record)))?;
        }
        if w.inserted() * params.entry_bytes() >= params.data_target_bytes {
            return Ok(format!("data target reached after iteration {iteration}"));
        }
    }
    Ok(format!("{} iteration(s) done", params.iterations_max))
}

/// How long setting the budget back after a load may wait for the
/// engine's memory (a background flush, a compaction) to shrink.
const LIMIT_RESTORE_WAIT: Duration = Duration::from_secs(30);

/// Sets the cgroup's limit in `file` back to `bytes` after the load. The
/// kernel refuses (EBUSY) while the cgroup's memory that cannot be
/// reclaimed (the engine's own, not the page cache) exceeds it: retried
/// until [`LIMIT_RESTORE_WAIT`], then an error naming the budget.
fn restore_memory_limit(file: &Path, bytes: u64) -> Result<()> {
    let started = Instant::now();
    loop {
        match cgroup::set_memory_limit(file, Some(bytes)) {
            Ok(()) => {
                cgroup::reset_peaks(file);
                return Ok(());
            }
            Err(err) if started.elapsed() < LIMIT_RESTORE_WAIT => {
                let busy = err.chain().any(|e| {
                    e.downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.raw_os_error() == Some(libc::EBUSY))
                });
                if !busy {
                    return Err(err);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(err) => {
                let held = cgroup::memory_breakdown(file)
                    .map(|b| format!(" ({b})"))
                    .unwrap_or_default();
                return Err(err).with_context(|| {
                    format!(
                        "set the {} MiB memory budget back after the load: the engine's own memory stayed above it for {} s{held}",
                        bytes >> 20,
                        LIMIT_RESTORE_WAIT.as_secs()
                    )
                });
            }
        }
    }
}

/// A protocol line of the child.
#[derive(Debug)]
pub enum Line {
    /// Operations (or loaded keys) done since the last progress line.
    Progress(u64),
    Record(Box<PhaseRecord>),
}

/// Entry point of the child process: waits for the go-ahead (once it is in
/// its cgroup), runs the iterations, prints a line per phase and one line
/// saying why it ended.
pub fn child_main(spec: &str) -> Result<()> {
    let args: ChildArgs = serde_json::from_str(spec).context("parse phases child arguments")?;
    // Die with the lab: an orphan would hold its cgroup and data directory.
    // SAFETY: plain syscall.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("read the go-ahead")?;
    let go: GoAhead = serde_json::from_str(line.trim()).context("parse the go-ahead")?;
    let mut stdout = std::io::stdout();
    let outcome = engine::open(&args.config, &args.dir).and_then(|engine| {
        let end = run_iterations(engine.as_ref(), &args.params, &go, |line| {
            match line {
                Line::Progress(n) => writeln!(stdout, "{LINE_PREFIX}progress {n}")?,
                Line::Record(r) => {
                    writeln!(stdout, "{LINE_PREFIX}row {}", serde_json::to_string(&r)?)?
                }
            }
            stdout.flush()?;
            Ok(())
        });
        // Close even after an error: the data directory is removed next.
        let closed = engine.close();
        let end = end?;
        closed?;
        Ok(end)
    });
    let end = match outcome {
        Ok(end) => end,
        Err(err) if is_enospc(&err) => format!("the disk is full: {err:#}"),
        Err(err) => {
            // For the results: the parent keeps the rows and this reason.
            writeln!(stdout, "{LINE_PREFIX}error {err:#}")?;
            stdout.flush()?;
            return Err(err);
        }
    };
    writeln!(stdout, "{LINE_PREFIX}end {end}")?;
    stdout.flush()?;
    Ok(())
}

/// One engine's run as the parent saw it.
pub struct EngineRun {
    pub records: Vec<PhaseRecord>,
    pub method: BudgetMethod,
    /// Why the run ended (the child's word, or how it died).
    pub end: String,
    /// Whether the child ended by itself (target, iterations, full disk).
    pub clean: bool,
    pub peak_memory_bytes: Option<u64>,
    pub limit_hits: Option<u64>,
    pub device_reads_counted: bool,
    pub cgroup_notes: Vec<String>,
}

/// Runs one engine's child in its cgroup; the data directory is removed
/// after.
pub fn run_engine(
    config: &EngineConfig,
    params: &PhasesParams,
    data_dir: &Path,
    device_probe: Option<&Path>,
) -> Result<EngineRun> {
    crate::sys::in_fresh_dir(data_dir, &format!("phases-{}", config.kind.name()), |dir| {
        run_engine_in(config, params, dir, device_probe)
    })
}

fn run_engine_in(
    config: &EngineConfig,
    params: &PhasesParams,
    dir: &Path,
    device_probe: Option<&Path>,
) -> Result<EngineRun> {
    let name = config.kind.name();
    let exe = std::env::current_exe().context("locate the strata binary")?;
    let spec = serde_json::to_string(&ChildArgs {
        config: config.clone(),
        dir: dir.to_path_buf(),
        params: *params,
    })?;
    let cgroups = ChildCgroups::create(
        &format!("strata-lab-{}-{name}", std::process::id()),
        params.memory_budget_bytes,
    );
    let mut child = Command::new(exe)
        .args(CHILD_SUBCOMMAND)
        .arg(spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("start the phases child")?;
    let mut method = cgroups.method;
    let mut notes = cgroups.notes.clone();
    if let Err(err) = cgroups.add(child.id()) {
        notes.push(format!("could not move the child into its cgroup: {err:#}"));
        method = BudgetMethod::DropCaches;
    }
    let go = GoAhead {
        method,
        io_counter: if method.drops_cache() {
            None
        } else {
            cgroups.io_counter()
        },
        memory_limit_file: if method.drops_cache() {
            None
        } else {
            cgroups.memory_limit_file()
        },
        device_probe: device_probe.map(Path::to_path_buf),
    };
    {
        let mut stdin = child.stdin.take().context("child stdin")?;
        writeln!(stdin, "{}", serde_json::to_string(&go)?)?;
    }
    let stdout = child.stdout.take().context("child stdout")?;
    let per_iteration = 4 * params.ops + params.load_keys_per_iteration();
    let iterations = u64::from(params.iterations_max).min(
        params
            .data_target_bytes
            .div_ceil(
                ((params.ops / 2 + params.ops / 4) + params.load_keys_per_iteration()).max(1)
                    * params.entry_bytes(),
            )
            .max(1),
    );
    let mut progress = Progress::new(
        &format!("phases {name} (child)"),
        per_iteration * iterations,
    );
    let mut records = Vec::new();
    let mut end: Option<String> = None;
    let mut error: Option<String> = None;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let Some(rest) = line.strip_prefix(LINE_PREFIX) else {
            continue;
        };
        if let Some(n) = rest.strip_prefix("progress ") {
            progress.inc(n.trim().parse().unwrap_or(0));
        } else if let Some(json) = rest.strip_prefix("row ") {
            let r: PhaseRecord = serde_json::from_str(json)?;
            if r.phase == Phase::Read {
                progress.println(&format!(
                    "    {name} iteration {}: read p50 {:.0} µs, p99 {:.0} µs, {:.0} MiB of data, {:.0} MiB on disk",
                    r.iteration,
                    r.latency_p50_ns as f64 / 1e3,
                    r.latency_p99_ns as f64 / 1e3,
                    crate::sys::mib(r.data_bytes),
                    crate::sys::mib(r.bytes_on_disk),
                ));
            }
            records.push(r);
        } else if let Some(why) = rest.strip_prefix("end ") {
            end = Some(why.to_string());
        } else if let Some(why) = rest.strip_prefix("error ") {
            error = Some(why.to_string());
        }
    }
    let status = child.wait()?;
    let mut device_reads_counted = go.io_counter.is_some();
    if device_reads_counted && !counter_counts(&records) {
        // blk-throttle keeps no statistics for a device without a limit
        // on recent kernels: the cgroup's counters stay at zero.
        for r in &mut records {
            r.device_reads = None;
            r.device_read_bytes = None;
        }
        device_reads_counted = false;
        notes.push("the blkio cgroup counted no device reads while /proc/<pid>/io did (blk-throttle keeps no statistics without a limit on this kernel): device reads are /proc read_bytes ÷ 4096".to_string());
    }
    let clean = end.is_some() && status.success();
    let end = match end {
        Some(why) if status.success() => why,
        _ => {
            use std::os::unix::process::ExitStatusExt;
            let oom = status.signal() == Some(libc::SIGKILL) && method == BudgetMethod::CgroupV1
                || method == BudgetMethod::CgroupV2 && status.signal() == Some(libc::SIGKILL);
            if oom {
                format!(
                    "the child was killed (SIGKILL), most likely by the cgroup's OOM killer: the engine's own memory outgrew the {} MiB budget",
                    params.memory_budget_bytes >> 20
                )
            } else {
                match error {
                    Some(why) => format!("failed: {why}"),
                    None => format!("the child failed ({status})"),
                }
            }
        }
    };
    progress.finish(&end);
    Ok(EngineRun {
        device_reads_counted,
        records,
        method,
        end,
        clean,
        peak_memory_bytes: cgroups.peak_bytes(),
        limit_hits: cgroups.limit_hits(),
        cgroup_notes: notes,
    })
}

/// Whether the cgroup's device-read counter counted: it did unless it stayed
/// at zero through phases in which the process read from storage.
pub fn counter_counts(records: &[PhaseRecord]) -> bool {
    let read = records.iter().any(|r| r.proc_read_bytes > 0);
    let counted = records.iter().any(|r| r.device_reads.unwrap_or(0) > 0);
    counted || !read
}

/// The device's 4 KiB random-read latency (ns) as the device experiment
/// recorded it in the run's device line (`read_4k_latency_ns`), if it did.
pub fn device_line_read_4k_ns(line: Option<&DeviceLine>) -> Option<f64> {
    line?
        .read_4k_latency_ns
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Bytes of the probe file: the device's 4 KiB latency read beside the
/// read phases (and for the line's figure where no device line came).
const PROBE_FILE_BYTES: u64 = 128 << 20;
/// Bytes of a probe read: the device line's 4 KiB.
const PROBE_READ_BYTES: usize = 4096;
/// Seed of the probe reads' offsets.
const PROBE_SEED: u64 = 0x4b4b;

/// Writes the filled probe file at `path` (O_DIRECT: nothing of it stays
/// in the page cache).
pub fn prepare_probe(path: &Path) -> Result<()> {
    randread::prepare_file(path, randread::FileKind::Filled, PROBE_FILE_BYTES, 0x4b)
}

/// The p50 (ns) of 4 KiB random reads of the probe file at `path` at
/// queue depth 1, as the device experiment reads (io_uring, O_DIRECT, a
/// registered buffer): up to 2,000 reads within about a second (the
/// device line's figure where the run has no device line).
pub fn probe_read_4k_ns(path: &Path) -> Result<u64> {
    let h = randread::measure(
        path,
        PROBE_FILE_BYTES,
        randread::PointSpec {
            method: randread::Method::IoUringDirectFixed,
            size: PROBE_READ_BYTES,
            reads_max: 2000,
            budget: Duration::from_secs(1),
            reads_min: 300,
            seed: PROBE_SEED,
        },
    )
    .with_context(|| format!("the device probe on {}", path.display()))?;
    Ok(randread::summarize(&h).p50_ns)
}

/// What the experiment hands to the results.
pub struct PhasesOutcome {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub options: Vec<(String, serde_json::Value)>,
}

/// Runs every engine in turn (each in its own child and cgroup) and turns
/// their records into rows. One engine failing is a note; none finishing a
/// phase is an error.
pub fn run(
    engines: &[crate::engine::EngineKind],
    params: &PhasesParams,
    data_dir: &Path,
    device_line: Option<&DeviceLine>,
) -> Result<PhasesOutcome> {
    let mut notes = Vec::new();
    let mut options: Vec<(String, serde_json::Value)> = Vec::new();
    // The probe file: read by each child beside each get of its read
    // phases, and, without a device line, here first for the line's
    // figure. Written once.
    let probe = data_dir.join("phases-read4k.probe");
    let prepared = prepare_probe(&probe);
    let device_4k_ns = match device_line_read_4k_ns(device_line) {
        Some(ns) => {
            options.push((
                "device_read_4k_source".into(),
                "the device experiment's line (read_4k_latency_ns)".into(),
            ));
            Some(ns)
        }
        None => match prepared
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .and_then(|()| probe_read_4k_ns(&probe))
        {
            Ok(ns) => {
                let ns = ns as f64;
                options.push((
                    "device_read_4k_source".into(),
                    format!("measured by the phases experiment: p50 of 4 KiB O_DIRECT random reads (io_uring, registered buffer, QD1) of a filled {} MiB file", PROBE_FILE_BYTES >> 20).into(),
                ));
                eprintln!(
                    "  device 4 KiB random read p50: {:.1} µs (measured here)",
                    ns / 1e3
                );
                Some(ns)
            }
            Err(err) => {
                notes.push(format!("no device 4 KiB read latency: {err:#}"));
                None
            }
        },
    };
    if let Some(ns) = device_4k_ns {
        options.push(("device_read_4k_latency_ns".into(), ns.into()));
    }
    // The device beside each engine's reads.
    let device_probe = match prepared {
        Ok(()) => {
            options.push((
                "device_probe".into(),
                format!("beside each read phase, the engine's child reads the device's 4 KiB latency: one 4 KiB O_DIRECT random read (io_uring, registered buffer, QD1) of a filled {} MiB file right after each get, as the device line's are read, untimed in the get's latency and taken out of the phase's counters; the p50 of those reads (p50_x_probe_4k)", PROBE_FILE_BYTES >> 20).into(),
            ));
            Some(probe.as_path())
        }
        Err(err) => {
            notes.push(format!("no device probe beside the read phases: {err:#}"));
            None
        }
    };
    let outcome = run_engines(
        engines,
        params,
        data_dir,
        device_probe,
        device_4k_ns,
        &mut notes,
    );
    let _ = std::fs::remove_file(&probe);
    let (rows, methods) = outcome?;
    options.push(("memory_budget".into(), methods.into()));
    Ok(PhasesOutcome {
        rows,
        notes,
        options,
    })
}

/// The note of an engine's read phases whose device probe failed: how
/// many, and why the first did; `None` when none failed.
fn failed_probes_note(engine: &str, records: &[PhaseRecord]) -> Option<String> {
    let failed: Vec<&PhaseRecord> = records
        .iter()
        .filter(|r| r.device_4k_probe_error.is_some())
        .collect();
    let first = failed.first()?;
    Some(format!(
        "{engine}: the device probe failed after {} of its read phases (those rows have no p50_x_probe_4k); the first, iteration {}: {}",
        failed.len(),
        first.iteration,
        first.device_4k_probe_error.as_deref().unwrap_or_default()
    ))
}

/// Each engine's run in turn: its rows, and how its memory was bounded.
fn run_engines(
    engines: &[crate::engine::EngineKind],
    params: &PhasesParams,
    data_dir: &Path,
    device_probe: Option<&Path>,
    device_4k_ns: Option<f64>,
    notes: &mut Vec<String>,
) -> Result<(Vec<Row>, serde_json::Map<String, serde_json::Value>)> {
    let mut rows = Vec::new();
    let mut methods = serde_json::Map::new();
    let mut shared_notes: Vec<(String, Vec<&str>)> = Vec::new();
    for kind in engines {
        let config = EngineConfig {
            cache_bytes: Some(params.engine_cache_bytes()),
            ..EngineConfig::new(*kind, kind.default_io_mode())
        };
        let name = kind.name();
        let run = match run_engine(&config, params, data_dir, device_probe) {
            Ok(run) => run,
            Err(err) => {
                let note = format!("{name}: failed: {err:#}");
                eprintln!("  {note}");
                notes.push(note);
                continue;
            }
        };
        let mut method = serde_json::json!({
            "method": run.method.name(),
            "end": run.end,
            "device_reads": if run.device_reads_counted { "cgroup blkio requests" } else { "/proc/<pid>/io read_bytes ÷ 4096" },
        });
        if let Some(peak) = run.peak_memory_bytes {
            method["peak_memory_bytes"] = peak.into();
        }
        if let Some(hits) = run.limit_hits {
            method["limit_hits"] = hits.into();
        }
        methods.insert(name.to_string(), method);
        for note in &run.cgroup_notes {
            // Said once, with every engine it applies to.
            match shared_notes.iter_mut().find(|(text, _)| text == note) {
                Some((_, engines)) => engines.push(name),
                None => shared_notes.push((note.clone(), vec![name])),
            }
        }
        notes.extend(failed_probes_note(name, &run.records));
        if !run.clean {
            notes.push(format!("{name}: {}", run.end));
        } else if run.end.starts_with("the disk is full") {
            notes.push(format!("{name}: ended early: {}", run.end));
        }
        rows.extend(
            run.records
                .iter()
                .map(|r| row(&config, &run, r, device_4k_ns)),
        );
    }
    for (note, engines) in shared_notes {
        notes.push(format!("{}: {note}", engines.join(", ")));
    }
    if rows.is_empty() {
        bail!("no engine finished a phase: {}", notes.join("; "));
    }
    Ok((rows, methods))
}

pub fn metrics() -> Vec<MetricSpec> {
    let mut specs = vec![
        MetricSpec::new("latency_p50_us", "Latency p50", "µs", false),
        MetricSpec::new("latency_mean_us", "Latency mean", "µs", false),
        MetricSpec::new("latency_p99_us", "Latency p99", "µs", false),
        MetricSpec::new("latency_p999_us", "Latency p99.9", "µs", false),
        MetricSpec::new("p50_x_device_4k", "p50 ÷ device 4 KiB read", "×", false),
        MetricSpec::new("p99_x_device_4k", "p99 ÷ device 4 KiB read", "×", false),
        MetricSpec::new(
            "p50_x_probe_4k",
            "p50 ÷ device 4 KiB read beside the gets",
            "×",
            false,
        ),
        MetricSpec::new(
            "device_4k_probe_p50_us",
            "Device 4 KiB read p50 beside the gets",
            "µs",
            false,
        ),
        MetricSpec::new("get_cpu_p50_us", "A get's thread CPU time p50", "µs", false),
        MetricSpec::new(
            "get_off_cpu_p50_us",
            "A get's latency off the CPU p50",
            "µs",
            false,
        ),
        MetricSpec::new(
            "probe_cpu_p50_us",
            "The probe read's thread CPU time p50",
            "µs",
            false,
        ),
        MetricSpec::new(
            "probe_off_cpu_p50_us",
            "The probe read's latency off the CPU p50",
            "µs",
            false,
        ),
        MetricSpec::new("ops_s", "Operations (commits included)", "ops/s", true),
        MetricSpec::new("commit_p99_ms", "Commit p99", "ms", false),
        MetricSpec::new(
            "device_reads_per_get",
            "Device reads per get",
            "reads",
            false,
        ),
        MetricSpec::new(
            "device_reads_per_op",
            "Device reads per operation",
            "reads",
            false,
        ),
        MetricSpec::new(
            "read_kib_per_get",
            "Bytes read from storage per get (/proc io)",
            "KiB",
            false,
        ),
        MetricSpec::new(
            "read_syscalls_per_get",
            "Read syscalls per get",
            "calls",
            false,
        ),
        MetricSpec::new(
            "engine_reads_per_get",
            "Engine's own data-block reads per get",
            "reads",
            false,
        ),
    ];
    specs.extend(crate::get_reads::metric_specs());
    specs.extend([
        MetricSpec::new("data_mib", "Data inserted (keys + values)", "MiB", false),
        MetricSpec::new("size_on_disk_mib", "Size on disk", "MiB", false),
        MetricSpec::new("rss_mib", "Resident set at the phase's end", "MiB", false),
        MetricSpec::new(
            "l0_layers",
            "L0 layers at the phase's end (engine's own)",
            "layers",
            false,
        ),
        MetricSpec::new(
            "index_memory_mib",
            "Index and filter memory at the phase's end (engine's own)",
            "MiB",
            false,
        ),
    ]);
    specs
}

/// Device reads during a phase: the cgroup's count of requests, else
/// /proc read_bytes in [`FALLBACK_READ_BYTES`] units.
pub fn device_reads(r: &PhaseRecord) -> f64 {
    match r.device_reads {
        Some(n) => n as f64,
        None => r.proc_read_bytes as f64 / FALLBACK_READ_BYTES as f64,
    }
}

/// The case label of a row: `<phase> #<iteration>`.
pub fn case_label(phase: Phase, iteration: u32) -> String {
    format!("{} #{iteration}", phase.name())
}

/// Issue 31's bound on strata's read p50 against the device's 4 KiB read
/// probed beside its gets (`p50_x_probe_4k`), at every iteration.
pub const READ_P50_X_PROBE_AIM_MAX: f64 = 1.1;
/// The peers strata's read p50 is to be ahead of at every iteration.
pub const READ_PEERS_BEHIND: [EngineKind; 2] = [EngineKind::Lmdb, EngineKind::Redb];

/// Why a peer's read row is not compared with strata's, if it is not: the
/// share of its gets served without a device read, `1 − device reads per
/// get` (the cgroup's count; floored at 0), as strata's hit ratio is
/// reckoned ([`crate::get_reads`]), above the same
/// [`get_reads::HIT_RATIO_JUDGED_MAX`]: its page cache or its own cache
/// served it, the data not 8× that memory, and its p50 is a figure made of
/// cache hits, which the verdict does not count (LAB.md).
fn peer_not_judged_why(peer: &str, row: &Row) -> Option<String> {
    let Some(&per_get) = row.metrics.get("device_reads_per_get") else {
        return Some(format!(
            "not judged: {peer}'s row has no device reads per get"
        ));
    };
    let from_memory = (1.0 - per_get).max(0.0);
    (from_memory > get_reads::HIT_RATIO_JUDGED_MAX).then(|| {
        format!(
            "not judged: {peer}'s gets made {per_get:.2} device reads each, so at least {:.0}% came from memory (at most {:.1}% may: the data is {}× every cache): a figure made of cache hits",
            from_memory * 100.0,
            get_reads::HIT_RATIO_JUDGED_MAX * 100.0,
            get_reads::DATA_PER_CACHE_MIN
        )
    })
}

/// The least read p50 ÷ the device's 4 KiB read probed beside the gets
/// that a p50 of device reads can be: an engine reads the device no faster
/// than the device does.
pub const READ_P50_X_PROBE_DEVICE_MIN: f64 = 1.0;

/// Why `engine`'s read row is not judged against the device or a peer, if
/// it is not: its p50 is below the device's own 4 KiB read beside its gets
/// ([`READ_P50_X_PROBE_DEVICE_MIN`]), so gets served from memory moved
/// it. On this VM's device, whose reads spread widely, an eighth of the
/// gets from memory (the most [`get_reads::HIT_RATIO_JUDGED_MAX`] lets
/// through) moves a p50 that far: redb at read #1 with a 16 MiB cache,
/// 0.88–0.92× its probe in four runs (its page cache had the rest of the
/// budget), 1.07× with 32 MiB.
fn below_device_why(engine: &str, row: &Row) -> Option<String> {
    let x = *row.metrics.get("p50_x_probe_4k")?;
    (x < READ_P50_X_PROBE_DEVICE_MIN).then(|| {
        format!(
            "not judged: {engine}'s p50 is {x:.3}× the device's 4 KiB read beside its gets, faster than the device: a figure made of cache hits"
        )
    })
}

/// Why strata's read row is not judged, if it is not: its cache hit ratio
/// ([`get_reads::not_judged_why`]), or a p50 below the device's
/// ([`below_device_why`]). One rule for both of its read aims.
fn strata_not_judged_why(row: &Row) -> Option<String> {
    get_reads::not_judged_why(row).or_else(|| below_device_why("strata", row))
}

/// Issue 31's aims for the read phases: strata's p50 at most
/// [`READ_P50_X_PROBE_AIM_MAX`]× the device's 4 KiB read beside its gets
/// at every iteration, and below LMDB's and redb's at every iteration
/// where they ran (each p50 ÷ its own engine's probe, where both have
/// one). No aim without strata's read rows (or without a probe
/// figure, for the first).
///
/// Only reads that reached the device are judged (LAB.md): a strata row
/// whose gets the block cache served more than
/// [`crate::get_reads::HIT_RATIO_JUDGED_MAX`] of (the data not 8× its
/// cache: quick mode's first iteration), and a comparison with a peer whose
/// p50 came from memory ([`peer_not_judged_why`]), or a row of either whose
/// p50 is below the device's ([`below_device_why`]), go to a claim of
/// their own, not judged, with why: they count neither as met nor as not
/// met.
pub fn aims(rows: &[Row]) -> Vec<Claim> {
    let reads = |engine: &str| -> Vec<&Row> {
        rows.iter()
            .filter(|r| {
                r.engine == engine
                    && parse_case(&r.case).is_some_and(|(phase, _)| phase == Phase::Read)
            })
            .collect()
    };
    let strata = reads(EngineKind::Strata.name());
    let mut claims = Vec::new();
    // (case figures judged, not judged with why)
    let (mut judged, mut unjudged) = (Vec::new(), Vec::new());
    for r in &strata {
        let Some(&ratio) = r.metrics.get("p50_x_probe_4k") else {
            continue;
        };
        let case = CaseFigure {
            case: r.case.clone(),
            ratio,
        };
        match strata_not_judged_why(r) {
            None => judged.push(case),
            Some(why) => unjudged.push((case, why)),
        }
    }
    let probe_claim = |cases: Vec<CaseFigure>| Claim::EveryCase {
        what: "strata's read p50".to_string(),
        bound: AimBound::AtMost(READ_P50_X_PROBE_AIM_MAX),
        reference: Reference::Device("the device's 4 KiB read probed beside its gets".to_string()),
        cases,
    };
    if !judged.is_empty() {
        claims.push(probe_claim(judged));
    }
    if !unjudged.is_empty() {
        let why = unjudged
            .iter()
            .map(|(c, why)| format!("{}: {why}", c.case))
            .collect::<Vec<_>>()
            .join("; ");
        let cases = unjudged.into_iter().map(|(c, _)| c).collect();
        claims.push(probe_claim(cases).judged_unless(Some(why)));
    }
    // Each engine runs in its own child, minutes apart, and the device
    // moves between them (its probe p50 differed by a fifth between two
    // engines of one run): where both rows have their probe, the p50s are
    // compared each ÷ its own probe; else as they are.
    let figure = |r: &Row, probed: bool| {
        let key = if probed {
            "p50_x_probe_4k"
        } else {
            "latency_p50_us"
        };
        r.metrics.get(key).copied()
    };
    let mut judged = PeerTally::default();
    let mut unjudged = PeerTally::default();
    let mut unjudged_why = Vec::new();
    for s in &strata {
        for peer in READ_PEERS_BEHIND.map(EngineKind::name) {
            let Some(p) = reads(peer).into_iter().find(|r| r.case == s.case) else {
                continue;
            };
            let probed = figure(s, true).is_some() && figure(p, true).is_some();
            let (Some(mine), Some(theirs)) = (figure(s, probed), figure(p, probed)) else {
                continue;
            };
            let why = strata_not_judged_why(s)
                .or_else(|| peer_not_judged_why(peer, p))
                .or_else(|| below_device_why(peer, p));
            let tally = if let Some(why) = why {
                unjudged_why.push(format!("{} against {peer}: {why}", s.case));
                &mut unjudged
            } else {
                &mut judged
            };
            tally.count(&s.case, peer, probed, mine, theirs);
        }
    }
    if judged.checked > 0 {
        claims.push(judged.claim());
    }
    if unjudged.checked > 0 {
        claims.push(
            unjudged
                .claim()
                .judged_unless(Some(unjudged_why.join("; "))),
        );
    }
    claims
}

/// strata's read p50 against the peers', case by case: the comparisons
/// that held, those checked, and where strata was behind.
#[derive(Default)]
struct PeerTally {
    held: usize,
    checked: usize,
    misses: Vec<String>,
}

impl PeerTally {
    /// One comparison: strata's figure `mine` against `peer`'s `theirs`,
    /// each ÷ its probe when `probed`, else in µs.
    fn count(&mut self, case: &str, peer: &str, probed: bool, mine: f64, theirs: f64) {
        self.checked += 1;
        if mine < theirs {
            self.held += 1;
        } else if probed {
            self.misses.push(format!(
                "{case}: strata {mine:.3}×, {peer} {theirs:.3}× its probe"
            ));
        } else {
            self.misses.push(format!(
                "{case}: strata {mine:.1} µs, {peer} {theirs:.1} µs"
            ));
        }
    }

    fn claim(self) -> Claim {
        Claim::CaseCount {
            what: "strata's read p50 (each engine's ÷ the device probed beside its gets) below LMDB's and redb's".to_string(),
            reference: Reference::Engine("LMDB and redb".to_string()),
            cases_label: "read phases".to_string(),
            held: self.held,
            checked: self.checked,
            misses: self.misses,
            misses_label: "behind on".to_string(),
        }
    }
}

/// Splits a case label back into phase and iteration.
pub fn parse_case(case: &str) -> Option<(Phase, u32)> {
    let (phase, iteration) = case.split_once(" #")?;
    Some((Phase::parse(phase)?, iteration.parse().ok()?))
}

/// The row of one phase record; `device_4k_ns` the device's 4 KiB read
/// latency for the ratios.
pub fn row(
    config: &EngineConfig,
    run: &EngineRun,
    r: &PhaseRecord,
    device_4k_ns: Option<f64>,
) -> Row {
    let us = |ns: f64| ns / 1e3;
    let mib = crate::sys::mib;
    let reads = device_reads(r);
    let mut row = Row::new(
        &case_label(r.phase, r.iteration),
        config.kind.name(),
        config.io_mode.name(),
    )
    .metric("latency_p50_us", us(r.latency_p50_ns as f64))
    .metric("latency_mean_us", us(r.latency_mean_ns))
    .metric("latency_p99_us", us(r.latency_p99_ns as f64))
    .metric("latency_p999_us", us(r.latency_p999_ns as f64))
    .metric("ops_s", r.ops as f64 / r.elapsed_s)
    .metric("commit_p99_ms", r.commit_p99_ns as f64 / 1e6)
    .metric("device_reads_per_op", reads / r.ops as f64)
    .metric("data_mib", mib(r.data_bytes))
    .metric("size_on_disk_mib", mib(r.bytes_on_disk))
    .param("phase", r.phase.name())
    .param("iteration", r.iteration)
    .param("ops", r.ops)
    .param("gets", r.gets)
    .param("keys", r.keys)
    .param("elapsed_s", r.elapsed_s)
    .param("proc_read_bytes", r.proc_read_bytes)
    .param("read_syscalls", r.read_syscalls)
    .param("memory_budget_method", run.method.name())
    .param(
        "device_reads_source",
        if r.device_reads.is_some() {
            "cgroup blkio requests"
        } else {
            "/proc/<pid>/io read_bytes ÷ 4096 (4 KiB device reads)"
        },
    );
    if let Some(n) = r.device_reads {
        row = row.param("device_reads", n);
    }
    if let Some(b) = r.device_read_bytes {
        row = row.param("device_read_bytes", b);
    }
    if let Some(s) = r.load_s {
        row = row.param("load_s", s);
    }
    if let Some(b) = r.rss_bytes {
        row = row.metric("rss_mib", mib(b));
    }
    if let Some(s) = r.engine_shape {
        row = row
            .metric("l0_layers", s.l0_layers as f64)
            .metric("index_memory_mib", mib(s.index_memory_bytes))
            .param("frozen_layers", s.frozen_layers)
            .param("runs", s.runs)
            .param("compactions", s.compactions)
            .param("block_cache_mib", mib(s.block_cache_bytes));
    }
    if r.gets > 0 {
        let gets = r.gets as f64;
        row = row
            .metric("device_reads_per_get", reads / gets)
            .metric("read_kib_per_get", r.proc_read_bytes as f64 / 1024.0 / gets)
            .metric("read_syscalls_per_get", r.read_syscalls as f64 / gets);
        if let (Some(lookups @ 1..), Some(reads)) = (r.engine_lookups, r.engine_lookup_reads) {
            row = row.metric("engine_reads_per_get", reads as f64 / lookups as f64);
        }
        if let Some(g) = r.strata_gets.filter(|g| g.gets > 0) {
            row = g.add_to(row);
        }
    }
    if let Some(d) = device_4k_ns.filter(|d| *d > 0.0) {
        row = row
            .metric("p50_x_device_4k", r.latency_p50_ns as f64 / d)
            .metric("p99_x_device_4k", r.latency_p99_ns as f64 / d);
    }
    if let Some(d) = r.device_4k_probe_ns.filter(|d| *d > 0) {
        row = row
            .metric("device_4k_probe_p50_us", us(d as f64))
            .metric("p50_x_probe_4k", r.latency_p50_ns as f64 / d as f64);
    }
    for (what, split) in [("get", r.get_split), ("probe", r.probe_split)] {
        if let Some(s) = split {
            row = row
                .metric(&format!("{what}_cpu_p50_us"), us(s.cpu_ns as f64))
                .metric(&format!("{what}_off_cpu_p50_us"), us(s.off_cpu_ns as f64));
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineKind, LabIoMode};

    #[test]
    fn keys_are_32_distinct_bytes_regenerated_from_the_seed() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            assert!(seen.insert(key(7, i)));
        }
        assert_eq!(key(7, 42), key(7, 42));
        assert_ne!(key(7, 42), key(8, 42));
    }

    #[test]
    fn percentiles_of_a_hand_built_histogram() {
        // 100 operations: 90 of 10 µs, 9 of 100 µs, 1 of 1 ms.
        // p50 = 10 µs; p99 = 100 µs (the 99th value); p99.9 = 1 ms;
        // mean = (900 + 900 + 1000) / 100 = 28 µs.
        let mut h = latency_histogram();
        h.record_n(10_000, 90).unwrap();
        h.record_n(100_000, 9).unwrap();
        h.record(1_000_000).unwrap();
        let (mean, p50, p99, p999) = percentiles(&h);
        let close = |got: u64, want: u64| got.abs_diff(want) <= want / 500;
        assert!(close(p50, 10_000), "{p50}");
        assert!(close(p99, 100_000), "{p99}");
        assert!(close(p999, 1_000_000), "{p999}");
        assert!((mean - 28_000.0).abs() < 28.0, "{mean}");
    }

    fn record(phase: Phase, gets: u64) -> PhaseRecord {
        PhaseRecord {
            iteration: 2,
            phase,
            ops: 1000,
            gets,
            elapsed_s: 0.5,
            latency_mean_ns: 120_000.0,
            latency_p50_ns: 100_000,
            latency_p99_ns: 400_000,
            latency_p999_ns: 900_000,
            commits: 1,
            commit_mean_ns: 2e6,
            commit_p99_ns: 3_000_000,
            keys: 5000,
            data_bytes: 5000 * 288,
            bytes_on_disk: 3 << 20,
            proc_read_bytes: 8 << 20,
            read_syscalls: 3000,
            device_reads: None,
            device_read_bytes: None,
            engine_lookups: Some(gets),
            engine_lookup_reads: Some(gets * 3 / 2),
            strata_gets: Some(GetReads {
                gets,
                block_reads: gets / 4,
                value_reads: 0,
                block_cache_hits: gets,
                block_cache_misses: gets / 4,
                direct_reads: true,
            }),
            engine_shape: Some(EngineShape {
                l0_layers: 3,
                index_memory_bytes: 5 << 20,
                ..EngineShape::default()
            }),
            rss_bytes: Some(40 << 20),
            load_s: None,
            device_4k_probe_ns: None,
            device_4k_probe_error: None,
            get_split: (gets > 0).then_some(SplitP50s {
                cpu_ns: 3_000,
                off_cpu_ns: 97_000,
            }),
            probe_split: None,
        }
    }

    #[test]
    fn a_failed_device_probe_is_said_in_a_note() {
        let mut records = vec![record(Phase::Read, 1000), record(Phase::Read, 1000)];
        assert_eq!(failed_probes_note("strata", &records), None);
        records[1].iteration = 3;
        records[1].device_4k_probe_error = Some("io_uring: not permitted".into());
        let note = failed_probes_note("strata", &records).expect("a note");
        assert!(
            note.starts_with("strata: the device probe failed after 1 of its read phases"),
            "{note}"
        );
        assert!(
            note.ends_with("iteration 3: io_uring: not permitted"),
            "{note}"
        );
        // The record's JSON from before the field still loads.
        let mut json = serde_json::to_value(&records[0]).unwrap();
        json.as_object_mut()
            .unwrap()
            .remove("device_4k_probe_error");
        let back: PhaseRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back.device_4k_probe_error, None);
    }

    #[test]
    fn row_ratios_match_the_hand_computation() {
        let config = EngineConfig::new(EngineKind::Strata, LabIoMode::DirectRw);
        let run = EngineRun {
            records: Vec::new(),
            method: BudgetMethod::CgroupV1,
            end: String::new(),
            clean: true,
            peak_memory_bytes: None,
            limit_hits: None,
            device_reads_counted: false,
            cgroup_notes: Vec::new(),
        };
        // 8 MiB read = 2048 reads of 4 KiB over 1000 gets: 2.048 per get;
        // p50 100 µs ÷ device 50 µs = 2; p99 400 ÷ 50 = 8.
        let r = row(&config, &run, &record(Phase::Read, 1000), Some(50_000.0));
        assert_eq!(r.case, "read #2");
        assert_eq!(r.metrics["latency_p50_us"], 100.0);
        assert_eq!(r.metrics["p50_x_device_4k"], 2.0);
        assert_eq!(r.metrics["p99_x_device_4k"], 8.0);
        assert_eq!(r.metrics["device_reads_per_get"], 2.048);
        assert_eq!(r.metrics["read_kib_per_get"], 8.192);
        assert_eq!(r.metrics["engine_reads_per_get"], 1.5);
        assert_eq!(r.metrics["l0_layers"], 3.0);
        assert_eq!(r.metrics["index_memory_mib"], 5.0);
        assert_eq!(r.metrics["rss_mib"], 40.0);
        assert_eq!(r.metrics["read_syscalls_per_get"], 3.0);
        assert_eq!(r.metrics["ops_s"], 2000.0);
        // strata's own: 250 block reads for 1000 gets, 1250 cache lookups.
        assert_eq!(r.metrics["cache_hit_ratio"], 0.75);
        assert_eq!(r.metrics["strata_reads_per_get"], 0.25);
        assert_eq!(r.metrics["block_cache_hit_ratio"], 0.8);
        assert!(!r.metrics.contains_key("p50_x_probe_4k"));
        assert_eq!(r.metrics["get_cpu_p50_us"], 3.0);
        assert_eq!(r.metrics["get_off_cpu_p50_us"], 97.0);
        assert!(!r.metrics.contains_key("probe_cpu_p50_us"));
        // The device probed beside the phase: p50 100 µs ÷ 40 µs.
        let mut probed = record(Phase::Read, 1000);
        probed.device_4k_probe_ns = Some(40_000);
        let r = row(&config, &run, &probed, Some(50_000.0));
        assert_eq!(r.metrics["p50_x_probe_4k"], 2.5);
        assert_eq!(r.metrics["device_4k_probe_p50_us"], 40.0);
        assert_eq!(r.metrics["p50_x_device_4k"], 2.0);
        // The cgroup's count wins over /proc when there is one: 500 / 250.
        let mut counted = record(Phase::Mixed, 250);
        counted.device_reads = Some(500);
        let r = row(&config, &run, &counted, None);
        assert_eq!(r.metrics["device_reads_per_get"], 2.0);
        assert_eq!(r.metrics["device_reads_per_op"], 0.5);
        assert!(!r.metrics.contains_key("p50_x_device_4k"));
        // No gets: no per-get figures.
        let r = row(&config, &run, &record(Phase::Append, 0), None);
        assert!(!r.metrics.contains_key("device_reads_per_get"));
        assert!(!r.metrics.contains_key("cache_hit_ratio"));
        assert_eq!(parse_case("mixed #12"), Some((Phase::Mixed, 12)));
        assert_eq!(parse_case("mixed 12"), None);
    }

    #[test]
    fn the_device_line_latency_is_read_when_present() {
        assert_eq!(device_line_read_4k_ns(None), None);
        let line = DeviceLine {
            write_mib_s: 1.0,
            read_mib_s: 1.0,
            block_bytes: 1,
            file_bytes: 1,
            fio_write_mib_s: None,
            fio_read_mib_s: None,
            read_4k_latency_ns: None,
            fio_read_4k_latency_ns: None,
        };
        // Results of a run before the random-read probe: measured instead.
        assert_eq!(device_line_read_4k_ns(Some(&line)), None);
        let line = DeviceLine {
            read_4k_latency_ns: Some(61_000.0),
            ..line
        };
        assert_eq!(device_line_read_4k_ns(Some(&line)), Some(61_000.0));
    }

    #[test]
    fn enospc_is_recognised_through_context() {
        let err = anyhow::Error::from(std::io::Error::from_raw_os_error(libc::ENOSPC))
            .context("write a layer");
        assert!(is_enospc(&err));
        assert!(!is_enospc(&anyhow::anyhow!("key #3 is missing")));
    }

    #[test]
    fn engine_caches_are_an_eighth_of_the_first_read_phases_data_at_most() {
        for quick in [true, false] {
            let p = PhasesParams::new(quick);
            let cache = p.engine_cache_bytes();
            assert!(cache <= p.memory_budget_bytes / ENGINE_CACHE_SHARE);
            // The first read phase reads at least the first load step.
            assert!(p.load_bytes_per_iteration >= get_reads::DATA_PER_CACHE_MIN * cache);
        }
        assert_eq!(PhasesParams::new(true).engine_cache_bytes(), 16 << 20);
        assert_eq!(PhasesParams::new(false).engine_cache_bytes(), 64 << 20);
        // No load step: the data grows through the appends; the quarter.
        let p = PhasesParams {
            load_bytes_per_iteration: 0,
            ..PhasesParams::new(true)
        };
        assert_eq!(p.engine_cache_bytes(), 32 << 20);
    }

    /// A read row whose gets reached the device: strata's with 5% cache
    /// hits, a peer's with 0.9 device reads a get.
    fn read_row(engine: &str, iteration: u32, p50_us: f64, x_probe: Option<f64>) -> Row {
        let row = Row::new(&case_label(Phase::Read, iteration), engine, "DirectRw")
            .metric("latency_p50_us", p50_us);
        let row = if engine == "strata" {
            row.metric(get_reads::HIT_RATIO_METRIC, 0.05)
        } else {
            row.metric("device_reads_per_get", 0.9)
        };
        match x_probe {
            Some(x) => row.metric("p50_x_probe_4k", x),
            None => row,
        }
    }

    #[test]
    fn read_aims_bound_every_iteration_by_the_probe_and_the_peers() {
        use crate::aims::Verdict;
        let mut rows = vec![
            read_row("strata", 1, 66.0, Some(1.05)),
            read_row("strata", 2, 70.0, Some(1.09)),
            read_row("lmdb", 1, 70.0, None),
            read_row("lmdb", 2, 75.0, None),
            // Faster than strata, on a device that was faster still:
            // behind once each is taken over its own probe.
            read_row("redb", 1, 60.0, Some(1.2)),
            // A mixed phase is no read phase.
            Row::new(&case_label(Phase::Mixed, 1), "strata", "DirectRw")
                .metric("latency_p50_us", 500.0)
                .metric("p50_x_probe_4k", 9.0),
        ];
        let claims = aims(&rows);
        assert_eq!(claims.len(), 2);
        assert!(
            claims.iter().all(|c| c.verdict() == Verdict::Met),
            "{claims:?}"
        );
        match &claims[1] {
            Claim::CaseCount { held, checked, .. } => assert_eq!((*held, *checked), (3, 3)),
            other => panic!("{other:?}"),
        }
        // One iteration past the bound, one behind a peer: both not met,
        // each naming where.
        rows.push(read_row("strata", 3, 90.0, Some(1.12)));
        rows.push(read_row("redb", 3, 85.0, None));
        rows.push(read_row("lmdb", 3, 95.0, Some(1.1)));
        let claims = aims(&rows);
        assert!(
            claims.iter().all(|c| c.verdict() == Verdict::NotMet),
            "{claims:?}"
        );
        assert!(claims[0].text().contains("read #3"), "{}", claims[0].text());
        let peers = claims[1].text();
        for miss in [
            "read #3: strata 90.0 µs, redb 85.0 µs",
            "read #3: strata 1.120×, lmdb 1.100× its probe",
        ] {
            assert!(peers.contains(miss), "{peers}");
        }
        // Without strata's read rows, no aim.
        assert!(aims(&rows[2..5]).is_empty());
    }

    #[test]
    fn read_aims_do_not_judge_reads_served_from_memory() {
        use crate::aims::Verdict;
        let rows = vec![
            // strata's first iteration: a fifth of its gets from its cache.
            read_row("strata", 1, 50.0, Some(1.02)).metric(get_reads::HIT_RATIO_METRIC, 0.2),
            read_row("strata", 2, 66.0, Some(1.08)),
            read_row("strata", 3, 70.0, Some(1.12)),
            // LMDB from its page cache at #2: far ahead, and not counted.
            read_row("lmdb", 2, 4.0, Some(0.07)).metric("device_reads_per_get", 0.06),
            read_row("lmdb", 3, 80.0, Some(1.3)),
            read_row("redb", 1, 60.0, Some(1.2)),
            // Reads the device for 9 gets in 10, and faster than the
            // device: memory moved its p50.
            read_row("redb", 3, 60.0, Some(0.91)),
            // So does strata's, below its probe.
            read_row("strata", 4, 60.0, Some(0.98)),
        ];
        let claims = aims(&rows);
        let verdicts: Vec<Verdict> = claims.iter().map(Claim::verdict).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::NotMet,
                Verdict::NotJudged,
                Verdict::Met,
                Verdict::NotJudged
            ],
            "{claims:?}"
        );
        // The bound is judged on #2 and #3 (#3 past it); #1 is named, with
        // its hit ratio, in a claim not judged.
        let judged = claims[0].text();
        assert!(
            judged.contains("read #3") && !judged.contains("read #1"),
            "{judged}"
        );
        for why in [
            "read #1: not judged: 20%",
            "read #4: not judged: strata's p50 is 0.980× the device's",
        ] {
            assert!(claims[1].text().contains(why), "{}", claims[1].text());
        }
        // Against the peers: #3 with LMDB only; #1 (strata's cache) and
        // #2 (LMDB's page cache) not judged, each saying why.
        match &claims[2] {
            Claim::CaseCount { held, checked, .. } => assert_eq!((*held, *checked), (1, 1)),
            other => panic!("{other:?}"),
        }
        let unjudged = claims[3].text();
        for why in [
            "read #1 against redb: not judged: 20%",
            "read #2 against lmdb: not judged: lmdb's gets made 0.06 device reads each, so at least 94% came from memory",
            "behind on read #2: strata 1.080×, lmdb 0.070× its probe",
            "read #3 against redb: not judged: redb's p50 is 0.910× the device's",
        ] {
            assert!(unjudged.contains(why), "{unjudged}");
        }
    }

    /// The whole workload on strata, in process, at tiny sizes: every phase
    /// of every iteration, every read found.
    #[test]
    fn strata_runs_every_phase_of_every_iteration() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let config = EngineConfig::new(EngineKind::Strata, EngineKind::Strata.default_io_mode());
        let engine = engine::open(&config, tmp.path()).unwrap();
        let params = PhasesParams {
            ops: 2500,
            value_len_bytes: 100,
            iterations_max: 2,
            memory_budget_bytes: 64 << 20,
            data_target_bytes: 1 << 30,
            load_bytes_per_iteration: 1000 * 132,
            load_in_budget: false,
            seed: 1,
        };
        let probe_dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let probe = probe_dir.path().join("probe");
        prepare_probe(&probe).unwrap();
        let go = GoAhead {
            method: BudgetMethod::Fadvise,
            io_counter: None,
            memory_limit_file: None,
            device_probe: Some(probe),
        };
        let mut records = Vec::new();
        let end = run_iterations(engine.as_ref(), &params, &go, |line| {
            if let Line::Record(r) = line {
                records.push(*r);
            }
            Ok(())
        })
        .unwrap();
        engine.close().unwrap();
        assert_eq!(end, "2 iteration(s) done");
        assert_eq!(records.len(), 8);
        for (n, r) in records.iter().enumerate() {
            assert_eq!(r.iteration, 1 + n as u32 / 4);
            assert_eq!(r.phase, Phase::ALL[n % 4]);
            assert!(r.latency_p50_ns > 0 && r.latency_p50_ns <= r.latency_p99_ns);
            // The device probed beside each read phase, and only then.
            assert_eq!(
                r.device_4k_probe_ns.is_some_and(|ns| ns > 0),
                r.phase == Phase::Read,
                "{:?}",
                r.phase
            );
            // A phase with gets says where their time went; the probe's
            // beside the read phase's. A get's CPU is within its latency's
            // range; the probe read both works and waits (on the device).
            assert_eq!(r.get_split.is_some(), r.gets > 0, "{:?}", r.phase);
            if let Some(g) = r.get_split {
                assert!(g.cpu_ns > 0 && g.cpu_ns <= r.latency_p999_ns, "{g:?}");
            }
            assert_eq!(r.probe_split.is_some(), r.phase == Phase::Read);
            if let Some(p) = r.probe_split {
                assert!(p.cpu_ns > 0 && p.off_cpu_ns > 0, "probe: {p:?}");
            }
            // 2500 operations: commits at 1000, 2000 and the end.
            assert_eq!(r.commits, 3);
            // strata counts its own lookups: one per get of the lab.
            assert_eq!(r.engine_lookups, Some(r.gets));
            assert!(r.engine_lookup_reads.is_some());
            // … and its hit ratio's counters, over the phase.
            let g = r.strata_gets.expect("strata's gets");
            assert_eq!(g.gets, r.gets);
            assert_eq!(Some(g.block_reads), r.engine_lookup_reads);
            assert!(g.direct_reads);
            // The probe's 2500 reads of 4 KiB are not the engine's.
            assert!(
                r.proc_read_bytes <= (g.block_reads + 8) * (64 << 10),
                "{:?}: {} bytes read for {} block reads",
                r.phase,
                r.proc_read_bytes,
                g.block_reads
            );
        }
        // Load 1000 + append 2500 + mixed's appends, per iteration.
        let read = &records[3];
        assert_eq!(read.gets, 2500);
        let mixed = &records[2];
        assert!(mixed.gets > 1000 && mixed.gets < 1500, "{}", mixed.gets);
        assert_eq!(read.keys, mixed.keys);
        assert!(records[7].keys > 2 * (1000 + 2500));
    }
}
