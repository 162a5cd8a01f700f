//! The remote experiment (issue 32) as the lab runs it: strata with an
//! S3-compatible store (SeaweedFS on loopback) beside the same server's
//! raw PUT and ranged GET lines, via [`crate::remote_exp`], with issue
//! 32's aims.
//!
//! Invariants: without the `s3` feature, the `weed` binary, or a server
//! that passes the race check, the experiment is skipped (a result with
//! no rows and the reason in `skipped`), not failed.

use anyhow::Result;

use crate::aims::Claim;
use crate::experiment::{aims_unless_skipped, say_aims, Experiment, Measured, Options, RunContext};
use crate::remote_exp::{self, RemoteParams};
use crate::results::{DeviceLine, MetricSpec, Row};

/// The remote experiment.
pub struct Remote;

impl Experiment for Remote {
    fn name(&self) -> &'static str {
        "remote"
    }

    fn title(&self) -> &'static str {
        "remote — layers in an S3-compatible store (SeaweedFS on loopback) beside the server's own PUT and GET lines"
    }

    fn parameters(&self, ctx: &RunContext) -> Result<Options> {
        Ok(RemoteParams::new(ctx.quick).options())
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        remote_exp::metrics()
    }

    fn plot_metrics(&self) -> &'static [&'static str] {
        &["mib_s", "p50_us"]
    }

    fn run(&self, ctx: &RunContext, _device_line: Option<&DeviceLine>) -> Result<Measured> {
        let params = RemoteParams::new(ctx.quick);
        let outcome = remote_exp::run(&params, &ctx.data_dir.join("remote"))?;
        let mut opts = self.parameters(ctx)?;
        opts.extend(outcome.options);
        let mut notes = outcome.notes;
        let claims = aims_unless_skipped(outcome.skipped.as_ref(), &mut opts, || {
            self.aims(&outcome.rows)
        });
        say_aims(&claims, &mut notes);
        Ok(Measured {
            options: opts,
            rows: outcome.rows,
            notes,
            aims: claims,
            device_line: None,
        })
    }

    fn aims(&self, rows: &[Row]) -> Vec<Claim> {
        remote_exp::aims(rows)
    }
}
