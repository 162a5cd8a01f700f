//! Crash test: a child process writes synced batches and prints each
//! acknowledged LSN; the parent kills it with SIGKILL at a random moment,
//! reopens the database and checks that every acknowledged batch is readable
//! in full and that no batch is half applied. Repeated for many cycles over
//! one database, rotating io modes and engines, with a tiny layer cap so
//! freezes, background flushes, compactions and GC are in flight when the kill
//! lands; after each reopen, no layer file or log is left that is not live
//! (values of 512 bytes and more stay in value files, so relocations and
//! value-file deletions are among what the kills cut).
//!
//! This file is its own test binary (harness = false): run with `--child DIR
//! MODE ENGINE` it is the writer; otherwise the parent. `STRATA_CRASH_CYCLES`
//! sets the number of cycles (default 24; more, up to 4×, until compaction
//! and GC have both run).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use strata::{Db, IoEngine, IoMode, Options, WriteBatch, WriteOptions};

/// Entries of each batch.
const BATCH_ENTRIES: usize = 8;
/// LSNs of history kept: GC collects what an image covers below that.
const HISTORY_LSNS: u64 = 300;

fn options(mode: IoMode, engine: IoEngine) -> Options {
    Options {
        io_mode: mode,
        io_engine: engine,
        fallback_to_buffered: false,
        // Small enough that freezes, flushes and compactions (every two L0
        // layers, into runs of 1 MiB files) race with the kills.
        layer_size_bytes_max: 1 << 20,
        writer_buffer_bytes: 16 << 10,
        l0_compaction_trigger: 2,
        target_file_bytes: 1 << 20,
        // And an image after every two runs, with GC of the history more
        // than HISTORY_LSNS back.
        image_run_threshold: 2,
        history_lsns: Some(HISTORY_LSNS),
        // Values of 512 bytes and more (about three quarters of the bytes)
        // stay in their logs, and half of them (the shared keys') are
        // overwritten by every batch: value files are kept, relocated
        // (past 40 % garbage) and dropped while the kills land.
        large_value_bytes: 512,
        value_garbage_percent: 40,
        ..Options::default()
    }
}

fn batch_key(lsn: u64, j: usize) -> Vec<u8> {
    format!("b{lsn:010}-{j}").into_bytes()
}

fn shared_key(j: usize) -> Vec<u8> {
    format!("shared-{j}").into_bytes()
}

/// A shared key's value in batch `lsn`: the LSN, padded to 600 bytes for
/// even `j` and to a whole page for `j` a multiple of 4 (large values,
/// overwritten by every batch: garbage in the value files, which
/// compaction then moves values out of; the page-sized ones out of line in
/// their records, log format 4).
fn shared_value(lsn: u64, j: usize) -> Vec<u8> {
    let mut v = lsn.to_le_bytes().to_vec();
    if j.is_multiple_of(4) {
        v.resize(4096, j as u8);
    } else if j.is_multiple_of(2) {
        v.resize(600, j as u8);
    }
    v
}

fn batch_value(lsn: u64, j: usize) -> Vec<u8> {
    let len = 50 + (lsn as usize * 131 + j * 17) % 700;
    let mut v = format!("{lsn}:{j}:").into_bytes();
    v.resize(len, (lsn as u8) ^ (j as u8));
    v
}

/// The child: writes synced batches until it is killed, acknowledging each
/// on stdout; with `quiet_after`, it stops writing after that long and
/// leaves the background jobs (flush, compaction, images, GC) to run alone
/// until the kill lands in them.
fn child(dir: &Path, mode: IoMode, engine: IoEngine, quiet_after: Option<Duration>) {
    let started = Instant::now();
    let db = Db::open(dir, options(mode, engine)).expect("child open");
    let stdout = std::io::stdout();
    {
        use std::io::Write;
        let mut out = stdout.lock();
        writeln!(out, "ready").expect("stdout");
        out.flush().expect("stdout");
    }
    let mut lsn = db.last_lsn();
    loop {
        if quiet_after.is_some_and(|q| started.elapsed() >= q) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let next = lsn + 1;
        let mut b = WriteBatch::new();
        for j in 0..BATCH_ENTRIES {
            b.put(batch_key(next, j), batch_value(next, j));
            b.put(shared_key(j), shared_value(next, j));
        }
        // Delete an older batch's first key now and then (tombstones across layers).
        if next.is_multiple_of(7) && next > 10 {
            b.delete(batch_key(next - 10, 0));
        }
        lsn = db
            .write(&b, WriteOptions { sync: true })
            .expect("child write");
        assert_eq!(lsn, next);
        use std::io::Write;
        let mut out = stdout.lock();
        writeln!(out, "ack {lsn}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// Checks the reopened database against what was acknowledged.
/// Every batch written since the previous check (and a sample of older
/// ones, which earlier checks read in full) is read back.
fn check(
    dir: &Path,
    acked_max: u64,
    checked_before: u64,
    seed: u64,
) -> Result<(u64, usize, u64, usize), String> {
    let db = Db::open(dir, options(IoMode::DirectRw, IoEngine::Sync))
        .map_err(|e| format!("reopen: {e}"))?;
    // Every layer file on disk is live: the open removed what the killed
    // process left unlisted. A flush or a compaction that started after
    // the open may hold a file it has written and not yet listed: the
    // count is taken again until the background jobs are between files
    // (an orphan stays, and fails the check).
    let files_of = |ext: &str| -> Result<usize, String> {
        Ok(std::fs::read_dir(dir)
            .map_err(|e| e.to_string())?
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == ext))
            })
            .count())
    };
    let layer_files = || files_of("delta");
    // So is every log: the open one, a frozen one, or a value file.
    let live_logs = || {
        let s = db.stats();
        1 + s.frozen_layers + s.value_files
    };
    let mut tries = 0;
    loop {
        let (files, live) = (layer_files()?, db.stats().delta_layers);
        let (logs, logs_live) = (files_of("log")?, live_logs());
        if files == live && layer_files()? == files && logs == logs_live && files_of("log")? == logs
        {
            break;
        }
        tries += 1;
        if tries == 100 {
            return Err(format!(
                "{files} layer files on disk after the reopen, {live} live; \
                 {logs} logs, {logs_live} live (for 5 s)"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let last = db.last_lsn();
    if last < acked_max {
        return Err(format!(
            "acknowledged LSN {acked_max} but the database ends at {last}"
        ));
    }
    let sample = (0..64u64).map(|i| 1 + (seed.wrapping_mul(i + 1) >> 7) % checked_before.max(1));
    let recent = checked_before.saturating_sub(10).max(1)..=last;
    // Those batches are there in full (deleted first keys aside), none beyond.
    for lsn in sample.filter(|&l| l <= last).chain(recent) {
        for j in 0..BATCH_ENTRIES {
            let got = db.get(batch_key(lsn, j)).map_err(|e| format!("get: {e}"))?;
            let deleted =
                j == 0 && (lsn + 10) <= last && (lsn + 10).is_multiple_of(7) && lsn + 10 > 10;
            match (got, deleted) {
                (Some(v), false) if v == batch_value(lsn, j) => {}
                (None, true) => {}
                (got, _) => {
                    return Err(format!(
                        "batch {lsn} entry {j}: got {:?} (deleted: {deleted}); last LSN {last}",
                        got.map(|v| v.len())
                    ))
                }
            }
            // At its own LSN: the batch, or, once GC collected it, a
            // refusal (never a wrong answer), and only beyond the history.
            match db.get_at(batch_key(lsn, j), lsn) {
                Ok(at) if at.as_deref() == Some(&batch_value(lsn, j)[..]) => {}
                Ok(_) => return Err(format!("batch {lsn} entry {j} not readable at its own LSN")),
                Err(strata::Error::BelowHorizon { horizon, .. })
                    if horizon <= last.saturating_sub(HISTORY_LSNS) => {}
                Err(e) => return Err(format!("get_at {lsn}: {e}")),
            }
        }
    }
    for j in 0..BATCH_ENTRIES {
        if db
            .get(batch_key(last + 1, j))
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err(format!(
                "a key of batch {} exists beyond the last LSN {last}",
                last + 1
            ));
        }
        // The shared keys all come from the same (last) batch: no batch is half applied.
        let v = db.get(shared_key(j)).map_err(|e| e.to_string())?;
        if last > 0 && v.as_deref() != Some(&shared_value(last, j)[..]) {
            return Err(format!(
                "shared key {j} is {v:?}, not from the last batch {last}"
            ));
        }
    }
    let horizon = db.horizon();
    let db_l1_runs = db.stats().l1_runs;
    let value_files = db.stats().value_files;
    db.close().map_err(|e| format!("close: {e}"))?;
    Ok((last, db_l1_runs, horizon, value_files))
}

fn parent() -> Result<(), String> {
    let cycles: usize = std::env::var("STRATA_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
    let dir = base.path().join("db");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let combos = [
        (IoMode::DirectRw, IoEngine::Sync),
        (IoMode::Buffered, IoEngine::Sync),
        (IoMode::Direct, IoEngine::IoUring),
        (IoMode::DirectRw, IoEngine::IoUring),
    ];
    let mut seed = 0x2545_F491_4F6C_DD1Du64 ^ std::process::id() as u64;
    let mut acked_max = 0u64;
    let mut checked_before = 0u64;
    let mut total_acked = 0usize;
    let mut l1_runs = 0;
    let mut horizon = 0;
    let mut value_files_seen = 0;
    // `cycles` at least; on a loaded machine the children write less per
    // cycle, and the jobs take longer, so it goes on (up to 4× as many,
    // each child living longer) until compaction and GC have both run under
    // the kills.
    let mut cycle = 0;
    let mut silent = 0;
    while cycle < cycles || (cycle < 4 * cycles && (l1_runs == 0 || horizon == 0)) {
        let (mode, engine) = combos[cycle % combos.len()];
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Every fourth cycle the kill may land during open (recovery); the
        // others let the child open and write first.
        let during_open = cycle % 4 == 3;
        // Past `cycles` (compaction or GC not seen yet: a loaded machine,
        // or L0 compactions that keep the image job from ever finishing
        // while children write), the children live longer, and every other
        // one stops writing halfway through its life, so that the
        // background jobs run alone and the kill lands in them.
        let behind = cycle >= cycles;
        let longer = 1 + cycle.saturating_sub(cycles) as u64 / 4;
        let kill_after = Duration::from_millis(if during_open {
            seed % 400
        } else {
            (50 + seed % 500) * longer
        });
        let quiet_after = (behind && !during_open && cycle % 2 == 0)
            .then(|| (kill_after / 2).as_millis().to_string());
        let mut child = Command::new(&exe)
            .args([
                "--child",
                &dir.to_string_lossy(),
                mode.name(),
                engine.name(),
            ])
            .args(quiet_after.as_deref())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no child stdout")?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acked = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "ready" {
                    let _ = ready_tx.send(());
                }
                if let Some(n) = line
                    .strip_prefix("ack ")
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    acked.push(n);
                }
            }
            acked
        });
        if !during_open {
            ready_rx
                .recv_timeout(Duration::from_secs(120))
                .map_err(|_| format!("cycle {cycle}: the child did not open within 120 s"))?;
        }
        std::thread::sleep(kill_after);
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let status = child.wait().map_err(|e| e.to_string())?;
        let acked = reader.join().map_err(|_| "reader thread panicked")?;
        if let Some(&m) = acked.last() {
            acked_max = acked_max.max(m);
        }
        let started = Instant::now();
        let (last, runs, h, values) = check(&dir, acked_max, checked_before, seed)?;
        value_files_seen = value_files_seen.max(values);
        l1_runs = runs;
        horizon = h;
        checked_before = last;
        println!(
            "cycle {cycle:2}: {mode}/{engine}, killed after {kill_after:?} ({status}), {} batches acknowledged, \
             database at LSN {last}, checked in {:?}",
            acked.len(),
            started.elapsed()
        );
        total_acked += acked.len();
        // One child may spend its life in a slow fsync (a busy disk); three
        // in a row that write nothing are a child that does not write.
        if !during_open {
            silent = if acked.is_empty() { silent + 1 } else { 0 };
        }
        if silent >= 3 {
            return Err(format!(
                "cycle {cycle}: the last {silent} children acknowledged nothing; the test is not testing"
            ));
        }
        cycle += 1;
    }
    println!(
        "{cycle} cycles, {total_acked} batches acknowledged and found; {l1_runs} L1 runs, horizon {horizon}, \
         at most {value_files_seen} value files"
    );
    if value_files_seen == 0 {
        return Err("no value file was ever kept: the test is not testing them".into());
    }
    if cycle >= 8 && (l1_runs == 0 || horizon == 0) {
        return Err("nothing was ever compacted or collected: the test is not testing them".into());
    }
    // The workload leaves value files garbage enough for relocation (which
    // the children's background compaction runs while the kills land): a
    // last forced compaction here moves what is still due, and loses
    // nothing.
    let db =
        Db::open(&dir, options(IoMode::DirectRw, IoEngine::Sync)).map_err(|e| e.to_string())?;
    let before = db.stats();
    db.compact().map_err(|e| format!("compact: {e}"))?;
    let after = db.stats();
    println!(
        "a last compaction: value files {} -> {}, {} bytes of values relocated",
        before.value_files, after.value_files, after.value_relocated_bytes
    );
    db.close().map_err(|e| e.to_string())?;
    check(&dir, acked_max, checked_before, seed)?;
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        let mode: IoMode = args[3].parse().expect("mode");
        let engine: IoEngine = args[4].parse().expect("engine");
        let quiet_after = args
            .get(5)
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis);
        child(Path::new(&args[2]), mode, engine, quiet_after);
        return;
    }
    // Under `cargo test`, filters and harness flags may be passed: ignore them.
    match parent() {
        Ok(()) => println!("crash: 1 passed, 0 failed"),
        Err(e) => {
            eprintln!("crash test failed: {e}");
            println!("crash: 0 passed, 1 failed");
            std::process::exit(1);
        }
    }
}
