//! `WriteBatch`: puts and deletes serialized into one buffer as they are
//! added (like Neon's SerializedValueBatch), so a write appends the batch to
//! the log with one copy and no per-entry encoding on the commit path.
//!
//! Entry encoding (the payload of a log record, see docs/format.md):
//! `kind u8 | key_len u16 | value_len u32 | crc u32 | key | value`,
//! little-endian; the crc32c covers the entry's first 7 bytes, key and value,
//! so one value read back from a log is checked without its whole record.
//! A put whose value is a whole number of pages (`OUT_OF_LINE_UNIT`, log
//! format 4) has its kind's `ENTRY_OUT_OF_LINE` bit set and its value out
//! of line: the record's out-of-line values follow its last entry, back to
//! back in entry order (the *value run*, `WriteBatch::values`), so a writer
//! that starts the run on a page boundary starts every such value on one,
//! and a read of a 4 KiB value is one 4 KiB page, not two.
//! Invariants: `count` is the number of encoded entries; `values` holds
//! exactly the out-of-line values of `data`'s entries, in order; the first
//! limit an entry breaks is kept in `invalid` and reported by `Db::write`,
//! which then writes nothing. Decoding checks every length against the
//! payload, and that the value run fills the payload's end exactly.

use crate::codec::{put_u16, put_u32, u16_at, u32_at, write_u32_at};
use crate::error::InvalidInput;
use crate::types::{check_key, ValueKind, BATCH_BYTES_MAX, KEY_BYTES_MAX};

/// Bytes of an entry's header: kind, key length, value length, crc32c.
pub(crate) const ENTRY_HEADER_BYTES: usize = ENTRY_CRC_OFFSET + 4;
const ENTRY_KIND_OFFSET: usize = 0;
const ENTRY_KEY_LEN_OFFSET: usize = ENTRY_KIND_OFFSET + 1;
const ENTRY_VALUE_LEN_OFFSET: usize = ENTRY_KEY_LEN_OFFSET + 2;
/// Offset of an entry's crc32c, which covers the entry's bytes before it and
/// its key and value, so a value read back from a log is checked alone.
pub(crate) const ENTRY_CRC_OFFSET: usize = ENTRY_VALUE_LEN_OFFSET + 4;
const _: () = assert!(ENTRY_CRC_OFFSET == 1 + 2 + 4);

/// The bit of an entry's kind byte that says its value is out of line, in
/// its record's value run (log format 4; only on a put).
pub(crate) const ENTRY_OUT_OF_LINE: u8 = 0x80;

/// A put's value is laid out of line when its length is a nonzero multiple
/// of this: the device's page, so that values of the run after a
/// page-aligned start are page-aligned too (a value of another length would
/// shift every one after it).
pub(crate) const OUT_OF_LINE_UNIT: usize = 4096;

/// Whether a put's value of `len` bytes goes out of line (format 4).
#[inline]
pub(crate) fn is_out_of_line_len(len: usize) -> bool {
    len != 0 && len.is_multiple_of(OUT_OF_LINE_UNIT)
}

/// An atomic group of puts and deletes. Within a batch the last write of a
/// key wins.
#[derive(Clone, Default)]
pub struct WriteBatch {
    /// The entries, each with its value unless that is out of line.
    pub(crate) data: Vec<u8>,
    /// The value run: the out-of-line values of `data`'s entries, in order.
    /// The record's payload is `data` then `values`.
    pub(crate) values: Vec<u8>,
    /// The crc32c of `values` (0 for none), kept as they are added: the
    /// record's crc is made from it without another pass over them.
    pub(crate) values_crc: u32,
    pub(crate) count: u32,
    /// Largest value length added, for the `value_size_bytes_max` check at write.
    pub(crate) value_len_max: usize,
    /// The first limit an added entry broke; empty while the batch is valid.
    pub(crate) invalid: Option<InvalidInput>,
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("entries", &self.count)
            .field("bytes", &self.size_bytes())
            .finish()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `bytes` of serialized entries.
    pub fn with_capacity(bytes: usize) -> Self {
        WriteBatch {
            data: Vec::with_capacity(bytes),
            ..Self::default()
        }
    }

    /// Adds a put of `value` under `key`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.add(ValueKind::Put, key.as_ref(), value.as_ref());
    }

    /// Adds a delete (a tombstone) of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.add(ValueKind::Delete, key.as_ref(), &[]);
    }

    fn add(&mut self, kind: ValueKind, key: &[u8], value: &[u8]) {
        if self.invalid.is_some() {
            return;
        }
        if let Err(invalid) = check_key(key) {
            self.invalid = Some(invalid);
            return;
        }
        let Ok(value_len) = u32::try_from(value.len()) else {
            self.invalid = Some(InvalidInput::ValueTooLarge {
                len: value.len(),
                max: u32::MAX as usize,
            });
            return;
        };
        let new_len = self.size_bytes() + ENTRY_HEADER_BYTES + key.len() + value.len();
        if new_len > BATCH_BYTES_MAX || self.count == u32::MAX {
            self.invalid = Some(InvalidInput::BatchTooLarge {
                len: new_len,
                max: BATCH_BYTES_MAX,
            });
            return;
        }
        let out_of_line = kind == ValueKind::Put && is_out_of_line_len(value.len());
        let start = self.data.len();
        let inline = if out_of_line { 0 } else { value.len() };
        self.data.reserve(ENTRY_HEADER_BYTES + key.len() + inline);
        self.data.push(if out_of_line {
            kind as u8 | ENTRY_OUT_OF_LINE
        } else {
            kind as u8
        });
        put_u16(&mut self.data, key.len() as u16); // check_key: <= KEY_BYTES_MAX
        put_u32(&mut self.data, value_len);
        put_u32(&mut self.data, 0); // the crc, once the bytes it covers are laid out
        self.data.extend_from_slice(key);
        // One crc32c pass over the entry's bytes as laid out: its head, then
        // key and value in one run (three calls, one each for head, key and
        // value, measured 7 % of a 100-byte put). An out-of-line value's
        // own crc serves both its entry's and the value run's (combined:
        // no second pass over a value of MiBs).
        let crc = if out_of_line {
            let value_crc = crate::crc::crc32c(value);
            let len = value.len() as u64;
            self.values.extend_from_slice(value);
            self.values_crc = crate::crc::crc32c_combine(self.values_crc, value_crc, len);
            let head = entry_crc_laid_out(&self.data[start..]);
            crate::crc::crc32c_combine(head, value_crc, len)
        } else {
            self.data.extend_from_slice(value);
            entry_crc_laid_out(&self.data[start..])
        };
        let entry = &mut self.data[start..];
        write_u32_at(entry, ENTRY_CRC_OFFSET, crc);
        self.count += 1;
        self.value_len_max = self.value_len_max.max(value.len());
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the batch has no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Serialized size, bytes.
    pub fn size_bytes(&self) -> usize {
        self.data.len() + self.values.len()
    }

    /// The record payload the batch is: its entries, then its value run.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn payload(&self) -> Vec<u8> {
        [&self.data[..], &self.values[..]].concat()
    }

    /// Empties the batch, keeping its allocation.
    pub fn clear(&mut self) {
        self.data.clear();
        self.values.clear();
        self.values_crc = 0;
        self.count = 0;
        self.value_len_max = 0;
        self.invalid = None;
    }
}

/// One decoded entry: kind, key, and the value's position in the payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryRef<'a> {
    pub kind: ValueKind,
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// Offset of the value within the payload.
    pub value_offset: usize,
    /// Whether the value is out of line (in the record's value run).
    pub out_of_line: bool,
    /// The entry's stored crc32c (checked only where the decode says so).
    pub crc: u32,
}

/// An entry's header, decoded.
struct EntryHeader {
    kind: u8,
    key_len: usize,
    value_len: usize,
    crc: u32,
}

impl EntryHeader {
    /// The entry header in `bytes`, or `None` if they are too short for one.
    #[inline]
    fn decode(bytes: &[u8]) -> Option<Self> {
        let header: &[u8; ENTRY_HEADER_BYTES] = bytes.get(..ENTRY_HEADER_BYTES)?.try_into().ok()?;
        // Fields at constant offsets of a fixed-size header: every read
        // fits, and the checks fold away.
        let fields = EntryHeader {
            kind: header[ENTRY_KIND_OFFSET],
            key_len: usize::from(u16_at(header, ENTRY_KEY_LEN_OFFSET)?),
            value_len: u32_at(header, ENTRY_VALUE_LEN_OFFSET)? as usize,
            crc: u32_at(header, ENTRY_CRC_OFFSET)?,
        };
        Some(fields)
    }
}

/// The crc32c of an entry: its bytes before the crc field, then key and
/// value (the definition, which tests hold [`entry_crc_laid_out`] to).
#[cfg(test)]
fn entry_crc(head: &[u8], key: &[u8], value: &[u8]) -> u32 {
    debug_assert_eq!(head.len(), ENTRY_CRC_OFFSET);
    let crc = crate::crc::crc32c(head);
    crate::crc::crc32c_append(crate::crc::crc32c_append(crc, key), value)
}

/// The crc32c of an entry laid out whole (`entry` = its header, key and
/// value): the same as [`entry_crc`] of its parts.
#[inline]
fn entry_crc_laid_out(entry: &[u8]) -> u32 {
    let crc = crate::crc::crc32c_append(0, &entry[..ENTRY_CRC_OFFSET]);
    crate::crc::crc32c_append(crc, &entry[ENTRY_HEADER_BYTES..])
}

/// Why an entry read back alone failed its check: the offset within its
/// bytes, what failed, and for a checksum the expected and found crc32c.
pub(crate) type EntryError = (usize, &'static str, Option<(u32, u32)>);

/// Checks one entry read back alone (`bytes` = its header, key and value)
/// against what the index says it is; returns the value.
pub(crate) fn check_entry<'a>(
    bytes: &'a [u8],
    kind: ValueKind,
    key: &[u8],
) -> Result<&'a [u8], EntryError> {
    check_entry_with(bytes, kind, key, true)
}

/// [`check_entry`], with the entry's crc32c computed only when `crc`: a
/// caller that hands on bytes whose record's crc32c it checked in the same
/// reading (the flush) leaves it out; the header and the key are checked
/// against the index either way.
pub(crate) fn check_entry_with<'a>(
    bytes: &'a [u8],
    kind: ValueKind,
    key: &[u8],
    crc: bool,
) -> Result<&'a [u8], EntryError> {
    let fields = EntryHeader::decode(bytes).ok_or((0, "entry shorter than its header", None))?;
    let key_len = fields.key_len;
    if fields.kind != kind as u8
        || key_len != key.len()
        || ENTRY_HEADER_BYTES + key_len + fields.value_len != bytes.len()
    {
        return Err((0, "entry header does not match the index", None));
    }
    let (entry_key, value) = bytes[ENTRY_HEADER_BYTES..].split_at(key_len);
    if crc {
        let stored = fields.crc;
        let actual = entry_crc_laid_out(bytes);
        if stored != actual {
            return Err((ENTRY_CRC_OFFSET, "entry checksum", Some((stored, actual))));
        }
    }
    if entry_key != key {
        return Err((
            ENTRY_HEADER_BYTES,
            "entry key does not match the index",
            None,
        ));
    }
    Ok(value)
}

/// Checks an out-of-line value read back alone (`value`: the bytes at its
/// place in a value run) against the entry the index (or a pointer) says
/// it belongs to: a put of `key` whose entry crc32c is `crc`. The entry's
/// header is rebuilt from what the caller knows (kind, lengths), so the
/// crc32c binds the bytes to the key and the entry, not only to
/// themselves.
pub(crate) fn check_out_of_line(value: &[u8], key: &[u8], crc: u32) -> Result<(), EntryError> {
    let mut head = [0u8; ENTRY_HEADER_BYTES];
    head[ENTRY_KIND_OFFSET] = ValueKind::Put as u8 | ENTRY_OUT_OF_LINE;
    head[ENTRY_KEY_LEN_OFFSET..ENTRY_VALUE_LEN_OFFSET]
        .copy_from_slice(&(key.len() as u16).to_le_bytes());
    head[ENTRY_VALUE_LEN_OFFSET..ENTRY_CRC_OFFSET]
        .copy_from_slice(&(value.len() as u32).to_le_bytes());
    let actual = crate::crc::crc32c_append(
        crate::crc::crc32c_append(crate::crc::crc32c_append(0, &head[..ENTRY_CRC_OFFSET]), key),
        value,
    );
    if actual != crc {
        return Err((0, "out-of-line value checksum", Some((crc, actual))));
    }
    Ok(())
}

/// The entries of a record's payload of `count` entries, every entry's
/// structure and crc32c checked; `Err(offset, what)` names the first
/// malformed entry's offset within the payload.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn decode_entries(
    payload: &[u8],
    count: u32,
) -> Result<Vec<EntryRef<'_>>, (usize, &'static str)> {
    // Every entry takes at least its header and a one-byte key: a count the
    // payload cannot hold must not size the allocation (the count is read
    // from disk).
    let entries_max = payload.len() / (ENTRY_HEADER_BYTES + 1);
    let mut out = Vec::with_capacity((count as usize).min(entries_max));
    for entry in Entries::new(payload, count, true) {
        out.push(entry?);
    }
    Ok(out)
}

/// The entries of a record's payload of `count` entries, decoded one at a
/// time without an allocation (the write path indexes a batch this way),
/// with the checks of [`decode_entries`] (with `check_crcs`), or, for a
/// payload whose bytes are already known to be as written (a batch that
/// never left memory, or a record whose crc32c passed, each of whose
/// entries is checked again where it is used), its structure only: the
/// entries' crc32c are not computed again. After the `count`th entry it checks that no
/// bytes follow. It yields nothing after the first error.
pub(crate) struct Entries<'a> {
    payload: &'a [u8],
    /// Entries not yet decoded.
    remaining: u32,
    /// Offset of the next entry within the payload.
    at: usize,
    /// Where the entries end: the payload's end, or, once the value run is
    /// known, its start.
    limit: usize,
    /// The value run, once known: given with the entries, or found in the
    /// payload at its first out-of-line entry.
    run: Option<&'a [u8]>,
    /// Offset of the next out-of-line value within `run`.
    values_at: usize,
    check_crcs: bool,
    /// Set once the decoder has yielded an error or checked the payload's end.
    done: bool,
}

impl<'a> Entries<'a> {
    pub(crate) fn new(payload: &'a [u8], count: u32, check_crcs: bool) -> Self {
        Entries {
            payload,
            remaining: count,
            at: 0,
            limit: payload.len(),
            run: None,
            values_at: 0,
            check_crcs,
            done: false,
        }
    }

    /// The entries of a payload held in two parts, `entries` then `run`
    /// (a batch's `data` and `values`); offsets are the payload's.
    pub(crate) fn with_run(entries: &'a [u8], run: &'a [u8], count: u32, check_crcs: bool) -> Self {
        Entries {
            run: Some(run),
            ..Entries::new(entries, count, check_crcs)
        }
    }

    #[inline(always)]
    fn decode_next(&mut self) -> Result<EntryRef<'a>, (usize, &'static str)> {
        let (payload, at) = (self.payload, self.at);
        let fields = payload
            .get(at..)
            .and_then(EntryHeader::decode)
            .ok_or((at, "entry header past the record"))?;
        let (kind, out_of_line) = entry_kind(fields.kind, fields.value_len).map_err(|e| (at, e))?;
        let (key_len, value_len) = (fields.key_len, fields.value_len);
        if key_len == 0 || key_len > KEY_BYTES_MAX {
            return Err((at, "key length out of range"));
        }
        if kind == ValueKind::Delete && value_len != 0 {
            return Err((at, "tombstone with a value"));
        }
        let key_at = at + ENTRY_HEADER_BYTES;
        let value_at = key_at + key_len;
        if out_of_line {
            return self.decode_out_of_line(at, kind, fields.crc, value_at, value_len);
        }
        let end = value_at
            .checked_add(value_len)
            .ok_or((at, "value length overflows"))?;
        if end > self.limit {
            return Err((at, "entry past the record"));
        }
        if self.check_crcs && fields.crc != entry_crc_laid_out(&payload[at..end]) {
            return Err((at, "entry checksum"));
        }
        self.at = end;
        Ok(EntryRef {
            kind,
            key: &payload[key_at..value_at],
            value: &payload[value_at..end],
            value_offset: value_at,
            out_of_line,
            crc: fields.crc,
        })
    }

    /// [`Self::decode_next`] of an out-of-line entry (at `at`, its key
    /// ending at `value_at`): its value from the value run, found at the
    /// first such entry. Kept out of `decode_next`, which the write path's
    /// loop inlines (a record of small values never gets here).
    #[inline(never)]
    fn decode_out_of_line(
        &mut self,
        at: usize,
        kind: ValueKind,
        crc: u32,
        value_at: usize,
        value_len: usize,
    ) -> Result<EntryRef<'a>, (usize, &'static str)> {
        let payload = self.payload;
        let key_at = at + ENTRY_HEADER_BYTES;
        if value_at > self.limit {
            return Err((at, "entry past the record"));
        }
        let run = match self.run {
            Some(run) => run,
            None => {
                // The run starts where the entries end: found by
                // walking the headers of this entry and the ones after.
                self.limit = entries_end(payload, value_at, self.remaining)?;
                let run = &payload[self.limit..];
                self.run = Some(run);
                run
            }
        };
        let v = self.values_at;
        let end = v
            .checked_add(value_len)
            .filter(|&e| e <= run.len())
            .ok_or((at, "out-of-line value past the record"))?;
        let value = &run[v..end];
        if self.check_crcs
            && crc != crate::crc::crc32c_append(entry_crc_laid_out(&payload[at..value_at]), value)
        {
            return Err((at, "entry checksum"));
        }
        self.at = value_at;
        self.values_at = end;
        Ok(EntryRef {
            kind,
            key: &payload[key_at..value_at],
            value,
            value_offset: self.limit + v,
            out_of_line: true,
            crc,
        })
    }

    /// Whether the payload ends where the last entry left it: after the
    /// value run if there is one, else after the last entry.
    #[cold]
    fn ends_right(&self) -> Result<(), (usize, &'static str)> {
        let Some(run) = self.run else {
            return match self.at == self.payload.len() {
                true => Ok(()),
                false => Err((self.at, "bytes after the last entry")),
            };
        };
        if self.at != self.limit {
            return Err((self.at, "bytes between the last entry and the value run"));
        }
        match self.values_at == run.len() {
            true => Ok(()),
            false => Err((self.limit + self.values_at, "bytes after the value run")),
        }
    }
}

/// The kind of an entry from its kind byte, and whether its value is out of
/// line (only a put's, of a whole number of pages). A log holds puts and
/// deletes; a pointer lives in layer files only.
#[inline]
fn entry_kind(byte: u8, value_len: usize) -> Result<(ValueKind, bool), &'static str> {
    let out_of_line = byte & ENTRY_OUT_OF_LINE != 0;
    let kind = ValueKind::from_u8(byte & !ENTRY_OUT_OF_LINE)
        .filter(|k| *k != ValueKind::Pointer)
        .ok_or("unknown entry kind")?;
    if out_of_line && (kind != ValueKind::Put || !is_out_of_line_len(value_len)) {
        return Err("an out-of-line value that is not a put of whole pages");
    }
    Ok((kind, out_of_line))
}

/// Where the entries of `payload` end, walking `remaining` entry headers
/// from `from` (each entry's header, key and, unless out of line, value).
fn entries_end(
    payload: &[u8],
    mut from: usize,
    remaining: u32,
) -> Result<usize, (usize, &'static str)> {
    for _ in 0..remaining {
        let fields = payload
            .get(from..)
            .and_then(EntryHeader::decode)
            .ok_or((from, "entry header past the record"))?;
        let inline = if fields.kind & ENTRY_OUT_OF_LINE != 0 {
            0
        } else {
            fields.value_len
        };
        from = (from + ENTRY_HEADER_BYTES + fields.key_len)
            .checked_add(inline)
            .filter(|&e| e <= payload.len())
            .ok_or((from, "entry past the record"))?;
    }
    Ok(from)
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<EntryRef<'a>, (usize, &'static str)>;

    // Inlined into the write path's loop: returned through memory, the
    // entry's fields were stored in parts and loaded whole (a stall).
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            return self.ends_right().err().map(Err);
        }
        self.remaining -= 1;
        let entry = self.decode_next();
        self.done = entry.is_err();
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A batch's bytes are what the format says (each entry's crc32c
        /// the crate's over its head, key and value, as the log always
        /// had it), and every entry's crc is checked on the way back: the
        /// decode returns what was added, and one flipped bit anywhere is
        /// refused.
        #[test]
        fn entries_carry_the_format_crc_and_any_flip_is_caught(
            entries in prop::collection::vec(
                (any::<bool>(), prop::collection::vec(any::<u8>(), 1..40), prop::collection::vec(any::<u8>(), 0..300), 0usize..4),
                1..20,
            ),
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            // Some values a whole number of pages long: out of line.
            let entries: Vec<_> = entries
                .into_iter()
                .map(|(put, key, mut value, pages)| {
                    if pages > 0 && !value.is_empty() {
                        value = value.iter().copied().cycle().take(pages * OUT_OF_LINE_UNIT).collect();
                    }
                    (put, key, value)
                })
                .collect();
            let mut b = WriteBatch::new();
            for (put, key, value) in &entries {
                if *put { b.put(key, value) } else { b.delete(key) }
            }
            let payload = b.payload();
            let decoded = decode_entries(&payload, b.count).unwrap();
            prop_assert_eq!(decoded.len(), entries.len());
            let mut at = 0;
            let mut run = b.data.len();
            for (e, (put, key, value)) in decoded.iter().zip(&entries) {
                let value: &[u8] = if *put { value } else { &[] };
                prop_assert_eq!(e.key, &key[..]);
                prop_assert_eq!(e.value, value);
                let head = &payload[at..at + ENTRY_CRC_OFFSET];
                let direct = crate::crc::crc32c_append(crate::crc::crc32c_append(crate::crc::crc32c(head), key), value);
                prop_assert_eq!(e.crc, direct);
                prop_assert_eq!(e.crc, entry_crc(head, key, value));
                prop_assert_eq!(e.out_of_line, *put && is_out_of_line_len(value.len()));
                if e.out_of_line {
                    prop_assert_eq!(head[0], ValueKind::Put as u8 | ENTRY_OUT_OF_LINE);
                    prop_assert_eq!(e.value_offset, run);
                    run += value.len();
                    prop_assert_eq!(check_out_of_line(e.value, key, e.crc), Ok(()));
                    prop_assert!(check_out_of_line(e.value, b"another key", e.crc).is_err());
                    at += ENTRY_HEADER_BYTES + key.len();
                } else {
                    let end = e.value_offset + value.len();
                    prop_assert_eq!(check_entry(&payload[at..end], e.kind, key), Ok(value));
                    at = end;
                }
            }
            prop_assert_eq!(at, b.data.len());
            prop_assert_eq!(run, payload.len());
            prop_assert_eq!(b.values_crc, crate::crc::crc32c(&b.values));
            let trusted: Vec<_> = Entries::new(&payload, b.count, false).map(|e| e.unwrap().value_offset).collect();
            prop_assert_eq!(trusted, decoded.iter().map(|e| e.value_offset).collect::<Vec<_>>());
            let mut bad = payload.clone();
            let i = flip.index(bad.len());
            bad[i] ^= 1 << bit;
            prop_assert!(decode_entries(&bad, b.count).is_err());
        }
    }

    #[test]
    fn page_sized_values_go_to_the_value_run_and_its_end_is_checked() {
        let mut b = WriteBatch::new();
        b.put(b"a", vec![1u8; 4096]);
        b.put(b"b", b"small");
        b.delete(b"c");
        b.put(b"d", vec![2u8; 8192]);
        b.put(b"e", vec![3u8; 4095]);
        assert_eq!(b.values.len(), 4096 + 8192);
        assert_eq!(b.size_bytes(), b.data.len() + b.values.len());
        // The run's crc, kept as values were added (combined, not a pass).
        assert_eq!(b.values_crc, crate::crc::crc32c(&b.values));
        let payload = b.payload();
        let e = decode_entries(&payload, b.count).unwrap();
        assert_eq!(
            e.iter().map(|e| e.out_of_line).collect::<Vec<_>>(),
            [true, false, false, true, false]
        );
        assert_eq!(e[0].value_offset, b.data.len());
        assert_eq!(e[3].value_offset, b.data.len() + 4096);
        assert_eq!(e[3].value, &[2u8; 8192][..]);
        // A payload cut short in its run, or with bytes after it.
        assert!(decode_entries(&payload[..payload.len() - 1], b.count).is_err());
        let mut longer = payload.clone();
        longer.push(0);
        assert_eq!(
            decode_entries(&longer, b.count).unwrap_err().1,
            "bytes after the value run"
        );
        // The flag on a delete, or on a value that is not whole pages.
        let mut b = WriteBatch::new();
        b.put(b"k", vec![0u8; 100]);
        let mut p = b.payload();
        p[0] |= ENTRY_OUT_OF_LINE;
        assert_eq!(
            decode_entries(&p, 1).unwrap_err().1,
            "an out-of-line value that is not a put of whole pages"
        );
        b.clear();
        assert!(b.values.is_empty() && b.data.is_empty() && b.values_crc == 0);
        b.put(b"f", vec![4u8; 4096]);
        assert_eq!(b.values_crc, crate::crc::crc32c(&[4u8; 4096]));
    }

    #[test]
    fn entries_round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.delete(b"b");
        b.put(b"c", vec![7u8; 1000]);
        let payload = b.payload();
        let entries = decode_entries(&payload, b.count).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].key, b"a");
        assert_eq!(entries[1].kind, ValueKind::Delete);
        assert_eq!(entries[2].value.len(), 1000);
        assert_eq!(&b.data[entries[2].value_offset..][..1000], &[7u8; 1000][..]);
    }

    #[test]
    fn first_bad_entry_is_kept() {
        let mut b = WriteBatch::new();
        b.put(b"", b"x");
        b.put(vec![0u8; 5000], b"x");
        assert_eq!(
            b.invalid,
            Some(InvalidInput::KeyEmpty { max: KEY_BYTES_MAX })
        );
        assert_eq!(b.len(), 0);
        let mut b = WriteBatch::new();
        b.put(vec![1u8; KEY_BYTES_MAX + 1], b"");
        assert!(matches!(b.invalid, Some(InvalidInput::KeyTooLong { .. })));
    }

    #[test]
    fn a_huge_entry_count_is_an_error_without_allocating_for_it() {
        // Found by the `batch` fuzz target: a count of 0xfff3_0001 over an
        // 8-byte payload sized a 206 GB allocation before the first entry
        // was looked at.
        // (With log format 2's 11-byte entry header, that payload is now
        // too short for even one header.)
        let payload = [0x00, 0x0d, 0x00, 0x01, 0x0d, 0x00, 0x00, 0x00];
        assert_eq!(
            decode_entries(&payload, 0xfff3_0001).unwrap_err(),
            (0, "entry header past the record")
        );
        let payload = [0x00, 0x0d, 0x00, 0x01, 0x0d, 0x00, 0x00, 0x00, 0, 0, 0, 0];
        assert_eq!(
            decode_entries(&payload, 0xfff3_0001).unwrap_err(),
            (0, "unknown entry kind")
        );
        assert_eq!(
            decode_entries(&[], u32::MAX).unwrap_err(),
            (0, "entry header past the record")
        );
    }

    #[test]
    fn truncated_payload_is_an_error_not_a_panic() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        for cut in 0..b.data.len() {
            assert!(decode_entries(&b.data[..cut], 1).is_err());
        }
    }
}
