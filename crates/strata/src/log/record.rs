//! Byte layout of a log file: a file header, then records, each a header
//! followed by a batch's serialized entries (see docs/format.md).
//!
//! Record header, little-endian:
//! `header_crc u32 | payload_len u32 | lsn u64 | count u32 | payload_crc u32 | synced_through u64`.
//! `header_crc` covers bytes 4..32 of the header, `payload_crc` the payload.
//! `synced_through` is the log offset up to which the log was durable when
//! the record was written: recovery uses it to tell a torn tail (bad bytes
//! after the last durable point: the log ends there) from corruption (bad
//! bytes before it: an error). An all-zero header ends the log (the padding
//! of a direct-I/O tail block reads as zeros).

use crate::error::Corruption;
use std::path::Path;

/// Magic at the start of every log file.
pub(crate) const LOG_MAGIC: [u8; 8] = *b"STRATLOG";
/// Log format version this build writes and reads.
pub(crate) const LOG_FORMAT_VERSION: u32 = 2;
/// Bytes of the log file header; records start here.
pub(crate) const LOG_HEADER_BYTES: usize = 64;
const LOG_HEADER_MAGIC_OFFSET: usize = 0;
const LOG_HEADER_VERSION_OFFSET: usize = LOG_HEADER_MAGIC_OFFSET + 8;
pub(crate) const LOG_HEADER_FILE_ID_OFFSET: usize = LOG_HEADER_VERSION_OFFSET + 4;
pub(crate) const LOG_HEADER_CRC_OFFSET: usize = LOG_HEADER_BYTES - 4;

/// Bytes of a record header.
pub(crate) const RECORD_HEADER_BYTES: usize = 32;
pub(crate) const HEADER_CRC_OFFSET: usize = 0;
pub(crate) const PAYLOAD_LEN_OFFSET: usize = HEADER_CRC_OFFSET + 4;
const LSN_OFFSET: usize = PAYLOAD_LEN_OFFSET + 4;
const COUNT_OFFSET: usize = LSN_OFFSET + 8;
pub(crate) const PAYLOAD_CRC_OFFSET: usize = COUNT_OFFSET + 4;
const SYNCED_THROUGH_OFFSET: usize = PAYLOAD_CRC_OFFSET + 4;
const _: () = assert!(SYNCED_THROUGH_OFFSET + 8 == RECORD_HEADER_BYTES);
const _: () = assert!(LOG_HEADER_FILE_ID_OFFSET + 8 <= LOG_HEADER_CRC_OFFSET);

/// The log file header for file `file_id`.
pub(crate) fn encode_log_header(file_id: u64) -> [u8; LOG_HEADER_BYTES] {
    let mut h = [0u8; LOG_HEADER_BYTES];
    h[LOG_HEADER_MAGIC_OFFSET..][..8].copy_from_slice(&LOG_MAGIC);
    h[LOG_HEADER_VERSION_OFFSET..][..4].copy_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
    h[LOG_HEADER_FILE_ID_OFFSET..][..8].copy_from_slice(&file_id.to_le_bytes());
    let crc = crc32c::crc32c(&h[..LOG_HEADER_CRC_OFFSET]);
    h[LOG_HEADER_CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a log file header.
pub(crate) fn decode_log_header(path: &Path, bytes: &[u8]) -> crate::Result<u64> {
    let h = bytes
        .get(..LOG_HEADER_BYTES)
        .ok_or_else(|| Corruption::new(path, 0, "log file shorter than its header"))?;
    let stored = u32::from_le_bytes(h[LOG_HEADER_CRC_OFFSET..].try_into().expect("4 bytes"));
    let actual = crc32c::crc32c(&h[..LOG_HEADER_CRC_OFFSET]);
    if stored != actual {
        return Err(Corruption::checksum(path, 0, "log file header", stored, actual).into());
    }
    if h[..8] != LOG_MAGIC {
        return Err(Corruption::new(path, 0, "log file magic").into());
    }
    let version = u32::from_le_bytes(
        h[LOG_HEADER_VERSION_OFFSET..][..4]
            .try_into()
            .expect("4 bytes"),
    );
    // Version 1 logs had entries without a checksum: read as version 2
    // they would not parse, so they are refused by name.
    if version != LOG_FORMAT_VERSION {
        return Err(crate::Error::UnsupportedVersion {
            path: path.to_owned(),
            found: version,
            supported: LOG_FORMAT_VERSION,
        });
    }
    Ok(u64::from_le_bytes(
        h[LOG_HEADER_FILE_ID_OFFSET..][..8]
            .try_into()
            .expect("8 bytes"),
    ))
}

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub payload_len: u32,
    pub lsn: u64,
    pub count: u32,
    pub payload_crc: u32,
    pub synced_through: u64,
}

impl RecordHeader {
    /// A header for `payload`.
    pub(crate) fn for_payload(payload: &[u8], lsn: u64, count: u32, synced_through: u64) -> Self {
        RecordHeader {
            payload_len: u32::try_from(payload.len())
                .expect("batch size is bounded by BATCH_BYTES_MAX"),
            lsn,
            count,
            payload_crc: crc32c::crc32c(payload),
            synced_through,
        }
    }

    pub(crate) fn encode(&self) -> [u8; RECORD_HEADER_BYTES] {
        let mut h = [0u8; RECORD_HEADER_BYTES];
        h[PAYLOAD_LEN_OFFSET..][..4].copy_from_slice(&self.payload_len.to_le_bytes());
        h[LSN_OFFSET..][..8].copy_from_slice(&self.lsn.to_le_bytes());
        h[COUNT_OFFSET..][..4].copy_from_slice(&self.count.to_le_bytes());
        h[PAYLOAD_CRC_OFFSET..][..4].copy_from_slice(&self.payload_crc.to_le_bytes());
        h[SYNCED_THROUGH_OFFSET..][..8].copy_from_slice(&self.synced_through.to_le_bytes());
        let crc = crc32c::crc32c(&h[PAYLOAD_LEN_OFFSET..]);
        h[HEADER_CRC_OFFSET..][..4].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes a header whose checksum holds; `Err((expected, found))` when it does not.
    pub(crate) fn decode(h: &[u8; RECORD_HEADER_BYTES]) -> Result<Self, (u32, u32)> {
        let stored = u32::from_le_bytes(h[HEADER_CRC_OFFSET..][..4].try_into().expect("4 bytes"));
        let actual = crc32c::crc32c(&h[PAYLOAD_LEN_OFFSET..]);
        if stored != actual {
            return Err((stored, actual));
        }
        let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
        Ok(RecordHeader {
            payload_len: u32_at(PAYLOAD_LEN_OFFSET),
            lsn: u64_at(LSN_OFFSET),
            count: u32_at(COUNT_OFFSET),
            payload_crc: u32_at(PAYLOAD_CRC_OFFSET),
            synced_through: u64_at(SYNCED_THROUGH_OFFSET),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_any_flip_is_caught() {
        let h = RecordHeader::for_payload(b"payload", 42, 3, 4096);
        let bytes = h.encode();
        assert_eq!(RecordHeader::decode(&bytes), Ok(h));
        for i in 0..RECORD_HEADER_BYTES {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert!(
                RecordHeader::decode(&bad).is_err(),
                "flip at {i} undetected"
            );
        }
    }

    #[test]
    fn log_header_checks_magic_version_and_crc() {
        let p = Path::new("x.log");
        let h = encode_log_header(7);
        assert_eq!(decode_log_header(p, &h).unwrap(), 7);
        let mut bad = h;
        bad[20] ^= 1;
        assert!(decode_log_header(p, &bad).unwrap_err().is_corruption());
        assert!(decode_log_header(p, &h[..10]).is_err());
    }
}
