//! The bulk experiment (LAB.md §2) as the lab runs it: one large ingest end
//! to end per engine and value size (1 KiB and 8 KiB, `bulk::VALUE_LENS`)
//! through [`crate::bulk`] (each sample a child process killed without a
//! flush), samples interleaved across engines, with issue 4's aim on
//! strata's write amplification and issue 30's with compaction.
//!
//! Invariants: an engine that fails is a note and is not sampled again;
//! the others go on.

use anyhow::{bail, Result};

use crate::aims::Claim;
use crate::bulk::{self, BulkParams};
use crate::engine::EngineConfig;
use crate::experiment::{options, say_aims, Experiment, Measured, Options, RunContext};
use crate::results::{interleave, DeviceLine, MetricSpec, Row};

/// The bulk experiment.
pub struct Bulk;

impl Experiment for Bulk {
    fn name(&self) -> &'static str {
        "bulk"
    }

    fn title(&self) -> &'static str {
        "bulk — a large ingest end to end (Neon test_bulk_insert)"
    }

    fn parameters(&self, ctx: &RunContext) -> Result<Options> {
        let params = BulkParams::new(ctx.quick);
        let value_lens: Vec<u64> = bulk::VALUE_LENS.iter().map(|&v| v as u64).collect();
        Ok(options(&[
            ("volume_bytes", params.volume_bytes.into()),
            ("repeats", params.repeats.into()),
            ("value_len_bytes", value_lens.into()),
            ("key_layout", params.layout.label().into()),
            ("ingested_bytes", params.ingested_bytes().into()),
            ("engine_options", ctx.engine_options()),
        ]))
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        bulk::metrics()
    }

    fn plot_metrics(&self) -> &'static [&'static str] {
        &["insert_mib_s", "write_amp", "recovery_s", "peak_rss_mib"]
    }

    fn run(&self, ctx: &RunContext, _device_line: Option<&DeviceLine>) -> Result<Measured> {
        let engines = &ctx.engines;
        let mut notes = Vec::new();
        let mut rows: Vec<Row> = Vec::new();
        for params in BulkParams::cases(ctx.quick) {
            let taken = interleave(params.repeats, engines.len(), |rep, i| {
                let kind = engines[i];
                let config = EngineConfig::new(kind, kind.default_io_mode());
                let row = bulk::run_engine(&config, &params, &ctx.data_dir)
                    .inspect_err(|err| eprintln!("  bulk {} failed: {err:#}", kind.name()))?;
                say_sample(&row, rep, params.repeats);
                if let Some(note) = lost_puts_note(&row, rep) {
                    notes.push(note);
                }
                Ok(row)
            });
            for (kind, err) in engines.iter().zip(&taken.errors) {
                if let Some(err) = err {
                    notes.push(format!(
                        "bulk {} ({} B values) failed: {err:#}",
                        kind.name(),
                        params.value_len_bytes
                    ));
                }
            }
            rows.extend(taken.samples.iter().filter_map(|s| Row::from_samples(s)));
        }
        if rows.is_empty() {
            bail!("no engine completed bulk: {}", notes.join("; "));
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
        bulk::aims(rows)
    }
}

/// Prints one sample's figures.
fn say_sample(row: &Row, rep: u32, repeats: u32) {
    let m = |k: &str| row.metrics.get(k).copied().unwrap_or(f64::NAN);
    eprintln!(
        "  bulk {:<8} {rep}/{repeats}: insert {:.1} s, WA {:.2}, recovery {:.2} s, recovered {:.3}, RSS {:.0} MiB",
        row.engine,
        m("insert_s"),
        m("write_amp"),
        m("recovery_s"),
        m("recovered_fraction"),
        m("peak_rss_mib"),
    );
}

/// The note of a sample that lost puts to the SIGKILL, if it did.
fn lost_puts_note(row: &Row, rep: u32) -> Option<String> {
    let puts = row.params.get("puts")?;
    let recovered = row.params.get("recovered_puts")?;
    (puts != recovered).then(|| {
        format!(
            "{} (sample {rep}) recovered {recovered} of {puts} puts after SIGKILL (no sync, no flush): what it had not handed to the OS was lost",
            row.engine
        )
    })
}
