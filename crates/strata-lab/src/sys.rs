//! Process and filesystem figures read from Linux: /proc/<pid>/io bytes
//! and read syscalls, peak RSS (VmHWM), the size of a directory on disk, page-cache
//! eviction. Linux only, like the rest of the lab.

use std::path::Path;

use anyhow::{Context, Result};

/// Counters of /proc/<pid>/io.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcIo {
    /// Bytes this process caused to be sent to storage (page dirtying or
    /// direct writes), including its threads.
    pub write_bytes: u64,
    pub read_bytes: u64,
    /// Bytes passed to write-like syscalls.
    pub wchar_bytes: u64,
    /// Read-like syscalls (`syscr`).
    pub read_syscalls: u64,
}

pub fn proc_io(pid: Option<u32>) -> Result<ProcIo> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/io"),
        None => "/proc/self/io".to_string(),
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    let mut io = ProcIo::default();
    for line in text.lines() {
        let (name, value) = match line.split_once(':') {
            Some(pair) => pair,
            None => continue,
        };
        let value: u64 = value.trim().parse().unwrap_or(0);
        match name {
            "write_bytes" => io.write_bytes = value,
            "read_bytes" => io.read_bytes = value,
            "wchar" => io.wchar_bytes = value,
            "syscr" => io.read_syscalls = value,
            _ => {}
        }
    }
    Ok(io)
}

/// Peak resident set size (VmHWM) of a process, bytes.
pub fn peak_rss_bytes(pid: Option<u32>) -> Result<u64> {
    status_bytes(pid, "VmHWM:")
}

/// Resident set size (VmRSS) of a process, bytes.
pub fn rss_bytes(pid: Option<u32>) -> Result<u64> {
    status_bytes(pid, "VmRSS:")
}

/// A `kB` field of `/proc/PID/status`, in bytes.
fn status_bytes(pid: Option<u32>, field: &str) -> Result<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_string(),
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(field) {
            let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse()?;
            return Ok(kib * 1024);
        }
    }
    anyhow::bail!("no {field} in {path}")
}

/// Bytes a directory tree occupies on disk (allocated blocks), and the sum
/// of its files' lengths.
pub fn dir_size(dir: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut allocated = 0u64;
    let mut apparent = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err).with_context(|| format!("read_dir {}", d.display())),
        };
        for entry in entries {
            let entry = entry?;
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(_) => continue, // removed under us by a background thread
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                allocated += meta.blocks() * 512;
                apparent += meta.len();
            }
        }
    }
    Ok((allocated, apparent))
}

/// Drops a file's pages from the page cache so a read measures the device.
pub fn evict_from_page_cache(path: &Path) -> Result<()> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::File::open(path)?;
    file.sync_all()?;
    // SAFETY: plain syscall on an fd we own.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        anyhow::bail!("posix_fadvise: {}", std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// CPU time of the calling thread (ns), user and system: what an
/// operation cost the thread that ran it, without the time it waited.
pub fn thread_cpu_ns() -> Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write; the clock id
    // is a constant every Linux has.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .context("clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Bytes as MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Runs `f` on a fresh, empty directory `data_dir/name` and removes it
/// afterwards, also when `f` fails (the lab's per-engine data directories).
pub fn in_fresh_dir<T>(
    data_dir: &std::path::Path,
    name: &str,
    f: impl FnOnce(&std::path::Path) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let dir = data_dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let result = f(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_figures_are_readable() {
        // The resident set first: other test threads allocate between the
        // two reads, and the peak read second covers whatever they added.
        let now = rss_bytes(None).unwrap();
        let peak = peak_rss_bytes(None).unwrap();
        assert!(now > 0 && now <= peak, "rss {now} peak {peak}");
        proc_io(None).unwrap();
    }

    #[test]
    fn dir_size_counts_file_lengths() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/a"), vec![1u8; 10_000]).unwrap();
        let (_allocated, apparent) = dir_size(tmp.path()).unwrap();
        assert_eq!(apparent, 10_000);
    }
}
