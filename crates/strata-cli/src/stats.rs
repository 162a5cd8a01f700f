//! `strata db DIR stats [--json]`: the engine's `Stats` as aligned text for a
//! person, or as one JSON object for a program.
//!
//! Called by `kv.rs` only. The JSON is built here, not derived in the engine,
//! so its keys are a promise of the CLI: snake_case, stable, every size in
//! raw bytes (integers), io nested as `io.<class>.<kind>.{ops,bytes}` over
//! every file class and op kind (zeros included, so a key never disappears).
//! The io counters are those of this process: since the open the command
//! itself made, not since the database was created.

use std::io::{self, Write};

use serde_json::{json, Map, Value};
use strata::io::{FileClass, IoStatsSnapshot, OpKind};
use strata::Stats;

/// Binary units for `human_bytes`; u64 ends inside EiB.
const BYTE_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
/// Blank columns between the columns of the text form.
const COLUMN_GAP: &str = "  ";
/// Heading of the io table, also the label column's title.
const IO_HEADING: &str = "io since open";

/// The JSON name of an op kind (the engine names file classes, not kinds).
fn kind_name(kind: OpKind) -> &'static str {
    match kind {
        OpKind::Read => "read",
        OpKind::Write => "write",
        OpKind::Sync => "sync",
    }
}

/// `bytes` with a binary unit and one decimal ("12.4 MiB"); exact below 1 KiB.
pub fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Display only: the f64 rounding of a u64 is far below the one decimal shown.
    let mut value = bytes as f64;
    let mut unit = 0;
    // 1023.95 and up would print as "1024.0": show it as 1.0 of the next unit.
    while value >= 1023.95 && unit + 1 < BYTE_UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", BYTE_UNITS[unit])
}

/// The statistics as one JSON object (see the module comment for its keys).
pub fn to_json(stats: &Stats) -> Value {
    json!({
        "last_lsn": stats.last_lsn,
        "io_mode": stats.io_mode.name(),
        "open_layer_bytes": stats.open_layer_bytes,
        "frozen_layers": stats.frozen_layers,
        "delta_layers": stats.delta_layers,
        "delta_bytes": stats.delta_bytes,
        "l0_layers": stats.l0_layers,
        "l1_runs": stats.l1_runs,
        "l1_layers": stats.l1_layers,
        "image_runs": stats.image_runs,
        "compactions": stats.compactions,
        "compaction_error": stats.compaction_error,
        "flush_error": stats.flush_error,
        "block_cache_bytes": stats.block_cache_bytes,
        "block_cache_hits": stats.block_cache_hits,
        "block_cache_misses": stats.block_cache_misses,
        "index_memory_bytes": stats.index_memory_bytes,
        "layer_readers_open": stats.layer_readers_open,
        "layer_readers_closed": stats.layer_readers_closed,
        "point_lookups": stats.point_lookups,
        "point_lookup_reads": stats.point_lookup_reads,
        "read_retries": stats.read_retries,
        "flush_memory_peak_bytes": stats.flush_memory_peak_bytes,
        "flush_read_bytes": stats.flush_read_bytes,
        "io": io_json(&stats.io),
    })
}

fn io_json(io: &IoStatsSnapshot) -> Value {
    let mut classes = Map::new();
    for class in FileClass::ALL {
        let mut kinds = Map::new();
        for kind in OpKind::ALL {
            kinds.insert(
                kind_name(kind).to_owned(),
                json!({ "ops": io.ops(class, kind), "bytes": io.bytes(class, kind) }),
            );
        }
        classes.insert(class.name().to_owned(), Value::Object(kinds));
    }
    Value::Object(classes)
}

/// The statistics as aligned `name  value` lines, then the io table (file
/// class × reads, writes, syncs; syncs move no bytes, so they have no bytes
/// column).
pub fn write_text(out: &mut impl Write, stats: &Stats) -> io::Result<()> {
    let summary = [
        ("last lsn", stats.last_lsn.to_string()),
        ("io mode", stats.io_mode.name().to_owned()),
        ("open layer", human_bytes(stats.open_layer_bytes)),
        ("frozen layers", stats.frozen_layers.to_string()),
        (
            "delta layers",
            format!(
                "{} ({})",
                stats.delta_layers,
                human_bytes(stats.delta_bytes)
            ),
        ),
        (
            "levels",
            format!(
                "L0 {}, L1 {} in {} runs ({} images)",
                stats.l0_layers, stats.l1_layers, stats.l1_runs, stats.image_runs
            ),
        ),
        ("compactions", stats.compactions.to_string()),
        (
            "compaction error",
            stats
                .compaction_error
                .clone()
                .unwrap_or_else(|| "none".into()),
        ),
        (
            "flush error",
            stats.flush_error.clone().unwrap_or_else(|| "none".into()),
        ),
        (
            "block cache",
            format!(
                "{} ({} hits, {} misses)",
                human_bytes(stats.block_cache_bytes),
                stats.block_cache_hits,
                stats.block_cache_misses
            ),
        ),
        (
            "index memory",
            format!(
                "{} ({} layer files open, {} closed to stay within the budget)",
                human_bytes(u64::try_from(stats.index_memory_bytes).unwrap_or(u64::MAX)),
                stats.layer_readers_open,
                stats.layer_readers_closed
            ),
        ),
        (
            "point lookups",
            format!(
                "{} ({} data blocks read)",
                stats.point_lookups, stats.point_lookup_reads
            ),
        ),
        ("read retries", stats.read_retries.to_string()),
        (
            "flush memory",
            format!(
                "{} at most ({} of logs read)",
                human_bytes(stats.flush_memory_peak_bytes),
                human_bytes(stats.flush_read_bytes)
            ),
        ),
    ];

    let io = &stats.io;
    let mut table = vec![[
        IO_HEADING.to_owned(),
        "reads".to_owned(),
        "read bytes".to_owned(),
        "writes".to_owned(),
        "write bytes".to_owned(),
        "syncs".to_owned(),
    ]];
    for class in FileClass::ALL {
        table.push([
            class.name().to_owned(),
            io.ops(class, OpKind::Read).to_string(),
            human_bytes(io.bytes(class, OpKind::Read)),
            io.ops(class, OpKind::Write).to_string(),
            human_bytes(io.bytes(class, OpKind::Write)),
            io.ops(class, OpKind::Sync).to_string(),
        ]);
    }
    table.push([
        "total".to_owned(),
        io.ops_total(OpKind::Read).to_string(),
        human_bytes(io.bytes_read_total()),
        io.ops_total(OpKind::Write).to_string(),
        human_bytes(io.bytes_written_total()),
        io.ops_total(OpKind::Sync).to_string(),
    ]);

    // One label column for both parts, so their values start together.
    let mut widths = [0; 6];
    for row in &table {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let label_width = summary
        .iter()
        .map(|(label, _)| label.len())
        .fold(widths[0], usize::max);

    for (label, value) in &summary {
        writeln!(out, "{label:<label_width$}{COLUMN_GAP}{value}")?;
    }
    writeln!(out)?;
    for row in &table {
        write!(out, "{:<label_width$}", row[0])?;
        for (cell, width) in row.iter().zip(widths).skip(1) {
            write!(out, "{COLUMN_GAP}{cell:>width$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_is_exact_below_a_kib_and_one_decimal_above() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(13_002_342), "12.4 MiB");
        assert_eq!(human_bytes(1024 * 1024 - 1), "1.0 MiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn every_class_and_kind_has_ops_and_bytes_in_json() {
        let io = IoStatsSnapshot::default();
        let value = io_json(&io);
        for class in FileClass::ALL {
            for kind in OpKind::ALL {
                let counters = &value[class.name()][kind_name(kind)];
                assert_eq!(counters["ops"], 0, "{}.{}", class.name(), kind_name(kind));
                assert_eq!(counters["bytes"], 0);
            }
        }
    }
}
