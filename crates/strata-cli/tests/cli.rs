//! The `strata db` commands against a real database directory, through the
//! built binary: output formats, exit statuses and error lines.
//!
//! Databases live under CARGO_TARGET_TMPDIR (on the build's disk), not /tmp,
//! which may be a tmpfs that refuses the engine's O_DIRECT.

use std::process::{Command, Stdio};

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    /// None when a signal ended it.
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `strata ARGS` with RUST_BACKTRACE=1: no output may depend on it.
fn run(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run strata");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn strata(args: &[&str]) -> (bool, String, String) {
    let run = run(args);
    (run.code == Some(0), run.stdout, run.stderr)
}

/// An expected failure: status 1 and exactly one line `strata: …` on stderr.
fn assert_one_line_failure(run: &Run) {
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stderr.starts_with("strata: "), "{run:#?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:#?}");
    assert!(run.stderr.ends_with('\n'), "{run:#?}");
    assert!(!run.stderr.to_lowercase().contains("backtrace"), "{run:#?}");
}

/// A database in a fresh temporary directory holding apple, banana, cherry
/// (LSNs 1..=3), flushed to a delta layer.
fn flushed_db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("db").to_str().unwrap().to_owned();
    for (key, value) in [("apple", "red"), ("banana", "yellow"), ("cherry", "dark")] {
        let (ok, _, err) = strata(&["db", &db, "put", key, value]);
        assert!(ok, "{err}");
    }
    let (ok, _, err) = strata(&["db", &db, "flush"]);
    assert!(ok, "{err}");
    (dir, db)
}

/// The byte column where the value of a `label  value` line starts.
fn value_column(line: &str) -> usize {
    let gap = line
        .find("  ")
        .unwrap_or_else(|| panic!("no gap in {line:?}"));
    gap + line[gap..].len() - line[gap..].trim_start().len()
}

#[test]
fn put_get_scan_delete_and_history_through_the_cli() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let (ok, lsn1, err) = strata(&["db", db, "put", "apple", "red"]);
    assert!(ok, "{err}");
    assert_eq!(lsn1.trim(), "1");
    assert!(strata(&["db", db, "put", "banana", "yellow"]).0);
    assert!(strata(&["db", db, "put", "apple", "green"]).0);
    assert_eq!(strata(&["db", db, "get", "apple"]).1.trim(), "green");
    assert_eq!(
        strata(&["db", db, "get", "apple", "--lsn", "1"]).1.trim(),
        "red"
    );
    assert!(strata(&["db", db, "flush"]).0);
    assert_eq!(
        strata(&["db", db, "scan"]).1,
        "apple\tgreen\nbanana\tyellow\n"
    );
    assert!(strata(&["db", db, "put", "cherry", "dark"]).0);
    assert!(strata(&["db", db, "compact"]).0);
    let stats = strata(&["db", db, "stats", "--json"]).1;
    // One L1 run (no horizon: compact() forces no image).
    assert!(
        stats.contains("\"l0_layers\":0") && stats.contains("\"l1_runs\":1"),
        "{stats}"
    );
    assert_eq!(
        strata(&["db", db, "get", "apple", "--lsn", "1"]).1.trim(),
        "red"
    );
    assert!(strata(&["db", db, "delete", "cherry"]).0);
    assert_eq!(
        strata(&["db", db, "scan", "--from", "b"]).1,
        "banana\tyellow\n"
    );
    assert!(strata(&["db", db, "delete", "apple"]).0);
    let (ok, _, err) = strata(&["db", db, "get", "apple"]);
    assert!(!ok && err.contains("not found"), "{err}");
    assert_eq!(
        strata(&["db", db, "--hex", "get", "62616e616e61"]).1.trim(),
        "79656c6c6f77"
    );
    assert!(strata(&["db", db, "stats"])
        .1
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["last", "lsn", "6"]));
}

#[test]
fn stats_of_a_database_with_a_remote_store_start_from_its_index() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("db");
    let store = dir.path().join("store");
    let (db, store) = (db.to_str().unwrap(), store.to_str().unwrap());
    let (ok, _, err) = strata(&["db", db, "--remote", store, "put", "apple", "red"]);
    assert!(ok, "{err}");
    let (ok, _, err) = strata(&["db", db, "--remote", store, "sync-remote"]);
    assert!(ok, "{err}");
    let (ok, out, err) = strata(&["db", db, "--remote", store, "stats"]);
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("remote store"))
        .unwrap_or_else(|| panic!("no remote store line: {out}"));
    // A new process (a new generation) starts from the store's index:
    // the write is there; this process uploaded and read nothing.
    let (_, state) = line.split_once(": generation ").unwrap();
    assert_eq!(
        &state[state.find(',').unwrap()..],
        ", writes to LSN 1 uploaded, 0 B to upload; 0 files (0 B) uploaded, \
         0 GETs (0 B), 0 layers evicted",
        "{line}"
    );
}

#[test]
fn a_follower_reads_the_store_and_refuses_writes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("db");
    let follower = dir.path().join("follower");
    let store = dir.path().join("store");
    let (db, follower, store) = (
        db.to_str().unwrap(),
        follower.to_str().unwrap(),
        store.to_str().unwrap(),
    );
    assert!(strata(&["db", db, "--remote", store, "put", "apple", "red"]).0);
    assert!(strata(&["db", db, "--remote", store, "sync-remote"]).0);
    let follow = |args: &[&str]| {
        let mut all = vec!["db", follower, "--remote", store, "--follow"];
        all.extend_from_slice(args);
        strata(&all)
    };
    let (ok, out, err) = follow(&["get", "apple"]);
    assert!(ok && out == "red\n", "{out}{err}");
    let (ok, _, err) = follow(&["put", "pear", "green"]);
    assert!(
        !ok && err.contains("read-only") && err.lines().count() == 1,
        "{err}"
    );
    let (ok, out, err) = follow(&["stats"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("remote store") && l.contains("following, read-only")),
        "{out}"
    );
    // The writer's next write, synced to the store, is there at the
    // follower's next open.
    assert!(strata(&["db", db, "--remote", store, "put", "pear", "green"]).0);
    assert!(strata(&["db", db, "--remote", store, "sync-remote"]).0);
    assert_eq!(follow(&["get", "pear"]).1, "green\n");
    let (ok, _, err) = strata(&["db", follower, "--follow", "get", "pear"]);
    assert!(!ok && err.contains("--remote"), "{err}");
    // The writer's deletion delay is a writer's remote option too.
    let delay = ["--remote-deletion-delay", "0"];
    let (ok, out, err) =
        strata(&[&["db", db, "--remote", store][..], &delay, &["get", "pear"]].concat());
    assert!(ok && out == "green\n", "{err}");
    let (ok, _, err) = strata(&[&["db", db][..], &delay, &["get", "pear"]].concat());
    assert!(!ok && err.contains("--remote"), "{err}");
}

#[test]
fn a_directory_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(dir.path().join("x"), "y").unwrap();
    let (ok, _, err) = strata(&["db", dir.path().to_str().unwrap(), "get", "k"]);
    assert!(!ok && err.contains("not a strata database"), "{err}");
}

#[test]
fn stats_prints_aligned_lines_with_human_sizes_and_an_io_table() {
    let (_dir, db) = flushed_db();
    let run = run(&["db", &db, "stats"]);
    assert_eq!(run.code, Some(0), "{run:#?}");
    assert_eq!(run.stderr, "");
    let lines: Vec<&str> = run.stdout.lines().collect();
    let summary = &lines[..16];
    let labels: Vec<&str> = summary
        .iter()
        .map(|l| l[..l.find("  ").unwrap()].trim())
        .collect();
    assert_eq!(
        labels,
        [
            "last lsn",
            "io mode",
            "open layer",
            "frozen layers",
            "delta layers",
            "levels",
            "compactions",
            "compaction error",
            "flush error",
            "block cache",
            "index memory",
            "point lookups",
            "read retries",
            "flush memory",
            "value files",
            "remote store"
        ],
        "{}",
        run.stdout
    );
    let column = value_column(summary[0]);
    assert!(
        summary.iter().all(|l| value_column(l) == column),
        "{}",
        run.stdout
    );
    assert_eq!(&summary[0][column..], "3");
    assert!(
        ["buffered", "direct", "direct-rw"].contains(&&summary[1][column..]),
        "{}",
        run.stdout
    );
    // "1 (1.2 KiB)": a count, then the files' size with a unit.
    let delta = &summary[4][column..];
    let (count, size) = delta.split_once(' ').unwrap();
    assert!(count.parse::<u64>().unwrap() >= 1, "{delta}");
    assert!(
        size.starts_with('(') && (size.ends_with(" B)") || size.ends_with("iB)")),
        "{delta}"
    );
    // Each put was its own process, its own log: three L0 layers.
    assert_eq!(&summary[5][column..], "L0 3, L1 0 in 0 runs (0 images)");
    assert_eq!(&summary[6][column..], "0");
    assert_eq!(&summary[7][column..], "none");
    assert_eq!(&summary[8][column..], "none");
    assert_eq!(&summary[9][column..], "0 B (0 hits, 0 misses)");
    // "1.2 KiB (0 layer files open, 0 closed to stay within the budget)"
    let index = &summary[10][column..];
    assert!(
        index.ends_with(" layer files open, 0 closed to stay within the budget)"),
        "{}",
        run.stdout
    );
    assert!(index.split(" (").next().unwrap().ends_with('B'), "{index}");
    assert_eq!(&summary[11][column..], "0 (0 data blocks read)");
    assert_eq!(&summary[12][column..], "0");
    // The open log's first chunk (its header) is kept in memory.
    assert_eq!(
        &summary[13][column..],
        "0 B at most (0 B of logs read, 1.0 MiB of logs kept in memory)"
    );
    assert_eq!(&summary[14][column..], "0 of 0 B (0 B live)");
    assert_eq!(&summary[15][column..], "none");

    assert_eq!(lines[16], "");
    let header: Vec<&str> = lines[17]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "io since open",
            "reads",
            "read bytes",
            "writes",
            "write bytes",
            "syncs"
        ]
    );
    let rows: Vec<&str> = lines[18..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        rows,
        ["log", "delta", "image", "manifest", "other", "total"]
    );
    // Right-aligned: every row of the table ends at the same column.
    assert!(
        lines[17..].iter().all(|l| l.len() == lines[17].len()),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("Stats {"),
        "not a Debug dump: {}",
        run.stdout
    );
}

#[test]
fn stats_json_is_one_object_with_stable_keys_and_raw_numbers() {
    let (_dir, db) = flushed_db();
    let run = run(&["db", &db, "stats", "--json"]);
    assert_eq!(run.code, Some(0), "{run:#?}");
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    let stats: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let object = stats.as_object().unwrap();
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "block_cache_bytes",
            "block_cache_hits",
            "block_cache_misses",
            "compaction_error",
            "compaction_read_bytes",
            "compaction_write_bytes",
            "compactions",
            "delta_bytes",
            "delta_layers",
            "flush_error",
            "flush_memory_peak_bytes",
            "flush_read_bytes",
            "frozen_layers",
            "image_runs",
            "index_memory_bytes",
            "io",
            "io_mode",
            "l0_layers",
            "l1_layers",
            "l1_runs",
            "last_lsn",
            "layer_readers_closed",
            "layer_readers_open",
            "log_memory_bytes",
            "open_layer_bytes",
            "point_lookup_reads",
            "point_lookups",
            "read_retries",
            "remote",
            "value_file_bytes",
            "value_files",
            "value_live_bytes",
            "value_relocated_bytes"
        ]
    );
    let number = |key: &str| {
        stats[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {stats}"))
    };
    assert_eq!(number("last_lsn"), 3);
    assert!(number("delta_layers") >= 1, "{stats}");
    assert!(number("delta_bytes") > 0, "{stats}");
    // Layer files open at their first read, but for the newest: it gives
    // the next LSN, and open checks it against its descriptor.
    assert_eq!(number("layer_readers_open"), 1, "{stats}");
    assert!(number("index_memory_bytes") > 0, "{stats}");
    assert_eq!(number("l0_layers"), 3, "{stats}");
    assert_eq!(number("compactions"), 0, "{stats}");
    assert_eq!(number("compaction_write_bytes"), 0, "{stats}");
    assert_eq!(number("compaction_read_bytes"), 0, "{stats}");
    assert_eq!(number("read_retries"), 0, "{stats}");
    // Since this open (the stats command's): no flush yet.
    assert_eq!(number("flush_memory_peak_bytes"), 0, "{stats}");
    assert_eq!(number("flush_read_bytes"), 0, "{stats}");
    assert!(stats["compaction_error"].is_null(), "{stats}");
    assert!(stats["flush_error"].is_null(), "{stats}");
    number("open_layer_bytes");
    number("frozen_layers");
    assert!(
        ["buffered", "direct", "direct-rw"].contains(&stats["io_mode"].as_str().unwrap()),
        "{stats}"
    );

    let io = stats["io"].as_object().unwrap();
    let mut classes: Vec<&str> = io.keys().map(String::as_str).collect();
    classes.sort_unstable();
    assert_eq!(classes, ["delta", "image", "log", "manifest", "other"]);
    for (class, kinds) in io {
        let mut names: Vec<&str> = kinds
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["read", "sync", "write"], "{class}");
        for (kind, counters) in kinds.as_object().unwrap() {
            let ops = counters["ops"].as_u64().unwrap();
            let bytes = counters["bytes"].as_u64().unwrap();
            // Reads also count their retries (a read made again after its
            // bytes failed their check).
            let mut keys: Vec<&str> = counters
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            match kind.as_str() {
                "read" => assert_eq!(keys, ["bytes", "ops", "retries"], "{class}.{kind}"),
                _ => assert_eq!(keys, ["bytes", "ops"], "{class}.{kind}"),
            }
            // Syncs move no bytes; no operations move no bytes.
            if kind == "sync" || ops == 0 {
                assert_eq!(bytes, 0, "{class}.{kind}");
            }
        }
    }
    // Opening the flushed database reads the manifest and, of its layers,
    // the newest's footer, header and index (three reads) alone.
    assert_eq!(
        stats["io"]["delta"]["read"]["ops"].as_u64().unwrap(),
        3,
        "{stats}"
    );
}

#[test]
fn a_bad_key_is_one_line_and_exit_1_without_a_backtrace() {
    let (_dir, db) = flushed_db();
    let (db, long) = (db.as_str(), "k".repeat(5000));
    for args in [
        vec!["db", db, "put", "", "v"],
        vec!["db", db, "put", &long, "v"],
        vec!["db", db, "get", ""],
        vec!["db", db, "get", &long],
    ] {
        let run = run(&args);
        assert_one_line_failure(&run);
        assert!(run.stderr.contains("key is"), "{run:#?}");
    }
    // The database is untouched.
    assert_eq!(strata(&["db", db, "scan"]).1.lines().count(), 3);
}

#[test]
fn a_database_path_that_is_a_regular_file_is_one_line() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "not a database").unwrap();
    let run = run(&["db", file.to_str().unwrap(), "stats"]);
    assert_one_line_failure(&run);
    assert!(run.stderr.contains("not a strata database"), "{run:#?}");
}

#[test]
fn a_missing_directory_is_one_line_naming_it_once_per_cause() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let missing = dir.path().join("missing");
    let run = run(&["db", missing.to_str().unwrap(), "get", "k"]);
    assert_one_line_failure(&run);
    // The engine's error prints its io source and also returns it as its
    // source: the line says it once.
    assert_eq!(
        run.stderr.matches("no such directory").count(),
        1,
        "{run:#?}"
    );
}

#[test]
fn bad_hex_is_one_line() {
    let (_dir, db) = flushed_db();
    let run = run(&["db", &db, "--hex", "get", "zz"]);
    assert_one_line_failure(&run);
    assert!(run.stderr.contains("not hexadecimal"), "{run:#?}");
}

#[test]
fn an_absent_key_exits_1_with_not_found() {
    let (_dir, db) = flushed_db();
    let run = run(&["db", &db, "get", "durian"]);
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr, "strata db: not found\n");
}

#[test]
fn usage_errors_keep_clap_format_and_exit_2() {
    let run = run(&["db"]);
    assert_eq!(run.code, Some(2), "{run:#?}");
    assert!(run.stderr.contains("Usage:"), "{run:#?}");
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let (_dir, db) = flushed_db();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["db", &db, "scan"])
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strata");
    // Close the only read end before the child writes: its writes fail with EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn inspect_shows_levels_and_records_and_verify_finds_a_flipped_byte() {
    let (_dir, db) = flushed_db();
    // A horizon (at 1: nothing collected yet) has compact() write an image.
    assert!(strata(&["db", &db, "compact", "--horizon", "1"]).0);
    let (ok, out, err) = strata(&["inspect", &db, "--verify"]);
    assert!(ok, "{err}");
    assert!(out.contains("manifest     format 5"), "{out}");
    assert!(out.contains("L1: 1 layers in 1 runs"), "{out}");
    assert!(out.contains("image: 1 layers in 1 runs"), "{out}");
    // The image answers for the whole key space; GC has taken nothing.
    assert!(out.contains("  (-∞, ∞)"), "{out}");
    assert!(out.contains("reads from   LSN 0 "), "{out}");
    assert_eq!(out.matches(": ok, ").count(), 2, "{out}");
    let (ok, out, _) = strata(&["inspect", &format!("{db}/MANIFEST")]);
    assert!(ok && out.contains("snapshot: next file id"), "{out}");
    // A layer file: its summary and entries.
    let layer = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "delta"))
        .unwrap();
    let layer = layer.to_str().unwrap();
    let (ok, out, err) = strata(&["inspect", layer, "--dump"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("verified      3 entries") || out.contains("verified      2 entries"),
        "{out}"
    );
    assert!(out.contains("apple\t"), "{out}");
    // A flipped byte in a data block: exit 1, the file and offset named.
    let mut bytes = std::fs::read(layer).unwrap();
    bytes[30] ^= 0x55;
    std::fs::write(layer, bytes).unwrap();
    let (ok, _, err) = strata(&["inspect", &db, "--verify"]);
    assert!(!ok, "a corrupted layer verified");
    let name = std::path::Path::new(layer)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    assert!(
        err.contains(name) || err.contains("failed verification"),
        "{err}"
    );
    let (ok, _, err) = strata(&["inspect", layer, "--verify"]);
    assert!(!ok && err.contains(name) && err.contains("offset"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn inspect_lists_value_files_and_verify_reads_every_pointed_value() {
    // Values of 8 KiB stay in their log: the layer points into it.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("db");
    {
        let db = strata::Db::open(&path, strata::Options::default()).unwrap();
        for i in 0..8u8 {
            db.put([b'k', i], vec![i; 8192], strata::WriteOptions::default())
                .unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let db = path.to_str().unwrap();
    let (ok, out, err) = strata(&["inspect", db, "--verify"]);
    assert!(ok, "{err}");
    assert!(out.contains("value files  1 ("), "{out}");
    assert!(out.contains("% garbage"), "{out}");
    assert!(out.contains("8 values in value files"), "{out}");
    // A value's byte flipped in the value file: verify names the file.
    let log = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .min()
        .unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[64 + 32 + 11 + 2 + 4000] ^= 1;
    std::fs::write(&log, &bytes).unwrap();
    let (ok, out, _) = strata(&["inspect", db, "--verify"]);
    assert!(!ok, "{out}");
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    assert!(out.contains(&name), "{out}");
}
