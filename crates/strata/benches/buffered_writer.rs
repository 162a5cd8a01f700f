//! BufferedWriter throughput by write size, io mode and engine, beside the
//! device line: O_DIRECT sequential writes of 1 MiB blocks straight through
//! `IoFile`, measured in the same run. Every iteration writes `VOLUME_BYTES`
//! to a fresh file and ends with fdatasync, so buffered modes pay for the
//! page cache write-back too. Ends with a table in MiB/s read back from
//! criterion's estimates.
//!
//! `cargo bench --bench buffered_writer`; STRATA_BENCH_DIR picks the
//! directory (default: target/, on the project disk).

mod common;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use std::path::PathBuf;
use std::time::Duration;
use strata::io::{BufferedWriter, FileOptions, IoEngine, IoFile, IoMode, IoStats, ShutdownMode};

const VOLUME_BYTES: usize = 64 << 20;
const CAPACITY_BYTES: usize = 1 << 20;
const WRITE_SIZES: [usize; 4] = [100, 8 << 10, 64 << 10, 1 << 20];
const GROUP: &str = "buffered_writer";

fn size_name(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{}MiB", s >> 20),
        s if s >= 1 << 10 => format!("{}KiB", s >> 10),
        s => format!("{s}B"),
    }
}

fn write_volume(path: &PathBuf, mode: IoMode, engine: IoEngine, write_bytes: usize, data: &[u8]) {
    let opts = FileOptions {
        mode,
        engine,
        ..FileOptions::default()
    };
    let file = IoFile::create(path, &opts, &IoStats::new()).expect("create");
    let mut w = BufferedWriter::new(file, CAPACITY_BYTES, 0).expect("writer");
    let mut left = VOLUME_BYTES;
    while left > 0 {
        let n = write_bytes.min(left);
        w.write(&data[..n]).expect("write");
        left -= n;
    }
    let file = w.finish(ShutdownMode::PadThenTruncate).expect("finish");
    file.sync_data().expect("sync");
}

fn benches(c: &mut Criterion) {
    let dir = common::bench_dir();
    let path = dir.join("buffered_writer.bin");
    let data: Vec<u8> = (0..1 << 20).map(|i| (i * 31) as u8).collect();
    let mut group = c.benchmark_group(GROUP);
    group.throughput(Throughput::Bytes(VOLUME_BYTES as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("device_direct_seq_write_1MiB", |b| {
        b.iter(|| common::device_line_write(&path, VOLUME_BYTES))
    });
    for size in WRITE_SIZES {
        for mode in IoMode::ALL {
            for engine in IoEngine::ALL {
                let id = BenchmarkId::new(format!("{mode}/{engine}"), size_name(size));
                group.bench_with_input(id, &size, |b, &size| {
                    b.iter(|| write_volume(&path, mode, engine, size, &data))
                });
            }
        }
    }
    group.finish();
    let _ = std::fs::remove_file(&path);
}

fn print_table() {
    let Some(device) = common::mib_per_s(GROUP, &["device_direct_seq_write_1MiB"], VOLUME_BYTES)
    else {
        return;
    };
    println!("\nBufferedWriter throughput, MiB/s (fraction of the device line, {device:.0} MiB/s O_DIRECT 1 MiB sequential writes, same run)");
    print!("{:<22}", "mode/engine");
    for size in WRITE_SIZES {
        print!("{:>16}", size_name(size));
    }
    println!();
    for mode in IoMode::ALL {
        for engine in IoEngine::ALL {
            print!("{:<22}", format!("{mode}/{engine}"));
            for size in WRITE_SIZES {
                let name = format!("{mode}_{engine}");
                match common::mib_per_s(GROUP, &[&name, &size_name(size)], VOLUME_BYTES) {
                    Some(v) => print!("{:>16}", format!("{v:.0} ({:.2})", v / device)),
                    None => print!("{:>16}", "-"),
                }
            }
            println!();
        }
    }
}

criterion_group!(group, benches);

fn main() {
    group();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
    print_table();
}
