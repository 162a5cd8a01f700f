//! The strata lab: measures strata against the device it runs on and
//! against the engines people would pick instead, side by side in one run
//! (see LAB.md and docs/lab.md).
//!
//! - [`experiment`]: the [`Experiment`] trait (name, parameters, metrics,
//!   run, aims, report section) and the run's context; [`experiments`]: the
//!   registry of the seven, one submodule each;
//! - [`engine`]: the `Engine` trait and its adapters (strata, RocksDB,
//!   fjall, redb, LMDB);
//! - [`device`]: the device line every bandwidth is compared with;
//! - [`io_exp`], [`ingest`], [`bulk`], [`fio_exp`], [`phases`],
//!   [`remote_exp`]: what the experiments measure ([`cgroup`]: the phases experiment's memory
//!   budget); [`aims`]: the aims they check, as data; [`get_reads`]:
//!   strata's cache hit ratio on read rows, and when a read figure is made
//!   of cache hits;
//! - [`results`]: the JSON written per experiment, and the one loop that
//!   interleaves repeated samples; [`report`], [`section`] and [`plot`]:
//!   the HTML report made from it.
//!
//! [`run`] is what `strata lab run` calls: the experiments asked for, in
//! the registry's order, one after the other on a fresh directory that is
//! removed at the end.

pub mod aims;
pub mod bulk;
pub mod cgroup;
pub mod device;
pub mod device_report;
pub(crate) mod direct_io;
pub mod engine;
pub mod experiment;
pub mod experiments;
pub mod fio_exp;
pub mod get_reads;
pub(crate) mod html;
pub mod ingest;
pub mod io_exp;
pub mod machine;
pub mod phases;
pub mod phases_plot;
pub mod plot;
pub mod progress;
pub mod randread;
pub mod remote_exp;
pub mod report;
pub mod results;
pub mod section;
pub mod summary;
pub mod sys;
pub mod workload;
pub mod xy_plot;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::engine::EngineKind;
pub use crate::experiment::Experiment;
use crate::experiment::{RunContext, Started};
use crate::machine::Machine;
use crate::results::DeviceLine;

/// What `strata lab run` was asked for.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Empty: every experiment.
    pub experiments: Vec<&'static dyn Experiment>,
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
    // In the registry's order; the device line is measured in every run:
    // the others compare with it.
    let chosen: Vec<&'static dyn Experiment> = experiments::ALL
        .iter()
        .copied()
        .filter(|e| {
            config.experiments.is_empty()
                || e.measures_device_line()
                || config.experiments.iter().any(|c| c.name() == e.name())
        })
        .collect();
    let engines = chosen_engines(config)?;
    let ctx = run_context(config, engines)?;
    eprintln!(
        "strata lab: {} on {} ({}), engines: {}, {} mode",
        chosen
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
        ctx.machine.filesystem.device,
        ctx.machine.filesystem.fs_type,
        ctx.engines
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", "),
        if config.quick { "quick" } else { "full" }
    );

    let mut failures = Vec::new();
    let mut device_line: Option<DeviceLine> = None;
    for experiment in chosen {
        progress::heading(experiment.title());
        let started = Started::now();
        let result = match experiment.run(&ctx, device_line.as_ref()) {
            Ok(mut measured) => {
                if let Some(line) = measured.device_line.take() {
                    device_line = Some(line);
                }
                ctx.result(experiment, &started, device_line.as_ref(), measured)
            }
            Err(err) => {
                // Said once here; the report says it again in the
                // experiment's section, and the run's final error only
                // names the experiment.
                eprintln!("  {} failed: {err:#}", experiment.name());
                if experiment.measures_device_line() {
                    // Nothing else can be put in proportion: stop here.
                    let _ = std::fs::remove_dir_all(&ctx.data_dir);
                    bail!("the device line could not be measured: {err:#}");
                }
                failures.push(experiment.name());
                ctx.failed_result(experiment, &started, device_line.as_ref(), &err)
            }
        };
        match result.save(&ctx.out_dir) {
            Ok(path) => eprintln!("  results: {}", path.display()),
            Err(err) => bail!("{}: {err:#}", experiment.name()),
        }
    }
    let _ = std::fs::remove_dir_all(&ctx.data_dir);

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

/// The engines asked for (default: every one compiled in); an error for
/// one that is not compiled in.
fn chosen_engines(config: &RunConfig) -> Result<Vec<EngineKind>> {
    if config.engines.is_empty() {
        return Ok(EngineKind::ALL
            .iter()
            .copied()
            .filter(|k| k.is_compiled())
            .collect());
    }
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
    Ok(config.engines.clone())
}

/// The run's context: a fresh data folder (absolute, as child processes
/// run elsewhere), the machine, the commit, and a note if the data is in
/// memory.
fn run_context(config: &RunConfig, engines: Vec<EngineKind>) -> Result<RunContext> {
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
    Ok(RunContext {
        quick: config.quick,
        engines,
        phases: config.phases.clone(),
        machine,
        git_commit: machine::git_commit(),
        data_dir,
        out_dir,
        run_notes,
    })
}

/// Creates `dir` if needed and returns its absolute, canonical path.
fn absolute_dir(dir: &Path, what: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {what} {}", dir.display()))?;
    std::fs::canonicalize(dir).with_context(|| format!("resolve {what} {}", dir.display()))
}

/// Filesystem types that live in memory.
const MEMORY_FILESYSTEMS: [&str; 2] = ["tmpfs", "ramfs"];

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
