//! A single ingest run for profilers (perf, callgrind): `cargo run --release
//! --example ingest_profile -- [MiB] [value bytes] [seq|rand] [delta yes|no]
//! [defaults|inline] [batch puts]`. With `defaults`, the database runs at its
//! default options (background flush, default layer sizes) as the lab's
//! ingest runs it; without (any other word, e.g. `inline`), the flush runs
//! inline at the end, in one layer. Puts go in batches of `batch puts` (16,
//! the lab's, unless given). With a seventh argument `reader`, a second
//! thread reads the last 32 keys written, over and over, as the lab's
//! ingest `+reader` row does (through the flush or freeze at the end too),
//! and its gets per second are printed.
//!
//! The database goes in `target/ingest-profile`, or under
//! `$STRATA_PROFILE_DIR` when set.
//!
//! Besides the wall-clock rate it prints the writing thread's CPU time and
//! puts per CPU second of that thread (the CPU-only figure: the log's
//! background writes and the flush run on other threads).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;
use strata::{Db, IoMode, Options, WriteBatch, WriteOptions};

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// CPU time of the calling thread, seconds.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Keys the reader re-reads (the lab's `READER_WINDOW_KEYS`).
const READER_WINDOW_KEYS: usize = 32;

fn main() -> strata::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(128);
    let value_bytes: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(100);
    let random = args.get(3).is_some_and(|v| v == "rand");
    let delta = args.get(4).is_some_and(|v| v == "yes");
    let defaults = args.get(5).is_some_and(|v| v == "defaults");
    let batch_puts: usize = args
        .get(6)
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(16);
    // STRATA_PROFILE_DIR puts the database elsewhere, e.g. on a tmpfs (with
    // STRATA_IO_MODE=buffered) so that the device does not pace the writer.
    let dir = match std::env::var_os("STRATA_PROFILE_DIR") {
        Some(parent) => std::path::PathBuf::from(parent).join("ingest-profile"),
        None => {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ingest-profile")
        }
    };
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
            // Room for every key in the one layer's index (at most 124
            // bytes a key, frozen at half), so that no freeze, and no
            // flush, runs during the ingest.
            in_memory_index_bytes_max: ((mib as u64) << 20) / value_bytes as u64 * 4 * 124
                + (64 << 20),
            background_flush: false,
            ..Options::default()
        }
    }
    .with_env_overrides()?;
    let reader = args.get(7).is_some_and(|v| v == "reader");
    let db = Db::open(&dir, opts)?;
    let puts = (mib << 20) / value_bytes;
    let value = vec![0xa5u8; value_bytes];
    let key = |j: usize| {
        let k = if random { fmix64(j as u64) } else { j as u64 };
        (k as u128).to_be_bytes()
    };
    let written = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let (ingest, total, ingest_cpu_secs, gets) = std::thread::scope(|s| -> strata::Result<_> {
        // Named, so that a profile tells its samples from the writer's.
        let gets = reader
            .then(|| {
                std::thread::Builder::new()
                    .name("reader".into())
                    .spawn_scoped(s, || -> strata::Result<u64> {
                        let mut gets = 0u64;
                        while !done.load(Ordering::Acquire) {
                            let last = written.load(Ordering::Acquire);
                            for j in last.saturating_sub(READER_WINDOW_KEYS)..last {
                                assert!(db.get(key(j))?.is_some(), "key {j} written, not found");
                                gets += 1;
                            }
                            if last == 0 {
                                std::thread::yield_now();
                            }
                        }
                        Ok(gets)
                    })
            })
            .transpose()
            .expect("the reader thread starts");
        // The writes and the flush, in a closure: an error still stops the
        // reader below (else the scope would wait for it for ever).
        let run = || -> strata::Result<_> {
            let mut batch = WriteBatch::new();
            let started = Instant::now();
            let cpu_started = thread_cpu_secs();
            for i in (0..puts).step_by(batch_puts) {
                batch.clear();
                let end = (i + batch_puts).min(puts);
                for j in i..end {
                    batch.put(key(j), &value);
                }
                db.write(&batch, WriteOptions::default())?;
                written.store(end, Ordering::Release);
            }
            let ingest = started.elapsed();
            let cpu = thread_cpu_secs() - cpu_started;
            // The writer's context switches: waits (voluntary) and preemptions.
            if let Ok(status) = std::fs::read_to_string("/proc/thread-self/status") {
                let switches: Vec<&str> = status
                    .lines()
                    .filter(|l| l.contains("ctxt_switches"))
                    .collect();
                println!("writer thread: {}", switches.join(", ").replace('\t', " "));
            }
            // The reader goes on through the flush, as the lab's does.
            if delta {
                db.flush()?;
            } else {
                db.freeze()?;
            }
            Ok((ingest, started.elapsed(), cpu))
        };
        let run = run();
        done.store(true, Ordering::Release);
        let gets = match gets {
            Some(h) => h.join().expect("the reader panicked")?,
            None => 0,
        };
        let (ingest, total, cpu) = run?;
        Ok((ingest, total, cpu, gets))
    })?;
    println!(
        "{puts} puts of {value_bytes} B: ingest {:.3}s ({:.0} puts/s), total {:.3}s ({:.1} MiB/s)",
        ingest.as_secs_f64(),
        puts as f64 / ingest.as_secs_f64(),
        total.as_secs_f64(),
        mib as f64 / total.as_secs_f64()
    );
    println!(
        "writer thread CPU {ingest_cpu_secs:.3}s: {:.0} puts per CPU second (batches of {batch_puts})",
        puts as f64 / ingest_cpu_secs
    );
    if reader {
        println!(
            "reader: {gets} gets of the last {READER_WINDOW_KEYS} keys written, {:.0} gets/s (to the end of the flush or freeze)",
            gets as f64 / total.as_secs_f64()
        );
    }
    drop(db);
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
