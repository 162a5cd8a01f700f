//! Random point reads of 4 KiB values from flushed delta layers, for
//! profilers: `cargo run --release --example get_profile -- [MiB] [gets]`.

use std::time::Instant;
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

fn main() -> strata::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(256);
    let gets: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/get-profile");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        io_mode: IoMode::DirectRw,
        ..Options::default()
    }
    .with_env_overrides()?;
    let db = Db::open(&dir, opts)?;
    let blocks = (mib << 20) / 4096;
    let key = |b: u64| {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&0x1234_5678_9abc_def0u64.to_be_bytes());
        k[8..].copy_from_slice(&b.to_be_bytes());
        k
    };
    let value = vec![7u8; 4096];
    let mut batch = WriteBatch::new();
    for b in 0..blocks {
        batch.clear();
        batch.put(key(b), &value);
        db.write(&batch, WriteOptions::default())?;
    }
    db.flush()?;
    println!("{:?}", db.stats());
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let started = Instant::now();
    for _ in 0..gets {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = db.get(key(x % blocks))?;
        assert_eq!(v.map(|v| v.len()), Some(4096));
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{gets} random gets of 4 KiB: {:.0} gets/s, {:.1} us each",
        gets as f64 / secs,
        secs * 1e6 / gets as f64
    );
    // The same reads, 16 at a time through multi_get (one io_uring
    // submission each round with STRATA_IO_ENGINE=io-uring).
    let started = Instant::now();
    let mut keys = Vec::with_capacity(16);
    for _ in 0..gets / 16 {
        keys.clear();
        for _ in 0..16 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys.push(key(x % blocks));
        }
        let values = db.multi_get(&keys)?;
        assert!(values
            .iter()
            .all(|v| v.as_ref().map(|v| v.len()) == Some(4096)));
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{gets} random gets of 4 KiB, 16 per multi_get: {:.0} gets/s",
        (gets / 16 * 16) as f64 / secs
    );
    let io = db.stats().io;
    println!(
        "read ops {} bytes {}",
        io.ops_total(strata::io::OpKind::Read),
        io.bytes_total(strata::io::OpKind::Read)
    );
    drop(db);
    if std::env::var_os("KEEP").is_none() {
        std::fs::remove_dir_all(&dir).ok();
    }
    Ok(())
}
