//! The engine's error types.
//!
//! One enum per boundary, each converting into the umbrella [`Error`]. Every
//! corruption error names the file and the byte offset where the check failed,
//! and, for checksums, the expected and the found value. Nothing in the engine
//! panics on bad input or bad bytes on disk: it returns one of these.

use std::path::PathBuf;

/// Result with the engine's umbrella error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Bytes on disk that fail a check: a checksum, a magic number, a length that
/// points outside the file, an ordering invariant.
#[derive(Debug, thiserror::Error)]
#[error("corruption in {}: at offset {offset}: {what}{}", file.display(), checksum_suffix(*.expected, *.found))]
pub struct Corruption {
    /// The file the bad bytes are in.
    pub file: PathBuf,
    /// Byte offset in that file of the record, block or field that failed.
    pub offset: u64,
    /// What was being checked.
    pub what: String,
    /// The checksum the bytes should have had, when a checksum failed.
    pub expected: Option<u32>,
    /// The checksum the bytes have, when a checksum failed.
    pub found: Option<u32>,
}

fn checksum_suffix(expected: Option<u32>, found: Option<u32>) -> String {
    match (expected, found) {
        (Some(e), Some(f)) => format!(" (expected crc32c {e:#010x}, found {f:#010x})"),
        _ => String::new(),
    }
}

impl Corruption {
    /// A corruption that is not a checksum mismatch.
    #[cold]
    pub fn new(file: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        Corruption {
            file: file.into(),
            offset,
            what: what.into(),
            expected: None,
            found: None,
        }
    }

    /// A checksum mismatch.
    #[cold]
    pub fn checksum(
        file: impl Into<PathBuf>,
        offset: u64,
        what: impl Into<String>,
        expected: u32,
        found: u32,
    ) -> Self {
        Corruption {
            file: file.into(),
            offset,
            what: what.into(),
            expected: Some(expected),
            found: Some(found),
        }
    }

    /// A failed check of a value read back (`sums`: a checksum's expected
    /// and found crc32c, if that is what failed).
    #[cold]
    pub(crate) fn of_check(
        file: impl Into<PathBuf>,
        offset: u64,
        what: impl Into<String>,
        sums: Option<(u32, u32)>,
    ) -> Self {
        match sums {
            Some((expected, found)) => Self::checksum(file, offset, what, expected, found),
            None => Self::new(file, offset, what),
        }
    }
}

/// A caller's input that breaks a limit or a rule. Nothing was written.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidInput {
    #[error("key is empty; keys are 1..={max} bytes")]
    KeyEmpty { max: usize },
    #[error("key is {len} bytes; keys are at most {max} bytes")]
    KeyTooLong { len: usize, max: usize },
    #[error(
        "value is {len} bytes; values are at most {max} bytes (Options::value_size_bytes_max)"
    )]
    ValueTooLarge { len: usize, max: usize },
    #[error("batch is {len} bytes; a batch is at most {max} bytes")]
    BatchTooLarge { len: usize, max: usize },
    #[error("LSN {lsn} is not greater than the last LSN {last}")]
    LsnNotIncreasing { lsn: u64, last: u64 },
    #[error("the LSN space is exhausted: the last LSN is u64::MAX")]
    LsnExhausted,
    #[error("entry {entry_index}: keys must come in strictly ascending order; this key is smaller than the previous one")]
    KeyOutOfOrder { entry_index: u64 },
    #[error("unknown value {value:?} for {option}; expected one of {expected}")]
    UnknownOptionValue {
        option: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("option {option} = {value} is out of range: {why}")]
    OptionOutOfRange {
        option: &'static str,
        value: u64,
        why: &'static str,
    },
    #[error("the read queue holds {depth} gets, its depth: reap before submitting more")]
    QueueFull { depth: usize },
    #[error("{url:?} is not a remote store this build can open: {why}")]
    RemoteUrl { url: String, why: String },
    /// A directory a remote store wrote into, opened without it: files its
    /// manifest lists are only in the store.
    #[error("{} was opened with a remote store, which holds {missing} and maybe more of its files: open it with that store (Options::remote)", dir.display())]
    RemoteNeeded { dir: PathBuf, missing: String },
    /// A directory opened in a role its files are not for: a writer's
    /// directory opened as a follower, or a follower's as a writer.
    #[error("{}: {why}", dir.display())]
    RemoteRole { dir: PathBuf, why: String },
    #[error("buffer is not aligned: {what} = {value} is not a multiple of {alignment}")]
    Unaligned {
        what: &'static str,
        value: u64,
        alignment: usize,
    },
}

/// The umbrella error of the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error on a named file.
    #[error("I/O error on {}: {op}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The filesystem refuses O_DIRECT and falling back to buffered I/O was not allowed.
    #[error("{} is on a filesystem that refuses O_DIRECT ({source}); use IoMode::Buffered or allow the fallback", path.display())]
    DirectIoUnsupported {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Corruption(#[from] Corruption),
    #[error("invalid input: {0}")]
    InvalidInput(#[from] InvalidInput),
    /// The directory holds something that is not a strata database.
    #[error("{} is not a strata database: {why}", path.display())]
    NotADatabase { path: PathBuf, why: String },
    /// The database was written by a newer format version than this build reads.
    #[error("{} has format version {found}; this build reads versions up to {supported}", path.display())]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A background thread (flusher, compactor) failed earlier; the engine refuses further writes.
    #[error("the engine stopped after an earlier background error: {0}")]
    Poisoned(String),
    /// A write refused while the frozen layers waiting for their flush are
    /// at `Options::frozen_layers_max` and the flush keeps failing (a full
    /// disk, say): nothing was written. The background thread retries the
    /// flush; writes go through again once it succeeds.
    #[error("write refused: {frozen} frozen layers wait for a flush that fails: {error}")]
    FlushBacklog { frozen: usize, error: String },
    /// A write refused while the L0 layers are at `Options::l0_stop_layers`
    /// and their compaction keeps failing: nothing was written. The
    /// background thread retries the compaction; writes go through again
    /// once it succeeds.
    #[error("write refused: {l0} L0 layers wait for a compaction that fails: {error}")]
    CompactionBacklog { l0: usize, error: String },
    /// A get of a read queue cancelled before it completed
    /// (`ReadQueue::cancel`).
    #[error("the read was cancelled")]
    Cancelled,
    /// The database is closed or closing.
    #[error("the database is closed")]
    Closed,
    /// An internal invariant broke (keys or LSNs out of order inside the
    /// engine, a file id reused): a bug in strata, never the caller's
    /// input. Nothing it would have corrupted was written.
    #[error("internal invariant broken (a bug in strata): {0}")]
    Internal(String),
    /// A read at an LSN whose history was collected (see `Db::horizon`).
    #[error("LSN {lsn} is below the history horizon {horizon}: its versions were collected")]
    BelowHorizon { lsn: u64, horizon: u64 },
    /// A write whose batch was applied at `lsn` (readers of this process see
    /// it) but could not be made durable as asked: it may or may not be found
    /// after a restart. The database refuses further writes. To learn the
    /// outcome, reopen the database: the batch survived if `last_lsn() >=
    /// lsn` (then do not write it again). Every other error of `write`
    /// means the batch was not applied.
    #[error("the batch at LSN {lsn} was applied but may not be durable: {source}")]
    NotDurable {
        lsn: u64,
        #[source]
        source: Box<Error>,
    },
    /// This writer's generation is no longer the newest in the remote
    /// store: another writer opened the database after it. It stops
    /// writing there (nothing of the newer writer's is touched).
    #[error("remote store {store}: generation {generation} was fenced by generation {newer}: another writer opened this database")]
    Fenced {
        store: String,
        generation: u64,
        newer: u64,
    },
    /// A write, flush or compaction asked of a read-only follower of a
    /// remote store (`Options::remote_follower`): only the store's writer
    /// writes. Nothing was written.
    #[error("{} follows the remote store {store} read-only: its writer writes", dir.display())]
    ReadOnly { dir: PathBuf, store: String },
    /// A call to the remote store (`remote::RemoteStore`) failed: `store`
    /// names the store (its URL), `op` the call, `key` the object.
    #[error("remote store {store}: {op} {key}: {kind}")]
    Remote {
        store: String,
        op: &'static str,
        key: String,
        kind: RemoteErrorKind,
    },
}

/// What went wrong in a call to the remote store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteErrorKind {
    /// No object under the key.
    #[error("no such object")]
    NotFound,
    /// A create-only put found an object already there (another writer's,
    /// or this one's whose answer was lost): nothing was written.
    #[error("an object is already there")]
    AlreadyExists,
    /// A call the store refuses as asked (a key strata does not use, a
    /// range past the object's end): nothing was done.
    #[error("{0}")]
    Invalid(String),
    /// The server could not be reached or answered with an error (after
    /// the client's retries): the call may or may not have taken effect.
    #[error("{0}")]
    Transport(String),
}

impl Error {
    /// An I/O error on a named file.
    #[cold]
    pub fn io(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            op,
            source,
        }
    }

    /// True when the error says the bytes on disk are bad.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption(_))
    }
}
