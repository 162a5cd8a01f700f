//! One experiment's section of the report, in parts every experiment's
//! [`crate::experiment::Experiment::render_section`] composes: the heading
//! ([`open`]), bar charts of its plot metrics ([`bar_plots`]), each
//! engine's durability setting ([`durability_table`]), the summary table
//! ([`summary_table`]) and its options and notes ([`close`]);
//! [`standard`] is the section of an experiment with nothing of its own.
//!
//! Reads only the results (no I/O). Invariants: a section opened by
//! [`open`] is closed by [`close`]; every text from the results is escaped.

use std::fmt::Write as _;

use anyhow::Result;

use crate::html::{escape, figure_with_spread};
use crate::plot::{bar_chart_svg, BarChart, RefLine, YScale};
use crate::results::{DeviceSide, ExperimentResult, Row};
use crate::summary::is_strata;

/// The section of an experiment with nothing of its own: heading, bar
/// charts, durability, summary table, options and notes.
pub fn standard(h: &mut String, r: &ExperimentResult) -> Result<()> {
    open(h, r)?;
    bar_plots(h, r)?;
    durability_table(h, r)?;
    summary_table(h, r)?;
    close(h, r)
}

/// Opens the section: its anchor, heading and the run's one-line facts.
pub fn open(h: &mut String, r: &ExperimentResult) -> Result<()> {
    writeln!(
        h,
        "<section class=\"experiment\" id=\"{}\">",
        escape(&r.experiment)
    )?;
    writeln!(h, "<h2>{}</h2>", escape(&r.title))?;
    writeln!(
        h,
        "<p class=\"muted\">{} · {:.1} s · started {} · <code>{}.json</code></p>",
        escape(&r.experiment),
        r.duration_s,
        escape(&r.started_at_utc),
        escape(&r.experiment)
    )?;
    Ok(())
}

/// A bar chart per plot metric (the primary one if none is listed):
/// cases × series, with the device line where the metric has one.
pub fn bar_plots(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let cases = r.cases();
    let mut series: Vec<String> = Vec::new();
    for row in &r.rows {
        if !series.contains(&row.series()) {
            series.push(row.series());
        }
    }
    writeln!(h, "<div class=\"plots\">")?;
    let plot_keys: Vec<&String> = if r.plot_metrics.is_empty() {
        vec![&r.primary_metric]
    } else {
        r.plot_metrics.iter().collect()
    };
    for key in plot_keys {
        let Some(spec) = r.spec(key) else { continue };
        // Only the cases and series with a figure for this metric (the
        // device experiment's latency rows have no bandwidth).
        let has = |row: &Row| row.metrics.contains_key(key.as_str());
        let cases: Vec<String> = cases
            .iter()
            .filter(|c| r.rows.iter().any(|row| &row.case == *c && has(row)))
            .cloned()
            .collect();
        let series: Vec<String> = series
            .iter()
            .filter(|s| r.rows.iter().any(|row| &row.series() == *s && has(row)))
            .cloned()
            .collect();
        let row_of = |s: &String, c: &String| {
            r.rows
                .iter()
                .find(|row| &row.case == c && &row.series() == s)
        };
        let values: Vec<Vec<Option<f64>>> = series
            .iter()
            .map(|s| {
                cases
                    .iter()
                    .map(|c| row_of(s, c).and_then(|row| row.metrics.get(key).copied()))
                    .collect()
            })
            .collect();
        let spreads: Vec<Vec<Option<(f64, f64)>>> = series
            .iter()
            .map(|s| {
                cases
                    .iter()
                    .map(|c| {
                        let spread = row_of(s, c)?.spread.get(key)?;
                        Some((spread.min, spread.max))
                    })
                    .collect()
            })
            .collect();
        if values.iter().flatten().all(Option::is_none) {
            continue;
        }
        let ref_line = match (spec.device_side, &r.device_line) {
            (Some(DeviceSide::Write), Some(line)) => Some(RefLine {
                label: format!("device write {:.0} MiB/s", line.write_mib_s),
                value: line.write_mib_s,
            }),
            (Some(DeviceSide::Read), Some(line)) => Some(RefLine {
                label: format!("device read {:.0} MiB/s", line.read_mib_s),
                value: line.read_mib_s,
            }),
            _ => None,
        };
        let title = format!("{}: {}", r.experiment, spec.label);
        let y_label = format!("{} ({})", spec.label, spec.unit);
        let svg = bar_chart_svg(&BarChart {
            title: &title,
            x_label: "case",
            y_label: &y_label,
            cases: &cases,
            series: &series,
            values: &values,
            spreads: &spreads,
            ref_line,
            y_scale: YScale::Auto,
        })?;
        h.push_str(&svg);
        h.push('\n');
    }
    writeln!(h, "</div>")?;
    Ok(())
}

/// Each row's figures, and the primary figure's ratio to strata and to
/// the device line.
pub fn summary_table(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let primary = r.spec(&r.primary_metric);
    let has_strata = r.rows.iter().any(|row| row.engine == "strata");
    let has_device = primary.is_some_and(|p| p.device_side.is_some()) && r.device_line.is_some();
    writeln!(
        h,
        "<table class=\"experiment-table\" data-experiment=\"{}\"><thead><tr>",
        escape(&r.experiment)
    )?;
    writeln!(
        h,
        "<th class=\"l\">case</th><th class=\"l\">engine</th><th class=\"l\">config</th>"
    )?;
    let shown: Vec<_> = r
        .metrics
        .iter()
        .filter(|spec| r.rows.iter().any(|row| row.metrics.contains_key(&spec.key)))
        .collect();
    for spec in &shown {
        let repeated = r.rows.iter().any(|row| row.spread.contains_key(&spec.key));
        writeln!(
            h,
            "<th>{}<br><span class=\"muted\">{}{}</span></th>",
            escape(&spec.label),
            escape(&spec.unit),
            if repeated { ", median min–max" } else { "" }
        )?;
    }
    if let Some(p) = primary {
        if has_strata {
            writeln!(h, "<th>{} × strata</th>", escape(&p.label))?;
        }
        if has_device {
            writeln!(h, "<th>{} × device line</th>", escape(&p.label))?;
        }
    }
    writeln!(h, "</tr></thead><tbody>")?;
    for row in &r.rows {
        let class = if row.engine == "strata" {
            " class=\"strata\""
        } else {
            ""
        };
        write!(
            h,
            "<tr{class}><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            escape(&row.case),
            escape(&row.engine),
            escape(&row.config)
        )?;
        for spec in &shown {
            match row.metrics.get(&spec.key) {
                Some(v) => write!(h, "<td>{}</td>", figure_with_spread(row, &spec.key, *v))?,
                None => write!(h, "<td class=\"muted\">–</td>")?,
            }
        }
        if primary.is_some() {
            if has_strata {
                match r.strata_ratio(row, &r.primary_metric) {
                    Some(x) => write!(h, "<td>{x:.2}×</td>")?,
                    None => write!(h, "<td class=\"muted\">–</td>")?,
                }
            }
            if has_device {
                match r.device_fraction(row, &r.primary_metric) {
                    Some(x) => write!(h, "<td>{x:.2}×</td>")?,
                    None => write!(h, "<td class=\"muted\">–</td>")?,
                }
            }
        }
        writeln!(h, "</tr>")?;
    }
    writeln!(h, "</tbody></table>")?;
    Ok(())
}

/// Each engine's durability setting (its `durability` option, else its
/// `write` option), next to the figures it explains.
pub fn durability_table(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let Some(serde_json::Value::Object(engines)) = r.options.get("engine_options") else {
        return Ok(());
    };
    if engines.is_empty() {
        return Ok(());
    }
    writeln!(
        h,
        "<table class=\"durability\" data-experiment=\"{}\"><caption>durability</caption><thead><tr><th class=\"l\">engine</th><th class=\"l\">durability</th></tr></thead><tbody>",
        escape(&r.experiment)
    )?;
    for (engine, opts) in engines {
        let setting = ["durability", "write"]
            .iter()
            .find_map(|k| opts.get(*k).and_then(|v| v.as_str()));
        let class = if is_strata(engine) {
            " class=\"strata\""
        } else {
            ""
        };
        match setting {
            Some(text) => writeln!(
                h,
                "<tr{class} data-engine=\"{0}\"><td class=\"l\">{0}</td><td class=\"l\">{1}</td></tr>",
                escape(engine),
                escape(text)
            )?,
            None => writeln!(
                h,
                "<tr{class} data-engine=\"{0}\"><td class=\"l\">{0}</td><td class=\"l muted\">not recorded</td></tr>",
                escape(engine)
            )?,
        }
    }
    writeln!(h, "</tbody></table>")?;
    Ok(())
}

/// The options and notes, and the end of the section.
pub fn close(h: &mut String, r: &ExperimentResult) -> Result<()> {
    if !r.options.is_empty() {
        writeln!(h, "<table class=\"options\"><tbody>")?;
        for (k, v) in &r.options {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Object(map) => map
                    .iter()
                    .map(|(name, opts)| format!("{name}: {opts}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            };
            writeln!(
                h,
                "<tr><th class=\"l\">{}</th><td class=\"l\"><pre>{}</pre></td></tr>",
                escape(k),
                escape(&text)
            )?;
        }
        writeln!(h, "</tbody></table>")?;
    }
    for note in &r.notes {
        writeln!(h, "<p class=\"note\">{}</p>", escape(note))?;
    }
    writeln!(h, "</section>")?;
    Ok(())
}
