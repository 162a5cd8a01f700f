//! `strata lab …`: argument parsing for the lab; the work is in strata-lab.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use strata_lab::engine::EngineKind;
use strata_lab::RunConfig;

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Subcommand)]
enum LabCommand {
    /// Run experiments (default: all of device, io, ingest, bulk, fio, phases, remote), write one
    /// JSON per experiment and report.html into the results directory.
    Run {
        /// Experiments to run: device, io, ingest, bulk, fio, phases, remote (device always
        /// runs: it is the line the others are compared with; fio is skipped,
        /// not failed, where fio is not installed).
        experiments: Vec<String>,
        /// Small sizes: the whole set in a few minutes on 2 cores.
        #[arg(long)]
        quick: bool,
        /// Comma-separated engines: strata,rocksdb,fjall,redb,lmdb (default:
        /// every engine compiled in; rocksdb needs `--features rocksdb`).
        #[arg(long, value_delimiter = ',')]
        engines: Vec<String>,
        /// Directory the engines write to (a fresh subfolder is used and
        /// removed), on the disk to measure (not tmpfs: that measures memory).
        #[arg(long, default_value = "lab-data")]
        dir: PathBuf,
        /// Results directory (default: lab-results/<UTC time>).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        phases: PhasesArgs,
    },
    /// Write report.html from a results directory.
    Report {
        /// A directory of results JSON written by `strata lab run`.
        results_dir: PathBuf,
    },
    /// Internal: the child process of the bulk experiment.
    #[command(hide = true)]
    BulkChild { spec: String },
    /// Internal: the child process of the phases experiment.
    #[command(hide = true)]
    PhasesChild { spec: String },
}

/// The phases experiment's parameters (default: its quick or full size).
#[derive(Args)]
struct PhasesArgs {
    /// phases: operations per phase (quick 10000, full 200000).
    #[arg(long)]
    phases_ops: Option<u64>,
    /// phases: value size in bytes (256).
    #[arg(long)]
    phases_value_bytes: Option<usize>,
    /// phases: iterations (quick 4, full 8); each loads the data target ÷ iterations before its phases.
    #[arg(long)]
    phases_iterations: Option<u32>,
    /// phases: memory budget of each engine's process, page cache included,
    /// MiB (quick 128, full 1024).
    #[arg(long)]
    phases_memory_mib: Option<u64>,
    /// phases: data (keys + values) at which the run ends, MiB (4× the
    /// memory budget; a full disk ends it too).
    #[arg(long)]
    phases_data_mib: Option<u64>,
    /// phases: load inside the memory budget too (the default in full
    /// mode; quick mode lifts the limit for the load).
    #[arg(long)]
    phases_load_in_budget: bool,
}

impl PhasesArgs {
    fn options(&self) -> strata_lab::phases::PhasesOptions {
        strata_lab::phases::PhasesOptions {
            ops: self.phases_ops,
            value_len_bytes: self.phases_value_bytes,
            iterations: self.phases_iterations,
            memory_budget_bytes: self.phases_memory_mib.map(|m| m << 20),
            data_target_bytes: self.phases_data_mib.map(|m| m << 20),
            load_in_budget: self.phases_load_in_budget.then_some(true),
        }
    }
}

pub fn main(args: LabArgs) -> Result<()> {
    match args.command {
        LabCommand::Run {
            experiments,
            quick,
            engines,
            dir,
            out,
            phases,
        } => {
            let experiments = experiments
                .iter()
                .map(|e| strata_lab::experiments::parse(e))
                .collect::<Result<Vec<_>>>()?;
            let engines = engines
                .iter()
                .filter(|e| !e.trim().is_empty())
                .map(|e| EngineKind::parse(e))
                .collect::<Result<Vec<_>>>()?;
            let out_dir = out.unwrap_or_else(|| {
                let stamp = strata_lab::machine::utc_now().replace(':', "");
                PathBuf::from("lab-results").join(stamp)
            });
            strata_lab::run(&RunConfig {
                experiments,
                quick,
                engines,
                data_dir: dir,
                out_dir,
                phases: phases.options(),
            })?;
            Ok(())
        }
        LabCommand::Report { results_dir } => {
            strata_lab::report_main(&results_dir)?;
            Ok(())
        }
        LabCommand::BulkChild { spec } => strata_lab::bulk_child_main(&spec),
        LabCommand::PhasesChild { spec } => strata_lab::phases_child_main(&spec),
    }
}
