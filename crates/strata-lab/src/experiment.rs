//! The [`Experiment`] trait — what every experiment of the lab knows: its
//! name and title, its parameters, its metrics, how to run, its aims as
//! data and its section of the report — and the [`RunContext`] a run hands
//! to each. The experiments themselves are in [`crate::experiments`]; the
//! run loop in [`crate::run`].
//!
//! Invariants: an experiment's results are made here only
//! ([`RunContext::result`], [`RunContext::failed_result`]), so every
//! results file carries the run's machine, commit, mode, notes and aims
//! (as data, [`ExperimentResult::aims`]) the same way; the primary metric is the first plot metric. This module knows no
//! experiment.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;

use crate::aims::Claim;
use crate::engine::{self, EngineKind};
use crate::machine::{self, Machine};
use crate::phases::PhasesOptions;
use crate::results::{DeviceLine, ExperimentResult, MetricSpec, Row, SCHEMA_VERSION};

/// An experiment's options in its results (`options` in the JSON).
pub type Options = BTreeMap<String, serde_json::Value>;

/// One experiment of the lab. Implementations are stateless values listed
/// in [`crate::experiments::ALL`], in the order a run takes them.
pub trait Experiment: Sync {
    /// Its name: on the command line, in its results file
    /// (`<name>.json`) and the report's anchors.
    fn name(&self) -> &'static str;

    /// The heading of its progress and its report section.
    fn title(&self) -> &'static str;

    /// Whether it measures the device line the others compare with: it
    /// runs in every run, first, and the run stops if it fails.
    fn measures_device_line(&self) -> bool {
        false
    }

    /// Its parameters at the run's size, as its results record them.
    fn parameters(&self, ctx: &RunContext) -> Result<Options>;

    /// The figures its rows carry, in display order.
    fn metrics(&self) -> Vec<MetricSpec>;

    /// Keys of the metrics the report plots; the first is the primary one.
    fn plot_metrics(&self) -> &'static [&'static str];

    /// Runs it. `device_line` is the line measured earlier in the run
    /// (`None` for the experiment that measures it).
    fn run(&self, ctx: &RunContext, device_line: Option<&DeviceLine>) -> Result<Measured>;

    /// Its aims, checked on its rows (none by default). [`Self::run`]
    /// returns them in [`Measured::aims`] and says each as a note
    /// ([`say_aims`]); the results keep them as data
    /// ([`ExperimentResult::aims`]).
    fn aims(&self, _rows: &[Row]) -> Vec<Claim> {
        Vec::new()
    }

    /// Its section of the report.
    fn render_section(&self, h: &mut String, r: &ExperimentResult) -> Result<()> {
        crate::section::standard(h, r)
    }

    /// What it adds to the report's summary, below the summary table
    /// (nothing by default).
    fn render_summary(&self, _h: &mut String, _r: &ExperimentResult) -> Result<()> {
        Ok(())
    }
}

impl fmt::Debug for dyn Experiment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an experiment measured, before the run's context is added.
pub struct Measured {
    pub options: Options,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    /// Its aims checked on `rows` ([`Experiment::aims`]), each also among
    /// `notes` ([`Claim::note`]); empty when it has none or did not check
    /// them (a skipped run).
    pub aims: Vec<Claim>,
    /// The device line this experiment measured; set by the one that
    /// [`Experiment::measures_device_line`] only.
    pub device_line: Option<DeviceLine>,
}

/// What every experiment of one run shares.
pub struct RunContext {
    pub quick: bool,
    /// The engines asked for, each compiled in.
    pub engines: Vec<EngineKind>,
    /// The phases experiment's parameters set on the command line.
    pub phases: PhasesOptions,
    pub machine: Machine,
    pub git_commit: Option<String>,
    /// A fresh folder for the experiments' data, removed after the run.
    pub data_dir: PathBuf,
    /// Where the results go.
    pub out_dir: PathBuf,
    /// Notes for every experiment's results (e.g. a memory filesystem).
    pub run_notes: Vec<String>,
}

/// When an experiment started: wall clock (UTC) and a timer.
pub struct Started {
    pub at_utc: String,
    pub timer: Instant,
}

impl Started {
    pub fn now() -> Started {
        Started {
            at_utc: machine::utc_now(),
            timer: Instant::now(),
        }
    }
}

impl RunContext {
    /// The results of `experiment`, which started at `started` and
    /// measured `measured`; `device_line` is the run's line.
    pub fn result(
        &self,
        experiment: &dyn Experiment,
        started: &Started,
        device_line: Option<&DeviceLine>,
        measured: Measured,
    ) -> ExperimentResult {
        let plot_metrics = experiment.plot_metrics();
        assert!(
            !plot_metrics.is_empty(),
            "{} plots no metric",
            experiment.name()
        );
        self.assemble(
            experiment,
            started,
            device_line,
            experiment.metrics(),
            plot_metrics,
            measured,
        )
    }

    /// The result of an experiment that could not run: no rows, and why.
    pub fn failed_result(
        &self,
        experiment: &dyn Experiment,
        started: &Started,
        device_line: Option<&DeviceLine>,
        err: &anyhow::Error,
    ) -> ExperimentResult {
        let measured = Measured {
            options: options(&[("failed", format!("{err:#}").into())]),
            rows: Vec::new(),
            notes: vec![format!("failed: {err:#}")],
            aims: Vec::new(),
            device_line: None,
        };
        self.assemble(
            experiment,
            started,
            device_line,
            Vec::new(),
            &[""],
            measured,
        )
    }

    fn assemble(
        &self,
        experiment: &dyn Experiment,
        started: &Started,
        device_line: Option<&DeviceLine>,
        metrics: Vec<MetricSpec>,
        plot_metrics: &[&str],
        measured: Measured,
    ) -> ExperimentResult {
        let Measured {
            options,
            rows,
            mut notes,
            aims,
            device_line: _,
        } = measured;
        debug_assert!(
            aims.iter().all(|claim| notes.contains(&claim.note())),
            "{}: an aim without its note",
            experiment.name()
        );
        notes.splice(0..0, self.run_notes.iter().cloned());
        ExperimentResult {
            schema_version: SCHEMA_VERSION,
            experiment: experiment.name().to_string(),
            title: experiment.title().to_string(),
            started_at_utc: started.at_utc.clone(),
            duration_s: started.timer.elapsed().as_secs_f64(),
            quick: self.quick,
            git_commit: self.git_commit.clone(),
            machine: self.machine.clone(),
            options,
            device_line: device_line.cloned(),
            primary_metric: plot_metrics[0].to_string(),
            metrics,
            plot_metrics: plot_metrics.iter().map(|s| s.to_string()).collect(),
            rows,
            aims: Some(crate::aims::records(&aims)),
            notes,
        }
    }

    /// Each engine of the run with its options (`engine_options`).
    pub fn engine_options(&self) -> serde_json::Value {
        self.engines
            .iter()
            .map(|k| (k.name().to_string(), engine::describe_options(*k)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// Options from key–value pairs.
pub fn options(pairs: &[(&str, serde_json::Value)]) -> Options {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The aims of an experiment that may be skipped (fio without fio, remote
/// without its server): when `skipped` says why, the reason is printed and
/// recorded in `opts` (`skipped`) and there are no aims; else `check`'s.
pub fn aims_unless_skipped(
    skipped: Option<&String>,
    opts: &mut Options,
    check: impl FnOnce() -> Vec<Claim>,
) -> Vec<Claim> {
    match skipped {
        Some(why) => {
            eprintln!("  skipped: {why}");
            opts.insert("skipped".to_string(), why.clone().into());
            Vec::new()
        }
        None => check(),
    }
}

/// Prints each aim's note and appends it to `notes`.
pub fn say_aims(claims: &[Claim], notes: &mut Vec<String>) {
    for claim in claims {
        let note = claim.note();
        eprintln!("  {note}");
        notes.push(note);
    }
}
