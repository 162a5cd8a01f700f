//! The strata lab: measures strata against the device it runs on and
//! against the engines people would pick instead, side by side in one run
//! (see LAB.md and docs/lab.md).
//!
//! - [`engine`]: the `Engine` trait and its adapters (strata, RocksDB,
//!   fjall, redb, LMDB);
//! - [`device`]: the device line every bandwidth is compared with;
//! - [`io_exp`], [`ingest`], [`bulk`], [`fio_exp`], [`phases`]: the
//!   experiments ([`cgroup`]: the phases experiment's memory budget);
//! - [`results`]: the JSON written per experiment; [`report`] and [`plot`]:
//!   the HTML report made from it.
//!
//! [`run`] is what `strata lab run` calls. Experiments run one after the
//! other on a fresh directory that is removed at the end.

pub mod aims;
pub mod bulk;
pub mod cgroup;
pub mod device;
pub mod device_report;
pub(crate) mod direct_io;
pub mod engine;
pub mod fio_exp;
pub(crate) mod html;
pub mod ingest;
pub mod io_exp;
pub mod machine;
pub mod phases;
pub mod phases_plot;
pub mod plot;
pub mod progress;
pub mod randread;
pub mod report;
pub mod results;
pub mod summary;
pub mod sys;
pub mod workload;
pub mod xy_plot;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::engine::{EngineConfig, EngineKind};
use crate::machine::Machine;
use crate::results::{DeviceLine, ExperimentResult, MetricSpec, Row, SCHEMA_VERSION};

/// The experiments `strata lab run` knows, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Experiment {
    Device,
    Io,
    Ingest,
    Bulk,
    Fio,
    Phases,
}

impl Experiment {
    pub const ALL: [Experiment; 6] = [
        Experiment::Device,
        Experiment::Io,
        Experiment::Ingest,
        Experiment::Bulk,
        Experiment::Fio,
        Experiment::Phases,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Experiment::Device => "device",
            Experiment::Io => "io",
            Experiment::Ingest => "ingest",
            Experiment::Bulk => "bulk",
            Experiment::Fio => "fio",
            Experiment::Phases => "phases",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Experiment::Device => {
                "device — sequential bandwidth of the disk (the device line) and its random-read latency at QD1"
            }
            Experiment::Io => {
                "io — strata's io layer (BufferedWriter, 1 MiB buffer) in every mode and engine"
            }
            Experiment::Ingest => "ingest — the write path (Neon bench_ingest matrix)",
            Experiment::Bulk => "bulk — a large ingest end to end (Neon test_bulk_insert)",
            Experiment::Fio => {
                "fio — the job files through strata's fio ioengine and fio's psync and io_uring on a plain file"
            }
            Experiment::Phases => {
                "phases — latency as the data grows past a memory budget (nearcore's storage benchmark)"
            }
        }
    }

    pub fn parse(name: &str) -> Result<Experiment> {
        match Experiment::ALL.iter().find(|e| e.name() == name) {
            Some(e) => Ok(*e),
            None => {
                bail!("unknown experiment {name:?}; known: device, io, ingest, bulk, fio, phases")
            }
        }
    }

    /// Sort key of an experiment name (unknown names last).
    pub fn order_of(name: &str) -> usize {
        Experiment::ALL
            .iter()
            .position(|e| e.name() == name)
            .unwrap_or(usize::MAX)
    }
}

/// What `strata lab run` was asked for.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Empty: every experiment.
    pub experiments: Vec<Experiment>,
    pub quick: bool,
    /// Empty: every engine compiled into this binary.
    pub engines: Vec<EngineKind>,
    /// Where engines and probes write; a fresh subfolder is used and removed.
    pub data_dir: PathBuf,
    /// Where the JSON results and report.html go.
    pub out_dir: PathBuf,
    /// The phases experiment's parameters set on the command line.
    pub phases: phases::PhasesOptions,
}

/// Runs the experiments, writes their results and the report; returns the
/// report's path. An experiment that fails is reported and the others still
/// run; the run then ends with an error.
pub fn run(config: &RunConfig) -> Result<PathBuf> {
    let mut experiments = if config.experiments.is_empty() {
        Experiment::ALL.to_vec()
    } else {
        config.experiments.clone()
    };
    // The device line is measured in every run: the others compare with it.
    if !experiments.contains(&Experiment::Device) {
        experiments.push(Experiment::Device);
    }
    experiments.sort();
    experiments.dedup();

    let engines = if config.engines.is_empty() {
        EngineKind::ALL
            .iter()
            .copied()
            .filter(|k| k.is_compiled())
            .collect()
    } else {
        for kind in &config.engines {
            if !kind.is_compiled() {
                bail!(
                    "engine {} is not compiled into this binary: rebuild with `--features {}` (e.g. cargo run --release -p strata-cli --features {} -- lab run …)",
                    kind.name(),
                    kind.feature(),
                    kind.feature()
                );
            }
        }
        config.engines.clone()
    };

    // Every path from here on is absolute: child processes (fio, the bulk
    // child) run in other working directories.
    let data_root = absolute_dir(&config.data_dir, "data directory")?;
    let out_dir = absolute_dir(&config.out_dir, "results directory")?;
    let data_dir = data_root.join(format!("run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data_dir);
    std::fs::create_dir_all(&data_dir).with_context(|| format!("create {}", data_dir.display()))?;

    let machine = Machine::describe(&data_dir);
    let mut run_notes = Vec::new();
    if MEMORY_FILESYSTEMS.contains(&machine.filesystem.fs_type.as_str()) {
        let note = format!(
            "the data directory is on {} (memory): every figure measures memory, not a disk; use --dir on a real disk",
            machine.filesystem.fs_type
        );
        eprintln!("strata lab: warning: {note}");
        run_notes.push(note);
    }
    let ctx = RunContext {
        quick: config.quick,
        machine,
        git_commit: machine::git_commit(),
        data_dir: data_dir.clone(),
        out_dir,
        run_notes,
    };
    eprintln!(
        "strata lab: {} on {} ({}), engines: {}, {} mode",
        experiments
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
        ctx.machine.filesystem.device,
        ctx.machine.filesystem.fs_type,
        engines
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", "),
        if config.quick { "quick" } else { "full" }
    );

    let mut failures = Vec::new();
    let mut device_line: Option<DeviceLine> = None;
    for experiment in experiments {
        progress::heading(experiment.title());
        let t = started();
        let outcome = match experiment {
            Experiment::Device => run_device(&ctx).map(|(result, line)| {
                device_line = Some(line);
                result
            }),
            Experiment::Io => run_io(&ctx, device_line.as_ref()),
            Experiment::Ingest => run_ingest(&ctx, &engines, device_line.as_ref()),
            Experiment::Bulk => run_bulk(&ctx, &engines, device_line.as_ref()),
            Experiment::Fio => run_fio(&ctx, device_line.as_ref()),
            Experiment::Phases => run_phases(&ctx, &engines, &config.phases, device_line.as_ref()),
        };
        let outcome = outcome.or_else(|err| {
            // Said once here; the report says it again in the experiment's
            // section, and the run's final error only names the experiment.
            eprintln!("  {} failed: {err:#}", experiment.name());
            failures.push(experiment.name());
            if experiment == Experiment::Device {
                return Err(err);
            }
            Ok(ctx.failed_result(experiment, t, device_line.as_ref(), &err))
        });
        let saved = match outcome {
            Ok(result) => result.save(&ctx.out_dir),
            Err(err) => {
                // Nothing else can be put in proportion: stop here.
                let _ = std::fs::remove_dir_all(&data_dir);
                bail!("the device line could not be measured: {err:#}");
            }
        };
        match saved {
            Ok(path) => eprintln!("  results: {}", path.display()),
            Err(err) => bail!("{}: {err:#}", experiment.name()),
        }
    }
    let _ = std::fs::remove_dir_all(&data_dir);

    let report = report::write_report(&ctx.out_dir)?;
    print_report_path(&report)?;
    if !failures.is_empty() {
        bail!(
            "{} experiment(s) failed: {} (why: above, and in the report)",
            failures.len(),
            failures.join(", ")
        );
    }
    Ok(report)
}

/// Creates `dir` if needed and returns its absolute, canonical path.
fn absolute_dir(dir: &Path, what: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {what} {}", dir.display()))?;
    std::fs::canonicalize(dir).with_context(|| format!("resolve {what} {}", dir.display()))
}

/// Filesystem types that live in memory.
const MEMORY_FILESYSTEMS: [&str; 2] = ["tmpfs", "ramfs"];

struct RunContext {
    /// Notes for every experiment's results (e.g. a memory filesystem).
    run_notes: Vec<String>,
    quick: bool,
    machine: Machine,
    git_commit: Option<String>,
    data_dir: PathBuf,
    out_dir: PathBuf,
}

/// What an experiment measured, before the run's context is added.
struct Measured<'a> {
    metrics: Vec<MetricSpec>,
    /// The first is the primary metric.
    plot_metrics: &'a [&'a str],
    options: BTreeMap<String, serde_json::Value>,
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl RunContext {
    fn result(
        &self,
        experiment: Experiment,
        started: (String, Instant),
        device_line: Option<&DeviceLine>,
        measured: Measured<'_>,
    ) -> ExperimentResult {
        let Measured {
            metrics,
            plot_metrics,
            options,
            rows,
            mut notes,
        } = measured;
        notes.splice(0..0, self.run_notes.iter().cloned());
        ExperimentResult {
            schema_version: SCHEMA_VERSION,
            experiment: experiment.name().to_string(),
            title: experiment.title().to_string(),
            started_at_utc: started.0,
            duration_s: started.1.elapsed().as_secs_f64(),
            quick: self.quick,
            git_commit: self.git_commit.clone(),
            machine: self.machine.clone(),
            options,
            device_line: device_line.cloned(),
            primary_metric: plot_metrics[0].to_string(),
            metrics,
            plot_metrics: plot_metrics.iter().map(|s| s.to_string()).collect(),
            rows,
            notes,
        }
    }
}

impl RunContext {
    /// The result of an experiment that could not run: no rows, and why.
    fn failed_result(
        &self,
        experiment: Experiment,
        started: (String, Instant),
        device_line: Option<&DeviceLine>,
        err: &anyhow::Error,
    ) -> ExperimentResult {
        let measured = Measured {
            metrics: Vec::new(),
            plot_metrics: &[""],
            options: options(&[("failed", format!("{err:#}").into())]),
            rows: Vec::new(),
            notes: vec![format!("failed: {err:#}")],
        };
        self.result(experiment, started, device_line, measured)
    }
}

fn started() -> (String, Instant) {
    (machine::utc_now(), Instant::now())
}

fn options(pairs: &[(&str, serde_json::Value)]) -> BTreeMap<String, serde_json::Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn engine_options(engines: &[EngineKind]) -> serde_json::Value {
    engines
        .iter()
        .map(|k| (k.name().to_string(), engine::describe_options(*k)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn run_device(ctx: &RunContext) -> Result<(ExperimentResult, DeviceLine)> {
    let t = started();
    let params = device::DeviceParams::new(ctx.quick);
    let outcome = device::run(&ctx.data_dir, params)?;
    eprintln!(
        "  device line: write {:.0} MiB/s, read {:.0} MiB/s{}",
        outcome.line.write_mib_s,
        outcome.line.read_mib_s,
        match (outcome.line.fio_write_mib_s, outcome.line.fio_read_mib_s) {
            (Some(w), Some(r)) => format!(" (fio: {w:.0} / {r:.0})"),
            _ => String::new(),
        }
    );
    let mut opts = options(&[
        ("file_bytes", params.file_bytes.into()),
        ("block_bytes", (device::BLOCK_BYTES as u64).into()),
        ("repeats", params.repeats.into()),
        ("method", "O_DIRECT pwrite/pread appending to a new file, fdatasync at end of write; fio: same job, --fallocate=none".into()),
    ]);
    opts.extend(device::randread_options(&params, outcome.randread_s));
    let measured = Measured {
        metrics: device::metrics(),
        plot_metrics: &["mib_s"],
        options: opts,
        rows: outcome.rows,
        notes: outcome.notes,
    };
    let result = ctx.result(Experiment::Device, t, Some(&outcome.line), measured);
    Ok((result, outcome.line))
}

fn run_io(ctx: &RunContext, device_line: Option<&DeviceLine>) -> Result<ExperimentResult> {
    let t = started();
    let params = io_exp::IoParams::new(ctx.quick);
    let mut notes = Vec::new();
    let device = device_line.map(|l| (l.write_mib_s, l.read_mib_s));
    let rows = io_exp::run(&params, &ctx.data_dir, device, &mut notes)?;
    if rows.is_empty() {
        bail!("no io configuration ran: {}", notes.join("; "));
    }
    if let Some(note) = io_exp::aim_note(&rows) {
        eprintln!("  {note}");
        notes.push(note);
    }
    let opts = options(&[
        ("file_bytes", params.file_bytes.into()),
        (
            "write_sizes_bytes",
            serde_json::json!(params.write_sizes_bytes),
        ),
        (
            "writer_capacity_bytes",
            (io_exp::WRITER_CAPACITY_BYTES as u64).into(),
        ),
        ("read_block_bytes", (io_exp::READ_BLOCK_BYTES as u64).into()),
    ]);
    let measured = Measured {
        metrics: io_exp::metrics(),
        plot_metrics: &["write_mib_s", "read_mib_s"],
        options: opts,
        rows,
        notes,
    };
    Ok(ctx.result(Experiment::Io, t, device_line, measured))
}

fn run_ingest(
    ctx: &RunContext,
    engines: &[EngineKind],
    device_line: Option<&DeviceLine>,
) -> Result<ExperimentResult> {
    let t = started();
    let params = ingest::IngestParams::new(ctx.quick);
    let configs: Vec<EngineConfig> = engines
        .iter()
        .flat_map(|kind| {
            kind.io_modes()
                .iter()
                .map(|mode| EngineConfig::new(*kind, *mode))
        })
        .collect();
    let mut notes = Vec::new();
    let rows = ingest::run(
        &configs,
        params,
        &ctx.data_dir,
        device_line.map(|l| l.write_mib_s),
        &mut notes,
    )?;
    if rows.is_empty() {
        bail!("no engine completed ingest: {}", notes.join("; "));
    }
    for note in ingest::aim_notes(&rows) {
        eprintln!("  {note}");
        notes.push(note);
    }
    let opts = options(&[
        ("volume_bytes", params.volume_bytes.into()),
        ("repeats", params.repeats.into()),
        ("sample_work_s_min", params.sample_work_s_min.into()),
        ("batch_puts", (workload::BATCH_PUTS as u64).into()),
        ("key_len_bytes", (workload::KEY_LEN_BYTES as u64).into()),
        ("reader_window_keys", ingest::READER_WINDOW_KEYS.into()),
        ("engine_options", engine_options(engines)),
    ]);
    let measured = Measured {
        metrics: ingest::metrics(),
        plot_metrics: &["mib_s", "puts_s"],
        options: opts,
        rows,
        notes,
    };
    Ok(ctx.result(Experiment::Ingest, t, device_line, measured))
}

fn run_bulk(
    ctx: &RunContext,
    engines: &[EngineKind],
    device_line: Option<&DeviceLine>,
) -> Result<ExperimentResult> {
    let t = started();
    let params = bulk::BulkParams::new(ctx.quick);
    let mut notes = Vec::new();
    let taken = results::interleave(params.repeats, engines.len(), |rep, i| {
        let kind = engines[i];
        let config = EngineConfig::new(kind, kind.default_io_mode());
        let row = bulk::run_engine(&config, &params, &ctx.data_dir)
            .inspect_err(|err| eprintln!("  bulk {} failed: {err:#}", kind.name()))?;
        let m = |k: &str| row.metrics.get(k).copied().unwrap_or(f64::NAN);
        eprintln!(
            "  bulk {:<8} {rep}/{}: insert {:.1} s, WA {:.2}, recovery {:.2} s, recovered {:.3}, RSS {:.0} MiB",
            kind.name(),
            params.repeats,
            m("insert_s"),
            m("write_amp"),
            m("recovery_s"),
            m("recovered_fraction"),
            m("peak_rss_mib"),
        );
        if let (Some(puts), Some(recovered)) =
            (row.params.get("puts"), row.params.get("recovered_puts"))
        {
            if puts != recovered {
                notes.push(format!(
                    "{} (sample {rep}) recovered {recovered} of {puts} puts after SIGKILL (no sync, no flush): what it had not handed to the OS was lost",
                    row.engine
                ));
            }
        }
        Ok(row)
    });
    for (kind, err) in engines.iter().zip(&taken.errors) {
        if let Some(err) = err {
            notes.push(format!("bulk {} failed: {err:#}", kind.name()));
        }
    }
    let samples = taken.samples;
    let rows: Vec<Row> = samples
        .iter()
        .filter_map(|s| Row::from_samples(s))
        .collect();
    if rows.is_empty() {
        bail!("no engine completed bulk: {}", notes.join("; "));
    }
    for claim in bulk::aims(&rows) {
        let note = claim.note();
        eprintln!("  {note}");
        notes.push(note);
    }
    let opts = options(&[
        ("volume_bytes", params.volume_bytes.into()),
        ("repeats", params.repeats.into()),
        ("value_len_bytes", (params.value_len_bytes as u64).into()),
        ("key_layout", params.layout.label().into()),
        ("ingested_bytes", params.ingested_bytes().into()),
        ("engine_options", engine_options(engines)),
    ]);
    let measured = Measured {
        metrics: bulk::metrics(),
        plot_metrics: &["insert_mib_s", "write_amp", "recovery_s", "peak_rss_mib"],
        options: opts,
        rows,
        notes,
    };
    Ok(ctx.result(Experiment::Bulk, t, device_line, measured))
}

fn run_fio(ctx: &RunContext, device_line: Option<&DeviceLine>) -> Result<ExperimentResult> {
    let t = started();
    let params = fio_exp::FioParams::new(ctx.quick);
    let outcome = fio_exp::run(&params, &ctx.data_dir.join("fio"), &ctx.out_dir.join("fio"))?;
    let mut opts = params.options();
    opts.extend(outcome.options);
    if let Some(why) = &outcome.skipped {
        eprintln!("  skipped: {why}");
        opts.insert("skipped".to_string(), why.clone().into());
    }
    let measured = Measured {
        metrics: fio_exp::metrics(),
        plot_metrics: &["iops", "mib_s", "x_io_uring"],
        options: opts,
        rows: outcome.rows,
        notes: outcome.notes,
    };
    Ok(ctx.result(Experiment::Fio, t, device_line, measured))
}

fn run_phases(
    ctx: &RunContext,
    engines: &[EngineKind],
    phases_options: &phases::PhasesOptions,
    device_line: Option<&DeviceLine>,
) -> Result<ExperimentResult> {
    let t = started();
    let params = phases::PhasesParams::with_options(ctx.quick, phases_options)?;
    let outcome = phases::run(engines, &params, &ctx.data_dir, device_line)?;
    let mut opts = options(&params.options());
    opts.extend(outcome.options);
    opts.insert("engine_options".to_string(), engine_options(engines));
    let measured = Measured {
        metrics: phases::metrics(),
        plot_metrics: &["latency_p50_us"],
        options: opts,
        rows: outcome.rows,
        notes: outcome.notes,
    };
    Ok(ctx.result(Experiment::Phases, t, device_line, measured))
}

/// Entry of the hidden `strata lab phases-child` subcommand.
pub fn phases_child_main(spec: &str) -> Result<()> {
    phases::child_main(spec)
}

/// Entry of the hidden `strata lab bulk-child` subcommand.
pub fn bulk_child_main(spec: &str) -> Result<()> {
    bulk::child_main(spec)
}

/// `strata lab report DIR`.
pub fn report_main(dir: &Path) -> Result<PathBuf> {
    let path = report::write_report(dir)?;
    print_report_path(&path)?;
    Ok(path)
}

/// Prints `report: <path>` on stdout; a closed pipe is an error, not
/// `println!`'s panic.
fn print_report_path(path: &Path) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "report: {}", path.display())
        .and_then(|()| out.flush())
        .context("print the report's path")
}
