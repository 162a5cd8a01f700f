//! Write amplification of compaction as the data grows, in a shape that
//! does not depend on timing: 16-byte keys, 1 KiB values, each layer
//! flushed, the L0 layers compacted into one L1 run every 4 layers, no
//! horizon (nothing collected). One load of random keys (every run over
//! the whole key space), one of ascending keys (each run over its own
//! range), and one of updates to a hot range: random keys for the first
//! half of the bytes, then updates to the loaded keys of one sixteenth of
//! the key space (those whose first byte is below 16), over and over; and
//! the same with one update in 16 to any loaded key.
//!
//! `cargo run --release -p strata --example compaction_wa -- [MiB] [dir]`
//! (defaults 1024 and a temporary directory under target/). Prints, at each
//! doubling of the data, the layer-file bytes written ÷ the bytes ingested
//! (keys and values; the log's own writes apart), the runs and the image
//! runs, the bytes on disk, the memory of the indexes and filters, and the
//! process's peak resident memory.

use strata::io::{FileClass, OpKind};
use strata::{Db, Options, WriteBatch, WriteOptions};

const LAYER_BYTES: u64 = 4 << 20;
const VALUE_BYTES: usize = 1024;

fn random_key(i: u64) -> [u8; 16] {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    x ^= x >> 31;
    let a = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let b = (a ^ (a >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&a.to_be_bytes());
    k[8..].copy_from_slice(&b.to_be_bytes());
    k
}

fn ascending_key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn load(dir: &std::path::Path, mib: u64, key: &dyn Fn(u64) -> [u8; 16]) -> strata::Result<()> {
    let opts = Options {
        layer_size_bytes_max: LAYER_BYTES,
        target_file_bytes: LAYER_BYTES,
        background_flush: false,
        l0_compaction_trigger: 0,
        ..Options::default()
    };
    let db = Db::open(dir, opts)?;
    let per_layer = LAYER_BYTES / (16 + VALUE_BYTES as u64);
    let layers = (mib << 20) / LAYER_BYTES;
    let value = vec![0x5a; VALUE_BYTES];
    let mut next_report = 64u64 << 20;
    let mut i = 0u64;
    for layer in 1..=layers {
        let mut b = WriteBatch::new();
        for _ in 0..per_layer {
            b.put(key(i), &value);
            i += 1;
            if b.len() == 256 {
                db.write(&b, WriteOptions::default())?;
                b = WriteBatch::new();
            }
        }
        db.write(&b, WriteOptions::default())?;
        db.flush()?;
        if layer % 4 == 0 {
            // No horizon: merges the L0 layers into a run, then writes an
            // image only where the policy calls for one.
            db.compact()?;
        }
        let ingested = i * (16 + VALUE_BYTES as u64);
        if ingested >= next_report || layer == layers {
            next_report *= 2;
            let s = db.stats();
            let layer_writes = s.io.bytes(FileClass::Delta, OpKind::Write)
                + s.io.bytes(FileClass::Image, OpKind::Write);
            println!(
                "  {:>6} MiB ingested: {:.2} bytes written to layer files per byte, {} runs ({} images), {} MiB on disk, indexes and filters {:.1} MiB, peak RSS {} MiB",
                ingested >> 20,
                layer_writes as f64 / ingested as f64,
                s.l1_runs,
                s.image_runs,
                s.delta_bytes >> 20,
                s.index_memory_bytes as f64 / (1 << 20) as f64,
                peak_rss_kib() >> 10
            );
        }
    }
    db.close()
}

/// The process's peak resident memory (`VmHWM`), KiB; 0 where /proc has
/// none.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let mib: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(1024);
    let base = match args.get(2) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    };
    std::fs::create_dir_all(&base)?;
    let dir = tempfile::tempdir_in(&base)?;
    println!("random keys:");
    load(&dir.path().join("random"), mib, &random_key)?;
    println!("ascending keys:");
    load(&dir.path().join("ascending"), mib, &ascending_key)?;
    println!("a hot range (1/16 of the keys) updated after a load of half the bytes:");
    let loaded = (mib << 20) / 2 / (16 + VALUE_BYTES as u64);
    let hot: Vec<u64> = (0..loaded).filter(|&j| random_key(j)[0] < 16).collect();
    let hot_key = |i: u64| {
        if i < loaded {
            random_key(i)
        } else {
            random_key(hot[((i - loaded) % hot.len() as u64) as usize])
        }
    };
    load(&dir.path().join("hot"), mib, &hot_key)?;
    println!("the same, with one update in 16 to any loaded key:");
    let mixed_key = |i: u64| {
        if i >= loaded && i.is_multiple_of(16) {
            random_key(i.wrapping_mul(7919) % loaded)
        } else {
            hot_key(i)
        }
    };
    load(&dir.path().join("mixed"), mib, &mixed_key)?;
    Ok(())
}
