//! The engine API the C layer calls, in one place: `Db`, `Options`,
//! `WriteBatch`, `WriteOptions` from `strata`.

pub use strata::{Db, Options, WriteBatch, WriteOptions};
