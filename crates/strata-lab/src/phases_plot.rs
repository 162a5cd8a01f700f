//! The phases experiment's part of the report: per phase, latency against
//! the iteration (log and linear y; drawn by [`crate::xy_plot`]), one
//! line per engine, with dashed reference lines at 1× and 2× the device's
//! 4 KiB random-read latency; device reads per get; and the headline
//! table.
//!
//! Invariants: engines keep one colour across every chart (their order in
//! the results); a chart without a point to draw is left out.

use std::fmt::Write as _;

use anyhow::Result;

use crate::html::escape;
use crate::phases::{parse_case, Phase};
use crate::plot::{format_value, RefLine};
use crate::results::ExperimentResult;
use crate::summary::device_4k_us;
use crate::xy_plot::{iter_chart_svg, IterChart, XySeries};

/// `(iteration, metric)` of `engine` in `phase`, in iteration order.
pub fn series_points(
    r: &ExperimentResult,
    engine: &str,
    phase: Phase,
    key: &str,
) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = r
        .rows
        .iter()
        .filter(|row| row.engine == engine)
        .filter_map(|row| {
            let (p, it) = parse_case(&row.case)?;
            (p == phase).then_some(())?;
            Some((f64::from(it), *row.metrics.get(key)?))
        })
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// The phases plots: per phase, p50 (solid) and p99 (dashed) latency per
/// engine against the iteration, on a log and a linear axis, with the
/// device lines; then device reads per get (read solid, mixed dashed).
pub fn write_plots(h: &mut String, r: &ExperimentResult) -> Result<()> {
    // An engine's colour is its index.
    let engines = r.engines();
    let refs: Vec<RefLine> = match device_4k_us(r) {
        Some(us) => vec![
            RefLine {
                label: format!("1× device 4 KiB read ({} µs)", format_value(us)),
                value: us,
            },
            RefLine {
                label: format!("2× device 4 KiB read ({} µs)", format_value(2.0 * us)),
                value: 2.0 * us,
            },
        ],
        None => Vec::new(),
    };
    writeln!(h, "<div class=\"plots\">")?;
    for phase in Phase::ALL {
        let mut series = Vec::new();
        for (i, engine) in engines.iter().enumerate() {
            for (key, label, dashed) in [
                ("latency_p50_us", "p50", false),
                ("latency_p99_us", "p99", true),
            ] {
                series.push(XySeries {
                    name: format!("{engine} {label}"),
                    points: series_points(r, engine, phase, key),
                    color: i,
                    dashed,
                });
            }
        }
        for log_y in [true, false] {
            let title = format!(
                "phases: {} latency per operation ({})",
                phase.name(),
                if log_y { "log" } else { "linear" }
            );
            let chart = IterChart {
                title: &title,
                y_label: "Latency p50, p99 (µs)",
                series: &series,
                ref_lines: &refs,
                log_y,
            };
            if let Some(svg) = iter_chart_svg(&chart)? {
                h.push_str(&svg);
                h.push('\n');
            }
        }
    }
    let mut series = Vec::new();
    for (i, engine) in engines.iter().enumerate() {
        for (phase, dashed) in [(Phase::Read, false), (Phase::Mixed, true)] {
            series.push(XySeries {
                name: format!("{engine} {}", phase.name()),
                points: series_points(r, engine, phase, "device_reads_per_get"),
                color: i,
                dashed,
            });
        }
    }
    let chart = IterChart {
        title: "phases: device reads per get",
        y_label: "Device reads per get (reads)",
        series: &series,
        ref_lines: &[],
        log_y: false,
    };
    if let Some(svg) = iter_chart_svg(&chart)? {
        h.push_str(&svg);
        h.push('\n');
    }
    writeln!(h, "</div>")?;
    if refs.is_empty() {
        writeln!(
            h,
            "<p class=\"muted\">No device 4 KiB read latency in this run: the plots have no device lines.</p>"
        )?;
    } else if let Some(source) = r
        .options
        .get("device_read_4k_source")
        .and_then(|v| v.as_str())
    {
        writeln!(
            h,
            "<p class=\"muted\">Device lines: {}.</p>",
            escape(source)
        )?;
    }
    Ok(())
}

/// The headline table: per engine, the read phase at the last iteration
/// (p50, p99, each ÷ the device's 4 KiB read; p50 ÷ the device's 4 KiB
/// read probed beside the phase's gets), its growth since the first
/// iteration and the device reads per get.
pub fn write_headline_table(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let rows = crate::summary::phases_headlines(r);
    if rows.is_empty() {
        return Ok(());
    }
    let x = |v: Option<f64>| {
        v.map(|v| format!("{}×", format_value(v)))
            .unwrap_or_else(|| "–".to_string())
    };
    writeln!(
        h,
        "<table class=\"phases-headline\" data-experiment=\"{}\"><thead><tr><th class=\"l\">engine</th><th>read p50 (µs)</th><th>p50 ÷ device 4 KiB</th><th>p50 ÷ device 4 KiB beside<br><span class=\"muted\">a probe read after each get, same process</span></th><th>read p99 (µs)</th><th>p99 ÷ device 4 KiB</th><th>p50, p99 growth (last ÷ first iteration)</th><th>device reads per get</th><th>strata's cache hits<br><span class=\"muted\">gets without a device read</span></th><th>data (MiB)</th></tr></thead><tbody>",
        escape(&r.experiment)
    )?;
    for e in &rows {
        writeln!(
            h,
            "<tr data-engine=\"{0}\"><td class=\"l\">{0}</td><td>{1}</td><td>{2}</td><td>{12}</td><td>{3}</td><td>{4}</td><td>{5}× / {6}× <span class=\"muted\">(#{7} → #{8})</span></td><td>{9}</td><td>{10}</td><td>{11}</td></tr>",
            escape(&e.engine),
            format_value(e.p50_us),
            x(e.p50_x_device),
            format_value(e.p99_us),
            x(e.p99_x_device),
            format_value(e.p50_growth),
            format_value(e.p99_growth),
            e.first_iteration,
            e.last_iteration,
            e.device_reads_per_get.map(format_value).unwrap_or_else(|| "–".to_string()),
            e.cache_hit_ratio
                .map(crate::get_reads::format_hit_ratio)
                .unwrap_or_else(|| "–".to_string()),
            e.data_mib.map(format_value).unwrap_or_else(|| "–".to_string()),
            x(e.p50_x_probe),
        )?;
    }
    writeln!(h, "</tbody></table>")?;
    Ok(())
}
