//! The fio experiment (LAB.md §5) as the lab runs it: the job files through
//! strata's fio ioengine and fio's own engines via [`crate::fio_exp`], with
//! issue 5's aims, and its report section (bar charts, then fio's table of
//! jobs × engines in place of the summary table).
//!
//! Invariants: without fio or its engine the experiment is skipped (a
//! result with no rows and the reason in `skipped`), not failed.

use anyhow::Result;

use crate::aims::{self, Claim};
use crate::experiment::{aims_unless_skipped, Experiment, Measured, Options, RunContext};
use crate::fio_exp::{self, FioParams};
use crate::results::{DeviceLine, ExperimentResult, MetricSpec, Row};
use crate::section;

/// The fio experiment.
pub struct Fio;

impl Experiment for Fio {
    fn name(&self) -> &'static str {
        "fio"
    }

    fn title(&self) -> &'static str {
        "fio — the job files through strata's fio ioengine and fio's psync and io_uring on a plain file"
    }

    fn parameters(&self, ctx: &RunContext) -> Result<Options> {
        Ok(FioParams::new(ctx.quick).options())
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        fio_exp::metrics()
    }

    fn plot_metrics(&self) -> &'static [&'static str] {
        &["iops", "mib_s", "x_io_uring"]
    }

    /// The aims' notes are not printed; they come before the closing note
    /// on what a write's acknowledgement means.
    fn run(&self, ctx: &RunContext, _device_line: Option<&DeviceLine>) -> Result<Measured> {
        let params = FioParams::new(ctx.quick);
        let outcome = fio_exp::run(&params, &ctx.data_dir.join("fio"), &ctx.out_dir.join("fio"))?;
        let mut opts = self.parameters(ctx)?;
        opts.extend(outcome.options);
        let mut notes = outcome.notes;
        let claims = aims_unless_skipped(outcome.skipped.as_ref(), &mut opts, || {
            self.aims(&outcome.rows)
        });
        if outcome.skipped.is_none() {
            notes.extend(aims::notes(&claims));
            notes.push(fio_exp::WRITE_CONTRACT_NOTE.to_string());
        }
        Ok(Measured {
            options: opts,
            rows: outcome.rows,
            notes,
            aims: claims,
            device_line: None,
        })
    }

    fn aims(&self, rows: &[Row]) -> Vec<Claim> {
        fio_exp::aims(rows)
    }

    fn render_section(&self, h: &mut String, r: &ExperimentResult) -> Result<()> {
        section::open(h, r)?;
        section::bar_plots(h, r)?;
        section::durability_table(h, r)?;
        fio_exp::write_table(h, r)?;
        section::close(h, r)
    }
}
