//! strata: an embedded, versioned key-value storage engine whose write path
//! is built for direct I/O.
//!
//! Writes go to an open in-memory layer whose log file is the write-ahead
//! log; frozen layers are flushed to sorted L0 delta layer files; every
//! version stays readable at its LSN. See DESIGN.md for the architecture and
//! docs/format.md for the bytes on disk. The public API is re-exported here;
//! everything else is crate-private.

mod batch;
mod cache;
mod codec;
mod compaction;
mod crc;
mod db;
pub mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod inspect;
pub mod io;
mod keyspace;
mod layer;
mod log;
mod manifest;
mod options;
mod pacer;
mod prefetch;
mod read;
pub mod remote;
mod table_cache;
mod types;
mod value;
mod version;

pub use batch::WriteBatch;
pub use db::{Db, ReadCompletion, ReadQueue, Reaped, RemoteStats, Snapshot, Stats};
pub use error::{Corruption, Error, InvalidInput, RemoteErrorKind, Result};
pub use io::{IoEngine, IoMode};
pub use options::{
    Options, WriteOptions, BATCH_BYTES_MAX, BLOCK_CACHE_BYTES_DEFAULT,
    INDEX_MEMORY_BYTES_MAX_DEFAULT, KEY_BYTES_MAX, LAYER_BYTES_MAX, LAYER_BYTES_MIN,
    REMOTE_DELETION_DELAY_DEFAULT, REMOTE_FOLLOW_INTERVAL_DEFAULT, VALUE_BYTES_MAX_DEFAULT,
    VALUE_BYTES_MAX_LIMIT,
};
pub use read::Scan;

pub use types::Lsn;

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
