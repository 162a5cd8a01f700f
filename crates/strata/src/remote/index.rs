//! The remote index: what a bucket holds of a database, as one object.
//!
//! An index lists every object of one version of the database (its layer
//! files and value files: the local file name, the object's key, its
//! length and crc32c), the disk-consistent LSN (every write at or below it
//! is in those files), and the manifest that opens them (a whole manifest
//! file, `manifest::encode_file`, with no logs: what is not flushed is not
//! in the bucket). A process with an empty directory opens the database
//! from the newest index alone.
//!
//! Keys: `index/{seq:020}`, one sequence for every writer, each written
//! create-only: the newest index is the greatest key (fixed-width
//! decimal). The sequence is also the fence (SlateDB's manifest versions):
//! a writer that opens puts the next index, a copy of the newest with its
//! own generation ([`claim`]); the writer before it then finds its own next
//! put refused, reads whose index took its place, and stops
//! (`Error::Fenced`). So every index a writer was told it put is in the
//! line the next writer builds on: nothing acknowledged is lost between
//! them.
//!
//! An index with an empty manifest is a claim of a store that held no
//! database: restoring it restores nothing.
//!
//! Format (little-endian, `codec`): magic `STRATIDX`, version u32 (1),
//! generation u64, seq u64, lsn u64, object count u32, then per object:
//! name (u16 length, bytes), key (u16 length, bytes), bytes u64, crc32c
//! u32; then the manifest (u32 length, bytes); then the crc32c of
//! everything before it. Invariant: an index is decoded only whole and
//! checked (magic, version, lengths, crc); anything else is a `Corruption`
//! naming the store and key.

use super::{ObjectInfo, PutMode, RemoteStore};
use crate::codec::{put_u16, put_u32, put_u64, Decoder};
use crate::error::{Corruption, Error, RemoteErrorKind, Result};
use crate::types::Lsn;

/// Where the indexes are.
pub(crate) const INDEX_PREFIX: &str = "index/";
const MAGIC: &[u8; 8] = b"STRATIDX";
const VERSION: u32 = 1;

/// One object an index lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexedObject {
    /// The file's name in the database directory.
    pub name: String,
    /// The object's key in the store.
    pub key: String,
    pub bytes: u64,
    /// crc32c of the whole object.
    pub crc: u32,
}

impl IndexedObject {
    /// `Ok` when `bytes`, read from this object of `store`, are what the
    /// index at `index_key` lists: its length and crc32c; else a
    /// `Corruption` naming the object.
    pub(crate) fn check(&self, store: &str, index_key: &str, bytes: &[u8]) -> Result<()> {
        let crc = crate::crc::crc32c(bytes);
        if bytes.len() as u64 == self.bytes && crc == self.crc {
            return Ok(());
        }
        Err(Corruption::checksum(
            format!("{store}/{}", self.key),
            0,
            format!(
                "object of {} bytes, the index {index_key} lists {} bytes",
                bytes.len(),
                self.bytes
            ),
            self.crc,
            crc,
        )
        .into())
    }
}

/// A decoded index (see the module comment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteIndex {
    pub generation: u64,
    pub seq: u64,
    pub lsn: Lsn,
    pub objects: Vec<IndexedObject>,
    pub manifest: Vec<u8>,
}

/// The key of index `seq`.
pub(crate) fn index_key(seq: u64) -> String {
    format!("{INDEX_PREFIX}{seq:020}")
}

pub(crate) fn is_index_key(key: &str) -> bool {
    key.strip_prefix(INDEX_PREFIX)
        .is_some_and(|rest| rest.len() == 20 && rest.bytes().all(|b| b.is_ascii_digit()))
}

impl RemoteIndex {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.manifest.len() + self.objects.len() * 96);
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, VERSION);
        put_u64(&mut out, self.generation);
        put_u64(&mut out, self.seq);
        put_u64(&mut out, self.lsn);
        put_u32(&mut out, self.objects.len() as u32);
        for o in &self.objects {
            for s in [&o.name, &o.key] {
                put_u16(&mut out, s.len() as u16);
                out.extend_from_slice(s.as_bytes());
            }
            put_u64(&mut out, o.bytes);
            put_u32(&mut out, o.crc);
        }
        put_u32(&mut out, self.manifest.len() as u32);
        out.extend_from_slice(&self.manifest);
        let crc = crate::crc::crc32c(&out);
        put_u32(&mut out, crc);
        out
    }

    /// The index in `bytes`, read from `key` of `store` (for errors).
    pub(crate) fn decode(store: &str, key: &str, bytes: &[u8]) -> Result<RemoteIndex> {
        let bad =
            |at: usize, what: String| Corruption::new(format!("{store}/{key}"), at as u64, what);
        let Some(body_len) = bytes.len().checked_sub(4) else {
            return Err(bad(0, format!("an index of {} bytes", bytes.len())).into());
        };
        let (body, tail) = bytes.split_at(body_len);
        let stored = u32::from_le_bytes(tail.try_into().expect("4 bytes"));
        let computed = crate::crc::crc32c(body);
        if stored != computed {
            return Err(Corruption::checksum(
                format!("{store}/{key}"),
                body_len as u64,
                "index checksum",
                stored,
                computed,
            )
            .into());
        }
        let mut d = Decoder::new(body);
        let at = |d: &Decoder| body.len() - d.remaining();
        let truncated = |d: &Decoder| bad(at(d), "a field runs past the end of the index".into());
        let magic = d.bytes(8).map_err(|_| truncated(&d))?;
        if magic != MAGIC {
            return Err(bad(0, "not a strata index (bad magic)".into()).into());
        }
        let version = d.u32().map_err(|_| truncated(&d))?;
        if version != VERSION {
            return Err(bad(
                8,
                format!("index format version {version}; this build reads {VERSION}"),
            )
            .into());
        }
        let generation = d.u64().map_err(|_| truncated(&d))?;
        let seq = d.u64().map_err(|_| truncated(&d))?;
        let lsn = d.u64().map_err(|_| truncated(&d))?;
        let count = d.u32().map_err(|_| truncated(&d))? as usize;
        let mut objects = Vec::with_capacity(count.min(1 << 16));
        for _ in 0..count {
            let mut text = || -> Result<String> {
                let len = d.u16().map_err(|_| truncated(&d))? as usize;
                let start = at(&d);
                let raw = d.bytes(len).map_err(|_| truncated(&d))?;
                String::from_utf8(raw.to_vec())
                    .map_err(|_| bad(start, "a name that is not UTF-8".into()).into())
            };
            let name = text()?;
            let key = text()?;
            let bytes = d.u64().map_err(|_| truncated(&d))?;
            let crc = d.u32().map_err(|_| truncated(&d))?;
            objects.push(IndexedObject {
                name,
                key,
                bytes,
                crc,
            });
        }
        let manifest_len = d.u32().map_err(|_| truncated(&d))? as usize;
        let manifest = d.bytes(manifest_len).map_err(|_| truncated(&d))?.to_vec();
        if d.remaining() != 0 {
            return Err(bad(
                at(&d),
                format!("{} bytes after the manifest", d.remaining()),
            )
            .into());
        }
        Ok(RemoteIndex {
            generation,
            seq,
            lsn,
            objects,
            manifest,
        })
    }
}

/// Puts `index` as the next index of its writer, at `index.seq` or, after
/// the writer's own earlier attempts there (whose answers were lost), the
/// first free number above; `index.seq` ends as the number it took. An
/// index of another generation in the way fenced this writer:
/// `Error::Fenced`, nothing put.
pub(crate) fn put_next(store: &dyn RemoteStore, index: &mut RemoteIndex) -> Result<()> {
    loop {
        let key = index_key(index.seq);
        match store.put(&key, index.encode().into(), PutMode::Create) {
            Ok(()) => return Ok(()),
            Err(Error::Remote {
                kind: RemoteErrorKind::AlreadyExists,
                ..
            }) => {
                let there = RemoteIndex::decode(store.url(), &key, &store.get(&key)?)?;
                if there.generation != index.generation {
                    return Err(Error::Fenced {
                        store: store.url().to_string(),
                        generation: index.generation,
                        newer: there.generation,
                    });
                }
                index.seq += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Times [`claim`] reads the newest index again after losing the race
/// for the next number.
const CLAIM_TRIES_MAX: u32 = 64;

/// Makes `generation` the store's writer: puts the next index, the newest
/// one with `generation` in it (an empty one in a store without). Returns
/// it: the state the new writer starts from.
pub(crate) fn claim(store: &dyn RemoteStore, generation: u64) -> Result<RemoteIndex> {
    for _ in 0..CLAIM_TRIES_MAX {
        let next = match latest(store)? {
            Some((_, newest)) => RemoteIndex {
                generation,
                seq: newest.seq + 1,
                ..newest
            },
            None => RemoteIndex {
                generation,
                seq: 1,
                lsn: 0,
                objects: Vec::new(),
                manifest: Vec::new(),
            },
        };
        let key = index_key(next.seq);
        match store.put(&key, next.encode().into(), PutMode::Create) {
            Ok(()) => return Ok(next),
            Err(Error::Remote {
                kind: RemoteErrorKind::AlreadyExists,
                ..
            }) => {
                // This claim's own put, its answer lost; else another
                // writer's index took the number: read the newest again.
                let there = RemoteIndex::decode(store.url(), &key, &store.get(&key)?)?;
                if there.generation == generation {
                    return Ok(there);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::Internal(format!(
        "{}: lost the race for the next index {CLAIM_TRIES_MAX} times in a row",
        store.url()
    )))
}

/// The newest index in `store` and its key; `None` when it has none.
pub(crate) fn latest(store: &dyn RemoteStore) -> Result<Option<(String, RemoteIndex)>> {
    let newest = store
        .list(INDEX_PREFIX)?
        .into_iter()
        .map(|o: ObjectInfo| o.key)
        .filter(|k| is_index_key(k))
        .max();
    let Some(key) = newest else {
        return Ok(None);
    };
    let bytes = store.get(&key)?;
    let index = RemoteIndex::decode(store.url(), &key, &bytes)?;
    Ok(Some((key, index)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RemoteIndex {
        RemoteIndex {
            generation: 3,
            seq: 17,
            lsn: 12345,
            objects: vec![
                IndexedObject {
                    name: "0000000000000004.delta".into(),
                    key: "layers/0000000000000004.delta-g00000000000000000002".into(),
                    bytes: 8192,
                    crc: 0xdead_beef,
                },
                IndexedObject {
                    name: "0000000000000002.log".into(),
                    key: "values/0000000000000002.log-g00000000000000000003".into(),
                    bytes: 4096,
                    crc: 7,
                },
            ],
            manifest: vec![1, 2, 3, 4, 5],
        }
    }

    #[test]
    fn an_index_round_trips_and_any_damage_is_named() {
        let i = sample();
        let bytes = i.encode();
        assert_eq!(RemoteIndex::decode("s3://b", "index/x", &bytes).unwrap(), i);
        for at in [0, 9, 20, 40, bytes.len() - 7, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let e = RemoteIndex::decode("s3://b", "index/x", &bad).unwrap_err();
            assert!(
                e.is_corruption() && e.to_string().contains("s3://b/index/x"),
                "{e}"
            );
        }
        for len in [0, 3, 4, 30, bytes.len() - 1] {
            assert!(RemoteIndex::decode("s", "k", &bytes[..len]).is_err());
        }
    }

    #[test]
    fn index_keys_sort_by_seq() {
        assert!(index_key(9) < index_key(10));
        assert!(is_index_key(&index_key(u64::MAX)));
        assert!(!is_index_key("index/12"));
        assert!(!is_index_key("layers/00000000000000000001"));
    }

    #[test]
    fn a_claim_fences_the_writer_before_it_and_keeps_its_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::remote::DirRemote::open(dir.path()).unwrap();
        // Writer 1 claims an empty store, then puts two indexes.
        let first = claim(&store, 1).unwrap();
        assert_eq!(
            (first.seq, first.generation, first.manifest.len()),
            (1, 1, 0)
        );
        let mut a = RemoteIndex {
            seq: 2,
            lsn: 10,
            manifest: vec![7],
            ..first
        };
        put_next(&store, &mut a).unwrap();
        // Its own earlier attempt in the way (an answer lost): the next number.
        let mut b = RemoteIndex {
            lsn: 20,
            ..a.clone()
        };
        put_next(&store, &mut b).unwrap();
        assert_eq!(b.seq, 3);
        // Writer 2 claims: the newest, with generation 2, at 4.
        let second = claim(&store, 2).unwrap();
        assert_eq!((second.seq, second.generation, second.lsn), (4, 2, 20));
        // Writer 1's next put meets it: fenced, nothing put.
        let mut c = RemoteIndex {
            seq: 4,
            lsn: 30,
            ..b
        };
        let e = put_next(&store, &mut c).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Fenced {
                    generation: 1,
                    newer: 2,
                    ..
                }
            ),
            "{e}"
        );
        let (key, newest) = latest(&store).unwrap().unwrap();
        assert_eq!((key, newest.generation, newest.lsn), (index_key(4), 2, 20));
    }
}
