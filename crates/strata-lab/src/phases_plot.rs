//! The phases experiment's part of the report: line charts of a figure
//! against the iteration (linear x axis; y linear or logarithmic), one
//! line per engine, with dashed horizontal reference lines at 1× and 2×
//! the device's 4 KiB random-read latency; and the per-phase plots and
//! headline table built from a phases result.
//!
//! Invariants: both axes are labelled with their unit, a log y axis says
//! so; on a log axis only points > 0 are drawn; a chart with no point to
//! draw is left out (returns `None`), not drawn empty. Engines keep one
//! colour across every chart (their order in the results).

use std::fmt::Write as _;

use anyhow::Result;
use plotters::prelude::*;

use crate::phases::{parse_case, Phase};
use crate::plot::{format_tick, format_value, log_ticks, plot_error, RefLine, PALETTE};
use crate::report::escape;
use crate::results::ExperimentResult;

const WIDTH_PX: u32 = 900;
const HEIGHT_PX: u32 = 420;
const LEGEND_WIDTH_PX: u32 = 250;
/// Headroom above the highest point: a factor on a log axis, a fraction
/// of the range on a linear one.
const LOG_MARGIN: f64 = 1.5;
const LINEAR_HEADROOM: f64 = 1.12;

/// One line: `(iteration, value)` points in iteration order.
pub struct IterSeries {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Index into the palette.
    pub color: usize,
    pub dashed: bool,
}

pub struct IterChart<'a> {
    pub title: &'a str,
    /// The figure and its unit, e.g. `Latency p50 (µs)`.
    pub y_label: &'a str,
    pub series: &'a [IterSeries],
    pub ref_lines: &'a [RefLine],
    pub log_y: bool,
}

/// Renders the chart as an `<svg>` element; `None` when no point can be
/// drawn.
pub fn iter_chart_svg(chart: &IterChart<'_>) -> Result<Option<String>> {
    let log = chart.log_y;
    let drawable = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!log || p.1 > 0.0);
    let points: Vec<(f64, f64)> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(drawable)
        .collect();
    if points.is_empty() {
        return Ok(None);
    }
    let x_max = points.iter().map(|p| p.0).fold(1.0f64, f64::max);
    let mut y_min = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let mut y_max = points.iter().map(|p| p.1).fold(0.0f64, f64::max);
    for line in chart.ref_lines.iter().filter(|l| l.value > 0.0) {
        y_min = y_min.min(line.value);
        y_max = y_max.max(line.value);
    }
    let (x_lo, x_hi) = (0.5, x_max + 0.5);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (plot_area, legend_area) = root.split_horizontally(WIDTH_PX - LEGEND_WIDTH_PX);
        let builder = |area| {
            let mut b = ChartBuilder::on(area);
            b.caption(chart.title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(44)
                .y_label_area_size(70);
            b
        };
        let x_labels = x_max as usize + 1;
        if log {
            let y_lo = 10f64.powi((y_min / LOG_MARGIN).log10().floor() as i32);
            let y_hi = y_max * LOG_MARGIN;
            let (labelled, grid) = log_ticks(y_lo, y_hi);
            let y_spec = (y_lo..y_hi)
                .log_scale()
                .with_key_points(labelled)
                .with_light_points(grid);
            let mut ctx = builder(&plot_area)
                .build_cartesian_2d(x_lo..x_hi, y_spec)
                .map_err(plot_error)?;
            ctx.configure_mesh()
                .x_desc("iteration")
                .y_desc(format!("{}, log scale", chart.y_label))
                .x_labels(x_labels)
                .x_label_formatter(&|v| iteration_tick(*v))
                .y_label_formatter(&|v| format_tick(*v))
                .draw()
                .map_err(plot_error)?;
            draw_lines(&mut ctx, chart, (x_lo, x_hi), &drawable)?;
        } else {
            let y_hi = if y_max > 0.0 {
                y_max * LINEAR_HEADROOM
            } else {
                1.0
            };
            let mut ctx = builder(&plot_area)
                .build_cartesian_2d(x_lo..x_hi, 0f64..y_hi)
                .map_err(plot_error)?;
            ctx.configure_mesh()
                .x_desc("iteration")
                .y_desc(chart.y_label)
                .x_labels(x_labels)
                .x_label_formatter(&|v| iteration_tick(*v))
                .y_label_formatter(&|v| format_tick(*v))
                .draw()
                .map_err(plot_error)?;
            draw_lines(&mut ctx, chart, (x_lo, x_hi), &drawable)?;
        }
        legend(&legend_area, chart)?;
        root.present().map_err(plot_error)?;
    }
    Ok(Some(svg))
}

/// Whole iterations only.
fn iteration_tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-6 && v >= 1.0 {
        format!("{v:.0}")
    } else {
        String::new()
    }
}

/// Greys of the reference lines: 1× black, 2× grey.
fn ref_color(i: usize) -> RGBColor {
    if i == 0 {
        BLACK
    } else {
        RGBColor(0x88, 0x88, 0x88)
    }
}

fn draw_lines<'a, DB, CT>(
    ctx: &mut ChartContext<'a, DB, CT>,
    chart: &IterChart<'_>,
    (x_lo, x_hi): (f64, f64),
    drawable: &dyn Fn(&(f64, f64)) -> bool,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    for s in chart.series {
        let color = PALETTE[s.color % PALETTE.len()];
        let style = ShapeStyle::from(&color).stroke_width(2);
        let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(drawable).collect();
        if s.dashed {
            ctx.draw_series(DashedLineSeries::new(pts.clone(), 7, 4, style))
                .map_err(plot_error)?;
        } else {
            ctx.draw_series(LineSeries::new(pts.clone(), style))
                .map_err(plot_error)?;
        }
        ctx.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(plot_error)?;
    }
    for (i, line) in chart.ref_lines.iter().enumerate() {
        if !drawable(&(1.0, line.value)) {
            continue;
        }
        let style = ShapeStyle::from(&ref_color(i)).stroke_width(1);
        ctx.draw_series(DashedLineSeries::new(
            vec![(x_lo, line.value), (x_hi, line.value)],
            8,
            5,
            style,
        ))
        .map_err(plot_error)?;
    }
    Ok(())
}

fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &IterChart<'_>,
) -> Result<()> {
    let text = ("sans-serif", 13).into_font().color(&BLACK);
    let mut y = 40;
    let swatch = |y: i32, color: RGBColor, width: u32, dashed: bool, label: &str| {
        let style = ShapeStyle::from(&color).stroke_width(width);
        let segments: &[(i32, i32)] = if dashed {
            &[(6, 12), (18, 26)]
        } else {
            &[(6, 26)]
        };
        for &(a, b) in segments {
            area.draw(&PathElement::new(vec![(a, y + 6), (b, y + 6)], style))
                .map_err(plot_error)?;
        }
        area.draw(&Text::new(label.to_string(), (32, y), text.clone()))
            .map_err(plot_error)
    };
    for s in chart.series {
        swatch(y, PALETTE[s.color % PALETTE.len()], 2, s.dashed, &s.name)?;
        y += 20;
    }
    for (i, line) in chart.ref_lines.iter().enumerate() {
        swatch(y, ref_color(i), 1, true, &line.label)?;
        y += 20;
    }
    Ok(())
}

/// Engines in first-seen order: their colour is their index.
fn engines(r: &ExperimentResult) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for row in &r.rows {
        if !out.contains(&row.engine) {
            out.push(row.engine.clone());
        }
    }
    out
}

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

/// The device's 4 KiB random-read latency the run used, µs.
pub fn device_4k_us(r: &ExperimentResult) -> Option<f64> {
    r.options
        .get("device_read_4k_latency_ns")?
        .as_f64()
        .filter(|v| *v > 0.0)
        .map(|ns| ns / 1e3)
}

/// The phases plots: per phase, p50 (solid) and p99 (dashed) latency per
/// engine against the iteration, on a log and a linear axis, with the
/// device lines; then device reads per get (read solid, mixed dashed).
pub fn write_plots(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let engines = engines(r);
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
                series.push(IterSeries {
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
            series.push(IterSeries {
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
/// (p50, p99, each ÷ the device's 4 KiB read), its growth since the first
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
        "<table class=\"phases-headline\" data-experiment=\"{}\"><thead><tr><th class=\"l\">engine</th><th>read p50 (µs)</th><th>p50 ÷ device 4 KiB</th><th>read p99 (µs)</th><th>p99 ÷ device 4 KiB</th><th>p50, p99 growth (last ÷ first iteration)</th><th>device reads per get</th><th>data (MiB)</th></tr></thead><tbody>",
        escape(&r.experiment)
    )?;
    for e in &rows {
        writeln!(
            h,
            "<tr data-engine=\"{0}\"><td class=\"l\">{0}</td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td><td>{5}× / {6}× <span class=\"muted\">(#{7} → #{8})</span></td><td>{9}</td><td>{10}</td></tr>",
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
            e.data_mib.map(format_value).unwrap_or_else(|| "–".to_string()),
        )?;
    }
    writeln!(h, "</tbody></table>")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_draws_lines_reference_lines_and_labels() {
        let series = vec![
            IterSeries {
                name: "strata p50".to_string(),
                points: vec![(1.0, 80.0), (2.0, 95.0), (3.0, 120.0)],
                color: 0,
                dashed: false,
            },
            IterSeries {
                name: "strata p99".to_string(),
                points: vec![(1.0, 300.0), (2.0, 0.0), (3.0, 500.0)],
                color: 0,
                dashed: true,
            },
        ];
        let refs = vec![
            RefLine {
                label: "1× device".to_string(),
                value: 70.0,
            },
            RefLine {
                label: "2× device".to_string(),
                value: 140.0,
            },
        ];
        let chart = |log_y| IterChart {
            title: "t",
            y_label: "Latency (µs)",
            series: &series,
            ref_lines: &refs,
            log_y,
        };
        let log = iter_chart_svg(&chart(true)).unwrap().unwrap();
        assert!(log.contains("Latency (µs), log scale"));
        assert!(log.contains("iteration"));
        assert!(log.contains("1× device") && log.contains("2× device"));
        let linear = iter_chart_svg(&chart(false)).unwrap().unwrap();
        assert!(!linear.contains("log scale"));
        // The zero is drawn on the linear axis only: one more circle.
        assert_eq!(
            linear.matches("<circle").count(),
            log.matches("<circle").count() + 1
        );
        let empty = IterChart {
            series: &[],
            ..chart(true)
        };
        assert!(iter_chart_svg(&empty).unwrap().is_none());
    }
}
