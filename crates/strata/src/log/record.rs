//! Byte layout of a log file: a file header, then records, each a header
//! followed by a batch's serialized entries (see docs/format.md).
//!
//! Record header, little-endian:
//! `header_crc u32 | payload_len u32 | lsn u64 | count u32 | payload_crc u32 | synced_through u64`.
//! A record of LSN 0 is a pad record: no entries, zeros, written at a sync
//! to end the log on a sector boundary (or, at close, to seal it). The file
//! header of log N names the log before it, where it ends and its last LSN.
//! `header_crc` covers bytes 4..32 of the header, `payload_crc` the payload.
//! `synced_through` is the log offset up to which the log was durable when
//! the record was written: recovery uses it to tell a torn tail (bad bytes
//! after the last durable point: the log ends there) from corruption (bad
//! bytes before it: an error). An all-zero header ends the log (the padding
//! of a direct-I/O tail block reads as zeros).

use crate::codec::{u32_at, u64_at, write_u32_at, write_u64_at};
use crate::error::Corruption;
use std::path::Path;

/// Magic at the start of every log file.
pub(crate) const LOG_MAGIC: [u8; 8] = *b"STRATLOG";
/// Log format version this build writes: 3 adds the predecessor claim to
/// the file header and pad records that start every sync's records on a
/// fresh sector; 4 lays a put's value of whole pages out of line, in its
/// record's value run (`batch::ENTRY_OUT_OF_LINE`), which a pad record
/// before the record may start on a page boundary.
pub(crate) const LOG_FORMAT_VERSION: u32 = 4;
/// The oldest log format version this build reads (2: the same records,
/// without pad records or predecessor claims).
pub(crate) const LOG_FORMAT_VERSION_MIN: u32 = 2;
/// Bytes of the log file header; records start here.
pub(crate) const LOG_HEADER_BYTES: usize = 64;
const LOG_HEADER_MAGIC_OFFSET: usize = 0;
const LOG_HEADER_VERSION_OFFSET: usize = LOG_HEADER_MAGIC_OFFSET + 8;
pub(crate) const LOG_HEADER_FILE_ID_OFFSET: usize = LOG_HEADER_VERSION_OFFSET + 4;
pub(crate) const LOG_HEADER_PREV_ID_OFFSET: usize = LOG_HEADER_FILE_ID_OFFSET + 8;
const LOG_HEADER_PREV_END_OFFSET: usize = LOG_HEADER_PREV_ID_OFFSET + 8;
const LOG_HEADER_PREV_LSN_OFFSET: usize = LOG_HEADER_PREV_END_OFFSET + 8;
const LOG_HEADER_RESERVED_OFFSET: usize = LOG_HEADER_PREV_LSN_OFFSET + 8;
pub(crate) const LOG_HEADER_CRC_OFFSET: usize = LOG_HEADER_BYTES - 4;

/// The unit the log assumes a device writes atomically (see
/// docs/format.md): every sync ends the log on a multiple of it with a pad
/// record, so the records of the next sync start on a sector no durable
/// byte shares.
pub(crate) const LOG_SECTOR_BYTES: u64 = 512;
/// The LSN of a pad record (real LSNs start at 1): no entries, a payload of
/// zeros.
pub(crate) const PAD_LSN: u64 = 0;

/// Bytes of a record header.
pub(crate) const RECORD_HEADER_BYTES: usize = 32;
pub(crate) const HEADER_CRC_OFFSET: usize = 0;
pub(crate) const PAYLOAD_LEN_OFFSET: usize = HEADER_CRC_OFFSET + 4;
const LSN_OFFSET: usize = PAYLOAD_LEN_OFFSET + 4;
const COUNT_OFFSET: usize = LSN_OFFSET + 8;
pub(crate) const PAYLOAD_CRC_OFFSET: usize = COUNT_OFFSET + 4;
const SYNCED_THROUGH_OFFSET: usize = PAYLOAD_CRC_OFFSET + 4;
const _: () = assert!(SYNCED_THROUGH_OFFSET + 8 == RECORD_HEADER_BYTES);
const _: () = assert!(LOG_HEADER_RESERVED_OFFSET <= LOG_HEADER_CRC_OFFSET);

/// What a log's header says of the log before it: that log was complete,
/// durable and sealed when this one was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrevLog {
    pub file_id: u64,
    /// Where its records end.
    pub end: u64,
    /// Its last record's LSN (0 if it had none).
    pub last_lsn: u64,
}

/// A decoded log file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogHeader {
    pub version: u32,
    pub file_id: u64,
    pub prev: Option<PrevLog>,
}

/// The log file header for file `file_id`, claiming `prev`.
pub(crate) fn encode_log_header(file_id: u64, prev: Option<PrevLog>) -> [u8; LOG_HEADER_BYTES] {
    let mut h = [0u8; LOG_HEADER_BYTES];
    h[LOG_HEADER_MAGIC_OFFSET..][..8].copy_from_slice(&LOG_MAGIC);
    write_u32_at(&mut h, LOG_HEADER_VERSION_OFFSET, LOG_FORMAT_VERSION);
    write_u64_at(&mut h, LOG_HEADER_FILE_ID_OFFSET, file_id);
    if let Some(p) = prev {
        write_u64_at(&mut h, LOG_HEADER_PREV_ID_OFFSET, p.file_id);
        write_u64_at(&mut h, LOG_HEADER_PREV_END_OFFSET, p.end);
        write_u64_at(&mut h, LOG_HEADER_PREV_LSN_OFFSET, p.last_lsn);
    }
    let crc = crate::crc::crc32c(&h[..LOG_HEADER_CRC_OFFSET]);
    write_u32_at(&mut h, LOG_HEADER_CRC_OFFSET, crc);
    h
}

/// Checks a log file header.
pub(crate) fn decode_log_header(path: &Path, bytes: &[u8]) -> crate::Result<LogHeader> {
    let h = bytes
        .get(..LOG_HEADER_BYTES)
        .ok_or_else(|| Corruption::new(path, 0, "log file shorter than its header"))?;
    // `h` is LOG_HEADER_BYTES long: every field below is in it.
    let field_u32 = |o: usize| u32_at(h, o).unwrap_or(0);
    let field_u64 = |o: usize| u64_at(h, o).unwrap_or(0);
    let stored = field_u32(LOG_HEADER_CRC_OFFSET);
    let actual = crate::crc::crc32c(&h[..LOG_HEADER_CRC_OFFSET]);
    if stored != actual {
        return Err(Corruption::checksum(path, 0, "log file header", stored, actual).into());
    }
    if h[..8] != LOG_MAGIC {
        return Err(Corruption::new(path, 0, "log file magic").into());
    }
    let version = field_u32(LOG_HEADER_VERSION_OFFSET);
    // Version 1 logs had entries without a checksum: read as a later
    // version they would not parse, so they are refused by name.
    if !(LOG_FORMAT_VERSION_MIN..=LOG_FORMAT_VERSION).contains(&version) {
        return Err(crate::Error::UnsupportedVersion {
            path: path.to_owned(),
            found: version,
            supported: LOG_FORMAT_VERSION,
        });
    }
    let reserved_from = if version >= 3 {
        LOG_HEADER_RESERVED_OFFSET
    } else {
        LOG_HEADER_PREV_ID_OFFSET
    };
    if let Some(i) = h[reserved_from..LOG_HEADER_CRC_OFFSET]
        .iter()
        .position(|&b| b != 0)
    {
        return Err(Corruption::new(
            path,
            (reserved_from + i) as u64,
            "reserved byte of the log header is not zero",
        )
        .into());
    }
    let prev_id = field_u64(LOG_HEADER_PREV_ID_OFFSET);
    let prev = (version >= 3 && prev_id != 0).then(|| PrevLog {
        file_id: prev_id,
        end: field_u64(LOG_HEADER_PREV_END_OFFSET),
        last_lsn: field_u64(LOG_HEADER_PREV_LSN_OFFSET),
    });
    Ok(LogHeader {
        version,
        file_id: field_u64(LOG_HEADER_FILE_ID_OFFSET),
        prev,
    })
}

/// The unit a record's value run is aligned to (when the writer pads for
/// it): the device's page, `batch::OUT_OF_LINE_UNIT`.
pub(crate) const LOG_PAGE_BYTES: u64 = crate::batch::OUT_OF_LINE_UNIT as u64;

/// Zeros for pad record payloads: a sector pad's (at most a sector and a
/// header) or an alignment pad's (less than a page).
static PAD_ZEROS: [u8; LOG_PAGE_BYTES as usize] = [0; LOG_PAGE_BYTES as usize];
const _: () = assert!(LOG_PAGE_BYTES >= 2 * LOG_SECTOR_BYTES);

/// A pad record: its header, and its payload of zeros (borrowed, so the
/// sync path writes it without an allocation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PadRecord {
    pub header: [u8; RECORD_HEADER_BYTES],
    pub payload: &'static [u8],
}

impl PadRecord {
    /// Header and payload in one buffer (for tests and seeds).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn to_vec(self) -> Vec<u8> {
        [&self.header[..], self.payload].concat()
    }
}

/// The pad record that ends a log at `end` on the next sector boundary
/// (`None` if `end` is on one), or, with `seal`, on the boundary after a
/// whole pad record even if `end` is on one. Its `synced_through` is
/// `synced_through`.
pub(crate) fn pad_record(end: u64, synced_through: u64, seal: bool) -> Option<PadRecord> {
    let mut gap = (LOG_SECTOR_BYTES - end % LOG_SECTOR_BYTES) % LOG_SECTOR_BYTES;
    if gap == 0 && !seal {
        return None;
    }
    while gap < RECORD_HEADER_BYTES as u64 {
        gap += LOG_SECTOR_BYTES;
    }
    Some(pad_of(gap, synced_through))
}

/// A pad record `bytes` long in all (at least a header, less than a header
/// and a page) claiming `synced_through`.
fn pad_of(bytes: u64, synced_through: u64) -> PadRecord {
    let payload = &PAD_ZEROS[..bytes as usize - RECORD_HEADER_BYTES];
    let header = RecordHeader::for_payload(payload, PAD_LSN, 0, synced_through);
    PadRecord {
        header: header.encode(),
        payload,
    }
}

/// The pad record to write at `end` so that a record whose value run
/// starts `run_at` bytes after the record's start (header and entries)
/// has that run on a page boundary, if that pad is at most `bytes_max`
/// long; `None` when the run would start on one anyway or the pad would
/// cost more. Its `synced_through` is `synced_through`.
pub(crate) fn alignment_pad(
    end: u64,
    run_at: u64,
    bytes_max: u64,
    synced_through: u64,
) -> Option<PadRecord> {
    let mut gap = (LOG_PAGE_BYTES - (end + run_at) % LOG_PAGE_BYTES) % LOG_PAGE_BYTES;
    if gap == 0 {
        return None;
    }
    if gap < RECORD_HEADER_BYTES as u64 {
        gap += LOG_PAGE_BYTES;
    }
    (gap <= bytes_max).then(|| pad_of(gap, synced_through))
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
        Self::for_parts(payload, (0, 0), lsn, count, synced_through)
    }

    /// A header for the payload `entries` then a value run of `(length,
    /// crc32c)` (a batch's entries and its value run, whose crc the batch
    /// kept as its values were added: no second pass over them).
    pub(crate) fn for_parts(
        entries: &[u8],
        (run_len, run_crc): (usize, u32),
        lsn: u64,
        count: u32,
        synced_through: u64,
    ) -> Self {
        RecordHeader {
            payload_len: u32::try_from(entries.len() + run_len)
                .expect("batch size is bounded by BATCH_BYTES_MAX"),
            lsn,
            count,
            payload_crc: crate::crc::crc32c_combine(
                crate::crc::crc32c(entries),
                run_crc,
                run_len as u64,
            ),
            synced_through,
        }
    }

    pub(crate) fn encode(&self) -> [u8; RECORD_HEADER_BYTES] {
        let mut h = [0u8; RECORD_HEADER_BYTES];
        write_u32_at(&mut h, PAYLOAD_LEN_OFFSET, self.payload_len);
        write_u64_at(&mut h, LSN_OFFSET, self.lsn);
        write_u32_at(&mut h, COUNT_OFFSET, self.count);
        write_u32_at(&mut h, PAYLOAD_CRC_OFFSET, self.payload_crc);
        write_u64_at(&mut h, SYNCED_THROUGH_OFFSET, self.synced_through);
        let crc = crate::crc::crc32c(&h[PAYLOAD_LEN_OFFSET..]);
        write_u32_at(&mut h, HEADER_CRC_OFFSET, crc);
        h
    }

    /// Decodes a header whose checksum holds; `Err((expected, found))` when it does not.
    pub(crate) fn decode(h: &[u8; RECORD_HEADER_BYTES]) -> Result<Self, (u32, u32)> {
        // Every field is inside the RECORD_HEADER_BYTES of `h`.
        let field_u32 = |o: usize| u32_at(h, o).unwrap_or(0);
        let field_u64 = |o: usize| u64_at(h, o).unwrap_or(0);
        let stored = field_u32(HEADER_CRC_OFFSET);
        let actual = crate::crc::crc32c(&h[PAYLOAD_LEN_OFFSET..]);
        if stored != actual {
            return Err((stored, actual));
        }
        Ok(RecordHeader {
            payload_len: field_u32(PAYLOAD_LEN_OFFSET),
            lsn: field_u64(LSN_OFFSET),
            count: field_u32(COUNT_OFFSET),
            payload_crc: field_u32(PAYLOAD_CRC_OFFSET),
            synced_through: field_u64(SYNCED_THROUGH_OFFSET),
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
        let prev = PrevLog {
            file_id: 6,
            end: 4096,
            last_lsn: 99,
        };
        let h = encode_log_header(7, Some(prev));
        let decoded = decode_log_header(p, &h).unwrap();
        assert_eq!((decoded.file_id, decoded.prev), (7, Some(prev)));
        assert_eq!(
            decode_log_header(p, &encode_log_header(7, None))
                .unwrap()
                .prev,
            None
        );
        let mut bad = h;
        bad[20] ^= 1;
        assert!(decode_log_header(p, &bad).unwrap_err().is_corruption());
        assert!(decode_log_header(p, &h[..10]).is_err());
        // A reserved byte set under a valid checksum is refused too.
        let mut reserved = h;
        reserved[LOG_HEADER_RESERVED_OFFSET] = 1;
        let crc = crate::crc::crc32c(&reserved[..LOG_HEADER_CRC_OFFSET]);
        write_u32_at(&mut reserved, LOG_HEADER_CRC_OFFSET, crc);
        assert!(decode_log_header(p, &reserved).unwrap_err().is_corruption());
    }

    #[test]
    fn format_doc_log_tables_match_the_constants() {
        let doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/format.md"));
        let section = doc
            .split("### Log file header")
            .nth(1)
            .and_then(|s| s.split("### Record\n").next())
            .expect("the log file header section");
        for (name, offset) in [
            ("LOG_HEADER_MAGIC_OFFSET", LOG_HEADER_MAGIC_OFFSET),
            ("LOG_HEADER_VERSION_OFFSET", LOG_HEADER_VERSION_OFFSET),
            ("LOG_HEADER_FILE_ID_OFFSET", LOG_HEADER_FILE_ID_OFFSET),
            ("LOG_HEADER_PREV_ID_OFFSET", LOG_HEADER_PREV_ID_OFFSET),
            ("LOG_HEADER_PREV_END_OFFSET", LOG_HEADER_PREV_END_OFFSET),
            ("LOG_HEADER_PREV_LSN_OFFSET", LOG_HEADER_PREV_LSN_OFFSET),
            ("LOG_HEADER_RESERVED_OFFSET", LOG_HEADER_RESERVED_OFFSET),
            ("LOG_HEADER_CRC_OFFSET", LOG_HEADER_CRC_OFFSET),
            ("LOG_HEADER_BYTES", LOG_HEADER_BYTES),
        ] {
            let row = section
                .lines()
                .find(|l| l.contains(&format!("`{name}`")))
                .unwrap_or_else(|| panic!("docs/format.md has no row for {name}"));
            let cell: usize = row.split('|').nth(1).unwrap().trim().parse().unwrap();
            assert_eq!(cell, offset, "docs/format.md gives {name} the wrong offset");
        }
        assert!(section.contains(&format!("`LOG_FORMAT_VERSION` = {LOG_FORMAT_VERSION}")));
    }

    #[test]
    fn alignment_pads_start_the_value_run_on_a_page() {
        for end in [64u64, 500, 4000, 4064, 4090, 4096, 5000, 8191] {
            for run_at in [32u64, 59, 4096, 4100] {
                match alignment_pad(end, run_at, u64::MAX, 9) {
                    None => assert_eq!((end + run_at) % LOG_PAGE_BYTES, 0),
                    Some(pad) => {
                        let pad = pad.to_vec();
                        assert_eq!((end + pad.len() as u64 + run_at) % LOG_PAGE_BYTES, 0);
                        assert!(pad.len() >= RECORD_HEADER_BYTES);
                        assert!(pad.len() < LOG_PAGE_BYTES as usize + RECORD_HEADER_BYTES);
                        let h =
                            RecordHeader::decode(pad[..RECORD_HEADER_BYTES].try_into().unwrap())
                                .unwrap();
                        assert_eq!((h.lsn, h.count, h.synced_through), (PAD_LSN, 0, 9));
                    }
                }
            }
        }
        // A pad longer than allowed is not made.
        assert!(alignment_pad(64, 32, 100, 0).is_none());
        assert!(alignment_pad(4000, 32, 100, 0).is_some());
    }

    #[test]
    fn pad_records_end_on_a_sector_boundary() {
        for end in [64u64, 500, 511, 512, 700, 1000, 1023, 1024] {
            for seal in [false, true] {
                let Some(pad) = pad_record(end, 7, seal).map(PadRecord::to_vec) else {
                    assert!(end % LOG_SECTOR_BYTES == 0 && !seal);
                    continue;
                };
                let after = end + pad.len() as u64;
                assert_eq!(after % LOG_SECTOR_BYTES, 0, "end {end}");
                assert!(pad.len() >= RECORD_HEADER_BYTES && pad.len() < 2 * 512 + 32);
                let h =
                    RecordHeader::decode(pad[..RECORD_HEADER_BYTES].try_into().unwrap()).unwrap();
                assert_eq!((h.lsn, h.count, h.synced_through), (PAD_LSN, 0, 7));
                assert_eq!(h.payload_len as usize, pad.len() - RECORD_HEADER_BYTES);
            }
        }
    }
}
