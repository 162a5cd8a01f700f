//! The phases experiment (LAB.md §3) as the lab runs it: each engine in
//! its own child and memory budget through [`crate::phases`], and its
//! report section (latency against the iteration from
//! [`crate::phases_plot`], and the read-phase headline, which the summary
//! shows too).
//!
//! Invariants: one run per engine (no repeats: the iterations are the
//! series); an engine that fails is a note, none finishing a phase an
//! error.

use anyhow::Result;

use crate::aims::Claim;
use crate::experiment::{options, say_aims, Experiment, Measured, Options, RunContext};
use crate::phases::{self, PhasesParams};
use crate::phases_plot;
use crate::results::{DeviceLine, ExperimentResult, MetricSpec, Row};
use crate::section;

/// The phases experiment.
pub struct Phases;

impl Experiment for Phases {
    fn name(&self) -> &'static str {
        "phases"
    }

    fn title(&self) -> &'static str {
        "phases — latency as the data grows past a memory budget (nearcore's storage benchmark)"
    }

    fn parameters(&self, ctx: &RunContext) -> Result<Options> {
        let params = PhasesParams::with_options(ctx.quick, &ctx.phases)?;
        let mut opts = options(&params.options());
        opts.insert("engine_options".to_string(), ctx.engine_options());
        Ok(opts)
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        phases::metrics()
    }

    fn plot_metrics(&self) -> &'static [&'static str] {
        &["latency_p50_us"]
    }

    fn run(&self, ctx: &RunContext, device_line: Option<&DeviceLine>) -> Result<Measured> {
        let params = PhasesParams::with_options(ctx.quick, &ctx.phases)?;
        let outcome = phases::run(&ctx.engines, &params, &ctx.data_dir, device_line)?;
        let mut opts = options(&params.options());
        opts.extend(outcome.options);
        opts.insert("engine_options".to_string(), ctx.engine_options());
        let aims = self.aims(&outcome.rows);
        let mut notes = outcome.notes;
        say_aims(&aims, &mut notes);
        Ok(Measured {
            options: opts,
            rows: outcome.rows,
            notes,
            aims,
            device_line: None,
        })
    }

    fn aims(&self, rows: &[Row]) -> Vec<Claim> {
        phases::aims(rows)
    }

    fn render_section(&self, h: &mut String, r: &ExperimentResult) -> Result<()> {
        section::open(h, r)?;
        phases_plot::write_plots(h, r)?;
        phases_plot::write_headline_table(h, r)?;
        section::durability_table(h, r)?;
        section::summary_table(h, r)?;
        section::close(h, r)
    }

    fn render_summary(&self, h: &mut String, r: &ExperimentResult) -> Result<()> {
        use std::fmt::Write as _;
        writeln!(
            h,
            "<p class=\"muted\">phases: each engine's read phase at its last iteration against the device's 4 KiB random read, and its growth since the first iteration.</p>"
        )?;
        phases_plot::write_headline_table(h, r)?;
        Ok(())
    }
}
