//! strata: an embedded, versioned key-value storage engine whose write path
//! is built for direct I/O.
//!
//! See DESIGN.md for the architecture. The public API is re-exported here;
//! everything else is crate-private.

pub mod error;
pub mod io;

pub use error::{Corruption, Error, InvalidInput, Result};
pub use io::{IoEngine, IoMode};
