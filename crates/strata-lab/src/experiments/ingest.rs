//! The ingest experiment (LAB.md §1) as the lab runs it: the Neon
//! bench_ingest matrix through [`crate::ingest`] for every engine in each of
//! its io modes, samples interleaved across them, with the aims.

use anyhow::{bail, Result};

use crate::aims::Claim;
use crate::engine::EngineConfig;
use crate::experiment::{options, say_aims, Experiment, Measured, Options, RunContext};
use crate::ingest::{self, IngestParams};
use crate::results::{DeviceLine, MetricSpec, Row};
use crate::workload;

/// The ingest experiment.
pub struct Ingest;

impl Experiment for Ingest {
    fn name(&self) -> &'static str {
        "ingest"
    }

    fn title(&self) -> &'static str {
        "ingest — the write path (Neon bench_ingest matrix)"
    }

    fn parameters(&self, ctx: &RunContext) -> Result<Options> {
        let params = IngestParams::new(ctx.quick);
        Ok(options(&[
            ("volume_bytes", params.volume_bytes.into()),
            ("repeats", params.repeats.into()),
            ("sample_work_s_min", params.sample_work_s_min.into()),
            ("batch_puts", (workload::BATCH_PUTS as u64).into()),
            ("key_len_bytes", (workload::KEY_LEN_BYTES as u64).into()),
            ("reader_window_keys", ingest::READER_WINDOW_KEYS.into()),
            ("engine_options", ctx.engine_options()),
        ]))
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        ingest::metrics()
    }

    fn plot_metrics(&self) -> &'static [&'static str] {
        &["mib_s", "puts_s"]
    }

    fn run(&self, ctx: &RunContext, device_line: Option<&DeviceLine>) -> Result<Measured> {
        let params = IngestParams::new(ctx.quick);
        let configs: Vec<EngineConfig> = ctx
            .engines
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
        ingest::aims(rows)
    }
}
