//! `strata lab report DIR`: turns a results folder (one JSON per experiment)
//! into one self-contained `report.html` — inline CSS and SVG, no script, no
//! network. It opens with the verdict (`<section id="summary">`, from
//! [`crate::summary`]): per experiment, strata ÷ the best peer and ÷ the
//! device line, each aim met, not met or not judged (from the results' `aims`,
//! [`crate::summary::aims`]), what the experiment adds there
//! ([`crate::experiment::Experiment::render_summary`]), and an overview plot
//! of those ratios. Then the machine and commit once, and per experiment
//! the section its experiment renders
//! ([`crate::experiment::Experiment::render_section`], made of
//! [`crate::section`]'s parts: plots, each engine's durability settings, a
//! summary table of each engine's figures — median and min–max where
//! repeated — with the primary figure's ratio to strata and to the device
//! line, its options and notes).
//!
//! Invariants: results are shown in the lab's experiment order (unknown
//! experiments last, with the standard section); the page is a function
//! of the results alone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::aims::Verdict;
use crate::experiments;
use crate::html::escape;
use crate::plot::{bar_chart_svg, format_value, BarChart, RefLine, YScale};
#[cfg(test)]
use crate::results::Row;
use crate::results::{DeviceSide, ExperimentResult};
use crate::section;
use crate::summary::{summarize, ExperimentSummary};

pub const REPORT_FILE: &str = "report.html";

/// Writes `<dir>/report.html` from the results in `dir`; returns its path.
pub fn write_report(dir: &Path) -> Result<PathBuf> {
    let mut results = ExperimentResult::load_dir(dir)?;
    results.sort_by_key(|r| experiments::order_of(&r.experiment));
    if results.is_empty() {
        bail!("no results (*.json) in {}", dir.display());
    }
    let html = render(&results)?;
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, html)?;
    Ok(path)
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1500px}\
h1{font-size:26px}h2{font-size:20px;margin-top:40px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:12px 0;font-size:13px}\
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}\
th{background:#f2f2f2}td.l,th.l{text-align:left}\
tr.strata td{background:#eef6ff}.note{color:#a40}\
.plots svg{display:block;margin:12px 0;max-width:100%;height:auto}\
.muted{color:#777}table.options pre{margin:0;white-space:pre-wrap;font-size:12px}\
section.summary{border:1px solid #ccc;padding:4px 16px 12px;background:#fafafa}\
section.summary h2{margin-top:8px}table.summary-table{font-size:14px}\
table.summary-table td{vertical-align:top}.better{color:#060}.worse{color:#a00}\
ul.aims{margin:0;padding-left:0;list-style:none}\
[data-verdict=met]{color:#060}[data-verdict=not-met]{color:#a00}[data-verdict=not-judged]{color:#777}\
.overview svg{display:block;margin:12px 0;max-width:100%;height:auto}\
table.durability caption{text-align:left;font-weight:bold;padding:2px 0}";

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
    summary_section(&mut h, results)?;
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
        let latency = line
            .read_4k_latency_ns
            .map(|ns| {
                format!(
                    "; 4 KiB random read at QD1 (O_DIRECT, p50): {} µs",
                    format_value(ns / 1e3)
                )
            })
            .unwrap_or_default();
        kv(
            "Device line",
            format!(
                "sequential O_DIRECT {} KiB blocks over {} MiB: write {:.0} MiB/s, read {:.0} MiB/s{fio}{latency}",
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
        // Results of an experiment this build does not know get the
        // standard section.
        match experiments::find(&r.experiment) {
            Some(experiment) => experiment.render_section(&mut h, r)?,
            None => section::standard(&mut h, r)?,
        }
    }
    writeln!(h, "</body></html>")?;
    Ok(h)
}

/// A ratio as `1.23×`.
fn ratio_text(x: f64) -> String {
    format!("{}×", format_value(x))
}

/// The verdict on top: one row per experiment and the overview plot.
fn summary_section(h: &mut String, results: &[ExperimentResult]) -> Result<()> {
    let summaries = summarize(results);
    writeln!(h, "<section class=\"summary\" id=\"summary\">")?;
    writeln!(h, "<h2>Summary</h2>")?;
    writeln!(
        h,
        "<p class=\"muted\">Each experiment on its primary figure, as ratios measured in the same run: strata's best configuration against the best peer's, per case (geometric mean over the cases, and the worst case; above 1× strata is better), and strata's best figure as a fraction of the device line (median over the cases).</p>"
    )?;
    writeln!(
        h,
        "<table class=\"summary-table\"><thead><tr><th class=\"l\">experiment</th><th class=\"l\">strata ÷ best peer<br><span class=\"muted\">geo-mean, worst case</span></th><th class=\"l\">strata ÷ device line<br><span class=\"muted\">median over cases</span></th><th class=\"l\">aims</th></tr></thead><tbody>"
    )?;
    for (s, r) in summaries.iter().zip(results) {
        summary_row(h, s, r)?;
    }
    writeln!(h, "</tbody></table>")?;
    for r in results {
        if let Some(experiment) = experiments::find(&r.experiment) {
            experiment.render_summary(h, r)?;
        }
    }
    overview_plot(h, &summaries)?;
    writeln!(h, "</section>")?;
    Ok(())
}

fn summary_row(h: &mut String, s: &ExperimentSummary, r: &ExperimentResult) -> Result<()> {
    let name = escape(&s.experiment);
    write!(
        h,
        "<tr data-experiment=\"{name}\"><td class=\"l\"><a href=\"#{name}\">{name}</a>"
    )?;
    if let Some(spec) = &s.metric {
        write!(
            h,
            "<br><span class=\"muted\">{} ({})</span>",
            escape(&spec.label),
            escape(&spec.unit)
        )?;
    }
    if r.options.contains_key("failed") {
        write!(h, "<br><span class=\"note\">failed (see below)</span>")?;
    }
    write!(h, "</td>")?;

    match &s.vs_peer {
        Some(p) => {
            let class = if p.geo_mean >= 1.0 { "better" } else { "worse" };
            write!(
                h,
                "<td class=\"l\"><b class=\"{class}\">{}</b> over {} case{}; best peer: {} ({} of {})<br><span class=\"muted\">worst: {} {} vs {}</span></td>",
                ratio_text(p.geo_mean),
                p.cases,
                if p.cases == 1 { "" } else { "s" },
                escape(&p.best_peer),
                p.best_peer_cases,
                p.cases,
                escape(&p.worst.case),
                ratio_text(p.worst.ratio),
                escape(&p.worst.peer)
            )?;
        }
        None => write!(h, "<td class=\"l muted\">–</td>")?,
    }

    match (&s.vs_device, &s.device_line) {
        (Some(d), _) => {
            let side = match d.side {
                DeviceSide::Write => "write",
                DeviceSide::Read => "read",
            };
            write!(
                h,
                "<td class=\"l\"><b>{}</b> <span class=\"muted\">of the device {side} line ({:.0} MiB/s), {} case{}</span></td>",
                ratio_text(d.median),
                d.line_mib_s,
                d.cases,
                if d.cases == 1 { "" } else { "s" }
            )?;
        }
        (None, Some(line)) => {
            let fio = match (line.fio_write_mib_s, line.fio_read_mib_s) {
                (Some(w), Some(r)) => {
                    format!("<br><span class=\"muted\">fio: write {w:.0}, read {r:.0} MiB/s</span>")
                }
                (Some(w), None) => {
                    format!("<br><span class=\"muted\">fio: write {w:.0} MiB/s</span>")
                }
                (None, Some(r)) => {
                    format!("<br><span class=\"muted\">fio: read {r:.0} MiB/s</span>")
                }
                (None, None) => String::new(),
            };
            let latency = crate::device_report::summary_headline(r)
                .map(|text| format!("<br>{text}"))
                .unwrap_or_default();
            write!(
                h,
                "<td class=\"l\">the line: write <b>{:.0}</b> MiB/s, read <b>{:.0}</b> MiB/s{fio}{latency}</td>",
                line.write_mib_s, line.read_mib_s
            )?;
        }
        (None, None) => write!(h, "<td class=\"l muted\">–</td>")?,
    }

    if s.aims.is_empty() {
        write!(h, "<td class=\"l muted\">–</td>")?;
    } else {
        write!(h, "<td class=\"l\"><ul class=\"aims\">")?;
        for aim in &s.aims {
            let (verdict, mark) = match aim.verdict {
                Verdict::Met => ("met", "✓"),
                Verdict::NotMet => ("not-met", "✗"),
                Verdict::NotJudged => ("not-judged", "–"),
            };
            write!(
                h,
                "<li data-verdict=\"{verdict}\">{mark} {}</li>",
                escape(&aim.text)
            )?;
        }
        write!(h, "</ul></td>")?;
    }
    writeln!(h, "</tr>")?;
    Ok(())
}

/// Strata ÷ best peer and ÷ device line per experiment, on a log axis with
/// 1× marked.
fn overview_plot(h: &mut String, summaries: &[ExperimentSummary]) -> Result<()> {
    writeln!(h, "<div class=\"overview\">")?;
    let plotted: Vec<&ExperimentSummary> = summaries
        .iter()
        .filter(|s| s.vs_peer.is_some() || s.vs_device.is_some())
        .collect();
    if plotted.is_empty() {
        writeln!(
            h,
            "<p class=\"muted\">No experiment has a ratio to plot.</p></div>"
        )?;
        return Ok(());
    }
    let cases: Vec<String> = plotted.iter().map(|s| s.experiment.clone()).collect();
    let series = vec![
        "strata ÷ best peer (geo-mean)".to_string(),
        "strata ÷ device line (median)".to_string(),
    ];
    let values = vec![
        plotted
            .iter()
            .map(|s| s.vs_peer.as_ref().map(|p| p.geo_mean))
            .collect(),
        plotted
            .iter()
            .map(|s| s.vs_device.as_ref().map(|d| d.median))
            .collect(),
    ];
    let svg = bar_chart_svg(&BarChart {
        title: "overview: strata ÷ best peer and ÷ device line",
        x_label: "experiment",
        y_label: "strata ÷ reference (ratio, ×)",
        cases: &cases,
        series: &series,
        values: &values,
        spreads: &[],
        ref_line: Some(RefLine {
            label: "1× (parity)".to_string(),
            value: 1.0,
        }),
        y_scale: YScale::Log,
    })?;
    h.push_str(&svg);
    writeln!(h, "\n</div>")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::tests::{sample, sample_claim};
    use crate::results::MetricSpec;

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

    /// The device, ingest (repeated rows, aims, durability settings, a
    /// peer 100× slower) and bulk experiments.
    fn three_experiments() -> Vec<ExperimentResult> {
        let mut device = sample("device");
        device.metrics = vec![MetricSpec::new("mib_s", "Bandwidth", "MiB/s", true)];
        device.plot_metrics = vec!["mib_s".to_string()];
        device.rows = vec![
            Row::new("sequential write 1 MiB", "lab probe", "O_DIRECT").metric("mib_s", 200.0),
            Row::new("sequential read 1 MiB", "lab probe", "O_DIRECT").metric("mib_s", 400.0),
        ];
        device.options.clear();
        device.notes.clear();

        let mut ingest = sample("ingest");
        ingest.rows[0] = Row::new("100 B Sequential", "strata", "DirectRw")
            .sampled("mib_s", &[118.0, 123.4, 130.2])
            .metric("puts_s", 1e6);
        // 100× slower than strata: the chart needs a log axis.
        ingest.rows[3] = Row::new("8 KiB Sequential", "rocksdb", "DirectRw").metric("mib_s", 1.8);
        // Its aims as data; no note states their verdicts.
        ingest.aims = Some(crate::aims::records(&[
            sample_claim(true),
            sample_claim(false),
            sample_claim(true).judged_unless(Some("cache hits".to_string())),
        ]));
        ingest.notes = vec!["a note".to_string()];
        ingest.options.insert(
            "engine_options".to_string(),
            serde_json::json!({
                "strata": {"durability": "WAL synced at each flush", "write": "WriteBatch"},
                "rocksdb": {"write": "WriteBatch, WAL on, sync=false"},
            }),
        );
        vec![device, ingest, sample("bulk")]
    }

    #[test]
    fn report_opens_with_a_summary_row_per_experiment_and_an_overview() {
        let html = render(&three_experiments()).unwrap();
        let summary = html
            .find("<section class=\"summary\" id=\"summary\">")
            .expect("summary section");
        let end = summary + html[summary..].find("</section>").unwrap();
        let section = &html[summary..end];
        assert!(summary < html.find("<table class=\"machine\"").unwrap());
        assert!(html[..summary].contains("<h1>"));
        assert!(section.contains("<h2>Summary</h2>"));
        assert_eq!(
            section.matches("<table class=\"summary-table\">").count(),
            1
        );
        assert_eq!(section.matches("<tr data-experiment=").count(), 3);
        for name in ["device", "ingest", "bulk"] {
            assert!(section.contains(&format!("<tr data-experiment=\"{name}\">")));
        }
        // ingest: strata 123.4 vs 50 and 180 vs 1.8 → √(2.468 × 100) = 15.7.
        assert!(section.contains("15.7×"), "{section}");
        assert!(section.contains("worst: 100 B Sequential 2.47× vs rocksdb"));
        // bulk: 100 vs 50 and 180 vs 90; device fractions 0.5, 0.9 → 0.70.
        assert!(section.contains("2.00×") && section.contains("0.70×"));
        // The device experiment shows the line itself.
        assert!(section.contains("the line: write <b>200</b> MiB/s, read <b>400</b> MiB/s"));
        // … and its 4 KiB random-read latency.
        assert!(section.contains("filled file: io_uring+direct+fixed <b>60.0</b> µs"));
        assert_eq!(section.matches("data-verdict=\"met\"").count(), 1);
        assert_eq!(section.matches("data-verdict=\"not-met\"").count(), 1);
        // An aim not judged is neither: its own mark, whatever its figures.
        assert!(section.contains(
            "<li data-verdict=\"not-judged\">– ingest at 100 B: strata 100 MiB/s = 2.00× rocksdb (aim ≥ 1.5×); cache hits</li>"
        ));
        assert!(section.contains(
            "<li data-verdict=\"met\">✓ ingest at 100 B: strata 100 MiB/s = 2.00× rocksdb (aim ≥ 1.5×)</li>"
        ));
        assert!(section.contains(
            "<li data-verdict=\"not-met\">✗ ingest at 100 B: strata 100 MiB/s = 1.20× rocksdb (aim ≥ 1.5×)</li>"
        ));
        // One overview plot, log scale, labelled in ×, with the 1× line.
        let overview = section.find("<div class=\"overview\">").unwrap();
        assert_eq!(section.matches("<svg").count(), 1);
        assert!(section[overview..].contains("<svg"));
        assert!(section.contains("(ratio, ×), log scale"));
        assert!(section.contains("1× (parity)"));
        // The per-experiment tables keep their count.
        assert_eq!(html.matches("<table class=\"experiment-table\"").count(), 3);
        assert!(!section.contains("experiment-table"));
    }

    #[test]
    fn experiment_tables_show_spread_durability_and_log_charts() {
        let html = render(&three_experiments()).unwrap();
        // The repeated figure: median, then min–max.
        assert!(
            html.contains("<td>123 <span class=\"muted\">118–130</span></td>"),
            "{html}"
        );
        assert!(html.contains("median min–max"));
        // ingest spans 100× (1.8 to 180 MiB/s): log axis; bulk does not.
        assert!(html.contains("Throughput (MiB/s), log scale"));
        assert_eq!(html.matches("Throughput (MiB/s), log scale").count(), 1);
        // The whisker's legend, on the chart with a repeated figure only.
        assert_eq!(html.matches("min–max of the samples").count(), 1);
        // Durability per engine: its own setting, else its write setting.
        let durability = html.find("<table class=\"durability\"").unwrap();
        let table = &html[durability..];
        let table = &table[..table.find("</table>").unwrap()];
        assert!(table.contains("<td class=\"l\">WAL synced at each flush</td>"));
        assert!(table.contains("<td class=\"l\">WriteBatch, WAL on, sync=false</td>"));
        assert_eq!(html.matches("<table class=\"durability\"").count(), 1);
        // Beside the figures: before ingest's summary table.
        assert!(
            durability
                < html
                    .find("<table class=\"experiment-table\" data-experiment=\"ingest\"")
                    .unwrap()
        );
    }

    #[test]
    fn the_device_section_charts_bandwidth_cases_only_and_tables_the_sweep_apart() {
        let html = render(&[crate::device_report::tests::device_result()]).unwrap();
        // The bar chart and the table hold no block size but 4 KiB.
        assert!(!html.contains("random read QD1 1 B"));
        assert!(html.contains("random read QD1 4 KiB"));
        assert_eq!(html.matches("<table class=\"experiment-table\"").count(), 1);
        assert_eq!(html.matches("<table class=\"device-latency\"").count(), 1);
        assert_eq!(html.matches("<table class=\"device-fit\"").count(), 1);
        // The bandwidth bar chart and the two log-log latency plots.
        assert_eq!(html.matches("<svg").count(), 3);
    }

    #[test]
    fn results_are_shown_in_the_run_order_and_an_unknown_experiment_gets_the_standard_section() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        // File names sort as bulk, ingest, zzz: the report puts ingest first.
        for name in ["zzz", "bulk", "ingest"] {
            sample(name).save(tmp.path()).unwrap();
        }
        let html = std::fs::read_to_string(write_report(tmp.path()).unwrap()).unwrap();
        let at = |name: &str| {
            html.find(&format!("<section class=\"experiment\" id=\"{name}\">"))
                .unwrap()
        };
        assert!(at("ingest") < at("bulk") && at("bulk") < at("zzz"));
        assert_eq!(html.matches("<table class=\"experiment-table\"").count(), 3);
    }

    #[test]
    fn an_old_results_file_without_aims_shows_the_verdicts_of_its_aim_notes() {
        // ingest.json as written before aims were data: no `aims` field,
        // the verdicts in the notes.
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut ingest = sample("ingest");
        ingest.notes = vec![
            "a note".to_string(),
            "aim met: strata ≥ 1× rocksdb".to_string(),
            "aim not met: strata ≥ 0.9× the device write line".to_string(),
        ];
        let mut json = serde_json::to_value(&ingest).unwrap();
        json.as_object_mut().unwrap().remove("aims");
        std::fs::write(tmp.path().join("ingest.json"), json.to_string()).unwrap();
        let html = std::fs::read_to_string(write_report(tmp.path()).unwrap()).unwrap();
        assert!(html.contains("<li data-verdict=\"met\">✓ strata ≥ 1× rocksdb</li>"));
        assert!(html
            .contains("<li data-verdict=\"not-met\">✗ strata ≥ 0.9× the device write line</li>"));
        // The notes themselves are still in the experiment's section.
        assert!(html.contains("<p class=\"note\">aim met: strata ≥ 1× rocksdb</p>"));
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
