//! `strata lab report DIR`: turns a results folder (one JSON per experiment)
//! into one self-contained `report.html` — inline CSS and SVG, no script, no
//! network — with, per experiment, its plots, one summary table (each
//! engine's figures, the primary figure's ratio to strata and to the device
//! line), its options and notes; and the machine and commit once at the top.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::plot::{bar_chart_svg, format_value, BarChart, RefLine};
use crate::results::{DeviceSide, ExperimentResult};

pub const REPORT_FILE: &str = "report.html";

/// Writes `<dir>/report.html` from the results in `dir`; returns its path.
pub fn write_report(dir: &Path) -> Result<PathBuf> {
    let results = ExperimentResult::load_dir(dir)?;
    if results.is_empty() {
        bail!("no results (*.json) in {}", dir.display());
    }
    let html = render(&results)?;
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, html)?;
    Ok(path)
}

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1500px}\
h1{font-size:26px}h2{font-size:20px;margin-top:40px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:12px 0;font-size:13px}\
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}\
th{background:#f2f2f2}td.l,th.l{text-align:left}\
tr.strata td{background:#eef6ff}.note{color:#a40}\
.plots svg{display:block;margin:12px 0;max-width:100%;height:auto}\
.muted{color:#777}table.options pre{margin:0;white-space:pre-wrap;font-size:12px}";

pub fn render(results: &[ExperimentResult]) -> Result<String> {
    let mut h = String::new();
    let first = &results[0];
    writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    )?;
    writeln!(
        h,
        "<title>strata lab report</title><style>{STYLE}</style></head><body>"
    )?;
    writeln!(h, "<h1>strata lab report</h1>")?;
    writeln!(
        h,
        "<p>Every figure below was measured in one run on the machine described here; compare ratios (to strata, to the device line), not absolutes.</p>"
    )?;

    // Machine and run, once.
    let m = &first.machine;
    writeln!(h, "<table class=\"machine\"><tbody>")?;
    let mut kv = |k: &str, v: String| {
        writeln!(
            h,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            escape(k),
            escape(&v)
        )
    };
    kv("CPU", format!("{} ({} cores)", m.cpu_model, m.cores))?;
    kv(
        "Memory",
        format!("{:.1} GiB", m.memory_bytes as f64 / (1u64 << 30) as f64),
    )?;
    kv("Kernel", m.kernel.clone())?;
    kv(
        "Data directory",
        format!(
            "{} on {} ({}, mounted at {})",
            m.filesystem.data_dir,
            m.filesystem.device,
            m.filesystem.fs_type,
            m.filesystem.mount_point
        ),
    )?;
    kv(
        "Git commit",
        first
            .git_commit
            .clone()
            .unwrap_or_else(|| "unknown".to_string()),
    )?;
    kv(
        "Mode",
        if first.quick {
            "quick".to_string()
        } else {
            "full (reference sizes)".to_string()
        },
    )?;
    kv("Started", first.started_at_utc.clone())?;
    if let Some(line) = &first.device_line {
        let fio = match (line.fio_write_mib_s, line.fio_read_mib_s) {
            (Some(w), Some(r)) => format!("; fio: write {w:.0}, read {r:.0} MiB/s"),
            _ => String::new(),
        };
        kv(
            "Device line",
            format!(
                "sequential O_DIRECT {} KiB blocks over {} MiB: write {:.0} MiB/s, read {:.0} MiB/s{fio}",
                line.block_bytes >> 10,
                line.file_bytes >> 20,
                line.write_mib_s,
                line.read_mib_s
            ),
        )?;
    }
    writeln!(h, "</tbody></table>")?;

    writeln!(h, "<ul>")?;
    for r in results {
        writeln!(
            h,
            "<li><a href=\"#{0}\">{1}</a></li>",
            escape(&r.experiment),
            escape(&r.title)
        )?;
    }
    writeln!(h, "</ul>")?;

    for r in results {
        render_experiment(&mut h, r)?;
    }
    writeln!(h, "</body></html>")?;
    Ok(h)
}

fn render_experiment(h: &mut String, r: &ExperimentResult) -> Result<()> {
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

    // Plots.
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
        let values: Vec<Vec<Option<f64>>> = series
            .iter()
            .map(|s| {
                cases
                    .iter()
                    .map(|c| {
                        r.rows
                            .iter()
                            .find(|row| &row.case == c && &row.series() == s)
                            .and_then(|row| row.metrics.get(key).copied())
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
            y_label: &y_label,
            cases: &cases,
            series: &series,
            values: &values,
            ref_line,
        })?;
        h.push_str(&svg);
        h.push('\n');
    }
    writeln!(h, "</div>")?;

    // The summary table (fio's: jobs × engines).
    if r.experiment == crate::Experiment::Fio.name() {
        crate::fio_exp::write_table(h, r)?;
    } else {
        summary_table(h, r)?;
    }
    options_and_notes(h, r)
}

fn summary_table(h: &mut String, r: &ExperimentResult) -> Result<()> {
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
        writeln!(
            h,
            "<th>{}<br><span class=\"muted\">{}</span></th>",
            escape(&spec.label),
            escape(&spec.unit)
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
                Some(v) => write!(h, "<td>{}</td>", format_value(*v))?,
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

fn options_and_notes(h: &mut String, r: &ExperimentResult) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::tests::sample;

    #[test]
    fn report_has_one_table_per_experiment_and_plots() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        sample("ingest").save(tmp.path()).unwrap();
        sample("bulk").save(tmp.path()).unwrap();
        let path = write_report(tmp.path()).unwrap();
        let html = std::fs::read_to_string(path).unwrap();
        assert_eq!(html.matches("<table class=\"experiment-table\"").count(), 2);
        assert!(html.matches("<svg").count() >= 2);
        assert!(html.contains("0.50×"), "peer at half of strata");
        assert!(
            html.contains("0.25×"),
            "peer at a quarter of the device line"
        );
        assert!(!html.contains("http://") || html.contains("http://www.w3.org/2000/svg"));
        assert!(!html.contains("<script"));
    }

    #[test]
    fn report_escapes_text_from_results() {
        let mut result = sample("ingest");
        result.notes = vec!["<b>&".to_string()];
        let html = render(&[result]).unwrap();
        assert!(html.contains("&lt;b&gt;&amp;"));
    }

    #[test]
    fn report_of_an_empty_dir_is_an_error() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        assert!(write_report(tmp.path()).is_err());
    }
}
