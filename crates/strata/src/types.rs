//! The engine's shared vocabulary, on the ground floor: it imports nothing
//! of the engine but its error types, so every other module may use it
//! without closing an import cycle. LSNs, the kind of a version, the key,
//! value and batch limits and the key check, the key range an image layer
//! answers for (`Cover`), and the item a scan yields.
//!
//! Invariants: one definition of each limit, used by the API's checks and
//! by every file format alike (a key the API accepts is a key the formats
//! hold); `ValueKind`'s discriminants are its on-disk bytes.

use crate::error::InvalidInput;
use std::ops::Bound;

/// A log sequence number: the version a write batch is applied at.
pub type Lsn = u64;

/// What an entry records for its (key, lsn).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ValueKind {
    /// The key holds the value.
    Put = 1,
    /// A tombstone: the key was deleted at this LSN. Its value is empty.
    Delete = 2,
    /// The key holds a value that lies in a value file (a log kept for its
    /// large values): the entry's value is a `value::ValuePointer`, never
    /// handed to a caller as it is. Layer files only (delta format 5); a log
    /// entry of this kind is corruption.
    Pointer = 3,
}

impl ValueKind {
    /// The kind for an on-disk byte, or `None` for an unknown byte.
    pub(crate) fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::Delete),
            3 => Some(ValueKind::Pointer),
            _ => None,
        }
    }

    /// Whether the key holds a value at this version (a put, in place or
    /// in a value file), not a tombstone.
    pub(crate) fn is_value(self) -> bool {
        self != ValueKind::Delete
    }
}

/// Longest key, bytes. Keys are 1..=KEY_BYTES_MAX bytes.
pub const KEY_BYTES_MAX: usize = 4096;
/// Largest value the formats hold, bytes (`Options::value_size_bytes_max`
/// may not exceed it).
pub const VALUE_BYTES_MAX_LIMIT: usize = 64 << 20;
/// Largest serialized batch, bytes (the log record's length field is u32).
pub const BATCH_BYTES_MAX: usize = 1 << 30;

/// Checks a key against the key limits (1..=KEY_BYTES_MAX bytes).
pub(crate) fn check_key(key: &[u8]) -> std::result::Result<(), InvalidInput> {
    if key.is_empty() {
        return Err(InvalidInput::KeyEmpty { max: KEY_BYTES_MAX });
    }
    if key.len() > KEY_BYTES_MAX {
        return Err(InvalidInput::KeyTooLong {
            len: key.len(),
            max: KEY_BYTES_MAX,
        });
    }
    Ok(())
}

/// A key, its newest version's kind, and the value: what a scan yields.
pub(crate) type Item = (Vec<u8>, ValueKind, Vec<u8>);

/// The keys an image layer answers for: its partition of the key space,
/// which holds its keys and may reach past them (to the next partition, or
/// to either end of the key space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cover {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
}

impl Cover {
    /// The whole key space.
    pub(crate) fn everything() -> Cover {
        Cover {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Whether `key` is in it.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = match &self.end {
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
            Bound::Unbounded => true,
        };
        after_start && before_end
    }

    /// Whether it holds no key at all (its start is not before its end).
    pub(crate) fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
        }
    }
}
