//! Point reads that reach the device, three ways, in one run: `Db::get`
//! (one synchronous read per get: pread or io_uring per the options), a
//! read queue at depth 1 (the same read on the queue's own io_uring with a
//! registered buffer), and a read queue at depth 16 (many reads in flight
//! on one thread). Compare with the device in the same session: fio's
//! io_uring engine, `--direct=1 --rw=randread --bs=4k` on a plain file of
//! the same size, at iodepth 1 and 16.
//!
//! `cargo run --release -p strata --example read_queue -- [MiB] [seconds]`
//! (defaults 512 and 3). The data is 16× the block cache (so reads reach
//! the device); values are 1 KiB (kept in the layer files' blocks, not in
//! value files: one block read per get).

use std::time::{Duration, Instant};
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

const VALUE_BYTES: usize = 1024;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn p50(mut ns: Vec<u64>) -> f64 {
    ns.sort_unstable();
    ns.get(ns.len() / 2).copied().unwrap_or(0) as f64 / 1000.0
}

fn report(what: &str, ops: u64, elapsed: Duration, lat: Vec<u64>) {
    let iops = ops as f64 / elapsed.as_secs_f64();
    let p = if lat.is_empty() {
        String::new()
    } else {
        format!(", p50 {:.1} µs", p50(lat))
    };
    println!("{what:<34} {iops:>9.0} reads/s{p}");
}

/// `Db::get` of random keys for `run`: reads/s and p50.
fn gets(db: &Db, keys: u64, rng: &mut Rng, run: Duration) -> strata::Result<()> {
    let (mut lat, started) = (Vec::new(), Instant::now());
    while started.elapsed() < run {
        let t = Instant::now();
        let v = db.get(key(rng.below(keys)))?;
        lat.push(t.elapsed().as_nanos() as u64);
        assert_eq!(v.map(|v| v.len()), Some(VALUE_BYTES));
    }
    report("Db::get (qd1)", lat.len() as u64, started.elapsed(), lat);

    Ok(())
}

fn main() -> strata::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(512);
    let secs: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(3);
    let run = Duration::from_secs(secs);
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/read-queue");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        io_mode: IoMode::DirectRw,
        block_cache_bytes: (mib << 20) / 16,
        ..Options::default()
    }
    .with_env_overrides()?;
    let keys = (mib << 20) / VALUE_BYTES as u64;
    {
        let db = Db::open(&dir, opts.clone())?;
        let value = vec![0x5au8; VALUE_BYTES];
        let mut batch = WriteBatch::new();
        for i in 0..keys {
            batch.put(key(i), &value);
            if i % 256 == 255 {
                db.write(&batch, WriteOptions::default())?;
                batch.clear();
            }
        }
        db.write(&batch, WriteOptions::default())?;
        db.flush()?;
        db.compact()?;
        db.close()?;
    }
    let db = Db::open(&dir, opts)?;
    let mut rng = Rng(0x1234_5678);
    // Warm the layer readers (indexes, filters), not the blocks.
    for _ in 0..1000 {
        db.get(key(rng.below(keys)))?;
    }
    let reads_before = db.stats().point_lookup_reads;
    let lookups_before = db.stats().point_lookups;

    gets(&db, keys, &mut rng, run)?;
    for depth in [1usize, 16] {
        let mut q = db.read_queue(depth)?;
        let mut out = Vec::with_capacity(depth);
        let (mut lat, mut done, started) = (Vec::new(), 0u64, Instant::now());
        let mut submitted_at = vec![Instant::now(); depth];
        let mut next_tag = 0u64;
        while started.elapsed() < run {
            while q.outstanding() < depth {
                submitted_at[(next_tag % depth as u64) as usize] = Instant::now();
                q.submit(next_tag % depth as u64, &key(rng.below(keys)))?;
                next_tag += 1;
            }
            out.clear();
            q.reap(1, depth, &mut out)?;
            for c in &out {
                assert_eq!(
                    c.result.as_ref().map(|v| v.as_ref().map(Vec::len)).ok(),
                    Some(Some(VALUE_BYTES))
                );
                lat.push(submitted_at[c.tag as usize].elapsed().as_nanos() as u64);
                done += 1;
            }
        }
        out.clear();
        while q.outstanding() > 0 {
            q.reap(1, depth, &mut out)?;
        }
        let what = format!("read queue (qd{depth}, {})", q.engine());
        report(
            &what,
            done,
            started.elapsed(),
            if depth == 1 { lat } else { Vec::new() },
        );
    }
    // Again after the queue: the order is not what makes the difference.
    gets(&db, keys, &mut rng, run)?;
    let s = db.stats();
    let gets = s.point_lookups - lookups_before;
    let reads = s.point_lookup_reads - reads_before;
    println!(
        "device reads per get: {:.2} ({} block reads for {} gets; block cache {} MiB, data {} MiB)",
        reads as f64 / gets.max(1) as f64,
        reads,
        gets,
        s.block_cache_bytes >> 20,
        mib
    );
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
