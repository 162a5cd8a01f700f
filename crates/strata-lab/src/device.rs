//! The `device` experiment (LAB.md §4). The device line: sequential write
//! and read bandwidth of the data directory's device at 1 MiB blocks with
//! O_DIRECT, measured by the lab itself (pwrite/pread on an aligned buffer,
//! fdatasync at the end of the write, included in its time) and, where `fio`
//! is on the PATH, by fio with the same job, A B interleaved. Every other
//! experiment shows its bandwidths as a fraction of the probe's medians.
//! Then the random-read latency at QD1 per block size ([`crate::randread`]),
//! whose 4 KiB p50 on the filled file joins the line as
//! `read_4k_latency_ns`, with fio's figure for the same read beside it.
//!
//! Invariants: the sequential part runs first and is unchanged by the
//! latency part; every test file is removed at the end, also on an error.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::direct_io::{open_direct, DirectBuf};
use crate::progress::Progress;
use crate::randread::{self, SweepParams};
use crate::results::{interleave_with, median, DeviceLine, MetricSpec, OnFailure, Row};
use crate::workload::fmix64;

/// The device experiment's name (its results file is `device.json`): the
/// summary shows the device line on its row.
pub const EXPERIMENT_NAME: &str = "device";

/// Block size of the sequential probe (LAB.md §4).
pub const BLOCK_BYTES: usize = 1 << 20;
const _: () = assert!(BLOCK_BYTES.is_multiple_of(crate::direct_io::ALIGNMENT_BYTES));

#[derive(Clone, Copy, Debug)]
pub struct DeviceParams {
    pub file_bytes: u64,
    pub repeats: u32,
    /// The random-read latency sweep.
    pub randread: SweepParams,
    /// Seconds of each fio random-read job (one per repeat).
    pub fio_randread_s: u32,
}

impl DeviceParams {
    pub fn new(quick: bool) -> DeviceParams {
        if quick {
            // About a second per sample on a 1 GB/s disk.
            DeviceParams {
                file_bytes: 1 << 30,
                repeats: 3,
                randread: SweepParams::new(true),
                fio_randread_s: 1,
            }
        } else {
            DeviceParams {
                file_bytes: 2 << 30,
                repeats: 3,
                randread: SweepParams::new(false),
                fio_randread_s: 3,
            }
        }
    }
}

/// Seconds to write `file_bytes` sequentially (O_DIRECT, fdatasync at end).
pub fn probe_write(
    path: &Path,
    file_bytes: u64,
    mut progress: Option<&mut Progress>,
) -> Result<f64> {
    let mut buf = DirectBuf::new(BLOCK_BYTES)?;
    for (i, chunk) in buf.as_mut_slice().chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&fmix64(i as u64 + 1).to_le_bytes()[..chunk.len()]);
    }
    let fd = open_direct(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC)?;
    let start = Instant::now();
    let mut offset = 0u64;
    while offset < file_bytes {
        // SAFETY: buf is BLOCK_BYTES long and aligned; fd is open.
        let n = unsafe {
            libc::pwrite(
                fd.0,
                buf.as_ptr() as *const libc::c_void,
                BLOCK_BYTES,
                offset as libc::off_t,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error()).context("pwrite");
        }
        if n as usize != BLOCK_BYTES {
            bail!("short O_DIRECT write: {n} of {BLOCK_BYTES} bytes");
        }
        offset += BLOCK_BYTES as u64;
        if let Some(p) = progress.as_deref_mut() {
            p.inc(BLOCK_BYTES as u64);
        }
    }
    // SAFETY: fd is open.
    if unsafe { libc::fdatasync(fd.0) } != 0 {
        return Err(std::io::Error::last_os_error()).context("fdatasync");
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Seconds to read the file back sequentially (O_DIRECT).
pub fn probe_read(
    path: &Path,
    file_bytes: u64,
    mut progress: Option<&mut Progress>,
) -> Result<f64> {
    let mut buf = DirectBuf::new(BLOCK_BYTES)?;
    let fd = open_direct(path, libc::O_RDONLY)?;
    let start = Instant::now();
    let mut offset = 0u64;
    while offset < file_bytes {
        // SAFETY: buf is BLOCK_BYTES long and aligned; fd is open.
        let n = unsafe {
            libc::pread(
                fd.0,
                buf.as_mut_ptr() as *mut libc::c_void,
                BLOCK_BYTES,
                offset as libc::off_t,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error()).context("pread");
        }
        if n as usize != BLOCK_BYTES {
            bail!("short O_DIRECT read at {offset}: {n} bytes");
        }
        offset += BLOCK_BYTES as u64;
        if let Some(p) = progress.as_deref_mut() {
            p.inc(BLOCK_BYTES as u64);
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Whether `fio` is on the PATH.
pub fn fio_available() -> bool {
    Command::new("fio")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Runs fio with `args` (JSON output) and returns its document.
fn run_fio_json(args: &[String]) -> Result<serde_json::Value> {
    let out = Command::new("fio")
        .args(args)
        .arg("--output-format=json")
        .output()
        .context("run fio")?;
    if !out.status.success() {
        bail!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // fio may print warnings before the JSON document.
    let text = String::from_utf8_lossy(&out.stdout);
    let json_start = text.find('{').context("no JSON in fio's output")?;
    serde_json::from_str(&text[json_start..]).context("parse fio JSON")
}

/// fio's bandwidth (MiB/s) for a sequential job on `path`, same shape as
/// the probe: psync, 1 MiB blocks, O_DIRECT, appending to a new file, fsync
/// at the end of writes.
pub fn fio_bandwidth_mib_s(path: &Path, file_bytes: u64, write: bool) -> Result<f64> {
    let mut args: Vec<String> = vec![
        "--name=strata-lab-device".into(),
        format!("--filename={}", path.display()),
        (if write { "--rw=write" } else { "--rw=read" }).into(),
        format!("--bs={BLOCK_BYTES}"),
        format!("--size={file_bytes}"),
        // fio preallocates by default (unwritten extents, converted on each
        // write); the probe and the engines append to a new file, so fio
        // must too.
        "--direct=1".into(),
        "--ioengine=psync".into(),
        "--fallocate=none".into(),
    ];
    if write {
        args.extend(["--end_fsync=1".into(), "--file_append=1".into()]);
    }
    let doc = run_fio_json(&args)?;
    let side = if write { "write" } else { "read" };
    let bw_bytes = doc["jobs"][0][side]["bw_bytes"]
        .as_f64()
        .context("fio JSON without jobs[0].<rw>.bw_bytes")?;
    Ok(bw_bytes / (1024.0 * 1024.0))
}

/// fio's latency figures of one random-read job, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FioLatency {
    pub reads: u64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
}

/// fio's completion latency for 4 KiB random reads at QD1 of the existing
/// file `path` (the sweep's filled file): psync, direct=1, for `seconds`.
pub fn fio_randread_4k(path: &Path, file_bytes: u64, seconds: u32) -> Result<FioLatency> {
    let args: Vec<String> = vec![
        "--name=strata-lab-device-randread".into(),
        format!("--filename={}", path.display()),
        "--rw=randread".into(),
        format!("--bs={}", randread::LINE_READ_BYTES),
        format!("--size={file_bytes}"),
        "--direct=1".into(),
        "--ioengine=psync".into(),
        "--iodepth=1".into(),
        "--time_based=1".into(),
        format!("--runtime={seconds}"),
    ];
    let doc = run_fio_json(&args)?;
    let read = &doc["jobs"][0]["read"];
    let clat = &read["clat_ns"];
    let num = |v: &serde_json::Value, what: &str| {
        v.as_f64()
            .with_context(|| format!("fio JSON without jobs[0].read.{what}"))
    };
    Ok(FioLatency {
        reads: read["total_ios"].as_u64().unwrap_or(0),
        mean_ns: num(&clat["mean"], "clat_ns.mean")?,
        p50_ns: num(&clat["percentile"]["50.000000"], "clat_ns.percentile.50")?,
        p99_ns: num(&clat["percentile"]["99.000000"], "clat_ns.percentile.99")?,
    })
}

/// What the device experiment measured.
pub struct DeviceOutcome {
    pub line: DeviceLine,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    /// Seconds the random-read part took (files, sweep and fio).
    pub randread_s: f64,
}

pub fn metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new("mib_s", "Bandwidth (median)", "MiB/s", true),
        MetricSpec::new("lat_p50_us", "Latency p50", "µs", false),
        MetricSpec::new("lat_mean_us", "Latency mean", "µs", false),
        MetricSpec::new("lat_p99_us", "Latency p99", "µs", false),
        MetricSpec::new("reads", "Reads per sample", "reads", true),
        MetricSpec::new("fit_mib_s", "Fitted bandwidth", "MiB/s", true),
        MetricSpec::new("fit_intercept_us", "Fitted fixed cost", "µs", false),
    ]
}

/// Measures the device line in `dir` (removing its test file afterwards).
pub fn run(dir: &Path, params: DeviceParams) -> Result<DeviceOutcome> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("device-probe.dat");
    let fio = fio_available();
    let mut notes = Vec::new();
    if !fio {
        notes.push("fio is not installed: no fio cross-check".to_string());
    }
    let mib = params.file_bytes as f64 / (1024.0 * 1024.0);
    // The probe, then fio, in turns; a probe that fails voids the line, a
    // fio run that fails is a note and fio runs again next repeat.
    let taken = interleave_with(
        OnFailure::Stop,
        params.repeats,
        if fio { 2 } else { 1 },
        |rep, i| -> Result<Option<(f64, f64)>> {
            if i == 0 {
                let mut p = Progress::new(&format!("device probe write #{rep}"), params.file_bytes);
                let secs = probe_write(&path, params.file_bytes, Some(&mut p))?;
                p.finish(&format!("{:.0} MiB/s", mib / secs));
                let write_mib_s = mib / secs;
                let mut p = Progress::new(&format!("device probe read #{rep}"), params.file_bytes);
                let secs = probe_read(&path, params.file_bytes, Some(&mut p))?;
                p.finish(&format!("{:.0} MiB/s", mib / secs));
                std::fs::remove_file(&path)?;
                return Ok(Some((write_mib_s, mib / secs)));
            }
            let figures = match fio_bandwidth_mib_s(&path, params.file_bytes, true)
                .and_then(|w| Ok((w, fio_bandwidth_mib_s(&path, params.file_bytes, false)?)))
            {
                Ok((w, r)) => {
                    eprintln!(
                        "  {:<40} write {w:.0} MiB/s, read {r:.0} MiB/s",
                        format!("fio #{rep}")
                    );
                    Some((w, r))
                }
                Err(err) => {
                    notes.push(format!("fio run failed: {err:#}"));
                    None
                }
            };
            let _ = std::fs::remove_file(&path);
            Ok(figures)
        },
    );
    let _ = std::fs::remove_file(&path);
    let mut samples = taken.into_samples()?.into_iter();
    let figures = |samples: Option<Vec<Option<(f64, f64)>>>| -> (Vec<f64>, Vec<f64>) {
        samples.unwrap_or_default().into_iter().flatten().unzip()
    };
    let (probe_w, probe_r) = figures(samples.next());
    let (fio_w, fio_r) = figures(samples.next());

    let t = Instant::now();
    let (sweep, fio_lat) = random_reads(dir, &params, fio, &mut notes)?;
    let randread_s = t.elapsed().as_secs_f64();
    eprintln!("  {:<40} {randread_s:.1} s", "random read: all");

    let line = DeviceLine {
        write_mib_s: median(&probe_w),
        read_mib_s: median(&probe_r),
        block_bytes: BLOCK_BYTES as u64,
        file_bytes: params.file_bytes,
        fio_write_mib_s: (!fio_w.is_empty()).then(|| median(&fio_w)),
        fio_read_mib_s: (!fio_r.is_empty()).then(|| median(&fio_r)),
        read_4k_latency_ns: sweep.read_4k_latency_ns,
        fio_read_4k_latency_ns: (!fio_lat.is_empty())
            .then(|| median(&fio_lat.iter().map(|l| l.p50_ns).collect::<Vec<_>>())),
    };
    let row = |case: &str, engine: &str, config: &str, samples: &[f64]| {
        Row::new(case, engine, config)
            .sampled("mib_s", samples)
            .param("samples_mib_s", samples.to_vec())
    };
    let mut rows = vec![
        row(
            "sequential write 1 MiB",
            "lab probe",
            "O_DIRECT psync",
            &probe_w,
        ),
        row(
            "sequential read 1 MiB",
            "lab probe",
            "O_DIRECT psync",
            &probe_r,
        ),
    ];
    if !fio_w.is_empty() {
        rows.push(row(
            "sequential write 1 MiB",
            "fio",
            "psync direct=1",
            &fio_w,
        ));
        rows.push(row(
            "sequential read 1 MiB",
            "fio",
            "psync direct=1",
            &fio_r,
        ));
    }
    rows.extend(sweep.rows);
    if !fio_lat.is_empty() {
        let samples: Vec<Row> = fio_lat
            .iter()
            .map(|l| {
                Row::new(
                    &randread::point_case(randread::LINE_READ_BYTES),
                    "fio",
                    "filled file, psync direct=1",
                )
                .metric("lat_p50_us", l.p50_ns / 1e3)
                .metric("lat_mean_us", l.mean_ns / 1e3)
                .metric("lat_p99_us", l.p99_ns / 1e3)
                .metric("reads", l.reads as f64)
                .param("file", "filled")
                .param("bytes", randread::LINE_READ_BYTES as u64)
                .param("read_bytes", randread::LINE_READ_BYTES as u64)
            })
            .collect();
        rows.extend(Row::from_samples(&samples));
    }
    notes.extend(sweep.notes);
    Ok(DeviceOutcome {
        line,
        rows,
        notes,
        randread_s,
    })
}

/// The random-read part's options, for the results (`randread_*` keys).
pub fn randread_options(
    params: &DeviceParams,
    elapsed_s: f64,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let p = &params.randread;
    let sizes = p.sizes();
    [
        ("randread_file_bytes", p.file_bytes.into()),
        ("randread_sizes_bytes", serde_json::json!([sizes.first(), sizes.last()])),
        ("randread_repeats", p.repeats.into()),
        ("randread_reads_min", p.reads_min.into()),
        ("randread_reads_max", p.reads_max.into()),
        ("randread_budget_ms", (p.budget.as_millis() as u64).into()),
        ("randread_fio_s", params.fio_randread_s.into()),
        ("randread_elapsed_s", elapsed_s.into()),
        ("randread_method", "queue depth 1, one read at a time at a uniform random offset aligned to the read (at least 4 KiB); psync and io_uring buffered with readahead off (POSIX_FADV_RANDOM) and each read range dropped from the page cache after it, so every read reaches the device; io_uring+direct+fixed: O_DIRECT, one buffer registered once, IORING_OP_READ_FIXED, sizes below 4 KiB read as one 4 KiB block. Files: unwritten = fallocate'd, never written (unwritten extents); filled = random data written with O_DIRECT, fsync'd, then posix_fadvise(DONTNEED) (no root needed). Fit: latency = a + bytes / bandwidth over sizes >= 4 KiB, least squares on the p50s weighted by 1/latency² (relative error), per repeat. fio: randread 4 KiB psync direct=1 iodepth=1 on a filled file".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The random-read sweep, with (where fio is installed) one fio job on its
/// filled file after each of its repeats.
fn random_reads(
    dir: &Path,
    params: &DeviceParams,
    fio: bool,
    notes: &mut Vec<String>,
) -> Result<(randread::SweepOutcome, Vec<FioLatency>)> {
    let mut fio_lat = Vec::new();
    let mut fio_err: Option<anyhow::Error> = None;
    let sweep = randread::sweep(dir, &params.randread, |rep, filled| {
        if !fio || fio_err.is_some() {
            return;
        }
        match fio_randread_4k(filled, params.randread.file_bytes, params.fio_randread_s) {
            Ok(l) => {
                eprintln!(
                    "  {:<40} p50 {:.1} µs, mean {:.1} µs, {} reads",
                    format!("fio randread 4 KiB #{}", rep + 1),
                    l.p50_ns / 1e3,
                    l.mean_ns / 1e3,
                    l.reads
                );
                fio_lat.push(l);
            }
            Err(err) => fio_err = Some(err),
        }
    })?;
    if let Some(err) = fio_err {
        notes.push(format!("fio random-read run failed: {err:#}"));
        fio_lat.clear();
    }
    Ok((sweep, fio_lat))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_writes_and_reads_a_small_file() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = tmp.path().join("probe");
        let bytes = 4 * BLOCK_BYTES as u64;
        assert!(probe_write(&path, bytes, None).unwrap() > 0.0);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes);
        assert!(probe_read(&path, bytes, None).unwrap() > 0.0);
    }
}
