//! The device experiment's part of the report: which of its rows go in the
//! experiment's table ([`headline_rows`]), the random-read latency per
//! block size as log-log plots and a table, the fitted bandwidths in a
//! table ([`write_latency`]), and the headline the summary shows
//! ([`summary_headline`]). Called by [`crate::report`]; reads only the
//! results (the rows [`crate::randread`] and [`crate::device`] write).
//!
//! Invariants: a sweep row is recognised by its engine, case prefix and
//! `bytes`, `file` and `method` params, so rows of older results (without
//! a sweep) render as before; every plot axis and table header names its
//! unit.

use std::fmt::Write as _;

use anyhow::Result;

use crate::html::{escape, figure_with_spread};
use crate::plot::format_value;
use crate::randread::{
    point_case, row_config, FileKind, Method, FIT_BYTES_MIN, FIT_CASE, LINE_READ_BYTES, ROW_ENGINE,
};
use crate::results::{ExperimentResult, Row};
use crate::xy_plot::{log_log_chart_svg, LogLogChart, XTicks, XySeries};

/// The latency metrics plotted per block size, with their labels.
const PLOTTED: [(&str, &str); 2] = [("lat_p50_us", "Latency p50"), ("lat_p99_us", "Latency p99")];

/// Whether `row` is one (file, method, size) point of the sweep.
pub fn is_sweep_point(row: &Row) -> bool {
    row.engine == ROW_ENGINE
        && row.case.starts_with("random read QD1 ")
        && row.case != FIT_CASE
        && row.params.contains_key("bytes")
        && row.params.contains_key("method")
}

/// The rows the experiment's table shows: everything but the sweep's
/// points at other sizes than the device line's 4 KiB (those are in the
/// latency table).
pub fn headline_rows(rows: &[Row]) -> Vec<Row> {
    let line_case = point_case(LINE_READ_BYTES);
    rows.iter()
        .filter(|r| !is_sweep_point(r) || r.case == line_case)
        .cloned()
        .collect()
}

fn param_str<'a>(row: &'a Row, key: &str) -> Option<&'a str> {
    row.params.get(key).and_then(|v| v.as_str())
}

fn param_u64(row: &Row, key: &str) -> Option<u64> {
    row.params.get(key).and_then(|v| v.as_u64())
}

/// The sweep's points of one (file, method), in size order.
fn points(r: &ExperimentResult, kind: FileKind, method: Method) -> Vec<&Row> {
    let mut rows: Vec<&Row> = r
        .rows
        .iter()
        .filter(|row| {
            is_sweep_point(row)
                && param_str(row, "file") == Some(kind.name())
                && param_str(row, "method") == Some(method.name())
        })
        .collect();
    rows.sort_by_key(|row| param_u64(row, "bytes"));
    rows
}

fn series_name(kind: FileKind, method: Method) -> String {
    format!("{}, {} file", method.name(), kind.name())
}

/// The plots, the latency table and the fit table; nothing for results
/// without a sweep.
pub fn write_latency(h: &mut String, r: &ExperimentResult) -> Result<()> {
    if !r.rows.iter().any(is_sweep_point) {
        return Ok(());
    }
    writeln!(h, "<h3>Random-read latency at queue depth 1</h3>")?;
    writeln!(
        h,
        "<p class=\"muted\">One read at a time at a random offset aligned to the read (at least 4 KiB). Solid: the file filled with data; dashed: the file fallocate'd and never written (unwritten extents: no device read). O_DIRECT reads below 4 KiB read one 4 KiB block. Each point is the median over the repeats.</p>"
    )?;
    writeln!(h, "<div class=\"plots\">")?;
    for (key, label) in PLOTTED {
        let mut series = Vec::new();
        for kind in [FileKind::Filled, FileKind::Unwritten] {
            for (m, method) in Method::ALL.iter().enumerate() {
                let pts: Vec<(f64, f64)> = points(r, kind, *method)
                    .iter()
                    .filter_map(|row| {
                        Some((param_u64(row, "bytes")? as f64, *row.metrics.get(key)?))
                    })
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                series.push(XySeries {
                    name: series_name(kind, *method),
                    points: pts,
                    color: m,
                    dashed: kind == FileKind::Unwritten,
                });
            }
        }
        if series.is_empty() {
            continue;
        }
        let title = format!("device: random read at QD1, {label} per block size");
        let y_label = format!("{label} (µs)");
        h.push_str(&log_log_chart_svg(&LogLogChart {
            title: &title,
            x_label: "Block size (bytes)",
            y_label: &y_label,
            x_ticks: XTicks::BinaryBytes,
            series: &series,
            ref_lines: &[],
        })?);
        h.push('\n');
    }
    writeln!(h, "</div>")?;
    latency_table(h, r)?;
    fit_table(h, r)
}

/// p50 per block size (rows) and (file, method) (columns).
fn latency_table(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let columns: Vec<(FileKind, Method)> = [FileKind::Filled, FileKind::Unwritten]
        .into_iter()
        .flat_map(|k| Method::ALL.map(|m| (k, m)))
        .filter(|(k, m)| !points(r, *k, *m).is_empty())
        .collect();
    let mut sizes: Vec<u64> = r
        .rows
        .iter()
        .filter(|row| is_sweep_point(row))
        .filter_map(|row| param_u64(row, "bytes"))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    writeln!(
        h,
        "<table class=\"device-latency\"><caption>random read at QD1: p50 latency (µs, median of the repeats) per block size</caption><thead><tr><th class=\"l\">block size</th>"
    )?;
    for (kind, method) in &columns {
        writeln!(
            h,
            "<th>{}<br><span class=\"muted\">{} file</span></th>",
            escape(method.name()),
            escape(kind.name())
        )?;
    }
    writeln!(h, "</tr></thead><tbody>")?;
    let mut rounded_up = false;
    for size in sizes {
        write!(
            h,
            "<tr><td class=\"l\">{}</td>",
            crate::randread::size_label(size)
        )?;
        for (kind, method) in &columns {
            let config = row_config(*kind, *method);
            let row = r.rows.iter().find(|row| {
                is_sweep_point(row) && row.config == config && param_u64(row, "bytes") == Some(size)
            });
            match row.and_then(|row| Some((row, *row.metrics.get("lat_p50_us")?))) {
                Some((row, v)) => {
                    let mark = if param_u64(row, "read_bytes").is_some_and(|b| b > size) {
                        rounded_up = true;
                        "*"
                    } else {
                        ""
                    };
                    write!(h, "<td>{}{mark}</td>", format_value(v))?;
                }
                None => write!(h, "<td class=\"muted\">–</td>")?,
            }
        }
        writeln!(h, "</tr>")?;
    }
    writeln!(h, "</tbody></table>")?;
    if rounded_up {
        writeln!(
            h,
            "<p class=\"muted\">* an O_DIRECT read of one aligned 4 KiB block (the least O_DIRECT can read).</p>"
        )?;
    }
    Ok(())
}

/// The fitted line per (file, method), beside the sequential read line.
fn fit_table(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let fits: Vec<&Row> = r
        .rows
        .iter()
        .filter(|row| row.engine == ROW_ENGINE && row.case == FIT_CASE)
        .collect();
    if fits.is_empty() {
        return Ok(());
    }
    let read_line = r.device_line.as_ref().map(|l| l.read_mib_s);
    writeln!(
        h,
        "<table class=\"device-fit\"><caption>latency = a + bytes ÷ bandwidth, fitted over sizes ≥ {} KiB (least squares of the relative error on the p50s, per repeat; median min–max)</caption><thead><tr><th class=\"l\">file</th><th class=\"l\">method</th><th>fixed cost a<br><span class=\"muted\">µs</span></th><th>bandwidth<br><span class=\"muted\">MiB/s</span></th><th>bandwidth ÷ sequential read line</th></tr></thead><tbody>",
        FIT_BYTES_MIN >> 10
    )?;
    for row in fits {
        write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            escape(param_str(row, "file").unwrap_or("")),
            escape(param_str(row, "method").unwrap_or(""))
        )?;
        for key in ["fit_intercept_us", "fit_mib_s"] {
            match row.metrics.get(key) {
                Some(v) => write!(h, "<td>{}</td>", figure_with_spread(row, key, *v))?,
                None => write!(h, "<td class=\"muted\">no fit</td>")?,
            }
        }
        match (row.metrics.get("fit_mib_s"), read_line) {
            (Some(bw), Some(line)) if line > 0.0 => {
                write!(h, "<td>{}×</td>", format_value(bw / line))?
            }
            _ => write!(h, "<td class=\"muted\">–</td>")?,
        }
        writeln!(h, "</tr>")?;
    }
    writeln!(h, "</tbody></table>")?;
    Ok(())
}

/// The summary's headline for the device experiment (HTML): the 4 KiB
/// random-read latency of the filled file per method (the device line's
/// first), fio's beside it, and the fitted direct-read bandwidth. `None`
/// without a sweep.
pub fn summary_headline(r: &ExperimentResult) -> Option<String> {
    let line = r.device_line.as_ref()?;
    let latency_ns = line.read_4k_latency_ns?;
    let case = point_case(LINE_READ_BYTES);
    let p50 = |config: &str, engine: &str| {
        r.rows
            .iter()
            .find(|row| row.case == case && row.engine == engine && row.config == config)
            .and_then(|row| row.metrics.get("lat_p50_us").copied())
    };
    let mut text = format!(
        "4 KiB random read at QD1, p50, filled file: {} <b>{}</b> µs",
        Method::IoUringDirectFixed.name(),
        format_value(latency_ns / 1e3)
    );
    for method in [Method::Psync, Method::IoUring] {
        if let Some(v) = p50(&row_config(FileKind::Filled, method), ROW_ENGINE) {
            write!(text, ", {} {} µs", method.name(), format_value(v)).ok()?;
        }
    }
    if let Some(fio) = line.fio_read_4k_latency_ns {
        write!(text, " (fio: {} µs)", format_value(fio / 1e3)).ok()?;
    }
    let fit = r.rows.iter().find(|row| {
        row.case == FIT_CASE
            && row.config == row_config(FileKind::Filled, Method::IoUringDirectFixed)
    });
    if let Some(bw) = fit.and_then(|row| row.metrics.get("fit_mib_s")) {
        write!(
            text,
            "<br>fitted O_DIRECT bandwidth above 4 KiB: <b>{}</b> MiB/s",
            format_value(*bw)
        )
        .ok()?;
    }
    Some(text)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::randread::{fit_row, point_row, LatencyFit, LatencySummary};
    use crate::results::tests::sample;

    fn summary(p50_us: u64) -> LatencySummary {
        LatencySummary {
            reads: 10,
            mean_ns: p50_us as f64 * 1100.0,
            p50_ns: p50_us * 1000,
            p99_ns: p50_us * 2000,
            p999_ns: p50_us * 3000,
        }
    }

    /// The sequential rows and a sweep of 1 B, 4 KiB and 1 MiB.
    pub(crate) fn device_result() -> ExperimentResult {
        let mut r = sample("device");
        r.rows = vec![
            Row::new("sequential read 1 MiB", "lab probe", "O_DIRECT psync")
                .sampled("mib_s", &[390.0, 400.0, 410.0]),
        ];
        for kind in FileKind::ALL {
            for method in Method::ALL {
                for (size, us) in [(1usize, 50), (4096, 60), (1 << 20, 400)] {
                    let us = if kind == FileKind::Unwritten {
                        us / 10
                    } else {
                        us
                    };
                    r.rows.push(point_row(kind, method, size, &summary(us)));
                }
            }
        }
        for kind in FileKind::ALL {
            for method in Method::ALL {
                r.rows.push(fit_row(
                    kind,
                    method,
                    Some(LatencyFit {
                        intercept_ns: 59_000.0,
                        bandwidth_bytes_per_s: 3.0 * 1024.0 * 1024.0 * 1024.0,
                    }),
                ));
            }
        }
        r.device_line.as_mut().unwrap().read_4k_latency_ns = Some(60_000.0);
        r.device_line.as_mut().unwrap().fio_read_4k_latency_ns = Some(65_000.0);
        r
    }

    #[test]
    fn the_table_keeps_sequential_4k_and_fit_rows_only() {
        let r = device_result();
        let rows = headline_rows(&r.rows);
        // 1 sequential + 6 at 4 KiB + 6 fits.
        assert_eq!(rows.len(), 13);
        assert!(rows.iter().all(|row| !row.case.ends_with(" 1 B")));
        assert!(is_sweep_point(&r.rows[1]) && !is_sweep_point(&r.rows[0]));
        assert!(!rows
            .iter()
            .any(|row| row.case.ends_with(" 1 MiB") && is_sweep_point(row)));
    }

    #[test]
    fn latency_section_has_two_log_log_plots_and_both_tables() {
        let mut h = String::new();
        write_latency(&mut h, &device_result()).unwrap();
        assert_eq!(h.matches("<svg").count(), 2);
        assert!(h.contains("Block size (bytes), log scale"));
        assert!(h.contains("Latency p50 (µs), log scale"));
        assert!(h.contains("Latency p99 (µs), log scale"));
        // 6 series × 3 points per plot.
        assert_eq!(h.matches("<circle").count(), 2 * 6 * 3);
        let table = &h[h.find("<table class=\"device-latency\"").unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        // 3 sizes; the 1 B direct reads are marked as 4 KiB reads.
        assert_eq!(table.matches("<tr><td class=\"l\">").count(), 3);
        assert_eq!(table.matches("<td>50.0*</td>").count(), 1);
        assert_eq!(table.matches("<td>5.00*</td>").count(), 1);
        assert!(h.contains("an O_DIRECT read of one aligned 4 KiB block"));
        // The fit: 3 GiB/s = 3072 MiB/s, 7.68× the 400 MiB/s read line.
        let fit = &h[h.find("<table class=\"device-fit\"").unwrap()..];
        assert_eq!(fit.matches("<td>3072</td>").count(), 6);
        assert_eq!(fit.matches("<td>7.68×</td>").count(), 6);
        assert_eq!(fit.matches("<td>59.0</td>").count(), 6);
    }

    #[test]
    fn the_summary_headline_names_the_4k_latency_and_the_fit() {
        let text = summary_headline(&device_result()).unwrap();
        assert_eq!(
            text,
            "4 KiB random read at QD1, p50, filled file: io_uring+direct+fixed <b>60.0</b> µs, psync 60.0 µs, io_uring 60.0 µs (fio: 65.0 µs)<br>fitted O_DIRECT bandwidth above 4 KiB: <b>3072</b> MiB/s"
        );
        // Results without a sweep have no headline and no section.
        let mut old = sample("device");
        old.device_line.as_mut().unwrap().read_4k_latency_ns = None;
        assert_eq!(summary_headline(&old), None);
        let mut h = String::new();
        write_latency(&mut h, &old).unwrap();
        assert!(h.is_empty());
    }
}
