//! Prints the device's random-read latency at QD1 per block size, method
//! and file, and the bandwidth fitted above 4 KiB, one repeat, outside the
//! lab (which runs the same probe as part of its `device` experiment):
//! `cargo run --release -p strata-lab --example randread -- DIR [FILE_MIB] [MAX_LOG2]`.

use std::time::Duration;

use anyhow::{Context, Result};
use strata_lab::randread::{
    fit_latency_line, measure, prepare_file, read_len, summarize, FileKind, Method, PointSpec,
};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(
        args.next()
            .context("usage: randread DIR [FILE_MIB] [MAX_LOG2]")?,
    );
    let file_mib: u64 = args.next().map_or(Ok(1024), |s| s.parse())?;
    let max_log2: u32 = args.next().map_or(Ok(22), |s| s.parse())?;
    let file_bytes = file_mib << 20;
    std::fs::create_dir_all(&dir)?;
    println!("file\tmethod\tbytes\treads\tmean_us\tp50_us\tp99_us");
    for kind in [FileKind::Unwritten, FileKind::Filled] {
        let path = dir.join(format!("randread-{}", kind.name()));
        prepare_file(&path, kind, file_bytes, 42)?;
        for method in Method::ALL {
            let mut points = Vec::new();
            for log2 in 0..=max_log2 {
                let size = 1usize << log2;
                if read_len(method, size) as u64 > file_bytes {
                    break;
                }
                let spec = PointSpec {
                    method,
                    size,
                    reads_max: 2000,
                    reads_min: 32,
                    budget: Duration::from_millis(200),
                    seed: u64::from(log2) + 1,
                };
                let s = summarize(&measure(&path, file_bytes, spec)?);
                println!(
                    "{}\t{}\t{size}\t{}\t{:.1}\t{:.1}\t{:.1}",
                    kind.name(),
                    method.name(),
                    s.reads,
                    s.mean_ns / 1e3,
                    s.p50_ns as f64 / 1e3,
                    s.p99_ns as f64 / 1e3
                );
                if size >= 4096 {
                    points.push((read_len(method, size) as f64, s.p50_ns as f64));
                }
            }
            match fit_latency_line(&points) {
                Some(fit) => println!(
                    "# {} {}: fixed cost {:.1} us, bandwidth {:.0} MB/s",
                    kind.name(),
                    method.name(),
                    fit.intercept_ns / 1e3,
                    fit.bandwidth_bytes_per_s / 1e6
                ),
                None => println!("# {} {}: no fit", kind.name(), method.name()),
            }
        }
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
