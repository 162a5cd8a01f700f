//! Shared by the engine's benchmarks: where they write, the device line
//! (O_DIRECT sequential 1 MiB writes measured in the same run), and reading
//! criterion's saved estimates back for the closing tables.

#![allow(dead_code)] // each bench uses a subset

use std::path::PathBuf;
use strata::io::{AlignedBuf, FileOptions, IoEngine, IoFile, IoMode, IoStats};

/// The benchmark directory: STRATA_BENCH_DIR, or target/bench-data (the
/// project disk, which supports O_DIRECT).
pub fn bench_dir() -> PathBuf {
    let dir = std::env::var_os("STRATA_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-data")
        });
    std::fs::create_dir_all(&dir).expect("bench dir");
    dir
}

/// Writes `volume_bytes` to `path` in O_DIRECT 1 MiB blocks, then fdatasync:
/// the device's sequential direct write bandwidth.
pub fn device_line_write(path: &PathBuf, volume_bytes: usize) {
    let opts = FileOptions {
        mode: IoMode::DirectRw,
        engine: IoEngine::Sync,
        ..FileOptions::default()
    };
    let file = IoFile::create(path, &opts, &IoStats::new()).expect("create");
    let mut block = AlignedBuf::zeroed(1 << 20, file.alignment());
    block
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i * 7) as u8);
    for i in 0..volume_bytes.div_ceil(1 << 20) {
        file.write_all_at(&block, (i << 20) as u64).expect("write");
    }
    file.sync_data().expect("sync");
}

/// Mean seconds per iteration of one benchmark, from criterion's estimates.
pub fn mean_seconds(group: &str, parts: &[&str]) -> Option<f64> {
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/criterion")
        .join(group);
    for part in parts {
        p = p.join(part.replace('/', "_"));
    }
    let text = std::fs::read_to_string(p.join("new/estimates.json")).ok()?;
    // {"mean":{"confidence_interval":{...},"point_estimate":123.4,...
    let mean = text.split("\"mean\"").nth(1)?;
    let est = mean.split("\"point_estimate\":").nth(1)?;
    let ns: f64 = est.split([',', '}']).next()?.trim().parse().ok()?;
    Some(ns / 1e9)
}

/// MiB/s of `volume_bytes` per iteration of one benchmark.
pub fn mib_per_s(group: &str, parts: &[&str], volume_bytes: usize) -> Option<f64> {
    mean_seconds(group, parts).map(|s| volume_bytes as f64 / (1 << 20) as f64 / s)
}
