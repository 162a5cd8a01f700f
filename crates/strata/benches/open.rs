//! Open time against the number of layer files (issue 11's aim: a database
//! of 1,000 layers opens in under 100 ms): open reads the manifest alone,
//! and layer files open at their first read.
//!
//! Builds databases of 10, 100 and 1,000 L0 layers (compaction off, one
//! small flush each) in `STRATA_BENCH_DIR` (default: target/bench-data), then
//! opens each 7 times and prints the median and the slowest open, with the
//! reads open made, and the time of the first get (which opens one layer).
//!
//! `cargo bench -p strata --bench open`

mod common;

use std::time::{Duration, Instant};
use strata::io::{FileClass, OpKind};
use strata::{Db, Options, WriteOptions};

fn options() -> Options {
    Options {
        l0_compaction_trigger: 0,
        image_run_threshold: 0,
        ..Options::default()
    }
}

fn main() {
    let base = common::bench_dir().join("open");
    println!(
        "{:>7}  {:>12}  {:>12}  {:>14}  {:>14}",
        "layers", "open median", "open max", "reads at open", "first get"
    );
    for layers in [10u32, 100, 1000] {
        let dir = base.join(format!("layers-{layers}"));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let db = Db::open(&dir, options()).expect("create");
            for i in 0..layers {
                db.put(
                    format!("key-{i:08}"),
                    vec![i as u8; 100],
                    WriteOptions::default(),
                )
                .expect("put");
                db.flush().expect("flush");
            }
            db.close().expect("close");
        }
        let mut times: Vec<Duration> = Vec::new();
        let (mut reads, mut first_get) = (0, Duration::ZERO);
        for _ in 0..7 {
            let started = Instant::now();
            let db = Db::open(&dir, options()).expect("open");
            times.push(started.elapsed());
            assert_eq!(db.stats().delta_layers, layers as usize);
            reads = db.stats().io.ops(FileClass::Delta, OpKind::Read);
            let started = Instant::now();
            assert!(db
                .get(format!("key-{:08}", layers / 2))
                .expect("get")
                .is_some());
            first_get = started.elapsed();
            db.close().expect("close");
        }
        times.sort();
        println!(
            "{layers:>7}  {:>9.2} ms  {:>9.2} ms  {reads:>14}  {:>11.3} ms",
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
            first_get.as_secs_f64() * 1e3
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
