//! The manifest: the list of live files of a database (logs of in-memory
//! layers not yet flushed, delta layers), and the next file id.
//!
//! Replaced atomically: written to `MANIFEST.tmp`, fdatasync, renamed over
//! `MANIFEST`, fsync of the directory. A file of the database that the
//! manifest does not list is garbage and is removed at open.
//!
//! Layout (little-endian): `magic [8] | version u32 | payload_len u32 |
//! payload_crc u32 | header_crc u32 | payload`; the header crc covers bytes
//! 0..20. Payload: `next_file_id u64 | log_count u32 | delta_count u32 |
//! log ids u64… | delta ids u64…`, ids in creation order (oldest first).

use crate::error::{Corruption, Error, Result};
use crate::io::{is_not_found, FileClass, FileOptions, IoMode, IoStats, Storage};
use std::path::{Path, PathBuf};

pub(crate) const MANIFEST_NAME: &str = "MANIFEST";
pub(crate) const MANIFEST_TMP_NAME: &str = "MANIFEST.tmp";
const MAGIC: [u8; 8] = *b"STRMANIF";
pub(crate) const MANIFEST_FORMAT_VERSION: u32 = 1;
pub(crate) const HEADER_BYTES: usize = 24;
const VERSION_OFFSET: usize = 8;
pub(crate) const PAYLOAD_LEN_OFFSET: usize = VERSION_OFFSET + 4;
pub(crate) const PAYLOAD_CRC_OFFSET: usize = PAYLOAD_LEN_OFFSET + 4;
pub(crate) const HEADER_CRC_OFFSET: usize = PAYLOAD_CRC_OFFSET + 4;
const _: () = assert!(HEADER_CRC_OFFSET + 4 == HEADER_BYTES);
/// Most files a manifest may list.
pub(crate) const MANIFEST_FILES_MAX: usize = 1 << 20;

/// What the manifest lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub next_file_id: u64,
    /// Logs of in-memory layers not yet flushed, oldest first.
    pub logs: Vec<u64>,
    /// Delta layers, oldest first.
    pub deltas: Vec<u64>,
}

pub(crate) fn log_name(id: u64) -> String {
    format!("{id:016x}.log")
}

pub(crate) fn delta_name(id: u64) -> String {
    format!("{id:016x}.delta")
}

/// The id of a file named by `log_name` or `delta_name`, or of the temporary
/// manifest, so open can tell the database's own files from others.
pub(crate) fn is_own_file(name: &str) -> bool {
    if name == MANIFEST_TMP_NAME {
        return true;
    }
    let (stem, ext) = match name.rsplit_once('.') {
        Some(parts) => parts,
        None => return false,
    };
    (ext == "log" || ext == "delta")
        && stem.len() == 16
        && stem.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Manifest {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(16 + 8 * (self.logs.len() + self.deltas.len()));
        payload.extend_from_slice(&self.next_file_id.to_le_bytes());
        payload.extend_from_slice(&(self.logs.len() as u32).to_le_bytes());
        payload.extend_from_slice(&(self.deltas.len() as u32).to_le_bytes());
        for id in self.logs.iter().chain(&self.deltas) {
            payload.extend_from_slice(&id.to_le_bytes());
        }
        let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&MANIFEST_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        let header_crc = crc32c::crc32c(&out[..HEADER_CRC_OFFSET]);
        out.extend_from_slice(&header_crc.to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Manifest> {
        let not_db = |why: &str| Error::NotADatabase {
            path: path.to_owned(),
            why: why.to_owned(),
        };
        if bytes.len() < HEADER_BYTES {
            if bytes.len() >= 8 && bytes[..8] == MAGIC {
                return Err(Corruption::new(path, 0, "manifest shorter than its header").into());
            }
            return Err(not_db("the manifest is too short to be one"));
        }
        if bytes[..8] != MAGIC {
            return Err(not_db("the manifest has no strata magic"));
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let stored = u32_at(HEADER_CRC_OFFSET);
        let actual = crc32c::crc32c(&bytes[..HEADER_CRC_OFFSET]);
        if stored != actual {
            return Err(Corruption::checksum(path, 0, "manifest header", stored, actual).into());
        }
        let version = u32_at(VERSION_OFFSET);
        if version == 0 {
            return Err(Corruption::new(path, VERSION_OFFSET as u64, "manifest version 0").into());
        }
        if version > MANIFEST_FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_owned(),
                found: version,
                supported: MANIFEST_FORMAT_VERSION,
            });
        }
        let len = u32_at(PAYLOAD_LEN_OFFSET) as usize;
        let payload = bytes.get(HEADER_BYTES..HEADER_BYTES + len).ok_or_else(|| {
            Corruption::new(
                path,
                HEADER_BYTES as u64,
                "manifest payload past the end of the file",
            )
        })?;
        // The file is exactly header and payload: a byte past them is not
        // covered by a checksum, so it cannot be trusted to be padding.
        if bytes.len() != HEADER_BYTES + len {
            return Err(Corruption::new(
                path,
                (HEADER_BYTES + len) as u64,
                format!(
                    "{} bytes after the manifest's payload",
                    bytes.len() - HEADER_BYTES - len
                ),
            )
            .into());
        }
        let stored = u32_at(PAYLOAD_CRC_OFFSET);
        let actual = crc32c::crc32c(payload);
        if stored != actual {
            return Err(Corruption::checksum(
                path,
                HEADER_BYTES as u64,
                "manifest payload",
                stored,
                actual,
            )
            .into());
        }
        let bad = |what: &str| Corruption::new(path, HEADER_BYTES as u64, what);
        if payload.len() < 16 {
            return Err(bad("manifest payload too short").into());
        }
        let next_file_id = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
        let logs_n = u32::from_le_bytes(payload[8..12].try_into().expect("4 bytes")) as usize;
        let deltas_n = u32::from_le_bytes(payload[12..16].try_into().expect("4 bytes")) as usize;
        if logs_n + deltas_n > MANIFEST_FILES_MAX || payload.len() != 16 + 8 * (logs_n + deltas_n) {
            return Err(bad("manifest file counts do not match its length").into());
        }
        let ids: Vec<u64> = payload[16..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let m = Manifest {
            next_file_id,
            logs: ids[..logs_n].to_vec(),
            deltas: ids[logs_n..].to_vec(),
        };
        if m.logs.iter().chain(&m.deltas).any(|&id| id >= next_file_id) {
            return Err(bad("manifest lists a file id at or above its next file id").into());
        }
        Ok(m)
    }

    /// Reads the manifest of `dir`; `Ok(None)` when there is none.
    pub(crate) fn load(storage: &dyn Storage, dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST_NAME);
        // Not counted: the database's statistics start after open.
        let file = match storage.open(&path, &manifest_file_options(), &IoStats::new()) {
            Ok(file) => file,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = file.len()?;
        let len = usize::try_from(len)
            .map_err(|_| Corruption::new(&path, 0, "manifest larger than memory"))?;
        let bytes = file.read_range(0, len)?;
        Manifest::decode(&path, &bytes).map(Some)
    }

    /// Replaces the manifest of `dir` atomically and durably.
    pub(crate) fn store(&self, storage: &dyn Storage, dir: &Path, stats: &IoStats) -> Result<()> {
        let tmp: PathBuf = dir.join(MANIFEST_TMP_NAME);
        let file = storage.create(&tmp, &manifest_file_options(), stats)?;
        file.write_all_at(&self.encode(), 0)?;
        file.sync_data()?;
        drop(file);
        let path = dir.join(MANIFEST_NAME);
        storage.rename(&tmp, &path)?;
        storage.sync_dir(dir)
    }
}

/// The manifest is small and read once: through the page cache.
fn manifest_file_options() -> FileOptions {
    FileOptions {
        mode: IoMode::Buffered,
        class: FileClass::Manifest,
        ..FileOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_flips_are_errors() {
        let m = Manifest {
            next_file_id: 9,
            logs: vec![7, 8],
            deltas: vec![1, 3],
        };
        let bytes = m.encode();
        let p = Path::new("MANIFEST");
        assert_eq!(Manifest::decode(p, &bytes).unwrap(), m);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x04;
            let err = Manifest::decode(p, &bad).unwrap_err();
            assert!(
                matches!(err, Error::Corruption(_) | Error::NotADatabase { .. }),
                "flip at {i}: {err}"
            );
        }
        // A byte after the payload is outside every checksum: refused.
        let mut longer = bytes.clone();
        longer.push(0);
        let err = Manifest::decode(p, &longer).unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("after"),
            "{err}"
        );
    }

    #[test]
    fn own_file_names() {
        assert!(is_own_file(&log_name(5)));
        assert!(is_own_file(&delta_name(u64::MAX)));
        assert!(!is_own_file("notes.txt"));
        assert!(!is_own_file("MANIFEST"));
    }
}
