//! Text for the HTML report that every renderer shares: escaping, and a
//! figure with its samples' spread. It imports no renderer, so each
//! experiment's renderer and the report that calls them stay out of an
//! import cycle.

use crate::plot::format_value;
use crate::results::Row;

/// `s` with the characters HTML gives a meaning escaped.
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

/// A figure, and its samples' min–max where it is the median of several.
pub(crate) fn figure_with_spread(row: &Row, key: &str, value: f64) -> String {
    match row.spread.get(key) {
        Some(spread) => format!(
            "{} <span class=\"muted\">{}–{}</span>",
            format_value(value),
            format_value(spread.min),
            format_value(spread.max)
        ),
        None => format_value(value),
    }
}
