//! The log of an in-memory layer: the write-ahead log.
//!
//! `record` owns the byte layout of the log file header and of each record;
//! `replay` reads a log file back at open. The in-memory layer appends
//! records through a `BufferedWriter`; nothing else writes log files.

pub(crate) mod record;
pub(crate) mod replay;
