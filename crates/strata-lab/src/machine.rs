//! The description of the machine a run used (LAB.md "common rules"): CPU,
//! cores, memory, kernel, and the filesystem and device under the data
//! directory; plus the git commit of the code that ran.

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: u32,
    pub memory_bytes: u64,
    pub kernel: String,
    pub filesystem: Filesystem,
}

/// The mount the data directory lives on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Filesystem {
    pub data_dir: String,
    pub mount_point: String,
    pub fs_type: String,
    pub device: String,
}

impl Machine {
    /// Describes this machine, with the filesystem of `data_dir` (which
    /// must exist).
    pub fn describe(data_dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .unwrap_or(0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| format!("Linux {}", s.trim()))
            .unwrap_or_else(|_| "unknown".to_string());
        Machine {
            cpu_model,
            cores,
            memory_bytes,
            kernel,
            filesystem: Filesystem::of(data_dir),
        }
    }
}

impl Filesystem {
    /// The mount with the longest mount point that contains `dir`.
    pub fn of(dir: &Path) -> Filesystem {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let mut best = Filesystem {
            data_dir: dir.display().to_string(),
            ..Filesystem::default()
        };
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut best_len = 0usize;
        for line in mountinfo.lines() {
            // id parent major:minor root mount_point options [optional...] - fstype source superopts
            let (left, right) = match line.split_once(" - ") {
                Some(pair) => pair,
                None => continue,
            };
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            if left.len() < 5 || right.len() < 2 {
                continue;
            }
            let mount_point = left[4].replace("\\040", " ");
            if dir.starts_with(&mount_point) && mount_point.len() >= best_len {
                best_len = mount_point.len();
                best.mount_point = mount_point;
                best.fs_type = right[0].to_string();
                best.device = right[1].to_string();
            }
        }
        if best.fs_type.is_empty() {
            // In a chroot, mounts outside the new root are not listed: ask
            // the filesystem itself (statfs) and name the device by number.
            if let Some((fs_type, device)) = statfs_and_device(&dir) {
                best.fs_type = fs_type;
                best.device = device;
                best.mount_point = "(not visible from this root)".to_string();
            }
        }
        best
    }
}

/// The filesystem type of `dir` from statfs and its device from stat
/// (`/dev/<name>` where sysfs names it, else `major:minor`).
fn statfs_and_device(dir: &Path) -> Option<(String, String)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs into a zeroed struct we own, with a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let fs_type = match st.f_type as u64 {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x8584_58F6 => "ramfs",
        0x2FC1_2FC1 => "zfs",
        0x794C_7630 => "overlay",
        0x6969 => "nfs",
        other => return Some((format!("statfs 0x{other:x}"), String::new())),
    };
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"))
        .unwrap_or_default();
    let device = uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|name| format!("/dev/{name}"))
        .unwrap_or_else(|| format!("{major}:{minor}"));
    Some((fs_type.to_string(), device))
}

/// `git rev-parse HEAD` of the working directory, `+dirty` when it has
/// uncommitted changes; `None` outside a git checkout.
pub fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    if dirty {
        commit.push_str("+dirty");
    }
    Some(commit)
}

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_utc(secs)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian).
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_utc_matches_known_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn filesystem_of_root_is_found() {
        let fs = Filesystem::of(Path::new("/"));
        assert!(!fs.fs_type.is_empty(), "{fs:?}");
        // In a chroot the real root's mount is not listed; statfs names it.
        assert!(
            fs.mount_point == "/" || fs.mount_point.starts_with("(not visible"),
            "{fs:?}"
        );
        assert!(!fs.device.is_empty(), "{fs:?}");
    }

    #[test]
    fn statfs_names_the_filesystem_of_a_directory() {
        let (fs_type, device) = statfs_and_device(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert_eq!(
            fs_type,
            Filesystem::of(Path::new(env!("CARGO_MANIFEST_DIR"))).fs_type
        );
        assert!(!device.is_empty());
    }
}
