//! The port of Neon's pageserver `bench_ingest`: the matrix of LAB.md §1.
//!
//! For each io mode: 128 MiB of values (100 B or 8 KiB) put in batches of
//! 16, keys 16-byte big-endian integers laid out Sequential, Random
//! (murmur3 finalizer) or RandomReuse(0x3ff); "write delta = No" ends when
//! the in-memory layer is frozen, "Yes" also flushes it to an L0 delta layer,
//! synced. Plus the newer row: Sequential 100 B with a concurrent reader of
//! the last 32 keys written. Throughput = value bytes / elapsed. A device
//! line (O_DIRECT sequential 1 MiB writes of the same volume) runs in the
//! same group; the closing table gives MiB/s, puts/s and the fraction of it.
//!
//! `cargo bench --bench ingest`; STRATA_INGEST_VOLUME_MIB overrides the
//! volume (default 128), STRATA_BENCH_DIR the directory.

mod common;

use criterion::{criterion_group, Criterion, Throughput};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

const GROUP: &str = "ingest";
const BATCH_PUTS: usize = 16;
const READER_KEYS: u64 = 32;

#[derive(Clone, Copy, Debug, PartialEq)]
enum KeyLayout {
    Sequential,
    Random,
    RandomReuse(u64),
}

#[derive(Clone, Copy)]
struct Row {
    value_bytes: usize,
    layout: KeyLayout,
    write_delta: bool,
    concurrent_reader: bool,
}

impl Row {
    fn name(&self) -> String {
        let layout = match self.layout {
            KeyLayout::Sequential => "seq".to_owned(),
            KeyLayout::Random => "rand".to_owned(),
            KeyLayout::RandomReuse(m) => format!("rand-reuse-{m:#x}"),
        };
        let value = if self.value_bytes >= 1024 {
            format!("{}KiB", self.value_bytes >> 10)
        } else {
            format!("{}B", self.value_bytes)
        };
        format!(
            "{value} {layout} delta={}{}",
            if self.write_delta { "yes" } else { "no" },
            if self.concurrent_reader {
                " +reader"
            } else {
                ""
            }
        )
    }
}

const ROWS: [Row; 7] = [
    Row {
        value_bytes: 100,
        layout: KeyLayout::Sequential,
        write_delta: true,
        concurrent_reader: false,
    },
    Row {
        value_bytes: 100,
        layout: KeyLayout::Random,
        write_delta: true,
        concurrent_reader: false,
    },
    Row {
        value_bytes: 100,
        layout: KeyLayout::RandomReuse(0x3ff),
        write_delta: true,
        concurrent_reader: false,
    },
    Row {
        value_bytes: 100,
        layout: KeyLayout::Sequential,
        write_delta: false,
        concurrent_reader: false,
    },
    Row {
        value_bytes: 8192,
        layout: KeyLayout::Sequential,
        write_delta: true,
        concurrent_reader: false,
    },
    Row {
        value_bytes: 8192,
        layout: KeyLayout::Sequential,
        write_delta: false,
        concurrent_reader: false,
    },
    Row {
        value_bytes: 100,
        layout: KeyLayout::Sequential,
        write_delta: false,
        concurrent_reader: true,
    },
];

/// murmur3's 64-bit finalizer.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

fn key(layout: KeyLayout, i: u64) -> [u8; 16] {
    let k = match layout {
        KeyLayout::Sequential => i,
        KeyLayout::Random => fmix64(i),
        KeyLayout::RandomReuse(mask) => fmix64(i) & mask,
    };
    (k as u128).to_be_bytes()
}

fn volume_bytes() -> usize {
    std::env::var("STRATA_INGEST_VOLUME_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128usize)
        << 20
}

fn options(mode: IoMode) -> Options {
    Options {
        io_mode: mode,
        fallback_to_buffered: false,
        // One in-memory layer holds the whole volume, as in the reference.
        layer_size_bytes_max: 2 * volume_bytes() as u64 + (64 << 20),
        background_flush: false,
        ..Options::default()
    }
}

/// One ingest of the row's volume into a fresh database; returns the time
/// from the first put to the frozen (or flushed) layer.
fn ingest_once(mode: IoMode, row: Row) -> Duration {
    let dir = tempfile::tempdir_in(common::bench_dir()).expect("dir");
    let db = Arc::new(Db::open(dir.path().join("db"), options(mode)).expect("open"));
    let puts = (volume_bytes() / row.value_bytes) as u64;
    let value = vec![0xa5u8; row.value_bytes];
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = row.concurrent_reader.then(|| {
        let (db, written, stop) = (Arc::clone(&db), Arc::clone(&written), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = written.load(Ordering::Acquire);
                for i in n.saturating_sub(READER_KEYS)..n {
                    assert!(
                        db.get(key(row.layout, i)).expect("get").is_some(),
                        "key {i} written"
                    );
                    reads += 1;
                }
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            reads
        })
    });
    let mut batch = WriteBatch::with_capacity(BATCH_PUTS * (row.value_bytes + 32));
    let started = Instant::now();
    let mut i = 0u64;
    while i < puts {
        batch.clear();
        let end = (i + BATCH_PUTS as u64).min(puts);
        for j in i..end {
            batch.put(key(row.layout, j), &value);
        }
        db.write(&batch, WriteOptions::default()).expect("write");
        i = end;
        written.store(i, Ordering::Release);
    }
    if row.write_delta {
        db.flush().expect("flush");
    } else {
        db.freeze().expect("freeze");
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    if let Some(r) = reader {
        r.join().expect("reader");
    }
    drop(db);
    elapsed
}

fn benches(c: &mut Criterion) {
    let volume = volume_bytes();
    let mut group = c.benchmark_group(GROUP);
    group.throughput(Throughput::Bytes(volume as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(200));
    group.measurement_time(Duration::from_secs(5));
    let device_path = common::bench_dir().join("ingest-device.bin");
    group.bench_function("device_direct_seq_write_1MiB", |b| {
        b.iter(|| common::device_line_write(&device_path, volume))
    });
    let _ = std::fs::remove_file(&device_path);
    for mode in IoMode::ALL {
        for row in ROWS {
            group.bench_function(format!("{mode}/{}", row.name()), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| ingest_once(mode, row)).sum())
            });
        }
    }
    group.finish();
}

fn print_table() {
    let volume = volume_bytes();
    let Some(device) = common::mib_per_s(GROUP, &["device_direct_seq_write_1MiB"], volume) else {
        return;
    };
    println!(
        "\ningest, {} MiB per row, batches of {BATCH_PUTS}; device line (O_DIRECT 1 MiB sequential writes, same run): {device:.0} MiB/s",
        volume >> 20
    );
    println!(
        "{:<34} {:>10} {:>12} {:>12} {:>12}",
        "row", "mode", "MiB/s", "puts/s", "of device"
    );
    for row in ROWS {
        for mode in IoMode::ALL {
            let name = format!("{mode}/{}", row.name());
            if let Some(mib) = common::mib_per_s(GROUP, &[&name], volume) {
                let puts = mib * (1 << 20) as f64 / row.value_bytes as f64;
                println!(
                    "{:<34} {:>10} {:>12.1} {:>12.0} {:>12.2}",
                    row.name(),
                    mode.name(),
                    mib,
                    puts,
                    mib / device
                );
            }
        }
    }
}

criterion_group!(group, benches);

fn main() {
    group();
    Criterion::default().configure_from_args().final_summary();
    print_table();
}
