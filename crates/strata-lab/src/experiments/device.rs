//! The device experiment (LAB.md §4) as the lab runs it: the sequential
//! device line and the random-read latency sweep of [`crate::device`], and
//! its report section (the bandwidth chart, a headline table without the
//! sweep, then the sweep's own tables and plots from
//! [`crate::device_report`]).
//!
//! Invariants: it is the experiment that measures the device line; its
//! results carry that line as their own `device_line`.

use anyhow::Result;

use crate::device::{self, DeviceParams};
use crate::device_report;
use crate::experiment::{options, Experiment, Measured, Options, RunContext};
use crate::results::{DeviceLine, ExperimentResult, MetricSpec};
use crate::section;

/// The device experiment.
pub struct Device;

/// How the sequential probe reads and writes.
const METHOD: &str = "O_DIRECT pwrite/pread appending to a new file, fdatasync at end of write; fio: same job, --fallocate=none";

impl Experiment for Device {
    fn name(&self) -> &'static str {
        device::EXPERIMENT_NAME
    }

    fn title(&self) -> &'static str {
        "device — sequential bandwidth of the disk (the device line) and its random-read latency at QD1"
    }

    fn measures_device_line(&self) -> bool {
        true
    }

    fn parameters(&self, ctx: &RunContext) -> Result<Options> {
        let params = DeviceParams::new(ctx.quick);
        Ok(options(&[
            ("file_bytes", params.file_bytes.into()),
            ("block_bytes", (device::BLOCK_BYTES as u64).into()),
            ("repeats", params.repeats.into()),
            ("method", METHOD.into()),
        ]))
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        device::metrics()
    }

    fn plot_metrics(&self) -> &'static [&'static str] {
        &["mib_s"]
    }

    fn run(&self, ctx: &RunContext, _device_line: Option<&DeviceLine>) -> Result<Measured> {
        let params = DeviceParams::new(ctx.quick);
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
        let mut opts = self.parameters(ctx)?;
        opts.extend(device::randread_options(&params, outcome.randread_s));
        Ok(Measured {
            options: opts,
            rows: outcome.rows,
            notes: outcome.notes,
            aims: Vec::new(),
            device_line: Some(outcome.line),
        })
    }

    fn render_section(&self, h: &mut String, r: &ExperimentResult) -> Result<()> {
        section::open(h, r)?;
        section::bar_plots(h, r)?;
        section::durability_table(h, r)?;
        // The summary table without the latency of every block size, which
        // has its own table.
        let headline = ExperimentResult {
            rows: device_report::headline_rows(&r.rows),
            ..r.clone()
        };
        section::summary_table(h, &headline)?;
        device_report::write_latency(h, r)?;
        section::close(h, r)
    }
}
