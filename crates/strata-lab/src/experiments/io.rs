//! The io experiment (issue 2) as the lab runs it: strata's io layer in
//! every mode and engine through [`crate::io_exp`], next to the device line,
//! with issue 2's aim (DirectRw ≥ 0.9× the device write line).

use anyhow::{bail, Result};

use crate::aims::Claim;
use crate::experiment::{options, say_aims, Experiment, Measured, Options, RunContext};
use crate::io_exp::{self, IoParams};
use crate::results::{DeviceLine, MetricSpec, Row};

/// The io experiment.
pub struct Io;

impl Experiment for Io {
    fn name(&self) -> &'static str {
        "io"
    }

    fn title(&self) -> &'static str {
        "io — strata's io layer (BufferedWriter, 1 MiB buffer) in every mode and engine"
    }

    fn parameters(&self, ctx: &RunContext) -> Result<Options> {
        let params = IoParams::new(ctx.quick);
        Ok(options(&[
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
            ("repeats", params.repeats.into()),
        ]))
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        io_exp::metrics()
    }

    fn plot_metrics(&self) -> &'static [&'static str] {
        &["write_mib_s", "read_mib_s"]
    }

    fn run(&self, ctx: &RunContext, device_line: Option<&DeviceLine>) -> Result<Measured> {
        let params = IoParams::new(ctx.quick);
        let mut notes = Vec::new();
        let device = device_line.map(|l| (l.write_mib_s, l.read_mib_s));
        let rows = io_exp::run(&params, &ctx.data_dir, device, &mut notes)?;
        if rows.is_empty() {
            bail!("no io configuration ran: {}", notes.join("; "));
        }
        let aims = self.aims(&rows);
        say_aims(&aims, &mut notes);
        Ok(Measured {
            options: self.parameters(ctx)?,
            rows,
            notes,
            aims,
            device_line: None,
        })
    }

    fn aims(&self, rows: &[Row]) -> Vec<Claim> {
        io_exp::aims(rows)
    }
}
