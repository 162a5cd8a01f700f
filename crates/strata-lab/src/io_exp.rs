//! The io experiment (issue 2's main job): write and read a few hundred MiB
//! through strata's io layer — `BufferedWriter` with a 1 MiB buffer, then
//! sequential `read_exact_at` of 1 MiB aligned blocks — in every `IoMode` ×
//! `IoEngine`, next to the device line of the same run.
//!
//! Write time covers every `write`, `finish(PadThenTruncate)` and the final
//! `sync_data`, like the device probe's fdatasync. Reads start with the
//! file's pages evicted from the page cache, and check every byte read.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use strata::io::{
    AlignedBuf, BufferedWriter, FileClass, FileOptions, IoEngine, IoFile, IoMode, IoStats,
    ShutdownMode,
};

use crate::aims::{Bound, CaseFigure, Claim, Reference};
use crate::progress::Progress;
use crate::results::{interleave, DeviceSide, MetricSpec, Row};
use crate::sys::evict_from_page_cache;
use crate::workload::fmix64;

/// The writer's buffer (issue 2: "with a 1 MiB buffer").
pub const WRITER_CAPACITY_BYTES: usize = 1 << 20;
/// Size of each read.
pub const READ_BLOCK_BYTES: usize = 1 << 20;
/// The pattern written repeats with this period; every write size divides it.
const PATTERN_BYTES: usize = 4 << 20;

#[derive(Clone, Debug)]
pub struct IoParams {
    pub file_bytes: u64,
    /// Samples per configuration, interleaved across configurations.
    pub repeats: u32,
    /// Sizes of the `write` calls, each a case.
    pub write_sizes_bytes: Vec<usize>,
}

impl IoParams {
    pub fn new(quick: bool) -> IoParams {
        IoParams {
            // About a second of writing per sample on a 1 GB/s disk.
            file_bytes: 1 << 30,
            repeats: if quick { 3 } else { 5 },
            write_sizes_bytes: vec![8 << 10, 1 << 20],
        }
    }
}

pub fn metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new("write_mib_s", "Write (BufferedWriter)", "MiB/s", true)
            .vs_device(DeviceSide::Write),
        MetricSpec::new("read_mib_s", "Read (1 MiB read_exact_at)", "MiB/s", true)
            .vs_device(DeviceSide::Read),
        MetricSpec::new("write_device_fraction", "Write / device write", "×", true),
        MetricSpec::new("read_device_fraction", "Read / device read", "×", true),
        MetricSpec::new("write_ops", "Write ops counted", "ops", false),
    ]
}

fn pattern() -> Vec<u8> {
    let mut p = Vec::with_capacity(PATTERN_BYTES);
    let mut i = 0u64;
    while p.len() < PATTERN_BYTES {
        p.extend_from_slice(&fmix64(i ^ 0x5eed).to_le_bytes());
        i += 1;
    }
    p
}

pub struct IoFigures {
    pub write_s: f64,
    pub read_s: f64,
    pub write_ops: u64,
}

/// Writes then reads `file_bytes` at `path` in one mode and engine.
pub fn run_one(
    path: &Path,
    mode: IoMode,
    engine: IoEngine,
    write_len: usize,
    file_bytes: u64,
    progress: &mut Progress,
) -> Result<IoFigures> {
    assert!(
        PATTERN_BYTES.is_multiple_of(write_len),
        "write sizes divide the pattern"
    );
    let pattern = pattern();
    let stats = IoStats::new();
    let opts = FileOptions {
        mode,
        engine,
        class: FileClass::Other,
        ..FileOptions::default()
    };

    let file = IoFile::create(path, &opts, &stats)
        .with_context(|| format!("create {}", path.display()))?;
    let start = Instant::now();
    let mut writer = BufferedWriter::new(file, WRITER_CAPACITY_BYTES, 0)?;
    let mut offset = 0u64;
    while offset < file_bytes {
        let at = (offset % PATTERN_BYTES as u64) as usize;
        let len = write_len.min((file_bytes - offset) as usize);
        writer.write(&pattern[at..at + len])?;
        offset += len as u64;
        progress.inc(len as u64);
    }
    let file = writer.finish(ShutdownMode::PadThenTruncate)?;
    file.sync_data()?;
    let write_s = start.elapsed().as_secs_f64();
    let write_ops = stats.snapshot().ops_total(strata::io::OpKind::Write);
    drop(file);

    let len = std::fs::metadata(path)?.len();
    if len != file_bytes {
        bail!(
            "{}: {len} bytes on disk, {file_bytes} written",
            path.display()
        );
    }
    evict_from_page_cache(path)?;
    let file = IoFile::open(path, &opts, &stats)?;
    let mut buf = AlignedBuf::zeroed(READ_BLOCK_BYTES, file.alignment());
    let start = Instant::now();
    let mut offset = 0u64;
    while offset < file_bytes {
        let n = READ_BLOCK_BYTES.min((file_bytes - offset) as usize);
        let slice = &mut buf.as_mut_slice()[..n];
        file.read_exact_at(slice, offset)?;
        let at = (offset % PATTERN_BYTES as u64) as usize;
        let expected = &pattern[at..at + n.min(PATTERN_BYTES - at)];
        if &slice[..expected.len()] != expected {
            bail!(
                "{}: wrong bytes read back at offset {offset}",
                path.display()
            );
        }
        offset += n as u64;
    }
    let read_s = start.elapsed().as_secs_f64();
    Ok(IoFigures {
        write_s,
        read_s,
        write_ops,
    })
}

/// Issue 2's aim: with DirectRw and a 1 MiB buffer, `BufferedWriter`
/// sustains this fraction of the device's sequential direct write bandwidth.
pub const WRITE_DEVICE_FRACTION_AIM_MIN: f64 = 0.9;

/// Checks issue 2's aim on the DirectRw rows (each write size and io
/// engine): none without a device line.
pub fn aims(rows: &[Row]) -> Vec<Claim> {
    let cases: Vec<CaseFigure> = rows
        .iter()
        .filter(|r| r.config.starts_with(IoMode::DirectRw.name()))
        .filter_map(|r| {
            Some(CaseFigure {
                case: format!("{} {}", r.case, r.config),
                ratio: *r.metrics.get("write_device_fraction")?,
            })
        })
        .collect();
    if cases.is_empty() {
        return Vec::new();
    }
    vec![Claim::EveryCase {
        what: "DirectRw BufferedWriter".to_string(),
        bound: Bound::AtLeast(WRITE_DEVICE_FRACTION_AIM_MIN),
        reference: Reference::Device("the device write line".to_string()),
        cases,
    }]
}

/// [`aims`]' note; `None` without a device line.
pub fn aim_note(rows: &[Row]) -> Option<String> {
    aims(rows).first().map(Claim::note)
}

pub fn run(
    params: &IoParams,
    data_dir: &Path,
    device: Option<(f64, f64)>,
    notes: &mut Vec<String>,
) -> Result<Vec<Row>> {
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join("io-experiment.dat");
    let mib = params.file_bytes as f64 / (1024.0 * 1024.0);
    let mut rows = Vec::new();
    for &write_len in &params.write_sizes_bytes {
        let case = if write_len >= 1 << 20 {
            format!("writes of {} MiB", write_len >> 20)
        } else {
            format!("writes of {} KiB", write_len >> 10)
        };
        let configs: Vec<(IoMode, IoEngine)> = IoMode::ALL
            .into_iter()
            .flat_map(|mode| IoEngine::ALL.map(|e| (mode, e)))
            .collect();
        let config_name = |i: usize| {
            let (mode, engine) = configs[i];
            format!("{}/{}", mode.name(), engine.name())
        };
        let taken = interleave(params.repeats, configs.len(), |rep, i| {
            let (mode, engine) = configs[i];
            let config = config_name(i);
            let mut progress = Progress::new(
                &format!("io {case} {config} {rep}/{}", params.repeats),
                params.file_bytes,
            );
            let outcome = run_one(
                &path,
                mode,
                engine,
                write_len,
                params.file_bytes,
                &mut progress,
            );
            let _ = std::fs::remove_file(&path);
            let figures = match outcome {
                Ok(figures) => figures,
                Err(err) => {
                    progress.finish(&format!("failed: {err:#}"));
                    return Err(err);
                }
            };
            let write_mib_s = mib / figures.write_s;
            let read_mib_s = mib / figures.read_s;
            let mut row = Row::new(&case, "strata io", &config)
                .metric("write_mib_s", write_mib_s)
                .metric("read_mib_s", read_mib_s)
                .metric("write_ops", figures.write_ops as f64)
                .param("file_bytes", params.file_bytes)
                .param("write_len_bytes", write_len as u64)
                .param("writer_capacity_bytes", WRITER_CAPACITY_BYTES as u64);
            let mut outcome = format!("write {write_mib_s:.0} MiB/s, read {read_mib_s:.0} MiB/s");
            if let Some((dev_w, dev_r)) = device {
                row = row
                    .metric("write_device_fraction", write_mib_s / dev_w)
                    .metric("read_device_fraction", read_mib_s / dev_r);
                outcome.push_str(&format!(
                    " ({:.2}× / {:.2}× device {dev_w:.0} / {dev_r:.0} MiB/s)",
                    write_mib_s / dev_w,
                    read_mib_s / dev_r
                ));
            }
            progress.finish(&outcome);
            Ok(row)
        });
        for (i, err) in taken.errors.iter().enumerate() {
            if let Some(err) = err {
                notes.push(format!("io {case} {} failed: {err:#}", config_name(i)));
            }
        }
        let samples = taken.samples;
        rows.extend(samples.iter().filter_map(|s| Row::from_samples(s)));
    }
    Ok(rows)
}
