//! `strata db DIR stats [--json]`: the engine's `Stats` as aligned text for a
//! person, or as one JSON object for a program.
//!
//! Called by `kv.rs` only. The JSON is the engine's own document of `Stats`
//! (its serde form, written down on `strata::Stats`), the same that the C
//! API's `strata_stats_json` prints: snake_case keys, stable, every size in
//! raw bytes (integers), io nested as `io.<class>.<kind>.{ops,bytes}` over
//! every file class and op kind (zeros included, so a key never
//! disappears). The io counters are those of this process: since the open
//! the command itself made, not since the database was created.

use std::io::{self, Write};

use serde_json::Value;
use strata::io::{FileClass, OpKind};
use strata::Stats;

/// Binary units for `human_bytes`; u64 ends inside EiB.
const BYTE_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
/// Blank columns between the columns of the text form.
const COLUMN_GAP: &str = "  ";
/// Heading of the io table, also the label column's title.
const IO_HEADING: &str = "io since open";

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

/// The statistics as one JSON object: the engine's document of `Stats`
/// (see the module comment).
pub fn to_json(stats: &Stats) -> serde_json::Result<Value> {
    serde_json::to_value(stats)
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
                "{} at most ({} of logs read, {} of logs kept in memory)",
                human_bytes(stats.flush_memory_peak_bytes),
                human_bytes(stats.flush_read_bytes),
                human_bytes(stats.log_memory_bytes)
            ),
        ),
        (
            "value files",
            format!(
                "{} of {} ({} live)",
                stats.value_files,
                human_bytes(stats.value_file_bytes),
                human_bytes(stats.value_live_bytes)
            ),
        ),
        (
            "remote store",
            match &stats.remote {
                None => "none".to_owned(),
                Some(r) if r.following => format!(
                    "{}: following, read-only: generation {}'s index, writes to LSN {}; {} GETs ({})",
                    r.url,
                    r.generation,
                    r.consistent_lsn,
                    r.gets,
                    human_bytes(r.get_bytes),
                ),
                Some(r) => format!(
                    "{}: generation {}, writes to LSN {} uploaded, {} to upload; \
                     {} files ({}) uploaded, {} GETs ({}), {} layers evicted{}{}",
                    r.url,
                    r.generation,
                    r.consistent_lsn,
                    human_bytes(r.backlog_bytes),
                    r.uploaded_files,
                    human_bytes(r.uploaded_bytes),
                    r.gets,
                    human_bytes(r.get_bytes),
                    r.evicted_layers,
                    if r.fenced {
                        ", fenced by a newer writer"
                    } else {
                        ""
                    },
                    r.error
                        .as_ref()
                        .map(|e| format!(", last error: {e}"))
                        .unwrap_or_default()
                ),
            },
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
    fn the_json_is_the_c_apis_for_the_same_stats() {
        let dir = tempfile::tempdir().unwrap();
        let opts = strata::Options {
            fallback_to_buffered: true,
            ..strata::Options::default()
        };
        let db = strata::Db::open(dir.path(), opts).unwrap();
        for round in 0..3u32 {
            let key = format!("key-{round}");
            db.put(key.as_bytes(), b"value", strata::WriteOptions::default())
                .unwrap();
            db.flush().unwrap();
        }
        db.get(b"key-1").unwrap();
        db.compact().unwrap();
        let mut stats = db.stats();
        // A string with characters JSON escapes, where null is usual.
        stats.compaction_error = Some("a \"quoted\" error\nand a line".into());
        let cli = to_json(&stats).unwrap();
        let c_api = strata_ffi::stats_json(&stats).unwrap();
        assert_eq!(cli, c_api);
        // Printed as one line each, the same text.
        assert_eq!(cli.to_string(), c_api.to_string());
        assert!(cli["compactions"].as_u64() >= Some(1), "{cli}");
        assert!(cli["compaction_write_bytes"].as_u64() > Some(0), "{cli}");
        assert!(
            cli["io"]["delta"]["write"]["bytes"].as_u64() > Some(0),
            "{cli}"
        );
        db.close().unwrap();
    }
}
