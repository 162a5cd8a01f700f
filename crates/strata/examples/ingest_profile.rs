//! A single ingest run for profilers (perf, callgrind): `cargo run --release
//! --example ingest_profile -- [MiB] [value bytes] [seq|rand] [delta yes|no]
//! [defaults]`. With `defaults`, the database runs at its default options
//! (background flush, default layer sizes) as the lab's ingest runs it;
//! without, the flush runs inline at the end, in one layer.

use std::time::Instant;
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

fn main() -> strata::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(128);
    let value_bytes: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(100);
    let random = args.get(3).is_some_and(|v| v == "rand");
    let delta = args.get(4).is_some_and(|v| v == "yes");
    let defaults = args.get(5).is_some_and(|v| v == "defaults");
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ingest-profile");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = if defaults {
        Options {
            io_mode: IoMode::DirectRw,
            history_lsns: Some(0),
            ..Options::default()
        }
    } else {
        Options {
            io_mode: IoMode::DirectRw,
            layer_size_bytes_max: (2 * mib as u64 + 64) << 20,
            background_flush: false,
            ..Options::default()
        }
    }
    .with_env_overrides()?;
    let db = Db::open(&dir, opts)?;
    let puts = (mib << 20) / value_bytes;
    let value = vec![0xa5u8; value_bytes];
    let mut batch = WriteBatch::new();
    let started = Instant::now();
    for i in (0..puts).step_by(16) {
        batch.clear();
        for j in i..(i + 16).min(puts) {
            let k = if random { fmix64(j as u64) } else { j as u64 };
            batch.put((k as u128).to_be_bytes(), &value);
        }
        db.write(&batch, WriteOptions::default())?;
    }
    let ingest = started.elapsed();
    if delta {
        db.flush()?;
    } else {
        db.freeze()?;
    }
    let total = started.elapsed();
    println!(
        "{puts} puts of {value_bytes} B: ingest {:.3}s ({:.0} puts/s), total {:.3}s ({:.1} MiB/s)",
        ingest.as_secs_f64(),
        puts as f64 / ingest.as_secs_f64(),
        total.as_secs_f64(),
        mib as f64 / total.as_secs_f64()
    );
    drop(db);
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
