//! What a point get costs above the device (issue 11's read aim: an
//! uncached get within 1.15× of the device's 4 KiB random read).
//!
//! Loads the phases experiment's shape (random 32-byte keys, 256-byte
//! values or `STRATA_BENCH_VALUE_BYTES`, `STRATA_BENCH_MIB` MiB, default
//! 256) with no block cache (or a small one), compacts it, then alternates, in one loop so
//! both see the same noise: a `get` of a random loaded key, and an O_DIRECT
//! 4 KiB `pread` at a random aligned offset of a random layer file of the
//! same database. It prints both latency distributions, their ratio, and
//! the engine's own reads and bytes per get.
//!
//! Then the same loop while a background L0 merge runs (a quarter of the
//! data updated into L0 layers past the trigger), at the default pace or
//! `STRATA_BENCH_PACE` bytes per second: the gets against the raw reads
//! beside the same background I/O.
//!
//! `cargo bench -p strata --bench point_read` (`STRATA_BENCH_CACHE_MIB`: a
//! block cache of that size for the uncached loop, default none)

mod common;

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};
use strata::io::{AlignedBuf, FileClass, OpKind};
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

const KEY_BYTES: usize = 32;
/// `STRATA_BENCH_VALUE_BYTES`, default 256 (4096: a page-sized value, which
/// strata stores as a value block: one 4 KiB read).
fn value_bytes() -> usize {
    std::env::var("STRATA_BENCH_VALUE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}
const SAMPLES: usize = 20_000;

/// xorshift64*: the keys are regenerated from the seed, not kept.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn key(i: u64) -> [u8; KEY_BYTES] {
    let mut r = Rng(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut k = [0u8; KEY_BYTES];
    for c in k.chunks_mut(8) {
        c.copy_from_slice(&r.next().to_le_bytes());
    }
    k
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// One get of a random loaded key (checked) and one O_DIRECT 4 KiB pread
/// at a random page of a random layer file, back to back, in turn first
/// (`n` even: the get): their latencies. Whichever goes first follows the
/// loop's own work, a gap in which the device may take up background I/O.
fn get_and_pread(
    db: &Db,
    n: usize,
    keys: u64,
    layers: &[(std::fs::File, u64)],
    page: &mut AlignedBuf,
    rng: &mut Rng,
) -> (Duration, Duration) {
    let k = key(rng.next() % keys);
    let (file, pages) = &layers[(rng.next() % layers.len() as u64) as usize];
    let offset = (rng.next() % pages) * 4096;
    let get = || {
        let t = Instant::now();
        let v = db.get(k).expect("get");
        (t.elapsed(), v.map(|v| v.len()))
    };
    let pread = |page: &mut AlignedBuf| {
        let t = Instant::now();
        // SAFETY: `page` is 4096 writable bytes, aligned for O_DIRECT.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                page.as_mut_ptr().cast(),
                4096,
                offset as libc::off_t,
            )
        };
        let took = t.elapsed();
        assert_eq!(n, 4096, "pread: {}", std::io::Error::last_os_error());
        took
    };
    let ((get, len), pread) = if n.is_multiple_of(2) {
        let g = get();
        (g, pread(page))
    } else {
        let p = pread(page);
        (get(), p)
    };
    assert_eq!(len, Some(value_bytes()));
    (get, pread)
}

/// The same loop while a background compaction runs (issue 11's p99 aim):
/// a quarter of the data is updated into L0 layers, past the compaction
/// trigger, and the loop samples until the merge is installed. The preads
/// see the same device as the gets: what the device makes everyone wait
/// for shows in both, what strata adds only in the gets.
fn during_compaction(
    dir: &std::path::Path,
    opts: &Options,
    keys: u64,
    layers: &[(std::fs::File, u64)],
) {
    let trigger = 4;
    let db = Db::open(
        dir,
        Options {
            l0_compaction_trigger: trigger,
            compaction_bytes_per_sec: std::env::var("STRATA_BENCH_PACE")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(opts.compaction_bytes_per_sec),
            layer_size_bytes_max: (keys * (KEY_BYTES + value_bytes()) as u64 / 16).max(1 << 20),
            ..opts.clone()
        },
    )
    .expect("reopen");
    let value = vec![0xa5u8; value_bytes()];
    let mut rng = Rng(0xfeed);
    let mut batch = WriteBatch::new();
    let compactions = db.stats().compactions;
    // Updates until the flushes have made `trigger` L0 layers (the
    // compaction starts as the last one lands).
    while db.stats().l0_layers + db.stats().frozen_layers < trigger {
        batch.put(key(rng.next() % keys), &value);
        if batch.len() == 1000 {
            db.write(&batch, WriteOptions::default()).expect("write");
            batch.clear();
        }
    }
    // The flushes done, only the merge runs.
    while db.stats().frozen_layers > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut page = AlignedBuf::zeroed(4096, 4096);
    let (mut gets, mut preads) = (Vec::new(), Vec::new());
    let before = db.stats();
    let start = Instant::now();
    // (The stats every 64 samples only: they take longer than a get.)
    while (!gets.len().is_multiple_of(64) || db.stats().compactions == compactions)
        && gets.len() < 50 * SAMPLES
    {
        let (get, pread) = get_and_pread(&db, gets.len(), keys, layers, &mut page, &mut rng);
        gets.push(get);
        preads.push(pread);
    }
    let took = start.elapsed();
    gets.sort();
    preads.sort();
    let after = db.stats();
    println!(
        "during a background L0 merge ({} samples in {:.1} s, {} compactions, {:.2} engine reads per get):",
        gets.len(),
        took.as_secs_f64(),
        after.compactions - compactions,
        (after.point_lookup_reads - before.point_lookup_reads) as f64
            / (after.point_lookups - before.point_lookups).max(1) as f64
    );
    for (name, d) in [("get", &gets), ("O_DIRECT pread 4 KiB", &preads)] {
        println!(
            "{name:>22}  p50 {:>7.1}  p90 {:>7.1}  p99 {:>7.1}  p99.9 {:>7.1} µs",
            percentile(d, 0.5),
            percentile(d, 0.9),
            percentile(d, 0.99),
            percentile(d, 0.999)
        );
    }
    db.close().expect("close");
}

fn main() {
    let mib: u64 = std::env::var("STRATA_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let dir = common::bench_dir().join("point-read");
    let _ = std::fs::remove_dir_all(&dir);
    // `STRATA_BENCH_CACHE_MIB` (default 0, no cache): a block cache far
    // smaller than the data, as the lab's phases give strata, whose reads
    // then land in the memory of the blocks they evict.
    let cache_mib: u64 = std::env::var("STRATA_BENCH_CACHE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let opts = Options {
        io_mode: IoMode::DirectRw,
        fallback_to_buffered: false,
        block_cache_bytes: cache_mib << 20,
        history_lsns: Some(0),
        ..Options::default()
    };
    let db = Db::open(&dir, opts.clone()).expect("open");
    let keys = (mib << 20) / (KEY_BYTES + value_bytes()) as u64;
    let value = vec![0x5au8; value_bytes()];
    let mut batch = WriteBatch::new();
    for i in 0..keys {
        batch.put(key(i), &value);
        if batch.len() == 1000 {
            db.write(&batch, WriteOptions::default()).expect("write");
            batch.clear();
        }
    }
    db.write(&batch, WriteOptions::default()).expect("write");
    db.flush().expect("flush");
    db.compact().expect("compact");
    let stats = db.stats();
    println!(
        "{keys} keys, {} MiB in {} delta layers ({} L1 runs), block cache {cache_mib} MiB",
        stats.delta_bytes >> 20,
        stats.delta_layers,
        stats.l1_runs
    );

    let layers: Vec<(std::fs::File, u64)> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "delta" || x == "image"))
        .map(|p| {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&p)
                .expect("open layer");
            let pages = f.metadata().expect("stat").len() / 4096;
            (f, pages)
        })
        .filter(|(_, pages)| *pages > 0)
        .collect();
    assert!(!layers.is_empty(), "no layer files in {}", dir.display());
    let mut page = AlignedBuf::zeroed(4096, 4096);

    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let (mut gets, mut preads) = (Vec::new(), Vec::new());
    let before = db.stats().io;
    for n in 0..SAMPLES {
        let (get, pread) = get_and_pread(&db, n, keys, &layers, &mut page, &mut rng);
        gets.push(get);
        preads.push(pread);
    }
    let after = db.stats().io;
    let reads = after.ops(FileClass::Delta, OpKind::Read)
        + after.ops(FileClass::Image, OpKind::Read)
        - before.ops(FileClass::Delta, OpKind::Read)
        - before.ops(FileClass::Image, OpKind::Read);
    let bytes = after.bytes(FileClass::Delta, OpKind::Read)
        + after.bytes(FileClass::Image, OpKind::Read)
        - before.bytes(FileClass::Delta, OpKind::Read)
        - before.bytes(FileClass::Image, OpKind::Read);
    gets.sort();
    preads.sort();
    println!(
        "{:>22}  {:>9}  {:>9}  {:>9}",
        "", "p50 µs", "p90 µs", "p99 µs"
    );
    for (name, d) in [("get (uncached)", &gets), ("O_DIRECT pread 4 KiB", &preads)] {
        println!(
            "{name:>22}  {:>9.1}  {:>9.1}  {:>9.1}",
            percentile(d, 0.5),
            percentile(d, 0.9),
            percentile(d, 0.99)
        );
    }
    println!(
        "get / pread: p50 {:.2}×, p99 {:.2}×; {:.2} layer reads and {:.0} bytes read per get",
        percentile(&gets, 0.5) / percentile(&preads, 0.5),
        percentile(&gets, 0.99) / percentile(&preads, 0.99),
        reads as f64 / SAMPLES as f64,
        bytes as f64 / SAMPLES as f64
    );
    db.close().expect("close");

    // The same gets with every block cached: what a get costs beside its read.
    let db = Db::open(
        &dir,
        Options {
            block_cache_bytes: 1 << 30,
            ..opts.clone()
        },
    )
    .expect("reopen");
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let sample: Vec<u64> = (0..SAMPLES)
        .map(|_| {
            let k = rng.next() % keys;
            rng.next();
            rng.next();
            k
        })
        .collect();
    for &k in &sample {
        db.get(key(k)).expect("warm");
    }
    let mut cached: Vec<Duration> = std::iter::repeat_n(&sample, 20)
        .flatten()
        .map(|&k| {
            let k = key(k);
            let t = Instant::now();
            let v = db.get(k).expect("get");
            let d = t.elapsed();
            assert_eq!(v.as_deref(), Some(&value[..]));
            d
        })
        .collect();
    cached.sort();
    println!(
        "get (cached block): p50 {:.1} µs, p99 {:.1} µs",
        percentile(&cached, 0.5),
        percentile(&cached, 0.99)
    );
    db.close().expect("close");
    during_compaction(&dir, &opts, keys, &layers);
    let _ = std::fs::remove_dir_all(&dir);
}
