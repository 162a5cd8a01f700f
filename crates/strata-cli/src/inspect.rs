//! `strata inspect PATH [--verify] [--dump]`: what a database directory, a
//! manifest or a layer file holds, read-only (as RocksDB's `sst_dump` and
//! `ldb manifest_dump`), through `strata::inspect`.
//!
//! - a directory: the manifest's summary, the layers by level with their
//!   key and LSN ranges, files on disk the manifest does not list; with
//!   `--verify`, every block of every layer read and checked;
//! - a `MANIFEST`: every record, with its offset;
//! - a `*.delta` layer file: its summary; `--verify` checks every block,
//!   `--dump` prints every entry;
//! - `--remote URL`: a remote store (`strata::remote::inspect`): its
//!   generations, indexes, the newest index, orphans and missing objects;
//!   `--verify` reads every object the newest index lists and checks it.
//!
//! Corruption is an error naming the file and offset: exit status 1.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::{BufWriter, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use strata::inspect::{self, EntryValue, LayerInfo, ValueFileInfo};

use crate::stats::human_bytes;

#[derive(Args)]
pub struct InspectArgs {
    /// A database directory, a MANIFEST, or a layer file (*.delta).
    #[arg(required_unless_present = "remote")]
    path: Option<PathBuf>,
    /// A remote store instead (s3://bucket/prefix with the `s3` feature,
    /// file:///dir or a path).
    #[arg(long, conflicts_with = "path")]
    remote: Option<String>,
    /// Read every block of every layer file and check every checksum.
    #[arg(long)]
    verify: bool,
    /// Print every entry of a layer file (key, LSN, value), one per line.
    #[arg(long)]
    dump: bool,
}

/// A key or value for a person: text when it is printable ASCII, else hex.
fn show(bytes: &[u8]) -> String {
    if !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        String::from_utf8_lossy(bytes).into_owned()
    } else {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}")
    }
}

/// Shortened to `max` characters, for tables.
fn short(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        return text;
    }
    let head: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{head}…")
}

pub fn main(args: InspectArgs) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let path = match (&args.path, &args.remote) {
        (_, Some(url)) => {
            remote_store(&mut out, url, args.verify)?;
            out.flush()?;
            return Ok(());
        }
        (Some(path), None) => path,
        (None, None) => bail!("name a PATH or --remote URL"),
    };
    if path.is_dir() {
        directory(&mut out, path, args.verify)?;
    } else if path.extension().is_some_and(|e| e == "delta") {
        layer_file(&mut out, path, args.verify, args.dump)?;
    } else {
        manifest_file(&mut out, path)?;
    }
    out.flush()?;
    Ok(())
}

/// A remote store's report (see the module comment).
fn remote_store(out: &mut impl Write, url: &str, verify: bool) -> Result<()> {
    let store = strata::remote::open_url(url).with_context(|| format!("remote store {url}"))?;
    let r = strata::remote::inspect::inspect_store(&*store, verify)?;
    writeln!(out, "store        {}", r.url)?;
    let gens: Vec<String> = r.generations.iter().map(|(g, _)| g.to_string()).collect();
    writeln!(
        out,
        "generations  {} ({})",
        r.generations.len(),
        gens.join(", ")
    )?;
    writeln!(out, "indexes      {}", r.indexes.len())?;
    match &r.newest {
        None => writeln!(out, "newest index none")?,
        Some(i) => {
            let bytes: u64 = i.objects.iter().map(|o| o.bytes).sum();
            writeln!(
                out,
                "newest index {} (generation {}, LSN {}, GC cutoff {}): {} layers, {} value files, {}",
                i.key,
                i.generation,
                i.lsn,
                i.gc_lsn,
                i.layers,
                i.value_files,
                human_bytes(bytes)
            )?;
            for o in &i.objects {
                writeln!(out, "  {:>10}  {}  {}", human_bytes(o.bytes), o.name, o.key)?;
            }
        }
    }
    let orphan_bytes: u64 = r.orphans.iter().map(|o| o.size).sum();
    writeln!(
        out,
        "orphans      {} ({}; the newest index does not list them)",
        r.orphans.len(),
        human_bytes(orphan_bytes)
    )?;
    for o in &r.orphans {
        writeln!(out, "  {:>10}  {}", human_bytes(o.size), o.key)?;
    }
    if verify {
        writeln!(
            out,
            "verified     {} objects: lengths and crc32c match the index",
            r.verified
        )?;
    }
    if !r.missing.is_empty() {
        bail!(
            "{}: {} objects an index lists are missing: {}",
            r.url,
            r.missing.len(),
            r.missing.join(", ")
        );
    }
    Ok(())
}

/// An image's cover, as a range: `[a, m)`, `(-∞, ∞)`.
fn cover(cover: &inspect::KeyBounds) -> String {
    let start = match &cover.0 {
        Bound::Included(k) => format!("[{}", short(show(k), 24)),
        Bound::Excluded(k) => format!("({}", short(show(k), 24)),
        Bound::Unbounded => "(-∞".to_string(),
    };
    let end = match &cover.1 {
        Bound::Included(k) => format!("{}]", short(show(k), 24)),
        Bound::Excluded(k) => format!("{})", short(show(k), 24)),
        Bound::Unbounded => "∞)".to_string(),
    };
    format!("{start}, {end}")
}

fn layer_rows(out: &mut impl Write, layers: &[&LayerInfo]) -> Result<()> {
    let covers = layers.iter().any(|l| l.cover.is_some());
    writeln!(
        out,
        "  {:>16}  {:<5}  {:<24}  {:<24}  {:>21}  {:>9}  {:>10}{}",
        "id",
        "level",
        "first key",
        "last key",
        "LSNs",
        "entries",
        "bytes",
        if covers { "  covers" } else { "" }
    )?;
    for l in layers {
        writeln!(
            out,
            "  {:>16}  {:<5}  {:<24}  {:<24}  {:>21}  {:>9}  {:>10}{}",
            l.id,
            l.level,
            short(show(&l.key_min), 24),
            short(show(&l.key_max), 24),
            format!("{}..={}", l.lsn_min, l.lsn_max),
            l.entries,
            human_bytes(l.bytes),
            l.cover
                .as_ref()
                .map(|c| format!("  {}", cover(c)))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

/// The value files: bytes, live bytes and the garbage share of each.
fn value_file_rows(out: &mut impl Write, files: &[ValueFileInfo]) -> Result<()> {
    let bytes: u64 = files.iter().map(|v| v.bytes).sum();
    let live: u64 = files.iter().map(|v| v.live_bytes.min(v.bytes)).sum();
    writeln!(
        out,
        "value files  {} ({}, {} live)",
        files.len(),
        human_bytes(bytes),
        human_bytes(live)
    )?;
    for v in files {
        let garbage = 100.0 * (1.0 - v.live_bytes.min(v.bytes) as f64 / v.bytes.max(1) as f64);
        writeln!(
            out,
            "  {}  {:>10}  {:>10} live  {garbage:>5.1}% garbage",
            v.file,
            human_bytes(v.bytes),
            human_bytes(v.live_bytes)
        )?;
    }
    Ok(())
}

fn directory(out: &mut impl Write, dir: &Path, verify: bool) -> Result<()> {
    let m = inspect::manifest(dir)?;
    writeln!(out, "database     {}", dir.display())?;
    writeln!(
        out,
        "manifest     format {}, {} records{}",
        m.format_version,
        m.records.len(),
        m.torn_at
            .map(|at| format!(", a torn last append dropped at offset {at}"))
            .unwrap_or_default()
    )?;
    writeln!(out, "next file id {}", m.next_file_id)?;
    writeln!(
        out,
        "reads from   LSN {} (GC removed what is below)",
        m.gc_lsn
    )?;
    writeln!(out, "logs         {:?}", m.logs)?;
    value_file_rows(out, &m.value_files)?;
    let total: u64 = m.layers.iter().map(|l| l.bytes).sum();
    writeln!(
        out,
        "layers       {} ({})",
        m.layers.len(),
        human_bytes(total)
    )?;
    for level in ["L0", "L1", "image"] {
        let of: Vec<&LayerInfo> = m.layers.iter().filter(|l| l.level == level).collect();
        if of.is_empty() {
            continue;
        }
        let runs = {
            let mut ranges: Vec<(u64, u64)> = of.iter().map(|l| (l.lsn_min, l.lsn_max)).collect();
            ranges.dedup();
            ranges.len()
        };
        let bytes: u64 = of.iter().map(|l| l.bytes).sum();
        writeln!(out)?;
        if level == "L0" {
            writeln!(out, "{level}: {} layers, {}", of.len(), human_bytes(bytes))?;
        } else {
            writeln!(
                out,
                "{level}: {} layers in {runs} runs, {}",
                of.len(),
                human_bytes(bytes)
            )?;
        }
        layer_rows(out, &of)?;
    }
    // Files that look like the database's own but are not listed: what a
    // crash left, removed at the next open.
    let listed: std::collections::HashSet<String> = m
        .layers
        .iter()
        .map(|l| l.file.clone())
        .chain(m.logs.iter().map(|id| format!("{id:016x}.log")))
        .chain(m.value_files.iter().map(|v| v.file.clone()))
        .collect();
    let mut unlisted: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("list {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| (n.ends_with(".delta") || n.ends_with(".log")) && !listed.contains(n))
        .collect();
    unlisted.sort();
    if !unlisted.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "not listed (garbage the next open removes): {}",
            unlisted.join(", ")
        )?;
    }
    if verify {
        writeln!(out)?;
        let mut failed = 0;
        for l in &m.layers {
            let path = dir.join(&l.file);
            match inspect::verify_layer_values(dir, &path, &m.value_files) {
                Ok((n, 0)) => writeln!(out, "verify {}: ok, {n} entries", l.file)?,
                Ok((n, values)) => writeln!(
                    out,
                    "verify {}: ok, {n} entries, {values} values in value files",
                    l.file
                )?,
                Err(e) => {
                    writeln!(out, "verify {}: {e}", l.file)?;
                    failed += 1;
                }
            }
        }
        out.flush()?;
        if failed > 0 {
            bail!(
                "{failed} of {} layer files failed verification",
                m.layers.len()
            );
        }
    }
    Ok(())
}

fn manifest_file(out: &mut impl Write, path: &Path) -> Result<()> {
    let m = inspect::manifest(path)?;
    writeln!(
        out,
        "{}: format {}, next file id {}",
        path.display(),
        m.format_version,
        m.next_file_id
    )?;
    for (offset, what) in &m.records {
        writeln!(out, "  @{offset:<8} {what}")?;
    }
    if let Some(at) = m.torn_at {
        writeln!(out, "  @{at:<8} a torn last append (dropped)")?;
    }
    writeln!(out, "logs {:?}", m.logs)?;
    value_file_rows(out, &m.value_files)?;
    let layers: Vec<&LayerInfo> = m.layers.iter().collect();
    layer_rows(out, &layers)?;
    Ok(())
}

fn layer_file(out: &mut impl Write, path: &Path, verify: bool, dump: bool) -> Result<()> {
    let info = inspect::layer_file(path)?;
    writeln!(out, "file          {}", path.display())?;
    writeln!(
        out,
        "bytes         {} ({})",
        info.bytes,
        human_bytes(info.bytes)
    )?;
    writeln!(out, "entries       {}", info.entries)?;
    writeln!(out, "distinct keys {}", info.distinct_keys)?;
    writeln!(
        out,
        "blocks        {} (mean {} per block)",
        info.blocks,
        human_bytes(info.bytes / info.blocks.max(1))
    )?;
    writeln!(
        out,
        "keys          {} ..= {}",
        show(&info.key_min),
        show(&info.key_max)
    )?;
    writeln!(out, "LSNs          {} ..= {}", info.lsn_min, info.lsn_max)?;
    writeln!(
        out,
        "index + bloom {} in memory when open",
        human_bytes(info.index_and_bloom_bytes as u64)
    )?;
    if verify || dump {
        let mut lines: Vec<String> = Vec::new();
        let n = inspect::scan_layer_file(path, |k, lsn, entry| {
            if dump {
                lines.push(match entry {
                    EntryValue::Delete => format!("{}\t{lsn}\t(deleted)", show(k)),
                    EntryValue::Put(v) => format!("{}\t{lsn}\t{}", show(k), show(v)),
                    EntryValue::Pointer {
                        file_id,
                        offset,
                        value_len,
                        out_of_line,
                        ..
                    } => format!(
                        "{}\t{lsn}\t({value_len} bytes in value file {file_id:016x}.log at {offset}{})",
                        show(k),
                        if out_of_line { ", out of line" } else { "" }
                    ),
                });
            }
            Ok(())
        })?;
        for line in lines {
            writeln!(out, "{line}")?;
        }
        writeln!(out, "verified      {n} entries, every checksum")?;
    }
    Ok(())
}
