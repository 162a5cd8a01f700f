//! Random-read latency of the device at queue depth 1 (LAB.md §4, the
//! latency part of `device`; issue 10): one read at a time of a block size
//! from 2^0 bytes up, at a random offset of a test file, through three
//! access methods, on a file that was never written and on one filled with
//! random data. From the latencies per size it fits the line
//! `latency = a + bytes / bandwidth` over sizes from 4 KiB, which gives the
//! device's fixed cost per read (`a`) and its read bandwidth.
//!
//! Owns: the test files' preparation ([`prepare_file`]), the measurement of
//! one (file, method, size) point ([`measure`]), the histogram summary
//! ([`summarize`]), the fit ([`fit_latency_line`]), and the sweep the
//! `device` experiment runs ([`sweep`]): every point `repeats` times,
//! repeats outermost so that a drift of the device touches every point
//! alike, turned into result rows ([`point_row`], [`fit_row`]) whose figures
//! are medians over the repeats. Called by [`crate::device`].
//!
//! Invariants: every read is checked to return its whole length (a short or
//! failed read is an error, never a sample); buffered reads start from a
//! file dropped from the page cache (`posix_fadvise(DONTNEED)` after the
//! file is synced: clean pages, so no root is needed), run with readahead
//! off (`POSIX_FADV_RANDOM`, as fio does for random jobs) and drop each
//! range they read, so every read reaches the device (or, on the unwritten
//! file, the filesystem's zeroing); O_DIRECT reads are at least one 4 KiB
//! block (a smaller size is read as one aligned 4 KiB block, the least the
//! device can be asked for through O_DIRECT, and the rows say so in
//! `read_bytes`); offsets are aligned to the read's size (at least 4 KiB),
//! uniform over the file, drawn from a seeded generator.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use crate::direct_io::{open_direct, DirectBuf, Fd};
use crate::results::{interleave_with, OnFailure, Row};
use crate::workload::fmix64;

/// The smallest read O_DIRECT is asked for, and the alignment of every
/// offset: a multiple of every logical block size Linux reports.
pub const DIRECT_BLOCK_BYTES: usize = 4096;

/// How a read reaches the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `pread` on a buffered descriptor.
    Psync,
    /// One io_uring read (`IORING_OP_READ`) on a buffered descriptor.
    IoUring,
    /// io_uring with O_DIRECT and a registered buffer (`IORING_OP_READ_FIXED`).
    IoUringDirectFixed,
}

impl Method {
    pub const ALL: [Method; 3] = [Method::Psync, Method::IoUring, Method::IoUringDirectFixed];

    /// The inverse of [`Method::name`].
    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Psync => "psync",
            Method::IoUring => "io_uring",
            Method::IoUringDirectFixed => "io_uring+direct+fixed",
        }
    }
}

/// Which test file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `fallocate`d, never written: unwritten extents, as a fresh engine
    /// file is before its data lands (the filesystem answers with zeros).
    Unwritten,
    /// Written with random data (O_DIRECT), synced.
    Filled,
}

impl FileKind {
    pub const ALL: [FileKind; 2] = [FileKind::Unwritten, FileKind::Filled];

    pub fn name(self) -> &'static str {
        match self {
            FileKind::Unwritten => "unwritten",
            FileKind::Filled => "filled",
        }
    }
}

/// Latency figures of one point, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySummary {
    pub reads: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
}

/// The summary of a histogram of latencies in nanoseconds.
pub fn summarize(h: &Histogram<u64>) -> LatencySummary {
    LatencySummary {
        reads: h.len(),
        mean_ns: h.mean(),
        p50_ns: h.value_at_quantile(0.50),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
    }
}

/// A histogram for latencies from 1 ns to an hour at 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// The line `latency_ns = intercept_ns + bytes / bandwidth` fitted to
/// points by least squares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyFit {
    /// The fixed cost of a read.
    pub intercept_ns: f64,
    /// Bytes per second: the inverse of the slope.
    pub bandwidth_bytes_per_s: f64,
}

/// Fits `(bytes, latency_ns)` points by least squares of the *relative*
/// error (each point weighted by 1 / latency²): sizes span six orders of
/// magnitude, and an unweighted fit is decided by the largest reads alone
/// (measured: its intercept came out at −59 µs for direct reads whose
/// 4 KiB latency is 60 µs). `None` with fewer than two distinct sizes, a
/// latency that is not positive, or when latency does not grow with size
/// (no bandwidth can be read off a flat or falling line).
pub fn fit_latency_line(points: &[(f64, f64)]) -> Option<LatencyFit> {
    if points.len() < 2 || points.iter().any(|p| p.1 <= 0.0 || !p.1.is_finite()) {
        return None;
    }
    let weight = |p: &(f64, f64)| 1.0 / (p.1 * p.1);
    let w: f64 = points.iter().map(weight).sum();
    let mean_x = points.iter().map(|p| weight(p) * p.0).sum::<f64>() / w;
    let mean_y = points.iter().map(|p| weight(p) * p.1).sum::<f64>() / w;
    let sxx: f64 = points
        .iter()
        .map(|p| weight(p) * (p.0 - mean_x).powi(2))
        .sum();
    let sxy: f64 = points
        .iter()
        .map(|p| weight(p) * (p.0 - mean_x) * (p.1 - mean_y))
        .sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope_ns_per_byte = sxy / sxx;
    if slope_ns_per_byte <= 0.0 || !slope_ns_per_byte.is_finite() {
        return None;
    }
    Some(LatencyFit {
        intercept_ns: mean_y - slope_ns_per_byte * mean_x,
        bandwidth_bytes_per_s: 1e9 / slope_ns_per_byte,
    })
}

fn c_path(path: &Path) -> Result<std::ffi::CString> {
    Ok(std::ffi::CString::new(path.as_os_str().as_bytes())?)
}

fn open_buffered(path: &Path) -> Result<Fd> {
    let p = c_path(path)?;
    // SAFETY: p is a valid NUL-terminated string.
    let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("open {}", path.display()));
    }
    Ok(Fd(fd))
}

/// Drops `fd`'s file from the page cache (its pages are clean: synced).
fn drop_cache(fd: &Fd, path: &Path) -> Result<()> {
    // SAFETY: fd is open.
    let rc = unsafe { libc::posix_fadvise(fd.0, 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc))
            .with_context(|| format!("posix_fadvise(DONTNEED) {}", path.display()));
    }
    Ok(())
}

/// Creates the test file `path` of `bytes` (a multiple of 1 MiB) as `kind`
/// says, durable and out of the page cache.
pub fn prepare_file(path: &Path, kind: FileKind, bytes: u64, seed: u64) -> Result<()> {
    const CHUNK: usize = 1 << 20;
    if bytes == 0 || !bytes.is_multiple_of(CHUNK as u64) {
        bail!("test file size {bytes} is not a positive multiple of 1 MiB");
    }
    let fd = open_direct(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC)?;
    match kind {
        FileKind::Unwritten => {
            // SAFETY: fd is open for writing.
            let rc = unsafe { libc::fallocate(fd.0, 0, 0, bytes as libc::off_t) };
            if rc != 0 {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("fallocate {}", path.display()));
            }
        }
        FileKind::Filled => {
            let mut buf = DirectBuf::new(CHUNK)?;
            let mut offset = 0u64;
            while offset < bytes {
                let base = seed ^ (offset / 8);
                for (i, word) in buf.as_mut_slice().chunks_mut(8).enumerate() {
                    word.copy_from_slice(&fmix64(base + i as u64 + 1).to_le_bytes());
                }
                let slice = buf.as_mut_slice();
                // SAFETY: slice is CHUNK bytes, aligned; fd is open.
                let n = unsafe {
                    libc::pwrite(
                        fd.0,
                        slice.as_ptr() as *const libc::c_void,
                        CHUNK,
                        offset as libc::off_t,
                    )
                };
                if n < 0 {
                    return Err(std::io::Error::last_os_error())
                        .with_context(|| format!("write {}", path.display()));
                }
                if n as usize != CHUNK {
                    bail!("short write of {} at {offset}: {n} bytes", path.display());
                }
                offset += CHUNK as u64;
            }
        }
    }
    // SAFETY: fd is open.
    if unsafe { libc::fsync(fd.0) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("fsync {}", path.display()));
    }
    drop_cache(&fd, path)
}

/// What to measure at one point.
#[derive(Clone, Copy, Debug)]
pub struct PointSpec {
    pub method: Method,
    /// Bytes per read (an O_DIRECT read is at least `DIRECT_BLOCK_BYTES`).
    pub size: usize,
    /// Stop after this many reads…
    pub reads_max: u64,
    /// …or after this long, once `reads_min` reads are done.
    pub budget: Duration,
    pub reads_min: u64,
    pub seed: u64,
}

/// Bytes one read of `size` asks the device for with `method`.
pub fn read_len(method: Method, size: usize) -> usize {
    match method {
        Method::IoUringDirectFixed => size.next_multiple_of(DIRECT_BLOCK_BYTES),
        _ => size,
    }
}

/// One read at a time of a file by one [`Method`], into one buffer: what
/// [`measure`] times, and the phases experiment's device probe beside each
/// of an engine's gets.
pub struct Reader {
    method: Method,
    fd: Fd,
    /// Dropped before `buf` (`Drop for Reader`): the kernel holds a
    /// registered buffer until its ring goes.
    ring: Option<io_uring::IoUring>,
    buf: DirectBuf,
    len: usize,
    path: std::path::PathBuf,
}

impl Reader {
    /// Opens `path` for reads of `len` bytes by `method` (O_DIRECT for
    /// [`Method::IoUringDirectFixed`], whose `len` is then whole 4 KiB
    /// blocks: [`read_len`]); buffered reads run with readahead off.
    pub fn open(path: &Path, method: Method, len: usize) -> Result<Reader> {
        let mut buf = DirectBuf::new(len.next_multiple_of(DIRECT_BLOCK_BYTES))?;
        let fd = match method {
            Method::IoUringDirectFixed => open_direct(path, libc::O_RDONLY)?,
            _ => open_buffered(path)?,
        };
        if method != Method::IoUringDirectFixed {
            // No readahead: a read asks the device for its own pages only.
            // SAFETY: fd is open.
            let rc = unsafe { libc::posix_fadvise(fd.0, 0, 0, libc::POSIX_FADV_RANDOM) };
            if rc != 0 {
                return Err(std::io::Error::from_raw_os_error(rc))
                    .with_context(|| format!("posix_fadvise(RANDOM) {}", path.display()));
            }
        }
        let mut ring = match method {
            Method::Psync => None,
            _ => Some(io_uring::IoUring::new(4).context("create an io_uring")?),
        };
        if let (Method::IoUringDirectFixed, Some(ring)) = (method, ring.as_mut()) {
            let slice = buf.as_mut_slice();
            let iov = libc::iovec {
                iov_base: slice.as_mut_ptr() as *mut libc::c_void,
                iov_len: slice.len(),
            };
            // SAFETY: the buffer outlives the ring's use of it (the ring is
            // dropped first: `Drop for Reader`).
            unsafe { ring.submitter().register_buffers(&[iov]) }
                .context("register the read buffer with io_uring")?;
        }
        Ok(Reader {
            method,
            fd,
            ring,
            buf,
            len,
            path: path.to_path_buf(),
        })
    }

    /// Reads `len` bytes at `offset` (aligned for O_DIRECT), checked to be
    /// whole; returns how long the read took (ns, at least 1). A buffered
    /// read then drops its range from the page cache (not timed), so that
    /// the next read of it reaches the device again.
    pub fn read(&mut self, offset: u64) -> Result<u64> {
        let (len, ptr) = (self.len, self.buf.as_mut_ptr());
        let t = Instant::now();
        let n = match (self.method, self.ring.as_mut()) {
            (Method::Psync, _) => {
                // SAFETY: ptr points to at least `len` bytes; fd is open.
                let n = unsafe {
                    libc::pread(
                        self.fd.0,
                        ptr as *mut libc::c_void,
                        len,
                        offset as libc::off_t,
                    )
                };
                if n < 0 {
                    return Err(std::io::Error::last_os_error()).context("pread");
                }
                n as usize
            }
            (method, Some(ring)) => {
                let fd_ref = io_uring::types::Fd(self.fd.0);
                let entry = if method == Method::IoUringDirectFixed {
                    io_uring::opcode::ReadFixed::new(fd_ref, ptr, len as u32, 0)
                        .offset(offset)
                        .build()
                } else {
                    io_uring::opcode::Read::new(fd_ref, ptr, len as u32)
                        .offset(offset)
                        .build()
                };
                // SAFETY: the buffer stays valid until the completion is reaped below.
                unsafe { ring.submission().push(&entry) }
                    .map_err(|_| anyhow::anyhow!("io_uring submission queue full"))?;
                ring.submit_and_wait(1).context("io_uring submit")?;
                let cqe = ring
                    .completion()
                    .next()
                    .context("io_uring returned no completion")?;
                if cqe.result() < 0 {
                    return Err(std::io::Error::from_raw_os_error(-cqe.result()))
                        .context("io_uring read");
                }
                cqe.result() as usize
            }
            (_, None) => unreachable!("io_uring methods have a ring"),
        };
        let ns = (t.elapsed().as_nanos() as u64).max(1);
        if n != len {
            bail!(
                "short read of {} at {offset}: {n} of {len} bytes",
                self.path.display()
            );
        }
        if self.method != Method::IoUringDirectFixed {
            // SAFETY: fd is open.
            let rc = unsafe {
                libc::posix_fadvise(
                    self.fd.0,
                    offset as libc::off_t,
                    len.next_multiple_of(DIRECT_BLOCK_BYTES) as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::from_raw_os_error(rc))
                    .with_context(|| format!("posix_fadvise(DONTNEED) {}", self.path.display()));
            }
        }
        Ok(ns)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // The ring before the buffer it may hold.
        self.ring.take();
    }
}

/// Measures random reads of `spec.size` bytes of the file `path` (of
/// `file_bytes`) at queue depth 1; returns the latency histogram (ns).
pub fn measure(path: &Path, file_bytes: u64, spec: PointSpec) -> Result<Histogram<u64>> {
    let len = read_len(spec.method, spec.size);
    let align = len.next_multiple_of(DIRECT_BLOCK_BYTES) as u64;
    if len == 0 || align > file_bytes {
        bail!(
            "a {len}-byte read does not fit the {file_bytes}-byte file {}",
            path.display()
        );
    }
    let slots = file_bytes / align;
    let mut hist = latency_histogram();
    let mut reader = Reader::open(path, spec.method, len)?;
    // Reads that follow another method's reads of the same file start cold.
    let cache_fd = open_buffered(path)?;
    drop_cache(&cache_fd, path)?;
    let started = Instant::now();
    let mut i = 0u64;
    while i < spec.reads_max && (i < spec.reads_min || started.elapsed() < spec.budget) {
        let offset = (fmix64(spec.seed ^ (i + 1)) % slots) * align;
        let ns = reader.read(offset)?;
        hist.record(ns).context("record a latency")?;
        i += 1;
    }
    Ok(hist)
}

/// Engine name of the sweep's rows: the device's own figures (never a peer
/// in the summary).
pub const ROW_ENGINE: &str = "lab probe";
/// The fit uses the sizes from here on (LAB.md §4: the slope above 4 KiB).
pub const FIT_BYTES_MIN: usize = 4096;
/// The largest block size LAB.md §4 asks for, as a power of two.
pub const SIZE_LOG2_MAX: u32 = 30;
/// The size of the device line's latency figure.
pub const LINE_READ_BYTES: usize = 4096;
/// The seed of the filled file's data and of every point's offsets.
const SWEEP_SEED: u64 = 0x5eed_0010;

/// What the sweep measures and for how long.
#[derive(Clone, Copy, Debug)]
pub struct SweepParams {
    /// Size of each test file (a multiple of 1 MiB).
    pub file_bytes: u64,
    /// The largest block size, as a power of two (further capped by the
    /// file size).
    pub size_log2_max: u32,
    pub repeats: u32,
    /// Per point and repeat: at least `reads_min` reads, then more until
    /// `budget` has passed or `reads_max` reads are done.
    pub reads_min: u64,
    pub reads_max: u64,
    pub budget: Duration,
    pub seed: u64,
}

impl SweepParams {
    pub fn new(quick: bool) -> SweepParams {
        if quick {
            // About 25 s on this project's 2-core VM (1,000 reads or 60 ms
            // per point; 4 MiB buffered reads take ~6 ms, so 16 of them
            // ~100 ms).
            SweepParams {
                file_bytes: 1 << 30,
                size_log2_max: 22,
                repeats: 3,
                reads_min: 16,
                reads_max: 1000,
                budget: Duration::from_millis(60),
                seed: SWEEP_SEED,
            }
        } else {
            SweepParams {
                file_bytes: 2 << 30,
                size_log2_max: SIZE_LOG2_MAX,
                repeats: 3,
                reads_min: 8,
                reads_max: 10_000,
                budget: Duration::from_millis(300),
                seed: SWEEP_SEED,
            }
        }
    }

    /// The block sizes measured: 2^0 … 2^size_log2_max bytes, those whose
    /// reads fit the file by every method.
    pub fn sizes(&self) -> Vec<usize> {
        assert!(self.size_log2_max <= SIZE_LOG2_MAX);
        (0..=self.size_log2_max)
            .map(|log2| 1usize << log2)
            .filter(|&size| {
                Method::ALL.iter().all(|m| {
                    read_len(*m, size).next_multiple_of(DIRECT_BLOCK_BYTES) as u64
                        <= self.file_bytes
                })
            })
            .collect()
    }
}

/// `bytes` as `512 B`, `4 KiB`, `1 MiB`, `1 GiB` (one decimal where the
/// unit does not divide it).
pub fn size_label(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            return if bytes.is_multiple_of(scale) {
                format!("{} {unit}", bytes / scale)
            } else {
                format!("{:.1} {unit}", bytes as f64 / scale as f64)
            };
        }
    }
    format!("{bytes} B")
}

/// The case of a point's row: `random read QD1 4 KiB`.
pub fn point_case(size: usize) -> String {
    format!("random read QD1 {}", size_label(size as u64))
}

/// The case of the fit's rows.
pub const FIT_CASE: &str = "random read QD1, fit over sizes >= 4 KiB";

/// The config of a (file, method) row: `filled file, psync`.
pub fn row_config(kind: FileKind, method: Method) -> String {
    format!("{} file, {}", kind.name(), method.name())
}

/// One repeat's row of a point: its latencies in µs and its read count.
pub fn point_row(kind: FileKind, method: Method, size: usize, s: &LatencySummary) -> Row {
    Row::new(&point_case(size), ROW_ENGINE, &row_config(kind, method))
        .metric("lat_p50_us", s.p50_ns as f64 / 1e3)
        .metric("lat_mean_us", s.mean_ns / 1e3)
        .metric("lat_p99_us", s.p99_ns as f64 / 1e3)
        .metric("reads", s.reads as f64)
        .param("file", kind.name())
        .param("method", method.name())
        .param("bytes", size as u64)
        .param("read_bytes", read_len(method, size) as u64)
}

/// One repeat's row of a (file, method) fit; without figures when no line
/// could be fitted.
pub fn fit_row(kind: FileKind, method: Method, fit: Option<LatencyFit>) -> Row {
    let row = Row::new(FIT_CASE, ROW_ENGINE, &row_config(kind, method))
        .param("file", kind.name())
        .param("method", method.name())
        .param("fit_bytes_min", FIT_BYTES_MIN as u64)
        .param(
            "fit_of",
            "p50 latency, weighted by 1/latency² (relative error)",
        );
    match fit {
        Some(fit) => row
            .metric("fit_mib_s", fit.bandwidth_bytes_per_s / (1024.0 * 1024.0))
            .metric("fit_intercept_us", fit.intercept_ns / 1e3),
        None => row,
    }
}

/// What the sweep measured.
pub struct SweepOutcome {
    /// Per (file, method, size) a row, then per (file, method) its fit;
    /// every figure the median over the repeats, with its spread.
    pub rows: Vec<Row>,
    /// The device line's latency: the p50 of 4 KiB reads of the filled
    /// file through io_uring + O_DIRECT + a registered buffer, median over
    /// the repeats.
    pub read_4k_latency_ns: Option<f64>,
    pub notes: Vec<String>,
}

/// One (file, method) group of the sweep in one repeat (0-based).
#[derive(Clone, Copy, Debug)]
struct Group {
    k: usize,
    m: usize,
    rep: u32,
}

/// One repeat of a (file, method) group: its point rows, in size order, and
/// its fit's row.
type GroupSample = (Vec<Row>, Row);

/// Measures every size of one (file, method) group once.
fn measure_group(
    path: &Path,
    group: Group,
    params: &SweepParams,
    sizes: &[usize],
) -> Result<GroupSample> {
    let Group { k, m, rep } = group;
    let (kind, method) = (FileKind::ALL[k], Method::ALL[m]);
    let t = Instant::now();
    let mut fit_points = Vec::new();
    let mut line = String::new();
    let mut points = Vec::with_capacity(sizes.len());
    for (si, &size) in sizes.iter().enumerate() {
        let spec = PointSpec {
            method,
            size,
            reads_max: params.reads_max,
            reads_min: params.reads_min,
            budget: params.budget,
            seed: fmix64(
                params.seed
                    ^ (u64::from(rep) << 32 | (k as u64) << 16 | (m as u64) << 8 | si as u64),
            ),
        };
        let s = summarize(&measure(path, params.file_bytes, spec)?);
        if size >= FIT_BYTES_MIN {
            fit_points.push((read_len(method, size) as f64, s.p50_ns as f64));
        }
        if size == LINE_READ_BYTES || size == 1 << 20 {
            line.push_str(&format!(
                ", {} p50 {:.1} µs",
                size_label(size as u64),
                s.p50_ns as f64 / 1e3
            ));
        }
        points.push(point_row(kind, method, size, &s));
    }
    let fit = fit_latency_line(&fit_points);
    if let Some(fit) = fit {
        line.push_str(&format!(
            ", fit {:.1} µs + {:.0} MiB/s",
            fit.intercept_ns / 1e3,
            fit.bandwidth_bytes_per_s / (1024.0 * 1024.0)
        ));
    }
    eprintln!(
        "  {:<40} {:.1} s{line}",
        format!("random read #{} {} {}", rep + 1, kind.name(), method.name()),
        t.elapsed().as_secs_f64()
    );
    Ok((points, fit_row(kind, method, fit)))
}

/// Measures every (file, method, size) point `params.repeats` times in
/// `dir` (removing its test files afterwards, also on an error). After each
/// repeat, `after_repeat(repeat, filled_file)` may measure the filled file
/// by other means (fio), interleaved with the sweep's own repeats.
pub fn sweep(
    dir: &Path,
    params: &SweepParams,
    mut after_repeat: impl FnMut(u32, &Path),
) -> Result<SweepOutcome> {
    let sizes = params.sizes();
    if sizes.is_empty() {
        bail!(
            "a {}-byte test file is too small for a random-read sweep",
            params.file_bytes
        );
    }
    let paths: Vec<_> = FileKind::ALL
        .iter()
        .map(|k| dir.join(format!("randread-{}.dat", k.name())))
        .collect();
    // One configuration per (file, method), then the caller's measurement
    // of the filled file: all in turns, repeats outermost.
    let groups: Vec<(usize, usize)> = (0..FileKind::ALL.len())
        .flat_map(|k| (0..Method::ALL.len()).map(move |m| (k, m)))
        .collect();
    let filled = FileKind::ALL.iter().position(|k| *k == FileKind::Filled);
    let result = (|| -> Result<Vec<Vec<Option<GroupSample>>>> {
        for (kind, path) in FileKind::ALL.iter().zip(&paths) {
            let t = Instant::now();
            prepare_file(path, *kind, params.file_bytes, params.seed)?;
            eprintln!(
                "  {:<40} {:.1} s",
                format!("random read: prepare the {} file", kind.name()),
                t.elapsed().as_secs_f64()
            );
        }
        let taken = interleave_with(
            OnFailure::Stop,
            params.repeats,
            groups.len() + 1,
            |rep, i| match groups.get(i) {
                Some(&(k, m)) => {
                    let group = Group { k, m, rep: rep - 1 };
                    measure_group(&paths[k], group, params, &sizes).map(Some)
                }
                None => {
                    if let Some(f) = filled {
                        after_repeat(rep - 1, &paths[f]);
                    }
                    Ok(None)
                }
            },
        );
        taken.into_samples()
    })();
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    let mut point_samples: Vec<Vec<Row>> = vec![Vec::new(); groups.len() * sizes.len()];
    let mut fit_samples: Vec<Vec<Row>> = vec![Vec::new(); groups.len()];
    for (g, samples) in result?.into_iter().take(groups.len()).enumerate() {
        for (points, fit) in samples.into_iter().flatten() {
            for (si, point) in points.into_iter().enumerate() {
                point_samples[g * sizes.len() + si].push(point);
            }
            fit_samples[g].push(fit);
        }
    }

    let mut rows: Vec<Row> = point_samples
        .iter()
        .filter_map(|s| Row::from_samples(s))
        .collect();
    let mut notes = Vec::new();
    for samples in &fit_samples {
        let Some(row) = Row::from_samples(samples) else {
            continue;
        };
        if !row.metrics.contains_key("fit_mib_s") {
            notes.push(format!(
                "random read, {}: no bandwidth can be fitted (latency does not grow with size above {})",
                row.config,
                size_label(FIT_BYTES_MIN as u64)
            ));
        }
        rows.push(row);
    }
    notes.push(format!(
        "random reads at QD1: O_DIRECT reads below {} read one aligned {} block (`read_bytes` in the rows); the unwritten file is fallocate'd (unwritten extents), so its reads never reach the device",
        size_label(DIRECT_BLOCK_BYTES as u64),
        size_label(DIRECT_BLOCK_BYTES as u64)
    ));
    let read_4k_latency_ns = line_latency_ns(&rows);
    Ok(SweepOutcome {
        rows,
        read_4k_latency_ns,
        notes,
    })
}

/// The device line's latency (ns) from the sweep's rows: the p50 of 4 KiB
/// reads of the filled file through io_uring + O_DIRECT + a registered
/// buffer.
pub fn line_latency_ns(rows: &[Row]) -> Option<f64> {
    let case = point_case(LINE_READ_BYTES);
    let config = row_config(FileKind::Filled, Method::IoUringDirectFixed);
    rows.iter()
        .find(|r| r.engine == ROW_ENGINE && r.case == case && r.config == config)
        .and_then(|r| r.metrics.get("lat_p50_us"))
        .map(|us| us * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_of_points_on_a_line_is_the_line() {
        // 10 µs fixed cost, 1 GB/s: 1 ns per byte.
        let points: Vec<(f64, f64)> = [4096.0, 65536.0, 1048576.0]
            .iter()
            .map(|&b| (b, 10_000.0 + b))
            .collect();
        let fit = fit_latency_line(&points).unwrap();
        assert!((fit.intercept_ns - 10_000.0).abs() < 1e-6, "{fit:?}");
        assert!((fit.bandwidth_bytes_per_s - 1e9).abs() < 1e-3, "{fit:?}");
    }

    #[test]
    fn the_fit_of_noisy_points_matches_the_hand_computation() {
        // x = 1, 2, 4 (bytes), y = 1, 2, 2 (ns); weights 1/y² = 1, 1/4, 1/4
        // (sum 3/2). Weighted means: x = (1 + 1/2 + 1) / (3/2) = 5/3,
        // y = (1 + 1/2 + 1/2) / (3/2) = 4/3. sxx = 4/9 + (1/4)(1/9) +
        // (1/4)(49/9) = 11/6; sxy = (−2/3)(−1/3) + (1/4)(1/3)(2/3) +
        // (1/4)(7/3)(2/3) = 2/9 + 1/18 + 7/18 = 2/3. Slope = (2/3) / (11/6)
        // = 4/11 ns/B; intercept = 4/3 − (4/11)(5/3) = 8/11 ns; bandwidth
        // = 1e9 · 11/4 B/s.
        let fit = fit_latency_line(&[(1.0, 1.0), (2.0, 2.0), (4.0, 2.0)]).unwrap();
        assert!((fit.intercept_ns - 8.0 / 11.0).abs() < 1e-9, "{fit:?}");
        assert!(
            (fit.bandwidth_bytes_per_s - 1e9 * 11.0 / 4.0).abs() < 1e-3,
            "{fit:?}"
        );
    }

    #[test]
    fn small_reads_decide_the_intercept_large_ones_the_slope() {
        // A device with 60 µs per read that overlaps large reads: 4 KiB
        // in 60 µs, 1 MiB in 380 µs, 4 MiB in 1,400 µs. The relative fit
        // keeps the fixed cost near 60 µs (an unweighted one goes negative).
        let fit = fit_latency_line(&[
            (4096.0, 60_000.0),
            (65536.0, 90_000.0),
            (1048576.0, 380_000.0),
            (4194304.0, 1_400_000.0),
        ])
        .unwrap();
        assert!(
            fit.intercept_ns > 40_000.0 && fit.intercept_ns < 70_000.0,
            "{fit:?}"
        );
        assert!(
            fit.bandwidth_bytes_per_s > 2e9 && fit.bandwidth_bytes_per_s < 5e9,
            "{fit:?}"
        );
    }

    #[test]
    fn no_fit_without_two_sizes_or_with_a_flat_line() {
        assert_eq!(fit_latency_line(&[]), None);
        assert_eq!(fit_latency_line(&[(4096.0, 10.0)]), None);
        assert_eq!(fit_latency_line(&[(4096.0, 10.0), (4096.0, 12.0)]), None);
        assert_eq!(fit_latency_line(&[(4096.0, 10.0), (8192.0, 10.0)]), None);
        assert_eq!(fit_latency_line(&[(4096.0, 12.0), (8192.0, 10.0)]), None);
        assert_eq!(fit_latency_line(&[(4096.0, 0.0), (8192.0, 10.0)]), None);
    }

    #[test]
    fn the_summary_gives_the_hand_computed_percentiles() {
        // 1..=1000 µs, one read each: p50 = 500 µs, p99 = 990 µs,
        // p99.9 = 999 µs, mean 500.5 µs (within the histogram's 3 digits).
        let mut h = latency_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let s = summarize(&h);
        let close = |got: u64, want: u64| got.abs_diff(want) <= want / 500;
        assert_eq!(s.reads, 1000);
        assert!(close(s.p50_ns, 500_000), "{s:?}");
        assert!(close(s.p99_ns, 990_000), "{s:?}");
        assert!(close(s.p999_ns, 999_000), "{s:?}");
        assert!((s.mean_ns - 500_500.0).abs() < 500_500.0 / 500.0, "{s:?}");
    }

    #[test]
    fn direct_reads_are_whole_blocks() {
        assert_eq!(read_len(Method::IoUringDirectFixed, 1), 4096);
        assert_eq!(read_len(Method::IoUringDirectFixed, 4097), 8192);
        assert_eq!(read_len(Method::Psync, 1), 1);
        assert_eq!(read_len(Method::IoUring, 4097), 4097);
    }

    #[test]
    fn sizes_are_labelled_in_binary_units() {
        assert_eq!(size_label(1), "1 B");
        assert_eq!(size_label(512), "512 B");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1536), "1.5 KiB");
        assert_eq!(size_label(4 << 20), "4 MiB");
        assert_eq!(size_label(1 << 30), "1 GiB");
    }

    #[test]
    fn sweep_sizes_stop_at_the_limit_and_the_file() {
        let mut p = SweepParams::new(true);
        let sizes = p.sizes();
        assert_eq!(sizes.len(), 23);
        assert_eq!((sizes[0], sizes[22]), (1, 4 << 20));
        p.file_bytes = 1 << 20;
        assert_eq!(*p.sizes().last().unwrap(), 1 << 20);
        assert_eq!(SweepParams::new(false).sizes().len(), 31);
    }

    #[test]
    fn rows_carry_microseconds_and_the_device_line_is_the_4k_direct_filled_p50() {
        let s = LatencySummary {
            reads: 100,
            mean_ns: 61_500.0,
            p50_ns: 60_000,
            p99_ns: 90_000,
            p999_ns: 95_000,
        };
        let row = point_row(FileKind::Filled, Method::IoUringDirectFixed, 1, &s);
        assert_eq!(row.case, "random read QD1 1 B");
        assert_eq!(row.params["read_bytes"], 4096);
        assert_eq!(row.metrics["lat_p50_us"], 60.0);
        assert_eq!(row.metrics["lat_mean_us"], 61.5);
        assert_eq!(row.metrics["lat_p99_us"], 90.0);
        let rows = vec![
            point_row(FileKind::Filled, Method::Psync, 4096, &s),
            point_row(FileKind::Unwritten, Method::IoUringDirectFixed, 4096, &s),
        ];
        assert_eq!(line_latency_ns(&rows), None);
        let mut rows = rows;
        rows.push(point_row(
            FileKind::Filled,
            Method::IoUringDirectFixed,
            4096,
            &s,
        ));
        assert_eq!(line_latency_ns(&rows), Some(60_000.0));

        let fit = fit_row(
            FileKind::Filled,
            Method::Psync,
            Some(LatencyFit {
                intercept_ns: 50_000.0,
                bandwidth_bytes_per_s: 2.0 * 1024.0 * 1024.0 * 1024.0,
            }),
        );
        assert_eq!(fit.metrics["fit_mib_s"], 2048.0);
        assert_eq!(fit.metrics["fit_intercept_us"], 50.0);
        assert!(fit_row(FileKind::Filled, Method::Psync, None)
            .metrics
            .is_empty());
    }
}
