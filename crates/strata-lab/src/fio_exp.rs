//! The fio experiment (LAB.md §5): every job file of `fio/jobfiles/` through
//! strata's fio ioengine (`fio/build/libfio_strata.so`) and through fio's own
//! `psync` and `io_uring` engines on a plain file, side by side, with
//! `direct=1`. The runs are `fio/run-compare.sh`'s; this module builds the
//! engine when it is missing or older than its sources, calls the script once
//! per queue depth, reads fio's JSON and renders the report's table.
//!
//! Like for like (LAB.md): fio's engines read the device (`direct=1`), so
//! strata's reads must too. The file of every job is at least
//! [`DATA_PER_CACHE_MIN`]× strata's block cache at its default size (the
//! C API's configuration, which the fio engine opens strata with, cannot
//! size the cache, so the data is sized instead); every strata row with
//! gets carries strata's cache hit ratio from its statistics
//! ([`crate::get_reads`]), shown in the table, and a read aim whose figure
//! is made of cache hits is not judged.
//!
//! Without fio, or when the engine does not build, the experiment is
//! *skipped* (a result with no rows and the reason), not failed: the rest of
//! the lab does not depend on fio.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use anyhow::{bail, Context, Result};

use crate::aims::{Bound, Claim, Reference};
use crate::get_reads::{self, GetReads, DATA_PER_CACHE_MIN, HIT_RATIO_METRIC};
use crate::html::escape;
use crate::plot::format_value;
use crate::results::{
    interleave_with, DeviceSide, ExperimentResult, MetricSpec, OnFailure, Row, Spread,
};

/// fio's engines, in the order they run and appear in the report.
pub const ENGINES: [&str; 3] = ["strata", "psync", "io_uring"];

/// The library `fio/build.sh` builds, relative to the repository root.
pub const ENGINE_LIB: &str = "fio/build/libfio_strata.so";

/// The fio the engine is built for (`fio/build.sh` refuses any other).
pub const FIO_VERSION: &str = "fio-3.33";

/// One call of `fio/run-compare.sh`: some job files at one queue depth.
#[derive(Clone, Debug)]
pub struct Pass {
    pub iodepth: u32,
    /// Job names (`fio/jobfiles/<name>.fio`); empty: every job file.
    pub jobs: Vec<&'static str>,
    pub engines: Vec<&'static str>,
}

/// strata's block cache in every fio run: its default (the fio engine
/// opens strata with the C API's configuration, which has no key for it).
pub const STRATA_BLOCK_CACHE_BYTES: u64 = strata::BLOCK_CACHE_BYTES_DEFAULT;

/// The file of quick mode: the smallest that is [`DATA_PER_CACHE_MIN`]×
/// strata's block cache (512 MiB).
pub const QUICK_SIZE_BYTES: u64 = DATA_PER_CACHE_MIN * STRATA_BLOCK_CACHE_BYTES;
/// The file of full mode (16× the cache).
pub const FULL_SIZE_BYTES: u64 = 1 << 30;
const _: () = assert!(FULL_SIZE_BYTES >= QUICK_SIZE_BYTES);
const _: () = assert!(QUICK_SIZE_BYTES.is_multiple_of(1 << 20));

#[derive(Clone, Debug)]
pub struct FioParams {
    /// fio's `size=` per job (file size, and strata's key space): at least
    /// [`DATA_PER_CACHE_MIN`]× [`STRATA_BLOCK_CACHE_BYTES`], whole MiB.
    pub size_bytes: u64,
    pub runtime_s: u32,
    /// fio's `ramp_time` for every engine alike: the seconds a job runs
    /// before fio counts its I/O (strata's block cache warming up on the
    /// blocks of pointers, a compaction the layout left due). Strata's
    /// cache hit ratio counts the ramp too, so it can only be higher for
    /// the measured part.
    pub ramp_s: u32,
    /// Runs of every pass, one after the other (each pass runs its jobs
    /// through every engine in turn, so samples interleave across engines).
    pub repeats: u32,
    /// Within a pass, the runs of a job that only reads through the
    /// engines in turn, on data laid out once (run-compare.sh's `SLICES`):
    /// each slice is one pair of runs next to each other in time, the
    /// device's drift between them small, and a read row's ratio is the
    /// median of `repeats × read_slices` such pairs.
    pub read_slices: u32,
    pub direct: bool,
    pub numjobs: u32,
    pub passes: Vec<Pass>,
}

impl FioParams {
    pub fn new(quick: bool) -> FioParams {
        // psync is synchronous: at a deeper queue it would run the qd1 job
        // again, so only strata and io_uring run the qd16 pass.
        let deep = |jobs: Vec<&'static str>| Pass {
            iodepth: 16,
            jobs,
            engines: vec!["strata", "io_uring"],
        };
        let qd1 = Pass {
            iodepth: 1,
            jobs: Vec::new(),
            engines: ENGINES.to_vec(),
        };
        let params = if quick {
            FioParams {
                size_bytes: QUICK_SIZE_BYTES,
                runtime_s: 2,
                ramp_s: 1,
                repeats: 3,
                read_slices: 3,
                direct: true,
                numjobs: 1,
                passes: vec![qd1, deep(vec!["rand-read-iops", "rand-write-iops"])],
            }
        } else {
            FioParams {
                size_bytes: FULL_SIZE_BYTES,
                runtime_s: 20,
                ramp_s: 5,
                repeats: 3,
                read_slices: 4,
                direct: true,
                numjobs: 1,
                passes: vec![
                    qd1,
                    deep(vec!["rand-read-iops", "rand-write-iops", "randrw-mix"]),
                ],
            }
        };
        assert!(
            params.size_bytes >= DATA_PER_CACHE_MIN * STRATA_BLOCK_CACHE_BYTES
                && params.size_bytes.is_multiple_of(1 << 20),
            "the fio file must be {DATA_PER_CACHE_MIN}× strata's block cache, in whole MiB"
        );
        params
    }

    /// fio's `size=` (`SIZE` of the job files): whole MiB.
    pub fn size_arg(&self) -> String {
        format!("{}m", self.size_bytes >> 20)
    }

    /// The experiment's options in the results JSON.
    pub fn options(&self) -> BTreeMap<String, serde_json::Value> {
        let passes: Vec<serde_json::Value> = self
            .passes
            .iter()
            .map(|p| {
                serde_json::json!({
                    "iodepth": p.iodepth,
                    "jobs": if p.jobs.is_empty() { serde_json::json!("all") } else { serde_json::json!(p.jobs) },
                    "engines": p.engines,
                })
            })
            .collect();
        BTreeMap::from([
            ("size".to_string(), self.size_arg().into()),
            ("size_bytes".to_string(), self.size_bytes.into()),
            (
                "strata_block_cache_bytes".to_string(),
                STRATA_BLOCK_CACHE_BYTES.into(),
            ),
            (
                "like_for_like".to_string(),
                format!(
                    "reads reach the device: every job's file is {}× strata's block cache at its default size ({} MiB; the cache is not resized: the fio engine's configuration has no key for it, so the data is sized instead), and fio's engines read with direct=1; each strata row reports its cache hit ratio (gets served without a device read: 1 − strata's reads of layer blocks and value files per get), and a read aim whose hit ratio exceeds {:.1}% in any repeat is not judged",
                    self.size_bytes / STRATA_BLOCK_CACHE_BYTES,
                    STRATA_BLOCK_CACHE_BYTES >> 20,
                    get_reads::HIT_RATIO_JUDGED_MAX * 100.0
                )
                .into(),
            ),
            ("runtime_s".to_string(), self.runtime_s.into()),
            ("ramp_s".to_string(), self.ramp_s.into()),
            ("repeats".to_string(), self.repeats.into()),
            ("read_slices".to_string(), self.read_slices.into()),
            ("direct".to_string(), u32::from(self.direct).into()),
            ("numjobs".to_string(), self.numjobs.into()),
            ("passes".to_string(), passes.into()),
            (
                "latency".to_string(),
                "fio's completion latency (clat_ns): mean and 99th percentile".into(),
            ),
            (
                "method".to_string(),
                format!(
                    "fio/run-compare.sh per queue depth and repeat: each job file through strata's ioengine and fio's psync and io_uring on a plain file, one after the other; a job that writes runs once per engine on an emptied directory, a job that only reads has its files laid out once (each engine then reads them for 1 s, uncounted, so that no counted run follows its own layout's writes) and runs {} slices on them, each slice the engines in turn (in reverse order every other slice); ratios are taken between runs of the same slice, then their median is the row's",
                    self.read_slices
                )
                .into(),
            ),
        ])
    }
}

/// The repository (the folder holding `fio/run-compare.sh`): the source tree
/// this binary was built from, else the first ancestor of the current
/// directory that has one.
pub fn repo_root() -> Option<PathBuf> {
    let is_root = |p: &Path| p.join("fio/run-compare.sh").is_file();
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if is_root(&built_from) {
        return built_from.canonicalize().ok();
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().find(|p| is_root(p)).map(Path::to_path_buf)
}

/// Names of `fio/jobfiles/*.fio`, sorted.
pub fn job_names(repo: &Path) -> Result<Vec<String>> {
    let dir = repo.join("fio/jobfiles");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "fio") {
            if let Some(stem) = path.file_stem() {
                names.push(stem.to_string_lossy().into_owned());
            }
        }
    }
    names.sort();
    Ok(names)
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Newest modification time of the files the engine is built from.
fn newest_source(repo: &Path) -> Option<SystemTime> {
    let mut newest: Option<SystemTime> = None;
    let mut stack: Vec<PathBuf> = [
        "crates/strata/src",
        "crates/strata/Cargo.toml",
        "crates/strata-ffi/src",
        "crates/strata-ffi/include",
        "crates/strata-ffi/Cargo.toml",
        "fio/strata_engine.c",
        "fio/build.sh",
    ]
    .iter()
    .map(|p| repo.join(p))
    .collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        } else if let Some(t) = mtime(&path) {
            newest = Some(newest.map_or(t, |n| n.max(t)));
        }
    }
    newest
}

/// Why the engine needs building, if it does.
fn build_reason(repo: &Path) -> Option<&'static str> {
    let Some(built) = mtime(&repo.join(ENGINE_LIB)) else {
        return Some("missing");
    };
    match newest_source(repo) {
        Some(src) if src > built => Some("older than its sources"),
        _ => None,
    }
}

/// The last `n` non-empty lines of a log file, joined by " | ".
fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Checks fio and builds the engine if needed. `Err(reason)`: skip.
fn prepare(repo: Option<&Path>, out_dir: &Path) -> std::result::Result<PathBuf, String> {
    if !crate::device::fio_available() {
        return Err("fio is not installed (apt-get install fio dpkg-dev gcc)".to_string());
    }
    let version = Command::new("fio")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if version != FIO_VERSION {
        return Err(format!(
            "the installed fio is {version:?}; strata's ioengine is built against {FIO_VERSION}'s headers (Debian bookworm) and loads into that fio only"
        ));
    }
    let Some(repo) = repo else {
        return Err(format!(
            "fio/run-compare.sh not found: run the lab from the strata repository (built from {})",
            env!("CARGO_MANIFEST_DIR")
        ));
    };
    if let Some(reason) = build_reason(repo) {
        let log = out_dir.join("build.log");
        eprintln!(
            "  {ENGINE_LIB} is {reason}: fio/build.sh (log: {})",
            log.display()
        );
        let file =
            std::fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let err_file = file.try_clone().map_err(|e| e.to_string())?;
        let status = Command::new(repo.join("fio/build.sh"))
            .current_dir(repo)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err_file)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => return Err(format!("fio/build.sh failed ({s}): {}", log_tail(&log, 3))),
            Err(e) => return Err(format!("fio/build.sh could not run: {e}")),
        }
    }
    Ok(repo.to_path_buf())
}

/// One line of run-compare.sh's `runs.tsv`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunLine {
    pub job: String,
    pub engine: String,
    pub iodepth: u32,
    pub exit_code: i32,
    /// fio's JSON, relative to the script's output folder (beside it:
    /// strata's stats of the run).
    pub json: String,
    /// Which of the job's slices (from 1): runs of one slice ran back to
    /// back. A runs.tsv without the column has one slice.
    pub slice: u32,
}

/// Parses `runs.tsv` (header: job engine iodepth numjobs size runtime direct
/// exit_code json, then slice where the script wrote it).
pub fn parse_runs_tsv(text: &str) -> Result<Vec<RunLine>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .context("empty runs.tsv")?
        .split('\t')
        .collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .with_context(|| format!("runs.tsv has no {name} column"))
    };
    let (job, engine, iodepth, exit_code, json) = (
        col("job")?,
        col("engine")?,
        col("iodepth")?,
        col("exit_code")?,
        col("json")?,
    );
    let slice = col("slice").ok();
    let mut runs = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let get = |i: usize| {
            f.get(i)
                .copied()
                .with_context(|| format!("short runs.tsv line {line:?}"))
        };
        runs.push(RunLine {
            job: get(job)?.to_string(),
            engine: get(engine)?.to_string(),
            iodepth: get(iodepth)?.parse().context("runs.tsv iodepth")?,
            exit_code: get(exit_code)?.parse().context("runs.tsv exit_code")?,
            json: get(json)?.to_string(),
            slice: match slice {
                Some(i) => get(i)?.parse().context("runs.tsv slice")?,
                None => 1,
            },
        });
    }
    Ok(runs)
}

/// fio's figures for one direction of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct DirFigures {
    pub iops: f64,
    pub bw_bytes: f64,
    pub io_bytes: u64,
    pub total_ios: u64,
    /// Completion latency (fio's `clat_ns`).
    pub clat_mean_ns: f64,
    pub clat_p99_ns: Option<f64>,
    /// Total latency (`lat_ns`: submission + completion).
    pub lat_mean_ns: f64,
}

/// What one fio run reported (its first job: the job files use
/// `group_reporting`).
#[derive(Clone, Debug, PartialEq)]
pub struct FioJob {
    pub fio_version: String,
    pub jobname: String,
    pub error: i64,
    pub rw: Option<String>,
    pub bs: Option<String>,
    /// `None` for a direction the job did not exercise.
    pub read: Option<DirFigures>,
    pub write: Option<DirFigures>,
}

/// Parses fio's `--output-format=json` (text before the document, such as
/// an engine's messages, is skipped).
pub fn parse_fio_json(text: &str) -> Result<FioJob> {
    let start = if text.starts_with('{') {
        0
    } else {
        text.find("\n{")
            .map(|i| i + 1)
            .context("no JSON document in fio's output")?
    };
    let doc: serde_json::Value =
        serde_json::from_str(&text[start..]).context("parse fio's JSON")?;
    let job = doc["jobs"].get(0).context("fio's JSON has no jobs[0]")?;
    let dir = |name: &str| -> Result<Option<DirFigures>> {
        let d = &job[name];
        let total_ios = d["total_ios"].as_u64().unwrap_or(0);
        if total_ios == 0 {
            return Ok(None);
        }
        let num = |v: &serde_json::Value, what: &str| {
            v.as_f64()
                .with_context(|| format!("fio's JSON: no jobs[0].{name}.{what}"))
        };
        Ok(Some(DirFigures {
            iops: num(&d["iops"], "iops")?,
            bw_bytes: num(&d["bw_bytes"], "bw_bytes")?,
            io_bytes: d["io_bytes"].as_u64().unwrap_or(0),
            total_ios,
            clat_mean_ns: num(&d["clat_ns"]["mean"], "clat_ns.mean")?,
            clat_p99_ns: d["clat_ns"]["percentile"]["99.000000"].as_f64(),
            lat_mean_ns: d["lat_ns"]["mean"].as_f64().unwrap_or(f64::NAN),
        }))
    };
    let opt = |key: &str| job["job options"][key].as_str().map(str::to_string);
    Ok(FioJob {
        fio_version: doc["fio version"].as_str().unwrap_or("").to_string(),
        jobname: job["jobname"].as_str().unwrap_or("").to_string(),
        error: job["error"].as_i64().unwrap_or(0),
        rw: opt("rw"),
        bs: opt("bs"),
        read: dir("read")?,
        write: dir("write")?,
    })
}

pub fn metrics() -> Vec<MetricSpec> {
    let mut specs = vec![
        MetricSpec::new("iops", "IOPS (read + write)", "IOPS", true),
        MetricSpec::new("mib_s", "Bandwidth (read + write)", "MiB/s", true),
        MetricSpec::new("x_io_uring", "IOPS ÷ io_uring's", "×", true),
        MetricSpec::new("x_psync", "IOPS ÷ psync's", "×", true),
        MetricSpec::new("read_iops", "Read IOPS", "IOPS", true),
        MetricSpec::new("read_mib_s", "Read bandwidth", "MiB/s", true).vs_device(DeviceSide::Read),
        MetricSpec::new("read_lat_mean_us", "Read latency mean", "µs", false),
        MetricSpec::new("read_lat_p99_us", "Read latency p99", "µs", false),
        MetricSpec::new("write_iops", "Write IOPS", "IOPS", true),
        MetricSpec::new("write_mib_s", "Write bandwidth", "MiB/s", true)
            .vs_device(DeviceSide::Write),
        MetricSpec::new("write_lat_mean_us", "Write latency mean", "µs", false),
        MetricSpec::new("write_lat_p99_us", "Write latency p99", "µs", false),
    ];
    specs.extend(crate::get_reads::metric_specs());
    specs
}

const MIB: f64 = 1024.0 * 1024.0;

/// The case label of a job at a queue depth.
pub fn case_label(job: &str, iodepth: u32) -> String {
    format!("{job} qd{iodepth}")
}

/// A result row from one parsed run (without the ratios: see [`add_ratios`]).
pub fn row_of(job: &str, engine: &str, iodepth: u32, fio: &FioJob) -> Row {
    let mut row = Row::new(&case_label(job, iodepth), engine, "")
        .param("job", job)
        .param("iodepth", iodepth);
    if let Some(rw) = &fio.rw {
        row = row.param("rw", rw.as_str());
    }
    if let Some(bs) = &fio.bs {
        row = row.param("bs", bs.as_str());
    }
    let (mut iops, mut bw) = (0.0, 0.0);
    for (name, d) in [("read", &fio.read), ("write", &fio.write)] {
        let Some(d) = d else { continue };
        iops += d.iops;
        bw += d.bw_bytes;
        row = row
            .metric(&format!("{name}_iops"), d.iops)
            .metric(&format!("{name}_mib_s"), d.bw_bytes / MIB)
            .metric(&format!("{name}_lat_mean_us"), d.clat_mean_ns / 1000.0)
            .param(&format!("{name}_io_bytes"), d.io_bytes)
            .param(&format!("{name}_total_ios"), d.total_ios)
            .param(&format!("{name}_lat_total_mean_us"), d.lat_mean_ns / 1000.0);
        if let Some(p99) = d.clat_p99_ns {
            row = row.metric(&format!("{name}_lat_p99_us"), p99 / 1000.0);
        }
    }
    row.metric("iops", iops).metric("mib_s", bw / MIB)
}

/// Adds `x_io_uring` and `x_psync` (the row's IOPS ÷ that engine's on the
/// same case) to every row.
pub fn add_ratios(rows: &mut [Row]) {
    let reference: Vec<(String, String, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.case.clone(), r.engine.clone(), *r.metrics.get("iops")?)))
        .collect();
    for row in rows.iter_mut() {
        let Some(iops) = row.metrics.get("iops").copied() else {
            continue;
        };
        for (engine, key) in [("io_uring", "x_io_uring"), ("psync", "x_psync")] {
            if let Some((_, _, base)) = reference
                .iter()
                .find(|(c, e, _)| *c == row.case && e == engine)
            {
                if *base > 0.0 {
                    row.metrics.insert(key.to_string(), iops / base);
                }
            }
        }
    }
}

/// The rows of every slice, each with its ratios to the engines of its own
/// slice (runs that ran back to back: [`add_ratios`]), slice by slice.
pub fn with_paired_ratios(slices: BTreeMap<u32, Vec<Row>>) -> Vec<Row> {
    let mut out = Vec::new();
    for (_, mut rows) in slices {
        add_ratios(&mut rows);
        out.extend(rows);
    }
    out
}

/// The Haura fio engine's published 4 KiB random-write IOPS at qd1.
pub const HAURA_WRITE_IOPS: f64 = 2200.0;
/// Issue 5's aim against it: an order of magnitude above.
pub const HAURA_RATIO_AIM_MIN: f64 = 10.0;
/// Issue 30's aim for the 1 MiB jobs against fio's io_uring engine.
pub const LARGE_BLOCK_RATIO_AIM_MIN: f64 = 0.8;
/// Issue 31's aim for 4 KiB random reads against fio's io_uring engine,
/// on data 8× strata's cache, at iodepth 1 and 16.
pub const SMALL_READ_RATIO_AIM_MIN: f64 = 0.9;

/// The issues' aims: 4 KiB random writes ≥ io_uring's IOPS at the same
/// queue depth, 4 KiB random reads ≥ 90 % of it (issue 31); an order of magnitude
/// above the Haura engine's published ~2,200 write IOPS (issue 5); the 1
/// MiB jobs, reads and writes, ≥ 80 % of io_uring's (issue 30). A read
/// aim shows strata's cache hit ratio, and is not judged when its figure is
/// made of cache hits or has no hit ratio ([`get_reads::not_judged_why`]).
pub fn aims(rows: &[Row]) -> Vec<Claim> {
    let mut claims = Vec::new();
    for row in rows.iter().filter(|r| r.engine == "strata") {
        let job = row.params.get("job").and_then(|v| v.as_str()).unwrap_or("");
        // Issue 30's: the 1 MiB jobs at 0.8× io_uring's (large values are
        // written once, into the log, and read with one read each).
        let (what, aim) = match job {
            "rand-write-iops" => ("4 KiB random writes", 1.0),
            "rand-read-iops" => ("4 KiB random reads", SMALL_READ_RATIO_AIM_MIN),
            "seq-write-bw" => ("1 MiB sequential writes", LARGE_BLOCK_RATIO_AIM_MIN),
            "rand-write-bw" => ("1 MiB random writes", LARGE_BLOCK_RATIO_AIM_MIN),
            "seq-read-bw" => ("1 MiB sequential reads", LARGE_BLOCK_RATIO_AIM_MIN),
            "rand-read-bw" => ("1 MiB random reads", LARGE_BLOCK_RATIO_AIM_MIN),
            _ => continue,
        };
        let (Some(iops), Some(x)) = (row.metrics.get("iops"), row.metrics.get("x_io_uring")) else {
            continue;
        };
        let mut strata = if job.ends_with("-bw") {
            // A 1 MiB block per operation: IOPS are MiB/s.
            format!("strata {iops:.0} MiB/s")
        } else {
            format!("strata {iops:.0} IOPS")
        };
        let reads = job.contains("read");
        if let Some(r) = row.metrics.get(HIT_RATIO_METRIC).filter(|_| reads) {
            let _ = write!(strata, " (cache hits {})", get_reads::format_hit_ratio(*r));
        }
        let claim = Claim::Ratio {
            what: format!("{what} at {}", row.case.rsplit(' ').next().unwrap_or("")),
            strata,
            ratio: *x,
            decimals: 2,
            reference: Reference::Engine("io_uring's".to_string()),
            bound: Bound::AtLeast(aim),
        };
        // A read figure counts only when the device served it.
        let why = if reads {
            get_reads::not_judged_why(row)
        } else {
            None
        };
        claims.push(claim.judged_unless(why));
        if job == "rand-write-iops" && row.params.get("iodepth") == Some(&1.into()) {
            claims.push(Claim::Ratio {
                what: "4 KiB random writes at qd1".to_string(),
                strata: format!("strata {iops:.0} IOPS"),
                ratio: iops / HAURA_WRITE_IOPS,
                decimals: 1,
                reference: Reference::Published(
                    "the Haura fio engine's published ~2,200".to_string(),
                ),
                bound: Bound::AtLeast(HAURA_RATIO_AIM_MIN),
            });
        }
    }
    claims
}

/// [`aims`]' notes, one per aim.
pub fn aim_notes(rows: &[Row]) -> Vec<String> {
    crate::aims::notes(&aims(rows))
}

/// The note that closes the results of a run that was not skipped (after
/// the aims): what a write's acknowledgement means on each side.
pub const WRITE_CONTRACT_NOTE: &str = "strata acknowledges a write once it is in its write path (its WAL buffer and memtable), the plain-file engines once the device has it (direct=1): the job files set no sync=/fsync=, so write figures compare those two contracts";

/// What the experiment produced.
pub struct FioOutcome {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    /// Set when the experiment did not run, with the reason.
    pub skipped: Option<String>,
    /// Extra options learnt while running (fio version, engine library).
    pub options: BTreeMap<String, serde_json::Value>,
}

/// Runs every pass with `data_dir` for fio's files and databases and
/// `out_dir` for fio's raw output (`<out_dir>/qd<N>/<job>/<engine>.json`).
pub fn run(params: &FioParams, data_dir: &Path, out_dir: &Path) -> Result<FioOutcome> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("create {}", out_dir.display()))?;
    let mut outcome = FioOutcome {
        rows: Vec::new(),
        notes: Vec::new(),
        skipped: None,
        options: BTreeMap::new(),
    };
    let repo = match prepare(repo_root().as_deref(), out_dir) {
        Ok(repo) => repo,
        Err(why) => {
            outcome.notes.push(format!("skipped: {why}"));
            outcome.skipped = Some(why);
            return Ok(outcome);
        }
    };
    outcome.options.insert(
        "engine_library".to_string(),
        repo.join(ENGINE_LIB).display().to_string().into(),
    );
    if let Ok(config) = std::env::var("STRATA_FIO_CONFIG") {
        outcome
            .options
            .insert("strata_fio_config".to_string(), config.into());
    }
    let all_jobs = job_names(&repo)?;
    if all_jobs.is_empty() {
        bail!("no job files in {}", repo.join("fio/jobfiles").display());
    }
    let pass_run = PassRun {
        params,
        repo: &repo,
        all_jobs: &all_jobs,
        data_dir,
        out_dir,
    };
    let mut tally = Tally::default();
    // (case, engine) → one row per repeat (per slice of a repeat, for a
    // job that only reads), in first-seen order.
    let mut samples: Vec<((String, String), Vec<Row>)> = Vec::new();
    // Every pass in turn, repeats outermost; a pass that cannot run ends
    // the experiment.
    let taken = interleave_with(
        OnFailure::Stop,
        params.repeats,
        params.passes.len(),
        |rep, p| -> Result<()> {
            if rep > 1 && samples.is_empty() {
                // The first round of every pass failed: a second says the same.
                return Ok(());
            }
            for row in pass_run.run(&params.passes[p], rep, &mut tally)? {
                let key = (row.case.clone(), row.engine.clone());
                match samples.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, rows)) => rows.push(row),
                    None => samples.push((key, vec![row])),
                }
            }
            Ok(())
        },
    );
    taken.into_samples()?;
    let Tally {
        notes,
        fio_version,
        runs_total,
    } = tally;
    outcome.notes.extend(notes);
    outcome.rows = samples
        .iter()
        .filter_map(|(_, rows)| Row::from_samples(rows))
        .collect();
    print_pass(&outcome.rows);
    if let Some(v) = fio_version {
        outcome.options.insert("fio_version".to_string(), v.into());
    }
    // Each failed run was said once above; the error only counts them.
    if outcome.rows.is_empty() {
        bail!(
            "every fio run failed ({runs_total} runs; the first failure is above, logs under {})",
            out_dir.display()
        );
    }
    if !outcome.rows.iter().any(|r| r.engine == "strata") {
        bail!(
            "no fio run through strata's engine succeeded (logs under {})",
            out_dir.display()
        );
    }
    Ok(outcome)
}

/// What every pass of one run shares.
struct PassRun<'a> {
    params: &'a FioParams,
    repo: &'a Path,
    all_jobs: &'a [String],
    data_dir: &'a Path,
    out_dir: &'a Path,
}

/// What the passes learn as they run.
#[derive(Default)]
struct Tally {
    /// One per failed run, naming its log.
    notes: Vec<String>,
    fio_version: Option<String>,
    runs_total: usize,
}

impl PassRun<'_> {
    /// Runs `pass` once (repeat `rep`): its rows, with the ratios of the
    /// engines that ran back to back in it. A run that failed is a note.
    fn run(&self, pass: &Pass, rep: u32, tally: &mut Tally) -> Result<Vec<Row>> {
        let params = self.params;
        let jobs: Vec<String> = if pass.jobs.is_empty() {
            self.all_jobs.to_vec()
        } else {
            pass.jobs.iter().map(|j| j.to_string()).collect()
        };
        let rel = |p: &str| format!("fio/qd{}/rep{rep}/{p}", pass.iodepth);
        let pass_dir = self.out_dir.join(format!("qd{}/rep{rep}", pass.iodepth));
        let _ = std::fs::remove_dir_all(&pass_dir);
        std::fs::create_dir_all(&pass_dir)?;
        let log_path = pass_dir.join("run-compare.log");
        let what_pass = format!("fio qd{} run {rep}/{}", pass.iodepth, params.repeats);
        let status = run_compare(
            params,
            pass,
            &jobs,
            self.repo,
            self.data_dir,
            &pass_dir,
            &log_path,
        )
        .with_context(|| {
            format!(
                "{what_pass}: fio/run-compare.sh (log: {})",
                log_path.display()
            )
        })?;
        let _ = std::fs::remove_dir_all(self.data_dir);
        let runs = match std::fs::read_to_string(pass_dir.join("runs.tsv")) {
            Ok(text) => parse_runs_tsv(&text)?,
            Err(err) => {
                let note = format!(
                    "{what_pass}: run-compare.sh wrote no runs.tsv ({status}, {err}); log: {}",
                    log_path.display()
                );
                eprintln!("  {note}");
                tally.notes.push(note);
                return Ok(Vec::new());
            }
        };
        // The rows of each slice: the runs that ran back to back.
        let mut slices: BTreeMap<u32, Vec<Row>> = BTreeMap::new();
        for run in &runs {
            tally.runs_total += 1;
            let what = format!(
                "fio {} / {} (run {rep})",
                case_label(&run.job, run.iodepth),
                run.engine
            );
            let json_path = pass_dir.join(&run.json);
            let failure = if run.exit_code != 0 {
                Some(format!("fio exited with {}", run.exit_code))
            } else {
                match std::fs::read_to_string(&json_path)
                    .map_err(anyhow::Error::from)
                    .and_then(|text| parse_fio_json(&text))
                {
                    Ok(fio) if fio.error != 0 => Some(format!("fio reported error {}", fio.error)),
                    Ok(fio) => {
                        tally
                            .fio_version
                            .get_or_insert_with(|| fio.fio_version.clone());
                        let row = row_of(&run.job, &run.engine, run.iodepth, &fio)
                            .param("fio_json", rel(&run.json))
                            .param("size", params.size_arg())
                            .param("runtime_s", params.runtime_s)
                            .param("direct", u32::from(params.direct))
                            .param("numjobs", params.numjobs);
                        slices
                            .entry(run.slice)
                            .or_default()
                            .push(with_strata_stats(row, &pass_dir, run));
                        None
                    }
                    Err(err) => Some(format!("{err:#}")),
                }
            };
            if let Some(why) = failure {
                // One line per failed run, naming the log that says why.
                let note = format!("{what} failed: {why}; log: {}", log_path.display());
                eprintln!("  {note}");
                tally.notes.push(note);
            }
        }
        Ok(with_paired_ratios(slices))
    }
}

/// `row` with strata's own statistics of `run` where its engine wrote them,
/// and the figures of its gets ([`with_get_reads`]) over the part of the
/// job fio counted: since the ramp ended, where the engine wrote the stats
/// of that moment (`strata.stats.ramp.json`).
fn with_strata_stats(row: Row, pass_dir: &Path, run: &RunLine) -> Row {
    if run.engine != "strata" {
        return row;
    }
    let run_dir = pass_dir.join(&run.json);
    let run_dir = run_dir.parent().unwrap_or(pass_dir);
    let read = |name: &str| {
        std::fs::read_to_string(run_dir.join(name))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    };
    match read("strata.stats.json") {
        Some(stats) => {
            let ramp = read("strata.stats.ramp.json");
            with_get_reads(row, &stats, ramp.as_ref()).param("strata_stats", stats)
        }
        None => row,
    }
}

/// `row` with the cache hit ratio and reads per get of the gets in
/// strata's `stats` (since the job opened the database: the layout reads
/// nothing but a marker, so they are the job's reads), less those already
/// in `ramp` (the stats when fio's ramp ended) where there is one, where
/// it made any.
pub fn with_get_reads(
    row: Row,
    stats: &serde_json::Value,
    ramp: Option<&serde_json::Value>,
) -> Row {
    let Some(mut reads) = GetReads::from_stats_json(stats) else {
        return row;
    };
    if let Some(before) = ramp.and_then(GetReads::from_stats_json) {
        reads = reads.since(&before);
    }
    if reads.gets > 0 {
        reads.add_to(row)
    } else {
        row
    }
}

/// Runs `fio/run-compare.sh` for one pass into `pass_dir`, its output in
/// `log_path`; prints its progress lines. Every path it is given is
/// absolute (the caller's are).
fn run_compare(
    params: &FioParams,
    pass: &Pass,
    jobs: &[String],
    repo: &Path,
    data_dir: &Path,
    pass_dir: &Path,
    log_path: &Path,
) -> Result<std::process::ExitStatus> {
    debug_assert!(data_dir.is_absolute() && pass_dir.is_absolute());
    let mut log = std::fs::File::create(log_path)?;
    let mut child = Command::new(repo.join("fio/run-compare.sh"))
        .arg("-o")
        .arg(pass_dir)
        .arg("-d")
        .arg(data_dir)
        .arg("-e")
        .arg(pass.engines.join(" "))
        .args(jobs)
        .env("SIZE", params.size_arg())
        .env("RUNTIME", params.runtime_s.to_string())
        .env("DIRECT", u32::from(params.direct).to_string())
        .env("IODEPTH", pass.iodepth.to_string())
        .env("NUMJOBS", params.numjobs.to_string())
        .env("FIO_EXTRA", format!("--ramp_time={}", params.ramp_s))
        .env("SLICES", params.read_slices.to_string())
        .env_remove("KEEP_DATA")
        .current_dir(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.try_clone()?)
        .spawn()?;
    // Progress: the script's "job / engine" lines; everything in the log.
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            writeln!(log, "{line}")?;
            if let Some(rest) = line.strip_prefix("run-compare.sh: ") {
                eprintln!("  fio qd{} {rest}", pass.iodepth);
            }
        }
    }
    Ok(child.wait()?)
}

/// One line per case: each engine's IOPS and strata's ratios.
fn print_pass(rows: &[Row]) {
    let mut cases: Vec<&str> = Vec::new();
    for r in rows {
        if !cases.contains(&r.case.as_str()) {
            cases.push(&r.case);
        }
    }
    for case in cases {
        let mut line = format!("  {case:<22}");
        let mut strata = None;
        for r in rows.iter().filter(|r| r.case == case) {
            let iops = r.metrics.get("iops").copied().unwrap_or(f64::NAN);
            let mib = r.metrics.get("mib_s").copied().unwrap_or(f64::NAN);
            let _ = write!(line, " {} {iops:.0} IOPS {mib:.0} MiB/s;", r.engine);
            if r.engine == "strata" {
                strata = Some(r);
            }
        }
        if let Some(s) = strata {
            for (key, name) in [("x_io_uring", "io_uring"), ("x_psync", "psync")] {
                if let Some(x) = s.metrics.get(key) {
                    let _ = write!(
                        line,
                        " strata ÷ {name} {}",
                        ratio_text(*x, s.spread.get(key))
                    );
                }
            }
            if let Some(r) = s.metrics.get(HIT_RATIO_METRIC) {
                let _ = write!(
                    line,
                    "; strata's cache hits {}",
                    get_reads::format_hit_ratio(*r)
                );
            }
        }
        eprintln!("{line}");
    }
}

/// A ratio of the pass's line: the median of the per-slice ratios, with
/// their range where there were several. The engines' IOPS beside it are
/// each engine's own median, over other runs than any one pair: on a noisy
/// device their quotient and this median can differ (qd16 reads here:
/// 34,863 against 44,356 IOPS beside a ratio of 0.96, its pairs 0.54–1.28),
/// so the line says what the ratio's pairs spread over.
fn ratio_text(x: f64, spread: Option<&Spread>) -> String {
    match spread {
        Some(s) if s.n > 1 => format!(
            "{x:.2} (median of {} pairs, {:.2}–{:.2})",
            s.n, s.min, s.max
        ),
        _ => format!("{x:.2}"),
    }
}

/// The report's table for the fio experiment: one row per job, queue depth
/// and direction; per engine its IOPS, MiB/s and latencies; then strata's
/// IOPS ÷ io_uring's and ÷ psync's, strata's MiB/s ÷ the device line, and
/// on read rows strata's cache hit ratio and reads per get.
pub fn write_table(h: &mut String, r: &ExperimentResult) -> Result<()> {
    let engines: Vec<&str> = ENGINES
        .iter()
        .copied()
        .filter(|e| r.rows.iter().any(|row| row.engine == *e))
        .collect();
    writeln!(
        h,
        "<table class=\"experiment-table\" data-experiment=\"{}\"><thead>",
        escape(&r.experiment)
    )?;
    if engines.is_empty() {
        let why = r
            .options
            .get("skipped")
            .and_then(|v| v.as_str())
            .unwrap_or("no run succeeded");
        writeln!(
            h,
            "<tr><th class=\"l\">fio</th></tr></thead><tbody><tr><td class=\"l note\">skipped: {}</td></tr></tbody></table>",
            escape(why)
        )?;
        return Ok(());
    }
    const FIGURES: [(&str, &str); 4] = [
        ("iops", "IOPS"),
        ("mib_s", "MiB/s"),
        ("lat_mean_us", "mean µs"),
        ("lat_p99_us", "p99 µs"),
    ];
    write!(
        h,
        "<tr><th class=\"l\" rowspan=\"2\">job</th><th class=\"l\" rowspan=\"2\">direction</th>"
    )?;
    for e in &engines {
        write!(h, "<th colspan=\"{}\">{}</th>", FIGURES.len(), escape(e))?;
    }
    writeln!(h, "<th colspan=\"5\">strata</th></tr>")?;
    write!(h, "<tr>")?;
    for _ in &engines {
        for (_, label) in FIGURES {
            write!(h, "<th>{label}</th>")?;
        }
    }
    writeln!(
        h,
        "<th>IOPS ÷ io_uring</th><th>IOPS ÷ psync</th><th>MiB/s × device line</th><th>cache hits<br><span class=\"muted\">gets without a device read</span></th><th>reads per get</th></tr></thead><tbody>"
    )?;
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("<td>{a:.2}×</td>", a = a / b),
        _ => "<td class=\"muted\">–</td>".to_string(),
    };
    for case in r.cases() {
        let of = |engine: &str| {
            r.rows
                .iter()
                .find(|row| row.case == case && row.engine == engine)
        };
        for dir in ["read", "write"] {
            let key = |f: &str| format!("{dir}_{f}");
            if !r
                .rows
                .iter()
                .any(|row| row.case == case && row.metrics.contains_key(&key("iops")))
            {
                continue;
            }
            write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{dir}</td>",
                escape(&case)
            )?;
            for e in &engines {
                for (f, _) in FIGURES {
                    match of(e).and_then(|row| row.metrics.get(&key(f))) {
                        Some(v) => write!(h, "<td>{}</td>", format_value(*v))?,
                        None => write!(h, "<td class=\"muted\">–</td>")?,
                    }
                }
            }
            let get = |engine: &str, f: &str| {
                of(engine).and_then(|row| row.metrics.get(&key(f)).copied())
            };
            h.push_str(&ratio(get("strata", "iops"), get("io_uring", "iops")));
            h.push_str(&ratio(get("strata", "iops"), get("psync", "iops")));
            let device = r.device_line.as_ref().map(|l| match dir {
                "read" => l.read_mib_s,
                _ => l.write_mib_s,
            });
            h.push_str(&ratio(get("strata", "mib_s"), device));
            // strata's gets: on the read row only.
            let strata_figure = |key: &str| {
                of("strata")
                    .filter(|_| dir == "read")
                    .and_then(|row| row.metrics.get(key).copied())
            };
            match strata_figure(HIT_RATIO_METRIC) {
                Some(r) => write!(h, "<td>{}</td>", get_reads::format_hit_ratio(r))?,
                None => write!(h, "<td class=\"muted\">–</td>")?,
            }
            match strata_figure("strata_reads_per_get") {
                Some(r) => write!(h, "<td>{r:.2}</td>")?,
                None => write!(h, "<td class=\"muted\">–</td>")?,
            }
            writeln!(h, "</tr>")?;
        }
    }
    writeln!(h, "</tbody></table>")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIX_STRATA: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fio-randrw-mix-strata.json"
    ));
    const SEQ_READ_IO_URING: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fio-seq-read-bw-io_uring.json"
    ));

    #[test]
    fn parses_both_directions_of_a_mixed_job() {
        let job = parse_fio_json(MIX_STRATA).unwrap();
        assert_eq!(job.fio_version, "fio-3.33");
        assert_eq!(job.jobname, "randrw-mix");
        assert_eq!(job.error, 0);
        assert_eq!(job.rw.as_deref(), Some("randrw"));
        assert_eq!(job.bs.as_deref(), Some("4k"));
        let read = job.read.unwrap();
        assert!((read.iops - 10747.75075).abs() < 1e-6);
        assert_eq!(read.bw_bytes, 44022787.0);
        assert_eq!(read.total_ios, 32254);
        assert!((read.clat_mean_ns - 90474.997148).abs() < 1e-6);
        assert_eq!(read.clat_p99_ns, Some(152576.0));
        let write = job.write.unwrap();
        assert!((write.iops - 4584.471843).abs() < 1e-6);
        assert_eq!(write.clat_p99_ns, Some(4896.0));
    }

    #[test]
    fn a_direction_without_io_is_absent() {
        let job = parse_fio_json(SEQ_READ_IO_URING).unwrap();
        assert_eq!(job.bs.as_deref(), Some("1m"));
        assert!(job.read.is_some());
        assert_eq!(job.write, None);
        let row = row_of("seq-read-bw", "io_uring", 1, &job);
        assert_eq!(row.case, "seq-read-bw qd1");
        assert!(row.metrics.contains_key("read_iops"));
        assert!(!row.metrics.contains_key("write_iops"));
        let mib = row.metrics["read_mib_s"];
        assert!((mib - 1057311221.0 / MIB).abs() < 1e-9);
        assert_eq!(row.metrics["read_lat_p99_us"], 1105.92);
    }

    #[test]
    fn text_before_the_document_is_skipped() {
        let text = format!("fio: strata: laying out 1 file\n{MIX_STRATA}");
        assert_eq!(
            parse_fio_json(&text).unwrap(),
            parse_fio_json(MIX_STRATA).unwrap()
        );
        assert!(parse_fio_json("fio: no such file").is_err());
        assert!(parse_fio_json("{\"jobs\": []}").is_err());
    }

    #[test]
    fn rows_get_ratios_to_io_uring_and_psync() {
        let mix = parse_fio_json(MIX_STRATA).unwrap();
        let mut half = mix.clone();
        for d in [&mut half.read, &mut half.write].into_iter().flatten() {
            d.iops /= 2.0;
        }
        let mut rows = vec![
            row_of("randrw-mix", "strata", 1, &mix),
            row_of("randrw-mix", "psync", 1, &half),
            row_of("randrw-mix", "io_uring", 1, &half),
            row_of("randrw-mix", "strata", 16, &mix),
        ];
        add_ratios(&mut rows);
        assert!((rows[0].metrics["x_io_uring"] - 2.0).abs() < 1e-9);
        assert!((rows[0].metrics["x_psync"] - 2.0).abs() < 1e-9);
        assert!((rows[2].metrics["x_io_uring"] - 1.0).abs() < 1e-9);
        // No io_uring row at qd16: no ratio.
        assert!(!rows[3].metrics.contains_key("x_io_uring"));
        let total = mix.read.as_ref().unwrap().iops + mix.write.as_ref().unwrap().iops;
        assert!((rows[0].metrics["iops"] - total).abs() < 1e-9);
    }

    #[test]
    fn a_ratio_says_the_range_of_its_pairs() {
        assert_eq!(ratio_text(0.9612, None), "0.96");
        let one = Spread {
            min: 0.9,
            max: 0.9,
            n: 1,
        };
        assert_eq!(ratio_text(0.9, Some(&one)), "0.90");
        let pairs = Spread {
            min: 0.54,
            max: 1.283,
            n: 12,
        };
        assert_eq!(
            ratio_text(0.9612, Some(&pairs)),
            "0.96 (median of 12 pairs, 0.54–1.28)"
        );
    }

    #[test]
    fn ratios_pair_the_runs_of_one_slice_and_the_row_takes_their_median() {
        let mix = parse_fio_json(MIX_STRATA).unwrap();
        let scaled = |by: f64| {
            let mut f = mix.clone();
            for d in [&mut f.read, &mut f.write].into_iter().flatten() {
                d.iops *= by;
            }
            f
        };
        // The device doubles its speed from slice 1 to slice 2, and strata
        // stays at 0.9× io_uring in each: the paired ratios say 0.9 both
        // times, where engine medians across slices would not pair them.
        let slices = BTreeMap::from([
            (
                1,
                vec![
                    row_of("rand-read-iops", "strata", 1, &scaled(0.9)),
                    row_of("rand-read-iops", "io_uring", 1, &scaled(1.0)),
                ],
            ),
            (
                2,
                vec![
                    row_of("rand-read-iops", "io_uring", 1, &scaled(2.0)),
                    row_of("rand-read-iops", "strata", 1, &scaled(1.8)),
                ],
            ),
            (3, vec![row_of("rand-read-iops", "strata", 1, &scaled(5.0))]),
        ]);
        let rows = with_paired_ratios(slices);
        assert_eq!(rows.len(), 5);
        let strata: Vec<&Row> = rows.iter().filter(|r| r.engine == "strata").collect();
        for r in &strata[..2] {
            assert!(
                (r.metrics["x_io_uring"] - 0.9).abs() < 1e-9,
                "{:?}",
                r.metrics
            );
        }
        // A slice whose io_uring run failed has no ratio, not another
        // slice's.
        assert!(!strata[2].metrics.contains_key("x_io_uring"));
        let row = Row::from_samples(
            &rows
                .iter()
                .filter(|r| r.engine == "strata")
                .cloned()
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert!((row.metrics["x_io_uring"] - 0.9).abs() < 1e-9);
    }

    #[test]
    fn runs_tsv_is_parsed() {
        let text = "job\tengine\tiodepth\tnumjobs\tsize\truntime\tdirect\texit_code\tjson\n\
                    rand-read-iops\tstrata\t16\t1\t64m\t3\t1\t0\trand-read-iops/strata.json\n\
                    rand-read-iops\tio_uring\t16\t1\t64m\t3\t1\t1\trand-read-iops/io_uring.json\n";
        let runs = parse_runs_tsv(text).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(
            runs[0],
            RunLine {
                job: "rand-read-iops".to_string(),
                engine: "strata".to_string(),
                iodepth: 16,
                exit_code: 0,
                json: "rand-read-iops/strata.json".to_string(),
                slice: 1,
            }
        );
        assert_eq!(runs[1].exit_code, 1);
        assert!(parse_runs_tsv("").is_err());
        // The script's slices, in a column of their own.
        let text = "job\tengine\tiodepth\tnumjobs\tsize\truntime\tdirect\texit_code\tjson\tslice\n\
                    rand-read-iops\tio_uring\t1\t1\t64m\t3\t1\t0\trand-read-iops/slice2/io_uring.json\t2\n";
        let runs = parse_runs_tsv(text).unwrap();
        assert_eq!(
            (runs[0].slice, runs[0].json.as_str()),
            (2, "rand-read-iops/slice2/io_uring.json")
        );
        assert!(parse_runs_tsv(&text.replace("\t2\n", "\tx\n")).is_err());
    }

    #[test]
    fn aims_compare_strata_with_io_uring() {
        let mut rows = vec![
            Row::new("rand-write-iops qd1", "strata", "")
                .param("job", "rand-write-iops")
                .param("iodepth", 1)
                .metric("iops", 30000.0)
                .metric("x_io_uring", 3.0),
            Row::new("rand-read-iops qd16", "strata", "")
                .param("job", "rand-read-iops")
                .param("iodepth", 16)
                .metric("iops", 5000.0)
                .metric("x_io_uring", 0.5)
                .metric(HIT_RATIO_METRIC, 0.0),
        ];
        let notes = aim_notes(&rows);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].starts_with("aim met: 4 KiB random writes at qd1"));
        assert!(notes[1].starts_with("aim met") && notes[1].contains("13.6×"));
        assert_eq!(
            notes[2],
            "aim not met: 4 KiB random reads at qd16: strata 5000 IOPS (cache hits 0%) = 0.50× io_uring's (aim ≥ 0.9×)"
        );
        rows[0].metrics.insert("x_io_uring".to_string(), 0.9);
        assert!(aim_notes(&rows)[0].starts_with("aim not met"));
    }

    /// issue 31's rows: strata's 4 KiB random reads at 2.70× io_uring's on
    /// a file no larger than its block cache, every get a cache hit.
    fn cached_read_row(hit_ratios: &[f64]) -> Row {
        let samples: Vec<Row> = hit_ratios
            .iter()
            .map(|r| {
                Row::new("rand-read-iops qd1", "strata", "")
                    .param("job", "rand-read-iops")
                    .param("iodepth", 1)
                    .metric("iops", 45000.0)
                    .metric("x_io_uring", 2.7)
                    .metric(HIT_RATIO_METRIC, *r)
            })
            .collect();
        Row::from_samples(&samples).unwrap()
    }

    #[test]
    fn a_read_aim_made_of_cache_hits_is_not_judged_whatever_its_ratio() {
        let claims = aims(&[cached_read_row(&[0.97, 0.98, 0.97])]);
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].verdict(), crate::aims::Verdict::NotJudged);
        assert!(!claims[0].met());
        let note = claims[0].note();
        assert!(
            note.starts_with("aim not judged: 4 KiB random reads at qd1: strata 45000 IOPS (cache hits 97%) = 2.70× io_uring's (aim ≥ 0.9×); not judged: 98% of strata's gets"),
            "{note}"
        );
        // One repeat of three made of hits is enough.
        let claims = aims(&[cached_read_row(&[0.0, 0.0, 0.5])]);
        assert_eq!(claims[0].verdict(), crate::aims::Verdict::NotJudged);
        // Every get read the device: judged, and met.
        let claims = aims(&[cached_read_row(&[0.0, 0.01, 0.0])]);
        assert_eq!(claims[0].verdict(), crate::aims::Verdict::Met);
        // No hit ratio (no statistics): not judged.
        let mut row = cached_read_row(&[0.0]);
        row.metrics.remove(HIT_RATIO_METRIC);
        assert_eq!(aims(&[row])[0].verdict(), crate::aims::Verdict::NotJudged);
    }

    #[test]
    fn a_write_aim_is_judged_without_a_hit_ratio() {
        let row = Row::new("rand-write-iops qd16", "strata", "")
            .param("job", "rand-write-iops")
            .param("iodepth", 16)
            .metric("iops", 90000.0)
            .metric("x_io_uring", 1.5);
        let claims = aims(&[row]);
        assert_eq!(claims[0].verdict(), crate::aims::Verdict::Met);
    }

    #[test]
    fn a_run_s_stats_are_read_from_beside_its_json() {
        let tmp = tempfile::tempdir().unwrap();
        let stats = |lookups: u64| {
            serde_json::json!({
                "io_mode": "direct-rw",
                "point_lookups": lookups,
                "point_lookup_reads": 0,
                "block_cache_hits": lookups,
                "block_cache_misses": 0,
                "io": {"log": {"read": {"ops": 0, "bytes": 0, "retries": 0}}},
            })
        };
        // Two slices of one job, each with its own stats.
        for (slice, lookups) in [(1, 100u64), (2, 300)] {
            let dir = tmp.path().join(format!("rand-read-iops/slice{slice}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("strata.stats.json"), stats(lookups).to_string()).unwrap();
        }
        for (slice, lookups) in [(1, 100), (2, 300)] {
            let run = RunLine {
                job: "rand-read-iops".to_string(),
                engine: "strata".to_string(),
                iodepth: 1,
                exit_code: 0,
                json: format!("rand-read-iops/slice{slice}/strata.json"),
                slice,
            };
            let row = with_strata_stats(
                Row::new("rand-read-iops qd1", "strata", ""),
                tmp.path(),
                &run,
            );
            assert_eq!(row.params["strata_gets"], lookups, "slice {slice}");
        }
    }

    #[test]
    fn a_strata_row_gets_its_hit_ratio_from_the_engine_stats() {
        // strata.stats.json of a quick run's rand-read-iops at qd1 (the
        // counters that matter): 4 KiB values in value files, each get
        // reads its value from the device although its block is cached.
        let stats = serde_json::json!({
            "io_mode": "direct-rw",
            "point_lookups": 29940,
            "point_lookup_reads": 171,
            "block_cache_hits": 29767,
            "block_cache_misses": 171,
            "io": {"log": {"read": {"ops": 29939, "bytes": 138735104, "retries": 0}}},
        });
        let row = with_get_reads(Row::new("rand-read-iops qd1", "strata", ""), &stats, None);
        assert_eq!(row.metrics[HIT_RATIO_METRIC], 0.0);
        assert!((row.metrics["strata_reads_per_get"] - 30110.0 / 29940.0).abs() < 1e-12);
        assert!(row.metrics["block_cache_hit_ratio"] > 0.99);
        // With the stats at the ramp's end: the counted part alone (every
        // block read in the ramp, one value read per get after it).
        let mut ramp = stats.clone();
        ramp["point_lookups"] = 9940.into();
        ramp["block_cache_hits"] = 9769.into();
        ramp["io"]["log"]["read"]["ops"] = 9939.into();
        let row = with_get_reads(
            Row::new("rand-read-iops qd1", "strata", ""),
            &stats,
            Some(&ramp),
        );
        assert_eq!(row.params["strata_gets"], 20000);
        assert_eq!(row.params["strata_block_reads"], 0);
        assert_eq!(row.metrics["strata_reads_per_get"], 1.0);
        assert_eq!(row.metrics["block_cache_hit_ratio"], 1.0);
        // A write job's stats: no gets, no figures.
        let mut writes = stats.clone();
        writes["point_lookups"] = 0.into();
        let row = with_get_reads(Row::new("rand-write-iops qd1", "strata", ""), &writes, None);
        assert!(!row.metrics.contains_key(HIT_RATIO_METRIC));
    }

    #[test]
    fn every_file_is_eight_times_strata_block_cache() {
        for quick in [true, false] {
            let p = FioParams::new(quick);
            assert!(p.size_bytes >= 8 * strata::BLOCK_CACHE_BYTES_DEFAULT);
            assert_eq!(p.size_arg(), format!("{}m", p.size_bytes >> 20));
        }
        assert_eq!(FioParams::new(true).size_arg(), "512m");
    }

    #[test]
    fn table_has_a_row_per_job_and_direction_and_the_ratios() {
        let mut result = crate::results::tests::sample("fio");
        let mix = parse_fio_json(MIX_STRATA).unwrap();
        let mut half = mix.clone();
        for d in [&mut half.read, &mut half.write].into_iter().flatten() {
            d.iops /= 2.0;
        }
        let mut rows = vec![
            row_of("randrw-mix", "strata", 1, &mix),
            row_of("randrw-mix", "psync", 1, &half),
            row_of("randrw-mix", "io_uring", 1, &half),
        ];
        add_ratios(&mut rows);
        result.rows = rows;
        let mut h = String::new();
        write_table(&mut h, &result).unwrap();
        assert_eq!(h.matches("<table class=\"experiment-table\"").count(), 1);
        assert_eq!(
            h.matches("<tr><td class=\"l\">randrw-mix qd1</td>").count(),
            2
        );
        assert!(h.contains("<th colspan=\"4\">io_uring</th>"));
        assert!(h.contains("2.00×"));
        // strata's hit ratio on the read row only.
        assert!(h.contains("gets without a device read"));
        let line = |h: &str, dir: &str| {
            let start =
                format!("<tr><td class=\"l\">randrw-mix qd1</td><td class=\"l\">{dir}</td>");
            h.lines()
                .find(|l| l.starts_with(&start))
                .unwrap()
                .to_string()
        };
        let none = "<td class=\"muted\">–</td><td class=\"muted\">–</td></tr>";
        assert!(line(&h, "read").ends_with(none), "{h}");
        result.rows[0] = result.rows[0]
            .clone()
            .metric(HIT_RATIO_METRIC, 0.25)
            .metric("strata_reads_per_get", 0.75);
        let mut h = String::new();
        write_table(&mut h, &result).unwrap();
        assert!(
            line(&h, "read").ends_with("<td>25%</td><td>0.75</td></tr>"),
            "{h}"
        );
        assert!(line(&h, "write").ends_with(none), "{h}");

        result.rows.clear();
        result
            .options
            .insert("skipped".to_string(), "fio is not installed".into());
        let mut h = String::new();
        write_table(&mut h, &result).unwrap();
        assert!(h.contains("skipped: fio is not installed"));
        assert_eq!(h.matches("<table class=\"experiment-table\"").count(), 1);
    }

    #[test]
    fn a_skipped_experiment_shows_why_in_the_report() {
        let mut result = crate::results::tests::sample("fio");
        result.rows.clear();
        result
            .options
            .insert("skipped".to_string(), "fio is not installed".into());
        result.notes = vec!["skipped: fio is not installed".to_string()];
        let html =
            crate::report::render(&[crate::results::tests::sample("ingest"), result]).unwrap();
        assert_eq!(html.matches("<table class=\"experiment-table\"").count(), 2);
        assert!(html.contains("<section class=\"experiment\" id=\"fio\">"));
        assert!(html.contains("skipped: fio is not installed"));
    }

    #[test]
    fn quick_passes_cover_every_job_at_qd1_and_a_random_pair_at_qd16() {
        let p = FioParams::new(true);
        assert!(p.passes[0].jobs.is_empty() && p.passes[0].iodepth == 1);
        assert_eq!(p.passes[0].engines, ENGINES.to_vec());
        assert_eq!(p.passes[1].iodepth, 16);
        let repo = repo_root().expect("the lab's tests run in the repository");
        let jobs = job_names(&repo).unwrap();
        for job in &p.passes[1].jobs {
            assert!(jobs.iter().any(|j| j == job), "{job} is not a job file");
        }
        assert!(jobs.len() >= 9, "{jobs:?}");
    }
}
