//! The bulk experiment (LAB.md §2, after Neon's test_bulk_insert): a large
//! ingest end to end, per engine.
//!
//! The insert runs in a child process (the `strata` binary re-executed with
//! its hidden `lab bulk-child` subcommand) so that its peak RSS and
//! /proc/<pid>/io are its own, and so that it can be killed with SIGKILL
//! without a flush. The parent then times the reopen (recovery), counts what
//! survived, flushes and compacts, measuring each step's time and bytes
//! written. Write amplification = bytes written to storage / bytes ingested
//! (keys + values), from /proc/*/io and, where the engine keeps one, from its
//! own accounting.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::aims::{Bound, Claim, Reference};
use crate::engine::{self, EngineConfig, EngineWriteStats};
use crate::progress::Progress;
use crate::results::{MetricSpec, Row};
use crate::sys::{dir_size, peak_rss_bytes, proc_io};
use crate::workload::{for_each_batch, KeyLayout, ValueSource, KEY_LEN_BYTES};

/// The hidden subcommand (after the binary name) that runs [`child_main`].
pub const CHILD_SUBCOMMAND: [&str; 2] = ["lab", "bulk-child"];
/// Prefix of the protocol lines the child prints on stdout.
const LINE_PREFIX: &str = "STRATA-LAB-BULK ";
/// Issue 4's aim for strata's write amplification before compaction.
pub const WRITE_AMP_AIM_MAX: f64 = 2.2;
/// Issue 30's aim for strata's write amplification including compaction
/// with 8 KiB values (written once, into the log).
pub const LARGE_VALUE_WRITE_AMP_AIM_MAX: f64 = 1.3;
/// The value sizes bulk inserts, each a case: 1 KiB (below strata's
/// `large_value_bytes`: copied into layers) and 8 KiB (left in the log).
pub const VALUE_LENS: [usize; 2] = [1024, 8192];
/// Bytes between two progress lines of the child.
const CHILD_PROGRESS_BYTES: u64 = 8 << 20;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct BulkParams {
    pub volume_bytes: u64,
    /// Samples per engine, interleaved across engines.
    pub repeats: u32,
    pub value_len_bytes: usize,
    pub layout: KeyLayout,
}

impl BulkParams {
    pub fn new(quick: bool) -> BulkParams {
        BulkParams {
            volume_bytes: if quick { 256 << 20 } else { 8 << 30 },
            repeats: 3,
            value_len_bytes: VALUE_LENS[0],
            layout: KeyLayout::Random,
        }
    }

    /// One case per value size of [`VALUE_LENS`], at the same volume.
    pub fn cases(quick: bool) -> Vec<BulkParams> {
        VALUE_LENS
            .iter()
            .map(|&value_len_bytes| BulkParams {
                value_len_bytes,
                ..BulkParams::new(quick)
            })
            .collect()
    }

    pub fn puts(&self) -> u64 {
        (self.volume_bytes / self.value_len_bytes as u64).max(1)
    }

    /// Bytes handed to the engine: keys and values.
    pub fn ingested_bytes(&self) -> u64 {
        self.puts() * (KEY_LEN_BYTES + self.value_len_bytes) as u64
    }

    pub fn case_label(&self) -> String {
        format!(
            "{} MiB of {} B values, {} keys",
            self.volume_bytes >> 20,
            self.value_len_bytes,
            self.layout.label()
        )
    }
}

/// What the child reports once its insert is done (it then waits to be
/// killed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildReport {
    pub insert_s: f64,
    pub puts: u64,
    /// /proc/self/io write_bytes during the insert.
    pub write_bytes: u64,
    pub peak_rss_bytes: u64,
    pub engine_stats: Option<EngineWriteStats>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildArgs {
    pub config: EngineConfig,
    pub dir: PathBuf,
    pub params: BulkParams,
}

/// Entry point of the child process: insert, report, wait to be killed.
/// `spec` is the JSON of [`ChildArgs`].
pub fn child_main(spec: &str) -> Result<()> {
    let args: ChildArgs = serde_json::from_str(spec).context("parse bulk child arguments")?;
    let engine = engine::open(&args.config, &args.dir)?;
    let values = ValueSource::new(args.params.value_len_bytes);
    let mut stdout = std::io::stdout();
    let io_before = proc_io(None)?;
    let start = Instant::now();
    let mut since_progress = 0u64;
    let batch_bytes_each = args.params.value_len_bytes as u64;
    for_each_batch(
        args.params.layout,
        &values,
        args.params.puts(),
        |_, batch| {
            engine.write(batch)?;
            since_progress += batch.len() as u64 * batch_bytes_each;
            if since_progress >= CHILD_PROGRESS_BYTES {
                writeln!(stdout, "{LINE_PREFIX}progress {since_progress}")?;
                stdout.flush()?;
                since_progress = 0;
            }
            Ok(())
        },
    )?;
    let insert_s = start.elapsed().as_secs_f64();
    let io_after = proc_io(None)?;
    let report = ChildReport {
        insert_s,
        puts: args.params.puts(),
        write_bytes: io_after.write_bytes - io_before.write_bytes,
        peak_rss_bytes: peak_rss_bytes(None)?,
        engine_stats: engine.write_stats(),
    };
    writeln!(
        stdout,
        "{LINE_PREFIX}done {}",
        serde_json::to_string(&report)?
    )?;
    stdout.flush()?;
    // Wait to be killed; never close the engine.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    std::mem::forget(engine);
    std::process::exit(0);
}

pub fn metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new("insert_s", "Insert time", "s", false),
        MetricSpec::new("insert_mib_s", "Insert throughput", "MiB/s", true)
            .vs_device(crate::results::DeviceSide::Write),
        MetricSpec::new(
            "write_amp",
            "Write amplification before compaction (/proc io)",
            "×",
            false,
        ),
        MetricSpec::new(
            "engine_write_amp",
            "Write amplification before compaction (engine's stats)",
            "×",
            false,
        ),
        MetricSpec::new(
            "write_amp_after_compaction",
            "Write amplification incl. compaction (/proc io)",
            "×",
            false,
        ),
        MetricSpec::new("peak_rss_mib", "Peak RSS of the insert", "MiB", false),
        MetricSpec::new("recovery_s", "Recovery (reopen after SIGKILL)", "s", false),
        MetricSpec::new(
            "recovered_fraction",
            "Puts recovered after SIGKILL",
            "×",
            true,
        ),
        MetricSpec::new("flush_s", "Flush after recovery", "s", false),
        MetricSpec::new("compaction_s", "Full compaction", "s", false),
        MetricSpec::new("size_on_disk_mib", "Size on disk after flush", "MiB", false),
        MetricSpec::new(
            "size_after_compaction_mib",
            "Size on disk after compaction",
            "MiB",
            false,
        ),
    ]
}

/// Issue 4's aim, checked on strata's row: none without one.
pub fn aims(rows: &[Row]) -> Vec<Claim> {
    let of = |engine: &str, value_len: usize, metric: &str| {
        rows.iter()
            .find(|r| {
                r.engine == engine
                    && r.params.get("value_len_bytes").and_then(|v| v.as_u64())
                        == Some(value_len as u64)
            })
            .and_then(|r| r.metrics.get(metric).copied())
    };
    let mut aims: Vec<Claim> = of("strata", VALUE_LENS[0], "write_amp")
        .map(|wa| Claim::Figure {
            what: "strata's write amplification before compaction".to_string(),
            value: wa,
            decimals: 2,
            bound: Bound::AtMost(WRITE_AMP_AIM_MAX),
        })
        .into_iter()
        .collect();
    if let Some(wa) = of("strata", VALUE_LENS[1], "write_amp_after_compaction") {
        aims.push(Claim::Figure {
            what: "strata's write amplification including compaction, 8 KiB values".to_string(),
            value: wa,
            decimals: 2,
            bound: Bound::AtMost(LARGE_VALUE_WRITE_AMP_AIM_MAX),
        });
    }
    let after = "write_amp_after_compaction";
    if let (Some(s), Some(r)) = (
        of("strata", VALUE_LENS[0], after),
        of("rocksdb", VALUE_LENS[0], after),
    ) {
        aims.push(Claim::Ratio {
            what: "write amplification including compaction, 1 KiB values".to_string(),
            strata: format!("strata {s:.2}"),
            ratio: s / r,
            decimals: 2,
            reference: Reference::Engine("RocksDB's".to_string()),
            bound: Bound::AtMost(1.0),
        });
    }
    aims
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Runs the bulk experiment for one engine; the data dir is removed after.
pub fn run_engine(config: &EngineConfig, params: &BulkParams, data_dir: &Path) -> Result<Row> {
    crate::sys::in_fresh_dir(data_dir, &format!("bulk-{}", config.kind.name()), |dir| {
        run_engine_in(config, params, dir)
    })
}

fn run_engine_in(config: &EngineConfig, params: &BulkParams, dir: &Path) -> Result<Row> {
    let name = config.kind.name();
    let exe = std::env::current_exe().context("locate the strata binary")?;
    let spec = serde_json::to_string(&ChildArgs {
        config: config.clone(),
        dir: dir.to_path_buf(),
        params: *params,
    })?;
    let mut child = Command::new(exe)
        .args(CHILD_SUBCOMMAND)
        .arg(spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("start the bulk child")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let mut progress = Progress::new(
        &format!("bulk {name} insert (child)"),
        params.puts() * params.value_len_bytes as u64,
    );
    let mut report: Option<ChildReport> = None;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let Some(rest) = line.strip_prefix(LINE_PREFIX) else {
            continue;
        };
        if let Some(n) = rest.strip_prefix("progress ") {
            progress.inc(n.trim().parse().unwrap_or(0));
        } else if let Some(json) = rest.strip_prefix("done ") {
            report = Some(serde_json::from_str(json)?);
            break;
        }
    }
    // SIGKILL: no flush, no close, whatever the engine had in memory is lost.
    child.kill().context("kill the bulk child")?;
    let status = child.wait()?;
    let Some(report) = report else {
        bail!("bulk child for {name} ended ({status}) without a report");
    };
    progress.finish(&format!("{:.1} s, killed", report.insert_s));

    let ingested = params.ingested_bytes();
    let (size_after_kill, _) = dir_size(dir)?;

    let io0 = proc_io(None)?;
    let start = Instant::now();
    let engine =
        engine::open(config, dir).with_context(|| format!("{name}: reopen after SIGKILL"))?;
    let recovery_s = start.elapsed().as_secs_f64();
    let io1 = proc_io(None)?;
    let recovered = engine.scan(&[0u8; KEY_LEN_BYTES], &[0xffu8; KEY_LEN_BYTES], usize::MAX)?;

    let io2 = proc_io(None)?;
    let start = Instant::now();
    engine.flush()?;
    let flush_s = start.elapsed().as_secs_f64();
    let io3 = proc_io(None)?;
    let stats_after_flush = engine.write_stats();
    let size_on_disk = engine.bytes_on_disk()?;

    let start = Instant::now();
    let compacted = engine.compact()?;
    let compaction_s = start.elapsed().as_secs_f64();
    let io4 = proc_io(None)?;
    // After close: some engines delete compacted-away files lazily.
    engine.close()?;
    let (size_after_compaction, _) = dir_size(dir)?;

    // io0..io3 as one span: engines flush recovered data in the background,
    // during the scan as well.
    let before_compaction_bytes = report.write_bytes + (io3.write_bytes - io0.write_bytes);
    let compaction_bytes = io4.write_bytes - io3.write_bytes;
    let mut row = Row::new(&params.case_label(), name, config.io_mode.name())
        .metric("insert_s", report.insert_s)
        .metric(
            "insert_mib_s",
            mib(params.puts() * params.value_len_bytes as u64) / report.insert_s,
        )
        .metric(
            "write_amp",
            before_compaction_bytes as f64 / ingested as f64,
        )
        .metric(
            "write_amp_after_compaction",
            (before_compaction_bytes + compaction_bytes) as f64 / ingested as f64,
        )
        .metric("peak_rss_mib", mib(report.peak_rss_bytes))
        .metric("recovery_s", recovery_s)
        .metric("recovered_fraction", recovered as f64 / report.puts as f64)
        .metric("flush_s", flush_s)
        .metric("size_on_disk_mib", mib(size_on_disk))
        .param("ingested_bytes", ingested)
        .param("value_len_bytes", params.value_len_bytes as u64)
        .param("puts", report.puts)
        .param("recovered_puts", recovered)
        .param("insert_write_bytes", report.write_bytes)
        .param("recovery_write_bytes", io1.write_bytes - io0.write_bytes)
        .param(
            "recovery_scan_flush_write_bytes",
            io3.write_bytes - io0.write_bytes,
        )
        .param("flush_write_bytes", io3.write_bytes - io2.write_bytes)
        .param("compaction_write_bytes", compaction_bytes)
        .param("size_after_kill_bytes", size_after_kill)
        .param("size_on_disk_bytes", size_on_disk)
        .param("size_after_compaction_bytes", size_after_compaction);
    if compacted {
        row = row
            .metric("compaction_s", compaction_s)
            .metric("size_after_compaction_mib", mib(size_after_compaction));
    }
    if let (Some(child_stats), Some(parent_stats)) = (report.engine_stats, stats_after_flush) {
        let total = child_stats.total_bytes() + parent_stats.total_bytes();
        row = row
            .metric("engine_write_amp", total as f64 / ingested as f64)
            .param("engine_insert_stats", serde_json::to_value(child_stats)?)
            .param(
                "engine_recovery_flush_stats",
                serde_json::to_value(parent_stats)?,
            );
    }
    Ok(row)
}
