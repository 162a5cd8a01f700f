//! Replay of a log file at open and before a flush: every intact record,
//! in order, up to the end of the log, and the rule that tells a torn tail
//! (dropped) from corruption (an error naming the file and offset).
//!
//! The rule (docs/format.md, "Where a log ends"): bytes may be dropped as a
//! torn tail only after the last point the log was ever made durable. That
//! point is known exactly when something durable says so: the successor
//! log's header (`PrevLog`: the log was sealed at `end` with `last_lsn`), or
//! an intact record's `synced_through` (the last sync before it was
//! written; a pad record written at close claims everything before it). A
//! bad record before a known durable point is corruption. After the last
//! known point, a bad record is a torn tail only if the device could have
//! produced it: a power loss leaves each 512-byte sector whole (old or new),
//! and since every sync ends on a sector boundary (a pad record), each
//! sector written after it reads either as written or as zeros. So a bad
//! record is torn only if one of its sectors reads as zeros, or it runs past
//! the end of the file; a bad record whose every sector holds data is
//! corruption. Intact records must decode and go up in LSN.

use super::record::{
    decode_log_header, PrevLog, RecordHeader, LOG_HEADER_BYTES, LOG_HEADER_FILE_ID_OFFSET,
    LOG_SECTOR_BYTES, PAD_LSN, RECORD_HEADER_BYTES,
};
use crate::batch::Entries;
use crate::error::{Corruption, Result};
use crate::types::BATCH_BYTES_MAX;
use std::path::Path;

/// One intact record with entries (pad records are not listed).
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
    /// The last record's LSN (0 if none).
    pub last_lsn: u64,
}

/// Why a record at some offset is not intact, and the bytes it spans.
struct Bad {
    what: &'static str,
    checksum: Option<(u32, u32)>,
    /// End of the bytes the record claims (its header's, if the header is bad).
    extent_end: u64,
}

/// Checks the record at `at`; `Ok(header)` when its header and payload are intact.
fn check_record(bytes: &[u8], at: usize) -> std::result::Result<RecordHeader, Bad> {
    let header_end = (at + RECORD_HEADER_BYTES) as u64;
    let Some(h) = bytes.get(at..at + RECORD_HEADER_BYTES) else {
        return Err(Bad {
            what: "record header past the end of the file",
            checksum: None,
            extent_end: header_end,
        });
    };
    let h: &[u8; RECORD_HEADER_BYTES] = h.try_into().expect("slice of header length");
    if h.iter().all(|&b| b == 0) {
        return Err(Bad {
            what: "zeroed record header",
            checksum: None,
            extent_end: header_end,
        });
    }
    let header = RecordHeader::decode(h).map_err(|(e, f)| Bad {
        what: "record header checksum",
        checksum: Some((e, f)),
        extent_end: header_end,
    })?;
    let start = at + RECORD_HEADER_BYTES;
    let len = header.payload_len as usize;
    let extent_end = header_end + len as u64;
    if len > BATCH_BYTES_MAX || start + len > bytes.len() {
        return Err(Bad {
            what: "record past the end of the file",
            checksum: None,
            extent_end,
        });
    }
    let actual = crate::crc::crc32c(&bytes[start..start + len]);
    if actual != header.payload_crc {
        return Err(Bad {
            what: "record payload checksum",
            checksum: Some((header.payload_crc, actual)),
            extent_end,
        });
    }
    Ok(header)
}

/// True when a power loss could have left the record at `at` as it reads:
/// it runs past the end of the file, or one of its sectors reads as zeros
/// from the record on (a sector written after the last sync that did not
/// reach the disk).
fn torn_is_possible(bytes: &[u8], at: usize, extent_end: u64) -> bool {
    let len = bytes.len() as u64;
    if extent_end > len {
        return true;
    }
    let mut sector = at as u64 / LOG_SECTOR_BYTES * LOG_SECTOR_BYTES;
    while sector < extent_end {
        let from = sector.max(at as u64) as usize;
        let to = (sector + LOG_SECTOR_BYTES).min(len) as usize;
        if bytes[from..to].iter().all(|&b| b == 0) {
            return true;
        }
        sector += LOG_SECTOR_BYTES;
    }
    false
}

/// The highest `synced_through` of the intact records after `bad_at`, and
/// the offset of the record that claims it. The first record written after
/// a sync starts where the sync ended, on a sector boundary (log format 3:
/// `step` is a sector), so only those offsets are tried as chain starts;
/// each chain is followed to its end. Format 2 logs have no such boundary
/// and are searched at every offset (`step` 1).
fn durable_claim_after(bytes: &[u8], bad_at: usize, step: usize) -> Option<(u64, usize)> {
    let mut best: Option<(u64, usize)> = None;
    let mut at = (bad_at / step + 1) * step;
    while at + RECORD_HEADER_BYTES <= bytes.len() {
        // Zero regions (padding, unwritten blocks) cannot start a record.
        if bytes[at..at + RECORD_HEADER_BYTES].iter().all(|&b| b == 0) {
            at += step.max(RECORD_HEADER_BYTES).next_multiple_of(step);
            continue;
        }
        let mut chain = at;
        while let Ok(h) = check_record(bytes, chain) {
            if best.is_none_or(|(claim, _)| h.synced_through > claim) {
                best = Some((h.synced_through, chain));
            }
            chain += RECORD_HEADER_BYTES + h.payload_len as usize;
        }
        at = (chain / step + 1) * step;
    }
    best
}

/// The rules an intact record (`h`, at `at`, its checksums passed) must
/// also keep: a pad record (LSN 0) has no entries; any other follows
/// `last_lsn` and its `payload` decodes (with `entry_crcs`, each entry's
/// crc32c checked too). `Ok(true)` for a record with entries, `Ok(false)`
/// for a pad record.
fn check_intact(
    path: &Path,
    payload: &[u8],
    at: u64,
    h: RecordHeader,
    last_lsn: u64,
    entry_crcs: bool,
) -> Result<bool> {
    if h.lsn == PAD_LSN {
        if h.count != 0 {
            return Err(Corruption::new(path, at, "pad record (LSN 0) with entries").into());
        }
        return Ok(false);
    }
    if h.lsn <= last_lsn {
        return Err(Corruption::new(
            path,
            at,
            format!("record LSN {} does not follow LSN {last_lsn}", h.lsn),
        )
        .into());
    }
    // Walked without collecting the entries: the replay keeps none.
    let decoded = Entries::new(payload, h.count, entry_crcs).try_for_each(|e| e.map(drop));
    if let Err((offset, what)) = decoded {
        let payload_offset = at + RECORD_HEADER_BYTES as u64;
        return Err(Corruption::new(path, payload_offset + offset as u64, what).into());
    }
    Ok(true)
}

/// The check of [`replay`] with a sealed claim, made as the log's bytes
/// stream past in order (the flush reads a frozen log in windows, never
/// whole: see `InMemoryLayer::for_each_value`). Every record must be
/// intact, in LSN order, and the records must end exactly at the claimed
/// end with the claimed last LSN; bytes past the end are not looked at.
/// Memory: the part of one record (or of the log header) that a piece of
/// bytes left unfinished.
#[derive(Clone)]
pub(crate) struct SealedCheck<'a> {
    path: &'a Path,
    file_id: u64,
    sealed: PrevLog,
    /// Offset of the first byte of `carry` (of the next record to check).
    at: u64,
    /// Bytes from `at` on, received but not yet a whole record.
    carry: Vec<u8>,
    last_lsn: u64,
    /// False: checks nothing (see [`Self::none`]).
    on: bool,
}

impl<'a> SealedCheck<'a> {
    pub(crate) fn new(path: &'a Path, file_id: u64, sealed: PrevLog) -> Self {
        SealedCheck {
            path,
            file_id,
            sealed,
            at: 0,
            carry: Vec::new(),
            last_lsn: 0,
            on: true,
        }
    }

    /// A check that wants no bytes and checks nothing: for a flush that
    /// keeps its log as a value file, which is never replayed again (the
    /// entries it copies are each checked by their own crc32c, the values
    /// it leaves by theirs when they are read).
    pub(crate) fn none(path: &'a Path, file_id: u64) -> Self {
        SealedCheck {
            on: false,
            ..SealedCheck::new(
                path,
                file_id,
                PrevLog {
                    file_id: 0,
                    end: 0,
                    last_lsn: 0,
                },
            )
        }
    }

    /// The offset of the next byte [`Self::feed`] takes.
    pub(crate) fn wanted(&self) -> u64 {
        if !self.on {
            return u64::MAX;
        }
        self.at + self.carry.len() as u64
    }

    /// The offset up to which every record is checked whole.
    pub(crate) fn checked_end(&self) -> u64 {
        self.at
    }

    /// True when every byte up to the claimed end has been checked.
    pub(crate) fn is_done(&self) -> bool {
        !self.on || self.at >= self.sealed.end
    }

    /// Bytes held for an unfinished record.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.carry.capacity()
    }

    /// Checks `bytes`, the log's bytes from [`Self::wanted`] on; what ends
    /// in the middle of a record is kept for the next call.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        let room = self.sealed.end.saturating_sub(self.wanted());
        let mut bytes = &bytes[..bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
        while !bytes.is_empty() {
            if self.carry.is_empty() {
                let used = self.check_whole(bytes)?;
                self.at += used as u64;
                // Less than one item is left: kept until the rest comes.
                self.carry.extend_from_slice(&bytes[used..]);
                return Ok(());
            }
            // An unfinished item: add what it needs, no more, and look again.
            let need = Self::needed(self.at, &self.carry);
            let take = need.saturating_sub(self.carry.len()).clamp(1, bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            let carry = std::mem::take(&mut self.carry);
            let used = self.check_whole(&carry)?;
            self.at += used as u64;
            self.carry = carry;
            self.carry.drain(..used);
        }
        Ok(())
    }

    /// How many bytes the item at `at` (the log header, or a record) spans,
    /// from its first bytes `head`: a record's header until it is there (or
    /// when it does not decode: the check says why).
    fn needed(at: u64, head: &[u8]) -> usize {
        if at == 0 {
            return LOG_HEADER_BYTES;
        }
        match head.get(..RECORD_HEADER_BYTES) {
            Some(h) => match RecordHeader::decode(h.try_into().expect("header length")) {
                Ok(h) if h.payload_len as usize <= BATCH_BYTES_MAX => {
                    RECORD_HEADER_BYTES + h.payload_len as usize
                }
                // Bad already: the whole check says why.
                _ => RECORD_HEADER_BYTES,
            },
            None => RECORD_HEADER_BYTES,
        }
    }

    /// Checks the whole items (the log header, records) at the start of
    /// `bytes` (the log's bytes from `at`); returns how many bytes they take.
    /// An item `bytes` holds only part of is left, unless its bytes already
    /// show it bad (its header, or an extent past the claimed end).
    fn check_whole(&mut self, bytes: &[u8]) -> Result<usize> {
        let mut used = 0usize;
        let end = self.sealed.end;
        loop {
            let at = self.at + used as u64;
            if at >= end {
                return Ok(used);
            }
            let left = end - at;
            let rest = &bytes[used..];
            let view = &rest[..rest.len().min(usize::try_from(left).unwrap_or(usize::MAX))];
            if at == 0 {
                if left < LOG_HEADER_BYTES as u64 {
                    return Err(Corruption::new(
                        self.path,
                        0,
                        format!("the next log says this one ends at {end}, inside its header"),
                    )
                    .into());
                }
                if view.len() < LOG_HEADER_BYTES {
                    return Ok(used);
                }
                let header = decode_log_header(self.path, &view[..LOG_HEADER_BYTES])?;
                if header.file_id != self.file_id {
                    return Err(Corruption::new(
                        self.path,
                        LOG_HEADER_FILE_ID_OFFSET as u64,
                        format!(
                            "the log header names file {:016x}, not {:016x}",
                            header.file_id, self.file_id
                        ),
                    )
                    .into());
                }
                used += LOG_HEADER_BYTES;
                continue;
            }
            // Wait for more when the item fits before the end and is not
            // all here yet; otherwise the whole check says what it is.
            let need = Self::needed(at, view) as u64;
            if (view.len() as u64) < need.min(left) {
                return Ok(used);
            }
            let h = check_record(view, 0).map_err(|bad| {
                let what = format!("{}, before the end {end} the next log claims", bad.what);
                match bad.checksum {
                    Some((expected, found)) => {
                        Corruption::checksum(self.path, at, what, expected, found)
                    }
                    None => Corruption::new(self.path, at, what),
                }
            })?;
            let next = RECORD_HEADER_BYTES + h.payload_len as usize;
            // Entries' crc32c are not computed here: the record's passed,
            // and the flush checks each entry it copies against the index.
            let payload = &view[RECORD_HEADER_BYTES..next];
            if check_intact(self.path, payload, at, h, self.last_lsn, false)? {
                self.last_lsn = h.lsn;
            }
            used += next;
        }
    }

    /// Ends the check: the records reached the claimed end exactly, with
    /// the claimed last LSN.
    pub(crate) fn finish(self) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        if self.at != self.sealed.end || !self.carry.is_empty() {
            return Err(Corruption::new(
                self.path,
                self.wanted(),
                format!(
                    "the log's records end at {}, the next log says it was sealed at {}",
                    self.at, self.sealed.end
                ),
            )
            .into());
        }
        if self.last_lsn != self.sealed.last_lsn {
            return Err(Corruption::new(
                self.path,
                self.at,
                format!(
                    "the log's last LSN is {}, the next log says it was {}",
                    self.last_lsn, self.sealed.last_lsn
                ),
            )
            .into());
        }
        Ok(())
    }
}

/// Replays the log `bytes` read from `path`, the log of file `file_id`.
/// `sealed`: what the successor log's header claims of this one (it ends at
/// `end`, its last LSN is `last_lsn`); then the records must reach exactly
/// there, and the bytes after it are not read.
pub(crate) fn replay(
    path: &Path,
    bytes: &[u8],
    file_id: u64,
    sealed: Option<PrevLog>,
) -> Result<ReplayedLog> {
    let header = decode_log_header(path, bytes)?;
    if header.file_id != file_id {
        return Err(Corruption::new(
            path,
            LOG_HEADER_FILE_ID_OFFSET as u64,
            format!(
                "the log header names file {:016x}, not {file_id:016x}",
                header.file_id
            ),
        )
        .into());
    }
    let step = if header.version >= 3 {
        LOG_SECTOR_BYTES as usize
    } else {
        1
    };
    let bytes = match sealed {
        Some(s) => {
            let end = usize::try_from(s.end)
                .ok()
                .filter(|&e| e >= LOG_HEADER_BYTES && e <= bytes.len());
            let Some(end) = end else {
                return Err(Corruption::new(
                    path,
                    bytes.len() as u64,
                    format!(
                        "the log ends here, but the next log says it was sealed at {}",
                        s.end
                    ),
                )
                .into());
            };
            &bytes[..end]
        }
        None => bytes,
    };
    let mut records = Vec::new();
    let mut at = LOG_HEADER_BYTES;
    let mut last_lsn = 0u64;
    while at < bytes.len() {
        let bad = match check_record(bytes, at) {
            Ok(h) => {
                let payload_offset = at + RECORD_HEADER_BYTES;
                let next = payload_offset + h.payload_len as usize;
                let payload = &bytes[payload_offset..next];
                if check_intact(path, payload, at as u64, h, last_lsn, true)? {
                    last_lsn = h.lsn;
                    records.push(Replayed {
                        header: h,
                        payload_offset: payload_offset as u64,
                    });
                }
                at = next;
                continue;
            }
            Err(bad) => bad,
        };
        let why = if let Some(s) = sealed {
            Some(format!("before the end {} the next log claims", s.end))
        } else if let Some((claim, later_at)) =
            durable_claim_after(bytes, at, step).filter(|&(claim, _)| claim > at as u64)
        {
            Some(format!(
                "before the durable end {claim} claimed by the record at {later_at}"
            ))
        } else if step > 1 && !torn_is_possible(bytes, at, bad.extent_end) {
            Some(
                "after the last sync, but not torn: every sector of the record holds data"
                    .to_owned(),
            )
        } else {
            None
        };
        if let Some(why) = why {
            let what = format!("{}, {why}", bad.what);
            return Err(match bad.checksum {
                Some((expected, found)) => {
                    Corruption::checksum(path, at as u64, what, expected, found)
                }
                None => Corruption::new(path, at as u64, what),
            }
            .into());
        }
        break;
    }
    if let Some(s) = sealed {
        if last_lsn != s.last_lsn {
            return Err(Corruption::new(
                path,
                at as u64,
                format!(
                    "the log's last LSN is {last_lsn}, the next log says it was {}",
                    s.last_lsn
                ),
            )
            .into());
        }
    }
    Ok(ReplayedLog {
        records,
        end_offset: at as u64,
        last_lsn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::log::record::{encode_log_header, pad_record};

    fn record(lsn: u64, synced: u64, value_len: usize) -> Vec<u8> {
        let mut b = WriteBatch::new();
        b.put(format!("key{lsn}"), vec![lsn as u8 | 1; value_len]);
        let mut r = RecordHeader::for_payload(&b.payload(), lsn, b.count, synced)
            .encode()
            .to_vec();
        r.extend_from_slice(&b.payload());
        r
    }

    fn log_of(batches: &[(u64, u64)]) -> Vec<u8> {
        let mut bytes = encode_log_header(1, None).to_vec();
        for &(lsn, synced) in batches {
            bytes.extend_from_slice(&record(lsn, synced, 50));
        }
        bytes
    }

    /// A log as the engine writes it: records, then at each sync a pad
    /// record to the next sector; the records after a sync claim it.
    fn synced_log(syncs: &[&[u64]]) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = encode_log_header(1, None).to_vec();
        let mut durable = 0;
        let mut sync_points = Vec::new();
        for lsns in syncs {
            for &lsn in *lsns {
                bytes.extend_from_slice(&record(lsn, durable, 300));
            }
            if let Some(pad) = pad_record(bytes.len() as u64, durable, false).map(|p| p.to_vec()) {
                bytes.extend_from_slice(&pad);
            }
            durable = bytes.len() as u64;
            sync_points.push(durable);
        }
        (bytes, sync_points)
    }

    fn path() -> &'static Path {
        Path::new("x.log")
    }

    #[test]
    fn zero_tail_ends_the_log() {
        let mut bytes = log_of(&[(1, 0), (2, 0)]);
        let end = bytes.len();
        bytes.resize(end + 4000, 0);
        let log = replay(path(), &bytes, 1, None).unwrap();
        assert_eq!(log.records.len(), 2);
        assert_eq!(log.end_offset, end as u64);
        assert_eq!(log.last_lsn, 2);
    }

    #[test]
    fn a_log_cut_anywhere_after_the_last_sync_is_a_torn_tail() {
        let bytes = log_of(&[(1, 0), (2, 0), (3, 0)]);
        for cut in LOG_HEADER_BYTES..bytes.len() {
            let log = replay(path(), &bytes[..cut], 1, None).unwrap();
            assert!(log.records.len() <= 3);
        }
    }

    #[test]
    fn pad_records_are_skipped_and_their_claims_count() {
        let (bytes, points) = synced_log(&[&[1, 2], &[3], &[4, 5]]);
        let log = replay(path(), &bytes, 1, None).unwrap();
        let lsns: Vec<u64> = log.records.iter().map(|r| r.header.lsn).collect();
        assert_eq!(lsns, [1, 2, 3, 4, 5]);
        assert_eq!(log.end_offset, *points.last().unwrap());
        // A sealed log: a pad record that claims everything before it.
        let mut sealed = bytes.clone();
        sealed.extend_from_slice(
            &pad_record(bytes.len() as u64, bytes.len() as u64, true)
                .unwrap()
                .to_vec(),
        );
        // Now a flipped byte in the last records is before a durable claim.
        sealed[points[1] as usize + 40] ^= 4;
        let err = replay(path(), &sealed, 1, None).unwrap_err();
        assert!(err.to_string().contains("durable end"), "{err}");
    }

    #[test]
    fn after_the_last_sync_only_a_zeroed_sector_is_a_tear() {
        let (bytes, points) = synced_log(&[&[1, 2], &[3, 4]]);
        let last_sync = points[0] as usize;
        // A flipped bit in the unclaimed records: every sector holds data,
        // so no power loss made it: corruption.
        for at in [last_sync + 3, last_sync + 200, bytes.len() - 300] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x20;
            let err = replay(path(), &flipped, 1, None).unwrap_err();
            assert!(
                err.is_corruption() && err.to_string().contains("not torn"),
                "{err}"
            );
        }
        // A sector after the last sync that never reached the disk: torn.
        let mut torn = bytes.clone();
        torn[last_sync + 512..last_sync + 1024].fill(0);
        let log = replay(path(), &torn, 1, None).unwrap();
        let lsns: Vec<u64> = log.records.iter().map(|r| r.header.lsn).collect();
        assert_eq!(lsns, [1, 2, 3]);
        // Before the last claimed sync, even a zeroed sector is corruption.
        let (bytes, points) = synced_log(&[&[1, 2], &[3, 4], &[5]]);
        let mut zeroed = bytes.clone();
        zeroed[points[0] as usize..points[0] as usize + 512].fill(0);
        assert!(replay(path(), &zeroed, 1, None)
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn a_sealed_log_must_reach_its_claimed_end_and_lsn() {
        let (bytes, points) = synced_log(&[&[1, 2], &[3, 4]]);
        let end = *points.last().unwrap();
        let sealed = |end, last_lsn| {
            Some(PrevLog {
                file_id: 1,
                end,
                last_lsn,
            })
        };
        // Bytes after the claimed end are never read.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0xab; 700]);
        let log = replay(path(), &longer, 1, sealed(end, 4)).unwrap();
        assert_eq!((log.end_offset, log.last_lsn), (end, 4));
        // A sealed log whose last sector is gone, or whose LSN disagrees.
        let mut zeroed = bytes.clone();
        zeroed[end as usize - 512..].fill(0);
        for (bytes, claim) in [
            (&zeroed, sealed(end, 4)),
            (&bytes, sealed(end, 5)),
            (&bytes, sealed(end + 512, 4)),
            (&bytes, sealed(points[0] + 7, 2)),
        ] {
            let err = replay(path(), bytes, 1, claim).unwrap_err();
            assert!(err.is_corruption(), "{claim:?}: {err}");
        }
    }

    /// The streaming check's answer for `bytes` fed in pieces of the sizes
    /// `cuts` gives in turn.
    fn sealed_check(bytes: &[u8], claim: PrevLog, cuts: &[usize]) -> Result<()> {
        let mut check = SealedCheck::new(path(), 1, claim);
        let mut cuts = cuts.iter().cycle();
        while !check.is_done() && (check.wanted() as usize) < bytes.len() {
            let at = check.wanted() as usize;
            let n = *cuts.next().expect("cycle");
            check.feed(&bytes[at..(at + n).min(bytes.len())])?;
            assert!(
                check.wanted() as usize > at || check.is_done(),
                "no progress at {at}"
            );
        }
        check.finish()
    }

    proptest::proptest! {
        /// Fed in any pieces, the streaming check answers as the replay
        /// of the whole log does, on a whole log and on one with a byte
        /// changed anywhere or a claim that disagrees.
        #[test]
        fn the_streaming_check_answers_as_the_replay(
            syncs in proptest::collection::vec(1usize..4, 1..5),
            cuts in proptest::collection::vec(1usize..700, 1..6),
            flip in proptest::option::of((0usize..1 << 16, 1u8..=255)),
            claim_off in proptest::prop_oneof![4 => proptest::strategy::Just(0i64), 1 => -600i64..600],
            lsn_off in proptest::prop_oneof![4 => proptest::strategy::Just(0u64), 1 => 1u64..3],
        ) {
            let mut lsn = 0;
            let lsns: Vec<Vec<u64>> = syncs.iter().map(|&n| (0..n).map(|_| { lsn += 1; lsn }).collect()).collect();
            let groups: Vec<&[u64]> = lsns.iter().map(|v| &v[..]).collect();
            let (mut bytes, points) = synced_log(&groups);
            if let Some((at, x)) = flip {
                let at = at % bytes.len();
                bytes[at] ^= x;
            }
            let end = (*points.last().unwrap() as i64 + claim_off).max(0) as u64;
            let claim = PrevLog { file_id: 1, end, last_lsn: lsn + lsn_off };
            let whole = replay(path(), &bytes, 1, Some(claim)).map(|_| ());
            let streamed = sealed_check(&bytes, claim, &cuts);
            proptest::prop_assert_eq!(whole.is_ok(), streamed.is_ok(), "{:?} / {:?}", whole, streamed);
            if let (Err(a), Err(b)) = (&whole, &streamed) {
                proptest::prop_assert!(a.is_corruption() && b.is_corruption());
            }
        }
    }

    #[test]
    fn bad_bytes_before_a_durable_claim_are_corruption() {
        let one = log_of(&[(1, 0)]).len() as u64;
        // The third record says the log was durable past the first one.
        let mut bytes = log_of(&[(1, 0), (2, one), (3, one + 200)]);
        bytes[LOG_HEADER_BYTES + RECORD_HEADER_BYTES + 5] ^= 0x01;
        let err = replay(path(), &bytes, 1, None).unwrap_err();
        let msg = err.to_string();
        assert!(
            err.is_corruption() && msg.contains("x.log") && msg.contains("offset 64"),
            "{msg}"
        );
    }
}
