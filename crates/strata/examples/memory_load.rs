//! A load with default options, for the memory it takes: `cargo run
//! --release --example memory_load -- [MiB] [value bytes] [DIR] [L0 trigger]
//! [least]` writes
//! MiB of 32-byte random keys (like hashes) in batches of 1,000 puts, each
//! batch committed durably (the load of the lab's phases experiment), then
//! flushes, and prints the engine's memory statistics and the process's
//! peak resident set (VmHWM) as it goes. Run it inside a memory cgroup to
//! see the engine hold a budget (scripts/memory-budget.sh does).

use std::time::Instant;
use strata::{Db, Options, WriteBatch, WriteOptions};

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The process's resident set now and at its peak, MiB.
fn rss_mib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            >> 10
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn report(db: &Db, what: &str, started: Instant) {
    let s = db.stats();
    let (rss, peak) = rss_mib();
    println!(
        "{what} at {:.1}s: RSS {rss} MiB (peak {peak}), index {} MiB, block cache {} MiB, \
         frozen {}, L0 {}, runs {}, flush peak {} MiB, flush read {} MiB",
        started.elapsed().as_secs_f64(),
        s.index_memory_bytes >> 20,
        s.block_cache_bytes >> 20,
        s.frozen_layers,
        s.l0_layers,
        s.l1_runs,
        s.flush_memory_peak_bytes >> 20,
        s.flush_read_bytes >> 20,
    );
}

fn main() -> strata::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(1024);
    let value_bytes: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(256);
    let dir = args
        .get(3)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/memory-load")
        });
    let _ = std::fs::remove_dir_all(&dir);
    // A fourth argument sets the L0 compaction trigger (0: no background
    // compaction), to tell the flush's and the compaction's memory apart.
    let mut opts = Options::default();
    if let Some(trigger) = args.get(4).and_then(|v| v.parse().ok()) {
        opts.l0_compaction_trigger = trigger;
    }
    // A fifth, `least`: every memory option at its smallest useful value.
    if args.get(5).is_some_and(|v| v == "least") {
        opts.in_memory_index_bytes_max = 2 << 20;
        opts.block_cache_bytes = 0;
        opts.flush_memory_bytes = 1 << 20;
        opts.compaction_memory_bytes = 256 << 10;
        opts.writer_buffer_bytes = 64 << 10;
        opts.index_memory_bytes_max = 8 << 20;
    }
    let db = Db::open(&dir, opts)?;
    let puts = (mib << 20) / (32 + value_bytes as u64);
    let value = vec![0xa5u8; value_bytes];
    let mut batch = WriteBatch::new();
    let started = Instant::now();
    let mut key = [0u8; 32];
    for i in (0..puts).step_by(1000) {
        batch.clear();
        for j in i..(i + 1000).min(puts) {
            for (w, chunk) in key.chunks_mut(8).enumerate() {
                chunk.copy_from_slice(&fmix64(j * 4 + w as u64).to_be_bytes());
            }
            batch.put(key, &value);
        }
        db.write(&batch, WriteOptions { sync: true })?;
        if (i / 1000) % 100 == 0 {
            report(&db, "load", started);
        }
    }
    db.flush()?;
    report(&db, "flushed", started);
    println!(
        "{puts} puts of {value_bytes} B in {:.1}s ({:.1} MiB/s)",
        started.elapsed().as_secs_f64(),
        mib as f64 / started.elapsed().as_secs_f64()
    );
    db.close()?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
