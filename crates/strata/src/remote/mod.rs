//! The remote store: where a database's objects live beyond the local
//! disk (DESIGN.md, "Remote storage"). This module owns the seam — the
//! [`RemoteStore`] trait the engine calls, synchronously — and its
//! implementations: [`DirRemote`], a local directory (the embedded default
//! for users without a server), and, with the `s3` feature, `S3Remote`, any
//! S3-compatible server through the `object_store` crate, whose runtime
//! lives on a thread of the remote store's own; for tests (feature `sim`),
//! `FaultyRemote`, any of them behind seeded faults.
//!
//! Invariants every implementation keeps:
//! - Objects are immutable: a key is written once. [`PutMode::Create`] is
//!   atomic create-only: of many puts of one key exactly one succeeds, the
//!   others get [`RemoteErrorKind::AlreadyExists`] and write nothing (the
//!   fencing and the index's compare-and-swap stand on it).
//!   [`RemoteStore::put_parts`] is the one unconditional write of an
//!   object, for keys one writer alone names (a layer's or a value file's,
//!   with the writer's generation in the key): nothing races for them.
//! - A put that returned `Ok` is durable in the store (a directory store
//!   syncs the file and the directory before it says so) and visible to
//!   every later get and list, from any process.
//! - A get returns the whole object or the exact range asked for, or an
//!   error; never fewer bytes. What the bytes mean is checked by the caller
//!   (every object strata writes carries its own checksums).
//! - Every error is an `Error::Remote` naming the store, the call and the
//!   key, one line.
//!
//! The URL of a store ([`open_url`]): `s3://bucket/prefix` (endpoint,
//! region and credentials from the usual `AWS_*` environment variables),
//! `file:///dir`, or a plain path.

mod dir;
#[cfg(any(test, feature = "sim"))]
mod faulty;
pub mod generation;
pub(crate) mod index;
pub mod inspect;
mod layer_stream;
#[cfg(feature = "s3")]
mod s3;
pub(crate) mod tiered;
pub(crate) mod upload;

pub use dir::DirRemote;
#[cfg(any(test, feature = "sim"))]
pub use faulty::{FaultyRemote, RemoteFault};
#[cfg(feature = "s3")]
pub use s3::{S3Config, S3Remote, RETRY_TIMEOUT_DEFAULT};
/// The size of the parts the uploader reads and sends a file in.
pub use upload::PART_BYTES as UPLOAD_PART_BYTES;

use crate::error::{Error, InvalidInput, RemoteErrorKind, Result};
use std::ops::Range;
use std::sync::Arc;

/// A remote store as `Options::remote` holds it: the database's objects
/// go there too (see `Db::sync_remote`), and a database whose directory
/// holds none opens from there.
#[derive(Clone)]
pub struct Remote(pub Arc<dyn RemoteStore>);

impl Remote {
    /// The store a URL names ([`open_url`]).
    pub fn from_url(url: &str) -> Result<Remote> {
        open_url(url).map(Remote)
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({})", self.0.url())
    }
}

// The C API catches panics around calls that hold `Options`; a store's
// state after a panic is whatever its last call left, as after an error.
impl std::panic::UnwindSafe for Remote {}
impl std::panic::RefUnwindSafe for Remote {}

/// How a put treats an object already under its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// Write only if no object is there (atomic); else
    /// `RemoteErrorKind::AlreadyExists`, nothing written.
    Create,
    /// Write whatever is there (for objects no other writer names, e.g. a
    /// retried upload of the same bytes).
    Overwrite,
}

/// An object as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The key, relative to the store's root.
    pub key: String,
    pub size: u64,
}

/// An object's bytes for [`RemoteStore::put`], shared, not copied: an
/// upload's file stays in the buffer it was read into, and a retried put
/// sends the same bytes again.
#[derive(Clone)]
pub struct Payload(Arc<dyn AsRef<[u8]> + Send + Sync>);

impl Payload {
    /// Bytes held by any owner (an aligned read buffer, a `Vec`).
    pub fn shared(owner: Arc<dyn AsRef<[u8]> + Send + Sync>) -> Payload {
        Payload(owner)
    }

    /// The owner, for a client that takes one (`bytes::Bytes::from_owner`).
    #[cfg_attr(not(feature = "s3"), allow(dead_code))]
    pub(crate) fn owner(&self) -> Arc<dyn AsRef<[u8]> + Send + Sync> {
        Arc::clone(&self.0)
    }
}

impl std::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Payload {
        Payload(Arc::new(bytes))
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({} bytes)", self.len())
    }
}

/// A store of immutable objects under string keys (`/`-separated, relative
/// to the store's root). Calls block until the store has answered.
pub trait RemoteStore: Send + Sync {
    /// The store's URL, as errors name it.
    fn url(&self) -> &str;
    /// Writes `bytes` under `key`, durably, as `mode` says.
    fn put(&self, key: &str, bytes: Payload, mode: PutMode) -> Result<()>;
    /// Writes `parts`, in order, as the one object `key`. The object is
    /// written only once `parts` has ended (`None`): an error from it, at
    /// any point, the item after the last part included, ends the put, and
    /// nothing is written (the uploader's check of a layer comes there). For keys that one writer
    /// alone names (a key with the writer's generation): a store may send
    /// each part while the next is being produced, and the object is
    /// written whether or not the key exists, as `PutMode::Overwrite`
    /// (S3: a multipart upload, whose completion object_store 0.12 cannot
    /// make conditional). By default the parts are joined and put.
    fn put_parts(&self, key: &str, parts: &mut dyn Iterator<Item = Result<Payload>>) -> Result<()> {
        let parts = parts.collect::<Result<Vec<Payload>>>()?;
        let whole = match <[Payload; 1]>::try_from(parts) {
            Ok([one]) => one,
            Err(parts) => {
                let mut whole = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
                for part in &parts {
                    whole.extend_from_slice(part);
                }
                whole.into()
            }
        };
        self.put(key, whole, PutMode::Overwrite)
    }
    /// Writes `parts`, already in memory, as the one object `key`, in one
    /// request where the store can (S3: one PUT whose body is the parts,
    /// not copied; its multipart path is slower, `s3::PARTS_IN_FLIGHT`).
    /// For keys that one writer alone names, as `put_parts`: written
    /// whether or not the key exists. By default, `put_parts` of them.
    fn put_whole(&self, key: &str, parts: Vec<Payload>) -> Result<()> {
        self.put_parts(key, &mut parts.into_iter().map(Ok))
    }
    /// The whole object.
    fn get(&self, key: &str) -> Result<Vec<u8>>;
    /// Bytes `range` of the object (a range past its end is an error).
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>>;
    /// Every object whose key starts with `prefix`, by key.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>>;
    /// Removes the object; removing one that is not there is not an error.
    fn delete(&self, key: &str) -> Result<()>;
}

/// The store a URL names (see the module comment). `s3://` needs the `s3`
/// feature.
pub fn open_url(url: &str) -> Result<Arc<dyn RemoteStore>> {
    if let Some(rest) = url.strip_prefix("s3://") {
        return open_s3(url, rest);
    }
    let path = url.strip_prefix("file://").unwrap_or(url);
    if path.is_empty() || path.contains("://") {
        return Err(InvalidInput::RemoteUrl {
            url: url.into(),
            why: "expected s3://bucket/prefix, file:///dir or a path".into(),
        }
        .into());
    }
    Ok(Arc::new(DirRemote::open(path)?))
}

#[cfg(feature = "s3")]
fn open_s3(_url: &str, rest: &str) -> Result<Arc<dyn RemoteStore>> {
    Ok(Arc::new(S3Remote::from_url(rest)?))
}

#[cfg(not(feature = "s3"))]
fn open_s3(url: &str, _rest: &str) -> Result<Arc<dyn RemoteStore>> {
    Err(InvalidInput::RemoteUrl {
        url: url.into(),
        why: "this build of strata has no S3 client (build it with the `s3` feature)".into(),
    }
    .into())
}

/// An `Error::Remote`.
pub(crate) fn remote_error(
    store: &str,
    op: &'static str,
    key: &str,
    kind: RemoteErrorKind,
) -> Error {
    Error::Remote {
        store: store.to_string(),
        op,
        key: key.to_string(),
        kind,
    }
}

/// A key strata may use: non-empty, relative, of `/`-separated segments
/// that are neither empty nor start with `.` (a directory store keeps its
/// temporary files under such names), of printable ASCII without spaces
/// (the same object under every store: a directory and S3 agree on it).
pub(crate) fn check_key(store: &str, op: &'static str, key: &str) -> Result<()> {
    let bad = key.is_empty()
        || key.split('/').any(|s| s.is_empty() || s.starts_with('.'))
        || !key.bytes().all(|b| b.is_ascii_graphic());
    if bad {
        return Err(remote_error(
            store,
            op,
            key,
            RemoteErrorKind::Invalid("not an object key strata uses".into()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_the_same_for_every_store() {
        for ok in ["a", "layers/0001-g2.delta", "index/00000000000000000007"] {
            check_key("s", "put", ok).unwrap();
        }
        for bad in [
            "", "/a", "a//b", "a/../b", "./a", "a/.tmp", "a b", "a/", "é",
        ] {
            assert!(check_key("s", "put", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_url_names_its_store() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        assert_eq!(open_url(&url).unwrap().url(), url);
        assert!(open_url("ftp://x/y").is_err());
        assert!(open_url("").is_err());
        #[cfg(not(feature = "s3"))]
        assert!(open_url("s3://bucket/p")
            .err()
            .is_some_and(|e| e.to_string().contains("no S3 client")));
    }
}
