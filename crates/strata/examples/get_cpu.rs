//! What a get costs beside its device read, in the layer shape of the lab's
//! phases experiment: random 32-byte keys and 256-byte values, most of them
//! in L1 runs, some in L0 layers, some in the open in-memory layer, and a
//! block cache that holds every block (so no get reads the device and the
//! times are the engine's own CPU and memory work).
//!
//! `cargo run --release -p strata --example get_cpu -- [MiB] [gets]`
//! (defaults 256 and 200,000). Prints the memory of the indexes and filters
//! against the layer files' bytes, and p50/p90/p99 of gets of keys on disk
//! (cached blocks) and of keys in the open in-memory layer (whose values
//! are read back from the log).

use std::time::Instant;
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

fn key(i: u64) -> [u8; 32] {
    let mut k = [0u8; 32];
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in k.chunks_mut(8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        chunk.copy_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    k
}

fn percentiles(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    format!(
        "p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs",
        at(0.5),
        at(0.9),
        at(0.99)
    )
}

fn main() -> strata::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(256);
    let gets: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/get-cpu");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        io_mode: IoMode::DirectRw,
        block_cache_bytes: (mib << 20) * 2,
        history_lsns: Some(0),
        ..Options::default()
    }
    .with_env_overrides()?;
    let db = Db::open(&dir, opts)?;
    let keys = (mib << 20) / (32 + 256);
    let value = [0x5au8; 256];
    let mut batch = WriteBatch::new();
    let mut write = |from: u64, to: u64, db: &Db| -> strata::Result<()> {
        for i in from..to {
            batch.put(key(i), value);
            if batch.len() == 1000 {
                db.write(&batch, WriteOptions::default())?;
                batch.clear();
            }
        }
        db.write(&batch, WriteOptions::default())?;
        batch.clear();
        Ok(())
    };
    // Most keys compacted into runs, then three L0 layers, then keys left
    // in the open layer.
    let on_l1 = keys * 8 / 10;
    write(0, on_l1, &db)?;
    db.compact()?;
    let per_l0 = (keys - on_l1) / 6;
    let mut at = on_l1;
    for _ in 0..3 {
        write(at, at + per_l0, &db)?;
        db.flush()?;
        at += per_l0;
    }
    write(at, keys, &db)?;
    let in_memory = at..keys;
    let stats = db.stats();
    println!(
        "{keys} keys: {} L1 runs ({} files), {} L0 layers, {} keys in the open layer",
        stats.l1_runs,
        stats.l1_layers,
        stats.l0_layers,
        keys - at
    );
    // Every block into the cache.
    for i in 0..at {
        db.get(key(i))?;
    }
    let stats = db.stats();
    println!(
        "indexes and filters (the open layer's B-tree too): {:.1} MiB beside {:.1} MiB of layer files ({:.2}%)",
        stats.index_memory_bytes as f64 / (1 << 20) as f64,
        stats.delta_bytes as f64 / (1 << 20) as f64,
        100.0 * stats.index_memory_bytes as f64 / stats.delta_bytes.max(1) as f64
    );
    let mut x = 0x0123_4567_89AB_CDEFu64;
    let mut next = || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut time = |range: std::ops::Range<u64>| -> strata::Result<Vec<u64>> {
        let mut ns = Vec::with_capacity(gets);
        for _ in 0..gets {
            let k = key(range.start + next() % (range.end - range.start));
            let t = Instant::now();
            let v = db.get(k)?;
            ns.push(t.elapsed().as_nanos() as u64);
            assert_eq!(v.map(|v| v.len()), Some(256));
        }
        Ok(ns)
    };
    let before = db.stats().point_lookup_reads;
    let disk = time(0..at)?;
    let reads = db.stats().point_lookup_reads - before;
    println!(
        "keys on disk, blocks cached: {} ({reads} block reads)",
        percentiles(disk)
    );
    // A value in the open layer is read back from its log (O_DIRECT in
    // this mode): these gets include a device read unless the value is
    // still in the writer's buffer.
    let memory = time(in_memory)?;
    println!("keys in the open layer:      {}", percentiles(memory));
    db.close()
}
