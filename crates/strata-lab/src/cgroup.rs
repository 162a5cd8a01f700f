//! A memory budget for one child process, page cache included, and the
//! count of the device reads it causes: the cgroups the phases experiment
//! puts each engine's child in (LAB.md §3).
//!
//! Owns: finding where the memory and blkio controllers are mounted,
//! creating one cgroup per child under the lab's *own* cgroup (so a child
//! stays inside whatever limits and accounting the lab itself runs under),
//! setting the limit, moving the child in, reading the peak usage and the
//! device reads, and removing the cgroups again ([`ChildCgroups`]'s `Drop`).
//!
//! cgroup v1 (`memory.limit_in_bytes`, `blkio.throttle.io_serviced`) and
//! cgroup v2 (`memory.max`, `io.stat`, where the lab's cgroup delegates the
//! controller) are handled; where neither can be used (not root, no memory
//! controller) [`ChildCgroups::create`] says why and the caller falls back
//! to dropping the page cache ([`drop_page_cache`]).
//!
//! Invariants: a cgroup this module created is removed when its
//! `ChildCgroups` is dropped (after the child has exited: a cgroup with a
//! task cannot be removed, so the caller waits for the child first); the
//! limit is set before the child is moved in, and the child is moved in
//! before it opens its engine (the child waits for a go-ahead on stdin).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// How a child's memory budget is enforced, as recorded in the results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BudgetMethod {
    /// A cgroup v1 memory controller limit (`memory.limit_in_bytes`).
    CgroupV1,
    /// A cgroup v2 limit (`memory.max`).
    CgroupV2,
    /// No cgroup: the page cache is dropped system-wide
    /// (`/proc/sys/vm/drop_caches`) before each read-bearing phase.
    DropCaches,
    /// No cgroup, not root: each engine file's pages are dropped with
    /// `posix_fadvise(DONTNEED)` before each read-bearing phase.
    Fadvise,
}

impl BudgetMethod {
    pub fn name(self) -> &'static str {
        match self {
            BudgetMethod::CgroupV1 => "cgroup v1 memory.limit_in_bytes",
            BudgetMethod::CgroupV2 => "cgroup v2 memory.max",
            BudgetMethod::DropCaches => "page cache dropped before each read-bearing phase (drop_caches)",
            BudgetMethod::Fadvise => {
                "engine files dropped from the page cache before each read-bearing phase (posix_fadvise DONTNEED)"
            }
        }
    }

    /// Whether the child must drop the page cache itself.
    pub fn drops_cache(self) -> bool {
        matches!(self, BudgetMethod::DropCaches | BudgetMethod::Fadvise)
    }
}

/// Device reads of a cgroup since it was made: requests and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlkioReads {
    pub ios: u64,
    pub bytes: u64,
}

/// The cgroups of one child; removed on drop.
#[derive(Debug)]
pub struct ChildCgroups {
    /// The memory cgroup's directory, `None` when the budget is not a cgroup.
    memory: Option<PathBuf>,
    /// The cgroup counting the child's device reads (v1 blkio, or the v2
    /// cgroup when it has the io controller).
    io: Option<IoCounter>,
    pub method: BudgetMethod,
    /// Why no cgroup was used, or what was only partly available.
    pub notes: Vec<String>,
    /// Every directory this made, removed in reverse order on drop.
    created: Vec<PathBuf>,
}

#[derive(Clone, Debug)]
enum IoCounter {
    V1Blkio(PathBuf),
    V2(PathBuf),
}

const V1_ROOT: &str = "/sys/fs/cgroup";
/// cgroup2 mount points: pure v2, then the hybrid layout's.
const V2_MOUNTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

/// The lab's own cgroup path for a v1 controller (`4:memory:/a/b` → `/a/b`),
/// or for v2 with `controller` empty (`0::/a`).
fn own_cgroup(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    parse_own_cgroup(&text, controller)
}

fn parse_own_cgroup(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        hit.then(|| path.to_string())
    })
}

/// `root` + the lab's own cgroup under it, if that directory exists; else
/// `root` (the lab's cgroup is not visible in this mount namespace).
fn parent_dir(root: &Path, own: Option<String>) -> PathBuf {
    if let Some(own) = own {
        let dir = root.join(own.trim_start_matches('/'));
        if dir.is_dir() {
            return dir;
        }
    }
    root.to_path_buf()
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("write {text:?} to {}", path.display()))
}

impl ChildCgroups {
    /// Makes the cgroups for a child named `name` with a memory limit of
    /// `limit_bytes`; never fails: what could not be made is in `notes`
    /// and `method` says how the budget is enforced instead.
    pub fn create(name: &str, limit_bytes: u64) -> ChildCgroups {
        let mut cg = ChildCgroups {
            memory: None,
            io: None,
            method: BudgetMethod::Fadvise,
            notes: Vec::new(),
            created: Vec::new(),
        };
        let v1_memory = Path::new(V1_ROOT).join("memory");
        if v1_memory.join("memory.limit_in_bytes").exists() {
            let dir = parent_dir(&v1_memory, own_cgroup("memory")).join(name);
            match cg.make_v1_memory(&dir, limit_bytes) {
                Ok(()) => {
                    cg.memory = Some(dir);
                    cg.method = BudgetMethod::CgroupV1;
                }
                Err(err) => cg.notes.push(format!("no cgroup v1 memory limit: {err:#}")),
            }
            let v1_blkio = Path::new(V1_ROOT).join("blkio");
            if v1_blkio.join("blkio.throttle.io_serviced").exists() {
                let dir = parent_dir(&v1_blkio, own_cgroup("blkio")).join(name);
                match cg.mkdir(&dir) {
                    Ok(()) => cg.io = Some(IoCounter::V1Blkio(dir)),
                    Err(err) => cg.notes.push(format!("no blkio cgroup: {err:#}")),
                }
            }
        }
        if cg.memory.is_none() {
            if let Some(root) = V2_MOUNTS
                .iter()
                .map(Path::new)
                .find(|m| m.join("cgroup.controllers").exists())
            {
                let parent = parent_dir(root, own_cgroup(""));
                let dir = parent.join(name);
                match cg.make_v2(&parent, &dir, limit_bytes) {
                    Ok(()) => {
                        if dir.join("io.stat").exists() && cg.io.is_none() {
                            cg.io = Some(IoCounter::V2(dir.clone()));
                        }
                        cg.memory = Some(dir);
                        cg.method = BudgetMethod::CgroupV2;
                    }
                    Err(err) => cg.notes.push(format!("no cgroup v2 memory limit: {err:#}")),
                }
            }
        }
        if cg.memory.is_none() {
            // SAFETY: plain syscall.
            cg.method = if unsafe { libc::geteuid() } == 0 {
                BudgetMethod::DropCaches
            } else {
                BudgetMethod::Fadvise
            };
        }
        cg
    }

    fn mkdir(&mut self, dir: &Path) -> Result<()> {
        if let Some(parent) = dir.parent() {
            remove_orphans(parent);
        }
        // A leftover of a run that was killed: reuse it (it is empty).
        if !dir.is_dir() {
            std::fs::create_dir(dir).with_context(|| format!("mkdir {}", dir.display()))?;
        }
        self.created.push(dir.to_path_buf());
        Ok(())
    }

    fn make_v1_memory(&mut self, dir: &Path, limit_bytes: u64) -> Result<()> {
        self.mkdir(dir)?;
        write_file(&dir.join("memory.limit_in_bytes"), &limit_bytes.to_string())?;
        let set: u64 = read_u64(&dir.join("memory.limit_in_bytes"))?;
        // The kernel rounds the limit down to whole pages.
        if set > limit_bytes || set + 4096 < limit_bytes {
            bail!("memory.limit_in_bytes is {set}, not {limit_bytes}");
        }
        Ok(())
    }

    fn make_v2(&mut self, parent: &Path, dir: &Path, limit_bytes: u64) -> Result<()> {
        let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control"))
            .with_context(|| format!("read {}/cgroup.subtree_control", parent.display()))?;
        if !enabled.split_whitespace().any(|c| c == "memory") {
            // Fails when the lab's cgroup has processes of its own (v2's
            // no-internal-process rule): then there is no v2 budget.
            write_file(&parent.join("cgroup.subtree_control"), "+memory +io")
                .or_else(|_| write_file(&parent.join("cgroup.subtree_control"), "+memory"))?;
        }
        self.mkdir(dir)?;
        write_file(&dir.join("memory.max"), &limit_bytes.to_string())?;
        // No swap: the budget is a budget.
        let _ = write_file(&dir.join("memory.swap.max"), "0");
        Ok(())
    }

    /// Moves process `pid` into the cgroups.
    pub fn add(&self, pid: u32) -> Result<()> {
        if let Some(dir) = &self.memory {
            write_file(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        if let Some(IoCounter::V1Blkio(dir)) = &self.io {
            write_file(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// The memory cgroup's directory and whether it is v2, if the budget
    /// is a cgroup.
    pub fn memory_limit_file(&self) -> Option<PathBuf> {
        let dir = self.memory.as_ref()?;
        Some(match self.method {
            BudgetMethod::CgroupV2 => dir.join("memory.max"),
            _ => dir.join("memory.limit_in_bytes"),
        })
    }

    /// Where the child's device reads are counted, for the child to read:
    /// `(kind, directory)` with kind `v1` or `v2`.
    pub fn io_counter(&self) -> Option<(String, PathBuf)> {
        match &self.io {
            Some(IoCounter::V1Blkio(dir)) => Some(("v1".to_string(), dir.clone())),
            Some(IoCounter::V2(dir)) => Some(("v2".to_string(), dir.clone())),
            None => None,
        }
    }

    /// Peak memory use of the cgroup (page cache included), where known:
    /// since [`reset_peaks`] last ran (after the last load, on v1), else
    /// since the cgroup was made.
    pub fn peak_bytes(&self) -> Option<u64> {
        let dir = self.memory.as_ref()?;
        read_u64(&dir.join("memory.max_usage_in_bytes"))
            .or_else(|_| read_u64(&dir.join("memory.peak")))
            .ok()
    }

    /// Times the limit was hit (v1 `memory.failcnt`, v2 `memory.events` max).
    pub fn limit_hits(&self) -> Option<u64> {
        let dir = self.memory.as_ref()?;
        if let Ok(n) = read_u64(&dir.join("memory.failcnt")) {
            return Some(n);
        }
        let events = std::fs::read_to_string(dir.join("memory.events")).ok()?;
        events
            .lines()
            .find_map(|l| l.strip_prefix("max ")?.trim().parse().ok())
    }
}

impl Drop for ChildCgroups {
    fn drop(&mut self) {
        for dir in self.created.iter().rev() {
            // The child may still be leaving: retry briefly.
            for _ in 0..50 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        }
    }
}

/// Sets the limit in `file` (as from [`ChildCgroups::memory_limit_file`])
/// to `bytes`, or lifts it (`None`). Lowering it below the cgroup's use
/// makes the kernel reclaim (clean page cache first); it fails when the
/// rest cannot be reclaimed.
pub fn set_memory_limit(file: &Path, bytes: Option<u64>) -> Result<()> {
    let v2 = file.file_name().is_some_and(|n| n == "memory.max");
    let text = match (bytes, v2) {
        (Some(b), _) => b.to_string(),
        (None, true) => "max".to_string(),
        (None, false) => "-1".to_string(),
    };
    write_file(file, &text)
}

/// What the cgroup of the limit `file` holds, from its `memory.stat`:
/// `anon 140 MiB, page cache 12 MiB` (v1 `rss`/`cache`, v2 `anon`/`file`);
/// `None` where the file cannot be read.
pub fn memory_breakdown(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file.with_file_name("memory.stat")).ok()?;
    let (anon, cache) = parse_memory_stat(&text)?;
    Some(format!(
        "anon {} MiB, page cache {} MiB",
        anon >> 20,
        cache >> 20
    ))
}

/// (anonymous, page cache) bytes of a v1 or v2 `memory.stat`.
pub fn parse_memory_stat(text: &str) -> Option<(u64, u64)> {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok())?
        })
    };
    match (value("rss"), value("cache")) {
        (Some(anon), Some(cache)) => Some((anon, cache)),
        _ => Some((value("anon")?, value("file")?)),
    }
}

/// Restarts the v1 peak and limit-hit counters of the cgroup of the limit
/// `file` (best effort: v2 keeps its `memory.peak`), so that they describe
/// what follows, not the load before.
pub fn reset_peaks(file: &Path) {
    for counter in ["memory.max_usage_in_bytes", "memory.failcnt"] {
        let _ = std::fs::write(file.with_file_name(counter), "0");
    }
}

/// Removes the empty cgroups `strata-lab-<pid>-…` in `parent` whose lab
/// process is gone (a lab killed before its `Drop` ran).
fn remove_orphans(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("strata-lab-"))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

fn read_u64(path: &Path) -> Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("parse {}: {text:?}", path.display()))
}

/// The device reads counted so far by the cgroup `dir` (`kind` as from
/// [`ChildCgroups::io_counter`]).
pub fn read_io_counter(kind: &str, dir: &Path) -> Result<BlkioReads> {
    if kind == "v1" {
        let ios = std::fs::read_to_string(dir.join("blkio.throttle.io_serviced"))?;
        let bytes = std::fs::read_to_string(dir.join("blkio.throttle.io_service_bytes"))?;
        Ok(BlkioReads {
            ios: sum_v1_reads(&ios),
            bytes: sum_v1_reads(&bytes),
        })
    } else {
        Ok(parse_v2_io_stat(&std::fs::read_to_string(
            dir.join("io.stat"),
        )?))
    }
}

/// Sums the `<major:minor> Read <n>` lines of a v1 blkio statistics file.
pub fn sum_v1_reads(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, op, n) = (f.next()?, f.next()?, f.next()?);
            (op == "Read").then(|| n.parse::<u64>().ok()).flatten()
        })
        .sum()
}

/// Sums `rios` and `rbytes` over the devices of a v2 `io.stat`.
pub fn parse_v2_io_stat(text: &str) -> BlkioReads {
    let mut r = BlkioReads::default();
    for field in text.split_whitespace() {
        if let Some(n) = field.strip_prefix("rios=") {
            r.ios += n.parse::<u64>().unwrap_or(0);
        } else if let Some(n) = field.strip_prefix("rbytes=") {
            r.bytes += n.parse::<u64>().unwrap_or(0);
        }
    }
    r
}

/// Drops `dir`'s files from the page cache the way `method` says: the
/// whole page cache (`drop_caches`, root) or each file (`fadvise`).
pub fn drop_page_cache(method: BudgetMethod, dir: &Path) -> Result<()> {
    if method == BudgetMethod::DropCaches {
        // SAFETY: plain syscall.
        unsafe { libc::sync() };
        if write_file(Path::new("/proc/sys/vm/drop_caches"), "1").is_ok() {
            return Ok(());
        }
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("read_dir {}", d.display()))? {
            let entry = entry?;
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    // A file removed under us by a compaction is no error.
                    let _ = crate::sys::evict_from_page_cache(&path);
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cgroup_is_read_per_controller() {
        let text = "9:name=systemd:/\n7:blkio:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/x\n0::/v2path\n";
        assert_eq!(
            parse_own_cgroup(text, "memory").as_deref(),
            Some("/process_api/abc")
        );
        assert_eq!(parse_own_cgroup(text, "blkio").as_deref(), Some("/"));
        assert_eq!(parse_own_cgroup(text, "cpuacct").as_deref(), Some("/x"));
        assert_eq!(parse_own_cgroup(text, "").as_deref(), Some("/v2path"));
        assert_eq!(parse_own_cgroup(text, "io"), None);
    }

    #[test]
    fn memory_stat_gives_anon_and_page_cache_in_v1_and_v2() {
        let v1 = "cache 12582912\nrss 146800640\nrss_huge 0\ntotal_cache 1\n";
        assert_eq!(parse_memory_stat(v1), Some((146_800_640, 12_582_912)));
        let v2 = "anon 4096\nfile 8192\nkernel 0\n";
        assert_eq!(parse_memory_stat(v2), Some((4096, 8192)));
        assert_eq!(parse_memory_stat("pgfault 3\n"), None);
    }

    #[test]
    fn device_reads_are_summed_over_devices() {
        let v1 = "253:0 Read 10\n253:0 Write 4\n253:0 Sync 14\n8:0 Read 5\nTotal 33\n";
        assert_eq!(sum_v1_reads(v1), 15);
        let v2 =
            "253:0 rbytes=4096 wbytes=0 rios=1 wios=0\n8:0 rbytes=8192 wbytes=1 rios=2 wios=1\n";
        assert_eq!(
            parse_v2_io_stat(v2),
            BlkioReads {
                ios: 3,
                bytes: 12288
            }
        );
    }
}
