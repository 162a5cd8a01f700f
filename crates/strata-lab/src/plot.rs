//! Inline SVG plots for the report (plotters' SVG backend, no fonts or
//! network needed): grouped bar charts of one metric per case and series,
//! with a dashed horizontal reference line (the device line, or 1× for
//! ratios) where it applies.
//!
//! Every chart labels both axes (the x axis names what the groups are, the y
//! axis the metric and its unit). The y axis turns logarithmic when the
//! positive values drawn span more than [`LOG_SCALE_SPAN_MIN`]× (or when the
//! caller asks for it), and then says so in its label; a bar without a
//! positive value is not drawn on a log axis. A bar whose figure is a median
//! of repeated samples carries a thin min–max whisker.

use std::fmt::Debug;

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Pixels per case on the x axis; the chart is never narrower than
/// [`WIDTH_MIN_PX`].
const CASE_WIDTH_PX: u32 = 170;
const WIDTH_MIN_PX: u32 = 640;
const HEIGHT_PX: u32 = 440;
const LEGEND_WIDTH_PX: u32 = 240;
/// Room under the plot for two lines of case names and the x axis label.
const X_LABEL_AREA_PX: u32 = 52;

/// Positive values spanning more than this factor (largest ÷ smallest) get
/// a log-scale y axis: on a linear one the small bars would be invisible.
pub const LOG_SCALE_SPAN_MIN: f64 = 30.0;
/// Headroom above the tallest bar (or reference line), linear axis.
const LINEAR_HEADROOM: f64 = 1.12;
/// Headroom above the tallest bar, log axis (a factor, so larger).
const LOG_HEADROOM: f64 = 1.6;
/// Up to this many decades a log axis is labelled at 1, 2 and 5 × 10^k;
/// beyond, at the powers of ten only.
const LOG_DECADES_FINE_MAX: f64 = 3.0;

pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// A horizontal reference line (the device line, or 1× on a ratio chart).
pub struct RefLine {
    pub label: String,
    pub value: f64,
}

/// How the y axis is scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YScale {
    /// Logarithmic when the positive values span more than
    /// [`LOG_SCALE_SPAN_MIN`]×, else linear.
    Auto,
    /// Logarithmic whenever there is a positive value to draw (ratios).
    Log,
}

/// One grouped bar chart: `values[series][case]`, `None` where not measured.
pub struct BarChart<'a> {
    pub title: &'a str,
    /// What the groups along the x axis are, e.g. `case`.
    pub x_label: &'a str,
    /// The metric and its unit, e.g. `Throughput (MiB/s)`.
    pub y_label: &'a str,
    pub cases: &'a [String],
    pub series: &'a [String],
    pub values: &'a [Vec<Option<f64>>],
    /// `spreads[series][case]`: the (min, max) of the samples behind a bar,
    /// drawn as a whisker; empty when no figure was repeated.
    pub spreads: &'a [Vec<Option<(f64, f64)>>],
    pub ref_line: Option<RefLine>,
    pub y_scale: YScale,
}

/// The y axis a chart gets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum YAxis {
    /// From 0 to `max`.
    Linear { max: f64 },
    /// From `min` (a power of ten below every value) to `max`; both > 0.
    Log { min: f64, max: f64 },
}

impl BarChart<'_> {
    /// Every finite figure drawn: the bars, their whiskers and the
    /// reference line.
    fn drawn_values(&self) -> Vec<f64> {
        let bars = self.values.iter().flatten().flatten().copied();
        let whiskers = self
            .spreads
            .iter()
            .flatten()
            .flatten()
            .flat_map(|(min, max)| [*min, *max]);
        let line = self.ref_line.iter().map(|l| l.value);
        bars.chain(whiskers)
            .chain(line)
            .filter(|v| v.is_finite())
            .collect()
    }

    /// The y axis: log scale when asked for or when the positive values
    /// span more than [`LOG_SCALE_SPAN_MIN`]×, else linear from 0.
    pub fn y_axis(&self) -> YAxis {
        let values = self.drawn_values();
        let positive = values.iter().copied().filter(|v| *v > 0.0);
        let min_positive = positive.clone().fold(f64::INFINITY, f64::min);
        let max_positive = positive.fold(0.0f64, f64::max);
        let log = max_positive > 0.0
            && match self.y_scale {
                YScale::Log => true,
                YScale::Auto => max_positive / min_positive > LOG_SCALE_SPAN_MIN,
            };
        if log {
            // A whole decade below the smallest bar, so that it is visible
            // and the axis starts at a labelled power of ten.
            let min = 10f64.powi((min_positive / LOG_HEADROOM).log10().floor() as i32);
            let max = max_positive * LOG_HEADROOM;
            assert!(min > 0.0 && min < max, "log axis {min}..{max}");
            return YAxis::Log { min, max };
        }
        let max = values.iter().copied().fold(0.0f64, f64::max);
        YAxis::Linear {
            max: if max > 0.0 {
                max * LINEAR_HEADROOM
            } else {
                1.0
            },
        }
    }
}

/// The ticks of a log axis from `min` to `max`: the labelled ones (1, 2, 5
/// × 10^k over a few decades, else 10^k) and the faint grid (1..9 × 10^k).
/// plotters' own choice labels only the powers of ten, which leaves a short
/// axis with one or two labels.
pub(crate) fn log_ticks(min: f64, max: f64) -> (Vec<f64>, Vec<f64>) {
    assert!(min > 0.0 && min < max, "log axis {min}..{max}");
    let fine = (max / min).log10() <= LOG_DECADES_FINE_MAX;
    let mut labelled = Vec::new();
    let mut grid = Vec::new();
    for k in min.log10().floor() as i32..=max.log10().ceil() as i32 {
        let decade = 10f64.powi(k);
        for m in 1..=9 {
            let v = f64::from(m) * decade;
            // Tolerate rounding at the ends (min is a power of ten).
            if v < min * (1.0 - 1e-9) || v > max {
                continue;
            }
            grid.push(v);
            if m == 1 || (fine && (m == 2 || m == 5)) {
                labelled.push(v);
            }
        }
    }
    (labelled, grid)
}

/// Splits a label into at most two lines of similar length at a space.
fn two_lines(label: &str) -> (String, String) {
    if label.len() <= 22 {
        return (label.to_string(), String::new());
    }
    let mid = label.len() / 2;
    let split = label
        .match_indices(' ')
        .map(|(i, _)| i)
        .min_by_key(|i| (*i as i64 - mid as i64).abs());
    match split {
        Some(i) => (label[..i].to_string(), label[i + 1..].to_string()),
        None => (label.to_string(), String::new()),
    }
}

pub(crate) fn plot_error(e: impl Debug) -> anyhow::Error {
    anyhow!("plot: {e:?}")
}

/// Renders the chart as an `<svg>` element.
pub fn bar_chart_svg(chart: &BarChart<'_>) -> Result<String> {
    assert_eq!(
        chart.values.len(),
        chart.series.len(),
        "a row of values per series"
    );
    assert!(
        chart.spreads.is_empty() || chart.spreads.len() == chart.series.len(),
        "no spreads or a row of spreads per series"
    );
    let n_cases = chart.cases.len().max(1);
    let width = (CASE_WIDTH_PX * n_cases as u32 + LEGEND_WIDTH_PX + 80).max(WIDTH_MIN_PX);
    assert!(width > LEGEND_WIDTH_PX);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (plot_area, legend_area) = root.split_horizontally(width - LEGEND_WIDTH_PX);
        match chart.y_axis() {
            YAxis::Linear { max } => {
                let y_desc = chart.y_label.to_string();
                draw_plot(&plot_area, chart, 0f64..max, 0.0, &y_desc)?;
            }
            YAxis::Log { min, max } => {
                let y_desc = format!("{}, log scale", chart.y_label);
                let (labelled, grid) = log_ticks(min, max);
                let y_spec = (min..max)
                    .log_scale()
                    .with_key_points(labelled)
                    .with_light_points(grid);
                draw_plot(&plot_area, chart, y_spec, min, &y_desc)?;
            }
        }

        // The legend, in its own column right of the plot.
        let text = ("sans-serif", 13).into_font().color(&BLACK);
        for (s, name) in chart.series.iter().enumerate() {
            let y = 40 + 22 * s as i32;
            let color = PALETTE[s % PALETTE.len()];
            legend_area
                .draw(&Rectangle::new([(8, y), (22, y + 12)], color.filled()))
                .map_err(plot_error)?;
            legend_area
                .draw(&Text::new(name.clone(), (30, y), text.clone()))
                .map_err(plot_error)?;
        }
        let mut y = 40 + 22 * chart.series.len() as i32 + 6;
        if let Some(line) = &chart.ref_line {
            legend_area
                .draw(&PathElement::new(
                    vec![(8, y), (22, y)],
                    ShapeStyle::from(&BLACK).stroke_width(2),
                ))
                .map_err(plot_error)?;
            legend_area
                .draw(&Text::new(line.label.clone(), (30, y - 6), text.clone()))
                .map_err(plot_error)?;
            y += 22;
        }
        if chart.spreads.iter().flatten().any(Option::is_some) {
            legend_area
                .draw(&PathElement::new(
                    vec![(15, y - 6), (15, y + 6)],
                    whisker_style(),
                ))
                .map_err(plot_error)?;
            legend_area
                .draw(&Text::new("min–max of the samples", (30, y - 6), text))
                .map_err(plot_error)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn whisker_style() -> ShapeStyle {
    ShapeStyle::from(&BLACK).stroke_width(1)
}

/// Draws axes, case names, bars, whiskers and the reference line on
/// `area`, with `y_spec` as the y axis (linear or log); `y_floor` is the
/// bottom of that axis, where the bars start.
fn draw_plot<Y>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &BarChart<'_>,
    y_spec: Y,
    y_floor: f64,
    y_desc: &str,
) -> Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let n_cases = chart.cases.len().max(1);
    let n_series = chart.series.len().max(1);
    // A log axis starts above 0 and can only show positive figures.
    let log = y_floor > 0.0;
    let drawable = |v: f64| v.is_finite() && (!log || v > 0.0);
    let mut ctx = ChartBuilder::on(area)
        .caption(chart.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(X_LABEL_AREA_PX)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n_cases as f64, y_spec)
        .map_err(plot_error)?;
    ctx.configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc(chart.x_label)
        .y_desc(y_desc)
        .y_label_formatter(&|v| format_tick(*v))
        .draw()
        .map_err(plot_error)?;

    // Case names under each group, on two lines.
    let label_style = ("sans-serif", 12).into_font().color(&BLACK);
    for (i, case) in chart.cases.iter().enumerate() {
        let (a, b) = two_lines(case);
        let x = i as f64 + 0.5;
        let anchor = plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        );
        let style = label_style.clone().pos(anchor);
        ctx.draw_series(std::iter::once(
            EmptyElement::at((x, y_floor))
                + Text::new(a, (0, 6), style.clone())
                + Text::new(b, (0, 21), style),
        ))
        .map_err(plot_error)?;
    }

    let group_width = 0.8;
    let bar_width = group_width / n_series as f64;
    for (s, _name) in chart.series.iter().enumerate() {
        let color = PALETTE[s % PALETTE.len()];
        let bar_x0 = |c: usize| c as f64 + 0.1 + s as f64 * bar_width;
        let bars: Vec<Rectangle<(f64, f64)>> = chart.values[s]
            .iter()
            .enumerate()
            .filter_map(|(c, v)| {
                let v = (*v).filter(|v| drawable(*v))?;
                let x0 = bar_x0(c);
                Some(Rectangle::new(
                    [(x0, y_floor), (x0 + bar_width * 0.92, v)],
                    color.filled(),
                ))
            })
            .collect();
        ctx.draw_series(bars).map_err(plot_error)?;

        // Whiskers: a vertical line from min to max with short caps.
        let Some(spreads) = chart.spreads.get(s) else {
            continue;
        };
        let whiskers: Vec<PathElement<(f64, f64)>> = spreads
            .iter()
            .enumerate()
            .filter(|(c, _)| {
                chart.values[s]
                    .get(*c)
                    .copied()
                    .flatten()
                    .is_some_and(drawable)
            })
            .filter_map(|(c, spread)| {
                let (min, max) = (*spread)?;
                if !drawable(max) {
                    return None;
                }
                let min = if drawable(min) { min } else { y_floor };
                let mid = bar_x0(c) + bar_width * 0.46;
                let cap = bar_width * 0.15;
                Some([
                    PathElement::new(vec![(mid, min), (mid, max)], whisker_style()),
                    PathElement::new(vec![(mid - cap, min), (mid + cap, min)], whisker_style()),
                    PathElement::new(vec![(mid - cap, max), (mid + cap, max)], whisker_style()),
                ])
            })
            .flatten()
            .collect();
        ctx.draw_series(whiskers).map_err(plot_error)?;
    }
    if let Some(line) = chart.ref_line.as_ref().filter(|l| drawable(l.value)) {
        let style = ShapeStyle::from(&BLACK).stroke_width(2);
        ctx.draw_series(DashedLineSeries::new(
            vec![(0.0, line.value), (n_cases as f64, line.value)],
            8,
            5,
            style,
        ))
        .map_err(plot_error)?;
    }
    Ok(())
}

/// An axis tick: whole numbers without decimals (`50`, not `50.0`), the
/// others as [`format_value`].
pub(crate) fn format_tick(v: f64) -> String {
    if v.abs() < 1e7 && v == v.round() {
        format!("{v:.0}")
    } else {
        format_value(v)
    }
}

/// A figure with 3 significant digits, no exponent for ordinary values.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 1e7 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if (0.99..1.0).contains(&a) {
        // Keep "almost all" distinguishable from "all" (e.g. puts recovered).
        format!("{v:.4}")
    } else if a >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_chart_is_an_svg_with_a_bar_per_value() {
        let cases = vec![
            "100 B Sequential delta=Yes".to_string(),
            "8 KiB".to_string(),
        ];
        let series = vec![
            "strata DirectRw".to_string(),
            "rocksdb Buffered".to_string(),
        ];
        let values = vec![vec![Some(100.0), Some(200.0)], vec![Some(50.0), None]];
        let svg = bar_chart_svg(&BarChart {
            title: "ingest",
            x_label: "case",
            y_label: "Throughput (MiB/s)",
            cases: &cases,
            series: &series,
            values: &values,
            spreads: &[],
            ref_line: Some(RefLine {
                label: "device 500 MiB/s".to_string(),
                value: 500.0,
            }),
            y_scale: YScale::Auto,
        })
        .unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("strata DirectRw"));
        assert!(svg.contains("device 500 MiB/s"));
        assert!(svg.matches("<rect").count() >= 3);
        // Both axes labelled; 50..500 spans 10×: linear.
        assert!(svg.contains("\ncase\n</text>"));
        assert!(svg.contains("\nThroughput (MiB/s)\n</text>"));
        assert!(!svg.contains("log scale"));
        assert!(
            svg.to_lowercase().contains("#1f77b4"),
            "first palette colour"
        );
    }

    fn chart<'a>(
        cases: &'a [String],
        series: &'a [String],
        values: &'a [Vec<Option<f64>>],
        spreads: &'a [Vec<Option<(f64, f64)>>],
        y_scale: YScale,
    ) -> BarChart<'a> {
        BarChart {
            title: "t",
            x_label: "case",
            y_label: "Latency (µs)",
            cases,
            series,
            values,
            spreads,
            ref_line: None,
            y_scale,
        }
    }

    #[test]
    fn values_spanning_more_than_the_limit_get_a_log_axis() {
        let cases = vec!["a".to_string(), "b".to_string()];
        let series = vec!["s".to_string()];
        let narrow = vec![vec![Some(100.0), Some(200.0)]];
        assert!(matches!(
            chart(&cases, &series, &narrow, &[], YScale::Auto).y_axis(),
            YAxis::Linear { max } if (max - 224.0).abs() < 1e-9
        ));
        // 29× stays linear, 1000× turns log from the decade below 1.
        let span_29 = vec![vec![Some(1.0), Some(29.0)]];
        assert!(matches!(
            chart(&cases, &series, &span_29, &[], YScale::Auto).y_axis(),
            YAxis::Linear { .. }
        ));
        let wide = vec![vec![Some(1.0), Some(1000.0)]];
        assert_eq!(
            chart(&cases, &series, &wide, &[], YScale::Auto).y_axis(),
            YAxis::Log {
                min: 0.1,
                max: 1600.0
            }
        );
        let svg = bar_chart_svg(&chart(&cases, &series, &wide, &[], YScale::Auto)).unwrap();
        assert!(svg.contains("Latency (µs), log scale"));
        // Asked for: log even on a narrow span; nothing positive: linear.
        assert!(matches!(
            chart(&cases, &series, &narrow, &[], YScale::Log).y_axis(),
            YAxis::Log { .. }
        ));
        let none = vec![vec![None, Some(0.0)]];
        assert_eq!(
            chart(&cases, &series, &none, &[], YScale::Log).y_axis(),
            YAxis::Linear { max: 1.0 }
        );
    }

    #[test]
    fn zero_is_not_drawn_on_a_log_axis() {
        let cases = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let series = vec!["s".to_string()];
        let with_zero = vec![vec![Some(1.0), Some(1000.0), Some(0.0)]];
        let with_none = vec![vec![Some(1.0), Some(1000.0), None]];
        let svg_zero = bar_chart_svg(&chart(&cases, &series, &with_zero, &[], YScale::Auto));
        let svg_none = bar_chart_svg(&chart(&cases, &series, &with_none, &[], YScale::Auto));
        assert_eq!(
            svg_zero.unwrap().matches("<rect").count(),
            svg_none.unwrap().matches("<rect").count()
        );
    }

    #[test]
    fn repeated_figures_get_a_whisker() {
        let cases = vec!["a".to_string()];
        let series = vec!["s".to_string()];
        let values = vec![vec![Some(10.0)]];
        let spreads = vec![vec![Some((8.0, 13.0))]];
        // The same axis for both (up to the reference line), so that only
        // the whisker differs.
        let svg = |spreads: &[Vec<Option<(f64, f64)>>]| {
            let mut c = chart(&cases, &series, &values, spreads, YScale::Auto);
            c.ref_line = Some(RefLine {
                label: "device".to_string(),
                value: 20.0,
            });
            bar_chart_svg(&c).unwrap()
        };
        let plain = svg(&[]);
        let whiskered = svg(&spreads);
        assert!(whiskered.contains("min–max of the samples"));
        assert!(!plain.contains("min–max of the samples"));
        // Four more strokes: the whisker, its two caps and the legend's.
        assert_eq!(
            whiskered.matches("<polyline").count(),
            plain.matches("<polyline").count() + 4
        );
        // The axis makes room for the whisker's top.
        assert!(matches!(
            chart(&cases, &series, &values, &spreads, YScale::Auto).y_axis(),
            YAxis::Linear { max } if max > 13.0
        ));
    }

    #[test]
    fn values_just_below_one_are_not_rounded_up() {
        assert_eq!(format_value(0.999), "0.9990");
        assert_eq!(format_value(1.0), "1.00");
        assert_eq!(format_value(2.17), "2.17");
        assert_eq!(format_value(513.4), "513");
    }

    #[test]
    fn ticks_drop_needless_decimals() {
        assert_eq!(format_tick(50.0), "50");
        assert_eq!(format_tick(1.0), "1");
        assert_eq!(format_tick(0.5), "0.50");
        assert_eq!(format_tick(2.5), "2.50");
        assert_eq!(format_tick(2e7), "2.000e7");
    }

    #[test]
    fn log_ticks_label_1_2_5_over_few_decades_and_decades_beyond() {
        let (labelled, grid) = log_ticks(0.1, 25.0);
        assert_eq!(labelled, vec![0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0]);
        assert_eq!(grid.len(), 9 + 9 + 2);
        let (labelled, _) = log_ticks(1.0, 2e6);
        assert_eq!(labelled, vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]);
    }

    #[test]
    fn long_labels_split_near_the_middle() {
        let (a, b) = two_lines("100 B RandomReuse(0x3ff) delta=Yes");
        assert_eq!(a, "100 B RandomReuse(0x3ff)");
        assert_eq!(b, "delta=Yes");
    }
}
