//! The engine API the C layer calls, in one place: `Db`, `Options`,
//! `WriteBatch`, `WriteOptions`, `ReadQueue` from `strata`.

pub use strata::{Db, Options, ReadQueue, WriteBatch, WriteOptions};
