//! A B A B: the device line (O_DIRECT sequential 1 MiB pwrites) and
//! BufferedWriter (DirectRw, 1 MiB buffer) writing the same volume,
//! interleaved, with the ratio per round: `cargo run --release --example
//! writer_vs_device -- [MiB] [rounds] [write bytes] [sync|io-uring]`.

use std::time::Instant;
use strata::io::{
    AlignedBuf, BufferedWriter, FileOptions, IoEngine, IoFile, IoMode, IoStats, ShutdownMode,
};

fn main() -> strata::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(5);
    let write_bytes: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(8192);
    let engine: IoEngine = args
        .get(4)
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(IoEngine::Sync);
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let path = dir.join("writer-vs-device.bin");
    let opts = FileOptions {
        mode: IoMode::DirectRw,
        engine,
        ..FileOptions::default()
    };
    let data: Vec<u8> = (0..write_bytes).map(|i| (i * 13) as u8).collect();
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        let file = IoFile::create(&path, &opts, &IoStats::new())?;
        let mut block = AlignedBuf::zeroed(1 << 20, file.alignment());
        block.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        for i in 0..mib {
            file.write_all_at(&block, (i as u64) << 20)?;
        }
        file.sync_data()?;
        let device = mib as f64 / t.elapsed().as_secs_f64();

        let t = Instant::now();
        let file = IoFile::create(&path, &opts, &IoStats::new())?;
        let mut w = BufferedWriter::new(file, 1 << 20, 0)?;
        let mut left = mib << 20;
        while left > 0 {
            let n = write_bytes.min(left);
            w.write(&data[..n])?;
            left -= n;
        }
        w.finish(ShutdownMode::PadThenTruncate)?.sync_data()?;
        let writer = mib as f64 / t.elapsed().as_secs_f64();
        ratios.push(writer / device);
        println!("round {round}: device {device:.0} MiB/s, BufferedWriter {writer:.0} MiB/s, ratio {:.2}", writer / device);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median ratio {:.2} ({} rounds, {mib} MiB, {write_bytes} B writes, {engine})",
        ratios[ratios.len() / 2],
        rounds
    );
    std::fs::remove_file(&path).ok();
    Ok(())
}
