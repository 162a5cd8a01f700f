//! Inline SVG plots for the report (plotters' SVG backend, no fonts or
//! network needed): grouped bar charts of one metric per case and series,
//! with the device line as a dashed horizontal line where it applies.

use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// Pixels per case on the x axis; the chart is never narrower than
/// [`WIDTH_MIN_PX`].
const CASE_WIDTH_PX: u32 = 170;
const WIDTH_MIN_PX: u32 = 640;
const HEIGHT_PX: u32 = 420;
const LEGEND_WIDTH_PX: u32 = 240;

const PALETTE: [RGBColor; 10] = [
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

/// A horizontal reference line (the device line).
pub struct RefLine {
    pub label: String,
    pub value: f64,
}

/// One grouped bar chart: `values[series][case]`, `None` where not measured.
pub struct BarChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub cases: &'a [String],
    pub series: &'a [String],
    pub values: &'a [Vec<Option<f64>>],
    pub ref_line: Option<RefLine>,
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

/// Renders the chart as an `<svg>` element.
pub fn bar_chart_svg(chart: &BarChart<'_>) -> Result<String> {
    let n_cases = chart.cases.len().max(1);
    let n_series = chart.series.len().max(1);
    let width = (CASE_WIDTH_PX * n_cases as u32 + LEGEND_WIDTH_PX + 80).max(WIDTH_MIN_PX);
    assert!(width > LEGEND_WIDTH_PX);
    let mut y_max = chart
        .values
        .iter()
        .flatten()
        .flatten()
        .cloned()
        .fold(0.0f64, f64::max);
    if let Some(line) = &chart.ref_line {
        y_max = y_max.max(line.value);
    }
    let y_max = if y_max > 0.0 { y_max * 1.12 } else { 1.0 };

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
        let (plot_area, legend_area) = root.split_horizontally(width - LEGEND_WIDTH_PX);
        let mut ctx = ChartBuilder::on(&plot_area)
            .caption(chart.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..n_cases as f64, 0f64..y_max)
            .map_err(|e| anyhow!("{e:?}"))?;
        ctx.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(chart.y_label)
            .y_label_formatter(&|v| format_value(*v))
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;

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
                EmptyElement::at((x, 0.0))
                    + Text::new(a, (0, 6), style.clone())
                    + Text::new(b, (0, 21), style),
            ))
            .map_err(|e| anyhow!("{e:?}"))?;
        }

        let group_width = 0.8;
        let bar_width = group_width / n_series as f64;
        for (s, _name) in chart.series.iter().enumerate() {
            let color = PALETTE[s % PALETTE.len()];
            let bars: Vec<Rectangle<(f64, f64)>> = chart.values[s]
                .iter()
                .enumerate()
                .filter_map(|(c, v)| {
                    let v = (*v)?;
                    let x0 = c as f64 + 0.1 + s as f64 * bar_width;
                    Some(Rectangle::new(
                        [(x0, 0.0), (x0 + bar_width * 0.92, v)],
                        color.filled(),
                    ))
                })
                .collect();
            ctx.draw_series(bars).map_err(|e| anyhow!("{e:?}"))?;
        }
        if let Some(line) = &chart.ref_line {
            let style = ShapeStyle::from(&BLACK).stroke_width(2);
            ctx.draw_series(DashedLineSeries::new(
                vec![(0.0, line.value), (n_cases as f64, line.value)],
                8,
                5,
                style,
            ))
            .map_err(|e| anyhow!("{e:?}"))?;
        }
        // The legend, in its own column right of the plot.
        let text = ("sans-serif", 13).into_font().color(&BLACK);
        for (s, name) in chart.series.iter().enumerate() {
            let y = 40 + 22 * s as i32;
            let color = PALETTE[s % PALETTE.len()];
            legend_area
                .draw(&Rectangle::new([(8, y), (22, y + 12)], color.filled()))
                .map_err(|e| anyhow!("{e:?}"))?;
            legend_area
                .draw(&Text::new(name.clone(), (30, y), text.clone()))
                .map_err(|e| anyhow!("{e:?}"))?;
        }
        if let Some(line) = &chart.ref_line {
            let y = 40 + 22 * chart.series.len() as i32 + 6;
            legend_area
                .draw(&PathElement::new(
                    vec![(8, y), (22, y)],
                    ShapeStyle::from(&BLACK).stroke_width(2),
                ))
                .map_err(|e| anyhow!("{e:?}"))?;
            legend_area
                .draw(&Text::new(line.label.clone(), (30, y - 6), text.clone()))
                .map_err(|e| anyhow!("{e:?}"))?;
        }
        root.present().map_err(|e| anyhow!("{e:?}"))?;
    }
    Ok(svg)
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
            y_label: "MiB/s",
            cases: &cases,
            series: &series,
            values: &values,
            ref_line: Some(RefLine {
                label: "device 500 MiB/s".to_string(),
                value: 500.0,
            }),
        })
        .unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("strata DirectRw"));
        assert!(svg.contains("device 500 MiB/s"));
        assert!(svg.matches("<rect").count() >= 3);
    }

    #[test]
    fn values_just_below_one_are_not_rounded_up() {
        assert_eq!(format_value(0.999), "0.9990");
        assert_eq!(format_value(1.0), "1.00");
        assert_eq!(format_value(2.17), "2.17");
        assert_eq!(format_value(513.4), "513");
    }

    #[test]
    fn long_labels_split_near_the_middle() {
        let (a, b) = two_lines("100 B RandomReuse(0x3ff) delta=Yes");
        assert_eq!(a, "100 B RandomReuse(0x3ff)");
        assert_eq!(b, "delta=Yes");
    }
}
