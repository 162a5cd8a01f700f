//! [`DirRemote`]: a remote store in a local directory, one file per object
//! (the key's segments are its subdirectories). For users without a
//! server, and beside the S3 store in tests: the same calls, the same
//! guarantees.
//!
//! Written with the standard library, not `object_store`'s local store: a
//! put here is durable when it returns (the file synced, then linked into
//! place, then its directory synced), which the crate's does not promise.
//! A create-only put is a hard link of a fully written, synced temporary
//! file: `link(2)` fails if the name exists, so of racing puts exactly one
//! wins, in this process or any other, and a reader never sees a partial
//! object. Temporary files start with `.` (no key segment does) and are
//! skipped by lists; one left by a crash is garbage, never an object.

use super::{check_key, remote_error, ObjectInfo, Payload, PutMode, RemoteStore};
use crate::error::{Error, RemoteErrorKind, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A directory holding objects.
pub struct DirRemote {
    root: PathBuf,
    url: String,
    /// Numbers the temporary files of this process's puts.
    next_temp: AtomicU64,
}

impl DirRemote {
    /// The store rooted at `root`, created if missing.
    pub fn open(root: impl AsRef<Path>) -> Result<DirRemote> {
        let root = root.as_ref();
        fs::create_dir_all(root)
            .map_err(|e| Error::io(root, "create remote store directory", e))?;
        let root = root
            .canonicalize()
            .map_err(|e| Error::io(root, "resolve remote store directory", e))?;
        Ok(DirRemote {
            url: format!("file://{}", root.display()),
            root,
            next_temp: AtomicU64::new(0),
        })
    }

    fn err(&self, op: &'static str, key: &str, e: std::io::Error) -> Error {
        let kind = if e.kind() == ErrorKind::NotFound {
            RemoteErrorKind::NotFound
        } else {
            RemoteErrorKind::Transport(e.to_string())
        };
        remote_error(&self.url, op, key, kind)
    }

    /// Creates the directories of `dir` below the root that are missing,
    /// each synced into its parent.
    fn make_dirs(&self, dir: &Path) -> std::io::Result<()> {
        if dir == self.root || dir.is_dir() {
            return Ok(());
        }
        let parent = dir.parent().unwrap_or(&self.root);
        self.make_dirs(parent)?;
        match fs::create_dir(dir) {
            Ok(()) => sync_dir(parent),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes `parts` in turn into a temporary file, syncs it and puts it
    /// in place as `mode` says (a part's error stops it, the temporary
    /// file removed): whether it was placed (a create-only put of a key
    /// that exists is not).
    fn put_file(
        &self,
        key: &str,
        parts: &mut dyn Iterator<Item = Result<Payload>>,
        mode: PutMode,
    ) -> std::result::Result<bool, PutFailure> {
        let path = self.root.join(key);
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        self.make_dirs(&dir)?;
        let temp = dir.join(format!(
            ".put-{}-{}",
            std::process::id(),
            self.next_temp.fetch_add(1, Ordering::Relaxed)
        ));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        let write = || -> std::result::Result<(), PutFailure> {
            for part in parts {
                f.write_all(&part?)?;
            }
            Ok(f.sync_all()?)
        };
        let written = write();
        drop(f);
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        let placed = match mode {
            PutMode::Create => match fs::hard_link(&temp, &path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            },
            PutMode::Overwrite => fs::rename(&temp, &path).map(|()| true),
        };
        // Gone after a link or a refusal; after a rename, already gone.
        let _ = fs::remove_file(&temp);
        let placed = placed?;
        if placed {
            sync_dir(&dir)?;
        }
        Ok(placed)
    }

    /// [`Self::put_file`] as the store's answer.
    fn put_parts_as(
        &self,
        key: &str,
        parts: &mut dyn Iterator<Item = Result<Payload>>,
        mode: PutMode,
    ) -> Result<()> {
        check_key(&self.url, "put", key)?;
        match self.put_file(key, parts, mode) {
            Ok(true) => Ok(()),
            Ok(false) => Err(remote_error(
                &self.url,
                "put",
                key,
                RemoteErrorKind::AlreadyExists,
            )),
            Err(PutFailure::Io(e)) => Err(self.err("put", key, e)),
            Err(PutFailure::Part(e)) => Err(e),
        }
    }

    fn walk(&self, dir: &Path, prefix: &str, out: &mut Vec<ObjectInfo>) -> std::io::Result<()> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let key = match path.strip_prefix(&self.root).ok().and_then(Path::to_str) {
                Some(k) => k.to_string(),
                None => continue,
            };
            let meta = entry.metadata()?;
            if meta.is_dir() {
                // Only directories that can hold keys with the prefix.
                let as_dir = format!("{key}/");
                if as_dir.starts_with(prefix) || prefix.starts_with(&as_dir) {
                    self.walk(&path, prefix, out)?;
                }
            } else if key.starts_with(prefix) {
                out.push(ObjectInfo {
                    key,
                    size: meta.len(),
                });
            }
        }
        Ok(())
    }
}

/// Why a put into the directory failed: its file, or a part given to it.
enum PutFailure {
    Io(std::io::Error),
    Part(crate::error::Error),
}

impl From<std::io::Error> for PutFailure {
    fn from(e: std::io::Error) -> PutFailure {
        PutFailure::Io(e)
    }
}

impl From<crate::error::Error> for PutFailure {
    fn from(e: crate::error::Error) -> PutFailure {
        PutFailure::Part(e)
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl RemoteStore for DirRemote {
    fn url(&self) -> &str {
        &self.url
    }

    fn put(&self, key: &str, bytes: Payload, mode: PutMode) -> Result<()> {
        self.put_parts_as(key, &mut std::iter::once(Ok(bytes)), mode)
    }

    /// Each part written into the temporary file as it comes (no copy of
    /// the whole object in memory).
    fn put_parts(&self, key: &str, parts: &mut dyn Iterator<Item = Result<Payload>>) -> Result<()> {
        self.put_parts_as(key, parts, PutMode::Overwrite)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        check_key(&self.url, "get", key)?;
        fs::read(self.root.join(key)).map_err(|e| self.err("get", key, e))
    }

    fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>> {
        check_key(&self.url, "get range", key)?;
        let f = File::open(self.root.join(key)).map_err(|e| self.err("get range", key, e))?;
        let size = f
            .metadata()
            .map_err(|e| self.err("get range", key, e))?
            .len();
        if range.start > range.end || range.end > size {
            return Err(remote_error(
                &self.url,
                "get range",
                key,
                RemoteErrorKind::Invalid(format!(
                    "bytes {}..{} of a {size}-byte object",
                    range.start, range.end
                )),
            ));
        }
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        f.read_exact_at(&mut buf, range.start)
            .map_err(|e| self.err("get range", key, e))?;
        Ok(buf)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let mut out = Vec::new();
        self.walk(&self.root, prefix, &mut out)
            .map_err(|e| self.err("list", prefix, e))?;
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        check_key(&self.url, "delete", key)?;
        let path = self.root.join(key);
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(path.parent().unwrap_or(&self.root))
                .map_err(|e| self.err("delete", key, e)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err("delete", key, e)),
        }
    }
}
