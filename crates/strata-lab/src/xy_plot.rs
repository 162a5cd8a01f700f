//! Line charts for the report (plotters' SVG backend, like
//! [`crate::plot`]'s bar charts): one line of points per series, with
//! optional dashed horizontal reference lines, in two shapes: a log-log
//! chart ([`log_log_chart_svg`]: the device experiment's latency per block
//! size) and a chart against the iteration, y linear or logarithmic
//! ([`iter_chart_svg`]: the phases experiment). Both draw their lines and
//! legend with the same code.
//!
//! Invariants: both axes are labelled, with their unit, and a log axis says
//! "log scale"; only points a chart's axes can show are drawn (finite, and
//! positive on a log axis); a log-log chart with no such point is an error, an
//! iteration chart without one is left out (`None`), never an empty frame.
//! Series are coloured from [`crate::plot::PALETTE`] by the index the
//! caller gives, so that related series (one method on two files, one
//! engine's p50 and p99) share a colour and differ by dashing; reference
//! lines are black, then grey.

use anyhow::{bail, Result};
use plotters::prelude::*;

use crate::plot::{format_tick, log_ticks, plot_error, RefLine, PALETTE};

const WIDTH_PX: u32 = 960;
const HEIGHT_PX: u32 = 440;
const LEGEND_WIDTH_PX: u32 = 260;
/// Headroom around the drawn values on a log axis (a factor).
const LOG_MARGIN: f64 = 1.4;
/// Headroom above the highest value on a linear axis (a factor).
const LINEAR_HEADROOM: f64 = 1.12;

/// One line of a chart.
pub struct XySeries {
    pub name: String,
    /// `(x, y)`, in x order.
    pub points: Vec<(f64, f64)>,
    /// Index into the palette.
    pub color: usize,
    pub dashed: bool,
}

/// How the x axis is labelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XTicks {
    /// Bytes: labels at powers of 16 (`1 B`, `16 B`, … `4 KiB`, …), grid at
    /// powers of 2.
    BinaryBytes,
    /// Labels at 1, 2, 5 × 10^k (as the y axis).
    Decimal,
}

/// A chart with logarithmic x and y axes.
pub struct LogLogChart<'a> {
    pub title: &'a str,
    /// What x is, with its unit, e.g. `Block size (bytes)`.
    pub x_label: &'a str,
    /// What y is, with its unit, e.g. `Latency p50 (µs)`.
    pub y_label: &'a str,
    pub x_ticks: XTicks,
    pub series: &'a [XySeries],
    pub ref_lines: &'a [RefLine],
}

fn drawable(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.0 > 0.0 && p.1.is_finite() && p.1 > 0.0
}

/// The ticks of a byte axis from `min` to `max`: labelled at powers of 16,
/// grid at powers of 2.
pub fn binary_ticks(min: f64, max: f64) -> (Vec<f64>, Vec<f64>) {
    assert!(min > 0.0 && min < max, "byte axis {min}..{max}");
    let mut labelled = Vec::new();
    let mut grid = Vec::new();
    for k in min.log2().floor() as i32..=max.log2().ceil() as i32 {
        let v = 2f64.powi(k);
        if v < min * (1.0 - 1e-9) || v > max * (1.0 + 1e-9) {
            continue;
        }
        grid.push(v);
        if k.rem_euclid(4) == 0 {
            labelled.push(v);
        }
    }
    (labelled, grid)
}

/// A byte count as `512 B`, `4 KiB`, `1 MiB` (fractions of a byte as a
/// plain number).
fn bytes_tick(v: f64) -> String {
    if v >= 1.0 && v.fract() == 0.0 {
        crate::randread::size_label(v as u64)
    } else {
        format_tick(v)
    }
}

/// Renders the chart as an `<svg>` element.
pub fn log_log_chart_svg(chart: &LogLogChart<'_>) -> Result<String> {
    let points = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| drawable(p));
    let (mut x_min, mut x_max, mut y_min, mut y_max) =
        (f64::INFINITY, 0.0f64, f64::INFINITY, 0.0f64);
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if x_max == 0.0 {
        bail!(
            "plot {:?}: no point to draw on a log-log chart",
            chart.title
        );
    }
    for line in chart.ref_lines.iter().filter(|l| l.value > 0.0) {
        y_min = y_min.min(line.value);
        y_max = y_max.max(line.value);
    }
    let (x_lo, x_hi) = (x_min / LOG_MARGIN, x_max * LOG_MARGIN);
    // A whole decade below the smallest value, as the bar charts do.
    let y_lo = 10f64.powi((y_min / LOG_MARGIN).log10().floor() as i32);
    let y_hi = y_max * LOG_MARGIN;
    let (x_labelled, x_grid) = match chart.x_ticks {
        XTicks::BinaryBytes => binary_ticks(x_lo, x_hi),
        XTicks::Decimal => log_ticks(x_lo, x_hi),
    };
    let (y_labelled, y_grid) = log_ticks(y_lo, y_hi);
    let x_ticks = chart.x_ticks;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (plot_area, legend_area) = root.split_horizontally(WIDTH_PX - LEGEND_WIDTH_PX);
        let x_spec = (x_lo..x_hi)
            .log_scale()
            .with_key_points(x_labelled)
            .with_light_points(x_grid);
        let y_spec = (y_lo..y_hi)
            .log_scale()
            .with_key_points(y_labelled)
            .with_light_points(y_grid);
        let mut ctx = ChartBuilder::on(&plot_area)
            .caption(chart.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(70)
            .build_cartesian_2d(x_spec, y_spec)
            .map_err(plot_error)?;
        ctx.configure_mesh()
            .x_desc(format!("{}, log scale", chart.x_label))
            .y_desc(format!("{}, log scale", chart.y_label))
            .x_label_formatter(&|v| match x_ticks {
                XTicks::BinaryBytes => bytes_tick(*v),
                XTicks::Decimal => format_tick(*v),
            })
            .y_label_formatter(&|v| format_tick(*v))
            .draw()
            .map_err(plot_error)?;

        draw_lines(
            &mut ctx,
            chart.series,
            chart.ref_lines,
            (x_lo, x_hi),
            &drawable,
        )?;
        legend(&legend_area, chart.series, chart.ref_lines)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// A chart of figures against the iteration (x linear, whole iterations
/// labelled), y linear or logarithmic.
pub struct IterChart<'a> {
    pub title: &'a str,
    /// The figure and its unit, e.g. `Latency p50 (µs)`.
    pub y_label: &'a str,
    /// `(iteration, value)` points.
    pub series: &'a [XySeries],
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
    let x_labels = x_max as usize + 1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (plot_area, legend_area) = root.split_horizontally(WIDTH_PX - LEGEND_WIDTH_PX);
        let mut builder = ChartBuilder::on(&plot_area);
        builder
            .caption(chart.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(70);
        // The two y scales are different coordinate types in plotters.
        if log {
            let y_lo = 10f64.powi((y_min / LOG_MARGIN).log10().floor() as i32);
            let y_hi = y_max * LOG_MARGIN;
            let (labelled, grid) = log_ticks(y_lo, y_hi);
            let y_spec = (y_lo..y_hi)
                .log_scale()
                .with_key_points(labelled)
                .with_light_points(grid);
            let mut ctx = builder
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
            draw_lines(
                &mut ctx,
                chart.series,
                chart.ref_lines,
                (x_lo, x_hi),
                &drawable,
            )?;
        } else {
            let y_hi = if y_max > 0.0 {
                y_max * LINEAR_HEADROOM
            } else {
                1.0
            };
            let mut ctx = builder
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
            draw_lines(
                &mut ctx,
                chart.series,
                chart.ref_lines,
                (x_lo, x_hi),
                &drawable,
            )?;
        }
        legend(&legend_area, chart.series, chart.ref_lines)?;
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

/// Colour of the `i`th reference line: black, then grey.
fn ref_color(i: usize) -> RGBColor {
    if i == 0 {
        BLACK
    } else {
        RGBColor(0x88, 0x88, 0x88)
    }
}

/// Draws each series' drawable points as a line with dots, and the
/// reference lines across `x_lo..x_hi`.
fn draw_lines<'a, DB, CT>(
    ctx: &mut ChartContext<'a, DB, CT>,
    series: &[XySeries],
    ref_lines: &[RefLine],
    (x_lo, x_hi): (f64, f64),
    drawable: &dyn Fn(&(f64, f64)) -> bool,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    for s in series {
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
    for (i, line) in ref_lines.iter().enumerate() {
        if !drawable(&(x_lo, line.value)) {
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

/// The legend, in its own column right of the plot: a swatch and name per
/// series, then per reference line.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[XySeries],
    ref_lines: &[RefLine],
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
    for s in series {
        swatch(y, PALETTE[s.color % PALETTE.len()], 2, s.dashed, &s.name)?;
        y += 20;
    }
    for (i, line) in ref_lines.iter().enumerate() {
        swatch(y, ref_color(i), 1, true, &line.label)?;
        y += 20;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ticks_label_powers_of_16_and_grid_powers_of_2() {
        let (labelled, grid) = binary_ticks(0.7, 6.0e6);
        assert_eq!(labelled, vec![1.0, 16.0, 256.0, 4096.0, 65536.0, 1048576.0]);
        assert_eq!(grid.len(), 23, "1 B … 4 MiB");
        assert_eq!(bytes_tick(4096.0), "4 KiB");
        assert_eq!(bytes_tick(1.0), "1 B");
    }

    #[test]
    fn chart_has_both_axes_labelled_log_and_a_legend_entry_per_series() {
        let series = vec![
            XySeries {
                name: "psync, filled".to_string(),
                points: vec![(1.0, 60.0), (4096.0, 61.0), (1048576.0, 1300.0)],
                color: 0,
                dashed: false,
            },
            XySeries {
                name: "psync, unwritten".to_string(),
                // The zero is not drawn on a log axis.
                points: vec![(1.0, 2.0), (4096.0, 0.0), (1048576.0, 300.0)],
                color: 0,
                dashed: true,
            },
        ];
        let refs = vec![RefLine {
            label: "2× device".to_string(),
            value: 120.0,
        }];
        let svg = log_log_chart_svg(&LogLogChart {
            title: "latency",
            x_label: "Block size (bytes)",
            y_label: "Latency p50 (µs)",
            x_ticks: XTicks::BinaryBytes,
            series: &series,
            ref_lines: &refs,
        })
        .unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("Block size (bytes), log scale"));
        assert!(svg.contains("Latency p50 (µs), log scale"));
        assert!(svg.contains("psync, filled") && svg.contains("psync, unwritten"));
        assert!(svg.contains("2× device"));
        assert!(svg.contains("4 KiB") && svg.contains("1 MiB"));
        // 5 drawable points, one circle each.
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.to_lowercase().contains("#1f77b4"));
    }

    #[test]
    fn a_chart_without_a_drawable_point_is_an_error() {
        let series = vec![XySeries {
            name: "s".to_string(),
            points: vec![(0.0, 1.0), (1.0, f64::NAN)],
            color: 1,
            dashed: false,
        }];
        let chart = LogLogChart {
            title: "t",
            x_label: "x",
            y_label: "y",
            x_ticks: XTicks::Decimal,
            series: &series,
            ref_lines: &[],
        };
        assert!(log_log_chart_svg(&chart).is_err());
    }

    #[test]
    fn a_chart_draws_lines_reference_lines_and_labels() {
        let series = vec![
            XySeries {
                name: "strata p50".to_string(),
                points: vec![(1.0, 80.0), (2.0, 95.0), (3.0, 120.0)],
                color: 0,
                dashed: false,
            },
            XySeries {
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
