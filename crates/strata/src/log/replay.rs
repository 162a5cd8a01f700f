//! Replay of a log file at open: every intact record, in order, up to the
//! end of the log.
//!
//! The log ends at an all-zero header, at a record that runs past the end of
//! the file, or at a record whose checksums fail, when what follows is a torn
//! tail. It is corruption, an error naming the file and offset, when a valid
//! record later in the file says the log was durable beyond the bad bytes
//! (its `synced_through`), or when a record with good checksums does not
//! decode or goes back in LSN: bytes that were once durable never silently
//! disappear.

use super::record::{
    decode_log_header, RecordHeader, LOG_HEADER_BYTES, LOG_HEADER_FILE_ID_OFFSET,
    RECORD_HEADER_BYTES,
};
use crate::batch::decode_entries;
use crate::error::{Corruption, Result};
use crate::options::BATCH_BYTES_MAX;
use std::path::Path;

/// One intact record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replayed {
    pub header: RecordHeader,
    /// Offset of the record's payload in the file.
    pub payload_offset: u64,
}

/// The records of a log and where the intact part ends.
#[derive(Debug)]
pub(crate) struct ReplayedLog {
    pub records: Vec<Replayed>,
    /// Offset just past the last intact record.
    pub end_offset: u64,
}

/// Why a record at some offset is not intact.
enum Bad {
    /// The header reads as all zeros.
    Zero,
    /// A checksum fails or the record runs past the file.
    Torn {
        what: &'static str,
        expected: Option<u32>,
        found: Option<u32>,
    },
}

/// Checks the record at `at`; `Ok(header)` when its header and payload are intact.
fn check_record(bytes: &[u8], at: usize) -> std::result::Result<RecordHeader, Bad> {
    let Some(h) = bytes.get(at..at + RECORD_HEADER_BYTES) else {
        return Err(Bad::Torn {
            what: "record header past the end of the file",
            expected: None,
            found: None,
        });
    };
    let h: &[u8; RECORD_HEADER_BYTES] = h.try_into().expect("slice of header length");
    if h.iter().all(|&b| b == 0) {
        return Err(Bad::Zero);
    }
    let header = RecordHeader::decode(h).map_err(|(e, f)| Bad::Torn {
        what: "record header checksum",
        expected: Some(e),
        found: Some(f),
    })?;
    let start = at + RECORD_HEADER_BYTES;
    let len = header.payload_len as usize;
    if len > BATCH_BYTES_MAX || start + len > bytes.len() {
        return Err(Bad::Torn {
            what: "record past the end of the file",
            expected: None,
            found: None,
        });
    }
    let actual = crc32c::crc32c(&bytes[start..start + len]);
    if actual != header.payload_crc {
        return Err(Bad::Torn {
            what: "record payload checksum",
            expected: Some(header.payload_crc),
            found: Some(actual),
        });
    }
    Ok(header)
}

/// The highest `synced_through` of the intact records after `bad_at`: finds
/// the first intact record by trying every offset (headers are checksummed,
/// so a false match needs a 32-bit collision and then a payload one), then
/// follows the chain from it.
fn durable_claim_after(bytes: &[u8], bad_at: usize) -> Option<(u64, usize)> {
    let mut best: Option<(u64, usize)> = None;
    let mut at = bad_at + 1;
    while at + RECORD_HEADER_BYTES <= bytes.len() {
        // Zero regions (padding, unwritten blocks) cannot start a record.
        if bytes[at] == 0 && bytes[at..at + RECORD_HEADER_BYTES].iter().all(|&b| b == 0) {
            at += RECORD_HEADER_BYTES;
            continue;
        }
        match check_record(bytes, at) {
            Ok(h) => {
                if best.is_none_or(|(claim, _)| h.synced_through > claim) {
                    best = Some((h.synced_through, at));
                }
                at += RECORD_HEADER_BYTES + h.payload_len as usize;
            }
            Err(_) => at += 1,
        }
    }
    best
}

/// Replays the log `bytes` read from `path`, the log of file `file_id`.
pub(crate) fn replay(path: &Path, bytes: &[u8], file_id: u64) -> Result<ReplayedLog> {
    let header_id = decode_log_header(path, bytes)?;
    if header_id != file_id {
        return Err(Corruption::new(
            path,
            LOG_HEADER_FILE_ID_OFFSET as u64,
            format!("the log header names file {header_id:016x}, not {file_id:016x}"),
        )
        .into());
    }
    let mut records = Vec::new();
    let mut at = LOG_HEADER_BYTES;
    let mut last_lsn = 0u64;
    loop {
        if at == bytes.len() {
            break;
        }
        match check_record(bytes, at) {
            Ok(header) => {
                let payload_offset = at + RECORD_HEADER_BYTES;
                let payload = &bytes[payload_offset..payload_offset + header.payload_len as usize];
                if header.lsn <= last_lsn {
                    return Err(Corruption::new(
                        path,
                        at as u64,
                        format!("record LSN {} does not follow LSN {last_lsn}", header.lsn),
                    )
                    .into());
                }
                if let Err((offset, what)) = decode_entries(payload, header.count) {
                    return Err(
                        Corruption::new(path, (payload_offset + offset) as u64, what).into(),
                    );
                }
                last_lsn = header.lsn;
                records.push(Replayed {
                    header,
                    payload_offset: payload_offset as u64,
                });
                at = payload_offset + header.payload_len as usize;
            }
            Err(bad) => {
                if let Some((claim, later_at)) = durable_claim_after(bytes, at) {
                    if claim > at as u64 {
                        let what = match bad {
                            Bad::Zero => "zeroed record".to_owned(),
                            Bad::Torn { what, .. } => what.to_owned(),
                        };
                        let what = format!(
                            "{what}, before the durable end {claim} claimed by the record at {later_at}"
                        );
                        return Err(match bad {
                            Bad::Torn {
                                expected: Some(e),
                                found: Some(f),
                                ..
                            } => Corruption::checksum(path, at as u64, what, e, f),
                            _ => Corruption::new(path, at as u64, what),
                        }
                        .into());
                    }
                }
                break;
            }
        }
    }
    Ok(ReplayedLog {
        records,
        end_offset: at as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::log::record::encode_log_header;

    fn log_of(batches: &[(u64, u64)]) -> Vec<u8> {
        let mut bytes = encode_log_header(1).to_vec();
        for &(lsn, synced) in batches {
            let mut b = WriteBatch::new();
            b.put(format!("key{lsn}"), vec![lsn as u8; 50]);
            bytes.extend_from_slice(
                &RecordHeader::for_payload(&b.data, lsn, b.count, synced).encode(),
            );
            bytes.extend_from_slice(&b.data);
        }
        bytes
    }

    #[test]
    fn zero_tail_ends_the_log() {
        let mut bytes = log_of(&[(1, 0), (2, 0)]);
        let end = bytes.len();
        bytes.resize(end + 4000, 0);
        let log = replay(Path::new("l"), &bytes, 1).unwrap();
        assert_eq!(log.records.len(), 2);
        assert_eq!(log.end_offset, end as u64);
    }

    #[test]
    fn torn_tail_after_the_durable_point_ends_the_log() {
        let bytes = log_of(&[(1, 0), (2, 0), (3, 0)]);
        for cut in LOG_HEADER_BYTES..bytes.len() {
            let log = replay(Path::new("l"), &bytes[..cut], 1).unwrap();
            assert!(log.records.len() <= 3);
        }
        let mut garbled = bytes.clone();
        let n = garbled.len();
        garbled[n - 10] ^= 0xff;
        assert_eq!(
            replay(Path::new("l"), &garbled, 1).unwrap().records.len(),
            2
        );
    }

    #[test]
    fn bad_bytes_before_a_durable_claim_are_corruption() {
        let one = log_of(&[(1, 0)]).len() as u64;
        // The third record says the log was durable past the first one.
        let mut bytes = log_of(&[(1, 0), (2, one), (3, one + 200)]);
        bytes[LOG_HEADER_BYTES + RECORD_HEADER_BYTES + 5] ^= 0x01;
        let err = replay(Path::new("x.log"), &bytes, 1).unwrap_err();
        let msg = err.to_string();
        assert!(
            err.is_corruption() && msg.contains("x.log") && msg.contains("offset 64"),
            "{msg}"
        );
    }
}
